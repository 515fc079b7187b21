"""orthobench: benchmarking and diagnostics for Bayesian hyperparameter optimization.

Public API: the registries (to add your own tasks and optimizers), the base classes, suite
loading and the programmatic runner. Everything else is internal.
"""

from orthobench.optimizers.base import Optimizer, Suggestion
from orthobench.registry import OPTIMIZERS, TASKS
from orthobench.space import Parameter, SearchSpace
from orthobench.suite import Cell, Suite, load_suite
from orthobench.tasks.base import Evaluation, Task

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
]
__version__ = "0.1.0"
