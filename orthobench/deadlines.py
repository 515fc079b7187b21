"""Deadlines: stop an evaluation past its time, and kill what it started.

:func:`evaluation_deadline` raises :class:`EvaluationTimeout` into the running code (a
``SIGALRM`` timer); :func:`kill_descendants` ends the processes a stopped evaluation or cell
left behind (found through Linux's ``/proc``). Used by the loop (an evaluation's
``evaluation_timeout_s``) and the executors (a cell's ``timeout_s``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

from orthobench.exceptions import OrthobenchWarning


class EvaluationTimeout(BaseException):
    """Raised into an evaluation past its deadline. A ``BaseException``, like
    ``KeyboardInterrupt``, so that a task's own ``except Exception`` does not swallow it."""


@contextlib.contextmanager
def evaluation_deadline(seconds: float | None, what: str = "evaluation") -> Iterator[None]:
    """Raise :class:`EvaluationTimeout` in the block once it has run ``seconds`` of wall-clock time.

    A ``SIGALRM`` timer (``signal.setitimer``) whose handler raises; the previous handler is
    restored and the timer cleared on exit. The exception arrives between two Python bytecodes,
    so a sleep or a Python training loop stops at once, but one long call into C code (a single
    huge kernel) only when it returns. Where no timer can be set (outside the main thread, where
    signal handlers run, as in a Dask worker; on Windows), the block runs without a limit, with
    an :class:`~orthobench.exceptions.OrthobenchWarning` that calls the limit ``what``'s.
    """
    if seconds is None:
        yield
        return
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        warnings.warn(
            f"the {what} timeout of {seconds:g} s is not enforced here: only a process's "
            f"main thread can set a SIGALRM timer; the {what} runs without a limit.",
            OrthobenchWarning,
            stacklevel=3,
        )
        yield
        return

    def expire(signum, frame) -> None:  # noqa: ANN001 -- signal handler signature
        raise EvaluationTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        try:  # the timer may expire as the block ends: its timeout is raised here, then
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:  # the handler is put back all the same
            signal.signal(signal.SIGALRM, previous)


def descendants(root: int | None = None) -> set[int] | None:
    """The PIDs of process ``root``'s (default: this process's) children, theirs, and so on, from
    Linux's ``/proc/<pid>/task/<tid>/children``, those that left its process group (``setsid``)
    included; None where there is no ``/proc`` (another OS). A process whose parent has ended is
    not found: it was reparented to init."""
    if not Path("/proc/self/task").is_dir():
        return None
    found: set[int] = set()
    parents = [os.getpid() if root is None else root]
    while parents:
        pid, listings = parents.pop(), []
        with contextlib.suppress(OSError):  # the process ended (and was reaped) meanwhile
            listings = list(Path(f"/proc/{pid}/task").glob("*/children"))
        for listing in listings:
            with contextlib.suppress(OSError):  # the thread or the process ended meanwhile
                new = set(map(int, listing.read_text().split())) - found
                found |= new
                parents.extend(new)
    return found


def kill_descendants(root: int | None = None, spare: set[int] | None = None) -> bool:
    """SIGKILL process ``root``'s (default: this process's) descendants (:func:`descendants`)
    but those in ``spare``: what a timed-out evaluation or cell left running. False where there
    is no ``/proc`` to find them in (none are killed)."""
    found = descendants(root)
    if found is None:
        return False
    for pid in found - (spare or set()):
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(pid, signal.SIGKILL)
    return True
