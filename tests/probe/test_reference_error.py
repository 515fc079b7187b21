"""The probe reference's own error: its relative standard error from its draws, and the states
whose reference is too far from converged for their MSE ratios to compare estimators."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from orthobench.check import Threshold, evaluate, format_results
from orthobench.probe.gp_probe import reference_rse
from orthobench.probe.tables import (
    MAX_REFERENCE_ERROR,
    default_rule_table,
    format_summary,
    summary_table,
    unconverged_reference,
)


def test_reference_rse_is_the_standard_error_of_the_mean_over_the_mean():
    """Per probe point, sqrt(Var(e) / S) / mean(e) with the population variance, from log values
    shifted by -800 (whose exponentials underflow): the logsumexps keep it exact."""
    e = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [10.0, 5.0]])  # S x N
    direct = np.sqrt(e.var(axis=0) / e.shape[0]) / e.mean(axis=0)
    log = torch.tensor(np.log(e) - 800.0)
    np.testing.assert_allclose(reference_rse(log).numpy(), direct, rtol=1e-12, atol=1e-15)
    # One draw carries the mean: sqrt((S - 1) / S); every value 0: unknown (NaN).
    one = torch.tensor([[0.0], [-math.inf], [-math.inf], [-math.inf]])
    assert reference_rse(one).item() == pytest.approx(math.sqrt(3 / 4))
    assert math.isnan(reference_rse(torch.full((4, 1), -math.inf)).item())


def _state_rows(seed: int, rse: float, ratios: dict[str, float]) -> list[dict]:
    """The rows of one state: a reference of 2 probe points with relative error ``rse``."""
    return [
        {"suite": "s", "task": "t", "kernel": "k", "q": 1, "mc_samples": 64, "estimator": name,
         "n_evaluations": 64, "seed": seed, "state_iteration": 0, "baseline": "mc",
         "mse_ratio": ratio, "mse_ratio_low": ratio / 2, "mse_ratio_high": ratio * 2,
         "var_ratio": ratio, "var_ratio_low": ratio / 2, "var_ratio_high": ratio * 2,
         "median_point_mse_ratio": ratio, "median_point_var_ratio": ratio, "mse": 1e-3 / ratio,
         "bias_sq": 1e-4, "probe_variance": 1e-3, "probe_variance_log": 0.1, "rebuilds": 8,
         "top1_agreement": 1.0, "flip_rate": 0.0, "regret": 1.0,
         "reference": [0.1, 0.05], "reference_rse": [rse, rse]}
        for name, ratio in ratios.items()
    ]  # fmt: skip


def _frame() -> pd.DataFrame:
    """Three states: two converged (relative error 2%), and seed 2 whose reference is carried by
    one draw of 4096 (relative error ~1), on which the control variates score 0.09, as on the
    tension-compression string's seed 1 of suites/probe-constrained.yaml."""
    rows = [
        *_state_rows(0, 0.02, {"mc": 1.0, "cv": 2.8}),
        *_state_rows(1, 0.02, {"mc": 1.0, "cv": 3.2}),
        *_state_rows(2, math.sqrt(4095 / 4096), {"mc": 1.0, "cv": 0.093}),
    ]
    return pd.DataFrame(rows)


def test_a_rare_event_reference_is_flagged_and_a_converged_one_is_not():
    frame = _frame()
    assert unconverged_reference(frame).tolist() == [False] * 4 + [True] * 2
    # Rows stored before the column, or without an estimate (TPE, plugins): unknown, not flagged.
    assert not unconverged_reference(frame.drop(columns="reference_rse")).any()
    assert not unconverged_reference(frame.assign(reference_rse=None)).any()
    assert not unconverged_reference(frame.assign(reference_rse=[[]] * len(frame))).any()
    # The threshold is on the squared error over the mean square: 2% is 4e-4 of it.
    assert 0.02**2 < MAX_REFERENCE_ERROR < 4095 / 4096


def test_an_unconverged_state_is_left_out_of_the_mse_statistics_and_counted_apart():
    row = summary_table(_frame()).set_index("estimator").loc["cv"]
    assert row["states"] == 3
    assert (row["mse_ratio_unconverged"], row["mse_ratio_undefined"]) == (1, 0)
    assert row["mse_ratio_worst"] == 2.8 and row["mse_ratio_worst_state"] == "seed 0"
    assert row["mse_ratio_median"] == pytest.approx(math.sqrt(2.8 * 3.2))
    assert row["median_point_mse_ratio_unconverged"] == 1
    # The variance ratio does not read the reference: all three states.
    assert row["var_ratio_worst"] == 0.093 and row["var_ratio_unconverged"] == 0
    rule = default_rule_table(_frame()).set_index("estimator").loc["cv"]
    assert rule["worst_state_mse_ratio"] == 2.8 and rule["unconverged_states"] == 1
    assert rule["undefined_states"] == 0
    assert "unref" in format_summary(_frame()).splitlines()[0]


def test_check_reports_an_mse_rule_on_an_unconverged_state_as_not_evaluable():
    """An MSE-ratio rule on seed 2 fails as on an undefined ratio, with the reason, not on the
    reference's error (0.093 < 1); a variance-ratio rule there is evaluated."""
    frame = _frame()
    results = evaluate(frame, [Threshold(estimator="cv", metric="mse_ratio", min=1.0)])
    assert [(r.state, r.passed) for r in results] == [
        ("seed 0, it 0", True),
        ("seed 1, it 0", True),
        ("seed 2, it 0", False),
    ]
    assert math.isnan(results[2].value) and "reference is not converged" in results[2].why
    assert "undefined" in format_results(results).splitlines()[3]
    variance = evaluate(frame, [Threshold(estimator="cv", metric="var_ratio", max=1.0)])
    assert variance[2].passed and variance[2].value == 0.093


def test_probe_rows_store_their_references_error_and_a_hartmann6_state_is_not_flagged():
    """The theta estimators' rows (``mc``) carry the marginal reference's relative errors per probe
    point, qLogEI's row 0 (its q = 1 reference is analytic); the diagnostics JSON does not."""
    import dataclasses

    from orthobench.probe import runner
    from orthobench.probe.states import ProbeState
    from tests.probe.test_runner import NUMERICS

    spec = dataclasses.replace(NUMERICS, estimators=("qlogei",))
    state = ProbeState("t", spec.tasks[0], "matern52-ard", 0, 0, spec.n_init)
    rows = runner.probe_state(state, spec, torch.device("cpu"))
    by_name = {r.estimator: r for r in rows}
    theta = np.asarray(by_name["mc"].reference_rse)
    assert theta.shape == (spec.n_probes,) and ((theta > 0) & (theta < 1)).all()
    assert by_name["qlogei"].reference_rse == [0.0] * spec.n_probes
    assert all("reference_rse" not in r.info for r in rows)
    frame = pd.DataFrame([dataclasses.asdict(r) for r in rows])
    assert not unconverged_reference(frame).any()


def test_the_equal_time_ratio_leaves_out_an_unconverged_state():
    """The equal-time ratio is of MSEs against the reference as well: seed 2's (whose reference is
    noise) set the ranking's worst equal-time ratio though the state was out of the MSE ratios."""
    from orthobench.probe.tables import TIME_BASELINE, ranking_table

    rows = []
    for seed, rse, cv_mse in ((0, 0.02, 1.0), (1, 0.02, 2.0), (2, math.sqrt(4095 / 4096), 50.0)):
        for name, s, seconds, mse in (
            (TIME_BASELINE, 32, 1.0, 4.0), (TIME_BASELINE, 64, 2.0, 2.0), ("cv", 64, 1.0, cv_mse),
        ):  # fmt: skip
            (row,) = _state_rows(seed, rse, {name: 1.0})
            rows.append(
                {**row, "mc_samples": s, "seconds_per_call": seconds, "mse": mse, "threads": 1}
            )
    frame = pd.DataFrame(rows)
    # cv costs what the baseline's S = 32 costs (1 s), where the baseline's MSE is 4.
    cv = ranking_table(frame).set_index("estimator").loc["cv"]
    assert cv["time_mse_ratio_worst"] == pytest.approx(4.0 / 2.0)  # seed 1, not seed 2's 0.08
    assert cv["time_mse_ratio_median"] == pytest.approx(math.sqrt(4.0 * 2.0))  # seeds 0, 1
