"""Executors (inline, local process pool, Dask LocalCluster) on a tiny suite of the plugin task:
the same stored values, failures recorded and the rest stored, progress counted per evaluation."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from orthobench import execution
from orthobench.exceptions import OrthobenchError, OrthobenchWarning
from orthobench.executors import EXECUTORS, make_executor
from orthobench.optimizers.sobol import SobolSearch
from orthobench.progress import Progress
from orthobench.results import ResultStore, load_runs, read_metadata, where_run
from orthobench.suite import load_suite
from tests.helpers import install_plugin, process_running

# `crashy` raises at its first point with x_0 > 0, which a 3-point scrambled Sobol' design has.
SUITE = """
name: tiny
seeds: 1
n_init: 3
budget: 2
tasks:
  - {{name: "{plugin}:make_sphere", label: sphere}}
  - {{name: "{plugin}:make_sphere", params: {{fail_at: 0.0}}, label: crashy}}
optimizers:
  - sobol
  - {{name: "{plugin}:CenterOptimizer", label: center}}
"""
EVALUATIONS = 3 + 2  # per cell


def _run(suite, root, executor: str, monkeypatch: pytest.MonkeyPatch):
    """Run ``suite`` into ``root``; returns the summary and the run's :class:`Progress`."""
    made: list[Progress] = []

    class RecordingProgress(Progress):
        def __init__(self, total: int, **kwargs) -> None:
            super().__init__(total, **kwargs)
            self.steps: list[int] = []
            made.append(self)

        def advance(self, n: int = 1) -> None:
            self.steps.append(n)
            super().advance(n)

    monkeypatch.setattr(execution, "Progress", RecordingProgress)
    summary = execution.run_suite(
        suite,
        ResultStore(root),
        device=torch.device("cpu"),
        executor=make_executor(executor, workers=2),
        show_progress=False,
    )
    (progress,) = made
    return summary, progress


def _stored(root) -> pd.DataFrame:
    cols = ["cell_id", "iteration", "phase", "x", "y"]
    return load_runs([root])[cols].sort_values(cols[:2]).reset_index(drop=True)


@pytest.mark.parametrize(
    "executor",
    [
        "inline",
        "process",
        pytest.param("dask", marks=pytest.mark.slow),
    ],
)
def test_executor_stores_the_inline_values_records_failures_and_counts_progress(
    executor: str, plugin, write_suite, tmp_path, monkeypatch
) -> None:
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    suite = load_suite(write_suite(SUITE.format(plugin=plugin)))
    summary, progress = _run(suite, tmp_path / executor, executor, monkeypatch)

    ok = {o.unit.id for o in summary.outcomes if o.status == "ok"}
    failed = {o.unit.id for o in summary.failed}
    errors = {o.unit.id: o.error for o in summary.failed}
    assert ok == {c.id for c in suite.cells() if c.task.label == "sphere"} and len(ok) == 2, errors
    assert failed == {c.id for c in suite.cells() if c.task.label == "crashy"} and len(failed) == 2
    assert {o.error for o in summary.failed} == {"RuntimeError: simulated training crash"}
    # Failures are journalled with their traceback; only finished cells have a results file.
    entries = ResultStore(tmp_path / executor).runs_journal.entries()
    assert {e["cell_id"] for e in entries if e["status"] == "failed"} == failed
    assert all(
        "simulated training crash" in e["traceback"] for e in entries if e["cell_id"] in failed
    )
    assert {p.stem for p in (tmp_path / executor / "runs").glob("*.parquet")} == ok

    frame = _stored(tmp_path / executor)
    assert len(frame) == 2 * EVALUATIONS
    np.testing.assert_array_equal(frame["y"], [float(np.sum(np.square(x))) for x in frame["x"]])
    if executor != "inline":
        reference, _ = _run(suite, tmp_path / "inline", "inline", monkeypatch)
        assert reference.count("ok") == 2
        pd.testing.assert_frame_equal(frame, _stored(tmp_path / "inline"))

    # Progress counts the evaluations that ran: inline one by one as they finish, the parallel
    # executors a whole cell at a time as it ends; a crashed cell stops short in each.
    assert progress.total == 4 * EVALUATIONS
    assert 2 * EVALUATIONS <= progress.done < progress.total
    if executor == "inline":
        assert set(progress.steps) == {1}
    else:
        assert progress.steps.count(EVALUATIONS) == 2


def test_a_rerun_skips_stored_cells_and_retries_failed_ones(
    plugin, write_suite, tmp_path, monkeypatch
) -> None:
    suite = load_suite(write_suite(SUITE.format(plugin=plugin)))
    _run(suite, tmp_path, "inline", monkeypatch)
    before = _stored(tmp_path)
    summary, progress = _run(suite, tmp_path, "inline", monkeypatch)
    assert (summary.count("skipped"), summary.count("failed"), summary.count("ok")) == (2, 2, 0)
    assert progress.total == 2 * EVALUATIONS  # only the retried cells
    pd.testing.assert_frame_equal(_stored(tmp_path), before)


# A task whose evaluations misbehave as `fault` says; its info reports torch's thread count, and
# with a `log` each evaluation first appends "<fault> <pid>" to that file.
FAULTY_SOURCE = """
import os
import resource
import time

import numpy as np
import torch
from threadpoolctl import threadpool_info

from orthobench import Evaluation, SearchSpace, Task


class Faulty(Task):
    optimal_value = 0.0

    def __init__(self, fault: str = "none", log: str = ""):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.fault, self.log = fault, log

    def evaluate(self, x, *, seed, device):
        if self.log:
            with open(self.log, "a") as fh:
                fh.write(f"{self.fault} {os.getpid()}\\n")
        if self.fault == "abort":
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
            os.abort()
        if self.fault == "exit":
            raise SystemExit(3)
        if self.fault == "interrupt":
            raise KeyboardInterrupt
        if self.fault == "hang":
            time.sleep(3600)
        y = float(np.sum(np.asarray(x) ** 2))
        blas = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
        return Evaluation(y=y, info={"threads": torch.get_num_threads(), "blas": sorted(blas)})
"""


@pytest.fixture
def faulty(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Write a suite of ``Faulty`` tasks (one per fault, labelled by it) and return its path."""
    install_plugin(tmp_path / "faulty-plugin", "faultytask", FAULTY_SOURCE, monkeypatch)

    def write(*faults: str, seeds: int = 1, log: str = "", extra: str = ""):
        tasks = "".join(
            f'\n  - {{name: "faultytask:Faulty", params: {{fault: {f}, log: "{log}"}}, label: {f}}}'
            for f in faults
        )
        path = tmp_path / "faults.yaml"
        path.write_text(
            f"name: faults\nseeds: {seeds}\nn_init: 3\nbudget: 2\ntasks:{tasks}\noptimizers: [sobol]\n"
            + extra
        )
        return path

    return write


def _outcomes(summary: execution.RunSummary) -> dict[tuple[str, int], tuple[str, str | None]]:
    """``(task label, seed) -> (status, error)``."""
    return {(o.unit.task.label, o.unit.seed): (o.status, o.error) for o in summary.outcomes}


#: Every executor, the pool and Dask in the slow tier (each starts processes).
EXECUTORS_POOLS_SLOW = [
    "inline",
    pytest.param("process", marks=pytest.mark.slow),
    pytest.param("dask", marks=pytest.mark.slow),
]


def _quiet_run(
    suite, root, executor: str, workers: int = 2, cell_timeout: float | None = None, **kwargs
) -> execution.RunSummary:
    return execution.run_suite(
        suite,
        ResultStore(root),
        device=torch.device("cpu"),
        executor=make_executor(executor, workers=workers, timeout=cell_timeout),
        show_progress=False,
        **kwargs,
    )


def test_the_cores_warning_of_one_cell_names_what_competes(faulty, tmp_path, monkeypatch):
    """It said "the cells compete" of a run holding one cell (whose threads, or evaluation
    processes at q > 1, were what competed)."""
    suite = load_suite(faulty("none", seeds=1))
    monkeypatch.setattr(execution, "_cores", lambda: 1)
    with pytest.warns(OrthobenchWarning) as caught:
        _quiet_run(suite, tmp_path, "inline", threads_per_cell=2)
    (warning,) = [w for w in caught if "cores" in str(w.message)]
    assert str(warning.message) == (
        "1 worker(s) x 2 thread(s) per cell exceed the 1 cores: the cell's threads compete for "
        "them (slower, same values)."
    )


@pytest.mark.parametrize("executor", EXECUTORS_POOLS_SLOW)
def test_threads_per_cell_are_set_around_every_cell_restored_and_recorded(
    executor: str, faulty, tmp_path, monkeypatch
) -> None:
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    suite = load_suite(faulty("none", seeds=2))
    monkeypatch.setattr(execution, "_cores", lambda: 1)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.warns(OrthobenchWarning, match=r"thread\(s\) per cell exceed the 1 cores"):
            summary = _quiet_run(suite, tmp_path, executor, threads_per_cell=2)
        assert torch.get_num_threads() == 1  # restored after the inline cells
    finally:
        torch.set_num_threads(before)
    assert summary.count("ok") == 2, summary.failed
    frame = load_runs([tmp_path])
    assert {json.loads(info)["threads"] for info in frame["info"]} == {2}
    # scipy's OpenBLAS (L-BFGS-B's) too, whatever its default pool on this machine.
    assert {tuple(json.loads(info)["blas"]) for info in frame["info"]} == {(2,)}
    for path in (tmp_path / "runs").glob("*.parquet"):
        assert read_metadata(path)["threads_per_cell"] == 2


@pytest.mark.parametrize("executor", EXECUTORS_POOLS_SLOW)
def test_a_cell_stores_the_host_and_cpu_of_the_process_that_ran_it(
    executor: str, faulty, tmp_path, monkeypatch
) -> None:
    """Values are reproducible per thread count and CPU type, and a Dask worker may be another
    machine: each file records where its cell ran, not where the runner runs (here the runner's
    metadata names another host and CPU)."""
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    runner = {"host": "the-runner", "cpu": "the runner's CPU; AVX2"}
    real = execution.run_metadata
    monkeypatch.setattr(execution, "run_metadata", lambda device: {**real(device), **runner})
    summary = _quiet_run(load_suite(faulty("none")), tmp_path, executor)
    assert summary.count("ok") == 1, summary.failed
    (path,) = (tmp_path / "runs").glob("*.parquet")
    meta = read_metadata(path)
    assert {k: meta[k] for k in runner} == where_run()
    assert meta["cpu"].endswith(f"; {torch.backends.cpu.get_cpu_capability()}")


@pytest.mark.parametrize("executor", ["inline", pytest.param("process", marks=pytest.mark.slow)])
def test_an_objective_raising_system_exit_or_keyboard_interrupt_fails_only_its_cell(
    executor: str, faulty, tmp_path
) -> None:
    suite = load_suite(faulty("exit", "interrupt", "none"))
    outcomes = _outcomes(_quiet_run(suite, tmp_path, executor))
    assert outcomes == {
        ("exit", 0): ("failed", "SystemExit: 3"),
        ("interrupt", 0): ("failed", "KeyboardInterrupt"),
        ("none", 0): ("ok", None),
    }
    infos = [json.loads(i) for i in load_runs([tmp_path])["info"]]
    assert [(i["threads"], i["blas"]) for i in infos] == [(1, [1])] * 5


def _orthobench_run(suite, out, *options: str, **popen) -> subprocess.Popen:
    """Start ``orthobench run SUITE -o OUT -q OPTIONS`` (the environment's PYTHONPATH finds the
    plugin)."""
    command = [sys.executable, "-m", "orthobench", "run", str(suite), "-o", str(out), "-q"]
    return subprocess.Popen([*command, *options], text=True, **popen)


def _wait_for_evaluations(log, n: int, runner: subprocess.Popen) -> list[tuple[str, int]]:
    """The first ``n`` "<fault> <pid>" lines of ``log``, once the evaluations have written them."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and runner.poll() is None:
        lines = log.read_text().split("\n")[:-1] if log.exists() else []
        if len(lines) >= n:
            return [(fault, int(pid)) for fault, pid in (line.split() for line in lines[:n])]
        time.sleep(0.2)
    raise AssertionError(f"{n} evaluations did not start (runner exit code {runner.poll()})")


@pytest.mark.slow
def test_a_dying_worker_fails_its_cell_the_others_finish_and_run_exits_1(faulty, tmp_path) -> None:
    suite = faulty("abort", "none", seeds=2)
    runner = _orthobench_run(suite, tmp_path / "out", "--workers", "2", stderr=subprocess.PIPE)
    _, stderr = runner.communicate(timeout=600)
    assert runner.returncode == 1, stderr
    cells = {(c.task.label, c.seed): c.id for c in load_suite(suite).cells()}
    for seed in (0, 1):
        died = f"failed: {cells['abort', seed]}: worker process died (exit code -6: SIGABRT)"
        assert died in stderr.splitlines()
    stored = {p.stem for p in (tmp_path / "out" / "runs").glob("*.parquet")}
    assert stored == {cells["none", 0], cells["none", 1]}
    assert (tmp_path / "out" / "report.html").exists()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_pool_workers_exit_when_the_runner_is_killed(faulty, tmp_path) -> None:
    log = tmp_path / "evaluations.log"
    suite = faulty("hang", seeds=2, log=str(log))
    runner = _orthobench_run(suite, tmp_path / "out", "--workers", "2", stderr=subprocess.DEVNULL)
    try:
        workers = [pid for _, pid in _wait_for_evaluations(log, 2, runner)]
    finally:
        runner.kill()
        runner.wait()
    deadline = time.monotonic() + 10
    while any(map(process_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(process_running, workers))


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["inline", "process"])
def test_ctrl_c_exits_130_saying_what_is_stored_and_that_a_rerun_resumes(
    executor: str, faulty, tmp_path
) -> None:
    log = tmp_path / "evaluations.log"
    suite = faulty("none", "hang", log=str(log))
    runner = _orthobench_run(
        suite, tmp_path / "out", "--executor", executor, stderr=subprocess.PIPE
    )
    # The `none` cell's 5 evaluations, then the hanging one.
    (*_, (fault, pid)) = _wait_for_evaluations(log, EVALUATIONS + 1, runner)
    assert fault == "hang"
    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 130, stderr
    assert stderr.splitlines()[1:] == [
        "orthobench: interrupted: 1 of 2 cells stored (1 by this run); rerun the same command "
        "to resume."
    ]
    assert not process_running(pid)


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["inline", "process", "dask"])
def test_a_cell_past_the_timeout_is_stopped_and_stored_as_failed(
    executor: str, faulty, tmp_path
) -> None:
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    suite = load_suite(faulty("hang", "none"))
    start = time.monotonic()
    outcomes = _outcomes(_quiet_run(suite, tmp_path, executor, cell_timeout=3.0))
    assert time.monotonic() - start < 120
    assert outcomes[("hang", 0)][0] == "failed"
    assert outcomes[("hang", 0)][1].startswith(
        "timed out: still running after the cell timeout of 3 s"
    )
    assert outcomes[("none", 0)] == ("ok", None)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suite_timeout", "options"),
    [("3", ()), ("100000", ("--cell-timeout", "3"))],
    ids=["suite", "option-overrides-suite"],
)
def test_the_suite_timeout_or_the_option_over_it_stops_a_hung_cell(
    suite_timeout: str, options: tuple[str, ...], faulty, tmp_path
) -> None:
    suite = faulty("hang", "none", extra=f"timeout_s: {suite_timeout}\n")
    runner = _orthobench_run(suite, tmp_path / "out", *options, stderr=subprocess.PIPE)
    _, stderr = runner.communicate(timeout=300)
    assert runner.returncode == 1, stderr
    cells = {c.task.label: c.id for c in load_suite(suite).cells()}
    assert (
        f"failed: {cells['hang']}: timed out: still running after the cell timeout of 3 s; "
        "its process was stopped"
    ) in stderr.splitlines()
    assert {p.stem for p in (tmp_path / "out" / "runs").glob("*.parquet")} == {cells["none"]}


@pytest.mark.parametrize(
    ("suite_timeouts", "options", "expected"),
    [
        ("", (), (None, None)),
        ("timeout_s: 30\nevaluation_timeout_s: 2.5\n", (), (30, 2.5)),
        ("timeout_s: 30\n", ("--cell-timeout", "7"), (7.0, None)),
    ],
    ids=["none", "suite", "option-overrides-suite"],
)
def test_run_takes_the_time_limits_from_the_suite_and_cell_timeout_overrides_it(
    suite_timeouts: str, options, expected, faulty, tmp_path, monkeypatch
) -> None:
    from click.testing import CliRunner

    from orthobench.cli import cli

    given = {}

    def fake_run_suite(suite, store, **kwargs):
        given.update(kwargs)
        raise execution.RunInterrupted(execution.RunSummary())

    monkeypatch.setattr(execution, "run_suite", fake_run_suite)
    suite = faulty("none", extra=suite_timeouts)
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out"), *options])
    assert result.exit_code == 130, result.output
    assert (given["executor"].timeout, given["evaluation_timeout"]) == expected


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e8"])
def test_a_bad_cell_timeout_is_a_usage_error(value: str, faulty, tmp_path) -> None:
    from click.testing import CliRunner

    from orthobench.cli import cli

    result = CliRunner().invoke(cli, ["run", str(faulty("none")), "--cell-timeout", value])
    assert result.exit_code == 2
    assert "Invalid value for '--cell-timeout'" in result.output


@pytest.mark.parametrize("executor", ["inline", pytest.param("process", marks=pytest.mark.slow)])
def test_evaluations_past_the_evaluation_timeout_are_stored_as_timed_out(
    executor: str, faulty, tmp_path
) -> None:
    """Every evaluation of `hang` sleeps for an hour: each is stopped after 0.3 s and the cell is
    stored with all five timed out; the timeout is in the cells' metadata."""
    suite = load_suite(faulty("hang", "none"))
    start = time.monotonic()
    summary = _quiet_run(suite, tmp_path, executor, evaluation_timeout=0.3)
    assert time.monotonic() - start < 60
    assert _outcomes(summary) == {("hang", 0): ("ok", None), ("none", 0): ("ok", None)}
    frame = load_runs([tmp_path])
    statuses = frame.groupby("task")["status"].agg(list).to_dict()
    assert statuses == {"hang": ["timeout"] * EVALUATIONS, "none": ["ok"] * EVALUATIONS}
    assert frame.loc[frame["task"] == "hang", "y"].isna().all()
    for path in (tmp_path / "runs").glob("*.parquet"):
        assert read_metadata(path)["evaluation_timeout_s"] == 0.3


@pytest.mark.slow
def test_dask_warns_that_it_cannot_enforce_the_evaluation_timeout(faulty, tmp_path) -> None:
    pytest.importorskip("dask.distributed")
    suite = load_suite(faulty("none"))
    with pytest.warns(OrthobenchWarning, match=r"timeout of 0.3 s is not enforced on Dask"):
        summary = _quiet_run(suite, tmp_path, "dask", workers=1, evaluation_timeout=0.3)
    assert summary.count("ok") == 1, summary.failed
    (path,) = (tmp_path / "runs").glob("*.parquet")
    assert read_metadata(path)["evaluation_timeout_s"] is None


@pytest.mark.slow
def test_a_dying_dask_worker_fails_its_cell_and_the_others_finish(faulty, tmp_path) -> None:
    pytest.importorskip("dask.distributed")
    suite = load_suite(faulty("abort", "none", seeds=2))
    outcomes = _outcomes(_quiet_run(suite, tmp_path, "dask"))
    died = ("failed", "worker process died (Dask KilledWorker)")
    assert outcomes == {
        ("abort", 0): died,
        ("abort", 1): died,
        ("none", 0): ("ok", None),
        ("none", 1): ("ok", None),
    }


@pytest.mark.slow
def test_a_gp_optimizer_gives_identical_values_inline_in_a_pool_and_on_dask(
    write_suite, tmp_path
) -> None:
    """The issue's case (Hartmann6, qLogEI, 2 seeds, 2 BO steps), at one thread per cell."""
    pytest.importorskip("dask.distributed")
    suite = load_suite(
        write_suite(
            """
            name: same
            seeds: 2
            n_init: 4
            budget: 2
            tasks: [hartmann6]
            optimizers:
              - {name: qlogei, params: {function_samples: 64, raw_samples: 64, num_restarts: 2}}
            """
        )
    )
    frames = {}
    for executor in EXECUTORS:
        summary = _quiet_run(suite, tmp_path / executor, executor)
        assert summary.count("ok") == 2, summary.failed
        frames[executor] = _stored(tmp_path / executor)
    assert (frames["inline"]["phase"] == "bo").sum() == 2 * 2
    pd.testing.assert_frame_equal(frames["process"], frames["inline"], check_exact=True)
    pd.testing.assert_frame_equal(frames["dask"], frames["inline"], check_exact=True)


def test_run_suite_holds_the_results_directory(faulty, tmp_path) -> None:
    suite = load_suite(faulty("none"))
    with ResultStore(tmp_path).open_for_writing():
        with pytest.raises(OrthobenchError, match="in use by another orthobench run"):
            _quiet_run(suite, tmp_path, "inline")
    assert not (tmp_path / "runs").exists()


class LowHigh(SobolSearch):
    """A plugin whose constructor refuses ``low > high`` and declares no ``check_params`` hook, so
    the suite loads and only building it finds the rule (as with a plugin written before hooks)."""

    def __init__(self, dim: int, *, low: int = 0, high: int = 1, **kwargs) -> None:
        if low > high:
            raise ValueError(f"`low <= high` must hold, but got ({low=}, {high=}).")
        super().__init__(dim, **kwargs)


def test_an_optimizer_whose_parameters_do_not_combine_stops_the_run_before_any_cell(
    write_suite, tmp_path
) -> None:
    """A constructor that refuses its parameters stops the run at ``optimizers.<label>`` before
    any cell runs (the sobol cells too)."""
    suite = load_suite(
        write_suite(
            f"""
            name: unbuildable
            seeds: 2
            n_init: 4
            budget: 1
            tasks: [hartmann6]
            optimizers:
              - sobol
              - {{name: "{__name__}:LowHigh", label: crossed, params: {{low: 2, high: 1}}}}
            """
        )
    )
    with pytest.raises(OrthobenchError) as err:
        _quiet_run(suite, tmp_path, "inline")
    assert str(err.value).startswith(
        "optimizers.crossed: cannot be built for task 'hartmann6': `low <= high` must hold, but "
        "got (low=2, high=1)."
    )
    assert load_runs([tmp_path]).empty


REGISTERED_TASK = """
from orthobench.tasks.synthetic import hartmann6


def registered_task():
    return hartmann6()
"""


def _registered_suite(tmp_path, monkeypatch, factory) -> Path:
    """A suite naming ``my-task``, registered in this process only (``TASKS.register``)."""
    from orthobench.registry import TASKS

    monkeypatch.setattr(TASKS, "_registered", {**TASKS._registered})
    TASKS.register("my-task", factory)
    suite = tmp_path / "registered.yaml"
    suite.write_text(
        "name: reg\nseeds: 2\nn_init: 2\nbudget: 1\ntasks: [my-task]\noptimizers: [sobol]\n"
    )
    return suite


@pytest.mark.parametrize("executor", EXECUTORS_POOLS_SLOW)
def test_a_task_registered_in_the_runner_is_known_to_the_workers(
    executor: str, tmp_path, monkeypatch
) -> None:
    """Its workers are spawned interpreters: before the cells carried the registration, every
    cell failed there with 'Unknown task'."""
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    install_plugin(tmp_path / "plugins", "registered_plugin", REGISTERED_TASK, monkeypatch)
    from registered_plugin import registered_task

    suite = load_suite(_registered_suite(tmp_path, monkeypatch, registered_task))
    summary = _quiet_run(suite, tmp_path / "out", executor)
    assert summary.count("ok") == 2, summary.failed


def test_a_registered_lambda_is_refused_before_a_worker_starts(tmp_path, monkeypatch) -> None:
    """A lambda cannot be pickled to a worker: one error naming the cell, not a traceback from
    the pool's pipe."""
    from orthobench.tasks.synthetic import hartmann6

    suite = load_suite(_registered_suite(tmp_path, monkeypatch, lambda: hartmann6()))
    with pytest.raises(
        OrthobenchError,
        match=r"cell my-task__sobol__seed0 cannot be sent to a "
        r"worker process \(.*lambda.*\): register a module-level",
    ):
        _quiet_run(suite, tmp_path / "out", "process")
    assert _quiet_run(suite, tmp_path / "inline", "inline").count("ok") == 2
