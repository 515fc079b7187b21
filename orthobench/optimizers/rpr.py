r"""RPR: robust GP by Relevance Pursuit [Ament2024pursuit]_ with qLogNoisyExpectedImprovement.

BoTorch's ``RobustRelevancePursuitSingleTaskGP`` adds a data-point-specific noise variance
``rho_i`` to a sparse set of training points (the *support*, the identified outliers):

.. math::

    y_i = f(x_i) + \epsilon_i, \qquad \epsilon_i \sim \mathcal{N}(0, \sigma^2 + \rho_i),
    \qquad \rho_i = 0 \text{ for } i \notin \text{support}.

Fitting (``fit_gpytorch_mll`` dispatches to the model's ``custom_fit``) runs backward relevance
pursuit over the support sizes ``floor(f n)`` for ``f`` in ``fractions_of_outliers`` and keeps the
model of highest posterior probability under an exponential prior on the support size with mean
``prior_outlier_fraction * n``. The acquisition is qLogNEI [Ament2023logei]_, which
integrates over the noisy incumbent, so an outlier is not taken as the best point; an
``ask(q)`` maximizes it jointly over the ``q x d`` batch (``optimize_acqf(q=q)``). Its baseline
is the history less the points that are the best in none of BoTorch's posterior samples
(``prune_inferior_points``, as qLogNEI's default ``prune_baseline`` does), pruned once per ask.
Points still being evaluated (``ask(n, pending=P)``) are its ``X_pending``: qLogNEI
(incremental, BoTorch's default) samples them jointly with the baseline, so the improvement is
over the best of both.

References:
    .. [Ament2024pursuit] S. Ament, E. Santorella, D. Eriksson, B. Letham, M. Balandat,
       E. Bakshy. Robust Gaussian Processes via Relevance Pursuit. NeurIPS 2024.
    .. [Ament2023logei] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import torch
from annotated_types import MinLen
from botorch.acquisition import qLogNoisyExpectedImprovement
from botorch.acquisition.utils import prune_inferior_points
from botorch.exceptions.errors import ModelFittingError as BotorchModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models.robust_relevance_pursuit_model import (
    FRACTIONS_OF_OUTLIERS,
    RobustRelevancePursuitSingleTaskGP,
)
from botorch.models.utils.gpytorch_modules import get_gaussian_likelihood_with_lognormal_prior
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from orthobench.config.params import Count, Kernel, PositiveFloat, Probability
from orthobench.exceptions import ModelFittingError, NumericsWarning
from orthobench.optimizers.base import Suggestion, check_at_least
from orthobench.optimizers.gp_base import GPOptimizer
from orthobench.seeding import torch_seed
from orthobench.surrogates.gp import make_kernel, standardize


def fit_robust_gp(
    train_x: Tensor,
    train_y: Tensor,
    *,
    kernel: str = "matern52-ard",
    fractions_of_outliers: tuple[float, ...] = tuple(FRACTIONS_OF_OUTLIERS),
    prior_outlier_fraction: float = 0.2,
    convex_parameterization: bool = True,
) -> tuple[RobustRelevancePursuitSingleTaskGP, dict[str, Any]]:
    """Build and fit a ``RobustRelevancePursuitSingleTaskGP`` on ``t x d`` inputs and ``t`` targets.

    The kernel, base likelihood and outcome transform are those of
    :func:`orthobench.surrogates.gp.build_gp`, so RPR differs from the plain GP only in the
    sparse outlier noise. Targets are modelled as given (negate a minimization objective).

    Returns:
        The fitted model and ``{"fallback": None | str, "outliers": [history indices]}``.

    Raises:
        ModelFittingError: if the fitted model's parameters are not finite.
    """
    t = train_y.shape[0]
    model = RobustRelevancePursuitSingleTaskGP(
        train_X=train_x,
        train_Y=train_y.unsqueeze(-1),
        likelihood=get_gaussian_likelihood_with_lognormal_prior(),
        covar_module=make_kernel(kernel, train_x.shape[-1]),
        outcome_transform=standardize(),
        convex_parameterization=convex_parameterization,
        prior_mean_of_support=prior_outlier_fraction * t,
    )
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    fallback = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            fit_gpytorch_mll(mll, fractions_of_outliers=list(fractions_of_outliers))
    except BotorchModelFittingError as err:
        fallback = f"relevance pursuit fit failed ({err.__class__.__name__}); kept the last hyperparameters"
        warnings.warn(f"RPR fit: {fallback}.", NumericsWarning, stacklevel=2)
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise ModelFittingError(f"RPR fit on {t} points produced non-finite hyperparameters.")
    model.eval()
    outliers = sorted(int(i) for i in model.likelihood.noise_covar.support)
    return model, {"fallback": fallback, "outliers": outliers}


class RPR(GPOptimizer):
    """Robust GP by Relevance Pursuit (BoTorch) + qLogNoisyExpectedImprovement.

    Args:
        dim: Number of search dimensions ``d``.
        kernel: GP kernel name (see :data:`orthobench.surrogates.gp.KERNELS`).
        fractions_of_outliers: Support sizes tried by relevance pursuit, as fractions of the
            history size (BoTorch's default list).
        prior_outlier_fraction: Mean of the exponential prior on the support size, as a fraction
            of the history size: BoTorch's ``prior_mean_of_support`` default is ``int(0.2 n)``
            (kept as a float here, so a short history does not get a zero-mean prior).
        convex_parameterization: BoTorch's convex parameterization of the outlier variances
            (its default, recommended there).
        function_samples: QMC function samples of qLogNEI (as the ``qlogei`` baseline: 512).
        raw_samples: Raw samples of the multistart initialization (512).
        num_restarts: Restarts of the gradient-based acquisition optimization (8).
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.
    """

    min_observations = 2
    accepts_pending = True

    def __init__(
        self,
        dim: int,
        *,
        kernel: Kernel = "matern52-ard",
        fractions_of_outliers: Annotated[Sequence[Probability], MinLen(1)] = tuple(
            FRACTIONS_OF_OUTLIERS
        ),
        prior_outlier_fraction: PositiveFloat = 0.2,
        convex_parameterization: bool = True,
        function_samples: Count = 512,
        raw_samples: Count = 512,
        num_restarts: Count = 8,
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(
            dim,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            seed=seed,
            device=device,
            dtype=dtype,
        )
        check_at_least(1, function_samples=function_samples)
        if not fractions_of_outliers or not all(0.0 <= f <= 1.0 for f in fractions_of_outliers):
            raise ValueError(
                f"`fractions_of_outliers` must be a non-empty list of values in [0, 1], but got {fractions_of_outliers=}."
            )
        if not prior_outlier_fraction > 0.0:
            raise ValueError(
                f"`prior_outlier_fraction` must be positive, but got {prior_outlier_fraction=}."
            )
        make_kernel(kernel, dim)  # validates the name
        self.kernel = kernel
        self.fractions_of_outliers = tuple(float(f) for f in fractions_of_outliers)
        self.prior_outlier_fraction = prior_outlier_fraction
        self.convex_parameterization = convex_parameterization
        self.function_samples = function_samples

    def _ask(self, n: int) -> Suggestion:
        t0 = time.perf_counter()
        with torch_seed(self._step_seed("fit")):
            model, fit_info = fit_robust_gp(
                self.train_x,
                -self.train_y,
                kernel=self.kernel,
                fractions_of_outliers=self.fractions_of_outliers,
                prior_outlier_fraction=self.prior_outlier_fraction,
                convex_parameterization=self.convex_parameterization,
            )
        t1 = time.perf_counter()
        sampler = self._sampler(self.function_samples)

        def acquisition() -> qLogNoisyExpectedImprovement:
            # Built inside the seeded block: pruning the baseline draws posterior samples from
            # the global generator. Pruned here, once: qLogNEI's own pruning (`prune_baseline`)
            # would run again on its pruned baseline when `_maximize` sets the pending points
            # (`set_X_pending` rebuilds the baseline), drawing again and maybe dropping more.
            baseline = prune_inferior_points(model, self.train_x)
            return qLogNoisyExpectedImprovement(
                model, X_baseline=baseline, sampler=sampler, prune_baseline=False
            )

        x = self._maximize(acquisition, q=n)
        t2 = time.perf_counter()
        info: dict[str, Any] = {
            "n_outliers": len(fit_info["outliers"]),
            "outliers": fit_info["outliers"],
        }
        if fit_info["fallback"]:
            info["fallback"] = fit_info["fallback"]
        return Suggestion(
            x=x.detach().cpu().numpy(), fit_seconds=t1 - t0, acq_seconds=t2 - t1, info=info
        )
