"""The command line's warnings, each printed once as one line on stderr."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from orthobench.exceptions import OrthobenchWarning, one_line


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """While the block runs, print each distinct warning as one stderr line, ``orthobench:
    warning: ...`` (Python would add the source location and line); another library's names its
    category and where it was raised (BoTorch's failed-restart warning took 9 lines)."""
    with warnings.catch_warnings():
        warnings.simplefilter("default", OrthobenchWarning)
        # Python's own once-per-location memory is reset by every `catch_warnings()` (each GP
        # fit enters one): a probe printed the same point-set warning at every rebuild, 78 times.
        shown: set[str] = set()

        def as_line(
            message: Warning | str, category: type[Warning], filename: str, lineno: int, *_: Any
        ) -> None:
            if issubclass(category, OrthobenchWarning):
                text = one_line(str(message), sys.maxsize)  # a crafted file name's escapes too
            else:
                where = f"{Path(filename).parent.name}/{Path(filename).name}:{lineno}"
                text = f"{category.__name__} ({where}): {one_line(str(message))}"
            if text not in shown:
                shown.add(text)
                click.echo(f"orthobench: warning: {text}", err=True)

        warnings.showwarning = as_line
        yield
