"""Results store: record schemas, atomic writes, journals, schema versions, metadata."""

from __future__ import annotations

import dataclasses
import json
import math
import typing

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from orthobench.exceptions import ResultsError
from orthobench.results import (
    METADATA_KEY,
    SCHEMA_VERSION,
    ProbeRecord,
    ResultStore,
    RunRecord,
    arrow_schema,
    load_probe,
    load_runs,
    read_metadata,
    run_metadata,
)
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
        x=[0.25, -1.5],
        y=1.5,
        y_true=None,
        best_y=1.5,
        regret=None,
        is_outlier=False,
        fit_seconds=0.0,
        acq_seconds=0.0,
        eval_seconds=0.01,
        status="ok",
        fallback=None,
        info="{}",
    )
    return RunRecord(**{**values, **changes})


def probe_record(**changes) -> ProbeRecord:
    sample = {int: 4, float: 0.5, str: "a", float | None: None, list[float]: [1.0, 2.5]}
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
    assert meta["device"] == "cpu" and meta["versions"]["torch"]
    assert store.is_stored(spec)


def _set_schema_version(path, version):
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    if version is None:
        del meta["schema_version"]
    else:
        meta["schema_version"] = version
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta)}), path)


@pytest.mark.parametrize("version", [None, SCHEMA_VERSION + 1])
def test_a_file_of_another_schema_version_raises_one_clear_error(tmp_path, version):
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
    from click.testing import CliRunner

    from orthobench.cli import cli

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


def test_torn_journal_line_is_skipped_and_failures_are_not_stored(tmp_path):
    store = ResultStore(tmp_path)
    ok, bad = cell(seed=0, n_init=2, budget=0), cell(seed=1, n_init=2, budget=0)
    store.write_cell(ok, records_for(ok), {}, 0.1)
    store.record_failure(bad, "RuntimeError: boom", "Traceback ...", 0.2)
    with open(store.runs_journal.path, "a") as fh:
        fh.write('{"cell_id": "half-writ')
    assert store.stored() == {ok.id: ok.config_hash}
    assert store.runs_journal.entries()[-1]["error"] == "RuntimeError: boom"


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
    store.probe_path("a").unlink()
    assert store.probe_journal.stored() == {"b": "hash-b"}


def test_changed_config_is_not_reused(tmp_path):
    store = ResultStore(tmp_path)
    spec = cell(n_init=2, budget=0)
    store.write_cell(spec, records_for(spec), {}, 0.1)
    changed = cell(n_init=2, budget=1)
    assert changed.id == spec.id and not store.is_stored(changed)
