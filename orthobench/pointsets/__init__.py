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
``qmc-owen-line``   ``3K`` (K outer points)      0             yes
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

**qmc-owen-line** (:func:`owen_line_points`): ``K`` Owen-scrambled Sobol' points over
coordinates ``2..p`` and, nested in each, the unbiased 1-D degree-3 stochastic rule
``{0, +-rho}``, ``rho ~ chi_3`` (sr3 with ``p = 1``) along coordinate 1, which the theta
estimators make the widest direction of ``q``. It integrates that direction out of each draw
nearly exactly, at 3 evaluations per outer point (docs/estimators-screen.md).

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
