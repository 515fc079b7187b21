"""Jobs, their results, and the executor interface (as Syne Tune's ``TrialBackend``).

A :class:`Job` is one unit of work (:class:`~orthobench.work.WorkUnit`) with its execution
settings; it pickles to pool and Dask workers. An :class:`Executor` runs jobs and hands each
result to the :class:`Session` that asked, which stores it; neither knows what a job computes.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import importlib
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import resource_tracker
from typing import Any, ClassVar, NamedTuple, Protocol

# threadpool_limits (thread_limits) bounds only the libraries loaded when it is entered, and
# scipy's own OpenBLAS loads with scipy.linalg: in a fresh worker process, only once a cell ran.
# Imported with this module, as the worker starts, not inside the first job's timed evaluation.
import scipy.linalg  # noqa: F401
import torch
from threadpoolctl import threadpool_limits

from orthobench.exceptions import describe_error
from orthobench.loop import ProgressCallback
from orthobench.progress import Progress
from orthobench.results import where_run
from orthobench.work import WorkUnit


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


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Run the block with SIGINT blocked in this thread, so the processes it starts begin with
    SIGINT blocked (the mask is inherited through ``spawn``); each unblocks it once it ignores
    SIGINT (:func:`ignore_sigint`). A Ctrl-C while a child imports is thus never a
    ``KeyboardInterrupt`` traceback there; here it is delivered when the block ends.

    multiprocessing's resource tracker unblocks SIGINT when it starts, so it is started first.
    """
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def ignore_sigint() -> None:
    """Ignore SIGINT in this worker process (the runner handles Ctrl-C and stops its workers),
    then unblock it (:func:`sigint_blocked`): a Ctrl-C pending since the process started is
    discarded."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class Warned(NamedTuple):
    """A warning shown in a worker process, to be shown again in the process that runs it
    (:meth:`show`): there the runner's filters and format apply (the CLI's ``orthobench:
    warning: ...`` line), as to a warning of an inline cell. The category travels by name (the
    runner may not have it), with the nearest built-in category as the fallback."""

    message: str
    category: str  # "module:qualname"
    builtin: type[Warning]
    filename: str
    lineno: int

    @classmethod
    def of(cls, message: Warning | str, category: type[Warning], filename: str, lineno: int):
        builtin = next(c for c in category.__mro__ if c.__module__ == "builtins")
        name = f"{category.__module__}:{category.__qualname__}"
        return cls(str(message), name, builtin, filename, lineno)

    def warning(self) -> Warning:
        """The warning, of its category where this process can import it and make one."""
        module, _, qualname = self.category.partition(":")
        try:
            category = importlib.import_module(module)
            for name in qualname.split("."):
                category = getattr(category, name)
            return category(self.message)
        except Exception:  # noqa: BLE001 -- not importable here, or a constructor of its own
            return self.builtin(f"{qualname.rsplit('.', 1)[-1]}: {self.message}")

    def show(self, registries: dict[str, dict]) -> None:
        """Warn here as the worker did; ``registries`` keeps which were shown, by file (the
        ``default`` action shows a warning once per place, whichever worker warned)."""
        registry = registries.setdefault(self.filename, {})
        warnings.warn_explicit(self.warning(), None, self.filename, self.lineno, registry=registry)


def show_warnings(warned: Sequence[Warned], registries: dict[str, dict]) -> None:
    """Show here the warnings a worker process or a Dask task showed (``registries``: which
    were shown, by file, as :meth:`Warned.show` keeps them)."""
    for warning in warned:
        warning.show(registries)


def forward_warnings(send: Callable[[Warned], None]) -> Callable[..., None]:
    """Hand each warning this process shows to ``send`` as a :class:`Warned` (a worker process's
    warnings, shown again by the runner), instead of printing it; one that cannot be sent, or
    that is written to a file of its own, is printed as before. Returns the function it made
    ``warnings.showwarning``."""
    show = warnings.showwarning

    def forward(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if file is None:
            try:
                send(Warned.of(message, category, filename, lineno))
                return
            except Exception:  # noqa: BLE001 -- the runner is gone: print it here
                pass
        show(message, category, filename, lineno, file, line)

    warnings.showwarning = forward
    return forward


#: The warnings of the call :func:`with_warnings` runs in this thread; None outside one.
_COLLECTED: contextvars.ContextVar[list[Warned] | None] = contextvars.ContextVar(
    "orthobench_collected_warnings", default=None
)
_INSTALLING = threading.Lock()
_installed: list[Callable[..., None]] = []  # the forwarder to _collect, once installed


def _collect(warned: Warned) -> None:
    collected = _COLLECTED.get()
    if collected is None:  # a thread of no collected call: the forwarder prints it
        raise LookupError("no call collects this thread's warnings")
    collected.append(warned)


def with_warnings(function: Callable[..., Any], *args: Any) -> tuple[Any, list[Warned]]:
    """``function(*args)`` and the warnings it showed, as :class:`Warned`, instead of printed:
    a Dask task's, for the process that submitted it to show (a Dask worker prints them to its
    own stderr, an external cluster's to its log). Per thread, so tasks in the threads of one
    worker keep their own; other threads' warnings are printed as before. Like a pool worker, a
    worker process shows a warning once per place under the ``default`` action: a later task's
    same warning there is not collected again."""
    with _INSTALLING:
        # Again where a `warnings.catch_warnings` block that was open at the install has ended
        # since, and put back the function it found.
        if warnings.showwarning not in _installed:
            _installed[:] = [forward_warnings(_collect)]
    collected: list[Warned] = []
    token = _COLLECTED.set(collected)
    try:
        return function(*args), collected
    finally:
        _COLLECTED.reset(token)


class Job(abc.ABC):
    """One unit's work and its execution settings (subclasses are frozen dataclasses).

    Attributes:
        unit: The unit of work.
        device: Where it computes (``cpu``, ``cuda:0``).
        threads: Torch threads while it runs (:func:`thread_limits`).
    """

    unit: WorkUnit
    device: str
    threads: int

    #: What progress counts for jobs of this kind.
    progress_unit: ClassVar[str]

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Progress units of the whole job (a cell's evaluations, one state)."""

    @abc.abstractmethod
    def run(self, on_progress: ProgressCallback | None) -> list[Any]:
        """Compute the unit's records, calling ``on_progress`` as parts of it finish."""

    @abc.abstractmethod
    def metadata(self) -> dict[str, Any]:
        """The settings stored with the unit's records (thread count, time limits)."""

    @property
    def slots(self) -> int:
        """Worker processes (or Dask threads) the job keeps busy while it runs: 1, or a batch
        cell's evaluations at once. Executors run jobs at once up to their ``workers`` slots."""
        return 1


class JobResult(NamedTuple):
    records: list[Any] | None  # None when the job failed
    error: str | None
    traceback: str
    seconds: float
    # The host, CPU (and GPU) of the process that ran the job (results.where_run), stored with
    # its records in place of the runner's: a Dask worker may be another machine.
    where: dict[str, str] | None = None
    # The progress units the job reported (execute), all of them where it was stored; 0 where
    # its executor ended it (a timeout, a dead worker), which cannot know how far it got.
    progressed: int = 0


def failed(reason: str, seconds: float) -> JobResult:
    """The result of a job that the executor ended (a timeout, a dead worker)."""
    return JobResult(None, reason, reason + "\n", seconds)


def progressed(job: Job, result: JobResult) -> int:
    """The progress units that ``job``, run elsewhere, counts once it ended with ``result``: all
    of them where it was stored, else those it did (an inline job's count as it reports them;
    none where its executor ended it: :attr:`JobResult.progressed`)."""
    return job.size if result.records is not None else result.progressed


def execute(
    job: Job,
    on_progress: ProgressCallback | None = None,
    user_interrupt: threading.Event | None = None,
) -> JobResult:
    """Run a job with its thread count; any exception it raises is returned as its failure.

    Except when ``user_interrupt`` is set (the user pressed Ctrl-C): the job ended because of it,
    and ``KeyboardInterrupt`` is raised to end the run. A failed job's result counts the progress
    units it reported (:attr:`JobResult.progressed`).
    """
    start = time.perf_counter()
    reported = 0

    def report(n: int) -> None:
        nonlocal reported
        reported += n
        if on_progress is not None:
            on_progress(n)

    try:
        with thread_limits(job.threads):
            records = job.run(report)
    except BaseException as err:  # noqa: BLE001 -- SystemExit/KeyboardInterrupt of a unit's code are its failure
        if user_interrupt is not None and user_interrupt.is_set():
            raise KeyboardInterrupt from err
        seconds = time.perf_counter() - start
        return JobResult(None, describe_error(err), traceback.format_exc(), seconds, None, reported)
    return JobResult(records, None, "", time.perf_counter() - start, where_run(job.device))


class Session(Protocol):
    """The run an executor runs jobs for (:class:`orthobench.execution.Run`)."""

    progress: Progress

    def running(self, job: Job) -> contextlib.AbstractContextManager[None]:
        """Mark ``job`` as running in this process while the block runs it (inline executors)."""
        ...

    def finish(self, job: Job, result: JobResult) -> None:
        """Store the job's result (records, or its failure)."""
        ...


class Executor(abc.ABC):
    """Runs jobs, handing each result to the session as it finishes, failed or not.

    A job that raises, times out or loses its process fails alone; the others run. Executors are
    settings only (no state between runs), so one may serve several runs.

    Args:
        workers: Processes that run jobs at once (never more than there are jobs).
        timeout: Seconds a job may run before it is stopped and failed (None: no limit).
    """

    #: The name ``--executor`` gives it.
    name: ClassVar[str]
    #: Whether an evaluation's time limit can be enforced (it needs a process's main thread).
    enforces_evaluation_timeout: ClassVar[bool] = True
    #: Where a batch cell's evaluations run when several run at once
    #: (:data:`orthobench.executors._evaluations.EVALUATION_KINDS`).
    evaluation_kind: ClassVar[str] = "process"
    #: CUDA jobs, and CUDA evaluations of batch cells, that share one GPU: each asks for a
    #: ``1/jobs_per_gpu`` share of a ``GPU`` worker resource (:class:`DaskExecutor`; the other
    #: executors ask for no resources: their ``workers`` processes share the device).
    jobs_per_gpu: int = 1

    def __init__(self, *, workers: int = 1, timeout: float | None = None) -> None:
        if workers < 1:
            raise ValueError(f"`workers` must be >= 1, but got {workers=}.")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"`timeout` must be > 0 seconds, but got {timeout=}.")
        self.workers = workers
        self.timeout = timeout

    @property
    def description(self) -> str:
        """How it runs jobs, for a run's header: its :attr:`name`."""
        return self.name

    @property
    def shares_files(self) -> bool:
        """Whether jobs run where this process's files are (else cells keep no evaluation
        journal)."""
        return True

    def processes(self, jobs: int) -> int:
        """Processes of this machine that run ``jobs`` jobs at once (``jobs``: the jobs'
        :attr:`Job.slots`, so a batch cell counts its evaluations at once)."""
        return max(min(self.workers, jobs), 1)

    def evaluation_workers(self, q: int) -> int:
        """How many of the ``q`` evaluations of a cell's BO step run at once: ``min(q,
        workers)``, so a cell never holds more than the executor's workers (inline: 1)."""
        return max(1, min(q, self.workers))

    @abc.abstractmethod
    def run(self, jobs: Sequence[Job], session: Session) -> None:
        """Run ``jobs``, calling ``session.finish`` once per job; Ctrl-C ends the run
        (``KeyboardInterrupt``) with the workers stopped."""
