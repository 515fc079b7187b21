"""Seaborn figures rendered to inline SVG strings, so a report is one self-contained file.

Every figure is drawn inside a local seaborn/matplotlib style context (no global state is
changed) and saved without a date, so the same results give the same SVG. Colours come from one
``palette`` (series label -> colour) that the caller builds once, so an optimizer has the same
colour in every figure. Intervals are the ones of the tables (:mod:`orthobench.report.stats`,
:func:`orthobench.probe.tables.summary_table`), never seaborn's own bootstrap.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import io
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")  # headless: reports are built on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FuncFormatter,
    LogFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
)

from orthobench.report import stats, tables  # noqa: E402

Palette = Mapping[str, tuple[float, float, float]]
#: A log axis is used when the plotted positive values span more than this factor.
LOG_RANGE = 30.0


def palette(labels: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """One colour per label (``tab10``, or ``husl`` for more than 10 labels)."""
    labels = list(dict.fromkeys(labels))
    colors = sns.color_palette("tab10" if len(labels) <= 10 else "husl", max(len(labels), 1))
    return dict(zip(labels, colors, strict=False))


@contextmanager
def _style(salt: str) -> Iterator[None]:
    # Labels are names and directories a user chose: "$" in one is text, not mathtext (a
    # directory named a$\frac$ failed the report with matplotlib's parse error).
    rc = {"svg.fonttype": "none", "svg.hashsalt": salt, "figure.dpi": 96, "text.parse_math": False}
    with sns.axes_style("whitegrid"), sns.plotting_context("paper"), plt.rc_context(rc):
        yield


def _svg(fig: plt.Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return _unique_ids(text[text.index("<svg") :])  # no XML prolog, so the SVG can be inlined


#: A start or end tag: matplotlib escapes ``<`` and ``>`` in attribute values and text.
_TAG = re.compile(r"<[^<>]*>")
_ID_ATTRIBUTE = re.compile(r'(\sid=")([^"]+)(")')
#: A reference to an id: ``url(#id)`` (clip paths, hatches) or ``href="#id"`` (``xlink:href``).
_REFERENCE = re.compile(r'(url\(#)([^)]+)(\))|(href="#)([^"]+)(")')


#: The id prefix :func:`_unique_ids` gives a figure.
_PREFIX = re.compile(r'id="(f[0-9a-f]{10}-)')


def _unique_ids(svg: str) -> str:
    """``svg`` with every id, and every reference to it, prefixed by a hash of ``svg``.

    matplotlib numbers ids per figure (``axes_1``, ``line2d_1``), so the figures of one page
    would repeat them, and HTML ids must be unique in a document. A hash keeps the same figure's
    SVG the same (a counter would depend on what was drawn before); only two identical figures
    in one page would still share ids.
    """
    prefix = f"f{hashlib.sha256(svg.encode()).hexdigest()[:10]}-"
    ids = {m.group(2) for tag in _TAG.findall(svg) for m in _ID_ATTRIBUTE.finditer(tag)}

    def reference(m: re.Match[str]) -> str:
        start, name, end = m.group(1, 2, 3) if m.group(1) else m.group(4, 5, 6)
        return f"{start}{prefix}{name}{end}" if name in ids else m.group(0)

    def tag(m: re.Match[str]) -> str:
        text = _ID_ATTRIBUTE.sub(lambda a: f"{a.group(1)}{prefix}{a.group(2)}{a.group(3)}",
                                 m.group(0))  # fmt: skip
        return _REFERENCE.sub(reference, text)

    return _TAG.sub(tag, svg)


def unique_in_page(svg: str, seen: collections.Counter[str]) -> str:
    """``svg`` (from :func:`_unique_ids`) with its id prefix made unique in a page where the
    same figure was drawn before (``seen`` counts the prefixes already placed): two directories
    of identical probe results draw identical figures, whose shared ids (clip paths referenced
    by ``url(#...)``) the browser resolves to the first."""
    match = _PREFIX.search(svg)
    if match is None:
        return svg
    prefix = match.group(1)
    seen[prefix] += 1
    return svg if seen[prefix] == 1 else svg.replace(prefix, f"{prefix}{seen[prefix]}-")


def _needs_log(values: np.ndarray) -> bool:
    values = values[np.isfinite(values)]
    return values.size > 0 and values.min() > 0 and values.max() / values.min() > LOG_RANGE


class _PlainLogFormatter(LogFormatter):
    """Matplotlib's choice of the log ticks to label, each label a plain number (``0.6``, ``1``,
    ``1e+04``): its default labels are mathtext (``$\\mathdefault{10^{0}}$``), which a report's
    figures print as text (:func:`_style`)."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g}"


def _log_y(ax: plt.Axes) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_PlainLogFormatter())
    ax.yaxis.set_minor_formatter(_PlainLogFormatter())


#: The most estimators whose interval bands :func:`ratio_vs_s_svg` draws.
MAX_BANDS = 5
_RATIO_NAMES = {"mse_ratio": "MSE ratio", "var_ratio": "variance ratio"}
#: A probe ratio axis shows at most this range; estimates beyond it are marked at its edge.
RATIO_LIMITS = (1e-3, 1e3)


def _ratio_axis(ax: plt.Axes, values: np.ndarray, axis: str) -> tuple[float, float] | None:
    """Log axis spanning the point ``values`` within :data:`RATIO_LIMITS` (intervals may run
    off it); a value beyond is drawn as a triangle at the edge, labelled with the value."""
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return None
    low = max(min(values.min(), 1.0) / 2, RATIO_LIMITS[0])
    high = min(max(values.max(), 1.0) * 2, RATIO_LIMITS[1])
    (ax.set_xlim if axis == "x" else ax.set_ylim)(low, high)
    scale = ax.xaxis if axis == "x" else ax.yaxis
    scale.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    scale.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    scale.set_minor_formatter(NullFormatter())
    return low, high


def _mark_off_scale(ax: plt.Axes, value: float, position: float, limits, axis: str, color) -> None:
    """Draw ``value`` (outside ``limits``) as a triangle at the axis edge with its value."""
    edge = limits[1] if value > limits[1] else limits[0]
    up = value > limits[1]
    if axis == "x":
        xy, marker, offset = (edge, position), ">" if up else "<", (-4 if up else 4, 4)
    else:
        xy, marker, offset = (position, edge), "^" if up else "v", (4, -8 if up else 4)
    ax.plot(*xy, marker=marker, color=color, ms=5, clip_on=False)
    ax.annotate(
        stats.sig(value), xy, xytext=offset, textcoords="offset points", fontsize="xx-small",
        ha="right" if axis == "x" and up else "left", color=color,
    )  # fmt: skip


def _legend_outside(
    ax: plt.Axes, title: str | None = None, handles: Mapping[str, Artist] | None = None
) -> None:
    """A legend right of ``ax``: of ``handles`` (label -> handle), else of ``ax``'s artists."""
    if handles is None:
        artists, labels = ax.get_legend_handles_labels()
    else:
        labels, artists = list(handles), list(handles.values())
    if artists:
        ax.legend(artists, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                  title=title)  # fmt: skip


def _curve_label(metric: str) -> str:
    return "best-so-far regret" if metric == "regret" else "best-so-far objective"


def _mean_band(ax: plt.Axes, curve: pd.DataFrame, x: str, colors: Palette) -> None:
    """Each ``series``' mean curve against ``x`` with its t band, as :func:`tables.curves`
    computed them (``mean``, ``low``, ``high``; no band where ``low`` is NaN, as with one seed).

    Drawn from the precomputed table rather than by ``sns.lineplot``, whose per-point callback
    took most of a report's time on wall-seconds axes (a point per seed and evaluation).
    """
    for name, rows in curve.groupby("series", sort=False):
        rows = rows.sort_values(x, kind="stable")
        ax.plot(rows[x], rows["mean"], color=colors[name], label=name)
        ax.fill_between(rows[x], rows["low"], rows["high"], color=colors[name], alpha=0.2, lw=0)


#: The x label of each axis of :func:`step_curves_svg`.
_STEP_AXES = {"batch": "BO steps (0: initial design)", "wall_seconds": "wall seconds of the cell"}


def step_curves_svg(
    views: Mapping[str, pd.DataFrame],
    curves: Mapping[str, pd.DataFrame],
    colors: Palette,
    title: str,
) -> str:
    """Best-so-far value per BO step and/or against wall seconds: mean and t band over seeds.

    ``views`` maps an axis (``batch``, ``wall_seconds``; a panel each, in the given order) to one
    task's rows of :func:`orthobench.report.tables.traces` along it, ``curves`` the same axes to
    their :func:`orthobench.report.tables.curves`, each with a ``series`` column (the legend
    label).
    """
    frames = list(views.values())
    with _style(f"{title}-steps"):
        fig, axes = plt.subplots(
            1, len(views), figsize=(4.5 * len(views), 3.2), sharey=True, squeeze=False
        )
        for ax, x in zip(axes[0], views, strict=True):
            _mean_band(ax, curves[x], x, colors)
            ax.set_xlabel(_STEP_AXES[x])
            if x == "batch":
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if _needs_log(np.concatenate([f["value"].to_numpy(dtype=float) for f in frames])):
            _log_y(axes[0][0])
        axes[0][0].set_ylabel(_curve_label(frames[0]["metric"].iloc[0]))
        axes[0][0].set_title(title, loc="left")
        _legend_outside(axes[0][-1])
        return _svg(fig)


def task_curves_svg(trace: pd.DataFrame, curve: pd.DataFrame, colors: Palette, title: str) -> str:
    """Best-so-far value vs evaluations and vs cumulative seconds: mean and t band over seeds.

    ``trace`` holds one task's rows of :func:`orthobench.report.tables.traces`, ``curve`` their
    :func:`orthobench.report.tables.curves`, each with a ``series`` column (the legend label). A
    dashed line marks the end of each initial design; ``x`` marks the mean curve at evaluations
    where some seed's evaluation was an outlier.
    """
    label = _curve_label(trace["metric"].iloc[0])
    with _style(title):
        fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.2), sharey=True)
        for ax, x, xlabel in (
            (left, "evaluation", "evaluations"),
            (right, "seconds", "cumulative seconds (mean over seeds)"),
        ):
            _mean_band(ax, curve, x, colors)
            ax.set_xlabel(xlabel)
        left.xaxis.set_major_locator(MaxNLocator(integer=True))
        for n_init in sorted(trace["n_init"].unique()):
            left.axvline(n_init, color="0.4", lw=0.8, ls="--")
            left.annotate(
                f"initial design ({n_init})",
                (n_init, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(2, -2),
                textcoords="offset points",
                fontsize="x-small",
                va="top",
                color="0.3",
            )
        outliers = trace[trace["is_outlier"]]
        if not outliers.empty:
            means = curve.set_index(["series", "evaluation"])["mean"]
            points = outliers[["series", "evaluation"]].drop_duplicates()
            marks = left.scatter(
                points["evaluation"],
                means.reindex(pd.MultiIndex.from_frame(points)).to_numpy(),
                marker="x",
                s=18,
                c=[colors[s] for s in points["series"]],
                zorder=3,
            )
            left.legend([marks], ["outlier evaluation"], loc="upper right", fontsize="x-small",
                        frameon=False)  # fmt: skip
        if _needs_log(trace["value"].to_numpy(dtype=float)):
            _log_y(left)
        left.set_ylabel(label)
        left.set_title(title, loc="left")
        _legend_outside(right)
        return _svg(fig)


def ecdf_svg(table: pd.DataFrame, colors: Palette) -> str:
    """Share of (task, seed, target) triples reached vs evaluations, one step curve per series."""
    with _style("ecdf"):
        fig, ax = plt.subplots(figsize=(6.0, 3.2))
        sns.lineplot(
            data=table,
            x="evaluation",
            y="reached",
            hue="series",
            palette=colors,
            drawstyle="steps-post",
            errorbar=None,
            ax=ax,
        )
        ax.set_ylim(0, 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("evaluations")
        ax.set_ylabel("share of (task, seed, target) reached")
        _legend_outside(ax)
        return _svg(fig)


def score_heatmap_svg(scores: pd.DataFrame) -> str:
    """Normalized score (percent) per task (rows) and series (columns), annotated."""
    grid = scores.pivot(index="task", columns="series", values="score")
    with _style("scores"):
        fig, ax = plt.subplots(figsize=(1.1 * grid.shape[1] + 2.0, 0.45 * grid.shape[0] + 1.2))
        with (
            warnings.catch_warnings()
        ):  # seaborn 0.13 calls a colormap method matplotlib deprecates
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            sns.heatmap(
                grid,
                annot=grid.round(1) + 0.0,  # + 0.0: a score rounding to -0.0 prints 0.0
                fmt=".1f",
                cmap="vlag_r",
                center=0.0,
                cbar_kws={"label": "score (%)"},
                ax=ax,
            )
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(axis="x", rotation=30)
        return _svg(fig)


def runtime_svg(runs: pd.DataFrame, colors: Palette) -> str:
    """Seconds per BO step by part (fit, acquisition, evaluation), a panel per task: mean and sd
    over the steps of :func:`orthobench.report.tables.step_seconds`, as the runtime table
    (:func:`~orthobench.report.tables.runtime_table`).

    ``runs`` holds result rows with a ``series`` column (the legend label, one per key).
    """
    # One value per (seed, step), not per row: a step's q rows would weight it q times over.
    labels = runs[[*tables.KEY, "series"]].drop_duplicates()
    steps = tables.step_seconds(runs).merge(labels, on=tables.KEY, validate="many_to_one")
    long = steps.melt(
        id_vars=["task", "series"],
        value_vars=["fit", "acq", "eval"],
        var_name="part",
        value_name="seconds",
    )
    tasks = sorted(long["task"].unique())
    with _style("runtime"):
        fig, axes = plt.subplots(
            1, len(tasks), figsize=(3.6 * len(tasks) + 1.0, 2.6), sharey=True, squeeze=False
        )
        for ax, task in zip(axes[0], tasks, strict=True):
            sns.barplot(
                data=long[long["task"] == task],
                x="part",
                y="seconds",
                hue="series",
                palette=colors,
                errorbar="sd",
                ax=ax,
            )
            ax.set_title(task, loc="left")
            ax.set_xlabel("")
        # A panel's legend has only its own series (a task run by some run sets): one legend
        # gathers every panel's, with the handles seaborn drew in the bars' colours.
        handles: dict[str, Artist] = {}
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(label, handle)
            if ax.get_legend() is not None:
                ax.get_legend().remove()
        order = [s for s in long["series"].unique() if s in handles]
        seconds = long["seconds"].to_numpy(dtype=float)
        if _needs_log(seconds[seconds > 0]):  # sobol's 1e-4 s beside a fit's 1 s; 0: no bar
            _log_y(axes[0][0])
        axes[0][0].set_ylabel("seconds per BO step")
        _legend_outside(axes[0][-1], handles={s: handles[s] for s in order})
        return _svg(fig)


def ensemble_svg(steps: pd.DataFrame) -> str:
    """Ensemble weight of each kernel vs evaluation (mean and t band over seeds), and entropy.

    One row of panels per (task, series) of an ensemble (more than one kernel).
    """
    panels = sorted(steps[["task", "series"]].drop_duplicates().itertuples(index=False))
    kernel_colors = palette(sorted(steps["kernel"].unique()))
    with _style("ensemble"):
        fig, axes = plt.subplots(
            len(panels), 2, figsize=(8.5, 2.4 * len(panels)), squeeze=False, sharex="row"
        )
        for (task, series), (weights_ax, entropy_ax) in zip(panels, axes, strict=True):
            data = steps[(steps["task"] == task) & (steps["series"] == series)]
            sns.lineplot(
                data=data,
                x="evaluation",
                y="weight",
                hue="kernel",
                palette=kernel_colors,
                errorbar=functools.partial(stats.t_interval, bounds=(0.0, 1.0)),
                ax=weights_ax,
            )
            entropy = data.drop_duplicates(["seed", "evaluation"])
            sns.lineplot(
                data=entropy,
                x="evaluation",
                y="entropy",
                errorbar=functools.partial(stats.t_interval, bounds=(0.0, np.inf)),
                color="0.2",
                ax=entropy_ax,
            )
            entropy_ax.axhline(entropy["max_entropy"].max(), color="0.5", ls="--", lw=0.8)
            weights_ax.set_ylim(0, 1)
            weights_ax.set_title(f"{task}: {series}", loc="left")
            entropy_ax.set_ylabel("entropy (nats; dashed: log M)")
            for ax in (weights_ax, entropy_ax):
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            _legend_outside(weights_ax)
        return _svg(fig)


def _cells(table: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted(table[["task", "kernel"]].drop_duplicates().itertuples(index=False, name=None))


def probe_ratio_svg(table: pd.DataFrame, column: str = "mse_ratio", ncols: int = 3) -> str:
    """Small multiples of a probe ratio: one panel per (task, kernel), estimators on a shared
    vertical axis, one marker per S with its interval
    (:func:`~orthobench.probe.tables.summary_table`).
    """
    data = table[table["estimator"] != table["baseline"]]
    estimators = list(dict.fromkeys(data["estimator"]))
    budgets = sorted(data["mc_samples"].unique())
    colors = dict(zip(budgets, sns.color_palette("crest", len(budgets)), strict=True))
    cells = _cells(data)
    ncols = min(ncols, len(cells))
    nrows = -(-len(cells) // ncols)
    height = 0.26 * len(estimators) + 1.0
    offsets = np.linspace(-0.25, 0.25, len(budgets)) if len(budgets) > 1 else np.zeros(1)
    with _style(column):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(3.3 * ncols + 1.6, height * nrows), sharey=True, squeeze=False
        )
        for ax, (task, kernel) in zip(axes.flat, cells, strict=False):
            cell = data[(data["task"] == task) & (data["kernel"] == kernel)]
            for offset, s in zip(offsets, budgets, strict=True):
                rows = cell[cell["mc_samples"] == s].set_index("estimator").reindex(estimators)
                mid = rows[column].to_numpy(dtype=float)
                low = rows[f"{column}_low"].to_numpy(dtype=float)
                high = rows[f"{column}_high"].to_numpy(dtype=float)
                y = np.arange(len(estimators)) + offset
                err = np.vstack([mid - low, high - mid])
                ax.errorbar(
                    mid,
                    y,
                    xerr=np.where(np.isfinite(err), err, 0.0),
                    fmt="o",
                    ms=3,
                    lw=0.8,
                    capsize=1.5,
                    color=colors[s],
                    label=f"S = {s}",
                )
            ax.axvline(1.0, color="0.4", lw=0.8, ls="--")
            ax.set_xscale("log")
            limits = _ratio_axis(ax, cell[column].to_numpy(dtype=float), "x")
            for r in cell.itertuples():
                if limits and not limits[0] <= getattr(r, column) <= limits[1]:
                    y = estimators.index(r.estimator) + offsets[budgets.index(r.mc_samples)]
                    _mark_off_scale(ax, getattr(r, column), y, limits, "x", colors[r.mc_samples])
            ax.set_title(f"{task} / {kernel}", loc="left", fontsize="small")
            ax.set_yticks(np.arange(len(estimators)), estimators)
            ax.set_ylim(len(estimators) - 0.5, -0.5)
        for ax in axes.flat[len(cells) :]:
            ax.set_visible(False)
        for ax in axes[-1]:
            ax.set_xlabel(f"{_RATIO_NAMES[column]} vs naive MC (> 1 better)")
        _legend_outside(axes[0][-1] if len(cells) >= ncols else axes.flat[len(cells) - 1])
        return _svg(fig)


def ratio_vs_s_svg(table: pd.DataFrame, column: str = "var_ratio", ncols: int = 3) -> str:
    """A probe ratio vs the budget S, one line per estimator, one panel per (task, kernel).

    Interval bands are drawn for up to :data:`MAX_BANDS` estimators (beyond, they would hide each
    other; the table has them).
    """
    data = table[table["estimator"] != table["baseline"]]
    estimators = list(dict.fromkeys(data["estimator"]))
    budgets = sorted(data["mc_samples"].unique())
    colors = palette(estimators)
    cells = _cells(data)
    ncols = min(ncols, len(cells))
    nrows = -(-len(cells) // ncols)
    with _style(f"{column}-vs-s"):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(3.3 * ncols + 2.0, 2.6 * nrows), sharex=True, squeeze=False
        )
        for ax, (task, kernel) in zip(axes.flat, cells, strict=False):
            cell = data[(data["task"] == task) & (data["kernel"] == kernel)]
            for name in estimators:
                rows = cell[cell["estimator"] == name].sort_values("mc_samples")
                ax.plot(
                    rows["mc_samples"], rows[column], marker="o", ms=3, lw=1, color=colors[name],
                    label=name,
                )  # fmt: skip
                if len(estimators) <= MAX_BANDS:
                    ax.fill_between(
                        rows["mc_samples"],
                        rows[f"{column}_low"],
                        rows[f"{column}_high"],
                        color=colors[name],
                        alpha=0.12,
                        lw=0,
                    )
            ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
            ax.set_xscale("log", base=2)
            ax.set_xticks(budgets, [str(b) for b in budgets])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_yscale("log")
            limits = _ratio_axis(ax, cell[column].to_numpy(dtype=float), "y")
            for r in cell.itertuples():
                if limits and not limits[0] <= getattr(r, column) <= limits[1]:
                    _mark_off_scale(ax, getattr(r, column), r.mc_samples, limits, "y",
                                    colors[r.estimator])  # fmt: skip
            ax.set_title(f"{task} / {kernel}", loc="left", fontsize="small")
        for ax in axes.flat[len(cells) :]:
            ax.set_visible(False)
        for ax in axes[-1]:
            ax.set_xlabel("S (EI evaluations)")
        for ax in axes[:, 0]:
            ax.set_ylabel(f"{_RATIO_NAMES[column]} vs naive MC")
        _legend_outside(axes[0][-1] if len(cells) >= ncols else axes.flat[len(cells) - 1])
        return _svg(fig)
