"""The :class:`GPOptimizer` base: acquisition-maximization settings and the seeded ``optimize_acqf``.

Every GP optimizer maximizes its acquisition with BoTorch's ``optimize_acqf`` (``raw_samples``
initial points, ``num_restarts`` gradient restarts). The draws of that multistart come from
torch's global generator, so they are seeded per step here (``(seed, ask, "acq")``); MC
acquisitions over function samples get their ``SobolQMCNormalSampler`` seeded per step too
(``(seed, ask, "sampler")``).

GP fits run on the device that :func:`orthobench.devices.fit_device` picks for the number of
training points (``fit_device``: on the CPU for small GPs by default); the fitted model is then
moved to the optimizer's device for the acquisition, and each step records where it was fitted.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.exceptions import CandidateGenerationError
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_samples
from torch import Tensor

from orthobench import devices
from orthobench.exceptions import NumericsWarning, one_line
from orthobench.optimizers.base import Optimizer, Suggestion, check_at_least
from orthobench.seeding import torch_seed

# What a non-finite acquisition makes BoTorch's multistart raise (torch.multinomial's "probability
# tensor contains either `inf`, `nan` or element < 0", NaN gradients, scipy's line search).
_MAXIMIZE_ERRORS = (RuntimeError, ValueError, CandidateGenerationError)


class GPOptimizer(Optimizer):
    """Base of the optimizers that maximize an acquisition with ``optimize_acqf``.

    Args:
        dim: Number of search dimensions ``d``.
        raw_samples: Raw samples of ``optimize_acqf``'s multistart initialization (paper: 512).
        num_restarts: Gradient restarts of the acquisition optimization (paper: 8).
        fit_device: Where GP fits run, one of :data:`orthobench.devices.FIT_DEVICES`
            (``auto``: the CPU up to :data:`orthobench.devices.CPU_FIT_MAX_POINTS` points).
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.
    """

    surrogate = "gp"

    def __init__(
        self,
        dim: int,
        *,
        raw_samples: int = 512,
        num_restarts: int = 8,
        fit_device: str = "auto",
        **kwargs,
    ) -> None:
        super().__init__(dim, **kwargs)
        check_at_least(1, raw_samples=raw_samples, num_restarts=num_restarts)
        GPOptimizer.check_params(raw_samples=raw_samples, num_restarts=num_restarts)
        self.raw_samples = raw_samples
        self.num_restarts = num_restarts
        # Validates the rule before any data arrives.
        devices.fit_device(fit_device, self.device, 0)
        self.fit_device = fit_device
        self._acq_fallbacks: list[str] = []  # of the current ask (see `_maximize`)

    @staticmethod
    def check_params(*, raw_samples: int, num_restarts: int, **_: Any) -> None:
        """The multistart's rule (:meth:`~orthobench.optimizers.base.Optimizer.check_params`):
        ``optimize_acqf`` starts its ``num_restarts`` climbs from as many distinct points of the
        ``raw_samples``; with fewer it raises at every step, and each step fell back to a Sobol'
        point."""
        if raw_samples < num_restarts:
            raise ValueError(
                f"`raw_samples >= num_restarts` must hold, but got ({raw_samples=}, "
                f"{num_restarts=})."
            )

    def _unit_bounds(self) -> Tensor:
        """``2 x d`` bounds of the unit cube on the optimizer's device and dtype."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(self.train_x)

    def _fit_device(self, n: int) -> torch.device:
        """Where this step's GP on ``n`` training points is fitted (:func:`devices.fit_device`)."""
        return devices.fit_device(self.fit_device, self.device, n)

    def _sampler(self, function_samples: int) -> SobolQMCNormalSampler:
        """QMC base samples of an MC acquisition over function samples, seeded per step."""
        return SobolQMCNormalSampler(
            sample_shape=torch.Size([function_samples]), seed=self._step_seed("sampler") % (2**31)
        )

    def ask(self, n: int = 1, pending: np.ndarray | None = None) -> Suggestion:
        """:meth:`Optimizer.ask`, with the fallbacks of :meth:`_maximize` added to ``info``."""
        self._acq_fallbacks = []
        suggestion = super().ask(n, pending)
        if self._acq_fallbacks:
            taken = [suggestion.info.get("fallback"), *self._acq_fallbacks]
            suggestion.info["fallback"] = "; ".join(f for f in taken if f)
        return suggestion

    def _maximize(
        self,
        acqf: AcquisitionFunction | Callable[[], AcquisitionFunction],
        *,
        q: int = 1,
        bounds: Tensor | None = None,
        options: dict[str, Any] | None = None,
        batch_initial_conditions: Tensor | None = None,
        return_best_only: bool = True,
        screen: AcquisitionFunction | None = None,
        sequential: bool = False,
    ) -> Tensor:
        """``q x d`` maximizer of ``acqf`` over ``bounds`` (default: the unit cube), seeded per step.

        With ``batch_initial_conditions`` (``r x q x d``) the multistart runs from those ``r``
        points instead of screening ``raw_samples``; with ``return_best_only=False`` every
        restart's result comes back (``num_restarts x q x d``; one ``q x d`` point after a
        fallback). With ``screen``, the ``raw_samples`` are scored by ``screen`` instead of
        ``acqf`` (e.g. the same acquisition on fewer draws) to pick the ``num_restarts`` starting
        points, and the restarts climb ``acqf``; as with BoTorch's own starts, restarts that end
        with an ``OptimizationWarning`` are run once more from newly screened raw samples. With
        ``sequential`` (``q > 1``, an acquisition that takes ``X_pending``), the batch is
        sequential greedy: ``q`` maximizations of one point, the earlier ones pending.

        ``acqf`` may be a function that builds the acquisition: it is then called inside the seeded
        block, for acquisitions whose construction draws from the global generator (qLogNEI's
        pruning of its baseline).

        The ask's pending points (:attr:`pending`, ``p x d``) are set as the acquisition's
        ``X_pending`` before the multistart, so each ``q x d`` candidate batch is valued jointly
        with them (BoTorch's MC acquisitions append them to every batch); a sequential batch
        keeps them pending under its own earlier points. An optimizer whose acquisition ignores
        ``X_pending`` (the analytic ones) must not accept pending points.

        When the acquisition cannot be built or maximized (e.g. non-finite values under extreme
        observation noise break ``optimize_acqf``'s starting-point sampling), the best of
        ``raw_samples`` scrambled Sobol' candidates by acquisition value is returned instead, or
        the first of them when no value is finite; the fallback is warned about
        (:class:`~orthobench.exceptions.NumericsWarning`) and recorded in the suggestion's
        ``fallback``.
        """
        bounds = self._unit_bounds() if bounds is None else bounds
        with torch_seed(self._step_seed("acq")):
            try:
                acqf = acqf if isinstance(acqf, AcquisitionFunction) else acqf()
                if self.pending is not None:
                    acqf.set_X_pending(self.pending.to(bounds))
                starts = batch_initial_conditions
                candidate, _ = optimize_acqf(
                    acqf,
                    bounds=bounds,
                    q=q,
                    num_restarts=self.num_restarts if starts is None else starts.shape[0],
                    raw_samples=self.raw_samples if starts is None else None,
                    options=options,
                    batch_initial_conditions=starts,
                    return_best_only=return_best_only,
                    ic_generator=None if screen is None else _screened_starts(screen),
                    sequential=sequential,
                )
            except _MAXIMIZE_ERRORS as err:
                reason = one_line(f"{err.__class__.__name__}: {err}", limit=160)
            else:
                return candidate
        candidate, fallback = self._fallback_candidate(acqf, bounds, q)
        fallback = f"acquisition maximization failed ({reason}); took {fallback}"
        warnings.warn(f"{type(self).__name__}: {fallback}.", NumericsWarning, stacklevel=2)
        self._acq_fallbacks.append(fallback)
        return candidate

    def _fallback_candidate(
        self, acqf: AcquisitionFunction | Callable[[], AcquisitionFunction], bounds: Tensor, q: int
    ) -> tuple[Tensor, str]:
        """``q x d`` best of ``raw_samples`` Sobol' candidates by ``acqf`` and what was taken."""
        candidates = draw_sobol_samples(
            bounds, n=self.raw_samples, q=q, seed=self._step_seed("acq-fallback") % (2**31)
        )  # raw_samples x q x d
        values = None
        if isinstance(acqf, AcquisitionFunction):
            with torch.no_grad(), contextlib.suppress(*_MAXIMIZE_ERRORS):
                values = acqf(candidates)  # raw_samples
        if values is None or not torch.isfinite(values).any():
            return candidates[0], "a Sobol' point (no finite acquisition value)"
        best = torch.where(torch.isfinite(values), values, -math.inf).argmax()
        return candidates[best], f"the best of {self.raw_samples} raw Sobol' candidates"


def _screened_starts(screen: AcquisitionFunction) -> Callable[..., Tensor]:
    """``optimize_acqf``'s ``ic_generator`` that scores the raw samples by ``screen`` instead of
    the acquisition being maximized (BoTorch's initializer otherwise). Passed as the generator
    rather than as fixed starting points, so that ``optimize_acqf`` also screens the new starts of
    its retry after an ``OptimizationWarning``."""

    def generate(acq_function: AcquisitionFunction, bounds: Tensor, **kwargs: Any) -> Tensor:
        return gen_batch_initial_conditions(screen, bounds, **kwargs)

    return generate
