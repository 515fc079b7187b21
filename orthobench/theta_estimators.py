r"""Estimators of the marginal EI ``E_q[EI(x; theta)]`` by name: draws, weights and ``+rb``.

A name ``<base>[+rb][@<sampling>]`` (grammar and parser in the torch-free
:mod:`orthobench.config.names`) says how the whitened draws of ``theta`` are made and how the
``S x N`` per-draw values are reduced to ``N`` estimates of paper Eq. (3) (:func:`draw_thetas`,
:func:`estimate`), and whether the GP's constant mean is integrated out in closed form
(:func:`constant_mean_conditional`; docs/design.md, "Rao-Blackwellization over the constant
mean").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from botorch.models import SingleTaskGP
from torch import Tensor

from orthobench.config.names import (
    DEFAULT_THETA_ESTIMATOR,
    RB_SUFFIX,
    ThetaEstimator,
    parse_theta_estimator,
)
from orthobench.estimators import get_estimator, weighted_mean
from orthobench.exceptions import OrthobenchWarning
from orthobench.pointsets import point_set
from orthobench.surrogates.laplace import LaplacePosterior, canonical_eigh
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

__all__ = [
    "DEFAULT_THETA_ESTIMATOR",
    "RB_SUFFIX",
    "ThetaDraws",
    "ThetaEstimator",
    "constant_mean_conditional",
    "draw_thetas",
    "estimate",
    "parse_theta_estimator",
]


def constant_mean_conditional(laplace: LaplacePosterior) -> tuple[Tensor, float]:
    r"""``(A_rb, v_c)``: ``theta = theta_hat + A_rb z'`` (``z'`` in ``p - 1`` dims), ``m | phi ~ N(., v_c)``.

    Rao-Blackwellization over the constant mean. Write ``theta = (m, phi)`` with ``m`` the GP's
    constant mean (standardized outcome scale) and ``phi`` the other coordinates, and
    ``q = N(theta_hat, H^{-1})``. Two facts:

    1. *The GP is affine in m.* With ``K_phi`` the noisy training covariance and
       ``k_phi(x) = k_phi(x, X)``,

       .. math::

           \mu(x; m, \phi) = m + k_\phi(x)^\top K_\phi^{-1} (y - m \mathbf 1)
                         = \mu_0(x; \phi) + m\, a(x; \phi), \qquad
           a(x; \phi) = 1 - k_\phi(x)^\top K_\phi^{-1} \mathbf 1,

       and :math:`\sigma^2(x; \phi) = k_\phi(x, x) - k_\phi(x)^\top K_\phi^{-1} k_\phi(x)` does
       not involve ``m``.
    2. *Under q, m given phi is Gaussian* (the conditional of a Gaussian, read off the precision):

       .. math::

           m \mid \phi \sim \mathcal N\big(\bar m(\phi), v_c\big), \quad
           \bar m(\phi) = \hat m - H_{mm}^{-1} H_{m\phi} (\phi - \hat\phi), \quad
           v_c = H_{mm}^{-1}, \qquad
           \phi \sim \mathcal N\big(\hat\phi, S_\phi^{-1}\big), \quad
           S_\phi = H_{\phi\phi} - H_{\phi m} H_{mm}^{-1} H_{m\phi}.

    EI is an expectation over ``f(x)``: :math:`\mathrm{EI}(x; m, \phi) = \mathbb E[(f - f^*)_+
    \mid m, \phi]` with :math:`f \mid m, \phi \sim \mathcal N(\mu_0 + m a, \sigma^2)`. Mixing the
    mean over :math:`m \sim \mathcal N(\bar m, v_c)` gives :math:`f \mid \phi \sim \mathcal
    N(\mu_0 + \bar m a, \sigma^2 + v_c a^2)` (``f = mu_0 + m a + sigma eps`` with
    ``eps ~ N(0, 1)`` independent of ``m``), so by the tower rule

    .. math::

        \mathrm{EI}_{\mathrm{RB}}(x; \phi) = \mathbb E_{m \mid \phi}[\mathrm{EI}(x; m, \phi)]
        = s\, h\Big(\frac{\bar\mu - f^*}{s}\Big), \quad
        \bar\mu = \mu(x; \bar m(\phi), \phi), \quad s^2 = \sigma^2(x; \phi) + v_c\, a(x; \phi)^2,

    with :math:`h(u) = u \Phi(u) + \varphi(u)`: EI of a Gaussian whose variance is inflated by the
    conditional variance of the mean shift ``(m - bar m) a``. Then
    :math:`\mathbb E_q[\mathrm{EI}] = \mathbb E_\phi[\mathrm{EI}_{\mathrm{RB}}(x; \phi)]` exactly,
    so an unbiased rule over ``phi`` stays unbiased, and :math:`\mathrm{Var}(\mathrm{EI}_{\mathrm{RB}})
    = \mathrm{Var}(\mathrm{EI}) - \mathbb E[\mathrm{Var}(\mathrm{EI} \mid \phi)]` is never larger
    (Rao-Blackwell). It costs one more column in the batched GP algebra (``K^{-1} 1``), not more
    EI evaluations. The conditional is that of ``q``, so the target stays ``E_q[EI]`` (the exact
    posterior's ``m | phi`` is Gaussian too under the flat prior, but with a ``phi``-dependent
    variance: a different target).

    Draws: with ``z' ~ N(0, I_{p-1})`` and ``B = V Lambda^{-1/2}`` from ``S_phi = V Lambda V^T``
    (eigenvalues ascending, so column 0 is the widest direction of ``phi``; signs canonical,
    :func:`~orthobench.surrogates.laplace.canonical_eigh`, so every solver gives the same draws),
    ``phi = phi_hat + B z'`` and ``m = bar m(phi)``, i.e. ``theta = theta_hat + A_rb z'`` with the
    rows ``A_rb[phi] = B`` and ``A_rb[m] = -H_mphi B / H_mm``; ``A_rb A_rb^T + v_c e_m e_m^T =
    H^{-1}``. :class:`~orthobench.surrogates.theta_sampled_gp.ThetaSampledGP` with
    ``constant_mean_variance = v_c`` evaluates ``EI_RB`` (and its gradient in ``x``) batched.

    Args:
        laplace: The Laplace posterior ``q``; its layout must have a constant mean.

    Returns:
        ``A_rb`` (``p x (p - 1)``) and ``v_c = 1 / H_mm``.
    """
    if "mean" not in laplace.layout.names:
        raise ValueError(f"The layout has no constant mean: {laplace.layout.names}.")
    i = laplace.layout.names.index("mean")
    rest = [j for j in range(laplace.p) if j != i]
    hess = laplace.hessian
    h_mm, h_rm = hess[i, i], hess[rest, i]  # scalar, p - 1
    schur = hess[rest][:, rest] - torch.outer(h_rm, h_rm) / h_mm
    evals, evecs = canonical_eigh(0.5 * (schur + schur.T))
    b = evecs * evals.rsqrt()  # (p-1) x (p-1), B B^T = S_phi^{-1}
    factor = torch.empty(laplace.p, laplace.p - 1, dtype=hess.dtype, device=hess.device)
    factor[rest] = b
    factor[i] = -(h_rm @ b) / h_mm
    return factor, float(1.0 / h_mm)


@dataclass(frozen=True)
class ThetaDraws:
    r"""Hyperparameter draws of one estimator for one BO state.

    Attributes:
        estimator: The parsed estimator.
        z: ``S x k`` whitened coordinates (``k = p``, or ``p - 1`` with RB): the controls.
        theta: ``S x p`` hyperparameters (with RB, the constant mean at ``bar m(phi)``).
        weights: ``S`` rule weights (point sets), or ``None`` for equal-weight draws.
        constant_mean_variance: ``v_c`` with RB, else 0.
    """

    estimator: ThetaEstimator
    z: Tensor
    theta: Tensor
    weights: Tensor | None
    constant_mean_variance: float

    @property
    def n_evaluations(self) -> int:
        """``S``: EI evaluations (one per draw) behind an estimate."""
        return self.theta.shape[0]

    def gp(self, model: SingleTaskGP, best_f: float | None = None) -> ThetaSampledGP:
        """The model under these draws (constant mean integrated out with RB; ``best_f``: EI's
        incumbent on the model's standardized scale, None: its largest target)."""
        return ThetaSampledGP.from_model(
            model, self.theta, constant_mean_variance=self.constant_mean_variance, best_f=best_f
        )


def draw_thetas(
    laplace: LaplacePosterior, estimator: ThetaEstimator | str, n_evaluations: int, *, seed: int
) -> ThetaDraws:
    """Draw the hyperparameters of ``estimator`` within a budget of ``n_evaluations``.

    A base of :data:`orthobench.estimators.ESTIMATORS` draws exactly ``n_evaluations``
    equal-weight whitened draws by its ``@sampling`` (``iid``, ``antithetic`` or ``qmc``:
    :meth:`LaplacePosterior.sample_whitened
    <orthobench.surrogates.laplace.LaplacePosterior.sample_whitened>`; with ``+rb`` their first
    ``p - 1`` coordinates, so RB and plain draws of one seed share them). A base of
    :data:`orthobench.pointsets.POINT_SETS` draws that rule with a generator seeded by ``seed``,
    with the largest number of points it allows within the budget
    (:func:`~orthobench.pointsets.point_count`): compare it with naive MC at that count, not at
    the budget. With ``+rb`` the draws are of ``phi`` and the constant mean sits at its
    conditional mean (:func:`constant_mean_conditional`). Whitened coordinates are ordered from
    the widest direction of ``q`` (of ``phi`` given ``m`` with ``+rb``) to the narrowest, so
    ``qmc-owen-line`` integrates the widest direction out of each draw.

    Args:
        laplace: The Laplace posterior ``q``.
        estimator: A name or a parsed :class:`ThetaEstimator`.
        n_evaluations: Budget of EI evaluations.
        seed: The only source of randomness.

    Returns:
        The :class:`ThetaDraws`; read the real count from ``n_evaluations``.
    """
    if isinstance(estimator, str):
        estimator = parse_theta_estimator(estimator)
    dims = laplace.p - 1 if estimator.rb else laplace.p
    dtype, device = laplace.theta_hat.dtype, laplace.theta_hat.device
    weights = None
    if estimator.point_set:
        gen = torch.Generator(device="cpu").manual_seed(seed % (2**63 - 1))
        rule = point_set(estimator.base, dims, n_evaluations, gen, dtype=dtype, device=device)
        z, weights = rule.z, rule.weights
    else:
        z = laplace.sample_whitened(n_evaluations, estimator.sampling, seed=seed)[:, :dims]
    if estimator.rb:
        factor, variance = constant_mean_conditional(laplace)
        theta = laplace.theta_hat + z @ factor.T
    else:
        theta, variance = laplace.theta(z), 0.0
    return ThetaDraws(estimator, z, theta, weights, variance)


def require_equal_weights(weights: Tensor | None, estimator: str) -> None:
    """Refuse a point set with unequal ``weights`` (None: equal-weight draws) where draws of
    several GPs are paired by index (constrained EI): its rule holds in one GP's space, and
    pairing its points with another GP's does not keep the weights.

    Raises:
        ValueError: naming ``estimator``.
    """
    if weights is not None and not torch.allclose(weights, weights.mean().expand_as(weights)):
        raise ValueError(
            f"estimator {estimator!r} weights its points unequally: on a constrained task "
            "use equal-weight draws (a control-variate estimator, or qmc-owen)."
        )


def require_equal_weight_rule(estimator: ThetaEstimator) -> None:
    """Refuse, before any draw, a point set ``estimator`` whose rule weighs its points unequally
    (:func:`require_equal_weights`, where the draws are made): a rule's weights have one form
    whatever its dimension, so a small rule tells. A constrained task's cell refused it only
    at its first BO step, after the initial design.

    Raises:
        ValueError: naming ``estimator``.
    """
    if not estimator.point_set:
        return
    with warnings.catch_warnings():  # the smallest budget may take one whole rule beyond it
        warnings.simplefilter("ignore", OrthobenchWarning)
        rule = point_set(estimator.base, 2, 64, torch.Generator().manual_seed(0))
    require_equal_weights(rule.weights, estimator.name)


def estimate(values: Tensor, draws: ThetaDraws, estimator: ThetaEstimator | None = None) -> Tensor:
    """Reduce ``S x N`` per-draw values to ``N`` estimates.

    Point sets: :func:`~orthobench.estimators.weighted_mean` with the rule's weights. Otherwise the
    ``ESTIMATORS`` entry of ``estimator.base`` (default: the draws' own), with the whitened draws
    as controls (known mean 0, covariance I); several such estimators may share one draw.
    """
    estimator = draws.estimator if estimator is None else estimator
    if values.shape[0] != draws.n_evaluations:
        raise ValueError(
            f"`values` must have one row per draw ({draws.n_evaluations}), but got {tuple(values.shape)}."
        )
    if estimator.point_set:
        if draws.weights is None or estimator.base != draws.estimator.base:
            raise ValueError(
                f"Point set {estimator.name!r} needs its own draws, but got those of {draws.estimator.name!r}."
            )
        return weighted_mean(values, draws.weights)
    if draws.weights is not None:
        raise ValueError(
            f"{estimator.name!r} needs equal-weight draws, but got the rule {draws.estimator.name!r}."
        )
    eye = torch.eye(draws.z.shape[-1], dtype=values.dtype, device=values.device)
    return get_estimator(estimator.base)(values, draws.z, None, eye)
