"""A GP's hyperparameters as an unconstrained vector ``theta``, and the GP's algebra in theta.

:class:`ThetaLayout`, :func:`get_theta` and :func:`set_theta` map the hyperparameters of a
:func:`~orthobench.surrogates.gp.build_gp` model to ``theta`` (the log of every positive
parameter) and back. :func:`kernel_matrix`, :func:`log_marginal_likelihood`, :func:`log_prior`
and :func:`log_posterior` evaluate ``S`` theta samples in one batch, in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models import SingleTaskGP
from gpytorch.kernels import Kernel, LinearKernel, MaternKernel, RBFKernel, ScaleKernel
from gpytorch.priors import LogNormalPrior
from torch.nn import Module

from orthobench.config.names import KERNELS

# NOTE: BoTorch's constraints use ``transform=None``, so a raw lengthscale or noise *is* the value;
# a Gaussian over raw values would put mass on negative lengthscales. Every positive parameter is
# therefore represented by its logarithm (docs/design.md, "Laplace posterior on log-parameters").
# The kernels are written out in closed form (rather than called through gpytorch) because the
# autograd functions of gpytorch's isotropic RBF and Matern kernels have wrong second derivatives
# (docs/design.md, "Exact second derivatives") and because the same code evaluates S
# hyperparameter samples in one batch.

SQRT5 = math.sqrt(5.0)
# Squared distances below this are treated as zero: k(x, x) does not depend on the lengthscale,
# and clamping keeps autograd away from the 0 * inf of d sqrt(r2) / d r2 at r2 = 0.
_MIN_SQ_DIST = 1e-30


@dataclass(frozen=True)
class ThetaLayout:
    """How an unconstrained hyperparameter vector ``theta`` (length ``p``) maps onto a GP.

    Order: ``[constant mean, log noise, kernel block, (log outputscale)]`` where the kernel block
    is the log lengthscale(s) (1 for ``-iso``, ``d`` for ``-ard``) or, for ``linear``, the log
    variance. The prior of every positive parameter is ``LogNormal(loc, scale)`` on the value,
    i.e. ``Normal(loc, scale)`` on its log *once the Jacobian of the log transform is included*;
    the constant mean has a flat prior (``loc = scale = nan``).

    Args:
        kernel: Kernel name (one of :data:`KERNELS`).
        dim: Input dimension ``d``.
        outputscale: Whether the kernel is wrapped in a ``ScaleKernel``.
        names: ``p`` parameter names, e.g. ``("mean", "log_noise", "log_lengthscale_0", ...)``.
        prior_loc: ``p`` Normal prior locations in theta space (nan: flat).
        prior_scale: ``p`` Normal prior scales in theta space (nan: flat).
    """

    kernel: str
    dim: int
    outputscale: bool
    names: tuple[str, ...]
    prior_loc: tuple[float, ...]
    prior_scale: tuple[float, ...]

    @property
    def p(self) -> int:
        return len(self.names)

    @property
    def kernel_slice(self) -> slice:
        return slice(2, self.p - 1 if self.outputscale else self.p)

    @property
    def positive(self) -> tuple[bool, ...]:
        """``p`` flags: which coordinates are logs of positive parameters (all but the mean)."""
        return tuple(not math.isnan(loc) for loc in self.prior_loc)


def _log_normal_prior(module: Module, attr: str, what: str) -> tuple[float, float]:
    prior = getattr(module, attr, None)
    if not isinstance(prior, LogNormalPrior):
        raise UnsupportedError(
            f"The Laplace approximation needs a LogNormalPrior on the {what}, but got {prior!r}."
        )
    loc, scale = prior.loc.reshape(-1), prior.scale.reshape(-1)
    if loc.numel() != 1 or scale.numel() != 1:
        raise UnsupportedError(
            f"Expected a scalar LogNormalPrior on the {what}, but got loc={loc.tolist()}, scale={scale.tolist()}."
        )
    return float(loc), float(scale)


def _split_kernel(model: SingleTaskGP) -> tuple[Kernel, ScaleKernel | None]:
    covar = model.covar_module
    if isinstance(covar, ScaleKernel):
        return covar.base_kernel, covar
    return covar, None


def theta_layout(model: SingleTaskGP) -> ThetaLayout:
    """The :class:`ThetaLayout` of a model built by :func:`~orthobench.surrogates.gp.build_gp`.

    Raises:
        UnsupportedError: for a kernel, mean or prior that
            :func:`~orthobench.surrogates.gp.build_gp` does not produce.
    """
    base, scale = _split_kernel(model)
    dim = model.train_inputs[0].shape[-1]
    if any(True for _ in model.mean_module.named_priors()):
        raise UnsupportedError(
            "The constant mean must have no prior (flat) for the Laplace layout."
        )
    names = ["mean", "log_noise"]
    locs, scales = [math.nan], [math.nan]
    loc, sc = _log_normal_prior(model.likelihood.noise_covar, "noise_prior", "noise")
    locs.append(loc)
    scales.append(sc)
    if isinstance(base, LinearKernel):
        kernel = "linear"
        loc, sc = _log_normal_prior(base, "variance_prior", "linear variance")
        names.append("log_variance")
        locs.append(loc)
        scales.append(sc)
    elif isinstance(base, (RBFKernel, MaternKernel)):
        if isinstance(base, MaternKernel) and base.nu != 2.5:
            raise UnsupportedError(
                f"Only the Matern-5/2 kernel is supported, but got nu={base.nu}."
            )
        family = "rbf" if isinstance(base, RBFKernel) else "matern52"
        n_ls = base.lengthscale.shape[-1]
        kernel = f"{family}-{'ard' if base.ard_num_dims is not None and base.ard_num_dims > 1 else 'iso'}"
        if kernel.endswith("-ard") and n_ls != dim:
            raise UnsupportedError(f"An ARD kernel needs {dim} lengthscales, but got {n_ls}.")
        loc, sc = _log_normal_prior(base, "lengthscale_prior", "lengthscale")
        names += [f"log_lengthscale_{i}" for i in range(n_ls)] if n_ls > 1 else ["log_lengthscale"]
        locs += [loc] * n_ls
        scales += [sc] * n_ls
    else:
        raise UnsupportedError(
            f"No closed form for kernel {type(base).__name__}; supported: {list(KERNELS)}."
        )
    if scale is not None:
        loc, sc = _log_normal_prior(scale, "outputscale_prior", "outputscale")
        names.append("log_outputscale")
        locs.append(loc)
        scales.append(sc)
    return ThetaLayout(
        kernel=kernel,
        dim=dim,
        outputscale=scale is not None,
        names=tuple(names),
        prior_loc=tuple(locs),
        prior_scale=tuple(scales),
    )


def get_theta(model: SingleTaskGP) -> torch.Tensor:
    """The model's hyperparameters as an unconstrained ``p`` vector (see :class:`ThetaLayout`)."""
    base, scale = _split_kernel(model)
    parts = [model.mean_module.constant.reshape(1), model.likelihood.noise.reshape(1).log()]
    parts.append(
        (base.variance if isinstance(base, LinearKernel) else base.lengthscale).reshape(-1).log()
    )
    if scale is not None:
        parts.append(scale.outputscale.reshape(1).log())
    return torch.cat(parts).detach().clone()


def set_theta(model: SingleTaskGP, theta: torch.Tensor) -> None:
    """Write a ``p`` vector of unconstrained hyperparameters into ``model`` (in place).

    Values go through the constraints' setters; with BoTorch's ``transform=None`` constraints a
    value below the bound is stored as is (the bound only acts during fitting).
    """
    layout = theta_layout(model)
    if theta.shape != (layout.p,):
        raise ValueError(
            f"`theta` must have shape ({layout.p},) for {layout.names}, but got {tuple(theta.shape)}."
        )
    base, scale = _split_kernel(model)
    theta = theta.detach()
    with torch.no_grad():
        model.mean_module.constant = theta[0]
        model.likelihood.noise = theta[1].exp().reshape(1)
        value = theta[layout.kernel_slice].exp()
        if isinstance(base, LinearKernel):
            base.variance = value.reshape(1, 1)
        else:
            base.lengthscale = value.reshape(1, -1)
        if scale is not None:
            scale.outputscale = theta[-1].exp()
    # Cached prediction strategies belong to the old hyperparameters.
    model.prediction_strategy = None


@dataclass(frozen=True)
class GPHyperparameters:
    """Hyperparameters in value space, batched over ``S`` samples (from :func:`unpack_theta`).

    Args:
        mean: ``S`` constant means.
        noise: ``S`` noise variances.
        kernel: ``S x q`` lengthscales (``q`` = 1 or ``d``) or, for ``linear``, ``S x 1`` variances.
        outputscale: ``S`` amplitudes (ones when the layout has no outputscale).
        kernel_name: The kernel name of the layout.
    """

    mean: torch.Tensor
    noise: torch.Tensor
    kernel: torch.Tensor
    outputscale: torch.Tensor
    kernel_name: str


def unpack_theta(theta: torch.Tensor, layout: ThetaLayout) -> GPHyperparameters:
    """Map ``S x p`` unconstrained ``theta`` to value-space hyperparameters (``exp`` of logs)."""
    if theta.ndim != 2 or theta.shape[-1] != layout.p:
        raise ValueError(f"`theta` must be S x {layout.p}, but got shape {tuple(theta.shape)}.")
    outputscale = theta[:, -1].exp() if layout.outputscale else torch.ones_like(theta[:, 0])
    return GPHyperparameters(
        mean=theta[:, 0],
        noise=theta[:, 1].exp(),
        kernel=theta[:, layout.kernel_slice].exp(),
        outputscale=outputscale,
        kernel_name=layout.kernel,
    )


def pairwise_sq_diff(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """Coordinate-wise squared differences ``(x1_k - x2_k)^2``: ``n1 x d``, ``n2 x d`` ->
    ``n1 x n2 x d``.

    Computed from differences, not the ``||a||^2 + ||b||^2 - 2 a.b`` expansion: no cancellation
    near ``r = 0``, where the Matern kernel's gradient in ``x`` is evaluated when candidates
    approach training points. A fit evaluates it once (it does not depend on theta): for
    ``x1 = x2 = train_x`` it was two thirds of an evaluation of the MAP objective at n = 512.
    """
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).square()


def scaled_sq_dist(
    hp: GPHyperparameters,
    x1: torch.Tensor,
    x2: torch.Tensor,
    sq_diff: torch.Tensor | None = None,
) -> torch.Tensor:
    """``r^2 = sum_k (x1_k - x2_k)^2 / l_k^2`` under ``S`` lengthscale samples: ``S x ... x n1 x n2``
    for ``... x n1 x d`` and ``... x n2 x d`` inputs (the same batch shape ``...``, or none).

    Args:
        sq_diff: ``pairwise_sq_diff(x1, x2)`` when the caller has it already.
    """
    if sq_diff is None:
        sq_diff = pairwise_sq_diff(x1, x2)  # ... x n1 x n2 x d
    inv_sq_ls = hp.kernel.square().reciprocal()  # S x q
    if inv_sq_ls.shape[-1] == 1:
        return sq_diff.sum(-1).unsqueeze(0) * _per_draw(inv_sq_ls[:, 0], sq_diff.ndim)
    # One GEMM over all (n1 n2) pairs and S samples, laid out S-major so no copy follows.
    return (inv_sq_ls @ sq_diff.reshape(-1, sq_diff.shape[-1]).T).reshape(-1, *sq_diff.shape[:-1])


def _per_draw(values: torch.Tensor, ndim: int) -> torch.Tensor:
    """``S`` per-draw values shaped ``S x 1 x ... x 1`` (``ndim`` dimensions) to broadcast."""
    return values.reshape(-1, *([1] * (ndim - 1)))


def kernel_matrix(hp: GPHyperparameters, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """Closed-form covariance ``k(x1, x2)`` under ``S`` hyperparameter samples.

    ``rbf``: ``exp(-r^2 / 2)``; ``matern52``: ``(1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)`` with
    ``r^2`` from :func:`scaled_sq_dist`; ``linear``: ``v x1^T x2``; all times the outputscale.
    These equal gpytorch's ``RBFKernel``, ``MaternKernel(nu=2.5)`` and ``LinearKernel``, and are
    twice differentiable by autograd in the hyperparameters (unlike gpytorch's isotropic kernels;
    docs/design.md, "Exact second derivatives").

    Args:
        hp: Hyperparameters of ``S`` samples.
        x1: ``... x n1 x d`` inputs.
        x2: ``... x n2 x d`` inputs (the same batch shape ``...`` as ``x1``, or none for both).

    Returns:
        ``S x ... x n1 x n2`` covariances.
    """
    ndim = x1.ndim + 1
    if hp.kernel_name == "linear":
        return _per_draw(hp.kernel[:, 0] * hp.outputscale, ndim) * (x1 @ x2.transpose(-1, -2))
    r2 = scaled_sq_dist(hp, x1, x2)
    if hp.kernel_name.startswith("rbf"):
        k = torch.exp(-0.5 * r2)
    else:
        r = r2.clamp_min(_MIN_SQ_DIST).sqrt()
        k = (1.0 + SQRT5 * r + (5.0 / 3.0) * r2) * torch.exp(-SQRT5 * r)
    return _per_draw(hp.outputscale, ndim) * k


def log_marginal_likelihood(
    theta: torch.Tensor, layout: ThetaLayout, train_x: torch.Tensor, train_y: torch.Tensor
) -> torch.Tensor:
    r"""Unnormalized log marginal likelihood ``log p(y | theta)`` of ``S`` hyperparameter samples.

    ``log p(y | theta) = -1/2 r^T K_y^{-1} r - 1/2 log|K_y| - n/2 log(2 pi)`` with
    ``K_y = K + sigma_n^2 I`` and ``r = y - m``. This is ``n`` times gpytorch's
    ``ExactMarginalLogLikelihood`` without the priors
    (docs/design.md, "Unnormalized log posterior").

    Args:
        theta: ``S x p`` unconstrained hyperparameters.
        layout: Their :class:`ThetaLayout`.
        train_x: ``n x d`` training inputs.
        train_y: ``n`` training targets (the model's standardized ``train_targets``).

    Returns:
        ``S`` log marginal likelihoods.
    """
    hp = unpack_theta(theta, layout)
    n = train_x.shape[0]
    k_y = kernel_matrix(hp, train_x, train_x) + hp.noise[:, None, None] * torch.eye(
        n, dtype=theta.dtype, device=theta.device
    )
    chol = torch.linalg.cholesky(k_y)
    resid = (train_y.unsqueeze(0) - hp.mean[:, None]).unsqueeze(-1)  # S x n x 1
    white = torch.linalg.solve_triangular(chol, resid, upper=False)
    quad = white.square().sum((-1, -2))
    logdet = 2.0 * chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return -0.5 * quad - 0.5 * logdet - 0.5 * n * math.log(2.0 * math.pi)


def log_prior(theta: torch.Tensor, layout: ThetaLayout) -> torch.Tensor:
    r"""Log prior *density of theta* (``S x p`` -> ``S``), Jacobian of the log transform included.

    A ``LogNormal(loc, scale)`` prior on ``phi = exp(theta)`` has density ``Normal(theta; loc,
    scale)`` in theta: ``log p_phi(e^theta) + theta`` (the ``+ theta`` is ``log |d phi / d theta|``).
    The constant mean has a flat prior and contributes nothing.
    """
    loc = torch.tensor(layout.prior_loc, dtype=theta.dtype, device=theta.device)
    scale = torch.tensor(layout.prior_scale, dtype=theta.dtype, device=theta.device)
    has = torch.tensor(layout.positive, device=theta.device)
    z = (theta[:, has] - loc[has]) / scale[has]
    return (-0.5 * z.square() - scale[has].log() - 0.5 * math.log(2.0 * math.pi)).sum(-1)


def log_posterior(
    theta: torch.Tensor, layout: ThetaLayout, train_x: torch.Tensor, train_y: torch.Tensor
) -> torch.Tensor:
    """Unnormalized log posterior density of theta: :func:`log_marginal_likelihood` + :func:`log_prior`.

    ``S x p`` -> ``S``. Up to a constant this is ``n * ExactMarginalLogLikelihood + sum of the
    log-transformed coordinates`` (the Jacobian), which the tests check.
    """
    return log_marginal_likelihood(theta, layout, train_x, train_y) + log_prior(theta, layout)
