"""Where the evaluations of a cell's batch BO step, or of an asynchronous cell, run at once:
worker processes or Dask.

The process that runs the cell keeps its optimizer and its evaluation journal; only evaluations
leave it, each its own job (:class:`orthobench.evaluation.EvaluationRequest` in,
:class:`orthobench.evaluation.Outcome` back). A worker builds the cell's task once and reuses it
for the cell's other evaluations. :class:`orthobench.evaluation.Evaluations` runs them here, one
after the other (docs/design.md, "Batch steps and parallel evaluations").
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np
import torch

from orthobench.deadlines import kill_descendants
from orthobench.evaluation import (
    EvaluationRequest,
    Evaluations,
    Outcome,
    call_within,
    evaluate_point,
    outcome_of,
    prepare_once,
    timeout_outcome,
)
from orthobench.exceptions import OrthobenchError, show_value
from orthobench.executors._base import (
    Warned,
    forward_warnings,
    ignore_sigint,
    show_warnings,
    sigint_blocked,
    thread_limits,
    with_warnings,
)
from orthobench.executors._dask import CELL_WORKERS, _gpu_resources
from orthobench.loop import make_task
from orthobench.suite import Cell
from orthobench.tasks.base import Task

#: Where a cell's evaluations run: ``inline`` (:class:`orthobench.evaluation.Evaluations`),
#: ``process`` (:class:`ProcessEvaluations`) or ``dask`` (:class:`DaskEvaluations`).
EVALUATION_KINDS = ("inline", "process", "dask")

#: Seconds between an evaluation process's checks that its cell's process is still alive.
_PARENT_POLL_S = 0.5
#: Tasks that Dask evaluations built, by cell, in each worker process (the last few cells).
_DASK_TASKS_KEPT = 4


def one_at_a_time(kind: str, workers: int) -> bool:
    """Whether evaluations of ``kind`` on ``workers`` run one after the other, here: the only
    way a stack of them (``stack_evaluations``) can run."""
    return workers == 1 or kind == "inline"


def make_evaluations(
    kind: str, workers: int, threads: int, stacked: bool = False, jobs_per_gpu: int = 1
) -> Evaluations:
    """Evaluations of ``kind`` (:data:`EVALUATION_KINDS`) running ``workers`` at once, each with
    ``threads`` torch threads; one at a time they run here, whatever the kind, and with
    ``stacked`` as :class:`StackedEvaluations`. Dask evaluations on CUDA ask for a
    ``1/jobs_per_gpu`` share of a ``GPU``, as their cell's job does."""
    if kind not in EVALUATION_KINDS:
        raise ValueError(f"Unknown evaluation kind {kind!r}; choose one of {EVALUATION_KINDS}.")
    if one_at_a_time(kind, workers):
        return StackedEvaluations() if stacked else Evaluations()
    if kind == "process":
        return ProcessEvaluations(workers, threads)
    return DaskEvaluations(workers, threads, jobs_per_gpu)


class StackedEvaluations(Evaluations):
    """The points of a step here, all at once, by the task's
    :meth:`~orthobench.tasks.base.Task.evaluate_batch` (a suite's ``stack_evaluations``): one
    call for the initial design and one per BO step, for a task that evaluates several
    configurations together (the ``cnn`` task trains their networks as one stack). A task
    without its own ``evaluate_batch``, and a step of one point, are evaluated one at a time.
    The one point left of a step of several (a resumed cell journaled the others before it was
    stopped: its request's ``position`` is not 0) is a batch of one, evaluated as in its stack,
    so the resumed cell equals an uninterrupted one (one at a time, the ``cnn`` task's result
    would differ by rounding).

    The batch is one unit: within ``timeout`` seconds per point, else every point of it is a
    timeout, and each point's ``eval_seconds`` is its share of the batch's wall time.
    """

    def run(self, requests: list[EvaluationRequest]) -> Iterator[tuple[EvaluationRequest, Outcome]]:
        task = self._task
        alone = not requests or (len(requests) == 1 and requests[0].position == 0)
        if alone or type(task).evaluate_batch is Task.evaluate_batch:
            yield from super().run(requests)
            return
        prepare_once(task, self._device)
        timeout = None if self._timeout is None else self._timeout * len(requests)
        seeds = [r.seed for r in requests]
        xs = np.stack([r.x for r in requests])
        timed_out, results, seconds = call_within(
            timeout, seeds[0], lambda: task.evaluate_batch(xs, seeds=seeds, device=self._device)
        )
        share = seconds / len(requests)
        if timed_out:
            for request in requests:
                yield request, timeout_outcome(task, share)
            return
        if not isinstance(results, list) or len(results) != len(xs):
            got = f"a list of {len(results)}" if isinstance(results, list) else show_value(results)
            raise TypeError(
                f"`evaluate_batch` of task {self._label!r} must return a list of {len(xs)} "
                f"Evaluations, one per point, but returned {got}."
            )
        for request, evaluation in zip(requests, results, strict=True):
            yield (
                request,
                outcome_of(
                    task, evaluation, share, request.iteration, self._label, method="evaluate_batch"
                ),
            )


# ----------------------------------------------------------------------------------------------
# Worker processes


#: Seconds between a cell's looks at its evaluation processes while they start
#: (:meth:`ProcessEvaluations.open`).
_START_POLL_S = 0.5
# The cell of this evaluation process and, once built, its task: an evaluation process serves
# one cell (set by the pool's initializer, read by each evaluation).
_WORKER: dict[str, Any] = {}
# The warnings this evaluation process showed since it last returned (with an outcome); the
# cell's process shows them.
_WARNED: list[Warned] = []


def _exit_with_parent(parent: int) -> None:
    """End this evaluation process, and what its evaluations started, once ``parent`` (the
    cell's process) is no longer its parent."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    kill_descendants()
    os._exit(1)


def _start_worker(
    cell: Cell, device: str, threads: int, timeout: float | None, started: Any
) -> None:
    """Initializer of an evaluation process: remember the cell and build its task, ignore Ctrl-C
    (the runner handles it and the cell stops its evaluation processes), keep its warnings for
    the cell's process and exit with the cell's process. ``started`` is the barrier of the
    pool's processes that :func:`_started` waits at."""
    ignore_sigint()
    forward_warnings(_WARNED.append)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    _WORKER.update(cell=cell, device=torch.device(device), threads=threads, timeout=timeout)
    _WORKER.update(started=started, task=make_task(cell))


def _point(request: EvaluationRequest) -> str:
    """``"iteration 5"``, or of an asynchronous cell's point ``"proposal 5, batch 3"``: its
    ``iteration`` is its proposal's index, no record's (as
    :func:`~orthobench.evaluation.outcome_of` says)."""
    if request.batch is None:
        return f"iteration {request.iteration}"
    return f"proposal {request.iteration}, batch {request.batch}"


def _died(cell: Cell, request: EvaluationRequest, journaled: bool = True) -> OrthobenchError:
    """The one line of a cell whose process evaluating ``request`` died (a pool's or a Dask
    worker's); ``journaled``: where the cell keeps an evaluation journal."""
    kept = "; the evaluations finished before it are journaled" if journaled else ""
    return OrthobenchError(
        f"cell {cell.id}: the process evaluating {_point(request)} died (a crash, a kill, "
        f"os._exit){kept}."
    )


def _taken_warnings() -> list[Warned]:
    """The warnings shown since the last call (:data:`_WARNED`), which it clears."""
    warned = list(_WARNED)
    _WARNED.clear()
    return warned


def _started() -> tuple[int, list[Warned]]:
    """A job that returns once every process of the pool has started (and built the cell's
    task), with the warnings its process showed meanwhile.

    It waits at the processes' barrier: a job that returned at once would let the first process
    to start run every such job while the others still build the task, and a step's first
    evaluations would wait for them."""
    _WORKER["started"].wait()
    return os.getpid(), _taken_warnings()


def _evaluate_in_worker(request: EvaluationRequest) -> tuple[Outcome, list[Warned]]:
    """One evaluation in an evaluation process, with the cell's time limit and thread count, and
    the warnings it showed."""
    cell: Cell = _WORKER["cell"]
    with thread_limits(_WORKER["threads"]):
        outcome = evaluate_point(
            _WORKER["task"], request, _WORKER["device"], _WORKER["timeout"], cell.task.label
        )
    return outcome, _taken_warnings()


class ProcessEvaluations(Evaluations):
    """Runs up to ``workers`` evaluations at once, each in a spawned process of a pool kept for
    the cell's lifetime (``spawn``: forking a process that initialized torch can hang).

    All ``workers`` processes are started, and each builds the cell's task, when the cell opens
    them (a process started at its first evaluation would add its start, seconds of imports, to
    a step's time); each keeps the task, runs evaluations with ``threads`` torch threads and the
    evaluation time limit (its main thread sets the timer), ignores Ctrl-C from its start and
    exits when the cell's process dies; the warnings an evaluation shows are shown by the cell's
    process (as inline). An exception of an evaluation fails the cell, as inline; so does an
    evaluation process that dies (one line naming the iteration, or an asynchronous cell's
    proposal and batch), never hanging it. :meth:`close` kills the processes and what their
    evaluations started; the cell's timeout kills them with the cell's process group.

    Args:
        workers: Evaluation processes.
        threads: Torch threads in each.
    """

    def __init__(self, workers: int, threads: int) -> None:
        if workers < 1:
            raise ValueError(f"`workers` must be >= 1, but got {workers=}.")
        self.workers = workers
        self.threads = threads
        self._pool: ProcessPoolExecutor | None = None

    def open(self, cell: Cell, task: Task, device: torch.device, timeout: float | None) -> None:
        super().open(cell, task, device, timeout)
        self._cell = cell
        self._warned: dict[str, dict] = {}  # which of the processes' warnings were shown, by file
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_start_worker,
            initargs=(cell, str(device), self.threads, timeout, context.Barrier(self.workers)),
        )
        # The pool starts a process per job while none is idle: as many jobs at once start them
        # all, with SIGINT blocked until they ignore it (after their imports); each job waits
        # for all processes, so each runs in its own.
        try:
            with sigint_blocked():
                pending = {self._pool.submit(_started) for _ in range(self.workers)}
            while pending:
                done, pending = wait(pending, timeout=_START_POLL_S)
                for future in done:
                    show_warnings(future.result()[1], self._warned)
                # A process that died while the others wait at the barrier need not break the
                # pool: its manager thread notices a death only when a result or a submit wakes
                # it, and none comes (the last process spawned was not yet watched).
                if pending and any(p.exitcode is not None for p in self._processes()):
                    raise BrokenProcessPool
        except BrokenProcessPool:
            self.close()
            raise OrthobenchError(
                f"cell {cell.id}: an evaluation process could not start (building the task "
                "in a new process failed or the process died)."
            ) from None
        except BaseException:  # the runner stopped the cell meanwhile; run_cell closes no pool
            self.close()
            raise

    def stream(
        self, queue: collections.deque[EvaluationRequest]
    ) -> Iterator[tuple[EvaluationRequest, Outcome]]:
        futures: dict[Future, EvaluationRequest] = {}

        def submit_queued() -> None:
            while queue:
                try:
                    future = self._pool.submit(_evaluate_in_worker, queue[0])
                except BrokenProcessPool:
                    if futures:  # they fail too, the dead process's evaluation among them
                        return
                    raise OrthobenchError(
                        f"cell {self._cell.id}: an evaluation process died (a crash, a kill, "
                        "os._exit); the evaluations finished before it are journaled."
                    ) from None
                futures[future] = queue.popleft()

        try:
            submit_queued()
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                # The outcomes first, the failures after them: a failure fails the cell, and
                # the evaluations that finished beside it are handed out (journaled) before.
                failed = {f for f in done if f.exception() is not None}
                for future in sorted(done, key=lambda f: (f in failed, futures[f].position)):
                    request = futures.pop(future)
                    try:
                        outcome, warned = future.result()
                    except BrokenProcessPool:
                        raise _died(self._cell, request) from None
                    show_warnings(warned, self._warned)
                    yield request, outcome
                    submit_queued()
        finally:
            for future in futures:
                future.cancel()

    def _processes(self) -> list[multiprocessing.Process]:
        # concurrent.futures lists its processes nowhere public.
        return list((self._pool._processes or {}).values())

    def close(self) -> None:
        if self._pool is None:
            return
        # They are killed, not waited for: an evaluation of a failed cell may still run.
        processes = self._processes()
        for process in processes:
            kill_descendants(process.pid)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.join()
        self._pool = None


# ----------------------------------------------------------------------------------------------
# Dask


# Tasks built by Dask evaluations in this worker process: (cell id, config hash) -> task.
_DASK_TASKS: dict[tuple[str, str], Task] = {}
_DASK_LOCK = threading.Lock()


def _evaluate_on_dask(cell: Cell, device: str, threads: int, request: EvaluationRequest) -> Outcome:
    """One evaluation in a Dask worker, with the cell's task built once per worker process."""
    key = (cell.id, cell.config_hash)
    with _DASK_LOCK:
        task = _DASK_TASKS.get(key)
        if task is None:
            task = _DASK_TASKS[key] = make_task(cell)
            while len(_DASK_TASKS) > _DASK_TASKS_KEPT:
                del _DASK_TASKS[next(iter(_DASK_TASKS))]
    with thread_limits(threads):
        return evaluate_point(task, request, torch.device(device), None, cell.task.label)


class DaskEvaluations(Evaluations):
    """Submits each evaluation of a step as its own Dask task, from the cell's own Dask task
    (``distributed.worker_client``: the cell's worker thread leaves the worker's pool while it
    waits, so the evaluations can use it). A CUDA evaluation asks for a ``1/jobs_per_gpu`` share
    of a ``GPU`` worker resource (:func:`~orthobench.executors._dask._gpu_resources`), as the
    cell's own task does, and that task holds its share while its evaluations run: with one job
    per GPU a GPU cluster needs one more GPU worker than it runs cells at once, with
    ``jobs_per_gpu`` N a GPU runs N - 1 evaluations beside the cell that waits for them. On the
    executor's private ``LocalCluster`` they run only on the workers the cell owns
    (:data:`~orthobench.executors._dask.CELL_WORKERS`; with one job per GPU not on its own,
    whose GPU it holds), where nothing of another cell runs. Dask runs evaluations in worker
    threads, where no time limit can be set. An exception of an evaluation, or a worker lost
    under it, fails the cell. The warnings an evaluation shows are shown by the cell's task
    (:func:`~orthobench.executors._base.with_warnings`), whose own are the runner's.

    Args:
        workers: Evaluations at once (the cluster schedules them; kept for the executor's count).
        threads: Torch threads in each.
        jobs_per_gpu: Evaluations (and cells) that share one ``GPU`` worker resource: the
            executor's (:class:`~orthobench.executors.DaskExecutor`).
    """

    def __init__(self, workers: int, threads: int, jobs_per_gpu: int = 1) -> None:
        self.workers = workers
        self.threads = threads
        self.jobs_per_gpu = jobs_per_gpu
        self._warned: dict[str, dict] = {}  # which of the evaluations' warnings were shown

    def open(self, cell: Cell, task: Task, device: torch.device, timeout: float | None) -> None:
        super().open(cell, task, device, timeout)
        self._cell = cell

    def stream(
        self, queue: collections.deque[EvaluationRequest]
    ) -> Iterator[tuple[EvaluationRequest, Outcome]]:
        from distributed import as_completed, worker_client
        from distributed.scheduler import KilledWorker

        resources = _gpu_resources(self._device, self.jobs_per_gpu)
        owned = CELL_WORKERS.get() or ()
        if resources is not None and self.jobs_per_gpu == 1:
            owned = owned[1:]  # the cell holds its own worker's whole GPU
        # Strictly: Dask's work stealing moves a task allowed on other workers to an idle one,
        # which may be the worker of another cell that waits seceded.
        where = {"workers": list(owned)} if owned else {}
        with worker_client() as client:
            futures: dict[Any, EvaluationRequest] = {}
            finished = as_completed()

            def submit_queued() -> None:
                while queue:
                    request = queue.popleft()
                    future = client.submit(
                        with_warnings,
                        _evaluate_on_dask,
                        self._cell,
                        str(self._device),
                        self.threads,
                        request,
                        pure=False,
                        resources=resources,
                        **where,
                    )
                    futures[future] = request
                    finished.add(future)

            try:
                submit_queued()
                for future in finished:
                    request = futures.pop(future)
                    try:
                        outcome, warned = future.result()
                    except KilledWorker:
                        # Only the private cluster's cells keep a journal (they share its folder).
                        journaled = CELL_WORKERS.get() is not None
                        raise _died(self._cell, request, journaled) from None
                    # Released: Dask would compute a result still held again when its worker dies.
                    future.release()
                    show_warnings(warned, self._warned)
                    yield request, outcome
                    submit_queued()
            finally:
                for future in futures:
                    future.cancel()
