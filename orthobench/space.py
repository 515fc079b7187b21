"""Search spaces: named parameters with native bounds, mapped to and from the unit cube.

Every optimizer works in ``[0, 1]^d``; tasks work in native units. A parameter is ``float``
(linear), ``log`` (log-uniform in native units, so the unit cube is uniform in log space) or
``int`` (linear, rounded to the nearest integer when decoded).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

ParameterKind = Literal["float", "log", "int"]
PARAMETER_KINDS: tuple[str, ...] = ("float", "log", "int")


@dataclass(frozen=True, kw_only=True)
class Parameter:
    """One search dimension.

    Args:
        name: Parameter name (unique within a space).
        low: Lower bound in native units.
        high: Upper bound in native units.
        kind: ``"float"``, ``"log"`` (requires ``low > 0``) or ``"int"`` (requires whole-number
            bounds). Bounds are finite and inclusive: decoded values lie in ``[low, high]``.
    """

    name: str
    low: float
    high: float
    kind: ParameterKind = "float"

    def __post_init__(self) -> None:
        if self.kind not in PARAMETER_KINDS:
            raise ValueError(f"`kind` must be one of {PARAMETER_KINDS}, but got {self.kind=}.")
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError(f"Bounds must be finite, but got ({self.low=}, {self.high=}).")
        if not self.low < self.high:
            raise ValueError(f"`low < high` must hold, but got ({self.low=}, {self.high=}).")
        if not math.isfinite(self.high - self.low):  # every decoded value would be NaN or a bound
            raise ValueError(
                f"The width `high - low` must be finite, but ({self.low=}, {self.high=}) "
                "overflows it."
            )
        if self.kind == "log" and not self.low > 0:
            raise ValueError(f"A log parameter needs `low > 0`, but got {self.low=}.")
        if self.kind == "int" and not (
            float(self.low).is_integer() and float(self.high).is_integer()
        ):
            raise ValueError(
                f"An int parameter needs whole numbers as bounds, but got ({self.low=}, "
                f"{self.high=})."
            )

    def _edges(self) -> tuple[float, float]:
        if self.kind == "log":
            return math.log(self.low), math.log(self.high)
        if self.kind == "int":
            # Each integer owns an equal share of the unit interval.
            return self.low - 0.5, self.high + 0.5
        return self.low, self.high

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        lo, hi = self._edges()
        v = lo + np.clip(u, 0.0, 1.0) * (hi - lo)
        if self.kind == "log":
            return np.clip(np.exp(v), self.low, self.high)
        if self.kind == "int":
            # + 0.0: rint(-0.4) is -0.0, which a task formatting x printed as "-0.0"
            return np.clip(np.rint(v), self.low, self.high) + 0.0
        return np.clip(v, self.low, self.high)  # lo + (hi - lo) can round past hi

    def to_unit(self, v: np.ndarray) -> np.ndarray:
        lo, hi = self._edges()
        v = np.asarray(v, dtype=float)
        if self.kind == "log":
            v = np.log(v)
        return (v - lo) / (hi - lo)


@dataclass(frozen=True)
class SearchSpace:
    """An ordered tuple of :class:`Parameter`.

    ``from_unit`` maps ``n x d`` unit-cube points to ``n x d`` native values; ``to_unit`` inverts it
    (exactly for float and log parameters, up to rounding for int parameters).
    """

    parameters: tuple[Parameter, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"Parameter names must be unique, but got {names}.")

    @classmethod
    def box(cls, bounds: Sequence[tuple[float, float]], prefix: str = "x") -> SearchSpace:
        """A space of float parameters ``x0, x1, ...`` with the given ``(low, high)`` bounds."""
        return cls(
            tuple(
                Parameter(name=f"{prefix}{i}", low=lo, high=hi) for i, (lo, hi) in enumerate(bounds)
            )
        )

    @property
    def dim(self) -> int:
        return len(self.parameters)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        u = np.atleast_2d(np.asarray(u, dtype=float))
        if u.shape[-1] != self.dim:
            raise ValueError(
                f"Expected points with {self.dim} coordinates, but got shape {u.shape}."
            )
        return np.stack([p.from_unit(u[:, i]) for i, p in enumerate(self.parameters)], axis=-1)

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=float))
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"Expected points with {self.dim} coordinates, but got shape {x.shape}."
            )
        return np.stack([p.to_unit(x[:, i]) for i, p in enumerate(self.parameters)], axis=-1)

    def as_dict(self, x: np.ndarray) -> dict[str, float | int]:
        """One native point as ``{name: value}`` (ints as ``int``)."""
        return {
            p.name: int(v) if p.kind == "int" else float(v)
            for p, v in zip(self.parameters, np.asarray(x, dtype=float).ravel(), strict=True)
        }
