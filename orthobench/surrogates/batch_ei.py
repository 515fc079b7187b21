r"""Batch EI of a :class:`~orthobench.surrogates.theta_sampled_gp.ThetaSampledGP` by inner Monte
Carlo on fixed base samples, with pending points sampled once.

Per theta draw ``s`` the ``q`` points of a batch get ``K`` joint posterior samples
``f_k = mu_s + L_s eps_k`` (:func:`joint_samples`); batch EI is their smoothed mean improvement
(:func:`log_qei`), batch constrained EI the same with each point's smoothed feasibility
(:func:`log_qcei`). Pending points (a sequential-greedy batch's earlier points, or evaluations
still running) come *first* in the Cholesky order, so their samples do not depend on the batch:
:class:`PendingSamples` makes them once, and every batch then costs its own ``q`` points rather
than ``q + p`` (docs/design.md, "Batch acquisitions: the nested marginal qEI").

References:
    .. [Ament2023logei] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from botorch.acquisition.logei import TAU_RELU
from botorch.utils.objective import compute_smoothed_feasibility_indicator
from botorch.utils.safe_math import log_fatplus, logmeanexp
from linear_operator.utils.cholesky import psd_safe_cholesky

from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

#: Temperature of the smoothed feasibility indicators of batch constrained EI (:func:`log_qcei`),
#: on each constraint's standardized scale: BoTorch's default ``eta`` of its constrained qLogEI.
CONSTRAINT_ETA = 1e-3


class PendingSamples:
    r"""A GP's draws sampled once at ``p`` pending points, for the batches that join them.

    In draw ``s``'s joint Cholesky factor of ``[pending; batch]``, pending first,

    .. math::

        L = \begin{pmatrix} L_{pp} & 0 \\ G & L_c \end{pmatrix}, \quad
        G = \Sigma_{cp} L_{pp}^{-T}, \quad L_c L_c^T = \Sigma_{cc} - G G^T,

    so ``f_p = mu_p + L_pp eps_p`` does not depend on the batch, and the batch's samples are
    ``f_c = mu_c + G eps_p + L_c eps_c`` (:func:`joint_samples`): the joint samples of the
    concatenation on base samples ``[eps_p | eps_c]``. A batch then costs its own moments and
    factor and its ``q x p`` covariances with the pending points, not the moments and factor of
    all ``p + q`` points.

    Args:
        gp: The GP under its ``S`` draws.
        X_pending: ``p x d`` pending points.
        base_samples: Their standard normal draws, ``S' x K x p`` (``S' >= S``, draw ``s`` row
            ``s``) or ``K x p`` (shared by every draw).
    """

    def __init__(
        self, gp: ThetaSampledGP, X_pending: torch.Tensor, base_samples: torch.Tensor
    ) -> None:
        _check_base_samples(gp, base_samples, X_pending.shape[-2])
        self.gp = gp
        with torch.no_grad():
            self.points = X_pending.unsqueeze(0)  # 1 x p x d
            mean, self.white, self.slope = gp.whitened(self.points)
            chol = psd_safe_cholesky(gp.covariance(self.points, self.white, self.slope))
            self.base_samples = base_samples
            #: ``S x 1 x p x K`` samples at the pending points.
            self.samples = mean.unsqueeze(-1) + _correlate(chol, base_samples)
            #: ``S x 1 x K``: each draw's and base sample's maximum over the pending points.
            self.maximum = self.samples.amax(dim=-2)
            eye = torch.eye(chol.shape[-1], dtype=chol.dtype, device=chol.device)
            self._inv_chol_t = torch.linalg.solve_triangular(chol, eye, upper=False).mT

    def loadings(
        self, X: torch.Tensor, white: torch.Tensor, slope: torch.Tensor | None
    ) -> torch.Tensor:
        """``G = Sigma_cp L_pp^{-T}``, ``S x b x q x p``, of ``b x q x d`` batches whose
        :meth:`~ThetaSampledGP.whitened` parts are ``white`` and ``slope``."""
        cross = self.gp.covariance(X, white, slope, self.points, self.white, self.slope)
        return cross @ self._inv_chol_t


def joint_samples(
    gp: ThetaSampledGP,
    X: torch.Tensor,
    base_samples: torch.Tensor,
    pending: PendingSamples | None = None,
) -> torch.Tensor:
    """Posterior samples ``f_k = mu_s + L_s eps_{s,k}`` at the ``q`` points of each batch, per
    draw, on the standardized scale (``L_s`` the Cholesky factor of
    :meth:`~ThetaSampledGP.joint_moments`); with ``pending``, jointly with its samples
    (:class:`PendingSamples`).

    Args:
        gp: The GP under its ``S`` draws.
        X: ``b x q x d`` batches of candidates.
        base_samples: standard normal draws of the candidates, ``S' x K x q`` with ``S' >= S``
            (draw ``s`` uses row ``s``: each draw its own base samples) or ``K x q`` (the same
            for every draw).
        pending: ``gp``'s samples at pending points, on base samples of the same layout.

    Returns:
        ``S x b x q x K`` samples.

    Raises:
        ValueError: for base samples of another shape, or samples at pending points of
            another GP.
    """
    _check_base_samples(gp, base_samples, X.shape[-2])
    if pending is not None and pending.gp is not gp:
        raise ValueError("`pending` holds samples of another GP's draws.")
    mean, white, slope = gp.whitened(X)
    cov = gp.covariance(X, white, slope)
    if pending is None:
        return mean.unsqueeze(-1) + _correlate(psd_safe_cholesky(cov), base_samples)
    loadings = pending.loadings(X, white, slope)
    chol = psd_safe_cholesky(cov - loadings @ loadings.mT)
    return (
        mean.unsqueeze(-1)
        + _correlate(loadings, pending.base_samples)
        + _correlate(chol, base_samples)
    )


def log_qei(
    gp: ThetaSampledGP,
    X: torch.Tensor,
    base_samples: torch.Tensor,
    pending: PendingSamples | None = None,
    *,
    canonical: bool = True,
) -> torch.Tensor:
    r"""Per-draw batch log-EI by inner Monte Carlo over fixed base samples.

    For draw ``s`` and base sample ``eps_k`` (``k = 1..K``), with ``f_k`` of
    :func:`joint_samples`,

    .. math::

        \log \mathrm{qEI}_s(X) = \log \frac{1}{K} \sum_k
            \operatorname{max}_j\, (f_{k,j} - y^*)_+,

    the maximum over the batch and the pending points, with the ``(.)_+`` smoothed as BoTorch's
    qLogEI smooths it [Ament2023logei]_, a fat softplus of temperature ``TAU_RELU`` in log space
    (finite and differentiable where no base sample improves). The maximum over the batch is
    exact: ``max_j (f_j - y^*)_+ = (max_j f_j - y^*)_+``, so the softplus runs on ``K`` values
    per draw rather than ``K q`` (BoTorch smooths the maximum too, for gradients to every point
    of each sample; here the ``S K`` samples of the marginal spread the gradient over the batch).
    Each draw's inner mean is an unbiased estimate of its smoothed qEI, so the marginal over
    ``theta`` of these values is unbiased for the marginal of the inner expectations (iterated
    expectations; paper, appendix, nested estimator), whether the draws share their base samples
    or each has its own. Own base samples per draw make the inner errors of the ``S`` draws
    (nearly) independent, so the marginal's inner noise shrinks with ``S`` as well as with ``K``;
    shared ones make it one error common to every draw, which no number of draws averages out
    (docs/design.md, "Batch acquisitions: the nested marginal qEI").

    Exchangeable: with ``canonical`` the candidates of a batch are put in
    :func:`canonical_order` first, so the value does not depend on the order of ``X``'s rows
    though the Cholesky factor does. ``canonical=False`` takes them in their given order (smooth
    in ``X``; :meth:`MarginalLogQEI.in_given_order
    <orthobench.acquisition.MarginalLogQEI.in_given_order>`). Pending points are never sorted
    among the candidates: they stay put while ``X`` moves.

    Args:
        gp: The GP under its ``S`` draws.
        X: ``b x q x d`` batches of candidates.
        base_samples: The candidates' standard normal draws (:func:`joint_samples`).
        pending: Samples at points whose evaluations are pending; they join every batch.
        canonical: Sort each batch first (exchangeable, but a jump where two candidates'
            first coordinates cross).

    Returns:
        ``S x b`` log-qEI values on the standardized scale.
    """
    X = canonical_order(X) if canonical else X
    best = joint_samples(gp, X, base_samples, pending).amax(dim=-2)  # S x b x K
    if pending is not None:
        best = torch.maximum(best, pending.maximum)
    return logmeanexp(log_fatplus(best - gp.best_f, tau=TAU_RELU), dim=-1)


def log_qcei(
    objective: ThetaSampledGP,
    X: torch.Tensor,
    base_samples: torch.Tensor,
    constraints: Sequence[tuple[ThetaSampledGP, torch.Tensor, PendingSamples | None]],
    eta: float = CONSTRAINT_ETA,
    pending: PendingSamples | None = None,
    *,
    canonical: bool = True,
) -> torch.Tensor:
    r"""Per-draw batch log constrained EI by inner Monte Carlo over fixed base samples.

    Draw ``s`` pairs the objective's draw ``s`` with every constraint GP's draw ``s`` (independent
    GPs), and each GP has its own base samples; for base sample ``k``

    .. math::

        \log \mathrm{qCEI}_s(X) = \log \frac{1}{K} \sum_k \max_j\,
            (f_{k,j} - y^*)_+ \prod_i \mathbf 1\{c_{i,k,j} \le 0\},

    the maximum over the batch and the pending points, the ``(.)_+`` smoothed as in
    :func:`log_qei` and each indicator by BoTorch's fat sigmoid of temperature ``eta`` on the
    constraint's standardized scale
    (:func:`botorch.utils.objective.compute_smoothed_feasibility_indicator`, as BoTorch's
    constrained qLogEI smooths it). The maximum over the batch is exact. ``y^*`` is the
    objective's incumbent (its ``best_f``: the best feasible observation).

    Args:
        objective: The objective's GP under its draws.
        X: ``b x q x d`` batches of candidates.
        base_samples: The objective's standard normal draws of the candidates
            (:func:`joint_samples`).
        constraints: Per constraint, its GP under as many draws, its base samples of the
            objective's shape and its samples at the pending points (None without them).
        eta: Temperature of the feasibility indicators.
        pending: The objective's samples at the pending points.
        canonical: As in :func:`log_qei`.

    Returns:
        ``S x b`` log-qCEI values on the objective's standardized scale.
    """
    X = canonical_order(X) if canonical else X
    value = _log_constrained_improvement(
        objective,
        joint_samples(objective, X, base_samples, pending),
        [joint_samples(gp, X, base, p) - gp.standardized(0.0) for gp, base, p in constraints],
        eta,
    ).amax(dim=-2)
    if pending is not None:
        pending_value = _log_constrained_improvement(
            objective,
            pending.samples,
            [p.samples - gp.standardized(0.0) for gp, _, p in constraints],
            eta,
        )
        value = torch.maximum(value, pending_value.amax(dim=-2))
    return logmeanexp(value, dim=-1)


def canonical_order(X: torch.Tensor) -> torch.Tensor:
    """``b x q x d`` batches with each batch's points sorted lexicographically (by their first
    coordinate, ties by the next): batch acquisitions on fixed base samples then do not depend on
    the order of a batch's rows (the Cholesky factor does). Ties are common: ``optimize_acqf``
    clamps candidates to the box, so points share a bound (a sort by the first coordinate alone
    left them in their given order, and the value moved by up to 36 nats with it)."""
    if X.shape[-2] == 1:
        return X
    # cmp[..., i, j]: the sign of x_j - x_i at their first differing coordinate (0: equal).
    key = X.detach()
    sign = torch.sign(key.unsqueeze(-3) - key.unsqueeze(-2))  # b x q x q x d
    first = (sign != 0).to(torch.uint8).argmax(dim=-1, keepdim=True)
    cmp = sign.gather(-1, first).squeeze(-1)
    index = torch.arange(X.shape[-2], device=X.device)
    # Point i's rank: the points before it, equal ones by their position (a stable sort).
    before = (cmp < 0) | ((cmp == 0) & (index < index.unsqueeze(-1)))
    order = before.sum(dim=-1).argsort(dim=-1)
    return X.gather(-2, order.unsqueeze(-1).expand_as(X))


def _log_constrained_improvement(
    objective: ThetaSampledGP, f: torch.Tensor, centred: Sequence[torch.Tensor], eta: float
) -> torch.Tensor:
    """Per sample and point, log of the smoothed improvement times the smoothed feasibility:
    ``S x b x q x K`` objective samples ``f`` and constraint samples ``centred`` on their bounds
    (feasible where ``<= 0``)."""
    log_value = log_fatplus(f - objective.best_f, tau=TAU_RELU)
    if not centred:
        return log_value
    samples = torch.stack(list(centred), dim=-1)  # S x b x q x K x m
    checks = [functools.partial(_column, i=i) for i in range(len(centred))]
    return log_value + compute_smoothed_feasibility_indicator(
        checks, samples, eta, log=True, fat=True
    )


def _correlate(factor: torch.Tensor, base_samples: torch.Tensor) -> torch.Tensor:
    """``factor @ eps``, ``S x b x q x r`` factors times ``K x r`` (every draw) or
    ``S' x K x r`` (draw ``s`` row ``s``) base samples -> ``S x b x q x K``, as one GEMM."""
    count, b, q, r = factor.shape
    if base_samples.ndim == 2:
        # For every (draw, batch, row) and base sample as one GEMM: (S b q) x K.
        out = factor.reshape(-1, r) @ base_samples.T
    else:
        # Per draw one GEMM, (b q) x K: the same flops as the shared samples' one.
        out = torch.bmm(factor.reshape(count, -1, r), base_samples[:count].transpose(-1, -2))
    return out.reshape(count, b, q, base_samples.shape[-2])


def _check_base_samples(gp: ThetaSampledGP, base_samples: torch.Tensor, q: int) -> None:
    count = gp.num_samples
    if base_samples.shape[-1] != q or (base_samples.ndim == 3 and base_samples.shape[0] < count):
        raise ValueError(
            f"`base_samples` must be K x {q} or S' x K x {q} with S' >= {count} draws, but "
            f"got {tuple(base_samples.shape)}."
        )


def _column(samples: torch.Tensor, i: int) -> torch.Tensor:
    """Constraint ``i``'s values of stacked samples (a BoTorch constraint callable)."""
    return samples[..., i]
