"""The JSON-lines journals of the store: one of finished and failed units, one per cell in progress.

Entries are appended and fsynced; a line that is not an entry (torn by a crash, or damaged: not
UTF-8, not a JSON object or one nested too deeply to decode, an entry without its fields) is
skipped on read. A unit counts as stored when its last :class:`Journal` entry says ``ok`` at the
current schema version and its Parquet file reads and agrees with it, or, without such an entry
(lost), when its file's footer, which holds the entry's fields, is at the current schema version
and its pages read. An :class:`EvaluationJournal` holds a running cell's evaluations with the
optimizer's state, so a cell killed mid-way resumes from them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from orthobench.exceptions import OrthobenchWarning, ResultsError, one_line
from orthobench.results._io import _naming, open_own
from orthobench.results._parquet import (
    _ARROW_ERRORS,
    _open_regular,
    parse_metadata,
    read_footer,
    read_table,
)
from orthobench.results._records import (
    METADATA_KEY,
    SCHEMA_VERSION,
    RunRecord,
    fill_added_run_fields,
)


def _append_line(path: Path, entry: dict[str, Any]) -> str:
    """Append ``entry`` as one JSON line and fsync it; returns the line's JSON text.

    A crash can leave a torn last line without its newline: the entry then starts on a fresh line,
    so it is not glued onto the fragment (the fragment stays unparseable and is skipped).
    """
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b", opener=open_own) as fh:
            fh.seek(0, os.SEEK_END)
            torn = False
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
            text = json.dumps(entry, default=str)
            fh.write((b"\n" if torn else b"") + text.encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
    return text


#: The largest journal read, far above any that orthobench writes: a larger one (a huge sparse
#: file put in a crafted folder) would fill the memory.
_JOURNAL_BYTES = 4 << 30


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file in order; a line that is not one (torn by a crash,
    bytes that are not UTF-8, JSON nested too deeply to decode or a value of another type after
    a disk fault) is skipped.

    A missing file, or one under a file, is an empty journal.

    Raises:
        ResultsError: naming ``path`` when it cannot be read, is not a regular file (a FIFO,
            which would block, or a device such as ``/dev/zero``, a link is followed) or is
            larger than :data:`_JOURNAL_BYTES`.
    """
    try:
        fh = _open_regular(path)
    # A folder on the way that is a file (``-o`` under a file, ``/dev/full``) holds no journal
    # either: the store's own check, when it writes, names the folder it cannot create.
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as err:
        raise ResultsError(f"{path}: cannot read this journal ({err.strerror or err})") from None
    entries = []
    with fh:
        if (size := os.fstat(fh.fileno()).st_size) > _JOURNAL_BYTES:
            raise ResultsError(
                f"{path}: {size} bytes, more than the {_JOURNAL_BYTES} of any journal that "
                "orthobench writes: remove it or move it away."
            )
        for line in fh:
            try:
                entry = json.loads(line.decode())
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


#: Verdicts of :func:`_pages_problem` in this process, by file and its stat stamp (a file
#: replaced or rewritten has another): each stored file's pages are read once per process.
_PAGES: dict[tuple[str, int, int, int], str | None] = {}


def _pages_problem(path: Path) -> str | None:
    """Why the pages of the Parquet file ``path``, whose footer reads, do not (None when they
    do): a damaged block leaves the footer whole, and the report reads the pages."""
    try:
        stat = path.stat()
    except OSError as err:  # removed meanwhile
        return one_line(str(err), 200)
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _PAGES:
        try:
            read_table(path)
            _PAGES[key] = None
        except _ARROW_ERRORS as err:
            _PAGES[key] = one_line(str(err), 200)
    return _PAGES[key]


def _read_footer(path: Path) -> tuple[pq.FileMetaData, dict[str, Any]]:
    """The Parquet footer of ``path`` and the orthobench metadata it holds (``{}``: none).

    Raises:
        OSError, pyarrow.ArrowException: when the footer does not read.
        ValueError: when the metadata is not JSON of its shape (:func:`parse_metadata`).
    """
    footer = read_footer(path)
    return footer, parse_metadata((footer.metadata or {}).get(METADATA_KEY, b"{}"))


def _file_problem(path: Path, entry: dict[str, Any]) -> str | None:
    """Why ``path`` is not the unit its journal ``entry`` records (None when it is).

    Its Parquet footer must parse and hold the entry's row count, config hash and schema
    version, and then its pages must read (:func:`_pages_problem`).
    """
    if not path.exists():
        return f"missing ({path})"
    try:
        footer, meta = _read_footer(path)
    except (*_ARROW_ERRORS, ValueError) as err:
        return f"corrupt ({path}: {one_line(str(err), 200)})"
    for what, found, journaled in (
        ("rows", footer.num_rows, entry.get("rows")),
        ("config hash", meta.get("config_hash"), entry.get("config_hash")),
        ("schema version", meta.get("schema_version"), entry.get("schema_version")),
    ):
        if found != journaled:
            return f"corrupt ({path}: {what} {found}, but the journal says {journaled})"
    pages = _pages_problem(path)
    return None if pages is None else f"corrupt ({path}: {pages})"


class Journal:
    """An append-only JSON-lines file of unit entries (``{key: id, "config_hash": ..., ...}``).

    Each entry is appended and fsynced; a torn (unparseable) line from a crash is skipped on read.
    Within :meth:`kept` (its writer holding the folder), the ok entries are read once and kept
    in memory as entries are appended.

    Args:
        path: The journal file.
        key: The entry field holding the unit id (``cell_id``, ``state_id``).
        directory: Where the unit files ``<id>.parquet`` are.
        unit: What a unit is called in messages (``cell``, ``probe state``).
        config_key: The field of a unit file's metadata holding the resolved configuration that
            its entry holds as ``config`` (``cell``, ``config``).
    """

    def __init__(self, path: Path, key: str, directory: Path, unit: str, config_key: str) -> None:
        self.path = path
        self.key = key
        self.directory = directory
        self.unit = unit
        self.config_key = config_key
        #: ``id -> last ok entry`` while :meth:`kept`, else None (read from the file each time).
        self._kept: dict[str, dict[str, Any]] | None = None

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Read the ok entries once as the block starts and keep them, with those appended in
        the block, instead of reading the file at each look-up: storing each of ``n`` units
        parsed the whole journal each time. Only for the process that holds the folder for
        writing, so that no other process appends meanwhile."""
        self._kept = self._last_ok()
        try:
            yield
        finally:
            self._kept = None

    def append(self, entry: dict[str, Any]) -> None:
        text = _append_line(self.path, entry)
        if self._kept is not None:
            line = json.loads(text)  # as it reads back: the JSON of its values
            if self._is_ok(line):
                self._kept[line[self.key]] = line

    def entries(self) -> list[dict[str, Any]]:
        """Entries in order; a line that is not an entry (torn, damaged: its unit id missing or
        not a string) is skipped."""
        return [e for e in _read_lines(self.path) if isinstance(e.get(self.key), str)]

    def stored_entries(self, restore: bool = False) -> dict[str, dict[str, Any]]:
        """``id -> last ok entry`` of the stored units: the entry is at the current schema version
        and the unit's file agrees with it (:func:`_file_problem`).

        A failure journaled after it does not undo it: a failed attempt writes no file, so the
        one stored stays what the entry says (a probe state whose added rows failed keeps its
        rows). A unit whose file does not agree is left out (so it is recomputed), with an
        :class:`~orthobench.exceptions.OrthobenchWarning`:
        ``cell <id>: stored file is corrupt (<path>: <why>); recomputing``. A unit file without
        an ok entry has its entry read from its footer (:meth:`_entry_from_file`), and appended
        to the journal with ``restore`` (a caller that holds the folder for writing), so its
        warning is not repeated at every run.
        """
        last = self._last_ok()
        stored = {uid: entry for uid, entry in last.items() if self._agrees(uid, entry)}
        for path in sorted(self.directory.glob("*.parquet")):
            if path.stem not in last and (entry := self._entry_from_file(path.stem)) is not None:
                stored[path.stem] = entry
                if restore:
                    self.append(entry)
        return stored

    def stored_entry(self, uid: str) -> dict[str, Any] | None:
        """The entry of unit ``uid`` in :meth:`stored_entries` (None: not stored), its file
        checked alone."""
        entry = self._last_ok().get(uid)
        if entry is None:
            return self._entry_from_file(uid)
        return entry if self._agrees(uid, entry) else None

    def _last_ok(self) -> dict[str, dict[str, Any]]:
        """``id -> last ok entry`` (not to be changed: within :meth:`kept`, the kept one)."""
        if self._kept is not None:
            return self._kept
        return {e[self.key]: e for e in self.entries() if self._is_ok(e)}

    def _is_ok(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` is an ``ok`` one; one without a unit id or config hash (damaged) is
        skipped as a torn line is."""
        return (
            isinstance(entry.get(self.key), str)
            and entry.get("status") == "ok"
            and isinstance(entry.get("config_hash"), str)
        )

    def _agrees(self, uid: str, entry: dict[str, Any]) -> bool:
        """Whether the ok ``entry`` is at the current schema version and the unit's file agrees
        with it (else it is warned about)."""
        if entry.get("schema_version") != SCHEMA_VERSION:
            return False
        problem = _file_problem(self.directory / f"{uid}.parquet", entry)
        if problem is not None:
            self._warn(uid, f"stored file is {problem}; recomputing")
        return problem is None

    def _entry_from_file(self, uid: str) -> dict[str, Any] | None:
        """The ok entry of unit ``uid``, which the journal lacks, read from its file's footer.

        Its file is written whole before its entry is appended, and its footer holds the entry's
        fields: a file without an entry is a lost line (a crash between the two, a damaged or
        replaced journal), not a unit to recompute. Its entry is taken from a footer at the
        current schema version whose pages read, with a warning (``cell <id>: <journal> has no
        entry for the stored file <path>; its entry is read from it``); then, as for any
        entry, the unit is stored when its configuration hash is the one it has now.

        Returns:
            None for no file, one of another schema version or without orthobench metadata
            (recomputed, as an entry of another schema version is), or a corrupt one (said as
            :meth:`_agrees` says it).
        """
        path = self.directory / f"{uid}.parquet"
        try:
            footer, meta = _read_footer(path)
        except FileNotFoundError:
            return None
        except (*_ARROW_ERRORS, ValueError) as err:
            problem = one_line(str(err), 200)
        else:
            hashed = isinstance(meta.get("config_hash"), str)
            if meta.get("schema_version") != SCHEMA_VERSION or not hashed:
                return None
            problem = _pages_problem(path)
        if problem is not None:
            self._warn(uid, f"stored file is corrupt ({path}: {problem}); recomputing")
            return None
        self._warn(
            uid, f"{self.path} has no entry for the stored file {path}; its entry is read from it"
        )
        entry = {
            self.key: uid,
            "config_hash": meta["config_hash"],
            "status": "ok",
            "schema_version": SCHEMA_VERSION,
            "seconds": meta.get("seconds"),
            "rows": footer.num_rows,
            "config": meta.get(self.config_key),
            "code_version": meta.get("code_version"),
        }
        return {field: value for field, value in entry.items() if value is not None}

    def _warn(self, uid: str, text: str) -> None:
        warnings.warn(f"{self.unit} {uid}: {text}", OrthobenchWarning, stacklevel=1)

    def stored(self) -> dict[str, str]:
        """``id -> config hash`` of the stored units (:meth:`stored_entries`)."""
        return {uid: entry["config_hash"] for uid, entry in self.stored_entries().items()}


@dataclass(frozen=True)
class EvaluationJournal:
    """The evaluations of one cell in progress, one JSON line each, with the optimizer's state.

    Each line is ``{"schema_version", "config_hash", "record": RunRecord fields, "state":
    Optimizer.state_dict() after the evaluation's BO step was told, or None}``, appended and
    fsynced as the evaluation finishes. The evaluation that completes a BO step is appended after
    the step is told, with the state; the others of the step (and the initial design) without
    one, as they finish, in any order (:func:`orthobench.loop.run_cell`). It pickles, so a worker
    process writes the journal of the cell it runs (one writer per file).

    Args:
        path: The journal file (``DIR/partial/<cell id>.jsonl``).
        config_hash: The cell's configuration hash: entries of another configuration are ignored.
        threads: The torch thread count of the run that appends, recorded on each line
            (``"threads"``; None: not recorded). Values depend on it, so the runner resumes a
            cell only at the count its journal records (:meth:`counts`;
            ``orthobench.execution._recount``).
    """

    path: Path
    config_hash: str
    threads: int | None = None

    def append(self, record: RunRecord, state: dict[str, Any] | None) -> None:
        entry = {"schema_version": SCHEMA_VERSION, "config_hash": self.config_hash}
        if self.threads is not None:
            entry["threads"] = self.threads
        _append_line(self.path, {**entry, "record": dataclasses.asdict(record), "state": state})

    def counts(self) -> set[int]:
        """The thread counts recorded by this configuration's evaluations (a line written
        before the count was recorded has none)."""
        return {
            entry["threads"]
            for entry in _read_lines(self.path)
            if entry.get("schema_version") == SCHEMA_VERSION
            and entry.get("config_hash") == self.config_hash
            and isinstance(entry.get("record"), dict)
            and type(entry.get("threads")) is int
        }

    def read(self) -> list[tuple[RunRecord, dict[str, Any] | None]]:
        """The stored evaluations of this configuration by ``iteration``, each once (its last
        line); a line that is not an evaluation (torn, damaged: no record, a record without its
        fields or with others, a state that is not a mapping) is skipped, as if it were lost.

        Evaluations may be missing in between (those of a BO step in flight finish in any
        order); which of them can be replayed is the loop's to decide. A line written before
        the :data:`~orthobench.results._records.ADDED_RUN_COLUMNS` existed reads with them filled
        in (:func:`~orthobench.results._records.fill_added_run_fields`; such a journal holds
        its evaluations in order, its initial design first).
        """
        evaluations: dict[int, tuple[RunRecord, dict[str, Any] | None]] = {}
        n_init = 0
        for entry in _read_lines(self.path):
            if (
                entry.get("schema_version") != SCHEMA_VERSION
                or entry.get("config_hash") != self.config_hash
            ):
                continue
            fields, state = entry.get("record"), entry.get("state")
            if not isinstance(fields, dict) or not isinstance(state, (dict, type(None))):
                continue
            added = fields.get("phase") == "init" and "batch" not in fields
            try:
                record = RunRecord(**fill_added_run_fields(fields, n_init + added))
            except (TypeError, ValueError, KeyError):
                continue
            if not isinstance(record.iteration, int):
                continue
            n_init += added
            evaluations[record.iteration] = (record, state)
        return [evaluations[i] for i in sorted(evaluations)]

    def foreign(self) -> int:
        """How many evaluations the journal holds of another configuration (the suite or the task
        changed since they were journaled) or of another schema (another orthobench version
        wrote them): :meth:`read` skips them, so they are never replayed."""
        skipped = {
            (
                str(entry.get("schema_version")),
                str(entry.get("config_hash")),
                str(record.get("iteration")),
            )
            for entry in _read_lines(self.path)
            if isinstance(record := entry.get("record"), dict)
            and (entry.get("schema_version"), entry.get("config_hash"))
            != (SCHEMA_VERSION, self.config_hash)
        }
        return len(skipped)

    def discard(self) -> None:
        """Remove the journal (its cell is stored whole)."""
        self.path.unlink(missing_ok=True)
