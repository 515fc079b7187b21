"""The Python API (orthobench/api.py): run_suite and load_results do what `run` and `report` do."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import orthobench
from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError, OrthobenchWarning, SuiteError
from orthobench.results import ResultStore, RunRecord


def _digests(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (out / "runs").glob("*")}


def test_run_suite_stores_rows_writes_a_report_and_resumes(sphere_suite, tmp_path):
    suite = sphere_suite(fail_at=-1.0)
    out = tmp_path / "out"
    first = orthobench.run_suite(suite, output=out, progress=False)
    assert (first.ok, first.skipped, first.failed, first.failures) == (4, 0, 0, ())
    assert first.suite == "sphere" and first.results_dir == out.resolve()
    assert first.report == out.resolve() / "report.html" and first.report.exists()
    assert first.journal == out.resolve() / "runs.jsonl"

    rows = orthobench.load_results(out)
    assert list(rows.columns) == [f.name for f in dataclasses.fields(RunRecord)]
    assert len(rows) == 4 * (3 + 3)
    assert set(rows.optimizer) == {"sobol", "center"} and set(rows.seed) == {0, 1}
    # A directory a run writes now: its rows are those stored so far, as report says.
    with ResultStore(out).open_for_writing():
        with pytest.warns(OrthobenchWarning, match="being written by an orthobench run"):
            assert len(orthobench.load_results(out)) == len(rows)
    # A directory given twice (another spelling) is read once: its rows counted twice.
    with pytest.warns(OrthobenchWarning, match="given again"):
        assert len(orthobench.load_results(out, tmp_path / "." / "out")) == len(rows)
    files = _digests(out)

    # A loaded Suite works as well as its file; stored cells are skipped, not rewritten.
    again = orthobench.run_suite(
        orthobench.load_suite(suite), output=str(out), progress=False, report=False
    )
    assert (again.ok, again.skipped, again.failed, again.report) == (0, 4, 0, None)
    assert _digests(out) == files
    forced = orthobench.run_suite(suite, output=out, progress=False, report=False, force=True)
    assert (forced.ok, forced.skipped) == (4, 0)


def test_a_suite_given_as_a_mapping_runs_as_its_file_would(tmp_path):
    suite = {
        "name": "inline",
        "budget": 1,
        "n_init": 2,
        "tasks": ["gramacy"],
        "optimizers": ["sobol"],
    }
    result = orthobench.run_suite(suite, output=tmp_path / "out", progress=False, report=False)
    assert (result.ok, result.suite) == (1, "inline")
    assert len(orthobench.load_results(tmp_path / "out")) == 3
    with pytest.raises(SuiteError, match="budget"):
        orthobench.run_suite({**suite, "budget": "many"}, output=tmp_path / "bad", progress=False)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(TypeError, match="a file path, a Suite or a mapping, but got list"):
        orthobench.run_suite([suite], output=tmp_path / "bad", progress=False)


def test_failed_cells_are_counted_not_raised(sphere_suite, tmp_path):
    suite = sphere_suite(fail_at=0.0)
    result = orthobench.run_suite(suite, output=tmp_path / "out", progress=False, report=False)
    assert result.failed >= 1 and result.ok + result.skipped + result.failed == 4
    assert ("sphere__sobol__seed0", "RuntimeError: simulated training crash") in result.failures
    assert "Traceback" in result.journal.read_text()


def _cli_error(*args: str) -> str:
    """The one line `orthobench run` prints for bad input, without its prefix."""
    result = CliRunner().invoke(cli, ["run", *args])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert line.startswith("orthobench: error: ")
    return line.removeprefix("orthobench: error: ")


def test_bad_input_raises_the_one_line_error_the_cli_prints(write_suite, tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SuiteError) as err:
        orthobench.run_suite(missing, output=tmp_path / "out")
    assert str(err.value) == _cli_error(str(missing), "-o", str(tmp_path / "out"))
    assert "\n" not in str(err.value) and str(missing) in str(err.value)

    bad = write_suite("name: x\nbudget: -1\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    with pytest.raises(SuiteError, match="budget: must be >= 0, but got -1") as err:
        orthobench.run_suite(str(bad))
    assert str(err.value) == _cli_error(str(bad))
    assert not (tmp_path / "out").exists()


def test_a_changed_configuration_raises_unless_forced(sphere_suite, tmp_path):
    out = tmp_path / "out"
    orthobench.run_suite(
        sphere_suite(fail_at=-1.0),
        output=out,
        progress=False,
        report=False,
    )
    changed = sphere_suite(name="changed.yaml", fail_at=5.0)
    with pytest.raises(OrthobenchError, match="4 stored cell\\(s\\) .* another configuration"):
        orthobench.run_suite(changed, output=out, progress=False, report=False)


def test_bad_arguments_raise_value_errors(write_suite, tmp_path):
    suite = write_suite("name: x\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    with pytest.raises(ValueError, match="`workers` must be an int >= 1"):
        orthobench.run_suite(suite, workers=0)
    with pytest.raises(ValueError, match="`threads_per_cell` must be an int >= 1"):
        orthobench.run_suite(suite, threads_per_cell=0)
    with pytest.raises(ValueError, match="Unknown executor 'ray'"):
        orthobench.run_suite(suite, executor="ray", output=tmp_path / "out")


def test_load_results_of_empty_and_missing_directories(tmp_path):
    empty = orthobench.load_results(tmp_path)
    assert len(empty) == 0
    assert list(empty.columns) == [f.name for f in dataclasses.fields(RunRecord)]
    with pytest.raises(OrthobenchError, match="nowhere: no such results directory"):
        orthobench.load_results(tmp_path / "nowhere")
    with pytest.raises(TypeError, match="at least one results directory"):
        orthobench.load_results()


def test_the_api_is_exported_and_import_stays_torch_free():
    from orthobench import api

    assert orthobench.run_suite is api.run_suite
    assert orthobench.load_results is api.load_results
    assert orthobench.RunResult is api.RunResult
    for name in ("run_suite", "load_results", "RunResult", "acquisition_noise", "AcquisitionNoise"):
        assert name in orthobench.__all__ and name in dir(orthobench)
    # A name reached once is a global too: it was listed twice.
    assert len(dir(orthobench)) == len(set(dir(orthobench)))
    assert orthobench._EXPORTS["acquisition_noise"] == "orthobench.noise"
    assert orthobench._EXPORTS["AcquisitionNoise"] == "orthobench.noise"
    # Reaching the API's functions imports no torch either (their modules import it on call).
    code = (
        "import json, sys, orthobench\n"
        "orthobench.run_suite, orthobench.load_results, orthobench.RunResult\n"
        "print(json.dumps([m for m in ('torch', 'botorch', 'pandas') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_jobs_per_gpu_reaches_the_dask_executor(write_suite, tmp_path, dask_jobs_per_gpu):
    suite = write_suite("name: x\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    result = orthobench.run_suite(
        suite, output=tmp_path / "out", executor="dask", jobs_per_gpu=4, progress=False
    )
    assert result.ok == 1 and dask_jobs_per_gpu == [4]
    with pytest.raises(OrthobenchError, match="^--jobs-per-gpu needs --executor dask, but got"):
        orthobench.run_suite(suite, output=tmp_path / "other", jobs_per_gpu=2, progress=False)
    with pytest.raises(ValueError, match="`jobs_per_gpu` must be an int >= 1"):
        orthobench.run_suite(suite, output=tmp_path / "other", jobs_per_gpu=0)
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"threads_per_cell": 1.5}, "threads_per_cell=1.5"),
        ({"workers": 2.5}, "workers=2.5"),
        ({"workers": "2"}, "workers='2'"),
        ({"jobs_per_gpu": 1.5}, "jobs_per_gpu=1.5"),
    ],
)
def test_non_integer_counts_raise_before_any_work(write_suite, tmp_path, kwargs, shown):
    """A count that is not an int is refused with its value, before the results folder is made:
    ``threads_per_cell=1.5`` ran and failed every cell (``set_num_threads expects an int``),
    ``workers=2.5`` started a process pool and ``workers="2"`` raised a bare ``TypeError``."""
    suite = write_suite("name: x\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="must be an int >= 1") as info:
        orthobench.run_suite(suite, output=out, progress=False, report=False, **kwargs)
    assert shown in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()


def test_inline_with_several_workers_and_an_empty_output_are_refused(tmp_path, monkeypatch):
    """``--workers 2 --executor inline`` ran on one worker without a word, and ``-o ''`` wrote
    to the default ``results/<suite>``: both are one-line errors before anything runs."""
    monkeypatch.chdir(tmp_path)  # where the default results/<suite> would be written
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    with pytest.raises(OrthobenchError, match=r"^--workers 2 needs --executor process or dask"):
        orthobench.run_suite(suite, output=tmp_path / "out", executor="inline", workers=2)
    with pytest.raises(OrthobenchError, match=r"^-o/--output is empty"):
        orthobench.run_suite(suite, output="", progress=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()


def test_a_suite_refused_with_the_store_held_leaves_no_folder(tmp_path):
    """TuRBO cannot take pending points, which an asynchronous cell needs: refused with the
    store held (the checks that build every optimizer), the run left ``out/.lock`` behind."""
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: s\nn_init: 3\nbudget: 2\nq: 2\nasynchronous: true\n"
        "tasks: [hartmann6]\noptimizers: [turbo]\n"
    )
    out = tmp_path / "out"
    with pytest.raises(OrthobenchError, match="turbo"):
        orthobench.run_suite(suite, output=out, progress=False)
    assert not out.exists()
    (out / "runs").mkdir(parents=True)  # a folder that was there is left as it was
    with pytest.raises(OrthobenchError, match="turbo"):
        orthobench.run_suite(suite, output=out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".lock", "runs"]
