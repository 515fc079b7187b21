"""Probe tables on a state whose reference is not converged: every statistic measured against
the reference leaves the state out, the bias shares as the MSE ratios
(:func:`orthobench.probe.tables.unconverged_reference`)."""

from __future__ import annotations

import pandas as pd

from orthobench.probe.tables import default_rule_table, ranking_table, summary_table


def _frame() -> pd.DataFrame:
    """Two states of ``mc`` and ``e`` (S = 8, R = 16, no rebuild noise): seed 0 with a converged
    reference (relative error 1%) and no bias; seed 1 whose reference's relative error is 5 (a
    rare mass that every estimator misses), so each has squared bias 1 = its MSE there."""
    rows = []
    for seed, rse, bias_sq in ((0, 0.01, 0.0), (1, 5.0, 1.0)):
        for name, ratio in (("mc", 1.0), ("e", 3.0)):
            rows.append(
                {"suite": "s", "task": "t", "kernel": "k", "estimator": name, "mc_samples": 8,
                 "n_evaluations": 8, "seed": seed, "state_iteration": 0, "baseline": "mc",
                 "rebuilds": 16, "mse_ratio": ratio, "mse_ratio_low": ratio / 2,
                 "mse_ratio_high": ratio * 2, "var_ratio": ratio, "var_ratio_low": ratio / 2,
                 "var_ratio_high": ratio * 2, "median_point_mse_ratio": ratio, "bias_sq": bias_sq,
                 "mse": 1.0, "probe_variance": 0.0, "reference": [1.0, 1.0],
                 "reference_rse": [rse, rse]}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_the_default_rule_leaves_the_bias_of_an_unconverged_state_out():
    """The reported bug: seed 1's bias share (1, against a reference that misses the mass) set
    the median excess share of ``e`` to 0.5 and made it not eligible; over the converged state
    it is 0."""
    rule = default_rule_table(_frame()).set_index("estimator").loc["e"]
    assert rule["unconverged_states"] == 1 and rule["worst_state_mse_ratio"] == 3.0
    assert rule["median_excess_bias_share"] == 0.0 and rule["max_excess_bias_share"] == 0.0
    assert rule["max_bias_share"] == 0.0 and rule["eligible"]


def test_the_summary_and_ranking_leave_the_reference_errors_of_an_unconverged_state_out():
    """``bias_sq`` and ``bias_share`` (means), their maxima and the excess share are over the
    converged state only, as the MSE ratio; the variance ratio and probe variance read no
    reference and keep both states."""
    row = summary_table(_frame()).set_index("estimator").loc["e"]
    assert (row["states"], row["mse_ratio_unconverged"]) == (2, 1)
    assert row["bias_sq"] == row["bias_share"] == row["bias_share_max"] == 0.0
    assert row["excess_bias_share_max"] == 0.0
    assert row["var_ratio_unconverged"] == 0 and row["probe_variance"] == 0.0
    ranking = ranking_table(_frame()).set_index("estimator").loc["e"]
    assert ranking["max_bias_share"] == ranking["max_excess_bias_share"] == 0.0


def test_an_estimator_whose_every_state_is_unconverged_has_no_bias_statistics():
    """NaN, not 0 and not an error: nothing was measured against a converged reference, and
    the rule does not call the estimator eligible."""
    frame = _frame()
    frame = frame[frame["seed"] == 1]
    rule = default_rule_table(frame).set_index("estimator").loc["e"]
    assert pd.isna(rule["median_excess_bias_share"]) and not rule["eligible"]
    assert pd.isna(summary_table(frame).set_index("estimator").loc["e", "bias_share"])


def test_a_converged_state_keeps_its_reference_errors():
    """Only a flagged state loses them: with both references converged the means are over both."""
    frame = _frame().assign(reference_rse=[[0.01, 0.01]] * 4)
    row = summary_table(frame).set_index("estimator").loc["e"]
    assert row["bias_sq"] == row["bias_share"] == 0.5 and row["bias_share_max"] == 1.0
