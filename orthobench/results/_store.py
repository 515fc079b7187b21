"""The results store of one suite: a directory of Parquet files and journals, held by one process.

:class:`ResultStore` writes each unit's records (:mod:`._parquet`), journals it (:mod:`._journal`)
and says which stored units are current, differ in configuration, or come from which code version.
It implements the runner's :class:`~orthobench.results._base.BaseStore`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from orthobench.exceptions import OrthobenchError, OrthobenchWarning, ResultsError
from orthobench.results._base import BaseStore
from orthobench.results._io import open_own, refuse_link
from orthobench.results._journal import EvaluationJournal, Journal
from orthobench.results._parquet import (
    read_files,
    read_metadata,
    read_records,
    read_table,
    write_parquet_atomic,
)
from orthobench.results._provenance import code_version
from orthobench.results._records import (
    _SCHEMAS,
    METADATA_KEY,
    SCHEMA_VERSION,
    ProbeRecord,
    RunRecord,
)
from orthobench.suite import Cell
from orthobench.work import CELL, ID_FIELDS, PROBE_STATE, WorkUnit


class ResultStore(BaseStore):
    """The results directory ``DIR`` of one suite::

        DIR/runs/<cell id>.parquet     RunRecord rows of one cell
        DIR/runs.jsonl                 journal: one JSON line per finished or failed cell
        DIR/partial/<cell id>.jsonl    evaluation journal of a cell in progress (deleted when stored)
        DIR/probe/<state id>.parquet   ProbeRecord rows of one probe state
        DIR/probe.jsonl                journal: one JSON line per finished probe state
        DIR/.lock                      the PID of the run writing here (locked while it runs)
        DIR/report.html                written by ``orthobench run | probe | report``

    A unit's file is written atomically and journaled only after it is in place; the unit is
    stored when its journal entry and file agree (:meth:`Journal.stored_entries`), else it is
    reported and recomputed; a file whose entry was lost has it read from its footer. A probe state's file holds one row per (estimator, S): a state
    stored again under the same configuration keeps the rows it does not recompute
    (:meth:`write`), so adding an estimator computes only its rows.

    Args:
        root: The directory; made absolute against the working directory at creation, so every
            path of the store stays the same whatever changes the working directory later.
    """

    def __init__(self, root: str | Path) -> None:
        # Absolute once, here: a task that changes the working directory while the run goes on
        # must not move where later cells, journals and the report are written.
        self.root = Path(os.path.abspath(root))
        self.runs_dir = self.root / "runs"
        self.probe_dir = self.root / "probe"
        self.runs_journal = Journal(
            self.root / "runs.jsonl", ID_FIELDS[CELL], self.runs_dir, CELL, "cell"
        )
        self.probe_journal = Journal(
            self.root / "probe.jsonl", ID_FIELDS[PROBE_STATE], self.probe_dir, PROBE_STATE, "config"
        )
        self.lock_path = self.root / ".lock"
        #: ``(device, inode)`` of the lock file while this process holds it, else None.
        self._lock_id: tuple[int, int] | None = None

    @contextlib.contextmanager
    def open_for_writing(self) -> Iterator[ResultStore]:
        """Hold the directory for this process while the block writes to it.

        Creates the directory, checks that it and what the store writes into (``runs/``,
        ``probe/``, ``partial/``, the journals) are writable (and folders, not symbolic links,
        where they exist), and takes an exclusive ``flock`` on ``DIR/.lock``, which then holds
        this process's PID. The kernel releases the lock when the process ends, however it ends, so a killed run
        never leaves the directory locked.

        A directory this call created is removed again when the block raises before anything
        but the lock was written in it (a suite refused by the checks that run with the store
        held): bad input leaves no folder behind.

        The journals' ok entries are read once, as the block starts (:meth:`Journal.kept`).

        Each unit written in the block, and the block's end, first checks that ``DIR/.lock`` is
        still the file locked here (:meth:`_check_held`): a directory removed meanwhile would
        be recreated by the next write, and the run would report as stored the units it lost.

        Raises:
            OrthobenchError: naming the directory when it cannot be created or written, or naming
                the PID of the process that holds it (checked at once; nothing waits), or when
                it was removed or replaced while the block ran; naming ``runs/``, ``probe/``,
                ``partial/``, the lock or a journal when it is a symbolic link, or the lock or a
                journal when it is not a regular file (:func:`~orthobench.results._io.open_own`).
        """
        target = self.root
        created = not self.root.exists()
        if created and self.root.is_symlink():  # else mkdir's "File exists", for a missing folder
            raise OrthobenchError(
                f"the results directory {self.root} is a symbolic link to "
                f"{os.readlink(self.root)}, which does not exist: create it or choose another "
                "output directory."
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for target in (self.root, self.runs_dir, self.probe_dir, self.root / "partial"):
                if target != self.root:  # a link to a folder elsewhere: units written there
                    refuse_link(target)
                if target.is_dir():
                    tempfile.TemporaryFile(dir=target).close()
                elif target.exists():  # a file in its place: every write under it would fail
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            for target in (self.runs_journal.path, self.probe_journal.path):
                if os.path.lexists(target):  # a link too, dangling or not: refused here
                    open(target, "ab", opener=open_own).close()
            target = self.lock_path
            fd = open_own(target, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise OrthobenchError(
                f"the results directory {self.root} is not writable ({target}: "
                f"{err.strerror or err}); choose another output directory."
            ) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise self._in_use(_holder(fd)) from None
            except OSError as err:  # a file system without flock (some network mounts)
                warnings.warn(
                    f"cannot lock {self.lock_path} ({err.strerror or err}); a second run on "
                    f"{self.root} would not be refused",
                    OrthobenchWarning,
                    stacklevel=3,
                )
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            held = os.fstat(fd)
            self._lock_id = (held.st_dev, held.st_ino)
            # No other process appends to the journals now: each is read once, not per unit.
            with self.runs_journal.kept(), self.probe_journal.kept():
                yield self
            self._check_held()  # before the caller reports what it stored
        except BaseException:
            # Only the directory locked here: one put in its place may hold another run's lock.
            left = {p.name for p in self.root.iterdir()} if self._holds_lock() else None
            if created and left == {self.lock_path.name}:
                self.lock_path.unlink()
                self.root.rmdir()
            raise
        finally:
            self._lock_id = None
            os.close(fd)  # releases the lock

    def refuse_if_held(self) -> None:
        """Raise :meth:`open_for_writing`'s "in use" error where another run holds the directory
        now (:meth:`writer`); nothing is read or written."""
        if (holder := self.writer()) is not None:
            raise self._in_use(holder)

    def _in_use(self, holder: str) -> OrthobenchError:
        return OrthobenchError(
            f"the results directory {self.root} is in use by another orthobench run "
            f"(PID {holder}); wait for it to end or choose another output directory."
        )

    def warn_if_held(self, source: str, shown: str) -> None:
        """Warn where a run holds the directory (named ``source``) now (:meth:`writer`): what a
        reader shows (``shown``: ``"the report shows the cells and probe states"``) is what that
        run has stored so far."""
        holder = self.writer()
        if holder is not None:
            warnings.warn(
                f"{source} is being written by an orthobench run (PID {holder}): {shown} it has "
                "stored so far.",
                OrthobenchWarning,
                stacklevel=3,
            )

    def writer(self) -> str | None:
        """The PID of the run holding the directory for writing (:meth:`open_for_writing`) now,
        as ``DIR/.lock`` names it (``unknown`` where it names none); None where no run does.

        Probed without waiting or creating anything: a shared lock on ``DIR/.lock``, taken and
        released at once, is refused while a run holds its exclusive one. (A run that starts
        in that instant is refused as if the directory were in use.)
        """
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:  # none (no run wrote here), unreadable, or a link: not a run's lock
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        except OSError:  # a file system without flock, where no run can lock it either
            return None
        finally:
            os.close(fd)  # releases the probe's lock
        return None

    def read_units(self, kind: str) -> tuple[pd.DataFrame, list[tuple[Path, dict[str, Any]]]]:
        """The rows of the files of the units of ``kind`` (:data:`~orthobench.work.CELL`,
        ``PROBE_STATE``), and the path and metadata of each file, from one listing of their
        folder: read while a run stores units, the rows and the metadata are of the same files
        (listed twice, a report counted 33 cells' files and 32 cells' rows).

        A file that is not an orthobench results file is skipped with a warning naming it, as
        :func:`~orthobench.results.load_runs` skips it.

        Raises:
            ResultsError: for a file of another schema version.
        """
        record_type = {CELL: RunRecord, PROBE_STATE: ProbeRecord}[kind]
        return read_files(sorted(self.journal(kind).directory.glob("*.parquet")), record_type)

    def _holds_lock(self) -> bool:
        """Whether ``DIR/.lock`` is the file that :meth:`open_for_writing` locked."""
        try:
            now = os.stat(self.lock_path)
        except OSError:  # removed, with its directory
            return False
        return (now.st_dev, now.st_ino) == self._lock_id

    def _check_held(self) -> None:
        """Raise when this store is held for writing (:meth:`open_for_writing`) but its
        directory lost the lock file: it was removed (``rm -rf DIR``) or replaced meanwhile.

        Raises:
            OrthobenchError: naming the directory.
        """
        if self._lock_id is not None and not self._holds_lock():
            raise OrthobenchError(
                f"{self.root} was removed or replaced while this run wrote to it (its lock file "
                f"{self.lock_path.name} is gone or another one); what it stored there may be "
                "lost: rerun the same command to store it again."
            )

    def cell_path(self, cell: Cell) -> Path:
        return self.runs_dir / f"{cell.id}.parquet"

    def evaluation_journal(self, cell: Cell) -> EvaluationJournal:
        return EvaluationJournal(self.root / "partial" / f"{cell.id}.jsonl", cell.config_hash)

    def probe_path(self, state_id: str) -> Path:
        return self.probe_dir / f"{state_id}.parquet"

    def journal(self, kind: str) -> Journal:
        """The journal of the units of ``kind`` (:data:`~orthobench.work.CELL`, ``PROBE_STATE``)."""
        return {CELL: self.runs_journal, PROBE_STATE: self.probe_journal}[kind]

    def stored_entries(self, kind: str) -> dict[str, dict[str, Any]]:
        """The journal entries of the stored units of ``kind``.

        A unit whose file is missing or does not match its journal entry is not stored (it is
        reported and recomputed: :meth:`Journal.stored_entries`); a unit file without an entry
        has it read from its footer, with a warning, and journaled again while the store is held
        for writing.
        """
        return self.journal(kind).stored_entries(restore=self._lock_id is not None)

    def code_versions(self) -> dict[str, list[str]]:
        """``code version -> cell ids`` of the cell files under ``runs/`` (:func:`code_version`).

        Read from each file's footer; unreadable files are left out (:func:`load_runs` warns
        about them).
        """
        versions: dict[str, list[str]] = {}
        for path in sorted(self.runs_dir.glob("*.parquet")):
            try:
                meta = read_metadata(path)
            except ResultsError:
                continue
            label = meta.get("code_version") or code_version(meta)
            versions.setdefault(label, []).append(path.stem)
        return versions

    def _write(
        self,
        path: Path,
        journal: Journal,
        uid: str,
        config_hash: str,
        records: Sequence[RunRecord] | Sequence[ProbeRecord],
        record_type: type,
        metadata: dict[str, Any],
        seconds: float,
        entry: dict[str, Any],
        kept: pa.Table | None = None,
    ) -> Path:
        """Write the ``kept`` rows, then the records, with the schema of ``record_type``
        atomically, then journal them (``entry`` holds the journal fields beyond the common
        ones)."""
        self._check_held()
        schema = _SCHEMAS[record_type]
        table = pa.Table.from_pylist([dataclasses.asdict(r) for r in records], schema=schema)
        if kept is not None:
            table = pa.concat_tables([kept, table])
        # Arrow does not enforce `nullable=False` when building a table: check it here.
        nulls = [f.name for f in schema if not f.nullable and table.column(f.name).null_count]
        if nulls:
            raise ValueError(
                f"{record_type.__name__} fields {nulls} must not be None, but some records of "
                f"{uid!r} have None there."
            )
        meta = {**metadata, "schema_version": SCHEMA_VERSION, "config_hash": config_hash}
        table = table.replace_schema_metadata(
            {METADATA_KEY: json.dumps(meta, default=str).encode()}
        )
        write_parquet_atomic(table, path)
        journal.append(
            {
                journal.key: uid,
                "config_hash": config_hash,
                "status": "ok",
                "schema_version": SCHEMA_VERSION,
                "seconds": seconds,
                "rows": table.num_rows,
                **entry,
            }
        )
        return path

    def write(
        self,
        unit: WorkUnit,
        records: Sequence[RunRecord] | Sequence[ProbeRecord],
        metadata: dict[str, Any],
        seconds: float,
    ) -> Path:
        """Store a finished unit under its configuration now (:meth:`write_cell`, or a probe
        state's rows after those of its stored file under the same configuration that
        ``records`` do not recompute).

        The file's metadata and the journal entry hold the unit's resolved configuration, its
        hash and the :func:`code_version` that computed it.
        """
        if unit.kind == CELL:
            return self.write_cell(unit, records, metadata, seconds)
        kept = None
        stored = self.probe_journal.stored_entry(unit.id)
        if stored is not None and stored["config_hash"] == unit.config_hash:
            kept = self._probe_table(unit.id)
            new = {(r.estimator, r.mc_samples) for r in records}
            keys = zip(kept["estimator"].to_pylist(), kept["mc_samples"].to_pylist(), strict=True)
            kept = kept.filter(pa.array([key not in new for key in keys]))
        return self._write_state(unit, records, metadata, seconds, kept, _code_version(metadata))

    def adopt(
        self, unit: WorkUnit, metadata: dict[str, Any], seconds: float | None, version: str
    ) -> Path:
        """Store the rows of ``unit``'s probe state file, unchanged, under its configuration now.

        For a state journaled without its resolved configuration (by orthobench before probe
        states had one) that the caller found to be this unit; ``metadata``, ``seconds`` and the
        code ``version`` are those it was computed with.
        """
        table = self._probe_table(unit.id)
        q = table.column("q")
        if q.null_count:  # stored before the column: the one batch size then was 1
            field = _SCHEMAS[ProbeRecord].field("q")
            table = table.set_column(table.schema.get_field_index("q"), field, pc.fill_null(q, 1))
        return self._write_state(unit, [], metadata, seconds, table, version)

    def _probe_table(self, state_id: str) -> pa.Table:
        return read_table(self.probe_path(state_id), schema=_SCHEMAS[ProbeRecord])

    def _write_state(
        self,
        unit: WorkUnit,
        records: Sequence[ProbeRecord],
        metadata: dict[str, Any],
        seconds: float | None,
        kept: pa.Table | None,
        version: str,
    ) -> Path:
        config = unit.resolved_config()
        return self.write_probe_state(
            unit.id,
            unit.config_hash,
            records,
            {**metadata, "config": config, "code_version": version},
            seconds,
            kept=kept,
            entry={"config": config, "code_version": version},
        )

    def write_cell(
        self, cell: Cell, records: Sequence[RunRecord], metadata: dict[str, Any], seconds: float
    ) -> Path:
        """Store a finished cell atomically, journal it, and remove its evaluation journal.

        The file's metadata and the journal entry hold the cell's resolved configuration
        (:meth:`Cell.resolved_config`), its hash and the :func:`code_version` that computed it.
        """
        config = cell.resolved_config()
        version = _code_version(metadata)
        path = self._write(
            self.cell_path(cell),
            self.runs_journal,
            cell.id,
            cell.config_hash,
            records,
            RunRecord,
            {**metadata, "cell": config, "code_version": version, "seconds": seconds},
            seconds,
            {"config": config, "code_version": version},
        )
        self.evaluation_journal(cell).discard()
        return path

    def journal_failure(
        self,
        kind: str,
        uid: str,
        config_hash: str,
        error: str,
        traceback_text: str,
        seconds: float | None,
        suite: str | None = None,
    ) -> None:
        self._check_held()
        journal = self.journal(kind)
        entry = {journal.key: uid, "config_hash": config_hash, "status": "failed"}
        if suite is not None:
            entry["suite"] = suite
        journal.append({**entry, "seconds": seconds, "error": error, "traceback": traceback_text})

    def write_probe_state(
        self,
        state_id: str,
        config_hash: str,
        records: Sequence[ProbeRecord],
        metadata: dict[str, Any],
        seconds: float | None,
        *,
        kept: pa.Table | None = None,
        entry: dict[str, Any] | None = None,
    ) -> Path:
        """Store the rows of a probed state (after its ``kept`` rows) atomically, then journal it
        (``entry``: journal fields beyond the common ones)."""
        return self._write(
            self.probe_path(state_id),
            self.probe_journal,
            state_id,
            config_hash,
            records,
            ProbeRecord,
            {**metadata, "seconds": seconds},
            seconds,
            entry or {},
            kept,
        )

    def read_probe_state(self, state_id: str) -> pd.DataFrame:
        return read_records(self.probe_path(state_id), ProbeRecord)


def _holder(fd: int) -> str:
    """The PID that the lock file ``fd`` names (``unknown`` where it names none)."""
    return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"


def _code_version(metadata: dict[str, Any]) -> str:
    """The :func:`code_version` of the code that computed a unit: that of its ``metadata``
    (:func:`run_metadata`, taken when it started), else the running code's. Asked again at
    write time, it named a commit checked out while the unit ran, beside the metadata's."""
    return code_version(metadata if "versions" in metadata else None)
