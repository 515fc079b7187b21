"""``orthobench run --scheduler ADDRESS`` runs the cells on that external Dask cluster.

A real ``dask scheduler`` and ``dask worker`` (no nanny, so the worker is the process we started)
run on the loopback interface; the plugin task records the PID of the process that evaluates it,
which must be the external worker's, not the CLI's nor a private LocalCluster's.
"""

from __future__ import annotations

import json
import os
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
