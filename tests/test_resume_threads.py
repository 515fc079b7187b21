"""Evaluation-level resume and the thread count: a cell interrupted at one ``threads_per_cell``
and rerun at another is recomputed whole at the new count (one warning), never stored as a mix of
both; at the same count, or from a journal that does not record its count, it resumes as
before (docs/design.md, "Thread counts")."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pandas as pd
import pytest
import torch

from orthobench import execution
from orthobench.exceptions import OrthobenchWarning
from orthobench.executors import make_executor
from orthobench.results import ResultStore, load_runs, read_metadata
from orthobench.results._records import SCHEMA_VERSION
from orthobench.suite import load_suite
from tests.helpers import install_plugin

# Interrupted (KeyboardInterrupt, which fails only its cell) at its ``stop_at``-th evaluation
# while the marker file exists; the marker is removed first, so the rerun goes through. Each
# evaluation logs its seed and records torch's thread count in its info.
STOPPER_SOURCE = """
import os

import numpy as np
import torch

from orthobench import Evaluation, SearchSpace, Task


class StopAt(Task):
    optimal_value = 0.0

    def __init__(self, stop_at: int = 1, marker: str = "", log: str = ""):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.stop_at, self.marker, self.log = stop_at, marker, log
        self.count = 0

    def evaluate(self, x, *, seed, device):
        self.count += 1
        if self.count == self.stop_at and os.path.exists(self.marker):
            os.remove(self.marker)
            raise KeyboardInterrupt
        with open(self.log, "a") as fh:
            fh.write(f"{seed}\\n")
        y = float(np.sum(np.asarray(x) ** 2))
        return Evaluation(y=y, info={"threads": torch.get_num_threads()})
"""

N_INIT, BUDGET, STOP_AT = 3, 3, 5  # 4 evaluations journaled before the interruption


@pytest.fixture
def stopper(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """``(suite, marker, log)``: a one-cell suite of ``StopAt`` with the sobol optimizer."""
    install_plugin(tmp_path / "plugin", "stoptask", STOPPER_SOURCE, monkeypatch)
    marker, log = tmp_path / "stop-now", tmp_path / "evaluations.log"
    path = tmp_path / "suite.yaml"
    path.write_text(
        f"name: stopped\nseeds: 1\nn_init: {N_INIT}\nbudget: {BUDGET}\ntasks:\n"
        f'  - {{name: "stoptask:StopAt", params: {{stop_at: {STOP_AT}, marker: "{marker}", '
        f'log: "{log}"}}, label: stop}}\noptimizers: [sobol]\n'
    )
    return load_suite(path), marker, log


def _run(suite, root, threads: int, executor: str = "inline") -> execution.RunSummary:
    before = torch.get_num_threads()
    try:
        return execution.run_suite(
            suite,
            ResultStore(root),
            device=torch.device("cpu"),
            executor=make_executor(executor, workers=1),
            show_progress=False,
            threads_per_cell=threads,
        )
    finally:
        torch.set_num_threads(before)


def _interrupted(suite, marker, log, root, threads: int) -> list[str]:
    """Run the suite at ``threads`` until its cell is interrupted; the journaled evaluations'
    seeds (the log is emptied)."""
    marker.touch()
    summary = _run(suite, root, threads)
    assert [(o.status, o.error) for o in summary.outcomes] == [("failed", "KeyboardInterrupt")]
    journal = ResultStore(root).evaluation_journal(suite.cells()[0])
    assert len(journal.read()) == STOP_AT - 1
    seeds = log.read_text().split()
    log.unlink()
    return seeds


def _stored(root) -> tuple[pd.DataFrame, dict]:
    """The stored cell's ``iteration, x, y, info`` and its metadata."""
    (path,) = (root / "runs").glob("*.parquet")
    return load_runs([root])[["iteration", "x", "y", "info"]], read_metadata(path)


@pytest.mark.parametrize("executor", ["inline", pytest.param("process", marks=pytest.mark.slow)])
def test_a_cell_resumed_at_another_thread_count_is_recomputed_whole_at_the_new_count(
    stopper, tmp_path, executor: str
) -> None:
    """Before, the rerun at 2 threads continued the journal of the run at 1: the stored cell
    held 4 evaluations computed with 1 thread and 2 with 2, and its metadata said 2."""
    suite, marker, log = stopper
    _interrupted(suite, marker, log, tmp_path / "out", threads=1)
    with pytest.warns(OrthobenchWarning) as caught:
        summary = _run(suite, tmp_path / "out", threads=2, executor=executor)
    assert summary.count("ok") == 1, summary.failed
    cell = suite.cells()[0]
    (warning,) = [w for w in caught if "thread" in str(w.message)]
    message = str(warning.message)
    assert warning.filename == __file__  # points at the caller of run_suite
    assert message.startswith(f"cell {cell.id}: ")
    assert "1 thread(s)" in message and "uses 2" in message
    assert "--threads-per-cell 1" in message
    assert len(log.read_text().split()) == N_INIT + BUDGET  # every evaluation computed again
    resumed, metadata = _stored(tmp_path / "out")
    assert metadata["threads_per_cell"] == 2
    assert {json.loads(info)["threads"] for info in resumed["info"]} == {2}
    clean = _run(suite, tmp_path / "clean", threads=2)
    assert clean.count("ok") == 1
    pd.testing.assert_frame_equal(resumed, _stored(tmp_path / "clean")[0])


def test_a_cell_resumed_at_the_same_thread_count_reuses_its_journal_silently(
    stopper, tmp_path
) -> None:
    suite, marker, log = stopper
    first = _interrupted(suite, marker, log, tmp_path / "out", threads=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        assert _run(suite, tmp_path / "out", threads=2).count("ok") == 1
    second = log.read_text().split()
    assert len(first) == STOP_AT - 1 and len(second) == N_INIT + BUDGET - (STOP_AT - 1)
    assert not set(first) & set(second)  # no journaled evaluation was run again
    log.unlink()
    resumed, metadata = _stored(tmp_path / "out")
    assert metadata["threads_per_cell"] == 2
    assert _run(suite, tmp_path / "clean", threads=2).count("ok") == 1
    pd.testing.assert_frame_equal(resumed, _stored(tmp_path / "clean")[0])


def test_a_journal_of_another_configuration_is_said_to_be_computed_again(stopper, tmp_path):
    """A rerun after the suite changed (here the budget) ignores the journaled evaluations, as
    it must; it did so without a word, so a user resuming hours of training saw them rerun."""
    suite, marker, log = stopper
    _interrupted(suite, marker, log, tmp_path / "out", threads=1)
    changed = dataclasses.replace(suite, budget=BUDGET - 1)
    with pytest.warns(OrthobenchWarning) as caught:
        assert _run(changed, tmp_path / "out", threads=1).count("ok") == 1
    (warning,) = [w for w in caught if "another configuration" in str(w.message)]
    assert str(warning.message).startswith(
        f"1 cell(s) ({suite.cells()[0].id}) journaled {STOP_AT - 1} evaluation(s) with another "
        "configuration"
    )
    assert warning.filename == __file__
    assert len(log.read_text().split()) == N_INIT + BUDGET - 1  # every evaluation computed again


def test_a_journal_of_another_schema_is_said_to_be_computed_again(stopper, tmp_path):
    """Lines another orthobench version wrote are skipped as those of another configuration are;
    they too were computed again without a word."""
    suite, marker, log = stopper
    _interrupted(suite, marker, log, tmp_path / "out", threads=1)
    path = ResultStore(tmp_path / "out").evaluation_journal(suite.cells()[0]).path
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    older = [{**entry, "schema_version": SCHEMA_VERSION - 1} for entry in entries]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in older))
    with pytest.warns(OrthobenchWarning, match=f"journaled {STOP_AT - 1} evaluation"):
        assert _run(suite, tmp_path / "out", threads=1).count("ok") == 1
    assert len(log.read_text().split()) == N_INIT + BUDGET


def test_a_journal_that_does_not_record_its_thread_count_is_resumed_as_before(
    stopper, tmp_path
) -> None:
    """A journal written before the count was recorded cannot say it: it is continued at any
    count, as every journal was."""
    suite, marker, log = stopper
    _interrupted(suite, marker, log, tmp_path / "out", threads=1)
    path = ResultStore(tmp_path / "out").evaluation_journal(suite.cells()[0]).path
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert all("threads" in e for e in entries)
    legacy = [{k: v for k, v in e.items() if k != "threads"} for e in entries]
    path.write_text("".join(json.dumps(e) + "\n" for e in legacy))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        assert _run(suite, tmp_path / "out", threads=2).count("ok") == 1
    assert len(log.read_text().split()) == N_INIT + BUDGET - (STOP_AT - 1)


def test_a_stored_cell_is_reused_at_any_thread_count(stopper, tmp_path) -> None:
    suite, _, log = stopper
    assert _run(suite, tmp_path / "out", threads=1).count("ok") == 1
    log.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        summary = _run(suite, tmp_path / "out", threads=2)
    assert [o.status for o in summary.outcomes] == ["skipped"] and not log.exists()
    assert _stored(tmp_path / "out")[1]["threads_per_cell"] == 1
