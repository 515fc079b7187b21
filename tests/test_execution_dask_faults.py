"""The Dask executor when the cluster fails it: a restarted worker lost for good, CUDA jobs no
worker can run, a scheduler that goes away, a worker that dies under its job."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import warnings
from types import SimpleNamespace

import pytest

from tests.helpers import KeptResults
from tests.test_execution_dask import _TagJob, _Unit

pytest.importorskip("dask.distributed")


@pytest.mark.slow
def test_a_worker_restarted_at_a_timeout_comes_back_however_soon_dask_gives_up_on_it():
    """The reported bug: Dask closes the nanny of a worker not back ``lost-worker-timeout`` (15 s)
    after it left; a worker restarted twice within them was still importing its preload then,
    and was lost for good: the run waited 120 s, and the next cell failed without having run.
    Here Dask gives up after 0.1 s, at the first restart: the private cluster must not."""
    import dask

    from orthobench.executors import DaskExecutor

    stuck = _TagJob(_Unit("stuck"), "cpu", "stuck", seconds=60.0)
    after = _TagJob(_Unit("after"), "cpu", "after")
    session = KeptResults()
    start = time.monotonic()
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "100ms"}):
        DaskExecutor(workers=1, timeout=2.0).run([stuck, after], session)
    assert session.results["stuck"].error.startswith("timed out"), session.results["stuck"]
    assert session.results["after"].records == ["after"], session.results["after"]
    assert time.monotonic() - start < 60


class _Future:
    """A pending future, of the job ``cell``."""

    key = "cell"

    def cancel(self) -> None:
        pass


class _Client:
    """What :func:`_expired` asks of a client; the restart answers ``restarted`` or raises it."""

    def __init__(self, restarted: dict | Exception) -> None:
        self.restarted = restarted

    def processing(self) -> dict[str, list[str]]:
        return {"w1": ["cell"]}

    def run(self, function, *, workers, nanny) -> dict:
        return dict.fromkeys(workers, True)

    def restart_workers(self, workers, *, raise_for_error) -> dict:
        assert not raise_for_error  # Dask's error would not say which workers are back
        if isinstance(self.restarted, Exception):
            raise self.restarted
        return self.restarted


@pytest.mark.parametrize(
    ("restarted", "says"),
    [
        ({"w1": "timed out"}, "were stopped to restart them, but have not come back"),
        (ValueError("Restarting workers requires a nanny"), "they keep running the job"),
    ],
)
def test_a_restart_that_fails_says_what_became_of_the_worker(monkeypatch, restarted, says):
    """A worker that Dask stopped but that did not come back was said to keep running the job
    and its processes, which the kill before the restart had ended."""
    from orthobench.exceptions import OrthobenchWarning
    from orthobench.executors import _dask

    clock = {"now": 0.0}
    monkeypatch.setattr(_dask.time, "monotonic", lambda: clock["now"])
    client, started, cell = _Client(restarted), {}, _Future()
    assert _dask._expired(client, {cell}, started, timeout=5.0) == []
    clock["now"] = 5.0
    with pytest.warns(OrthobenchWarning) as record:
        assert _dask._expired(client, {cell}, started, timeout=5.0) == [cell]
    (warning,) = record
    assert says in str(warning.message)


def test_cuda_jobs_on_a_cluster_without_a_gpu_worker_warn_how_to_start_one():
    """They waited for ever, and nothing said why (the timeout's clock starts when a job runs).
    The warning is an error here, which ends the run; a thread bounds the wait without it."""
    from dask.distributed import LocalCluster

    from orthobench.exceptions import OrthobenchWarning
    from orthobench.executors import DaskExecutor

    raised = []

    def run(address: str) -> None:
        try:
            DaskExecutor(scheduler=address).run(
                [_TagJob(_Unit("cell0"), "cuda:0", "tag")], KeptResults()
            )
        except OrthobenchWarning as warning:
            raised.append(str(warning))

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error", OrthobenchWarning)
        thread = threading.Thread(target=run, args=(cluster.scheduler_address,), daemon=True)
        thread.start()
        thread.join(timeout=20)
    (message,) = raised
    assert "has the `GPU` resource that its 1 CUDA jobs ask for" in message, message
    assert f"`dask worker {cluster.scheduler_address} --resources GPU=1`" in message


# A scheduler of its own process, which the test kills: its address on the first line.
_SCHEDULER = """
import time
from dask.distributed import LocalCluster

cluster = LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None)
print(cluster.scheduler_address, flush=True)
time.sleep(120)
"""


class _Kept(logging.Handler):
    """Keeps the records of the logger it is added to."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_lost_scheduler_is_one_line_without_dask_s_traceback(monkeypatch):
    """Dask's client logged the reconnection that closing it cancelled: 25 lines of traceback
    before the one line of the error."""
    import dask.distributed

    from orthobench.exceptions import OrthobenchError, OrthobenchWarning
    from orthobench.executors import DaskExecutor

    logger, kept = logging.getLogger("distributed.client"), _Kept()
    logger.addHandler(kept)
    scheduler = subprocess.Popen([sys.executable, "-c", _SCHEDULER], stdout=subprocess.PIPE)
    try:
        address = scheduler.stdout.readline().decode().strip()
        wait = dask.distributed.wait

        def lose_the_scheduler(*args, **kwargs):  # once the job waits on it
            scheduler.kill()
            scheduler.wait()
            return wait(*args, **kwargs)

        monkeypatch.setattr(dask.distributed, "wait", lose_the_scheduler)
        with (
            pytest.warns(OrthobenchWarning, match="has no workers"),
            pytest.raises(OrthobenchError, match="lost the Dask scheduler"),
        ):
            DaskExecutor(scheduler=address).run(
                [_TagJob(_Unit("cell0"), "cpu", "tag")], KeptResults()
            )
        time.sleep(0.2)  # any record the client's loop thread logs late
    finally:
        logger.removeHandler(kept)
        scheduler.kill()
        scheduler.wait()
    assert [r.getMessage() for r in kept.records if r.levelno >= logging.ERROR] == []
    assert not logger.disabled


class _DiedFuture:
    """A future whose worker died under it."""

    def result(self):
        from distributed.scheduler import KilledWorker

        raise KilledWorker("cell", SimpleNamespace(address="tcp://127.0.0.1:1"), 0)


def test_a_job_whose_worker_died_is_stored_with_the_time_it_ran():
    """It was stored with ``seconds: 0.0``; the process pool stores the time it ran."""
    from orthobench.executors import _dask

    result = _dask._dask_result(_DiedFuture(), {}, since=time.monotonic() - 3.0)
    assert result.error == "worker process died (Dask KilledWorker)"
    assert 3.0 <= result.seconds < 10.0
