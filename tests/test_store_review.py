"""A results directory changed under the store: removed or replaced while a run writes to it, its
journal damaged or lost under intact cell files, a FIFO in place of a cell file, a target that
cannot be replaced, JSON nested too deeply or metadata of another shape, a symbolic link in place
of its lock or a journal; and ``load_results`` given the inner ``runs/`` folder."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

import orthobench
from orthobench import results
from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError, OrthobenchWarning
from orthobench.execution import Run, run_suite
from orthobench.results import ResultStore, _io, load_runs
from orthobench.results._records import METADATA_KEY
from orthobench.suite import load_suite
from orthobench.tasks.datasets.features import FeatureKey, load_or_extract
from tests.test_loop import cell
from tests.test_results import _damage_pages, _two_stored_cells, probe_record, records_for

#: Two cells of 3 + 2 evaluations, as in tests/test_store_faults.py.
SUITE = "name: t\nseeds: 2\nn_init: 3\nbudget: 2\ntasks: [hartmann6]\noptimizers: [sobol]\n"


def removed_message(root: Path) -> str:
    return (
        f"{root} was removed or replaced while this run wrote to it (its lock file .lock is gone "
        "or another one); what it stored there may be lost: rerun the same command to store it "
        "again."
    )


# ----------------------------------------------------------------------------------------------
# A results directory removed or replaced while a run holds it


@pytest.mark.parametrize("then", ["write", "failure", "end"])
def test_a_directory_removed_while_held_is_not_recreated_and_stops_the_run(tmp_path, then):
    """``rm -rf DIR`` during a run: the next cell recreated DIR, and the run said all its cells
    were run (exit 0) though those stored before were gone."""
    store = ResultStore(tmp_path / "out")
    first, second = cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)
    with pytest.raises(OrthobenchError) as info, store.open_for_writing():
        store.write_cell(first, records_for(first), {}, 0.1)
        shutil.rmtree(store.root)
        if then == "write":
            store.write_cell(second, records_for(second), {}, 0.1)
        elif then == "failure":
            store.record_failure(second, "boom", "boom\n", 0.1)
    assert str(info.value) == removed_message(store.root)
    assert not store.root.exists()


def test_a_directory_replaced_by_another_run_stops_this_one_and_keeps_that_ones_lock(tmp_path):
    """A second run started on the removed folder was not refused (the lock file it found was
    new): the first stops at its next write, leaving the second's folder and lock as they are."""
    first_store, second_store = ResultStore(tmp_path / "out"), ResultStore(tmp_path / "out")
    spec = cell(n_init=2, budget=0)
    with contextlib.ExitStack() as second_run:
        with pytest.raises(OrthobenchError) as info, first_store.open_for_writing():
            shutil.rmtree(first_store.root)
            second_run.enter_context(second_store.open_for_writing())
            first_store.write_cell(spec, records_for(spec), {}, 0.1)
        assert str(info.value) == removed_message(first_store.root)
        assert second_store.lock_path.read_text() == f"{os.getpid()}\n"
        second_store.write_cell(spec, records_for(spec), {}, 0.1)
    assert second_store.stored() == {spec.id: spec.config_hash}


def test_the_run_command_stops_in_one_line_when_its_folder_is_removed(
    tmp_path, write_suite, monkeypatch
):
    suite, out = write_suite(SUITE), tmp_path / "out"
    finish = Run.finish
    finished = []

    def removed_after_the_first(self, job, result):
        if finished:
            shutil.rmtree(out)
        finished.append(job)
        finish(self, job, result)

    monkeypatch.setattr(Run, "finish", removed_after_the_first)
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == f"orthobench: error: {removed_message(out)}"
    assert result.stdout == "" and not out.exists()


# ----------------------------------------------------------------------------------------------
# A journal that lost the entries of intact cell files


def test_a_cell_file_whose_journal_line_was_lost_is_stored_with_the_entry_its_footer_holds(
    tmp_path,
):
    """A line deleted from runs.jsonl (or a crash between a file's rename and its entry) made
    the intact cell rerun silently and overwrite its file."""
    store, (kept, lost) = _two_stored_cells(tmp_path)
    config = {"a": 1}
    store.write_probe_state(
        "state", "hash", [probe_record()], {"config": config}, 0.1, entry={"config": config}
    )
    entries = {}
    for journal in (store.runs_journal, store.probe_journal):
        lines = journal.path.read_bytes().splitlines(keepends=True)
        entries[journal.key] = json.loads(lines[-1])
        journal.path.write_bytes(b"".join(lines[:-1]))
    with pytest.warns(OrthobenchWarning) as caught:
        assert store.stored() == {kept.id: kept.config_hash, lost.id: lost.config_hash}
        assert store.runs_journal.stored_entry(lost.id) == entries["cell_id"]
        assert store.probe_journal.stored_entry("state") == entries["state_id"]
    assert {str(w.message) for w in caught} == {
        f"cell {lost.id}: {store.runs_journal.path} has no entry for the stored file "
        f"{store.cell_path(lost)}; its entry is read from it",
        f"probe state state: {store.probe_journal.path} has no entry for the stored file "
        f"{store.probe_path('state')}; its entry is read from it",
    }


def test_an_entry_read_from_a_footer_is_journaled_again_by_a_store_held_for_writing(tmp_path):
    """It was never written back, so every run repeated the warning."""
    store, (_, lost) = _two_stored_cells(tmp_path)
    lines = store.runs_journal.path.read_bytes().splitlines(keepends=True)
    store.runs_journal.path.write_bytes(b"".join(lines[:-1]))
    with pytest.warns(OrthobenchWarning, match="has no entry"):
        store.stored()  # read alone (a report): nothing written
    assert store.runs_journal.path.read_bytes() == b"".join(lines[:-1])
    with store.open_for_writing(), pytest.warns(OrthobenchWarning, match="has no entry"):
        store.stored()
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        assert lost.id in store.stored()


def test_a_corrupt_cell_file_without_a_journal_entry_is_said_to_be_recomputed(tmp_path):
    store, (kept, lost) = _two_stored_cells(tmp_path)
    store.runs_journal.path.write_bytes(store.runs_journal.path.read_bytes().splitlines()[0])
    _damage_pages(store.cell_path(lost))
    with pytest.warns(OrthobenchWarning) as caught:
        assert store.stored() == {kept.id: kept.config_hash}
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"cell {lost.id}: stored file is corrupt ({store.cell_path(lost)}: ")
    assert message.endswith("); recomputing")


def test_a_rerun_over_a_garbled_journal_keeps_the_stored_cells(tmp_path, write_suite):
    suite, store = load_suite(write_suite(SUITE)), ResultStore(tmp_path / "out")
    run_suite(suite, store, device=torch.device("cpu"), show_progress=False)
    files = {path: path.stat().st_ino for path in store.runs_dir.iterdir()}
    store.runs_journal.path.write_bytes(b"\x00garbage\n" * 3)
    with pytest.warns(OrthobenchWarning, match="has no entry for the stored file"):
        again = run_suite(suite, store, device=torch.device("cpu"), show_progress=False)
    assert [outcome.status for outcome in again.outcomes] == ["skipped", "skipped"]
    assert {path: path.stat().st_ino for path in store.runs_dir.iterdir()} == files


# ----------------------------------------------------------------------------------------------
# A file that is not a regular file, a target that cannot be replaced


@pytest.mark.timeout(20)
def test_a_fifo_in_place_of_a_cell_file_is_skipped_not_waited_on(tmp_path):
    """Opening a FIFO waits for a writer: ``orthobench run`` and ``report`` hung forever."""
    store, (good, bad) = _two_stored_cells(tmp_path)
    path = store.cell_path(bad)
    path.unlink()
    os.mkfifo(path)
    with pytest.warns(OrthobenchWarning) as caught:
        assert set(load_runs([tmp_path])["cell_id"]) == {good.id}
        assert store.stored() == {good.id: good.config_hash}
    assert [str(w.message) for w in caught] == [
        f"{path}: not a readable results file (not a regular file); skipped",
        f"cell {bad.id}: stored file is corrupt ({path}: not a regular file); recomputing",
    ]


def _immutable_target(monkeypatch) -> None:  # chattr +i: the rename fails
    def replace(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted", str(src), None, str(dst))

    monkeypatch.setattr(os, "replace", replace)


def _read_only_folder(monkeypatch) -> None:  # creating the temporary file fails
    def open_(file, mode="r", *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(file))

    monkeypatch.setattr(_io, "open", open_, raising=False)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [(_immutable_target, "Operation not permitted"), (_read_only_folder, "Permission denied")],
)
def test_a_target_that_cannot_be_written_is_named_not_the_temporary_file(
    tmp_path, monkeypatch, fault, reason
):
    """An immutable target (``chattr +i``) failed the rename with an error naming the temporary
    file, which was deleted: ``runs/.x.parquet.29407.tmp: Operation not permitted``."""
    path = tmp_path / "x.parquet"
    fault(monkeypatch)
    with pytest.raises(OSError) as info:
        results.write_atomic(path, lambda fh: fh.write(b"new"))
    assert (info.value.filename, info.value.filename2) == (str(path), None)
    assert results.os_error_text(info.value) == f"{path}: {reason}"
    assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------------------------
# load_results given the inner runs/ folder


def test_load_results_of_the_inner_runs_folder_says_to_pass_its_results_directory(tmp_path):
    """The README tells pandas users to read DIR/runs; load_results("DIR/runs") returned an
    empty frame without a word."""
    store, _ = _two_stored_cells(tmp_path / "out")
    with pytest.warns(OrthobenchWarning) as caught:
        assert orthobench.load_results(store.runs_dir).empty
    assert [str(w.message) for w in caught] == [
        f"{store.runs_dir}: no runs/ folder, but Parquet files of its own: an inner folder of a "
        f"results directory, which gives no rows; pass the results directory ({store.root}) "
        "instead."
    ]
    (tmp_path / "empty").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        assert len(orthobench.load_results(store.root)) == 4
        assert orthobench.load_results(tmp_path / "empty").empty


def test_a_cell_records_the_code_version_it_started_with_not_the_one_checked_out_at_its_end(
    tmp_path,
):
    """``code_version()`` was asked again when the file was written: a commit checked out while
    the cell ran was stored beside the metadata's ``git_sha`` of the code that ran."""
    from orthobench.results import ResultStore
    from orthobench.results._parquet import read_metadata
    from tests.report.conftest import cell

    spec = cell("s", "t", "sobol", 0, 2, 1)
    started = {"versions": {"orthobench": "0.1.0"}, "git_sha": "a" * 40}
    store = ResultStore(tmp_path)
    path = store.write_cell(spec, [], started, 1.0)
    assert read_metadata(path)["code_version"] == "0.1.0 (git aaaaaaaaaaaa)"


# ----------------------------------------------------------------------------------------------
# JSON nested too deeply, metadata of another shape, a link in place of the lock or a journal

#: Valid JSON nested deeper than Python's JSON decoder goes (it raises RecursionError).
DEEP = "[" * 100_000 + "]" * 100_000


def test_a_journal_line_nested_too_deeply_is_skipped_as_a_damaged_one(tmp_path):
    """Such a line in runs.jsonl or a cell's partial journal made `run` and `report` die with
    RecursionError, though a damaged line is skipped."""
    store, cells = _two_stored_cells(tmp_path)
    with store.runs_journal.path.open("a") as fh:
        fh.write(DEEP + "\n")
    journal = store.evaluation_journal(cells[0])
    journal.path.parent.mkdir(exist_ok=True)
    journal.path.write_text(DEEP + "\n")
    assert store.stored() == {spec.id: spec.config_hash for spec in cells}
    assert journal.read() == []


def test_a_feature_cache_whose_meta_is_nested_too_deeply_is_recomputed(tmp_path):
    """Its RecursionError came out of every cell of the task, as a damaged cache's did."""
    key = FeatureKey(model="m", dataset_sha256="0" * 64, image_size=8, device="cpu", dtype="f")
    features = np.ones((4, 3), np.float32)
    path = load_or_extract(key, lambda: features, n=4, directory=tmp_path).path
    with path.open("wb") as fh:
        np.savez(fh, features=features, meta=np.str_(DEEP))
    assert load_or_extract(key, lambda: features, n=4, directory=tmp_path).extracted


def _set_metadata(path: Path, keys: tuple[str, ...], text: str) -> None:
    """Set the field at ``keys`` of a file's orthobench metadata to the JSON ``text`` (no keys:
    the whole metadata)."""
    table = pq.read_table(path)
    if keys:
        meta = json.loads(table.schema.metadata[METADATA_KEY])
        *parents, last = keys
        functools.reduce(dict.__getitem__, parents, meta)[last] = json.loads(text)
        text = json.dumps(meta)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: text}), path)


@pytest.mark.parametrize(
    ("keys", "text", "why"),
    [
        ((), DEEP, "metadata nested too deeply to read"),
        ((), "[1, 2]", "metadata is [1, 2], not dict"),
        (("cell",), '"abc"', "metadata.cell is 'abc', not dict"),
        (("cell", "task"), '"x"', "metadata.cell.task is 'x', not dict"),
        (("cell", "optimizer", "name"), '["x"]', "metadata.cell.optimizer.name is ['x'], not str"),
        (("versions",), '["a"]', "metadata.versions is ['a'], not dict"),
        (("seconds",), '"abc"', "metadata.seconds is 'abc', not int or float"),
    ],
    ids=["deep", "a list", "cell", "task", "optimizer name", "versions", "seconds"],
)
def test_footer_metadata_too_deep_or_of_another_shape_makes_an_unreadable_file(
    tmp_path, keys, text, why
):
    """`report` (and the closing report of `run`) died with RecursionError, AttributeError,
    ValueError or TypeError on such a file: it is damaged, so `run` recomputes it and the
    report skips it with a warning."""
    store, (damaged, kept) = _two_stored_cells(tmp_path / "out")
    path = store.cell_path(damaged)
    _set_metadata(path, keys, text)
    with pytest.warns(OrthobenchWarning) as caught:
        assert store.stored() == {kept.id: kept.config_hash}
    assert [str(w.message) for w in caught] == [
        f"cell {damaged.id}: stored file is corrupt ({path}: {why}); recomputing"
    ]
    result = CliRunner().invoke(cli, ["report", str(store.root), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"orthobench: warning: {path}: not a readable results file ({why}); skipped"
    ]


def link_message(path: Path) -> str:
    return (
        f"{path} is a symbolic link; orthobench writes a results folder's own files only "
        "inside it: remove the link or replace it with a copy of what it points to."
    )


@pytest.mark.parametrize("name", [".lock", "runs.jsonl", "probe.jsonl"])
@pytest.mark.parametrize("dangling", [False, True], ids=["to a file", "dangling"])
def test_a_link_in_place_of_the_lock_or_a_journal_is_refused(tmp_path, name, dangling):
    """The lock's target (a user's file) was truncated to the run's PID, and a journal's got
    the journal lines appended."""
    target, out = tmp_path / "users-file", tmp_path / "out"
    if not dangling:
        target.write_text("precious\n")
    out.mkdir()
    (out / name).symlink_to(target)
    store = ResultStore(out)
    with pytest.raises(OrthobenchError) as info, store.open_for_writing():
        pass
    assert str(info.value) == link_message(out / name)
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "precious\n"


def test_a_link_in_place_of_a_cells_evaluation_journal_is_refused(tmp_path):
    """An evaluation appended to the link's target, a file outside the results folder."""
    target = tmp_path / "users-file"
    target.write_text("precious\n")
    store, (spec, _) = _two_stored_cells(tmp_path / "out")
    journal = store.evaluation_journal(spec)
    journal.path.parent.mkdir(exist_ok=True)
    journal.path.symlink_to(target)
    with pytest.raises(OrthobenchError) as info:
        journal.append(records_for(spec)[0], None)
    assert str(info.value) == link_message(journal.path)
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("content", ["{not json", "[" * 100_000 + "]" * 100_000])
def test_a_damaged_running_marker_is_a_warning_not_a_traceback(tmp_path, content):
    """JSON nested deeper than the stack raised RecursionError out of ``orthobench run``."""
    from orthobench import execution
    from orthobench.exceptions import OrthobenchWarning
    from orthobench.results import ResultStore

    store = ResultStore(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / execution.RUNNING_MARKER).write_text(content)
    with pytest.warns(OrthobenchWarning, match="does not say which"):
        execution._fail_unfinished(store)


def test_a_checksum_sidecar_nested_too_deeply_is_ignored(tmp_path):
    from orthobench.tasks.datasets.checksums import _sidecar_entries

    sidecar = tmp_path / "sidecar.json"
    sidecar.write_text("[" * 100_000 + "]" * 100_000)
    assert _sidecar_entries(sidecar) == {}


def test_a_dangling_link_as_the_results_directory_names_the_missing_target(tmp_path):
    """It read "is not writable (...: File exists)", for a link to a folder that is not there."""
    from orthobench.results import ResultStore

    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(OrthobenchError, match=r"symbolic link to .*gone, which does not exist"):
        with ResultStore(link).open_for_writing():
            pass
    assert not (tmp_path / "gone").exists()
