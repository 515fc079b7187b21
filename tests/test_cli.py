"""The command line end to end: run, resume, report, list, errors."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from orthobench.cli import cli


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.slow
def test_run_twice_stores_nothing_new_and_writes_a_report(sphere_suite, tmp_path):
    suite = sphere_suite(delay=0.0)
    out = tmp_path / "out"
    first = invoke("run", str(suite), "-o", str(out), "-q")
    assert first.exit_code == 0, first.output
    assert "4 run, 0 already stored, 0 failed" in first.output
    files = {p.name: digest(p) for p in (out / "runs").glob("*.parquet")}
    assert len(files) == 4
    second = invoke("run", str(suite), "-o", str(out), "-q")
    assert "0 run, 4 already stored" in second.output
    assert {p.name: digest(p) for p in (out / "runs").glob("*.parquet")} == files
    html = (out / "report.html").read_text()
    assert "<svg" in html and "sphere" in html and "center" in html
    forced = invoke("run", str(suite), "-o", str(out), "-q", "--force")
    assert "4 run, 0 already stored" in forced.output


def test_failed_cells_are_reported_and_others_stored(sphere_suite, tmp_path):
    suite = sphere_suite(fail_at=0.0)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 1
    assert "failed: sphere__sobol__seed0: RuntimeError: simulated training crash" in result.output
    assert "Traceback" in (out / "runs.jsonl").read_text()


def test_bad_suite_prints_one_line_and_exits_2(write_suite):
    suite = write_suite("name: x\nbudget: -1\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "orthobench", "run", str(suite)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"orthobench: error: {suite}: budget: must be >= 0, but got -1."
    assert "Traceback" not in proc.stderr + proc.stdout


def test_cuda_request_without_cuda_is_a_clear_error(write_suite):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here; this checks the error where it is not")
    suite = write_suite("name: x\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    result = invoke("run", str(suite), "--device", "cuda")
    assert result.exit_code == 2 and "CUDA is not available" in result.output


def test_list_shows_tasks_optimizers_and_params():
    result = invoke("list")
    assert result.exit_code == 0
    assert (
        "hartmann6" in result.output
        and "qlogei" in result.output
        and "function_samples=512" in result.output
    )


def test_list_aligns_descriptions_past_the_longest_name():
    """``tension-compression-string`` (26 characters) shifted its description out of the column
    that a 14-character name width gave the others."""
    lines = invoke("list").output.splitlines()
    tasks = lines[1 : lines.index("optimizers:")]
    named = [line for line in tasks if not line.lstrip().startswith("params:")]
    starts = {len(line) - len(line[2:].split(" ", 1)[1].lstrip()) for line in named}
    assert len(starts) == 1, named


def test_report_command_and_empty_dir_error(sphere_suite, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["report", str(empty)])
    assert result.exit_code == 2
    # Both folders named in full: it said "empty/runs or /probe", an absolute-looking path.
    assert f"no stored results under {empty}/runs or {empty}/probe;" in result.output
    suite = sphere_suite(delay=0.0)
    invoke("run", str(suite), "-o", str(tmp_path / "a"), "-q")
    result = invoke(
        "report", str(tmp_path / "a"), "-o", str(tmp_path / "r.html"), "--title", "My title"
    )
    assert result.exit_code == 0 and "My title" in (tmp_path / "r.html").read_text()


@pytest.mark.slow
def test_sigkill_mid_suite_then_resume_completes_only_missing_cells(sphere_suite, tmp_path):
    suite = sphere_suite(delay=0.15)
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orthobench", "run", str(suite), "-o", str(out), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    journal = out / "runs.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (
        journal.exists() and journal.read_text().count("\n") >= 1
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survivors = {p.name: digest(p) for p in (out / "runs").glob("*.parquet")}
    assert 1 <= len(survivors) < 4

    resumed = invoke("run", str(suite), "-o", str(out), "-q")
    assert f"{4 - len(survivors)} run, {len(survivors)} already stored" in resumed.output
    after = {p.name: digest(p) for p in (out / "runs").glob("*.parquet")}
    assert {k: after[k] for k in survivors} == survivors and len(after) == 4

    invoke("run", str(suite), "-o", str(tmp_path / "clean"), "-q")
    cols = ["cell_id", "iteration", "x", "y"]
    resumed_frame = pd.read_parquet(out / "runs")[cols].sort_values(cols[:2]).reset_index(drop=True)
    clean_frame = (
        pd.read_parquet(tmp_path / "clean" / "runs")[cols]
        .sort_values(cols[:2])
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(resumed_frame, clean_frame)


@pytest.mark.slow
def test_a_changed_configuration_is_not_reused_silently(sphere_suite, tmp_path):
    out = tmp_path / "out"
    first = sphere_suite(delay=0.0)
    assert invoke("run", str(first), "-o", str(out), "-q").exit_code == 0
    changed = sphere_suite(name="changed.yaml", delay=0.001)
    result = CliRunner().invoke(cli, ["run", str(changed), "-o", str(out), "-q"])
    assert result.exit_code == 2
    assert "task.params.delay 0.0 (stored) -> 0.001 (now)" in result.output
    assert "rerun with --force" in result.output
    forced = invoke("run", str(changed), "-o", str(out), "-q", "--force")
    assert forced.exit_code == 0 and "4 run, 0 already stored" in forced.output


def test_jobs_per_gpu_needs_the_dask_executor_and_is_at_least_1(write_suite, tmp_path):
    """Refused before anything runs or is written: in one line with another executor, by click
    below 1."""
    suite = write_suite("name: x\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    out = tmp_path / "out"
    for executor in ("process", "inline"):
        result = CliRunner().invoke(
            cli,
            ["run", str(suite), "-o", str(out), "--executor", executor, "--jobs-per-gpu", "2"],
        )
        assert result.exit_code == 2
        assert result.output.splitlines() == [
            f"orthobench: error: --jobs-per-gpu needs --executor dask, but got --executor "
            f"{executor}."
        ]
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "--jobs-per-gpu", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--jobs-per-gpu': 0 is not in the range x>=1." in result.output
    assert not out.exists()


def test_jobs_per_gpu_reaches_the_dask_executor(write_suite, tmp_path, dask_jobs_per_gpu):
    suite = write_suite("name: x\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    out = tmp_path / "out"
    assert invoke("run", str(suite), "-o", str(out), "-q", "--executor", "dask").exit_code == 0
    result = invoke(
        "run",
        str(suite),
        "-o",
        str(out),
        "-q",
        "--force",
        "--executor",
        "dask",
        "--jobs-per-gpu",
        "8",
    )
    assert result.exit_code == 0, result.output
    assert dask_jobs_per_gpu == [1, 8]


def test_the_warnings_of_a_run_are_one_line_each(write_suite, tmp_path):
    """The reported bug: only the report's warnings were one line; those of the run itself (a
    stored file that is damaged, a cell an earlier run left unfinished) came as Python prints
    them, with the source file and a second line of code."""
    import json

    from orthobench.suite import load_suite

    suite = write_suite("name: x\nn_init: 2\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    (cell,) = load_suite(suite).cells()
    out = tmp_path / "out"
    out.mkdir()
    marker = {"cell_id": cell.id, "config_hash": cell.config_hash, "pid": 4242}
    (out / ".running").write_text(json.dumps(marker))
    result = invoke("run", str(suite), "-o", str(out), "-q")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "never finished" in line]
    assert len(warned) == 1 and warned[0].startswith(f"orthobench: warning: cell {cell.id} ")
    assert "warnings.warn" not in result.stderr and "OrthobenchWarning" not in result.stderr


@pytest.mark.parametrize("command", ["probe", "check"])
def test_the_warnings_of_a_probe_are_one_line_each(write_suite, tmp_path, monkeypatch, command):
    """``probe`` and ``check`` printed a state computed at another thread count, or one that
    never finished, with Python's source file and a second line of code; a warning repeated at
    every rebuild (a point set's) was printed each time."""
    import warnings

    from orthobench.exceptions import OrthobenchWarning
    from orthobench.execution import RunSummary
    from orthobench.results import PROBE_SCHEMA

    def run_probe(*args, **kwargs):
        for _ in range(3):  # as at every rebuild, each GP fit resetting Python's memory
            warnings.warn("probe state s never finished", OrthobenchWarning, stacklevel=2)
            with warnings.catch_warnings():
                pass
        return PROBE_SCHEMA.empty_table().to_pandas(), RunSummary()

    monkeypatch.setattr("orthobench.probe.runner.run_probe", run_probe)
    suite = write_suite(
        "name: p\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n"
        "probe: {tasks: [hartmann6], estimators: [orth]}\n"
    )
    (tmp_path / "t.yaml").write_text(
        "version: 1\nthresholds:\n  - {estimator: orth, metric: var_ratio, min: 0}\n"
    )
    extra = ["-t", str(tmp_path / "t.yaml")] if command == "check" else []
    result = invoke(command, str(suite), "-o", str(tmp_path / "out"), "-q", *extra)
    warned = [line for line in result.stderr.splitlines() if "never finished" in line]
    assert warned == ["orthobench: warning: probe state s never finished"], result.stderr


def test_another_librarys_warning_is_one_line_once(capsys):
    """BoTorch's failed-restart warning came as Python prints it: 9 lines with the source line,
    at every step."""
    import warnings

    from orthobench.cli_warnings import warnings_as_lines

    with warnings_as_lines():
        for _ in range(3):
            warnings.warn_explicit(
                "Optimization failed.\nTrying again.", RuntimeWarning, "/s/botorch/gen.py", 42
            )
    assert capsys.readouterr().err == (
        "orthobench: warning: RuntimeWarning (botorch/gen.py:42): "
        "Optimization failed.\\nTrying again.\n"
    )


def test_an_orthobench_warning_prints_its_control_characters_escaped(capsys):
    """A warning naming a crafted results file (``runs/x<ESC>]0;T<BEL>.parquet``) set the
    terminal's title; a long one is not cut."""
    import warnings

    from orthobench.cli_warnings import warnings_as_lines
    from orthobench.exceptions import OrthobenchWarning

    name = "runs/x\x1b]0;T\x07.parquet" + "y" * 500
    with warnings_as_lines():
        warnings.warn(f"{name}: unreadable", OrthobenchWarning, stacklevel=1)
    escaped = "runs/x\\x1b]0;T\\x07.parquet" + "y" * 500
    assert capsys.readouterr().err == f"orthobench: warning: {escaped}: unreadable\n"


def test_a_folder_of_failed_cells_alone_still_has_a_report(plugin, write_suite, tmp_path):
    suite = write_suite(
        f"name: crash\nseeds: 1\nn_init: 3\nbudget: 1\n"
        f'tasks:\n  - {{name: "{plugin}:make_sphere", params: {{fail_at: 0.0}}, label: sphere}}\n'
        "optimizers: [sobol]\n"
    )
    out = tmp_path / "out"
    assert CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"]).exit_code == 1
    result = CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert "simulated training crash" in (tmp_path / "r.html").read_text()


def test_the_header_says_where_cells_run_under_a_cell_timeout(write_suite, tmp_path, monkeypatch):
    """``--cell-timeout`` runs inline cells in a worker process (one that calls ``os._exit``
    fails, the run goes on), while the header said "inline"."""
    from orthobench.executors import InlineExecutor

    assert InlineExecutor().description == "inline"
    # The cells themselves are not run: the header is written before.
    monkeypatch.setattr(InlineExecutor, "run", lambda self, jobs, session: None)
    suite = write_suite("name: h\nn_init: 2\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    timed = invoke("run", str(suite), "-o", str(tmp_path / "out"), "-q", "--cell-timeout", "60")
    assert "(inline, each in a worker process, 1 worker(s)" in timed.stderr
