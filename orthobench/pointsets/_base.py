"""The PointSet container and geometric building blocks (rotations, polytopes, radial rules).

References:
    .. [Mezzadri2007haar] F. Mezzadri. How to generate random matrices from the classical compact
       groups. Notices of the AMS 54 (2007) 592-604.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import roots_genlaguerre
from torch import Tensor

_U_EPS = 2.0**-32  # clamp of uniforms before the inverse normal CDF (|z| <= 6.23)
_OWEN_BITS = 32  # digits scrambled explicitly; below that, digits are i.i.d. uniform
_DEFAULT_MAX_RADII = 16
_DIRECTIONS = ("simplex", "cross")


@dataclass(frozen=True, eq=False)
class PointSet:
    r"""Points and weights of a rule for :math:`\mathbb E[f(z)]`, :math:`z \sim \mathcal N(0, I_p)`.

    The estimate is :math:`\sum_s w_s f(z_s)` (see :meth:`integrate`). The points are
    ``n_shared`` points common to all rules (sr3's centre) followed by ``n_rules`` blocks of
    ``points_per_rule`` points, so ``S = n_shared + n_rules * points_per_rule``.

    Attributes:
        z: Points, ``S x p``.
        weights: Weights, ``S``; they sum to 1 (up to rounding) and may be negative (sr3's centre).
        name: Registry name (see :data:`POINT_SETS`).
        unbiased: Whether :math:`\mathbb E[\hat I(f)] = I(f)` for every integrable ``f``.
        exact_degree: Largest ``d`` such that every polynomial of degree ``<= d`` is integrated
            exactly for every draw (0: only constants).
        n_rules: Number of independent rules averaged (MC draws, antithetic pairs, QMC
            randomizations, sr3 rules, rotations).
        points_per_rule: Points in each rule, excluding shared ones.
        n_shared: Points shared by all rules (1 for sr3's centre, else 0).
    """

    z: Tensor
    weights: Tensor
    name: str
    unbiased: bool
    exact_degree: int
    n_rules: int
    points_per_rule: int
    n_shared: int = 0

    def __post_init__(self) -> None:
        if self.z.ndim != 2:
            raise ValueError(f"`z` must be S x p, but got shape {tuple(self.z.shape)}.")
        if self.weights.shape != self.z.shape[:1]:
            raise ValueError(
                f"`weights` must have shape ({self.z.shape[0]},), but got {tuple(self.weights.shape)}."
            )
        expected = self.n_shared + self.n_rules * self.points_per_rule
        if expected != self.z.shape[0]:
            raise ValueError(
                "`n_shared + n_rules * points_per_rule` must equal S, but got "
                f"({self.n_shared=}, {self.n_rules=}, {self.points_per_rule=}, S={self.z.shape[0]})."
            )

    @property
    def n_points(self) -> int:
        """``S``, the number of points (integrand evaluations)."""
        return self.z.shape[0]

    @property
    def dim(self) -> int:
        """``p``, the dimension."""
        return self.z.shape[1]

    def integrate(self, values: Tensor) -> Tensor:
        r"""Weighted sum :math:`\sum_s w_s v_s` over the first dimension.

        Args:
            values: Integrand values at ``z``, ``S x (b1 x ... x bk)``.

        Returns:
            The estimate, ``(b1 x ... x bk)``, in the dtype of ``values``.
        """
        if values.shape[:1] != self.weights.shape:
            raise ValueError(
                f"`values` must have leading dimension S={self.n_points}, but got shape "
                f"{tuple(values.shape)}."
            )
        w = self.weights.to(dtype=values.dtype, device=values.device)
        return torch.tensordot(w, values, dims=([0], [0]))


# ----------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------


def _check_dim(p: int) -> None:
    if not isinstance(p, int) or isinstance(p, bool) or p < 1:
        raise ValueError(f"`p` must be a positive int, but got {p=!r}.")


def _check_count(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive int, but got {name}={value!r}.")


def _finish(
    z: Tensor,
    weights: Tensor,
    dtype: torch.dtype,
    device: torch.device | str | None,
    generator: torch.Generator,
    **meta: Any,
) -> PointSet:
    device = generator.device if device is None else torch.device(device)
    return PointSet(
        z=z.to(dtype=dtype, device=device),
        weights=weights.to(dtype=dtype, device=device),
        **meta,
    )


def _randn(generator: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=generator, device=generator.device, dtype=torch.float64)


def _seed_from(generator: torch.Generator) -> int:
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())


def random_rotation(
    p: int,
    n: int | None = None,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Haar-distributed random orthogonal matrices (uniform on :math:`O(p)`) [Mezzadri2007haar]_.

    ``G`` with i.i.d. :math:`\mathcal N(0, 1)` entries, ``G = Q R`` (QR decomposition), then
    :math:`Q \leftarrow Q\, \mathrm{diag}(\mathrm{sign}(R_{ii}))`. The sign fix makes the
    decomposition unique (``R`` with a positive diagonal), so ``Q`` inherits the rotation
    invariance of ``G``'s law: :math:`Q \overset{d}{=} O Q` for every fixed orthogonal ``O``.
    Without the fix the law of ``Q`` depends on the QR implementation and is not Haar.

    Args:
        p: Dimension.
        n: Number of matrices; ``None`` for a single one.
        generator: Source of all randomness.
        dtype: Output dtype (drawn in float64).
        device: Output device; default: the generator's device.

    Returns:
        ``n x p x p`` (or ``p x p`` if ``n`` is ``None``) orthogonal matrices.

    Example:
        >>> Q = random_rotation(4, generator=torch.Generator().manual_seed(0))
        >>> bool(torch.allclose(Q.T @ Q, torch.eye(4, dtype=Q.dtype)))
        True
    """
    _check_dim(p)
    if n is not None:
        _check_count("n", n)
    g = _randn(generator, 1 if n is None else n, p, p)
    q, r = torch.linalg.qr(g)
    d = torch.diagonal(r, dim1=-2, dim2=-1)
    signs = torch.where(d < 0, -1.0, 1.0).to(q)
    q = q * signs.unsqueeze(-2)  # scale column j by sign(R_jj)
    if n is None:
        q = q[0]
    return q.to(dtype=dtype, device=generator.device if device is None else device)


def regular_simplex(
    p: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> Tensor:
    r"""Unit vertices of a regular simplex centred at 0, ``(p + 1) x p``.

    Vertex ``j`` is :math:`\sqrt{(p+1)/p}` times the projection of :math:`e_j \in \mathbb R^{p+1}`
    onto :math:`\mathbf 1^\perp`, written in the orthonormal Helmert basis of
    :math:`\mathbf 1^\perp` (basis vector ``k`` has entries :math:`1/\sqrt{k(k+1)}` at positions
    ``1..k``, :math:`-k/\sqrt{k(k+1)}` at ``k + 1``, 0 after). Hence
    :math:`\sum_j v_j = 0`, :math:`|v_j| = 1`, :math:`v_i^\top v_j = -1/p` (``i != j``) and
    :math:`\frac1{p+1}\sum_j v_j v_j^\top = I_p / p`.
    """
    _check_dim(p)
    basis = torch.zeros(p + 1, p, dtype=torch.float64)  # columns: Helmert basis of 1-perp
    for k in range(1, p + 1):
        c = 1.0 / math.sqrt(k * (k + 1))
        basis[:k, k - 1] = c
        basis[k, k - 1] = -k * c
    return (math.sqrt((p + 1) / p) * basis).to(dtype=dtype, device=device)


def cross_polytope(
    p: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> Tensor:
    r"""Vertices :math:`\pm e_1, \ldots, \pm e_p` of the cross-polytope, ``2p x p`` (``+e`` first)."""
    _check_dim(p)
    eye = torch.eye(p, dtype=dtype, device=device)
    return torch.cat([eye, -eye], dim=0)


def _directions(p: int, directions: str) -> Tensor:
    if directions == "simplex":
        return regular_simplex(p)
    if directions == "cross":
        return cross_polytope(p)
    raise ValueError(f"`directions` must be one of {list(_DIRECTIONS)}, but got {directions=!r}.")


def _chi_gauss_rule(p: int, n: int) -> tuple[Tensor, Tensor]:
    r"""``n``-node Gauss rule for :math:`r \sim \chi_p`: radii ``n`` and normalized weights ``n``."""
    t, w = roots_genlaguerre(n, p / 2.0 - 1.0)
    return torch.as_tensor(np.sqrt(2.0 * t)), torch.as_tensor(w / w.sum())
