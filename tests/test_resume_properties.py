"""Properties of resuming and running a suite that a user relies on: each pinned by a small test
(found missing by mutation testing)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from orthobench import api
from orthobench.cli import cli
from orthobench.execution import run_suite
from orthobench.loop import run_cell
from orthobench.results import EvaluationJournal, ResultStore, load_runs
from orthobench.suite import load_suite
from orthobench.tasks.synthetic import SyntheticTask
from tests.helpers import install_plugin
from tests.test_loop import cell

SUITE = "name: d\nseeds: 1\nn_init: 2\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n"


def test_a_resume_reuses_only_the_unfinished_steps_journaled_evaluations(tmp_path, monkeypatch):
    """A journal whose line of BO step 1 was lost, but that holds steps 2 and 3 from an earlier
    attempt, resumes at step 1 and recomputes steps 1 to 3: what was journaled after the
    unfinished step is not replayed, so the resumed cell equals an uninterrupted one."""
    spec = cell(n_init=2, budget=3)  # iterations 0-1 the initial design, 2, 3, 4 one step each
    journal = EvaluationJournal(tmp_path / "partial" / "c.jsonl", spec.config_hash)
    full = run_cell(spec, journal=journal)
    lines = []
    for line in journal.path.read_text().splitlines():
        entry = json.loads(line)
        if entry["record"]["iteration"] == 2:
            lines.append("damaged")  # step 1's line lost
            continue
        if entry["record"]["iteration"] >= 3:  # stale: not what the resumed run computes
            entry["record"]["y"] = entry["record"]["best_y"] = 123.0
            entry["record"]["wall_seconds"] = 500.0
        lines.append(json.dumps(entry))
    journal.path.write_text("\n".join(lines) + "\n")

    calls = []
    evaluate = SyntheticTask.evaluate
    monkeypatch.setattr(
        SyntheticTask, "evaluate", lambda self, x, **kw: calls.append(x) or evaluate(self, x, **kw)
    )
    resumed = run_cell(spec, journal=journal)
    assert len(calls) == 3  # iterations 2, 3 and 4
    assert [(r.iteration, r.y) for r in resumed] == [(r.iteration, r.y) for r in full]
    assert all(r.wall_seconds < 500.0 for r in resumed)


def test_force_stores_freshly_computed_values_not_a_partial_journals(tmp_path, monkeypatch):
    """``--force`` (``force=True``) recomputes a cell from the start: the evaluations an
    interrupted run journaled for it are discarded, not resumed from and stored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SUITE)
    suite = load_suite(tmp_path / "s.yaml")
    spec = suite.cells()[0]
    fresh = run_cell(spec)
    store = ResultStore(tmp_path / "out")
    # An interrupted run's journal of the cell, its value stale.
    stale = dataclasses.replace(fresh[0], y=123.0, best_y=123.0)
    store.evaluation_journal(spec).append(stale, None)
    summary = run_suite(suite, store, device=torch.device("cpu"), force=True, show_progress=False)
    assert summary.count("ok") == 1
    assert load_runs([store.root])["y"].tolist() == [r.y for r in fresh]


@pytest.mark.parametrize("timeout", [0, 0.0, -1.0, math.nan])
def test_an_evaluation_timeout_that_is_not_positive_is_refused(tmp_path, timeout):
    """An evaluation timeout must be > 0 seconds: 0 (which would set no timer, so no limit at
    all), a negative value or NaN is refused before anything runs."""
    (tmp_path / "s.yaml").write_text(SUITE)
    store = ResultStore(tmp_path / "out")
    with pytest.raises(ValueError, match="> 0"):
        run_suite(
            load_suite(tmp_path / "s.yaml"),
            store,
            device=torch.device("cpu"),
            show_progress=False,
            evaluation_timeout=timeout,
        )
    assert not store.root.exists()


NAN_ONCE = """
from orthobench.space import SearchSpace
from orthobench.tasks.base import Evaluation, Task


class NaNOnce(Task):
    def __init__(self):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.calls = 0

    def evaluate(self, x, *, seed, device):
        self.calls += 1
        return Evaluation(y=float("nan") if self.calls == 1 else float(sum(x)))
"""


def _no_report(prepared) -> Path:
    path = prepared.store.root / "report.html"
    path.write_text("")
    return path


def test_the_closing_line_counts_the_invalid_evaluations_of_the_stored_cells(tmp_path, monkeypatch):
    """A stored cell counts as run though some of its evaluations gave no value: the closing
    line of ``orthobench run`` says how many (``1 evaluation(s) invalid``)."""
    install_plugin(tmp_path / "plugins", "nanonce", NAN_ONCE, monkeypatch)
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: d\nseeds: 1\nn_init: 3\nbudget: 1\ntasks: ['nanonce:NaNOnce']\noptimizers: [sobol]\n"
    )
    out = tmp_path / "out"
    # The report (a second of plotting) is not what is checked: written as an empty file.
    monkeypatch.setattr(api, "_write_report", _no_report)
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert load_runs([out])["status"].tolist().count("invalid") == 1
    assert "1 run, 0 already stored, 0 failed" in result.output
    assert "; 1 evaluation(s) invalid;" in result.output
