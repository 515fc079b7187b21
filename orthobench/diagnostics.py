"""Typed step diagnostics: what surrogates and optimizers write into a step's ``info`` and the
report reads back (torch-free).

Each field is one key of the stored JSON object, in field order; the key is the field's name
unless its metadata names another. A non-finite float is stored as null (JSON has no NaN) and
reads back as None. Changing a key, its order or a value's type changes stored frames:
``tests/optimizers/test_diagnostics.py`` pins the JSON text.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

_D = TypeVar("_D", bound="Diagnostics")


def _stored_as(key: str) -> Any:
    return field(metadata={"key": key})


def _key(f: Any) -> str:
    return f.metadata.get("key", f.name)


@functools.cache
def _nested(cls: type[Diagnostics]) -> dict[str, type[Diagnostics]]:
    """The fields of ``cls`` that hold diagnostics of their own, by name."""
    # Once per class: the annotations are strings (postponed evaluation), slow to resolve.
    hints = typing.get_type_hints(cls)
    return {
        name: hint
        for name, hint in hints.items()
        if isinstance(hint, type) and issubclass(hint, Diagnostics)
    }


@dataclass(frozen=True, kw_only=True)
class Diagnostics:
    """Base of the typed diagnostics: JSON lists are tuples here, a nested :class:`Diagnostics`
    field is stored flat, its keys in place."""

    def to_info(self) -> dict[str, Any]:
        """The JSON object stored for these diagnostics."""
        info: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Diagnostics):
                info.update(value.to_info())
            else:
                info[_key(f)] = list(value) if isinstance(value, tuple) else value
        return info

    @classmethod
    def from_info(cls: type[_D], info: Mapping[str, Any]) -> _D | None:
        """Parse a stored ``info`` object; None where it lacks a key without a default (it was
        written by another optimizer).

        Keys of no field are ignored: the same object holds the task's extras
        (:attr:`~orthobench.tasks.base.Evaluation.info`) and keys older versions wrote.
        """
        nested = _nested(cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in nested:
                value = nested[f.name].from_info(info)
                if value is None:
                    return None
            elif _key(f) in info:
                value = info[_key(f)]
                value = tuple(value) if isinstance(value, list) else value
            elif f.default is not MISSING:
                value = f.default
            else:
                return None
            values[f.name] = value
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class LaplaceDiagnostics(Diagnostics):
    """A Laplace posterior's Hessian and re-centring
    (:class:`~orthobench.surrogates.laplace.LaplacePosterior`)."""

    eig_floored: bool
    hessian_indefinite: bool
    min_eigenvalue: float  # of the raw Hessian
    recenter_shift: float
    newton_steps: int
    fallback: str | None = None


@dataclass(frozen=True, kw_only=True)
class EnsembleWeights(Diagnostics):
    """An ensemble's members and aggregation weights, entropy in nats (``max_entropy = log M``)."""

    kernels: tuple[str, ...] = _stored_as("ensemble_kernels")
    weights: tuple[float, ...] = _stored_as("ensemble_weights")
    entropy: float = _stored_as("ensemble_entropy")
    max_entropy: float = _stored_as("ensemble_max_entropy")


@dataclass(frozen=True, kw_only=True)
class OrthoBOStep(Diagnostics):
    """One OrthoBO or MC-EI step (:class:`~orthobench.optimizers.orthobo.OrthoBO`); tuples hold
    one entry per ensemble member.

    Fields with a default were added after the first version: None where a row predates them.
    ``screen_theta_samples`` and ``coarse_theta_samples`` are None too when that stage used all
    draws or did not run.
    """

    estimator: str
    theta_sampling: str
    rb: bool | None = None
    theta_samples: int | None = None
    n_evaluations: tuple[int, ...] | None = None
    ensemble: EnsembleWeights
    eig_floored: tuple[bool, ...]
    min_eigenvalue: tuple[float | None, ...]  # of each raw Laplace Hessian
    recenter_shift: tuple[float, ...]
    jittered_draws: tuple[int, ...]  # theta draws that needed Cholesky jitter
    fit_device: str | None = None
    fit_grad_norm: tuple[float, ...] | None = None
    fit_stationary: tuple[bool, ...] | None = None
    screen_theta_samples: int | None = None
    coarse_theta_samples: int | None = None
