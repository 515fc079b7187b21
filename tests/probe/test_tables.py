"""Probe tables over BO states by value: medians, worst states and geometric means with
intervals over states; equal-time ratios; the default estimator's rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from orthobench.probe.intervals import geometric_mean_interval, median_interval
from orthobench.probe.tables import (
    default_rule_table,
    equal_time_frame,
    format_summary,
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
                 "flip_rate": 0.1, "regret": 1.0, "median_point_var_ratio": ratio,
                 "state_iteration": 0, "rebuilds": 64}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_ratios_are_geometric_means_over_states_not_plain_means():
    """Two states with ratios 0.0375 and 5.14e9: a plain mean gives 2.6e9, the geometric mean
    sqrt(0.0375 * 5.14e9) = 1.39e4. Its t interval with two states is wider than their range
    (t_{0.975, 1} = 12.7)."""
    row = summary_table(_rows({("qlogei", 8): [0.0375, 5.14e9]})).iloc[0]
    assert row["var_ratio"] == pytest.approx(math.sqrt(0.0375 * 5.14e9))
    assert row["var_ratio_low"] < 0.0375 and row["var_ratio_high"] > 5.14e9
    assert row["ci_over"] == "states" and row["states"] == 2 and row["var_ratio_undefined"] == 0
    assert row["var_ratio_worst"] == 0.0375
    assert row["bias_share"] == 0.25


def test_undefined_ratios_are_counted_and_left_out_of_every_statistic():
    """The reported case: qLogEI's ratio 5.14e29 on a state where its variance is ~0 (beyond
    MAX_RATIO), beside an infinite, a zero, a NaN and a negative ratio: `states` counts all seven,
    `*_undefined` the five, and the median, interval, geometric mean and worst state are over
    the two defined states (0.0375 and 2)."""
    ratios = [0.0375, 5.14e29, float("inf"), 0.0, float("nan"), -1.0, 2.0]
    row = summary_table(_rows({("qlogei", 8): ratios})).iloc[0]
    assert row["states"] == 7 and row["var_ratio_undefined"] == 5
    assert row["var_ratio_median"] == pytest.approx(math.sqrt(0.0375 * 2.0))
    assert (row["var_ratio_median_low"], row["var_ratio_median_high"]) == (0.0375, 2.0)
    assert row["var_ratio_median_level"] == 0.5  # two states: 1 - 2 P(Bin(2, 1/2) = 0)
    assert row["var_ratio"] == pytest.approx(math.sqrt(0.0375 * 2.0))
    assert row["var_ratio_worst"] == 0.0375 and row["var_ratio_worst_state"] == "seed 0"
    assert row["median_point_var_ratio_undefined"] == 5
    # Several states, one defined: its value without an interval over states.
    row = summary_table(_rows({("qlogei", 8): [0.0375, 5.14e29]})).iloc[0]
    assert row["var_ratio"] == pytest.approx(0.0375) and row["var_ratio_undefined"] == 1
    assert all(math.isnan(row[f"var_ratio{s}"]) for s in ("_low", "_median_high", "_median_level"))
    # One undefined state: nothing, not even its rebuild CI.
    row = summary_table(_rows({("qlogei", 8): [5.14e29]})).iloc[0]
    assert all(math.isnan(row[f"var_ratio{s}"]) for s in ("", "_low", "_median", "_worst"))


def test_one_state_keeps_its_rebuild_interval():
    row = summary_table(_rows({("e", 8): [3.0]})).iloc[0]
    assert row["mse_ratio"] == pytest.approx(3.0)
    assert (row["mse_ratio_low"], row["mse_ratio_high"]) == (1.5, 6.0)
    assert (row["mse_ratio_median_low"], row["mse_ratio_median_high"]) == (1.5, 6.0)
    assert math.isnan(row["mse_ratio_median_level"])  # no interval over states
    assert row["ci_over"] == "rebuilds"


def test_geometric_mean_interval_is_a_t_interval_of_the_log_ratios():
    """Ratios 2^0..2^4: log ratios with mean 2 log 2 and sd log 2 * sqrt(2.5) = 1.0960, so
    half-width t_{0.975, 4} * 1.0960 / sqrt(5) = 2.7764 * 0.49013 = 1.3608 on the log scale."""
    ratios = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    center, low, high, level = geometric_mean_interval(ratios)
    assert center == pytest.approx(4.0) and level == 0.95
    assert (low, high) == pytest.approx((4.0 * math.exp(-1.3608), 4.0 * math.exp(1.3608)), rel=1e-4)
    assert geometric_mean_interval([2.0, float("inf"), -1.0]).center == pytest.approx(2.0)
    assert all(math.isnan(v) for v in geometric_mean_interval([]))
    batch = geometric_mean_interval(np.stack([ratios, ratios[::-1] ** 2]))  # (b) x n -> (b)
    np.testing.assert_allclose(batch.high, [high, geometric_mean_interval(ratios**2).high])


def test_median_and_worst_state_over_states():
    """Five states with MSE ratios 3, 0.5, 2, 8, 4: median 3, worst 0.5 on seed 1 with that
    state's own rebuild CI. The median's interval is the range of the five states, and its
    level 1 - 2 / 2^5 = 0.9375 says so: five states cannot give a 95% interval."""
    row = summary_table(_rows({("e", 32): [3.0, 0.5, 2.0, 8.0, 4.0]})).iloc[0]
    assert row["states"] == 5 and row["ci_over"] == "states"
    assert row["mse_ratio_median"] == pytest.approx(3.0)
    assert row["mse_ratio_worst"] == 0.5 and row["mse_ratio_worst_state"] == "seed 1"
    assert (row["mse_ratio_worst_low"], row["mse_ratio_worst_high"]) == (0.25, 1.0)
    assert (row["mse_ratio_median_low"], row["mse_ratio_median_high"]) == (0.5, 8.0)
    assert row["mse_ratio_median_level"] == 0.9375
    assert row["mse_ratio"] == pytest.approx((3.0 * 0.5 * 2.0 * 8.0 * 4.0) ** 0.2)
    # An even count: the geometric midpoint of the two middle states, not their plain mean.
    even = summary_table(_rows({("e", 32): [1.0, 2.0, 8.0, 64.0]})).iloc[0]
    assert even["mse_ratio_median"] == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("n", "k", "level"),
    [(3, 1, 0.75), (5, 1, 0.9375), (6, 1, 1 - 2 / 64), (10, 2, 1 - 2 * 11 / 1024)],
)
def test_median_interval_is_the_order_statistic_pair_with_its_exact_level(n, k, level):
    """[X_(k), X_(n+1-k)] with level 1 - 2 P(Bin(n, 1/2) <= k - 1): the range below 6 states,
    the 2nd and 9th of 10 (k = 3 would give 1 - 2 * 56 / 1024 = 0.89 < 0.95)."""
    ratios = np.random.default_rng(n).permutation(np.arange(1.0, n + 1))
    median, low, high, stated = median_interval(ratios)
    assert median == pytest.approx(math.sqrt(((n + 1) // 2) * (n // 2 + 1)))
    assert (low, high) == (k, n + 1 - k) and stated == pytest.approx(level)


def test_median_interval_matches_scipy_quantile_test_from_six_states():
    """scipy's order-statistic CI of the median (NaN below 6 states) picks the same pair."""
    rng = np.random.default_rng(0)
    for n in range(6, 41):
        ratios = rng.lognormal(size=n)
        ci = stats.quantile_test(ratios, q=1.0, p=0.5).confidence_interval(0.95)
        assert median_interval(ratios)[1:3] == (ci.low, ci.high)


def test_intervals_cover_at_their_stated_level():
    """Coverage over 4000 simulated sets of n states (seeded), log ratios N(log 3, 1): true
    median and geometric mean 3. Both intervals are exact here (the order-statistic one for any
    continuous law, it depends on ranks only; the t interval for normal logs), so the empirical
    coverage is Binomial(4000, level) / 4000 and must lie within 3 of its standard errors,
    sqrt(level (1 - level) / 4000) <= 0.0069, of the stated level. The median's level is 0.95
    or more only from 6 states on. The old percentile bootstrap, stating 0.95 throughout,
    covered 0.75 (n = 3), 0.94 and 0.83 (median and gmean, n = 5), 0.94 and 0.89 (n = 10) in
    this simulation (run on a copy of its code)."""
    reps, true = 4000, 3.0
    rng = np.random.default_rng(0)
    for n in (3, 5, 10):
        ratios = true * np.exp(rng.standard_normal((reps, n)))  # reps x n
        for interval, at_least_95 in [(median_interval, n >= 6), (geometric_mean_interval, True)]:
            _, low, high, level = interval(ratios)  # each (reps)
            assert np.ptp(level) == 0 and (level[0] >= 0.95) == at_least_95
            covered = np.mean((low <= true) & (true <= high))
            tolerance = 3 * math.sqrt(level[0] * (1 - level[0]) / reps)
            assert abs(covered - level[0]) <= tolerance, (interval.__name__, n, covered, level[0])


def test_worst_state_names_the_iteration_when_several_are_probed():
    frame = _rows({("e", 8): [2.0, 1.0]}).assign(seed=7, state_iteration=[0, 5])
    assert summary_table(frame).iloc[0]["mse_ratio_worst_state"] == "seed 7 it 5"


def test_excess_bias_share_removes_the_rebuild_noise_of_an_unbiased_estimator():
    """``bias_sq`` of an unbiased estimator is ``probe_variance / R`` in expectation: 1/64 of the
    variance here; the excess share subtracts it."""
    frame = _rows({("e", 8): [2.0, 2.0]}).assign(
        bias_sq=[1.0 / 64, 0.5], probe_variance=1.0, mse=1.0
    )
    row = summary_table(frame).iloc[0]
    assert row["bias_share"] == pytest.approx((1.0 / 64 + 0.5) / 2)
    assert row["excess_bias_share_max"] == pytest.approx(0.5 - 1.0 / 64)


def test_ranking_takes_the_worst_state_over_cells():
    frame = pd.concat(
        [_rows({("e", 8): [2.0, 8.0]}, task="t1"), _rows({("e", 8): [1.0, 4.0]}, task="t2")]
    )
    row = ranking_table(frame).iloc[0]
    assert row["worst_mse_ratio"] == pytest.approx(2.0) and row["worst_cell"] == "t2/k"
    assert row["worst_state_mse_ratio"] == 1.0 and row["worst_state"] == "t2/k seed 0"
    assert row["worst_state_high"] == 2.0
    # Cells' medians 4 and 2: their geometric midpoint, as a median over states takes it.
    assert row["median_mse_ratio"] == pytest.approx(math.sqrt(8.0))


def test_the_ranking_takes_medians_of_ratios_as_geometric_midpoints():
    """Cells with medians 0.5 and 8: the arithmetic midpoint 4.25 is not the median of the
    inverse ratios (2 and 0.125) inverted; the geometric midpoint 2 is, as in
    :func:`median_interval`. The same holds for the call's cost over naive MC's over states."""
    frame = pd.concat([_rows({("e", 8): [0.5]}, task="t1"), _rows({("e", 8): [8.0]}, task="t2")])
    assert ranking_table(frame).iloc[0]["median_mse_ratio"] == pytest.approx(2.0)
    frame = _timed(
        {("e", 32): 1.0, ("mc", 32): 1.0, ("qmc-owen+rb", 32): 1.0, ("qmc-owen+rb", 128): 0.5},
        {("e", 32): 1.0, ("mc", 32): 2.0, ("qmc-owen+rb", 32): 1.0, ("qmc-owen+rb", 128): 2.0},
    )
    frame = pd.concat([frame, frame.assign(seed=1)], ignore_index=True)
    frame.loc[(frame["seed"] == 1) & (frame["estimator"] == "e"), "seconds_per_call"] = 16.0
    ranking = ranking_table(frame).set_index(["mc_samples", "estimator"])
    assert ranking.loc[(32, "e"), "cost_vs_mc"] == pytest.approx(2.0)  # of 0.5 and 8


def _timed(mse: dict[tuple[str, int], float], seconds: dict[tuple[str, int], float]):
    frame = _rows({key: [1.0] for key in mse})
    return frame.assign(
        mse=[mse[(e, s)] for e, s in zip(frame["estimator"], frame["mc_samples"], strict=True)],
        seconds_per_call=[
            seconds[(e, s)] for e, s in zip(frame["estimator"], frame["mc_samples"], strict=True)
        ],
        threads=1,
    )


def test_the_baseline_at_its_own_budgets_is_not_extrapolated():
    """exp(log 8) is 7.999999999999998: the baseline's own smallest budget was flagged as
    extrapolated, and counted so in the ranking."""
    frame = _timed(
        {("qmc-owen+rb", 8): 1.0, ("qmc-owen+rb", 16): 0.5},
        {("qmc-owen+rb", 8): 1.0, ("qmc-owen+rb", 16): 3.0},
    )
    timed = equal_time_frame(frame).set_index(["estimator", "mc_samples"])
    assert timed.loc[("qmc-owen+rb", 8), "time_budget"] == pytest.approx(8.0)
    assert not timed["time_extrapolated"].any()


def test_equal_time_interpolates_the_baseline_in_log_log():
    """The baseline costs 1 s at S = 32 and 4 s at S = 128 (cost ~ S) with MSE 1 and 1/16
    (MSE ~ S^-2). An estimator at 2 s per call has the time of the baseline at S' = 64, whose
    MSE is 1/4 there: with MSE 1/8 it is 2x better at equal time."""
    frame = _timed(
        {("qmc-owen+rb", 32): 1.0, ("qmc-owen+rb", 128): 1 / 16, ("e", 32): 1 / 8, ("mc", 32): 1},
        {("qmc-owen+rb", 32): 1.0, ("qmc-owen+rb", 128): 4.0, ("e", 32): 2.0, ("mc", 32): 0.5},
    )
    timed = equal_time_frame(frame).set_index(["estimator", "mc_samples"])
    assert timed.loc[("e", 32), "time_budget"] == pytest.approx(64.0)
    assert timed.loc[("e", 32), "time_mse_ratio"] == pytest.approx(2.0)
    assert timed.loc[("e", 32), "cost_vs_mc"] == pytest.approx(4.0)
    assert not timed.loc[("e", 32), "time_extrapolated"]
    # The baseline against itself is 1; a call cheaper than its smallest S extrapolates.
    assert timed.loc[("qmc-owen+rb", 128), "time_mse_ratio"] == pytest.approx(1.0)
    assert timed.loc[("mc", 32), "time_budget"] == pytest.approx(16.0)
    assert timed.loc[("mc", 32), "time_extrapolated"]
    assert timed.loc[("mc", 32), "time_mse_ratio"] == pytest.approx(4.0)  # MSE(16) = 4
    ranking = ranking_table(frame).set_index(["mc_samples", "estimator"])
    assert ranking.loc[(32, "e"), "time_mse_ratio_median"] == pytest.approx(2.0)


def test_a_baseline_budget_timed_below_a_smaller_one_is_left_out_not_its_state():
    """Timing noise (4.27 ms at S = 30, 4.19 ms at S = 32) dropped the whole state from the
    equal-time columns; the interpolation now runs through S = 30 and 128."""
    frame = _timed(
        {("qmc-owen+rb", 30): 1.0, ("qmc-owen+rb", 32): 0.9, ("qmc-owen+rb", 128): 1 / 16},
        {("qmc-owen+rb", 30): 1.0, ("qmc-owen+rb", 32): 0.98, ("qmc-owen+rb", 128): 4.0},
    )
    timed = equal_time_frame(frame).set_index(["estimator", "mc_samples"])
    assert timed["time_mse_ratio"].notna().all()
    assert timed.loc[("qmc-owen+rb", 128), "time_budget"] == pytest.approx(128.0)
    # S = 32's call, timed at 0.98 s, is the baseline's at S' < 30: extrapolated.
    assert timed.loc[("qmc-owen+rb", 32), "time_extrapolated"]


@pytest.mark.parametrize(
    "costs", [(1e-4, 9e-4, 4e-4, 8e-4), (1e-3, 2e-4, 4e-4, 8e-4)], ids=["spike", "slow-first"]
)
def test_equal_time_leaves_out_the_fewest_budgets_that_break_rising_costs(costs):
    """One noisy timing: a spike at S = 16 kept the spike and dropped every budget after it
    (1.14x, a win, where the others give 0.21x), a slow first call the whole state. With S = 16
    left out, the row's 1.2 ms is S' = 96 on the line through 32 and 64 (cost ~ S), whose MSE is
    1/96; S = 8 is left out too where its call is the slow one."""
    budgets = (8, 16, 32, 64)
    mse = {("qmc-owen+rb", s): 1 / s for s in budgets} | {("e", 8): 0.05}
    seconds = {("qmc-owen+rb", s): c for s, c in zip(budgets, costs, strict=True)}
    timed = equal_time_frame(_timed(mse, seconds | {("e", 8): 1.2e-3}))
    row = timed.set_index(["estimator", "mc_samples"]).loc[("e", 8)]
    assert row["time_budget"] == pytest.approx(96.0)
    assert row["time_mse_ratio"] == pytest.approx((1 / 96) / 0.05)


def test_equal_time_needs_two_budgets_of_the_baseline():
    frame = _timed(
        {("e", 32): 1.0, ("qmc-owen+rb", 32): 1.0}, {("e", 32): 1.0, ("qmc-owen+rb", 32): 1.0}
    )
    assert equal_time_frame(frame)["time_mse_ratio"].isna().all()


def test_the_default_rule_takes_the_worst_state_and_excludes_biased_estimators():
    frame = pd.concat(
        [
            _rows({("good", 32): [3.0, 2.0], ("good", 128): [5.0, 4.0]}),
            _rows({("fast", 32): [9.0, 8.0], ("fast", 128): [9.0, 1.5]}),  # worst state 1.5
            _rows({("biased", 32): [20.0, 20.0], ("biased", 128): [20.0, 20.0]}),
            _rows({("risky", 32): [9.0, 9.0], ("risky", 128): [9.0, 0.4]}),  # high 0.8 < 1
        ]
    )
    frame["bias_sq"] = 1.0 / 64  # probe variance 1, R = 64: no excess bias
    frame.loc[frame["estimator"] == "biased", "bias_sq"] = 2.0  # excess share (2 - 1/64) / 4
    rule = default_rule_table(frame).set_index("estimator")
    assert list(rule.index) == ["good", "fast", "biased", "risky"]  # eligible first
    assert rule.loc["good", "worst_state_mse_ratio"] == 2.0 and rule.loc["good", "eligible"]
    assert rule.loc["fast", "worst_state"] == "t/k S=128 seed 1"
    assert not rule.loc["risky", "eligible"] and rule.loc["risky", "min_upper_bound"] == 0.8
    assert not rule.loc["biased", "eligible"]


def test_text_table_prints_three_significant_digits():
    text = format_summary(_rows({("qlogei", 8): [0.0375, 5.14e9, 5.14e29]}))
    assert "1.39e+04" in text and "Ranking" in text and "Default rule" in text
    assert "seed 0" in text  # the worst state is named
    header, row = text.splitlines()[:2]
    assert header.split()[5:7] == ["states", "undef"] and row.split()[5:7] == ["3", "1"]
    assert "level" in header and " 0.5 " in row  # the median's interval over two states


def test_the_default_rule_and_text_tables_take_an_estimator_without_any_defined_ratio():
    """A constrained state where every value underflows to 0 gives 0 / 0 ratios (NaN): an
    estimator with no other state has none defined, and is listed, not eligible, not a crash."""
    frame = _rows({("good", 8): [3.0, 2.0], ("zero", 8): [math.nan, math.nan]})
    frame["bias_sq"] = 1.0 / 64  # probe variance 1, R = 64: no excess bias
    rule = default_rule_table(frame).set_index("estimator")
    assert list(rule.index) == ["good", "zero"]
    assert math.isnan(rule.loc["zero", "worst_state_mse_ratio"])
    assert math.isnan(rule.loc["zero", "min_upper_bound"]) and not rule.loc["zero", "eligible"]
    assert rule.loc["good", "worst_state_mse_ratio"] == 2.0 and rule.loc["good", "eligible"]
    assert "Default rule" in format_summary(frame)


def test_the_default_rule_leaves_out_undefined_ratios_as_the_summary_tables_do():
    """One state of ``good`` whose MSE ratio is 1e-15 (naive MC's MSE ~0 there: below
    1 / MAX_RATIO, undefined) and one of ``fast`` at 1e30: the summary tables leave both out,
    and so must the rule, which counts them instead (``undefined_states``)."""
    frame = _rows(
        {("good", 8): [3.0, 2.0, 1e-15], ("fast", 8): [9.0, 1e30, 8.0], ("none", 8): [1e-20]}
    )
    frame["bias_sq"] = 1.0 / 64  # probe variance 1, R = 64: no excess bias
    summary = summary_table(frame).set_index("estimator")
    rule = default_rule_table(frame).set_index("estimator")
    for name in ("good", "fast"):
        assert rule.loc[name, "worst_state_mse_ratio"] == summary.loc[name, "mse_ratio_worst"]
        assert rule.loc[name, "undefined_states"] == summary.loc[name, "mse_ratio_undefined"] == 1
        assert rule.loc[name, "states"] == 3 and rule.loc[name, "eligible"]
    assert rule.loc["good", "worst_state"] == "t/k S=8 seed 1"
    assert rule.loc["good", "min_upper_bound"] == 4.0
    assert rule.loc["fast", "min_upper_bound"] == 16.0
    assert list(rule.index) == ["fast", "good", "none"]
    # No defined state: NaN, not eligible (as an estimator with NaN ratios only).
    none = rule.loc["none"]
    assert math.isnan(none["worst_state_mse_ratio"]) and math.isnan(none["min_upper_bound"])
    assert none["undefined_states"] == 1 and not none["eligible"]


def test_excess_bias_share_is_never_negative():
    """``excess_bias_share = max(bias_sq - probe_variance / R, 0) / mse``: where the squared
    bias is below the rebuild noise ``probe_variance / R`` (as for an unbiased estimator about
    half of the time) the share is 0, not negative, in the summary's maximum over states."""
    frame = _rows({("e", 8): [2.0, 2.0]}).assign(
        bias_sq=[0.001, 0.01], probe_variance=[0.08, 1.0], rebuilds=16, mse=0.1
    )
    row = summary_table(frame).iloc[0]
    assert row["excess_bias_share_max"] == 0.0


def test_the_text_default_rule_counts_state_budgets():
    """Its rows are over every (state, S): 2 states at 2 budgets are 4, which the column's
    header said were ``states`` (docs/estimators.md calls them state-budgets)."""
    text = format_summary(_rows({("e", 8): [3.0, 2.0], ("e", 32): [5.0, 4.0]}))
    lines = text.splitlines()
    header = lines[next(i for i, line in enumerate(lines) if line.startswith("Default rule")) + 1]
    assert header.split()[:2] == ["estimator", "state-budgets"]
    assert lines[-1].split()[:2] == ["e", "4"]
