"""Report statistics by value: t intervals, the signed-rank test, Holm, significant digits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from orthobench.report.stats import (
    holm,
    metric_bounds,
    min_signed_rank_p,
    sig,
    signed_rank_test,
    t_interval,
)


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


@pytest.mark.parametrize("level", [0.95, 0.9, 0.5])
def test_t_interval_is_scipys(level: float) -> None:
    """The interval is ``scipy.stats.t.interval`` on ``scipy.stats.sem``, to the last bit."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(2, 40))
        values = rng.normal(size=n) * 10 ** rng.uniform(-5, 5) + rng.normal() * 10 ** rng.uniform(
            -3, 3
        )
        expected = scipy_stats.t.interval(level, n - 1, values.mean(), scipy_stats.sem(values))
        assert t_interval(values, level) == tuple(map(float, expected))


def test_signed_rank_reaches_its_smallest_p_where_unpaired_ranks_cannot() -> None:
    """Six seeds whose values overlap across optimizers (seed effects dominate), with the first
    optimizer lower by 0.5 on every seed: unpaired ranks see no difference (Mann-Whitney
    p = 0.59), the paired test gets the exact minimum 2 / 2^6 = 0.03125."""
    y = np.array([1.0, 3.0, 5.0, 7.0, 9.0, 11.0])
    x = y - 0.5
    assert scipy_stats.mannwhitneyu(x, y).pvalue > 0.5
    test = signed_rank_test(x - y)
    assert test.pairs == 6 and test.p_min == test.p_value == pytest.approx(0.03125)
    # Not a sign test: the ranks of |d| count. One positive difference with the smallest |d|
    # (rank 1 of 6): two of the 64 sign patterns per side are as extreme, p = 2 * 2 / 64.
    assert signed_rank_test([0.1, -1, -2, -3, -4, -5]).p_value == pytest.approx(4 / 64)
    assert signed_rank_test([1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0]).p_value == pytest.approx(
        scipy_stats.wilcoxon([1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0]).pvalue
    )


def test_signed_rank_is_exact_with_tied_differences() -> None:
    # |d| all tied, signs (-, -, -, -, -, +): the sign-flip distribution gives 2 * 7 / 64
    # (patterns with at most one +); the normal approximation would not.
    assert signed_rank_test([-1.0] * 5 + [1.0]).p_value == pytest.approx(14 / 64)


def test_too_few_pairs_give_no_p_value_but_the_smallest_attainable_one() -> None:
    assert [min_signed_rank_p(n) for n in (0, 1, 2, 3, 5, 6, 7)] == pytest.approx(
        [1.0, 1.0, 0.5, 0.25, 0.0625, 0.03125, 0.015625]
    )
    three = signed_rank_test([-1.0, -2.0, -3.0])  # lower on every one of 3 seeds
    assert three.pairs == 3 and three.p_min == 0.25 and math.isnan(three.p_value)
    five = signed_rank_test([-1.0, -2.0, -3.0, -4.0, -5.0])
    assert five.p_min == 0.0625 and math.isnan(five.p_value)
    # A custom level: 5 pairs can reach 0.1.
    assert signed_rank_test([-1.0, -2.0, -3.0, -4.0, -5.0], alpha=0.1).p_value == 0.0625


def test_zero_differences_are_dropped_and_non_finite_ones_ignored() -> None:
    """Wilcoxon's zero method: equal final values carry no sign and do not count towards n."""
    test = signed_rank_test([0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, float("nan")])
    assert test.pairs == 7  # finite pairs
    assert test.p_min == test.p_value == pytest.approx(2 / 2**6)  # 6 nonzero differences
    one_tie = signed_rank_test([0.0, -1.0, -2.0, -3.0, -4.0, -5.0])  # 6 pairs, 5 differ
    assert one_tie.p_min == 0.0625 and math.isnan(one_tie.p_value)
    same = signed_rank_test([0.0] * 8)  # identical on every seed: nothing to test
    assert same.pairs == 8 and same.p_min == 1.0 and math.isnan(same.p_value)
    empty = signed_rank_test([])
    assert empty.pairs == 0 and empty.p_min == 1.0 and math.isnan(empty.p_value)


def test_holm_by_hand() -> None:
    # Sorted 0.01, 0.02, 0.04 (m = 3): 3 * 0.01, max(0.03, 2 * 0.02), max(0.04, 1 * 0.04).
    np.testing.assert_allclose(holm([0.04, 0.01, float("nan"), 0.02]), [0.04, 0.03, np.nan, 0.04])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])
    assert np.isnan(holm([float("nan")])).all()


def test_sig_prints_three_significant_digits() -> None:
    assert [sig(v) for v in (3.8123e29, 7.4e30, 1.0, 0.000123456, None)] == [
        "3.81e+29", "7.4e+30", "1", "0.000123", "-"
    ]  # fmt: skip
