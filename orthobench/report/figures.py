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
