"""Optimizers on constrained histories (``tell(x, y, constraints)``): qLogEI, Optuna's TPE, SCBO."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest
import torch
from optuna.samplers._tpe.sampler import _split_trials
from optuna.trial import TrialState
from torch.quasirandom import SobolEngine

from orthobench.optimizers.base import Optimizer
from orthobench.optimizers.botorch_baselines import QUCB, QLogEI
from orthobench.optimizers.optuna_tpe import OptunaTPE
from orthobench.optimizers.turbo import TuRBO
from orthobench.registry import OPTIMIZERS, TASKS
from tests.optimizers.test_turbo import state as trust_region_state

TINY_EI = dict(function_samples=16, raw_samples=16, num_restarts=2, fit="fast")


def gramacy_design(n: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` scrambled Sobol points (unit cube) of ``gramacy`` and the task's ``y`` and ``c``."""
    task = TASKS.create("gramacy")
    x = SobolEngine(2, scramble=True, seed=0).draw(n, dtype=torch.float64).numpy()
    evals = [task.evaluate(task.space.from_unit(p), seed=0, device=torch.device("cpu")) for p in x]
    y = np.array([e.y for e in evals])
    c = np.array([e.constraints for e in evals])
    assert c.shape == (n, task.n_constraints) == (n, 2)
    return x, y, c


BUILDERS: dict[str, Callable[[int], Optimizer]] = {
    "qlogei": lambda seed: QLogEI(2, seed=seed, **TINY_EI),
    "tpe-optuna": lambda seed: OptunaTPE(2, seed=seed, n_startup_trials=3),
    "turbo": lambda seed: TuRBO(2, seed=seed, n_candidates=64, fit="fast"),
    "turbo-qlogei": lambda seed: TuRBO(2, seed=seed, acquisition="qlogei", **TINY_EI),
}


def proposals(name: str, seed: int) -> list[np.ndarray]:
    x, y, c = gramacy_design()
    opt = BUILDERS[name](seed)
    opt.tell(x, y, c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [opt.ask(1).x, opt.ask(3).x]


# The qLogEI cases (about 1.8 s each on 2 cores) run with the slow tests; the default run keeps
# turbo and tpe-optuna here, and qLogEI's constrained ask in
# test_qlogei_best_f_below_every_observation_when_none_is_feasible.
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in {"qlogei", "turbo-qlogei"} else n
        for n in sorted(BUILDERS)
    ],
)
def test_constrained_proposals_in_cube_and_reproducible(name: str) -> None:
    first = proposals(name, seed=3)
    assert [p.shape for p in first] == [(1, 2), (3, 2)]
    for p in first:
        assert np.all((p >= 0.0) & (p <= 1.0))
    again = proposals(name, seed=3)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["qlogei", "tpe-optuna", "turbo"])
def test_registered_optimizer_handles_constraints(name: str) -> None:
    assert OPTIMIZERS.resolve(name).factory.handles_constraints is True


def test_ucb_stays_unconstrained() -> None:
    assert QUCB.handles_constraints is False


# --- qLogEI -----------------------------------------------------------------------------------


def _half_plane_history() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A symmetric objective; only ``x0 + x1 > 1`` is feasible (``c = 1 - x0 - x1``)."""
    x = SobolEngine(2, scramble=True, seed=1).draw(12, dtype=torch.float64).numpy()
    y = ((x - 0.5) ** 2).sum(-1)
    c = (1.0 - x.sum(-1))[:, None]
    return x, y, c


def _qlogei_values(
    x: np.ndarray, y: np.ndarray, c: np.ndarray, points: torch.Tensor
) -> torch.Tensor:
    opt = QLogEI(2, seed=0, **TINY_EI)
    opt.tell(x, y, c)
    model, _ = opt._fit(torch.device("cpu"))
    acqf = opt._acquisition(model, opt._sampler(256))
    with torch.no_grad():
        return acqf(points.unsqueeze(-2))  # (n x 1 x d) -> n


def test_qlogei_prefers_the_feasible_region() -> None:
    x, y, c = _half_plane_history()
    # Mirror images about x0 + x1 = 1 have the same objective; only the second is feasible.
    points = torch.tensor([[0.25, 0.35], [0.75, 0.65]], dtype=torch.float64)
    infeasible, feasible = _qlogei_values(x, y, c, points)
    assert feasible > infeasible + 3.0  # log scale: e^3 times more improvement-with-feasibility


def test_qlogei_does_not_depend_on_the_units_of_a_constraint() -> None:
    """The feasibility weight is relative to each constraint's spread: constraint values in
    units 1e5 times larger (the pressure vessel's scale) give the same acquisition, where a
    fixed eta of 1e-3 would make the indicator a step without gradient."""
    x, y, c = _half_plane_history()
    points = torch.tensor([[0.25, 0.35], [0.75, 0.65], [0.5, 0.52]], dtype=torch.float64)
    torch.testing.assert_close(
        _qlogei_values(x, y, c * 1e5, points), _qlogei_values(x, y, c, points), rtol=1e-4, atol=1e-4
    )


def test_qlogei_best_f_is_the_best_feasible_value() -> None:
    x, y, c = _half_plane_history()
    opt = QLogEI(2, seed=0, **TINY_EI)
    opt.tell(x, y, c)
    model, _ = opt._fit(torch.device("cpu"))
    acqf = opt._acquisition(model, opt._sampler(16))
    feasible = c[:, 0] <= 0
    assert acqf.best_f.item() == pytest.approx(-(y[feasible]).min())
    assert len(acqf._constraints) == 1


def test_qlogei_best_f_below_every_observation_when_none_is_feasible() -> None:
    x, y, c = gramacy_design()
    opt = QLogEI(2, seed=0, **TINY_EI)
    opt.tell(x, y, np.abs(c) + 0.1)
    model, _ = opt._fit(torch.device("cpu"))
    acqf = opt._acquisition(model, opt._sampler(16))
    assert acqf.best_f.item() <= (-y).min()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert opt.ask(2).x.shape == (2, 2)


# --- Optuna TPE -------------------------------------------------------------------------------


def test_optuna_records_constraints_on_added_and_asked_trials() -> None:
    x, y, c = gramacy_design()
    opt = OptunaTPE(2, seed=0, n_startup_trials=3)
    opt.tell(x, y, c)
    asked = opt.ask(2).x
    opt.tell(asked, np.array([0.5, 0.7]), np.array([[1.0, -1.0], [-0.5, -0.2]]))
    trials = opt.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    assert len(trials) == 8
    recorded = [[t.constraints[f"c{i}"] for i in range(2)] for t in trials]
    np.testing.assert_allclose(recorded, np.vstack([c, [[1.0, -1.0], [-0.5, -0.2]]]))


def test_optuna_tpe_split_puts_infeasible_trials_last() -> None:
    # The best objective values are infeasible: TPE's good set must still take the feasible ones.
    x = SobolEngine(2, scramble=True, seed=2).draw(8, dtype=torch.float64).numpy()
    y = np.arange(8.0)
    c = np.where(np.arange(8) < 4, 1.0, -1.0)[:, None]  # the 4 best are infeasible
    opt = OptunaTPE(2, seed=0)
    opt.tell(x, y, c)
    trials = opt.study.get_trials(deepcopy=False)
    below, _ = _split_trials(opt.study, trials, n_below=4)
    assert sorted(t.value for t in below) == [4.0, 5.0, 6.0, 7.0]


def test_optuna_unconstrained_trials_carry_no_constraints() -> None:
    x, y, _ = gramacy_design()
    opt = OptunaTPE(2, seed=0)
    opt.tell(x, y)
    assert all(t.constraints == {} for t in opt.study.get_trials(deepcopy=False))


# --- SCBO (TuRBO on a constrained history) ----------------------------------------------------

# Four told points: the best objective (0.0) is infeasible; the best feasible is index 2.
SCBO_X = np.array([[0.1, 0.1], [0.9, 0.2], [0.7, 0.7], [0.3, 0.8]])
SCBO_Y = np.array([0.0, 3.0, 2.0, 1.0])
SCBO_C = np.array([[0.5, -1.0], [-1.0, -0.2], [-0.1, -0.3], [0.2, 0.4]])


def test_scbo_center_is_the_best_feasible_point() -> None:
    idx = TuRBO.center_index(torch.tensor(SCBO_Y), torch.tensor(SCBO_C))
    assert idx == 2
    assert TuRBO.center_index(torch.tensor(SCBO_Y), torch.empty(4, 0)) == 0


def test_scbo_center_is_the_least_violation_point_when_none_is_feasible() -> None:
    c = SCBO_C.copy()
    c[[1, 2], 0] = [0.3, 0.05]  # violations: 0.5, 0.3, 0.05, 0.6
    assert TuRBO.center_index(torch.tensor(SCBO_Y), torch.tensor(c)) == 2
    c[2, 0] = 0.4  # violations: 0.5, 0.3, 0.4, 0.6
    assert TuRBO.center_index(torch.tensor(SCBO_Y), torch.tensor(c)) == 1


@pytest.mark.parametrize("feasible", [True, False])
def test_scbo_proposals_lie_in_the_region_around_the_incumbent(feasible: bool) -> None:
    c = (
        SCBO_C
        if feasible
        else np.abs(SCBO_C) + np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    )
    center = SCBO_X[TuRBO.center_index(torch.tensor(SCBO_Y), torch.tensor(c))]
    opt = TuRBO(2, seed=0, kernel="matern52-iso", length_init=0.1, n_candidates=64, fit="fast")
    opt.tell(SCBO_X, SCBO_Y, c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = opt.ask(3).x
    assert np.all(np.abs(x - center) <= 0.05 + 1e-12)  # iso kernel: side L = 0.1


def test_scbo_success_counts_feasible_improvement_then_violation() -> None:
    s = trust_region_state(best_value=math.inf)
    s.observe(torch.tensor([0.0, 1.0]), torch.tensor([[1.0], [0.5]]))  # nothing feasible
    assert (s.best_value, s.best_violation) == (math.inf, 0.5)
    assert s.improves(torch.tensor([5.0]), torch.tensor([[0.2]]))  # less violation
    assert not s.improves(torch.tensor([-9.0]), torch.tensor([[0.6]]))  # better y, infeasible
    assert s.improves(torch.tensor([9.0]), torch.tensor([[0.0]]))  # first feasible point
    s.update(torch.tensor([9.0]), torch.tensor([[0.0]]))
    assert (s.best_value, s.best_violation, s.success_counter) == (9.0, 0.0, 1)
    assert s.improves(torch.tensor([8.0]), torch.tensor([[-1.0]]))
    assert not s.improves(torch.tensor([1.0]), torch.tensor([[0.1]]))  # infeasible does not count
