"""Atomic file writes, the opening of a results folder's own files, and one-line text of
file-system errors.

A file is written to a temporary name in the same directory, flushed, fsynced and renamed, so a
crash leaves either the whole file or none; an ``OSError`` that names no file (a failed write or
fsync), or that names the temporary file (a failed rename), is made to name the file it was
writing. A results folder's own files (its lock, journals, marker, unit files and report) are
neither opened nor written through a symbolic link, and are opened without blocking on a FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from orthobench.exceptions import OrthobenchError


def os_error_text(err: OSError) -> str:
    """``"<path>: <reason>"`` of a file-system error, for a one-line message (``str(err)`` when
    it names no path)."""
    reason = err.strerror or str(err)
    return f"{err.filename}: {reason}" if err.filename is not None else reason


def write_atomic(path: Path, write: Callable[[BinaryIO], object], *, own: bool = False) -> None:
    """Create or replace ``path`` with what ``write`` writes to a binary file handle, so that
    readers never see a partial file and a failure (a full disk) leaves the old file or none.

    The data go to a temporary file beside ``path``, which is flushed, fsynced and renamed over
    ``path``; the temporary file is removed when anything fails. A symbolic link that a user
    named (``own`` false) is written through (its target is replaced, the link kept); one in
    place of a results folder's ``own`` file is refused (:func:`refuse_link`): a crafted folder
    would have orthobench write outside it. An existing ``path`` that is not a regular file (a
    FIFO, a device, a folder) is refused: renaming over it would replace it.

    Raises:
        OrthobenchError: naming ``path`` when it is ``own`` and a symbolic link, or naming the
            temporary file when one is in its place (:func:`open_own`).
        OSError: from the file system (a full disk, a folder that cannot be written), naming
            ``path`` where the failing call named no file (a write or an fsync) or the temporary
            file (its creation, the rename); ``ENOTSUP`` for a ``path`` that exists and is not a
            regular file.
    """
    if own:
        refuse_link(path)
    # errors still name the path as given; an own path's rename replaces a link put there since
    target = Path(path) if own else Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        raise OSError(errno.ENOTSUP, "exists and is not a regular file", str(path))
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with _naming(path, tmp):
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb", opener=open_own) as fh:  # a link planted at the name: refused
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
            _fsync_dir(target.parent)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def file_in_the_way(path: Path) -> Path | None:
    """The existing ancestor of ``path`` that is not a folder (a file where :func:`write_atomic`
    would create one of its folders, which fails with only ``File exists``), else None."""
    return next((p for p in path.parents if p.exists() and not p.is_dir()), None)


def refuse_link(path: str | Path) -> None:
    """Raise when ``path``, a file or folder that a results folder holds as its own, is a
    symbolic link: written through, it would change a file outside the folder.

    Raises:
        OrthobenchError: naming ``path``.
    """
    if os.path.islink(path):
        raise OrthobenchError(
            f"{path} is a symbolic link; orthobench writes a results folder's own files only "
            "inside it: remove the link or replace it with a copy of what it points to."
        )


def open_own(path: str | Path, flags: int, mode: int = 0o666) -> int:
    """``os.open`` of a regular file that a results folder holds as its own (its lock, a
    journal, the running marker), with the signature of ``open``'s ``opener``.

    A symbolic link in its place is refused (``O_NOFOLLOW``, where the OS has it): opened
    through, it would truncate or append to a file outside the folder. So is a file that is not
    a regular one (a FIFO, a device), opened without blocking (``O_NONBLOCK``): a FIFO would
    wait for a writer or reader forever.

    Raises:
        OrthobenchError: naming ``path`` when it is a symbolic link or not a regular file.
        OSError: from the file system otherwise.
    """
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, mode)
    except OSError as err:
        refuse_link(path)
        if err.errno == errno.ENXIO:  # a FIFO without a reader, opened for writing
            raise _not_regular(path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _not_regular(path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_regular(path: str | Path) -> OrthobenchError:
    return OrthobenchError(
        f"{path} is not a regular file (a FIFO or a device); a results folder's lock, journals "
        "and marker are regular files that orthobench writes: remove it."
    )


@contextlib.contextmanager
def _naming(path: Path, tmp: Path | None = None) -> Iterator[None]:
    """Make an ``OSError`` raised in the block name ``path`` when it names no file or the
    temporary file ``tmp`` written for it: a failed ``write`` or ``fsync`` (a full disk) says
    only ``No space left on device``, and a failed ``os.replace`` (an immutable target) names
    ``tmp`` first and ``path`` second, though ``tmp`` is removed and ``path`` is what to fix."""
    try:
        yield
    except OSError as err:
        stand_ins = (None, str(tmp) if tmp else None)
        if err.filename in stand_ins and err.strerror is not None:  # else str(err) loses its text
            err.filename, err.filename2 = str(path), None
        raise


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
