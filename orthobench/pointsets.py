r"""Standard-normal point sets for Gaussian integration: MC, QMC and (randomized) cubature rules.

Every constructor returns a :class:`PointSet`: points ``z`` of shape ``S x p`` and weights of shape
``S`` such that

.. math::

    \hat I(f) = \sum_{s=1}^{S} w_s f(z_s) \approx I(f) = \mathbb{E}[f(z)],
    \qquad z \sim \mathcal N(0, I_p),

for any integrand ``f``. The module is pure: it knows nothing about GPs. In OrthoBO the caller maps
``theta_s = theta_hat + L z_s`` (``L`` the Cholesky factor of the Laplace covariance) and evaluates
EI at each ``theta_s``, so ``S`` is the number of EI evaluations.

Point sets (``name``: points per rule, exact degree for every draw, unbiased for every
integrable ``f``):

==================  ===========================  ============  ========
name                points (S)                   exact degree  unbiased
==================  ===========================  ============  ========
``iid``             ``K`` (1 per draw)           0             yes
``antithetic``      ``2K`` (pairs z, -z)         1 (all odd)   yes
``qmc-sobol``       ``K`` (one randomization)    0             yes [#]_
``qmc-owen``        ``K`` (one randomization)    0             yes [#]_
``sr3``             ``1 + 2(p+1) K``             3             yes
``sr3-cross``       ``1 + 2p K``                 3             yes
``radial-simplex``  ``(p+1) n K``                2             no
``radial-cross``    ``2p n K``                   3 (all odd)   no
``unscented``       ``2p K``                     3 (all odd)   no
==================  ===========================  ============  ========

(``K``: number of independent rules / rotations / draws, ``n``: number of radii per rule.) "Exact
degree d" means :math:`\hat I(f) = I(f)` for every polynomial of total degree ``<= d`` and for
*every* random draw, not only on average; "all odd" means odd polynomials of any degree are
integrated exactly too (their integral, 0, is reproduced by the symmetry of the points).

.. [#] Up to the clamp of the uniforms into ``[2^-32, 1 - 2^-32]`` before the inverse normal CDF,
   which is hit with probability ``~2^-30`` per coordinate.
.. [#] Same clamp; with nested scrambling the uniforms are continuous, so the clamp is almost never
   hit.

**Budgets.** :func:`point_set` picks ``K`` (and for radial rules ``n``) so that ``S`` is the largest
count the rule allows with ``S <= n_evaluations``, but never less than one rule (then ``S`` exceeds
the budget and an :class:`~orthobench.exceptions.OrthobenchWarning` says so). :func:`point_count`
returns that ``S`` without drawing anything. The probe compares estimators at equal ``S``.

**sr3** [GenzMonahan1998sisc]_ [GenzMonahan1999jcam]_. Write :math:`z = r u` with
:math:`r \sim \chi_p` and :math:`u` uniform on the unit sphere :math:`U_p`. One rule draws a Haar
rotation ``Q`` and a radius :math:`\rho \sim \chi_{p+2}` (independent) and uses

.. math::

    R(f) = \Big(1 - \frac{p}{\rho^2}\Big) f(0)
         + \frac{p}{\rho^2} \frac{1}{2(p+1)} \sum_{j=1}^{p+1} \big[f(\rho Q v_j) + f(-\rho Q v_j)\big]

with :math:`v_1..v_{p+1}` the unit vertices of a regular simplex (``sr3-cross``: the ``2p`` points
:math:`\pm Q e_i` with weight ``1 / (2p)`` each instead). Derivation:

* Spherical part: the ``2(p+1)`` points :math:`\pm Q v_j` with equal weights integrate every
  polynomial of degree ``<= 3`` on the sphere exactly, for every ``Q``: odd monomials cancel
  pairwise, and :math:`\frac{1}{p+1}\sum_j v_j v_j^\top = I_p / p = \mathbb E[u u^\top]`. Since each
  :math:`Q v_j` is uniform on the sphere when ``Q`` is Haar, the spherical part is unbiased for
  every ``f``: :math:`\mathbb E_Q[\hat S(g)] = \mathbb E_u[g(u)]`.
* Radial part: with :math:`g(r)` the spherical mean at radius ``r``, we need
  :math:`\mathbb E[w_0 g(0) + w_1(\rho) g(\rho)] = \mathbb E_{r\sim\chi_p}[g(r)]` for every ``g``
  (unbiased), and exactness for :math:`g \in \{1, r^2\}` for every :math:`\rho` (degree 3; odd
  powers of ``r`` vanish in ``g`` by the symmetry above). Exactness forces :math:`w_0 + w_1 = 1`
  and :math:`w_1 \rho^2 = \mathbb E[r^2] = p`, i.e. :math:`w_1 = p/\rho^2`. Unbiasedness then
  needs :math:`\mathrm{density}(\rho) \cdot p / \rho^2 = \chi_p\text{-density}(\rho)` (so that
  :math:`\mathbb E[w_0] = 0`, as :math:`\chi_p` has no atom at 0), i.e.
  :math:`\mathrm{density}(\rho) \propto \rho^{p+1} e^{-\rho^2/2}`: :math:`\rho \sim \chi_{p+2}`.
  Indeed :math:`\chi_p(\rho) / \chi_{p+2}(\rho) = 2\Gamma(p/2+1) / (\Gamma(p/2)\rho^2) = p/\rho^2`.

This is the degree-3 stochastic spherical-radial rule of Genz and Monahan; checked against their
BAYESPACK routine ``RANBAS`` (``KEY = 2``; ``cran/bayespack``, ``src/ranrth.f``):
``R = SQRT(2*GAMRAN((M+2)/2))``, ``WV = M/R**2``, ``WC = 1 - WV``, spherical weight
``1/(2(M+1))`` on :math:`\pm R\,V_k` for a randomly rotated simplex ``V``. ``K`` independent rules
are averaged and **share one centre point**, as in ``RANBAS`` (it evaluates ``F(0)`` once, before
the loop over rules): the average of ``K`` rules is
:math:`\bar w_0 f(0) + \ldots` with :math:`\bar w_0 = \frac1K \sum_k (1 - p/\rho_k^2)`, the same
estimate as ``K`` separate centres at ``K - 1`` fewer evaluations. The centre weight is often
negative (:math:`\mathbb E[w_0] = 0`); :math:`\mathrm{Var}(p/\rho^2)` is finite only for
``p > 2``, but for smooth ``f`` the combination :math:`(p/\rho^2)(\hat S(\rho) - f(0))` stays
bounded as :math:`\rho \to 0`, because the symmetric rule cancels the linear term.

**radial-simplex / radial-cross.** The radius is integrated by the ``n``-node Gauss rule of the
:math:`\chi_p` law: with :math:`t = r^2/2 \sim \mathrm{Gamma}(p/2)`, the generalized Gauss-Laguerre
rule with :math:`\alpha = p/2 - 1` (nodes :math:`t_i`, weights normalized to sum to 1) and
:math:`r_i = \sqrt{2 t_i}`; it is exact for :math:`\mathbb E[r^{2k}]`, ``k <= 2n - 1``. At each
radius an independently Haar-rotated regular simplex (``p + 1`` directions, a spherical 2-design)
or cross-polytope (``2p`` directions :math:`\pm Q e_i`, a 3-design that is antipodal) is used, with
weight :math:`w_i / m` (``m`` directions). For a monomial of degree ``d`` the spherical design
gives the exact spherical mean :math:`c_d r^d` at every radius if ``d`` is at most the design's
degree, and the radial rule is exact for ``r^0`` and ``r^2``; hence exactness up to degree 2
(simplex) and 3 (cross; plus every odd degree, by antipodality) for every rotation. Not unbiased:
for non-polynomial ``f`` the radial rule's error is deterministic and survives averaging over
rotations. The outermost node grows like :math:`\sqrt{8n}` (``n = 16``, ``p = 8``: ``r = 10.7``, weight ``6e-20``)
with a negligible weight; callers must still be able to evaluate ``f`` there (a ``nan`` times a
tiny weight is still ``nan``). ``max_radii`` (default 16) caps ``n``; larger budgets add
independent rules.

**unscented** (kappa = 0): ``2p`` points :math:`\pm\sqrt p\, Q e_i`, weights ``1 / (2p)``, ``K``
rotations averaged. It is ``radial-cross`` with ``n = 1`` (the 1-node rule's node is
``t = p/2``): exact up to degree 3 and for all odd polynomials, biased for everything else
(e.g. :math:`\mathbb E[z_1^4] = 3` is estimated by :math:`p \sum_i Q_{1i}^4 \ne 3` in general).
Never a default.

**QMC.** ``qmc-sobol`` uses :class:`torch.quasirandom.SobolEngine` with ``scramble=True``, which
is a linear matrix scramble plus digital shift (LMS+shift, random lower-triangular matrices and a
shift, see ``SobolEngine._scramble``). ``qmc-owen`` uses Owen's *nested uniform* scrambling
[Owen1998scrambling]_. NOTE: ``scipy.stats.qmc.Sobol(scramble=True)`` is **not** nested
scrambling: scipy 1.17's docstring says "If True, use LMS+shift scrambling" (Matousek's linear
matrix scramble, ``Sobol._scramble`` draws lower-triangular matrices and a shift), i.e. the same
kind as torch's. So ``qmc-owen`` takes scipy's *unscrambled* Sobol' points (Joe-Kuo direction
numbers, 32 bits) and applies the nested scramble itself: digit ``k`` of coordinate ``j`` is
XOR-ed with a random bit that depends on ``j`` and on the first ``k - 1`` *original* digits (one
independent bit per distinct prefix); below bit 32 every point's prefix is unique, so the
remaining digits are i.i.d. uniform. Both keep the net structure; for the balance properties use
``S`` a power of 2 (the probe's 32 and 128 are). Uniforms are mapped through the inverse normal
CDF (``torch.special.ndtri``) after a clamp into ``[2^-32, 1 - 2^-32]`` (``|z| <= 6.23``).

**Rotations.** :func:`random_rotation` draws Haar-distributed orthogonal matrices as the ``Q``
factor of the QR decomposition of a Gaussian matrix, with the columns' signs fixed so that ``R``
has a positive diagonal [Mezzadri2007haar]_ (without that fix the law of ``Q`` depends on the QR
implementation and is not Haar).

All randomness comes from the ``generator`` argument; draws are made in float64 on the
generator's device and cast to ``dtype`` at the end, so one seed gives the same points (up to
rounding) for every ``dtype``.

Example:
    >>> gen = torch.Generator().manual_seed(0)
    >>> ps = point_set("sr3", p=3, n_evaluations=32, generator=gen)
    >>> ps.z.shape, ps.n_rules  # 1 shared centre + 3 rules of 2 (p + 1) = 8 points
    (torch.Size([25, 3]), 3)
    >>> round(float(ps.integrate((ps.z ** 2).sum(-1))), 10)  # E|z|^2 = p, exact for every draw
    3.0

References:
    .. [GenzMonahan1998sisc] A. Genz, J. Monahan. Stochastic integration rules for infinite
       regions. SIAM J. Sci. Comput. 19 (1998) 426-439.
    .. [GenzMonahan1999jcam] A. Genz, J. Monahan. A stochastic algorithm for high-dimensional
       integrals over unbounded regions with Gaussian weight. J. Comput. Appl. Math. 112 (1999)
       71-81.
    .. [Owen1998scrambling] A. B. Owen. Scrambling Sobol' and Niederreiter-Xing points.
       J. Complexity 14 (1998) 466-489.
    .. [Mezzadri2007haar] F. Mezzadri. How to generate random matrices from the classical compact
       groups. Notices of the AMS 54 (2007) 592-604.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from scipy.special import roots_genlaguerre
from scipy.stats import qmc
from torch import Tensor
from torch.quasirandom import SobolEngine

from orthobench.exceptions import OrthobenchWarning, RegistryError

__all__ = [
    "POINT_SETS",
    "PointSet",
    "antithetic_points",
    "cross_polytope",
    "iid_points",
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


# ----------------------------------------------------------------------------------------------
# Point-set constructors
# ----------------------------------------------------------------------------------------------


def iid_points(
    p: int,
    n: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Plain Monte Carlo: ``n`` i.i.d. :math:`\mathcal N(0, I_p)` points, weights ``1/n``.

    Returns:
        A :class:`PointSet` with ``z`` of shape ``n x p``.
    """
    _check_dim(p)
    _check_count("n", n)
    z = _randn(generator, n, p)
    return _finish(
        z,
        torch.full((n,), 1.0 / n, dtype=torch.float64),
        dtype,
        device,
        generator,
        name="iid",
        unbiased=True,
        exact_degree=0,
        n_rules=n,
        points_per_rule=1,
    )


def antithetic_points(
    p: int,
    n_pairs: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Antithetic Monte Carlo: ``n_pairs`` i.i.d. draws ``z_k`` and their mirrors ``-z_k``.

    Points ``[z_1, -z_1, z_2, -z_2, ...]``, weights ``1 / (2 n_pairs)``. Unbiased; exact for odd
    polynomials (and constants) for every draw.

    Returns:
        A :class:`PointSet` with ``z`` of shape ``2 n_pairs x p``.
    """
    _check_dim(p)
    _check_count("n_pairs", n_pairs)
    half = _randn(generator, n_pairs, p)
    z = torch.stack([half, -half], dim=1).reshape(2 * n_pairs, p)
    w = torch.full((2 * n_pairs,), 0.5 / n_pairs, dtype=torch.float64)
    return _finish(
        z,
        w,
        dtype,
        device,
        generator,
        name="antithetic",
        unbiased=True,
        exact_degree=1,
        n_rules=n_pairs,
        points_per_rule=2,
    )


def _uniform_to_normal(u: Tensor) -> Tensor:
    return torch.special.ndtri(u.clamp(_U_EPS, 1.0 - _U_EPS))


def sobol_points(
    p: int,
    n: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Scrambled Sobol' (torch's LMS+shift scramble) mapped to :math:`\mathcal N(0, I_p)`.

    :class:`~torch.quasirandom.SobolEngine` with ``scramble=True`` and a seed drawn from
    ``generator``; the first ``n`` points (origin included), clamped into
    ``[2^-32, 1 - 2^-32]`` and mapped through :math:`\Phi^{-1}`. Weights ``1/n``. Use ``n`` a
    power of 2 for the net's balance properties.

    Returns:
        A :class:`PointSet` with ``z`` of shape ``n x p``.
    """
    _check_dim(p)
    _check_count("n", n)
    engine = SobolEngine(p, scramble=True, seed=_seed_from(generator))
    u = engine.draw(n, dtype=torch.float64).to(generator.device)
    return _finish(
        _uniform_to_normal(u),
        torch.full((n,), 1.0 / n, dtype=torch.float64),
        dtype,
        device,
        generator,
        name="qmc-sobol",
        unbiased=True,
        exact_degree=0,
        n_rules=1,
        points_per_rule=n,
    )


def _unscrambled_sobol_ints(p: int, n: int) -> np.ndarray:
    """First ``n`` unscrambled Sobol' points as ``_OWEN_BITS``-bit integers, ``n x p``."""
    engine = qmc.Sobol(p, scramble=False, bits=_OWEN_BITS)
    with warnings.catch_warnings():
        # scipy warns when n is not a power of 2; the docstrings of the callers say it instead.
        warnings.filterwarnings(
            "ignore", message=".*balance properties of Sobol", category=UserWarning
        )
        u = engine.random(n)
    return np.rint(u * 2.0**_OWEN_BITS).astype(np.int64)


def _owen_scramble(x: Tensor, generator: torch.Generator) -> Tensor:
    r"""Nested uniform (Owen) scramble of ``_OWEN_BITS``-bit integers ``x`` (``n x p``) into ``[0, 1)``.

    Digit ``k`` (most significant first) of coordinate ``j`` is XOR-ed with a random bit indexed by
    ``(j, first k-1 original digits)``; digits below ``_OWEN_BITS`` are i.i.d. uniform.
    """
    n, p = x.shape
    out = x.clone()
    column = torch.arange(p, device=x.device).expand(n, p)
    for k in range(_OWEN_BITS):
        shift = _OWEN_BITS - 1 - k  # bit position of digit k + 1
        key = (x >> (shift + 1)) * p + column  # (prefix of k digits, coordinate); < 2^31 * p
        unique, inverse = torch.unique(key, return_inverse=True)
        if unique.numel() == key.numel():
            # Every prefix is distinct: the remaining digits get independent uniform flips.
            flips = torch.randint(0, 2 ** (shift + 1), (n, p), generator=generator, device=x.device)
            out = out ^ flips
            break
        bits = torch.randint(0, 2, (unique.numel(),), generator=generator, device=x.device)
        out = out ^ (bits[inverse] << shift)
    below = torch.rand(n, p, generator=generator, device=x.device, dtype=torch.float64)
    return (out.to(torch.float64) + below) * 2.0**-_OWEN_BITS


def owen_sobol_points(
    p: int,
    n: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Sobol' points with Owen's nested uniform scrambling [Owen1998scrambling]_, mapped to normal.

    The first ``n`` points of scipy's *unscrambled* ``qmc.Sobol`` (32 bits) are scrambled here,
    because scipy's ``scramble=True`` is LMS+shift, not nested scrambling (see the module
    docstring). Each scrambled point is uniform on :math:`[0, 1)^p` and the ``(t, m, p)``-net
    structure is kept. Clamp and :math:`\Phi^{-1}` as in :func:`sobol_points`. Weights ``1/n``;
    use ``n`` a power of 2.

    Returns:
        A :class:`PointSet` with ``z`` of shape ``n x p``.
    """
    _check_dim(p)
    _check_count("n", n)
    x = torch.as_tensor(_unscrambled_sobol_ints(p, n), device=generator.device)
    u = _owen_scramble(x, generator)
    return _finish(
        _uniform_to_normal(u),
        torch.full((n,), 1.0 / n, dtype=torch.float64),
        dtype,
        device,
        generator,
        name="qmc-owen",
        unbiased=True,
        exact_degree=0,
        n_rules=1,
        points_per_rule=n,
    )


def sr3_points(
    p: int,
    n_rules: int,
    *,
    generator: torch.Generator,
    directions: str = "simplex",
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Degree-3 stochastic spherical-radial rule [GenzMonahan1999jcam]_, ``n_rules`` rules averaged.

    Rule ``k``: Haar rotation :math:`Q_k`, radius :math:`\rho_k \sim \chi_{p+2}` (the norm of a
    :math:`\mathcal N(0, I_{p+2})` draw), points :math:`\pm\rho_k Q_k v_j` with weight
    :math:`\frac{p}{\rho_k^2} \frac{1}{m}` (``m`` directions) and the centre with weight
    :math:`1 - p/\rho_k^2`. All rules share one centre point (index 0) with weight
    :math:`\frac1K \sum_k (1 - p / \rho_k^2)`. Unbiased for every integrable ``f``; exact for
    every polynomial of degree ``<= 3`` for every draw (derivation in the module docstring).

    Args:
        p: Dimension.
        n_rules: Number ``K`` of independent rules.
        generator: Source of all randomness.
        directions: ``"simplex"`` (Genz-Monahan: :math:`\pm` the ``p + 1`` vertices of a regular
            simplex, ``m = 2(p+1)``) or ``"cross"`` (:math:`\pm e_i`, ``m = 2p``).
        dtype: Output dtype.
        device: Output device; default: the generator's device.

    Returns:
        A :class:`PointSet` with ``S = 1 + K m`` points.
    """
    _check_dim(p)
    _check_count("n_rules", n_rules)
    base = _directions(p, directions).to(generator.device)
    if directions == "simplex":
        base = torch.cat([base, -base], dim=0)  # antipodal simplex, 2(p+1) x p
    m = base.shape[0]
    rotations = random_rotation(p, n_rules, generator=generator, device=generator.device)
    radii = _randn(generator, n_rules, p + 2).norm(dim=-1)  # chi(p + 2), K
    # rotated directions: rule k, direction j -> Q_k d_j, i.e. d_j @ Q_k^T ; K x m x p
    dirs = torch.einsum("jq,kpq->kjp", base, rotations)
    z = torch.cat(
        [
            torch.zeros(1, p, dtype=torch.float64, device=generator.device),
            (radii[:, None, None] * dirs).reshape(n_rules * m, p),
        ]
    )
    outer = p / radii**2  # K
    weights = torch.cat(
        [
            ((1.0 - outer).sum() / n_rules).reshape(1),
            (outer / (m * n_rules))[:, None].expand(n_rules, m).reshape(-1),
        ]
    )
    return _finish(
        z,
        weights,
        dtype,
        device,
        generator,
        name="sr3" if directions == "simplex" else "sr3-cross",
        unbiased=True,
        exact_degree=3,
        n_rules=n_rules,
        points_per_rule=m,
        n_shared=1,
    )


def radial_points(
    p: int,
    n_radii: int,
    *,
    generator: torch.Generator,
    directions: str = "simplex",
    n_rules: int = 1,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Gauss rule in the radius, an independently rotated spherical design at each radius.

    Radii :math:`r_i = \sqrt{2 t_i}` and weights :math:`w_i` (normalized) from the ``n_radii``-node
    generalized Gauss-Laguerre rule with :math:`\alpha = p/2 - 1`; at radius ``i`` of rule ``k``
    the points :math:`r_i Q_{ki} d_j` with weight :math:`w_i / (m K)` for the ``m`` directions
    :math:`d_j` of a regular simplex (``m = p + 1``) or cross-polytope (``m = 2p``), each
    :math:`Q_{ki}` an independent Haar rotation. Exact up to degree 2 (simplex) or 3 (cross) for
    every rotation; biased for general ``f``.

    Args:
        p: Dimension.
        n_radii: Number ``n`` of Gauss nodes of the :math:`\chi_p` law.
        generator: Source of all randomness.
        directions: ``"simplex"`` or ``"cross"``.
        n_rules: Number ``K`` of independent replicates (fresh rotations, same radii).
        dtype: Output dtype.
        device: Output device; default: the generator's device.

    Returns:
        A :class:`PointSet` with ``S = K n m`` points, ordered rule, radius, direction.
    """
    _check_dim(p)
    _check_count("n_radii", n_radii)
    _check_count("n_rules", n_rules)
    base = _directions(p, directions).to(generator.device)  # m x p
    m = base.shape[0]
    radii, rweights = (t.to(generator.device) for t in _chi_gauss_rule(p, n_radii))
    rotations = random_rotation(p, n_rules * n_radii, generator=generator, device=generator.device)
    dirs = torch.einsum("jq,kpq->kjp", base, rotations).reshape(n_rules, n_radii, m, p)
    z = (radii[None, :, None, None] * dirs).reshape(-1, p)
    weights = (rweights / (m * n_rules))[None, :, None].expand(n_rules, n_radii, m).reshape(-1)
    return _finish(
        z,
        weights,
        dtype,
        device,
        generator,
        name=f"radial-{directions}",
        unbiased=False,
        exact_degree=2 if directions == "simplex" else 3,
        n_rules=n_rules,
        points_per_rule=n_radii * m,
    )


def unscented_points(
    p: int,
    n_rotations: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Randomly rotated unscented sigma points with :math:`\kappa = 0`; biased, never a default.

    Per rotation the ``2p`` points :math:`\pm\sqrt{p}\, Q e_i` with weights ``1 / (2p)`` (the
    centre's weight :math:`\kappa / (p + \kappa)` is 0, so it is dropped); ``n_rotations``
    independent Haar rotations averaged. Exact up to degree 3 (and all odd degrees) for every
    rotation; the error of every even moment of degree ``>= 4`` remains after averaging.

    Returns:
        A :class:`PointSet` with ``S = 2 p n_rotations`` points.
    """
    _check_dim(p)
    _check_count("n_rotations", n_rotations)
    base = cross_polytope(p).to(generator.device)
    rotations = random_rotation(p, n_rotations, generator=generator, device=generator.device)
    z = math.sqrt(p) * torch.einsum("jq,kpq->kjp", base, rotations).reshape(-1, p)
    weights = torch.full((2 * p * n_rotations,), 1.0 / (2 * p * n_rotations), dtype=torch.float64)
    return _finish(
        z,
        weights,
        dtype,
        device,
        generator,
        name="unscented",
        unbiased=False,
        exact_degree=3,
        n_rules=n_rotations,
        points_per_rule=2 * p,
    )


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

#: Point-set names and their constructors (read-only). Each constructor takes ``p``, its count
#: argument(s) and keyword-only ``generator``, ``dtype`` and ``device``; :func:`point_set` turns an
#: evaluation budget into those counts.
POINT_SETS: Mapping[str, Callable[..., PointSet]] = MappingProxyType(
    {name: entry.build for name, entry in _REGISTRY.items()}
)


def _lookup(name: str) -> _Entry:
    if name not in _REGISTRY:
        raise RegistryError(
            f"Unknown point set {name!r}; known point sets: {', '.join(sorted(_REGISTRY))}."
        )
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

    ``S`` is the largest count of the form ``n_shared + K * points_per_rule`` with
    ``S <= n_evaluations`` (radial rules: ``K n m``, with ``n = floor(n_evaluations / m)`` radii
    in one rule if that is at most ``max_radii``; otherwise, with ``K0`` the fewest rules that
    keep ``n <= max_radii``, the ``K`` in ``[K0, 2 K0]`` and ``n = floor(floor(n_evaluations / m)
    / K)`` that use the most points, so up to ``K - 1`` designs of ``m`` points can be left
    unused), and never less than one rule: if one rule needs more than
    ``n_evaluations`` points, that rule is returned with a warning. Read the real count from
    ``S = result.n_points``.

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
