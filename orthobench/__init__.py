"""orthobench: benchmarking and diagnostics for Bayesian hyperparameter optimization.

Public API: the registries (to add your own tasks and optimizers), the base classes and suite
loading. Everything else is internal.

The names below are imported on first access (PEP 562), so ``import orthobench`` and the
torch-free layers under it (:mod:`orthobench.suite`, :mod:`orthobench.config`) do not import
torch (docs/design.md, "Layers and data flow").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orthobench.optimizers.base import Optimizer, Suggestion
    from orthobench.registry import OPTIMIZERS, TASKS, optimizer_factory, task_factory
    from orthobench.space import Parameter, SearchSpace
    from orthobench.suite import Cell, Suite, load_suite
    from orthobench.tasks.base import Evaluation, Task

# Each name of __all__ -> the module that defines it.
_EXPORTS = {
    "OPTIMIZERS": "orthobench.registry",
    "TASKS": "orthobench.registry",
    "Cell": "orthobench.suite",
    "Evaluation": "orthobench.tasks.base",
    "Optimizer": "orthobench.optimizers.base",
    "Parameter": "orthobench.space",
    "SearchSpace": "orthobench.space",
    "Suggestion": "orthobench.optimizers.base",
    "Suite": "orthobench.suite",
    "Task": "orthobench.tasks.base",
    "load_suite": "orthobench.suite",
    "optimizer_factory": "orthobench.registry",
    "task_factory": "orthobench.registry",
}

__all__ = [
    "OPTIMIZERS",
    "TASKS",
    "Cell",
    "Evaluation",
    "Optimizer",
    "Parameter",
    "SearchSpace",
    "Suggestion",
    "Suite",
    "Task",
    "load_suite",
    "optimizer_factory",
    "task_factory",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'orthobench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
