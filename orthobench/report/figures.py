"""Matplotlib figures rendered to inline SVG strings (so reports stay self-contained)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # headless: reports are built on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def _svg(fig: plt.Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog so the SVG can be inlined


def regret_curve_svg(curves: pd.DataFrame, task: str) -> str:
    """Best-so-far curve (mean and 95% band over seeds) of every optimizer on one task."""
    data = curves[curves["task"] == task]
    metric = data["metric"].iloc[0]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for optimizer, group in data.groupby("optimizer", sort=True):
        ax.plot(
            group["iteration"], group["mean"], label=f"{optimizer} (n={int(group['n'].iloc[0])})"
        )
        ax.fill_between(group["iteration"], group["low"], group["high"], alpha=0.2)
    if metric == "regret" and (data["low"] > 0).all():
        ax.set_yscale("log")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("best-so-far regret" if metric == "regret" else "best-so-far objective")
    ax.set_title(task)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _svg(fig)


def ratio_svg(table: pd.DataFrame, task: str, column: str = "var_ratio") -> str:
    """Variance (or MSE) ratio vs naive MC with its bootstrap CI, per estimator and S, one task."""
    data = table[(table["task"] == task) & (table["estimator"] != table["baseline"])]
    labels = [f"{r.kernel} S={r.mc_samples} {r.estimator}" for r in data.itertuples()]
    fig, ax = plt.subplots(figsize=(6.4, 0.28 * len(labels) + 1.2))
    y = range(len(labels))
    mid = data[column].to_numpy()
    low, high = data[f"{column}_low"].to_numpy(), data[f"{column}_high"].to_numpy()
    ax.errorbar(mid, y, xerr=[mid - low, high - mid], fmt="o", ms=3, capsize=2)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yticks(list(y), labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(f"{column.replace('_', ' ')} vs naive MC (> 1: better), 95% bootstrap CI")
    ax.set_title(task)
    ax.grid(alpha=0.3, axis="x")
    return _svg(fig)
