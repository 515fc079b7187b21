"""Constrained synthetic benchmark problems (BoTorch's constrained test functions).

Standard bounds, minimization, optional Gaussian noise on the objective owned by the task (as
:class:`~orthobench.tasks.synthetic.SyntheticTask`); the constraint values are noise-free.
BoTorch calls a point feasible where every *slack* ``s_i(x) >= 0``
(``ConstrainedBaseTestProblem.is_feasible``); orthobench's convention is ``c_i(x) <= 0``, so the
task reports ``c_i = -s_i``.
"""

from __future__ import annotations

import numpy as np
import torch
from botorch.test_functions.synthetic import (
    ConstrainedGramacy,
    ConstrainedHartmann,
    ConstrainedSyntheticTestFunction,
    PressureVessel,
    SpeedReducer,
    TensionCompressionString,
    WeldedBeamSO,
)
from botorch.test_functions.utils import round_nearest

from orthobench.config.params import NonNegativeFloat
from orthobench.registry import task_factory
from orthobench.tasks.base import Evaluation
from orthobench.tasks.synthetic import SyntheticTask


class ConstrainedTask(SyntheticTask):
    """A BoTorch constrained synthetic test function as a :class:`~orthobench.tasks.base.Task`.

    ``y = f(x) + noise_std * eps`` as in :class:`~orthobench.tasks.synthetic.SyntheticTask`, and
    the ``n_constraints`` values ``c(x) = -slack(x)`` (``1 x n_constraints`` from BoTorch's
    ``evaluate_slack_true``), noise-free. :attr:`optimal_value` is the minimum over the feasible
    points (``optimal_value``, else BoTorch's).

    Args:
        function: A noise-free, non-negated BoTorch ``ConstrainedSyntheticTestFunction``.
        noise_std: Standard deviation of the objective's observation noise.
        optimal_value: The minimum of ``function`` over its feasible points, where BoTorch's
            ``optimal_value`` is not (a value from the literature above feasible values of this
            formulation makes regret negative); None: BoTorch's.
    """

    def __init__(
        self,
        function: ConstrainedSyntheticTestFunction,
        *,
        noise_std: float = 0.0,
        optimal_value: float | None = None,
    ) -> None:
        if function.constraint_noise_std is not None:
            raise ValueError("Wrap a function without constraint noise: the task owns noise.")
        super().__init__(function, noise_std=noise_std)
        self.n_constraints = int(function.num_constraints)
        if optimal_value is not None:
            self.optimal_value = float(optimal_value)

    def evaluate(self, x: np.ndarray, *, seed: int, device: torch.device) -> Evaluation:
        objective = super().evaluate(x, seed=seed, device=device)
        x_t = torch.as_tensor(np.asarray(x, dtype=float).reshape(1, -1), dtype=torch.float64)
        slack = self.function.evaluate_slack_true(x_t)[0]
        return Evaluation(y=objective.y, y_true=objective.y_true, constraints=(-slack).tolist())


class _PressureVessel(PressureVessel):
    """BoTorch's pressure vessel with its constraints checked on the thicknesses the objective
    costs: ``x1`` and ``x2`` rounded to multiples of 0.0625 (plates come in those sizes; Coello
    Coello 2002). BoTorch checks them on the unrounded values, so a point whose rounded
    thickness is below its bound counted as feasible, and runs found values below Coello
    Coello's 6059.946."""

    def _evaluate_slack_true(self, X: torch.Tensor) -> torch.Tensor:
        rounded = X.clone()
        for i in (0, 1):
            rounded[..., i] = round_nearest(X[..., i], increment=0.0625, bounds=self._bounds[i])
        return super()._evaluate_slack_true(rounded)


@task_factory
def gramacy(noise_std: NonNegativeFloat = 0.0) -> ConstrainedTask:
    """Gramacy: 2-d, [0, 1]^2, minimize x1 + x2 under 2 constraints (a sinusoidal one and
    x1^2 + x2^2 <= 1.5); minimum 0.59978805 at about (0.19512, 0.40467) (BoTorch's
    ``ConstrainedGramacy``, from Gramacy et al. 2016, whose 0.5998 is rounded up: feasible
    points lie below it)."""
    return ConstrainedTask(ConstrainedGramacy(), noise_std=noise_std, optimal_value=0.59978805)


@task_factory
def constrained_hartmann6(noise_std: NonNegativeFloat = 0.0) -> ConstrainedTask:
    """Hartmann6 on [0, 1]^6 under 1 constraint ``||x||_2 <= 1`` (the feasible set of
    ``||x||^2 <= 1``), which Hartmann6's global minimum -3.32237 meets (BoTorch's
    ``ConstrainedHartmann``, from Letham et al. 2019)."""
    return ConstrainedTask(ConstrainedHartmann(dim=6), noise_std=noise_std)


@task_factory
def pressure_vessel(noise_std: NonNegativeFloat = 0.0) -> ConstrainedTask:
    """Pressure vessel design: 4-d, 4 constraints, x1 and x2 rounded to multiples of 0.0625 in
    the objective and the constraints; minimum 6059.714335 at (0.8125, 0.4375, 42.098446,
    176.636596), x1 and the volume constraints active (BoTorch's ``PressureVessel``, from Coello
    Coello 2002, whose 6059.946341 is a feasible value above it)."""
    return ConstrainedTask(_PressureVessel(), noise_std=noise_std, optimal_value=6059.714335)


@task_factory
def tension_compression_string(noise_std: NonNegativeFloat = 0.0) -> ConstrainedTask:
    """Tension/compression spring design: 3-d, 4 constraints; minimum 0.012665232 at about
    (0.051689, 0.356718, 11.28897) (BoTorch's ``TensionCompressionString``, from Coello
    Coello 2002, whose 0.012681 is a feasible value above it)."""
    return ConstrainedTask(
        TensionCompressionString(), noise_std=noise_std, optimal_value=0.012665232
    )


@task_factory
def welded_beam(noise_std: NonNegativeFloat = 0.0) -> ConstrainedTask:
    """Welded beam design: 4-d, 6 constraints; minimum 1.5870775 at (0.168, 4.067085, 10,
    0.168) (BoTorch's ``WeldedBeamSO``, from Coello Coello 2002). BoTorch's buckling load
    ``P_c`` has ``x3 x4^3 * 6`` where Coello Coello has ``sqrt(x3^2 x4^6 / 36) = x3 x4^3 / 6``:
    36 times larger, its constraint never binds, and x3 goes to its bound 10, below the
    1.728226 that BoTorch gives (Coello Coello's value for the problem with the smaller load)."""
    return ConstrainedTask(WeldedBeamSO(), noise_std=noise_std, optimal_value=1.5870775)


@task_factory
def speed_reducer(noise_std: NonNegativeFloat = 0.0) -> ConstrainedTask:
    """Speed reducer design: 7-d, 11 constraints; minimum 2996.3481649 at (3.5, 0.7, 17, 7.3,
    7.8, 3.350215, 5.286683) (BoTorch's ``SpeedReducer``, from Lemonge et al. 2010, whose
    2996.3482 is rounded up: feasible points lie below it)."""
    return ConstrainedTask(SpeedReducer(), noise_std=noise_std, optimal_value=2996.3481649)
