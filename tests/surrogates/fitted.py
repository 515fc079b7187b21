"""Fitted GPs and a gpytorch reference shared by the surrogate tests."""

from __future__ import annotations

import warnings

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood

from orthobench.exceptions import NumericsWarning
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.gp import KERNELS
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_algebra import set_theta

DTYPE = torch.float64
CASES = [(k, False) for k in KERNELS] + [("matern52-ard", True), ("rbf-iso", True)]


def _data(n: int = 14, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=gen, dtype=DTYPE)
    y = (
        torch.sin(6.0 * x[:, 0])
        + x[:, 1] ** 2
        - 0.5 * x[:, 2]
        + 0.05 * torch.randn(n, generator=gen, dtype=DTYPE)
    )
    return x, y


def fitted(kernel: str, outputscale: bool = False):
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, kernel, outputscale=outputscale)
        lap = laplace_posterior(model)
    return model, lap


def gpytorch_neg_log_posterior(model, theta: torch.Tensor) -> float:
    """``-(n * ExactMarginalLogLikelihood + sum of log coordinates)`` through gpytorch's own path."""
    set_theta(model, theta)
    model.train()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with torch.no_grad():
        per_datum = mll(model(*model.train_inputs), model.train_targets)
    return -float(per_datum * model.train_targets.shape[0] + theta[1:].sum())
