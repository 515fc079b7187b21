r"""Point-set constructors: MC, antithetic, Sobol' (LMS, Owen, Owen-line), sr3, radial, unscented.

The stochastic spherical-radial rules are those of Genz and Monahan [GenzMonahan1998sisc]_
[GenzMonahan1999jcam]_, the nested scrambling Owen's [Owen1998scrambling]_.

References:
    .. [GenzMonahan1998sisc] A. Genz, J. Monahan. Stochastic integration rules for infinite
       regions. SIAM J. Sci. Comput. 19 (1998) 426-439.
    .. [GenzMonahan1999jcam] A. Genz, J. Monahan. A stochastic algorithm for high-dimensional
       integrals over unbounded regions with Gaussian weight. J. Comput. Appl. Math. 112 (1999)
       71-81.
    .. [Owen1998scrambling] A. B. Owen. Scrambling Sobol' and Niederreiter-Xing points.
       J. Complexity 14 (1998) 466-489.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy.stats import qmc
from torch import Tensor
from torch.quasirandom import SobolEngine

from orthobench.pointsets._base import (
    _OWEN_BITS,
    _U_EPS,
    PointSet,
    _check_count,
    _check_dim,
    _chi_gauss_rule,
    _directions,
    _finish,
    _randn,
    _seed_from,
    cross_polytope,
    random_rotation,
)

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

    :class:`~torch.quasirandom.SobolEngine` with ``scramble=True`` (a linear matrix scramble plus
    digital shift: random lower-triangular matrices and a shift, see ``SobolEngine._scramble``)
    and a seed drawn from ``generator``; the first ``n`` points (origin included). The uniforms
    are clamped into ``[2^-32, 1 - 2^-32]`` and mapped through :math:`\Phi^{-1}`
    (``torch.special.ndtri``), so ``|z| <= 6.23``; the clamp is hit with probability ``~2^-30``
    per coordinate, the only departure from unbiasedness. Weights ``1/n``. Use ``n`` a power of 2
    for the net's balance properties (the probe's 32 and 128 are).

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

    NOTE: ``scipy.stats.qmc.Sobol(scramble=True)`` is not nested scrambling: scipy 1.17's
    docstring says "If True, use LMS+shift scrambling" (Matousek's linear matrix scramble,
    ``Sobol._scramble`` draws lower-triangular matrices and a shift), the same kind as
    :func:`sobol_points`. So the first ``n`` of scipy's *unscrambled* Sobol' points (Joe-Kuo
    direction numbers, 32 bits) are scrambled here: digit ``k`` of coordinate ``j`` is XOR-ed with
    a random bit that depends on ``j`` and on the first ``k - 1`` *original* digits (one
    independent bit per distinct prefix); below bit 32 every point's prefix is unique, so the
    remaining digits are i.i.d. uniform. Each scrambled point is uniform on :math:`[0, 1)^p` and
    the ``(t, m, p)``-net structure is kept. Clamp and :math:`\Phi^{-1}` as in
    :func:`sobol_points` (the uniforms are continuous, so the clamp is almost never hit).
    Weights ``1/n``; use ``n`` a power of 2.

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


def owen_line_points(
    p: int,
    n_outer: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PointSet:
    r"""Owen-scrambled Sobol' over coordinates ``2..p``, a degree-3 stochastic rule along coordinate 1.

    ``n_outer`` points :math:`y_k` of :func:`owen_sobol_points` in ``p - 1`` dimensions fill
    coordinates ``2..p``; along coordinate 1 (the caller's widest direction: the whitened draws of
    :mod:`orthobench.theta_estimators` put it first) each outer point gets the 1-D stochastic
    spherical-radial rule of :func:`sr3_points` with ``p = 1``: nodes :math:`0, \pm\rho_k`,
    :math:`\rho_k \sim \chi_3` (independent of everything else), weights
    :math:`1 - 1/\rho_k^2` and :math:`1/(2\rho_k^2)` twice, all divided by ``n_outer``.

    Unbiased for every integrable ``f``: given :math:`y_k` (marginally
    :math:`\mathcal N(0, I_{p-1})`) the 1-D rule is unbiased for :math:`t \mapsto f(t, y_k)`, and
    it is exact for :math:`\mathbb E[f(t, y_k) \mid y_k]` when ``f`` is a polynomial of degree
    ``<= 3`` in ``t``. Over all coordinates only constants are exact (the outer points are QMC).
    The point of the rule: one direction integrated out per draw, where EI's heavy tail in that
    direction makes single draws noisy (how it fared: docs/estimators-screen.md, "Built anyway:
    ``qmc-owen-line``").

    Args:
        p: Dimension.
        n_outer: Number ``K`` of outer points (``3K`` points in all).
        generator: Source of all randomness.
        dtype: Output dtype.
        device: Output device; default: the generator's device.

    Returns:
        A :class:`PointSet` with ``z`` of shape ``3K x p``: outer point ``k`` at rows
        ``3k, 3k + 1, 3k + 2`` (nodes ``0, rho_k, -rho_k``).
    """
    _check_dim(p)
    _check_count("n_outer", n_outer)
    if p > 1:
        rest = owen_sobol_points(p - 1, n_outer, generator=generator).z
    else:
        rest = torch.zeros(n_outer, 0, dtype=torch.float64, device=generator.device)
    radii = _randn(generator, n_outer, 3).norm(dim=-1)  # chi(3), K
    nodes = torch.stack([torch.zeros_like(radii), radii, -radii], dim=1)  # K x 3
    z = torch.cat([nodes.unsqueeze(-1), rest.unsqueeze(1).expand(-1, 3, -1)], dim=-1)
    edge = 0.5 / radii.square()
    weights = torch.stack([1.0 - 2.0 * edge, edge, edge], dim=1) / n_outer
    return _finish(
        z.reshape(3 * n_outer, p),
        weights.reshape(-1),
        dtype,
        device,
        generator,
        name="qmc-owen-line",
        unbiased=True,
        exact_degree=0,
        n_rules=n_outer,
        points_per_rule=3,
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

    Write :math:`z = r u` with :math:`r \sim \chi_p` and :math:`u` uniform on the unit sphere.
    One rule draws a Haar rotation ``Q`` (:func:`random_rotation`) and, independently, a radius
    :math:`\rho \sim \chi_{p+2}` (the norm of a :math:`\mathcal N(0, I_{p+2})` draw), and uses

    .. math::

        R(f) = \Big(1 - \frac{p}{\rho^2}\Big) f(0)
             + \frac{p}{\rho^2} \frac{1}{m} \sum_{j=1}^{m} f(\rho Q d_j)

    over ``m`` antipodal directions :math:`d_j`: :math:`\pm v_j` for the ``p + 1`` unit vertices
    :math:`v_j` of a regular simplex (``m = 2(p+1)``) or :math:`\pm e_i` (``m = 2p``). It is
    unbiased for every integrable ``f`` and exact for every polynomial of degree ``<= 3``, for
    every draw:

    * Spherical part: the ``m`` points :math:`Q d_j` with equal weights integrate every
      polynomial of degree ``<= 3`` on the sphere exactly, for every ``Q``: odd monomials cancel
      pairwise, and :math:`\frac1m \sum_j d_j d_j^\top = I_p / p = \mathbb E[u u^\top]`. Since
      each :math:`Q d_j` is uniform on the sphere when ``Q`` is Haar, the spherical part is
      unbiased for every ``f``: :math:`\mathbb E_Q[\hat S(g)] = \mathbb E_u[g(u)]`.
    * Radial part: with :math:`g(r)` the spherical mean at radius ``r``, we need
      :math:`\mathbb E[w_0 g(0) + w_1(\rho) g(\rho)] = \mathbb E_{r\sim\chi_p}[g(r)]` for every
      ``g`` (unbiased), and exactness for :math:`g \in \{1, r^2\}` for every :math:`\rho`
      (degree 3; odd powers of ``r`` vanish in ``g`` by the symmetry above). Exactness forces
      :math:`w_0 + w_1 = 1` and :math:`w_1 \rho^2 = \mathbb E[r^2] = p`, i.e.
      :math:`w_1 = p/\rho^2`. Unbiasedness then needs
      :math:`\mathrm{density}(\rho) \cdot p / \rho^2 = \chi_p\text{-density}(\rho)` (so that
      :math:`\mathbb E[w_0] = 0`, as :math:`\chi_p` has no atom at 0), i.e.
      :math:`\mathrm{density}(\rho) \propto \rho^{p+1} e^{-\rho^2/2}`:
      :math:`\rho \sim \chi_{p+2}`. Indeed
      :math:`\chi_p(\rho) / \chi_{p+2}(\rho) = 2\Gamma(p/2+1) / (\Gamma(p/2)\rho^2) = p/\rho^2`.

    Checked against Genz and Monahan's BAYESPACK routine ``RANBAS`` (``KEY = 2``;
    ``cran/bayespack``, ``src/ranrth.f``): ``R = SQRT(2*GAMRAN((M+2)/2))``, ``WV = M/R**2``,
    ``WC = 1 - WV``, spherical weight ``1/(2(M+1))`` on :math:`\pm R\,V_k` for a randomly rotated
    simplex ``V``. The ``K`` rules **share one centre point** (index 0), as in ``RANBAS`` (it
    evaluates ``F(0)`` once, before the loop over rules), with weight
    :math:`\bar w_0 = \frac1K \sum_k (1 - p/\rho_k^2)`: the same estimate as ``K`` separate centres
    at ``K - 1`` fewer evaluations. The centre weight is often negative
    (:math:`\mathbb E[w_0] = 0`); :math:`\mathrm{Var}(p/\rho^2)` is finite only for ``p > 2``, but
    for smooth ``f`` the combination :math:`(p/\rho^2)(\hat S(\rho) - f(0))` stays bounded as
    :math:`\rho \to 0`, because the symmetric rule cancels the linear term.

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

    The radius is integrated by the ``n``-node Gauss rule of the :math:`\chi_p` law: with
    :math:`t = r^2/2 \sim \mathrm{Gamma}(p/2)`, the generalized Gauss-Laguerre rule with
    :math:`\alpha = p/2 - 1` (nodes :math:`t_i`, weights :math:`w_i` normalized to sum to 1) and
    :math:`r_i = \sqrt{2 t_i}`; it is exact for :math:`\mathbb E[r^{2k}]`, ``k <= 2n - 1``. At
    radius ``i`` of rule ``k`` the points are :math:`r_i Q_{ki} d_j` with weight
    :math:`w_i / (m K)`, for the ``m`` directions :math:`d_j` of a regular simplex (``m = p + 1``,
    a spherical 2-design) or cross-polytope (``m = 2p``, an antipodal 3-design), each
    :math:`Q_{ki}` an independent Haar rotation.

    For a monomial of degree ``d`` the design gives the exact spherical mean :math:`c_d r^d` at
    every radius if ``d`` is at most the design's degree, and the radial rule is exact for
    ``r^0`` and ``r^2``: exact up to degree 2 (simplex) or 3 (cross, and every odd degree by
    antipodality) for every rotation. Not unbiased: for non-polynomial ``f`` the radial rule's
    error is deterministic and survives averaging over rotations. The outermost node grows like
    :math:`\sqrt{8n}` (``n = 16``, ``p = 8``: ``r = 10.7``, weight ``6e-20``); its weight is
    negligible, but ``f`` must still be finite there (a ``nan`` times a tiny weight is ``nan``).
    :func:`~orthobench.pointsets.point_set` caps ``n`` at ``max_radii`` (default 16) and spends
    larger budgets on more rules.

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
    independent Haar rotations averaged. It is :func:`radial_points` with the cross-polytope and
    ``n_radii = 1`` (the 1-node rule's node is ``t = p/2``): exact up to degree 3 and for every
    odd polynomial, for every rotation, and biased for everything else, the error of every even
    moment of degree ``>= 4`` remaining after averaging (e.g. :math:`\mathbb E[z_1^4] = 3` is
    estimated by :math:`p \sum_i Q_{1i}^4 \ne 3` in general).

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
