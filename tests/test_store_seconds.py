"""A cell's stored seconds: a cell resumed from its evaluation journal counts the running time of
the evaluations it replayed, not only its last attempt's (an interrupted and resumed run stored
1.35 s where the same run uninterrupted stored 6.89 s)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from orthobench.execution import run_suite
from orthobench.loop import run_cell
from orthobench.results import ResultStore, load_runs, read_metadata
from orthobench.suite import parse_suite

SUITE = {
    "name": "t",
    "seeds": 2,
    "n_init": 3,
    "budget": 2,
    "tasks": ["hartmann6"],
    "optimizers": ["sobol"],
}


def test_a_resumed_cell_stores_the_seconds_of_the_evaluations_it_replayed(tmp_path):
    suite = parse_suite(SUITE)
    resumed, fresh = suite.cells()
    store = ResultStore(tmp_path)
    # An earlier attempt journaled the initial design, finishing it 102 s into the cell.
    journal = store.evaluation_journal(resumed)
    for i, record in enumerate(run_cell(resumed)[: resumed.n_init]):
        journal.append(dataclasses.replace(record, wall_seconds=100.0 + i), None)
    summary = run_suite(suite, store, device=torch.device("cpu"), show_progress=False)
    attempt = {o.unit.id: o.seconds for o in summary.outcomes}
    entries = {e["cell_id"]: e["seconds"] for e in store.runs_journal.entries()}
    for cell, replayed in ((resumed, 102.0), (fresh, 0.0)):
        stored = read_metadata(store.cell_path(cell))["seconds"]
        assert stored == entries[cell.id] == pytest.approx(replayed + attempt[cell.id])
    walls = load_runs([tmp_path]).query("cell_id == @resumed.id")["wall_seconds"]
    assert walls.iloc[:3].tolist() == [100.0, 101.0, 102.0] and walls.iloc[3] > 102.0
