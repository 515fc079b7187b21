"""A resumed cell's clock: a cell stopped in the middle of a BO step asks that step again, and
its ``wall_seconds`` and stored seconds count the ask once, as an uninterrupted run does (the step
of a 3 s ask had stored 11.09 s where the uninterrupted cell stored 8.10 s).

The loop, the evaluations and the optimizer's ask read a fake clock that only the task's
evaluations (1 s each) and the optimizer's ask (3 s) move, so the seconds are exact.
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest

import orthobench.evaluation
import orthobench.loop
import orthobench.optimizers.base
from orthobench.execution import CellJob
from orthobench.loop import run_cell
from orthobench.optimizers.sobol import SobolSearch
from orthobench.results import EvaluationJournal
from orthobench.space import SearchSpace
from orthobench.tasks.base import Evaluation, Task
from tests.test_loop import cell

#: The fake clock's seconds, and the evaluation (1-based, of one run) that stops the run.
CLOCK = {"now": 0.0, "evaluations": 0, "stop_at": 0}


class Ticking(Task):
    """A sphere on [-1, 1]^2 whose evaluations take 1 s of the fake clock; the ``stop_at``-th
    of a run raises instead, as a kill would end it there."""

    optimal_value = 0.0
    parallel_evaluations = False

    def __init__(self):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        CLOCK["evaluations"] += 1
        if CLOCK["evaluations"] == CLOCK["stop_at"]:
            raise RuntimeError("stopped")
        CLOCK["now"] += 1.0
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))


class SlowAsk(SobolSearch):
    """Sobol' search whose ask takes 3 s of the fake clock."""

    def _ask(self, n):
        CLOCK["now"] += 3.0
        return super()._ask(n)


@pytest.fixture(autouse=True)
def fake_clock(monkeypatch):
    fake = types.SimpleNamespace(perf_counter=lambda: CLOCK["now"])
    for module in (orthobench.loop, orthobench.evaluation, orthobench.optimizers.base):
        monkeypatch.setattr(module, "time", fake)
    CLOCK.update(now=0.0, evaluations=0, stop_at=0)


def ticking_cell(q: int, budget: int, asynchronous: bool = False):
    spec = cell(
        task="tests.test_resume_wall_clock:Ticking",
        optimizer="tests.test_resume_wall_clock:SlowAsk",
        n_init=2,
        budget=budget,
    )
    return dataclasses.replace(spec, q=q, asynchronous=asynchronous)


def run(spec, journal: EvaluationJournal, stop_at: int = 0) -> tuple[list, float]:
    """The cell's records and the seconds of the attempt on the fake clock."""
    CLOCK.update(evaluations=0, stop_at=stop_at)
    start = CLOCK["now"]
    return run_cell(spec, journal=journal), CLOCK["now"] - start


def walls(records) -> list[float]:
    return [r.wall_seconds for r in records]


@pytest.mark.parametrize(
    ("q", "budget", "asynchronous", "stop_at"),
    [
        (3, 1, False, 4),  # after the step's first point: its ask is made again
        (3, 2, False, 7),  # after the first point of the second step
        (2, 2, True, 4),  # the ask after the first BO evaluation is made again
    ],
)
def test_a_cell_resumed_mid_step_counts_the_steps_ask_once(
    tmp_path, q, budget, asynchronous, stop_at
):
    spec = ticking_cell(q, budget, asynchronous)
    full, seconds = run(spec, EvaluationJournal(tmp_path / "full.jsonl", spec.config_hash))
    journal = EvaluationJournal(tmp_path / "killed.jsonl", spec.config_hash)
    with pytest.raises(RuntimeError, match="stopped"):
        run(spec, journal, stop_at)
    journaled = frozenset((r.iteration, r.wall_seconds) for r, _ in journal.read())
    assert len(journaled) == stop_at - 1
    resumed, attempt = run(spec, journal)
    assert walls(resumed) == walls(full)
    job = CellJob(spec, "cpu", 1, journal, None, journaled=journaled)
    assert job.stored_seconds(resumed, attempt) == seconds == walls(full)[-1]
