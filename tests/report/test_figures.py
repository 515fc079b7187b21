"""Figures: self-contained SVG, and probe ratio axes that a single state cannot blow up."""

from __future__ import annotations

import re

import pandas as pd

from orthobench.probe.tables import summary_table
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
