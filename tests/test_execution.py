"""Executors (inline, local process pool, Dask LocalCluster) on a tiny suite of the plugin task:
the same stored values, failures recorded and the rest stored, progress counted per evaluation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from orthobench import execution
from orthobench.progress import Progress
from orthobench.results import ResultStore, load_runs
from orthobench.suite import load_suite

# `crashy` raises at its first point with x_0 > 0, which a 3-point scrambled Sobol' design has.
SUITE = """
name: tiny
seeds: 1
n_init: 3
budget: 2
tasks:
  - {{name: "{plugin}:make_sphere", label: sphere}}
  - {{name: "{plugin}:make_sphere", params: {{fail_at: 0.0}}, label: crashy}}
optimizers:
  - sobol
  - {{name: "{plugin}:CenterOptimizer", label: center}}
"""
EVALUATIONS = 3 + 2  # per cell


def _run(suite, root, executor: str, monkeypatch: pytest.MonkeyPatch):
    """Run ``suite`` into ``root``; returns the summary and the run's :class:`Progress`."""
    made: list[Progress] = []

    class RecordingProgress(Progress):
        def __init__(self, total: int, **kwargs) -> None:
            super().__init__(total, **kwargs)
            self.steps: list[int] = []
            made.append(self)

        def advance(self, n: int = 1) -> None:
            self.steps.append(n)
            super().advance(n)

    monkeypatch.setattr(execution, "Progress", RecordingProgress)
    summary = execution.run_suite(
        suite,
        ResultStore(root),
        device=torch.device("cpu"),
        executor=executor,
        workers=2,
        show_progress=False,
    )
    (progress,) = made
    return summary, progress


def _stored(root) -> pd.DataFrame:
    cols = ["cell_id", "iteration", "phase", "x", "y"]
    return load_runs([root])[cols].sort_values(cols[:2]).reset_index(drop=True)


@pytest.mark.parametrize(
    "executor",
    [
        "inline",
        "process",
        pytest.param("dask", marks=pytest.mark.slow),
    ],
)
def test_executor_stores_the_inline_values_records_failures_and_counts_progress(
    executor: str, plugin, write_suite, tmp_path, monkeypatch
) -> None:
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    suite = load_suite(write_suite(SUITE.format(plugin=plugin)))
    summary, progress = _run(suite, tmp_path / executor, executor, monkeypatch)

    ok = {o.cell.id for o in summary.outcomes if o.status == "ok"}
    failed = {o.cell.id for o in summary.failed}
    errors = {o.cell.id: o.error for o in summary.failed}
    assert ok == {c.id for c in suite.cells() if c.task.label == "sphere"} and len(ok) == 2, errors
    assert failed == {c.id for c in suite.cells() if c.task.label == "crashy"} and len(failed) == 2
    assert {o.error for o in summary.failed} == {"RuntimeError: simulated training crash"}
    # Failures are journalled with their traceback; only finished cells have a results file.
    entries = ResultStore(tmp_path / executor).runs_journal.entries()
    assert {e["cell_id"] for e in entries if e["status"] == "failed"} == failed
    assert all(
        "simulated training crash" in e["traceback"] for e in entries if e["cell_id"] in failed
    )
    assert {p.stem for p in (tmp_path / executor / "runs").glob("*.parquet")} == ok

    frame = _stored(tmp_path / executor)
    assert len(frame) == 2 * EVALUATIONS
    np.testing.assert_array_equal(frame["y"], [float(np.sum(np.square(x))) for x in frame["x"]])
    if executor != "inline":
        reference, _ = _run(suite, tmp_path / "inline", "inline", monkeypatch)
        assert reference.count("ok") == 2
        pd.testing.assert_frame_equal(frame, _stored(tmp_path / "inline"))

    # Progress counts evaluations: inline one by one as they finish (a crashed cell stops short),
    # the parallel executors a whole cell at a time as each finishes, failed or not.
    assert progress.total == 4 * EVALUATIONS
    if executor == "inline":
        assert set(progress.steps) == {1}
        assert 2 * EVALUATIONS <= progress.done < progress.total
    else:
        assert progress.steps == [EVALUATIONS] * 4 and progress.done == progress.total


def test_a_rerun_skips_stored_cells_and_retries_failed_ones(
    plugin, write_suite, tmp_path, monkeypatch
) -> None:
    suite = load_suite(write_suite(SUITE.format(plugin=plugin)))
    _run(suite, tmp_path, "inline", monkeypatch)
    before = _stored(tmp_path)
    summary, progress = _run(suite, tmp_path, "inline", monkeypatch)
    assert (summary.count("skipped"), summary.count("failed"), summary.count("ok")) == (2, 2, 0)
    assert progress.total == 2 * EVALUATIONS  # only the retried cells
    pd.testing.assert_frame_equal(_stored(tmp_path), before)
