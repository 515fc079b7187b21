"""SIGTERM stops a command as Ctrl-C does: what is stored stays stored, and one line says so.

A batch scheduler preempting a job (Slurm, Kubernetes), ``kill`` and ``timeout`` send SIGTERM.
Python's default ends the process at once: no line said what was stored, a running inline cell
was left marked as running (the next run warned that it "never finished"), and the exit status
was the signal's. Delivered as SIGINT instead, it takes the runner's Ctrl-C path (workers
stopped, the running cell's marker removed), and the command exits 143 (128 + SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM

_terminated = threading.Event()


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While the block runs, a SIGTERM raises SIGINT in this process (:func:`stop_exit_code`,
    :func:`stopped_by` then tell the two apart).

    Nothing is installed off the main thread or over a SIGTERM handler someone else installed.
    Where SIGINT is not handled from Python when SIGTERM comes (ignored, as in a background job
    of a non-interactive shell, or left to the system), SIGTERM keeps its default and ends the
    process, as before.
    """
    _terminated.clear()
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or previous != signal.SIG_DFL:
        yield
        return

    def handler(signum, frame) -> None:  # noqa: ANN001 -- signal handler signature
        if not callable(signal.getsignal(signal.SIGINT)):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
            return
        _terminated.set()
        # Raised, not called: a SIGINT blocked while workers start is delivered once unblocked.
        signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stopped_by() -> str:
    """``interrupted`` after a Ctrl-C, ``terminated (SIGTERM)`` after a SIGTERM."""
    return "terminated (SIGTERM)" if _terminated.is_set() else "interrupted"


def stop_exit_code() -> int:
    """The exit code of a command stopped by Ctrl-C (130) or SIGTERM (143)."""
    return EXIT_TERMINATED if _terminated.is_set() else EXIT_INTERRUPTED
