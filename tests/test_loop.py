"""The BO loop: shared initial design, seeding, records and regret."""

from __future__ import annotations

import json
import math
import signal
import threading
import time
from dataclasses import asdict

import numpy as np
import pytest

from orthobench.deadlines import evaluation_deadline
from orthobench.exceptions import NumericsWarning, OrthobenchError, OrthobenchWarning
from orthobench.loop import run_cell
from orthobench.results import EvaluationJournal
from orthobench.space import SearchSpace
from orthobench.suite import Cell, ComponentSpec
from orthobench.tasks.base import Evaluation, Task
from orthobench.tasks.synthetic import SyntheticTask


def cell(
    task="hartmann6",
    optimizer="sobol",
    seed=0,
    n_init=5,
    budget=3,
    task_params=None,
    opt_params=None,
    label=None,
):
    return Cell(
        suite="t",
        task=ComponentSpec(name=task, params=task_params or {}, label=task.rsplit(":", 1)[-1]),
        optimizer=ComponentSpec(
            name=optimizer, params=opt_params or {}, label=label or optimizer.rsplit(":", 1)[-1]
        ),
        seed=seed,
        n_init=n_init,
        budget=budget,
    )


def init_rows(records):
    return [(r.x, r.y) for r in records if r.phase == "init"]


def test_initial_design_is_shared_by_every_optimizer_of_a_seed(plugin):
    a = run_cell(cell(optimizer="sobol"))
    b = run_cell(cell(optimizer=f"{plugin}:CenterOptimizer"))
    c = run_cell(cell(optimizer="sobol", seed=1))
    assert init_rows(a) == init_rows(b)
    assert init_rows(a) != init_rows(c)
    assert [r.x for r in a if r.phase == "bo"] != [r.x for r in b if r.phase == "bo"]


def test_noisy_initial_observations_are_shared_too(plugin):
    noisy = {"noise_std": 0.3}
    a = run_cell(cell(task_params=noisy))
    b = run_cell(cell(optimizer=f"{plugin}:CenterOptimizer", task_params=noisy))
    assert init_rows(a) == init_rows(b)


def test_same_cell_twice_gives_the_same_values():
    spec = cell(
        optimizer="qlogei",
        n_init=4,
        budget=2,
        opt_params={"function_samples": 16, "raw_samples": 16, "num_restarts": 2},
    )
    first, second = run_cell(spec), run_cell(spec)
    assert [r.y for r in first] == [r.y for r in second]
    assert [r.x for r in first] == [r.x for r in second]


def test_records_follow_the_results_contract_and_regret_is_exact():
    records = run_cell(cell(task_params={"noise_std": 0.1}, n_init=4, budget=6))
    assert [r.iteration for r in records] == list(range(10))
    assert [r.phase for r in records] == ["init"] * 4 + ["bo"] * 6
    optimum = -3.32237
    y_true = np.array([r.y_true for r in records])
    regret = np.array([r.regret for r in records])
    np.testing.assert_allclose(regret, np.minimum.accumulate(y_true) - optimum)
    assert np.all(regret >= 0) and np.all(np.diff(regret) <= 0)
    best_y = np.array([r.best_y for r in records])
    np.testing.assert_allclose(best_y, np.minimum.accumulate([r.y for r in records]))
    assert all(r.status == "ok" and r.eval_seconds >= 0 for r in records)


class OffsetSphere(Task):
    """``f(x) = |x|^2`` on [-1, 1]^2 observed as ``f(x) + 1`` (a known, constant corruption)."""

    optimal_value = 0.0

    def __init__(self) -> None:
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        f = float(np.sum(np.asarray(x) ** 2))
        return Evaluation(y=f + 1.0, y_true=f, info={"note": "extra"})


def test_a_task_reporting_y_true_gets_its_regret_from_it():
    records = run_cell(cell(task=f"{__name__}:OffsetSphere", n_init=4, budget=2))
    y_true = np.array([r.y_true for r in records])
    np.testing.assert_allclose([r.y for r in records], y_true + 1.0)
    np.testing.assert_allclose([r.regret for r in records], np.minimum.accumulate(y_true))
    np.testing.assert_allclose([r.best_y for r in records], np.minimum.accumulate(y_true + 1.0))
    # The task's extras are stored as they are; y_true has its own column, not an info key.
    assert all(json.loads(r.info) == {"note": "extra"} for r in records if r.phase == "init")


class NoValueAtFirst(Task):
    """Its first 3 evaluations have no value (NaN, stored ``invalid``), as if timed out."""

    def __init__(self) -> None:
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.calls = 0

    def evaluate(self, x, *, seed, device):
        self.calls += 1
        return Evaluation(y=float("nan") if self.calls <= 3 else 1.0)


def test_a_cell_whose_evaluations_left_its_optimizer_too_few_values_says_so():
    """3 of 4 initial evaluations without a value left OrthoBO 1 observation of the 2 it
    needs: the cell failed with the optimizer's "tell the initial design first", blaming the
    caller for what the evaluations did."""
    spec = cell(task=f"{__name__}:NoValueAtFirst", optimizer="orthobo", n_init=4, budget=1)
    with pytest.raises(OrthobenchError) as err:
        run_cell(spec)
    assert str(err.value) == (
        "orthobo needs 2 evaluations with a value before it proposes, but has 1: 3 of the cell's "
        "4 evaluations so far gave none (timed out or invalid); raise n_init or "
        "evaluation_timeout_s."
    )


class HangsOnce(Task):
    """A sphere on [-1, 1]^2 whose second evaluation sleeps for a minute, inside an
    ``except Exception`` that would swallow an ordinary exception (as a training loop's retry
    might)."""

    optimal_value = 0.0

    def __init__(self) -> None:
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.calls = 0

    def evaluate(self, x, *, seed, device):
        self.calls += 1
        if self.calls == 2:
            try:
                time.sleep(60)
            except Exception:  # noqa: BLE001 -- the timeout must get through this
                return Evaluation(y=-1.0)
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)), info={"note": "done"})


def test_an_evaluation_past_its_timeout_is_recorded_as_timed_out_and_the_cell_goes_on(tmp_path):
    spec = cell(task=f"{__name__}:HangsOnce", n_init=3, budget=2)
    handler = signal.getsignal(signal.SIGALRM)
    journal = EvaluationJournal(tmp_path / "j.jsonl", spec.config_hash)
    start = time.perf_counter()
    records = run_cell(spec, journal=journal, evaluation_timeout=0.5)
    assert time.perf_counter() - start < 30
    assert [r.status for r in records] == ["ok", "timeout", "ok", "ok", "ok"]
    late = records[1]
    assert math.isnan(late.y) and late.y_true is None and json.loads(late.info) == {}
    assert 0.5 <= late.eval_seconds < 5
    # As for a non-finite y: not a best value, and not told to the optimizer (whose `tell` refuses
    # NaN; its journaled state counts the observations it was told).
    ok_y = [r.y for r in records if r.status == "ok"]
    assert [r.best_y for r in records] == [ok_y[0], ok_y[0], *np.minimum.accumulate(ok_y)[1:]]
    assert records[0].regret == records[1].regret
    assert journal.read()[-1][1]["n_observations"] == 4
    # The timer is cleared and the previous SIGALRM handler is back.
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler
    # A rerun replays the journaled records, the timed-out one included, timings and all.
    rerun = run_cell(spec, journal=journal, evaluation_timeout=0.5)
    assert json.dumps([asdict(r) for r in rerun]) == json.dumps([asdict(r) for r in records])


def test_without_a_main_thread_the_evaluation_timeout_is_warned_about_and_not_enforced():
    caught = []

    def body() -> None:
        with pytest.warns(OrthobenchWarning, match="timeout of 0.01 s is not enforced here"):
            with evaluation_deadline(0.01):
                time.sleep(0.1)  # past the deadline, undisturbed
                caught.append("finished")

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert caught == ["finished"]


def test_mixed_parameter_kinds_are_stored_in_native_units(plugin):
    records = run_cell(cell(task=f"{plugin}:Mixed", n_init=6, budget=4))
    xs = np.array([r.x for r in records])
    assert np.all((xs[:, 1] >= 1e-4) & (xs[:, 1] <= 1e-1))
    assert np.all(xs[:, 2] == np.round(xs[:, 2])) and set(xs[:, 2]) <= {1.0, 2.0, 3.0, 4.0}
    assert all(r.regret is None for r in records)


def test_optimizer_error_propagates(plugin):
    with pytest.raises(RuntimeError, match="simulated training crash"):
        run_cell(cell(task=f"{plugin}:make_sphere", task_params={"fail_at": 0.0}, n_init=8))


def test_ensemble_weights_are_recorded_per_iteration():
    params = {
        "kernel": ["linear", "matern52-iso"],
        "theta_samples": 8,
        "raw_samples": 16,
        "num_restarts": 2,
    }
    records = run_cell(cell(optimizer="orthobo", n_init=6, budget=3, opt_params=params))
    infos = [json.loads(r.info) for r in records if r.phase == "bo"]
    assert len(infos) == 3
    for info in infos:
        assert info["ensemble_kernels"] == ["linear", "matern52-iso"]
        assert sum(info["ensemble_weights"]) == pytest.approx(1.0)
        assert 0.0 <= info["ensemble_entropy"] <= info["ensemble_max_entropy"]
    assert infos[-1]["ensemble_weights"] != infos[0]["ensemble_weights"]


# Fields that differ between two runs of the same cell only by timing.
_TIMINGS = ("fit_seconds", "acq_seconds", "eval_seconds", "wall_seconds")


def comparable(records):
    return [{k: v for k, v in asdict(r).items() if k not in _TIMINGS} for r in records]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """A cell's run with a journal, and the journal's lines, computed once per cell: both
    ``stored`` cases of a resume test compare with the same uninterrupted run."""
    runs = {}

    def run(spec):
        if spec.config_hash not in runs:
            path = tmp_path_factory.mktemp("uninterrupted") / "full.jsonl"
            journal = EvaluationJournal(path, spec.config_hash)
            records = run_cell(spec, journal=journal)
            runs[spec.config_hash] = records, path.read_text().splitlines(keepends=True)
        return runs[spec.config_hash]

    return run


@pytest.mark.parametrize(
    ("optimizer", "params"),
    [
        (
            "turbo",
            {"function_samples": 8, "raw_samples": 16, "num_restarts": 2, "n_candidates": 64},
        ),
        (
            "orthobo",
            {"kernel": ["linear", "matern52-iso"], "theta_samples": 8, "raw_samples": 16},
        ),
    ],
)
@pytest.mark.parametrize("stored", [3, 7])  # mid initial design; mid BO
def test_cell_resumes_from_its_evaluation_journal(
    tmp_path, monkeypatch, uninterrupted, optimizer, params, stored
):
    """A cell whose journal holds its first ``stored`` evaluations (and a torn line, as a kill
    mid-append leaves) reruns none of them and finishes equal to an uninterrupted run."""
    spec = cell(optimizer=optimizer, n_init=5, budget=4, opt_params=params)
    full, lines = uninterrupted(spec)
    assert len(lines) == 9
    killed = EvaluationJournal(tmp_path / "killed.jsonl", spec.config_hash)
    killed.path.write_text("".join(lines[:stored]) + lines[stored][:20])

    calls = []
    evaluate = SyntheticTask.evaluate
    monkeypatch.setattr(
        SyntheticTask, "evaluate", lambda self, x, **kw: calls.append(x) or evaluate(self, x, **kw)
    )
    resumed = run_cell(spec, journal=killed)
    assert len(calls) == 9 - stored
    assert comparable(resumed) == comparable(full)
    assert [r.eval_seconds for r in resumed[:stored]] == [r.eval_seconds for r in full[:stored]]
    assert len(killed.read()) == 9


def test_evaluation_journal_ignores_another_configuration(tmp_path):
    spec = cell(n_init=3, budget=1)
    journal = EvaluationJournal(tmp_path / "j.jsonl", spec.config_hash)
    run_cell(spec, journal=journal)
    other = EvaluationJournal(journal.path, cell(n_init=3, budget=2).config_hash)
    assert len(journal.read()) == 4 and other.read() == []


def test_qlogei_under_extreme_noise_records_a_fallback_and_finishes():
    """Noise 1e150 makes qLogEI's values non-finite, which broke ``optimize_acqf``'s
    starting-point sampling; the step now takes the best raw Sobol' candidate, warns and records it."""
    noisy = cell(
        optimizer="qlogei",
        n_init=4,
        budget=2,
        task_params={"noise_std": 1e150},
        opt_params={"function_samples": 16, "raw_samples": 16, "num_restarts": 2},
    )
    with pytest.warns(NumericsWarning, match="acquisition maximization failed"):
        records = run_cell(noisy)
    bo = [r for r in records if r.phase == "bo"]
    assert len(bo) == 2 and all(r.status == "ok" for r in bo)
    for record in bo:
        assert record.fallback.startswith("acquisition maximization failed (RuntimeError: ")
        assert record.fallback.endswith("took the best of 16 raw Sobol' candidates")
