"""The runtime figure draws what the runtime table reports: one value per (seed, BO step)."""

from __future__ import annotations

from colorsys import rgb_to_hls

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb

from orthobench.report import figures
from orthobench.report.tables import runtime_table

Q = 4


def _q4_runs(one_row_step: bool) -> pd.DataFrame:
    """One q = 4 cell per seed after a 2-point design: every row of a step carries the step's fit
    and acquisition seconds, its evaluations their own. With ``one_row_step``, seed 1's second
    step is one asynchronous ask (one row), so steps differ in size as well.

    Per step (seed 0: steps 1, 2; seed 1: steps 1, 2): fit 1, 3, 2, 6 (mean 3, sd sqrt(14/3)),
    acquisition half of it, mean evaluation 2.5, 1, 3, 0.5. Per row the fit would be 30/13.
    """
    steps = [  # (seed, batch, fit, evaluation seconds of its rows)
        (0, 1, 1.0, [1.0, 2.0, 3.0, 4.0]),
        (0, 2, 3.0, [1.0] * Q),
        (1, 1, 2.0, [2.0, 2.0, 2.0, 6.0]),
        (1, 2, 6.0, [0.5] * (1 if one_row_step else Q)),
    ]
    rows = []
    for seed in (0, 1):
        rows += [
            {"seed": seed, "phase": "init", "batch": 0, "fit": 0.0, "eval": 9.0} for _ in range(2)
        ]
    for seed, batch, fit, evals in steps:
        rows += [
            {"seed": seed, "phase": "bo", "batch": batch, "fit": fit, "eval": e} for e in evals
        ]
    frame = pd.DataFrame(rows)
    frame["iteration"] = frame.groupby("seed").cumcount()
    return pd.DataFrame(
        {
            "run_set": "s",
            "task": "t",
            "optimizer": "orthobo (q=4)",
            "series": "orthobo (q=4)",
            "q": Q,
            "seed": frame["seed"],
            "iteration": frame["iteration"],
            "phase": frame["phase"],
            "batch": frame["batch"],
            "fit_seconds": frame["fit"],
            "acq_seconds": frame["fit"] / 2,
            "eval_seconds": frame["eval"],
        }
    )


def _drawn(monkeypatch: pytest.MonkeyPatch, runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Bar heights and error-bar ends (``bars x 2``) of the runtime figure, left to right."""
    drawn: list[plt.Figure] = []
    svg = figures._svg

    def keep(fig: plt.Figure) -> str:
        ax = fig.axes[0]
        # seaborn adds a zero-size patch per series as the legend's handle
        bars = sorted((p for p in ax.patches if p.get_width() > 0), key=lambda p: p.get_x())
        lines = sorted(ax.lines, key=lambda line: np.mean(line.get_xdata()))
        drawn.append(
            (
                np.array([p.get_height() for p in bars]),
                np.array([sorted(line.get_ydata()) for line in lines]),
            )
        )
        return svg(fig)

    monkeypatch.setattr(figures, "_svg", keep)
    assert figures.runtime_svg(runs, figures.palette(["orthobo (q=4)"])).startswith("<svg")
    return drawn[0]


@pytest.mark.parametrize("one_row_step", [False, True])
def test_the_runtime_figure_shows_the_tables_per_step_mean_and_sd(
    monkeypatch: pytest.MonkeyPatch, one_row_step: bool
) -> None:
    """Bars are the table's mean per BO step (fit 3; per row it would be 30/13 with the one-row
    step) and the error bars its sd over steps and seeds (sqrt(14/3), not over 16 or 13 rows),
    for fit, acquisition and evaluation."""
    runs = _q4_runs(one_row_step)
    table = runtime_table(runs).iloc[0]
    assert table["steps"] == 4 and table["fit_mean"] == pytest.approx(3.0)
    heights, ends = _drawn(monkeypatch, runs)
    parts = ["fit", "acq", "eval"]
    means = np.array([table[f"{p}_mean"] for p in parts])
    sds = np.array([table[f"{p}_sd"] for p in parts])
    np.testing.assert_allclose(heights, means)
    np.testing.assert_allclose(ends, np.stack([means - sds, means + sds], axis=-1))


def _two_panel_runs() -> pd.DataFrame:
    """Task ``a`` run by run set ``x`` (two optimizers), task ``b`` by run set ``y`` only: the
    last panel draws one series of the three."""
    frames = []
    for run_set, task, optimizer in (("x", "a", "sobol"), ("x", "a", "qlogei"), ("y", "b", "ucb")):
        frame = _q4_runs(one_row_step=False)
        label = f"{run_set}: {optimizer}"
        frames.append(frame.assign(run_set=run_set, task=task, optimizer=optimizer, series=label))
    return pd.concat(frames, ignore_index=True)


def test_the_runtime_legend_lists_the_series_of_every_panel_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A multi-folder report: the legend named only the last panel's series (``y: ucb``) while
    the first panel drew bars of ``x: sobol`` and ``x: qlogei``. Each series is listed once, in
    the colour of its bars, whose hue is the palette's."""
    runs = _two_panel_runs()
    labels = ["x: sobol", "x: qlogei", "y: ucb"]
    colors = figures.palette(labels)
    drawn: list[plt.Figure] = []
    svg = figures._svg

    def keep(fig: plt.Figure) -> str:
        drawn.append(fig)
        return svg(fig)

    monkeypatch.setattr(figures, "_svg", keep)
    text = figures.runtime_svg(runs, colors)
    (fig,) = drawn
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + fig.legends
    assert len(legends) == 1
    legend = legends[0]
    listed = [t.get_text() for t in legend.get_texts()]
    assert sorted(listed) == sorted(labels)
    for label in labels:
        assert f"{label}</text>" in text  # drawn in the SVG, not just kept in the figure object
    swatch = {
        t.get_text(): to_rgb(h.get_facecolor())
        for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
    }
    for label, rgb in swatch.items():
        assert rgb_to_hls(*rgb)[0] == pytest.approx(rgb_to_hls(*colors[label])[0], abs=1e-6)
    assert len(set(swatch.values())) == len(labels)
    bar_colors = {
        to_rgb(p.get_facecolor()) for ax in fig.axes for p in ax.patches if p.get_width() > 0
    }
    assert bar_colors == set(swatch.values())  # every bar's colour is listed, and only those


def test_seconds_spanning_decades_are_drawn_on_a_log_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1e-4 s acquisition beside a 3 s fit was a bar too thin to see on a linear axis; steps
    with a 0 s part (a design without a fit) have no bar there and do not prevent the log axis."""
    runs = _q4_runs(one_row_step=False)
    runs["acq_seconds"] = runs["fit_seconds"] * 1e-4
    drawn: list[plt.Figure] = []
    svg = figures._svg
    monkeypatch.setattr(figures, "_svg", lambda fig: drawn.append(fig) or svg(fig))
    text = figures.runtime_svg(runs, figures.palette(["orthobo (q=4)"]))
    assert drawn[0].axes[0].get_yscale() == "log"
    assert "mathdefault" not in text
