"""Probe tables over BO states by value: geometric means with intervals over states."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from orthobench.probe.tables import (
    format_summary,
    geometric_mean_interval,
    ranking_table,
    summary_table,
)


def _rows(ratios: dict[tuple[str, int], list[float]], task: str = "t") -> pd.DataFrame:
    rows = []
    for (name, s), values in ratios.items():
        for seed, ratio in enumerate(values):
            rows.append(
                {"suite": "s", "task": task, "kernel": "k", "mc_samples": s, "estimator": name,
                 "n_evaluations": s, "seed": seed, "baseline": "mc", "var_ratio": ratio,
                 "var_ratio_low": ratio / 2, "var_ratio_high": ratio * 2, "mse_ratio": ratio,
                 "mse_ratio_low": ratio / 2, "mse_ratio_high": ratio * 2,
                 "median_point_mse_ratio": ratio, "bias_sq": 1.0, "mse": 4.0,
                 "probe_variance": 1.0, "probe_variance_log": 0.5, "top1_agreement": 0.5,
                 "flip_rate": 0.1, "regret": 1.0, "median_point_var_ratio": ratio}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_ratios_are_geometric_means_over_states_not_plain_means():
    """The reported case: qLogEI's ratio 5.14e29 on one state of two. A plain mean gives
    2.6e29; the geometric mean of 0.0375 and 5.14e29 is 1.39e14, with an interval over the
    states [0.0375, 5.14e29] that shows the spread."""
    table = summary_table(_rows({("qlogei", 8): [0.0375, 5.14e29]}))
    row = table.iloc[0]
    assert row["var_ratio"] == pytest.approx(math.sqrt(0.0375 * 5.14e29))
    assert row["var_ratio_low"] == pytest.approx(0.0375) and row["var_ratio_high"] == pytest.approx(
        5.14e29
    )
    assert row["ci_over"] == "states" and row["states"] == 2
    assert row["var_ratio_worst"] == 0.0375
    assert row["bias_share"] == 0.25


def test_one_state_keeps_its_rebuild_interval():
    row = summary_table(_rows({("e", 8): [3.0]})).iloc[0]
    assert row["mse_ratio"] == pytest.approx(3.0)
    assert (row["mse_ratio_low"], row["mse_ratio_high"]) == (1.5, 6.0)
    assert row["ci_over"] == "rebuilds"


def test_geometric_mean_interval_is_a_bootstrap_over_states():
    ratios = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    center, low, high = geometric_mean_interval(ratios)
    assert center == pytest.approx(4.0)
    assert 1.0 < low < 4.0 < high < 16.0
    assert geometric_mean_interval(ratios) == (center, low, high)  # seeded: reproducible
    assert geometric_mean_interval([2.0, float("inf"), -1.0])[0] == 2.0  # only positive finite
    assert all(math.isnan(v) for v in geometric_mean_interval([]))


def test_ranking_takes_the_worst_cell_and_state():
    frame = pd.concat(
        [_rows({("e", 8): [2.0, 8.0]}, task="t1"), _rows({("e", 8): [1.0, 4.0]}, task="t2")]
    )
    row = ranking_table(frame).iloc[0]
    assert row["worst_mse_ratio"] == pytest.approx(2.0) and row["worst_cell"] == "t2/k"
    assert row["worst_state_mse_ratio"] == 1.0 and row["median_mse_ratio"] == pytest.approx(3.0)


def test_text_table_prints_three_significant_digits():
    text = format_summary(_rows({("qlogei", 8): [0.0375, 5.14e29]}))
    assert "1.39e+14 [0.0375, 5.14e+29]" in text and "Ranking" in text
