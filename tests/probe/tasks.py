"""A 2-d task for the CI-sized probe tests (by import path: ``tests.probe.tasks:branin2``)."""

from __future__ import annotations

from botorch.test_functions import Branin

from orthobench.registry import task_factory
from orthobench.tasks.synthetic import SyntheticTask


@task_factory
def branin2() -> SyntheticTask:
    """Branin: 2-d, [-5, 10] x [0, 15], global minimum 0.397887."""
    return SyntheticTask(Branin())
