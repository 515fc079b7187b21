"""The progress display: a line redrawn in place on a terminal, periodic lines elsewhere."""

from __future__ import annotations

import io
import os
import sys

from orthobench import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_stderr_the_display_is_off(monkeypatch):
    """``2>&-`` makes sys.stderr None: the first write raised AttributeError inside every
    cell, which failed them all."""
    monkeypatch.setattr(sys, "stderr", None)
    shown = progress.Progress(10)
    shown.advance(3)
    shown.message("done a cell")
    shown.close()
    assert not shown.enabled and shown.done == 3


def test_a_terminal_line_is_cleared_and_fits_the_width(monkeypatch):
    """The line was written after a bare carriage return: a shorter ETA left the end of the
    longer one on screen ("ETA 9:467"), and a line wider than the terminal wrapped, so each
    redraw stacked another."""
    monkeypatch.setattr(progress.shutil, "get_terminal_size", lambda: os.terminal_size((40, 24)))
    stream = _Terminal()
    shown = progress.Progress(100, label="[" + "n" * 64 + "]", stream=stream)
    shown.advance(10)
    written = stream.getvalue()
    assert written.startswith("\r\033[K")
    assert len(written.removeprefix("\r\033[K")) == 39 and written.endswith("…")
