"""Optuna's TPESampler through ask/tell: trial bookkeeping, univariate by default, determinism."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
import torch
from optuna.trial import TrialState

from orthobench.optimizers.optuna_tpe import OptunaTPE
from orthobench.registry import OPTIMIZERS
from tests.helpers import drive


def sphere(x: np.ndarray) -> float:
    return float(np.sum((x - 0.3) ** 2))


def test_runs_in_the_loop_and_is_deterministic() -> None:
    runs = [
        drive(OptunaTPE(3, seed=s, n_startup_trials=4), sphere, n_init=6, steps=10)
        for s in (0, 0, 1)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_initial_design_is_added_and_asked_points_are_completed() -> None:
    opt = OptunaTPE(2, seed=0, n_startup_trials=2)
    drive(opt, sphere, n_init=5, steps=3)
    trials = opt.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 8
    np.testing.assert_allclose(
        [[t.params["x0"], t.params["x1"]] for t in trials], opt.train_x.numpy()
    )
    np.testing.assert_allclose([t.value for t in trials], opt.train_y.numpy())


def test_changed_or_dropped_points_are_added_and_the_stale_trial_fails() -> None:
    opt = OptunaTPE(2, seed=0, n_startup_trials=2)
    drive(opt, sphere, n_init=4, steps=0)
    asked = opt.ask(1).x
    rounded = np.round(asked, 1)  # the loop rounded an integer parameter
    opt.tell(rounded, np.array([sphere(rounded[0])]))
    suggestion = opt.ask(1)  # the trial of `asked` was never told: it fails here
    trials = opt.study.get_trials(deepcopy=False)
    assert [t.state for t in trials[-3:]] == [
        TrialState.FAIL,
        TrialState.COMPLETE,
        TrialState.RUNNING,
    ]
    assert trials[-2].params == {"x0": rounded[0, 0], "x1": rounded[0, 1]}
    assert suggestion.info["failed_pending"] == 1


@pytest.mark.parametrize("multivariate", [False, True])
def test_multivariate_is_passed_explicitly(multivariate: bool) -> None:
    opt = OptunaTPE(2, seed=0, multivariate=multivariate)
    # Optuna 5 would pick multivariate TPE for a single objective if the flag were left unset.
    assert opt.study.sampler._is_multivariate(opt.study) is multivariate  # pinned private API
    drive(opt, sphere, n_init=10, steps=1)


def test_registered_univariate_by_default() -> None:
    params = OPTIMIZERS.resolve("tpe-optuna").params
    assert params == {"multivariate": False, "n_startup_trials": 10, "n_ei_candidates": 24}


def test_bad_params_raise_with_the_value() -> None:
    with pytest.raises(ValueError, match="n_ei_candidates=0"):
        OptunaTPE(2, seed=0, n_ei_candidates=0)


class _RecordingTPE(optuna.samplers.TPESampler):
    """``TPESampler`` that records, when it samples a trial, the other trials it sees by state."""

    views: list[dict[TrialState, list[np.ndarray]]] = []

    def sample_independent(self, study, trial, param_name, param_distribution):
        if param_name == "x0":
            others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
            self.views.append(
                {
                    state: [np.array([t.params["x0"], t.params["x1"]]) for t in others
                            if t.state == state]
                    for state in (TrialState.COMPLETE, TrialState.RUNNING)
                }
            )  # fmt: skip
        return super().sample_independent(study, trial, param_name, param_distribution)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_told_points_complete_their_trials_and_only_dropped_ones_count_as_failed(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """Ask 4, tell 2, ask 1 with the third still pending (the fourth dropped). The told points
    complete their own trials, in float32 too (a told point is the asked float64 point rounded
    to float32, off by more than the float64 match tolerance); the untold trials fail, and only
    the dropped one counts as ``failed_pending``. The sampler sees the 6 told points complete
    and the pending point as its one RUNNING stand-in."""
    monkeypatch.setattr(optuna.samplers, "TPESampler", _RecordingTPE)
    monkeypatch.setattr(_RecordingTPE, "views", [])
    opt = OptunaTPE(2, seed=0, n_startup_trials=2, dtype=dtype)
    drive(opt, sphere, n_init=4, steps=0)
    asked = opt.ask(4).x
    opt.tell(asked[:2], np.array([sphere(x) for x in asked[:2]]))
    suggestion = opt.ask(1, pending=asked[2:3])
    states = [t.state for t in opt.study.get_trials(deepcopy=False)]
    C, F, R = TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING
    # init, told x2, pending and dropped asks (FAIL), the stand-in (FAIL after the ask), the ask
    assert states == [C] * 4 + [C, C, F, F, F, R]
    assert suggestion.info["failed_pending"] == 1
    view = _RecordingTPE.views[-1]
    told = np.concatenate([opt.train_x[:4].double().numpy(), asked[:2]])
    np.testing.assert_allclose(np.stack(view[C]), told, atol=1e-7)
    np.testing.assert_allclose(np.stack(view[R]), asked[2:3], atol=1e-7)
