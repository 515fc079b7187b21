"""The Python entry points mirroring the command line: :func:`run_suite` and :func:`load_results`.

``orthobench.run_suite(suite)`` does what ``orthobench run SUITE.yaml`` does -- run every cell not
yet stored, one Parquet file per cell, then ``DIR/report.html`` -- and returns a
:class:`RunResult` instead of printing and exiting; ``orthobench.load_results(DIR)`` reads the
rows ``orthobench report DIR`` reads. Bad input raises the error the command line prints as its
one line (an :class:`~orthobench.exceptions.OrthobenchError`, a
:class:`~orthobench.exceptions.SuiteError` for a bad suite), never ``SystemExit``.

The building blocks the command line shares with these functions (loading a suite file, choosing
the executor, refusing stored cells of another configuration, storing and reporting) live here,
and ``orthobench run`` calls them (:mod:`orthobench.cli`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orthobench.config.params import is_integer
from orthobench.exceptions import OrthobenchError, OrthobenchWarning

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from orthobench.execution import RunSummary
    from orthobench.executors import Executor
    from orthobench.results import ResultStore
    from orthobench.suite import Cell, Suite
    from orthobench.work import WorkUnit

__all__ = ["RunResult", "load_results", "run_suite"]

#: The most torch threads one unit may run with (``threads_per_cell``, ``--threads-per-cell``,
#: ``--threads``): above the hardware threads of the largest machines today (768 on two 192-core
#: CPUs), and far below the counts that crash the process rather than fail the unit (libgomp
#: cannot create 16384 threads; torch segfaults at 10^8).
MAX_THREADS = 1024


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What one :func:`run_suite` call did: the counts of its cells, where they are stored.

    Every cell of the suite is counted once: ``ok + skipped + failed`` is the suite's number of
    cells. A failed cell is not stored (a stored cell from an earlier run is kept); a rerun runs
    it again.

    Args:
        suite: The suite's name.
        results_dir: The results directory (absolute): ``runs/`` holds one Parquet file per
            stored cell; read the rows with :func:`load_results`.
        report: The HTML report of the suite's cells (``results_dir / "report.html"``), or
            ``None`` when ``run_suite(..., report=False)``.
        ok: Cells run and stored by this call.
        skipped: Cells already stored before this call (resume), not run again.
        failed: Cells that failed in this call.
        failures: ``(cell id, error)`` of each failed cell; their tracebacks are in
            :attr:`journal`.
        journal: The run journal, ``results_dir / "runs.jsonl"``.
        seconds: Wall-clock seconds the cells took.
    """

    suite: str
    results_dir: Path
    report: Path | None
    ok: int
    skipped: int
    failed: int
    failures: tuple[tuple[str, str], ...]
    journal: Path
    seconds: float


def run_suite(
    suite: str | os.PathLike[str] | Suite | Mapping[str, Any],
    *,
    output: str | os.PathLike[str] | None = None,
    device: str | None = None,
    workers: int = 1,
    executor: str | None = None,
    force: bool = False,
    progress: bool = True,
    threads_per_cell: int = 1,
    report: bool = True,
    jobs_per_gpu: int = 1,
) -> RunResult:
    """Run every cell of ``suite`` not yet stored, then write the report: ``orthobench run``.

    A rerun into the same ``output`` resumes: stored cells are skipped (counted in
    :attr:`RunResult.skipped`), and a cell that was interrupted continues after its last stored
    evaluation. Cells that fail are counted and listed in the result, not raised; the others are
    stored. The cell timeout is the suite's ``timeout_s``.

    Args:
        suite:
            A suite file (YAML), a :class:`~orthobench.Suite` from
            :func:`~orthobench.load_suite`, which appends the folder of a suite file to
            ``sys.path`` (after everything else, and left there), so a module next to it that the
            suite names is found, or the suite as a mapping, as YAML would give it
            (``{"name": "demo", "budget": 5, "tasks": ["hartmann6"], "optimizers": ["sobol"]}``),
            checked as a file is (a :class:`~orthobench.exceptions.SuiteError` names the field).
        output:
            The results directory [default: ``results/<suite name>`` in the working directory].
        device:
            ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` [default: the suite's, else ``auto``].
        workers:
            Parallel worker processes.
        executor:
            ``inline``, ``process`` or ``dask`` (a Dask ``LocalCluster`` of ``workers`` workers)
            [default: ``process`` when ``workers > 1``, else ``inline``].
        force:
            Rerun cells that are already stored (else stored cells with another configuration
            than the suite now gives them raise).
        progress:
            Show the progress line with an ETA on stderr.
        threads_per_cell:
            Torch threads per running cell, in every executor (results depend on it).
        report:
            Write ``results_dir / "report.html"`` of the suite's cells after the run.
        jobs_per_gpu:
            CUDA cells (and their evaluations) that share one GPU on Dask: each asks for a
            ``1/jobs_per_gpu`` share of a ``GPU`` worker resource
            (:class:`~orthobench.executors.DaskExecutor`); above 1 it needs ``executor="dask"``.

    Returns:
        The counts of cells run, already stored and failed, the results directory and the
        report's path, as a :class:`RunResult`.

    Raises:
        SuiteError: for a suite file that cannot be read or is not a valid suite, with the
            command line's one-line message naming the file and the field.
        OrthobenchError: for a device that is not there, a task or optimizer that cannot be
            built, stored cells of another configuration (without ``force``), a results
            directory another run is writing to, a ``report.html`` or report CSV there that is
            not a regular file (with ``report``; before any cell runs), a results directory the
            runner cannot write (how many cells are stored), ``workers`` above 1
            with ``executor="inline"``, or ``jobs_per_gpu`` above 1 with another executor than
            ``dask``. The message is the command line's, naming its options (``--workers``).
        ValueError: for ``workers``, ``threads_per_cell`` or ``jobs_per_gpu`` not an int or
            below 1, ``threads_per_cell`` above :data:`MAX_THREADS`, or an unknown ``executor``.
        orthobench.execution.RunInterrupted: on Ctrl-C (a ``KeyboardInterrupt``), with the
            summary of the cells stored so far; a rerun resumes.

    Example:
        .. code-block:: python

            import orthobench

            result = orthobench.run_suite("suites/demo.yaml", output="results/demo", workers=2)
            print(result.ok, result.skipped, result.failed, result.report)
            rows = orthobench.load_results(result.results_dir)
    """
    # Checked before any work: a float count reached torch.set_num_threads in every cell.
    for name, count in (
        ("workers", workers),
        ("threads_per_cell", threads_per_cell),
        ("jobs_per_gpu", jobs_per_gpu),
    ):
        if not is_integer(count) or count < 1:
            raise ValueError(f"`{name}` must be an int >= 1, but got {name}={count!r}.")
    if threads_per_cell > MAX_THREADS:
        raise ValueError(
            f"`threads_per_cell` must be at most {MAX_THREADS}, but got {threads_per_cell=}."
        )
    prepared = _prepare_run(
        suite,
        output=output,
        device=device,
        executor=executor,
        workers=workers,
        scheduler=None,
        scheduler_timeout=None,
        cell_timeout=None,
        force=force,
        report=report,
        jobs_per_gpu=jobs_per_gpu,
    )
    summary = _execute(
        prepared, force=force, show_progress=progress, threads_per_cell=threads_per_cell
    )
    store = prepared.store
    return RunResult(
        suite=prepared.suite.name,
        results_dir=store.root,
        report=_write_report(prepared) if report else None,
        ok=summary.count("ok"),
        skipped=summary.count("skipped"),
        failed=summary.count("failed"),
        failures=tuple((o.unit.id, o.error or "") for o in summary.failed),
        journal=store.runs_journal.path,
        seconds=summary.seconds,
    )


def load_results(*dirs: str | os.PathLike[str]) -> pd.DataFrame:
    """The stored evaluations of one or more results directories, one row each.

    The rows ``orthobench report`` reads: every cell file under ``DIR/runs/``. The columns are
    the fields of :class:`orthobench.results.RunRecord`, which documents each (README.md,
    "Results"): ``suite, cell_id, task, optimizer, seed, iteration, phase, q, batch, x, y,
    y_true, best_y, regret, is_outlier, fit_seconds, acq_seconds, eval_seconds, wall_seconds,
    status, fallback, info, constraints, feasible``. A file that is not an orthobench results
    file is skipped with an :class:`~orthobench.exceptions.OrthobenchWarning` naming it.

    Args:
        dirs:
            Results directories (the ``output`` of :func:`run_suite`, the ``-o`` of
            ``orthobench run``); their rows are concatenated (the ``suite`` column tells them
            apart).

    Returns:
        A ``pandas.DataFrame`` with those columns, empty when nothing is stored yet.

    Raises:
        OrthobenchError: for a directory that does not exist.
        ResultsError: for a results file of another schema version.

    Warns:
        OrthobenchWarning: for a directory without a ``runs/`` folder that holds Parquet files
            itself: the inner ``DIR/runs`` (which ``pandas.read_parquet`` reads) given for
            ``DIR``, whose rows are not read; for a directory given again (another spelling of
            one given before), which is read once; for a directory a run is writing now, whose
            rows are those of the cells it has stored so far.

    Example:
        .. code-block:: python

            rows = orthobench.load_results("results/demo")
            final = rows.groupby(["task", "optimizer", "seed"]).best_y.last()
    """
    from orthobench.results import ResultStore, load_runs, unique_dirs

    if not dirs:
        raise TypeError("load_results() needs at least one results directory.")
    dirs = unique_dirs(dirs)
    for d in dirs:
        if not Path(d).is_dir():
            raise OrthobenchError(f"{os.fspath(d)}: no such results directory.")
        ResultStore(d).warn_if_held(d, "the rows are those of the cells")
        if not (Path(d) / "runs").is_dir() and any(Path(d).glob("*.parquet")):
            warnings.warn(
                f"{os.fspath(d)}: no runs/ folder, but Parquet files of its own: an inner folder "
                f"of a results directory, which gives no rows; pass the results directory "
                f"({Path(os.path.abspath(d)).parent}) instead.",
                OrthobenchWarning,
                stacklevel=2,
            )
    return load_runs(dirs)


# The building blocks `orthobench run` (orthobench/cli.py) shares with run_suite; `probe` and
# `check` use the first three too.


def _results_dir(output: str | os.PathLike[str] | None, suite_name: str) -> Path:
    """``output``, or ``results/<suite name>`` without one; an empty ``output`` (``-o ''``) is
    an error, not the default: it is a path the user meant to give."""
    if output is None:
        return Path("results") / suite_name
    if not str(output).strip():
        raise OrthobenchError("-o/--output is empty; name a results directory or leave it out.")
    return Path(output)


def _make_executor(
    executor: str | None,
    workers: int,
    scheduler: str | None,
    scheduler_timeout: float | None,
    timeout: float | None,
    jobs_per_gpu: int = 1,
) -> Executor:
    """The executor ``executor`` names (``--executor``'s default: dask with a ``scheduler``,
    process when ``workers > 1``, else inline), with a ``scheduler`` checked before anything is
    written: one that is not there leaves no folder."""
    from orthobench.executors import check_scheduler, make_executor

    if executor == "inline" and workers > 1:
        # Inline runs one unit at a time in this process: N workers would be ignored silently.
        raise OrthobenchError(
            f"--workers {workers} needs --executor process or dask, but got --executor inline "
            "(it runs one unit at a time in this process)."
        )
    name = executor or ("dask" if scheduler is not None else "process" if workers > 1 else "inline")
    chosen = make_executor(
        name,
        workers=workers,
        timeout=timeout,
        scheduler=scheduler,
        scheduler_timeout=scheduler_timeout,
        jobs_per_gpu=jobs_per_gpu,
    )
    if scheduler is not None:
        check_scheduler(scheduler, scheduler_timeout)
    return chosen


#: How many changed units :func:`_refuse_changed` lists.
_LISTED = 20


def _refuse_changed(store: ResultStore, units: Sequence[WorkUnit], out_dir: Path) -> None:
    """Stop, listing the first :data:`_LISTED` on stderr, when stored units have another
    configuration than they have now."""
    import click

    changed = store.config_changes(units)
    if changed:
        for line in changed[:_LISTED]:
            click.echo(line, err=True)
        kind = units[0].kind
        listed = (
            "listed above"
            if len(changed) <= _LISTED
            else f"the first {_LISTED} listed above, {len(changed) - _LISTED} more not shown"
        )
        raise OrthobenchError(
            f"{len(changed)} stored {kind}(s) in {out_dir} have another configuration than the "
            f"suite now gives them ({listed}): rerun with --force to replace them, or write to "
            "another folder with -o."
        )


def _refuse_report_paths(root: Path) -> None:
    """Refuse, before any cell runs, a ``root / "report.html"`` or a report CSV beside it
    (``report.<table>.csv``, :func:`orthobench.report.html.csv_path`) that exists and is not a
    regular file (a folder) or is a symbolic link: the report written after the cells would fail
    on it (it writes no file of a results folder through a link)."""
    for path in [root / "report.html", *sorted(root.glob("report.*.csv"))]:
        if path.is_symlink() or (os.path.lexists(path) and not path.is_file()):
            what = "is a symbolic link" if path.is_symlink() else "exists and is not a regular file"
            raise OrthobenchError(
                f"cannot write the report to {path}: it {what}; remove or rename it, then rerun "
                "(nothing has run)."
            )


@dataclass(frozen=True)
class _PreparedRun:
    """A suite ready to run: its resolved device, its store and executor, and its cells."""

    suite: Suite
    device: torch.device
    store: ResultStore
    executor: Executor
    cells: list[Cell]


def _prepare_run(
    suite: str | os.PathLike[str] | Suite | Mapping[str, Any],
    *,
    output: str | os.PathLike[str] | None,
    device: str | None,
    executor: str | None,
    workers: int,
    scheduler: str | None,
    scheduler_timeout: float | None,
    cell_timeout: float | None,
    force: bool,
    report: bool,
    jobs_per_gpu: int = 1,
) -> _PreparedRun:
    """Load the suite (a file, a mapping, or one loaded), resolve the device, open the store
    (absolute: a task that changes the working directory cannot move it), choose the executor
    (its timeout: ``cell_timeout``, else the suite's ``timeout_s``), refuse a store another run
    holds (:meth:`~orthobench.results.ResultStore.refuse_if_held`), with ``report`` report paths
    it cannot write (:func:`_refuse_report_paths`) and, unless ``force``, stored cells of another
    configuration (:func:`_refuse_changed`)."""
    from orthobench.devices import resolve_device
    from orthobench.results import ResultStore
    from orthobench.suite import Suite, load_suite, parse_suite

    if isinstance(suite, Mapping):
        suite = parse_suite(suite)
    elif isinstance(suite, (str, os.PathLike)):
        suite = load_suite(suite)
    elif not isinstance(suite, Suite):
        raise TypeError(
            f"the suite must be a file path, a Suite or a mapping, but got {type(suite).__name__}."
        )
    # An empty device (`--device ''`) is refused by name, not taken for none given.
    resolved = resolve_device(suite.device if device is None else device)
    store = ResultStore(_results_dir(output, suite.name))
    runner = _make_executor(
        executor,
        workers,
        scheduler,
        scheduler_timeout,
        suite.timeout_s if cell_timeout is None else cell_timeout,
        jobs_per_gpu,
    )
    cells = suite.cells()
    store.refuse_if_held()  # before reading stored cells a run may be writing
    if report:
        _refuse_report_paths(store.root)
    if not force:
        _refuse_changed(store, cells, store.root)
    return _PreparedRun(suite, resolved, store, runner, cells)


def _execute(
    prepared: _PreparedRun, *, force: bool, show_progress: bool, threads_per_cell: int
) -> RunSummary:
    """Run the prepared suite's cells (:func:`orthobench.execution.run_suite`).

    Raises:
        OrthobenchError: for the runner's own I/O failing (a full disk), saying how many cells
            are stored (they stay stored).
        RunInterrupted: on Ctrl-C.
    """
    from orthobench.execution import run_suite as run_cells
    from orthobench.results import os_error_text

    store = prepared.store
    try:
        return run_cells(
            prepared.suite,
            store,
            device=prepared.device,
            executor=prepared.executor,
            force=force,
            show_progress=show_progress,
            threads_per_cell=threads_per_cell,
            evaluation_timeout=prepared.suite.evaluation_timeout_s,
        )
    except OSError as err:  # the runner's own I/O (a full disk): what is stored stays stored
        stored = store.stored()
        n_stored = sum(store.is_stored(cell, stored) for cell in prepared.cells)
        raise OrthobenchError(
            f"{os_error_text(err)}; {n_stored} of {len(prepared.cells)} cells are stored in "
            f"{store.root}; rerun the same command to resume once that is fixed."
        ) from err


def _write_report(prepared: _PreparedRun) -> Path:
    """Write ``DIR/report.html`` of the suite's cells (stored cells the suite no longer has are
    left out); returns its path."""
    from orthobench.report import build_report

    root = prepared.store.root
    return build_report([root], root / "report.html", cell_ids={c.id for c in prepared.cells})
