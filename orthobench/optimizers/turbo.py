r"""TuRBO-1: Bayesian optimization in one adaptive trust region [Eriksson2019turbo]_.

A GP is fitted on the points of the current *run*; candidates are restricted to a box around the
run's best point, with side lengths ``L w_j``, ``w_j`` the GP's ARD lengthscales normalized to
geometric mean 1. The length ``L`` doubles after ``success_tolerance`` consecutive improving
batches (up to ``length_max``) and halves after ``failure_tolerance`` consecutive non-improving
ones; a batch improves when its best value beats the run's best by ``min_improvement |best|``.

When ``L`` falls below ``length_min`` the region has collapsed and TuRBO-1 restarts, as in the
paper: a new run begins with a fresh scrambled Sobol design of as many points as the first
``tell`` (the shared initial design), proposed ``q`` points per ``ask`` (a last batch that
overruns the design's size is all design points too), and the GP of the new run sees only the
new run's points (the old history stays in :attr:`train_x` for the record but no longer
informs the model, so the new run is not pulled back into the collapsed basin). The
restart happens in :meth:`tell`: the ``ask`` after the collapsing ``tell`` already returns the
first restart point, and the counters start again once the restart design has been told.

Candidates come from Thompson sampling (``acquisition="ts"``, the paper's choice: the maximizer
of one joint posterior sample per proposed point over ``n_candidates`` Sobol points of the region,
each perturbing a random subset of the center's coordinates, each with probability
``min(1, 20 / d)``) or from qLogEI [Ament2023logei]_ maximized inside the region. A batch of
``q`` points is, with Thompson sampling, the maximizers of ``q`` joint posterior samples, each
taken among the candidates not yet chosen by an earlier sample (so the points are distinct, as
in the paper's code); with qLogEI, the joint maximizer of the ``q``-point acquisition.
Either way one batch is one success or one failure of the counters.

Default constants are those of [Eriksson2019turbo]_: ``L_init = 0.8``, ``L_min = 2^-7``,
``L_max = 1.6``, ``tau_succ = 3``, ``tau_fail = ceil(max(4, d) / q)`` for batch size ``q``.
(BoTorch's TuRBO tutorial uses ``tau_succ = 10``; set ``success_tolerance`` to match it.)

On a constrained task (``train_c`` has ``m > 0`` columns) TuRBO is SCBO [Eriksson2021scbo]_: the
region is centred at the run's best feasible point or, while the run has none, at its point of
least total violation ``v = sum_i max(c_i, 0)``; a batch succeeds when it improves that incumbent
(a feasible value below the best feasible one by ``min_improvement |best|``, a first feasible
point, or, while none is feasible, a violation below ``(1 - min_improvement)`` times the least).
Each constraint gets its own GP on the run's values; Thompson sampling draws one joint sample of
the objective and constraint GPs per proposed point and takes the best objective sample among the
candidates whose sampled constraints are all ``<= 0``, else the smallest sampled total violation
(BoTorch's ``ConstrainedMaxPosteriorSampling``); ``acquisition="qlogei"`` uses the constrained
qLogEI of :class:`~orthobench.optimizers.botorch_baselines.QLogEI` inside the region.

References:
    .. [Eriksson2019turbo] D. Eriksson, M. Pearce, J. Gardner, R. D. Turner, M. Poloczek.
       Scalable Global Optimization via Local Bayesian Optimization. NeurIPS 2019.
    .. [Ament2023logei] S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy. Unexpected
       Improvements to Expected Improvement for Bayesian Optimization. NeurIPS 2023.
    .. [Eriksson2021scbo] D. Eriksson, M. Poloczek. Scalable Constrained Bayesian Optimization.
       AISTATS 2021.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from botorch.acquisition import qLogExpectedImprovement
from botorch.generation import MaxPosteriorSampling
from botorch.generation.sampling import ConstrainedMaxPosteriorSampling
from botorch.models import ModelListGP, SingleTaskGP
from torch import Tensor
from torch.quasirandom import SobolEngine

from orthobench.config.params import Count, NonNegativeCount, NonNegativeFloat, PositiveFloat
from orthobench.devices import FIT_DEVICES
from orthobench.optimizers.base import Suggestion, check_at_least
from orthobench.optimizers.botorch_baselines import constrained_log_ei
from orthobench.optimizers.gp_base import GPOptimizer
from orthobench.seeding import derive_seed, torch_generator, torch_seed
from orthobench.surrogates.fit import FITS, WarmStarts, fit_model
from orthobench.surrogates.gp import KERNELS
from orthobench.surrogates.theta_algebra import get_theta

ACQUISITIONS: tuple[str, ...] = ("ts", "qlogei")
#: Kernels of the trust-region GP: lengthscales set the region's shape, so not ``linear``.
TURBO_KERNELS: tuple[str, ...] = tuple(k for k in KERNELS if k != "linear")


@dataclass
class TrustRegionState:
    """Length and success/failure counters of one TuRBO run (minimization).

    Args:
        length: Current base side length ``L`` of the region (unit-cube units).
        length_min: A length below this triggers a restart.
        length_max: The length never grows beyond this.
        success_tolerance: Consecutive improving batches that double the length.
        failure_tolerance: Consecutive non-improving batches that halve the length.
        min_improvement: Relative improvement a batch needs to count as a success.
        best_value: Best objective value of the run so far (on a constrained task: of its
            feasible points, ``inf`` while there is none).
        best_violation: Least total constraint violation of the run so far (0 once a point is
            feasible; ``inf`` until a constrained batch is seen).
    """

    length: float
    length_min: float
    length_max: float
    success_tolerance: int
    failure_tolerance: int
    min_improvement: float
    best_value: float = math.inf
    success_counter: int = 0
    failure_counter: int = 0
    restart_triggered: bool = False
    best_violation: float = math.inf

    def observe(self, y: Tensor, c: Tensor | None = None) -> None:
        """Take the batch into the incumbent without counting it (a run's initial design).

        Args:
            y: ``q`` objective values.
            c: ``q x m`` constraint values (None or ``m = 0``: unconstrained).
        """
        if c is None or c.shape[-1] == 0:
            self.best_value = min(self.best_value, y.min().item())
            return
        violation = c.clamp_min(0.0).sum(dim=-1)  # q
        feasible = violation == 0
        if feasible.any():
            self.best_value = min(self.best_value, y[feasible].min().item())
        self.best_violation = min(self.best_violation, violation.min().item())

    def improves(self, y: Tensor, c: Tensor | None = None) -> bool:
        """Whether the batch (``q`` values, ``q x m`` constraints) is a success (see the module)."""
        threshold = self.best_value - self.min_improvement * abs(self.best_value)
        if c is None or c.shape[-1] == 0:
            return y.min().item() < threshold
        violation = c.clamp_min(0.0).sum(dim=-1)  # q
        feasible = violation == 0
        if feasible.any():
            return self.best_violation > 0 or y[feasible].min().item() < threshold
        return violation.min().item() < (1.0 - self.min_improvement) * self.best_violation

    def update(self, y: Tensor, c: Tensor | None = None) -> None:
        """Count the batch ``y`` (``q`` values; on a constrained task with its ``q x m``
        constraints ``c``) as a success or failure and resize the region."""
        if self.improves(y, c):
            self.success_counter += 1
            self.failure_counter = 0
        else:
            self.success_counter = 0
            self.failure_counter += 1
        if self.success_counter == self.success_tolerance:
            self.length = min(2.0 * self.length, self.length_max)
            self.success_counter = 0
        elif self.failure_counter >= self.failure_tolerance:
            self.length /= 2.0
            self.failure_counter = 0
        self.observe(y, c)
        self.restart_triggered = self.length < self.length_min


class _DistinctMaximizers:
    """Mixin for BoTorch's (constrained) max-posterior sampling: the maximizer of each sample in
    turn among the candidates no earlier sample took, as the paper's code selects a batch.

    (BoTorch's ``replacement=False`` returns the top ``num_samples`` candidates of the *last*
    sample alone, one posterior sample for the whole batch.)
    """

    def maximize_samples(self, X: Tensor, samples: Tensor, num_samples: int = 1) -> Tensor:  # noqa: N803 -- BoTorch's name
        scores = self.objective(samples, X=X)  # num_samples x N
        taken = torch.zeros(scores.shape[-1], dtype=torch.bool, device=scores.device)
        chosen = []
        for row in scores:
            free = (~taken).nonzero().squeeze(-1)
            best = free[row[free].argmax()]
            taken[best] = True
            chosen.append(best)
        return X[torch.stack(chosen)]


class _MaxPosteriorSampling(_DistinctMaximizers, MaxPosteriorSampling):
    pass


class _ConstrainedMaxPosteriorSampling(_DistinctMaximizers, ConstrainedMaxPosteriorSampling):
    pass


class TuRBO(GPOptimizer):
    """TuRBO-1: a GP in one trust region that resizes on success/failure and restarts on collapse.

    Args:
        dim: Number of search dimensions ``d``.
        acquisition: ``"ts"`` (Thompson sampling, the paper's) or ``"qlogei"``.
        kernel: GP kernel name with lengthscales (not ``"linear"``); ``-ard`` shapes the region.
        length_init: Side length of a new run's region (paper: 0.8).
        length_min: Collapse threshold that triggers a restart (paper: ``2^-7``).
        length_max: Largest side length (paper: 1.6).
        success_tolerance: Improving batches in a row that double the length (paper: 3).
        failure_tolerance: Non-improving batches in a row that halve the length; 0 (default)
            uses the paper's ``ceil(max(4, d) / q)`` for a batch of ``q`` points.
        min_improvement: Relative improvement of the run's best that counts as a success.
        n_candidates: Thompson-sampling candidates; 0 (default) uses the paper's code's
            ``min(5000, max(2000, 200 d))``.
        function_samples: QMC function samples of qLogEI (as the ``qlogei`` baseline: 512).
        raw_samples: Raw samples of qLogEI's multistart initialization (512).
        num_restarts: Gradient restarts of qLogEI's optimization (8).
        fit: GP fit, ``"botorch"`` (``fit_gpytorch_mll``, default) or ``"fast"``
            (:func:`orthobench.surrogates.fit.fit_fast`, warm-started from the previous fit).
        fit_device: Where the GP is fitted (:data:`orthobench.devices.FIT_DEVICES`; ``auto``: on
            the CPU for small GPs, :func:`orthobench.devices.fit_device`), recorded per step
            as ``fit_device``; the region and the acquisition use ``device``.
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.

    State beyond the history (:meth:`state_dict`): the trust region (length, counters, best
    value), the restart count, where the current run begins and how many restart-design points
    were drawn; with ``fit="fast"``, the last fitted theta (the warm start).
    """

    handles_constraints: ClassVar[bool] = True

    def __init__(
        self,
        dim: int,
        *,
        acquisition: Literal[ACQUISITIONS] = "ts",
        kernel: Literal[TURBO_KERNELS] = "matern52-ard",
        length_init: PositiveFloat = 0.8,
        length_min: PositiveFloat = 0.5**7,
        length_max: PositiveFloat = 1.6,
        success_tolerance: Count = 3,
        failure_tolerance: NonNegativeCount = 0,
        min_improvement: NonNegativeFloat = 1e-3,
        n_candidates: NonNegativeCount = 0,
        function_samples: Count = 512,
        raw_samples: Count = 512,
        num_restarts: Count = 8,
        fit: Literal[FITS] = "botorch",
        fit_device: Literal[FIT_DEVICES] = "auto",
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(
            dim,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            fit_device=fit_device,
            seed=seed,
            device=device,
            dtype=dtype,
        )
        if acquisition not in ACQUISITIONS:
            raise ValueError(
                f"`acquisition` must be one of {ACQUISITIONS}, but got {acquisition=}."
            )
        if kernel not in TURBO_KERNELS:
            raise ValueError(f"`kernel` must be one of {TURBO_KERNELS}, but got {kernel=}.")
        TuRBO.check_params(length_init=length_init, length_min=length_min, length_max=length_max)
        check_at_least(
            1,
            success_tolerance=success_tolerance,
            function_samples=function_samples,
        )
        check_at_least(0, failure_tolerance=failure_tolerance, n_candidates=n_candidates)
        if not 0.0 <= min_improvement < math.inf:  # NaN too: every batch would be a failure
            raise ValueError(
                f"`min_improvement` must be a finite float >= 0, but got {min_improvement=}."
            )
        self.acquisition = acquisition
        self.kernel = kernel
        self.length_init = length_init
        self.length_min = length_min
        self.length_max = length_max
        self.success_tolerance = success_tolerance
        self.failure_tolerance = failure_tolerance
        self.min_improvement = min_improvement
        self.n_candidates = n_candidates or min(5000, max(2000, 200 * dim))
        self.function_samples = function_samples
        self.fit = fit
        self._warm_starts = WarmStarts(fit)
        self.state = self._new_state()
        self.restarts = 0
        self._run_start = 0  # index in the history where the current run begins
        self._design_size = 0  # points of a restart design (set by the first tell)
        self._restart_design: SobolEngine | None = None
        self._told_c: np.ndarray | None = None  # the constraints of the tell in progress

    @staticmethod
    def check_params(
        *, length_init: float, length_min: float, length_max: float, **params: Any
    ) -> None:
        """TuRBO's rule over several parameters
        (:meth:`~orthobench.optimizers.base.Optimizer.check_params`): a run's region starts
        above the length that collapses it and within the largest length; and the multistart's
        rule (:meth:`GPOptimizer.check_params`) where ``raw_samples`` and ``num_restarts`` are
        given."""
        if {"raw_samples", "num_restarts"} <= params.keys():
            GPOptimizer.check_params(**params)
        if not 0.0 < length_min < length_init <= length_max:
            raise ValueError(
                f"`0 < length_min < length_init <= length_max` must hold, but got ({length_min=}, "
                f"{length_init=}, {length_max=})."
            )

    @property
    def max_batch(self) -> int | None:
        """Thompson sampling picks distinct candidates, so at most ``n_candidates`` per ask;
        qLogEI has no limit (None)."""
        return self.n_candidates if self.acquisition == "ts" else None

    @property
    def batch_advice(self) -> str:
        return "raise n_candidates to at least q, or set acquisition: qlogei"

    def _new_state(self) -> TrustRegionState:
        return TrustRegionState(
            length=self.length_init,
            length_min=self.length_min,
            length_max=self.length_max,
            success_tolerance=self.success_tolerance,
            failure_tolerance=self.failure_tolerance,
            min_improvement=self.min_improvement,
        )

    @property
    def _run_size(self) -> int:
        return self.train_y.shape[0] - self._run_start

    def tell(self, x: np.ndarray, y: np.ndarray, constraints: np.ndarray | None = None) -> None:
        """:meth:`Optimizer.tell`; the constraints also count towards the trust region."""
        self._told_c = None if constraints is None else np.atleast_2d(constraints)
        try:
            super().tell(x, y, constraints)
        finally:
            self._told_c = None

    def _on_tell(self, x: Tensor, y: Tensor) -> None:
        self._warm_starts.advance()
        c = None if self._told_c is None else torch.as_tensor(self._told_c).to(y)  # q x m
        if self._design_size == 0:
            self._design_size = y.shape[0]
        if self._run_size < self._design_size:
            # Still the run's initial design: it sets the incumbent, it is no success or failure.
            self.state.observe(y, c)
            return
        self.state.failure_tolerance = self.failure_tolerance or math.ceil(
            max(4.0, self.dim) / y.shape[0]
        )
        self.state.update(y, c)
        if self.state.restart_triggered:
            self.restarts += 1
            self._run_start = self.train_y.shape[0] + y.shape[0]
            self.state = self._new_state()
            self._restart_design = self._new_restart_design()

    def _new_restart_design(self) -> SobolEngine:
        return SobolEngine(
            self.dim,
            scramble=True,
            seed=derive_seed(self.seed, "turbo-restart", self.restarts) % (2**31),
        )

    def _info(self, phase: str) -> dict[str, Any]:
        return {
            "phase": phase,
            "length": self.state.length,
            "restarts": self.restarts,
            "success_counter": self.state.success_counter,
            "failure_counter": self.state.failure_counter,
        }

    def state_dict(self) -> dict[str, Any]:
        design = self._restart_design
        return {
            **super().state_dict(),
            "trust_region": asdict(self.state),
            "restarts": self.restarts,
            "run_start": self._run_start,
            "design_size": self._design_size,
            "restart_design_drawn": None if design is None else int(design.num_generated),
            **self._warm_starts.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.state = TrustRegionState(**state["trust_region"])
        self.restarts = int(state["restarts"])
        self._run_start = int(state["run_start"])
        self._design_size = int(state["design_size"])
        drawn = state["restart_design_drawn"]
        self._restart_design = (
            None if drawn is None else self._new_restart_design().fast_forward(int(drawn))
        )
        self._warm_starts.load_state_dict(state)

    def _ask(self, n: int) -> Suggestion:
        if self._restart_design is not None and self._run_size < self._design_size:
            x = self._restart_design.draw(n, dtype=self.dtype)
            return Suggestion(x=x.numpy(), info=self._info("restart-design"))
        x_run, y_run = self.train_x[self._run_start :], self.train_y[self._run_start :]
        c_run = self.train_c[self._run_start :]  # t_run x m
        where = self._fit_device(x_run.shape[0])
        t0 = time.perf_counter()
        models = []
        with torch_seed(self._step_seed("fit")):
            for i, target in enumerate([-y_run, *c_run.T]):
                gp, gp_info = fit_model(
                    x_run.to(where),
                    target.to(where),
                    self.kernel,
                    fit=self.fit,
                    warm_start=self._warm_starts.get(i),
                )
                models.append(gp.to(self.device))
                if i == 0:
                    fit_info = gp_info
                else:
                    fit_info = {
                        "grad_norm": max(fit_info["grad_norm"], gp_info["grad_norm"]),
                        "stationary": fit_info["stationary"] and gp_info["stationary"],
                        "fallback": "; ".join(
                            f for f in (fit_info["fallback"], gp_info["fallback"]) if f
                        ),
                    }
        model, constraint_models = models[0], models[1:]
        t1 = time.perf_counter()
        self._warm_starts.record([get_theta(gp) for gp in models])
        center = x_run[self.center_index(y_run, c_run)]
        lower, upper = self.region(model, center)
        if self.acquisition == "ts":
            x = self._thompson(model, center, lower, upper, n, constraint_models)
        else:
            x = self._qlogei(model, y_run, lower, upper, n, constraint_models, c_run)
        t2 = time.perf_counter()
        info = self._info("trust-region")
        info["region_volume"] = (upper - lower).prod().item()
        info["fit_device"] = where.type
        info["fit_grad_norm"] = fit_info["grad_norm"]
        info["fit_stationary"] = fit_info["stationary"]
        if fit_info["fallback"]:
            info["fallback"] = fit_info["fallback"]
        return Suggestion(
            x=x.detach().cpu().numpy(), fit_seconds=t1 - t0, acq_seconds=t2 - t1, info=info
        )

    @staticmethod
    def center_index(y_run: Tensor, c_run: Tensor) -> int:
        """Index of the region's center in the run: its best point (``y_run``: ``t``), or with
        constraints (``c_run``: ``t x m``, ``m > 0``) its best feasible point, else the point of
        least total violation ``sum_i max(c_i, 0)``."""
        if c_run.shape[-1] == 0:
            return int(y_run.argmin())
        violation = c_run.clamp_min(0.0).sum(dim=-1)  # t
        feasible = violation == 0
        if feasible.any():
            return int(torch.where(feasible, y_run, math.inf).argmin())
        return int(violation.argmin())

    def region(self, model: SingleTaskGP, center: Tensor) -> tuple[Tensor, Tensor]:
        """Bounds ``(lower, upper)`` (each ``d``) of the trust region around ``center`` (``d``).

        Side ``j`` is ``L w_j`` with ``w = lengthscales / geomean(lengthscales)``, clipped to the cube.
        """
        lengthscale = model.covar_module.lengthscale.detach().reshape(-1).to(center)
        weights = lengthscale / lengthscale.log().mean().exp()
        half = 0.5 * self.state.length * weights.expand(self.dim)
        return (center - half).clamp(0.0, 1.0), (center + half).clamp(0.0, 1.0)

    def _thompson(
        self,
        model: SingleTaskGP,
        center: Tensor,
        lower: Tensor,
        upper: Tensor,
        n: int,
        constraint_models: list[SingleTaskGP] | None = None,
    ) -> Tensor:
        """The maximizers of ``n`` joint posterior samples of ``-f`` over perturbed Sobol candidates
        (with ``constraint_models``: among the candidates sampled feasible, SCBO's rule)."""
        sobol = SobolEngine(self.dim, scramble=True, seed=self._step_seed("ts-sobol") % (2**31))
        points = lower + (upper - lower) * sobol.draw(self.n_candidates, dtype=self.dtype).to(
            self.device
        )
        # Perturb only some coordinates of the center: in high d a full Sobol point is far from it.
        gen = torch_generator(self.seed, self._asks, "ts-mask", device=self.device)
        mask = torch.rand(self.n_candidates, self.dim, generator=gen, device=self.device) <= min(
            1.0, 20.0 / self.dim
        )
        no_dim = ~mask.any(dim=-1)
        mask[
            no_dim, torch.randint(self.dim, (int(no_dim.sum()),), generator=gen, device=self.device)
        ] = True
        candidates = torch.where(mask, points, center)
        if constraint_models:
            sampling = _ConstrainedMaxPosteriorSampling(
                model=model, constraint_model=ModelListGP(*constraint_models), replacement=False
            )
        else:
            sampling = _MaxPosteriorSampling(model=model, replacement=False)
        with torch_seed(self._step_seed("ts-sample")), torch.no_grad():
            return sampling(candidates, num_samples=n)

    def _qlogei(
        self,
        model: SingleTaskGP,
        y_run: Tensor,
        lower: Tensor,
        upper: Tensor,
        n: int,
        constraint_models: list[SingleTaskGP] | None = None,
        c_run: Tensor | None = None,
    ) -> Tensor:
        """qLogEI of ``-f`` over the run's best (with constraints: the constrained qLogEI of
        :class:`~orthobench.optimizers.botorch_baselines.QLogEI` on the run's points,
        :func:`~orthobench.optimizers.botorch_baselines.constrained_log_ei`), maximized inside
        the region -> ``n x d``."""
        sampler = self._sampler(self.function_samples)
        if not constraint_models:
            acqf = qLogExpectedImprovement(model, best_f=(-y_run).max(), sampler=sampler)
            return self._maximize(acqf, q=n, bounds=torch.stack([lower, upper]))
        acqf = constrained_log_ei(
            ModelListGP(model, *constraint_models), model.train_inputs[0], y_run, c_run, sampler
        )
        return self._maximize(acqf, q=n, bounds=torch.stack([lower, upper]))
