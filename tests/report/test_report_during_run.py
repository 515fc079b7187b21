"""A report of a directory that a run is writing: its rows and its files table come from the same
files, and a warning says that a run is writing it (a report during a run said "stored 14
cells" with 13 cells' rows, and nothing of the run)."""

from __future__ import annotations

import os
import warnings

import pytest

from orthobench.exceptions import OrthobenchWarning
from orthobench.report.data import load_results
from orthobench.results import ResultStore, _parquet
from tests.report.conftest import cell, write_cell


def test_a_cell_stored_while_the_report_reads_is_in_neither_its_rows_nor_its_files(
    tmp_path, monkeypatch
):
    for seed in (0, 1):
        write_cell(tmp_path, cell("s", "t", "sobol", seed, 1, 1), [2.0, 1.0])
    read_table = _parquet.read_table

    def read_while_a_run_stores(path, **kwargs):
        # The run stores its next cell as the report reads the first one's rows.
        if not (tmp_path / "runs" / "t__sobol__seed2.parquet").exists():
            write_cell(tmp_path, cell("s", "t", "sobol", 2, 1, 1), [2.0, 1.0])
        return read_table(path, **kwargs)

    monkeypatch.setattr(_parquet, "read_table", read_while_a_run_stores)
    results = load_results([tmp_path])
    files = results.files[results.files["kind"] == "runs"]
    listed = {"t__sobol__seed0", "t__sobol__seed1"}
    assert set(files["file"]) == set(results.runs["cell_id"]) == listed


def test_a_report_of_a_directory_a_run_holds_says_so_and_creates_nothing(tmp_path):
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 1, 1), [2.0, 1.0])
    store = ResultStore(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        load_results([tmp_path])  # no run ever held it: no lock file, none made
    assert not store.lock_path.exists()
    with store.open_for_writing(), pytest.warns(OrthobenchWarning) as caught:
        results = load_results([tmp_path])
    assert [str(w.message) for w in caught] == [
        f"{tmp_path} is being written by an orthobench run (PID {os.getpid()}): the report "
        "shows the cells and probe states it has stored so far."
    ]
    assert len(results.runs) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        load_results([tmp_path])  # the run ended
