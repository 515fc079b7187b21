"""Results store: record schemas, atomic writes, journals, schema versions, metadata, damaged
files, resolved configurations and code versions, the writer's lock."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import importlib
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from orthobench import results
from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError, OrthobenchWarning, ResultsError
from orthobench.results import (
    METADATA_KEY,
    SCHEMA_VERSION,
    ProbeRecord,
    ResultStore,
    RunRecord,
    arrow_schema,
    code_version,
    load_probe,
    load_runs,
    read_metadata,
    run_metadata,
    where_run,
)
from orthobench.results._provenance import cpu_model
from orthobench.work import PROBE_STATE
from tests.test_loop import cell


def records_for(spec):
    from orthobench.loop import run_cell

    return run_cell(spec)


def run_record(**changes) -> RunRecord:
    values = dict(
        suite="s",
        cell_id="c",
        task="t",
        optimizer="o",
        seed=3,
        iteration=0,
        phase="init",
        q=1,
        batch=0,
        x=[0.25, -1.5],
        y=1.5,
        y_true=None,
        best_y=1.5,
        regret=None,
        is_outlier=False,
        fit_seconds=0.0,
        acq_seconds=0.0,
        eval_seconds=0.01,
        wall_seconds=0.02,
        status="ok",
        fallback=None,
        info="{}",
    )
    return RunRecord(**{**values, **changes})


def probe_record(**changes) -> ProbeRecord:
    sample = {int: 4, float: 0.5, str: "a", list[float]: [1.0, 2.5], list[float] | None: [1.0]}
    sample |= {int | None: 2, bool | None: True, float | None: None}
    values = {name: sample[hint] for name, hint in typing.get_type_hints(ProbeRecord).items()}
    return ProbeRecord(**{**values, **changes})


def test_arrow_schema_maps_field_types_and_optionality():
    @dataclasses.dataclass
    class Row:
        n: int
        v: float | None
        flag: bool
        name: str
        xs: list[float]

    assert arrow_schema(Row) == pa.schema(
        [
            pa.field("n", pa.int64(), nullable=False),
            pa.field("v", pa.float64(), nullable=True),
            pa.field("flag", pa.bool_(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("xs", pa.list_(pa.float64()), nullable=False),
        ]
    )

    @dataclasses.dataclass
    class Bad:
        when: dict

    with pytest.raises(TypeError, match="No Arrow type for the field annotation"):
        arrow_schema(Bad)


def test_records_round_trip_through_their_schema(tmp_path):
    store = ResultStore(tmp_path)
    runs = [run_record(), run_record(iteration=1, y=math.nan, status="invalid", regret=0.5)]
    path = store.write_cell(cell(n_init=2, budget=0), runs, {}, 0.1)
    back = [RunRecord(**row) for row in pq.read_table(path).to_pylist()]
    assert back[0] == runs[0] and back[1].regret == 0.5 and math.isnan(back[1].y)
    frame = load_runs([tmp_path])
    assert list(frame.columns) == [f.name for f in dataclasses.fields(RunRecord)]
    assert frame["y_true"].isna().all() and frame["seed"].dtype == "int64"

    probes = [probe_record(), probe_record(estimator="b", regret=1.25, baseline_values_ei=[])]
    path = store.write_probe_state("state", "hash", probes, {}, 0.2)
    assert [ProbeRecord(**row) for row in pq.read_table(path).to_pylist()] == probes
    frame = load_probe([tmp_path])
    assert list(frame.columns) == [f.name for f in dataclasses.fields(ProbeRecord)]
    assert list(frame["values_ei"].iloc[0]) == [1.0, 2.5]
    assert list(frame["baseline_values_ei"].iloc[1]) == []
    assert frame["regret"].isna().iloc[0] and frame["regret"].iloc[1] == 1.25
    assert pq.read_schema(store.probe_path("state")).remove_metadata() == arrow_schema(ProbeRecord)


def test_a_cell_file_written_before_the_batch_columns_reads_with_them_filled_in(tmp_path):
    """``q``, ``batch`` and ``wall_seconds`` came within schema version 3: a file without them
    (one point per BO step) is still stored and reads with q 1, batch by iteration, NaN time."""
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=2)
    runs = [
        run_record(iteration=i, phase="init" if i < 2 else "bo", batch=max(i - 1, 0))
        for i in range(4)
    ]
    path = store.write_cell(spec, runs, {}, 0.1)
    table = pq.read_table(path)
    old = table.drop_columns(["q", "batch", "wall_seconds"])
    pq.write_table(old.replace_schema_metadata(table.schema.metadata), path)
    assert store.is_stored(spec)
    frame = load_runs([tmp_path])
    assert list(frame.columns) == [f.name for f in dataclasses.fields(RunRecord)]
    assert frame["q"].tolist() == [1] * 4 and frame["batch"].tolist() == [0, 0, 1, 2]
    assert frame["wall_seconds"].isna().all() and frame["batch"].dtype == "int64"


def test_probe_rows_keep_their_cost_and_thread_count(tmp_path):
    rows = [probe_record(seconds_per_call=0.05, threads=2), probe_record(seconds_per_call=None)]
    ResultStore(tmp_path).write_probe_state("state", "hash", rows, {}, 0.1)
    frame = load_probe([tmp_path])
    assert frame["seconds_per_call"].iloc[0] == 0.05 and frame["threads"].iloc[0] == 2
    assert frame["seconds_per_call"].isna().iloc[1]


def test_none_in_a_required_field_is_rejected_and_nothing_is_written(tmp_path):
    store = ResultStore(tmp_path)
    with pytest.raises(ValueError, match=r"RunRecord fields \['y', 'status'\] must not be None"):
        store.write_cell(cell(n_init=1, budget=0), [run_record(y=None, status=None)], {}, 0.1)
    assert not list(tmp_path.rglob("*.parquet")) and not store.runs_journal.entries()


def test_write_then_read_round_trip_with_metadata(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=3, budget=2)
    path = store.write_cell(spec, records_for(spec), run_metadata("cpu"), 0.5)
    frame = load_runs([tmp_path])
    assert len(frame) == 5 and list(frame["iteration"]) == list(range(5))
    meta = read_metadata(path)
    assert meta["cell"]["optimizer"]["name"] == "sobol"
    assert meta["config_hash"] == spec.config_hash and meta["schema_version"] == SCHEMA_VERSION
    assert meta["device"] == "cpu"
    assert all(meta["versions"][d] for d in ("torch", "numpy", "scipy"))
    # What the values depend on besides the code and the thread count: the CPU type.
    assert meta["cpu"] == f"{cpu_model()}; {torch.backends.cpu.get_cpu_capability()}"
    assert store.is_stored(spec)


def test_where_run_names_the_gpu_of_a_cuda_device_only(device):
    """A CUDA unit's values depend on the GPU as a CPU unit's on the CPU: its name is stored."""
    where = where_run(str(device))
    assert where["cpu"] == f"{cpu_model()}; {torch.backends.cpu.get_cpu_capability()}"
    if device.type == "cuda":
        assert where["gpu"] == torch.cuda.get_device_name(device)
    else:
        assert "gpu" not in where
    if not torch.cuda.is_available():  # a job named for CUDA that never touched it
        assert "gpu" not in where_run("cuda:0")


def _edit_metadata(path, **changes):
    """Rewrite the orthobench metadata of a file: set the given keys, delete those set to None."""
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta.update(changes)
    meta = {k: v for k, v in meta.items() if v is not None}
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta)}), path)


def _set_schema_version(path, version):
    _edit_metadata(path, schema_version=version)


@pytest.mark.parametrize("version", [None, SCHEMA_VERSION - 1, SCHEMA_VERSION + 1])
def test_a_file_of_another_schema_version_raises_one_clear_error(tmp_path, version):
    """``SCHEMA_VERSION - 1``: a probe file from before the cost columns."""
    store = ResultStore(tmp_path)
    path = store.write_probe_state("state", "hash", [probe_record()], {}, 0.1)
    _set_schema_version(path, version)
    found = "(none)" if version is None else str(version)
    with pytest.raises(ResultsError) as info:
        load_probe([tmp_path])
    message = str(info.value)
    assert message == (
        f"{path}: results schema version {found}, but this orthobench reads version "
        f"{SCHEMA_VERSION}; rerun its suite (orthobench run or probe) to rewrite it."
    )


def test_the_report_command_prints_the_schema_error_as_one_line(tmp_path):
    store = ResultStore(tmp_path)
    path = store.write_cell(cell(n_init=1, budget=0), [run_record()], {}, 0.1)
    _set_schema_version(path, None)
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"orthobench: error: {path}: results schema version (none), but this orthobench reads "
        f"version {SCHEMA_VERSION}; rerun its suite (orthobench run or probe) to rewrite it."
    ]


def test_entries_of_another_schema_version_are_not_stored(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=0)
    store.write_cell(spec, [run_record()], {}, 0.1)
    entry = store.runs_journal.entries()[-1]
    store.runs_journal.append({**entry, "schema_version": SCHEMA_VERSION - 1})
    assert not store.is_stored(spec)


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


def test_a_full_disk_keeps_the_old_file_whole_and_the_error_names_the_file(tmp_path, monkeypatch):
    """A failed ``write`` or ``fsync`` raises an OSError naming no file: the path is added."""
    path = tmp_path / "table.csv"
    path.write_bytes(b"old")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError) as info:
        results.write_atomic(path, lambda fh: fh.write(b"new, longer contents"))
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(path))
    assert results.os_error_text(info.value) == f"{path}: No space left on device"
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_the_store_paths_are_absolute_and_stay_put_when_the_working_directory_changes(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    store = ResultStore("out/../out")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    spec = cell(n_init=1, budget=0)
    assert store.write_cell(spec, [run_record()], {}, 0.1) == tmp_path / "out" / "runs" / (
        f"{spec.id}.parquet"
    )
    assert store.runs_journal.path == tmp_path / "out" / "runs.jsonl"
    assert store.evaluation_journal(spec).path.parent == tmp_path / "out" / "partial"
    assert not any((tmp_path / "elsewhere").iterdir())


def test_torn_journal_line_is_skipped_and_failures_are_not_stored(tmp_path):
    store = ResultStore(tmp_path)
    ok, bad = cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)
    store.write_cell(ok, records_for(ok), {}, 0.1)
    store.record_failure(bad, "RuntimeError: boom", "Traceback ...", 0.2)
    with open(store.runs_journal.path, "a") as fh:
        fh.write('{"cell_id": "half-writ')
    assert store.stored() == {ok.id: ok.config_hash}
    assert store.runs_journal.entries()[-1]["error"] == "RuntimeError: boom"


def test_a_failure_after_a_stored_unit_leaves_it_stored(tmp_path):
    """A failed attempt writes no file (a probe state whose added rows failed): what is stored
    stays stored, and the same entry is read for the unit alone."""
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=0)
    store.write_cell(spec, records_for(spec), {}, 0.1)
    store.record_failure(spec, "RuntimeError: boom", "Traceback ...", 0.2)
    assert store.stored() == {spec.id: spec.config_hash}
    assert store.runs_journal.stored_entry(spec.id) == store.stored_entries("cell")[spec.id]
    assert store.runs_journal.stored_entry("other") is None


def test_an_entry_appended_after_a_torn_line_is_kept(tmp_path):
    """A crash mid-append leaves a fragment without a newline: the next entry must not be glued
    onto it (that cell would count as not stored and be recomputed)."""
    store = ResultStore(tmp_path)
    first, second = cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)
    store.write_cell(first, records_for(first), {}, 0.1)
    with open(store.runs_journal.path, "a") as fh:
        fh.write('{"cell_id": "half-writ')
    store.write_cell(second, records_for(second), {}, 0.1)
    assert store.stored() == {first.id: first.config_hash, second.id: second.config_hash}


def test_storing_a_cell_removes_its_evaluation_journal(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=0)
    journal = store.evaluation_journal(spec)
    for record in records_for(spec):
        journal.append(record, None)
    assert len(journal.read()) == 2
    store.write_cell(spec, records_for(spec), {}, 0.1)
    assert not journal.path.exists()


def test_the_probe_journal_skips_a_torn_line(tmp_path):
    store = ResultStore(tmp_path)
    store.write_probe_state("a", "hash-a", [probe_record()], {}, 0.1)
    store.write_probe_state("b", "hash-b", [probe_record()], {}, 0.1)
    with open(store.probe_journal.path, "a") as fh:
        fh.write('{"state_id": "c", "config_ha')
    assert store.probe_journal.stored() == {"a": "hash-a", "b": "hash-b"}
    # A journalled state whose file is gone is not stored.
    path = store.probe_path("a")
    path.unlink()
    with pytest.warns(OrthobenchWarning) as caught:
        assert store.probe_journal.stored() == {"b": "hash-b"}
    assert [str(w.message) for w in caught] == [
        f"probe state a: stored file is missing ({path}); recomputing"
    ]


def test_changed_config_is_not_reused(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=0)
    store.write_cell(spec, records_for(spec), {}, 0.1)
    changed = cell(n_init=2, budget=1)
    assert changed.id == spec.id and not store.is_stored(changed)


# ----------------------------------------------------------------------------------------------
# Damaged files: reported and recomputed on resume, skipped by readers


def _two_cells():
    return cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)


def _two_stored_cells(root):
    store = ResultStore(root)
    cells = _two_cells()
    for spec in cells:
        store.write_cell(spec, records_for(spec), {}, 0.1)
    return store, cells


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _drop_a_row(path):
    table = pq.read_table(path)  # the slice keeps the schema's metadata
    pq.write_table(table.slice(0, 1), path)


def _other_config(path):
    _edit_metadata(path, config_hash="0" * 16)


def _damage_pages(path: Path) -> None:
    """Flip the bytes of the first page header: the footer still reads, the pages do not (`run`
    counted such a file stored and never recomputed it, while the report skipped it)."""
    data = bytearray(path.read_bytes())
    data[4:64] = bytes(b ^ 0xFF for b in data[4:64])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_truncate, "Parquet magic bytes not found in footer"),
        (lambda path: path.write_bytes(b""), "Parquet file size is 0 bytes"),
        (_drop_a_row, "rows 1, but the journal says 2"),
        (_other_config, "config hash 0000000000000000, but the journal says {hash}"),
        (_damage_pages, ""),  # the reason is pyarrow's own text, which its versions word apart
    ],
    ids=["truncated", "empty", "rows", "config-hash", "pages"],
)
def test_a_damaged_cell_file_is_reported_in_one_line_and_not_stored(tmp_path, damage, why):
    """Only existence was checked: a truncated file counted as stored, was skipped on resume and
    broke the report."""
    store, (good, bad) = _two_stored_cells(tmp_path)
    path = store.cell_path(bad)
    damage(path)
    with pytest.warns(OrthobenchWarning) as caught:
        assert store.stored() == {good.id: good.config_hash}
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"cell {bad.id}: stored file is corrupt ({path}: ")
    assert why.format(hash=bad.config_hash) in message and message.endswith("); recomputing")
    assert "\n" not in message


def test_resume_recomputes_only_the_cell_whose_file_is_damaged(tmp_path, write_suite):
    from orthobench.execution import run_suite
    from orthobench.suite import load_suite

    suite = load_suite(
        write_suite(
            "name: t\nseeds: 2\nn_init: 2\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n"
        )
    )
    store = ResultStore(tmp_path / "out")
    first = run_suite(suite, store, device=torch.device("cpu"), show_progress=False)
    before = load_runs([store.root])
    damaged = first.outcomes[1].unit
    _truncate(store.cell_path(damaged))
    with pytest.warns(OrthobenchWarning, match=f"cell {damaged.id}: stored file is corrupt"):
        again = run_suite(suite, store, device=torch.device("cpu"), show_progress=False)
    assert {o.unit.id: o.status for o in again.outcomes} == {
        first.outcomes[0].unit.id: "skipped",
        damaged.id: "ok",
    }
    after = load_runs([store.root])
    assert after.sort_values(["cell_id", "iteration"])[["cell_id", "y"]].equals(
        before.sort_values(["cell_id", "iteration"])[["cell_id", "y"]]
    )


def test_readers_and_the_report_command_skip_an_unreadable_file_with_one_warning(tmp_path):
    store, (good, bad) = _two_stored_cells(tmp_path)
    path = store.cell_path(bad)
    _truncate(path)
    with pytest.warns(OrthobenchWarning) as caught:
        frame = load_runs([tmp_path])
    assert set(frame["cell_id"]) == {good.id}
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"{path}: not a readable results file (Parquet magic bytes")
    assert message.endswith("; skipped")
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"orthobench: warning: {message}"]
    assert result.stdout.strip() == str(tmp_path / "r.html")


def test_the_report_skips_an_unreadable_first_file(tmp_path):
    from orthobench.report import build_report

    store, (first, _) = _two_stored_cells(tmp_path)
    _truncate(store.cell_path(first))
    with pytest.warns(OrthobenchWarning):
        build_report([tmp_path], tmp_path / "r.html")


def test_a_parquet_file_orthobench_did_not_write_is_skipped_with_one_warning_naming_it(tmp_path):
    """The reported bug: a foreign Parquet file read as 'schema version (none)', an error that
    stopped the readers and advised rerunning a suite that never wrote it."""
    store, (good, _) = _two_stored_cells(tmp_path)
    store.write_probe_state("state", "hash", [probe_record()], {}, 0.1)
    foreign = [store.runs_dir / "notes.parquet", store.probe_dir / "export.parquet"]
    for path in foreign:
        pq.write_table(pa.table({"a": [1, 2]}), path)
    for load, path, rows in ((load_runs, foreign[0], 4), (load_probe, foreign[1], 1)):
        with pytest.warns(OrthobenchWarning) as caught:
            assert len(load([tmp_path])) == rows
        assert [str(w.message) for w in caught] == [
            f"{path}: not an orthobench results file (its Parquet metadata has no 'orthobench' "
            "entry); skipped"
        ]
    assert store.code_versions() == {code_version(): [c.id for c in _two_cells()]}


def test_read_metadata_of_an_unreadable_file_is_one_error_naming_it(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(ResultsError, match=rf"^{path}: not a readable results file \(Parquet"):
        read_metadata(path)


# ----------------------------------------------------------------------------------------------
# Resolved configurations and code versions


def test_the_stored_configuration_has_the_factory_defaults_and_a_changed_one_is_reported(
    tmp_path, plugin, monkeypatch
):
    """Only the suite's params were stored: a default changed in the code reused the cell."""
    store = ResultStore(tmp_path)
    spec = cell(task=f"{plugin}:make_sphere", task_params={"delay": 0.0}, n_init=1, budget=0)
    path = store.write_cell(spec, [run_record()], run_metadata("cpu"), 0.1)
    stored = read_metadata(path)["cell"]
    assert stored["task"]["params"] == {"dim": 2, "delay": 0.0, "fail_at": -1.0}
    assert store.runs_journal.entries()[-1]["config"] == stored
    assert store.is_stored(spec) and store.config_changes([spec]) == []

    factory = importlib.import_module(plugin).make_sphere
    monkeypatch.setattr(factory, "__defaults__", (3, 0.0, -1.0))
    changed = dataclasses.replace(spec, budget=2)
    assert not store.is_stored(spec) and not store.is_stored(changed)
    assert store.config_changes([spec, changed]) == [
        f"cell {spec.id}: stored with another configuration: task.params.dim 2 (stored) -> 3 (now)",
        f"cell {spec.id}: stored with another configuration: budget 0 (stored) -> 2 (now); "
        "task.params.dim 2 (stored) -> 3 (now)",
    ]


def test_cells_of_another_code_version_are_listed(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    a, b, old = (cell(seed=s, n_init=1, budget=0) for s in range(3))
    monkeypatch.setattr("orthobench.results._provenance._git_sha", lambda: "a" * 40)
    store.write_cell(a, [run_record()], {}, 0.1)
    at_a = code_version()
    monkeypatch.setattr("orthobench.results._provenance._git_sha", lambda: None)
    store.write_cell(b, [run_record()], {}, 0.1)
    released = code_version()
    # A file written before the code version was stored: read from its versions and git SHA.
    path = store.write_cell(old, [run_record()], {}, 0.1)
    _edit_metadata(path, code_version=None, versions={"orthobench": "0.0.1"}, git_sha="b" * 40)
    assert at_a.endswith(" (git aaaaaaaaaaaa)") and " (git " not in released
    assert store.code_versions() == {
        at_a: [a.id],
        released: [b.id],
        "0.0.1 (git bbbbbbbbbbbb)": [old.id],
    }
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert (
        f"orthobench: note: 1 cell(s) computed by orthobench 0.0.1 (git bbbbbbbbbbbb): {old.id}"
        in (result.stderr.splitlines())
    )


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.mark.skipif(not shutil.which("git"), reason="no git")
def test_the_git_sha_is_that_of_a_checkout_of_the_package_not_of_a_repository_around_it(
    tmp_path,
):
    """The reported bug: orthobench installed into a virtual environment inside a user's own
    repository recorded that repository's HEAD as its ``git_sha`` (and code version), because
    ``git rev-parse HEAD`` answers anywhere inside a work tree, ignored folders included."""
    from orthobench.results._provenance import _git_sha

    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text(".venv/\n")
    installed = tmp_path / ".venv" / "site-packages" / "orthobench"
    checkout = tmp_path / "src" / "orthobench"
    for package in (installed, checkout):
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
    _git(tmp_path, "add", ".gitignore")
    _git(tmp_path, "commit", "-q", "-m", "project")
    assert _git_sha(installed) is None  # ignored: not the project's code
    assert _git_sha(checkout) is None  # not committed
    _git(tmp_path, "add", "src")
    _git(tmp_path, "commit", "-q", "-m", "package")
    assert _git_sha(checkout) == _git(tmp_path, "rev-parse", "HEAD")
    assert _git_sha(installed) is None


@pytest.mark.skipif(not shutil.which("git"), reason="no git")
def test_the_git_sha_of_edited_code_is_marked_dirty(tmp_path):
    """Values from a checkout whose package files were edited, added or removed are not the
    commit's: the SHA says so (``-dirty``, as ``git describe --dirty``), and so does the code
    version every store and report prints; files outside the package do not count."""
    from orthobench.results._provenance import _git_sha

    package = tmp_path / "orthobench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "package")
    head = _git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "notes.txt").write_text("not the package")
    assert _git_sha(package) == head
    (package / "__init__.py").write_text("x = 1\n")
    assert _git_sha(package) == f"{head}-dirty"
    _git(tmp_path, "checkout", "-q", "--", ".")
    (package / "new_module.py").write_text("")
    assert _git_sha(package) == f"{head}-dirty"
    metadata = {"versions": {"orthobench": "0.1.0"}, "git_sha": _git_sha(package)}
    assert code_version(metadata) == f"0.1.0 (git {head[:12]}-dirty)"


# ----------------------------------------------------------------------------------------------
# One writer per directory, and only a writable one

_HOLDER = """
import sys, time
from orthobench.results import ResultStore
with ResultStore(sys.argv[1]).open_for_writing():
    print("locked", flush=True)
    time.sleep(120)
"""


@contextlib.contextmanager
def holding_the_lock(directory: Path) -> Iterator[subprocess.Popen]:
    """Another process that holds ``directory`` for writing until the block ends (or it is
    killed)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(directory)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def in_use_message(directory: Path, pid: int) -> str:
    return (
        f"the results directory {directory} is in use by another orthobench run (PID {pid}); "
        "wait for it to end or choose another output directory."
    )


def test_a_second_writer_fails_at_once_and_a_killed_holder_leaves_no_lock(tmp_path):
    store = ResultStore(tmp_path / "out")
    with holding_the_lock(store.root) as holder:
        start = time.perf_counter()
        with pytest.raises(OrthobenchError) as info, store.open_for_writing():
            pass
        assert time.perf_counter() - start < 1.0
        assert str(info.value) == in_use_message(store.root, holder.pid)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        with store.open_for_writing():
            assert store.lock_path.read_text() == f"{os.getpid()}\n"


def test_the_lock_is_released_when_the_block_ends_even_by_an_error(tmp_path):
    store = ResultStore(tmp_path)
    with pytest.raises(RuntimeError), store.open_for_writing():
        raise RuntimeError("cell crashed")
    with store.open_for_writing():
        pass


def test_a_file_system_without_locks_is_warned_about_and_written(tmp_path, monkeypatch):
    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    store = ResultStore(tmp_path)
    with pytest.warns(OrthobenchWarning) as caught, store.open_for_writing():
        store.write_cell(cell(n_init=1, budget=0), [run_record()], {}, 0.1)
    assert [str(w.message) for w in caught] == [
        f"cannot lock {store.lock_path} (No locks available); a second run on {tmp_path} would "
        "not be refused"
    ]
    assert len(load_runs([tmp_path])) == 1


def test_an_output_path_that_cannot_be_a_directory_is_one_error_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ResultStore(blocker / "out")
    with pytest.raises(OrthobenchError) as info, store.open_for_writing():
        pass
    assert str(info.value) == (
        f"the results directory {store.root} is not writable ({store.root}: Not a directory); "
        "choose another output directory."
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_runs_folder_is_one_error_naming_it(tmp_path):
    store, _ = _two_stored_cells(tmp_path)
    store.runs_dir.chmod(0o555)
    try:
        with pytest.raises(OrthobenchError) as info, store.open_for_writing():
            pass
    finally:
        store.runs_dir.chmod(0o755)
    assert str(info.value) == (
        f"the results directory {store.root} is not writable ({store.runs_dir}: Permission "
        "denied); choose another output directory."
    )


# ----------------------------------------------------------------------------------------------
# A task whose every evaluation failed


def test_the_report_of_a_task_whose_evaluations_all_failed_builds(tmp_path):
    from orthobench.report import build_report

    store = ResultStore(tmp_path)
    spec = cell(task="hartmann6", n_init=3, budget=0)
    nothing = dict(y=math.nan, best_y=None, status="invalid")  # no finite y, no best so far
    failed = [
        run_record(cell_id=spec.id, task="hartmann6", iteration=i, **nothing) for i in range(3)
    ]
    store.write_cell(spec, failed, {}, 0.1)
    ok = cell(task="ackley8", n_init=3, budget=0)
    store.write_cell(ok, records_for(ok), {}, 0.1)
    frame = load_runs([tmp_path])
    assert frame.groupby("task")["y"].count().to_dict() == {"ackley8": 3, "hartmann6": 0}
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    assert "hartmann6" in html and "ackley8" in html


def test_a_symbolic_link_is_written_through_and_a_special_file_is_refused(tmp_path):
    """``convert-wm811k --out LINK`` replaced the link with a regular file, leaving its target
    with the old conversion; a FIFO given as the path was replaced the same way."""
    target = tmp_path / "data" / "wm.npz"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.npz"
    link.symlink_to(target)
    results.write_atomic(link, lambda fh: fh.write(b"new"))
    assert link.is_symlink() and target.read_bytes() == b"new"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as info:
        results.write_atomic(fifo, lambda fh: fh.write(b"new"))
    assert results.os_error_text(info.value) == f"{fifo}: exists and is not a regular file"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_results_folder_named_with_bytes_that_are_not_utf8_reads_back(tmp_path):
    """pyarrow encodes a path it opens as UTF-8, which a name of other bytes (surrogate-escaped
    by Python) cannot be: the cells were stored, then every read (the report, a rerun's check of
    what is stored) failed with a UnicodeEncodeError traceback."""
    root = tmp_path / os.fsdecode(b"bad\xffname")
    spec = cell(n_init=1, budget=0)
    store = ResultStore(root)
    store.write_cell(spec, [run_record()], {}, 0.1)
    assert store.is_stored(spec)
    assert len(load_runs([root])) == 1


def test_results_files_are_read_in_the_calling_thread(tmp_path, monkeypatch):
    """pyarrow's I/O threads held the Python file's buffers and released them as the interpreter
    shut down: a command that read stored cells and exited 2 aborted (exit 134) 4 times in 25
    under load. The files are read without them."""
    import pyarrow.parquet as pq

    from orthobench.results._parquet import read_table

    spec = cell(n_init=1, budget=0)
    ResultStore(tmp_path).write_cell(spec, [run_record()], {}, 0.1)
    calls = []
    read = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: calls.append(k) or read(*a, **k))
    load_runs([tmp_path])
    read_table(next((tmp_path / "runs").glob("*.parquet")), use_threads=True)
    assert [(k["use_threads"], k["pre_buffer"]) for k in calls] == [(False, False), (True, False)]


@dataclasses.dataclass(frozen=True)
class _State:
    """A probe state as a unit of work, of a fixed configuration."""

    id: str
    kind: typing.ClassVar[str] = PROBE_STATE
    config_hash: str = "hash"

    def resolved_config(self) -> dict:
        return {"state": self.id}


def test_a_held_store_reads_the_probe_journal_once_not_once_per_stored_state(tmp_path, monkeypatch):
    """Storing each state parsed all of probe.jsonl (231 ms at 10,000 lines): quadratic in the
    states of a probe. The checks stay: a state's stored rows are kept where its file agrees
    with its entry, and a damaged file is recomputed, not kept."""
    reads: list[Path] = []
    read_lines = results._journal._read_lines
    monkeypatch.setattr(
        results._journal, "_read_lines", lambda path: reads.append(path) or read_lines(path)
    )
    store = ResultStore(tmp_path)
    with store.open_for_writing():
        for i in range(5):
            store.write(_State(f"s{i}"), [probe_record()], {}, 0.1)
        store.write(_State("s0"), [probe_record(estimator="b")], {}, 0.1)
        _truncate(store.probe_path("s1"))
        with pytest.warns(OrthobenchWarning, match="probe state s1: stored file is corrupt"):
            store.write(_State("s1"), [probe_record(estimator="b")], {}, 0.1)
    assert reads.count(store.probe_journal.path) == 1
    assert store.read_probe_state("s0")["estimator"].tolist() == ["a", "b"]
    assert store.read_probe_state("s1")["estimator"].tolist() == ["b"]
    assert set(store.stored(PROBE_STATE)) == {f"s{i}" for i in range(5)}
