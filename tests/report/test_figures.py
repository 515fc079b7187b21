"""Figures: self-contained SVG, and probe ratio axes that a single state cannot blow up."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from orthobench.probe.tables import summary_table
from orthobench.report import figures, tables
from orthobench.report.figures import RATIO_LIMITS, probe_ratio_svg, ratio_vs_s_svg


def _probe_rows() -> pd.DataFrame:
    rows = []
    for s in (8, 32):
        for name, ratios in (("mc", [1.0, 1.0]), ("qlogei", [0.0375, 5.14e9]), ("e", [2.0, 8.0])):
            for seed, ratio in enumerate(ratios):
                rows.append(
                    {"suite": "s", "task": "t", "kernel": "k", "mc_samples": s, "estimator": name,
                     "n_evaluations": s, "seed": seed, "baseline": "mc", "var_ratio": ratio,
                     "var_ratio_low": ratio / 2, "var_ratio_high": ratio * 2, "mse_ratio": ratio,
                     "mse_ratio_low": ratio / 2, "mse_ratio_high": ratio * 2}
                )  # fmt: skip
    return pd.DataFrame(rows)


def _tick_values(svg: str) -> list[float]:
    """Numbers printed as text in the SVG (tick labels and annotations)."""
    return [
        float(t) for t in re.findall(r">\s*([-+]?[0-9][0-9.]*(?:e[-+]?[0-9]+)?)\s*</text>", svg)
    ]


def test_a_heavy_tailed_state_does_not_stretch_the_ratio_axes():
    """The reported plot ran to 1e30 because of one state; the axis now stays within
    RATIO_LIMITS and the off-scale estimate (geometric mean 1.39e4) is printed at the edge."""
    table = summary_table(_probe_rows())
    for svg in (probe_ratio_svg(table, "mse_ratio"), ratio_vs_s_svg(table, "var_ratio")):
        assert svg.startswith("<svg")
        values = _tick_values(svg)
        assert 1.39e4 in values  # the off-scale label
        assert max(v for v in values if v != 1.39e4) <= RATIO_LIMITS[1]


def test_the_mean_curves_and_bands_are_those_of_the_curves_table():
    """Each series' line is the CSV's mean in axis order and its band spans [low, high]; a point
    of one seed (seed 1 of ``b`` stops after evaluation 2) has no band."""
    trace = pd.DataFrame(
        {"run_set": "s", "task": "t", "optimizer": ["a"] * 6 + ["b"] * 5, "metric": "regret",
         "seed": [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1], "evaluation": [3, 1, 2, 3, 1, 2, 1, 2, 3, 1, 2],
         "value": [0.5, 2.0, 1.0, 0.7, 3.0, 1.5, 4.0, 2.0, 1.0, 5.0, 3.0], "seconds": 1.0}
    )  # fmt: skip
    curve = tables.curves(trace).assign(series=lambda c: c["optimizer"])
    colors = figures.palette(["a", "b"])
    fig, ax = plt.subplots()
    try:
        figures._mean_band(ax, curve, "evaluation", colors)
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines) == ["a", "b"]
        for name, line in lines.items():
            rows = curve[curve["series"] == name].sort_values("evaluation")
            np.testing.assert_array_equal(line.get_xdata(), rows["evaluation"])
            np.testing.assert_allclose(line.get_ydata(), rows["mean"])
            assert line.get_color() == colors[name]
        bands = {}
        for name, band in zip(lines, ax.collections, strict=True):
            ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
            bands[name] = (ys.min(), ys.max())
        a = curve[curve["series"] == "a"]
        assert bands["a"] == pytest.approx((a["low"].min(), a["high"].max()))
        b = curve[(curve["series"] == "b") & (curve["evaluation"] < 3)]
        assert bands["b"] == pytest.approx((b["low"].min(), b["high"].max()))
        assert curve.loc[curve["series"] == "b", "low"].isna().sum() == 1  # evaluation 3
    finally:
        plt.close(fig)


def test_log_axes_label_their_ticks_as_plain_numbers():
    """A best-so-far curve spanning decades is drawn on a log axis; its tick labels were
    matplotlib's mathtext (``$\\mathdefault{10^{0}}$``), printed as such since figures parse no
    mathtext."""
    trace = pd.DataFrame(
        {"run_set": "s", "task": "t", "optimizer": "a", "metric": "regret", "seed": [0, 0, 1, 1],
         "evaluation": [1, 2, 1, 2], "value": [10.0, 0.5, 8.0, 0.02], "seconds": 1.0,
         "n_init": 1, "is_outlier": False, "series": "a"}
    )  # fmt: skip
    curve = tables.curves(trace).assign(series="a")
    svg = figures.task_curves_svg(trace, curve, figures.palette(["a"]), "t")
    assert "mathdefault" not in svg and "$" not in svg
    assert {1.0, 10.0} <= set(_tick_values(svg))
