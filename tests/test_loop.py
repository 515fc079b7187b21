"""The BO loop: shared initial design, seeding, records and regret."""

from __future__ import annotations

import json

import numpy as np
import pytest

from orthobench.loop import run_cell
from orthobench.space import SearchSpace
from orthobench.suite import Cell, ComponentSpec
from orthobench.tasks.base import Evaluation, Task


def cell(
    task="hartmann6",
    optimizer="sobol",
    seed=0,
    n_init=5,
    budget=3,
    task_params=None,
    opt_params=None,
    label=None,
):
    return Cell(
        suite="t",
        task=ComponentSpec(name=task, params=task_params or {}, label=task.rsplit(":", 1)[-1]),
        optimizer=ComponentSpec(
            name=optimizer, params=opt_params or {}, label=label or optimizer.rsplit(":", 1)[-1]
        ),
        seed=seed,
        n_init=n_init,
        budget=budget,
    )


def init_rows(records):
    return [(r.x, r.y) for r in records if r.phase == "init"]


def test_initial_design_is_shared_by_every_optimizer_of_a_seed(plugin):
    a = run_cell(cell(optimizer="sobol"))
    b = run_cell(cell(optimizer=f"{plugin}:CenterOptimizer"))
    c = run_cell(cell(optimizer="sobol", seed=1))
    assert init_rows(a) == init_rows(b)
    assert init_rows(a) != init_rows(c)
    assert [r.x for r in a if r.phase == "bo"] != [r.x for r in b if r.phase == "bo"]


def test_noisy_initial_observations_are_shared_too(plugin):
    noisy = {"noise_std": 0.3}
    a = run_cell(cell(task_params=noisy))
    b = run_cell(cell(optimizer=f"{plugin}:CenterOptimizer", task_params=noisy))
    assert init_rows(a) == init_rows(b)


def test_same_cell_twice_gives_the_same_values():
    spec = cell(
        optimizer="qlogei",
        n_init=4,
        budget=2,
        opt_params={"function_samples": 16, "raw_samples": 16, "num_restarts": 2},
    )
    first, second = run_cell(spec), run_cell(spec)
    assert [r.y for r in first] == [r.y for r in second]
    assert [r.x for r in first] == [r.x for r in second]


def test_records_follow_the_results_contract_and_regret_is_exact():
    records = run_cell(cell(task_params={"noise_std": 0.1}, n_init=4, budget=6))
    assert [r.iteration for r in records] == list(range(10))
    assert [r.phase for r in records] == ["init"] * 4 + ["bo"] * 6
    optimum = -3.32237
    y_true = np.array([r.y_true for r in records])
    regret = np.array([r.regret for r in records])
    np.testing.assert_allclose(regret, np.minimum.accumulate(y_true) - optimum)
    assert np.all(regret >= 0) and np.all(np.diff(regret) <= 0)
    best_y = np.array([r.best_y for r in records])
    np.testing.assert_allclose(best_y, np.minimum.accumulate([r.y for r in records]))
    assert all(r.status == "ok" and r.eval_seconds >= 0 for r in records)


class OffsetSphere(Task):
    """``f(x) = |x|^2`` on [-1, 1]^2 observed as ``f(x) + 1`` (a known, constant corruption)."""

    optimal_value = 0.0

    def __init__(self) -> None:
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        f = float(np.sum(np.asarray(x) ** 2))
        return Evaluation(y=f + 1.0, y_true=f, info={"note": "extra"})


def test_a_task_reporting_y_true_gets_its_regret_from_it():
    records = run_cell(cell(task=f"{__name__}:OffsetSphere", n_init=4, budget=2))
    y_true = np.array([r.y_true for r in records])
    np.testing.assert_allclose([r.y for r in records], y_true + 1.0)
    np.testing.assert_allclose([r.regret for r in records], np.minimum.accumulate(y_true))
    np.testing.assert_allclose([r.best_y for r in records], np.minimum.accumulate(y_true + 1.0))
    # The task's extras are stored as they are; y_true has its own column, not an info key.
    assert all(json.loads(r.info) == {"note": "extra"} for r in records if r.phase == "init")


def test_mixed_parameter_kinds_are_stored_in_native_units(plugin):
    records = run_cell(cell(task=f"{plugin}:Mixed", n_init=6, budget=4))
    xs = np.array([r.x for r in records])
    assert np.all((xs[:, 1] >= 1e-4) & (xs[:, 1] <= 1e-1))
    assert np.all(xs[:, 2] == np.round(xs[:, 2])) and set(xs[:, 2]) <= {1.0, 2.0, 3.0, 4.0}
    assert all(r.regret is None for r in records)


def test_optimizer_error_propagates(plugin):
    with pytest.raises(RuntimeError, match="simulated training crash"):
        run_cell(cell(task=f"{plugin}:make_sphere", task_params={"fail_at": 0.0}, n_init=8))


def test_ensemble_weights_are_recorded_per_iteration():
    params = {
        "kernel": ["linear", "matern52-iso"],
        "theta_samples": 8,
        "raw_samples": 16,
        "num_restarts": 2,
    }
    records = run_cell(cell(optimizer="orthobo", n_init=6, budget=3, opt_params=params))
    infos = [json.loads(r.info) for r in records if r.phase == "bo"]
    assert len(infos) == 3
    for info in infos:
        assert info["ensemble_kernels"] == ["linear", "matern52-iso"]
        assert sum(info["ensemble_weights"]) == pytest.approx(1.0)
        assert 0.0 <= info["ensemble_entropy"] <= info["ensemble_max_entropy"]
    assert infos[-1]["ensemble_weights"] != infos[0]["ensemble_weights"]
