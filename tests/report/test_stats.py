"""Report statistics by value: t intervals, Mann-Whitney U, Holm, significant digits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from orthobench.report.stats import holm, mann_whitney, metric_bounds, sig, t_interval


def test_t_interval_uses_the_t_quantile_not_1_96() -> None:
    """Two seeds 1 and 3: mean 2, SE 1, t_{0.975, 1} = 12.706 (1.96 would cover about 70%)."""
    low, high = t_interval([1.0, 3.0])
    assert (low, high) == pytest.approx((2 - 12.706204736, 2 + 12.706204736))
    # Coverage of the mean of N(0, 1) with two draws: 95% for t, about 70% for 1.96 SE.
    draws = np.random.default_rng(0).standard_normal((20000, 2))
    half = np.abs(draws[:, 0] - draws[:, 1]) / 2  # SE of two values
    center = np.abs(draws.mean(axis=1))
    assert np.mean(center <= 12.706204736 * half) == pytest.approx(0.95, abs=0.01)
    assert np.mean(center <= 1.959964 * half) == pytest.approx(0.70, abs=0.02)


def test_t_interval_edge_cases() -> None:
    assert all(math.isnan(v) for v in t_interval([5.0]))
    assert all(math.isnan(v) for v in t_interval([5.0, float("nan")]))  # one finite value
    assert t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
    assert t_interval([1.0, 3.0], bounds=metric_bounds("regret"))[0] == 0.0
    assert t_interval([1.0, 3.0], bounds=metric_bounds("best_y"))[0] < 0.0


def test_mann_whitney_is_scipys_two_sided_exact_test() -> None:
    # 3 vs 3 values, completely separated: p = 2 / C(6, 3) = 0.1.
    assert mann_whitney([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert mann_whitney([1, 2, float("nan")], [4, 5]) == pytest.approx(
        scipy_stats.mannwhitneyu([1, 2], [4, 5]).pvalue
    )
    assert math.isnan(mann_whitney([], [1.0]))


def test_holm_by_hand() -> None:
    # Sorted 0.01, 0.02, 0.04 (m = 3): 3 * 0.01, max(0.03, 2 * 0.02), max(0.04, 1 * 0.04).
    np.testing.assert_allclose(holm([0.04, 0.01, float("nan"), 0.02]), [0.04, 0.03, np.nan, 0.04])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])
    assert np.isnan(holm([float("nan")])).all()


def test_sig_prints_three_significant_digits() -> None:
    assert [sig(v) for v in (3.8123e29, 7.4e30, 1.0, 0.000123456, None)] == [
        "3.81e+29", "7.4e+30", "1", "0.000123", "-"
    ]  # fmt: skip
