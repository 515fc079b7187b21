"""Deadlines and the processes a stopped evaluation leaves: finding and killing descendants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orthobench.deadlines import descendants, kill_descendants

needs_proc = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


@needs_proc
def test_a_process_that_ended_has_no_descendants_and_killing_them_is_a_no_op():
    """A worker that died before its descendants were looked up (the cell's evaluation process
    killed by its task): its /proc entry is gone, which is not an error."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert descendants(ended.pid) == set()
    assert kill_descendants(ended.pid) is True


@needs_proc
def test_a_process_reaped_while_its_tasks_are_listed_is_not_an_error(monkeypatch):
    """The race CI met: ``/proc/<pid>/task`` was there when ``glob`` checked it and gone when it
    listed it (FileNotFoundError from ``scandir``)."""
    listed = Path.glob

    def reaped_meanwhile(self, pattern):
        if self == Path("/proc/999999999/task"):
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return listed(self, pattern)

    monkeypatch.setattr(Path, "glob", reaped_meanwhile)
    assert descendants(999999999) == set()


@needs_proc
def test_the_children_of_a_process_are_found():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants()
    finally:
        child.kill()
        child.wait()


def test_an_alarm_arriving_as_the_block_ends_still_puts_the_previous_handler_back(monkeypatch):
    """The timer can fire after the block returned, as the deadline clears it: the timeout is
    raised there, and the deadline's handler stayed installed, so any later SIGALRM raised
    ``EvaluationTimeout`` into whatever ran."""
    import os
    import signal

    from orthobench.deadlines import EvaluationTimeout, evaluation_deadline

    previous = signal.getsignal(signal.SIGALRM)
    setitimer = signal.setitimer

    def late(which, seconds, *interval):  # noqa: ANN001, ANN202
        if seconds == 0:  # the deadline clears its timer, which has just expired: its alarm
            setitimer(which, 0)
            os.kill(os.getpid(), signal.SIGALRM)
        return setitimer(which, seconds, *interval)

    monkeypatch.setattr(signal, "setitimer", late)
    try:
        with pytest.raises(EvaluationTimeout), evaluation_deadline(60.0):
            pass
        assert signal.getsignal(signal.SIGALRM) is previous
    finally:
        setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
