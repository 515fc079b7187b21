"""OrthoBOSampler in Optuna studies, after Optuna's tests/samplers_tests/test_samplers.py:
proposals inside their distributions, directions, seeds, startup, running trials (constant
liar), constraints and parameter checks."""

from __future__ import annotations

import logging
import math
import warnings
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
from orthobench.exceptions import OrthobenchWarning
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
    its trial out, instead of failing every later trial; clipped to the largest finite value
    (-1 here, were trial 2 absent) it could read as feasible."""
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
    # A suite file's field (`params.theta_samples: ...`) named a key of no file here.
    assert not str(info.value).startswith("params.")


@pytest.mark.parametrize(
    ("n_startup_trials", "shown"),
    [(1.5, "1.5"), (None, "None"), (True, "True"), (-1, "-1"), (np.float64(3.0), "3.0")],
)
def test_n_startup_trials_must_be_a_count(n_startup_trials: object, shown: str) -> None:
    """``1.5`` was accepted (acting as 2 trials) and ``None`` raised a bare ``TypeError`` from a
    comparison: each is refused on one line naming the argument and its value."""
    with pytest.raises(ValueError, match=f"n_startup_trials=.*{shown}") as info:
        OrthoBOSampler(n_startup_trials=n_startup_trials)
    assert "\n" not in str(info.value)


def test_a_numpy_seed_is_the_int_seed_and_a_float_seed_is_refused() -> None:
    """``np.int64(0)`` was kept as given and hashed by its text, so it proposed other points
    than ``0``; ``1.5`` failed later in Optuna's sampler, or not at all."""
    assert OrthoBOSampler(seed=np.int64(3))._seed == 3
    assert type(OrthoBOSampler(seed=np.int64(3))._seed) is int
    with pytest.raises(ValueError, match=r"`seed` must be an int or None, but got seed=1.5"):
        OrthoBOSampler(seed=1.5)


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_a_seed_the_default_random_sampler_refuses_is_refused_at_construction(seed: int) -> None:
    """It failed at the first trial, in NumPy's words; any int seeds the proposals themselves."""
    with pytest.raises(ValueError, match=rf"\[0, 2\*\*32 - 1\] .*RandomSampler.*seed={seed}"):
        OrthoBOSampler(seed=seed)
    OrthoBOSampler(seed=seed, independent_sampler=optuna.samplers.RandomSampler(seed=0))


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


# --- Logging, infinite values, out-of-range enqueued values, independent-sampling reasons ---


def _dynamic_study_warns() -> None:
    """A study whose third trial suggests a new parameter, which the sampler warns about."""
    study = _study_with_history({"x": FloatDistribution(0.0, 1.0)}, n=2)
    study.optimize(
        lambda t: t.suggest_float("x", 0, 1) + t.suggest_float(f"z{t.number}", 0, 1), n_trials=1
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_warnings_go_through_optunas_logger_and_follow_its_verbosity() -> None:
    """As for Optuna's own samplers: the warning reaches the ``optuna`` logger's handlers, and
    ``optuna.logging.set_verbosity`` silences it."""
    records = _Records()
    optuna_logger = logging.getLogger("optuna")
    optuna_logger.addHandler(records)
    try:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        _dynamic_study_warns()
        assert any("`z2`" in m and "OrthoBOSampler" in m for m in records.messages)
        records.messages.clear()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        assert not integration._logger.isEnabledFor(logging.WARNING)
        _dynamic_study_warns()
        assert not any("OrthoBOSampler" in m for m in records.messages)
    finally:
        optuna_logger.removeHandler(records)


def _add(study: Study, x: float, value: float, name: str = "x", **kwargs) -> None:
    space = {name: FloatDistribution(0.0, 1.0)}
    study.add_trial(
        optuna.create_trial(params={name: x}, distributions=space, value=value, **kwargs)
    )


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        # Minimize: +inf is the worst finite value (3), -inf the best (1).
        ("minimize", [1.0, 3.0, 3.0, 1.0, 2.0]),
        # Maximize (negated for OrthoBO): +inf is the best (-3), -inf the worst (-1).
        ("maximize", [-1.0, -3.0, -3.0, -1.0, -2.0]),
    ],
)
def test_infinite_values_are_clipped_to_the_finite_range(
    told: list, direction: str, expected: list[float]
) -> None:
    """As ``GPSampler`` (``optuna._gp.gp.warn_and_convert_inf``): an infinite value is told as
    the nearest finite extreme, so the model learns where the objective is bad, with a warning."""
    study = optuna.create_study(
        direction=direction, sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST)
    )
    for x, value in ((0.1, 1.0), (0.3, math.inf), (0.5, 3.0), (0.7, -math.inf), (0.9, 2.0)):
        _add(study, x, value)
    with pytest.warns(OrthobenchWarning, match=r"infinite value \(first in trial 1\)"):
        params = study.sampler.sample_relative(
            study, _create_new_trial(study), {"x": FloatDistribution(0.0, 1.0)}
        )
    assert 0.0 <= params["x"] <= 1.0
    x, y, _ = told[0]
    np.testing.assert_array_equal(x[:, 0], [0.1, 0.3, 0.5, 0.7, 0.9])
    np.testing.assert_array_equal(y, expected)


def test_a_warning_is_shown_once_per_sampler_at_the_users_line() -> None:
    """Each OrthoBO step enters ``warnings.catch_warnings()`` (its fits), which resets Python's
    once-per-location memory, so the default filter showed the same warning at every trial; the
    "always" filter here shows what the sampler itself warns. It pointed into Optuna's code
    (``optuna/trial/_trial.py``), which runs the relative sample at the first suggest."""
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x, value in ((0.1, 1.0), (0.3, math.inf), (0.5, 3.0)):
        _add(study, x, value)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        for _ in range(2):
            study.ask().suggest_float("x", 0.0, 1.0)
    infinite = [w for w in shown if "infinite value" in str(w.message)]
    assert len(infinite) == 1 and infinite[0].filename == __file__


def test_only_infinite_values_are_told_as_zero(told: list) -> None:
    """With no finite value to clip to, every value is 0 (``GPSampler``'s rule): a flat model."""
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    _add(study, 0.2, math.inf)
    _add(study, 0.8, math.inf)
    with pytest.warns(OrthobenchWarning, match="infinite"):
        study.sampler.sample_relative(
            study, _create_new_trial(study), {"x": FloatDistribution(0.0, 1.0)}
        )
    np.testing.assert_array_equal(told[0][1], [0.0, 0.0])


def test_infinite_value_with_finite_constraints_is_kept(told: list) -> None:
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x, value, c in ((0.2, 1.0, -1.0), (0.5, math.inf, 0.5), (0.8, 2.0, -0.5)):
        _add(study, x, value, constraints={"c": c})
    with pytest.warns(OrthobenchWarning, match=r"infinite value \(first in trial 1\)"):
        study.sampler.sample_relative(
            study, _create_new_trial(study), {"x": FloatDistribution(0.0, 1.0)}
        )
    x, y, c = told[0]
    np.testing.assert_array_equal(y, [1.0, 2.0, 2.0])
    np.testing.assert_array_equal(c, [[-1.0], [0.5], [-0.5]])


@pytest.mark.parametrize("in_file", [False, True], ids=["in-memory", "sqlite"])
def test_one_sampler_serves_several_studies(told: list, tmp_path, in_file: bool) -> None:
    """As Optuna's samplers do. A search space cached for the first study made the second fall
    back to random search (in memory) or raise Optuna's ValueError (both in one sqlite file),
    and a warning shown in the first study was not shown in the second."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}") if in_file else None
    sampler = OrthoBOSampler(seed=0, n_startup_trials=2, **{**FAST, "raw_samples": 16})
    for name in ("x", "lr"):
        study = optuna.create_study(storage=storage, sampler=sampler)
        _add(study, 0.2, math.inf, name=name)
        _add(study, 0.6, 1.0, name=name)
        with pytest.warns(OrthobenchWarning, match="infinite"):
            study.ask({name: FloatDistribution(0.0, 1.0)})
    assert len(told) == 2


def _suggest(trial: Trial, distribution: BaseDistribution) -> float:
    if isinstance(distribution, IntDistribution):
        return trial.suggest_int("x", distribution.low, distribution.high, step=distribution.step)
    return trial.suggest_float("x", distribution.low, distribution.high, log=distribution.log)


@pytest.mark.parametrize(
    ("distribution", "bad"),
    [
        (FloatDistribution(0.0, 1.0), 5.0),
        (FloatDistribution(0.0, 1.0), -0.5),
        (FloatDistribution(1e-3, 1.0, log=True), 10.0),
        (IntDistribution(0, 10), 100),
    ],
)
def test_enqueued_trial_outside_the_range_is_left_out_with_a_warning(
    told: list, distribution: BaseDistribution, bad: float
) -> None:
    """``Study.enqueue_trial`` may fix a value outside the distribution (Optuna only warns): it
    would lie outside the unit cube, so the trial is left out, and the warning names it."""
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    good = (distribution.low, distribution.high)
    for value in (good[0], bad, good[1]):
        study.enqueue_trial({"x": value})
    with pytest.warns(UserWarning, match="out of range"):  # Optuna's own warning
        study.optimize(lambda t: _suggest(t, distribution), n_trials=3)
    assert study.trials[1].params["x"] == bad
    with pytest.warns(OrthobenchWarning, match=rf"trial 1 x={bad!r}"):
        study.optimize(lambda t: _suggest(t, distribution), n_trials=1)
    x, y, _ = told[0]
    assert x.shape == (2, 1) and ((0.0 <= x) & (x <= 1.0)).all()
    np.testing.assert_array_equal(y, good)
    assert distribution.low <= study.trials[3].params["x"] <= distribution.high


def test_running_trial_outside_the_range_is_not_told(told: list) -> None:
    """A running trial that suggested an enqueued value outside its distribution is no pending
    point (it would lie outside the unit cube), with the warning the docstring promises; an
    in-range value off the step grid is, at its own place."""
    search_space = {"x": IntDistribution(0, 10, step=2)}
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x in (0, 10):
        study.enqueue_trial({"x": x})
    study.optimize(lambda t: t.suggest_int("x", 0, 10, step=2), n_trials=2)
    study.enqueue_trial({"x": 20})
    with pytest.warns(UserWarning, match="out of range"):
        study.ask().suggest_int("x", 0, 10, step=2)
    study.enqueue_trial({"x": 3})
    study.ask()  # fixed at 3, off the grid: not yet suggested
    with pytest.warns(OrthobenchWarning, match="trial 2 x=20"):
        study.ask(search_space)
    x, _, _ = told[-1]
    # 0, 10 and 3 in the unit cube of [-1, 11] (half a step beyond both ends).
    np.testing.assert_allclose(x[:, 0], [1 / 12, 11 / 12, 4 / 12])


def _trial(x: float, distribution: BaseDistribution | None = None, **kwargs) -> FrozenTrial:
    distribution = distribution or FloatDistribution(0.0, 1.0)
    return optuna.create_trial(
        params={"x": x}, distributions={"x": distribution}, value=kwargs.pop("value", x), **kwargs
    )


@pytest.mark.parametrize(
    ("trials", "name", "distribution", "reason"),
    [
        (
            [_trial(0.2), _trial(0.4), _trial(0.6)],
            "z",
            FloatDistribution(0.0, 1.0),
            "the parameter is missing from complete trials 0, 1, 2 (dynamic search space)",
        ),
        (
            [_trial(0.2), _trial(0.4, FloatDistribution(0.0, 2.0)), _trial(0.6)],
            "x",
            FloatDistribution(0.0, 1.0),
            "the complete trials suggest it from 2 different distributions (dynamic search space)",
        ),
        (
            [_trial(0.2), _trial(0.4), _trial(0.6)],
            "x",
            FloatDistribution(5.0, 6.0),
            "its distribution FloatDistribution(high=6.0, log=False, low=5.0, step=None) differs "
            "from the complete trials' FloatDistribution(high=1.0, log=False, low=0.0, step=None)",
        ),
        (
            [_trial(0.5, FloatDistribution(0.5, 0.5)) for _ in range(3)],
            "x",
            FloatDistribution(0.0, 1.0),
            "its distribution FloatDistribution(high=1.0, log=False, low=0.0, step=None) differs "
            "from the complete trials' single-valued "
            "FloatDistribution(high=0.5, log=False, low=0.5, step=None)",
        ),
        (
            [_trial(0.2, constraints={"c": -1.0}), _trial(0.4), _trial(0.6)],
            "x",
            FloatDistribution(0.0, 1.0),
            "only 1 of the 3 complete trials can be told to OrthoBO, which needs 2 "
            "(trials 1, 2: no constraint values)",
        ),
        (
            [
                _trial(0.2, constraints={"c": -1.0}),
                _trial(0.4, constraints={"c": math.inf}),
                _trial(0.6, constraints={"c": -math.inf}),
            ],
            "x",
            FloatDistribution(0.0, 1.0),
            "only 1 of the 3 complete trials can be told to OrthoBO, which needs 2 "
            "(trials 1, 2: a non-finite constraint value)",
        ),
    ],
    ids=[
        "missing",
        "distributions-differ",
        "new-distribution",
        "single-valued",
        "no-constraints",
        "inf-constraint",
    ],
)
def test_independent_sampling_warning_states_the_reason(
    trials: list[FrozenTrial], name: str, distribution: BaseDistribution, reason: str
) -> None:
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for t in trials:
        study.add_trial(t)
    with mock.patch.object(integration._logger, "warning") as warning:
        trial = study.ask()
        trial.suggest_float(name, distribution.low, distribution.high)
    assert warning.call_count == 1
    assert f"because {reason}. You can" in warning.call_args.args[0]


def test_independent_sampling_warning_names_the_trials_outside_the_range() -> None:
    study = optuna.create_study(sampler=OrthoBOSampler(seed=0, n_startup_trials=2, **FAST))
    for x in (0.2, 7.0, 0.6):
        study.enqueue_trial({"x": x})
    with pytest.warns(UserWarning, match="out of range"):
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    # Three complete trials, the startup count, but only two of them can be told.
    study.sampler._n_startup_trials = 3
    with (
        mock.patch.object(integration._logger, "warning") as warning,
        pytest.warns(OrthobenchWarning, match="trial 1 x=7.0"),
    ):
        study.ask().suggest_float("x", 0, 1)
    assert (
        "because only 2 of the 3 complete trials can be told to OrthoBO, which needs 3 "
        "(trial 1: a parameter outside its distribution's range). You can"
    ) in warning.call_args.args[0]


def test_independent_sampling_reason_when_the_trials_changed_since_the_relative_sample() -> None:
    """A parameter OrthoBO could propose now was sampled independently: the complete trials
    changed after the trial's relative sample (another worker finished some)."""
    study = _study_with_history({"x": FloatDistribution(0.0, 1.0)}, n=2)
    reason = study.sampler._independent_sampling_reason(
        study, _create_new_trial(study), study.trials, "x", FloatDistribution(0.0, 1.0)
    )
    assert reason == (
        "the complete trials changed since this trial's relative sample (parallel workers)"
    )


def test_trials_lists_are_short() -> None:
    assert integration._trials([3]) == "trial 3"
    assert integration._trials([1, 4]) == "trials 1, 4"
    assert integration._trials(list(range(40))) == "trials 0, 1, 2, ..., 39 (40)"
