"""Results store: one Parquet file per cell, written atomically, and a journal for resume.

Layout of a results directory ``DIR``::

    DIR/runs/<cell id>.parquet   one row per evaluation (the results contract columns)
    DIR/runs.jsonl               journal: one JSON line per finished or failed cell
    DIR/report.html              written by ``orthobench run`` / ``orthobench report``

A cell file is written to a temporary name in the same directory, flushed, fsynced and renamed,
so a crash leaves either the whole file or none. The journal is appended (with fsync) only after
the rename; a torn last line from a crash is skipped on read. A cell counts as stored when the
journal says ``ok`` for its id and config hash and its file exists, so re-running a suite skips it
and a changed configuration reruns it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from orthobench.suite import Cell

METADATA_KEY = b"orthobench"

RUN_SCHEMA = pa.schema(
    [
        ("suite", pa.string()),
        ("cell_id", pa.string()),
        ("task", pa.string()),
        ("optimizer", pa.string()),
        ("seed", pa.int64()),
        ("iteration", pa.int64()),
        ("phase", pa.string()),
        ("x", pa.list_(pa.float64())),
        ("y", pa.float64()),
        ("y_true", pa.float64()),
        ("best_y", pa.float64()),
        ("regret", pa.float64()),
        ("is_outlier", pa.bool_()),
        ("fit_seconds", pa.float64()),
        ("acq_seconds", pa.float64()),
        ("eval_seconds", pa.float64()),
        ("status", pa.string()),
        ("fallback", pa.string()),
        ("info", pa.string()),
    ]
)


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def run_metadata(device: str) -> dict[str, Any]:
    """Versions, git SHA, host and device: stored with every results file."""
    return {
        "versions": {
            d: _version(d) for d in ("orthobench", "torch", "botorch", "gpytorch", "optuna")
        },
        "python": platform.python_version(),
        "git_sha": _git_sha(),
        "host": platform.node(),
        "device": device,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so that readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The orthobench metadata (versions, device, resolved config) of one Parquet file."""
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else {}


class ResultStore:
    """The results directory of one suite run (see the module docstring for the layout)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.journal_path = self.root / "runs.jsonl"

    def cell_path(self, cell: Cell) -> Path:
        return self.runs_dir / f"{cell.id}.parquet"

    def journal(self) -> list[dict[str, Any]]:
        """Journal entries in order; a torn (unparseable) line from a crash is skipped."""
        if not self.journal_path.exists():
            return []
        entries = []
        for line in self.journal_path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return entries

    def stored(self) -> dict[str, str]:
        """``cell id -> config hash`` of cells whose last journal entry is ``ok`` and whose file exists."""
        last: dict[str, dict[str, Any]] = {}
        for entry in self.journal():
            last[entry["cell_id"]] = entry
        return {
            cid: e["config_hash"]
            for cid, e in last.items()
            if e.get("status") == "ok" and (self.runs_dir / f"{cid}.parquet").exists()
        }

    def is_stored(self, cell: Cell, stored: dict[str, str] | None = None) -> bool:
        stored = self.stored() if stored is None else stored
        return stored.get(cell.id) == cell.config_hash

    def _append_journal(self, entry: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.journal_path, "a") as fh:
            fh.write(json.dumps(entry, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def write_cell(
        self, cell: Cell, records: list[dict[str, Any]], metadata: dict[str, Any], seconds: float
    ) -> Path:
        """Store a finished cell atomically, then journal it."""
        table = pa.Table.from_pylist(records, schema=RUN_SCHEMA)
        meta = {
            **metadata,
            "cell": cell.config(),
            "config_hash": cell.config_hash,
            "seconds": seconds,
        }
        table = table.replace_schema_metadata(
            {METADATA_KEY: json.dumps(meta, default=str).encode()}
        )
        path = self.cell_path(cell)
        write_parquet_atomic(table, path)
        self._append_journal(
            {
                "cell_id": cell.id,
                "config_hash": cell.config_hash,
                "status": "ok",
                "seconds": seconds,
                "rows": len(records),
            }
        )
        return path

    def record_failure(self, cell: Cell, error: str, traceback_text: str, seconds: float) -> None:
        """Journal a failed cell (its error and traceback); it is retried on the next run."""
        self._append_journal(
            {
                "cell_id": cell.id,
                "config_hash": cell.config_hash,
                "status": "failed",
                "seconds": seconds,
                "error": error,
                "traceback": traceback_text,
            }
        )

    def load(self) -> pd.DataFrame:
        return load_runs([self.root])


def load_runs(dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Concatenate the per-evaluation rows of every cell file under ``DIR/runs`` of each dir."""
    frames = []
    for d in dirs:
        files = sorted((Path(d) / "runs").glob("*.parquet"))
        frames.extend(pq.read_table(f).to_pandas() for f in files)
    if not frames:
        return RUN_SCHEMA.empty_table().to_pandas()
    return pd.concat(frames, ignore_index=True)


def load_probe(dirs: Iterable[str | Path]) -> pd.DataFrame:
    """All probe rows (summaries with raw per-rebuild values) under ``DIR/probe`` of each dir."""
    files = [f for d in dirs for f in sorted((Path(d) / "probe").glob("*.parquet"))]
    return (
        pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
        if files
        else pd.DataFrame()
    )
