"""orthobench: benchmarking and diagnostics for Bayesian hyperparameter optimization.

The public API is the names of ``__all__`` below, and the modules :mod:`orthobench.botorch`
(BoTorch acquisition functions: :func:`orthobench.botorch.marginal_log_ei`) and
:mod:`orthobench.integrations.optuna` (``OrthoBOSampler``):

- Running and reading benchmarks, as the command line does: :func:`run_suite` (``orthobench
  run``; returns a :class:`RunResult`), :func:`load_results` (the rows ``orthobench report``
  reads), :func:`load_suite` with :class:`Suite` and :class:`Cell`.
- Measuring the Monte Carlo noise of an acquisition function: :func:`acquisition_noise`
  (returns an :class:`AcquisitionNoise`), and :class:`ProbeAcquisition`, the base of an
  acquisition that ``orthobench probe`` measures on its states (named by import path).
- Adding your own tasks and optimizers: the base classes :class:`Task` (with
  :class:`SearchSpace`, :class:`Parameter`, :class:`Evaluation`) and :class:`Optimizer` (with
  :class:`Suggestion`), and the registries :data:`TASKS` and :data:`OPTIMIZERS` with the
  decorators :func:`task_factory` and :func:`optimizer_factory`.

Everything else -- the other modules, and every name starting with ``_`` -- is internal and may
change without notice, as in Optuna.

The names below are imported on first access (PEP 562), so ``import orthobench`` and the
torch-free layers under it (:mod:`orthobench.suite`, :mod:`orthobench.config`) do not import
torch (docs/design.md, "Layers and data flow").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orthobench.api import RunResult, load_results, run_suite
    from orthobench.noise import AcquisitionNoise, acquisition_noise
    from orthobench.optimizers.base import Optimizer, Suggestion
    from orthobench.probe.plugins import ProbeAcquisition
    from orthobench.registry import OPTIMIZERS, TASKS, optimizer_factory, task_factory
    from orthobench.space import Parameter, SearchSpace
    from orthobench.suite import Cell, Suite, load_suite
    from orthobench.tasks.base import Evaluation, Task

# Each name of __all__ -> the module that defines it.
_EXPORTS = {
    "OPTIMIZERS": "orthobench.registry",
    "TASKS": "orthobench.registry",
    "AcquisitionNoise": "orthobench.noise",
    "Cell": "orthobench.suite",
    "Evaluation": "orthobench.tasks.base",
    "Optimizer": "orthobench.optimizers.base",
    "Parameter": "orthobench.space",
    "ProbeAcquisition": "orthobench.probe.plugins",
    "RunResult": "orthobench.api",
    "SearchSpace": "orthobench.space",
    "Suggestion": "orthobench.optimizers.base",
    "Suite": "orthobench.suite",
    "Task": "orthobench.tasks.base",
    "acquisition_noise": "orthobench.noise",
    "load_results": "orthobench.api",
    "load_suite": "orthobench.suite",
    "optimizer_factory": "orthobench.registry",
    "run_suite": "orthobench.api",
    "task_factory": "orthobench.registry",
}

__all__ = [
    "OPTIMIZERS",
    "TASKS",
    "AcquisitionNoise",
    "Cell",
    "Evaluation",
    "Optimizer",
    "Parameter",
    "ProbeAcquisition",
    "RunResult",
    "SearchSpace",
    "Suggestion",
    "Suite",
    "Task",
    "acquisition_noise",
    "load_results",
    "load_suite",
    "optimizer_factory",
    "run_suite",
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
    return sorted({*globals(), *_EXPORTS})
