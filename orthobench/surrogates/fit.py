"""MAP fits of a GP's hyperparameters: BoTorch's ``fit_gpytorch_mll`` or a fast fit.

:func:`fit_model` builds a GP (:func:`~orthobench.surrogates.gp.build_gp`) and fits it;
:func:`fit_map` runs BoTorch's fit (:func:`fit_gp`) or :func:`fit_fast`, L-BFGS-B on the
closed-form objective of :mod:`orthobench.surrogates.theta_algebra`, and checks either for
stationarity (:func:`stationarity`; docs/design.md, "MAP objective and fit stationarity").
:class:`WarmStarts` keeps an optimizer's fitted thetas as the next step's starts.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
import torch
from botorch.exceptions.errors import ModelFittingError as BotorchModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from gpytorch.constraints import Interval
from gpytorch.mlls import ExactMarginalLogLikelihood
from scipy.optimize import minimize
from threadpoolctl import ThreadpoolController

from orthobench.exceptions import ModelFittingError, NumericsWarning
from orthobench.surrogates.gp import build_gp
from orthobench.surrogates.laplace import LaplacePosterior, laplace_posterior
from orthobench.surrogates.theta_algebra import (
    _MIN_SQ_DIST,
    SQRT5,
    ThetaLayout,
    _split_kernel,
    get_theta,
    log_marginal_likelihood,
    log_prior,
    pairwise_sq_diff,
    scaled_sq_dist,
    set_theta,
    theta_layout,
    unpack_theta,
)

#: Fit methods: BoTorch's ``fit_gpytorch_mll`` or :func:`fit_fast`.
FITS: tuple[str, ...] = ("botorch", "fast")

#: Largest projected-gradient norm of the negative log posterior (nats per unit of log parameter)
#: at which a fit counts as stationary. A gradient of this size moves the optimum by about
#: ``1e-2 / H`` in theta, under 0.03 for a Hessian eigenvalue at the Laplace floor of 1/3, and
#: changes the objective by at most about ``1e-4`` nats there. BoTorch's fit stops above it on
#: about 1 Matérn-ARD state in 6 with 32 points (docs/design.md, "MAP objective and fit
#: stationarity"); L-BFGS-B run to convergence on the closed form ends several orders below it.
STATIONARY_TOL = 1e-2

# L-BFGS-B stopping rules: projected-gradient infinity norm and relative decrease. Tight enough
# that a converged run ends far below STATIONARY_TOL; an iteration cap per run (each start and
# the polish).
_GTOL = 1e-6
_FTOL = 1e-12
_MAXITER = 200
# Iterations of BoTorch's path (the botorch-path start): enough to leave the prior mode towards
# the basin BoTorch's fit ends in; the log-coordinate run from there does the rest. Measured on
# the benchmark's states: 30 was never worse than BoTorch's fit, 15 missed one 65-point state by
# 0.08 nats, the full path (up to 200) cost about 3x the evaluations of 30.
_PATH_ITERATIONS = 30
# A coordinate within this of its lower bound counts as on it (the projected gradient drops a
# component that pushes against it).
_ON_BOUND = 1e-7


def _float64_data(model: SingleTaskGP) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's ``n x d`` inputs and ``n`` targets in float64 (a no-op for a float64 model).

    NOTE: the fit and its stationarity check run in float64 whatever the model's dtype. In float32
    the objective's rounding (terms of size ``n``, relative error ``1e-7``) stalled L-BFGS-B's
    line search above :data:`STATIONARY_TOL` on most 50-point states, so the fast fit fell back to
    BoTorch's, and the gradient of a float32 optimum measured in float32 was 0.02-0.04 at 200
    points, about 1e-4 in float64. Upcasting is exact, so the fit is that of the model's data.
    """
    return model.train_inputs[0].detach().double(), model.train_targets.detach().double()


def neg_map_objective(
    theta: torch.Tensor, layout: ThetaLayout, train_x: torch.Tensor, train_y: torch.Tensor
) -> torch.Tensor:
    r"""``-ell(theta)``, BoTorch's MAP objective in log coordinates, negated: ``S x p`` -> ``S``.

    ``-(log p(y | theta) + log p(theta) - sum of the log coordinates)``: the log-Jacobian that
    :func:`~orthobench.surrogates.theta_algebra.log_prior` includes is subtracted again, so this is
    ``-n * ExactMarginalLogLikelihood`` (priors on the values) up to a constant.
    """
    positive = torch.tensor(layout.positive, device=theta.device)
    jacobian = theta[:, positive].sum(-1)
    return -(
        log_marginal_likelihood(theta, layout, train_x, train_y)
        + log_prior(theta, layout)
        - jacobian
    )


def neg_map_objective_and_grad(
    theta: torch.Tensor,
    layout: ThetaLayout,
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    sq_diff: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r""":func:`neg_map_objective` and its gradient in closed form: ``S x p`` -> ``S``, ``S x p``.

    With ``alpha = K_y^{-1} r`` and ``W = alpha alpha^T - K_y^{-1}``, the log marginal likelihood
    has ``d/d theta_j = 1/2 sum(W * dK_y/d theta_j)``: ``sum(alpha)`` for the constant mean,
    ``sigma_n^2 tr(W) / 2`` for the log noise, ``sum(W * K) / 2`` for a log outputscale or linear
    variance, and for the log lengthscale ``l_k`` of a stationary kernel
    ``dK/d log l_k = F * r_k^2`` with ``r_k^2 = (x_k - x'_k)^2 / l_k^2`` and ``F = K`` (RBF) or
    ``F = s 5/3 (1 + sqrt5 r) exp(-sqrt5 r)`` (Matérn-5/2). The prior adds
    ``(theta - loc) / scale^2 + 1`` per positive coordinate (the ``+1`` is the dropped Jacobian).
    About a third of the cost of autograd through the same algebra (a 32-point GP is bound by
    per-operation overhead); the tests check it against autograd for every kernel.

    ``sq_diff`` is ``pairwise_sq_diff(train_x, train_x)`` (``n x n x d``) when the caller has it:
    a fit passes the same one to every evaluation.
    """
    hp = unpack_theta(theta, layout)
    n, s = train_x.shape[0], theta.shape[0]
    scale = hp.outputscale[:, None, None]
    if hp.kernel_name == "linear":
        k = (hp.kernel[:, 0] * hp.outputscale)[:, None, None] * (train_x @ train_x.T)
        d_k = None
    else:
        if sq_diff is None:
            sq_diff = pairwise_sq_diff(train_x, train_x)
        r2 = scaled_sq_dist(hp, train_x, train_x, sq_diff)  # S x n x n
        if hp.kernel_name.startswith("rbf"):
            k = d_k = scale * torch.exp(-0.5 * r2)
        else:
            r = r2.clamp_min(_MIN_SQ_DIST).sqrt()
            e = torch.exp(-SQRT5 * r)
            k = scale * (1.0 + SQRT5 * r + (5.0 / 3.0) * r2) * e
            d_k = scale * (5.0 / 3.0) * (1.0 + SQRT5 * r) * e
    eye = torch.eye(n, dtype=theta.dtype, device=theta.device)
    chol = torch.linalg.cholesky(k + hp.noise[:, None, None] * eye)
    resid = (train_y.unsqueeze(0) - hp.mean[:, None]).unsqueeze(-1)  # S x n x 1
    alpha = torch.cholesky_solve(resid, chol)  # S x n x 1
    log_lik = (
        -0.5 * (resid * alpha).sum((-1, -2))
        - chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        - 0.5 * n * math.log(2.0 * math.pi)
    )
    w = alpha @ alpha.transpose(-1, -2) - torch.cholesky_inverse(chol)  # S x n x n
    grad = torch.empty_like(theta)
    grad[:, 0] = alpha.sum((-1, -2))
    grad[:, 1] = 0.5 * hp.noise * w.diagonal(dim1=-2, dim2=-1).sum(-1)
    if d_k is None:
        grad[:, layout.kernel_slice] = 0.5 * (w * k).sum((-1, -2)).unsqueeze(-1)
    else:
        flat = sq_diff.reshape(n * n, -1)
        if hp.kernel.shape[-1] == 1:
            flat = flat.sum(-1, keepdim=True)
        weighted = (w * d_k).reshape(s, n * n)  # S x n^2
        grad[:, layout.kernel_slice] = 0.5 * (weighted @ flat) / hp.kernel.square()
    if layout.outputscale:
        grad[:, -1] = 0.5 * (w * k).sum((-1, -2))
    value = -(log_lik + log_prior(theta, layout))
    loc = torch.tensor(layout.prior_loc, dtype=theta.dtype, device=theta.device)
    prior_scale = torch.tensor(layout.prior_scale, dtype=theta.dtype, device=theta.device)
    positive = torch.tensor(layout.positive, device=theta.device)
    value = value + theta[:, positive].sum(-1)
    grad = -grad
    grad[:, positive] += (theta[:, positive] - loc[positive]) / prior_scale[positive].square() + 1.0
    return value, grad


def log_bounds(model: SingleTaskGP) -> torch.Tensor:
    """``2 x p`` lower and upper bounds of theta: the model's constraints in log form.

    BoTorch's ``transform=None`` constraints (noise >= 1e-4, lengthscale >= 0.025) give finite
    lower bounds ``log(bound)``; softplus-transformed ones (linear variance, outputscale) and the
    constant mean are unbounded (``-inf``, ``inf``).
    """
    base, scale = _split_kernel(model)
    layout = theta_layout(model)
    kernel_constraint = (
        base.raw_variance_constraint
        if hasattr(base, "raw_variance_constraint")
        else base.raw_lengthscale_constraint
    )
    constraints = [None, model.likelihood.noise_covar.raw_noise_constraint]
    constraints += [kernel_constraint] * len(range(layout.p)[layout.kernel_slice])
    if scale is not None:
        constraints.append(scale.raw_outputscale_constraint)
    lower, upper = [], []
    for c in constraints:
        lo = float(c.lower_bound) if isinstance(c, Interval) else 0.0
        hi = float(c.upper_bound) if isinstance(c, Interval) else math.inf
        lower.append(math.log(lo) if lo > 0 else -math.inf)
        upper.append(math.log(hi) if math.isfinite(hi) else math.inf)
    return torch.tensor([lower, upper], dtype=torch.float64)


def projected_gradient(
    theta: torch.Tensor,
    layout: ThetaLayout,
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    bounds: torch.Tensor,
) -> torch.Tensor:
    """``p`` gradient of :func:`neg_map_objective` at ``theta`` (``p``), projected on the box.

    A component whose coordinate is on a bound (within ``1e-7``) and whose descent direction
    leaves the box is zero: L-BFGS-B's first-order optimality measure. Computed in float64
    (:func:`_float64_data` says why).
    """
    t = theta.detach().double().clone().requires_grad_(True)
    train_x, train_y = train_x.detach().double(), train_y.detach().double()
    (grad,) = torch.autograd.grad(neg_map_objective(t.unsqueeze(0), layout, train_x, train_y), t)
    grad = grad.detach().double().cpu()
    theta = theta.detach().double().cpu()
    at_lower = (theta - bounds[0] <= _ON_BOUND) & (grad > 0)
    at_upper = (bounds[1] - theta <= _ON_BOUND) & (grad < 0)
    return torch.where(at_lower | at_upper, torch.zeros_like(grad), grad)


def stationarity(model: SingleTaskGP) -> dict[str, object]:
    """Check a fitted ``model`` for stationarity of the MAP objective.

    Returns:
        ``{"grad_norm": ||projected gradient||_2, "stationary": grad_norm <= STATIONARY_TOL}``.
    """
    layout = theta_layout(model)
    train_x, train_y = _float64_data(model)
    grad = projected_gradient(get_theta(model), layout, train_x, train_y, log_bounds(model))
    norm = float(grad.norm())
    return {"grad_norm": norm, "stationary": bool(norm <= STATIONARY_TOL)}


# Fits run with one torch thread and one thread in scipy's BLAS (both restored afterwards): a
# 32-point GP is a few hundred tiny operations per evaluation, and with two torch threads on two
# cores they stall (a fit gets 10-100x slower). scipy's L-BFGS-B (C since scipy 1.15) calls
# OpenBLAS on vectors of ``p`` entries, and OpenBLAS's default pool (one thread per core) slows it
# down when the other cores are busy (scipy issue 22438; BoTorch limits its own ``minimize`` calls
# the same way; docs/design.md, "Thread counts").
@contextmanager
def _single_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _blas_controller().limit(limits=1, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(threads)


@functools.cache
def _blas_controller() -> ThreadpoolController:
    """The BLAS pools loaded (scipy's OpenBLAS is, by this module's import). Made once:
    ``threadpool_limits`` inspects every loaded library on each call (about 1.4 ms), a
    controller's ``limit`` only sets the counts (about 10 us)."""
    return ThreadpoolController()


class _Objective:
    """``-ell`` and its gradient as scipy wants them: float64 arrays in, ``(value, p array)`` out.

    A point where the kernel matrix is not numerically positive definite (an L-BFGS-B line-search
    step to an extreme value) evaluates to ``+inf``, which the line search backtracks from.
    """

    def __init__(self, layout: ThetaLayout, train_x: torch.Tensor, train_y: torch.Tensor) -> None:
        self.layout, self.train_x, self.train_y = layout, train_x, train_y
        self.sq_diff = pairwise_sq_diff(train_x, train_x)
        self.calls = 0

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        self.calls += 1
        t = torch.as_tensor(theta, dtype=self.train_x.dtype, device=self.train_x.device)
        try:
            value, grad = neg_map_objective_and_grad(
                t.unsqueeze(0), self.layout, self.train_x, self.train_y, self.sq_diff
            )
        except torch.linalg.LinAlgError:
            return math.inf, np.zeros_like(theta)
        value, grad = float(value.squeeze(0)), grad.squeeze(0).double().cpu().numpy()
        if not (math.isfinite(value) and np.isfinite(grad).all()):
            return math.inf, np.zeros_like(theta)
        return value, grad


def _lbfgsb(objective: _Objective, start: np.ndarray, bounds: np.ndarray, maxiter: int):
    return minimize(
        objective,
        np.clip(start, bounds[0], bounds[1]),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(bounds[0], bounds[1], strict=True)),
        options={"maxiter": maxiter, "gtol": _GTOL, "ftol": _FTOL},
    )


def _value_path(
    objective: _Objective,
    layout: ThetaLayout,
    start: np.ndarray,
    bounds: np.ndarray,
    n: int,
    maxiter: int,
) -> tuple[np.ndarray, int]:
    """The end of BoTorch's own path from ``start``: L-BFGS-B with scipy's default tolerances on
    ``-ell / n`` in the parameter *values* (``exp`` of the log coordinates), as
    ``fit_gpytorch_mll`` runs it on the raw parameters. Returns its end in theta and the
    iterations taken."""
    positive = np.array(layout.positive)

    def in_values(phi: np.ndarray) -> tuple[float, np.ndarray]:
        theta = phi.copy()
        theta[positive] = np.log(phi[positive])
        value, grad = objective(theta)
        if not math.isfinite(value):  # e.g. a value at its bound 0: theta = -inf
            return math.inf, np.zeros_like(phi)
        grad = grad.copy()
        grad[positive] /= phi[positive]  # d/d phi = d/d theta / phi
        return value / n, grad / n

    low = np.where(positive, np.exp(bounds[0]), bounds[0])
    high = np.where(positive, np.exp(bounds[1]), bounds[1])
    phi0 = start.copy()
    phi0[positive] = np.exp(start[positive])
    result = minimize(
        in_values,
        np.clip(phi0, low, high),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(low, high, strict=True)),
        options={"maxiter": maxiter},
    )
    theta = result.x.copy()
    theta[positive] = np.log(result.x[positive])
    return theta, int(result.nit)


def fit_fast(
    model: SingleTaskGP,
    *,
    warm_start: Sequence[float] | torch.Tensor | None = None,
    maxiter: int = _MAXITER,
) -> dict[str, object]:
    r"""MAP-fit ``model`` in place by L-BFGS-B on the closed-form objective.

    The objective is BoTorch's MAP objective, the log marginal likelihood plus the log priors *of
    the parameter values*, written in the log coordinates ``theta`` of
    :class:`~orthobench.surrogates.theta_algebra.ThetaLayout`:

    .. math::

        \ell(\theta) = \log p(y \mid \theta) + \log p(\theta) - \sum_{i \in \text{pos}} \theta_i,

    i.e. :func:`~orthobench.surrogates.theta_algebra.log_posterior` *without* the log-Jacobian of
    the log transform (with it the optimum moves: docs/design.md, "MAP objective and fit
    stationarity"). Its maximizer is the one ``fit_gpytorch_mll`` looks for; here it is found by
    scipy's L-BFGS-B with the closed-form gradient (:func:`neg_map_objective_and_grad`),
    BoTorch's lower bounds in log form (noise >= 1e-4, lengthscale >= 0.025), from two starts,
    keeping the better:

    - *botorch-path*: the first 30 iterations of BoTorch's own path from its initialization (the
      prior modes), i.e. L-BFGS-B with scipy's default tolerances on ``-ell / n`` in the parameter
      *values* (``fit_gpytorch_mll``'s coordinates and scale, the same objective), which heads for
      the basin BoTorch's fit ends in;
    - *warm*: the previous BO step's fit, when given.

    Each is then run to convergence in log coordinates (which lengthscale mode a local optimizer
    reaches depends on its coordinates; docs/design.md, "MAP objective and fit stationarity", has
    how the starts were chosen). No random numbers are drawn, and the arithmetic is float64 for
    a float32 model too (:func:`_float64_data`). A fit that fails the
    :func:`stationarity` check is polished (L-BFGS-B restarted from where it stopped, with a fresh
    curvature memory); one that still fails is a fallback: BoTorch's fit replaces it, and the fit
    info records why (``fallback``) with a :class:`~orthobench.exceptions.NumericsWarning`.

    Args:
        model: An unfitted GP from :func:`~orthobench.surrogates.gp.build_gp` (its parameters are
            BoTorch's initialization, where BoTorch's path starts).
        warm_start: ``p`` theta to start from as well (the previous BO step's fit of the same
            kernel), or ``None``. Ignored, with the reason recorded (``fallback``) and warned
            about, when its length is not ``p`` or it is not finite.
        maxiter: L-BFGS-B iterations per run (each start, and the polish).

    Returns:
        The fit info: ``fit`` (``"fast"``), ``fallback`` (``None``, or why the warm start was
        ignored and why BoTorch's fit replaced this one, where either happened), ``grad_norm``
        and ``stationary`` (:func:`stationarity` of the model handed on), ``neg_log_posterior``
        (``-ell`` there), ``start`` (``"warm"`` or ``"botorch-path"``, the best), ``polished``,
        ``iterations`` and ``evaluations`` (all runs together).
    """
    layout = theta_layout(model)
    train_x, train_y = _float64_data(model)
    bounds_t = log_bounds(model)
    bounds = bounds_t.numpy()
    cold = get_theta(model)
    starts: dict[str, np.ndarray] = {}
    ignored = None  # why the warm start was dropped
    if warm_start is not None:
        warm = torch.as_tensor(warm_start, dtype=torch.float64).reshape(-1).numpy()
        if warm.shape != (layout.p,):
            ignored = f"warm start of length {warm.shape[0]} ignored (the layout has p={layout.p})"
        elif not np.isfinite(warm).all():
            ignored = f"warm start ignored, it is not finite ({warm.tolist()})"
        else:
            starts["warm"] = warm
    if ignored:
        warnings.warn(f"GP fit: {ignored}.", NumericsWarning, stacklevel=2)
    objective = _Objective(layout, train_x, train_y)
    with _single_thread(), np.errstate(divide="ignore"):
        # BoTorch's path from the cold start (BoTorch's initialization) replaces that start.
        starts["botorch-path"], iterations = _value_path(
            objective,
            layout,
            cold.double().cpu().numpy(),
            bounds,
            train_x.shape[0],
            min(maxiter, _PATH_ITERATIONS),
        )
        runs = {name: _lbfgsb(objective, x0, bounds, maxiter) for name, x0 in starts.items()}
        start = min(runs, key=lambda name: runs[name].fun)
        best = runs[start]
        iterations += sum(int(r.nit) for r in runs.values())

        def check(x: np.ndarray) -> float:
            theta = torch.as_tensor(x, dtype=train_x.dtype, device=train_x.device)
            return float(projected_gradient(theta, layout, train_x, train_y, bounds_t).norm())

        grad_norm = check(best.x) if math.isfinite(best.fun) else math.inf
        polished = False
        if not grad_norm <= STATIONARY_TOL and math.isfinite(best.fun):
            polished = True
            polish = _lbfgsb(objective, best.x, bounds, maxiter)
            iterations += int(polish.nit)
            if polish.fun <= best.fun:
                best, grad_norm = polish, check(polish.x)
    info: dict[str, Any] = {
        "fit": "fast",
        "fallback": ignored,
        "start": start,
        "polished": polished,
        "iterations": iterations,
        "evaluations": objective.calls,
    }
    if grad_norm <= STATIONARY_TOL:
        set_theta(model, torch.as_tensor(best.x, dtype=cold.dtype, device=cold.device))
        model.eval()
        return {**info, "grad_norm": grad_norm, "stationary": True, "neg_log_posterior": best.fun}
    set_theta(model, cold)
    botorch_info = fit_gp(model)
    fallback = (
        f"fast fit not stationary (gradient norm {grad_norm:.3g} > {STATIONARY_TOL:g} after "
        f"{iterations} iterations); used fit_gpytorch_mll"
    )
    if botorch_info["fallback"]:
        fallback += f", which {botorch_info['fallback']}"
    warnings.warn(f"GP fit: {fallback}.", NumericsWarning, stacklevel=2)
    theta = get_theta(model).double().unsqueeze(0)
    nlp = float(neg_map_objective(theta, layout, train_x, train_y).squeeze(0))
    fallback = "; ".join(f for f in (ignored, fallback) if f)
    return {**info, "fallback": fallback, **stationarity(model), "neg_log_posterior": nlp}


def fit_gp(model: SingleTaskGP) -> dict[str, object]:
    """MAP-fit ``model`` in place with ``fit_gpytorch_mll``.

    Returns:
        ``{"fallback": None}`` on a clean fit, or ``{"fallback": "<what happened>"}`` when the
        optimizer gave up and the prior-mode initialization was kept (a warning is also issued, so
        the fallback is both visible and recorded).

    Raises:
        ModelFittingError: if the fitted model's parameters are not finite.
    """
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    fallback = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            fit_gpytorch_mll(mll)
    except BotorchModelFittingError as err:
        fallback = (
            f"fit_gpytorch_mll failed ({err.__class__.__name__}); kept initial hyperparameters"
        )
        warnings.warn(f"GP fit: {fallback}.", NumericsWarning, stacklevel=2)
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise ModelFittingError("GP fit produced non-finite hyperparameters.")
    model.eval()
    return {"fallback": fallback}


def fit_map(
    model: SingleTaskGP, fit: str = "botorch", *, warm_start: Sequence[float] | None = None
) -> dict[str, object]:
    """MAP-fit ``model`` in place by BoTorch's ``fit_gpytorch_mll`` or :func:`fit_fast`.

    Args:
        model: An unfitted GP from :func:`~orthobench.surrogates.gp.build_gp`.
        fit: ``"botorch"`` or ``"fast"`` (:data:`FITS`).
        warm_start: ``p`` theta of a previous fit, used by ``"fast"`` only.

    Returns:
        The fit info, with :func:`stationarity`'s ``grad_norm`` and ``stationary`` either way. A
        BoTorch fit that fails the check is only recorded (``stationary: False``): it is the
        default, and what its users know.
    """
    if fit == "fast":
        return fit_fast(model, warm_start=warm_start)
    if fit != "botorch":
        raise ValueError(f"`fit` must be one of {FITS}, but got {fit!r}.")
    return {"fit": "botorch", **fit_gp(model), **stationarity(model)}


def fit_model(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    kernel: str = "matern52-ard",
    *,
    outputscale: bool = False,
    fit: str = "botorch",
    warm_start: Sequence[float] | torch.Tensor | None = None,
) -> tuple[SingleTaskGP, dict[str, object]]:
    """Build and MAP-fit a GP; returns the model and its fit info.

    Args:
        fit: ``"botorch"`` (:func:`fit_gp`) or ``"fast"`` (:func:`fit_fast`); the info has the
            fit's stationarity check either way (``grad_norm``, ``stationary``).
        warm_start: ``p`` theta of the previous fit, a second start of the ``"fast"`` fit.
    """
    model = build_gp(train_x, train_y, kernel, outputscale=outputscale)
    return model, fit_map(model, fit, warm_start=warm_start)


class ConstraintFit(NamedTuple):
    """A constraint's GP, MAP-fitted on its values as observed (feasible where ``<= 0``), its
    Laplace posterior and the fit's info (:func:`fit_model`)."""

    model: SingleTaskGP
    laplace: LaplacePosterior
    fit_info: dict[str, object]


def constraint_fit(x: torch.Tensor, values: torch.Tensor, kernel: str, fit: str) -> ConstraintFit:
    """Fit a constraint's GP by ``fit`` from its default start and its Laplace posterior."""
    model, fit_info = fit_model(x, values, kernel, fit=fit)
    return ConstraintFit(model, laplace_posterior(model), fit_info)


class WarmStarts:
    """An optimizer's latest fitted thetas (one per GP), the warm starts of its next step's fits.

    :meth:`record` after each fit; :meth:`advance` when observations arrive (``tell``), so every
    fit of one step (``ask``, and a probe's rebuild of the acquisition before the ``tell``)
    starts from the same thetas. Only a ``"fast"`` fit uses them: for ``"botorch"`` nothing is
    kept and :meth:`state_dict` is empty, so such an optimizer's state is what it was before
    the option existed.

    Args:
        fit: The optimizer's fit, one of :data:`FITS`.
    """

    def __init__(self, fit: str) -> None:
        if fit not in FITS:
            raise ValueError(f"`fit` must be one of {FITS}, but got {fit!r}.")
        self.enabled = fit == "fast"
        self.current: list[list[float]] | None = None
        self._latest: list[list[float]] | None = None

    def record(self, thetas: Sequence[torch.Tensor]) -> None:
        if self.enabled:
            self._latest = [theta.detach().double().cpu().tolist() for theta in thetas]

    def advance(self) -> None:
        if self._latest is not None:
            self.current = self._latest

    def get(self, i: int) -> list[float] | None:
        """The warm start of GP ``i``, or ``None`` before the first fit."""
        return None if self.current is None else self.current[i]

    def state_dict(self) -> dict[str, Any]:
        """``{"fit_warm_starts": thetas}`` for a ``"fast"`` fit, else ``{}``."""
        return {"fit_warm_starts": self.current} if self.enabled else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.enabled:
            current = state["fit_warm_starts"]
            self.current = None if current is None else [list(map(float, t)) for t in current]
