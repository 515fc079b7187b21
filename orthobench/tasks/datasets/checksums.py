"""SHA-256 of dataset files, checked once per version of a file and the verdict remembered.

Hashing a whole dataset on every load would cost seconds per process (CIFAR-10's archive is
170 MB), so a verified file is remembered, in the process and in a small JSON sidecar next to it
(:data:`SIDECAR_NAME`), under its *stamp*: path, size, modification time, inode change time
(``ctime``, which every write, rename or replacement updates and which no user call can set back)
and inode. A later load whose file has the same stamp costs one ``os.stat``; any other stamp is
hashed again. Only matches are remembered: a mismatch is hashed again on the next load, so a
repaired file is accepted at once.

A directory where the sidecar cannot be written (read-only, full) still verifies: the verdict is
then kept for the process only, with a warning that later processes hash again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from orthobench.exceptions import DatasetMissingError, OrthobenchWarning

#: The sidecar that records verified files, one per directory of data files.
SIDECAR_NAME = ".orthobench-sha256.json"
_SIDECAR_VERSION = 1
_CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, as lower-case hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class _Stamp:
    """What identifies one version of a file without reading it."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> _Stamp:
        st = os.stat(path)
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


# Verdicts of this process: (absolute path, stamp, sha256). A cache of facts about files, not a
# setting, so it may be module state: a spawned worker starts empty and reads the sidecar.
_VERIFIED: set[tuple[str, _Stamp, str]] = set()


def _sidecar_entries(sidecar: Path) -> dict[str, dict]:
    """The sidecar's ``file name -> {sha256, stamp fields}``; empty when absent or unreadable
    (a damaged sidecar costs one hash, never a wrong verdict: entries must match a stamp)."""
    try:
        content = json.loads(sidecar.read_text())
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deeply
        return {}
    if not isinstance(content, dict) or content.get("version") != _SIDECAR_VERSION:
        return {}
    files = content.get("files")
    return files if isinstance(files, dict) else {}


def _remember(path: Path, stamp: _Stamp, sha256: str) -> None:
    """Add the verdict to the process cache and to the sidecar (written atomically)."""
    _VERIFIED.add((str(path), stamp, sha256))
    sidecar = path.parent / SIDECAR_NAME
    entries = _sidecar_entries(sidecar)
    entries[path.name] = {"sha256": sha256, **asdict(stamp)}
    tmp = sidecar.with_name(f"{SIDECAR_NAME}.{os.getpid()}.tmp")  # one per writing process
    try:
        tmp.write_text(json.dumps({"version": _SIDECAR_VERSION, "files": entries}, indent=1))
        os.replace(tmp, sidecar)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        warnings.warn(
            f"could not record the verified SHA-256 of {path} in {sidecar} ({err}); this "
            "process keeps the verdict, later processes hash the file again.",
            OrthobenchWarning,
            stacklevel=3,
        )


def _known_good(path: Path, stamp: _Stamp, sha256: str) -> bool:
    if (str(path), stamp, sha256) in _VERIFIED:
        return True
    entry = _sidecar_entries(path.parent / SIDECAR_NAME).get(path.name)
    if not isinstance(entry, dict) or entry.get("sha256") != sha256:
        return False
    if {k: entry.get(k) for k in asdict(stamp)} != asdict(stamp):
        return False
    _VERIFIED.add((str(path), stamp, sha256))
    return True


def record_verified(path: str | os.PathLike[str], sha256: str) -> None:
    """Remember that ``path`` has SHA-256 ``sha256`` (just computed by the caller, e.g. a
    download), so the next :func:`verify_file` costs a stat."""
    path = Path(path).absolute()
    _remember(path, _Stamp.of(path), sha256)


def file_matches(path: str | os.PathLike[str], expected: str) -> bool:
    """Whether ``path`` has SHA-256 ``expected``, hashed in full (no remembered verdict is
    trusted, as ``orthobench data status`` and ``fetch`` promise); a match is remembered."""
    return _check(Path(path).absolute(), expected, trust_remembered=False) is None


def _check(path: Path, expected: str, *, trust_remembered: bool) -> str | None:
    """None when ``path`` has SHA-256 ``expected`` (and the verdict is remembered), else the
    actual digest."""
    before = _Stamp.of(path)
    if trust_remembered and _known_good(path, before, expected):
        return None
    actual = sha256_of(path)
    if actual != expected:
        return actual
    # A file written while it was hashed gets no verdict: its next load hashes it again.
    if _Stamp.of(path) == before:
        _remember(path, before, expected)
    return None


def verify_file(path: str | os.PathLike[str], expected: str, *, fix: str) -> None:
    """Check that ``path`` has SHA-256 ``expected``: a stat when this version of the file was
    verified before (in this process or, per its sidecar, in another), else a full hash.

    Args:
        path: The data file.
        expected: Its published SHA-256, lower-case hex.
        fix: What repairs it, for the error message (e.g. the ``orthobench data fetch`` command).

    Raises:
        DatasetMissingError: one line naming the file, the expected and the actual digest and
            ``fix``.
    """
    path = Path(path).absolute()
    actual = _check(path, expected, trust_remembered=True)
    if actual is not None:
        raise DatasetMissingError(
            f"{path} is damaged or was replaced: its SHA-256 is {actual}, but the published one "
            f"is {expected}; {fix}."
        )
