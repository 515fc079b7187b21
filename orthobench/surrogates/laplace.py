r"""Laplace approximation over GP hyperparameters and the GP evaluated under its samples.

For a GP fitted by :func:`orthobench.surrogates.gp.fit_gp`, the hyperparameter posterior is
approximated by

.. math::

    q(\theta) = \mathcal{N}(\hat\theta, H^{-1}), \qquad
    H = -\nabla^2_\theta \log p(\theta \mid \mathcal{D}) \big|_{\hat\theta},

on the unconstrained parameterization of :class:`~orthobench.surrogates.gp.ThetaLayout` (log of
every positive parameter; docs/design.md, "Laplace posterior on log-parameters"), with the
*unnormalized* log posterior ``log p(y | theta) + log p(theta)`` (not gpytorch's per-datum
``ExactMarginalLogLikelihood``; docs/design.md, "Unnormalized log posterior"). Its score (paper
Sec. 4.2, the control variate of Eq. (17)) is

.. math::

    g(\theta) = \nabla_\theta \log q(\theta) = -H (\theta - \hat\theta),
    \qquad \mathbb{E}_q[g] = 0, \quad \operatorname{Cov}_q(g) = H.

Choices (each one changes the reported variances, so they are fixed and documented here):

* **Jacobian.** ``log p(theta)`` is the prior *density of theta*, i.e. it includes
  ``log |d phi / d theta| = sum of the log coordinates``; BoTorch's ``LogNormal`` priors then
  become ``Normal`` priors on theta. The Jacobian is linear in theta, so it does not change
  ``H`` at a given point, only where the mode is.
* **Centre.** By default ``theta_hat`` is the fitted MAP, ``fit_gp``'s value-space (``phi``)
  optimum within BoTorch's lower bounds (noise >= 1e-4, lengthscale >= 0.025): the model every
  other optimizer uses. It is the stationary point of the value-space log posterior written in
  theta (no Jacobian), whose Hessian is the same ``H``, so ``q`` is the Laplace approximation of
  that function. It is *not* the mode of the theta density: there the theta gradient is ``+1``
  per positive coordinate (more where a bound is active). ``recenter=True`` moves ``theta_hat``
  to the theta-density mode by damped Newton steps and evaluates ``H`` there; the shift is
  recorded (``recenter_shift``). It is off by default because for lengthscales the data do not
  identify the theta mode is the prior's ``loc`` rather than the value-space mode
  ``exp(loc - scale^2)``: on Levy16 with 8 points the ARD lengthscales move from about 0.8 to
  about 17 (a shift of 11.7 in theta), a different model rather than an uncertainty around it.
* **Hessian.** Computed by autograd through the closed-form kernels of
  :func:`orthobench.surrogates.gp.kernel_matrix`; the autograd functions of gpytorch's isotropic
  RBF and Matern kernels have wrong second derivatives
  (docs/design.md, "Exact second derivatives"). Tested against finite differences of
  ``n * ExactMarginalLogLikelihood`` for every kernel.
* **Eigenvalue floor.** Eigenvalues of ``H`` below ``eig_floor`` are raised to it and
  :attr:`LaplacePosterior.floored` records that. The default floor is the smallest prior
  precision ``min 1 / scale^2``: no direction of ``q`` is wider than the widest prior direction.
  It also binds for positive-definite Hessians where the likelihood curves the wrong way (e.g.
  unidentified ARD lengthscales on Hartmann6 with 32 points: eigenvalue 0.16 < 1/3), which is
  routine and only recorded. ``H`` that is not positive definite at all is a fallback:
  :attr:`LaplacePosterior.indefinite`, warned about
  (docs/design.md, "Indefinite Hessians and the eigenvalue floor"). ``keep_raw=True`` (the
  probe's ``laplace: unfloored``, for comparisons with the paper, which applies no floor) keeps
  the raw Hessian wherever it is positive definite (``eig_floor`` is then recorded as 0) and
  falls back to the floor, recorded and warned about, where it is not.

:class:`ThetaSampledGP` evaluates the GP's marginal posteriors
(docs/design.md, "Marginal posteriors only") under ``S`` fixed theta samples in one batch (no
Python loop over samples), with the Cholesky factor of each sample computed once, and log-EI from
BoTorch's ``_log_ei_helper`` (docs/design.md, "EI in log space").

References:
    .. [Ament2023logei] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import torch
from botorch.acquisition.analytic import _log_ei_helper
from botorch.models import SingleTaskGP
from botorch.utils.sampling import draw_sobol_normal_samples

from orthobench.config import names
from orthobench.exceptions import ModelFittingError, NumericsWarning
from orthobench.surrogates.gp import (
    SQRT5,
    GPHyperparameters,
    ThetaLayout,
    get_theta,
    kernel_matrix,
    log_posterior,
    scaled_sq_dist,
    theta_layout,
    unpack_theta,
)

THETA_SAMPLING = names.THETA_SAMPLING

# Posterior variances below this are clamped, as in BoTorch's analytic acquisitions.
_MIN_VARIANCE = 1e-12
# Relative jitters tried, in order, for a theta sample whose kernel matrix is not numerically PD.
_JITTERS = (1e-8, 1e-6, 1e-4)
# On the CPU the kernel matrices and the marginal moments are computed in blocks of draws that
# hold about this many entries (1 MiB in float64, a core's L2 cache; see _draw_block).
_BLOCK_ENTRIES = 2**17
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class LaplacePosterior:
    r"""``q(theta) = N(theta_hat, H^{-1})`` over a GP's unconstrained hyperparameters.

    Build it with :func:`laplace_posterior`. Whitened coordinates ``z ~ N(0, I_p)`` map to
    ``theta = theta_hat + A z`` with ``A = V diag(lambda)^{-1/2}`` (``H = V diag(lambda) V^T``),
    so ``A A^T = H^{-1}`` and the score is ``g = -H A z = -A^{-T} z``.

    Args:
        layout: The :class:`~orthobench.surrogates.gp.ThetaLayout` of theta.
        theta_hat: ``p`` centre of ``q``.
        hessian: ``p x p`` precision ``H`` after the eigenvalue floor.
        raw_eigenvalues: ``p`` eigenvalues of the Hessian before the floor (ascending).
        eig_floor: The floor applied to the eigenvalues (0: none, the raw Hessian is kept).
        theta_map: ``p`` the fitted value-space MAP, mapped to theta.
        newton_steps: Newton steps taken from ``theta_map`` to ``theta_hat``.
        fallback: ``None``, or what went wrong while re-centring (then ``theta_hat`` is the last
            accepted point).
    """

    layout: ThetaLayout
    theta_hat: torch.Tensor
    hessian: torch.Tensor
    raw_eigenvalues: torch.Tensor
    eig_floor: float
    theta_map: torch.Tensor
    newton_steps: int
    fallback: str | None = None

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
        evals, evecs = torch.linalg.eigh(self.hessian)
        # An eigenvector's sign is arbitrary, and LAPACK (CPU) and cuSOLVER (CUDA) choose
        # differently: the same whitened draws z would become different thetas on each device.
        # Each eigenvector's largest-magnitude entry is made positive (scikit-learn's svd_flip
        # convention), so a posterior moved to another device draws the same thetas to rounding.
        largest = evecs.abs().argmax(dim=0, keepdim=True)
        return evals, evecs * evecs.gather(0, largest).sign()

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
        """JSON-serializable diagnostics (stored in the results)."""
        return {
            "eig_floored": self.floored,
            "hessian_indefinite": self.indefinite,
            "min_eigenvalue": float(self.raw_eigenvalues[0]),
            "recenter_shift": self.recenter_shift,
            "newton_steps": self.newton_steps,
            "fallback": self.fallback,
        }


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


def laplace_posterior(
    model: SingleTaskGP,
    *,
    eig_floor: float | None = None,
    keep_raw: bool = False,
    recenter: bool = False,
    max_newton_steps: int = 20,
) -> LaplacePosterior:
    """The Laplace approximation ``q(theta) = N(theta_hat, H^{-1})`` of a fitted ``model``.

    Args:
        model: A GP from :func:`orthobench.surrogates.gp.build_gp`, MAP-fitted.
        eig_floor: Smallest eigenvalue of ``H``; ``None``: the smallest prior precision of the
            layout (``min 1 / scale^2``).
        keep_raw: Keep the raw Hessian where it is positive definite (no floor; the paper's
            ``q``); the floor is still the fallback for a Hessian that is not.
        recenter: Move ``theta_hat`` from the fitted value-space MAP to the mode of the theta
            density by damped Newton steps (see the module notes). ``False`` (default):
            ``theta_hat`` is the fitted MAP.
        max_newton_steps: Newton steps at most when re-centring.

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
    while recenter and steps < max_newton_steps:
        t = theta.clone().requires_grad_(True)
        value = _neg_log_posterior(t, layout, train_x, train_y)
        (grad,) = torch.autograd.grad(value, t)
        step = -torch.linalg.solve(hess, grad)
        decrement = float(-(grad * step).sum())  # Newton decrement squared
        if decrement < 1e-10:
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
    )


def _cholesky_with_jitter(k: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Batched Cholesky of ``S x n x n``; samples that fail get growing relative jitter.

    Returns the factors and the number of samples that needed jitter.

    Raises:
        ModelFittingError: if a sample is not PD even with the largest jitter.
    """
    chol, info = torch.linalg.cholesky_ex(k)
    failed = info > 0
    n_jittered = int(failed.sum())
    if n_jittered:
        eye = torch.eye(k.shape[-1], dtype=k.dtype, device=k.device)
        scale = k.diagonal(dim1=-2, dim2=-1).mean(-1)
        for jitter in _JITTERS:
            idx = failed.nonzero().squeeze(-1)
            retry, info_retry = torch.linalg.cholesky_ex(
                k[idx] + (jitter * scale[idx])[:, None, None] * eye
            )
            chol[idx] = retry
            failed[idx] = info_retry > 0
            if not failed.any():
                break
        if failed.any():
            raise ModelFittingError(
                f"{int(failed.sum())} theta sample(s) give a kernel matrix that is not positive definite "
                f"even with relative jitter {_JITTERS[-1]}."
            )
        warnings.warn(
            f"{n_jittered} theta sample(s) needed jitter for their Cholesky factor.",
            NumericsWarning,
            stacklevel=3,
        )
    return chol, n_jittered


def _draw_block(num_draws: int, entries_per_draw: int, device: torch.device) -> int:
    """Draws per block for work of ``entries_per_draw`` tensor entries per draw.

    About ``_BLOCK_ENTRIES`` entries, in multiples of 8 draws (at least 8): MKL's GEMM then rounds
    a block's rows as it rounds them in one GEMM over all draws, so blocks change no value. On a
    GPU one block (each block costs kernel launches).
    """
    if device.type != "cpu":
        return num_draws
    return max(8, _BLOCK_ENTRIES // entries_per_draw // 8 * 8)


def _draw_rows(hp: GPHyperparameters, rows: slice) -> GPHyperparameters:
    """The hyperparameters of the draws ``rows``."""
    return GPHyperparameters(
        mean=hp.mean[rows],
        noise=hp.noise[rows],
        kernel=hp.kernel[rows],
        outputscale=hp.outputscale[rows],
        kernel_name=hp.kernel_name,
    )


def _stationary_projections(
    x: torch.Tensor, gp: ThetaSampledGP, keep_for_backward: bool
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """``c P`` for an RBF or Matern-5/2 kernel, computed in blocks of draws that stay in cache.

    Returns the ``S x b x (n + 1)`` (``n + 2`` with a mean slope) projections ``[w | ...]``, the
    ``S x b`` squared norms ``||w||^2`` and, with ``keep_for_backward``, what
    :class:`_MarginalMoments`' backward needs: ``(c,)`` (RBF) or ``(u, e^u)`` (Matern), each
    ``S x b x n``.

    Why blocks (on the CPU): ``P`` holds ``S n (n + 1)`` entries (5 MiB at ``S = 512``,
    ``n = 34``), the correlations ``S b n``; whole-tensor passes stream both through memory
    several times per call, while a block's correlations and rows of ``P`` are made and used in
    cache (about 3x faster raw-sample scoring at ``n = 100``). Each entry goes through the same
    operations as in whole-tensor passes, so the blocks change no value. On a GPU one block (each
    block costs kernel launches).
    """
    hp, proj_matrix = gp.hp, gp._forward_proj
    r2 = scaled_sq_dist(hp, x, gp.train_x)  # S x b x n; becomes c (RBF) or u (Matern) in place
    num_draws, b, n = r2.shape
    proj = torch.empty(num_draws, b, proj_matrix.shape[-1], dtype=r2.dtype, device=r2.device)
    white_sq_norm = torch.empty(num_draws, b, dtype=r2.dtype, device=r2.device)
    rbf = hp.kernel_name.startswith("rbf")
    decay = None if rbf or not keep_for_backward else torch.empty_like(r2)
    one = torch.ones((), dtype=r2.dtype, device=r2.device)
    block = _draw_block(num_draws, n * (b + proj_matrix.shape[-1]), r2.device)
    for start in range(0, num_draws, block):
        rows = slice(start, start + block)
        if rbf:
            corr = r2[rows].mul_(-0.5).exp_()
        else:
            u = r2[rows].sqrt_().mul_(-SQRT5)
            block_decay = u.exp() if decay is None else torch.exp(u, out=decay[rows])
            # (1 + u (u - 3) / 3) e^u with u = -sqrt5 r.
            corr = torch.addcmul(one, u, u - 3.0, value=1.0 / 3.0).mul_(block_decay)
        white = torch.bmm(corr, proj_matrix[rows], out=proj[rows])[..., :n]
        torch.linalg.vecdot(white, white, out=white_sq_norm[rows])
    if not keep_for_backward:
        return proj, white_sq_norm, ()
    return proj, white_sq_norm, (r2,) if rbf else (r2, decay)


class _MarginalMoments(torch.autograd.Function):
    r"""``x`` (``b x d``) -> marginal means and variances (two ``S x b``) with a hand-written backward.

    With ``c`` the kernel's correlation part (outputscale ``o`` folded into the projections
    ``P = o [L^{-T} | alpha]`` and ``Q = o [L^{-1}; alpha^T]``), ``[w | mu - m] = c P`` and
    ``var = k(x, x) - ||w||^2``. Backward: ``d/dc = [-2 w g_var | g_mu] Q`` (one batched GEMM),
    then the correlation's derivative in ``r^2`` and ``d r^2 / d x_b = 2 Lambda^{-1} (x_b - x_j)``
    (one GEMM): a few passes over ``S x b x n`` where autograd takes a few dozen. The forward
    evaluates Matern-5/2 as ``(1 + u (u - 3) / 3) e^u`` with ``u = -sqrt5 r``, in place. Checked by
    ``gradcheck``; hyperparameters are fixed, so no gradient flows to theta.

    With ``gp.constant_mean_variance = v_c > 0`` the projections carry one more column,
    ``o K^{-1} 1``, giving the slope ``a = d mu / d m = 1 - k(x, X) K^{-1} 1`` of the mean in the
    constant mean, and the variance returned is ``var + v_c a^2`` (the constant mean integrated
    out; see :class:`ThetaSampledGP`). Its backward adds ``-2 v_c a g_var`` on that column.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, gp: ThetaSampledGP) -> tuple[torch.Tensor, torch.Tensor]:
        hp, train_x, n = gp.hp, gp.train_x, gp.train_x.shape[0]
        if hp.kernel_name == "linear":
            corr = (x @ train_x.T).expand(hp.mean.shape[0], -1, -1)
            prior = (hp.kernel[:, 0] * hp.outputscale)[:, None] * x.square().sum(-1)
            proj = torch.bmm(corr, gp._forward_proj)  # S x b x (n + 1), (n + 2) with a slope
            white_sq_norm = torch.linalg.vecdot(proj[..., :n], proj[..., :n])
            saved: tuple[torch.Tensor, ...] = ()
        else:
            proj, white_sq_norm, saved = _stationary_projections(x, gp, ctx.needs_input_grad[0])
            prior = hp.outputscale[:, None].expand(-1, x.shape[0])
        white = proj[..., :n]
        mean = hp.mean[:, None] + proj[..., n]
        raw_var = prior - white_sq_norm
        var = raw_var.clamp_min(_MIN_VARIANCE)
        # Rao-Blackwellized over the constant mean: + v_c a(x)^2, a = 1 - k(x, X) K^{-1} 1.
        slope = 1.0 - proj[..., n + 1] if gp.constant_mean_variance else None
        if slope is not None:
            var = var + gp.constant_mean_variance * slope.square()
        ctx.gp = gp
        ctx.save_for_backward(
            x, white, raw_var > _MIN_VARIANCE, *(() if slope is None else (slope,)), *saved
        )
        return mean, var

    @staticmethod
    def backward(ctx, grad_mean: torch.Tensor, grad_var: torch.Tensor) -> tuple[torch.Tensor, None]:
        gp = ctx.gp
        x, white, unclamped, *saved = ctx.saved_tensors
        hp, train_x, n = gp.hp, gp.train_x, white.shape[-1]
        # [-2 w g_var | g_mu | -2 v_c a g_var], written in place rather than concatenated.
        grad_proj = white.new_empty(*white.shape[:2], gp._backward_proj.shape[-2])
        grad_proj[..., n] = grad_mean
        if gp.constant_mean_variance:
            slope, *saved = saved
            # d var / d proj[n + 1] = -2 v_c a: the mean-slope column of Q carries it back.
            grad_proj[..., n + 1] = -2.0 * gp.constant_mean_variance * slope * grad_var
        grad_var = grad_var * unclamped
        torch.mul(white, (-2.0 * grad_var).unsqueeze(-1), out=grad_proj[..., :n])
        grad_corr = torch.bmm(grad_proj, gp._backward_proj)  # S x b x n
        if hp.kernel_name == "linear":
            grad_x = (
                (grad_corr.reshape(-1, grad_corr.shape[-1]) @ train_x)
                .reshape(*grad_corr.shape[:2], -1)
                .sum(0)
            )
            # The prior variance v o ||x||^2 depends on x too.
            coef = hp.kernel[:, 0] * hp.outputscale
            return grad_x + 2.0 * x * (grad_var * coef[:, None]).sum(0).unsqueeze(-1), None
        # The correlation's derivative in r^2 is c'(r^2) = scale * g, the scale folded in last.
        if hp.kernel_name.startswith("rbf"):
            (corr,) = saved
            grad_r2, scale = grad_corr.mul_(corr), -0.5
        else:
            u, decay = saved
            # d/d(r^2) of (1 + sqrt5 r + 5/3 r^2) e^{-sqrt5 r} = -5/6 (1 + sqrt5 r) e^{-sqrt5 r}.
            grad_r2, scale = grad_corr.mul_(torch.sub(1.0, u).mul_(decay)), -5.0 / 6.0
        # With A = grad_r2 and d r^2_{sbj} / d x_{bk} = 2 (x_{bk} - X_{jk}) Lambda^{-1}_{sk}:
        # grad_x_{bk} = 2 sum_j (x_{bk} - X_{jk}) B_{bjk}, B_{bjk} = sum_s A_{sbj} Lambda^{-1}_{sk},
        # one GEMM over the draws (inner dimension S, not n or d).
        num_draws, b = grad_r2.shape[:2]
        summed = (grad_r2.reshape(num_draws, b * n).T @ gp._inv_sq_ls).reshape(b, n, -1)
        diff = x.unsqueeze(1) - train_x  # b x n x d
        return (2.0 * scale) * (diff * summed).sum(1), None


class _LogEI(torch.autograd.Function):
    r"""Log-EI from marginal moments, ``(mean, var)`` -> ``log h(u) + log sigma``, with an
    analytic backward.

    ``u = (mean - best_f) / sigma``, ``h(u) = phi(u) + u Phi(u)``, ``log h`` from BoTorch's
    ``_log_ei_helper``. With ``r = Phi(u) / h(u)`` and ``q = phi(u) / h(u) = 1 - u r``, both taken
    as ``exp`` of differences of logs (``log_ndtr``, ``log phi``, ``log h``):

    .. math::

        \frac{\partial \log \mathrm{EI}}{\partial\, \mathrm{mean}} = \frac{r}{\sigma}, \qquad
        \frac{\partial \log \mathrm{EI}}{\partial\, \mathrm{var}} = \frac{q}{2\,\mathrm{var}}.

    Why by hand: autograd through the helper's branches and masks records about 30 operations
    per call (this takes 0.6x its forward and backward seconds on ``512 x 8`` values); and its
    variance gradient is ``1 / (2 var) - u r / (2 var)``, which cancels for large ``u`` (2.5%
    off at u = 7.7, rounding noise of either sign above 10), while ``q / (2 var)`` keeps the true
    positive value.
    """

    @staticmethod
    def forward(ctx, mean: torch.Tensor, var: torch.Tensor, best_f: float) -> torch.Tensor:
        sigma = var.sqrt()
        u = (mean - best_f) / sigma
        log_h = _log_ei_helper(u)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            ctx.save_for_backward(
                (torch.special.log_ndtr(u) - log_h).exp_().div_(sigma),
                (-0.5 * u.square() - _LOG_SQRT_2PI - log_h).exp_().div_(2.0 * var),
            )
        return log_h + sigma.log()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        d_mean, d_var = ctx.saved_tensors
        return grad * d_mean, grad * d_var, None


class ThetaSampledGP:
    r"""A GP's marginal posteriors under ``S`` fixed hyperparameter samples, batched.

    For sample ``s`` the posterior of the latent ``f`` at ``x`` is
    ``N(mu_s(x), sigma_s^2(x))`` with ``mu_s = m_s + k_s(x, X) K_s^{-1} (y - m_s)`` and
    ``sigma_s^2 = k_s(x, x) - ||L_s^{-1} k_s(X, x)||^2`` (paper Sec. 4.2, Eqs. (12)-(13)),
    ``K_s = L_s L_s^T`` the noisy training covariance. ``L_s^{-1}`` and ``K_s^{-1} (y - m_s)`` are
    computed once here (once per BO step), so a call costs one batched matrix product, and one
    more for its gradient (:class:`_MarginalMoments`). Targets, ``best_f`` and EI
    are on the model's *standardized* outcome scale (BoTorch's maximization convention): EI
    there is ``EI_original / std(y)``, a positive constant factor shared by every sample,
    candidate and ensemble member.

    **Constant mean integrated out** (``constant_mean_variance = v_c > 0``; Rao-Blackwellization,
    derived in :mod:`orthobench.theta_estimators`). The posterior mean is affine in the constant
    mean, ``mu(x; m) = m a(x) + k(x, X) K^{-1} y`` with ``a(x) = 1 - k(x, X) K^{-1} 1``, and the
    posterior variance does not depend on ``m``. If ``m ~ N(m_s, v_c)`` given the other
    parameters, then ``f(x)`` given them is ``N(mu(x; m_s), sigma_s^2(x) + v_c a(x)^2)``: a sample's
    ``theta`` then holds ``m_s`` (the conditional mean) in the constant-mean entry, and every output
    (moments, log-EI, predictive density) is that of the marginal over ``m``.

    Args:
        layout: Layout of ``theta``.
        theta: ``S x p`` hyperparameter samples (fixed; no gradient flows into them).
        train_x: ``n x d`` training inputs.
        train_y: ``n`` standardized training targets (larger is better).
        y_mean: Mean of the outcome standardization (original units).
        y_std: Standard deviation of the outcome standardization (original units).
        constant_mean_variance: Variance ``v_c >= 0`` of the constant mean around the value in
            ``theta``, integrated out analytically (0: the constant mean is fixed at ``theta``).

    Example:
        >>> from orthobench.surrogates.gp import fit_model
        >>> x = torch.rand(10, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> model, _ = fit_model(x, torch.sin(6 * x[:, 0]), "rbf-iso")
        >>> lap = laplace_posterior(model)
        >>> z = lap.sample_whitened(512, "qmc", seed=0)
        >>> gp = ThetaSampledGP.from_model(model, lap.theta(z))
        >>> gp.log_ei(x[:5].unsqueeze(-2)).shape  # S x b for X of shape b x 1 x d
        torch.Size([512, 5])
    """

    def __init__(
        self,
        layout: ThetaLayout,
        theta: torch.Tensor,
        train_x: torch.Tensor,
        train_y: torch.Tensor,
        *,
        y_mean: float = 0.0,
        y_std: float = 1.0,
        constant_mean_variance: float = 0.0,
    ) -> None:
        if not constant_mean_variance >= 0:
            raise ValueError(
                f"`constant_mean_variance` must be >= 0, but got {constant_mean_variance=}."
            )
        self.layout = layout
        self.constant_mean_variance = float(constant_mean_variance)
        self.theta = theta.detach()
        self.train_x = train_x.detach()
        self.train_y = train_y.detach()
        self.y_mean = y_mean
        self.y_std = y_std
        self.best_f = float(self.train_y.max())
        with torch.no_grad():
            self.hp: GPHyperparameters = unpack_theta(self.theta, layout)
            n = train_x.shape[0]
            eye = torch.eye(n, dtype=theta.dtype, device=theta.device)
            # Block by block (_draw_block): kernel matrices, inverses and projections are made in
            # cache, not by passes over all S n^2 entries.
            num_draws = theta.shape[0]
            k_y = torch.empty(num_draws, n, n, dtype=theta.dtype, device=theta.device)
            block = _draw_block(num_draws, n * n, k_y.device)
            for start in range(0, num_draws, block):
                rows = slice(start, start + block)
                hp = _draw_rows(self.hp, rows)
                torch.add(
                    kernel_matrix(hp, self.train_x, self.train_x),
                    hp.noise[:, None, None] * eye,
                    out=k_y[rows],
                )
            chol, self.n_jittered = _cholesky_with_jitter(k_y)
            resid = (self.train_y.unsqueeze(0) - self.hp.mean[:, None]).unsqueeze(-1)
            # Explicit inverses turn every later solve into contiguous batched GEMMs (see
            # _MarginalMoments); the outputscale (or linear variance) is folded in here.
            amp = (
                self.hp.outputscale * (self.hp.kernel[:, 0] if layout.kernel == "linear" else 1.0)
            )[:, None, None]
            width = n + 1 + (self.constant_mean_variance > 0)
            self._forward_proj = torch.empty(
                num_draws, n, width, dtype=theta.dtype, device=theta.device
            )
            for start in range(0, num_draws, block):
                rows = slice(start, start + block)
                chol_inv = torch.linalg.solve_triangular(
                    chol[rows], eye.expand_as(chol[rows]), upper=False
                )
                # S_b x n x 1: K^{-1} (y - m)
                alpha = chol_inv.transpose(-1, -2) @ (chol_inv @ resid[rows])
                if self.constant_mean_variance:
                    # The mean's slope in the constant mean needs K^{-1} 1 too: alpha is S_b x n x 2.
                    ones = torch.ones_like(resid[rows])
                    alpha = torch.cat(
                        [alpha, chol_inv.transpose(-1, -2) @ (chol_inv @ ones)], dim=-1
                    )
                torch.mul(
                    amp[rows],
                    torch.cat([chol_inv.transpose(-1, -2), alpha], dim=-1),
                    out=self._forward_proj[rows],
                )
            # Q = P^T, laid out for the backward's GEMM.
            self._backward_proj = self._forward_proj.transpose(-1, -2).contiguous()
            if layout.kernel != "linear":
                self._inv_sq_ls = (
                    self.hp.kernel.square().reciprocal().expand(-1, train_x.shape[-1]).contiguous()
                )

    @classmethod
    def from_model(
        cls, model: SingleTaskGP, theta: torch.Tensor, *, constant_mean_variance: float = 0.0
    ) -> ThetaSampledGP:
        """Build from a :func:`~orthobench.surrogates.gp.build_gp` model and ``S x p`` samples."""
        tf = model.outcome_transform
        return cls(
            theta_layout(model),
            theta,
            model.train_inputs[0],
            model.train_targets,
            y_mean=float(tf.means.squeeze()),
            y_std=float(tf.stdvs.squeeze()),
            constant_mean_variance=constant_mean_variance,
        )

    @property
    def num_samples(self) -> int:
        return self.theta.shape[0]

    def mean_and_variance(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Marginal posterior means and variances of ``f``: ``batch x 1 x d`` -> two ``S x batch``.

        Only the marginals are computed (docs/design.md, "Marginal posteriors only"): the cost is
        linear in the number of candidates. Variances are clamped at ``1e-12`` like BoTorch's.
        """
        if X.shape[-2] != 1:
            raise ValueError(
                f"Expected candidates of shape batch x 1 x d, but got {tuple(X.shape)}."
            )
        batch_shape = X.shape[:-2]
        x = X.reshape(-1, X.shape[-1])  # b x d
        mean, var = _MarginalMoments.apply(x, self)
        return mean.reshape(-1, *batch_shape), var.reshape(-1, *batch_shape)

    def log_ei(self, X: torch.Tensor) -> torch.Tensor:
        r"""Per-sample analytic log-EI ``log E[(f(x) - best_f)_+ | theta_s]`` (standardized scale).

        ``log EI = log h(u) + log sigma`` with ``u = (mu - best_f) / sigma`` and ``h`` BoTorch's
        ``_log_ei_helper`` [Ament2023logei]_, accurate where ``EI`` itself underflows.

        Args:
            X: ``batch x 1 x d`` candidates.

        Returns:
            ``S x batch`` log-EI values.
        """
        mean, var = self.mean_and_variance(X)
        return _LogEI.apply(mean, var, self.best_f)

    def log_predictive_density(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r"""Log density of observations under the sample mixture, in original units.

        ``sum_i log (1/S) sum_s N(y_i; mu_s(x_i), sigma_s^2(x_i) + sigma_{n,s}^2)`` with ``y`` in the
        model's (maximization) convention; the ensemble's predictive log score.

        Args:
            x: ``n x d`` inputs.
            y: ``n`` observations (original units, larger is better).

        Returns:
            A scalar tensor.
        """
        with torch.no_grad():
            mean, var = self.mean_and_variance(x.unsqueeze(-2))  # S x n
            total = var + self.hp.noise[:, None]
            ys = (y - self.y_mean) / self.y_std
            log_pdf = -0.5 * ((ys - mean).square() / total + total.log() + math.log(2.0 * math.pi))
            per_point = (
                torch.logsumexp(log_pdf, dim=0) - math.log(self.num_samples) - math.log(self.y_std)
            )
        return per_point.sum()
