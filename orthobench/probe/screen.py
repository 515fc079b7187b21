r"""Screen a candidate control variate or proposal for the marginal EI before building it.

A proxy ``g(theta)`` with known ``E_q[g]`` used as a control variate with the optimal coefficient
leaves the variance

.. math::

    \operatorname{Var}(\mathrm{EI} - \beta^\star g) = (1 - \rho^2) \operatorname{Var}(\mathrm{EI}),
    \qquad \rho = \operatorname{corr}_q(\mathrm{EI}(\theta), g(\theta)),

per probe point, so a cut of ``c`` times needs ``rho^2 >= 1 - 1/c``: a 10x cut needs
``rho ~ 0.95`` at the points that carry the estimator's MSE (the points of largest
``Var_q(EI)``), 3x needs 0.82, 2x 0.71. The ratio ``E_q[g] / E_q[EI]`` says how far the proxy's
scale is from EI's there (a proxy that overshoots by orders of magnitude is a poor proposal
shape too). :func:`screen_proxy` measures both by Monte Carlo on a probe state's fitted GP and
Laplace ``q(theta)``; it is cheap (one batch of draws, no rebuilds), so every candidate is
screened before it is built (docs/negative-results.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from botorch.models import SingleTaskGP

from orthobench.surrogates.laplace import LaplacePosterior, ThetaSampledGP


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


def screen_proxy(
    model: SingleTaskGP,
    laplace: LaplacePosterior,
    probes: torch.Tensor,
    proxy: Callable[[torch.Tensor], torch.Tensor],
    *,
    top_k: int = 8,
    n_draws: int = 4096,
    seed: int,
) -> ScreenResult:
    """Correlation of EI with ``proxy`` under ``q`` and ``E[proxy] / E[EI]`` at the top-variance points.

    EI is the per-draw analytic EI on the model's standardized scale
    (:meth:`~orthobench.surrogates.laplace.ThetaSampledGP.log_ei`), constant mean fixed.

    Args:
        model: The state's fitted GP.
        laplace: Its Laplace posterior ``q(theta)``.
        probes: ``N x d`` probe points.
        proxy: Maps ``n_draws x p`` whitened draws ``z`` (``theta = laplace.theta(z)``) to
            ``n_draws x N`` proxy values at ``probes``, on EI's scale.
        top_k: Number of probe points screened (those of largest ``Var_q(EI)``).
        n_draws: Monte Carlo draws of ``z ~ N(0, I)``.
        seed: Seed of the iid draws.

    Returns:
        The :class:`ScreenResult`.
    """
    if not 1 <= top_k <= probes.shape[0]:
        raise ValueError(f"`top_k` must be in 1..{probes.shape[0]}, but got {top_k=}.")
    if n_draws < 2:
        raise ValueError(f"`n_draws` must be at least 2, but got {n_draws=}.")
    z = laplace.sample_whitened(n_draws, "iid", seed=seed)
    with torch.no_grad():
        ei = ThetaSampledGP.from_model(model, laplace.theta(z)).log_ei(probes.unsqueeze(-2)).exp()
        g = proxy(z)
    if g.shape != ei.shape:
        raise ValueError(f"`proxy` must return {tuple(ei.shape)} values, but got {tuple(g.shape)}.")
    variance, points = ei.var(dim=0).topk(top_k)
    ei, g = ei[:, points], g[:, points]
    ei_c, g_c = ei - ei.mean(0), g - g.mean(0)
    corr = (ei_c * g_c).sum(0) / (ei_c.square().sum(0) * g_c.square().sum(0)).sqrt()
    return ScreenResult(
        points=points, ei_variance=variance, corr=corr, mean_ratio=g.mean(0) / ei.mean(0)
    )
