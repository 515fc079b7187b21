"""Executors: run cells inline, in a local process pool or on Dask, storing each as it finishes.

Executors never know what a cell does (they call :func:`orthobench.loop.run_cell`), and the BO
loop never knows how it is executed. The parent process (the Dask client) writes the results,
one atomic file per finished cell; the process running a cell appends each finished evaluation to
that cell's evaluation journal, so a killed run loses at most the evaluations in flight and a
rerun completes only what is missing. (With an external Dask scheduler the workers may not see
the results directory: there, resume is per cell.)

Execution settings travel in each :class:`_Job`, never in globals, and are the same for every
executor:

- ``threads_per_cell``: torch's thread count while the cell runs (set around the cell, restored
  after it), recorded in the cell's metadata. BLAS reductions depend on it, so the same suite,
  seed and thread count give identical values inline, in the pool and on Dask (docs/design.md,
  "Thread counts"). Default 1: small-GP code is bound by per-operation overhead.
- ``cell_timeout``: seconds of wall-clock time a cell attempt may run before its process is
  stopped and the cell stored as failed (a resumed cell's clock starts again). Inline, cells then
  run one at a time in a worker process, so a hung task cannot block the rest.
- ``evaluation_timeout``: seconds one evaluation may run before it is stopped and recorded with
  ``status="timeout"``, the cell going on (:func:`orthobench.loop.evaluation_deadline`); recorded
  in the cell's metadata. It needs a process's main thread, which inline cells and pool workers
  run in; Dask runs cells in worker threads, so there it is not enforced, with a warning.

What ends a cell, and what ends the run:

- An exception of any kind raised while the cell runs -- ``SystemExit`` and
  ``KeyboardInterrupt`` included -- fails that cell (its error and traceback are journaled) and
  the run goes on. The one exception is the user's Ctrl-C: inline, a ``KeyboardInterrupt`` ends
  the run when this process received SIGINT during the run (:func:`_sigint_watch`), and is the
  cell's failure otherwise; pool workers ignore SIGINT, so a ``KeyboardInterrupt`` there always
  comes from the cell's own code.
- A pool worker that dies (``os.abort()``, an out-of-memory kill) fails the cell it was running
  ("worker process died (exit code -6: SIGABRT)") and is replaced; a Dask worker that dies fails
  its cell at once on the private ``LocalCluster`` (no retries) and after the cluster's allowed
  retries on an external one (``KilledWorker``).
- Ctrl-C stops the run: :class:`RunInterrupted` (a ``KeyboardInterrupt``) carries the summary of
  the cells finished so far; pool workers are killed.
- Pool workers watch the runner: when it dies (``kill -9``), they exit within a second.
- Each pool worker leads its own process group, which the processes a task starts join: a worker
  stopped at the cell timeout, one that dies and one that the runner closes take them along. A
  worker stopped or closed also takes its descendants that left the group (``setsid``). On Dask,
  a cell past the cell timeout has its worker's descendants killed, then the worker restarted.
- Inline, a task that ends the process itself (``os._exit``, which skips ``finally`` and
  ``atexit``) ends the run too, with the task's exit status, 0 included: inline mode trusts tasks
  not to do that. The cell it ran stays named in the results directory's
  :data:`RUNNING_MARKER`, so the next run journals it as failed ("never finished"), says so and
  runs it again. The process pool (``--executor process``, or any cell timeout) contains such a
  task: its worker's death fails the cell, and the run goes on.
- Tasks and optimizers are built once in the runner's process before any cell runs
  (:func:`orthobench.loop.check_buildable`): there an exception of any kind, a factory that
  builds something else, or a constructor past the cell timeout (else
  :data:`orthobench.loop.BUILD_TIMEOUT_S`) stops the run before any cell, with one line naming the
  component.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import socket
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from typing import Any, Literal, NamedTuple

import torch
from threadpoolctl import threadpool_limits

from orthobench.exceptions import OrthobenchError, OrthobenchWarning, describe_error
from orthobench.loop import ProgressCallback, _kill_descendants, check_buildable, run_cell
from orthobench.progress import Progress
from orthobench.results import (
    EvaluationJournal,
    ResultStore,
    RunRecord,
    resolved_hash,
    run_metadata,
)
from orthobench.suite import Cell, Suite

EXECUTORS = ("inline", "process", "dask")

#: Seconds between a pool worker's checks that the runner is still alive.
_PARENT_POLL_S = 0.5
#: What a pool worker sends when it starts running a job (its result follows).
_STARTED = "started"
#: The file in a results directory that names the cell an inline run is running (removed when
#: the cell ends, however it ends, unless its process ends with it: :func:`_running_inline`).
RUNNING_MARKER = ".running"


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


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`run_suite`; ``summary`` holds the cells finished before it."""

    def __init__(self, summary: RunSummary) -> None:
        super().__init__(f"interrupted after {summary.count('ok')} stored cell(s)")
        self.summary = summary


@dataclass(frozen=True)
class _Job:
    """Everything a process needs to run one cell (it pickles to pool and Dask workers)."""

    cell: Cell
    device: str
    threads: int
    journal: EvaluationJournal | None
    evaluation_timeout: float | None


class _Result(NamedTuple):
    records: list[RunRecord] | None  # None when the cell failed
    error: str | None
    traceback: str
    seconds: float


@contextlib.contextmanager
def thread_limits(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` threads in torch and in every other pool that threadpoolctl
    finds (scipy's OpenBLAS, OpenMP); the previous counts are restored.

    torch's count decides the BLAS reductions that determinism depends on (docs/design.md,
    "Thread counts"). The other pools only cost time: scipy's L-BFGS-B, in BoTorch's and the fast
    fit's optimizers, calls OpenBLAS, whose default pool of one thread per core oversubscribes a
    machine that runs one cell per core.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def _execute(
    job: _Job,
    on_evaluation: ProgressCallback | None = None,
    user_interrupt: threading.Event | None = None,
) -> _Result:
    """Run a cell with its thread count; any exception it raises is returned as its failure.

    Except when ``user_interrupt`` is set (the user pressed Ctrl-C): the cell ended because of it,
    and ``KeyboardInterrupt`` is raised to end the run.
    """
    start = time.perf_counter()
    try:
        with thread_limits(job.threads):
            records = run_cell(
                job.cell, job.device, on_evaluation, job.journal, job.evaluation_timeout
            )
    except BaseException as err:  # noqa: BLE001 -- SystemExit/KeyboardInterrupt of a cell's code are its failure
        if user_interrupt is not None and user_interrupt.is_set():
            raise KeyboardInterrupt from err
        return _Result(
            None, describe_error(err), traceback.format_exc(), time.perf_counter() - start
        )
    return _Result(records, None, "", time.perf_counter() - start)


@contextlib.contextmanager
def _sigint_watch() -> Iterator[threading.Event]:
    """An event set when this process receives SIGINT (Ctrl-C) while the block runs.

    The handler sets the event, then does what the previous handler did (Python's default raises
    ``KeyboardInterrupt``). Signals reach only the main thread: elsewhere, and where SIGINT is
    ignored, nothing is installed and the event stays clear.
    """
    event = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous == signal.SIG_IGN:
        yield event
        return

    def handler(signum, frame) -> None:  # noqa: ANN001 -- signal handler signature
        event.set()
        if not callable(previous):  # SIG_DFL: SIGINT would end the process; end the run instead
            raise KeyboardInterrupt
        previous(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield event
    finally:
        signal.signal(signal.SIGINT, previous)


def _evaluations(cell: Cell) -> int:
    return cell.n_init + cell.budget


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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
    scheduler_timeout: float | None = None,
    threads_per_cell: int = 1,
    cell_timeout: float | None = None,
    evaluation_timeout: float | None = None,
) -> RunSummary:
    """Run every cell of ``suite`` that ``store`` does not hold yet (all of them with ``force``).

    Args:
        executor: ``inline`` (this process), ``process`` (a local pool of ``workers`` processes) or
            ``dask`` (the Dask cluster at ``scheduler``, else a ``LocalCluster`` of ``workers``).
        workers: Processes of the pool or the ``LocalCluster``.
        scheduler: Address of an existing Dask scheduler (``dask`` only).
        scheduler_timeout: Seconds to wait for ``scheduler`` to answer (None: Dask's connect
            timeout); give the one :func:`check_scheduler` was given.
        threads_per_cell: Torch threads while a cell runs, in every executor (recorded in the
            cell's metadata). A warning says when ``workers x threads_per_cell`` exceeds the cores.
        cell_timeout: Seconds after which a running cell is stopped and stored as failed (None:
            no limit). Inline, each cell then runs in a worker process.
        evaluation_timeout: Seconds after which a running evaluation is stopped and recorded with
            ``status="timeout"`` (None: no limit); not enforced on Dask (a warning says so).

    Raises:
        OrthobenchError: before any cell runs, from a task that cannot be built (a missing
            dataset, ...), or a ``ConfigError`` at ``tasks.<label>`` or ``optimizers.<label>``
            for a task or optimizer whose constructor fails (an optimizer refusing its
            parameters, a ``SystemExit``), builds something else or runs past ``cell_timeout``
            (else :data:`orthobench.loop.BUILD_TIMEOUT_S`; :func:`orthobench.loop.check_buildable`).
        RunInterrupted: on Ctrl-C, with the summary of the cells finished so far.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"Unknown executor {executor!r}; choose one of {EXECUTORS}.")
    if workers < 1:
        raise ValueError(f"`workers` must be >= 1, but got {workers=}.")
    if threads_per_cell < 1:
        raise ValueError(f"`threads_per_cell` must be >= 1, but got {threads_per_cell=}.")
    if cell_timeout is not None and not cell_timeout > 0:
        raise ValueError(f"`cell_timeout` must be > 0 seconds, but got {cell_timeout=}.")
    if evaluation_timeout is not None and not evaluation_timeout > 0:
        raise ValueError(
            f"`evaluation_timeout` must be > 0 seconds, but got {evaluation_timeout=}."
        )
    start = time.perf_counter()
    summary = RunSummary()
    try:
        with store.open_for_writing(), _sigint_watch() as interrupted:
            _run_cells(
                suite,
                store,
                summary,
                interrupted,
                device=device,
                executor=executor,
                workers=workers,
                force=force,
                show_progress=show_progress,
                scheduler=scheduler,
                scheduler_timeout=scheduler_timeout,
                threads_per_cell=threads_per_cell,
                cell_timeout=cell_timeout,
                evaluation_timeout=evaluation_timeout,
            )
    except KeyboardInterrupt:
        summary.seconds = time.perf_counter() - start
        raise RunInterrupted(summary) from None
    summary.seconds = time.perf_counter() - start
    return summary


def _run_cells(
    suite: Suite,
    store: ResultStore,
    summary: RunSummary,
    interrupted: threading.Event,
    *,
    device: torch.device,
    executor: str,
    workers: int,
    force: bool,
    show_progress: bool,
    scheduler: str | None,
    scheduler_timeout: float | None,
    threads_per_cell: int,
    cell_timeout: float | None,
    evaluation_timeout: float | None,
) -> None:
    """The body of :func:`run_suite`, with the store held: outcomes go to ``summary``."""
    _fail_unfinished(store)
    stored = store.stored()
    todo: list[Cell] = []
    for cell in suite.cells():
        if not force and store.is_stored(cell, stored):
            summary.outcomes.append(CellOutcome(cell, "skipped"))
        else:
            todo.append(cell)
    # A task whose data or model is missing, or an optimizer whose parameters do not combine,
    # raises its one-line error here, not in every cell after the others ran.
    check_buildable(todo, timeout=cell_timeout)
    journals = {cell.id: store.evaluation_journal(cell) for cell in todo}
    if force:
        for journal in journals.values():
            journal.discard()
    external = executor == "dask" and scheduler is not None
    if executor == "dask" and evaluation_timeout is not None and todo:
        warnings.warn(
            f"the evaluation timeout of {evaluation_timeout:g} s is not enforced on Dask (cells "
            "run in worker threads, where no SIGALRM timer can be set); use a cell timeout "
            "(timeout_s, --cell-timeout) or the inline or process executor.",
            OrthobenchWarning,
            stacklevel=3,
        )
        evaluation_timeout = None
    jobs = [
        _Job(
            cell,
            str(device),
            threads_per_cell,
            # An external cluster's workers may not see this results directory.
            None if external else journals[cell.id],
            evaluation_timeout,
        )
        for cell in todo
    ]
    # More workers than cells would only start idle processes (a LocalCluster starts them all).
    workers = min(workers, max(len(todo), 1))
    parallel = workers if executor != "inline" and not external else 1
    if parallel * threads_per_cell > _cores() and todo:
        warnings.warn(
            f"{parallel} worker(s) x {threads_per_cell} thread(s) per cell exceed the "
            f"{_cores()} cores: the cells compete for them (slower, same values).",
            OrthobenchWarning,
            stacklevel=3,
        )
    progress = Progress(
        sum(map(_evaluations, todo)), label=f"[{suite.name}]", enabled=show_progress and bool(todo)
    )
    metadata = {
        **run_metadata(str(device)),
        "threads_per_cell": threads_per_cell,
        "evaluation_timeout_s": evaluation_timeout,
    }

    def finish(cell: Cell, result: _Result) -> None:
        if result.records is not None:
            store.write_cell(cell, result.records, metadata, result.seconds)
            summary.outcomes.append(CellOutcome(cell, "ok", result.seconds))
            progress.message(f"  done   {cell.id} ({result.seconds:.1f} s)")
        else:
            error = result.error or ""
            store.record_failure(cell, error, result.traceback, result.seconds)
            summary.outcomes.append(CellOutcome(cell, "failed", result.seconds, error))
            progress.message(f"  FAILED {cell.id}: {error}")

    try:
        if executor == "dask":
            _run_dask(
                jobs, device, workers, scheduler, scheduler_timeout, cell_timeout, progress, finish
            )
        elif executor == "process" or cell_timeout is not None:
            _run_pool(jobs, parallel, cell_timeout, progress, finish)
        else:
            for job in jobs:
                with _running_inline(store, job.cell):
                    finish(job.cell, _execute(job, progress.advance, interrupted))
                if interrupted.is_set():  # the cell's code swallowed the KeyboardInterrupt
                    raise KeyboardInterrupt
    finally:
        progress.close()


@contextlib.contextmanager
def _running_inline(store: ResultStore, cell: Cell) -> Iterator[None]:
    """Name ``cell`` in the results directory's :data:`RUNNING_MARKER` while the block runs it.

    The marker is removed when the block ends, by an exception or Ctrl-C too. A task that ends
    the process itself (``os._exit`` skips ``finally`` and ``atexit``), a kill or a crash leaves
    it behind, and the next run reports that cell (:func:`_fail_unfinished`).
    """
    marker = store.root / RUNNING_MARKER  # absolute, as the store's root: a cell may chdir
    marker.write_text(
        json.dumps({"cell_id": cell.id, "config_hash": resolved_hash(cell), "pid": os.getpid()})
    )
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def _fail_unfinished(store: ResultStore) -> None:
    """Journal as failed, with a warning, the cell an earlier inline run left in its
    :data:`RUNNING_MARKER`: that run's process ended inside the cell (a task calling
    ``os._exit``, a kill, a crash) without storing it or saying so, and may have exited 0. The
    cell is retried as any failed one; one stored after all (its process ended just after) is
    left as it is.
    """
    marker = store.root / RUNNING_MARKER
    if not marker.exists():
        return
    try:
        entry = json.loads(marker.read_text())
        cell_id, config_hash, pid = entry["cell_id"], entry["config_hash"], entry["pid"]
    except (ValueError, KeyError, TypeError) as err:  # torn: the run was killed as it wrote it
        warnings.warn(
            f"an earlier inline run ended inside a cell, but {marker} does not say which "
            f"({describe_error(err)}); unless it is stored, that cell runs again.",
            OrthobenchWarning,
            stacklevel=4,
        )
        marker.unlink()
        return
    if store.stored().get(cell_id) != config_hash:
        reason = (
            f"never finished: the process that ran it inline (PID {pid}) ended inside the "
            "cell (a task calling os._exit, a kill, a crash); --executor process contains "
            "such tasks"
        )
        store.journal_failure(cell_id, config_hash, reason, reason + "\n", None)
        warnings.warn(f"cell {cell_id} {reason}.", OrthobenchWarning, stacklevel=4)
    marker.unlink()


# ---------------------------------------------------------------------------------------------
# Process pool


def _kill_tree(leader: int) -> None:
    """SIGKILL process ``leader``'s descendants, those that left its process group (``setsid``)
    included, then the group it leads: ``leader`` itself and the group's processes whose parent
    ended, which no walk from ``leader`` finds. Descendants first: once ``leader`` is dead, its
    children are reparented out of reach."""
    _kill_descendants(leader)  # without /proc (not Linux), the group alone
    with contextlib.suppress(ProcessLookupError):  # none left, or the worker never started
        os.killpg(leader, signal.SIGKILL)


def _exit_with_parent(parent: int) -> None:
    """End this worker and what its cells started (:func:`_kill_tree`) once ``parent`` is no
    longer its parent (it died; we were reparented)."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    _kill_tree(os.getpid())


def _worker_main(conn: Connection, parent: int) -> None:
    """A pool worker: run the jobs received on ``conn`` and send back each :class:`_Result`.

    Ends when the runner sends None, closes its end of the pipe, or dies. The worker leads its
    own session and process group, which the processes its cells start join, so the runner can
    end them with it (:meth:`_Worker.kill_group`; those that leave the group are found as the
    worker's descendants).
    """
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner handles Ctrl-C and ends its workers
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(_STARTED)  # the cell's clock starts now, not while the worker imported torch
        conn.send(_execute(job))


def _exit_reason(code: int | None) -> str:
    """``"exit code -6: SIGABRT"`` for a process ended by a signal, else ``"exit code 1"``."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"exit code {code}: {signal.Signals(-code).name}"
    return f"exit code {code}"


class _Worker:
    """A spawned worker process running one job at a time, sent over its own pipe.

    Unlike ``concurrent.futures.ProcessPoolExecutor``, whose pool breaks as a whole when one
    worker dies and does not say which task killed it, the worker knows its cell: its death or
    timeout fails that cell only.
    """

    def __init__(self, context: multiprocessing.context.SpawnContext) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, os.getpid()))
        self.process.start()
        child.close()
        self.job: _Job | None = None
        self.running_since: float | None = None  # when the worker started the job

    def submit(self, job: _Job) -> None:
        self.conn.send(job)
        self.job = job
        self.running_since = None

    def waitables(self) -> list[object]:
        return [self.conn, self.process.sentinel]

    def seconds(self) -> float:
        """How long the job has been running (0 before the worker started it)."""
        return 0.0 if self.running_since is None else time.monotonic() - self.running_since

    def result(self, ready: Sequence[object]) -> _Result | None:
        """The job's result if the worker finished it or died (``ready`` from ``wait``)."""
        if self.conn not in ready and self.process.sentinel not in ready:
            return None
        with contextlib.suppress(EOFError, OSError):
            while self.conn.poll():
                message = self.conn.recv()
                if message != _STARTED:
                    return message
                self.running_since = time.monotonic()
            if self.process.is_alive():
                return None
        self.process.join()
        self.kill_group()
        reason = f"worker process died ({_exit_reason(self.process.exitcode)})"
        return _Result(None, reason, reason + "\n", self.seconds())

    def kill_group(self) -> None:
        """Kill the worker, if it still runs, and the processes its cells started (a task's
        ``sleep``, its data loaders), which would outlive it otherwise (:func:`_kill_tree`): its
        process group, and while it lives its descendants outside the group (``setsid``)."""
        _kill_tree(self.process.pid)

    def stop(self) -> None:
        """Kill the process and its group at once (its cell is abandoned; its journal keeps what
        it stored)."""
        self.kill_group()
        self.process.kill()  # a worker killed before it made its own group
        self.process.join()
        self.conn.close()

    def close(self, grace: float = 10.0) -> None:
        """Ask the idle worker to exit; kill it if it has not after ``grace`` seconds. What its
        cells started and left running is killed either way."""
        # First, while the worker lives: its descendants outside its group are found through it.
        _kill_descendants(self.process.pid)
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(grace)
        if self.process.is_alive():
            self.stop()
        self.kill_group()
        self.conn.close()


def _run_pool(
    jobs: Sequence[_Job],
    workers: int,
    timeout: float | None,
    progress: Progress,
    finish: Callable[[Cell, _Result], None],
) -> None:
    """Run ``jobs`` on up to ``workers`` spawned processes, replacing any that dies or times out.

    ``spawn``, not ``fork``: forking a process that already initialized torch/OpenMP (or CUDA)
    can hang. A worker's process is reused for the next job, so tasks keep their per-process
    caches.
    """
    context = multiprocessing.get_context("spawn")
    queue = deque(jobs)
    idle: list[_Worker] = []
    busy: list[_Worker] = []
    try:
        while queue or busy:
            while queue and len(busy) < workers:
                worker = idle.pop() if idle else _Worker(context)
                worker.submit(queue.popleft())
                busy.append(worker)
            running = [w.seconds() for w in busy if w.running_since is not None]
            left = None if timeout is None or not running else max(timeout - max(running), 0.0)
            ready = wait_for([o for w in busy for o in w.waitables()], left)
            for worker in list(busy):
                result = worker.result(ready)
                if result is None and timeout is not None and worker.seconds() >= timeout:
                    seconds = worker.seconds()
                    worker.stop()
                    reason = (
                        f"timed out: still running after the cell timeout of {timeout:g} s; "
                        "its process was stopped"
                    )
                    result = _Result(None, reason, reason + "\n", seconds)
                if result is None:
                    continue
                busy.remove(worker)
                if worker.process.is_alive():
                    idle.append(worker)
                progress.advance(_evaluations(worker.job.cell))
                finish(worker.job.cell, result)
    except BaseException:
        for worker in busy:
            worker.stop()
        raise
    finally:
        for worker in idle:
            worker.close()


# ---------------------------------------------------------------------------------------------
# Dask


#: Address schemes of a Dask scheduler in another process: ``SCHEME://HOST:PORT``.
_SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")


def _scheduler_host_port(address: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a Dask scheduler address (``tcp://`` when it has no scheme).

    Raises:
        OrthobenchError: naming the address when it is not ``SCHEME://HOST:PORT``.
    """
    scheme, _, location = address.rpartition("://")
    scheme = scheme or "tcp"
    host, _, port = location.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [IPv6]
    expected = f"SCHEME://HOST:PORT with SCHEME one of {', '.join(_SCHEDULER_SCHEMES)}"
    if scheme not in _SCHEDULER_SCHEMES:
        raise OrthobenchError(
            f"a Dask scheduler address must be {expected}, but got {address!r} (scheme {scheme!r})."
        )
    if not host or any(c.isspace() or c in "/[]" for c in host):
        raise OrthobenchError(
            f"a Dask scheduler address must be {expected}, but got {address!r} (no valid host)."
        )
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        raise OrthobenchError(
            f"a Dask scheduler address must be {expected}, but got {address!r} (port must be "
            f"1-65535, but got {port!r})."
        )
    return scheme, host, int(port)


def _unanswered(address: str, timeout: float, err: BaseException) -> OrthobenchError:
    """The one line for a Dask scheduler that did not answer at ``address`` within ``timeout``
    seconds, ``err`` saying how."""
    reason = describe_error(err) if str(err) else "no answer"  # asyncio's timeout has no text
    return OrthobenchError(
        f"no Dask scheduler answered at {address} within {timeout:g} s ({reason}); start it, or "
        "check --scheduler."
    )


def _connect(scheduler: str, timeout: float | None):  # noqa: ANN202 -- a distributed.Client
    """A Dask client of the scheduler at ``scheduler`` (checked by :func:`check_scheduler`), or
    one line saying why there is none after ``timeout`` seconds (None: Dask's connect timeout).

    The timeout the check was given, so a scheduler gone since the check fails as fast, with the
    same line, as one the check found missing: not after Dask's 30 s.
    """
    import dask
    from dask.distributed import Client
    from dask.utils import parse_timedelta

    if timeout is None:
        timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    try:
        return Client(scheduler, timeout=timeout)
    except (OSError, TimeoutError) as err:
        raise _unanswered(scheduler, timeout, err) from None


async def _server_type(address: str, timeout: float) -> str:
    """What the Dask server at ``address`` says it is (``Scheduler``, ``Worker``, ...)."""
    from distributed.comm import connect
    from distributed.security import Security

    # The client's connection arguments, as `Client(address)` would use (TLS from the config).
    comm = await connect(address, timeout=timeout, **Security().get_connection_args("client"))
    try:
        await comm.write({"op": "identity"})
        return str((await comm.read()).get("type"))
    finally:
        await comm.close()


def check_scheduler(address: str, timeout: float) -> None:
    """Check that a Dask scheduler answers at ``address`` within ``timeout`` seconds.

    The address must be ``SCHEME://HOST:PORT`` (``HOST:PORT`` means ``tcp://``). Where nothing
    listens on the port (a refused TCP connection), this says so at once, without waiting out
    the ``timeout`` as Dask's connection retries would; a server that accepts the connection but
    does not answer as a Dask scheduler is given up after ``timeout`` (Dask's own handshake would
    wait for ever). Nothing is written: the CLI calls it before it creates the results directory.

    Raises:
        OrthobenchError: one line naming the address, for a malformed one, one where nothing
            listens, one that does not answer within ``timeout``, or one where a Dask worker
            (not the scheduler) answers; also when the ``dask`` extra is not installed.
    """
    if not timeout > 0:
        raise ValueError(f"`timeout` must be > 0 seconds, but got {timeout=}.")
    scheme, host, port = _scheduler_host_port(address)
    try:
        import dask.distributed  # noqa: F401 -- only whether it is installed
    except ImportError as err:
        raise OrthobenchError(
            "--executor dask needs the dask extra: pip install 'orthobench[dask]'."
        ) from err
    fix = "start it, or check --scheduler."
    if scheme != "ucx":  # every other scheme runs over TCP: a refused connection is final
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as err:
            reason = err.strerror or describe_error(err)  # socket.timeout has no strerror
            raise OrthobenchError(
                f"no Dask scheduler answers at {address} ({host}:{port}: {reason}); {fix}"
            ) from None
    try:
        found = asyncio.run(asyncio.wait_for(_server_type(address, timeout), timeout))
    except (OSError, asyncio.TimeoutError) as err:
        raise _unanswered(address, timeout, err) from None
    if found != "Scheduler":
        raise OrthobenchError(
            f"a Dask {found} answers at {address}, not a scheduler; give the scheduler's address "
            "to --scheduler."
        )


def _dask_result(future) -> _Result:  # noqa: ANN001 -- a distributed.Future
    """The future's :class:`_Result`; a lost worker or a task Dask could not run fails the cell."""
    from distributed.scheduler import KilledWorker

    try:
        return future.result()
    except KilledWorker as err:
        return _Result(None, "worker process died (Dask KilledWorker)", str(err) + "\n", 0.0)
    except Exception as err:  # noqa: BLE001 -- e.g. the worker cannot import the task: the cell fails
        return _Result(None, describe_error(err), traceback.format_exc(), 0.0)


def _run_dask(
    jobs: Sequence[_Job],
    device: torch.device,
    workers: int,
    scheduler: str | None,
    scheduler_timeout: float | None,
    timeout: float | None,
    progress: Progress,
    finish: Callable[[Cell, _Result], None],
) -> None:
    """Submit every cell to Dask; this process (the client) stores each cell as it finishes.

    At most as many cells are in flight as the cluster has worker threads, so a worker holds one
    cell at a time. On the private ``LocalCluster`` (``workers`` processes, one thread each) a
    worker that dies fails its cell at once (``allowed-failures: 0``). A killed client loses the
    cells in flight and nothing stored (on a ``LocalCluster``, the evaluations of the cells in
    flight are journaled too). CUDA cells ask for one ``GPU`` worker resource each, so start GPU
    workers with ``--resources GPU=1`` (per GPU).

    With a ``timeout``, a cell's clock starts when the scheduler first reports it processing on a
    worker (polled each second); an expired cell is cancelled, the processes its worker started
    are killed and the worker is restarted (:func:`_expired`; this needs a nanny: a worker started
    with ``--no-nanny`` keeps running the cell and its processes, with a warning).
    """
    try:
        import dask
        from dask.distributed import Client, LocalCluster, wait
    except ImportError as err:
        raise OrthobenchError(
            "--executor dask needs the dask extra: pip install 'orthobench[dask]'."
        ) from err
    resources = {"GPU": 1} if device.type == "cuda" else None
    cluster = None
    if scheduler is None:
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                resources=resources,
                dashboard_address=None,
                # A cell's timeout clock starts at submission: workers import the loop (torch,
                # BoTorch: seconds) when they start, not inside the first cell's time.
                preload=["orthobench.loop"],
            )
    client = _connect(scheduler, scheduler_timeout) if scheduler is not None else Client(cluster)
    try:
        queue = deque(jobs)
        futures: dict[Any, Cell] = {}  # distributed.Future -> its cell
        pending: set[Any] = set()
        started: dict[str, float] = {}
        while queue or pending:
            # No more cells in flight than worker threads: a worker that dies takes its own cell
            # only, and a cell's timeout clock starts when it does.
            while queue and len(pending) < max(1, sum(client.nthreads().values())):
                job = queue.popleft()
                future = client.submit(
                    _execute,
                    job,
                    key=f"orthobench-{job.cell.id}-{job.cell.config_hash}",
                    pure=False,
                    resources=resources,
                )
                futures[future] = job.cell
                pending.add(future)
            try:
                done, pending = wait(pending, timeout=1.0, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            for future in done:
                cell = futures[future]
                progress.advance(_evaluations(cell))
                finish(cell, _dask_result(future))
            if timeout is not None:
                for future in _expired(client, pending, started, timeout):
                    pending.discard(future)
                    cell = futures[future]
                    reason = f"timed out: still running after the cell timeout of {timeout:g} s"
                    progress.advance(_evaluations(cell))
                    finish(cell, _Result(None, reason, reason + "\n", timeout))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _expired(client, pending: set, started: dict[str, float], timeout: float) -> list:  # noqa: ANN001
    """The pending futures processing for longer than ``timeout``: cancelled, workers restarted."""
    now = time.monotonic()
    by_key = {future.key: future for future in pending}
    where = {}
    for address, keys in client.processing().items():
        for key in keys:
            if key in by_key:
                started.setdefault(key, now)
                where[key] = address
    expired = [by_key[k] for k, t in started.items() if k in where and now - t >= timeout]
    for future in expired:
        future.cancel()
        address = where[future.key]
        try:
            # The restart ends the worker process only: its children would outlive it, out of
            # reach once reparented. So they are killed first, from here and in this order, not
            # by a timer in the task: the task's clock starts later (its worker may still be
            # importing orthobench) and the restart could beat it. The nanny kills them: it
            # answers while the cell holds the worker's interpreter. A worker without a nanny
            # cannot be restarted either, which the restart's error says.
            found = client.run(_kill_worker_descendants, workers=[address], nanny=True)
            client.restart_workers([address])
        except Exception as err:  # noqa: BLE001 -- the cell is failed either way; say what still runs
            warnings.warn(
                f"cell {future.key} timed out, but its Dask worker {address} could not be "
                f"restarted ({describe_error(err)}); it keeps running the cell and the processes "
                "it started.",
                OrthobenchWarning,
                stacklevel=2,
            )
            continue
        if found.get(address) is False:
            warnings.warn(
                f"cell {future.key} timed out and its Dask worker {address} was restarted, but "
                "the processes the cell started are not stopped: there is no /proc on its host "
                "to find them in.",
                OrthobenchWarning,
                stacklevel=2,
            )
    return expired


def _kill_worker_descendants(dask_worker) -> bool:  # noqa: ANN001 -- a distributed.Nanny
    """Run on a Dask worker's nanny (``Client.run(nanny=True)``): SIGKILL the descendants of its
    worker process, what the worker's cells started (:func:`orthobench.loop._kill_descendants`).
    False where there is no ``/proc`` to find them in."""
    pid = dask_worker.pid  # None while no worker process runs: then nothing to kill, not our own
    return pid is None or _kill_descendants(pid)
