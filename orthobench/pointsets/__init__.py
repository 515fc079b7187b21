r"""Standard-normal point sets for Gaussian integration: MC, QMC and (randomized) cubature rules.

Every rule is a :class:`PointSet`, points ``z`` and weights whose weighted sum estimates
:math:`\mathbb E[f(z)]`, :math:`z \sim \mathcal N(0, I_p)`; :func:`point_set` builds one by name
within a budget of integrand evaluations. The module knows nothing about GPs: OrthoBO maps
``theta_s = theta_hat + L z_s`` and evaluates EI at each ``theta_s``
(:mod:`orthobench.theta_estimators`). The rules and their derivations are in the constructors'
docstrings (:mod:`orthobench.pointsets._rules`): the stochastic spherical-radial rules of Genz
and Monahan and Owen-scrambled Sobol' points, with their references.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from orthobench.exceptions import OrthobenchWarning, UnknownNameError
from orthobench.pointsets._base import (
    _DEFAULT_MAX_RADII,
    PointSet,
    _check_count,
    _check_dim,
    cross_polytope,
    random_rotation,
    regular_simplex,
)
from orthobench.pointsets._rules import (
    antithetic_points,
    iid_points,
    owen_line_points,
    owen_sobol_points,
    radial_points,
    sobol_points,
    sr3_points,
    unscented_points,
)

__all__ = [
    "POINT_SETS",
    "PointSet",
    "antithetic_points",
    "cross_polytope",
    "iid_points",
    "owen_line_points",
    "owen_sobol_points",
    "point_count",
    "point_set",
    "radial_points",
    "random_rotation",
    "regular_simplex",
    "sobol_points",
    "sr3_points",
    "unscented_points",
]

# ----------------------------------------------------------------------------------------------
# Registry and budgets
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """How a budget is spent: the constructor's count arguments and the resulting ``S``."""

    counts: Mapping[str, int]
    n_points: int


def _per_draw_plan(arg: str, size: Callable[[int], int], shared: int = 0) -> Callable[..., _Plan]:
    """``K = max(1, floor((budget - shared) / size(p)))`` rules of ``size(p)`` points."""

    def plan(p: int, budget: int) -> _Plan:
        k = max(1, (budget - shared) // size(p))
        return _Plan({arg: k}, shared + k * size(p))

    return plan


def _radial_plan(directions: str) -> Callable[..., _Plan]:
    def plan(
        p: int, budget: int, n_radii: int | None = None, max_radii: int = _DEFAULT_MAX_RADII
    ) -> _Plan:
        m = p + 1 if directions == "simplex" else 2 * p
        if n_radii is not None:
            _check_count("n_radii", n_radii)
            k = max(1, budget // (n_radii * m))
            return _Plan({"n_radii": n_radii, "n_rules": k}, k * n_radii * m)
        _check_count("max_radii", max_radii)
        blocks = max(1, budget // m)  # rotated designs that fit
        k_min = -(-blocks // max_radii)  # fewest rules with n <= max_radii
        # Most designs used, k in [k_min, 2 k_min] (so n stays >= ~max_radii / 2); ties: fewer rules.
        k = max(range(k_min, 2 * k_min + 1), key=lambda j: ((blocks // j) * j, -j))
        n = blocks // k
        return _Plan({"n_radii": n, "n_rules": k}, k * n * m)

    return plan


@dataclass(frozen=True)
class _Entry:
    build: Callable[..., PointSet]
    plan: Callable[..., _Plan]
    fixed: Mapping[str, Any]  # constructor kwargs implied by the name
    options: tuple[str, ...]  # kwargs a caller may pass through point_set


def _entries() -> dict[str, _Entry]:
    return {
        "iid": _Entry(iid_points, _per_draw_plan("n", lambda p: 1), {}, ()),
        "antithetic": _Entry(antithetic_points, _per_draw_plan("n_pairs", lambda p: 2), {}, ()),
        "qmc-sobol": _Entry(sobol_points, _per_draw_plan("n", lambda p: 1), {}, ()),
        "qmc-owen": _Entry(owen_sobol_points, _per_draw_plan("n", lambda p: 1), {}, ()),
        "qmc-owen-line": _Entry(owen_line_points, _per_draw_plan("n_outer", lambda p: 3), {}, ()),
        "sr3": _Entry(
            sr3_points,
            _per_draw_plan("n_rules", lambda p: 2 * (p + 1), shared=1),
            {"directions": "simplex"},
            (),
        ),
        "sr3-cross": _Entry(
            sr3_points,
            _per_draw_plan("n_rules", lambda p: 2 * p, shared=1),
            {"directions": "cross"},
            (),
        ),
        "radial-simplex": _Entry(
            radial_points,
            _radial_plan("simplex"),
            {"directions": "simplex"},
            ("n_radii", "max_radii"),
        ),
        "radial-cross": _Entry(
            radial_points, _radial_plan("cross"), {"directions": "cross"}, ("n_radii", "max_radii")
        ),
        "unscented": _Entry(
            unscented_points, _per_draw_plan("n_rotations", lambda p: 2 * p), {}, ()
        ),
    }


_REGISTRY: Mapping[str, _Entry] = MappingProxyType(_entries())

#: Point-set names (:data:`orthobench.config.names.POINT_SETS`) and their constructors
#: (read-only). Each constructor takes ``p``, its count argument(s) and keyword-only
#: ``generator``, ``dtype`` and ``device``; :func:`point_set` turns an evaluation budget into
#: those counts.
POINT_SETS: Mapping[str, Callable[..., PointSet]] = MappingProxyType(
    {name: entry.build for name, entry in _REGISTRY.items()}
)


def _lookup(name: str) -> _Entry:
    if name not in _REGISTRY:
        raise UnknownNameError("point set", name, tuple(_REGISTRY), "name")
    return _REGISTRY[name]


def _plan(name: str, p: int, n_evaluations: int, options: Mapping[str, Any]) -> _Plan:
    entry = _lookup(name)
    _check_dim(p)
    _check_count("n_evaluations", n_evaluations)
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        raise TypeError(
            f"Point set {name!r} got unknown option(s) {unknown}; allowed: {list(entry.options)}."
        )
    return entry.plan(p, n_evaluations, **options)


def point_count(name: str, p: int, n_evaluations: int, **options: Any) -> int:
    """The number of points ``S`` that :func:`point_set` would return, without drawing.

    Example:
        >>> point_count("sr3", 3, 32), point_count("radial-simplex", 3, 30), point_count("iid", 3, 30)
        (25, 28, 30)
    """
    return _plan(name, p, n_evaluations, options).n_points


def point_set(
    name: str,
    p: int,
    n_evaluations: int,
    generator: torch.Generator,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    **options: Any,
) -> PointSet:
    r"""Build the point set ``name`` with as many points as fit in ``n_evaluations``.

    The rules by name (``K``: independent rules, rotations or draws; ``n``: radii per rule;
    exact degree: :attr:`PointSet.exact_degree`, "odd" adding every odd polynomial; unbiased:
    for every integrable ``f``, the QMC rules up to the clamp of :func:`sobol_points`):

    ==================  ===========================  ============  ========
    name                points (S)                   exact degree  unbiased
    ==================  ===========================  ============  ========
    ``iid``             ``K`` (1 per draw)           0             yes
    ``antithetic``      ``2K`` (pairs z, -z)         1 (odd)       yes
    ``qmc-sobol``       ``K`` (one randomization)    0             yes
    ``qmc-owen``        ``K`` (one randomization)    0             yes
    ``qmc-owen-line``   ``3K`` (K outer points)      0             yes
    ``sr3``             ``1 + 2(p+1) K``             3             yes
    ``sr3-cross``       ``1 + 2p K``                 3             yes
    ``radial-simplex``  ``(p+1) n K``                2             no
    ``radial-cross``    ``2p n K``                   3 (odd)       no
    ``unscented``       ``2p K``                     3 (odd)       no
    ==================  ===========================  ============  ========

    ``S`` is the largest count of the form ``n_shared + K * points_per_rule`` with
    ``S <= n_evaluations`` (radial rules: ``K n m``, with ``n = floor(n_evaluations / m)`` radii
    in one rule if that is at most ``max_radii``; otherwise, with ``K0`` the fewest rules that
    keep ``n <= max_radii``, the ``K`` in ``[K0, 2 K0]`` and ``n = floor(floor(n_evaluations / m)
    / K)`` that use the most points, so up to ``K - 1`` designs of ``m`` points can be left
    unused), and never less than one rule: if one rule needs more than
    ``n_evaluations`` points, that rule is returned with a warning. Read the real count from
    ``S = result.n_points`` (or :func:`point_count`, without drawing); compare estimators at
    that ``S``, not at the budget.

    All randomness comes from ``generator``; draws are made in float64 on the generator's device
    and cast to ``dtype`` at the end, so one seed gives the same points (up to rounding) for
    every ``dtype``.

    Args:
        name: A key of :data:`POINT_SETS`.
        p: Dimension of ``z``.
        n_evaluations: Budget of integrand evaluations.
        generator: Source of all randomness (same state -> same points).
        dtype: Output dtype.
        device: Output device; default: the generator's device.
        **options: Radial rules only: ``n_radii`` (fixes ``n``; the budget then sets the number of
            rules) or ``max_radii`` (default 16). Others raise ``TypeError``.

    Returns:
        A :class:`PointSet` with ``z`` of shape ``S x p``.

    Example:
        >>> gen = torch.Generator().manual_seed(0)
        >>> ps = point_set("sr3", p=3, n_evaluations=32, generator=gen)
        >>> ps.z.shape, ps.n_rules  # 1 shared centre + 3 rules of 2 (p + 1) = 8 points
        (torch.Size([25, 3]), 3)
        >>> round(float(ps.integrate((ps.z ** 2).sum(-1))), 10)  # E|z|^2 = p, exact for every draw
        3.0
        >>> point_set("radial-cross", p=4, n_evaluations=50, generator=gen).n_points  # 6 radii x 8
        48
    """
    entry = _lookup(name)
    plan = _plan(name, p, n_evaluations, options)
    if plan.n_points > n_evaluations:
        warnings.warn(
            f"Point set {name!r} with p={p} needs {plan.n_points} points for one rule, more than "
            f"n_evaluations={n_evaluations}; using one rule ({plan.n_points} evaluations).",
            OrthobenchWarning,
            stacklevel=2,
        )
    return entry.build(
        p, **plan.counts, **entry.fixed, generator=generator, dtype=dtype, device=device
    )
