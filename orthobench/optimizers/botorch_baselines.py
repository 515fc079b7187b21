"""BoTorch acquisition baselines on a GP surrogate: qLogEI [Ament2023logei]_ and qUCB.

Both fit a ``SingleTaskGP`` (kernel by name, :mod:`orthobench.surrogates.gp`) on the history,
then maximize a Monte Carlo acquisition with ``optimize_acqf``. Both acquisitions are q-batch
ones: an ``ask(q)`` maximizes the acquisition of the whole ``q x d`` batch jointly
(``optimize_acqf(q=q)``), which values the best point of each joint posterior sample of the
batch, so a point adds value only where the others do not; at ``q = 1`` it is the one-point
acquisition. Points still being evaluated (``ask(n, pending=P)``) are the acquisition's
``X_pending``: BoTorch's MC acquisitions value each batch jointly with them. Their MC noise comes
from function samples (a ``SobolQMCNormalSampler`` re-seeded each step), not from
surrogate-parameter samples as OrthoBO's does (docs/design.md, "Like-for-like baseline").

On a constrained task (``train_c`` has ``m > 0`` columns) :class:`QLogEI` fits one GP per
outcome -- the objective on ``-y``, each constraint on its values as observed -- into a
``ModelListGP`` and weights the improvement over the best feasible value by each constraint
sample's feasibility (``c_i <= 0``), as BoTorch's constrained ``qLogExpectedImprovement``
[Gardner2014constrained]_; :class:`QUCB` stays unconstrained: it models the objective alone,
also where it is told constraint values (the loop refuses it a constrained task).

References:
    .. [Ament2023logei] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
    .. [Gardner2014constrained] J. Gardner, M. Kusner, Z. Xu, K. Weinberger, J. Cunningham.
       Bayesian Optimization with Inequality Constraints. ICML 2014.
"""

from __future__ import annotations

import math
import time
from abc import abstractmethod
from typing import Any, ClassVar, Literal

import torch
from botorch.acquisition import AcquisitionFunction, qLogExpectedImprovement, qUpperConfidenceBound
from botorch.acquisition.objective import GenericMCObjective
from botorch.acquisition.utils import get_infeasible_cost
from botorch.models import ModelListGP, SingleTaskGP
from botorch.sampling import SobolQMCNormalSampler
from torch import Tensor

from orthobench import devices
from orthobench.config.params import Count, Kernel, NonNegativeFloat
from orthobench.devices import ACQ_DEVICES, FIT_DEVICES
from orthobench.optimizers.base import Suggestion, check_at_least
from orthobench.optimizers.gp_base import GPOptimizer
from orthobench.seeding import torch_seed
from orthobench.surrogates.fit import FITS, WarmStarts, fit_model
from orthobench.surrogates.theta_algebra import get_theta


class _GPAcquisitionOptimizer(GPOptimizer):
    """Fit a GP on ``-y`` (BoTorch maximizes), build an MC acquisition, maximize it by multistart.

    With ``fit="fast"`` the GP's last fitted theta is the warm start of the next fit and part of
    :meth:`state_dict`. The fit runs on :meth:`GPOptimizer._fit_device`, the acquisition on
    :func:`orthobench.devices.acq_device`'s device (both recorded per step: ``fit_device``,
    ``acq_device``).
    """

    # Both acquisitions are BoTorch MC ones, which append ``X_pending`` to every batch.
    accepts_pending: ClassVar[bool] = True

    def __init__(
        self,
        dim: int,
        *,
        kernel: str,
        function_samples: int,
        fit: str,
        acq_device: str = "auto",
        **kwargs,
    ) -> None:
        super().__init__(dim, **kwargs)
        check_at_least(1, function_samples=function_samples)
        devices.acq_device(acq_device, self.device, 0)  # validates the rule before any data
        self.acq_device = acq_device
        self.kernel = kernel
        self.function_samples = function_samples
        self.fit = fit
        self._warm_starts = WarmStarts(fit)

    def _on_tell(self, x: Tensor, y: Tensor) -> None:
        self._warm_starts.advance()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), **self._warm_starts.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._warm_starts.load_state_dict(state)

    @abstractmethod
    def _acquisition(
        self, model: SingleTaskGP | ModelListGP, sampler: SobolQMCNormalSampler
    ) -> AcquisitionFunction:
        """The acquisition to maximize on the fitted model: a ``SingleTaskGP`` of ``-y``, or on a
        constrained history of an optimizer that :attr:`handles_constraints` a ``ModelListGP``
        of ``-y`` and the ``m`` constraints, in that order."""

    def _fit(self, where: torch.device) -> tuple[SingleTaskGP | ModelListGP, dict[str, Any]]:
        """Fit the GP of ``-y`` and, on a constrained history, one GP per constraint column.

        Returns the model (a ``ModelListGP`` of ``1 + m`` outputs when ``m > 0`` and the
        optimizer :attr:`handles_constraints`, else the objective's GP) and the fit info
        (the largest gradient norm, stationary only if every fit is, fallbacks joined).
        """
        # An optimizer that does not handle constraints (QUCB) searches the objective alone.
        constraints = list(self.train_c.T) if self.handles_constraints else []
        targets = [-self.train_y, *constraints]  # each t
        models, infos = [], []
        for i, target in enumerate(targets):
            model, info = fit_model(
                self.train_x.to(where),
                target.to(where),
                self.kernel,
                fit=self.fit,
                warm_start=self._warm_starts.get(i),
            )
            models.append(model)
            infos.append(info)
        if len(models) == 1:
            return models[0], infos[0]
        fallbacks = [
            f"outcome {i}: {info['fallback']}" for i, info in enumerate(infos) if info["fallback"]
        ]
        return ModelListGP(*models), {
            "grad_norm": max(info["grad_norm"] for info in infos),
            "stationary": all(info["stationary"] for info in infos),
            "fallback": "; ".join(fallbacks),
        }

    def _ask(self, n: int) -> Suggestion:
        where = self._fit_device(self.train_x.shape[0])
        acq_where = devices.acq_device(self.acq_device, self.device, self.train_x.shape[0])
        with torch_seed(self._step_seed("fit")):
            t0 = time.perf_counter()
            model, fit_info = self._fit(where)
            model = model.to(acq_where)
            t1 = time.perf_counter()
        submodels = model.models if isinstance(model, ModelListGP) else [model]
        self._warm_starts.record([get_theta(m) for m in submodels])
        acqf = self._acquisition(model, self._sampler(self.function_samples))
        candidate = self._maximize(acqf, q=n, bounds=self._unit_bounds().to(acq_where))
        t2 = time.perf_counter()
        return Suggestion(
            x=candidate.detach().cpu().numpy(),
            fit_seconds=t1 - t0,
            acq_seconds=t2 - t1,
            info={
                "fit_device": where.type,
                "acq_device": acq_where.type,
                "fit_grad_norm": fit_info["grad_norm"],
                "fit_stationary": fit_info["stationary"],
                **({"fallback": fit_info["fallback"]} if fit_info["fallback"] else {}),
            },
        )


class QLogEI(_GPAcquisitionOptimizer):
    r"""GP + qLogExpectedImprovement, maximized with ``optimize_acqf`` (jointly over a ``q``-batch).

    On a constrained history (``m > 0``) the acquisition is BoTorch's constrained qLogEI on a
    ``ModelListGP`` of ``-y`` and the ``m`` constraints: per joint sample ``Z`` (``... x q x
    (1 + m)``), the improvement ``max_j (Z_j0 - best_f)^+`` with each point's improvement
    weighted by ``prod_i sigmoid(-Z_ji / (eta s_i))`` (feasible where ``Z_ji <= 0``; ``s_i``
    the standard deviation of constraint ``i``'s observed values, so ``eta`` is relative to its
    scale, as the standardized outcomes of OrthoBO's constrained EI are), and ``best_f``
    the best feasible ``-y``; with no feasible observation, a value below every ``-y`` and the
    GP's 6-sigma lower bound on the told points (BoTorch's ``get_infeasible_cost``), so the
    acquisition then seeks feasibility first.

    Args:
        dim: Number of search dimensions.
        kernel: GP kernel name (see :data:`orthobench.surrogates.gp.KERNELS`).
        function_samples: QMC function samples of the acquisition (paper: 512).
        raw_samples: Raw samples for the multistart initialization (paper: 512).
        num_restarts: Restarts of the gradient-based acquisition optimization (paper: 8).
        fit: GP fit, ``"botorch"`` (``fit_gpytorch_mll``, default) or ``"fast"``
            (:func:`orthobench.surrogates.fit.fit_fast`, warm-started from the previous step's fit).
        fit_device: Where the GP is fitted (:data:`orthobench.devices.FIT_DEVICES`; ``auto``: on
            the CPU for small GPs, :func:`orthobench.devices.fit_device`).
        acq_device: Where the acquisition is maximized (:data:`orthobench.devices.ACQ_DEVICES`;
            ``auto``: on the CPU for small GPs, :func:`orthobench.devices.acq_device`).
    """

    handles_constraints: ClassVar[bool] = True

    def __init__(
        self,
        dim: int,
        *,
        kernel: Kernel = "matern52-ard",
        function_samples: Count = 512,
        raw_samples: Count = 512,
        num_restarts: Count = 8,
        fit: Literal[FITS] = "botorch",
        fit_device: Literal[FIT_DEVICES] = "auto",
        acq_device: Literal[ACQ_DEVICES] = "auto",
        **kwargs,
    ) -> None:
        super().__init__(
            dim,
            kernel=kernel,
            function_samples=function_samples,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            fit=fit,
            fit_device=fit_device,
            acq_device=acq_device,
            **kwargs,
        )

    def _acquisition(
        self, model: SingleTaskGP | ModelListGP, sampler: SobolQMCNormalSampler
    ) -> AcquisitionFunction:
        if not isinstance(model, ModelListGP):
            best_f = (-self.train_y).max().to(model.train_targets.device)
            return qLogExpectedImprovement(model, best_f=best_f, sampler=sampler)
        return constrained_log_ei(model, self.train_x, self.train_y, self.train_c, sampler)


def constrained_log_ei(
    model: ModelListGP, x: Tensor, y: Tensor, c: Tensor, sampler: SobolQMCNormalSampler
) -> qLogExpectedImprovement:
    """BoTorch's constrained qLogEI of :class:`QLogEI` (its docstring has the formula) on
    ``model``, a ``ModelListGP`` of ``-y`` and the ``m`` constraints fitted on ``x`` (``t x d``),
    ``y`` (``t``) and ``c`` (``t x m``); TuRBO's ``acquisition="qlogei"`` takes it on its run."""
    device = model.models[0].train_targets.device
    m = c.shape[-1]
    feasible = (c <= 0).all(dim=-1)  # t
    if feasible.any():
        best_f = (-y[feasible]).max()
    else:
        with torch.no_grad():
            lower = -get_infeasible_cost(x.to(device), model.models[0]).squeeze()
        best_f = torch.minimum(lower.to(y), (-y).min())
    # Each constraint in units of its observed spread: BoTorch's eta (1e-3) is a width in
    # the constraint's units, so on the pressure vessel's (values up to 1e5) the smoothed
    # indicator is a step with no gradient and L-BFGS fails; scaling keeps feasibility.
    scales = c.std(dim=0).clamp_min(1e-9).tolist() if len(c) > 1 else [1.0] * m
    return qLogExpectedImprovement(
        model,
        best_f=best_f.to(device),
        sampler=sampler,
        objective=GenericMCObjective(lambda Z, X=None: Z[..., 0]),
        constraints=[
            lambda Z, i=i, scale=scales[i - 1]: Z[..., i] / scale for i in range(1, m + 1)
        ],
    )


class QUCB(_GPAcquisitionOptimizer):
    """GP + qUpperConfidenceBound, maximized with ``optimize_acqf``.

    The MC form of UCB: the mean over function samples ``f`` of
    ``max_j (mu_j + sqrt(beta * pi / 2) |f_j - mu_j|)`` over the ``q`` points ``j`` of the batch
    (at ``q = 1``, in expectation the analytic ``mu + sqrt(beta) sigma``), with the seeded
    sampler of :meth:`~orthobench.optimizers.gp_base.GPOptimizer._sampler` and the same ``beta``
    at every ``q``.

    Args:
        dim: Number of search dimensions.
        beta: Exploration weight.
        kernel: GP kernel name (see :data:`orthobench.surrogates.gp.KERNELS`).
        function_samples: QMC function samples of the acquisition.
        raw_samples: Raw samples for the multistart initialization.
        num_restarts: Restarts of the gradient-based acquisition optimization.
        fit: GP fit, ``"botorch"`` (default) or ``"fast"`` (as :class:`QLogEI`).
        fit_device: Where the GP is fitted (as :class:`QLogEI`).
        acq_device: Where the acquisition is maximized (as :class:`QLogEI`).
    """

    def __init__(
        self,
        dim: int,
        *,
        beta: NonNegativeFloat = 0.2,
        kernel: Kernel = "matern52-ard",
        function_samples: Count = 512,
        raw_samples: Count = 512,
        num_restarts: Count = 8,
        fit: Literal[FITS] = "botorch",
        fit_device: Literal[FIT_DEVICES] = "auto",
        acq_device: Literal[ACQ_DEVICES] = "auto",
        **kwargs,
    ) -> None:
        if not 0.0 <= beta < math.inf:  # NaN too: every acquisition value would be NaN
            raise ValueError(f"`beta` must be a finite float >= 0, but got {beta=}.")
        super().__init__(
            dim,
            kernel=kernel,
            function_samples=function_samples,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            fit=fit,
            fit_device=fit_device,
            acq_device=acq_device,
            **kwargs,
        )
        self.beta = beta

    def _acquisition(
        self, model: SingleTaskGP, sampler: SobolQMCNormalSampler
    ) -> AcquisitionFunction:
        return qUpperConfidenceBound(model, beta=self.beta, sampler=sampler)
