"""Properties of the results store, its journals and configuration hashes that a user relies on:
each pinned by a small test (found missing by mutation testing)."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path

import pytest

import orthobench.results._store as store_module
from orthobench.exceptions import OrthobenchWarning, ResultsError
from orthobench.loop import run_cell
from orthobench.results import EvaluationJournal, ResultStore, load_runs
from orthobench.results._parquet import unique_dirs
from orthobench.results._records import SCHEMA_VERSION
from orthobench.work import PROBE_STATE, canonical, config_differences, hash_config
from tests.test_loop import cell
from tests.test_results import probe_record, run_record


def _journal(tmp_path: Path) -> EvaluationJournal:
    return EvaluationJournal(tmp_path / "partial" / "c.jsonl", "0123456789abcdef")


def test_an_evaluation_appended_after_a_torn_line_reads_back(tmp_path):
    """A crash mid-append leaves a torn last line without its newline; the evaluation the rerun
    appends next starts on a line of its own and reads back (only the fragment is lost)."""
    journal = _journal(tmp_path)
    journal.append(run_record(iteration=0), None)
    with open(journal.path, "ab") as fh:  # the crash: a line torn half-way
        fh.write(b'{"schema_version": 3, "config_hash": "')
    journal.append(run_record(iteration=1), None)
    assert [record.iteration for record, _ in journal.read()] == [0, 1]


def test_an_iteration_journaled_twice_reads_as_its_last_line(tmp_path):
    """An iteration journaled again (its step re-run after a line before it was lost) is read
    once, as its last line: the evaluation the resumed run made, not the stale one."""
    journal = _journal(tmp_path)
    journal.append(run_record(iteration=1, y=5.0, wall_seconds=5.0), None)  # the first attempt
    journal.append(run_record(iteration=0, y=1.0, wall_seconds=1.0), None)
    journal.append(run_record(iteration=1, y=9.0, wall_seconds=9.0), None)  # journaled again
    read = [(record.iteration, record.y, record.wall_seconds) for record, _ in journal.read()]
    assert read == [(0, 1.0, 1.0), (1, 9.0, 9.0)]


def test_a_journal_line_whose_state_is_not_a_mapping_is_recomputed(tmp_path):
    """A journaled evaluation whose optimizer ``state`` is damaged (not a mapping) is skipped as
    a lost line is: the resumed cell recomputes its step and ends with the values of an
    uninterrupted run, instead of loading the damaged state (a TypeError)."""
    spec = cell(n_init=2, budget=2)
    journal = EvaluationJournal(tmp_path / "partial" / "c.jsonl", spec.config_hash)
    first = run_cell(spec, journal=journal)
    lines = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert lines[-1]["state"] is not None  # the last BO step's closing line holds the state
    lines[-1]["state"] = "damaged"
    journal.path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [record.iteration for record, _ in journal.read()] == [0, 1, 2]
    again = run_cell(spec, journal=journal)
    assert [(r.iteration, r.y) for r in again] == [(r.iteration, r.y) for r in first]


def _stored_at_an_older_schema(tmp_path, monkeypatch):
    spec = cell(n_init=2, budget=0)
    records = run_cell(spec)
    # As an orthobench of the previous schema version stored it: its entry and its file agree.
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", SCHEMA_VERSION - 1)
    ResultStore(tmp_path / "out").write_cell(spec, records, {}, 0.1)
    monkeypatch.undo()
    return spec, ResultStore(tmp_path / "out")


def test_a_cell_stored_at_an_older_schema_version_is_not_stored(tmp_path, monkeypatch):
    """A cell whose journal entry and file are of an older schema version (entry and file agree)
    is not stored: reading the folder refuses the file and says to rerun its suite, and that
    rerun recomputes the cell instead of skipping it as stored."""
    spec, store = _stored_at_an_older_schema(tmp_path, monkeypatch)
    with pytest.raises(ResultsError, match="rerun its suite"):
        load_runs([store.root])
    assert not store.is_stored(spec)
    assert spec.id not in store.stored()


def test_a_cell_stored_in_this_run_needs_no_entry_read_from_its_file(tmp_path):
    """A cell stored while the store is held for writing counts as stored at once, from the
    entry this run journaled: no "has no entry for the stored file" warning, and the journal
    holds exactly one line for it (not a second entry restored from the file)."""
    spec = cell(n_init=2, budget=0)
    records = run_cell(spec)
    store = ResultStore(tmp_path / "out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with store.open_for_writing():
            store.write_cell(spec, records, {}, 0.1)
            assert store.is_stored(spec)
    assert not [w for w in caught if "has no entry" in str(w.message)]
    assert len(store.runs_journal.path.read_text().splitlines()) == 1


@dataclasses.dataclass
class _State:
    """A probe state unit of a given resolved configuration."""

    config: dict
    kind: str = PROBE_STATE
    suite: str = "s"
    id: str = "state0"

    def resolved_config(self) -> dict:
        return self.config

    @property
    def config_hash(self) -> str:
        return hash_config(self.config)


def test_a_probe_state_whose_configuration_changed_keeps_no_row_of_the_old_one(tmp_path):
    """A probe state stored again under another configuration holds only the rows computed
    under the new one: the rows of estimators it did not recompute were computed under the old
    configuration and are not kept (one file never mixes two configurations)."""
    store = ResultStore(tmp_path / "out")
    old = _State({"task": {"name": "t", "params": {"noise": 0.0}}})
    new = _State({"task": {"name": "t", "params": {"noise": 0.5}}})
    with store.open_for_writing():
        rows = [probe_record(estimator="mc", mse=1.0), probe_record(estimator="qmc", mse=2.0)]
        store.write(old, rows, {}, 1.0)
        store.write(new, [probe_record(estimator="mc", mse=3.0)], {}, 1.0)
    stored = store.read_probe_state("state0")
    assert stored[["estimator", "mse"]].to_dict("records") == [{"estimator": "mc", "mse": 3.0}]


def test_a_block_that_raises_leaves_no_folder_that_open_for_writing_created(tmp_path):
    """A run refused by the checks made with the store held (the block raises before it writes
    anything) leaves no results folder behind: not the folder, not its ``.lock``."""
    root = tmp_path / "new_out"
    with pytest.raises(ValueError, match="refused"):
        with ResultStore(root).open_for_writing():
            assert (root / ".lock").exists()
            raise ValueError("a suite refused by the checks")
    assert not root.exists()


def test_the_configuration_hash_is_pinned():
    """The hash of a configuration is what stored results are reused by: it is the first 16 hex
    digits of the SHA-256 of its canonical JSON text (sorted keys), pinned here so that a change
    in hashing, which makes every stored cell recomputed, is a deliberate one."""
    config = {
        "task": {"name": "hartmann6", "params": {}},
        "optimizer": {"name": "sobol", "params": {"beta": 0.2}},
        "seed": 0,
        "n_init": 2,
        "budget": 1,
    }
    assert canonical(config) == (
        '{"budget": 1, "n_init": 2, "optimizer": {"name": "sobol", "params": {"beta": 0.2}}, '
        '"seed": 0, "task": {"name": "hartmann6", "params": {}}}'
    )
    assert hash_config(config) == "146c77f40b2e3ccd"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"optimizer": {"params": {}}}, {"optimizer": {"params": {"beta": 0.2}}}),
        ({"optimizer": {"params": {}}}, {"optimizer": {}}),
        ({"optimizer": {"params": {}}}, {"optimizer": {"params": None}}),
        ({"params": {}}, {}),
    ],
)
def test_every_configuration_change_gives_a_difference_line(before, after):
    """Each configuration change, to or from an empty ``params: {}`` too, names at least one
    differing value in the "stored with another configuration" line, both ways round."""
    assert hash_config(before) != hash_config(after)
    assert config_differences(before, after)
    assert config_differences(after, before)


def test_a_relative_and_an_absolute_spelling_of_one_folder_are_read_once(tmp_path, monkeypatch):
    """One results folder named twice, relative and absolute, is read once (with a warning),
    so its rows are not counted twice."""
    monkeypatch.chdir(tmp_path)
    os.makedirs("out")
    with pytest.warns(OrthobenchWarning, match="read once"):
        assert unique_dirs(["out", os.path.abspath("out")]) == ["out"]
