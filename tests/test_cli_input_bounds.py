"""``run`` and ``probe`` inputs refused in one line before anything runs (a thread count no
process can start, an empty ``--device``, ``-o`` under a file), and the summary line of a run
whose evaluations timed out."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import orthobench
from orthobench import api
from orthobench.api import MAX_THREADS
from orthobench.cli import cli
from orthobench.exceptions import ConfigError, ResultsError
from orthobench.results import ResultStore

DEMO = "suites/demo.yaml"  # has a probe section

TINY = """\
name: tiny
seeds: 1
n_init: 2
budget: 1
tasks: [hartmann6]
optimizers: [sobol]
"""


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _error_line(result) -> str:
    """The one stderr line of an error exit, after checking that nothing else explains it."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("orthobench: error")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.mark.parametrize(
    ("command", "option"), [("run", "--threads-per-cell"), ("probe", "--threads")]
)
def test_a_thread_count_above_the_maximum_is_refused_before_anything_runs(
    command, option, write_suite, tmp_path
):
    """16384 ended the run in "libgomp: Thread creation failed", 10^8 in a segfault, and the next
    run blamed the task ("never finished")."""
    suite = DEMO if command == "probe" else str(write_suite(TINY))
    out = tmp_path / "out"
    result = invoke(command, suite, "-o", str(out), option, str(MAX_THREADS + 1), "-q")
    assert result.exit_code == 2
    assert f"Invalid value for '{option}': {MAX_THREADS + 1} is not in the range" in result.output
    assert not out.exists()


def test_run_suite_refuses_a_thread_count_above_the_maximum(write_suite, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=f"at most {MAX_THREADS}, but got threads_per_cell=1025"):
        orthobench.run_suite(write_suite(TINY), output=out, threads_per_cell=MAX_THREADS + 1)
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "probe"])
def test_an_empty_device_is_refused_in_one_line(command, write_suite, tmp_path):
    """``--device ''`` ran on the suite's device, as if no device had been given."""
    suite = DEMO if command == "probe" else str(write_suite(TINY))
    out = tmp_path / "out"
    line = _error_line(invoke(command, suite, "-o", str(out), "--device", "", "-q"))
    assert line == (
        "orthobench: error: device: must be auto, cpu, cuda or cuda:N (N = 0..127), but got str ''."
    )
    assert not out.exists()
    with pytest.raises(ConfigError, match="but got str ''"):
        orthobench.run_suite(write_suite(TINY), output=out, device="")


@pytest.mark.parametrize("command", ["run", "probe"])
def test_an_output_under_a_file_gets_the_stores_message_not_the_journals(
    command, write_suite, tmp_path
):
    """``-o FILE/sub`` (and ``-o /dev/full``) said ``FILE/sub/runs.jsonl: cannot read this
    journal (Not a directory)``: the plan read the journal before the store checked its folder."""
    suite = DEMO if command == "probe" else str(write_suite(TINY))
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile / "sub", "/dev/full"):
        line = _error_line(invoke(command, suite, "-o", str(out), "-q"))
        assert line.startswith(f"orthobench: error: the results directory {out} is not writable")
    assert afile.read_text() == ""


def test_a_journal_under_a_file_is_empty_and_an_unreadable_one_is_still_named(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert ResultStore(afile / "sub").runs_journal.entries() == []
    store = ResultStore(tmp_path / "out")
    store.runs_journal.path.mkdir(parents=True)  # a folder where the journal goes
    with pytest.raises(ResultsError, match="runs.jsonl: cannot read this journal"):
        store.runs_journal.entries()


def test_the_summary_line_counts_the_evaluations_that_timed_out(write_suite, tmp_path, monkeypatch):
    """Every evaluation was stored as ``timeout`` with y NaN, and the line said only ``1 run, 0
    already stored, 0 failed``."""
    monkeypatch.setattr(api, "_write_report", lambda prepared: prepared.store.root / "r.html")
    suite = TINY.replace("[hartmann6]", "[{name: delayed, params: {seconds: 5.0}}]")
    path = write_suite(suite + "evaluation_timeout_s: 0.05\n")
    result = invoke("run", str(path), "-o", str(tmp_path / "out"), "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1 run, 0 already stored, 0 failed in ")
    assert "s; 3 evaluation(s) timed out; results: " in result.stdout
    rerun = invoke("run", str(path), "-o", str(tmp_path / "out"), "-q")  # nothing timed out now
    assert rerun.stdout.startswith("0 run, 1 already stored, 0 failed in ")
    assert "evaluation(s)" not in rerun.stdout
