"""SIGTERM stops ``run`` as Ctrl-C does: one line says what is stored, no cell is left marked as
running, the workers stop, and the exit code is 143; where the runner ignores SIGINT, SIGTERM
ends it as before."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import process_running
from tests.test_pool_warnings_and_ctrl_c import _start_cli, plugin  # noqa: F401 -- the fixture

STOPPED = (
    "orthobench: terminated (SIGTERM): 0 of {n} cells stored (0 by this run); rerun the same "
    "command to resume."
)


def _run_until_evaluating(
    suite: Path, out: Path, log: Path, evaluations: int, *options: str, sigint=signal.SIG_DFL
) -> subprocess.Popen:
    """:func:`_start_cli`, returned once ``evaluations`` evaluations have started (the task logs
    each)."""
    runner = _start_cli(suite, out, *options, sigint=sigint)
    deadline = time.monotonic() + 300
    while runner.poll() is None and time.monotonic() < deadline:
        if log.exists() and len(log.read_text().split()) == evaluations:
            return runner
        time.sleep(0.1)
    runner.kill()
    pytest.fail(f"no {evaluations} evaluations started: {runner.communicate()[1]}")


def test_a_sigterm_stops_an_inline_run_as_ctrl_c_does(plugin, tmp_path) -> None:  # noqa: F811
    """Before, Python's default ended the runner: no line, the status of the signal, and the
    cell left marked as running, which the next run reported as "never finished"."""
    log, out = tmp_path / "evaluations.log", tmp_path / "out"
    runner = _run_until_evaluating(plugin(log=str(log), hang=3600.0), out, log, 1)
    os.kill(runner.pid, signal.SIGTERM)
    _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 143, stderr
    assert stderr.splitlines()[-1] == STOPPED.format(n=1), stderr
    assert not (out / ".running").exists()


@pytest.mark.slow
def test_a_sigterm_stops_the_pool_and_its_workers(plugin, tmp_path) -> None:  # noqa: F811
    log, out = tmp_path / "evaluations.log", tmp_path / "out"
    suite = plugin(seeds=2, log=str(log), hang=3600.0)
    runner = _run_until_evaluating(suite, out, log, 2, "--workers", "2")
    workers = {int(pid) for pid in log.read_text().split()}
    os.kill(runner.pid, signal.SIGTERM)
    _, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 143, stderr
    assert stderr.splitlines()[-1] == STOPPED.format(n=2), stderr
    deadline = time.monotonic() + 10
    while any(map(process_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(process_running, workers))


def test_a_sigterm_ends_a_runner_that_ignores_sigint(plugin, tmp_path) -> None:  # noqa: F811
    """A background job of a non-interactive shell starts with SIGINT ignored: SIGTERM cannot
    take the Ctrl-C path there, and keeps its default rather than being lost."""
    log = tmp_path / "evaluations.log"
    suite = plugin(log=str(log), hang=3600.0)
    runner = _run_until_evaluating(suite, tmp_path / "out", log, 1, sigint=signal.SIG_IGN)
    os.kill(runner.pid, signal.SIGTERM)
    runner.communicate(timeout=60)
    assert runner.returncode == -signal.SIGTERM
