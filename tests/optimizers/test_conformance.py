"""Conformance: every registered optimizer honours the ask/tell contract and resumes exactly.

Each one, built through the registry with small settings: proposes ``n x d`` points in the unit
cube, fills non-negative timings and a JSON-serializable ``info``, is deterministic (same seed ->
same suggestions; another seed -> different ones), and, rebuilt from its told history and its
``state_dict`` after ``k`` steps, proposes what the uninterrupted optimizer proposes next.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from orthobench.optimizers.base import Optimizer, Suggestion
from orthobench.registry import OPTIMIZERS
from tests.helpers import drive

FAST = {"raw_samples": 16, "num_restarts": 2}
SMALL_PARAMS = {
    "qlogei": {**FAST, "function_samples": 8},
    "ucb": {**FAST, "function_samples": 8},
    "orthobo": {**FAST, "theta_samples": 8},
    "mc-ei": {**FAST, "theta_samples": 8},
    "turbo": {**FAST, "function_samples": 8, "n_candidates": 100},
    "rpr": {**FAST, "function_samples": 8, "fractions_of_outliers": [0.0, 0.2]},
    "mc-tpe": {"bootstrap_fits": 8},
    "orthobo-tpe": {"bootstrap_fits": 8, "control_mean_draws": 64},
}
# Cases whose state is more than the ask counter once a few steps have run: an ensemble with
# weights that move, and a TuRBO that restarts after one failure (so the state holds a restart).
STATEFUL_PARAMS = {
    "orthobo-ensemble": ("orthobo", {"kernel": ["linear", "matern52-iso"]}),
    # The fast fit's warm starts (the members' last thetas, kept by the default fit) are state
    # too; with BoTorch's fit they are not kept.
    "orthobo-botorch-fit": ("orthobo", {"kernel": ["linear", "matern52-iso"], "fit": "botorch"}),
    # A fit forced onto the CPU (on a GPU run the model then moves to the device each step).
    "qlogei-fast-fit-on-cpu": ("qlogei", {"fit": "fast", "fit_device": "cpu"}),
    "turbo-restarting": (
        "turbo",
        {"length_init": 0.8, "length_min": 0.5, "failure_tolerance": 1, "success_tolerance": 1},
    ),
}


# Relevance pursuit refits the GP for every support size: seconds per step. Its cases run with
# the slow tests (test_rpr.py keeps a fast single-fit check in the default run).
SLOW = {"rpr"}
# The costliest GP cases (0.7-1.7 s each on 2 cores) run with the slow tests too. The default run
# keeps orthobo's contract, and the resumes of orthobo, mc-ei, ucb, orthobo-ensemble (the fast
# fit's warm starts) and turbo-restarting; qlogei and turbo resume from a batch in
# test_batch_proposals.py.
SLOW_CONTRACT = SLOW | {"qlogei", "ucb", "turbo", "mc-ei"}
SLOW_RESUME = SLOW | {"qlogei", "turbo", "orthobo-botorch-fit", "qlogei-fast-fit-on-cpu"}


def _names() -> list:
    return [
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CONTRACT else n
        for n in OPTIMIZERS.names()
    ]


def objective(u: np.ndarray) -> float:
    return float(np.sum((u - 0.3) ** 2) + 0.1 * np.sin(10 * u[0]))


def make(name: str, seed: int, device: torch.device | str = "cpu", **overrides) -> Optimizer:
    params = {
        k: v for k, v in SMALL_PARAMS.get(name, {}).items() if k in OPTIMIZERS.resolve(name).params
    }
    return OPTIMIZERS.create(
        name, 3, seed=seed, device=torch.device(device), dtype=torch.float64, **params, **overrides
    )


@pytest.mark.parametrize("name", _names())
def test_optimizer_contract(name, device):
    first = make(name, seed=11, device=device)
    ys = drive(first, objective, n_init=6, steps=3)
    assert ys.shape == (9,) and np.isfinite(ys).all()
    suggestion = first.ask(1)
    assert suggestion.x.shape == (1, 3)
    assert np.all((suggestion.x >= 0) & (suggestion.x <= 1))
    assert suggestion.fit_seconds >= 0 and suggestion.acq_seconds >= 0
    json.dumps(suggestion.info)

    again = make(name, seed=11, device=device)
    np.testing.assert_array_equal(drive(again, objective, n_init=6, steps=3), ys)
    other = make(name, seed=12, device=device)
    assert not np.array_equal(drive(other, objective, n_init=6, steps=3)[6:], ys[6:])


def _resume_cases() -> list:
    cases = [
        pytest.param(name, {}, id=name, marks=[pytest.mark.slow] if name in SLOW_RESUME else [])
        for name in OPTIMIZERS.names()
    ]
    cases += [
        pytest.param(name, params, id=case, marks=[pytest.mark.slow] if case in SLOW_RESUME else [])
        for case, (name, params) in STATEFUL_PARAMS.items()
    ]
    return cases


@pytest.mark.parametrize(("name", "overrides"), _resume_cases())
def test_optimizer_resumes_from_history_and_state(name, overrides, device):
    """Save after k steps, rebuild from the stored observations and state: the next two
    suggestions equal the uninterrupted optimizer's (up to round-off of the stored values)."""
    original = make(name, seed=5, device=device, **overrides)
    drive(original, objective, n_init=6, steps=4)
    state = json.loads(json.dumps(original.state_dict()))  # what a results file can hold

    resumed = make(name, seed=5, device=device, **overrides)
    resumed.tell(original.train_x.cpu().numpy(), original.train_y.cpu().numpy())
    resumed.load_state_dict(state)
    for _ in range(2):
        expected, got = original.ask(1), resumed.ask(1)
        np.testing.assert_allclose(got.x, expected.x, rtol=0, atol=1e-9)
        y = np.array([objective(expected.x[0])])
        original.tell(expected.x, y)
        resumed.tell(expected.x, y)
    assert json.dumps(resumed.state_dict()) == json.dumps(original.state_dict())


def test_resume_refuses_a_state_of_another_history():
    original = make("sobol", seed=0)
    drive(original, objective, n_init=4, steps=2)
    resumed = make("sobol", seed=0)
    resumed.tell(original.train_x[:3].numpy(), original.train_y[:3].numpy())
    with pytest.raises(ValueError, match="saved with 6 observations.*has 3"):
        resumed.load_state_dict(original.state_dict())


class _Broken(Optimizer):
    min_observations = 0

    def __init__(self, dim: int, *, x: list[list[float]], **kwargs) -> None:
        super().__init__(dim, **kwargs)
        self.x = np.array(x)

    def _ask(self, n: int) -> Suggestion:
        return Suggestion(x=self.x)


def test_template_ask_checks_what_the_subclass_proposes():
    with pytest.raises(RuntimeError, match=r"shape \(1, 3\), expected \(1, 2\)"):
        _Broken(2, seed=0, x=[[0.1, 0.2, 0.3]]).ask(1)
    with pytest.raises(RuntimeError, match="outside the unit cube"):
        _Broken(2, seed=0, x=[[0.1, 1.5]]).ask(1)
    # Round-off beyond the cube is clipped, not an error.
    assert _Broken(2, seed=0, x=[[0.0, 1.0 + 1e-12]]).ask(1).x.max() == 1.0
    with pytest.raises(ValueError, match="n=0"):
        _Broken(2, seed=0, x=[[0.1, 0.2]]).ask(0)


def test_template_ask_counts_asks_and_times_untimed_steps():
    opt = _Broken(2, seed=0, x=[[0.1, 0.2]])
    seeds = []
    for _ in range(2):
        suggestion = opt.ask(1)
        seeds.append(opt._step_seed("x"))
        assert suggestion.acq_seconds > 0
    assert opt.state_dict()["asks"] == 2 and seeds[0] != seeds[1]
