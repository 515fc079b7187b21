"""The inline executor: jobs one after the other in this process."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence

from orthobench.executors._base import Executor, Job, Session, execute
from orthobench.executors._pool import ProcessExecutor


@contextlib.contextmanager
def _sigint_watch() -> Iterator[threading.Event]:
    """An event set when this process receives SIGINT (Ctrl-C) while the block runs.

    The handler sets the event, then does what the previous handler did (Python's default raises
    ``KeyboardInterrupt``). Signals reach only the main thread: elsewhere, where SIGINT is
    ignored, and where its handler was not installed from Python (``getsignal`` gives None: it
    could be neither called nor put back), nothing is installed and the event stays clear.
    """
    event = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous in (
        signal.SIG_IGN,
        None,
    ):
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


class InlineExecutor(Executor):
    """Runs jobs one at a time in this process, progress counted as each reports it.

    An exception of any kind that a job raises fails it, ``KeyboardInterrupt`` included, unless
    this process received SIGINT meanwhile: then the user's Ctrl-C ends the run
    (:func:`_sigint_watch`). A job that ends the process itself (``os._exit``) ends the run: inline
    mode trusts units not to; the session's running marker names it for the next run. With a
    ``timeout``, jobs run one at a time in a worker process instead (:class:`ProcessExecutor`),
    which can be stopped.
    """

    name = "inline"
    evaluation_kind = "inline"

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__(timeout=timeout)

    @property
    def description(self) -> str:
        """``inline``; with a time limit, where the jobs then run (a job that ends its process
        fails, and the run goes on)."""
        return self.name if self.timeout is None else "inline, each in a worker process"

    def run(self, jobs: Sequence[Job], session: Session) -> None:
        if self.timeout is not None:
            ProcessExecutor(timeout=self.timeout).run(jobs, session)
            return
        with _sigint_watch() as interrupted:
            for job in jobs:
                with session.running(job):
                    session.finish(job, execute(job, session.progress.advance, interrupted))
                if interrupted.is_set():  # the unit's code swallowed the KeyboardInterrupt
                    raise KeyboardInterrupt
