"""``orthobench run --scheduler ADDRESS`` runs the cells on that external Dask cluster.

A real ``dask scheduler`` and ``dask worker`` (no nanny, so the worker is the process we started)
run on the loopback interface; the plugin task records the PID of the process that evaluates it,
which must be the external worker's, not the CLI's nor a private LocalCluster's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

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
