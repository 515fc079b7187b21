"""The :class:`GPOptimizer` base: acquisition-maximization settings and the seeded ``optimize_acqf``.

Every GP optimizer maximizes its acquisition with BoTorch's ``optimize_acqf`` (``raw_samples``
initial points, ``num_restarts`` gradient restarts). The draws of that multistart come from
torch's global generator, so they are seeded per step here (``(seed, ask, "acq")``); MC
acquisitions over function samples get their ``SobolQMCNormalSampler`` seeded per step too
(``(seed, ask, "sampler")``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from torch import Tensor

from orthobench.optimizers.base import Optimizer, check_at_least
from orthobench.seeding import torch_seed


class GPOptimizer(Optimizer):
    """Base of the optimizers that maximize an acquisition with ``optimize_acqf``.

    Args:
        dim: Number of search dimensions ``d``.
        raw_samples: Raw samples of ``optimize_acqf``'s multistart initialization (paper: 512).
        num_restarts: Gradient restarts of the acquisition optimization (paper: 8).
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.
    """

    def __init__(
        self, dim: int, *, raw_samples: int = 512, num_restarts: int = 8, **kwargs
    ) -> None:
        super().__init__(dim, **kwargs)
        check_at_least(1, raw_samples=raw_samples, num_restarts=num_restarts)
        self.raw_samples = raw_samples
        self.num_restarts = num_restarts

    def _unit_bounds(self) -> Tensor:
        """``2 x d`` bounds of the unit cube on the optimizer's device and dtype."""
        return torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(self.train_x)

    def _sampler(self, function_samples: int) -> SobolQMCNormalSampler:
        """QMC base samples of an MC acquisition over function samples, seeded per step."""
        return SobolQMCNormalSampler(
            sample_shape=torch.Size([function_samples]), seed=self._step_seed("sampler") % (2**31)
        )

    def _maximize(
        self,
        acqf: AcquisitionFunction | Callable[[], AcquisitionFunction],
        *,
        q: int = 1,
        bounds: Tensor | None = None,
        options: dict[str, Any] | None = None,
    ) -> Tensor:
        """``q x d`` maximizer of ``acqf`` over ``bounds`` (default: the unit cube), seeded per step.

        ``acqf`` may be a function that builds the acquisition: it is then called inside the seeded
        block, for acquisitions whose construction draws from the global generator (qLogNEI's
        pruning of its baseline).
        """
        with torch_seed(self._step_seed("acq")):
            candidate, _ = optimize_acqf(
                acqf if isinstance(acqf, AcquisitionFunction) else acqf(),
                bounds=self._unit_bounds() if bounds is None else bounds,
                q=q,
                num_restarts=self.num_restarts,
                raw_samples=self.raw_samples,
                options=options,
            )
        return candidate
