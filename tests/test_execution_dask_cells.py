"""The Dask executor's private ``LocalCluster``: a job in flight owns its workers, so a timeout's
restart ends nothing of another job.

A batch cell's task waits for its evaluations seceded from its worker's thread pool, and the
scheduler counts that worker idle: it would start another cell there, which the restart of the
worker for the first cell's timeout would end too. The jobs here run in the cluster's worker
processes (the module is preloaded there).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from tests.helpers import KeptResults, process_running
from tests.test_execution_dask import _OneUnitJob, _Unit

pytest.importorskip("dask.distributed")


def _starts(folder: Path, unit_id: str) -> list[str]:
    """The workers a job started on, one per start."""
    path = folder / unit_id
    return path.read_text().split() if path.exists() else []


@dataclasses.dataclass(frozen=True)
class _SleepJob(_OneUnitJob):
    """Sleeps ``seconds``; with ``secede``, outside its worker's thread pool, as a batch cell
    waits for its evaluations; with ``linger``, a task of its own sleeps ``linger`` seconds on
    its worker after it (its worker is busy when the executor sees it done). It appends its
    worker's address to ``folder/<unit id>`` when it starts."""

    unit: _Unit
    folder: str
    seconds: float
    secede: bool = False
    linger: float = 0.0
    device: str = "cpu"
    threads: int = 1

    def run(self, on_progress) -> list:
        from distributed import fire_and_forget, get_worker, secede, worker_client

        address = get_worker().address
        with open(Path(self.folder) / self.unit.id, "a") as log:
            log.write(address + "\n")
        if self.secede:
            secede()
        time.sleep(self.seconds)
        if self.linger:
            with worker_client() as client:
                fire_and_forget(
                    client.submit(time.sleep, self.linger, workers=[address], pure=False)
                )
        return [self.unit.id]


@pytest.mark.slow
def test_a_cell_that_times_out_ends_no_cell_beside_it(tmp_path):
    """The reported bug: ``waits`` secedes on its worker; ``first`` ends on the other worker,
    which a task of its own keeps busy a second longer, so the scheduler's one idle worker for
    ``beside`` was the one ``waits`` holds. ``waits`` timed out, its worker was restarted, and
    ``beside`` (8.5 s of work, well within the 12 s timeout) failed with it (``KilledWorker``).

    Timings: ``waits`` expires 12-13 s in, while ``beside`` runs from about 8 s to 16.5 s; bound
    to its own worker it starts at most a second later, and ends 2 s before its own timeout."""
    from orthobench.executors import DaskExecutor

    waits = _SleepJob(_Unit("waits"), str(tmp_path), 60.0, secede=True)
    first = _SleepJob(_Unit("first"), str(tmp_path), 8.0, linger=1.0)
    beside = _SleepJob(_Unit("beside"), str(tmp_path), 8.5)
    session = KeptResults()
    DaskExecutor(workers=2, timeout=12.0).run([waits, first, beside], session)
    results = session.results
    assert results["waits"].error.startswith("timed out"), results["waits"]
    assert results["first"].records == ["first"], results["first"]
    assert results["beside"].error is None, results["beside"]
    assert results["beside"].records == ["beside"]
    # It ran once, and not where `waits` was restarted.
    (where,) = _starts(tmp_path, "beside")
    assert where not in _starts(tmp_path, "waits")


# ----------------------------------------------------------------------------------------------
# A batch cell's evaluations: on its own workers, ended with it


# A task whose every evaluation waits for a child process; it writes the child's PID to `folder`.
STUCK_TASK = """
import subprocess
from pathlib import Path

from orthobench import Evaluation, SearchSpace, Task, task_factory


class Stuck(Task):
    optimal_value = 0.0

    def __init__(self, folder: str):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.folder = folder

    def evaluate(self, x, *, seed, device):
        child = subprocess.Popen(["sleep", "300"])
        (Path(self.folder) / str(child.pid)).write_text("")
        child.wait()
        return Evaluation(y=0.0)


@task_factory
def make_stuck(folder: str) -> Stuck:
    return Stuck(folder)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the processes")
def test_a_batch_cell_that_times_out_ends_its_evaluations_on_its_other_workers(
    tmp_path, monkeypatch
):
    """The reported bug: a cell of ``q = 2`` on two workers evaluates on both; at its timeout
    only the worker of its own task was restarted, and the evaluation on the other one went on,
    with the process it started (here a ``sleep 300``), after the run."""
    from orthobench.execution import run_suite
    from orthobench.executors import DaskExecutor
    from orthobench.results import ResultStore
    from orthobench.suite import parse_suite

    plugins, pids = tmp_path / "plugins", tmp_path / "pids"
    plugins.mkdir()
    pids.mkdir()
    (plugins / "stucktask.py").write_text(STUCK_TASK)
    monkeypatch.syspath_prepend(str(plugins))  # the cluster's spawned workers inherit sys.path
    suite = parse_suite(
        {
            "name": "stuck",
            "n_init": 2,
            "budget": 1,
            "q": 2,
            "tasks": [
                {"name": "stucktask:make_stuck", "label": "stuck", "params": {"folder": str(pids)}}
            ],
            "optimizers": ["sobol"],
        }
    )
    try:
        summary = run_suite(
            suite,
            ResultStore(tmp_path / "out"),
            device="cpu",
            executor=DaskExecutor(workers=2, timeout=10.0),
            show_progress=False,
        )
        (failed,) = summary.failed
        assert failed.error.startswith("timed out"), failed.error
        started = [int(path.name) for path in pids.iterdir()]
        # The initial design's two evaluations, at once; under load the scheduler may start
        # one again on another worker while the timed-out cell's workers restart.
        assert len(started) >= 2
        assert [pid for pid in started if process_running(pid)] == []
    finally:
        for path in pids.iterdir():  # the test's own `sleep` processes, if any outlived the run
            if process_running(int(path.name)):
                os.kill(int(path.name), 9)


def test_a_job_that_times_out_restarts_the_workers_it_owns(monkeypatch):
    """A batch cell's workers (its own first) are restarted with it, and the descendants of each
    killed; a worker of its own that has left the cluster is not asked for."""
    from orthobench.executors import _dask

    class Client:
        def __init__(self) -> None:
            self.killed: list[str] = []
            self.restarted: list[str] = []

        def processing(self) -> dict[str, list[str]]:
            return {"w1": ["cell"], "w2": ["evaluation"], "w4": ["other"]}

        def run(self, function, *, workers, nanny) -> dict:
            assert function is _dask._kill_worker_descendants and nanny
            self.killed.extend(workers)
            return dict.fromkeys(workers, True)

        def restart_workers(self, workers, *, raise_for_error) -> dict:
            self.restarted.extend(workers)
            return dict.fromkeys(workers, "OK")

    class Future:
        key = "cell"

        def cancel(self) -> None:
            pass

    clock = {"now": 0.0}
    monkeypatch.setattr(_dask.time, "monotonic", lambda: clock["now"])
    client, started, cell = Client(), {}, Future()
    owned = {cell: ("w1", "w2", "w3")}  # w3 has left the cluster
    assert _dask._expired(client, {cell}, started, timeout=5.0, owned=owned) == []
    clock["now"] = 5.0
    assert _dask._expired(client, {cell}, started, timeout=5.0, owned=owned) == [cell]
    assert client.killed == client.restarted == ["w1", "w2"]


def _where_evaluated(cell, device, threads, request) -> str:
    """A Dask evaluation (in place of :func:`_evaluate_on_dask`): the worker it ran on."""
    from distributed import get_worker

    return get_worker().address


@dataclasses.dataclass(frozen=True)
class _CudaBatchJob(_OneUnitJob):
    """A CUDA batch cell of ``slots`` evaluations at once (it never touches CUDA: only its Dask
    resources count); returns its worker and those of its ``evaluations``."""

    unit: _Unit
    evaluations: int
    at_once: int = 2
    jobs_per_gpu: int = 1
    device: str = "cuda:0"
    threads: int = 1

    @property
    def size(self) -> int:
        return self.evaluations

    @property
    def slots(self) -> int:
        return self.at_once

    def run(self, on_progress) -> list:
        import torch
        from distributed import get_worker

        from orthobench.executors import _evaluations

        evaluations = _evaluations.make_evaluations(
            "dask", self.at_once, 1, False, self.jobs_per_gpu
        )
        evaluations._cell, evaluations._device = None, torch.device(self.device)
        evaluate = _evaluations._evaluate_on_dask
        _evaluations._evaluate_on_dask = _where_evaluated  # in this worker process only
        try:
            found = [o for _, o in evaluations.run(list(range(self.evaluations)))]
        finally:
            _evaluations._evaluate_on_dask = evaluate
        return [get_worker().address, found]


@pytest.mark.slow
def test_a_cuda_cell_of_one_job_per_gpu_evaluates_on_its_other_worker():
    """The cell holds the whole ``GPU`` of its own worker while it waits: its evaluations, which
    ask for a whole ``GPU`` too, run on its other worker (on its own they would wait for ever
    for the GPU it holds)."""
    from orthobench.executors import DaskExecutor

    session = KeptResults()
    job = _CudaBatchJob(_Unit("cuda"), evaluations=4)
    DaskExecutor(workers=2, timeout=60.0).run([job], session)
    result = session.results["cuda"]
    assert result.error is None, result.traceback
    own, evaluated = result.records
    assert len(evaluated) == 4 and len(set(evaluated)) == 1 and own not in evaluated
