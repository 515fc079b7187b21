"""Shared fixtures: a plugin module on sys.path and a suite-file writer."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

PLUGIN_SOURCE = '''
"""A user's own task and optimizer, registered only by import path."""
import time

import numpy as np

from orthobench import Evaluation, Optimizer, SearchSpace, Suggestion, Task, Parameter


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


def make_sphere(dim: int = 2, delay: float = 0.0, fail_at: float = -1.0) -> Sphere:
    """A sphere on [-1, 1]^dim."""
    return Sphere(dim, delay, fail_at)


class CenterOptimizer(Optimizer):
    """Always proposes the centre of the cube, jittered."""

    def __init__(self, dim, *, jitter: float = 0.1, **kwargs):
        super().__init__(dim, **kwargs)
        self.rng = np.random.default_rng(self.seed)
        self.jitter = jitter

    def ask(self, n=1):
        self._asks += 1
        return Suggestion(x=np.clip(0.5 + self.jitter * self.rng.standard_normal((n, self.dim)), 0, 1))
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Name of an importable module holding user plugins (also on PYTHONPATH for subprocesses)."""
    root = tmp_path / "plugins"
    root.mkdir()
    (root / "userplugin.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
    return "userplugin"


@pytest.fixture
def write_suite(tmp_path: Path):
    """Write YAML text (dedented) to a file and return its path."""

    def _write(text: str, name: str = "suite.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write
