"""Synthetic benchmark functions (BoTorch test functions) with known optima.

Standard bounds, minimization, optional Gaussian observation noise owned by the task (never by
the wrapped BoTorch function, so noise has one owner and is seeded per evaluation).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Literal

import numpy as np
import torch
from botorch.test_functions import Ackley, Hartmann, Levy, Michalewicz
from botorch.test_functions.synthetic import SyntheticTestFunction

from orthobench.config.params import NonNegativeFloat, Probability
from orthobench.registry import task_factory
from orthobench.space import SearchSpace
from orthobench.tasks.base import Evaluation, Task


class SyntheticTask(Task):
    """A BoTorch synthetic test function as a :class:`Task`.

    ``y = f(x) + noise_std * eps``, ``eps ~ N(0, 1)`` drawn from the evaluation seed. The noise-free
    value ``f(x)`` is reported as :attr:`Evaluation.y_true`, so regret is exact even on noisy tasks.

    Args:
        function: A noise-free, non-negated BoTorch ``SyntheticTestFunction``.
        noise_std: Standard deviation of the observation noise.
    """

    #: An evaluation takes microseconds: not worth a process of its own.
    parallel_evaluations = False

    def __init__(self, function: SyntheticTestFunction, *, noise_std: float = 0.0) -> None:
        if not (math.isfinite(noise_std) and noise_std >= 0):  # NaN passes `noise_std < 0`
            raise ValueError(f"`noise_std` must be finite and >= 0, but got {noise_std=}.")
        if function.noise_std is not None or function.negate:
            raise ValueError(
                "Wrap a noise-free, non-negated function: the task owns noise and sign."
            )
        super().__init__(SearchSpace.box([tuple(b) for b in function.bounds.t().tolist()]))
        self.function = function
        self.noise_std = float(noise_std)
        self.optimal_value = float(function.optimal_value)

    def evaluate(self, x: np.ndarray, *, seed: int, device: torch.device) -> Evaluation:
        x_t = torch.as_tensor(np.asarray(x, dtype=float).reshape(1, -1), dtype=torch.float64)
        y_true = float(self.function.evaluate_true(x_t).item())
        noise = (
            self.noise_std * float(np.random.default_rng(seed).standard_normal())
            if self.noise_std
            else 0.0
        )
        return Evaluation(y=y_true + noise, y_true=y_true)


@task_factory
def hartmann6(noise_std: NonNegativeFloat = 0.0) -> SyntheticTask:
    """Hartmann6: 6-d, [0, 1]^6, six local minima, global minimum -3.32237."""
    return SyntheticTask(Hartmann(dim=6), noise_std=noise_std)


@task_factory
def ackley8(noise_std: NonNegativeFloat = 0.0) -> SyntheticTask:
    """Ackley8: 8-d, [-32.768, 32.768]^8, highly multimodal, global minimum 0 at the origin."""
    return SyntheticTask(Ackley(dim=8), noise_std=noise_std)


#: Michalewicz10's global minimum, the sum of its ten separable 1-d minima. BoTorch's (and the
#: literature's) -9.66015 is rounded up, 1.7e-6 above it, which made regret negative near the
#: minimizer.
MICHALEWICZ10_MINIMUM = -9.66015171564135


@task_factory
def michalewicz10(noise_std: NonNegativeFloat = 0.0) -> SyntheticTask:
    """Michalewicz10: 10-d, [0, pi]^10, steep narrow valleys, global minimum -9.6601517."""
    task = SyntheticTask(Michalewicz(dim=10), noise_std=noise_std)
    task.optimal_value = MICHALEWICZ10_MINIMUM
    return task


@task_factory
def levy16(noise_std: NonNegativeFloat = 0.0) -> SyntheticTask:
    """Levy16: 16-d, [-10, 10]^16, rugged, global minimum 0 at (1, ..., 1)."""
    return SyntheticTask(Levy(dim=16), noise_std=noise_std)


#: The synthetic functions by task name, for :func:`delayed`.
_FUNCTIONS = {
    "hartmann6": hartmann6,
    "ackley8": ackley8,
    "michalewicz10": michalewicz10,
    "levy16": levy16,
}


class DelayedTask(SyntheticTask):
    """A synthetic function whose every evaluation also waits ``seconds`` of wall time: a stand-in
    for an expensive evaluation that costs no CPU (a remote job, a queue), to measure how a batch
    step's evaluations overlap on workers without the cores' contention of a training task.

    With ``jitter`` the wait is ``seconds * u``, ``u`` uniform on ``[1 - jitter, 1 + jitter]``
    and drawn from the evaluation's seed (a generator of its own, so the values do not change):
    evaluations of unequal length, as training runs are. The longest wait,
    ``seconds * (1 + jitter)``, must be within ``time.sleep``'s range
    (``threading.TIMEOUT_MAX``, about 292 years)."""

    #: It stands for an expensive evaluation: each in a process of its own, as a training run.
    parallel_evaluations = True

    def __init__(self, inner: SyntheticTask, seconds: float, jitter: float = 0.0) -> None:
        if not 0.0 <= jitter <= 1.0:
            raise ValueError(f"`jitter` must lie in [0, 1], but got {jitter=}.")
        # Checked here, when the suite is loaded: time.sleep raises OverflowError past its range.
        if not 0.0 <= seconds * (1 + jitter) <= threading.TIMEOUT_MAX:
            raise ValueError(
                f"`seconds * (1 + jitter)` must lie in [0, {threading.TIMEOUT_MAX:g}] (time.sleep's "
                f"range), but got ({seconds=}, {jitter=})."
            )
        super().__init__(inner.function, noise_std=inner.noise_std)
        self.optimal_value = inner.optimal_value
        self.seconds = float(seconds)
        self.jitter = float(jitter)

    def evaluate(self, x: np.ndarray, *, seed: int, device: torch.device) -> Evaluation:
        factor = np.random.default_rng([seed, 1]).uniform(1 - self.jitter, 1 + self.jitter)
        time.sleep(self.seconds * factor)
        return super().evaluate(x, seed=seed, device=device)


@task_factory
def delayed(
    function: Literal[tuple(_FUNCTIONS)] = "hartmann6",
    seconds: NonNegativeFloat = 1.0,
    noise_std: NonNegativeFloat = 0.0,
    jitter: Probability = 0.0,
) -> DelayedTask:
    """A synthetic ``function`` whose evaluations each wait ``seconds``, times a factor within
    ``1 +- jitter`` drawn from the evaluation's seed (:class:`DelayedTask`)."""
    return DelayedTask(_FUNCTIONS[function](noise_std=noise_std), seconds, jitter)
