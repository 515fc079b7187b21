"""OrthoBO and MC-EI end to end (small budgets), reproducibility, recorded diagnostics, registry."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from botorch.exceptions import OptimizationWarning
from botorch.optim import optimize as botorch_optimize

from orthobench.diagnostics import OrthoBOStep
from orthobench.estimators import DEFAULT_CONTROL_VARIATE
from orthobench.exceptions import ConfigError, NumericsWarning, RegistryError
from orthobench.optimizers import gp_base
from orthobench.optimizers.orthobo import MCEI, OrthoBO
from orthobench.pointsets import point_count
from orthobench.registry import OPTIMIZERS
from orthobench.surrogates.batch_ei import canonical_order
from orthobench.theta_estimators import DEFAULT_THETA_ESTIMATOR
from tests.helpers import drive
from tests.optimizers.test_diagnostics import STORED

SMALL = dict(theta_samples=16, raw_samples=32, num_restarts=2)


def branin01(x: np.ndarray) -> float:
    """Branin on the unit square (minimum ~0.398)."""
    a, b = 15.0 * x[0] - 5.0, 15.0 * x[1]
    return float(
        (b - 5.1 / (4 * np.pi**2) * a**2 + 5 / np.pi * a - 6) ** 2
        + 10 * (1 - 1 / (8 * np.pi)) * np.cos(a)
        + 10
    )


def _run(optimizer, steps: int = 3, seed: int = 0):
    suggestions = []
    ask = optimizer.ask

    def recording_ask(n: int = 1):
        s = ask(n)
        suggestions.append(s)
        return s

    optimizer.ask = recording_ask
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        ys = drive(optimizer, branin01, n_init=6, steps=steps, seed=seed)
    return ys, suggestions


@pytest.mark.parametrize("cls", [OrthoBO, MCEI])
def test_runs_end_to_end_and_records_diagnostics(cls) -> None:
    ys, suggestions = _run(cls(2, seed=0, **SMALL))
    assert ys.shape == (9,) and np.isfinite(ys).all()
    for s in suggestions:
        assert s.fit_seconds > 0 and s.acq_seconds > 0
        json.dumps(s.info)
        assert s.info["ensemble_weights"] == [1.0] and s.info["ensemble_entropy"] == 0.0
        assert s.info["estimator"] == ("mc" if cls is MCEI else DEFAULT_THETA_ESTIMATOR)
        assert len(s.info["eig_floored"]) == 1 and "fallback" in s.info
        # What the loop stores (it moves the fallback to its own column): the typed step's keys,
        # in the order stored results have them.
        stored = {k: v for k, v in s.info.items() if k != "fallback"}
        assert list(stored) == list(json.loads(STORED))
        assert OrthoBOStep.from_info(stored).to_info() == stored


def test_ensemble_weights_move_and_are_recorded() -> None:
    opt = OrthoBO(2, seed=1, kernel=["linear", "rbf-iso", "matern52-ard"], **SMALL)
    _, suggestions = _run(opt, steps=4)
    first, last = suggestions[0].info, suggestions[-1].info
    assert first["ensemble_kernels"] == ["linear", "rbf-iso", "matern52-ard"]
    assert first["ensemble_weights"] == pytest.approx([1 / 3] * 3)
    assert sum(last["ensemble_weights"]) == pytest.approx(1.0)
    assert last["ensemble_weights"] != first["ensemble_weights"]
    assert min(last["ensemble_weights"]) > 0.0
    assert 0.0 <= last["ensemble_entropy"] <= last["ensemble_max_entropy"]


@pytest.mark.parametrize("scale", [1e-9, 1e-12, 1e6])
def test_a_proposal_does_not_depend_on_the_objectives_scale(scale: float) -> None:
    """The outcome is standardized, so a scaled objective gives the same step; below a spread
    of 1e-8 BoTorch's default standardization took the targets as constant, and the proposal
    was a corner of the cube, the data ignored."""
    x = torch.quasirandom.SobolEngine(2, scramble=True, seed=0).draw(8).double().numpy()
    y = np.sum((x - 0.3) ** 2, axis=-1)
    proposals = []
    for values in (y, scale * y):
        optimizer = OrthoBO(2, seed=4, **SMALL)
        optimizer.tell(x, values)
        proposals.append(optimizer.ask(1).x[0])
    np.testing.assert_allclose(proposals[1], proposals[0], atol=1e-6)


@pytest.mark.slow  # the default run has it in test_conformance.py's contract of orthobo
def test_same_seed_same_suggestions_other_seed_differs() -> None:
    a = _run(OrthoBO(2, seed=3, **SMALL))[0]
    b = _run(OrthoBO(2, seed=3, **SMALL))[0]
    c = _run(OrthoBO(2, seed=4, **SMALL))[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[6:], c[6:])


def test_mcei_shares_theta_draws_with_orthobo() -> None:
    """Like-for-like: same seed, same history -> the same theta draws, only the estimator differs."""
    x = np.random.default_rng(0).random((8, 2))
    y = np.array([branin01(p) for p in x])
    ortho = OrthoBO(2, seed=5, estimator=DEFAULT_CONTROL_VARIATE, **SMALL)
    naive = MCEI(2, seed=5, **SMALL)
    for opt in (ortho, naive):
        opt.tell(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        a, b = ortho.acquisition(), naive.acquisition()
    torch.testing.assert_close(a.controls[0], b.controls[0])
    torch.testing.assert_close(a.members[0].theta, b.members[0].theta)
    assert (a.estimator, b.estimator) == (DEFAULT_CONTROL_VARIATE, "mc")


@pytest.mark.parametrize(
    ("estimator", "theta_sampling"),
    [("orth-crossfit", "antithetic"), ("orth-quadratic", "qmc"), ("orth", "iid")],
)
def test_other_estimators_and_samplers_run(estimator: str, theta_sampling: str) -> None:
    ys, suggestions = _run(
        OrthoBO(2, seed=2, estimator=estimator, theta_sampling=theta_sampling, **SMALL), steps=1
    )
    assert np.isfinite(ys).all()
    assert suggestions[0].info["theta_sampling"] == theta_sampling


@pytest.mark.parametrize(
    ("estimator", "rb", "rule", "dims"),
    [
        ("sr3+rb", False, "sr3", 3),
        ("radial-cross", True, "radial-cross", 3),
        ("qmc-owen", False, "qmc-owen", 4),
    ],
)
def test_point_set_estimators_run(estimator: str, rb: bool, rule: str, dims: int) -> None:
    """Matern-5/2 ARD in 2-d: p = 4 (mean, noise, 2 lengthscales), p - 1 = 3 with RB."""
    ys, suggestions = _run(OrthoBO(2, seed=2, estimator=estimator, rb=rb, **SMALL), steps=2)
    assert np.isfinite(ys).all()
    for s in suggestions:
        assert s.info["estimator"] == estimator and s.info["rb"] == (rb or "+rb" in estimator)
        assert s.info["n_evaluations"] == [point_count(rule, dims, SMALL["theta_samples"])]


def test_rb_draws_integrate_the_constant_mean_out() -> None:
    opt = OrthoBO(2, seed=6, estimator="orth-shrink+rb", **SMALL)
    opt.tell(np.random.default_rng(1).random((6, 2)), np.arange(6.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        acqf = opt.acquisition()
    assert acqf.controls[0].shape == (16, 3)
    assert acqf.members[0].constant_mean_variance > 0


def test_invalid_arguments_raise_with_values() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        OrthoBO(2, seed=0, estimator="nope")
    with pytest.raises(ValueError, match="'sobol'"):
        OrthoBO(2, seed=0, theta_sampling="sobol")
    with pytest.raises(ValueError, match="alpha=2.0"):
        OrthoBO(2, seed=0, alpha=2.0)
    with pytest.raises(ValueError, match="'cosine'"):
        OrthoBO(2, seed=0, kernel=["rbf-iso", "cosine"])
    with pytest.raises(ValueError, match="`batch_maximization` must be one of .* got 'both'"):
        OrthoBO(2, seed=0, batch_maximization="both")
    opt = OrthoBO(2, seed=0, **SMALL)
    with pytest.raises(ValueError, match="has 0"):
        opt.ask()
    opt.tell(np.random.default_rng(0).random((4, 2)), np.arange(4.0))
    with pytest.raises(ValueError, match="n=0"):
        opt.ask(0)


@pytest.mark.parametrize(
    "name", ["theta_samples", "screen_theta_samples", "coarse_theta_samples", "batch_theta_samples"]
)
def test_a_draw_budget_has_one_minimum_at_load_and_in_code(name: str) -> None:
    with pytest.raises(RegistryError) as loaded:
        OPTIMIZERS.check_params("mc-ei", {name: 3})
    with pytest.raises(ConfigError) as built:
        MCEI(2, seed=0, **{name: 3})
    assert built.value.reason == "must be greater than or equal to 4, but got int 3."
    assert loaded.value.reason == f"optimizer 'mc-ei' parameter {name!r}: {built.value.reason}"


def test_registry_exposes_the_suite_parameters() -> None:
    ortho = OPTIMIZERS.resolve("orthobo").params
    assert ortho == {
        "kernel": "matern52-ard",
        "theta_samples": 512,
        "estimator": DEFAULT_THETA_ESTIMATOR,
        "theta_sampling": "iid",
        "rb": False,
        "alpha": 1e-3,
        "tau": 1.0,
        "delta": 0.001,
        "raw_samples": 512,
        "num_restarts": 8,
        "screen_theta_samples": 64,
        "coarse_theta_samples": None,
        "batch_theta_samples": 64,
        "batch_maximization": "greedy",
        "fit": "fast",
        "fit_device": "auto",
    }
    naive = OPTIMIZERS.resolve("mc-ei").params
    assert set(naive) == set(ortho) - {"estimator", "alpha", "rb"}
    OPTIMIZERS.check_params(
        "orthobo", {"theta_samples": 32, "estimator": "orth-crossfit", "alpha": 0.01}
    )


def _maximizations(monkeypatch, **params) -> tuple[list[dict], np.ndarray, OrthoBO]:
    """The keyword arguments and results of each ``optimize_acqf`` call of one ``ask(4)`` on an
    8-point Branin state, its batch, and the optimizer (after the ask)."""
    calls = []
    real = gp_base.optimize_acqf

    def spy(*args, **kwargs):
        candidate, value = real(*args, **kwargs)
        calls.append({**kwargs, "acqf": args[0], "candidate": candidate})
        return candidate, value

    monkeypatch.setattr(gp_base, "optimize_acqf", spy)
    x = np.random.default_rng(3).random((8, 2))
    optimizer = OrthoBO(2, **SMALL, seed=0, **params)
    optimizer.tell(x, np.array([branin01(row) for row in x]))
    return calls, optimizer.ask(4).x, optimizer


def test_a_greedy_batch_is_climbed_jointly_from_its_greedy_points(monkeypatch) -> None:
    """The default at q > 1: one sequential-greedy ``optimize_acqf`` on ``batch_theta_samples``
    draws, then one joint restart from its batch on all ``theta_samples`` draws, whose result is
    the proposal and is worth at least the greedy batch."""
    calls, batch, optimizer = _maximizations(
        monkeypatch, screen_theta_samples=8, batch_theta_samples=8
    )
    greedy, climb = calls
    assert greedy["sequential"] and greedy["ic_generator"] is None  # no screen: it knows no pending
    assert [gp.num_samples for gp in greedy["acqf"].members] == [8]
    assert not climb["sequential"]
    assert [gp.num_samples for gp in climb["acqf"].members] == [16]
    # from the greedy batch in canonical order
    start = canonical_order(greedy["candidate"][None])
    torch.testing.assert_close(climb["batch_initial_conditions"], start)
    np.testing.assert_array_equal(batch, climb["candidate"].numpy())
    # the acquisition the climb maximized (same seeds before the tell)
    acqf = optimizer._build_acquisition(optimizer._fit(), 16, 4)
    with torch.no_grad():
        assert float(acqf(climb["candidate"][None])) >= float(acqf(greedy["candidate"][None]))


def test_a_failed_joint_climb_keeps_the_greedy_batch(monkeypatch) -> None:
    """A climb that fails falls back to a Sobol' batch; the greedy batch, better, is kept."""
    real = gp_base.optimize_acqf

    def climb_fails(*args, **kwargs):
        if kwargs.get("batch_initial_conditions") is not None:
            raise RuntimeError("the climb failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(gp_base, "optimize_acqf", climb_fails)
    with pytest.warns(NumericsWarning, match="the climb failed"):
        calls, batch, _ = _maximizations(monkeypatch, screen_theta_samples=8)
    (greedy,) = calls
    assert greedy["sequential"]
    np.testing.assert_array_equal(batch, canonical_order(greedy["candidate"][None])[0].numpy())


def test_a_joint_batch_maximization_is_one_screened_multistart(monkeypatch) -> None:
    calls, batch, _ = _maximizations(
        monkeypatch, batch_maximization="joint", screen_theta_samples=8
    )
    (joint,) = calls
    assert not joint["sequential"] and joint["batch_initial_conditions"] is None
    assert joint["ic_generator"] is not None  # the raw batches screened on 8 draws
    np.testing.assert_array_equal(batch, joint["candidate"].numpy())


# 128 draws, a small multistart: the screen's and the coarse stage's tests ask on one Branin state.
MAXIMIZE_SETTINGS = dict(theta_samples=128, raw_samples=64, num_restarts=4, seed=0)


def _ask_on_branin(device, **params):
    """``(suggestion, full acquisition, candidate 1 x 1 x 2)`` of one ask on an 8-point Branin
    state; the acquisition is the one ``ask`` maximized, rebuilt on all 128 draws."""
    x = np.random.default_rng(3).random((8, 2))
    optimizer = OrthoBO(2, **MAXIMIZE_SETTINGS, **params, device=device)
    optimizer.tell(x, np.array([branin01(row) for row in x]))
    suggestion = optimizer.ask(1)
    candidate = torch.as_tensor(suggestion.x, dtype=torch.float64, device=device)
    return suggestion, optimizer.acquisition(), candidate.reshape(1, 1, 2)


def test_raw_samples_are_screened_on_fewer_draws_and_climbed_on_all(device, monkeypatch) -> None:
    """With ``screen_theta_samples: 16`` of 128 draws, the raw samples are scored by a 16-draw
    acquisition, the restarts climb the 128-draw one (the candidate is stationary there, or on
    a bound), the candidate is as good as the all-draws screen's, and each step records the
    screen's budget (None: all draws)."""
    screened = []
    real_screen = gp_base.gen_batch_initial_conditions

    def spy(acq_function, *args, **kwargs):
        screened.append([gp.num_samples for gp in acq_function.members])
        return real_screen(acq_function, *args, **kwargs)

    monkeypatch.setattr(gp_base, "gen_batch_initial_conditions", spy)
    values, budgets = [], []
    for screen in (None, 16):
        suggestion, full, candidate = _ask_on_branin(device, screen_theta_samples=screen)
        budgets.append(suggestion.info["screen_theta_samples"])
        candidate.requires_grad_(True)
        value = full(candidate)
        (grad,) = torch.autograd.grad(value.sum(), candidate)
        interior = (candidate > 1e-6) & (candidate < 1 - 1e-6)
        assert grad[interior].abs().max() < 1e-3 * max(1.0, abs(float(value.detach())))
        values.append(float(value.detach()))
    assert screened == [[16]]  # the all-draws run screened inside optimize_acqf
    assert budgets == [None, 16]
    assert values[1] >= values[0] - 1e-6
    assert OrthoBO(2, screen_theta_samples=128, **MAXIMIZE_SETTINGS)._screen_samples(128) is None


def test_screened_starts_are_drawn_again_after_an_optimization_warning(monkeypatch) -> None:
    """When the restarts end with an ``OptimizationWarning``, ``optimize_acqf`` runs them once more
    from new starting points, and with the screen those are screened too (a second screen, a
    second multistart), as BoTorch does with its own starts."""
    screened = []
    real_screen = gp_base.gen_batch_initial_conditions

    def spy(acq_function, *args, **kwargs):
        screened.append([gp.num_samples for gp in acq_function.members])
        return real_screen(acq_function, *args, **kwargs)

    multistarts = []
    real_multistart = botorch_optimize.gen_candidates_scipy

    def warns_first(*args, **kwargs):
        multistarts.append(args[0].clone())  # the starting points
        result = real_multistart(*args, **kwargs)
        if len(multistarts) == 1:
            warnings.warn("L-BFGS-B stopped abnormally", OptimizationWarning, stacklevel=1)
        return result

    monkeypatch.setattr(gp_base, "gen_batch_initial_conditions", spy)
    monkeypatch.setattr(botorch_optimize, "gen_candidates_scipy", warns_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # optimize_acqf's "trying again"
        _ask_on_branin(torch.device("cpu"), screen_theta_samples=16)
    assert screened == [[16], [16]]
    assert len(multistarts) == 2
    assert not torch.equal(multistarts[0], multistarts[1])


def test_coarse_stage_reaches_the_full_multistarts_optimum(device) -> None:
    """The multistart on 16 of 128 draws, then the best two results polished on all 128, ends
    where the multistart on all draws does (the same fit and draws: one seed), and each step
    records the coarse budget. On a GPU the coarse stage does not run."""
    values, budgets = [], []
    for coarse in (None, 16):
        suggestion, full, candidate = _ask_on_branin(device, coarse_theta_samples=coarse)
        budgets.append(suggestion.info["coarse_theta_samples"])
        with torch.no_grad():
            values.append(float(full(candidate)))
    assert budgets == [None, 16 if device.type == "cpu" else None]
    assert values[1] >= values[0] - 1e-6
    assert OrthoBO(2, coarse_theta_samples=128, **MAXIMIZE_SETTINGS)._coarse_samples(128) is None
