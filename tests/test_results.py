"""Results store: atomic writes, journal, metadata."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from orthobench.results import ResultStore, load_runs, read_metadata, run_metadata
from tests.test_loop import cell


def records_for(spec):
    from orthobench.loop import run_cell

    return run_cell(spec)


def test_write_then_read_round_trip_with_metadata(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=3, budget=2)
    path = store.write_cell(spec, records_for(spec), run_metadata("cpu"), 0.5)
    frame = load_runs([tmp_path])
    assert len(frame) == 5 and list(frame["iteration"]) == list(range(5))
    meta = read_metadata(path)
    assert meta["cell"]["optimizer"]["name"] == "sobol"
    assert meta["config_hash"] == spec.config_hash
    assert meta["device"] == "cpu" and meta["versions"]["torch"]
    assert store.is_stored(spec)


def test_a_crash_during_the_write_leaves_no_file(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    spec = cell(n_init=3, budget=0)

    def broken_write(table, where, **kwargs):
        where.write(b"PAR1 partial bytes")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken_write)
    with pytest.raises(OSError, match="disk full"):
        store.write_cell(spec, records_for(spec), {}, 0.1)
    assert not list(tmp_path.rglob("*.parquet")) and not list(tmp_path.rglob("*.tmp"))
    assert not store.is_stored(spec)


def test_torn_journal_line_is_skipped_and_failures_are_not_stored(tmp_path):
    store = ResultStore(tmp_path)
    ok, bad = cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)
    store.write_cell(ok, records_for(ok), {}, 0.1)
    store.record_failure(bad, "RuntimeError: boom", "Traceback ...", 0.2)
    with open(store.journal_path, "a") as fh:
        fh.write('{"cell_id": "half-writ')
    assert store.stored() == {ok.id: ok.config_hash}
    assert store.journal()[-1]["error"] == "RuntimeError: boom"


def test_changed_config_is_not_reused(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=0)
    store.write_cell(spec, records_for(spec), {}, 0.1)
    changed = cell(n_init=2, budget=1)
    assert changed.id == spec.id and not store.is_stored(changed)
