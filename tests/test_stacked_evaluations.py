"""Stacked evaluations (a suite's ``stack_evaluations``): the initial design and each q-batch
handed to the task's ``evaluate_batch`` at once, timeouts and wrong returns, the suite setting
kept out of the configuration hash and recorded in the cell's metadata."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import torch
import yaml

from orthobench.evaluation import Evaluations
from orthobench.execution import run_suite
from orthobench.executors._evaluations import StackedEvaluations, make_evaluations
from orthobench.loop import run_cell
from orthobench.results import EvaluationJournal, ResultStore, load_runs, read_metadata
from orthobench.space import SearchSpace
from orthobench.suite import parse_suite
from orthobench.tasks.base import Evaluation, Task
from tests.test_loop import cell, comparable


class Batched(Task):
    """A sphere whose ``evaluate_batch`` records the size of each call (the default loop)."""

    optimal_value = 0.0
    calls: list[int] = []  # noqa: RUF012 -- a test's log, shared by the instances a cell builds

    def __init__(self, seconds: float = 0.0, returns: str = "list") -> None:
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.seconds, self.returns = seconds, returns

    def evaluate(self, x, *, seed, device):
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2) + 1e-3 * (seed % 7)))

    def evaluate_batch(self, xs, *, seeds, device):
        Batched.calls.append(len(xs))
        time.sleep(self.seconds)
        evaluations = super().evaluate_batch(xs, seeds=seeds, device=device)
        if self.returns == "floats":
            return [e.y for e in evaluations]
        return evaluations[:-1] if self.returns == "short" else evaluations


class Plain(Batched):
    """The same task without its own ``evaluate_batch``."""

    evaluate_batch = Task.evaluate_batch


TASK = "tests.test_stacked_evaluations:Batched"


@pytest.fixture(autouse=True)
def no_calls():
    Batched.calls.clear()


def _cell(task: str = TASK, q: int = 3, **params):
    return dataclasses.replace(cell(task=task, n_init=4, budget=2, task_params=params), q=q)


def test_the_initial_design_and_each_batch_are_one_call_with_the_sequential_results():
    stacked = run_cell(_cell(), evaluations=StackedEvaluations())
    assert Batched.calls == [4, 3, 3]
    sequential = run_cell(_cell(), evaluations=Evaluations())
    assert Batched.calls == [4, 3, 3]  # one at a time: evaluate, never evaluate_batch
    assert comparable(stacked) == comparable(sequential)
    # Each point's eval_seconds is its share of its call's wall time.
    assert all(r.eval_seconds >= 0 for r in stacked)


def test_a_task_without_its_own_evaluate_batch_and_single_points_go_one_at_a_time():
    run_cell(_cell(task="tests.test_stacked_evaluations:Plain"), evaluations=StackedEvaluations())
    assert Batched.calls == []
    run_cell(_cell(q=1), evaluations=StackedEvaluations())
    assert Batched.calls == [4]  # the initial design only: a q = 1 step has one point


@pytest.fixture
def one_thread():
    """One torch thread for the cnn task's tiny networks (fastest, and immune to a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_the_point_left_of_a_stacked_step_is_evaluated_as_in_its_stack(tmp_path):
    """A stacked step interrupted after journaling all but its last point (a kill while the
    step is told) resumes with that point alone: evaluated as in its stack, not one at a time,
    so the resumed cell equals the uninterrupted one (the cnn task's modes part by rounding:
    here the last batch's loss)."""
    params = {"dataset": "digits", "batch_size": 8, "outlier_prob": 1.0}
    spec = dataclasses.replace(cell(task="cnn", n_init=2, budget=1, task_params=params), q=2)
    full = EvaluationJournal(tmp_path / "full.jsonl", spec.config_hash)
    uninterrupted = run_cell(spec, journal=full, evaluations=StackedEvaluations())
    killed = EvaluationJournal(tmp_path / "killed.jsonl", spec.config_hash)
    killed.path.write_text("".join(full.path.read_text().splitlines(keepends=True)[:3]))
    resumed = run_cell(spec, journal=killed, evaluations=StackedEvaluations())
    assert comparable(resumed) == comparable(uninterrupted)
    # The lone leftover (the last of iterations 4-6) is a call of one; the next step one of 3.
    spec = _cell()
    journal = EvaluationJournal(tmp_path / "batched.jsonl", spec.config_hash)
    run_cell(spec, journal=journal, evaluations=StackedEvaluations())
    journal.path.write_text("".join(journal.path.read_text().splitlines(keepends=True)[:6]))
    Batched.calls.clear()
    run_cell(spec, journal=journal, evaluations=StackedEvaluations())
    assert Batched.calls == [1, 3]


def test_a_batch_past_its_deadline_is_a_timeout_for_every_point():
    """0.1 s per point: each call (4, then 3 points) has 0.4 or 0.3 s and sleeps 1 s."""
    records = run_cell(_cell(seconds=1.0), evaluation_timeout=0.1, evaluations=StackedEvaluations())
    assert [r.status for r in records] == ["timeout"] * 10
    assert Batched.calls == [4, 3, 3]


def test_an_evaluate_batch_returning_too_few_fails_the_cell():
    with pytest.raises(TypeError, match="must return a list of 4 Evaluations"):
        run_cell(_cell(returns="short"), evaluations=StackedEvaluations())


@pytest.mark.parametrize(
    ("returns", "message"),
    [
        ("short", r"a list of 4 Evaluations, one per point, but returned a list of 3\.$"),
        ("floats", r"^`evaluate_batch` of task .* must return an Evaluation, but returned float"),
    ],
)
def test_what_evaluate_batch_returned_wrong_is_said_of_it(returns, message):
    """A list of floats was "`evaluate` ... must return an Evaluation"; a short list was shown
    as its truncated repr, without its length."""
    with pytest.raises(TypeError, match=message):
        run_cell(_cell(returns=returns), evaluations=StackedEvaluations())


def test_make_evaluations_stacks_only_one_at_a_time_evaluations():
    assert isinstance(make_evaluations("inline", 1, 1, stacked=True), StackedEvaluations)
    assert type(make_evaluations("inline", 1, 1)) is Evaluations
    assert not isinstance(make_evaluations("process", 2, 1, stacked=True), StackedEvaluations)


def test_a_cell_whose_evaluations_run_at_once_records_that_it_did_not_stack(tmp_path):
    """With ``--workers 2`` a step's evaluations run in two processes, unstacked, while the
    metadata recorded ``stack_evaluations: true``."""
    from orthobench.execution import CellJob

    cell = parse_suite(
        yaml.safe_load(
            f"name: s\nseeds: 1\nn_init: 4\nbudget: 2\nq: 3\ntasks: [{{name: '{TASK}'}}]\n"
            "optimizers: [sobol]\nstack_evaluations: true\n"
        )
    ).cells()[0]
    job = CellJob(cell, "cpu", 1, None, None, "process", 2, stack_evaluations=True)
    assert not job.stacks and job.metadata()["stack_evaluations"] is False
    alone = CellJob(cell, "cpu", 1, None, None, "process", 1, stack_evaluations=True)
    assert alone.stacks and alone.metadata()["stack_evaluations"] is True


def test_the_suite_setting_stays_out_of_the_cells_and_is_recorded(tmp_path):
    text = (
        f"name: s\nseeds: 1\nn_init: 4\nbudget: 2\nq: 3\ntasks: [{{name: '{TASK}', label: b}}]\n"
        "optimizers: [sobol]\n"
    )
    plain = parse_suite(yaml.safe_load(text))
    stacked = parse_suite(yaml.safe_load(text + "stack_evaluations: true\n"))
    assert stacked.stack_evaluations and not plain.stack_evaluations
    assert [c.config_hash for c in stacked.cells()] == [c.config_hash for c in plain.cells()]
    store = ResultStore(tmp_path)
    run_suite(stacked, store, device="cpu", show_progress=False)
    assert Batched.calls == [4, 3, 3]
    (path,) = store.runs_dir.glob("*.parquet")
    assert read_metadata(path)["stack_evaluations"] is True
    assert len(load_runs([tmp_path])) == 10
