"""OrthoBO and MC-EI on a constrained task: one GP per constraint, the marginal constrained EI
against the best feasible observation, and its batch version at q > 1."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from orthobench.acquisition import MarginalLogCEI, MarginalLogQCEI
from orthobench.optimizers.orthobo import MCEI, OrthoBO
from orthobench.registry import TASKS
from orthobench.surrogates.fit import constraint_fit

SETTINGS = {"theta_samples": 16, "raw_samples": 32, "num_restarts": 2}


def _history(n: int = 8):
    """``n`` Sobol' points of ``gramacy`` evaluated: unit-cube x, y, constraints."""
    task = TASKS.create("gramacy")
    u = torch.quasirandom.SobolEngine(2, scramble=True, seed=0).draw(n, dtype=torch.float64).numpy()
    evaluations = [task.evaluate(task.space.from_unit(p[None])[0], seed=0, device=torch.device("cpu")) for p in u]  # fmt: skip
    return u, np.array([e.y for e in evaluations]), np.array([e.constraints for e in evaluations])


@pytest.mark.parametrize("cls", [OrthoBO, MCEI])
def test_a_constrained_history_gets_the_marginal_constrained_ei(cls) -> None:
    x, y, c = _history()
    opt = cls(2, seed=0, **SETTINGS)
    opt.tell(x, y, c)
    assert opt.train_c.shape == (8, 2)
    acqf = opt.acquisition()
    assert isinstance(acqf, MarginalLogCEI) and len(acqf.constraints) == 2
    # The incumbent is the best feasible observation (standardized -y).
    feasible = (c <= 0).all(-1)
    targets = opt.ensemble.members[0].model.train_targets
    assert acqf.members[0].best_f == pytest.approx(float(targets[torch.as_tensor(feasible)].max()))
    first = opt.ask(1).x
    again = cls(2, seed=0, **SETTINGS)
    again.tell(x, y, c)
    np.testing.assert_array_equal(again.ask(1).x, first)


def test_with_no_feasible_point_the_incumbent_is_below_every_observation() -> None:
    x, y, c = _history()
    opt = OrthoBO(2, seed=0, **SETTINGS)
    opt.tell(x, y, np.abs(c) + 1.0)  # nothing feasible
    acqf = opt.acquisition()
    targets = opt.ensemble.members[0].model.train_targets
    assert acqf.members[0].best_f == pytest.approx(float(targets.min()) - 6.0)
    assert np.isfinite(opt.ask(1).x).all()


def test_a_batch_on_a_constrained_task_maximizes_the_batch_constrained_ei() -> None:
    x, y, c = _history()
    opt = OrthoBO(2, seed=0, batch_theta_samples=8, **SETTINGS)
    opt.tell(x, y, c)
    acqf = opt._build_acquisition(opt._fit(), 8, q=2)
    assert isinstance(acqf, MarginalLogQCEI) and len(acqf.constraint_base_samples) == 2
    # Every GP has its own base samples: the constraints' differ from the objective's.
    assert not torch.equal(acqf.base_samples, acqf.constraint_base_samples[0])
    batch = opt.ask(2).x
    assert batch.shape == (2, 2) and ((batch >= 0) & (batch <= 1)).all()


def test_a_point_set_with_unequal_weights_is_refused_on_a_constrained_task() -> None:
    x, y, c = _history()
    opt = OrthoBO(2, seed=0, estimator="sr3", **SETTINGS)
    opt.tell(x, y, c)
    with pytest.raises(ValueError, match="weights its points unequally"):
        opt.ask(1)


def test_an_unconstrained_history_is_unchanged() -> None:
    x, y, _ = _history()
    opt = OrthoBO(2, seed=0, **SETTINGS)
    opt.tell(x, y)
    assert opt.train_c.shape == (8, 0) and not isinstance(opt.acquisition(), MarginalLogCEI)


def test_a_constraint_gps_fallback_is_the_steps_fallback(monkeypatch) -> None:
    """A constraint GP's fit fallback reaches the step's ``fallback`` (the report counts it)."""
    from orthobench.optimizers import orthobo

    def failing_fit(x, values, kernel, fit):
        fitted = constraint_fit(x, values, kernel, fit)
        return fitted._replace(fit_info={**fitted.fit_info, "fallback": "kept initial values"})

    monkeypatch.setattr(orthobo, "constraint_fit", failing_fit)
    x, y, c = _history()
    opt = OrthoBO(2, seed=0, **SETTINGS)
    opt.tell(x, y, c)
    fallback = opt.ask(1).info["fallback"]
    assert "constraint 0: kept initial values" in fallback
    assert "constraint 1: kept initial values" in fallback
