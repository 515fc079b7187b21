r"""Estimators of a marginal acquisition from ``S`` parameter draws: naive MC and control variates.

Pure functions on tensors, no model code: ``S x N`` values ``h(x_n; theta_s)`` (``S`` draws,
``N`` candidates) and ``S x K`` controls ``c(theta_s)`` with a *known* mean give ``N``
estimates. The control-variate estimate is the paper's Eqs. (4) and (6) with the plug-in
coefficient of Sec. 4.1 (Eq. (17) for the GP, Eqs. (20)-(21) for TPE); the estimators by name are
:data:`ESTIMATORS`, and the facts they rest on are in docs/design.md, "Estimators of the
marginal EI".
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from orthobench.config import names
from orthobench.exceptions import UnknownNameError

#: Pseudo-samples of shrinkage per control used by :func:`shrunk_mean` (worst-case excess K/(4 lambda)).
SHRINK_PER_CONTROL = 4.0


def _check(values: Tensor, controls: Tensor | None = None, min_draws: int = 2) -> None:
    if values.ndim != 2:
        raise ValueError(f"`values` must be S x N, but got shape {tuple(values.shape)}.")
    if values.shape[0] < min_draws:
        raise ValueError(f"At least {min_draws} draws are needed, but got S={values.shape[0]}.")
    if controls is not None and (controls.ndim != 2 or controls.shape[0] != values.shape[0]):
        raise ValueError(
            f"`controls` must be S x K with S={values.shape[0]}, but got shape {tuple(controls.shape)}."
        )


def _control_mean(controls: Tensor, control_mean: Tensor | None) -> Tensor:
    if control_mean is None:
        return torch.zeros(controls.shape[-1], dtype=controls.dtype, device=controls.device)
    control_mean = torch.as_tensor(control_mean, dtype=controls.dtype, device=controls.device)
    if control_mean.shape != controls.shape[-1:]:
        raise ValueError(
            f"`control_mean` must have shape ({controls.shape[-1]},), but got {tuple(control_mean.shape)}."
        )
    return control_mean


def mc_mean(values: Tensor) -> Tensor:
    r"""Naive Monte Carlo mean, paper Eq. (3): ``S x N`` -> ``N``, ``(1/S) sum_s h_s``."""
    _check(values, min_draws=1)
    return values.mean(dim=0)


def weighted_mean(values: Tensor, weights: Tensor) -> Tensor:
    r"""Weighted rule ``sum_s w_s h_s``: ``S x N`` values and ``S`` weights -> ``N``.

    The estimate of a cubature or randomized rule (:class:`~orthobench.pointsets.PointSet`):
    :math:`\hat I = \sum_s w_s h(x; \theta_s)`. Weights may be negative (sr3's centre) and need
    not be equal; with ``w_s = 1 / S`` this is :func:`mc_mean`. Linear in ``values``.

    Example:
        >>> values = torch.rand(8, 3)
        >>> bool(torch.allclose(weighted_mean(values, torch.full((8,), 1 / 8)), mc_mean(values)))
        True
    """
    _check(values, min_draws=1)
    weights = torch.as_tensor(weights, dtype=values.dtype, device=values.device)
    if weights.shape != values.shape[:1]:
        raise ValueError(
            f"`weights` must have shape ({values.shape[0]},), but got {tuple(weights.shape)}."
        )
    return weights @ values


def _plugin_gamma(values: Tensor, controls: Tensor, ridge: float) -> Tensor:
    r"""``K x N`` least-squares ``gamma`` of ``h`` on ``c`` (both centred by their sample means),
    with ``ridge`` pseudo-samples of Tikhonov shrinkage in standardized control coordinates.

    Solved by an SVD of the centred controls; singular values below ``max(S, K) eps sigma_max``
    are dropped, so with ``S <= K`` and no ridge this is the minimum-norm solution.
    """
    centred_c = controls - controls.mean(dim=0)
    centred_h = values - values.mean(dim=0)
    scale = centred_c.square().mean(dim=0).sqrt()
    # A control that is constant over the draws carries nothing; keep it out of the solve.
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    u, sigma, vh = torch.linalg.svd(centred_c / scale, full_matrices=False)
    cutoff = (
        max(centred_c.shape)
        * torch.finfo(sigma.dtype).eps
        * sigma.max().clamp_min(torch.finfo(sigma.dtype).tiny)
    )
    # ``(C^T C + ridge I)^{-1} C^T H`` in standardized coordinates, where ``C^T C`` is ~ S I.
    shrink = torch.where(sigma > cutoff, sigma / (sigma.square() + ridge), torch.zeros_like(sigma))
    gamma_std = vh.transpose(-1, -2) @ (shrink[:, None] * (u.transpose(-1, -2) @ centred_h))
    return gamma_std / scale[:, None]


def orthogonal_mean(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    *,
    ridge: float = 0.0,
) -> Tensor:
    r"""Control-variate (orthogonalized) mean with the plug-in ``gamma``, paper Eqs. (4), (6).

    .. math::

        \hat h^{\mathrm{orth}} = \bar h - \hat\gamma^\top (\bar c - \mu_c), \qquad
        \hat\gamma = \hat\Sigma_c^{-1} \widehat{\operatorname{Cov}}(c, h),

    the intercept of the least-squares regression of ``h`` on ``c`` from the same draws, evaluated
    at ``c = mu_c`` (minimum-norm ``gamma`` when ``S <= K``). At or below ``S = K`` the sample
    covariance is singular and ``gamma`` interpolates the noise (docs/design.md, "Never worse than
    naive MC"): :func:`shrunk_mean` bounds that.

    Args:
        values: ``S x N`` values ``h(x_n; theta_s)`` (any positive per-candidate scaling).
        controls: ``S x K`` controls ``c(theta_s)``, e.g. the GP score or TPE bootstrap statistics.
        control_mean: ``K`` known mean ``E[c]`` (zero when None, as for a score). It must not be
            the mean of these ``S`` controls: then the correction vanishes
            (docs/design.md, "Controls need a known mean").
        ridge: Shrinkage of ``gamma`` toward zero in pseudo-samples:
            ``gamma = (C^T C + ridge I)^{-1} C^T H`` with ``C`` the centred controls standardized
            to unit root-mean-square (so ``C^T C ~ S I``). 0 is the paper's plug-in, ``-> inf``
            is :func:`mc_mean`.

    Returns:
        ``N`` estimates.

    Example:
        >>> values = torch.randn(64, 5).exp()
        >>> controls = torch.randn(64, 3)
        >>> orthogonal_mean(values, controls, control_mean=torch.zeros(3)).shape
        torch.Size([5])
    """
    _check(values, controls)
    if ridge < 0:
        raise ValueError(f"`ridge` must be >= 0, but got {ridge=}.")
    mu = _control_mean(controls, control_mean)
    gamma = _plugin_gamma(values, controls, ridge)
    return values.mean(dim=0) - (controls.mean(dim=0) - mu) @ gamma


def crossfit_mean(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    *,
    ridge: float = 0.0,
) -> Tensor:
    r"""2-fold cross-fitted control-variate mean (paper footnote 2, Supplement C).

    Draws ``[0, h)`` and ``[h, S)`` form two folds, ``h = ceil(S/2)`` rounded up to an even
    number for an even ``S`` (so ``S = 4k + 2`` splits ``2k + 2 | 2k``); ``gamma`` fitted on one
    fold (as in :func:`orthogonal_mean`) corrects the other:
    ``est = (|B| est_B(gamma_A) + |A| est_A(gamma_B)) / S``. Each fold's correction has mean zero
    given the other fold, so the estimate is exactly unbiased when the folds are independent: iid
    draws, or antithetic pairs ``z, -z`` at rows ``2k, 2k + 1``
    (:meth:`~orthobench.surrogates.laplace.LaplacePosterior.sample_whitened`), which the even
    boundary keeps within a fold. A pair split between the folds (at ``h = 2k + 1``) ties
    ``gamma_A`` to ``bar c_B``, and the estimate is biased. Cross-fitting halves the data behind
    each ``gamma``.

    Args:
        values: ``S x N`` values, ``S >= 4``.
        controls: ``S x K`` controls.
        control_mean: ``K`` known mean of the controls (zero when None).
        ridge: As in :func:`orthogonal_mean`, per fold.

    Returns:
        ``N`` estimates.
    """
    _check(values, controls)
    n_draws = values.shape[0]
    if n_draws < min_draws("orth-crossfit"):
        raise ValueError(f"Cross-fitting needs at least 4 draws (2 per fold), but got S={n_draws}.")
    mu = _control_mean(controls, control_mean)
    half = (n_draws + 1) // 2
    if n_draws % 2 == 0:
        half += half % 2  # keep antithetic pairs (rows 2k, 2k + 1) within a fold
    folds = (slice(0, half), slice(half, n_draws))
    total = torch.zeros_like(values[0])
    for fit, apply in (folds, folds[::-1]):
        gamma = _plugin_gamma(values[fit], controls[fit], ridge)
        fold_size = values[apply].shape[0]
        total = total + fold_size * (
            values[apply].mean(dim=0) - (controls[apply].mean(dim=0) - mu) @ gamma
        )
    return total / n_draws


def quadratic_controls(z: Tensor) -> Tensor:
    r"""Degree-1 and degree-2 Hermite features of whitened Gaussian draws.

    For ``z ~ N(0, I_K)`` the features ``[z_i, (z_i^2 - 1) / sqrt(2), z_i z_j (i < j)]`` have mean
    zero and identity covariance, so they are controls with a known mean. Linear controls are
    redundant with antithetic draws (``bar z = 0`` exactly, so every linear correction vanishes)
    and nearly so with scrambled-Sobol' draws; quadratic controls are not.

    Args:
        z: ``S x K`` whitened draws.

    Returns:
        ``S x (2K + K(K-1)/2)`` features.
    """
    rows, cols = torch.triu_indices(z.shape[-1], z.shape[-1], offset=1, device=z.device)
    return torch.cat([z, (z.square() - 1.0) / math.sqrt(2.0), z[:, rows] * z[:, cols]], dim=-1)


def _whiten(controls: Tensor, control_mean: Tensor | None, control_cov: Tensor) -> Tensor:
    """``(c - mu) L^{-T}`` with ``L L^T = control_cov``: ``S x K`` controls with identity covariance."""
    mu = _control_mean(controls, control_mean)
    cov = torch.as_tensor(control_cov, dtype=controls.dtype, device=controls.device)
    if cov.shape != (controls.shape[-1],) * 2:
        raise ValueError(
            f"`control_cov` must be {controls.shape[-1]} x {controls.shape[-1]}, but got {tuple(cov.shape)}."
        )
    chol, info = torch.linalg.cholesky_ex(cov)
    if info:
        raise ValueError(
            f"`control_cov` must be positive definite; its Cholesky failed at column {int(info)}."
        )
    return torch.linalg.solve_triangular(chol, (controls - mu).T, upper=False).T


def shrunk_mean(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
    *,
    shrink_per_control: float = SHRINK_PER_CONTROL,
) -> Tensor:
    r"""Control-variate mean with a known control covariance and shrinkage toward MC (default).

    With whitened controls ``w = L^{-1} (c - mu_c)`` (``L L^T = Sigma_c``, known):

    .. math::

        \hat h = \bar h - \kappa\, \hat\gamma^\top \bar w, \quad
        \hat\gamma = \frac{1}{S - 1} \sum_s w_s (h_s - \bar h), \quad
        \kappa = \frac{S - 1}{S - 1 + \lambda}, \quad \lambda = 4K.

    ``hat gamma`` is the paper's ``gamma = Sigma^{-1} Cov(c, h)`` (Eq. (4)) with the exact
    ``Sigma`` (for the GP score ``Cov(g) = H``; the identity in whitened coordinates), so no
    sample covariance is inverted, and ``kappa`` shrinks it toward naive MC, the limit
    ``S / K -> 0``. When the controls carry no information (``h`` independent of ``c``) the
    variance is exactly ``Var(mc) (1 + kappa^2 K / (S - 1))``, and
    ``kappa^2 K / (S - 1) <= K / (4 lambda) = 1/16`` for every ``S`` and ``K`` (as
    ``(S - 1 + lambda)^2 >= 4 (S - 1) lambda``). Any nonzero correction adds variance in that
    case, so a bounded excess is what "never worse than naive MC" can mean (docs/design.md,
    "Never worse than naive MC"). The correction weight is below ``1/5`` whenever ``S <= K``.

    Args:
        values: ``S x N`` values.
        controls: ``S x K`` controls.
        control_mean: ``K`` known control mean (zero when None).
        control_cov: ``K x K`` known control covariance (the identity for whitened GP draws).
            None: the sample covariance is used, i.e. :func:`orthogonal_mean` with
            ``ridge = shrink_per_control * K`` pseudo-samples.
        shrink_per_control: ``lambda / K``.

    Returns:
        ``N`` estimates.
    """
    _check(values, controls)
    n_draws, n_controls = controls.shape
    lam = shrink_per_control * n_controls
    if control_cov is None:
        return orthogonal_mean(values, controls, control_mean, ridge=lam)
    white = _whiten(controls, control_mean, control_cov)
    kappa = (n_draws - 1) / (n_draws - 1 + lam)
    # The estimate is linear in values: est = sum_s a_s h_s with a_s = 1/S - (b_s - mean b),
    # b = kappa / (S - 1) * W bar(w). One S-vector per call, no K x N coefficient matrix.
    b = (kappa / (n_draws - 1)) * (white @ white.mean(dim=0))
    weights = 1.0 / n_draws - (b - b.mean())
    return weights @ values


Estimator = Callable[[Tensor, Tensor, "Tensor | None", "Tensor | None"], Tensor]


def _mc(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
) -> Tensor:
    return mc_mean(values)


def _orth(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
) -> Tensor:
    return orthogonal_mean(values, controls, control_mean)


def _orth_ridge(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
) -> Tensor:
    return orthogonal_mean(values, controls, control_mean, ridge=float(controls.shape[-1]))


def _orth_crossfit(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
) -> Tensor:
    return crossfit_mean(values, controls, control_mean)


def _orth_quadratic(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
) -> Tensor:
    if control_cov is None:
        raise ValueError(
            "`orth-quadratic` needs Gaussian controls with a known covariance (`control_cov`), e.g. "
            "whitened GP hyperparameter draws; TPE bootstrap statistics have no known second moments."
        )
    features = quadratic_controls(_whiten(controls, control_mean, control_cov))
    return orthogonal_mean(values, features, None, ridge=float(features.shape[-1]))


def _orth_shrink(
    values: Tensor,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
) -> Tensor:
    return shrunk_mean(values, controls, control_mean, control_cov)


#: Estimators by name (the names are :data:`orthobench.config.names.ESTIMATORS`). Each maps
#: ``(values S x N, controls S x K, control_mean K | None, control_cov K x K | None)`` to ``N``
#: estimates; ``control_cov`` is used where stated. ``mc``: :func:`mc_mean`; ``orth``:
#: :func:`orthogonal_mean`, the paper's plug-in; ``orth-ridge``: the same with ``K``
#: pseudo-samples pulling ``gamma`` to zero in standardized control coordinates;
#: ``orth-crossfit``: :func:`crossfit_mean`; ``orth-quadratic``: :func:`quadratic_controls` of the
#: whitened draws, ridge as ``orth-ridge``; ``orth-shrink``: :func:`shrunk_mean` (without a known
#: covariance, ``orth-ridge`` with ``4K`` pseudo-samples). Every estimator is linear in each
#: candidate's values with draw weights that depend on the controls alone
#: (:func:`estimator_weights`), so callers may pass ``exp(log_ei - max_s log_ei)`` and add the
#: maximum back in log space (docs/design.md, "EI in log space"), and differentiable in the values
#: (the controls enter only through factorizations that need no gradient). Weighted rules are not
#: here: :func:`weighted_mean` takes a point set's weights, not controls.
ESTIMATORS: dict[str, Estimator] = {
    "mc": _mc,
    "orth": _orth,
    "orth-ridge": _orth_ridge,
    "orth-crossfit": _orth_crossfit,
    "orth-quadratic": _orth_quadratic,
    "orth-shrink": _orth_shrink,
}

#: The reduction used when none is named: ``orthobo-tpe``'s and
#: :class:`~orthobench.acquisition.MarginalLogEI`'s (why: :func:`shrunk_mean`). Not
#: ``orthobo``'s, which is the theta estimator
#: :data:`~orthobench.config.names.DEFAULT_THETA_ESTIMATOR`.
DEFAULT_CONTROL_VARIATE = names.DEFAULT_TPE_ESTIMATOR


def min_draws(name: str) -> int:
    """The fewest draws the estimator ``name`` of :data:`ESTIMATORS` takes: 1 for the mean, 4
    for cross-fitting (2 per fold), 2 for the other control-variate fits."""
    return {"mc": 1, "orth-crossfit": 4}.get(name, 2)


def get_estimator(name: str) -> Estimator:
    """Look up an estimator by name.

    Raises:
        UnknownNameError: listing the known names (field ``estimator``).
    """
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise UnknownNameError("estimator", name, tuple(ESTIMATORS), "estimator") from None


def estimator_weights(
    estimator: Estimator,
    controls: Tensor,
    control_mean: Tensor | None = None,
    control_cov: Tensor | None = None,
    *,
    chunk: int = 512,
) -> Tensor:
    r"""The ``S`` draw weights ``a`` of an estimator on these controls: ``est(values) = a^T values``.

    Every estimator here is linear in each candidate's values, with coefficients that depend on
    the controls alone, so ``a_s`` is the estimate for the indicator of draw ``s`` (the columns
    of the ``S x S`` identity, passed ``chunk`` at a time). Computed once per set of draws, it
    makes an estimate a weighted sum, as cheap as :func:`mc_mean`, for any number of candidates.

    Args:
        estimator: An estimator of :data:`ESTIMATORS` (or :func:`get_estimator`'s result).
        controls: ``S x K`` controls.
        control_mean, control_cov: As the estimator takes them.
        chunk: Identity columns per call (bounds the memory at ``S x chunk`` values).

    Returns:
        ``S`` weights (they sum to 1 for every estimator here: a constant is estimated exactly).

    Example:
        >>> z = torch.randn(64, 3, dtype=torch.float64)
        >>> values = torch.rand(64, 5, dtype=torch.float64)
        >>> a = estimator_weights(get_estimator("orth"), z)
        >>> bool(torch.allclose(a @ values, orthogonal_mean(values, z)))
        True
    """
    num_draws = controls.shape[0]
    weights = []
    for start in range(0, num_draws, chunk):
        columns = torch.arange(start, min(start + chunk, num_draws), device=controls.device)
        indicators = torch.zeros(
            num_draws, columns.numel(), dtype=controls.dtype, device=controls.device
        )
        indicators[columns, columns - start] = 1.0
        weights.append(estimator(indicators, controls, control_mean, control_cov))
    return torch.cat(weights)
