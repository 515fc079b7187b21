"""The process-pool executor: jobs on spawned worker processes that the runner can stop."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for

from orthobench.deadlines import kill_descendants
from orthobench.executors._base import (
    Executor,
    Job,
    JobResult,
    Session,
    Warned,
    execute,
    failed,
    forward_warnings,
    ignore_sigint,
    progressed,
    sigint_blocked,
)

#: Seconds between a pool worker's checks that the runner is still alive.
_PARENT_POLL_S = 0.5
#: Seconds that the workers running jobs get to end them after the runner's Ctrl-C (SIGTERM)
#: before they are killed.
_STOP_GRACE_S = 3.0
#: What a pool worker sends when it starts running a job (its result follows).
_STARTED = "started"


def _kill_tree(leader: int) -> None:
    """SIGKILL process ``leader``'s descendants, those that left its process group (``setsid``)
    included, then the group it leads: ``leader`` itself and the group's processes whose parent
    ended, which no walk from ``leader`` finds. Descendants first: once ``leader`` is dead, its
    children are reparented out of reach."""
    kill_descendants(leader)  # without /proc (not Linux), the group alone
    with contextlib.suppress(ProcessLookupError):  # none left, or the worker never started
        os.killpg(leader, signal.SIGKILL)


def _exit_with_parent(parent: int) -> None:
    """End this worker and what its jobs started (:func:`_kill_tree`) once ``parent`` is no
    longer its parent (it died; we were reparented)."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    _kill_tree(os.getpid())


def _worker_main(conn: Connection, parent: int) -> None:
    """A pool worker: run the jobs received on ``conn`` and send back each :class:`JobResult`,
    and each warning shown meanwhile (a :class:`~orthobench.executors._base.Warned`: the runner
    shows it).

    Ends when the runner sends None, closes its end of the pipe, or dies, and on SIGTERM (the
    runner's Ctrl-C: :meth:`_Worker.terminate`). The worker leads its own session and process
    group, which the processes its jobs start join, so the runner can end them with it
    (:meth:`_Worker.kill_group`; those that leave the group are found as the worker's
    descendants).
    """
    os.setsid()
    ignore_sigint()  # the runner handles Ctrl-C and ends its workers
    stopping = threading.Event()

    def stop(signum: int, frame: object) -> None:
        # The job unwinds, closing what it opened (a batch cell's evaluation pool, whose
        # semaphores would otherwise be left to the resource tracker), and the worker exits.
        stopping.set()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    lock = threading.RLock()  # a warning of another thread must not cut into a message

    def send(message: object) -> None:
        with lock:
            conn.send(message)

    forward_warnings(send)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    while not stopping.is_set():
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        send(_STARTED)  # the job's clock starts now, not while the worker imported torch
        send(execute(job))  # a SIGTERM fails the job: execute catches its SystemExit


def _exit_reason(code: int | None) -> str:
    """``"exit code -6: SIGABRT"`` for a process ended by a signal, else ``"exit code 1"``."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"exit code {code}: {signal.Signals(-code).name}"
    return f"exit code {code}"


class _Worker:
    """A spawned worker process running one job at a time, sent over its own pipe.

    Unlike ``concurrent.futures.ProcessPoolExecutor``, whose pool breaks as a whole when one
    worker dies and does not say which task killed it, the worker knows its job: its death or
    timeout fails that job only.
    """

    def __init__(
        self, context: multiprocessing.context.SpawnContext, warned: dict[str, dict]
    ) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, os.getpid()))
        try:
            with sigint_blocked():  # until the worker ignores it, after its imports
                self.process.start()
        except BaseException:  # a Ctrl-C delivered as the block ends: no worker left behind
            if self.process.pid is not None:
                self.process.kill()
                self.process.join()
            raise
        finally:
            child.close()
        self.warned = warned  # which of the workers' warnings were shown, by file
        self.job: Job | None = None
        self.running_since: float | None = None  # when the worker started the job

    def submit(self, job: Job) -> None:
        self.conn.send(job)
        self.job = job
        self.running_since = None

    def waitables(self) -> list[object]:
        return [self.conn, self.process.sentinel]

    def seconds(self) -> float:
        """How long the job has been running (0 before the worker started it)."""
        return 0.0 if self.running_since is None else time.monotonic() - self.running_since

    def result(self, ready: Sequence[object]) -> JobResult | None:
        """The job's result if the worker finished it or died (``ready`` from ``wait``)."""
        if self.conn not in ready and self.process.sentinel not in ready:
            return None
        with contextlib.suppress(EOFError, OSError):
            while self.conn.poll():
                message = self.conn.recv()
                if isinstance(message, Warned):
                    message.show(self.warned)
                elif message == _STARTED:
                    self.running_since = time.monotonic()
                else:
                    return message
            if self.process.is_alive():
                return None
        self.process.join()
        self.kill_group()
        return failed(
            f"worker process died ({_exit_reason(self.process.exitcode)})", self.seconds()
        )

    def kill_group(self) -> None:
        """Kill the worker, if it still runs, and the processes its jobs started (a task's
        ``sleep``, its data loaders), which would outlive it otherwise (:func:`_kill_tree`): its
        process group, and while it lives its descendants outside the group (``setsid``)."""
        _kill_tree(self.process.pid)

    def terminate(self) -> None:
        """Kill what the job started (:func:`kill_descendants`) and ask the worker to end the job
        and exit (SIGTERM); :meth:`stop` it if it has not in time."""
        if self.process.is_alive():  # else its pid may be another process's by now
            kill_descendants(self.process.pid)
            self.process.terminate()

    def stop(self) -> None:
        """Kill the process and its group at once (its job is abandoned; a cell's journal keeps
        what it stored)."""
        self.kill_group()
        self.process.kill()  # a worker killed before it made its own group
        self.process.join()
        self.conn.close()

    def close(self, grace: float = 10.0) -> None:
        """Ask the idle worker to exit; kill it if it has not after ``grace`` seconds. What its
        jobs started and left running is killed either way."""
        # First, while the worker lives: its descendants outside its group are found through it.
        kill_descendants(self.process.pid)
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(grace)
        if self.process.is_alive():
            self.stop()
        self.kill_group()
        self.conn.close()


def _stop_all(workers: Sequence[_Worker]) -> None:
    """Stop ``workers`` (the runner's Ctrl-C, a timeout): the processes their jobs started are
    killed at once, the workers get :data:`_STOP_GRACE_S` seconds to end their jobs and exit
    (:meth:`_Worker.terminate`), and are then killed with their process groups."""
    try:
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + _STOP_GRACE_S
        for worker in workers:
            worker.process.join(max(deadline - time.monotonic(), 0.0))
    finally:  # a second Ctrl-C kills them at once
        for worker in workers:
            worker.stop()


class ProcessExecutor(Executor):
    """Runs jobs on up to ``workers`` spawned processes, replacing any that dies or times out.

    A job that keeps several processes busy (a batch cell evaluating ``min(q, workers)`` points
    at once in processes of its own: :attr:`Job.slots`) counts as that many: jobs start while the
    slots of those running stay within ``workers`` (and one always runs), so ``--workers 8``
    runs two cells of ``q = 4`` at once, each with four evaluation processes, and the processes
    evaluating stay about ``workers``. A cell's own process mostly waits while its evaluations
    run, and is not counted.

    ``spawn``, not ``fork``: forking a process that already initialized torch/OpenMP (or CUDA)
    can hang. A worker's process is reused for the next job, so tasks keep their per-process
    caches. Progress counts a job as it ends (of a failed one, the evaluations that ran, as
    inline: :func:`~orthobench.executors._base.progressed`), and the warnings a job shows are
    shown by the runner, as an inline job's are
    (:func:`~orthobench.executors._base.forward_warnings`).
    Pool workers ignore SIGINT from their start (their imports included), so a
    ``KeyboardInterrupt`` there always comes from the job's own code and fails it. On Ctrl-C the
    runner kills what their jobs started, gives them :data:`_STOP_GRACE_S` seconds to end their
    jobs (SIGTERM: a batch cell closes its evaluation pool) and kills them, as it does a worker
    whose job timed out; they exit within a second when the runner dies (``kill -9``). Each
    worker leads its own process group, which the processes a job starts join: a worker stopped
    at the timeout, one that dies and one that the runner closes take them along, and a worker
    stopped or closed also its descendants that left the group (``setsid``). A job that ends its
    worker (``os._exit``, ``os.abort()``, an out-of-memory kill) fails ("worker process died (exit
    code -6: SIGABRT)"), and the run goes on.
    """

    name = "process"

    def run(self, jobs: Sequence[Job], session: Session) -> None:
        context = multiprocessing.get_context("spawn")
        warned: dict[str, dict] = {}
        queue = deque(jobs)
        idle: list[_Worker] = []
        busy: list[_Worker] = []
        try:
            while queue or busy:
                while queue and (
                    not busy or sum(w.job.slots for w in busy) + queue[0].slots <= self.workers
                ):
                    worker = idle.pop() if idle else _Worker(context, warned)
                    worker.submit(queue.popleft())
                    busy.append(worker)
                running = [w.seconds() for w in busy if w.running_since is not None]
                left = (
                    None
                    if self.timeout is None or not running
                    else max(self.timeout - max(running), 0.0)
                )
                ready = wait_for([o for w in busy for o in w.waitables()], left)
                for worker in list(busy):
                    result = worker.result(ready)
                    if (
                        result is None
                        and self.timeout is not None
                        and worker.seconds() >= self.timeout
                    ):
                        seconds = worker.seconds()
                        _stop_all([worker])
                        result = failed(
                            f"timed out: still running after the {worker.job.unit.kind} timeout "
                            f"of {self.timeout:g} s; its process was stopped",
                            seconds,
                        )
                    if result is None:
                        continue
                    busy.remove(worker)
                    if worker.process.is_alive():
                        idle.append(worker)
                    session.progress.advance(progressed(worker.job, result))
                    session.finish(worker.job, result)
        except BaseException:
            _stop_all(busy)
            raise
        finally:
            for worker in idle:
                worker.close()
