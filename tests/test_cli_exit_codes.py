"""Exit codes the command line keeps whatever surrounds a command: a probe whose every state
failed, a reader that closes the pipe early (``| head``), ``--debug``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orthobench.cli import cli

# One probe state on the plugin's sphere: ``fail_at: 0.0`` fails it in its initial design (a
# point with x[0] > 0 raises), ``-1.0`` never fails.
PROBE_SUITE = """
name: p
budget: 0
tasks: [hartmann6]
optimizers: [sobol]
probe:
  tasks: [{{name: "{plugin}:make_sphere", params: {{fail_at: {fail_at}}}, label: sphere}}]
  kernels: [matern52-ard]
  n_init: 8
  mc_samples: [8]
  rebuilds: 2
  n_probes: 4
  reference_samples: 64
  estimators: [orth]
"""

# A rule every probe row meets (a variance ratio is never negative).
THRESHOLDS = """
version: 1
thresholds:
  - {estimator: orth, metric: var_ratio, min: 0.0, description: always holds}
"""

FAILED_STATE = re.compile(r"^failed: \S+: RuntimeError: simulated training crash$", re.M)


def _probe_suite(write_suite, plugin: str, fail_at: float) -> Path:
    suite = write_suite(PROBE_SUITE.format(plugin=plugin, fail_at=fail_at))
    suite.with_name(suite.stem + ".thresholds.yaml").write_text(THRESHOLDS)
    return suite


def test_a_probe_whose_every_state_failed_lists_them_and_exits_1(plugin, write_suite, tmp_path):
    """The reported bug: with no state stored, the report it built after the probe raised 'no
    stored results ...', exit 2, and the failed states were never listed."""
    suite = _probe_suite(write_suite, plugin, fail_at=0.0)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["probe", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 1, result.output
    assert "orthobench: error" not in result.output
    assert len(FAILED_STATE.findall(result.stderr)) == 1
    assert f"tracebacks are stored in {out / 'probe.jsonl'}" in result.stderr
    assert "report: not written (no state of the suite is stored)" in result.stdout
    assert not (out / "report.html").exists()


def _with_stdout_closed(*args: str) -> subprocess.CompletedProcess:
    """``orthobench ARGS`` with a stdout pipe whose reader has gone before the first write, as
    ``orthobench ARGS | head -0`` (deterministic: no race with the reader)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "orthobench", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            timeout=300,
        )
    finally:
        os.close(write)


@pytest.mark.slow  # a subprocess importing the CLI (2.6 s); the tolerance is unit-tested below
def test_a_closed_stdout_is_not_an_error_of_list():
    """The reported bug: `orthobench list | head -1` printed 'orthobench: error: Broken pipe' and
    exited 2, the code of bad input."""
    proc = _with_stdout_closed("list")
    assert proc.returncode == 0
    assert proc.stderr == ""


@pytest.mark.slow  # two subprocesses that each probe a state: the default tier's longest test
def test_a_closed_stdout_keeps_the_verdict_of_check(plugin, write_suite, tmp_path):
    """`orthobench check SUITE | head -2` exited 2 whatever the gate found: a failed gate must
    still exit 1 and a passed one 0, so a pipeline with `set -o pipefail` reads the gate."""
    failing = _with_stdout_closed(
        "check", str(_probe_suite(write_suite, plugin, 0.0)), "-o", str(tmp_path / "a"), "-q"
    )
    assert failing.returncode == 1, failing.stderr
    assert len(FAILED_STATE.findall(failing.stderr)) == 1
    assert "Broken pipe" not in failing.stderr and "error" not in failing.stderr

    passing = _with_stdout_closed(
        "check", str(_probe_suite(write_suite, plugin, -1.0)), "-o", str(tmp_path / "b"), "-q"
    )
    assert passing.returncode == 0, passing.stderr
    assert "Broken pipe" not in passing.stderr and "error" not in passing.stderr
    assert (tmp_path / "b" / "probe").is_dir()  # the probe ran to its end


def test_debug_adds_the_traceback_and_keeps_exit_code_2(write_suite):
    """The reported bug: `--debug` re-raised the error, so the command exited 1 (the code of
    failed cells) where it exits 2 without it."""
    suite = write_suite("name: x\nbudget: -1\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    line = f"orthobench: error: {suite}: budget: must be >= 0, but got -1."
    plain = CliRunner().invoke(cli, ["run", str(suite)])
    debug = CliRunner().invoke(cli, ["--debug", "run", str(suite)])
    assert plain.exit_code == debug.exit_code == 2
    assert plain.stderr.splitlines() == [line]
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert "SuiteError" in debug.stderr and debug.stderr.splitlines()[-1] == line


class _Failing:
    """A stream whose flush fails with ``code`` (the write only buffers, as a pipe's does)."""

    def __init__(self, code: int) -> None:
        self.code, self.written = code, []

    def write(self, text: str) -> int:
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        raise OSError(self.code, os.strerror(self.code))


def test_only_a_closed_pipe_is_tolerated_other_write_errors_are_raised():
    import errno

    from orthobench.cli import _ClosedPipeTolerant

    closed = _ClosedPipeTolerant(_Failing(errno.EPIPE))
    closed.write("first")
    closed.flush()  # the reader has gone: no error, and from now on nothing is written
    closed.write("second")
    closed.flush()
    assert closed.written == ["first"]
    full = _ClosedPipeTolerant(_Failing(errno.ENOSPC))
    full.write("x")
    with pytest.raises(OSError) as info:
        full.flush()
    assert info.value.errno == errno.ENOSPC


def test_a_ctrl_c_while_the_command_line_is_imported_exits_130_with_one_line():
    """The console script imports the command line for about a second before its Ctrl-C handler
    exists: an interrupt there printed a traceback through the imports and ended the process by
    the signal. Here importing ``orthobench.cli`` is what is interrupted."""
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'orthobench.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from orthobench._console import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 130
    assert done.stderr == "orthobench: interrupted while starting; nothing was run.\n"
