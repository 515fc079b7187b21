"""The command line under faults of its surroundings: foreign files in a results directory, a task
that changes the working directory, too many workers, cells the suite no longer has or of another
suite, a Dask scheduler gone after its check, and file system errors of the runner itself (a full
disk, a device or a folder as the report, a path too long)."""

from __future__ import annotations

import errno
import re
import socket
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from orthobench import execution
from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError
from orthobench.executors import ProcessExecutor, execute, make_executor
from orthobench.results import ResultStore
from orthobench.suite import load_suite

from .test_cli import digest

#: A path longer than PATH_MAX (4096 on Linux) whose every component is shorter than NAME_MAX.
TOO_LONG = "/".join(["d" * 200] * 25)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _one_error_line(result) -> str:
    """The last stderr line, after checking that it is an error and that no traceback came."""
    assert "Traceback" not in result.output
    line = result.stderr.splitlines()[-1]
    assert line.startswith("orthobench: error: ")
    return line


# ----------------------------------------------------------------------------------------------
# Foreign files


def _write_foreign_parquet(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"a": [1, 2]}), path)


@pytest.mark.slow
def test_a_foreign_parquet_file_is_skipped_by_report_and_by_run_with_a_warning_naming_it(
    sphere_suite, tmp_path
):
    """The reported bug: one Parquet file orthobench did not write, in runs/ or probe/, made
    `report` exit 2 with 'rerun its suite', and `run` fail after storing every cell."""
    suite = sphere_suite(delay=0.0)
    out = tmp_path / "out"
    foreign = [out / "runs" / "notes.parquet", out / "probe" / "export.parquet"]
    for path in foreign:
        _write_foreign_parquet(path)
    ran = invoke("run", str(suite), "-o", str(out), "-q")
    assert ran.exit_code == 0, ran.output
    assert "4 run, 0 already stored, 0 failed" in ran.stdout
    for path in foreign:
        assert f"orthobench: warning: {path}: not an orthobench results file" in ran.stderr
    assert "center" in (out / "report.html").read_text()

    report = invoke("report", str(out), "-o", str(tmp_path / "r.html"))
    assert report.exit_code == 0, report.output
    assert report.stderr.splitlines() == [
        f"orthobench: warning: {path}: not an orthobench results file (its Parquet metadata "
        "has no 'orthobench' entry); skipped"
        for path in foreign
    ]
    assert "center" in (tmp_path / "r.html").read_text()


# ----------------------------------------------------------------------------------------------
# A task that changes the working directory

WANDERER = '''
import os

import numpy as np

from orthobench import Evaluation, SearchSpace, Task


class Wanderer(Task):
    """A sphere whose evaluations change the working directory to ``to``."""

    optimal_value = 0.0

    def __init__(self, to: str = "."):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.to = to

    def evaluate(self, x, *, seed, device):
        os.chdir(self.to)
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))
'''


def test_a_task_that_changes_the_working_directory_moves_no_result_and_no_report(
    tmp_path, monkeypatch
):
    """The reported bug: with a relative -o, every cell after the first chdir went elsewhere."""
    plugins, elsewhere = tmp_path / "plugins", tmp_path / "elsewhere"
    plugins.mkdir()
    elsewhere.mkdir()
    (plugins / "wanderer.py").write_text(WANDERER)
    monkeypatch.syspath_prepend(str(plugins))
    (tmp_path / "suite.yaml").write_text(
        "name: w\nseeds: 2\nn_init: 2\nbudget: 1\noptimizers: [sobol]\n"
        f"tasks: [{{name: 'wanderer:Wanderer', params: {{to: '{elsewhere}'}}, label: w}}]\n"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "suite.yaml", "-o", "out", "-q")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert list(elsewhere.iterdir()) == []
    assert len(list((out / "runs").glob("*.parquet"))) == 2
    assert (out / "report.html").exists()
    assert f"-> {out}" in result.stderr
    assert f"results: {out / 'runs'}; report: {out / 'report.html'}" in result.stdout


# ----------------------------------------------------------------------------------------------
# Workers


@pytest.mark.slow
def test_workers_are_capped_at_the_cells_to_run_and_the_first_line_says_so(
    sphere_suite, plugin, tmp_path, monkeypatch
):
    """`--workers 100000` asked the pool for 100000 processes for 4 cells."""
    asked = []

    def pool(self, jobs, session):  # the pool, run inline: only the worker count matters here
        asked.append(self.processes(len(jobs)))
        for job in jobs:
            session.finish(job, execute(job))

    monkeypatch.setattr(ProcessExecutor, "run", pool)
    suite = sphere_suite(delay=0.0)
    out = tmp_path / "out"
    result = invoke("run", str(suite), "-o", str(out), "-q", "--workers", "100000")
    assert result.exit_code == 0, result.output
    assert asked == [4]
    assert result.stderr.splitlines()[0] == (
        "suite sphere: 4 cells (4 to run) on cpu (process, 4 worker(s): --workers 100000 capped "
        f"at the cells to run, 1 thread(s) per cell) -> {out}"
    )
    (out / "runs" / "sphere__sobol__seed1.parquet").unlink()  # one cell left to run
    again = invoke("run", str(suite), "-o", str(out), "-q", "--workers", "3")
    assert again.exit_code == 0, again.output
    assert asked == [4, 1]
    assert "4 cells (1 to run) on cpu (process, 1 worker(s): --workers 3 capped" in again.stderr


# ----------------------------------------------------------------------------------------------
# Cells the suite no longer has

SUITE_OF_OPTIMIZERS = """
name: sphere
seeds: 1
n_init: 2
budget: 1
tasks: [{{name: "{plugin}:make_sphere", label: sphere}}]
optimizers: [{optimizers}]
"""


def test_the_report_of_run_shows_only_the_suites_cells_and_report_shows_every_stored_one(
    plugin, write_suite, tmp_path
):
    """The reported bug: after an optimizer was removed from the suite, the report `run` wrote
    still showed its stored cells, unmarked."""
    out = tmp_path / "out"
    center = f'{{name: "{plugin}:CenterOptimizer", label: dropped-later}}'
    both = write_suite(SUITE_OF_OPTIMIZERS.format(plugin=plugin, optimizers=f"sobol, {center}"))
    assert invoke("run", str(both), "-o", str(out), "-q").exit_code == 0
    assert "dropped-later" in (out / "report.html").read_text()
    one = write_suite(SUITE_OF_OPTIMIZERS.format(plugin=plugin, optimizers="sobol"), "one.yaml")
    result = invoke("run", str(one), "-o", str(out), "-q")
    assert result.exit_code == 0, result.output
    assert "0 run, 1 already stored" in result.stdout
    html = (out / "report.html").read_text()
    assert "dropped-later" not in html and "sobol" in html
    assert result.stderr.splitlines()[-1] == (
        f"orthobench: note: the report leaves out cells journaled in {out}: 1 that suite sphere "
        "no longer has (sphere__dropped-later__seed0); "
        f"`orthobench report {out}` shows every stored cell."
    )
    everything = invoke("report", str(out), "-o", str(tmp_path / "all.html"))
    assert everything.exit_code == 0, everything.output
    assert "dropped-later" in (tmp_path / "all.html").read_text()


HARTMANN_SUITE = """
name: {name}
seeds: {seeds}
n_init: 1
budget: 1
tasks: [{task}]
optimizers: [sobol]
"""


def test_the_note_of_run_tells_the_cells_of_another_suite_from_those_the_suite_dropped(
    write_suite, tmp_path
):
    """The reported bug: after suite a ran into a folder, suite d's run there called a's cells
    ones "the suite no longer has"."""
    out = tmp_path / "out"
    a = write_suite(HARTMANN_SUITE.format(name="a", seeds=2, task="hartmann6"), "a.yaml")
    d = write_suite(HARTMANN_SUITE.format(name="d", seeds=1, task="ackley8"), "d.yaml")
    assert invoke("run", str(a), "-o", str(out), "-q").exit_code == 0
    result = invoke("run", str(d), "-o", str(out), "-q")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        f"orthobench: note: the report leaves out cells journaled in {out}: 2 of suite a "
        "(hartmann6__sobol__seed0, hartmann6__sobol__seed1); "
        f"`orthobench report {out}` shows every stored cell."
    )


def test_the_left_out_cells_are_grouped_by_the_suite_their_last_configuration_names():
    from orthobench.cli import _left_out

    entries = [
        {"cell_id": "kept", "config": {"suite": "s"}},
        {"cell_id": "dropped", "config": {"suite": "s"}},
        {"cell_id": "dropped", "status": "failed"},  # a later failure keeps the suite known
        *({"cell_id": f"other{i}", "config": {"suite": "t"}} for i in range(4)),
        {"cell_id": "failed-only", "status": "failed"},
    ]
    assert _left_out(entries, "s", {"kept"}) == (
        "1 that suite s no longer has (dropped); 1 that suite s does not have (failed-only); "
        "4 of suite t (other0, other1, other2, ...)"
    )
    assert _left_out(entries[:1], "s", {"kept"}) == ""


def test_the_left_out_cells_and_suites_of_a_crafted_journal_reach_the_terminal_escaped():
    """Such an id cleared the screen and set the window title in `run`'s note."""
    from orthobench.cli import _left_out

    evil = "evil\x1b[2J\x1b]0;TITLE\x07\rFAKE: all good"
    entries = [
        {"cell_id": evil, "config": {"suite": "t\x1b[2J"}},
        {"cell_id": "listed", "config": {"suite": ["t"]}},
    ]
    assert _left_out(entries, "s", set()) == (
        "1 of suite t\\x1b[2J (evil\\x1b[2J\\x1b]0;TITLE\\x07\\rFAKE: all good); "
        "1 that suite s does not have (listed)"
    )


# ----------------------------------------------------------------------------------------------
# A Dask scheduler gone after its check


def test_a_scheduler_gone_after_its_check_stops_the_run_as_fast_and_as_the_check_would(
    write_suite, tmp_path
):
    """`run --scheduler` checks the scheduler, then connects to it: the connection waited Dask's
    30 s, not the checked timeout, and said it in other words."""
    pytest.importorskip("dask.distributed")
    with socket.socket() as probe:  # a port nothing listens on: the scheduler has gone
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    suite = write_suite(
        "name: t\nseeds: 1\nn_init: 1\nbudget: 0\ntasks: [hartmann6]\noptimizers: [sobol]\n"
    )
    start = time.perf_counter()
    with pytest.raises(OrthobenchError) as err:
        execution.run_suite(
            load_suite(suite),
            ResultStore(tmp_path / "out"),
            device=torch.device("cpu"),
            executor=make_executor("dask", scheduler=address, scheduler_timeout=1.0),
            show_progress=False,
        )
    seconds = time.perf_counter() - start
    assert 1 <= seconds < 5, seconds
    message = str(err.value)
    assert message.startswith(f"no Dask scheduler answered at {address} within 1 s (")
    assert message.endswith("); start it, or check --scheduler.") and "\n" not in message


# ----------------------------------------------------------------------------------------------
# File system errors of the runner


def test_a_full_disk_while_storing_a_cell_is_one_line_with_what_is_stored(
    sphere_suite, tmp_path, monkeypatch
):
    suite = sphere_suite(delay=0.0)
    out = tmp_path / "out"
    assert invoke("run", str(suite), "-o", str(out), "-q").exit_code == 0
    (out / "runs" / "sphere__sobol__seed1.parquet").unlink()

    def full_disk(table, where, **kwargs):
        where.write(b"PAR1 partial bytes")
        raise OSError(errno.ENOSPC, "No space left on device")  # as a failed write() names no file

    monkeypatch.setattr(pq, "write_table", full_disk)
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2
    assert _one_error_line(result) == (
        f"orthobench: error: {out / 'runs' / 'sphere__sobol__seed1.parquet'}: No space left on "
        f"device; 3 of 4 cells are stored in {out}; rerun the same command to resume once that "
        "is fixed."
    )
    assert not list(out.rglob("*.tmp"))


def test_a_full_disk_while_writing_the_report_keeps_the_old_report_whole(tmp_path, monkeypatch):
    """The report and its CSVs are replaced atomically: a failed write left a 0-byte CSV."""
    from .report.conftest import cell, write_cell

    write_cell(tmp_path, cell("s", "t", "sobol", 0, n_init=1, budget=1), [2.0, 1.0])
    report = tmp_path / "r.html"
    assert invoke("report", str(tmp_path), "-o", str(report)).exit_code == 0
    written = sorted(tmp_path.glob("r.*"))
    before = {path: digest(path) for path in written}
    assert len(written) >= 4 and all(path.stat().st_size for path in written)

    import os

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "-o", str(report)])
    monkeypatch.undo()
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert re.fullmatch(
        rf"orthobench: error: cannot write the report {re.escape(str(report))}: "
        rf"{re.escape(str(tmp_path))}/r\.[\w-]+\.csv: No space left on device\.",
        line,
    ), line
    assert {path: digest(path) for path in sorted(tmp_path.glob("r.*"))} == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_while_run_writes_its_report_still_prints_the_run_summary(
    sphere_suite, tmp_path, monkeypatch
):
    import orthobench.report.html as html

    def full_disk(path, write):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(html, "write_atomic", full_disk)
    suite = sphere_suite(delay=0.0)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2
    (summary,) = result.stdout.splitlines()
    assert summary.startswith("4 run, 0 already stored, 0 failed in ")
    assert summary.endswith(f" s; results: {out / 'runs'}; report: not written")
    assert _one_error_line(result).startswith(
        f"orthobench: error: cannot write the report {out / 'report.html'}: "
    )
    assert len(list((out / "runs").glob("*.parquet"))) == 4


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_device_as_the_report_is_refused_and_nothing_is_written_beside_it(tmp_path):
    """The reported bug: `report -o /dev/full` wrote the CSV files into /dev."""
    from .report.conftest import cell, write_cell

    write_cell(tmp_path, cell("s", "t", "sobol", 0, n_init=1, budget=1), [2.0, 1.0])
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "-o", "/dev/full"])
    assert result.exit_code == 2
    assert _one_error_line(result) == (
        "orthobench: error: cannot write the report to /dev/full: it exists and is not a regular "
        "file; give the path of an HTML file with -o."
    )
    assert sorted(Path("/dev").glob("full*")) == [Path("/dev/full")]
    assert not [p for p in Path("/dev").iterdir() if p.name.endswith((".csv", ".tmp"))]


@pytest.mark.parametrize("name", ["report.html", "report.curves.csv"])
def test_a_folder_where_run_writes_its_report_is_refused_before_any_cell_runs(
    write_suite, tmp_path, name
):
    """The reported bug: `run` stored every cell, then failed on a folder DIR/report.html with
    the advice of `report` ("give the path of an HTML file with -o"; -o is `run`'s results
    folder). Without a report the run goes on."""
    from orthobench import run_suite

    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    suite = write_suite(HARTMANN_SUITE.format(name="a", seeds=1, task="hartmann6"))
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out), "-q"])
    assert result.exit_code == 2
    assert _one_error_line(result) == (
        f"orthobench: error: cannot write the report to {out / name}: it exists and is not a "
        "regular file; remove or rename it, then rerun (nothing has run)."
    )
    assert [p.name for p in out.iterdir()] == [name]
    assert run_suite(suite, output=out, progress=False, report=False).ok == 1


def test_the_configuration_error_says_how_many_changed_cells_it_lists(capsys):
    """The reported bug: 200 changed cells were "listed above", of which 20 were."""
    from types import SimpleNamespace

    from orthobench.api import _refuse_changed

    for n, listed in ((20, "listed above"), (21, "the first 20 listed above, 1 more not shown")):
        store = SimpleNamespace(config_changes=lambda units, n=n: [f"cell c{i}" for i in range(n)])
        with pytest.raises(OrthobenchError) as info:
            _refuse_changed(store, [SimpleNamespace(kind="cell")], Path("out"))
        assert capsys.readouterr().err.splitlines() == [f"cell c{i}" for i in range(20)]
        assert str(info.value) == (
            f"{n} stored cell(s) in out have another configuration than the suite now gives "
            f"them ({listed}): rerun with --force to replace them, or write to another folder "
            "with -o."
        )


@pytest.mark.slow
def test_an_output_path_beyond_path_max_is_one_line_for_run_and_report(sphere_suite, tmp_path):
    suite = sphere_suite(delay=0.0)
    long = tmp_path / TOO_LONG
    ran = CliRunner().invoke(cli, ["run", str(suite), "-o", str(long), "-q"])
    assert ran.exit_code == 2
    assert _one_error_line(ran).endswith(": File name too long")
    stored = tmp_path / "out"
    assert invoke("run", str(suite), "-o", str(stored), "-q").exit_code == 0
    report = CliRunner().invoke(cli, ["report", str(stored), "-o", str(long / "r.html")])
    assert report.exit_code == 2
    assert _one_error_line(report).endswith(": File name too long.")


# ----------------------------------------------------------------------------------------------
# Ctrl-C outside the cells


INTERRUPTED = (
    "orthobench: interrupted; what is stored stays stored: rerun the same command to resume."
)


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_while_the_suite_loads_exits_130_with_one_line(sphere_suite, tmp_path, monkeypatch):
    """Ctrl-C before any cell ran (loading the suite, reading the store) printed click's
    'Aborted!' and exited 1, the code of failed cells; it is the interrupted run's 130, with
    one line."""
    import orthobench.api as api

    monkeypatch.setattr(api, "_prepare_run", _interrupted)
    result = CliRunner().invoke(cli, ["run", str(sphere_suite(delay=0.0)), "-o", str(tmp_path)])
    assert result.exit_code == 130
    assert result.output.splitlines() == [INTERRUPTED]


def test_ctrl_c_while_run_writes_its_report_exits_130_and_keeps_the_cells(
    sphere_suite, tmp_path, monkeypatch
):
    """Ctrl-C after the cells are stored, while the report is written: 130 and one line, not
    'Aborted!' and 1 (which says cells failed)."""
    import orthobench.api as api

    monkeypatch.setattr(api, "_write_report", _interrupted)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(sphere_suite(delay=0.0)), "-o", str(out), "-q"])
    assert result.exit_code == 130
    assert "Aborted!" not in result.output
    assert result.stderr.splitlines()[-1] == INTERRUPTED
    assert len(list((out / "runs").glob("*.parquet"))) == 4


def test_the_code_version_note_prints_a_crafted_version_escaped(tmp_path):
    """The report's note on cells of several code versions printed the version from a file's
    footer raw: a crafted one's escape sequences reached the terminal."""
    from tests.test_loop import cell
    from tests.test_results import _edit_metadata, run_record

    store = ResultStore(tmp_path)
    plain, crafted = (cell(seed=seed, n_init=1, budget=0) for seed in range(2))
    store.write_cell(plain, [run_record()], {}, 0.1)
    path = store.write_cell(crafted, [run_record()], {}, 0.1)
    _edit_metadata(path, code_version="9\x1b]0;T\x07")
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert (
        f"orthobench: note: 1 cell(s) computed by orthobench 9\\x1b]0;T\\x07: {crafted.id}"
        in result.stderr.splitlines()
    )
