"""``orthobench run --scheduler ADDRESS`` runs the cells on that external Dask cluster.

A real ``dask scheduler`` and ``dask worker`` (no nanny, so the worker is the process we started)
run on the loopback interface; the plugin task records the PID of the process that evaluates it,
which must be the external worker's, not the CLI's nor a private LocalCluster's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest
import torch

from orthobench.executors import Job
from tests.helpers import KeptResults

pytest.importorskip("dask.distributed")

PID_TASK = """
import os
import numpy as np
from orthobench import Evaluation, SearchSpace, Task


class WhereAmI(Task):
    optimal_value = 0.0

    def __init__(self):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)), info={"pid": os.getpid()})
"""

SUITE = """
name: external
seeds: 2
n_init: 2
budget: 1
tasks: [{name: "pidtask:WhereAmI", label: where}]
optimizers: [sobol]
"""


@pytest.fixture
def cluster(tmp_path: Path):
    """An external scheduler and one worker on 127.0.0.1; yields (address, worker pid)."""
    root = tmp_path / "plugins"
    root.mkdir()
    (root / "pidtask.py").write_text(PID_TASK)
    env = {**os.environ, "PYTHONPATH": str(root)}
    scheduler_file = tmp_path / "scheduler.json"
    bin_dir = Path(sys.executable).parent
    common = ["--no-dashboard"]
    scheduler = subprocess.Popen(
        [bin_dir / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0"]
        + ["--scheduler-file", str(scheduler_file), *common],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        deadline = time.time() + 60
        while not scheduler_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        worker = subprocess.Popen(
            [bin_dir / "dask", "worker", address, "--no-nanny", "--nthreads", "1"]
            + ["--host", "127.0.0.1", *common],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        yield address, worker.pid, root
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)


@pytest.mark.slow
def test_run_with_scheduler_computes_on_the_external_cluster(cluster, tmp_path):
    address, worker_pid, plugins = cluster
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    result = subprocess.run(
        [sys.executable, "-m", "orthobench", "run", str(suite), "-o", str(tmp_path / "out")]
        + ["--scheduler", address, "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(plugins)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "(dask," in result.stderr
    frame = pd.read_parquet(tmp_path / "out" / "runs")
    pids = {json.loads(info)["pid"] for info in frame["info"]}
    assert pids == {worker_pid}


@pytest.mark.slow
def test_a_workers_address_as_the_scheduler_is_one_line_naming_what_answered(cluster, tmp_path):
    from click.testing import CliRunner
    from distributed import Client

    from orthobench.cli import cli

    address, _, _ = cluster
    with Client(address) as client:
        client.wait_for_workers(1, timeout=60)
        (worker,) = client.scheduler_info()["workers"]
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.replace("pidtask:WhereAmI", "hartmann6"))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "--scheduler", worker])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"orthobench: error: a Dask Worker answers at {worker}, not a scheduler; give the "
        "scheduler's address to --scheduler."
    ]
    assert not out.exists()


# ----------------------------------------------------------------------------------------------
# A scheduler that is not there, and the LocalCluster's size


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    "address, why",
    [
        ("closed", "({host_port}: Connection refused); start it, or check --scheduler."),
        ("tcp://127.0.0.1:notaport", "(port must be 1-65535, but got 'notaport')."),
        ("not an address", "(no valid host)."),
        ("", "(no valid host)."),  # an unset "$DASK_SCHEDULER": a traceback, or "got inline"
        ("http://127.0.0.1:8786", "(scheme 'http')."),
    ],
)
def test_a_scheduler_that_is_not_there_is_one_line_at_once_and_creates_no_folder(
    tmp_path, write_suite, address, why
):
    """The reported bug: nothing listening waited 34 s and printed a 74-line traceback, a
    malformed address a 67-line one, and both left a results folder holding only `.lock`."""
    from click.testing import CliRunner

    from orthobench.cli import cli

    if address == "closed":
        port = _closed_port()
        address, why = f"tcp://127.0.0.1:{port}", why.format(host_port=f"127.0.0.1:{port}")
    suite = write_suite(
        "name: t\nseeds: 1\nn_init: 1\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n"
    )
    out = tmp_path / "out"
    start = time.perf_counter()
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "--scheduler", address])
    seconds = time.perf_counter() - start
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith("orthobench: error: ") and line.endswith(why), line
    assert address in line
    # Far below Dask's 30 s connect timeout, with room for importing distributed on a busy machine.
    assert seconds < 15, seconds
    assert not out.exists()


def test_a_local_cluster_starts_no_more_workers_than_cells_to_run(
    tmp_path, write_suite, monkeypatch
):
    """The reported bug: `--executor dask --workers 8` started 8 workers for 2 cells."""
    import torch

    from orthobench import execution
    from orthobench.executors import DaskExecutor, execute, make_executor
    from orthobench.results import ResultStore
    from orthobench.suite import load_suite

    asked = []

    def local_cluster(self, jobs, session):  # Dask, run inline: only the count matters
        asked.append(self.processes(len(jobs)))
        for job in jobs:
            session.finish(job, execute(job))

    monkeypatch.setattr(DaskExecutor, "run", local_cluster)
    suite = load_suite(
        write_suite(
            "name: t\nseeds: 2\nn_init: 1\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n"
        )
    )
    summary = execution.run_suite(
        suite,
        ResultStore(tmp_path / "out"),
        device=torch.device("cpu"),
        executor=make_executor("dask", workers=8),
        show_progress=False,
    )
    assert summary.count("ok") == 2 and asked == [2]


def test_a_listener_that_is_no_scheduler_is_given_up_after_the_scheduler_timeout(
    tmp_path, write_suite
):
    """Something accepts TCP connections on the port but never answers as Dask would."""
    from click.testing import CliRunner

    from orthobench.cli import cli

    suite = write_suite(
        "name: t\nseeds: 1\nn_init: 1\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n"
    )
    out = tmp_path / "out"
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)  # the kernel completes the handshakes; nothing ever reads or writes
        address = f"tcp://127.0.0.1:{mute.getsockname()[1]}"
        start = time.perf_counter()
        result = CliRunner().invoke(
            cli,
            ["run", str(suite), "-o", str(out), "--scheduler", address]
            + ["--scheduler-timeout", "1"],
        )
        seconds = time.perf_counter() - start
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith(
        f"orthobench: error: no Dask scheduler answered at {address} within 1 s ("
    )
    assert 1 <= seconds < 5, seconds
    assert not out.exists()


# ----------------------------------------------------------------------------------------------
# Several jobs on one GPU: --jobs-per-gpu


@pytest.mark.parametrize("jobs_per_gpu", [1, 2, 3, 7, 9, 11, 12, 17, 60, 1000])
def test_jobs_per_gpu_shares_of_a_gpu_fill_it_exactly_however_often_dask_takes_them(
    jobs_per_gpu,
):
    """A worker's ``GPU=1`` runs exactly N tasks of share 1/N at once, also after many starts and
    ends (Dask subtracts and adds the shares in floating point: with 1/9 as a float, the ninth
    task would find less than a share left and wait); the CPU asks for nothing."""
    import random

    from orthobench.executors._dask import _gpu_resources

    assert _gpu_resources("cpu", jobs_per_gpu) is None
    (share,) = _gpu_resources("cuda:1", jobs_per_gpu).values()
    assert _gpu_resources("cuda", jobs_per_gpu) == {"GPU": share}
    assert share == pytest.approx(1 / jobs_per_gpu, rel=1e-6)
    assert 0 < share <= 1 / jobs_per_gpu
    available, running, rng = 1.0, 0, random.Random(jobs_per_gpu)
    for _ in range(2000):  # the worker's bookkeeping (distributed's WorkerState), at random
        if running == 0 or (running < jobs_per_gpu and rng.random() < 0.5):
            assert available >= share, (running, available)
            available, running = available - share, running + 1
        else:
            available, running = available + share, running - 1
        if running == jobs_per_gpu:
            assert available < share  # and never one more
    assert running == 0 or available + running * share == 1.0


def test_jobs_per_gpu_below_1_or_not_an_integer_is_a_value_error():
    from orthobench.executors import DaskExecutor

    assert DaskExecutor(jobs_per_gpu=4).jobs_per_gpu == 4
    assert DaskExecutor().jobs_per_gpu == 1
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="`jobs_per_gpu` must be an integer >= 1") as err:
            DaskExecutor(jobs_per_gpu=bad)
        assert "\n" not in str(err.value)


# The jobs of the in-process cluster below run in this process: they count here what runs at once.
_AT_ONCE = {"now": 0, "most": 0}
_AT_ONCE_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class _Unit:
    id: str
    config_hash: str = "h"
    kind: str = "cell"


class _OneUnitJob(Job):
    """A test job of one unit, without metadata."""

    progress_unit: ClassVar[str] = "evaluations"

    @property
    def size(self) -> int:
        return 1

    def metadata(self) -> dict:
        return {}


@dataclasses.dataclass(frozen=True)
class _GpuShareJob(_OneUnitJob):
    """Runs ``seconds`` and returns the resources its Dask task asked for; with ``evaluations``,
    also the resources of those evaluations, each a Dask task of its own
    (:class:`DaskEvaluations` with the job's ``jobs_per_gpu``, as :class:`CellJob` makes them)."""

    unit: _Unit
    device: str
    threads: int = 1
    seconds: float = 0.0
    evaluations: int = 0
    jobs_per_gpu: int = 1

    def run(self, on_progress) -> list:
        from distributed import get_worker

        from orthobench.executors._evaluations import make_evaluations

        worker = get_worker()
        asked = worker.state.tasks[worker.get_current_task()].resource_restrictions
        with _AT_ONCE_LOCK:
            _AT_ONCE["now"] += 1
            _AT_ONCE["most"] = max(_AT_ONCE["most"], _AT_ONCE["now"])
        time.sleep(self.seconds)
        with _AT_ONCE_LOCK:
            _AT_ONCE["now"] -= 1
        found = [dict(asked or {})]
        if self.evaluations:
            evaluations = make_evaluations("dask", self.evaluations, 1, False, self.jobs_per_gpu)
            evaluations._cell, evaluations._device = None, torch.device(self.device)
            found.append(sorted(o for _, o in evaluations.run(list(range(self.evaluations)))))
        return found


def _asked_resources(cell, device, threads, request) -> list:
    """A Dask evaluation (in place of :func:`_evaluate_on_dask`): the resources it asked for."""
    from distributed import get_worker

    worker = get_worker()
    return [request, dict(worker.state.tasks[worker.get_current_task()].resource_restrictions)]


@pytest.fixture
def one_gpu_worker():
    """An in-process Dask cluster of one worker with four threads and one GPU, as
    ``dask worker SCHEDULER --resources GPU=1 --nthreads 4`` starts on a GPU host."""
    from dask.distributed import LocalCluster

    with LocalCluster(
        n_workers=1,
        threads_per_worker=4,
        processes=False,
        resources={"GPU": 1},
        dashboard_address=None,
    ) as cluster:
        yield cluster.scheduler_address


# jobs_per_gpu = 1 runs the four 0.4 s jobs one after another: with the slow tests.
@pytest.mark.parametrize("jobs_per_gpu", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_a_gpu_worker_runs_jobs_per_gpu_cuda_jobs_at_once(one_gpu_worker, jobs_per_gpu):
    """Four CUDA jobs on a worker of four threads and ``GPU=1``: ``jobs_per_gpu`` of them run at
    once, each asking for its share."""
    from orthobench.executors import DaskExecutor

    _AT_ONCE.update(now=0, most=0)
    jobs = [_GpuShareJob(_Unit(f"cell{i}"), "cuda:0", seconds=0.4) for i in range(4)]
    session = KeptResults()
    DaskExecutor(scheduler=one_gpu_worker, jobs_per_gpu=jobs_per_gpu).run(jobs, session)
    assert {r.error for r in session.results.values()} == {None}
    share = 1 / jobs_per_gpu
    assert [r.records for r in session.results.values()] == [[{"GPU": share}]] * 4
    assert _AT_ONCE["most"] == jobs_per_gpu


def test_cpu_jobs_ask_for_no_gpu_whatever_jobs_per_gpu(one_gpu_worker):
    from orthobench.executors import DaskExecutor

    _AT_ONCE.update(now=0, most=0)
    jobs = [_GpuShareJob(_Unit(f"cell{i}"), "cpu", seconds=0.4) for i in range(4)]
    session = KeptResults()
    DaskExecutor(scheduler=one_gpu_worker, jobs_per_gpu=2).run(jobs, session)
    assert [r.records for r in session.results.values()] == [[{}]] * 4
    assert _AT_ONCE["most"] == 4


def test_the_evaluations_of_a_cuda_cell_ask_for_its_share_of_the_gpu(one_gpu_worker, monkeypatch):
    """With two jobs per GPU, a cell's two evaluations ask for half a GPU each, as the cell does:
    they run one at a time beside it on the one GPU worker (with one job per GPU they would wait
    for ever for the GPU their cell holds)."""
    from orthobench.executors import DaskExecutor, _evaluations

    monkeypatch.setattr(_evaluations, "_evaluate_on_dask", _asked_resources)
    job = _GpuShareJob(_Unit("cell"), "cuda:0", evaluations=2, jobs_per_gpu=2)
    session = KeptResults()
    DaskExecutor(scheduler=one_gpu_worker, jobs_per_gpu=2).run([job], session)
    (result,) = session.results.values()
    assert result.error is None, result.traceback
    assert result.records == [{"GPU": 0.5}, [[0, {"GPU": 0.5}], [1, {"GPU": 0.5}]]]


# ----------------------------------------------------------------------------------------------
# Two runs on one scheduler, and the cell timeout's clock


@dataclasses.dataclass(frozen=True)
class _TagJob(_OneUnitJob):
    """Returns its ``tag``; with a ``marker``, writes that file once it runs, then sleeps."""

    unit: _Unit
    device: str
    tag: str
    marker: str = ""
    seconds: float = 0.0
    threads: int = 1

    def run(self, on_progress) -> list:
        if self.marker:
            Path(self.marker).write_text("running")
        time.sleep(self.seconds)
        return [self.tag]


# The other run: the same cell on the same scheduler, from a process of its own (one client per
# process, as two `orthobench run --scheduler` would be).
_OTHER_RUN = """
import sys
import types
from tests.test_execution_dask import _TagJob, _Unit
from orthobench.executors import DaskExecutor

address, marker = sys.argv[1:]
found = {}
session = types.SimpleNamespace(
    progress=types.SimpleNamespace(advance=lambda n: None),
    finish=lambda job, result: found.update(result=result),
)
DaskExecutor(scheduler=address).run([_TagJob(_Unit("cell0"), "cpu", "other", marker, 4.0)], session)
print(found["result"].records)
"""


@pytest.mark.slow
def test_two_runs_of_the_same_cell_on_one_scheduler_get_their_own_results(tmp_path):
    """The reported bug: both runs submitted the key ``orthobench-<cell>-<config hash>``, and the
    scheduler gave the second the first one's task: its result, computed with the other run's
    thread count, device and results folder."""
    from dask.distributed import LocalCluster

    from orthobench.executors import DaskExecutor

    marker = tmp_path / "other-is-running"
    with LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        other = subprocess.Popen(
            [sys.executable, "-c", _OTHER_RUN, cluster.scheduler_address, str(marker)],
            cwd=Path(__file__).parent.parent,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not marker.exists() and other.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert marker.exists(), "the other run's cell did not start"
            session = KeptResults()
            job = _TagJob(_Unit("cell0"), "cpu", "this")
            DaskExecutor(scheduler=cluster.scheduler_address).run([job], session)
            out, _ = other.communicate(timeout=120)
        finally:
            if other.poll() is None:
                other.kill()
                other.wait()
    assert session.results["cell0"].records == ["this"]
    assert out.split() == ["['other']"]


class _FakeFuture:
    def __init__(self, key: str) -> None:
        self.key = key
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _FakeClient:
    """What :func:`_expired` asks of a client: ``processing`` answers what ``now`` says."""

    def __init__(self) -> None:
        self.now: dict[str, list[str]] = {}
        self.restarted: list[str] = []

    def processing(self) -> dict[str, list[str]]:
        return self.now

    def run(self, function, *, workers, nanny) -> dict:
        return dict.fromkeys(workers, True)

    def restart_workers(self, workers, *, raise_for_error) -> dict:
        self.restarted.extend(workers)
        return dict.fromkeys(workers, "OK")


def test_a_job_run_again_after_its_worker_was_restarted_gets_a_new_clock(monkeypatch):
    """Two jobs on one worker of two threads: ``a`` times out and the restart takes ``b`` along,
    which Dask runs again on the new worker. ``b``'s clock starts again there: it kept the one
    of its first try, and was failed as timed out as soon as it ran again."""
    from orthobench.executors import _dask

    clock = {"now": 0.0}
    monkeypatch.setattr(_dask.time, "monotonic", lambda: clock["now"])
    client, started = _FakeClient(), {}
    a, b = _FakeFuture("a"), _FakeFuture("b")
    pending = {a, b}

    def poll(at: float, processing: dict[str, list[str]]) -> list:
        clock["now"], client.now = at, processing
        expired = _dask._expired(client, pending, started, timeout=5.0)
        pending.difference_update(expired)
        return expired

    assert poll(0.0, {"w1": ["a"]}) == []
    assert poll(2.0, {"w1": ["a", "b"]}) == []
    assert poll(5.0, {"w1": ["a", "b"]}) == [a] and a.cancelled and client.restarted == ["w1"]
    assert poll(6.0, {"w2": []}) == []  # the new worker; b waits to run again
    assert poll(7.0, {"w2": ["b"]}) == []
    assert poll(11.0, {"w2": ["b"]}) == []  # 4 s on its second try, 9 s since its first
    assert poll(12.0, {"w2": ["b"]}) == [b] and client.restarted == ["w1", "w2"]


def test_a_job_seen_on_another_worker_runs_there_from_the_start(monkeypatch):
    """A worker lost under a job (an external cluster retries it elsewhere): its clock starts
    again on the worker that runs it now."""
    from orthobench.executors import _dask

    clock = {"now": 0.0}
    monkeypatch.setattr(_dask.time, "monotonic", lambda: clock["now"])
    client, started, job = _FakeClient(), {}, _FakeFuture("job")
    for at, worker in [(0.0, "w1"), (4.0, "w1"), (4.5, "w2"), (9.0, "w2")]:
        clock["now"], client.now = at, {worker: ["job"]}
        assert _dask._expired(client, {job}, started, timeout=5.0) == []
    clock["now"] = 9.5
    assert _dask._expired(client, {job}, started, timeout=5.0) == [job]


def test_a_server_of_another_protocol_is_one_line_not_a_memory_error(tmp_path, write_suite):
    """An HTTP server on the port: Dask read "HTTP/1.1" as a frame length and asked for 3 EiB,
    a MemoryError traceback with exit 1."""
    from click.testing import CliRunner

    from orthobench.cli import cli

    suite = write_suite(
        "name: t\nseeds: 1\nn_init: 1\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n"
    )
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)

        def answer() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    with connection:
                        connection.recv(4096)
                        connection.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        result = CliRunner().invoke(
            cli, ["run", str(suite), "-o", str(tmp_path / "out"), "--scheduler", address]
        )
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith(f"orthobench: error: the server at {address} does not speak Dask")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_scheduler_timeout_that_is_not_a_finite_number_is_a_usage_error(value, write_suite):
    """nan passed the option's range and raised a ValueError later, inf overflowed the socket's
    timeout: both were tracebacks with exit 1."""
    from click.testing import CliRunner

    from orthobench.cli import cli

    suite = write_suite("name: t\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    result = CliRunner().invoke(
        cli, ["run", str(suite), "--scheduler", "tcp://127.0.0.1:1", "--scheduler-timeout", value]
    )
    assert result.exit_code == 2 and "--scheduler-timeout" in result.output, result.output


@pytest.mark.slow
def test_a_scheduler_without_workers_warns_and_a_lost_scheduler_is_one_error(monkeypatch):
    """A scheduler with no worker left the run at 0% for ever without a word; a scheduler that
    went away raised Dask's FuturesCancelledError out of the runner (exit 1, no resume line)."""
    import dask.distributed
    from dask.distributed import LocalCluster
    from distributed.client import CancelledFuturesGroup, FuturesCancelledError

    from orthobench.exceptions import OrthobenchError, OrthobenchWarning
    from orthobench.executors import DaskExecutor

    def lost(*args, **kwargs):
        raise FuturesCancelledError([CancelledFuturesGroup([], "scheduler-connection-lost")])

    monkeypatch.setattr(dask.distributed, "wait", lost)
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        executor = DaskExecutor(scheduler=cluster.scheduler_address)
        with (
            pytest.warns(OrthobenchWarning, match="has no workers: the 1 jobs wait"),
            pytest.raises(
                OrthobenchError, match=r"lost the Dask scheduler .* \(scheduler-connection-lost\)"
            ),
        ):
            executor.run([_TagJob(_Unit("cell0"), "cpu", "tag")], KeptResults())


@pytest.mark.slow
def test_the_private_cluster_takes_no_fixed_port(recwarn):
    """Its HTTP server took 8787 (``dashboard_address=None`` does not turn it off): a second run
    on the machine, or any Dask scheduler there, made Dask warn that the port was in use."""
    from orthobench.executors import DaskExecutor

    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 8787))
        except OSError:
            pytest.skip("port 8787 is in use here already")
        taken.listen(1)
        session = KeptResults()
        DaskExecutor(workers=1).run([_TagJob(_Unit("cell0"), "cpu", "tag")], session)
    assert session.results["cell0"].records == ["tag"]
    assert not [w for w in recwarn if "8787" in str(w.message)]
