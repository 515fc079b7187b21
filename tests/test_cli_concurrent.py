"""The command line on a results directory another run holds: refused with the store's "in use"
error before anything reads the stored units, printing nothing else and writing nothing."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.results import ResultStore

from .test_check import SUITE as PROBE_SUITE
from .test_results import in_use_message

SUITE = """
name: s
seeds: 2
n_init: 1
budget: {budget}
tasks: [hartmann6]
optimizers: [sobol]
"""


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """``path -> (size, mtime in ns)`` of every file under ``root``."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def _refused_in_use(args: list[str], root: Path) -> None:
    """Invoke ``args`` while this process holds ``root`` (another open of its lock, as another
    run's is) and check that the in-use error is all it printed and that it wrote nothing."""
    with ResultStore(root).open_for_writing():
        before = _snapshot(root)
        result = CliRunner().invoke(cli, args)
        after = _snapshot(root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"orthobench: error: {in_use_message(root, os.getpid())}"]
    assert result.stdout == ""
    assert after == before


def test_a_run_on_a_directory_in_use_says_so_and_reads_no_stored_cell(write_suite, tmp_path):
    """The reported bug: a second `run` on a directory in use warned that a cell the other run
    had written but not yet journaled was corrupt, and listed cells of another configuration
    with the advice to rerun with --force, before (or instead of) saying it was in use."""
    out = tmp_path / "out"
    first = write_suite(SUITE.format(budget=1), "first.yaml")
    assert CliRunner().invoke(cli, ["run", str(first), "-o", str(out), "-q"]).exit_code == 0
    # What a run in progress leaves: a cell file in place whose journal line is not written yet.
    journal = out / "runs.jsonl"
    journal.write_text(journal.read_text().splitlines(keepends=True)[0])
    changed = write_suite(SUITE.format(budget=2), "changed.yaml")
    for force in ([], ["--force"]):
        _refused_in_use(["run", str(changed), "-o", str(out), "-q", *force], out)


def test_a_probe_on_a_directory_in_use_says_so_before_its_first_line(write_suite, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    suite = write_suite(PROBE_SUITE, "gate.yaml")
    _refused_in_use(["probe", str(suite), "-o", str(out), "-q"], out)


def test_a_folder_where_probe_writes_its_report_is_refused_before_any_state_runs(
    write_suite, tmp_path
):
    """As `run`'s: a folder DIR/report.html failed the probe after every state was computed."""
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)
    suite = write_suite(PROBE_SUITE, "gate.yaml")
    result = CliRunner().invoke(cli, ["probe", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"orthobench: error: cannot write the report to {out / 'report.html'}: it exists and is "
        "not a regular file; remove or rename it, then rerun (nothing has run)."
    ]
    assert [p.name for p in out.iterdir()] == ["report.html"]


def test_a_link_where_run_writes_its_report_is_refused_before_any_cell_runs(write_suite, tmp_path):
    """The report refuses to write through it, which came after every cell was computed."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere.csv"
    out.mkdir()
    elsewhere.write_text("keep")
    (out / "report.summary.csv").symlink_to(elsewhere)
    suite = write_suite("name: s\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"orthobench: error: cannot write the report to {out / 'report.summary.csv'}: it is a "
        "symbolic link; remove or rename it, then rerun (nothing has run)."
    ]
    assert elsewhere.read_text() == "keep" and not (out / "runs").exists()


def test_a_probe_section_its_tasks_cannot_be_probed_by_names_the_suite_file(write_suite, tmp_path):
    """A TPE estimator at q > 1 (refused when the states are made) read `probe.q: ...` without the
    file, as no other suite error does."""
    suite = write_suite(PROBE_SUITE.replace("[orth-shrink]", "[orthobo-tpe]\n  q: [4]"), "t.yaml")
    for command in ("probe", "check"):
        result = CliRunner().invoke(cli, [command, str(suite), "-o", str(tmp_path / "out")])
        assert result.exit_code == 2
        assert result.output.startswith(f"orthobench: error: {suite}: probe.q: "), result.output
    assert not (tmp_path / "out").exists()
