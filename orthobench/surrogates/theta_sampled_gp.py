r"""A GP's marginal posteriors under ``S`` fixed hyperparameter samples, batched.

:class:`ThetaSampledGP` factors each sample's kernel matrix once and evaluates marginal means and
variances (docs/design.md, "Marginal posteriors only"), log-EI (BoTorch's ``_log_ei_helper``;
docs/design.md, "EI in log space") and the predictive density of all samples in one batch, with
hand-written backward passes (:class:`_MarginalMoments`, :class:`_LogEI`).

References:
    .. [Ament2023logei] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
"""

from __future__ import annotations

import math
import warnings

import torch
from botorch.acquisition.analytic import _log_ei_helper
from botorch.models import SingleTaskGP

from orthobench.exceptions import ModelFittingError, NumericsWarning
from orthobench.surrogates.theta_algebra import (
    SQRT5,
    GPHyperparameters,
    ThetaLayout,
    kernel_matrix,
    scaled_sq_dist,
    theta_layout,
    unpack_theta,
)

# Posterior variances below this are clamped, as in BoTorch's analytic acquisitions.
_MIN_VARIANCE = 1e-12
# Relative jitters tried, in order, for a theta sample whose kernel matrix is not numerically PD.
_JITTERS = (1e-8, 1e-6, 1e-4)
# On the CPU the kernel matrices and the marginal moments are computed in blocks of draws that
# hold about this many entries (1 MiB in float64, a core's L2 cache; see _draw_block).
_BLOCK_ENTRIES = 2**17
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
# Below u = -_TAIL_U (per dtype) the log-EI gradient's ratios come from the asymptotic series of
# Mills' ratio (_tail_ratios): there exp(log Phi - log h) subtracts two logs of size u^2 / 2 and
# keeps about eps u^2 of relative accuracy (float64: 2e-6 at u = -1e5, wrong by orders of
# magnitude below -1e8; float32: 3% at u = -1e3, inf at -1e6). The thresholds balance that
# rounding against the series' truncation (its next term 135135 / u^12, 1e-19 and 1e-7 at the
# thresholds); against 50-digit values both gradients are within 3e-12 (float64) and 2e-5
# (float32, the logs' rounding near u = -8) for u from -1 to -1e9 (float32: -1e6).
_TAIL_U = {torch.float64: 100.0, torch.float32: 10.0}
# Coefficients in t = 1 / u^2 of |u| Phi(u) / phi(u) = 1 - t + 3 t^2 - ... and of
# h(u) / (t phi(u)) = 1 - 3 t + 15 t^2 - ..., (2k - 1)!! and (2k + 1)!! with alternating signs.
_MILLS = (1.0, -1.0, 3.0, -15.0, 105.0, -945.0)
_H_OVER_T_PHI = (1.0, -3.0, 15.0, -105.0, 945.0, -10395.0)


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
    cache. Each entry goes through the same
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


def _horner(t: torch.Tensor, coefficients: tuple[float, ...]) -> torch.Tensor:
    """``sum_k c_k t^k``."""
    total = torch.full_like(t, coefficients[-1])
    for c in coefficients[-2::-1]:
        total = total.mul_(t).add_(c)
    return total


def _tail_ratios(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``r = Phi(u) / h(u)`` and ``q = phi(u) / h(u)`` for ``u <= -_TAIL_U`` from the asymptotic
    series of Mills' ratio, ``Phi(u) / phi(u) = (1 - t + 3 t^2 - 15 t^3 + ...) / |u|`` with
    ``t = 1 / u^2``: then ``h / phi = 1 + u Phi / phi = t (1 - 3 t + 15 t^2 - ...)``, so
    ``q = u^2 / B`` and ``r = |u| A / B`` with ``A``, ``B`` the two brackets (``r ~ |u| + 2 / |u|``,
    ``q ~ u^2 + 3``)."""
    u_sq = u.square()
    t = u_sq.reciprocal()
    b = _horner(t, _H_OVER_T_PHI)
    return _horner(t, _MILLS).mul_(-u).div_(b), u_sq.div_(b)


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
    per call, a cost of the order of the forward and backward pass themselves; and its
    variance gradient is ``1 / (2 var) - u r / (2 var)``, which cancels for large ``u`` (2.5%
    off at u = 7.7, rounding noise of either sign above 10), while ``q / (2 var)`` keeps the true
    positive value. Far below ``best_f`` (``u < -100``, float32 ``-10``: a candidate next to
    a training point under a draw with little noise) the differences of logs cancel in turn (each
    log is about ``-u^2 / 2``), and ``r``, ``q`` come from the asymptotic series of Mills' ratio
    (:func:`_tail_ratios`).
    """

    @staticmethod
    def forward(ctx, mean: torch.Tensor, var: torch.Tensor, best_f: float) -> torch.Tensor:
        sigma = var.sqrt()
        u = (mean - best_f) / sigma
        log_h = _log_ei_helper(u)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            r = (torch.special.log_ndtr(u) - log_h).exp_()
            q = (-0.5 * u.square() - _LOG_SQRT_2PI - log_h).exp_()
            limit = -_TAIL_U[u.dtype]
            tail = u < limit
            # Rare (only next to the data): on the CPU a test and no series on the usual call;
            # on a GPU the series always, as the test would wait for the device.
            if u.device.type != "cpu" or bool(tail.any()):
                r_tail, q_tail = _tail_ratios(u.clamp_max(limit))
                r, q = torch.where(tail, r_tail, r), torch.where(tail, q_tail, q)
            ctx.save_for_backward(r.div_(sigma), q.div_(2.0 * var))
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
    derived at :func:`orthobench.theta_estimators.constant_mean_conditional`). The posterior mean
    is affine in the constant mean, ``mu(x; m) = m a(x) + k(x, X) K^{-1} y`` with
    ``a(x) = 1 - k(x, X) K^{-1} 1``, and the posterior variance does not depend on ``m``. If
    ``m ~ N(m_s, v_c)`` given the other parameters, then ``f(x)`` given them is
    ``N(mu(x; m_s), sigma_s^2(x) + v_c a(x)^2)``: a sample's ``theta`` then holds ``m_s`` (the
    conditional mean) in the constant-mean entry, and every output (moments, log-EI, predictive
    density) is that of the marginal over ``m``.

    Args:
        layout: Layout of ``theta``.
        theta: ``S x p`` hyperparameter samples (fixed; no gradient flows into them).
        train_x: ``n x d`` training inputs.
        train_y: ``n`` standardized training targets (larger is better).
        y_mean: Mean of the outcome standardization (original units).
        y_std: Standard deviation of the outcome standardization (original units).
        constant_mean_variance: Variance ``v_c >= 0`` of the constant mean around the value in
            ``theta``, integrated out analytically (0: the constant mean is fixed at ``theta``).
        best_f: The incumbent of EI on the standardized scale; None: the largest training target
            (constrained EI passes the best feasible one).

    Example:
        >>> from orthobench.surrogates.fit import fit_model
        >>> from orthobench.surrogates.laplace import laplace_posterior
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
        best_f: float | None = None,
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
        self.best_f = float(self.train_y.max()) if best_f is None else float(best_f)
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
            self._amp = amp
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
        cls,
        model: SingleTaskGP,
        theta: torch.Tensor,
        *,
        constant_mean_variance: float = 0.0,
        best_f: float | None = None,
    ) -> ThetaSampledGP:
        """Build from a :func:`~orthobench.surrogates.gp.build_gp` model and ``S x p`` samples
        (``best_f`` on the model's standardized scale)."""
        tf = model.outcome_transform
        return cls(
            theta_layout(model),
            theta,
            model.train_inputs[0],
            model.train_targets,
            y_mean=float(tf.means.squeeze()),
            y_std=float(tf.stdvs.squeeze()),
            constant_mean_variance=constant_mean_variance,
            best_f=best_f,
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

    def whitened(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        r"""What the joint posterior at the ``q`` points of each batch is made of, per draw:
        the means ``mu_s(x_i)`` (``S x b x q``), the whitened cross-covariances
        ``w_i = L_s^{-1} k_s(X, x_i)`` (``S x b x q x n``) and, with the constant mean
        integrated out, the mean's slopes ``a_i = 1 - k_s(x_i, X) K_s^{-1} 1`` (``S x b x q``;
        else None). Plain autograd (no hand-written backward): batch acquisitions are evaluated
        on a few restarts, not on the raw-sample screen of every step's ``q = 1`` acquisition.

        Args:
            X: ``b x q x d`` batches of points.
        """
        b, q, d = X.shape
        n = self.train_x.shape[0]
        # cross = amp * c and P = amp * [L^{-T} | alpha | K^{-1} 1]: one amp divided out.
        cross = kernel_matrix(self.hp, X.reshape(-1, d), self.train_x)  # S x bq x n
        proj = torch.bmm(cross, self._forward_proj) / self._amp
        white = proj[..., :n].reshape(-1, b, q, n)
        mean = (self.hp.mean[:, None] + proj[..., n]).reshape(-1, b, q)
        if not self.constant_mean_variance:
            return mean, white, None
        return mean, white, (1.0 - proj[..., n + 1]).reshape(-1, b, q)

    def covariance(
        self,
        X: torch.Tensor,
        white: torch.Tensor,
        slope: torch.Tensor | None,
        Y: torch.Tensor | None = None,
        white_y: torch.Tensor | None = None,
        slope_y: torch.Tensor | None = None,
    ) -> torch.Tensor:
        r"""Posterior covariances ``Sigma_s(x_i, y_j) = k_s(x_i, y_j) - w_i^T w_j (+ v_c a_i
        a_j)`` from :meth:`whitened`'s parts of ``X`` (``b x q x d``) and of ``Y`` (``b x r x d``
        or ``1 x r x d``; default ``X``): ``S x b x q x r``. The last term is the rank-one
        covariance of a shared shift of every mean, with the constant mean integrated out."""
        if Y is None:
            Y, white_y, slope_y = X, white, slope
        cov = kernel_matrix(self.hp, X, Y.expand(X.shape[0], -1, -1)) - white @ white_y.mT
        if self.constant_mean_variance:
            cov = cov + self.constant_mean_variance * slope.unsqueeze(-1) * slope_y.unsqueeze(-2)
        return cov

    def joint_moments(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Joint posterior of ``f`` at the ``q`` points of each batch, per draw: ``mu_s(x_i)``
        as in :meth:`mean_and_variance` and the :meth:`covariance` of the batch with itself.

        Args:
            X: ``b x q x d`` batches of candidates.

        Returns:
            ``(mean, cov)``: ``S x b x q`` and ``S x b x q x q``.
        """
        mean, white, slope = self.whitened(X)
        return mean, self.covariance(X, white, slope)

    def standardized(self, value: float) -> float:
        """``value`` in original units on the model's standardized outcome scale."""
        return (value - self.y_mean) / self.y_std

    def log_prob_below(self, X: torch.Tensor, threshold: float = 0.0) -> torch.Tensor:
        r"""Per-sample ``log P(f(x) <= threshold | theta_s)`` of a GP fitted to a constraint
        ``f`` as observed (not negated: feasible where ``f <= threshold``).

        ``log Phi((t - mu_s(x)) / sigma_s(x))`` with ``t`` the threshold on the model's
        standardized scale, ``(threshold - y_mean) / y_std``; ``log_ndtr`` keeps it finite where
        the probability underflows.

        Args:
            X: ``batch x 1 x d`` candidates.
            threshold: The constraint's bound in original units.

        Returns:
            ``S x batch`` log probabilities.
        """
        mean, var = self.mean_and_variance(X)
        return torch.special.log_ndtr((self.standardized(threshold) - mean) / var.sqrt())

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
