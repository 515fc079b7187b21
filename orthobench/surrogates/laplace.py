r"""The Laplace approximation ``q(theta) = N(theta_hat, H^{-1})`` of a GP's hyperparameters.

``theta`` is the log parameterization of :class:`~orthobench.surrogates.theta_algebra.ThetaLayout`
and ``H`` the Hessian of its unnormalized negative log posterior at the fitted MAP. The score
``g(theta) = grad log q(theta)`` is the control variate of the paper's estimators (Sec. 4.2). The
choices that fix ``q`` are listed at :func:`laplace_posterior`.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import torch
from botorch.models import SingleTaskGP
from botorch.utils.sampling import draw_sobol_normal_samples

from orthobench.config import names
from orthobench.diagnostics import LaplaceDiagnostics
from orthobench.exceptions import NumericsWarning
from orthobench.surrogates.theta_algebra import (
    ThetaLayout,
    get_theta,
    log_posterior,
    theta_layout,
)

THETA_SAMPLING = names.THETA_SAMPLING


def canonical_eigh(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.eigh`` of a symmetric ``k x k`` matrix with canonical eigenvector signs.

    An eigenvector's sign is arbitrary, and LAPACK builds (CPU) and cuSOLVER (CUDA) choose
    differently: the same whitened draws ``z`` would become different thetas on each. Each
    eigenvector's largest-magnitude entry is made positive (scikit-learn's ``svd_flip``
    convention), so the factors built from the result, and the thetas drawn through them, agree
    across solvers to rounding.

    Returns:
        Eigenvalues ascending (``k``) and the eigenvectors as columns (``k x k``).
    """
    evals, evecs = torch.linalg.eigh(matrix)
    largest = evecs.abs().argmax(dim=0, keepdim=True)
    return evals, evecs * evecs.gather(0, largest).sign()


@dataclass(frozen=True)
class LaplacePosterior:
    r"""``q(theta) = N(theta_hat, H^{-1})`` over a GP's unconstrained hyperparameters.

    Build it with :func:`laplace_posterior`. Whitened coordinates ``z ~ N(0, I_p)`` map to
    ``theta = theta_hat + A z`` with ``A = V diag(lambda)^{-1/2}`` (``H = V diag(lambda) V^T``),
    so ``A A^T = H^{-1}`` and the score is ``g = -H A z = -A^{-T} z``.

    Args:
        layout: The :class:`~orthobench.surrogates.theta_algebra.ThetaLayout` of theta.
        theta_hat: ``p`` centre of ``q``.
        hessian: ``p x p`` precision ``H`` after the eigenvalue floor.
        raw_eigenvalues: ``p`` eigenvalues of the Hessian before the floor (ascending).
        eig_floor: The floor applied to the eigenvalues (0: none, the raw Hessian is kept).
        theta_map: ``p`` the fitted value-space MAP, mapped to theta.
        newton_steps: Newton steps taken from ``theta_map`` to ``theta_hat``.
        fallback: ``None``, or what went wrong while re-centring (then ``theta_hat`` is the last
            accepted point).
        train_x, train_y: ``n x d`` inputs and ``n`` targets the posterior is of (the model's
            ``train_inputs[0]`` and ``train_targets``); None: not recorded.
    """

    layout: ThetaLayout
    theta_hat: torch.Tensor
    hessian: torch.Tensor
    raw_eigenvalues: torch.Tensor
    eig_floor: float
    theta_map: torch.Tensor
    newton_steps: int
    fallback: str | None = None
    train_x: torch.Tensor | None = None
    train_y: torch.Tensor | None = None

    def is_of(self, model: SingleTaskGP) -> bool:
        """Whether this is ``model``'s posterior: its layout, fitted hyperparameters and, where
        recorded, training data (a model that kept its hyperparameters over new data has
        another posterior)."""
        if self.layout != theta_layout(model) or not torch.allclose(
            self.theta_map, get_theta(model).to(self.theta_map)
        ):
            return False
        data = ((self.train_x, model.train_inputs[0]), (self.train_y, model.train_targets))
        return all(
            recorded is None
            or (recorded.shape == now.shape and torch.equal(recorded, now.detach().to(recorded)))
            for recorded, now in data
        )

    @property
    def p(self) -> int:
        return self.theta_hat.shape[-1]

    @property
    def floored(self) -> bool:
        """Whether any Hessian eigenvalue was raised to the floor.

        (docs/design.md, "Indefinite Hessians and the eigenvalue floor")
        """
        return bool((self.raw_eigenvalues < self.eig_floor).any())

    @property
    def indefinite(self) -> bool:
        """Whether the raw Hessian was not positive definite (a fallback).

        (docs/design.md, "Indefinite Hessians and the eigenvalue floor")
        """
        return bool(self.raw_eigenvalues[0] <= 0)

    @property
    def recenter_shift(self) -> float:
        """Euclidean distance between the fitted MAP and ``theta_hat`` in theta space."""
        return float((self.theta_hat - self.theta_map).norm())

    @functools.cached_property
    def _eigh(self) -> tuple[torch.Tensor, torch.Tensor]:
        # H is fixed once built: decompose it once, not on every theta() / whiten() call.
        return canonical_eigh(self.hessian)

    @property
    def cov_factor(self) -> torch.Tensor:
        """``p x p`` matrix ``A`` with ``A A^T = H^{-1}``."""
        evals, evecs = self._eigh
        return evecs * evals.rsqrt()

    def sample_whitened(self, n: int, method: str = "iid", *, seed: int) -> torch.Tensor:
        """Draw ``n x p`` whitened coordinates ``z`` with ``E[z] = 0`` and ``Cov(z) = I``.

        Args:
            n: Number of samples ``S``.
            method: ``"iid"`` (independent normals), ``"antithetic"`` (``n / 2`` iid draws
                interleaved with their negatives, ``z_1, -z_1, z_2, -z_2, ...``, so any
                contiguous block of pairs is independent of the others; ``n`` must be even) or
                ``"qmc"`` (scrambled Sobol points through the inverse normal CDF; powers of two
                keep the net balanced).
            seed: Seed of the draw (the only source of randomness).

        Returns:
            ``n x p`` samples on the device and dtype of ``theta_hat``.
        """
        if n < 1:
            raise ValueError(f"`n` must be positive, but got {n=}.")
        p, dtype, device = self.p, self.theta_hat.dtype, self.theta_hat.device
        if method == "iid":
            gen = torch.Generator(device="cpu").manual_seed(seed % (2**63 - 1))
            z = torch.randn(n, p, generator=gen, dtype=dtype)
        elif method == "antithetic":
            if n % 2:
                raise ValueError(
                    f"Antithetic sampling needs an even number of samples, but got {n=}."
                )
            gen = torch.Generator(device="cpu").manual_seed(seed % (2**63 - 1))
            half = torch.randn(n // 2, p, generator=gen, dtype=dtype)
            z = torch.stack([half, -half], dim=1).reshape(n, p)
        elif method == "qmc":
            z = draw_sobol_normal_samples(d=p, n=n, dtype=dtype, seed=seed % (2**31))
        else:
            raise ValueError(f"`method` must be one of {THETA_SAMPLING}, but got {method!r}.")
        return z.to(device)

    def theta(self, z: torch.Tensor) -> torch.Tensor:
        """Map ``S x p`` whitened ``z`` to ``S x p`` samples ``theta_hat + A z``."""
        return self.theta_hat + z @ self.cov_factor.T

    def whiten(self, theta: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`theta`: ``S x p`` -> ``S x p``, ``z = A^{-1} (theta - theta_hat)``."""
        evals, evecs = self._eigh
        return ((theta - self.theta_hat) @ evecs) * evals.sqrt()

    def score(self, theta: torch.Tensor) -> torch.Tensor:
        """``g(theta) = grad log q(theta) = -H (theta - theta_hat)``: ``S x p`` -> ``S x p``."""
        return -(theta - self.theta_hat) @ self.hessian

    def log_prob(self, theta: torch.Tensor) -> torch.Tensor:
        """``log q(theta)``: ``S x p`` -> ``S``."""
        diff = theta - self.theta_hat
        quad = ((diff @ self.hessian) * diff).sum(-1)
        logdet = torch.linalg.slogdet(self.hessian).logabsdet
        return -0.5 * quad + 0.5 * logdet - 0.5 * self.p * math.log(2.0 * math.pi)

    def info(self) -> dict[str, object]:
        """JSON-serializable :class:`~orthobench.diagnostics.LaplaceDiagnostics` (stored in the
        results)."""
        return LaplaceDiagnostics(
            eig_floored=self.floored,
            hessian_indefinite=self.indefinite,
            min_eigenvalue=float(self.raw_eigenvalues[0]),
            recenter_shift=self.recenter_shift,
            newton_steps=self.newton_steps,
            fallback=self.fallback,
        ).to_info()


def _neg_log_posterior(
    theta: torch.Tensor, layout: ThetaLayout, train_x: torch.Tensor, train_y: torch.Tensor
) -> torch.Tensor:
    return -log_posterior(theta.unsqueeze(0), layout, train_x, train_y).squeeze(0)


def neg_log_posterior_hessian(
    theta: torch.Tensor, layout: ThetaLayout, train_x: torch.Tensor, train_y: torch.Tensor
) -> torch.Tensor:
    """``p x p`` Hessian of the unnormalized negative log posterior of theta at ``theta`` (``p``).

    Autograd through the closed-form kernels (vectorized over the ``p`` rows).
    """
    hess = torch.autograd.functional.hessian(
        lambda t: _neg_log_posterior(t, layout, train_x, train_y), theta.detach(), vectorize=True
    )
    return 0.5 * (hess + hess.T)


def _precision(
    hess: torch.Tensor, floor: float, keep_raw: bool
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``(H, raw eigenvalues, floor applied)``: ``hess`` with its eigenvalues raised to ``floor``,
    or ``hess`` itself (floor 0) when ``keep_raw`` and it is positive definite."""
    evals, evecs = torch.linalg.eigh(hess)
    if keep_raw and bool(evals[0] > 0):
        return hess, evals, 0.0
    floored = (evecs * evals.clamp_min(floor)) @ evecs.T
    return 0.5 * (floored + floored.T), evals, floor


# Newton decrement (squared) below which re-centring has converged.
_NEWTON_TOL = 1e-10


def _newton_step(
    theta: torch.Tensor,
    hess: torch.Tensor,
    layout: ThetaLayout,
    train_x: torch.Tensor,
    train_y: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """``(value, gradient, Newton step, squared Newton decrement)`` of the negative log posterior
    at ``theta`` (``p``) with the precision ``hess`` (``p x p``)."""
    t = theta.clone().requires_grad_(True)
    value = _neg_log_posterior(t, layout, train_x, train_y)
    (grad,) = torch.autograd.grad(value, t)
    step = -torch.linalg.solve(hess, grad)
    return value.detach(), grad, step, float(-(grad * step).sum())


def laplace_posterior(
    model: SingleTaskGP,
    *,
    eig_floor: float | None = None,
    keep_raw: bool = False,
    recenter: bool = False,
    max_newton_steps: int = 20,
) -> LaplacePosterior:
    r"""The Laplace approximation ``q(theta) = N(theta_hat, H^{-1})`` of a fitted ``model``.

    .. math::

        q(\theta) = \mathcal{N}(\hat\theta, H^{-1}), \qquad
        H = -\nabla^2_\theta \log p(\theta \mid \mathcal{D}) \big|_{\hat\theta},

    on the unconstrained parameterization of
    :class:`~orthobench.surrogates.theta_algebra.ThetaLayout` (log of every positive parameter;
    docs/design.md, "Laplace posterior on log-parameters"), with the *unnormalized* log posterior
    ``log p(y | theta) + log p(theta)`` (not gpytorch's per-datum ``ExactMarginalLogLikelihood``;
    docs/design.md, "Unnormalized log posterior"). Its score (paper Sec. 4.2, the control variate
    of Eq. (17)) is

    .. math::

        g(\theta) = \nabla_\theta \log q(\theta) = -H (\theta - \hat\theta),
        \qquad \mathbb{E}_q[g] = 0, \quad \operatorname{Cov}_q(g) = H.

    Choices (each one changes the reported variances, so they are fixed and documented here):

    * **Jacobian.** ``log p(theta)`` is the prior *density of theta*, i.e. it includes
      ``log |d phi / d theta| = sum of the log coordinates``; BoTorch's ``LogNormal`` priors then
      become ``Normal`` priors on theta. The Jacobian is linear in theta, so it does not change
      ``H`` at a given point, only where the mode is.
    * **Centre.** By default ``theta_hat`` is the fitted MAP, the MAP fit's value-space (``phi``)
      optimum within BoTorch's lower bounds (noise >= 1e-4, lengthscale >= 0.025): the model
      every other optimizer uses. It is the stationary point of the value-space log posterior
      written in theta (no Jacobian), whose Hessian is the same ``H``, so ``q`` is the Laplace
      approximation of that function. It is *not* the mode of the theta density: there the theta
      gradient is ``+1`` per positive coordinate (more where a bound is active).
      ``recenter=True`` moves ``theta_hat`` to the theta-density mode by damped Newton steps and
      evaluates ``H`` there; the shift is recorded (``recenter_shift``). It is off by default
      because for lengthscales the data do not identify the theta mode is the prior's ``loc``
      rather than the value-space mode ``exp(loc - scale^2)``: a different model rather than an
      uncertainty around it (docs/design.md, "MAP objective and fit stationarity").
    * **Hessian.** Computed by autograd through the closed-form kernels of
      :func:`orthobench.surrogates.theta_algebra.kernel_matrix`; the autograd functions of
      gpytorch's isotropic RBF and Matern kernels have wrong second derivatives
      (docs/design.md, "Exact second derivatives"). Tested against finite differences of
      ``n * ExactMarginalLogLikelihood`` for every kernel.
    * **Eigenvalue floor.** Eigenvalues of ``H`` below ``eig_floor`` are raised to it and
      :attr:`LaplacePosterior.floored` records that. The default floor is the smallest prior
      precision ``min 1 / scale^2``: no direction of ``q`` is wider than the widest prior
      direction. It also binds for positive-definite Hessians where the likelihood curves the
      wrong way (e.g. unidentified ARD lengthscales), which is routine and only recorded. ``H``
      that is not positive definite at all is a fallback: :attr:`LaplacePosterior.indefinite`,
      warned about (docs/design.md, "Indefinite Hessians and the eigenvalue floor").
      ``keep_raw=True`` (the probe's ``laplace: unfloored``, for comparisons with the paper,
      which applies no floor) keeps the raw Hessian wherever it is positive definite
      (``eig_floor`` is then recorded as 0) and falls back to the floor, recorded and warned
      about, where it is not.

    Args:
        model: A GP from :func:`orthobench.surrogates.gp.build_gp`, MAP-fitted.
        eig_floor: Smallest eigenvalue of ``H``; ``None``: the smallest prior precision of the
            layout (``min 1 / scale^2``).
        keep_raw: Keep the raw Hessian where it is positive definite (no floor; the paper's
            ``q``); the floor is still the fallback for a Hessian that is not.
        recenter: Move ``theta_hat`` from the fitted value-space MAP to the mode of the theta
            density by damped Newton steps (see **Centre** above). ``False`` (default):
            ``theta_hat`` is the fitted MAP.
        max_newton_steps: Newton steps at most when re-centring; stopping there unconverged is
            a fallback (recorded and warned about).

    Returns:
        The :class:`LaplacePosterior`. A Hessian that is not positive definite or a failed
        re-centring is also warned about (:class:`~orthobench.exceptions.NumericsWarning`).
    """
    layout = theta_layout(model)
    train_x, train_y = model.train_inputs[0].detach(), model.train_targets.detach()
    if eig_floor is None:
        scales = torch.tensor(layout.prior_scale)
        eig_floor = float(scales[~scales.isnan()].square().reciprocal().min())
    if not eig_floor > 0:
        raise ValueError(f"`eig_floor` must be positive, but got {eig_floor=}.")
    theta_map = get_theta(model)
    theta, steps, fallback = theta_map.clone(), 0, None
    hess, raw, applied = _precision(
        neg_log_posterior_hessian(theta, layout, train_x, train_y), eig_floor, keep_raw
    )
    while recenter:
        value, grad, step, decrement = _newton_step(theta, hess, layout, train_x, train_y)
        if decrement < _NEWTON_TOL:
            break
        if steps >= max_newton_steps:
            fallback = (
                f"Newton re-centring stopped at {max_newton_steps=} (decrement {decrement:.3g}); "
                "kept the last point"
            )
            warnings.warn(f"Laplace: {fallback}.", NumericsWarning, stacklevel=2)
            break
        # A step of more than 2 in any log coordinate (a factor e^2) is not trusted in one go.
        step = step * min(1.0, 2.0 / float(step.abs().max()))
        accepted = False
        for _ in range(20):
            with torch.no_grad():
                candidate = _neg_log_posterior(theta + step, layout, train_x, train_y)
            if torch.isfinite(candidate) and candidate <= value - 1e-4 * float(
                -(grad * step).sum()
            ):
                accepted = True
                break
            step = 0.5 * step
        if not accepted:
            fallback = f"Newton re-centring stalled after {steps} step(s) (decrement {decrement:.3g}); kept the last point"
            warnings.warn(f"Laplace: {fallback}.", NumericsWarning, stacklevel=2)
            break
        theta = (theta + step).detach()
        steps += 1
        hess, raw, applied = _precision(
            neg_log_posterior_hessian(theta, layout, train_x, train_y), eig_floor, keep_raw
        )
    if bool(raw[0] <= 0):
        warnings.warn(
            f"Laplace: the Hessian is not positive definite (eigenvalues {raw[raw <= 0].tolist()}); "
            f"eigenvalues below {eig_floor:.3g} were raised to it.",
            NumericsWarning,
            stacklevel=2,
        )
    return LaplacePosterior(
        layout=layout,
        theta_hat=theta,
        hessian=hess,
        raw_eigenvalues=raw,
        eig_floor=applied,
        theta_map=theta_map,
        newton_steps=steps,
        fallback=fallback,
        train_x=train_x,
        train_y=train_y,
    )
