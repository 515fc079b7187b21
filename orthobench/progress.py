"""A dependency-free progress line with ETA for long runs (written to stderr)."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:d}:{s:02d}"


class Progress:
    """Counts units of work (evaluations) and prints ``done/total``, elapsed time and ETA.

    On a terminal the line is redrawn in place; elsewhere (CI logs) a line is printed at most
    every ``interval`` seconds, plus on every message, so logs stay short.
    """

    def __init__(
        self,
        total: int,
        *,
        label: str = "",
        unit: str = "evaluations",
        stream: TextIO | None = None,
        enabled: bool = True,
        interval: float = 10.0,
    ) -> None:
        self.total = max(total, 1)
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        # No stream at all where stderr is closed (`2>&-`: Python sets sys.stderr to None): a
        # progress display there failed every cell on its first write.
        self.enabled = enabled and self.stream is not None
        self.interval = interval
        self.done = 0
        self.start = time.perf_counter()
        self._last_print = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        eta_text = _clock(eta) if self.done else "?"
        return f"{self.label} {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%) | elapsed {_clock(elapsed)} | ETA {eta_text}"

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._tty:
            self.stream.write("\r\033[K" + self._fitted(self.line()))
            self.stream.flush()
        elif now - self._last_print >= self.interval or self.done >= self.total:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last_print = now

    @staticmethod
    def _fitted(line: str) -> str:
        r"""``line`` cut to the terminal's width: a line that wraps is not redrawn in place by
        ``\r``, which returns to the start of its last screen row only. (A shorter line than the
        one before is cleared to its end by the caller's ``\033[K``.)"""
        width = shutil.get_terminal_size().columns
        return line if len(line) < width else line[: max(width - 2, 1)] + "…"

    def message(self, text: str) -> None:
        """Print a message line (e.g. a finished cell) without breaking the progress line."""
        if not self.enabled:
            return
        if self._tty:
            self.stream.write("\r\033[K" + text + "\n" + self._fitted(self.line()))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()
