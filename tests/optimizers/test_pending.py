"""Pending points (``ask(n, pending=P)``): points asked earlier and still being evaluated.

Every registered optimizer takes ``pending=None`` and an empty ``0 x d`` array as no pending
points; one that accepts them (``accepts_pending``) proposes valid points with them, the same for
the same seed, history and pending points, and one that does not refuses them on one line. Bad
pending points are refused before any fit. The GP optimizers value a candidate jointly with the
pending points, so the point asked with the optimizer's own proposal pending moves away from it;
OrthoBO then runs on its batch acquisition at every ``n`` (the joint value of ``[pending;
candidate]`` is tested in tests/test_acquisition_batch.py). Optuna's TPE makes the pending points
RUNNING trials while it samples (its constant liar).

RPR's relevance-pursuit fit is replaced by a plain GP fit here: the pending points concern its
acquisition, and the pursuit takes seconds per step (its own tests are in test_rpr.py).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from optuna.trial import TrialState

from orthobench.acquisition import MarginalLogQCEI, MarginalLogQEI
from orthobench.optimizers import gp_base, rpr
from orthobench.optimizers.base import Optimizer, Suggestion
from orthobench.optimizers.optuna_tpe import OptunaTPE
from orthobench.registry import OPTIMIZERS
from orthobench.surrogates.fit import fit_model
from tests.helpers import drive
from tests.optimizers.test_conformance import SMALL_PARAMS, objective
from tests.optimizers.test_constrained_optimizers import gramacy_design

DIM, N_INIT = 3, 12
# Two pending points: one near the objective's minimum (0.3, 0.3, 0.3), one away from it.
PENDING = np.array([[0.32, 0.28, 0.3], [0.8, 0.1, 0.6]])
# The GP baselines' fast fit: BoTorch's takes seconds per step on these states.
PARAMS: dict[str, dict[str, Any]] = {
    **SMALL_PARAMS,
    **{name: {**SMALL_PARAMS[name], "fit": "fast"} for name in ("qlogei", "ucb")},
    "tpe-optuna": {"n_startup_trials": 4},
}
ACCEPTING = sorted(n for n in OPTIMIZERS.names() if OPTIMIZERS.resolve(n).factory.accepts_pending)
# The BoTorch baselines' costlier asks run with the slow tests; the default run keeps OrthoBO,
# MC-EI, Sobol' and Optuna's TPE here and qLogEI's X_pending in the GP tests below.
_SLOW_PROPOSALS = {"qlogei", "rpr", "ucb"}
REFUSING = sorted(set(OPTIMIZERS.names()) - set(ACCEPTING))
GP_ACCEPTING = ["mc-ei", "orthobo", "qlogei", "rpr", "ucb"]


@pytest.fixture(autouse=True)
def plain_rpr_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """RPR on a plain GP's fit (no outliers) instead of relevance pursuit's."""

    def fit(train_x: torch.Tensor, train_y: torch.Tensor, *, kernel: str, **_: Any) -> tuple:
        model, _ = fit_model(train_x, train_y, kernel, fit="fast")
        return model, {"fallback": None, "outliers": []}

    monkeypatch.setattr(rpr, "fit_robust_gp", fit)


@pytest.fixture(autouse=True)
def quiet() -> Any:
    # Small fits on 12 points warn about their numerics; not what these tests check.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def started(
    name: str, seed: int = 0, device: torch.device | str = "cpu", **overrides: Any
) -> Optimizer:
    """``name`` with small settings, told ``N_INIT`` scrambled-Sobol' points of ``objective``."""
    params = {k: v for k, v in PARAMS.get(name, {}).items() if k in OPTIMIZERS.resolve(name).params}
    opt = OPTIMIZERS.create(
        name, DIM, seed=seed, device=device, dtype=torch.float64, **{**params, **overrides}
    )
    drive(opt, objective, n_init=N_INIT, steps=0)
    return opt


def test_the_registry_splits_as_documented() -> None:
    assert ACCEPTING == ["mc-ei", "orthobo", "qlogei", "rpr", "sobol", "tpe-optuna", "ucb"]
    assert REFUSING == ["mc-tpe", "orthobo-tpe", "turbo"]


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_PROPOSALS else n for n in ACCEPTING],
)
def test_accepting_optimizer_proposes_with_pending_points_reproducibly(
    name: str, device: torch.device
) -> None:
    first, again = started(name, device=device), started(name, device=device)
    for n in (1, 2):
        x = first.ask(n, pending=PENDING).x
        assert x.shape == (n, DIM) and np.all((x >= 0) & (x <= 1))
        assert first.pending is None
        np.testing.assert_array_equal(again.ask(n, pending=PENDING).x, x)


@pytest.mark.parametrize("name", REFUSING)
def test_refusing_optimizer_raises_one_line_naming_its_class(name: str) -> None:
    opt = started(name)
    with pytest.raises(ValueError, match=f"{type(opt).__name__} does not accept pending") as err:
        opt.ask(1, pending=PENDING)
    assert "\n" not in str(err.value)
    assert opt.state_dict()["asks"] == 0


@pytest.mark.parametrize("name", sorted(OPTIMIZERS.names()))
def test_none_and_empty_pending_are_no_pending_points(name: str) -> None:
    """``pending=None`` is the plain ask (bit-identical to before: tests/test_golden.py); an
    empty ``0 x d`` array proposes the same."""
    x = started(name).ask(1, pending=None).x
    np.testing.assert_array_equal(started(name).ask(1, pending=np.empty((0, DIM))).x, x)


@pytest.mark.parametrize(
    ("pending", "match"),
    [
        (np.zeros((1, DIM - 1)), r"shape p x 3, but got \(1, 2\)"),
        (np.zeros(DIM), r"shape p x 3, but got \(3,\)"),
        (np.array([[0.1, np.nan, 0.2], [0.1, 0.2, 0.3]]), r"finite pending points, but rows \[0\]"),
        (np.array([[0.1, 0.2, 0.3], [0.5, 1.1, 0.5]]), r"unit cube, but rows \[1\]"),
        (np.array([[-1e-6, 0.2, 0.3]]), r"unit cube, but rows \[0\]"),
    ],
)
@pytest.mark.parametrize("name", sorted(OPTIMIZERS.names()))
def test_bad_pending_points_are_refused_before_any_fit(
    name: str, pending: np.ndarray, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opt = started(name)
    monkeypatch.setattr(opt, "_ask", lambda n: pytest.fail("_ask ran"))
    with pytest.raises(ValueError, match=match) as err:
        opt.ask(1, pending=pending)
    assert "\n" not in str(err.value)
    assert opt.state_dict()["asks"] == 0 and opt.pending is None


class _Spy(Optimizer):
    """Records the pending points it sees; raises when told to."""

    min_observations = 0
    accepts_pending = True

    def __init__(self, dim: int, **kwargs: Any) -> None:
        super().__init__(dim, **kwargs)
        self.seen: list[torch.Tensor | None] = []
        self.fail = False

    def _ask(self, n: int) -> Suggestion:
        self.seen.append(self.pending)
        if self.fail:
            raise RuntimeError("broken step")
        return Suggestion(x=np.full((n, self.dim), 0.5))


def test_pending_points_are_an_attribute_of_the_ask_only() -> None:
    """During ``_ask`` the pending points are a ``p x d`` tensor of the optimizer's dtype,
    round-off beyond the cube clipped; None without any, and None again after every ask, one
    that raised too."""
    opt = _Spy(2, seed=0, dtype=torch.float32)
    opt.ask(1, pending=np.array([[1.0 + 1e-12, -1e-12], [0.25, 0.5]]))
    opt.ask(1)
    opt.ask(1, pending=np.empty((0, 2)))
    seen = opt.seen[0]
    assert seen.dtype == torch.float32 and seen.shape == (2, 2)
    assert seen.tolist() == [[1.0, 0.0], [0.25, 0.5]]
    assert opt.seen[1:] == [None, None] and opt.pending is None
    opt.fail = True
    with pytest.raises(RuntimeError, match="broken step"):
        opt.ask(1, pending=np.array([[0.5, 0.5]]))
    assert opt.seen[-1] is not None and opt.pending is None


def test_pending_is_reset_after_a_gp_step_that_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    opt = started("qlogei")

    def broken(*args: Any, **kwargs: Any) -> None:
        assert opt.pending is not None
        raise RuntimeError("fit failed")

    monkeypatch.setattr(opt, "_fit", broken)
    with pytest.raises(RuntimeError, match="fit failed"):
        opt.ask(1, pending=PENDING)
    assert opt.pending is None


def _record_acquisitions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any, int]]:
    """Make ``optimize_acqf`` record each ``(acquisition, its X_pending then, q)``."""
    calls: list[tuple[Any, Any, int]] = []
    maximize = gp_base.optimize_acqf

    def record(acq_function: Any, **kwargs: Any) -> Any:
        pending = acq_function.X_pending
        calls.append((acq_function, None if pending is None else pending.clone(), kwargs["q"]))
        return maximize(acq_function, **kwargs)

    monkeypatch.setattr(gp_base, "optimize_acqf", record)
    return calls


@pytest.mark.parametrize("name", GP_ACCEPTING)
def test_gp_proposal_moves_away_from_its_own_pending_point(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``x1`` maximizes the acquisition; asked again from the same state with ``x1`` pending,
    a second evaluation at ``x1`` adds nothing to the batch ``[x1; x1]``, so the maximizer
    moves: ``x2`` is away from ``x1``, and the acquisition with ``x1`` pending is higher at
    ``x2``: for the log-EI acquisitions by more than 0.05 (5% more expected improvement;
    0.11-11 on these states), for qUCB, whose pending point's own value dominates, at all."""
    x1 = started(name).ask(1).x
    calls = _record_acquisitions(monkeypatch)
    x2 = started(name).ask(1, pending=x1).x
    assert np.linalg.norm(x2 - x1) > 1e-3
    acqf = calls[-1][0]  # OrthoBO's climb on all draws
    with torch.no_grad():
        at_x1, at_x2 = acqf(torch.as_tensor(np.stack([x1, x2]))).tolist()
    assert at_x2 > at_x1 + (0.0 if name == "ucb" else 0.05)


@pytest.mark.parametrize("name", ["orthobo", "mc-ei"])
@pytest.mark.parametrize("n", [1, 2])
def test_orthobo_steps_with_pending_points_run_on_its_batch_acquisition(
    name: str, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even at ``n = 1``: the greedy search and the climb each maximize the nested marginal qEI
    with the pending points as ``X_pending`` (kept as the base of the greedy batch's), on inner
    base samples with a column per pending point and candidate."""
    calls = _record_acquisitions(monkeypatch)
    started(name, theta_samples=16, batch_theta_samples=8).ask(n, pending=PENDING)
    assert len(calls) == 2  # the greedy search on 8 draws, the climb on 16
    for acqf, pending, q in calls:
        assert type(acqf) is MarginalLogQEI and q == n
        torch.testing.assert_close(pending, torch.as_tensor(PENDING), rtol=0, atol=0)
        torch.testing.assert_close(acqf.X_pending, pending, rtol=0, atol=0)  # restored
        assert acqf.base_samples.shape[-1] == len(PENDING) + n
    assert [acqf.members[0].num_samples for acqf, _, _ in calls] == [8, 16]


@pytest.mark.parametrize(
    "overrides",
    [{"batch_maximization": "joint"}, {"coarse_theta_samples": 4}, {"screen_theta_samples": 4}],
    ids=["joint", "coarse", "screen"],
)
def test_orthobo_honours_its_batch_settings_with_pending_points(
    overrides: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The joint multistart (screened) and the coarse stage run as at ``q > 1``, every
    acquisition with the pending points."""
    calls = _record_acquisitions(monkeypatch)
    first = started("orthobo", **overrides).ask(1, pending=PENDING).x
    np.testing.assert_array_equal(started("orthobo", **overrides).ask(1, pending=PENDING).x, first)
    assert calls and all(type(acqf) is MarginalLogQEI for acqf, _, _ in calls)
    assert all(pending is not None and len(pending) == len(PENDING) for _, pending, _ in calls)


@pytest.mark.parametrize("name", ["orthobo", pytest.param("qlogei", marks=pytest.mark.slow)])
def test_constrained_steps_take_pending_points(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a constrained history (gramacy: two constraints) OrthoBO maximizes its batch
    constrained EI with the pending points, qLogEI BoTorch's constrained qLogEI."""
    x, y, c = gramacy_design(8)
    pending = x[:1] * 0.5 + 0.25

    def asked(n: int) -> np.ndarray:
        params = {k: v for k, v in PARAMS[name].items() if k in OPTIMIZERS.resolve(name).params}
        opt = OPTIMIZERS.create(name, 2, seed=0, **params)
        opt.tell(x, y, c)
        return opt.ask(n, pending=pending).x

    calls = _record_acquisitions(monkeypatch)
    for n in (1, 2):
        first = asked(n)
        assert first.shape == (n, 2) and np.all((first >= 0) & (first <= 1))
        np.testing.assert_array_equal(asked(n), first)
    assert all(pending is not None for _, pending, _ in calls)
    if name == "orthobo":
        assert all(type(acqf) is MarginalLogQCEI for acqf, _, _ in calls)


def _running_points(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Make TPE's split of the trials record the points of the RUNNING ones it gets (the
    constant liar's, the trial being sampled left out)."""
    module = optuna.samplers._tpe.sampler
    split = module._split_trials
    seen: list[np.ndarray] = []

    def record(study: Any, trials: list, n_below: int) -> Any:
        running = [t for t in trials if t.state == TrialState.RUNNING]
        seen.append(np.array([[t.params[f"x{j}"] for j in range(DIM)] for t in running]))
        return split(study, trials, n_below)

    monkeypatch.setattr(module, "_split_trials", record)
    return seen


def test_optuna_samples_with_the_pending_points_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the ask samples, the pending points are RUNNING trials (the constant liar's), at
    ``n = 1`` too; after it they are FAIL trials, and only the new trial runs."""
    opt = started("tpe-optuna")
    seen = _running_points(monkeypatch)
    opt.ask(1, pending=PENDING)
    assert len(seen) == DIM  # univariate: one split per dimension
    for points in seen:
        np.testing.assert_array_equal(points, PENDING)
    trials = opt.study.get_trials(deepcopy=False)
    assert [t.state for t in trials[N_INIT:]] == [TrialState.FAIL] * 2 + [TrialState.RUNNING]


def test_optuna_pending_ask_is_a_function_of_history_state_and_pending() -> None:
    """An optimizer that asked ``x1`` and asks again with it pending proposes what one rebuilt
    from the history and the state proposes with ``x1`` pending (no trial of its own at
    ``x1``); told later, ``x1`` joins the study as a completed trial, and it was not dropped."""
    live = started("tpe-optuna")
    x1 = live.ask(1).x
    state = live.state_dict()
    x2 = live.ask(1, pending=x1)
    rebuilt = started("tpe-optuna")
    rebuilt.load_state_dict(state)
    np.testing.assert_array_equal(rebuilt.ask(1, pending=x1).x, x2.x)
    assert "failed_pending" not in x2.info

    both = np.concatenate([x1, x2.x])
    live.tell(both, np.array([objective(p) for p in both]))
    np.testing.assert_array_equal(_complete_points(live)[N_INIT:], both)
    assert "failed_pending" not in live.ask(1).info


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_optuna_fails_untold_trials_that_are_not_pending(dtype: torch.dtype) -> None:
    """Only the untold trial that is not pending counts as dropped, also when the pending
    points come rounded to a float32 optimizer's dtype."""
    opt = OptunaTPE(DIM, seed=0, dtype=dtype)
    x = opt.ask(2).x
    assert opt.ask(1, pending=x[1:]).info["failed_pending"] == 1


def test_optuna_stand_ins_do_not_outlive_an_ask_that_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ask that raises while it samples still marks its pending points' RUNNING trials
    FAIL: left running they would be liars in every later ask, which would then differ from
    the ask of an optimizer rebuilt from the history and the state."""
    opt = started("tpe-optuna")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("sampler failed")

    with monkeypatch.context() as patch:
        patch.setattr(opt.study, "ask", broken)
        with pytest.raises(RuntimeError, match="sampler failed"):
            opt.ask(1, pending=PENDING)
    assert not opt.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    rebuilt = started("tpe-optuna")
    rebuilt.load_state_dict(opt.state_dict())
    np.testing.assert_array_equal(opt.ask(1).x, rebuilt.ask(1).x)


def _complete_points(opt: OptunaTPE) -> np.ndarray:
    """The study's completed trials' points, in trial order."""
    complete = opt.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return np.array([[t.params[f"x{j}"] for j in range(DIM)] for t in complete])


def test_optuna_completed_trials_are_in_told_order() -> None:
    """A trial asked after ``x1`` (pending) but told before it is completed in place; one told
    after ``x1`` (added) is added too, not completed before it: the study holds the history in
    told order, as a rebuilt study does."""
    for x2_first in (True, False):
        opt = started("tpe-optuna")
        x1 = opt.ask(1).x
        x2 = opt.ask(1, pending=x1).x
        told = [x2, x1] if x2_first else [x1, x2]
        for x in told:
            opt.tell(x, np.array([objective(x[0])]))
        np.testing.assert_array_equal(_complete_points(opt), opt.train_x.numpy())
        np.testing.assert_array_equal(_complete_points(opt)[N_INIT:], np.concatenate(told))
