"""A crafted results folder: symbolic links in place of the files and folders a run or a report
writes (which wrote outside the folder), and FIFOs, device links and huge files in place of its
lock, journals and running marker (which hung a run or a report, or filled the memory)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from orthobench import execution
from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError, OrthobenchWarning, ResultsError
from orthobench.report import build_report
from orthobench.results import ResultStore, _journal
from tests.test_loop import cell
from tests.test_results import _two_stored_cells, records_for


def link_message(path: Path) -> str:
    return (
        f"{path} is a symbolic link; orthobench writes a results folder's own files only "
        "inside it: remove the link or replace it with a copy of what it points to."
    )


def not_regular_message(path: Path) -> str:
    return (
        f"{path} is not a regular file (a FIFO or a device); a results folder's lock, journals "
        "and marker are regular files that orthobench writes: remove it."
    )


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A user's file outside the results folder."""
    path = tmp_path / "users-file"
    path.write_text("precious\n")
    return path


# ----------------------------------------------------------------------------------------------
# Symbolic links: nothing is written outside the folder


@pytest.mark.parametrize("name", ["report.html", "report.summary.csv"])
def test_a_link_in_place_of_a_report_file_in_the_folder_is_refused(tmp_path, victim, name):
    """``orthobench report DIR`` overwrote the targets of ``DIR/report.html`` and
    ``DIR/report.summary.csv`` (``~/.bashrc``)."""
    store, _ = _two_stored_cells(tmp_path / "out")
    (store.root / name).symlink_to(victim)
    before = sorted(store.root.iterdir())
    with pytest.raises(OrthobenchError) as info:
        build_report([store.root], store.root / "report.html")
    assert str(info.value) == (
        f"cannot write the report to {store.root / name}: it is a symbolic link, which a report "
        "does not write through; remove it or give another HTML file with -o."
    )
    assert victim.read_text() == "precious\n"
    assert sorted(store.root.iterdir()) == before  # checked before any file is written


def test_a_report_file_named_with_o_is_still_written_through_its_link(tmp_path, victim):
    """``-o LINK`` names a file of the user's own, as ``convert-wm811k --out LINK`` does; so are
    the CSVs beside it, outside the folders the report reads (the first fix refused a linked
    CSV there)."""
    store, _ = _two_stored_cells(tmp_path / "out")
    link, csv_target = tmp_path / "r.html", tmp_path / "published.csv"
    link.symlink_to(victim)
    csv_target.write_text("old\n")
    (tmp_path / "r.summary.csv").symlink_to(csv_target)
    build_report([store.root], link)
    assert link.is_symlink() and victim.read_text().startswith("<!")
    assert csv_target.read_text().startswith("kind,")


def test_a_link_in_place_of_a_cell_file_is_refused(tmp_path, victim):
    """The cell's Parquet file was written to the link's target, a file outside the folder."""
    store = ResultStore(tmp_path / "out")
    spec = cell(n_init=2, budget=0)
    store.runs_dir.mkdir(parents=True)
    store.cell_path(spec).symlink_to(victim)
    with pytest.raises(OrthobenchError) as info:
        store.write_cell(spec, records_for(spec), {}, 0.1)
    assert str(info.value) == link_message(store.cell_path(spec))
    assert victim.read_text() == "precious\n"


def test_a_link_planted_at_a_cell_files_temporary_name_is_refused(tmp_path, victim):
    """The temporary file is named by the writing process's PID, which a crafted folder can
    guess: it was opened through a link there."""
    store = ResultStore(tmp_path / "out")
    spec = cell(n_init=2, budget=0)
    store.runs_dir.mkdir(parents=True)
    tmp = store.runs_dir / f".{spec.id}.parquet.{os.getpid()}.tmp"
    tmp.symlink_to(victim)
    with pytest.raises(OrthobenchError) as info:
        store.write_cell(spec, records_for(spec), {}, 0.1)
    assert str(info.value) == link_message(tmp)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("folder", ["runs", "probe", "partial"])
def test_a_linked_unit_folder_is_refused(tmp_path, folder):
    """Cells (probe states, evaluation journals) were written into the folder the link named."""
    outside, out = tmp_path / "outside", tmp_path / "out"
    outside.mkdir()
    out.mkdir()
    (out / folder).symlink_to(outside)
    with pytest.raises(OrthobenchError) as info, ResultStore(out).open_for_writing():
        pass
    assert str(info.value) == link_message(out / folder)
    assert list(outside.iterdir()) == []


def test_a_dangling_link_as_the_running_marker_is_refused(tmp_path):
    """The marker was written with ``write_text``, which created the link's target outside."""
    store = ResultStore(tmp_path / "out")
    store.root.mkdir()
    marker, target = store.root / execution.RUNNING_MARKER, tmp_path / "created-outside"
    marker.symlink_to(target)
    run = execution.Run(store, None, None, {})
    with pytest.raises(OrthobenchError) as info, run.running(SimpleNamespace(unit=cell())):
        pass
    assert str(info.value) == link_message(marker)
    assert not target.exists()


# ----------------------------------------------------------------------------------------------
# FIFOs, devices and huge files: refused at once, in one line naming the file


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device(path: Path) -> None:
    # /dev/null, not the /dev/zero of the report: a regression must fail, not fill the memory
    path.symlink_to("/dev/null")


def _huge(path: Path) -> None:
    path.write_text("{}\n" * 34)  # 102 bytes, over the cap that the test sets


def _journal_of(store: ResultStore, which: str):
    """The path of a journal and how it is read."""
    if which == "partial":
        journal = store.evaluation_journal(cell(n_init=2, budget=0))
        journal.path.parent.mkdir(parents=True, exist_ok=True)
        return journal.path, journal.read
    journal = {"runs": store.runs_journal, "probe": store.probe_journal}[which]
    return journal.path, journal.entries


@pytest.mark.timeout(20)
@pytest.mark.parametrize("make", [_fifo, _device, _huge], ids=["fifo", "device", "huge"])
@pytest.mark.parametrize("which", ["runs", "probe", "partial"])
def test_a_journal_that_is_no_regular_file_or_is_huge_is_refused(
    tmp_path, monkeypatch, which, make
):
    """A FIFO journal hung ``report`` and ``run`` forever; a link to ``/dev/zero`` or a huge
    sparse file was read whole, until the memory ran out."""
    monkeypatch.setattr(_journal, "_JOURNAL_BYTES", 100, raising=False)
    store = ResultStore(tmp_path)
    path, read = _journal_of(store, which)
    make(path)
    with pytest.raises(ResultsError) as info:
        read()
    why = (
        "102 bytes, more than the 100 of any journal that orthobench writes: remove it or move "
        "it away."
        if make is _huge
        else "cannot read this journal (not a regular file)"
    )
    assert str(info.value) == f"{path}: {why}"


@pytest.mark.timeout(20)
def test_report_of_a_folder_with_a_fifo_journal_exits_with_one_line(tmp_path):
    store, _ = _two_stored_cells(tmp_path / "out")
    os.mkfifo(store.probe_journal.path)
    result = CliRunner().invoke(cli, ["report", str(store.root), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert result.stderr == (
        f"orthobench: error: {store.probe_journal.path}: cannot read this journal (not a regular "
        "file)\n"
    )


@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", [".lock", "runs.jsonl", "probe.jsonl"])
def test_a_fifo_lock_or_journal_is_refused_when_a_run_opens_the_folder(tmp_path, name):
    """A FIFO journal hung ``run`` (opened for appending); a FIFO lock failed with "Invalid
    argument" and no path (its truncation)."""
    tmp_path.joinpath(name).parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / name)
    with pytest.raises(OrthobenchError) as info, ResultStore(tmp_path).open_for_writing():
        pass
    assert str(info.value) == not_regular_message(tmp_path / name)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("make", [_fifo, _device], ids=["fifo", "device"])
def test_a_running_marker_that_is_no_regular_file_is_refused(tmp_path, make):
    """A FIFO marker hung the next ``run`` as it looked for an unfinished unit; a link to
    ``/dev/zero`` was read until the memory ran out."""
    marker = tmp_path / execution.RUNNING_MARKER
    make(marker)
    with pytest.raises(OrthobenchError) as info:
        execution._fail_unfinished(ResultStore(tmp_path))
    expected = link_message if make is _device else not_regular_message
    assert str(info.value) == expected(marker)


def test_a_running_marker_over_its_cap_is_not_read(tmp_path, monkeypatch):
    """A huge sparse marker was read whole; one over the cap (set small here) is damage."""
    monkeypatch.setattr(execution, "_MARKER_BYTES", 100, raising=False)
    marker = tmp_path / execution.RUNNING_MARKER
    spec = cell()
    entry = {"cell_id": spec.id, "config_hash": spec.config_hash, "pid": 1, "suite": "s" * 100}
    marker.write_text(json.dumps(entry))
    with pytest.warns(OrthobenchWarning, match=r"does not say which \(ValueError: larger than 100"):
        execution._fail_unfinished(ResultStore(tmp_path))
    assert not marker.exists()
