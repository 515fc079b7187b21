"""GP surrogates built by kernel name: BoTorch ``SingleTaskGP`` models and their kernels.

Inputs are already in the unit cube (optimizers work there), so no input transform is needed;
outcomes are standardized with BoTorch's ``Standardize``. Priors follow BoTorch's defaults
(dim-scaled log-normal lengthscale prior [Hvarfner2024vanilla]_, log-normal noise prior), so the
MAP fit (:mod:`orthobench.surrogates.fit`) and the Laplace approximation
(:mod:`orthobench.surrogates.laplace`) see a proper posterior for every kernel.

References:
    .. [Hvarfner2024vanilla] C. Hvarfner, E. O. Hellsten, L. Nardi. Vanilla Bayesian Optimization
       Performs Great in High Dimensions. ICML 2024.
"""

from __future__ import annotations

import math

import torch
from botorch.models import SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from botorch.models.utils.gpytorch_modules import get_gaussian_likelihood_with_lognormal_prior
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import Kernel, LinearKernel, MaternKernel, RBFKernel, ScaleKernel
from gpytorch.priors import LogNormalPrior

from orthobench.config import names

KERNELS = names.KERNELS

# BoTorch's lengthscale floor (botorch.models.utils.gpytorch_modules.MIN_INFERRED_NOISE_LEVEL is
# for noise; this is the lengthscale one used by get_covar_module_with_dim_scaled_prior).
_MIN_LENGTHSCALE = 2.5e-2


def make_kernel(name: str, dim: int, *, outputscale: bool = False) -> Kernel:
    """Build a covariance module by name.

    Args:
        name: One of :data:`KERNELS`. ``-ard`` kernels have one lengthscale per input dimension,
            ``-iso`` kernels one shared lengthscale. Lengthscale prior:
            ``LogNormal(sqrt(2) + log(d) / 2, sqrt(3))`` (BoTorch's default).
        dim: Input dimension ``d``.
        outputscale: Wrap the kernel in a ``ScaleKernel`` with a ``LogNormal(0, 1)`` prior on the
            amplitude. Off by default, as in BoTorch >= 0.12 (outcomes are standardized).

    Returns:
        A gpytorch kernel.
    """
    names.check_kernel(name)
    if name == "linear":
        base: Kernel = LinearKernel(variance_prior=LogNormalPrior(0.0, 1.0))
    else:
        ard = dim if name.endswith("-ard") else None
        prior = LogNormalPrior(loc=math.sqrt(2.0) + math.log(dim) / 2.0, scale=math.sqrt(3.0))
        common = dict(
            ard_num_dims=ard,
            lengthscale_prior=prior,
            lengthscale_constraint=GreaterThan(
                _MIN_LENGTHSCALE, transform=None, initial_value=prior.mode
            ),
        )
        base = (
            MaternKernel(nu=2.5, **common) if name.startswith("matern52") else RBFKernel(**common)
        )
    if outputscale:
        return ScaleKernel(base, outputscale_prior=LogNormalPrior(0.0, 1.0))
    return base


#: The smallest spread of the targets that :func:`standardize` scales to 1 (float32's smallest
#: normal number): BoTorch's default, 1e-8, in the objective's own units, took targets of a
#: spread below it as constant, and a GP of an objective on the scale of 1e-9 ignored the data.
MIN_OUTCOME_STD = torch.finfo(torch.float32).tiny


def standardize() -> Standardize:
    """The outcome transform of every GP here: ``Standardize(m=1)`` whatever the targets'
    scale (:data:`MIN_OUTCOME_STD`); exactly constant targets keep a spread of 1."""
    return Standardize(m=1, min_stdv=MIN_OUTCOME_STD)


def build_gp(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    kernel: str = "matern52-ard",
    *,
    outputscale: bool = False,
) -> SingleTaskGP:
    """An unfitted ``SingleTaskGP`` on ``t x d`` unit-cube inputs and ``t`` targets.

    The targets are modelled as given (callers negate minimization objectives for BoTorch's
    maximization convention) and standardized by the model's outcome transform.
    """
    return SingleTaskGP(
        train_X=train_x,
        train_Y=train_y.unsqueeze(-1),
        covar_module=make_kernel(kernel, train_x.shape[-1], outputscale=outputscale),
        likelihood=get_gaussian_likelihood_with_lognormal_prior(),
        outcome_transform=standardize(),
    )
