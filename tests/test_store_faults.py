"""A results directory damaged between runs: journal lines that are not entries (valid JSON of
another shape, bytes that are not UTF-8), a cell file whose footer reads but whose pages do not,
and a store folder that is a file. A rerun skips what it cannot read as it skips a torn line,
recomputes what the report could not read, and says in one line what it cannot write."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError
from orthobench.loop import run_cell
from orthobench.results import EvaluationJournal, ResultStore, load_runs
from tests.test_loop import cell, comparable
from tests.test_results import _damage_pages

#: Lines a journal may hold after a crash, a disk fault or a hand edit, none of them an entry.
NOT_ENTRIES = [b"[1, 2]", b"null", b"42", b'"text"', b"{}", b"\xff\xfe not UTF-8", b"\x00" * 40]
#: Entries of the cell journal without a cell id: one missing, one not a string.
NO_CELL_ID = [b'{"status": "ok", "rows": 2}', b'{"cell_id": 5, "status": "failed"}']


def _append(path: Path, *lines: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(b"".join(line + b"\n" for line in lines))


def test_journal_lines_that_are_not_entries_are_skipped_as_torn_ones_are(tmp_path):
    """Such a line (a list, a number, an entry without a cell id or with an int one, bytes that
    are not UTF-8) raised AttributeError, KeyError, TypeError or UnicodeDecodeError out of every
    command that reads the journal."""
    store = ResultStore(tmp_path)
    first, second = cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)
    store.write_cell(first, run_cell(first), {}, 0.1)
    _append(store.runs_journal.path, *NOT_ENTRIES, *NO_CELL_ID)
    store.write_cell(second, run_cell(second), {}, 0.1)
    assert store.stored() == {first.id: first.config_hash, second.id: second.config_hash}
    assert [e["cell_id"] for e in store.runs_journal.entries()] == [first.id, second.id]


def test_evaluation_journal_lines_that_are_not_evaluations_are_skipped_and_the_cell_resumes(
    tmp_path,
):
    """Such a line failed its cell on every rerun (``'list' object has no attribute 'get'``,
    ``KeyError: 'record'``, ``RunRecord.__init__() missing ...``) until --force; it is skipped as a
    torn line is, and the cell resumes from the lines around it, equal to an uninterrupted
    cell."""
    spec = dataclasses.replace(cell(n_init=3, budget=3), q=2)
    full = run_cell(spec)
    journal = EvaluationJournal(tmp_path / "j.jsonl", spec.config_hash)
    run_cell(spec, journal=journal)
    lines = journal.path.read_bytes().splitlines()
    assert len(lines) == 9
    entry = json.loads(lines[4])
    no_record = json.dumps({k: v for k, v in entry.items() if k != "record"}).encode()
    del entry["record"]["y"]
    no_y = json.dumps(entry).encode()
    entry["record"]["y"], entry["record"]["extra"] = 1.0, 2
    extra = json.dumps(entry).encode()
    # Iteration 4 (of BO step 1) lost among lines that are not evaluations; step 2 kept whole.
    journal.path.write_bytes(b"")
    _append(journal.path, *lines[:4], *NOT_ENTRIES, no_record, no_y, extra, *lines[5:7])
    assert [r.iteration for r, _ in journal.read()] == [0, 1, 2, 3, 5, 6]
    assert comparable(run_cell(spec, journal=journal)) == comparable(full)


def _rows(out: Path):
    """The stored rows of ``out`` in a fixed order, without the timings."""
    rows = load_runs([out]).drop(columns=["fit_seconds", "acq_seconds", "eval_seconds"])
    rows = rows.drop(columns=["wall_seconds"]).sort_values(["cell_id", "iteration"])
    return rows.reset_index(drop=True)


def test_run_recomputes_a_cell_whose_pages_do_not_read_and_reads_past_a_garbled_journal(
    tmp_path, write_suite
):
    suite = write_suite(
        "name: t\nseeds: 2\nn_init: 3\nbudget: 2\ntasks: [hartmann6]\noptimizers: [sobol]\n"
    )
    out = tmp_path / "out"
    assert CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"]).exit_code == 0
    before = _rows(out)
    _damage_pages(out / "runs" / "hartmann6__sobol__seed1.parquet")
    _append(out / "runs.jsonl", *NOT_ENTRIES, *NO_CELL_ID)
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1 run, 1 already stored, 0 failed in ")
    assert "Traceback" not in result.output
    assert _rows(out).equals(before)


@pytest.mark.parametrize("folder", ["runs", "probe", "partial"])
def test_a_store_folder_that_is_a_file_is_refused_before_any_cell(tmp_path, folder):
    """A file named `partial` failed every cell (FileExistsError, exit 1) and one named `runs`
    stopped the run after its first cell; both are the runner's own I/O: one error first."""
    store = ResultStore(tmp_path)
    (tmp_path / folder).write_text("not a folder")
    with pytest.raises(OrthobenchError) as info, store.open_for_writing():
        pass
    assert str(info.value) == (
        f"the results directory {tmp_path} is not writable ({tmp_path / folder}: Not a "
        "directory); choose another output directory."
    )
