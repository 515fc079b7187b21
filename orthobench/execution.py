"""The runner: units of work into a results store, on any executor, storing each as it finishes.

:func:`run_units` runs the jobs of any units (:class:`~orthobench.work.WorkUnit`: the cells of
:func:`run_suite`, the probe states of :func:`orthobench.probe.runner.run_probe`) on an
:class:`~orthobench.executors.Executor` and stores each through the
:class:`~orthobench.results.BaseStore` as it finishes; the executors never know what a job
computes, and the BO loop never knows how it is executed. Only this process (the Dask client)
writes results, one atomic file per finished unit; the process running a cell appends each
finished evaluation to that cell's evaluation journal, so a killed run loses at most the
evaluations in flight (of a probe state: the state in flight) and a rerun completes only what is
missing (docs/design.md, "Layers and data flow").

Execution settings travel in each job, never in globals, and are the same for every executor:

- ``threads_per_cell`` (a probe's ``threads``): torch's thread count while the unit runs (set
  around it, restored after it), recorded in its metadata and on each line of a cell's
  evaluation journal (:class:`~orthobench.results.EvaluationJournal`). BLAS reductions depend on it, so the same unit
  and thread count give identical values inline, in the pool and on Dask (docs/design.md,
  "Thread counts"). A cell is never stored as a mix of two counts: one resumed at another count
  than its journal records is recomputed from the start, with a warning (:func:`_recount`).
- the executor's ``timeout``: seconds a unit attempt may run before its process is stopped and
  the unit stored as failed (a resumed cell's clock starts again).
- ``evaluation_timeout``: seconds one evaluation may run before it is stopped and recorded with
  ``status="timeout"``, the cell going on (:func:`orthobench.deadlines.evaluation_deadline`); recorded
  in the cell's metadata, and not enforced on Dask (a warning says so).

A unit's stored ``seconds`` (its file's metadata, its journal entry) are its compute time: those
of the attempt that finished it, and, for a cell resumed from its evaluation journal, the running
time of the evaluations it replayed (:meth:`CellJob.stored_seconds`).

What ends a unit, and what ends the run:

- An exception of any kind raised while a unit runs -- ``SystemExit`` and ``KeyboardInterrupt``
  included -- fails that unit (its error and traceback are journaled) and the run goes on; so does
  a worker process that dies or a unit past the timeout (the executors say how).
- Ctrl-C stops the run: :class:`RunInterrupted` (a ``KeyboardInterrupt``) carries the summary of
  the units finished so far; pool workers are killed.
- Inline, a unit that ends the process itself (``os._exit``, a kill, a crash) ends the run, with
  its exit status. The unit stays named in the results directory's :data:`RUNNING_MARKER`, so the
  next run journals it as failed ("never finished"), says so and runs it again.
- Tasks and optimizers are built once in the runner's process before any cell runs
  (:func:`orthobench.loop.check_buildable`): there an exception of any kind, a factory that
  builds something else, or a constructor past the timeout (else
  :data:`orthobench.loop.BUILD_TIMEOUT_S`) stops the run before any cell, with one line naming the
  component.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import torch

from orthobench.exceptions import OrthobenchWarning, RegistryError, describe_error, one_line
from orthobench.executors import Executor, InlineExecutor, Job, JobResult
from orthobench.executors._evaluations import make_evaluations, one_at_a_time
from orthobench.loop import (
    ProgressCallback,
    check_buildable,
    evaluates_in_parallel,
    resumed_clock,
    run_cell,
)
from orthobench.progress import Progress
from orthobench.results import BaseStore, EvaluationJournal, RunRecord, open_own, run_metadata
from orthobench.suite import Cell, Suite
from orthobench.warmup import warm_up
from orthobench.work import CELL, ID_FIELDS, WorkUnit, warn_thread_counts

#: The file in a results directory that names the unit an inline run is running (removed when
#: the unit ends, however it ends, unless its process ends with it: :meth:`Run.running`).
RUNNING_MARKER = ".running"
#: The largest :data:`RUNNING_MARKER` read, far above what a run writes (a unit's id, hash, PID
#: and suite name): a larger one was not written by orthobench.
_MARKER_BYTES = 1 << 16

#: What a run's plan gives: the jobs to run and the units already stored.
Plan = Callable[[], tuple[list[Job], list[WorkUnit]]]


@dataclass
class Outcome:
    """What became of one unit in a run; ``not_ok``: of a cell it stored, how many of its
    evaluations have each status other than ``ok`` (``timeout``, ``invalid``)."""

    unit: WorkUnit
    status: Literal["ok", "failed", "skipped"]
    seconds: float = 0.0
    error: str | None = None
    not_ok: Counter[str] = field(default_factory=Counter)


@dataclass
class RunSummary:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    def evaluations_not_ok(self) -> Counter[str]:
        """How many evaluations of the cells this run stored have each status other than
        ``ok``: their cells count as run, yet their ``y`` is NaN."""
        return sum((o.not_ok for o in self.outcomes), Counter())

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`run_units`; ``summary`` holds the units finished before it."""

    def __init__(self, summary: RunSummary) -> None:
        super().__init__(f"interrupted after {summary.count('ok')} stored unit(s)")
        self.summary = summary


def _recount(cell: Cell, journal: EvaluationJournal) -> bool:
    """Whether ``cell`` must be recomputed from the start, with a warning: its evaluation journal
    records another thread count than the run's (``journal.threads``).

    A resume would store evaluations and proposals computed at two counts, equal to neither
    uninterrupted run. A journal of the run's count, or one written before the count was
    recorded, is resumed; a stored cell is reused at any count, its metadata recording its own.
    """
    others = sorted(journal.counts() - {journal.threads})
    if others:
        warn_thread_counts(
            cell,
            others,
            journal.threads,
            stored=f"evaluation journal ({len(journal.read())} evaluation(s)) was",
            redo=f"the cell is recomputed from the start with {journal.threads} (values depend "
            "on the count) and its journal discarded when it starts",
            option="--threads-per-cell",
            keep="resume from the journal instead",
            stacklevel=5,
        )
    return bool(others)


@dataclass(frozen=True)
class CellJob(Job):
    """A cell, run by :func:`orthobench.loop.run_cell` (its progress: evaluations).

    ``evaluation_workers`` of its evaluations run at once (:meth:`Executor.evaluation_workers`),
    where ``evaluations`` says (:func:`~orthobench.executors._evaluations.make_evaluations`);
    the job counts as that many of its executor's workers (:attr:`slots`). With ``restart``, the
    journal is discarded as the cell starts (its evaluations ran at another thread count:
    :func:`_recount`), so the cell runs from the start. ``journaled`` holds the ``(iteration,
    wall_seconds)`` of the evaluations its journal held when the run planned it: those the cell
    replays (:meth:`stored_seconds`).
    """

    unit: Cell
    device: str
    threads: int
    journal: EvaluationJournal | None
    evaluation_timeout: float | None
    evaluations: str = "inline"
    evaluation_workers: int = 1
    stack_evaluations: bool = False
    jobs_per_gpu: int = 1
    restart: bool = False
    journaled: frozenset[tuple[int, float]] = frozenset()

    progress_unit: ClassVar[str] = "evaluations"

    @property
    def size(self) -> int:
        return self.unit.n_init + self.unit.q * self.unit.budget

    @property
    def slots(self) -> int:
        return self.evaluation_workers

    @property
    def stacks(self) -> bool:
        """Whether a step's evaluations run as one stack: asked (``stack_evaluations``) and run
        one after the other (:func:`~orthobench.executors._evaluations.one_at_a_time`)."""
        return self.stack_evaluations and one_at_a_time(self.evaluations, self.evaluation_workers)

    def run(self, on_progress: ProgressCallback | None) -> list[RunRecord]:
        if self.restart and self.journal is not None:
            self.journal.discard()
        warm_up(self.unit, torch.device(self.device))  # before the first step's clock starts
        evaluations = make_evaluations(
            self.evaluations,
            self.evaluation_workers,
            self.threads,
            self.stacks,
            self.jobs_per_gpu,
        )
        return run_cell(
            self.unit,
            self.device,
            on_progress,
            self.journal,
            self.evaluation_timeout,
            evaluations,
        )

    def stored_seconds(self, records: list[RunRecord], seconds: float) -> float:
        """The compute seconds stored with the cell: the finishing attempt's ``seconds`` plus
        the running time of the evaluations it replayed from its journal, where the cell's clock
        resumed (:func:`orthobench.loop.resumed_clock`). What an interrupted attempt computed
        without journaling it, the ask of a step it had not finished included, is recomputed,
        and counted, once."""
        replayed = (r for r in records if (r.iteration, r.wall_seconds) in self.journaled)
        return seconds + resumed_clock(self.unit, replayed)

    def metadata(self) -> dict[str, Any]:
        return {
            "threads_per_cell": self.threads,
            "evaluation_timeout_s": self.evaluation_timeout,
            "stack_evaluations": self.stacks,
        }


def _journaled(journal: EvaluationJournal) -> frozenset[tuple[int, float]]:
    """The ``(iteration, wall_seconds)`` of the evaluations in ``journal`` that record a wall
    time (:attr:`CellJob.journaled`)."""
    return frozenset(
        (record.iteration, record.wall_seconds)
        for record, _ in journal.read()
        if math.isfinite(record.wall_seconds)
    )


def _warn_foreign(foreign: dict[str, int]) -> None:
    """Say which cells' journals hold evaluations of another configuration (``foreign``: their
    counts by cell id, :meth:`EvaluationJournal.foreign`): a rerun after the suite changed
    computes them again, which a user resuming hours of training would otherwise not know."""
    cells = [cell_id for cell_id, n in foreign.items() if n]
    if cells:
        warnings.warn(
            f"{len(cells)} cell(s) ({', '.join(cells[:3])}{', ...' if len(cells) > 3 else ''}) "
            f"journaled {sum(foreign.values())} evaluation(s) with another configuration (the "
            "suite or the task changed since) or another orthobench version: they are not "
            "reused; only evaluations of the current configuration resume a cell.",
            OrthobenchWarning,
            stacklevel=5,
        )


def evaluation_workers(executor: Executor, cell: Cell) -> int:
    """How many evaluations of a BO step of ``cell`` run at once on ``executor``, each in a
    worker (:meth:`~orthobench.executors.Executor.evaluation_workers`); 1 for a task whose
    evaluations are not worth a process each (:func:`orthobench.loop.evaluates_in_parallel`):
    the cell evaluates them itself and holds one worker."""
    return executor.evaluation_workers(cell.q) if evaluates_in_parallel(cell) else 1


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Run:
    """The :class:`~orthobench.executors.Session` of one run: stores each job's result in
    ``store`` (``metadata``: what every unit of the run stores), records its outcome in
    ``summary`` and shows it on ``progress``."""

    def __init__(
        self, store: BaseStore, summary: RunSummary, progress: Progress, metadata: dict[str, Any]
    ) -> None:
        self.store = store
        self.summary = summary
        self.progress = progress
        self.metadata = metadata

    @contextlib.contextmanager
    def running(self, job: Job) -> Iterator[None]:
        """Name the job's unit in the results directory's :data:`RUNNING_MARKER` while the block
        runs it.

        The marker is removed when the block ends, by an exception or Ctrl-C too. A unit that
        ends the process itself (``os._exit`` skips ``finally`` and ``atexit``), a kill or a
        crash leaves it behind, and the next run reports that unit (:func:`_fail_unfinished`).
        A symbolic link or a FIFO in its place is refused (:func:`~orthobench.results.open_own`).
        """
        unit = job.unit
        marker = self.store.root / RUNNING_MARKER  # absolute, as the store's root: a cell may chdir
        with open(marker, "w", opener=open_own) as fh:  # a link there: refused, not written through
            json.dump(
                {
                    ID_FIELDS[unit.kind]: unit.id,
                    "config_hash": unit.config_hash,
                    "pid": os.getpid(),
                    "suite": unit.suite,
                },
                fh,
            )
        try:
            yield
        finally:
            marker.unlink(missing_ok=True)

    def finish(self, job: Job, result: JobResult) -> None:
        unit = job.unit
        if result.records is not None:
            metadata = {**self.metadata, **job.metadata(), **(result.where or {})}
            seconds = result.seconds
            not_ok: Counter[str] = Counter()
            if isinstance(job, CellJob):
                seconds = job.stored_seconds(result.records, seconds)
                not_ok.update(r.status for r in result.records if r.status != "ok")
            self.store.write(unit, result.records, metadata, seconds)
            self.summary.outcomes.append(Outcome(unit, "ok", result.seconds, not_ok=not_ok))
            self.progress.message(f"  done   {unit.id} ({result.seconds:.1f} s)")
        else:
            error = result.error or ""
            self.store.record_failure(unit, error, result.traceback, result.seconds)
            self.summary.outcomes.append(Outcome(unit, "failed", result.seconds, error))
            self.progress.message(f"  FAILED {unit.id}: {error}")


def _check_sendable(jobs: list[Job]) -> None:
    """Refuse, before anything runs, a unit that cannot be pickled to a worker process: one that
    names a task or optimizer registered in this process (``TASKS.register``) as a lambda or a
    local function or class, which only a module-level object's reference can carry.

    Raises:
        RegistryError: naming the unit and what pickle could not send.
    """
    for job in jobs:
        try:
            pickle.dumps(job.unit)
        except Exception as err:  # noqa: BLE001 -- pickle raises PicklingError, AttributeError or TypeError by object
            raise RegistryError(
                "name",
                f"{job.unit.kind} {job.unit.id} cannot be sent to a worker process "
                f"({one_line(str(err))}): register a module-level class or function, or run "
                "inline (one worker).",
            ) from None


def run_units(
    store: BaseStore,
    executor: Executor,
    plan: Plan,
    *,
    device: torch.device,
    label: str,
    show_progress: bool = True,
    metadata: dict[str, Any] | None = None,
) -> RunSummary:
    """Run the jobs that ``plan`` gives on ``executor``, storing each unit in ``store`` as it
    finishes.

    The store is held for this process (:meth:`~orthobench.results.BaseStore.open_for_writing`)
    from before the plan, which reads what is stored, to the last write. The unit an earlier
    inline run left in the :data:`RUNNING_MARKER` is journaled as failed first
    (:func:`_fail_unfinished`). A warning says when the executor's processes times the jobs'
    threads exceed the cores.

    Args:
        plan: Called once with the store held: the jobs to run, and the units already stored
            (their outcomes ``skipped``).
        device: Where the units compute (recorded with each).
        label: Shown before the progress line.
        metadata: Stored with each unit of the run, beside :func:`run_metadata`.

    Raises:
        RunInterrupted: on Ctrl-C, with the summary of the units finished so far.
    """
    start = time.perf_counter()
    summary = RunSummary()
    try:
        with store.open_for_writing():
            _fail_unfinished(store)
            jobs, stored = plan()
            if not isinstance(executor, InlineExecutor):
                _check_sendable(jobs)
            summary.outcomes.extend(Outcome(unit, "skipped") for unit in stored)
            processes = executor.processes(sum(job.slots for job in jobs))
            threads = max((job.threads for job in jobs), default=1)
            if jobs and processes * threads > _cores():
                kind = jobs[0].unit.kind
                # One cell: what compete are its evaluations' processes, or its threads.
                rivals = (
                    f"{kind}s"
                    if len(jobs) > 1
                    else f"{kind}'s {'evaluations' if processes > 1 else 'threads'}"
                )
                warnings.warn(
                    f"{processes} worker(s) x {threads} thread(s) per {kind} exceed the "
                    f"{_cores()} cores: the {rivals} compete for them (slower, same values).",
                    OrthobenchWarning,
                    stacklevel=3,
                )
            progress = Progress(
                sum(job.size for job in jobs),
                label=label,
                unit=jobs[0].progress_unit if jobs else "",
                enabled=show_progress and bool(jobs),
            )
            try:
                common = {**run_metadata(str(device)), **(metadata or {})}
                executor.run(jobs, Run(store, summary, progress, common))
            finally:
                progress.close()
    except KeyboardInterrupt:
        summary.seconds = time.perf_counter() - start
        raise RunInterrupted(summary) from None
    summary.seconds = time.perf_counter() - start
    return summary


def _fail_unfinished(store: BaseStore) -> None:
    """Journal as failed, with a warning, the unit an earlier inline run left in its
    :data:`RUNNING_MARKER`: that run's process ended inside the unit (a task calling
    ``os._exit``, a kill, a crash) without storing it or saying so, and may have exited 0. The
    unit is retried as any failed one; one stored after all (its process ended just after) is
    left as it is. A marker that does not say which unit (damaged, or larger than
    :data:`_MARKER_BYTES`) is removed with a warning.

    Raises:
        OrthobenchError: naming the marker when it is a symbolic link or not a regular file (a
            FIFO would block the read): :func:`~orthobench.results.open_own`.
    """
    marker = store.root / RUNNING_MARKER
    try:  # a link, a FIFO or a device there: refused (open_own)
        with open(marker, "rb", opener=open_own) as fh:
            text = fh.read(_MARKER_BYTES + 1)  # a huge file is not read whole
    except FileNotFoundError:
        return
    try:
        if len(text) > _MARKER_BYTES:
            raise ValueError(f"larger than {_MARKER_BYTES} bytes")
        entry = json.loads(text)
        kind = next(kind for kind, key in ID_FIELDS.items() if key in entry)
        uid, config_hash, pid = entry[ID_FIELDS[kind]], entry["config_hash"], entry["pid"]
    # Torn (killed as it wrote), or damaged: JSON nested deeper than the stack is RecursionError.
    except (ValueError, KeyError, TypeError, StopIteration, RecursionError) as err:
        warnings.warn(
            f"an earlier inline run ended inside a unit, but {marker} does not say which "
            f"({describe_error(err)}); unless it is stored, that unit runs again.",
            OrthobenchWarning,
            stacklevel=4,
        )
        marker.unlink()
        return
    if store.stored(kind).get(uid) != config_hash:
        reason = (
            f"never finished: the process that ran it inline (PID {pid}) ended inside the "
            f"{kind} (a task calling os._exit, a kill, a crash); --executor process contains "
            "such tasks"
        )
        suite = entry.get("suite") if isinstance(entry.get("suite"), str) else None
        store.journal_failure(kind, uid, config_hash, reason, reason + "\n", None, suite)
        warnings.warn(f"{kind} {uid} {reason}.", OrthobenchWarning, stacklevel=4)
    marker.unlink()


def run_suite(
    suite: Suite,
    store: BaseStore,
    *,
    device: torch.device,
    executor: Executor | None = None,
    force: bool = False,
    show_progress: bool = True,
    threads_per_cell: int = 1,
    evaluation_timeout: float | None = None,
) -> RunSummary:
    """Run every cell of ``suite`` that ``store`` does not hold yet (all of them with ``force``).

    Each cell's metadata records the suite's optimizer labels in order (``suite_optimizers``),
    by which the report orders the optimizers (:func:`orthobench.report.data.load_results`).

    Args:
        executor: Where the cells run (default: :class:`~orthobench.executors.InlineExecutor`);
            its ``timeout`` is the cell timeout.
        threads_per_cell: Torch threads while a cell runs, in every executor (recorded in the
            cell's metadata and its evaluation journal). A cell whose journal records another
            count is recomputed from the start at this one, with a warning, not resumed
            (:func:`_recount`); a journal that records none is resumed.
        evaluation_timeout: Seconds after which a running evaluation is stopped and recorded with
            ``status="timeout"`` (None: no limit); not enforced on Dask (a warning says so).

    Raises:
        OrthobenchError: before any cell runs, from a task that cannot be built (a missing
            dataset, ...), or a ``ConfigError`` at ``tasks.<label>`` or ``optimizers.<label>``
            for a task or optimizer whose constructor fails (an optimizer refusing its
            parameters, a ``SystemExit``), builds something else or runs past the executor's
            timeout (else :data:`orthobench.loop.BUILD_TIMEOUT_S`;
            :func:`orthobench.loop.check_buildable`).
        RunInterrupted: on Ctrl-C, with the summary of the cells finished so far.
    """
    executor = executor or InlineExecutor()
    if threads_per_cell < 1:
        raise ValueError(f"`threads_per_cell` must be >= 1, but got {threads_per_cell=}.")
    if evaluation_timeout is not None and not evaluation_timeout > 0:
        raise ValueError(
            f"`evaluation_timeout` must be > 0 seconds, but got {evaluation_timeout=}."
        )

    def plan() -> tuple[list[Job], list[WorkUnit]]:
        stored = store.stored(CELL)
        cells = suite.cells()
        todo = [cell for cell in cells if force or not store.is_stored(cell, stored)]
        # A task whose data or model is missing, or an optimizer whose parameters do not combine,
        # raises its one-line error here, not in every cell after the others ran.
        check_buildable(todo, timeout=executor.timeout)
        # An external cluster's workers may not see this results directory: no journal there.
        shared = executor.shares_files
        journals: dict[str, EvaluationJournal] = {}
        restart: set[str] = set()
        journaled: dict[str, frozenset[tuple[int, float]]] = {}
        for cell in todo:
            journal = replace(store.evaluation_journal(cell), threads=threads_per_cell)
            journals[cell.id] = journal
            if force:
                journal.discard()
            elif shared and _recount(cell, journal):
                restart.add(cell.id)
            elif shared:
                journaled[cell.id] = _journaled(journal)
        if shared and not force:
            _warn_foreign({cell.id: journals[cell.id].foreign() for cell in todo})
        limit = evaluation_timeout
        if limit is not None and todo and not executor.enforces_evaluation_timeout:
            warnings.warn(
                f"the evaluation timeout of {limit:g} s is not enforced on Dask (cells run in "
                "worker threads, where no SIGALRM timer can be set); use a cell timeout "
                "(timeout_s, --cell-timeout) or the inline or process executor.",
                OrthobenchWarning,
                stacklevel=4,
            )
            limit = None
        jobs: list[Job] = [
            CellJob(
                cell,
                str(device),
                threads_per_cell,
                journals[cell.id] if shared else None,
                limit,
                executor.evaluation_kind,
                evaluation_workers(executor, cell),
                suite.stack_evaluations,
                executor.jobs_per_gpu,
                cell.id in restart,
                journaled.get(cell.id, frozenset()),
            )
            for cell in todo
        ]
        unstacked = sorted(job.unit.id for job in jobs if job.stack_evaluations and not job.stacks)
        if unstacked:
            warnings.warn(
                f"stack_evaluations: the evaluations of a step of {len(unstacked)} cell(s) "
                f"({', '.join(unstacked[:3])}{', ...' if len(unstacked) > 3 else ''}) run at "
                "once on their workers, not as one stack; recorded as not stacked (one worker "
                "per cell, --workers 1, stacks them).",
                OrthobenchWarning,
                stacklevel=4,
            )
        return jobs, [cell for cell in cells if cell.id not in journals]

    return run_units(
        store,
        executor,
        plan,
        device=device,
        label=f"[{suite.name}]",
        show_progress=show_progress,
        # For the report, which orders optimizers as the suite does: the order the cells
        # finish in varies (--workers).
        metadata={"suite_optimizers": [optimizer.label for optimizer in suite.optimizers]},
    )
