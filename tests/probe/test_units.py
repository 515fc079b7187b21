"""Probe states as units of work: executors, resume, staleness and rows reused one by one.

The states are small: the plugin's 2-d sphere (``tests/conftest.py``), 6 initial points, S = 8,
3 rebuilds at 4 probe points against a 64-draw reference.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import OrthobenchWarning
from orthobench.executors import make_executor
from orthobench.executors._base import thread_limits
from orthobench.probe import runner
from orthobench.probe.runner import probe_units, run_probe
from orthobench.probe.states import ProbeUnit
from orthobench.results import ResultStore, load_probe, read_metadata, run_metadata
from orthobench.suite import load_suite

PROBE = """
name: p
budget: 0
tasks: [{{name: "{plugin}:make_sphere", label: sphere}}]
optimizers: [sobol]
probe:
  tasks: [{tasks}]
  n_init: 6
  mc_samples: [8]
  rebuilds: 3
  n_probes: 4
  reference_samples: 64
  estimators: [{estimators}]
  seeds: {seeds}
"""
SPHERE = '{{name: "{plugin}:make_sphere", label: sphere}}'
#: Columns that differ between two runs of the same rows: the timed cost.
TIMED = ["seconds_per_call"]


def suite_file(write_suite, plugin, *, estimators="orth", seeds=1, tasks=None, name="p.yaml"):
    tasks = tasks or SPHERE.format(plugin=plugin)
    text = PROBE.format(plugin=plugin, tasks=tasks, estimators=estimators, seeds=seeds)
    return write_suite(text, name)


def probe(path, out, **kwargs):
    suite = load_suite(path)
    return run_probe(suite.name, suite.probe, out, device=torch.device("cpu"), **kwargs)


def invoke(*args: str):
    return CliRunner().invoke(cli, ["probe", *args])


def computed(monkeypatch) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    """Record ``(estimators, mc_samples)`` of each :func:`runner.probe_state` call."""
    calls = []
    probe_state = runner.probe_state

    def recording(state, spec, device, dtype=torch.float64):
        calls.append((spec.estimators, spec.mc_samples))
        return probe_state(state, spec, device, dtype)

    monkeypatch.setattr(runner, "probe_state", recording)
    return calls


def rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=TIMED).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# Rows reused one by one


def test_an_added_estimator_computes_only_its_rows_and_a_removed_one_leaves_its_rows(
    plugin, write_suite, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    first = probe(suite_file(write_suite, plugin), out).rows
    calls = computed(monkeypatch)
    both = suite_file(write_suite, plugin, estimators="orth, orth-shrink", name="both.yaml")
    added = probe(both, out)
    assert calls == [(("orth-shrink",), (8,))]  # and mc, the baseline of its ratios, not stored
    assert [o.status for o in added.summary.outcomes] == ["ok"]
    # The stored rows are the first run's, untouched; the new one is that of a run of both.
    pd.testing.assert_frame_equal(added.rows.iloc[:2].reset_index(drop=True), first)
    fresh = probe(both, tmp_path / "fresh").rows
    assert list(fresh["estimator"]) == ["mc", "orth", "orth-shrink"]
    # A row's fit diagnostics count the draws of its own computation (here of mc's group only).
    pd.testing.assert_frame_equal(
        rows(added.rows).drop(columns=["cholesky_jitter", "info"]),
        rows(fresh).drop(columns=["cholesky_jitter", "info"]),
        check_exact=True,
    )

    calls.clear()
    removed = probe(suite_file(write_suite, plugin, estimators="orth-shrink", name="one.yaml"), out)
    assert calls == [] and [o.status for o in removed.summary.outcomes] == ["skipped"]
    assert list(removed.rows["estimator"]) == ["mc", "orth-shrink"]
    assert sorted(load_probe([out])["estimator"]) == ["mc", "orth", "orth-shrink"]


def test_a_state_stored_before_reference_errors_takes_an_added_estimator(
    plugin, write_suite, tmp_path
):
    """Files stored before ``reference_rse`` was recorded lack its column: kept beside the rows an
    added estimator computes, their null failed the store's check after the state was
    computed, with a traceback, at every rerun."""
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    probe(suite_file(write_suite, plugin), out)
    (file,) = (out / "probe").glob("*.parquet")
    table = pq.read_table(file)
    pq.write_table(table.drop_columns(["reference_rse"]), file)  # as stored before
    both = suite_file(write_suite, plugin, estimators="orth, orth-shrink", name="both.yaml")
    added = probe(both, out)
    assert [o.status for o in added.summary.outcomes] == ["ok"]
    stored = load_probe([out]).set_index("estimator")["reference_rse"]
    assert stored["mc"] is None and stored["orth"] is None  # kept: unknown
    assert len(stored["orth-shrink"]) > 0


def test_rows_added_at_another_thread_count_recompute_the_state_at_it_with_a_warning(
    plugin, write_suite, tmp_path, monkeypatch
):
    """A state's values depend on the thread count (BLAS reductions) and so do its costs per
    call: rows added to a state stored at 1 thread by a run at 2 would sit beside rows of
    another count, and be compared with them (ratios against ``mc``, costs against ``mc``'s),
    so the state's rows are all recomputed at 2, with a warning. A state with nothing to add
    is reused at any count, as a stored cell is (each row records its own)."""
    out = tmp_path / "out"
    first = probe(suite_file(write_suite, plugin), out, threads=1).rows
    assert (first["threads"] == 1).all()
    calls = computed(monkeypatch)
    both = suite_file(write_suite, plugin, estimators="orth, orth-shrink", name="both.yaml")
    (unit,) = probe_units("p", load_suite(both).probe)
    with pytest.warns(OrthobenchWarning) as caught:
        added = probe(both, out, threads=2)
    messages = [str(w.message) for w in caught if "thread" in str(w.message)]
    assert messages == [
        f"probe state {unit.id}: its stored rows were computed with 1 thread(s), this run uses "
        "2: all 3 of its rows are recomputed with 2 (values depend on the count); run with "
        "--threads 1 to add only the missing rows."
    ]
    assert calls == [(("mc", "orth", "orth-shrink"), (8,))]
    assert list(added.rows["estimator"]) == ["mc", "orth", "orth-shrink"]
    assert (added.rows["threads"] == 2).all() and (load_probe([out])["threads"] == 2).all()
    meta = read_metadata(ResultStore(out).probe_path(unit.id))
    assert meta["threads"] == 2

    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        again = probe(both, out, threads=1)
    assert calls == [] and [o.status for o in again.summary.outcomes] == ["skipped"]
    pd.testing.assert_frame_equal(again.rows, added.rows)


def test_the_report_of_probe_shows_the_rows_the_suite_names(plugin, write_suite, tmp_path):
    """A stored state keeps a dropped estimator's rows; ``probe``'s report leaves them out."""
    out = tmp_path / "out"
    both = suite_file(write_suite, plugin, estimators="orth, orth-shrink", name="both.yaml")
    one = suite_file(write_suite, plugin, estimators="orth-shrink", name="one.yaml")
    for path in (both, one):
        result = invoke(str(path), "-o", str(out), "-q")
        assert result.exit_code == 0, result.output
    summary = pd.read_csv(out / "report.probe-summary.csv")
    assert set(summary["estimator"]) == {"mc", "orth-shrink"}
    assert "orth" in set(load_probe([out])["estimator"])


@pytest.mark.slow  # two probes of q = 2 states; the key itself: tests/report/test_data.py
def test_the_report_of_probe_leaves_out_a_batch_size_the_suite_dropped(
    plugin, write_suite, tmp_path
):
    """The reported bug: after ``q: [1, 2]`` then ``q: [1]``, the terminal table had q = 1 only
    but report.html and its CSV still listed the q = 2 rows (the row key had no ``q``)."""
    out = tmp_path / "out"
    for name, q in (("both.yaml", "[1, 2]"), ("one.yaml", "[1]")):
        path = suite_file(write_suite, plugin, name=name)
        path.write_text(path.read_text() + f"  q: {q}\n")
        result = invoke(str(path), "-o", str(out), "-q")
        assert result.exit_code == 0, result.output
    summary = pd.read_csv(out / "report.probe-summary.csv")
    assert set(summary["task"]) == {"sphere"}
    assert set(load_probe([out])["q"]) == {1, 2}


def _store_in_the_earlier_format(path: Path, out: Path) -> tuple[ProbeUnit, Path]:
    """The one state of the suite at ``path``, stored in ``out`` as orthobench stored states
    before they were units: a hash of the whole probe section, no configuration; and its file."""
    suite = load_suite(path)
    (unit,) = probe_units(suite.name, suite.probe)
    with thread_limits(1):  # the probe's count, recorded below: else the state is recomputed
        records = runner.probe_state(unit.state, unit.spec, torch.device("cpu"))
    metadata = {**run_metadata("cpu"), "threads": 1, "state": asdict(unit.state)}
    metadata["probe"] = asdict(unit.spec)
    file = ResultStore(out).write_probe_state(unit.id, "0123456789abcdef", records, metadata, 1.0)
    return unit, file


def test_a_state_stored_by_the_earlier_format_is_reused_without_recomputing(
    plugin, write_suite, tmp_path, monkeypatch
):
    """orthobench before probe states were units journaled a hash of the whole probe section
    and no configuration: such a state, of the same state and settings, is adopted."""
    path = suite_file(write_suite, plugin)
    unit, _ = _store_in_the_earlier_format(path, tmp_path)
    before = load_probe([tmp_path])

    calls = computed(monkeypatch)
    again = probe(path, tmp_path)
    assert calls == [] and [o.status for o in again.summary.outcomes] == ["skipped"]
    pd.testing.assert_frame_equal(again.rows, before)
    entry = ResultStore(tmp_path).probe_journal.entries()[-1]
    assert entry["config_hash"] == unit.config_hash and "config" in entry

    wider = suite_file(write_suite, plugin, estimators="orth, qlogei", name="wider.yaml")
    assert probe(wider, tmp_path).summary.count("ok") == 1
    assert calls == [(("qlogei",), (8,))]


def test_a_state_stored_before_the_q_column_is_adopted_as_q_1(
    plugin, write_suite, tmp_path, monkeypatch
):
    """Its rows read q null, which storing under the configuration now refused: a traceback."""
    import pyarrow.parquet as pq

    path = suite_file(write_suite, plugin)
    _, file = _store_in_the_earlier_format(path, tmp_path)
    table = pq.read_table(file)
    pq.write_table(table.drop(["q"]).replace_schema_metadata(table.schema.metadata), file)
    calls = computed(monkeypatch)
    again = probe(path, tmp_path)
    assert calls == [] and [o.status for o in again.summary.outcomes] == ["skipped"]
    assert set(again.rows["q"]) == {1}


# ----------------------------------------------------------------------------------------------
# Identity and staleness


def test_a_changed_default_makes_stored_states_stale_and_a_spelled_out_one_does_not(
    plugin, write_suite, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    path = suite_file(write_suite, plugin)
    assert invoke(str(path), "-o", str(out), "-q").exit_code == 0

    # mc-ei's default `tau`, spelled out in the state optimizer: the same state.
    text = (
        path.read_text()
        + "  state_optimizer: {name: mc-ei, params: {theta_samples: 32, tau: 1.0}}\n"
    )
    spelled = write_suite(text, "spelled.yaml")
    calls = computed(monkeypatch)
    result = invoke(str(spelled), "-o", str(out), "-q")
    assert result.exit_code == 0, result.output
    assert calls == [] and "0 probed, 1 already stored" in result.stderr

    module = importlib.import_module(plugin)
    monkeypatch.setattr(module.make_sphere, "__defaults__", (2, 0.001, -1.0))  # delay 0 -> 0.001
    result = invoke(str(path), "-o", str(out), "-q")
    assert result.exit_code == 2 and calls == []
    (unit,) = probe_units("p", load_suite(path).probe)
    assert result.stderr.splitlines()[0] == (
        f"probe state {unit.id}: stored with another configuration: "
        "state.task.params.delay 0.0 (stored) -> 0.001 (now)"
    )
    assert "rerun with --force" in result.stderr
    forced = invoke(str(path), "-o", str(out), "-q", "--force")
    assert forced.exit_code == 0 and "1 probed, 0 already stored" in forced.stderr
    assert calls == [(("mc", "orth"), (8,))]


# ----------------------------------------------------------------------------------------------
# Failures and executors


def test_a_state_that_raises_fails_alone_and_probe_exits_1(plugin, write_suite, tmp_path):
    crashy = f'{{name: "{plugin}:make_sphere", params: {{fail_at: 0.0}}, label: crashy}}'
    path = suite_file(write_suite, plugin, tasks=f"{SPHERE.format(plugin=plugin)}, {crashy}")
    out = tmp_path / "out"
    result = invoke(str(path), "-o", str(out), "-q")
    assert result.exit_code == 1, result.output
    ids = [unit.id for unit in probe_units("p", load_suite(path).probe)]
    assert f"failed: {ids[1]}: RuntimeError: simulated training crash" in result.stderr
    assert "1 probed, 0 already stored, 1 failed" in result.stderr
    assert {p.stem for p in (out / "probe").glob("*.parquet")} == {ids[0]}
    (entry,) = [e for e in ResultStore(out).probe_journal.entries() if e["status"] == "failed"]
    assert entry["state_id"] == ids[1] and "simulated training crash" in entry["traceback"]


@pytest.mark.slow
def test_probe_workers_are_capped_at_the_states_and_it_says_so(plugin, write_suite, tmp_path):
    path = suite_file(write_suite, plugin, seeds=2)
    result = invoke(str(path), "-o", str(tmp_path / "out"), "-q", "--workers", "100000")
    assert result.exit_code == 0, result.output
    assert "(process, 2 worker(s): --workers 100000 capped at the states, 1 thread(s))" in (
        result.stderr
    )


def test_a_task_that_cannot_be_built_stops_the_probe_before_any_state(
    plugin, write_suite, tmp_path, monkeypatch
):
    """As for cells: one line at ``tasks.<label>`` (exit 2), no state computed or journaled."""
    broken = '{name: "tests.test_faults:RaisesInInit", label: broken}'
    path = suite_file(write_suite, plugin, tasks=f"{SPHERE.format(plugin=plugin)}, {broken}")
    calls = computed(monkeypatch)
    out = tmp_path / "out"
    result = invoke(str(path), "-o", str(out), "-q")
    assert result.exit_code == 2, result.output
    assert "tasks.broken: cannot be built" in result.stderr and "no GPU here" in result.stderr
    assert calls == [] and not list(ResultStore(out).probe_journal.entries())


@pytest.mark.slow
@pytest.mark.parametrize("options", [("--workers", "2"), ("--executor", "dask", "--workers", "2")])
def test_parallel_executors_store_the_inline_rows(options, plugin, write_suite, tmp_path):
    if "dask" in options:
        pytest.importorskip("dask.distributed")
    path = suite_file(write_suite, plugin, seeds=2)
    inline = probe(path, tmp_path / "inline").rows
    result = invoke(str(path), "-o", str(tmp_path / "parallel"), "-q", *options)
    assert result.exit_code == 0, result.output
    assert "2 probed, 0 already stored, 0 failed" in result.stderr
    parallel = probe(path, tmp_path / "parallel").rows  # read back: both states stored
    pd.testing.assert_frame_equal(rows(parallel), rows(inline), check_exact=True)


@pytest.mark.slow
def test_the_probe_timeout_stops_a_state_and_fails_it(plugin, write_suite, tmp_path):
    """With a timeout, inline states run in a worker process that can be stopped."""
    slow = f'{{name: "{plugin}:make_sphere", params: {{delay: 3600}}, label: slow}}'
    path = suite_file(write_suite, plugin, tasks=slow)
    summary = probe(path, tmp_path, executor=make_executor("inline", timeout=1.0)).summary
    (outcome,) = summary.outcomes
    assert outcome.status == "failed"
    assert outcome.error == (
        "timed out: still running after the probe state timeout of 1 s; its process was stopped"
    )


STUCK_SOURCE = """
import os
import time

import numpy as np

from orthobench import Evaluation, SearchSpace, Task


class Stuck(Task):
    '''Hangs at its first evaluation while `flag` exists, after writing `flag`.started.'''

    optimal_value = 0.0

    def __init__(self, flag: str = ""):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.flag = flag

    def evaluate(self, x, *, seed, device):
        while os.path.exists(self.flag):
            open(self.flag + ".started", "w").close()
            time.sleep(0.1)
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))
"""


@pytest.mark.slow
def test_a_probe_killed_with_sigkill_resumes_without_recomputing_a_stored_state(
    plugin, write_suite, tmp_path
):
    (tmp_path / "plugins" / "stuck.py").write_text(STUCK_SOURCE)
    flag = tmp_path / "hang"
    flag.touch()
    stuck = f'{{name: "stuck:Stuck", params: {{flag: "{flag}"}}, label: stuck}}'
    path = suite_file(write_suite, plugin, tasks=f"{SPHERE.format(plugin=plugin)}, {stuck}")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "orthobench", "probe", str(path), "-o", str(out), "-q"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not Path(f"{flag}.started").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, "the probe ended before its second state hung"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ids = [unit.id for unit in probe_units("p", load_suite(path).probe)]
    (stored,) = (out / "probe").glob("*.parquet")
    assert stored.stem == ids[0]
    before = stored.read_bytes()

    flag.unlink()
    result = invoke(str(path), "-o", str(out), "-q")
    assert result.exit_code == 0, result.output
    assert f"orthobench: warning: probe state {ids[1]} never finished" in result.stderr
    assert "1 probed, 1 already stored, 0 failed" in result.stderr
    assert stored.read_bytes() == before
    statuses = [(e["state_id"], e["status"]) for e in ResultStore(out).probe_journal.entries()]
    assert statuses == [(ids[0], "ok"), (ids[1], "failed"), (ids[1], "ok")]
    assert not (out / ".running").exists()
