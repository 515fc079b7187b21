"""TuRBO-1: trust-region resizing, restart on collapse, both acquisitions, determinism."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from botorch.models import SingleTaskGP

from orthobench.optimizers.turbo import TrustRegionState, TuRBO
from orthobench.registry import OPTIMIZERS
from orthobench.surrogates.fit import fit_model
from tests.helpers import drive, record_infos

TINY_TS = dict(n_candidates=64)
TINY_EI = dict(acquisition="qlogei", function_samples=16, raw_samples=16, num_restarts=2)


def sphere(x: np.ndarray) -> float:
    return float(np.sum((x - 0.3) ** 2))


def state(**kwargs: Any) -> TrustRegionState:
    defaults = dict(
        length=0.8,
        length_min=0.5**7,
        length_max=1.6,
        success_tolerance=3,
        failure_tolerance=2,
        min_improvement=1e-3,
        best_value=1.0,
    )
    return TrustRegionState(**{**defaults, **kwargs})


def test_state_halves_after_failures_doubles_after_successes_and_flags_collapse() -> None:
    s = state()
    for _ in range(2):
        s.update(torch.tensor([1.0], dtype=torch.float64))  # no improvement
    assert s.length == 0.4 and s.failure_counter == 0
    for value in (0.9, 0.8, 0.7):
        s.update(torch.tensor([value], dtype=torch.float64))
    assert s.length == 0.8 and s.best_value == 0.7
    s.update(
        torch.tensor([0.6999], dtype=torch.float64)
    )  # below the 1e-3 relative threshold: a failure
    assert s.failure_counter == 1 and s.success_counter == 0
    grown = state(length=1.2, success_tolerance=1)
    grown.update(torch.tensor([0.5], dtype=torch.float64))
    assert grown.length == 1.6  # capped at length_max
    collapsing = state(length=0.01, length_min=0.008, failure_tolerance=1)
    collapsing.update(torch.tensor([2.0], dtype=torch.float64))
    assert collapsing.restart_triggered


def test_region_has_volume_length_to_the_d_and_follows_the_lengthscales() -> None:
    torch.manual_seed(0)
    x = torch.rand(12, 3, dtype=torch.float64)
    y = 10 * x[:, 0] + 0.1 * x[:, 1]  # dimension 0 matters most: shortest lengthscale
    model, _ = fit_model(x, -y)
    opt = TuRBO(3, seed=0)
    opt.state.length = 0.1
    lower, upper = opt.region(model, torch.full((3,), 0.5, dtype=torch.float64))
    width = upper - lower
    assert width.prod().item() == pytest.approx(0.1**3)
    assert width[0] < width[1]


def test_region_shrinks_after_failures_and_restarts_after_collapse() -> None:
    calls = {"n": 0}

    def never_improves(x: np.ndarray) -> float:
        calls["n"] += 1
        # The initial design holds the best value; every later point is worse.
        return 0.1 * calls["n"] if calls["n"] <= 4 else 1.0 + float(np.sum(x))

    opt = TuRBO(2, seed=0, length_min=0.15, failure_tolerance=1, **TINY_TS)
    infos = record_infos(opt)
    drive(opt, never_improves, n_init=4, steps=9)
    assert [info["length"] for info in infos[:3]] == [0.8, 0.4, 0.2]
    assert [info["phase"] for info in infos] == ["trust-region"] * 3 + ["restart-design"] * 4 + [
        "trust-region"
    ] * 2
    assert infos[2]["region_volume"] < infos[1]["region_volume"] < infos[0]["region_volume"]
    assert infos[3]["restarts"] == 1 and infos[7]["length"] == 0.8
    # The new run's GP sees only the restart design (and what followed it).
    assert opt.restarts == 1 and opt._run_start == 7
    restart_points = opt.train_x[7:11]
    assert torch.cdist(restart_points, opt.train_x[:7]).min() > 0


# The qlogei case (1 s on 2 cores) runs with the slow tests; TuRBO's qLogEI acquisition keeps
# test_suggestions_lie_inside_the_region in the default run.
@pytest.mark.parametrize(
    "kwargs",
    [pytest.param(TINY_TS, id="ts"), pytest.param(TINY_EI, id="qlogei", marks=pytest.mark.slow)],
)
def test_turbo_runs_in_the_loop_and_is_deterministic(kwargs: dict) -> None:
    runs, infos = [], []
    for seed in (0, 0, 1):
        opt = TuRBO(2, seed=seed, **kwargs)
        infos.append(record_infos(opt))
        runs.append(drive(opt, sphere, n_init=5, steps=3))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    assert all(math.isfinite(info["length"]) for info in infos[0])


@pytest.mark.parametrize("kwargs", [TINY_TS, TINY_EI], ids=["ts", "qlogei"])
def test_suggestions_lie_inside_the_region(kwargs: dict) -> None:
    opt = TuRBO(2, seed=0, **kwargs)
    drive(opt, sphere, n_init=6, steps=0)
    opt.state.length = 0.2
    bounds = []
    region = opt.region
    opt.region = lambda model, center: bounds.append(region(model, center)) or bounds[-1]  # type: ignore[method-assign]
    suggestion = opt.ask(2)
    lower, upper = (b.numpy() for b in bounds[0])
    assert suggestion.x.shape == (2, 2)
    assert np.all((suggestion.x >= lower - 1e-12) & (suggestion.x <= upper + 1e-12))
    assert np.prod(upper - lower) < 0.2**2 + 1e-12
    assert suggestion.fit_seconds > 0 and suggestion.acq_seconds > 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(acquisition="ucb"), "acquisition="),
        (dict(kernel="linear"), "kernel="),
        (dict(length_min=1.0), "length_min=1.0"),
        (dict(failure_tolerance=-1), "-1"),
    ],
)
def test_bad_params_raise_with_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TuRBO(2, seed=0, **kwargs)


def test_registered_with_the_paper_defaults() -> None:
    params = OPTIMIZERS.resolve("turbo").params
    assert (
        params["length_init"] == 0.8
        and params["length_min"] == 0.5**7
        and params["length_max"] == 1.6
    )
    assert params["success_tolerance"] == 3 and params["acquisition"] == "ts"
    assert TuRBO(20, seed=0).n_candidates == 4000


def test_a_batch_is_one_success_if_any_point_improves_else_one_failure() -> None:
    """As in the paper's code: the batch's best value decides, and a batch counts once."""
    s = state(failure_tolerance=3)
    s.update(torch.tensor([1.2, 0.5, 1.1, 1.3], dtype=torch.float64))  # one point beats 1.0
    assert (s.success_counter, s.failure_counter, s.best_value) == (1, 0, 0.5)
    s.update(torch.tensor([0.6, 0.7, 0.9, 0.55], dtype=torch.float64))  # none beats 0.5
    assert (s.success_counter, s.failure_counter, s.best_value) == (0, 1, 0.5)


def _tell_batches(opt: TuRBO, q: int, steps: int, value: float) -> list[dict[str, Any]]:
    """``steps`` asks of ``q`` points, each told ``value`` everywhere; returns their infos."""
    infos = []
    for _ in range(steps):
        suggestion = opt.ask(q)
        infos.append(suggestion.info)
        opt.tell(suggestion.x, np.full(q, value))
    return infos


@pytest.mark.parametrize(("q", "batches_to_halve"), [(4, 1), (2, 2)])
def test_failure_tolerance_is_the_papers_for_the_told_batch_size(
    q: int, batches_to_halve: int
) -> None:
    """``tau_fail = ceil(max(4, d) / q)`` (d = 2): the region halves after that many failing
    batches of ``q`` points."""
    opt = TuRBO(2, seed=0, **TINY_TS)
    drive(opt, sphere, n_init=4, steps=0)
    _tell_batches(opt, q, batches_to_halve - 1, value=5.0)
    assert opt.state.length == 0.8
    _tell_batches(opt, q, 1, value=5.0)
    assert opt.state.failure_tolerance == batches_to_halve and opt.state.length == 0.4


def test_restart_design_is_proposed_in_batches() -> None:
    """After a collapse the 4-point restart design comes as whole batches of 3 (the second
    overruns it by 2 points, all design), then the new run's trust region, counters at zero."""
    opt = TuRBO(2, seed=0, length_min=0.5, failure_tolerance=1, **TINY_TS)
    drive(opt, sphere, n_init=4, steps=0)
    infos = _tell_batches(opt, 3, 3, value=5.0)
    infos.append(opt.ask(3).info)
    assert [info["phase"] for info in infos] == ["trust-region"] + ["restart-design"] * 2 + [
        "trust-region"
    ]
    assert opt.restarts == 1 and opt._run_start == 7
    expected = opt._new_restart_design().draw(6, dtype=torch.float64)
    torch.testing.assert_close(opt.train_x[7:], expected, rtol=0, atol=0)
    assert (infos[3]["length"], infos[3]["success_counter"], infos[3]["failure_counter"]) == (
        0.8,
        0,
        0,
    )


def test_thompson_batches_are_capped_at_the_candidate_count() -> None:
    assert TuRBO(2, seed=0, **TINY_TS).max_batch == 64
    assert TuRBO(2, seed=0, **TINY_EI).max_batch is None
    opt = TuRBO(2, seed=0, **TINY_TS)
    drive(opt, sphere, n_init=4, steps=0)
    with pytest.raises(ValueError, match="n=65"):
        opt.ask(65)


def test_thompson_batch_takes_each_samples_best_candidate_not_yet_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Point ``i`` of a batch is the maximizer of posterior sample ``i`` among the candidates the
    earlier samples did not take (the paper's code), not the top ``q`` of one sample."""
    opt = TuRBO(2, seed=0, **TINY_TS)
    drive(opt, sphere, n_init=6, steps=0)
    seen: dict[str, torch.Tensor] = {}
    posterior = SingleTaskGP.posterior

    def recording_posterior(self, X, *args, **kwargs):  # noqa: N803 -- BoTorch's name
        post = posterior(self, X, *args, **kwargs)
        rsample = post.rsample

        def recording_rsample(*a, **k):
            seen["X"], seen["samples"] = X, rsample(*a, **k)
            return seen["samples"]

        post.rsample = recording_rsample
        return post

    monkeypatch.setattr(SingleTaskGP, "posterior", recording_posterior)
    x = opt.ask(4).x
    chosen: list[int] = []
    for row in seen["samples"][..., 0]:  # one posterior sample over the candidates each
        row = row.clone()
        row[chosen] = -math.inf
        chosen.append(int(row.argmax()))
    np.testing.assert_array_equal(x, seen["X"][chosen].numpy())
