"""Batch BO steps: ``q`` points per step, their records, their resume mid-step, the check of the
optimizer's batch limit at load, and their evaluations running at once in worker processes and on
Dask (docs/design.md, "Batch steps and parallel evaluations")."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import ConfigError, OrthobenchError, ResultsError
from orthobench.execution import evaluation_workers, run_suite
from orthobench.executors import InlineExecutor, ProcessExecutor
from orthobench.executors._evaluations import ProcessEvaluations
from orthobench.loop import check_buildable, make_task, run_cell
from orthobench.optimizers.sobol import SobolSearch
from orthobench.results import EvaluationJournal, ResultStore, load_runs
from orthobench.seeding import derive_seed
from orthobench.suite import parse_suite
from tests.test_loop import cell, comparable

# Tasks of a light module of their own: evaluation processes import it, not this test module.
TASKS_SOURCE = '''
import json
import multiprocessing
import os
import time

import numpy as np

from orthobench.seeding import derive_seed
from orthobench.space import SearchSpace
from orthobench.tasks.base import Evaluation, Task


class Logged(Task):
    """A sphere on [-1, 1]^2 that sleeps ``seconds`` in each evaluation and appends it to
    ``log`` (one JSON line: its seed, process id, start and end times)."""

    optimal_value = 0.0

    def __init__(self, log="", seconds=0.0):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.log, self.seconds = log, seconds

    def wait(self, seed):
        return self.seconds

    def evaluate(self, x, *, seed, device):
        start = time.time()
        time.sleep(self.wait(seed))
        if self.log:
            with open(self.log, "a") as fh:
                line = {"seed": seed, "pid": os.getpid(), "start": start, "end": time.time()}
                fh.write(json.dumps(line) + "\\n")
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))


class Uneven(Logged):
    """Sleeps ``seconds`` times 1, 2 or 4 by the evaluation's seed."""

    def wait(self, seed):
        return self.seconds * (1, 2, 4)[seed % 3]


class Built(Logged):
    """Appends its process id to ``log`` (one JSON line) when it is built."""

    def __init__(self, log="", seconds=0.0):
        super().__init__(log, seconds)
        with open(log, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid()}) + "\\n")


class ExitsWhileBuilding(Logged):
    """Ends the process named ``process`` as it builds (killed while loading its data)."""

    def __init__(self, process=""):
        super().__init__()
        if multiprocessing.current_process().name == process:
            os._exit(3)


class BuiltOnlyIn(Logged):
    """Cannot be built in a process other than ``pid`` (data only that process can read)."""

    def __init__(self, pid=0):
        super().__init__()
        if os.getpid() != pid:
            raise FileNotFoundError("no data in this process")


class DiesInBo(Logged):
    """Ends its process at its first BO evaluation (a seed of the ``eval`` kind)."""

    def evaluate(self, x, *, seed, device):
        if seed not in {derive_seed(0, "eval-init", "dies", i) for i in range(2)}:
            os._exit(3)
        return super().evaluate(x, seed=seed, device=device)
'''

TASK = "batchtasks:Logged"


@pytest.fixture(autouse=True)
def batch_tasks(tmp_path_factory, monkeypatch) -> None:
    """Make :data:`TASKS_SOURCE` importable as ``batchtasks`` (here and in spawned processes)."""
    root = tmp_path_factory.mktemp("batchtasks")
    (root / "batchtasks.py").write_text(TASKS_SOURCE)
    monkeypatch.syspath_prepend(str(root))


class OnePoint(SobolSearch):
    """Sobol search that proposes one point per ask."""

    @property
    def max_batch(self) -> int:
        return 1


def batch_cell(q=4, n_init=4, budget=3, log=""):
    spec = cell(task=TASK, n_init=n_init, budget=budget)
    return dataclasses.replace(
        spec, task=dataclasses.replace(spec.task, params={"log": log} if log else {}), q=q
    )


def logged(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ----------------------------------------------------------------------------------------------
# Cells and suites


def test_a_q4_cell_makes_n_init_plus_4_budget_records_numbered_by_step():
    records = run_cell(batch_cell(q=4, n_init=4, budget=3))
    assert len(records) == 4 + 4 * 3
    assert [r.iteration for r in records] == list(range(16))
    assert [r.batch for r in records] == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    assert [r.phase for r in records] == ["init"] * 4 + ["bo"] * 12
    assert {r.q for r in records} == {4}
    walls = [r.wall_seconds for r in records]
    assert all(np.isfinite(walls)) and walls == sorted(walls) and walls[0] > 0
    # The step's timings are on each of its records; best_y is the running minimum.
    assert len({(r.fit_seconds, r.acq_seconds) for r in records[4:8]}) == 1
    np.testing.assert_allclose(
        [r.best_y for r in records], np.minimum.accumulate([r.y for r in records])
    )


def test_batch_evaluations_are_seeded_by_iteration_as_single_steps_are(tmp_path):
    log = tmp_path / "seeds.jsonl"
    spec = batch_cell(q=3, n_init=2, budget=2, log=str(log))
    records = run_cell(spec)
    one = run_cell(dataclasses.replace(spec, q=1, task=dataclasses.replace(spec.task, params={})))
    assert [r.x for r in records[:2]] == [r.x for r in one[:2]]  # the shared initial design
    seeds = [line["seed"] for line in logged(log)]
    assert seeds[:2] == [derive_seed(0, "eval-init", spec.task.label, i) for i in range(2)]
    assert seeds[2:] == [
        derive_seed(0, "eval", spec.task.label, spec.optimizer.label, i) for i in range(2, 8)
    ]


def test_q1_keeps_the_id_configuration_and_hash_of_cells_before_batch_steps():
    """The hash is pinned from the code before ``q`` existed: stored cells stay reusable."""
    spec = cell(n_init=5, budget=3)
    assert spec.q == 1 and spec.id == "hartmann6__sobol__seed0"
    assert "q" not in spec.config() and "q" not in spec.resolved_config()
    assert spec.config_hash == "d8c45c4d03e6af1b"
    batch = dataclasses.replace(spec, q=4)
    assert batch.id == "hartmann6__sobol__q4__seed0"
    assert batch.config()["q"] == 4 and batch.config_hash != spec.config_hash


def test_a_list_of_batch_sizes_sweeps_them_one_cell_each():
    data = {"name": "s", "budget": 2, "tasks": ["hartmann6"], "optimizers": ["sobol"]}
    assert [c.id for c in parse_suite({**data, "seeds": 2, "q": [1, 4]}).cells()] == [
        "hartmann6__sobol__seed0",
        "hartmann6__sobol__q4__seed0",
        "hartmann6__sobol__seed1",
        "hartmann6__sobol__q4__seed1",
    ]
    assert [c.q for c in parse_suite({**data, "q": 3}).cells()] == [3]
    assert [c.q for c in parse_suite(data).cells()] == [1]


# ----------------------------------------------------------------------------------------------
# The optimizer's batch limit, at load


def test_a_q_above_the_optimizers_batch_limit_is_refused_before_any_cell():
    spec = dataclasses.replace(cell(optimizer=f"{__name__}:OnePoint"), q=2)
    with pytest.raises(ConfigError, match=r"^optimizers\.OnePoint: .*at most 1 point.* q=2"):
        check_buildable([dataclasses.replace(spec, q=1), spec])
    check_buildable([dataclasses.replace(spec, q=1)])


def test_turbos_batch_limit_names_the_parameter_behind_it():
    """TuRBO makes batch proposals: its limit is n_candidates, and the refusal said "choose an
    optimizer with batch proposals"."""
    spec = dataclasses.replace(cell(optimizer="turbo", opt_params={"n_candidates": 2}), q=3)
    with pytest.raises(ConfigError, match="at most 2 point.*raise n_candidates to at least q"):
        check_buildable([spec])


#: Cells of q = 1 and q = 3 of an optimizer that proposes one point per step.
ONE_POINT_SUITE = f"""
    name: batch
    budget: 1
    n_init: 2
    q: [1, 3]
    tasks: [hartmann6]
    optimizers: ["{__name__}:OnePoint"]
    """


def test_the_cli_refuses_a_q_above_the_batch_limit_with_one_line_and_exit_2(write_suite, tmp_path):
    suite = write_suite(ONE_POINT_SUITE)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2, result.output
    (error,) = [line for line in result.output.splitlines() if "error" in line]
    assert error.startswith("orthobench: error: ") and "optimizers.OnePoint: " in error
    assert "at most 1 point(s) per BO step, but the suite asks q=3" in error
    assert not list(out.glob("runs/*.parquet"))


def _header(suite: Path, out: Path) -> str:
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "--workers", "4"])
    (header,) = [line for line in result.output.splitlines() if line.startswith("suite batch:")]
    return header


def test_the_run_header_counts_a_worker_per_evaluation_of_a_step(write_suite, tmp_path):
    """Two cells, q = 1 and q = 3, hold 4 workers: --workers 4 is not capped at the 2 cells."""
    delayed = ONE_POINT_SUITE.replace("[hartmann6]", "[{name: delayed, params: {seconds: 0}}]")
    header = _header(write_suite(delayed), tmp_path / "out")
    assert "(process, 4 worker(s), the evaluations of a BO step in parallel, " in header, header


def test_a_task_that_evaluates_in_microseconds_keeps_a_steps_evaluations_in_its_cell(
    write_suite, tmp_path
):
    """A q = 4 cell of a synthetic function held a worker per evaluation, for evaluations of
    microseconds: the suite ran one cell at a time, and 8 q = 4 cells on Hartmann6 took 59 s on
    ``--workers 2`` against 43 s on 1 (docs/benchmarks.md, "Cells of instant tasks on
    workers"). The cell evaluates them itself and holds one worker; a task that declares nothing
    (a plugin) or stands for an expensive one keeps its workers."""
    tasks = ["hartmann6", "gramacy", {"name": "delayed", "params": {"seconds": 0}}]
    tasks.append({"name": TASK, "label": "logged"})
    suite = parse_suite({"name": "s", "budget": 1, "q": 4, "tasks": tasks, "optimizers": ["sobol"]})
    executor = ProcessExecutor(workers=4)
    held = {c.task.label: evaluation_workers(executor, c) for c in suite.cells()}
    assert held == {"hartmann6": 1, "gramacy": 1, "delayed": 4, "logged": 4}
    header = _header(write_suite(ONE_POINT_SUITE), tmp_path / "out")  # Hartmann6, q = 1 and 3
    assert "(process, 2 worker(s)" in header and "in parallel" not in header, header


# ----------------------------------------------------------------------------------------------
# Resume mid-step


def _journal_lines(spec, path: Path) -> tuple[list, list[str]]:
    journal = EvaluationJournal(path, spec.config_hash)
    return run_cell(spec, journal=journal), path.read_text().splitlines(keepends=True)


def test_a_cell_killed_mid_step_reruns_only_the_missing_evaluations(tmp_path):
    """Step 2 of a q=4 cell lost positions 1 and 3 (the others journaled out of order, as
    parallel evaluations finish) and was never told: its other two are reused, the re-asked
    points are checked against them, and the cell equals an uninterrupted one."""
    log = tmp_path / "calls.jsonl"
    spec = batch_cell(q=4, n_init=4, budget=3, log=str(log))
    full, lines = _journal_lines(spec, tmp_path / "full.jsonl")
    assert len(lines) == 16
    states = [json.loads(line)["state"] is not None for line in lines]
    assert states == [False] * 7 + [True] + [False] * 3 + [True] + [False] * 3 + [True]
    log.unlink()
    killed = EvaluationJournal(tmp_path / "killed.jsonl", spec.config_hash)
    killed.path.write_text("".join(lines[:8] + [lines[10], lines[8]]))
    resumed = run_cell(spec, journal=killed)
    assert len(logged(log)) == 16 - 10
    assert comparable(resumed) == comparable(full)
    reused = [*range(9), 10]
    assert [resumed[i].wall_seconds for i in reused] == [full[i].wall_seconds for i in reused]
    # The clock resumes at step 1's end plus step 2's journaled evaluations; step 2 is asked again.
    resumed_at = full[7].wall_seconds + full[8].eval_seconds + full[10].eval_seconds
    assert min(resumed[i].wall_seconds for i in (9, 11, 12, 13, 14, 15)) > resumed_at
    assert [r.iteration for r, _ in killed.read()] == list(range(16))


def test_a_resume_whose_reasked_points_differ_from_the_journal_fails_in_one_line(tmp_path):
    spec = batch_cell(q=2, n_init=2, budget=2)
    _, lines = _journal_lines(spec, tmp_path / "full.jsonl")
    entry = json.loads(lines[2])
    entry["record"]["x"] = [0.123, 0.456]
    journal = EvaluationJournal(tmp_path / "bad.jsonl", spec.config_hash)
    journal.path.write_text("".join(lines[:2]) + json.dumps(entry) + "\n")
    with pytest.raises(ResultsError, match=r"iteration 2 is not the journaled one.*--force"):
        run_cell(spec, journal=journal)


def test_an_initial_design_point_unlike_the_journaled_one_is_not_blamed_on_the_optimizer(
    tmp_path,
):
    """The initial design is not asked of the optimizer: a journaled initial point that differs
    from the one the cell makes again (a task whose search space changed in its code, another
    torch's Sobol' sequence) is named as such, with --force as the way out."""
    spec = batch_cell(q=2, n_init=3, budget=2)
    _, lines = _journal_lines(spec, tmp_path / "full.jsonl")
    entry = json.loads(lines[1])
    entry["record"]["x"] = [0.123, 0.456]
    journal = EvaluationJournal(tmp_path / "bad.jsonl", spec.config_hash)
    journal.path.write_text(lines[0] + json.dumps(entry) + "\n")
    with pytest.raises(ResultsError) as info:
        run_cell(spec, journal=journal)
    message = str(info.value)
    assert message.startswith(
        f"cell {spec.id}: the initial design point of iteration 1 is not the journaled one ("
    )
    assert "optimizer" not in message and message.endswith("--force to start the cell over.")


def test_a_journal_written_before_the_batch_columns_resumes(tmp_path):
    """Journal lines without ``q``, ``batch`` and ``wall_seconds`` (written before they existed)
    read with them filled in and resume as before."""
    spec = cell(n_init=3, budget=3)
    full, lines = _journal_lines(spec, tmp_path / "full.jsonl")
    old = []
    for line in lines[:4]:
        entry = json.loads(line)
        for key in ("q", "batch", "wall_seconds"):
            del entry["record"][key]
        old.append(json.dumps(entry) + "\n")
    journal = EvaluationJournal(tmp_path / "old.jsonl", spec.config_hash)
    journal.path.write_text("".join(old))
    read = journal.read()
    assert [(r.q, r.batch) for r, _ in read] == [(1, 0)] * 3 + [(1, 1)]
    assert all(np.isnan(r.wall_seconds) for r, _ in read)
    resumed = run_cell(spec, journal=journal)
    assert comparable(resumed) == comparable(full)
    assert resumed[4].wall_seconds > 0  # the clock starts from 0 after an unknown one


# ----------------------------------------------------------------------------------------------
# Parallel evaluations


def test_executors_split_their_workers_between_cells_and_their_evaluations():
    assert InlineExecutor().evaluation_workers(4) == 1
    assert ProcessExecutor(workers=4).evaluation_workers(4) == 4
    assert ProcessExecutor(workers=8).evaluation_workers(4) == 4
    assert ProcessExecutor(workers=2).evaluation_workers(4) == 2
    assert ProcessExecutor(workers=4).evaluation_workers(1) == 1


def _suite(log: Path, seconds: float, q: int = 4, budget: int = 2):
    return parse_suite(
        {
            "name": "parallel",
            "n_init": q,
            "budget": budget,
            "q": q,
            "tasks": [
                {"name": TASK, "label": "logged", "params": {"log": str(log), "seconds": seconds}}
            ],
            "optimizers": ["sobol"],
        }
    )


def _overlapping_steps(lines: list[dict], q: int) -> list[bool]:
    """Per group of ``q`` evaluations (a step, in the order they started): whether all ran at
    one moment (the latest start before the earliest end)."""
    lines = sorted(lines, key=lambda line: line["start"])
    groups = [lines[i : i + q] for i in range(0, len(lines), q)]
    return [max(g["start"] for g in group) < min(g["end"] for g in group) for group in groups]


@pytest.mark.slow
def test_the_evaluations_of_a_step_overlap_in_evaluation_processes(tmp_path):
    """Two evaluation processes (the smallest pool: spawning them is what takes the time), each
    building the task once; the values are those of an inline run."""
    log = tmp_path / "times.jsonl"
    (spec,) = _suite(log, 0.5, q=2, budget=2).cells()
    records = run_cell(spec, evaluations=ProcessEvaluations(2, threads=1))
    lines = logged(log)
    assert len(lines) == 2 + 2 * 2
    assert _overlapping_steps(lines, 2) == [True] * 3
    assert len({line["pid"] for line in lines}) == 2
    assert comparable(records) == comparable(run_cell(spec))


@pytest.mark.slow
def test_every_evaluation_process_starts_when_the_cell_opens_them(tmp_path):
    """Started at its first evaluation, a process would add its start (seconds of imports) to a
    BO step's wall time: all of them start, and build the task, before the cell's evaluations
    (the first process to start once ran every start job while the others still built it)."""
    log = tmp_path / "built.jsonl"
    spec = batch_cell(q=3, n_init=3, budget=1)
    spec = dataclasses.replace(
        spec, task=dataclasses.replace(spec.task, name="batchtasks:Built", params={"log": str(log)})
    )
    task = make_task(spec)
    evaluations = ProcessEvaluations(3, threads=1)
    evaluations.open(spec, task, torch.device("cpu"), None)
    try:
        assert len(evaluations._pool._processes) == 3
        built_in = {line["pid"] for line in logged(log)} - {os.getpid()}
        assert built_in == set(evaluations._pool._processes)
    finally:
        evaluations.close()


@pytest.mark.slow
def test_the_last_evaluation_process_dying_while_the_others_start_fails_the_cell():
    """The others wait at the start barrier and the pool's manager, not woken by a result, never
    saw the last process spawned die: the cell hung. It fails in one line instead."""
    # The pool's processes are named by multiprocessing's counter: this run's next two.
    last = f"SpawnProcess-{next(multiprocessing.process._process_counter) + 2}"
    spec = batch_cell(q=2, n_init=2, budget=1)
    name, params = "batchtasks:ExitsWhileBuilding", {"process": last}
    spec = dataclasses.replace(spec, task=dataclasses.replace(spec.task, name=name, params=params))
    evaluations = ProcessEvaluations(2, threads=1)
    raised: list[BaseException] = []

    def open_them() -> None:
        try:
            evaluations.open(spec, make_task(spec), torch.device("cpu"), None)
        except BaseException as err:  # noqa: BLE001 -- inspected below
            raised.append(err)

    opener = threading.Thread(target=open_them, daemon=True)
    opener.start()
    opener.join(timeout=60)
    try:
        assert not opener.is_alive(), "the cell hung"
        assert len(raised) == 1 and "an evaluation process could not start" in str(raised[0])
    finally:
        evaluations.close()


@pytest.mark.slow
def test_an_evaluation_process_that_cannot_build_the_task_fails_the_cell_in_one_line():
    """The processes that did build it wait for it at their start; the cell fails at once."""
    spec = batch_cell(q=2, n_init=2, budget=1)
    spec = dataclasses.replace(
        spec,
        task=dataclasses.replace(
            spec.task, name="batchtasks:BuiltOnlyIn", params={"pid": os.getpid()}
        ),
    )
    evaluations = ProcessEvaluations(2, threads=1)
    with pytest.raises(OrthobenchError, match="an evaluation process could not start"):
        evaluations.open(spec, make_task(spec), torch.device("cpu"), None)


@pytest.mark.slow
def test_the_evaluations_of_a_step_overlap_on_the_pool_and_dask(tmp_path, parallel_executor):
    """``--workers 4`` and ``q = 4``: one cell at a time, its four evaluations at once."""
    Executor = parallel_executor
    log = tmp_path / "times.jsonl"
    suite = _suite(log, 1.0)
    summary = run_suite(
        suite,
        ResultStore(tmp_path / "out"),
        device="cpu",
        executor=Executor(workers=4),
        show_progress=False,
    )
    assert summary.count("ok") == 1, summary.failed
    lines = logged(log)
    assert len(lines) == 4 + 4 * 2
    assert _overlapping_steps(lines, 4) == [True] * 3
    if Executor is ProcessExecutor:  # each evaluation process built the task once
        assert len({line["pid"] for line in lines}) == 4
    frame = load_runs([tmp_path / "out"])
    assert frame["batch"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert frame["y"].tolist() == [r.y for r in run_cell(suite.cells()[0])]


@pytest.mark.slow
def test_an_evaluation_process_that_dies_fails_its_cell_in_one_line(tmp_path):
    """The cell fails, as an evaluation's exception fails it inline, and does not hang; its
    journal keeps what finished."""
    (spec,) = parse_suite(
        {
            "name": "dies",
            "n_init": 2,
            "budget": 1,
            "q": 2,
            "tasks": [{"name": "batchtasks:DiesInBo", "label": "dies"}],
            "optimizers": ["sobol"],
        }
    ).cells()
    journal = EvaluationJournal(tmp_path / "j.jsonl", spec.config_hash)
    start = time.monotonic()
    with pytest.raises(OrthobenchError, match=r"process evaluating iteration [23] died"):
        run_cell(spec, journal=journal, evaluations=ProcessEvaluations(2, threads=1))
    assert time.monotonic() - start < 60
    assert [r.iteration for r, _ in journal.read()] == [0, 1]


def test_starting_the_evaluation_processes_is_kept_off_the_cells_clock():
    """The reported bug: a q = 4 cell's first 1 s evaluation had wall_seconds 10.1, the 9 s of
    spawning its evaluation processes, which differ from cell to cell."""
    from orthobench.evaluation import Evaluations

    class SlowToOpen(Evaluations):
        def open(self, *args) -> None:
            time.sleep(1.0)
            super().open(*args)

    records = run_cell(cell(n_init=2, budget=1), "cpu", evaluations=SlowToOpen())
    assert len(records) == 3 and max(r.wall_seconds for r in records) < 0.9
