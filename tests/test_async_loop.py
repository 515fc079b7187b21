"""Asynchronous cells: ``q`` evaluations kept running, a point asked with the running ones
pending as each finishes, each told and journaled alone; their resume, their refusal at load,
and their evaluations on worker processes and Dask (docs/design.md, "Asynchronous cells")."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import ConfigError, OrthobenchError, SuiteError
from orthobench.execution import run_suite
from orthobench.executors import InlineExecutor, ProcessExecutor
from orthobench.executors._evaluations import ProcessEvaluations
from orthobench.loop import _eval_seed, check_buildable, run_cell
from orthobench.optimizers.base import Suggestion
from orthobench.optimizers.sobol import SobolSearch
from orthobench.results import EvaluationJournal, ResultStore, load_runs
from orthobench.space import SearchSpace
from orthobench.suite import Cell, load_suite, parse_suite
from orthobench.tasks.base import Evaluation, Task
from tests.test_batch_loop import batch_tasks  # noqa: F401 -- autouse: its tasks importable
from tests.test_loop import cell, comparable

TASK = "batchtasks:Uneven"

# A task of a light module of its own, which evaluation processes import.
SCRIPTED_SOURCE = '''
import json
import os
import time

import numpy as np

from orthobench.space import SearchSpace
from orthobench.tasks.base import Evaluation, Task


class Scripted(Task):
    """A sphere on [-1, 1]^2 whose evaluation of seed s waits ``waits[str(s)]`` seconds (else
    ``rest``), then raises if s is ``raises``, ends its process if s is ``dies``, and else
    appends its point to ``log``."""

    optimal_value = 0.0

    def __init__(self, log="", waits=None, rest=0.0, raises=-1, dies=-1):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.log, self.waits, self.rest = log, waits or {}, rest
        self.raises, self.dies = raises, dies

    def evaluate(self, x, *, seed, device):
        time.sleep(self.waits.get(str(seed), self.rest))
        if seed == self.raises:
            raise ValueError(f"evaluation of seed {seed} failed")
        if seed == self.dies:
            os._exit(3)
        if self.log:
            with open(self.log, "a") as fh:
                fh.write(json.dumps([float(v) for v in x]) + "\\n")
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))
'''


@pytest.fixture
def scripted_task(tmp_path_factory, monkeypatch) -> None:
    """Make :data:`SCRIPTED_SOURCE` importable as ``asynctasks`` (here and in spawned processes)."""
    root = tmp_path_factory.mktemp("asynctasks")
    (root / "asynctasks.py").write_text(SCRIPTED_SOURCE)
    monkeypatch.syspath_prepend(str(root))


class PendingSpy(SobolSearch):
    """Sobol search that records in each suggestion's info the pending points it was asked with."""

    def _ask(self, n: int) -> Suggestion:
        suggestion = super()._ask(n)
        pending = [] if self.pending is None else self.pending.tolist()
        suggestion.info["pending"] = pending
        return suggestion


class NoPending(SobolSearch):
    accepts_pending = False


class WrongAt(Task):
    """A sphere on [-1, 1]^2 whose evaluation of seed ``wrong`` returns a bare float."""

    def __init__(self, wrong: int = -1):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.wrong = wrong

    def evaluate(self, x, *, seed, device):
        y = float(np.sum(np.asarray(x) ** 2))
        return y if seed == self.wrong else Evaluation(y=y)


def async_cell(q=3, n_init=3, budget=3, optimizer=f"{__name__}:PendingSpy", **task_params):
    spec = cell(task=TASK, optimizer=optimizer, n_init=n_init, budget=budget)
    return dataclasses.replace(
        spec, task=dataclasses.replace(spec.task, params=task_params), q=q, asynchronous=True
    )


def _info(record) -> dict:
    return json.loads(record.info)


# ----------------------------------------------------------------------------------------------
# The schedule


def test_an_asynchronous_cell_asks_one_point_per_finished_evaluation_with_the_others_pending():
    """Inline, evaluations finish in the order they were asked: the first ask proposes the q
    points of batch 1, then each finished evaluation is told and one point is asked with the
    q - 1 still running pending, until q x budget BO points are proposed."""
    records = run_cell(async_cell(q=3, n_init=3, budget=3))
    assert len(records) == 3 + 3 * 3
    assert [r.iteration for r in records] == list(range(12))
    assert [r.batch for r in records] == [0] * 3 + [1, 1, 1] + [2, 3, 4, 5, 6, 7]
    assert {r.q for r in records} == {3}
    bo = records[3:]
    units = [list(np.array(r.x) / 2 + 0.5) for r in bo]  # the task's box is [-1, 1]^2
    # The point of ask k (k >= 2) was asked with the q - 1 = 2 points before it still running.
    for k, record in enumerate(bo[3:], start=3):
        np.testing.assert_allclose(_info(record)["pending"], units[k - 2 : k], atol=1e-12)
    assert _info(bo[0])["pending"] == []
    np.testing.assert_allclose(
        [r.best_y for r in records], np.minimum.accumulate([r.y for r in records])
    )


def test_the_asynchronous_cell_has_its_own_id_and_hash_and_q1_stays_synchronous():
    spec = async_cell(q=3)
    assert spec.id == "Uneven__PendingSpy__q3__async__seed0"
    synchronous = dataclasses.replace(spec, asynchronous=False)
    assert spec.config_hash != synchronous.config_hash
    assert "asynchronous" not in synchronous.config()
    with pytest.raises(ConfigError, match=r"^asynchronous: .*needs q >= 2"):
        dataclasses.replace(spec, q=1)
    suite = parse_suite(
        {
            "name": "s",
            "budget": 2,
            "q": [1, 3],
            "asynchronous": True,
            "tasks": ["hartmann6"],
            "optimizers": ["sobol"],
        }
    )
    assert [(c.q, c.asynchronous) for c in suite.cells()] == [(1, False), (3, True)]


def test_asynchronous_with_stacked_evaluations_is_refused_at_load():
    data = {
        "name": "s",
        "budget": 2,
        "q": 2,
        "asynchronous": True,
        "stack_evaluations": True,
        "tasks": ["hartmann6"],
        "optimizers": ["sobol"],
    }
    with pytest.raises(SuiteError, match=r"asynchronous: .*stack_evaluations"):
        parse_suite(data)


def test_an_optimizer_without_pending_points_is_refused_for_an_asynchronous_cell():
    spec = async_cell(optimizer=f"{__name__}:NoPending")
    with pytest.raises(ConfigError, match=r"^optimizers\.NoPending: .*pending points"):
        check_buildable([dataclasses.replace(spec, asynchronous=False), spec])
    check_buildable([dataclasses.replace(spec, asynchronous=False)])


def test_an_evaluation_of_the_wrong_type_names_its_proposal_and_batch_not_an_iteration():
    """An asynchronous cell numbers its records as evaluations finish, so a failed evaluation's
    proposal index is no record's iteration (on workers, the record of that number is another
    point): the message names the proposal and the ``batch`` (the ask) that proposed it. Inline,
    proposal 7 is the one asked after proposal 4 finished: batch 3."""
    spec = cell(task=f"{__name__}:WrongAt", n_init=3, budget=3)
    spec = dataclasses.replace(
        spec,
        task=dataclasses.replace(spec.task, params={"wrong": _eval_seed(spec, 7)}),
        q=3,
        asynchronous=True,
    )
    with pytest.raises(TypeError) as info:
        run_cell(spec)
    assert re.fullmatch(
        r"`evaluate` of task 'WrongAt' must return an Evaluation, but returned float "
        r"[0-9.e-]+ \(at proposal 7, batch 3\)\.",
        str(info.value),
    ), info.value


# ----------------------------------------------------------------------------------------------
# Resume


def test_a_killed_asynchronous_cell_resumes_with_its_running_points_and_equals_an_uninterrupted_one(
    tmp_path,
):
    """Each BO evaluation is journaled with the optimizer's state and the points still running;
    a cell killed after any of them reruns only what was not journaled, the running points as
    they were asked, and ends as the uninterrupted cell (inline: the same order)."""
    log = tmp_path / "calls.jsonl"
    spec = async_cell(q=3, n_init=3, budget=3, log=str(log))
    full_journal = EvaluationJournal(tmp_path / "full.jsonl", spec.config_hash)
    full = run_cell(spec, journal=full_journal)
    lines = full_journal.path.read_text().splitlines(keepends=True)
    assert len(lines) == 12
    states = [json.loads(line)["state"] for line in lines]
    assert all(s is None for s in states[:3]) and all(s is not None for s in states[3:])
    assert [len(s["schedule"]["running"]) for s in states[3:]] == [2] * 7 + [1, 0]
    for kept in (3, 5, 10):
        log.unlink()
        journal = EvaluationJournal(tmp_path / f"killed{kept}.jsonl", spec.config_hash)
        journal.path.write_text("".join(lines[:kept]))
        resumed = run_cell(spec, journal=journal)
        assert len(json.loads(f"[{','.join(log.read_text().splitlines())}]")) == 12 - kept
        assert comparable(resumed) == comparable(full)
        assert [r.iteration for r, _ in journal.read()] == list(range(12))


# ----------------------------------------------------------------------------------------------
# Evaluations at once


def _busy_fraction(lines: list[dict], workers: int) -> float:
    """The share of time from the first evaluation's start to the last one's (after which no
    point is left to start) during which all ``workers`` were busy."""
    last = max(line["start"] for line in lines)
    times = sorted({t for line in lines for t in (line["start"], line["end"]) if t <= last})
    busy = sum(
        b - a
        for a, b in zip(times, times[1:], strict=False)
        if sum(line["start"] <= a and line["end"] >= b for line in lines) >= workers
    )
    return busy / (times[-1] - times[0])


@pytest.mark.slow
def test_asynchronous_evaluations_keep_every_process_busy_where_batches_wait(tmp_path):
    """Evaluations of 1, 2 or 4 units of time on 2 processes: a synchronous step waits for its
    longest evaluation, an asynchronous cell starts the next point as one finishes; both make
    the same number of evaluations, and the asynchronous one's are running two at a time
    through more of its span."""
    fractions = {}
    for asynchronous in (False, True):
        log = tmp_path / f"times-{asynchronous}.jsonl"
        spec = dataclasses.replace(
            async_cell(q=2, n_init=2, budget=4, log=str(log), seconds=0.1),
            asynchronous=asynchronous,
        )
        records = run_cell(spec, evaluations=ProcessEvaluations(2, threads=1))
        assert len(records) == 2 + 2 * 4
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        fractions[asynchronous] = _busy_fraction(lines[2:], 2)
    assert fractions[True] > 0.9 > fractions[False]


@pytest.mark.slow
def test_an_asynchronous_suite_runs_on_the_pool_and_dask(tmp_path, parallel_executor):
    log = tmp_path / "times.jsonl"
    suite = parse_suite(
        {
            "name": "asynchronous",
            "n_init": 2,
            "budget": 3,
            "q": 2,
            "asynchronous": True,
            "tasks": [{"name": TASK, "params": {"log": str(log), "seconds": 0.05}}],
            "optimizers": [f"{__name__}:PendingSpy"],
        }
    )
    summary = run_suite(
        suite, ResultStore(tmp_path / "out"), device="cpu", executor=parallel_executor(workers=2)
    )
    assert summary.count("ok") == 1, summary.failed
    frame = load_runs([tmp_path / "out"])
    assert frame["iteration"].tolist() == list(range(8))
    assert frame["batch"].tolist()[:4] == [0, 0, 1, 1]
    assert sorted(frame["batch"].tolist()[4:]) == [2, 3, 4, 5]
    assert len(Path(log).read_text().splitlines()) == 8


def scripted_cell(q=2, n_init=2, budget=2, **task_params):
    spec = cell(task="asynctasks:Scripted", n_init=n_init, budget=budget)
    return dataclasses.replace(
        spec, task=dataclasses.replace(spec.task, params=task_params), q=q, asynchronous=True
    )


def busy_at_first_bo_evaluation(seconds: float):
    """A progress callback that keeps the cell busy for ``seconds`` after its first BO
    evaluation is told and journaled (its third call, after the two initial points)."""
    calls = []

    def callback(n: int) -> None:
        calls.append(n)
        if len(calls) == 3:
            time.sleep(seconds)

    return callback


def run_on_pool_busy(spec: Cell, journal: EvaluationJournal, busy_seconds: float) -> None:
    """Run ``spec`` on a process pool of ``q`` workers, busy for ``busy_seconds`` after its
    first BO evaluation (:func:`busy_at_first_bo_evaluation`)."""
    run_cell(
        spec,
        on_evaluation=busy_at_first_bo_evaluation(busy_seconds),
        journal=journal,
        evaluations=ProcessEvaluations(spec.q, threads=1),
    )


@pytest.mark.slow
@pytest.mark.usefixtures("scripted_task")
def test_evaluations_finished_before_a_failing_one_are_journaled_on_the_pool(tmp_path):
    """Proposal 3 finishes first; while the cell handles it, proposal 4 finishes, then proposal
    2 raises, so the pool hands both back at once: the cell fails with proposal 2's error, and
    proposal 4 is journaled as 3 is (each evaluation that finished before the failure), not
    dropped with it."""
    log = tmp_path / "finished.jsonl"
    seed = [_eval_seed(scripted_cell(q=3), i) for i in range(5)]
    spec = scripted_cell(
        q=3,
        log=str(log),
        waits={
            str(seed[0]): 0,
            str(seed[1]): 0,
            str(seed[2]): 0.6,
            str(seed[3]): 0,
            str(seed[4]): 0.3,
        },
        rest=60.0,  # later proposals: still running when the cell fails
        raises=seed[2],
    )
    journal = EvaluationJournal(tmp_path / "j.jsonl", spec.config_hash)
    start = time.monotonic()
    with pytest.raises(ValueError, match=f"seed {seed[2]} failed"):
        run_on_pool_busy(spec, journal, busy_seconds=1.5)
    assert time.monotonic() - start < 30
    finished = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(finished) == 4  # the two initial points, proposals 3 and 4
    assert sorted(r.x for r, _ in journal.read()) == sorted(finished)


@pytest.mark.slow
@pytest.mark.usefixtures("scripted_task")
def test_an_evaluation_process_dying_while_the_cell_asks_fails_it_in_one_line(tmp_path):
    """Proposal 2 finishes; while the cell handles it, the process evaluating proposal 3 dies,
    so the next point is submitted to a broken pool: the cell fails with the one line naming
    the evaluation whose process died by its proposal and batch (as an evaluation's error does:
    no record has iteration 3 yet), not the pool's own error, and keeps its journal."""
    seed = [_eval_seed(scripted_cell(q=2), i) for i in range(4)]
    spec = scripted_cell(q=2, waits={str(seed[3]): 0.3}, dies=seed[3])
    journal = EvaluationJournal(tmp_path / "j.jsonl", spec.config_hash)
    with pytest.raises(OrthobenchError) as info:
        run_on_pool_busy(spec, journal, busy_seconds=1.0)
    assert "\n" not in str(info.value)
    assert "the process evaluating proposal 3, batch 1 died" in str(info.value), info.value
    assert [r.iteration for r, _ in journal.read()] == [0, 1, 2]


def test_the_shipped_asynchronous_suite_loads_and_builds():
    suite = load_suite(Path(__file__).resolve().parents[1] / "suites" / "batch-async.yaml")
    cells = suite.cells()
    assert {(c.q, c.asynchronous) for c in cells} == {(4, True)}
    check_buildable(cells)


@pytest.mark.slow
def test_the_cli_runs_an_asynchronous_suite_and_says_so(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"name: a\nn_init: 2\nbudget: 2\nq: 2\nasynchronous: true\n"
        f"tasks: [{TASK}]\noptimizers: ['{__name__}:PendingSpy']\n"
    )
    result = CliRunner().invoke(
        cli, ["run", str(path), "-o", str(tmp_path / "out"), "--workers", "2"]
    )
    assert result.exit_code == 0, result.output
    (header,) = [line for line in result.output.splitlines() if line.startswith("suite a:")]
    assert "(process, 2 worker(s), q evaluations kept running, " in header, header
    assert load_runs([tmp_path / "out"])["cell_id"].unique().tolist() == [
        "Uneven__PendingSpy__q2__async__seed0"
    ]


@pytest.mark.slow
def test_an_asynchronous_cell_of_an_instant_task_stores_the_inline_values_on_the_pool(tmp_path):
    """Its evaluations run in the cell's process (``Task.parallel_evaluations``), in the order
    asked: no evaluation process's timing decides which point the optimizer sees first."""
    suite = parse_suite(
        {
            "name": "a",
            "n_init": 3,
            "budget": 3,
            "q": 3,
            "asynchronous": True,
            "tasks": ["hartmann6"],
            "optimizers": ["qlogei"],
        }
    )
    for name, executor in (("inline", InlineExecutor()), ("pool", ProcessExecutor(workers=2))):
        run_suite(
            suite,
            ResultStore(tmp_path / name),
            device=torch.device("cpu"),
            executor=executor,
            show_progress=False,
        )
    inline, pool = (load_runs([tmp_path / n]).sort_values("iteration") for n in ("inline", "pool"))
    assert len(pool) == 3 + 3 * 3
    assert pool["y"].tolist() == inline["y"].tolist()
