"""Command line: ``orthobench run | probe | check | report | list``.

Errors a user can cause (a bad suite, an unknown name, a missing device) and the runner's own
file-system errors (a full disk, a folder it cannot write) print one line, ``orthobench: error:
...``, and exit with code 2; ``--debug`` prints the traceback before that line, same exit code.

A reader that closes the pipe early (``orthobench list | head -1``) is no error: the rest of the
output is discarded and the command runs to its end with the exit code it would have had, so a
pipeline under ``set -o pipefail`` still reads ``check``'s verdict (0 passed, 1 failed) and
``run``'s (1 when a cell failed). Its results, report and journal do not depend on who reads.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orthobench.api import (
    MAX_THREADS,
    _make_executor,
    _refuse_changed,
    _refuse_report_paths,
    _results_dir,
)
from orthobench.cli_signals import sigterm_as_ctrl_c, stop_exit_code, stopped_by
from orthobench.cli_warnings import warnings_as_lines
from orthobench.exceptions import (
    ConfigError,
    OrthobenchError,
    SuiteError,
    one_line,
)
from orthobench.suite import Suite, load_suite

if TYPE_CHECKING:
    from orthobench.probe.states import ProbeUnit

EXIT_USAGE = 2
#: Seconds ``run --scheduler`` waits for the Dask scheduler to answer, unless told otherwise: a
#: scheduler that is not there is reported in seconds, not after Dask's 30.
SCHEDULER_TIMEOUT_S = 5.0


class _ClosedPipeTolerant:
    """A standard stream whose reader may go (``| head``): from the first write or flush that
    fails with ``EPIPE`` on, what is written is discarded and the stream's file descriptor points
    to :data:`os.devnull` (Python's docs, "Note on SIGPIPE"), so Python's own flush at exit
    writes nowhere instead of failing. Other errors are raised as they are."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: Any) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except OSError as err:
                self._reader_gone(err)
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except OSError as err:
                self._reader_gone(err)

    def _reader_gone(self, err: OSError) -> None:
        if err.errno != errno.EPIPE:  # BrokenPipeError included
            raise err
        self._gone = True
        # A stream without a descriptor (a test's capture) is only discarded from now on.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno, ...
        return getattr(self._stream, name)


@contextlib.contextmanager
def _closed_pipes_tolerated() -> Iterator[None]:
    """While the block runs, stdout and stderr are :class:`_ClosedPipeTolerant`; what they hold
    is flushed through them before they are put back."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (None if s is None else _ClosedPipeTolerant(s) for s in saved)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        sys.stdout, sys.stderr = saved


class _Group(click.Group):
    """Turns :class:`OrthobenchError` and ``OSError`` into exit code 2 and one line on stderr,
    whatever the message holds: line breaks escaped, cut to twice
    :data:`~orthobench.exceptions.MESSAGE_LIMIT` characters (room for a file path and a field
    before the reason); an ``OSError`` as ``<path>: <reason>``; under ``--debug`` the traceback
    comes first. A Ctrl-C that no command reports itself (before the cells run, while the report
    is written) exits 130 with one line, not click's ``Aborted!`` and 1, the code of failed
    cells. A closed stdout or stderr pipe is no error (:class:`_ClosedPipeTolerant`)."""

    def invoke(self, ctx: click.Context):  # noqa: ANN201
        with _closed_pipes_tolerated(), sigterm_as_ctrl_c():
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context):  # noqa: ANN202
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(
                f"orthobench: {stopped_by()}; what is stored stays stored: rerun the same "
                "command to resume.",
                err=True,
            )
            ctx.exit(stop_exit_code())
        except (OrthobenchError, OSError) as err:
            # OSError: the runner's own file I/O (a full disk, a path too long), which no
            # command has a better message for; a cell's I/O errors fail only that cell.
            if ctx.obj and ctx.obj.get("debug"):  # the traceback added, the exit code kept
                click.echo(traceback.format_exc(), err=True, nl=False)
            from orthobench.exceptions import MESSAGE_LIMIT, one_line
            from orthobench.results import os_error_text

            text = os_error_text(err) if isinstance(err, OSError) else str(err)
            click.echo(f"orthobench: error: {one_line(text, 2 * MESSAGE_LIMIT)}", err=True)
            ctx.exit(EXIT_USAGE)


def _suite_options(command):
    """``--output`` and ``--device``, shared by the commands that take a suite."""
    command = click.option(
        "--device",
        default=None,
        help="auto, cpu, cuda or cuda:N [default: the suite's, else auto].",
    )(command)
    return click.option(
        "--output",
        "-o",
        type=click.Path(file_okay=False),
        default=None,
        help="Results directory [default: results/<suite name>].",
    )(command)


def _check_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A time limit (``--cell-timeout``, ``--timeout``) bounded as the suite's ``timeout_s`` is (a
    finite number of seconds)."""
    from orthobench.suite import MAX_TIMEOUT_S

    if value is not None and not value <= MAX_TIMEOUT_S:
        raise click.BadParameter(f"must be at most {MAX_TIMEOUT_S:g} seconds, but got {value:g}.")
    return value


_quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress display.")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="orthobench")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """orthobench: benchmark Bayesian optimizers and the noise of their acquisition estimates."""
    ctx.obj = {"debug": debug}


def _executor_options(command):
    """``--workers``, ``--executor``, ``--scheduler`` and ``--scheduler-timeout``, shared by the
    commands that run units of work."""
    options = [
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Parallel worker processes.",
        ),
        click.option(
            "--executor",
            type=click.Choice(["inline", "process", "dask"]),
            default=None,
            help="[default: dask with --scheduler, process when --workers > 1, else inline].",
        ),
        click.option(
            "--scheduler",
            default=None,
            help="Dask scheduler address (implies --executor dask); a LocalCluster otherwise.",
        ),
        click.option(
            "--scheduler-timeout",
            type=click.FloatRange(min=0, min_open=True),
            callback=_check_timeout,  # nan passed the range, inf overflowed the socket's
            default=SCHEDULER_TIMEOUT_S,
            show_default=True,
            metavar="SECONDS",
            help="How long to wait for the --scheduler to answer before giving up.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _timeout_option(flag: str, unit: str, units: str, default: str):
    """The option of a per-unit time limit in seconds (``unit``: what it stops)."""
    return click.option(
        flag,
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        callback=_check_timeout,
        metavar="SECONDS",
        help=f"Stop a {unit} running longer and store it as failed (inline: {units} run in a "
        f"worker process) [default: {default}].",
    )


def _workers_text(executor, scheduler: str | None, to_run: int, units: str) -> str:
    """How many workers run the units, and why fewer than ``--workers`` (``to_run``: at most
    that many units run, named ``units``)."""
    if scheduler is not None:
        return f"the workers of {scheduler}"
    if executor.workers > max(to_run, 1):
        return f"{max(to_run, 1)} worker(s): --workers {executor.workers} capped at the {units}"
    return f"{executor.workers} worker(s)"


@cli.command()
@click.argument("suite_file", type=click.Path(dir_okay=False))
@_suite_options
@_executor_options
@click.option(
    "--threads-per-cell",
    type=click.IntRange(min=1, max=MAX_THREADS),
    default=1,
    show_default=True,
    help="Torch threads per running cell, in every executor (results depend on it).",
)
@click.option(
    "--jobs-per-gpu",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="CUDA cells (and their evaluations) sharing one GPU on Dask: each asks for 1/N of a GPU "
    "worker resource; start GPU workers with --resources GPU=1 --nthreads N (needs --executor "
    "dask).",
)
@_timeout_option("--cell-timeout", "cell", "cells", "the suite's timeout_s, else none")
@click.option("--force", is_flag=True, help="Rerun cells that are already stored.")
@_quiet_option
@warnings_as_lines()  # a damaged stored cell, a cell that never finished: one line each
def run(
    suite_file: str,
    output: str | None,
    device: str | None,
    workers: int,
    executor: str | None,
    scheduler: str | None,
    scheduler_timeout: float,
    threads_per_cell: int,
    jobs_per_gpu: int,
    cell_timeout: float | None,
    force: bool,
    quiet: bool,
) -> None:
    """Run every cell of SUITE_FILE not yet stored, then write DIR/report.html.

    Exit code 0 when every cell is stored, 1 when a cell failed (the others are stored), 2 for a
    bad suite or setting, a scheduler that does not answer, or a file the runner cannot write
    (one line naming it), 130 on Ctrl-C and 143 on SIGTERM (a rerun resumes: stored cells and
    the evaluations of unfinished cells are kept). The report shows the suite's cells only; ``orthobench report
    DIR`` shows every cell stored in DIR.
    """
    from orthobench.api import _execute, _prepare_run, _write_report
    from orthobench.execution import RunInterrupted, evaluation_workers

    prepared = _prepare_run(
        suite_file,
        output=output,
        device=device,
        executor=executor,
        workers=workers,
        scheduler=scheduler,
        scheduler_timeout=scheduler_timeout,
        cell_timeout=cell_timeout,
        force=force,
        report=True,
        jobs_per_gpu=jobs_per_gpu,
    )
    suite, store, runner, cells = prepared.suite, prepared.store, prepared.executor, prepared.cells
    out_dir = store.root  # absolute: a task that changes the working directory cannot move it
    n_cells = len(cells)
    stored = None if force else store.stored()
    running = [c for c in cells if force or not store.is_stored(c, stored)]
    # A cell with q > 1 points per step holds a worker per evaluation it runs at once.
    held = [evaluation_workers(runner, c) for c in running]
    slots = sum(held)
    parallel = [c for c, n in zip(running, held, strict=True) if n > 1]
    batch = ""
    if any(c.asynchronous for c in parallel):
        batch = ", q evaluations kept running"
    elif parallel:
        batch = ", the evaluations of a BO step in parallel"
    click.echo(
        f"suite {suite.name}: {n_cells} cells ({len(running)} to run) on {prepared.device} "
        f"({runner.description}, {_workers_text(runner, scheduler, slots, 'cells to run')}{batch}, "
        f"{threads_per_cell} thread(s) per cell) "
        f"-> {out_dir}",
        err=True,
    )
    try:
        summary = _execute(
            prepared, force=force, show_progress=not quiet, threads_per_cell=threads_per_cell
        )
    except RunInterrupted as stop:
        done = stop.summary
        click.echo(
            f"orthobench: {stopped_by()}: {done.count('ok') + done.count('skipped')} of "
            f"{n_cells} cells stored ({done.count('ok')} by this run); rerun the same command to "
            "resume.",
            err=True,
        )
        sys.exit(stop_exit_code())
    # Stored, so counted as run, yet without a value: said, not left for the report to show.
    not_ok = ", ".join(
        f"{n} evaluation(s) {'timed out' if status == 'timeout' else status}"
        for status, n in sorted(summary.evaluations_not_ok().items())
    )
    done = (
        f"{summary.count('ok')} run, {summary.count('skipped')} already stored, "
        f"{summary.count('failed')} failed in {summary.seconds:.1f} s"
        f"{not_ok and f'; {not_ok}'}; results: {store.runs_dir}"
    )
    suite_ids = {cell.id for cell in cells}
    try:
        with warnings_as_lines():
            report = _write_report(prepared)
    except OrthobenchError:  # a full disk, say: the cells are stored whatever the report does
        click.echo(f"{done}; report: not written")
        raise
    click.echo(f"{done}; report: {report}")
    left_out = _left_out(store.runs_journal.entries(), suite.name, suite_ids)
    if left_out:
        click.echo(
            f"orthobench: note: the report leaves out cells journaled in {out_dir}: {left_out}; "
            f"`orthobench report {out_dir}` shows every stored cell.",
            err=True,
        )
    _exit_on_failures(summary, store.runs_journal.path)


def _left_out(entries: list[dict[str, Any]], suite_name: str, suite_ids: set[str]) -> str:
    """The journaled cells not in ``suite_ids`` (those the report of the suite leaves out), by
    the suite their last configuration names, as ``2 that suite S no longer has (a, b); 3 of
    suite T (c, d, e)``; "" when there are none.

    A cell journaled without its configuration (one that only failed) or a suite name is of no
    known suite; ids and names print escaped (:func:`one_line`), never as control sequences."""
    suites: dict[str, str | None] = {}
    for entry in entries:
        cell_id = entry.get("cell_id")
        if cell_id is not None and cell_id not in suite_ids:
            config = entry.get("config")
            known = config.get("suite") if isinstance(config, dict) else None
            suites[cell_id] = (known if isinstance(known, str) else None) or suites.get(cell_id)
    groups: dict[str, list[str]] = {}
    for cell_id, name in sorted(suites.items()):
        if name == suite_name:
            group = f"that suite {suite_name} no longer has"
        else:
            group = (
                f"of suite {one_line(name)}" if name else f"that suite {suite_name} does not have"
            )
        groups.setdefault(group, []).append(one_line(cell_id))
    return "; ".join(
        f"{len(ids)} {group} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
        for group, ids in groups.items()
    )


def _exit_on_failures(summary, journal: Path) -> None:
    """List the failed units and exit 1, if any failed."""
    if summary.failed:
        for outcome in summary.failed:
            click.echo(f"failed: {outcome.unit.id}: {outcome.error}", err=True)
        click.echo(f"tracebacks are stored in {journal}", err=True)
        sys.exit(1)


_threads_option = click.option(
    "--threads",
    type=click.IntRange(min=1, max=MAX_THREADS),
    default=1,
    show_default=True,
    help="Torch threads while a probe state runs (its values depend on it; recorded per row).",
)


def _probe_options(command):
    """The options of the commands that run a suite's probe section."""
    for option in (
        _quiet_option,
        click.option("--force", is_flag=True, help="Recompute stored probe states."),
        _timeout_option("--timeout", "probe state", "states", "none"),
        _threads_option,
        _executor_options,
        _suite_options,
    ):
        command = option(command)
    return command


def _probe_section(suite_file: str) -> tuple[Suite, list[ProbeUnit]]:
    """The suite of ``suite_file`` and its probe units, refused in one line naming the file
    without a probe section or with units that cannot be made (a TPE estimator without ``q =
    1``: :func:`~orthobench.probe.runner.probe_units`). What needs the tasks built (a
    constrained task's refusals) is refused when the probe plans, as ``run``'s build checks."""
    from orthobench.probe.runner import probe_units

    suite = load_suite(suite_file)
    if suite.probe is None:
        raise SuiteError(
            suite_file, "probe", "missing; `probe` and `check` need a probe section in the suite."
        )
    try:
        return suite, probe_units(suite.name, suite.probe)
    except ConfigError as err:
        raise SuiteError(suite_file, err.field, err.reason) from None


def _probe_suite(
    suite: Suite,
    units: list[ProbeUnit],
    output: str | None,
    device: str | None,
    workers: int,
    executor: str | None,
    scheduler: str | None,
    scheduler_timeout: float,
    threads: int,
    timeout: float | None,
    force: bool,
    quiet: bool,
    report: bool = False,
):
    """Run the probe ``units`` of ``suite`` (:func:`_probe_section`); returns the rows,
    the run's summary and the store, or exits 130 on Ctrl-C.

    States with another configuration than they were stored with stop the command, listed, unless
    ``force``; states that failed are listed, the others stored, and the caller exits 1 after its
    output (:func:`_exit_on_failures`). With ``report`` (the caller writes ``DIR/report.html``
    after the states), report paths it could not write are refused first.
    """
    from orthobench.devices import resolve_device
    from orthobench.execution import RunInterrupted
    from orthobench.probe.runner import run_probe
    from orthobench.results import ResultStore

    resolved = resolve_device(suite.device if device is None else device)
    # Absolute now: a task that changes the working directory must not move the report.
    store = ResultStore(_results_dir(output, suite.name))
    out_dir = store.root
    runner = _make_executor(executor, workers, scheduler, scheduler_timeout, timeout)
    store.refuse_if_held()
    if report:
        _refuse_report_paths(out_dir)
    if not force:
        _refuse_changed(store, units, out_dir)
    click.echo(
        f"probe {suite.name}: {len(units)} state(s) on {resolved} ({runner.description}, "
        f"{_workers_text(runner, scheduler, len(units), 'states')}, {threads} thread(s)) "
        f"-> {store.probe_dir}",
        err=True,
    )
    try:
        frame, summary = run_probe(
            suite.name,
            suite.probe,
            out_dir,
            device=resolved,
            executor=runner,
            threads=threads,
            force=force,
            show_progress=not quiet,
        )
    except RunInterrupted as stop:
        done = stop.summary
        click.echo(
            f"orthobench: {stopped_by()}: {done.count('ok') + done.count('skipped')} of "
            f"{len(units)} probe states stored ({done.count('ok')} by this run); rerun the same "
            "command to resume.",
            err=True,
        )
        sys.exit(stop_exit_code())
    click.echo(
        f"probe {suite.name}: {summary.count('ok')} probed, {summary.count('skipped')} already "
        f"stored, {summary.count('failed')} failed in {summary.seconds:.1f} s",
        err=True,
    )
    return frame, summary, store


@cli.command()
@click.argument("suite_file", type=click.Path(dir_okay=False))
@_probe_options
@warnings_as_lines()  # a state computed at another thread count, one that never finished
def probe(suite_file: str, **options: Any) -> None:
    """Run the probe section of SUITE_FILE: acquisition variance, top-1 agreement, flip rate.

    Probe states run as cells do: on any executor, each stored as it finishes, a rerun computing
    only what is missing (a stored state's rows are kept when estimators or budgets are added).
    Exit code 0 when every state is stored, 1 when a state failed (the others are stored), 2 for a
    bad suite or setting, 130 on Ctrl-C, 143 on SIGTERM. With no state of the suite stored (every one failed), no
    report is written.
    """
    frame, summary, store = _probe_suite(*_probe_section(suite_file), **options, report=True)
    # Imported once the probe ran (seconds of plotting and statistics imports): a directory in
    # use is refused at once.
    from orthobench.probe.tables import format_summary
    from orthobench.report import build_report
    from orthobench.report.data import probe_row_keys

    click.echo(format_summary(frame))
    if frame.empty:  # every state failed: a report of no rows would only raise "no results"
        click.echo(
            f"probe rows: none in {store.probe_dir}; report: not written (no state of the "
            "suite is stored)"
        )
    else:
        # The suite's rows only: a stored state keeps the rows of estimators, budgets and batch
        # sizes the suite dropped.
        rows = set(probe_row_keys(frame))
        report = build_report([store.root], store.root / "report.html", probe_rows=rows)
        click.echo(f"probe rows (with raw per-rebuild values): {store.probe_dir}; report: {report}")
    _exit_on_failures(summary, store.probe_journal.path)


@cli.command()
@click.argument("suite_file", type=click.Path(dir_okay=False))
@click.option(
    "--thresholds",
    "-t",
    type=click.Path(dir_okay=False),
    default=None,
    help="Thresholds file [default: <suite stem>.thresholds.yaml beside the suite].",
)
@_probe_options
@warnings_as_lines()
def check(suite_file: str, thresholds: str | None, **options: Any) -> None:
    """Run the probe of SUITE_FILE and exit 1 when a threshold fails or a state could not be
    probed (the CI regression gate).

    Exit code 0 when every rule holds on every state, 1 when one fails or a state failed, 2 for a
    bad suite, thresholds file or setting, 130 on Ctrl-C, 143 on SIGTERM. A reader that closes the output early
    (``| head``) does not change it.
    """
    from orthobench.check import check_rules_match, evaluate, format_results, load_thresholds

    # The suite first: a missing suite is named, not the thresholds file beside it.
    suite, units = _probe_section(suite_file)
    path = (
        Path(thresholds)
        if thresholds
        else Path(suite_file).with_name(Path(suite_file).stem + ".thresholds.yaml")
    )
    rules = load_thresholds(path)
    check_rules_match(rules, units, path)
    frame, summary, store = _probe_suite(suite, units, **options)
    results = evaluate(frame, rules)
    click.echo(format_results(results))
    failed = sum(not r.passed for r in results)
    states = summary.count("failed")
    unprobed = f", {states} state(s) not probed" if states else ""
    click.echo(f"check: {len(results) - failed} passed, {failed} failed{unprobed} ({path})")
    _exit_on_failures(summary, store.probe_journal.path)
    if failed:
        sys.exit(1)


@cli.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="HTML file [default: DIR/report.html of the first DIR].",
)
@click.option("--title", default=None, help="Report title.")
@click.option(
    "--reference",
    default=None,
    help="Optimizer label the final values are tested against [default: the suite's first GP "
    "optimizer, else its first optimizer].",
)
@click.option(
    "--baseline",
    default=None,
    help="One of DIRS: compare the other DIRS with it cell by cell, one verdict per optimizer.",
)
def report(
    dirs: tuple[str, ...],
    output: str | None,
    title: str | None,
    reference: str | None,
    baseline: str | None,
) -> None:
    """Build an HTML report from stored results in one or more DIRS (tables also as CSV beside it).

    A results file that cannot be read is skipped with a warning naming it; when the cells were
    computed by several orthobench versions, the cells of each are listed.
    """
    from orthobench.report import build_report
    from orthobench.results import ResultStore

    with warnings_as_lines():
        path = build_report(
            dirs,
            output or Path(dirs[0]) / "report.html",
            title,
            reference=reference,
            baseline=baseline,
        )
    versions: dict[str, list[str]] = {}
    for d in dirs:
        for version, cells in ResultStore(d).code_versions().items():
            versions.setdefault(version, []).extend(cells)
    if len(versions) > 1:  # results of several code versions side by side: say which is which
        for version, cells in sorted(versions.items()):
            shown = ", ".join(map(one_line, cells[:3])) + (", ..." if len(cells) > 3 else "")
            click.echo(
                f"orthobench: note: {len(cells)} cell(s) computed by orthobench "
                f"{one_line(version)}: {shown}",
                err=True,
            )
    click.echo(str(path))


@cli.command(name="list")
def list_() -> None:
    """List registered tasks and optimizers with their parameters."""
    from orthobench.registry import OPTIMIZERS, TASKS

    for registry in (TASKS, OPTIMIZERS):
        click.echo(f"{registry.kind}s:")
        names = registry.names()
        width = max(map(len, names), default=0)  # tension-compression-string's 26, not 14
        for name in names:
            try:
                entry = registry.resolve(name)
            except OrthobenchError as err:
                click.echo(f"  {name:<{width}} (unavailable: {err})")
                continue
            params = ", ".join(
                k if d is inspect.Parameter.empty else f"{k}={d!r}" for k, d in entry.params.items()
            )
            click.echo(f"  {name:<{width}} {entry.description}")
            if params:
                click.echo(f"  {'':<{width}} params: {params}")


def _attach_data_commands() -> None:
    from orthobench.data_cli import data

    cli.add_command(data)


_attach_data_commands()


def main() -> None:
    cli(prog_name="orthobench")
