"""The :class:`Optimizer` base class: ask/tell in the unit cube, with a template ``ask``.

Call order (enforced by :func:`orthobench.loop.run_cell`): construct, ``tell`` the shared initial
design, then alternate ``ask`` and ``tell``. Objectives are minimized; an optimizer that builds on
BoTorch (which maximizes) negates internally.

As Optuna's ``BaseSampler`` keeps its template methods concrete, :meth:`Optimizer.ask` is the same
for every optimizer: it checks ``n``, the pending points and the history, counts the ask (which
keys every seed of the step, :meth:`Optimizer._step_seed`), times the step and checks the shape and
bounds of what the subclass's :meth:`Optimizer._ask` proposes.

Pending points. An asynchronous loop asks while earlier proposals are still being evaluated; it
passes them to ``ask(n, pending=P)`` (``p x d``, unit cube), and an optimizer that says it takes
them (:attr:`Optimizer.accepts_pending`) proposes with them in view, e.g. as BoTorch's
``X_pending``. They are not part of the state: an ask with pending points is a function of the
seed, the history, the state and the pending points.

Resume. An optimizer is a function of its seed, its history and the small state that
:meth:`Optimizer.state_dict` returns (the ask counter, and what a subclass keeps beyond its
observations: ensemble weights, trust-region counters, positions in a point sequence). To continue a
cell from stored evaluations::

    optimizer = build_optimizer(...)           # same name, params and seed
    optimizer.tell(stored_x, stored_y)         # the history, in the order it was told
    optimizer.load_state_dict(stored_state)    # saved after the last tell

and the next ``ask`` returns what the uninterrupted optimizer would have returned.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from orthobench.config.params import is_integer
from orthobench.exceptions import one_line
from orthobench.seeding import derive_seed

#: The surrogate models an optimizer may declare it fits (:attr:`Optimizer.surrogate`).
Surrogate = Literal["gp", "tpe"]

# A proposal may leave the unit cube by float round-off (it is clipped); by more, it is a bug.
_BOUNDS_ATOL = 1e-9


def check_at_least(minimum: float, **values: float) -> None:
    """Raise ``ValueError`` naming the first of ``values`` below ``minimum`` (constructor checks)."""
    for name, value in values.items():
        if value < minimum:
            raise ValueError(f"`{name}` must be >= {minimum}, but got {name}={value!r}.")


@dataclass
class Suggestion:
    """What :meth:`Optimizer.ask` returns.

    Args:
        x: ``n x d`` points in the unit cube.
        fit_seconds: Wall time spent fitting the surrogate for this step (incl. Hessians).
        acq_seconds: Wall time spent building and optimizing the acquisition for this step (for an
            optimizer that does not time its own parts: the whole proposal).
        info: JSON-serializable diagnostics stored in the results (ensemble weights, fallbacks).
    """

    x: np.ndarray
    fit_seconds: float = 0.0
    acq_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


class Optimizer(ABC):
    """Base class of every optimizer.

    Args:
        dim: Number of search dimensions ``d``.
        seed: Seed of every random draw the optimizer makes.
        device: Torch device for surrogate and acquisition computations.
        dtype: Torch dtype (float64 by default: GP fits in float32 are fragile).

    Subclasses implement :meth:`_ask`; they read the history from :attr:`train_x` (``t x d``, unit
    cube) and :attr:`train_y` (``t``, minimization), draw randomness only from
    :meth:`_step_seed`, may override :meth:`_on_tell`, and extend :meth:`state_dict` /
    :meth:`load_state_dict` with whatever else their next proposal depends on.
    """

    #: Observations :meth:`ask` needs in the history.
    min_observations: int = 1
    #: The surrogate model the optimizer fits (None: none); readers of stored results learn it
    #: from the registry by the stored optimizer name.
    surrogate: ClassVar[Surrogate | None] = None
    #: Whether the optimizer may run on a task with constraints (``Task.n_constraints > 0``): the
    #: loop refuses, before any cell runs, a constrained task with an optimizer that says no
    #: (:func:`orthobench.loop.check_buildable`), as it would search the objective alone.
    handles_constraints: ClassVar[bool] = False
    #: Whether :meth:`ask` takes pending points (``pending``): the loop refuses asynchronous
    #: cells of an optimizer that says no, and :meth:`ask` refuses its pending points.
    accepts_pending: ClassVar[bool] = False

    def __init__(
        self,
        dim: int,
        *,
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        if dim < 1:
            raise ValueError(f"`dim` must be positive, but got {dim=}.")
        self.dim = dim
        self.seed = int(seed)
        self.device = torch.device(device)
        self.dtype = dtype
        self.train_x = torch.empty(0, dim, device=self.device, dtype=dtype)
        self.train_y = torch.empty(0, device=self.device, dtype=dtype)
        self.train_c = torch.empty(0, 0, device=self.device, dtype=dtype)
        #: The pending points of the ask under way (``p x d``, on the optimizer's device and
        #: dtype; ``p >= 1``), None without any and between asks.
        self.pending: torch.Tensor | None = None
        self._asks = 0

    @staticmethod  # noqa: B027 -- optional hook
    def check_params(**params: Any) -> None:
        """Check the rules that tie several constructor parameters together (none here).

        The registry calls it with every keyword parameter of the constructor but ``dim``,
        ``seed``, ``device`` and ``dtype``, defaults filled, when it loads a suite
        (:meth:`orthobench.registry.Registry.check_params`), so a bad combination is an error
        before anything runs; the constructor calls its own class's with the parameters those
        rules take, so each rule is written once. An override takes its rules' parameters by
        keyword and ignores the rest (``**_``); a subclass that adds rules calls its base's too.
        One value's own range is its annotation's (:mod:`orthobench.config.params`).

        Raises:
            ValueError: on one line, naming the parameters and their values; a
                :class:`~orthobench.exceptions.ConfigError` whose field is the one parameter it
                blames.
        """

    def check_constraints(self) -> None:  # noqa: B027 -- optional hook
        """Raise ``ValueError`` (one line) where this configuration cannot handle constraints
        though the class does (:attr:`handles_constraints`): the loop calls it, before any cell
        runs, for an optimizer of a constrained task. Nothing here."""

    @property
    def max_batch(self) -> int | None:
        """The most points one :meth:`ask` may propose (None: no limit)."""
        return None

    @property
    def batch_advice(self) -> str:
        """What to do for a batch larger than :attr:`max_batch`, besides lowering ``q`` (the
        loop's refusal ends with it)."""
        return "choose an optimizer with batch proposals"

    def ask(self, n: int = 1, pending: np.ndarray | None = None) -> Suggestion:
        """Propose ``n`` points (``n x d``, unit cube) from the current history.

        Args:
            n: Number of points.
            pending: ``p x d`` unit-cube points asked earlier and still being evaluated (not
                told); None or ``0 x d``: none. :meth:`_ask` finds them in :attr:`pending`.

        Raises:
            ValueError: if ``n`` is not an integer in ``[1, max_batch]``, the pending points
                are not finite ``p x d`` unit-cube points or are given to an optimizer that does
                not accept them (:attr:`accepts_pending`), or the history holds fewer than
                :attr:`min_observations` points.
        """
        pending_t = self._check_pending(pending)
        limit = self.max_batch
        # Checked before the ask is counted: a float or bool would fail inside `_ask`, after it.
        if not is_integer(n):
            raise ValueError(
                f"{type(self).__name__}.ask() needs an integer number of points, but got {n=}."
            )
        n = int(n)
        if n < 1 or (limit is not None and n > limit):
            raise ValueError(
                f"{type(self).__name__} proposes between 1 and {limit or 'any number of'} points "
                f"per ask, but got {n=}."
            )
        t = self.train_y.shape[0]
        if t < self.min_observations:
            raise ValueError(
                f"{type(self).__name__} needs at least {self.min_observations} observation(s) "
                f"before ask() (tell the initial design first), but has {t}."
            )
        self._asks += 1
        start = time.perf_counter()
        self.pending = pending_t
        try:
            suggestion = self._ask(n)
        finally:
            self.pending = None
        elapsed = time.perf_counter() - start
        x = np.asarray(suggestion.x, dtype=np.float64)
        if x.shape != (n, self.dim):
            raise RuntimeError(
                f"{type(self).__name__}._ask({n}) returned x of shape {x.shape}, expected {(n, self.dim)}."
            )
        if not np.isfinite(x).all() or (x < -_BOUNDS_ATOL).any() or (x > 1 + _BOUNDS_ATOL).any():
            raise RuntimeError(
                f"{type(self).__name__}._ask({n}) proposed points outside the unit cube: {x.tolist()}."
            )
        suggestion.x = np.clip(x, 0.0, 1.0)
        if suggestion.fit_seconds == 0.0 and suggestion.acq_seconds == 0.0:
            suggestion.acq_seconds = elapsed
        return suggestion

    def _check_pending(self, pending: np.ndarray | None) -> torch.Tensor | None:
        """``pending`` as a ``p x d`` tensor for :attr:`pending` (None for none), checked.

        Raises:
            ValueError: on one line, for another shape, a non-finite value, a point outside the
                unit cube (beyond float round-off), or pending points given to an optimizer that
                does not accept them.
        """
        if pending is None:
            return None
        array = np.asarray(pending, dtype=np.float64)
        name = type(self).__name__
        if array.ndim != 2 or array.shape[-1] != self.dim:
            raise ValueError(
                f"{name}.ask() needs pending points of shape p x {self.dim}, but got {array.shape}."
            )
        if not array.size:
            return None
        bad = ~np.isfinite(array).all(axis=-1)
        if bad.any():
            raise ValueError(
                f"{name}.ask() needs finite pending points, but rows {np.flatnonzero(bad).tolist()} are not."
            )
        bad = ((array < -_BOUNDS_ATOL) | (array > 1 + _BOUNDS_ATOL)).any(axis=-1)
        if bad.any():
            raise ValueError(
                f"{name}.ask() needs pending points in the unit cube, but rows "
                f"{np.flatnonzero(bad).tolist()} leave it."
            )
        if not self.accepts_pending:
            raise ValueError(
                f"{name} does not accept pending points (accepts_pending is False), but got {len(array)}."
            )
        return torch.as_tensor(np.clip(array, 0.0, 1.0), device=self.device, dtype=self.dtype)

    @abstractmethod
    def _ask(self, n: int) -> Suggestion:
        """Propose ``n`` points (``n x d``) from the history, with the ask's pending points
        (:attr:`pending`) in view where the optimizer accepts them; ``n``, the pending points and
        the history are checked."""

    def tell(self, x: np.ndarray, y: np.ndarray, constraints: np.ndarray | None = None) -> None:
        """Add evaluated points (``n x d`` unit cube) with their objective values (``n``) and, on
        a constrained task, their constraint values (``n x m``, feasible where every one is
        ``<= 0``; kept in :attr:`train_c`, which has ``m = 0`` columns on other tasks).

        Points beyond the cube by float round-off are clipped; telling no points (``n = 0``)
        changes nothing.

        Raises:
            ValueError: on one line, for other shapes, a point that is not finite or leaves the
                unit cube, or a non-finite objective or constraint value; nothing is added.
        """
        x_a = np.atleast_2d(np.asarray(x, dtype=np.float64))
        y_a = np.atleast_1d(y)
        # A bool would be told as 0 or 1, a complex value without its imaginary part.
        if y_a.dtype.kind not in "iuf":
            raise ValueError(f"tell() needs real numbers as y, but got {y_a.dtype} values.")
        y_t = torch.as_tensor(y_a, device=self.device, dtype=self.dtype)
        if x_a.ndim != 2 or x_a.shape[-1] != self.dim or y_t.ndim != 1 or len(x_a) != len(y_t):
            raise ValueError(
                f"tell() needs x of shape n x {self.dim} and y of shape n, got {x_a.shape} and "
                f"{tuple(y_t.shape)}."
            )
        # As the pending points: a NaN point would reach the history (MC-TPE proposed from it).
        bad = (~np.isfinite(x_a) | (x_a < -_BOUNDS_ATOL) | (x_a > 1 + _BOUNDS_ATOL)).any(axis=-1)
        if bad.any():
            raise ValueError(
                f"tell() needs finite points in the unit cube, but rows "
                f"{np.flatnonzero(bad).tolist()} are not: {one_line(str(x_a[bad].tolist()))}."
            )
        x_t = torch.as_tensor(np.clip(x_a, 0.0, 1.0), device=self.device, dtype=self.dtype)
        if not torch.isfinite(y_t).all():
            raise ValueError(f"tell() needs finite objective values, but got {y_t.tolist()}.")
        m = self.train_c.shape[-1] if self.train_y.shape[0] else None
        c_t = torch.as_tensor(
            np.zeros((y_t.shape[0], 0)) if constraints is None else np.atleast_2d(constraints),
            device=self.device,
            dtype=self.dtype,
        )
        if c_t.shape[0] != y_t.shape[0] or (m is not None and c_t.shape[-1] != m):
            raise ValueError(
                f"tell() needs constraints of shape n x m = {y_t.shape[0]} x "
                f"{'m' if m is None else m}, but got {tuple(c_t.shape)}."
            )
        if not torch.isfinite(c_t).all():
            raise ValueError(f"tell() needs finite constraint values, but got {c_t.tolist()}.")
        if not len(y_t):
            return  # no observation: no hook (TuRBO would count an empty batch as a failure)
        self._on_tell(x_t, y_t)
        self.train_x = torch.cat([self.train_x, x_t])
        self.train_y = torch.cat([self.train_y, y_t])
        self.train_c = c_t if m is None else torch.cat([self.train_c, c_t])

    @property
    def feasible(self) -> torch.Tensor:
        """``t`` bools: which told points met every constraint (all of them without any)."""
        return (self.train_c <= 0).all(dim=-1)

    def _on_tell(self, x: torch.Tensor, y: torch.Tensor) -> None:  # noqa: B027 -- optional hook
        """Hook called with the new points *before* they join the history (no-op by default)."""

    def _step_seed(self, *keys: object) -> int:
        """A seed for the current ask, distinct per ask and per purpose."""
        return derive_seed(self.seed, self._asks, *keys)

    def state_dict(self) -> dict[str, Any]:
        """The JSON-serializable state beyond the history, taken between steps (after a ``tell``).

        A suggestion asked but not yet told is not part of the state: the next ``ask`` replaces it.
        Subclasses extend the dict (call ``super().state_dict()``).
        """
        return {"asks": self._asks, "n_observations": int(self.train_y.shape[0])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` after the same history has been told again.

        Raises:
            ValueError: if the history told so far holds another number of observations than
                the one the state was saved with (only the count is compared).
        """
        if state["n_observations"] != self.train_y.shape[0]:
            raise ValueError(
                f"The state was saved with {state['n_observations']} observations, but the rebuilt "
                f"{type(self).__name__} has {self.train_y.shape[0]}: tell the stored history first."
            )
        self._asks = int(state["asks"])
