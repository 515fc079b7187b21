"""Evaluation-level resume end to end: a run (or a pool worker) killed with SIGKILL mid-cell
resumes from the cell's evaluation journal, re-runs none of the stored evaluations and finishes
equal to a clean run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

KILLER_SOURCE = '''
"""A task that wraps a registered one and SIGKILLs its own process at the k-th evaluation while a
marker file exists (removing the marker first, so the rerun goes through)."""
import os
import signal

from orthobench import Task
from orthobench.registry import TASKS


class KillAt(Task):
    def __init__(self, inner: str = "hartmann6", inner_params: dict | None = None,
                 kill_at: int = 1, marker: str = "", log: str = ""):
        self.inner = TASKS.create(inner, **(inner_params or {}))
        super().__init__(self.inner.space)
        self.optimal_value = self.inner.optimal_value
        self.kill_at, self.marker, self.log = kill_at, marker, log
        self.count = 0

    def evaluate(self, x, *, seed, device):
        self.count += 1
        with open(self.log, "a") as fh:
            fh.write(f"{seed}\\n")
        if self.count == self.kill_at and os.path.exists(self.marker):
            os.remove(self.marker)
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.evaluate(x, seed=seed, device=device)
'''

SUITE = """
name: killed
seeds: [0]
n_init: {n_init}
budget: {budget}
tasks:
  - name: "killer:KillAt"
    label: {label}
    params: {{inner: {inner}, inner_params: {inner_params}, kill_at: {kill_at}, marker: "{marker}", log: "{log}"}}
optimizers:
  - {optimizer}
"""


def run(suite: Path, out: Path, root: Path, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "orthobench", "run", str(suite), "-o", str(out), "-q", *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def killed_then_resumed(
    tmp_path: Path, *options: str, **fields
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Run the suite with ``options`` until the kill, rerun it, and run it clean elsewhere:
    ``(resumed runs, clean runs, evaluation seeds of the first two runs)``."""
    root = tmp_path / "plugins"
    root.mkdir()
    (root / "killer.py").write_text(KILLER_SOURCE)
    marker, log = tmp_path / "kill-now", tmp_path / "evaluations.log"
    marker.touch()
    suite = tmp_path / "suite.yaml"
    suite.write_text(textwrap.dedent(SUITE.format(marker=marker, log=log, **fields)))
    first = run(suite, tmp_path / "out", root, *options)
    if "--workers" in options:  # a pool worker was killed: its cell failed, the run went on
        assert first.returncode == 1, first.stderr
        assert "worker process died (exit code -9: SIGKILL)" in first.stderr
    else:
        assert first.returncode < 0 or first.returncode == 137, first.stderr  # killed
    second = run(suite, tmp_path / "out", root, *options)
    assert second.returncode == 0, second.stderr
    assert not (tmp_path / "out" / "partial").exists() or not any(
        (tmp_path / "out" / "partial").iterdir()
    )
    seeds = log.read_text().split()
    log.unlink()
    clean = run(suite, tmp_path / "clean", root)
    assert clean.returncode == 0, clean.stderr
    cols = ["iteration", "x", "y"]
    return (
        pd.read_parquet(tmp_path / "out" / "runs")[cols],
        pd.read_parquet(tmp_path / "clean" / "runs")[cols],
        seeds,
    )


@pytest.mark.slow
def test_sigkill_mid_cell_resumes_from_the_evaluation_journal(tmp_path):
    resumed, clean, seeds = killed_then_resumed(
        tmp_path,
        n_init=4,
        budget=5,
        label="hartmann",
        inner="hartmann6",
        inner_params="{}",
        kill_at=7,
        optimizer="{name: orthobo, params: {kernel: [linear, matern52-iso], theta_samples: 8, "
        "raw_samples: 16, num_restarts: 2}}",
    )
    pd.testing.assert_frame_equal(resumed, clean)
    # 7 evaluations started before the kill (the 7th died with its process), then 3 more: the 6
    # journaled ones were not run again, and every evaluation seed appears once but the killed one.
    assert len(seeds) == 7 + 3 and len(set(seeds)) == 9


@pytest.mark.slow
def test_sigkill_mid_cnn_digits_cell_resumes_from_the_evaluation_journal(tmp_path):
    """The issue's case: a CNN-digits training cell (outliers on) killed after 4 evaluations."""
    resumed, clean, seeds = killed_then_resumed(
        tmp_path,
        n_init=2,
        budget=4,
        label="cnn-digits",
        inner="cnn",
        inner_params="{dataset: digits, batch_size: 16, outlier_prob: 0.5}",
        kill_at=5,
        optimizer="{name: qlogei, params: {function_samples: 16, raw_samples: 16, "
        "num_restarts: 2}}",
    )
    pd.testing.assert_frame_equal(resumed, clean)
    assert len(seeds) == 5 + 2 and len(set(seeds)) == 6


@pytest.mark.slow
def test_a_pool_worker_killed_mid_cell_fails_the_cell_and_the_rerun_resumes(tmp_path):
    """As an out-of-memory kill does: the worker's cell is stored as failed with the reason, and
    the rerun continues it from its evaluation journal."""
    resumed, clean, seeds = killed_then_resumed(
        tmp_path,
        "--workers",
        "2",
        n_init=3,
        budget=3,
        label="hartmann",
        inner="hartmann6",
        inner_params="{}",
        kill_at=5,
        optimizer="{name: qlogei, params: {function_samples: 16, raw_samples: 16, "
        "num_restarts: 2}}",
    )
    pd.testing.assert_frame_equal(resumed, clean)
    assert len(seeds) == 5 + 2 and len(set(seeds)) == 6
