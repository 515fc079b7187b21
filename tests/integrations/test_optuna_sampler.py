"""OrthoBOSampler in Optuna studies, after Optuna's tests/samplers_tests/test_samplers.py:
proposals inside their distributions, directions, seeds, startup, running trials (constant
liar), constraints and parameter checks."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import optuna
import pytest
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, Trial, TrialState

import orthobench.integrations.optuna as integration
from orthobench.integrations.optuna import OrthoBOSampler
from orthobench.optimizers.orthobo import OrthoBO

# Small budgets: each proposal takes well under a second on two cores.
FAST = {"theta_samples": 16, "raw_samples": 64, "num_restarts": 2}


@pytest.fixture(autouse=True)
def _quiet_optuna():
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    yield
    optuna.logging.set_verbosity(verbosity)


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The ``(x, y, constraints)`` each OrthoBO the sampler builds is told, in order."""
    record: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    class RecordingOrthoBO(OrthoBO):
        def tell(self, x, y, constraints=None):
            record.append((x, y, constraints))
            super().tell(x, y, constraints)

    monkeypatch.setattr(integration, "OrthoBO", RecordingOrthoBO)
    return record


def _create_new_trial(study: Study) -> FrozenTrial:
    trial_id = study._storage.create_new_trial(study._study_id)
    return study._storage.get_trial(trial_id)


def _study_with_history(
    search_space: dict[str, BaseDistribution], n: int = 4, **kwargs
) -> optuna.Study:
    """A study whose ``n`` random trials are complete, valued by the sum of the internal reprs."""
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=n, **FAST))
    for _ in range(n):
        trial = study.ask(search_space)
        study.tell(trial, sum(search_space[k].to_internal_repr(v) for k, v in trial.params.items()))
    return study


@pytest.mark.parametrize(
    "distribution",
    [
        FloatDistribution(-1.0, 1.0),
        FloatDistribution(1e-7, 1.0, log=True),
        FloatDistribution(-10, 10, step=0.5),
        IntDistribution(3, 10),
        IntDistribution(1, 100, log=True),
        IntDistribution(-10, 10, step=2),
    ],
)
def test_sample_relative_numerical(distribution: BaseDistribution) -> None:
    search_space = {"x": distribution, "y": FloatDistribution(0.0, 1.0)}
    study = _study_with_history(search_space)
    for _ in range(2):
        params = study.sampler.sample_relative(study, _create_new_trial(study), search_space)
        assert params.keys() == search_space.keys()
        for name, value in params.items():
            dist = search_space[name]
            assert dist.low <= value <= dist.high
            assert type(value) is (int if isinstance(dist, IntDistribution) else float)
            if dist.step is not None:
                assert (value - dist.low) / dist.step == pytest.approx(
                    round((value - dist.low) / dist.step)
                )


def test_sample_relative_categorical_and_mixed() -> None:
    search_space = {
        "c": CategoricalDistribution([1, 10, 100]),
        "s": CategoricalDistribution(["a", None, True]),
        "x": FloatDistribution(0.0, 1.0),
    }
    study = _study_with_history(search_space)
    params = study.sampler.sample_relative(study, _create_new_trial(study), search_space)
    assert params["c"] in (1, 10, 100) and type(params["c"]) is int
    assert params["s"] in ("a", None, True)
    assert 0.0 <= params["x"] <= 1.0


def test_a_study_runs_every_kind_of_parameter() -> None:
    def objective(trial: Trial) -> float:
        x = trial.suggest_float("x", -3, 3)
        n = trial.suggest_int("n", 0, 8, step=2)
        lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        kind = trial.suggest_categorical("kind", ["a", "b"])
        return (x - 1) ** 2 + (n - 4) ** 2 + np.log10(lr) ** 2 + (kind == "a")

    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=4, **FAST))
    study.optimize(objective, n_trials=7)
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    for t in study.trials:
        assert -3 <= t.params["x"] <= 3 and t.params["n"] in (0, 2, 4, 6, 8)
        assert 1e-4 <= t.params["lr"] <= 1.0 and t.params["kind"] in ("a", "b")


def test_maximize_is_minimize_of_the_negated_objective() -> None:
    """OrthoBO sees the same values either way, so the same seed gives the same trials."""

    def f(trial: Trial) -> float:
        return (trial.suggest_float("x", -2, 2) - 0.7) ** 2 + trial.suggest_float("y", 0, 1)

    studies = {}
    for direction, sign in (("minimize", 1.0), ("maximize", -1.0)):
        studies[direction] = optuna.create_study(
            direction=direction, sampler=OrthoBOSampler(seed=3, n_startup_trials=4, **FAST)
        )
        studies[direction].optimize(lambda t, s=sign: s * f(t), n_trials=8)
    assert [t.params for t in studies["minimize"].trials] == [
        t.params for t in studies["maximize"].trials
    ]
    assert studies["maximize"].best_value == -studies["minimize"].best_value


def test_reproducible() -> None:
    def objective(trial: Trial) -> float:
        a = trial.suggest_float("a", -1, 1)
        b = trial.suggest_int("b", 0, 4)
        return a**2 + (b - 2) ** 2 + (trial.suggest_categorical("c", ["u", "v"]) == "u")

    params = []
    for seed in (0, 0, 1):
        study = optuna.create_study(sampler=OrthoBOSampler(seed=seed, n_startup_trials=3, **FAST))
        study.optimize(objective, n_trials=6)
        params.append([t.params for t in study.trials])
    assert params[0] == params[1]
    assert params[0] != params[2]


def test_startup_trials_use_the_independent_sampler(told: list) -> None:
    independent = RandomSampler(seed=0)
    sampler = OrthoBOSampler(independent_sampler=independent, n_startup_trials=4, **FAST)
    study = optuna.create_study(sampler=sampler)
    with mock.patch.object(
        independent, "sample_independent", wraps=independent.sample_independent
    ) as spy:
        study.optimize(lambda t: t.suggest_float("x", 0, 1) ** 2, n_trials=6)
    # The first trial's space is empty, the next three are startup: all four independent.
    assert spy.call_count == 4
    assert [x.shape for x, _, _ in told] == [(4, 1), (5, 1)]


def test_startup_waits_for_two_observations() -> None:
    """``n_startup_trials=0`` still needs the two trials OrthoBO asks for."""
    search_space = {"x": FloatDistribution(0.0, 1.0)}
    study = _study_with_history(search_space, n=1)
    study.sampler._n_startup_trials = 0
    assert study.sampler.sample_relative(study, _create_new_trial(study), search_space) == {}


def test_no_independent_sampling_warning_during_startup() -> None:
    """With ``n_startup_trials=0`` the first two trials are still startup (OrthoBO needs two
    observations): sampling them independently is no fallback to warn about."""
    with mock.patch.object(integration._logger, "warning") as warning:
        study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=0, **FAST))
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert warning.call_count == 0


def test_dynamic_parameter_is_sampled_independently_with_a_warning() -> None:
    study = _study_with_history({"x": FloatDistribution(0.0, 1.0)}, n=2)
    with mock.patch.object(integration._logger, "warning") as warning:
        study.optimize(
            lambda t: t.suggest_float("x", 0, 1) + t.suggest_float(f"z{t.number}", 0, 1),
            n_trials=1,
        )
    assert warning.call_count == 1
    assert "`z2`" in warning.call_args.args[0] and "OrthoBOSampler" in warning.call_args.args[0]


def test_running_trials_are_told_the_best_value(told: list) -> None:
    """Trials asked before any is told: each earlier running trial, its parameters suggested or
    only proposed, joins the history with the best value, and the proposals differ."""
    search_space = {"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)}
    study = _study_with_history(search_space, n=5)
    best = study.best_value
    first = study.ask()
    first.suggest_float("x", 0, 1)  # y is proposed, not yet suggested
    second = study.ask(search_space)
    third = study.ask(search_space)
    assert [x.shape[0] for x, _, _ in told] == [5, 6, 7]
    np.testing.assert_array_equal(told[2][1][5:], [best, best])
    proposed_y = study._storage.get_trial(first._trial_id).system_attrs["orthobo:proposed:y"]
    np.testing.assert_allclose(told[1][0][5], [first.params["x"], proposed_y])
    assert first.suggest_float("y", 0, 1) == proposed_y
    assert (
        abs(second.params["x"] - third.params["x"]) + abs(second.params["y"] - third.params["y"])
        > 1e-3
    )


def test_constraints_are_stored_and_the_best_feasible_trial_is_found(told: list) -> None:
    """Minimize x^2 + y^2 subject to x + y >= 1: the optimum is 0.5 at (0.5, 0.5)."""

    def constraints(trial: FrozenTrial) -> list[float]:
        return [1.0 - trial.params["x"] - trial.params["y"]]

    sampler = OrthoBOSampler(seed=0, n_startup_trials=6, constraints_func=constraints, **FAST)
    study = optuna.create_study(sampler=sampler)
    study.optimize(
        lambda t: t.suggest_float("x", 0, 1) ** 2 + t.suggest_float("y", 0, 1) ** 2, n_trials=14
    )
    for t in study.trials:
        assert t.constraints == {"0": pytest.approx(constraints(t)[0])}
    assert all(c.shape == (x.shape[0], 1) for x, _, c in told)
    best = study.best_trial
    assert best.constraints["0"] <= 0
    assert best.value < 0.6


def test_trials_without_constraint_values_are_left_out(told: list) -> None:
    search_space = {"x": FloatDistribution(0.0, 1.0)}
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x, c in ((0.2, -1.0), (0.8, 1.0)):
        study.add_trial(
            optuna.create_trial(
                params={"x": x}, distributions=search_space, value=x, constraints={"c": c}
            )
        )
    study.add_trial(optuna.create_trial(params={"x": 0.5}, distributions=search_space, value=0.5))
    study.sampler.sample_relative(study, _create_new_trial(study), search_space)
    x, y, c = told[0]
    np.testing.assert_array_equal(y, [0.2, 0.8])
    np.testing.assert_array_equal(c, [[-1.0], [1.0]])


def test_trials_with_a_non_finite_constraint_value_are_left_out(told: list) -> None:
    """An infinite constraint value (``set_constraint("c", math.inf)`` for "infeasible") leaves
    its trial out, as a non-finite objective value does, instead of failing every later trial."""
    search_space = {"x": FloatDistribution(0.0, 1.0)}
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x, c in ((0.2, -1.0), (0.5, math.inf), (0.8, 1.0)):
        study.add_trial(
            optuna.create_trial(
                params={"x": x}, distributions=search_space, value=x, constraints={"c": c}
            )
        )
    params = study.sampler.sample_relative(study, _create_new_trial(study), search_space)
    assert 0.0 <= params["x"] <= 1.0
    x, y, c = told[0]
    np.testing.assert_array_equal(y, [0.2, 0.8])
    np.testing.assert_array_equal(c, [[-1.0], [1.0]])


def test_enqueued_running_trials_are_told_at_their_fixed_params(told: list) -> None:
    """A running enqueued trial evaluates its fixed parameters, not the sampler's proposal: it is
    told there, also before it suggests them."""
    search_space = {"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)}
    study = _study_with_history(search_space, n=4)
    study.enqueue_trial({"x": 0.9, "y": 0.1})
    study.ask()  # fixed, nothing suggested yet
    study.enqueue_trial({"x": 0.7})
    partial = study.ask()
    partial.suggest_float("y", 0, 1)  # proposes x as well, but x stays 0.7
    study.ask(search_space)
    x, _, _ = told[-1]
    np.testing.assert_allclose(x[4:], [[0.9, 0.1], [0.7, partial.params["y"]]])


def test_running_trial_in_a_constrained_study_is_told_the_incumbent_outcome(told: list) -> None:
    search_space = {"x": FloatDistribution(0.0, 1.0)}
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x, c in ((0.1, 2.0), (0.6, -1.0), (0.9, -0.5)):
        study.add_trial(
            optuna.create_trial(
                params={"x": x}, distributions=search_space, value=x, constraints={"c": c}
            )
        )
    study.ask(search_space)
    study.ask(search_space)
    x, y, c = told[1]
    assert (y[-1], c[-1, 0]) == (0.6, -1.0)  # the best feasible trial's, not the lowest value's


@pytest.mark.parametrize(
    "params",
    [
        {"theta_samples": 2},
        {"estimator": "no-such-estimator"},
        {"kernel": "no-such-kernel"},
        {"no_such_param": 1},
        {"dim": 3},
        {"n_startup_trials": -1},
    ],
)
def test_bad_params_raise_at_construction(params: dict) -> None:
    with pytest.raises(ValueError) as info:
        OrthoBOSampler(**params)
    assert "\n" not in str(info.value)


def test_multi_objective_raises() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=OrthoBOSampler())
    search_space = {"x": FloatDistribution(0.0, 1.0)}
    with pytest.raises(ValueError, match="multi-objective"):
        study.sampler.sample_relative(study, _create_new_trial(study), search_space)


def test_reseed_rng_reseeds_the_independent_sampler() -> None:
    sampler = OrthoBOSampler(seed=0)
    independent = sampler._independent_sampler
    with mock.patch.object(independent, "reseed_rng") as reseed:
        sampler.reseed_rng()
    reseed.assert_called_once_with()


@pytest.mark.slow
def test_beats_random_search_on_a_smooth_function() -> None:
    """A shifted 3-d sphere, 18 trials (10 random startup trials, shared with RandomSampler of
    the same seed): OrthoBO's best value is below random search's for each of 5 seeds."""

    def sphere(trial: Trial) -> float:
        return sum((trial.suggest_float(f"x{i}", -5, 5) - 1.5) ** 2 for i in range(3))

    for seed in range(5):
        best = {}
        for name, sampler in (
            ("orthobo", OrthoBOSampler(seed=seed)),
            ("random", RandomSampler(seed=seed)),
        ):
            study = optuna.create_study(sampler=sampler)
            study.optimize(sphere, n_trials=18)
            best[name] = study.best_value
        assert best["orthobo"] < best["random"], (seed, best)
