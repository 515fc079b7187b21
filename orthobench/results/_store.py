"""The results store of one suite: a directory of Parquet files and journals, held by one process.

:class:`ResultStore` writes each unit's records (:mod:`._parquet`), journals it (:mod:`._journal`)
and says which stored cells are current, differ in configuration, or come from which code version.
It implements the runner's :class:`~orthobench.results._base.BaseStore`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from orthobench.exceptions import OrthobenchError, OrthobenchWarning, ResultsError
from orthobench.results._base import BaseStore
from orthobench.results._identity import _hash, _leaves, resolved_config, resolved_hash
from orthobench.results._journal import EvaluationJournal, Journal
from orthobench.results._parquet import read_metadata, read_records, write_parquet_atomic
from orthobench.results._provenance import code_version
from orthobench.results._records import (
    _SCHEMAS,
    METADATA_KEY,
    SCHEMA_VERSION,
    ProbeRecord,
    RunRecord,
)
from orthobench.suite import Cell


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
    reported and recomputed.

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
        self.runs_journal = Journal(self.root / "runs.jsonl", "cell_id", self.runs_dir, "cell")
        self.probe_journal = Journal(
            self.root / "probe.jsonl", "state_id", self.probe_dir, "probe state"
        )
        self.lock_path = self.root / ".lock"

    @contextlib.contextmanager
    def open_for_writing(self) -> Iterator[ResultStore]:
        """Hold the directory for this process while the block writes to it.

        Creates the directory, checks that it and what the store writes into (``runs/``,
        ``probe/``, ``partial/``, the journals) are writable, and takes an exclusive ``flock`` on
        ``DIR/.lock``, which then holds this process's PID. The kernel releases the lock when the
        process ends, however it ends, so a killed run never leaves the directory locked.

        Raises:
            OrthobenchError: naming the directory when it cannot be created or written, or naming
                the PID of the process that holds it (checked at once; nothing waits).
        """
        target = self.root
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for target in (self.root, self.runs_dir, self.probe_dir, self.root / "partial"):
                if target.is_dir():
                    tempfile.TemporaryFile(dir=target).close()
            for target in (self.runs_journal.path, self.probe_journal.path):
                if target.exists():
                    open(target, "ab").close()
            target = self.lock_path
            fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise OrthobenchError(
                f"the results directory {self.root} is not writable ({target}: "
                f"{err.strerror or err}); choose another output directory."
            ) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                raise OrthobenchError(
                    f"the results directory {self.root} is in use by another orthobench run "
                    f"(PID {holder}); wait for it to end or choose another output directory."
                ) from None
            except OSError as err:  # a file system without flock (some network mounts)
                warnings.warn(
                    f"cannot lock {self.lock_path} ({err.strerror or err}); a second run on "
                    f"{self.root} would not be refused",
                    OrthobenchWarning,
                    stacklevel=3,
                )
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield self
        finally:
            os.close(fd)  # releases the lock

    def cell_path(self, cell: Cell) -> Path:
        return self.runs_dir / f"{cell.id}.parquet"

    def evaluation_journal(self, cell: Cell) -> EvaluationJournal:
        return EvaluationJournal(self.root / "partial" / f"{cell.id}.jsonl", resolved_hash(cell))

    def probe_path(self, state_id: str) -> Path:
        return self.probe_dir / f"{state_id}.parquet"

    def stored(self) -> dict[str, str]:
        """``cell id -> config hash`` (:func:`resolved_hash`) of the stored cells.

        A cell whose file is missing or does not match its journal entry is not stored (it is
        reported and recomputed: :meth:`Journal.stored_entries`).
        """
        return self.runs_journal.stored()

    def config_changes(self, cells: Iterable[Cell]) -> list[str]:
        """One line per cell stored with another resolved configuration than it has now.

        Such a cell is not reused (:meth:`is_stored`); the caller says so and lets the user
        recompute it or choose another directory. Each line names the values that differ::

            cell hartmann6__qlogei__seed0: stored with another configuration:
            optimizer.params.function_samples 64 (stored) -> 128 (now)

        (one line). Cells journaled without their resolved configuration (by orthobench before it
        stored one) are not listed: they are recomputed once.
        """
        stored = self.runs_journal.stored_entries()
        lines = []
        for cell in cells:
            entry = stored.get(cell.id)
            if entry is None or "config" not in entry:
                continue
            now = resolved_config(cell)
            if _hash(now) == entry["config_hash"]:
                continue
            before, after = _leaves(entry["config"]), _leaves(now)
            changes = [
                f"{key} {before.get(key, '(unset)')} (stored) -> {after.get(key, '(unset)')} (now)"
                for key in sorted(before.keys() | after.keys())
                if before.get(key) != after.get(key)
            ]
            lines.append(f"cell {cell.id}: stored with another configuration: {'; '.join(changes)}")
        return lines

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
    ) -> Path:
        """Write the records with the schema of ``record_type`` atomically, then journal them
        (``entry`` holds the journal fields beyond the common ones)."""
        schema = _SCHEMAS[record_type]
        table = pa.Table.from_pylist([dataclasses.asdict(r) for r in records], schema=schema)
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
                "rows": len(records),
                **entry,
            }
        )
        return path

    def write_cell(
        self, cell: Cell, records: Sequence[RunRecord], metadata: dict[str, Any], seconds: float
    ) -> Path:
        """Store a finished cell atomically, journal it, and remove its evaluation journal.

        The file's metadata and the journal entry hold the cell's resolved configuration
        (:func:`resolved_config`), its hash and the :func:`code_version` that computed it.
        """
        config = resolved_config(cell)
        version = code_version()
        path = self._write(
            self.cell_path(cell),
            self.runs_journal,
            cell.id,
            _hash(config),
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
        cell_id: str,
        config_hash: str,
        error: str,
        traceback_text: str,
        seconds: float | None,
    ) -> None:
        self.runs_journal.append(
            {
                "cell_id": cell_id,
                "config_hash": config_hash,
                "status": "failed",
                "seconds": seconds,
                "error": error,
                "traceback": traceback_text,
            }
        )

    def write_probe_state(
        self,
        state_id: str,
        config_hash: str,
        records: Sequence[ProbeRecord],
        metadata: dict[str, Any],
        seconds: float,
    ) -> Path:
        """Store the rows of a probed state atomically, then journal it."""
        return self._write(
            self.probe_path(state_id),
            self.probe_journal,
            state_id,
            config_hash,
            records,
            ProbeRecord,
            {**metadata, "seconds": seconds},
            seconds,
            {},
        )

    def read_probe_state(self, state_id: str) -> pd.DataFrame:
        return read_records(self.probe_path(state_id), ProbeRecord)
