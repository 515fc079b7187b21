"""The :class:`Optimizer` base class: ask/tell in the unit cube.

Call order (enforced by :func:`orthobench.loop.run_cell`): construct, ``tell`` the shared initial
design, then alternate ``ask`` and ``tell``. Objectives are minimized; an optimizer that builds on
BoTorch (which maximizes) negates internally.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


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
        acq_seconds: Wall time spent building and optimizing the acquisition for this step.
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

    Subclasses implement :meth:`ask`; they read the history from :attr:`train_x` (``t x d``, unit
    cube) and :attr:`train_y` (``t``, minimization) and may override :meth:`_on_tell`.
    """

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
        self._asks = 0

    @abstractmethod
    def ask(self, n: int = 1) -> Suggestion:
        """Propose ``n`` points (``n x d``, unit cube) from the current history."""

    def tell(self, x: np.ndarray, y: np.ndarray) -> None:
        """Add evaluated points (``n x d`` unit cube) with their objective values (``n``)."""
        x_t = torch.as_tensor(np.atleast_2d(x), device=self.device, dtype=self.dtype)
        y_t = torch.as_tensor(np.atleast_1d(y), device=self.device, dtype=self.dtype)
        if x_t.shape[-1] != self.dim or x_t.shape[0] != y_t.shape[0]:
            raise ValueError(
                f"tell() needs x of shape n x {self.dim} and y of shape n, got {tuple(x_t.shape)} and {tuple(y_t.shape)}."
            )
        if not torch.isfinite(y_t).all():
            raise ValueError(f"tell() needs finite objective values, but got {y_t.tolist()}.")
        self._on_tell(x_t, y_t)
        self.train_x = torch.cat([self.train_x, x_t])
        self.train_y = torch.cat([self.train_y, y_t])

    def _on_tell(self, x: torch.Tensor, y: torch.Tensor) -> None:  # noqa: B027 -- optional hook
        """Hook called with the new points *before* they join the history (no-op by default)."""

    def _step_seed(self, *keys: object) -> int:
        """A seed for the current ask, distinct per ask and per purpose."""
        from orthobench.seeding import derive_seed

        return derive_seed(self.seed, self._asks, *keys)
