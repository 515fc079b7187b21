"""The :class:`Task` base class: an objective to minimize over a :class:`SearchSpace`."""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from orthobench.exceptions import show_value
from orthobench.space import SearchSpace


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """The outcome of one objective evaluation.

    The fields are checked, not coerced: a value of another type raises ``TypeError`` naming the
    field and the value (a ``"no"`` would otherwise be stored as an outlier, a ``True`` as 1.0).

    Args:
        y: Observed objective value (to be minimized), noise included: a real number, not a bool.
            A non-finite ``y`` is stored with ``status="invalid"``.
        y_true: The noise-free value where the task knows it (synthetic functions); regret is
            computed from it, else from ``y`` (a non-finite one never counts as the best).
        is_outlier: True when the task corrupted this evaluation on purpose (outlier injection):
            a bool.
        info: A dict of JSON-serializable extras (e.g. training accuracy), stored with the record.
            Non-finite floats in it (a diverged loss) are stored as null: JSON has no NaN.
        constraints: The ``n_constraints`` constraint values ``c_i(x)`` of a constrained task
            (:attr:`Task.n_constraints`), real numbers (a list is stored as a tuple of floats);
            the point is feasible when every ``c_i(x) <= 0`` (a non-finite one is not, and makes
            the evaluation ``invalid``, as a non-finite ``y`` does). Empty for an unconstrained
            task.
    """

    y: float
    y_true: float | None = None
    is_outlier: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    constraints: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not _is_real(self.y):
            raise TypeError(f"`Evaluation.y` must be a real number, but got {show_value(self.y)}.")
        if self.y_true is not None and not _is_real(self.y_true):
            raise TypeError(
                f"`Evaluation.y_true` must be a real number or None, but got "
                f"{show_value(self.y_true)}."
            )
        if not isinstance(self.is_outlier, (bool, np.bool_)):
            raise TypeError(
                f"`Evaluation.is_outlier` must be a bool, but got {show_value(self.is_outlier)}."
            )
        if not isinstance(self.info, dict):
            raise TypeError(f"`Evaluation.info` must be a dict, but got {show_value(self.info)}.")
        if bad := [key for key in self.info if not isinstance(key, str)]:
            raise TypeError(
                f"`Evaluation.info` keys must be strings, but got {show_value(bad[0])}."
            )
        if not isinstance(self.constraints, (tuple, list)) or not all(
            map(_is_real, self.constraints)
        ):
            raise TypeError(
                f"`Evaluation.constraints` must be a tuple of real numbers, but got "
                f"{show_value(self.constraints)}."
            )
        # A frozen dataclass: the one coercion (to floats, so a record stores what it compares).
        object.__setattr__(self, "constraints", tuple(as_float(c) for c in self.constraints))

    @property
    def feasible(self) -> bool:
        """Whether every constraint value is finite and ``<= 0`` (:func:`feasible`)."""
        return feasible(self.constraints)


def as_float(value: numbers.Real) -> float:
    """``value`` as a float; an int beyond float's range (``10**400``) is the infinity of its
    sign, as a float that overflows is (``float`` raised ``OverflowError`` and failed the cell)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def feasible(constraints: Sequence[float]) -> bool:
    """Whether every constraint value is finite and ``<= 0`` (True without constraints): a
    non-finite one (a failed simulation, NaN for a timeout) is infeasible, -inf included."""
    return all(math.isfinite(c) and c <= 0 for c in constraints)


def _is_real(value: Any) -> bool:
    """Whether ``value`` is a real number (numpy's included), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class Task(ABC):
    """An objective to minimize over a box of named parameters.

    Subclasses set :attr:`space` (native bounds and parameter kinds) and, where known, the
    minimum :attr:`optimal_value` so regret is exact. A constrained task declares
    :attr:`n_constraints` and returns that many constraint values with each evaluation
    (:attr:`Evaluation.constraints`, feasible where all are ``<= 0``). ``evaluate`` receives one native point and a
    seed that determines all its randomness (observation noise, data shuffling, outliers), so an
    evaluation is reproducible wherever it runs. A task owns its noise: optimizers never add any.
    """

    #: Known minimum of the noise-free objective (over the feasible points of a constrained
    #: task), or None.
    optimal_value: float | None = None
    #: How many constraint values each :class:`Evaluation` carries (0: unconstrained).
    n_constraints: int = 0
    #: Whether the evaluations of a batch step are worth a process each (the process pool's or
    #: Dask's evaluation workers). False for a function that evaluates in microseconds, where a
    #: process's start and each hand-off cost more than the evaluation: the step's points are
    #: then evaluated in the cell's process, and the cell holds one worker, not ``q``, so the
    #: others run other cells (:func:`orthobench.loop.evaluates_in_parallel`).
    parallel_evaluations: bool = True

    def __init__(self, space: SearchSpace) -> None:
        self.space = space

    @property
    def dim(self) -> int:
        return self.space.dim

    def prepare(self, device: torch.device) -> None:  # noqa: B027 -- optional hook
        """One-time work before the first evaluation on ``device`` (reading data, first imports),
        called once per task object and device, outside every evaluation's time limit and
        seconds (:func:`orthobench.evaluation.prepare_once`). An evaluation time limit that
        stops an import leaves its modules half-imported for the rest of the process, and a
        first evaluation that pays these costs looks slower than the others. Nothing here."""

    @abstractmethod
    def evaluate(self, x: np.ndarray, *, seed: int, device: torch.device) -> Evaluation:
        """Evaluate one point.

        Args:
            x: ``d`` native parameter values (ints are whole numbers, log parameters in native units).
            seed: Seed for every random draw of this evaluation.
            device: Device for tasks that compute (training); synthetic tasks ignore it.

        Returns:
            The :class:`Evaluation`.
        """

    def evaluate_batch(
        self, xs: np.ndarray, *, seeds: Sequence[int], device: torch.device
    ) -> list[Evaluation]:
        """Evaluate ``k`` points, each with its own seed.

        The contract: one :class:`Evaluation` per row of ``xs``, in order, row ``i`` evaluated
        with ``seeds[i]``, each equal to ``evaluate(xs[i], seed=seeds[i], device=device)``. This
        default is that loop, so it is exact; a task overrides it where evaluating several
        configurations together is cheaper (:meth:`CNNTask.evaluate_batch
        <orthobench.tasks.cnn.CNNTask.evaluate_batch>` trains the ``k`` networks as one stack),
        and its results then equal the loop's up to rounding (the override says how far).

        Args:
            xs: ``k x d`` native parameter values, one point per row (as :meth:`evaluate` takes
                them).
            seeds: ``k`` seeds, ``seeds[i]`` for row ``i``.
            device: As for :meth:`evaluate`.

        Returns:
            ``k`` evaluations, row order.

        Raises:
            ValueError: when ``xs`` is not ``k x d`` or ``seeds`` does not have ``k`` entries.
        """
        xs = _check_batch(xs, seeds, self.dim)
        return [
            self.evaluate(x, seed=int(s), device=device) for x, s in zip(xs, seeds, strict=True)
        ]

    def regret(self, y: float) -> float | None:
        """``y - optimal_value``, or None when the optimum is unknown."""
        return None if self.optimal_value is None else float(y - self.optimal_value)


def _check_batch(xs: np.ndarray, seeds: Sequence[int], dim: int) -> np.ndarray:
    """``xs`` as a ``k x dim`` array, checked against ``seeds`` (``k`` of them)."""
    xs = np.asarray(xs)
    if xs.ndim != 2 or xs.shape[1] != dim:
        raise ValueError(f"`xs` must be k x {dim}, but got shape {xs.shape}.")
    if len(seeds) != len(xs):
        raise ValueError(
            f"`seeds` must have one seed per row of `xs`, but got {len(seeds)} seeds for "
            f"{len(xs)} rows."
        )
    return xs
