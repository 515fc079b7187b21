"""The Dask executor's faults a review found with a real cluster: finished cells computed again
after a worker died, cells running on after Ctrl-C, a dead evaluation worker's raw Dask error,
a module the workers cannot import, and the progress of a failed cell.

Each test runs an in-process ``LocalCluster`` given as ``--scheduler`` (its workers are threads
of this process: the tests' jobs and monkeypatches reach them)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch

from orthobench.exceptions import OrthobenchError, OrthobenchWarning
from orthobench.executors import DaskExecutor, Job
from tests.helpers import KeptResults
from tests.test_execution_dask import _TagJob, _Unit

pytest.importorskip("dask.distributed")


@pytest.fixture
def scheduler():
    """The address of an in-process cluster of two one-thread workers."""
    from dask.distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        yield cluster


# What the jobs below did, by unit id: the steps they reported and whether they ended.
_DONE: dict[str, dict] = {}


@dataclasses.dataclass(frozen=True)
class _StepsJob(Job):
    """Reports ``steps`` progress units, one each ``seconds``; with ``fail``, raises after them."""

    unit: _Unit
    device: str = "cpu"
    threads: int = 1
    steps: int = 4
    seconds: float = 0.0
    fail: bool = False
    log: str = ""  # a file it appends a line to at each step (a worker process's steps)

    progress_unit: ClassVar[str] = "evaluations"

    @property
    def size(self) -> int:
        return 2 * self.steps if self.fail else self.steps

    def metadata(self) -> dict:
        return {}

    def run(self, on_progress) -> list:
        done = _DONE.setdefault(self.unit.id, {"steps": 0, "ended": False})
        try:
            for _ in range(self.steps):
                time.sleep(self.seconds)
                done["steps"] += 1
                if self.log:
                    with open(self.log, "a") as fh:
                        fh.write("step\n")
                if on_progress is not None:
                    on_progress(1)
        finally:
            done["ended"] = True
        if self.fail:
            raise RuntimeError(f"failed after {self.steps} steps")
        return [self.steps]


class _Counted(KeptResults):
    """Keeps results and counts progress; runs inline jobs as they come."""

    def running(self, job):
        return contextlib.nullcontext()

    def __init__(self) -> None:
        super().__init__()
        self.progress = SimpleNamespace(done=0)
        self.progress.advance = lambda n: setattr(self.progress, "done", self.progress.done + n)


def test_a_finished_cells_future_is_released_while_the_run_goes_on(scheduler):
    """The reported bug: every finished future was kept until the run ended, so Dask kept its
    result and, when the worker holding it died, ran the stored cell again elsewhere (a stored
    cell's evaluations ran twice, three times with two deaths). The scheduler must forget a
    cell once it is stored, while the others still run."""
    forgotten = {}

    class Session(KeptResults):
        def finish(self, job, result) -> None:
            super().finish(job, result)
            if job.unit.id == "quick":
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline and any(
                    "-quick-" in str(key) for key in scheduler.scheduler.tasks
                ):
                    time.sleep(0.01)
                forgotten["quick"] = not any("-quick-" in str(k) for k in scheduler.scheduler.tasks)

    jobs = [_TagJob(_Unit("quick"), "cpu", "quick"), _TagJob(_Unit("slow"), "cpu", "slow", "", 1.0)]
    session = Session()
    DaskExecutor(scheduler=scheduler.scheduler_address).run(jobs, session)
    assert session.results["quick"].records == ["quick"]
    assert forgotten == {"quick": True}


@pytest.mark.slow
def test_an_interrupted_run_stops_its_job_on_the_external_cluster(tmp_path, monkeypatch):
    """The reported bug: Ctrl-C closed the client, and the cell in flight ran all its
    evaluations to its end on the cluster, for nothing (the rerun computes it again). It must
    stop at its next evaluation (checked each second), and the run say that one running there
    finishes first. A worker process of its own: an in-process worker would ask the runner's
    closed client."""
    import dask.distributed
    from dask.distributed import LocalCluster

    log = tmp_path / "steps.log"
    steps = lambda: len(log.read_text().splitlines()) if log.exists() else 0  # noqa: E731

    def ctrl_c_once_running(*args, **kwargs):
        deadline = time.monotonic() + 60.0
        while steps() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        raise KeyboardInterrupt

    monkeypatch.setattr(dask.distributed, "wait", ctrl_c_once_running)
    job = _StepsJob(_Unit("long"), steps=60, seconds=0.1, log=str(log))
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        with (
            pytest.warns(OrthobenchWarning, match="an evaluation already running there finishes"),
            pytest.raises(KeyboardInterrupt),
        ):
            DaskExecutor(scheduler=cluster.scheduler_address).run([job], KeptResults())
        time.sleep(4.0)  # the job's next check, or (before the fix) 40 more steps
        ran = steps()
    assert ran < 25, ran


@dataclasses.dataclass(frozen=True)
class _EvaluatingJob(_StepsJob):
    """Evaluates one point by Dask evaluations, as a batch cell's step does."""

    def run(self, on_progress) -> list:
        from orthobench.evaluation import EvaluationRequest
        from orthobench.executors._evaluations import make_evaluations

        evaluations = make_evaluations("dask", 2, 1)
        evaluations._cell, evaluations._device = self.unit, torch.device("cpu")
        request = EvaluationRequest(0, 3, np.zeros(2), 0)
        return list(evaluations.run([request]))


def _worker_dies(cell, device, threads, request):
    """A Dask evaluation (in place of :func:`_evaluate_on_dask`) whose worker died under it."""
    from distributed.scheduler import KilledWorker

    raise KilledWorker("with_warnings-0123", SimpleNamespace(address="tcp://127.0.0.1:1"), 0)


def test_a_dead_evaluation_worker_fails_its_cell_with_the_pools_line(scheduler, monkeypatch):
    """The reported bug: the cell's error was Dask's 416-character KilledWorker text naming an
    internal key; the process pool says which evaluation's process died."""
    from orthobench.executors import _evaluations

    monkeypatch.setattr(_evaluations, "_evaluate_on_dask", _worker_dies)
    session = KeptResults()
    DaskExecutor(scheduler=scheduler.scheduler_address).run([_EvaluatingJob(_Unit("c1"))], session)
    assert session.results["c1"].error == (
        "OrthobenchError: cell c1: the process evaluating iteration 3 died (a crash, a kill, "
        "os._exit)."
    )


@dataclasses.dataclass(frozen=True)
class _PluginUnit(_Unit):
    """A unit whose task a suite names by its import path (``module:attr``)."""

    task: SimpleNamespace = None


def test_a_module_the_workers_cannot_import_is_one_line_before_any_cell_runs(scheduler):
    """The reported bug: a task module next to the suite file is on the runner's path only;
    every cell ran and failed on the external cluster with "not next to the suite file"."""
    _DONE.pop("plugin", None)
    job = _StepsJob(_PluginUnit("plugin", task=SimpleNamespace(name="orthobench_nothere:Task")))
    with pytest.raises(OrthobenchError) as err:
        DaskExecutor(scheduler=scheduler.scheduler_address).run([job], KeptResults())
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("the Dask worker ") and message.endswith(
        f"of {scheduler.scheduler_address} cannot import the module 'orthobench_nothere' "
        "that the cells need (no such module): install it there, or put its folder on the "
        "workers' PYTHONPATH."
    )
    assert "plugin" not in _DONE


def test_a_failed_cell_counts_the_evaluations_it_ran_as_inline(scheduler):
    """The reported bug: the pool and Dask counted a failed cell's evaluations that never ran
    as done (``8/8 evaluations (100%)`` after 4 ran); inline counts those that ran."""
    from orthobench.executors import InlineExecutor

    counts = []
    for executor in (InlineExecutor(), DaskExecutor(scheduler=scheduler.scheduler_address)):
        session = _Counted()
        executor.run([_StepsJob(_Unit(f"fails-{executor.name}"), fail=True)], session)
        assert session.results[f"fails-{executor.name}"].error.startswith("RuntimeError")
        counts.append(session.progress.done)
    assert counts == [4, 4]


def test_a_pool_job_that_failed_counts_what_it_reported():
    """The process pool advances by :func:`progressed` of the result its worker sent."""
    from orthobench.executors._base import execute, failed, progressed

    job = _StepsJob(_Unit("p"), fail=True)
    assert progressed(job, execute(job)) == 4
    assert progressed(job, failed("worker process died", 1.0)) == 0
    assert progressed(_StepsJob(_Unit("ok")), execute(_StepsJob(_Unit("ok")))) == 4


def test_the_stop_check_is_not_asked_of_the_scheduler_at_each_step(monkeypatch):
    """A cell of many quick evaluations must not wait for the scheduler after each."""
    from orthobench.executors import _dask

    asked = []

    class Event:
        def __init__(self, name) -> None:
            pass

        def is_set(self) -> bool:
            asked.append(1)
            return False

    import distributed

    monkeypatch.setattr(distributed, "Event", Event)
    result = _dask._execute_until_stopped(_StepsJob(_Unit("many"), steps=200), "token")
    assert result.records == [200] and len(asked) <= 1
