"""Shared fixtures: the device and dtype of numerical tests, a plugin module on sys.path and a
suite-file writer."""

from __future__ import annotations

import copy
import os
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from threadpoolctl import threadpool_limits

from tests.helpers import install_plugin


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread (and one BLAS thread) in each pytest-xdist worker.

    ``make test`` runs a worker per core (``-n auto``); torch's default pool of a thread per core
    in each of them oversubscribes the machine, and its spinning threads made a two-worker run
    twice as slow as one process (docs/benchmarks.md, "Test suite and CI gate"). A plain
    ``pytest`` run keeps torch's default.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)
        threadpool_limits(limits=1)


_CUDA_MARKS = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)"
    ),
]


@pytest.fixture(
    scope="module",
    params=[pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=_CUDA_MARKS)],
)
def device(request: pytest.FixtureRequest) -> torch.device:
    """The device a numerical test runs on: ``cpu`` always, and ``cuda`` where a GPU is present.

    The ``cuda`` case carries the ``cuda`` marker (``pytest -m cuda`` selects only it) and is
    skipped, with the reason, where ``torch.cuda.is_available()`` is false. Module-scoped, so
    module fixtures (fitted GP states) can be built once per device. Tests draw their inputs on
    the CPU from seeded generators and move them, so the same draws reach every device and the
    CPU case is the reference another device's results are compared with.
    """
    return torch.device(request.param)


@pytest.fixture(scope="module")
def to_device(device: torch.device):
    """Move a ``(model, laplace)`` GP state fitted on the CPU to ``device``.

    Returns a function of the CPU state: on the CPU the state itself; elsewhere a copy of the
    model on ``device`` and its Laplace posterior computed there. Fits stay on the CPU (a MAP fit
    on another device can land elsewhere), so the CPU state is the reference for the same fit.
    """

    def move(state):
        if device.type == "cpu":
            return state
        from orthobench.exceptions import NumericsWarning
        from orthobench.surrogates.laplace import laplace_posterior

        model = copy.deepcopy(state[0]).to(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericsWarning)  # tests of the warning run on the CPU
            return model, laplace_posterior(model)

    return move


@pytest.fixture(
    scope="module",
    params=[pytest.param(torch.float64, id="float64"), pytest.param(torch.float32, id="float32")],
)
def dtype(request: pytest.FixtureRequest) -> torch.dtype:
    """The floating dtype of a test whose code is dtype-generic: ``float64`` and ``float32``.

    Only for computations meant to work in single precision (estimators, point sets); the GP
    fits, Laplace posteriors and log-EI run in double, and their tests say so.
    """
    return request.param


PLUGIN_SOURCE = '''
"""A user's own task and optimizer, registered only by import path."""
import time

import numpy as np

from orthobench import Evaluation, Optimizer, SearchSpace, Suggestion, Task, Parameter, task_factory


class Sphere(Task):
    optimal_value = 0.0

    def __init__(self, dim: int = 2, delay: float = 0.0, fail_at: float = -1.0):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * dim))
        self.delay = delay
        self.fail_at = fail_at

    def evaluate(self, x, *, seed, device):
        time.sleep(self.delay)
        if self.fail_at >= 0 and x[0] > self.fail_at:
            raise RuntimeError("simulated training crash")
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))


class Mixed(Task):
    """One float, one log-scale and one integer parameter."""

    optimal_value = None

    def __init__(self):
        super().__init__(SearchSpace((
            Parameter(name="a", low=-1.0, high=1.0),
            Parameter(name="lr", low=1e-4, high=1e-1, kind="log"),
            Parameter(name="layers", low=1, high=4, kind="int"),
        )))

    def evaluate(self, x, *, seed, device):
        return Evaluation(y=float(x[0] ** 2 + np.log10(x[1]) ** 2 + x[2]))


@task_factory
def make_sphere(dim: int = 2, delay: float = 0.0, fail_at: float = -1.0) -> Sphere:
    """A sphere on [-1, 1]^dim."""
    return Sphere(dim, delay, fail_at)


class CenterOptimizer(Optimizer):
    """Always proposes the centre of the cube, jittered."""

    min_observations = 0

    def __init__(self, dim, *, jitter: float = 0.1, **kwargs):
        super().__init__(dim, **kwargs)
        self.jitter = jitter

    def _ask(self, n):
        rng = np.random.default_rng(self._step_seed("center"))
        return Suggestion(x=np.clip(0.5 + self.jitter * rng.standard_normal((n, self.dim)), 0, 1))
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Name of an importable module holding user plugins (also on PYTHONPATH for subprocesses)."""
    install_plugin(tmp_path / "plugins", "userplugin", PLUGIN_SOURCE, monkeypatch)
    return "userplugin"


@pytest.fixture
def write_suite(tmp_path: Path):
    """Write YAML text (dedented) to a file and return its path."""

    def _write(text: str, name: str = "suite.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write


@pytest.fixture
def dask_jobs_per_gpu(monkeypatch) -> list[int]:
    """The ``jobs_per_gpu`` of each :class:`DaskExecutor` run, which runs its jobs inline here
    (only the setting is looked at, no cluster is started)."""
    from orthobench.executors import DaskExecutor, execute

    asked: list[int] = []

    def run(self, jobs, session) -> None:
        asked.append(self.jobs_per_gpu)
        for job in jobs:
            session.finish(job, execute(job))

    monkeypatch.setattr(DaskExecutor, "run", run)
    return asked


# The plugin's sphere task, Sobol' search and the centre optimizer: 1 task x 2 optimizers x 2
# seeds, 3 + 3 evaluations per cell.
_SPHERE_SUITE = """
name: sphere
seeds: 2
n_init: 3
budget: 3
tasks:
  - {{name: "{plugin}:make_sphere", params: {{{params}}}, label: sphere}}
optimizers:
  - sobol
  - {{name: "{plugin}:CenterOptimizer", label: center}}
"""


@pytest.fixture
def sphere_suite(plugin: str, write_suite):
    """Write the sphere suite, its task given ``params`` (``fail_at``, ``delay``), to ``name``
    and return the path."""

    def _write(name: str = "suite.yaml", **params: float) -> Path:
        flow = ", ".join(f"{key}: {value}" for key, value in params.items())
        return write_suite(_SPHERE_SUITE.format(plugin=plugin, params=flow), name=name)

    return _write


@pytest.fixture(params=["process", "dask"])
def parallel_executor(request) -> type:
    """Each executor class that runs a cell's evaluations at once (Dask where installed)."""
    if request.param == "dask":
        pytest.importorskip("dask.distributed")
        from orthobench.executors import DaskExecutor

        return DaskExecutor
    from orthobench.executors import ProcessExecutor

    return ProcessExecutor
