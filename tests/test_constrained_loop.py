"""Constrained cells: records carry the constraint values, the bests count feasible points only,
old results without the columns still load, and unconstrained optimizers are refused at load."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import ConfigError
from orthobench.loop import check_buildable, run_cell
from orthobench.results import EvaluationJournal, ResultStore, load_runs
from orthobench.space import SearchSpace
from orthobench.suite import Cell, ComponentSpec
from orthobench.tasks.base import Evaluation, Task


class Corner(Task):
    """``sum(x^2)`` on [0, 1]^2, feasible only where ``x1 >= 0.8``: most low values are
    infeasible. Its feasible minimum 0.64 is at (0.8, 0)."""

    optimal_value = 0.64
    n_constraints = 1

    def __init__(self) -> None:
        super().__init__(SearchSpace.box([(0.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)), constraints=(0.8 - float(x[0]),))


class OneShort(Corner):
    """Declares two constraints but returns one."""

    n_constraints = 2


class FailedSimulation(Corner):
    """Its constraint is NaN where ``x2 > 0.5`` (a simulation that failed there)."""

    def evaluate(self, x, *, seed, device):
        c = 0.8 - float(x[0]) if x[1] <= 0.5 else float("nan")
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)), constraints=(c,))


class MinusInfinity(Corner):
    """Its constraint is -inf where ``x2 > 0.5``: a failed simulation, not a very feasible point."""

    def evaluate(self, x, *, seed, device):
        c = 0.8 - float(x[0]) if x[1] <= 0.5 else -float("inf")
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)), constraints=(c,))


class UnknownTrueValue(Task):
    """``sum(x^2)`` whose noise-free value is -inf (not computed) where ``x2 > 0.5``."""

    optimal_value = 0.0

    def __init__(self) -> None:
        super().__init__(SearchSpace.box([(0.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        y = float(np.sum(np.asarray(x) ** 2))
        return Evaluation(y=y, y_true=y if x[1] <= 0.5 else -float("inf"))


def cell(task=f"{__name__}:Corner", optimizer="sobol", n_init=5, budget=6) -> Cell:
    return Cell(
        suite="t",
        task=ComponentSpec(name=task, params={}, label=task.rsplit(":", 1)[-1]),
        optimizer=ComponentSpec(name=optimizer, params={}, label=optimizer),
        seed=0,
        n_init=n_init,
        budget=budget,
    )


def test_records_carry_the_constraints_and_the_bests_count_feasible_points_only():
    records = run_cell(cell())
    x0 = np.array([r.x[0] for r in records])
    y = np.array([r.y for r in records])
    np.testing.assert_allclose([r.constraints for r in records], (0.8 - x0)[:, None])
    feasible = x0 >= 0.8
    assert [r.feasible for r in records] == feasible.tolist()
    # The test can fail: an infeasible point comes first, and one is lower than every feasible.
    assert not feasible[0] and feasible.any() and y[~feasible].min() < y[feasible].min()
    best = np.minimum.accumulate(np.where(feasible, y, np.inf))
    expected = [None if np.isinf(b) else float(b) for b in best]
    assert [r.best_y for r in records] == expected
    assert [r.regret for r in records] == [None if b is None else b - 0.64 for b in expected]


def test_an_evaluation_with_another_number_of_constraints_fails_the_cell():
    with pytest.raises(TypeError, match="task 'OneShort' must return 2 constraint value"):
        run_cell(cell(task=f"{__name__}:OneShort"))


def test_an_evaluation_with_a_nan_constraint_is_invalid_and_infeasible_not_a_failed_cell():
    """A constrained optimizer is told only evaluations with finite constraint values: one told
    a NaN would fail the cell (``tell`` refuses it)."""
    records = run_cell(cell(task=f"{__name__}:FailedSimulation", optimizer="qlogei", budget=3))
    failed = [r for r in records if np.isnan(r.constraints[0])]
    assert failed and len(records) == 8  # the cell ran to its end
    assert all(r.status == "invalid" and not r.feasible for r in failed)
    assert all(r.status == "ok" for r in records if not np.isnan(r.constraints[0]))


def test_an_evaluation_with_a_minus_infinite_constraint_is_invalid_and_infeasible():
    """-inf <= 0 stored it as feasible, though it is invalid and never told."""
    records = run_cell(cell(task=f"{__name__}:MinusInfinity"))
    failed = [r for r in records if np.isinf(r.constraints[0])]
    assert failed and all(r.status == "invalid" and not r.feasible for r in failed)
    assert not Evaluation(y=1.0, constraints=(-float("inf"),)).feasible


def test_a_minus_infinite_true_value_does_not_end_the_cells_regret():
    """``min(best, -inf)`` made every later regret of the cell None."""
    records = run_cell(cell(task=f"{__name__}:UnknownTrueValue"))
    true = np.array([r.y_true for r in records])
    assert np.isinf(true).any() and np.isfinite(true[0])
    best = np.minimum.accumulate(np.where(np.isfinite(true), true, np.inf))
    assert [r.regret for r in records] == pytest.approx(best.tolist())


def test_unconstrained_records_are_feasible_without_constraints():
    records = run_cell(cell(task="hartmann6", budget=2))
    assert all(r.constraints == [] and r.feasible for r in records)
    assert all(r.best_y is not None for r in records)


def test_constrained_cells_are_stored_and_read_back(tmp_path):
    spec = cell(budget=2)
    records = run_cell(spec, journal=EvaluationJournal(tmp_path / "j.jsonl", "h"))
    assert [r for r, _ in EvaluationJournal(tmp_path / "j.jsonl", "h").read()] == records
    ResultStore(tmp_path).write_cell(spec, records, {}, 0.1)
    frame = load_runs([tmp_path])
    assert [list(c) for c in frame["constraints"]] == [r.constraints for r in records]
    assert frame["feasible"].tolist() == [r.feasible for r in records]


def test_results_stored_before_the_constraint_columns_read_as_unconstrained(tmp_path):
    spec = cell(task="hartmann6", budget=2)
    records = run_cell(spec)
    path = ResultStore(tmp_path).write_cell(spec, records, {}, 0.1)
    table = pq.read_table(path)
    old = table.drop_columns(["constraints", "feasible"])
    pq.write_table(old.replace_schema_metadata(table.schema.metadata), path)
    assert ResultStore(tmp_path).is_stored(spec)
    frame = load_runs([tmp_path])
    assert [list(c) for c in frame["constraints"]] == [[]] * len(records)
    assert frame["feasible"].all() and frame["best_y"].tolist() == [r.best_y for r in records]
    # A journal line without them, too.
    journal = EvaluationJournal(tmp_path / "old.jsonl", "h")
    for r in records:
        fields = {
            k: v for k, v in dataclasses.asdict(r).items() if k not in ("constraints", "feasible")
        }
        with open(journal.path, "a") as fh:
            fh.write(
                json.dumps(
                    {"schema_version": 3, "config_hash": "h", "record": fields, "state": None}
                )
                + "\n"
            )
    assert [r for r, _ in journal.read()] == records


def test_an_optimizer_without_constraint_handling_is_refused_before_any_cell_runs():
    with pytest.raises(ConfigError) as info:
        check_buildable([cell(optimizer="ucb")])
    assert info.value.field == "optimizers.ucb"
    assert info.value.reason == (
        "'ucb' does not handle constraints, but task 'Corner' has 1: choose an optimizer that "
        "does (mc-ei, orthobo, qlogei, sobol, tpe-optuna, turbo) or an unconstrained task."
    )  # it named sobol alone, hard-coded
    check_buildable([cell(optimizer="sobol"), cell(task="hartmann6", optimizer="ucb")])


def test_orthobo_with_an_unequally_weighted_point_set_is_refused_on_a_constrained_task():
    """It failed at the cell's first BO step, after its initial design (a training task's
    hours); an equal-weight rule and an unconstrained task are built as before."""
    sr3 = ComponentSpec(name="orthobo", params={"estimator": "sr3"}, label="o")
    with pytest.raises(ConfigError, match=r"'orthobo' on the constrained task 'Corner': .*'sr3'"):
        check_buildable([dataclasses.replace(cell(), optimizer=sr3)])
    owen = ComponentSpec(name="orthobo", params={"estimator": "qmc-owen"}, label="o")
    check_buildable([dataclasses.replace(cell(), optimizer=owen)])
    check_buildable([dataclasses.replace(cell(task="hartmann6"), optimizer=sr3)])


def test_the_cli_refuses_a_constrained_task_with_ucb_and_exits_2(write_suite, tmp_path):
    suite = write_suite(
        "name: x\nbudget: 1\nn_init: 2\ntasks: [gramacy]\noptimizers: [sobol, ucb]\n"
    )
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2, result.output
    assert "optimizers.ucb: 'ucb' does not handle constraints, but task 'gramacy' has 2" in (
        result.output
    )
    assert not list((tmp_path / "out").glob("runs/*.parquet"))


@pytest.mark.slow  # end to end; the default run has test_orthobo_constrained.py's batch step
def test_orthobo_runs_batches_on_a_constrained_task(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: c\nbudget: 2\nn_init: 4\nq: 2\ntasks: [gramacy]\n"
        "optimizers: [{name: orthobo, params: {theta_samples: 16, batch_theta_samples: 8, "
        "raw_samples: 16, num_restarts: 1}}]\n"
    )
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    rows = load_runs([tmp_path / "out"])
    bo = rows[rows["phase"] == "bo"]
    assert list(bo["batch"]) == [1, 1, 2, 2] and (bo["q"] == 2).all()
    assert all(len(c) == 2 for c in bo["constraints"])
