"""OrthoBO diagnostics read from the steps' info by value, through the typed
:class:`~orthobench.diagnostics.OrthoBOStep`, whichever version wrote the rows."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from orthobench.diagnostics import EnsembleWeights, OrthoBOStep
from orthobench.report.diagnostics import diagnostics_table, ensemble_steps

from .conftest import ensemble_info


def test_ensemble_steps_and_counts_by_hand():
    rows = [
        {"run_set": "s", "task": "t", "optimizer": "orthobo", "seed": 0, "iteration": i,
         "phase": "bo", "info": json.dumps(ensemble_info(i)),
         "fallback": "rbf-iso: Laplace Hessian not positive definite" if i == 2 else None}
        for i in range(3)
    ] + [{"run_set": "s", "task": "t", "optimizer": "qlogei", "seed": 0, "iteration": 0,
          "phase": "bo", "info": "{}", "fallback": None}]  # fmt: skip
    steps = ensemble_steps(pd.DataFrame(rows))
    assert len(steps) == 6 and set(steps["optimizer"]) == {"orthobo"}
    second = steps[steps["kernel"] == "matern52-ard"]["weight"].tolist()
    assert second == pytest.approx([0.5, 0.6, 0.7])
    assert steps["entropy"].iloc[0] == pytest.approx(math.log(2))
    table = diagnostics_table(steps).iloc[0]
    # Floored at steps 0 and 2 (even), indefinite at step 2, one jittered draw per step.
    assert (table["steps"], table["kernels"], table["floored_steps"]) == (3, 2, 2)
    assert (table["indefinite_steps"], table["fallback_steps"], table["jittered_draws"]) == (
        1,
        1,
        3,
    )
    assert table["min_eigenvalue"] == pytest.approx(0.0)  # 0.2 - 0.1 * 2
    assert table["final_entropy"] == pytest.approx(-(0.3 * math.log(0.3) + 0.7 * math.log(0.7)))


def test_a_batch_step_counts_once_in_the_diagnostics_and_the_fallbacks(tmp_path):
    """The reported bug: each of a step's q rows carries its info and fallback, and both tables
    counted rows: 2 steps of q = 4 read as 8 steps, 8 floored, and a fallback as 4."""
    from orthobench.report.data import load_results
    from orthobench.report.tables import final_table

    from .conftest import cell, write_cell

    spec = cell("s", "t", "orthobo", 0, n_init=2, budget=2, q=4)
    batches = [0, 0, 1, 1, 1, 1, 2, 2, 2, 2]  # the step of each evaluation
    fallback = "rbf-iso: Laplace Hessian not positive definite"
    write_cell(
        tmp_path,
        spec,
        [float(10 - i) for i in range(10)],
        infos=[ensemble_info(b) for b in batches],
        fallbacks=[fallback if b == 2 else None for b in batches],
    )
    runs = load_results([tmp_path]).runs
    table = diagnostics_table(ensemble_steps(runs)).iloc[0]
    # ensemble_info floors even steps: step 2 of the two.
    assert (table["steps"], table["floored_steps"], table["fallback_steps"]) == (2, 1, 1)
    assert final_table(runs, reference="orthobo (q=4)").iloc[0]["fallbacks"] == 1


# An OrthoBO step as the first version wrote it (commit 26f9c11): ``mc_samples``, since dropped,
# and none of the keys added later (``rb``, ``theta_samples``, ``n_evaluations``, the fit's).
FIRST_VERSION = {
    "estimator": "orth-shrink",
    "theta_sampling": "iid",
    "mc_samples": 64,
    "ensemble_kernels": ["matern52-ard"],
    "ensemble_weights": [1.0],
    "ensemble_entropy": 0.0,
    "ensemble_max_entropy": 0.0,
    "eig_floored": [True],
    "min_eigenvalue": [-0.25],
    "recenter_shift": [0.0],
    "jittered_draws": [2],
}


def test_a_step_of_the_first_version_reads_with_the_later_fields_none():
    step = OrthoBOStep.from_info(FIRST_VERSION)
    assert step.ensemble == EnsembleWeights(
        kernels=("matern52-ard",), weights=(1.0,), entropy=0.0, max_entropy=0.0
    )
    assert (step.eig_floored, step.min_eigenvalue, step.jittered_draws) == ((True,), (-0.25,), (2,))
    assert (step.rb, step.theta_samples, step.n_evaluations, step.fit_grad_norm) == (None,) * 4
    row = {"run_set": "s", "task": "t", "optimizer": "orthobo", "seed": 0, "iteration": 3,
           "phase": "bo", "info": json.dumps(FIRST_VERSION), "fallback": None}  # fmt: skip
    steps = ensemble_steps(pd.DataFrame([row]))
    assert steps[["kernel", "weight", "min_eigenvalue", "jittered_draws"]].values.tolist() == [
        ["matern52-ard", 1.0, -0.25, 2]
    ]
    assert steps["indefinite"].tolist() == [True] and steps["fallback"].tolist() == [False]


def test_keys_of_no_field_are_ignored():
    """Tolerated, not an error: the loop stores the task's extras in the same object as the
    optimizer's diagnostics (a training task's accuracy), and old rows hold dropped keys."""
    extras = {"accuracy": 0.91, "train_samples": 512}
    assert OrthoBOStep.from_info({**FIRST_VERSION, **extras}) == OrthoBOStep.from_info(
        FIRST_VERSION
    )


@pytest.mark.parametrize(
    "info",
    [
        {},
        # qlogei and TuRBO: the fit's keys, not the ensemble's.
        {"fit_device": "cpu", "acq_device": "cpu", "fit_grad_norm": 1e-6, "fit_stationary": True},
        # MC-TPE names an estimator too.
        {"bootstrap_fits": 32, "estimator": "orth", "estimate": 0.5},
    ],
)
def test_other_optimizers_steps_are_not_orthobo_steps(info):
    assert OrthoBOStep.from_info(info) is None
    row = {"run_set": "s", "task": "t", "optimizer": "x", "seed": 0, "iteration": 3,
           "phase": "bo", "info": json.dumps(info), "fallback": None}  # fmt: skip
    assert ensemble_steps(pd.DataFrame([row])).empty


def test_a_non_finite_eigenvalue_stored_as_null_is_not_indefinite():
    info = {**FIRST_VERSION, "min_eigenvalue": [None]}
    assert OrthoBOStep.from_info(info).min_eigenvalue == (None,)
    row = {"run_set": "s", "task": "t", "optimizer": "orthobo", "seed": 0, "iteration": 3,
           "phase": "bo", "info": json.dumps(info), "fallback": None}  # fmt: skip
    steps = ensemble_steps(pd.DataFrame([row]))
    assert steps["indefinite"].tolist() == [False] and steps["min_eigenvalue"].isna().all()
