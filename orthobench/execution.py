"""Executors: run cells inline or in a local process pool, storing each as it finishes.

Executors never know what a cell does (they call :func:`orthobench.loop.run_cell`), and the BO
loop never knows how it is executed. The parent process (the Dask client) writes the results,
one atomic file per finished cell; the process running a cell appends each finished evaluation to
that cell's evaluation journal, so a killed run loses at most the evaluations in flight and a
rerun completes only what is missing. (With an external Dask scheduler the workers may not see
the results directory: there, resume is per cell.)
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from orthobench.exceptions import OrthobenchError
from orthobench.loop import ProgressCallback, make_task, run_cell
from orthobench.progress import Progress
from orthobench.results import EvaluationJournal, ResultStore, RunRecord, run_metadata
from orthobench.suite import Cell, Suite

EXECUTORS = ("inline", "process", "dask")


@dataclass
class CellOutcome:
    cell: Cell
    status: Literal["ok", "failed", "skipped"]
    seconds: float = 0.0
    error: str | None = None


@dataclass
class RunSummary:
    outcomes: list[CellOutcome] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def failed(self) -> list[CellOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def _execute(
    cell: Cell,
    device: str,
    on_evaluation: ProgressCallback | None = None,
    journal: EvaluationJournal | None = None,
) -> tuple[list[RunRecord] | None, str | None, str, float]:
    """Run a cell, catching its error: ``(records or None, error or None, traceback, seconds)``."""
    start = time.perf_counter()
    try:
        records = run_cell(cell, device, on_evaluation, journal)
    except Exception as err:  # noqa: BLE001 -- a failing cell must not stop the suite; its error is stored
        return (
            None,
            f"{err.__class__.__name__}: {err}",
            traceback.format_exc(),
            time.perf_counter() - start,
        )
    return records, None, "", time.perf_counter() - start


def _init_worker(threads: int) -> None:
    # Workers share the machine's cores: without this each one would start as many threads.
    torch.set_num_threads(threads)


def _evaluations(cell: Cell) -> int:
    return cell.n_init + cell.budget


def run_suite(
    suite: Suite,
    store: ResultStore,
    *,
    device: torch.device,
    executor: str = "inline",
    workers: int = 1,
    force: bool = False,
    show_progress: bool = True,
    scheduler: str | None = None,
) -> RunSummary:
    """Run every cell of ``suite`` that ``store`` does not hold yet (all of them with ``force``).

    Args:
        executor: ``inline`` (this process), ``process`` (a local pool of ``workers`` processes) or
            ``dask`` (the Dask cluster at ``scheduler``, else a ``LocalCluster`` of ``workers``).
        scheduler: Address of an existing Dask scheduler (``dask`` only).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"Unknown executor {executor!r}; choose one of {EXECUTORS}.")
    if workers < 1:
        raise ValueError(f"`workers` must be >= 1, but got {workers=}.")
    start = time.perf_counter()
    summary = RunSummary()
    stored = store.stored()
    todo: list[Cell] = []
    for cell in suite.cells():
        if not force and store.is_stored(cell, stored):
            summary.outcomes.append(CellOutcome(cell, "skipped"))
        else:
            todo.append(cell)
    # Build each task to run once before any cell does: a task whose data or model is missing
    # raises its one-line error here, not in every cell after the others ran.
    for cell in {c.task.label: c for c in todo}.values():
        make_task(cell)
    journals = {cell.id: store.evaluation_journal(cell) for cell in todo}
    if force:
        for journal in journals.values():
            journal.discard()
    progress = Progress(
        sum(map(_evaluations, todo)), label=f"[{suite.name}]", enabled=show_progress and bool(todo)
    )
    metadata = run_metadata(str(device))

    def finish(
        cell: Cell, records: list[RunRecord] | None, error: str | None, tb: str, seconds: float
    ) -> None:
        if records is not None:
            store.write_cell(cell, records, metadata, seconds)
            summary.outcomes.append(CellOutcome(cell, "ok", seconds))
            progress.message(f"  done   {cell.id} ({seconds:.1f} s)")
        else:
            store.record_failure(cell, error or "", tb, seconds)
            summary.outcomes.append(CellOutcome(cell, "failed", seconds, error))
            progress.message(f"  FAILED {cell.id}: {error}")

    try:
        if executor == "dask":
            _run_dask(todo, device, workers, scheduler, progress, finish, journals)
        elif executor == "inline" or workers == 1 or len(todo) <= 1:
            for cell in todo:
                finish(cell, *_execute(cell, str(device), progress.advance, journals[cell.id]))
        else:
            _run_pool(todo, str(device), workers, progress, finish, journals)
    finally:
        progress.close()
    summary.seconds = time.perf_counter() - start
    return summary


def _run_pool(
    cells: Sequence[Cell],
    device: str,
    workers: int,
    progress: Progress,
    finish: Any,
    journals: dict[str, EvaluationJournal],
) -> None:
    threads = max(1, (os.cpu_count() or 1) // workers)
    # spawn, not fork: forking a process that already initialized torch/OpenMP (or CUDA) can hang.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_init_worker, initargs=(threads,)
    ) as pool:
        pending: dict[Future, Cell] = {
            pool.submit(_execute, cell, device, None, journals[cell.id]): cell for cell in cells
        }
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    cell = pending.pop(future)
                    progress.advance(_evaluations(cell))
                    finish(cell, *future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def _run_dask(
    cells: Sequence[Cell],
    device: torch.device,
    workers: int,
    scheduler: str | None,
    progress: Progress,
    finish: Any,
    journals: dict[str, EvaluationJournal],
) -> None:
    """Submit every cell to Dask; this process (the client) stores each cell as it finishes.

    A lost worker loses only its cell in flight (Dask retries it elsewhere); a killed client loses
    the cells in flight and nothing stored (on a ``LocalCluster``, the evaluations of the cells in
    flight are journaled too). CUDA cells ask for one ``GPU`` worker resource each,
    so start GPU workers with ``--resources GPU=1`` (per GPU).
    """
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as err:
        raise OrthobenchError(
            "--executor dask needs the dask extra: pip install 'orthobench[dask]'."
        ) from err
    cluster = None
    if scheduler is None:
        gpu = {"GPU": 1} if device.type == "cuda" else None
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            resources=gpu,
            dashboard_address=None,
        )
    client = Client(scheduler or cluster)
    try:
        resources = {"GPU": 1} if device.type == "cuda" else None
        futures = {
            client.submit(
                _execute,
                cell,
                str(device),
                None,
                # An external cluster's workers may not see this results directory.
                journals[cell.id] if cluster is not None else None,
                key=f"orthobench-{cell.id}-{cell.config_hash}",
                pure=False,
                resources=resources,
            ): cell
            for cell in cells
        }
        for future in as_completed(futures):
            cell = futures[future]
            progress.advance(_evaluations(cell))
            finish(cell, *future.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
