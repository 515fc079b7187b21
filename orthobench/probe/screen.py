r"""Screen a candidate control variate or proposal for the marginal EI before building it.

Cheap Monte Carlo statistics on a probe state's fitted GP and Laplace ``q(theta)`` (one batch of
draws, no rebuilds) that bound the variance cut a candidate can reach at the probe points that
carry the estimator's MSE: a control variate (:func:`screen_proxy`), a direction integrated out
in each draw (:func:`screen_conditional`), importance sampling from a proposal
(:func:`screen_proposal`). The screen, its pass rule and its results:
docs/estimators-screen.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from botorch.models import SingleTaskGP

from orthobench.surrogates.laplace import LaplacePosterior
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from orthobench.theta_estimators import constant_mean_conditional

#: Theta draws per batch of the GP algebra (bounds the ``S x n x n`` kernel matrices of a batch).
_CHUNK = 4096


@dataclass(frozen=True)
class ScreenResult:
    """The screen at the ``k`` probe points of largest ``Var_q(EI)``, in decreasing order.

    Attributes:
        points: ``k`` indices of those probe points.
        ei_variance: ``k`` variances of ``EI(theta)`` under ``q`` there.
        corr: ``k`` correlations ``corr_q(EI, g)``.
        mean_ratio: ``k`` ratios ``E_q[g] / E_q[EI]``.
    """

    points: torch.Tensor
    ei_variance: torch.Tensor
    corr: torch.Tensor
    mean_ratio: torch.Tensor


def whitened_draws(laplace: LaplacePosterior, n: int, *, rb: bool, seed: int) -> torch.Tensor:
    """``n x k`` iid ``N(0, I_k)`` draws, ``k = p`` (``p - 1`` with ``rb``, as ``draw_thetas``)."""
    z = laplace.sample_whitened(n, "iid", seed=seed)
    return z[:, : laplace.p - 1] if rb else z


def whitened_ei(
    model: SingleTaskGP,
    laplace: LaplacePosterior,
    z: torch.Tensor,
    probes: torch.Tensor,
    *,
    rb: bool,
) -> torch.Tensor:
    """Per-draw EI (standardized scale): ``n x k`` whitened draws and ``N x d`` probes -> ``n x N``.

    ``theta = laplace.theta(z)``, or with ``rb`` the draws of ``phi`` mapped by
    :func:`~orthobench.theta_estimators.constant_mean_conditional` and the constant mean
    integrated out: the Rao-Blackwellized EI of ``+rb``, so a candidate is screened on top of
    it, as the default estimator uses it.
    """
    if rb:
        factor, variance = constant_mean_conditional(laplace)
        theta = laplace.theta_hat + z @ factor.T
    else:
        theta, variance = laplace.theta(z), 0.0
    chunks = []
    with torch.no_grad():
        for part in theta.split(_CHUNK):
            gp = ThetaSampledGP.from_model(model, part, constant_mean_variance=variance)
            chunks.append(gp.log_ei(probes.unsqueeze(-2)).exp())
    return torch.cat(chunks)


def _top(ei: torch.Tensor, top_k: int, n_probes: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not 1 <= top_k <= n_probes:
        raise ValueError(f"`top_k` must be in 1..{n_probes}, but got {top_k=}.")
    return ei.var(dim=0).topk(top_k)


def _corr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a - a.mean(0), b - b.mean(0)
    return (a * b).sum(0) / (a.square().sum(0) * b.square().sum(0)).sqrt()


def screen_proxy(
    model: SingleTaskGP,
    laplace: LaplacePosterior,
    probes: torch.Tensor,
    proxy: Callable[[torch.Tensor], torch.Tensor],
    *,
    top_k: int = 8,
    n_draws: int = 4096,
    rb: bool = False,
    seed: int,
) -> ScreenResult:
    r"""Correlation of EI with ``proxy`` under ``q`` and ``E[proxy] / E[EI]`` at the top-variance points.

    A proxy ``g(theta)`` with known ``E_q[g]`` used as a control variate with the optimal
    coefficient leaves the variance

    .. math::

        \operatorname{Var}(\mathrm{EI} - \beta^\star g) = (1 - \rho^2) \operatorname{Var}(\mathrm{EI}),
        \qquad \rho = \operatorname{corr}_q(\mathrm{EI}(\theta), g(\theta)),

    per probe point, so a cut of ``c`` times needs ``rho^2 >= 1 - 1/c``: a 10x cut needs
    ``rho ~ 0.95`` at the points that carry the estimator's MSE (those of largest
    ``Var_q(EI)``), 3x needs 0.82, 2x 0.71. The ratio ``E_q[g] / E_q[EI]`` says how far the
    proxy's scale is from EI's there (a proxy that overshoots by orders of magnitude is a poor
    proposal shape too). EI is the per-draw analytic EI on the model's standardized scale
    (:func:`whitened_ei`), constant mean fixed, or integrated out with ``rb``.

    Args:
        model: The state's fitted GP.
        laplace: Its Laplace posterior ``q(theta)``.
        probes: ``N x d`` probe points.
        proxy: Maps ``n_draws x k`` whitened draws ``z`` (:func:`whitened_draws`) to
            ``n_draws x N`` proxy values at ``probes``, on EI's scale.
        top_k: Number of probe points screened (those of largest ``Var_q(EI)``).
        n_draws: Monte Carlo draws of ``z ~ N(0, I)``.
        rb: Screen on the Rao-Blackwellized EI (``z`` in ``p - 1`` dimensions).
        seed: Seed of the iid draws.

    Returns:
        The :class:`ScreenResult`.
    """
    if n_draws < 2:
        raise ValueError(f"`n_draws` must be at least 2, but got {n_draws=}.")
    z = whitened_draws(laplace, n_draws, rb=rb, seed=seed)
    ei = whitened_ei(model, laplace, z, probes, rb=rb)
    variance, points = _top(ei, top_k, probes.shape[0])
    with torch.no_grad():
        g = proxy(z)
    if g.shape != ei.shape:
        raise ValueError(f"`proxy` must return {tuple(ei.shape)} values, but got {tuple(g.shape)}.")
    ei, g = ei[:, points], g[:, points]
    return ScreenResult(
        points=points, ei_variance=variance, corr=_corr(ei, g), mean_ratio=g.mean(0) / ei.mean(0)
    )


def top_variance_points(
    model: SingleTaskGP,
    laplace: LaplacePosterior,
    probes: torch.Tensor,
    *,
    top_k: int = 8,
    n_draws: int = 4096,
    rb: bool = True,
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(points, variance)``: the ``top_k`` probe indices of largest ``Var_q(EI)`` and those variances.

    Screen the candidates at ``probes[points]`` with draws independent of these (another seed):
    the points are picked where this batch's sample variance is large, which biases the same
    batch's statistics there.
    """
    z = whitened_draws(laplace, n_draws, rb=rb, seed=seed)
    ei = whitened_ei(model, laplace, z, probes, rb=rb)
    variance, points = _top(ei, top_k, probes.shape[0])
    return points, variance


def gauss_hermite(
    n_nodes: int, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_nodes`` nodes and weights (summing to 1) of the Gauss rule for ``N(0, 1)``."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    weights = weights / math.sqrt(2.0 * math.pi)
    return torch.as_tensor(nodes, dtype=dtype), torch.as_tensor(weights, dtype=dtype)


@dataclass(frozen=True)
class ConditionalScreen:
    """One whitened direction integrated out, at ``k`` screened points.

    Attributes:
        kept_variance: ``k`` values ``rho^2 = Var(g) / Var(EI)`` (:func:`screen_conditional`):
            the variance a draw keeps; ``1 / rho^2`` is the cut per outer draw.
        corr: ``k`` correlations ``corr_q(EI, g)`` (``corr^2`` estimates ``rho^2`` too).
        mean_ratio: ``k`` ratios ``E_q[g] / E_q[EI]``: 1 up to Monte Carlo and rule error.
    """

    kept_variance: torch.Tensor
    corr: torch.Tensor
    mean_ratio: torch.Tensor


def screen_conditional(
    model: SingleTaskGP,
    laplace: LaplacePosterior,
    points: torch.Tensor,
    direction: torch.Tensor | None,
    *,
    n_nodes: int = 16,
    n_draws: int = 1024,
    rb: bool = True,
    seed: int,
) -> ConditionalScreen:
    r"""EI against its conditional mean ``g = E[EI | z_perp]`` along one whitened direction.

    With whitened draws ``z ~ N(0, I_k)`` and a unit direction ``w``, write ``z = z_perp + t w``
    with ``t = w^T z ~ N(0, 1)`` independent of ``z_perp``. An estimator that replaces ``EI(z)``
    by the conditional mean

    .. math::

        g(z_\perp) = \mathbb E[\mathrm{EI} \mid z_\perp]
                   = \int \mathrm{EI}(z_\perp + t w) \varphi(t)\, dt
                   \approx \sum_{k=1}^{n} \omega_k\, \mathrm{EI}(z_\perp + t_k w)

    (the ``n_nodes``-point Gauss-Hermite rule of ``N(0, 1)``, :func:`gauss_hermite`) is
    unbiased, and since ``Cov(EI, g) = Var(g)`` the fraction of the variance it keeps is
    :math:`\rho^2 = \operatorname{Var}(g) / \operatorname{Var}(\mathrm{EI}) =
    \operatorname{corr}(\mathrm{EI}, g)^2`: a cut of ``1 / rho^2`` per outer draw,
    ``1 / (n rho^2)`` per EI evaluation when each node costs one.

    Args:
        model: The state's fitted GP.
        laplace: Its Laplace posterior ``q(theta)``.
        points: ``k x d`` screened points (e.g. those of :func:`top_variance_points`).
        direction: ``m`` whitened direction (``m`` as :func:`whitened_draws`; normalized here),
            the same for every point; or None: per point the least-squares direction of EI on
            ``z``, ``Cov_q(z, EI) / |Cov_q(z, EI)|`` (``Cov(z) = I``), from ``n_draws``
            independent draws (seed ``seed + 1``).
        n_nodes: Gauss-Hermite nodes along the direction.
        n_draws: Monte Carlo draws of ``z ~ N(0, I)``.
        rb: Screen on the Rao-Blackwellized EI (``z`` in ``p - 1`` dimensions).
        seed: Seed of the iid draws.

    Returns:
        The :class:`ConditionalScreen`.
    """
    if n_draws < 2:
        raise ValueError(f"`n_draws` must be at least 2, but got {n_draws=}.")
    z = whitened_draws(laplace, n_draws, rb=rb, seed=seed)
    k, dim = points.shape[0], z.shape[-1]
    if direction is None:
        z_fit = whitened_draws(laplace, n_draws, rb=rb, seed=seed + 1)
        ei_fit = whitened_ei(model, laplace, z_fit, points, rb=rb)
        directions = (z_fit.T @ (ei_fit - ei_fit.mean(0))).T  # k x m
        # Per-point directions need their own thetas; a shared one needs one batch.
        groups = [([j], directions[j]) for j in range(k)]
    else:
        if direction.shape != (dim,):
            raise ValueError(
                f"`direction` must have shape ({dim},), but got {tuple(direction.shape)}."
            )
        groups = [(list(range(k)), direction.to(z))]
    nodes, weights = gauss_hermite(n_nodes, z.dtype)
    g = torch.empty(n_draws, k, dtype=z.dtype, device=z.device)
    for cols, w in groups:
        w = w / w.norm()
        z_perp = z - (z @ w)[:, None] * w
        lines = z_perp[:, None, :] + nodes[:, None] * w  # n_draws x n_nodes x m
        values = whitened_ei(model, laplace, lines.reshape(-1, dim), points[cols], rb=rb)
        g[:, cols] = torch.einsum("snj,n->sj", values.reshape(n_draws, n_nodes, -1), weights)
    ei = whitened_ei(model, laplace, z, points, rb=rb)
    return ConditionalScreen(
        kept_variance=g.var(0) / ei.var(0), corr=_corr(ei, g), mean_ratio=g.mean(0) / ei.mean(0)
    )


@dataclass(frozen=True)
class ProposalScreen:
    """Importance sampling from a proposal ``r``, at ``k`` screened points.

    Attributes:
        variance_factor: ``k`` ratios ``Var_q(EI) / Var_r(w EI)`` (> 1: the proposal cuts the
            variance of one draw), both estimated from the proposal's draws
            (:func:`screen_proposal`).
        max_weight: The largest ``w = q / r`` among the proposal's draws.
    """

    variance_factor: torch.Tensor
    max_weight: float


def screen_proposal(
    model: SingleTaskGP,
    laplace: LaplacePosterior,
    points: torch.Tensor,
    proposal_z: torch.Tensor,
    log_weight: torch.Tensor,
    *,
    rb: bool = True,
) -> ProposalScreen:
    r"""Variance of importance sampling from ``r`` relative to plain Monte Carlo under ``q``.

    With ``w = q / r`` the estimate ``mean_s w(z_s) EI(z_s)``, ``z_s ~ r``, is unbiased and the
    variance of one draw relative to plain Monte Carlo under ``q`` is

    .. math::

        \frac{\operatorname{Var}_r(w\, \mathrm{EI})}{\operatorname{Var}_q(\mathrm{EI})}
        = \frac{\mathbb E_r[w^2 \mathrm{EI}^2] - \mu^2}{\mathbb E_r[w\, \mathrm{EI}^2] - \mu^2},
        \qquad \mu = \mathbb E_r[w\, \mathrm{EI}] = \mathbb E_q[\mathrm{EI}],

    all three moments estimated from the same draws of ``r`` (a defensive mixture
    ``r = alpha q + (1 - alpha) r_wide`` keeps ``w <= 1 / alpha``).

    Args:
        model: The state's fitted GP.
        laplace: Its Laplace posterior ``q(theta)``.
        points: ``k x d`` screened points (e.g. those of :func:`top_variance_points`).
        proposal_z: ``n x m`` whitened draws from the proposal ``r`` (``m`` as
            :func:`whitened_draws`).
        log_weight: ``n`` values ``log q(z) - log r(z)`` at ``proposal_z``
            (``q = N(0, I_m)``).
        rb: Screen on the Rao-Blackwellized EI (``z`` in ``p - 1`` dimensions).

    Returns:
        The :class:`ProposalScreen`.
    """
    if log_weight.shape != proposal_z.shape[:1]:
        raise ValueError(
            f"`log_weight` must have shape ({proposal_z.shape[0]},), but got {tuple(log_weight.shape)}."
        )
    ei = whitened_ei(model, laplace, proposal_z, points, rb=rb)
    w = log_weight.exp()[:, None]
    mean = (w * ei).mean(0)
    var_q = (w * ei.square()).mean(0) - mean.square()
    var_r = (w.square() * ei.square()).mean(0) - mean.square()
    return ProposalScreen(variance_factor=var_q / var_r, max_weight=float(w.max()))
