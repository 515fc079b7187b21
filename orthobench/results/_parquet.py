"""Parquet files of records: written atomically, read by footer, by file or by directory.

Every file carries the orthobench metadata (schema version, provenance, configuration) under
:data:`METADATA_KEY`. Reading a file of another :data:`SCHEMA_VERSION` raises
:class:`~orthobench.exceptions.ResultsError`; :func:`load_runs` and :func:`load_probe` skip a file
that is not readable Parquet, that orthobench did not write or whose metadata is damaged (not of
its shape, :func:`parse_metadata`), with a warning.
"""

from __future__ import annotations

import json
import os
import reprlib
import stat
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from orthobench.exceptions import OrthobenchWarning, ResultsError, one_line
from orthobench.results._io import write_atomic
from orthobench.results._records import (
    _SCHEMAS,
    ADDED_RUN_COLUMNS,
    METADATA_KEY,
    RUN_SCHEMA,
    SCHEMA_VERSION,
    ProbeRecord,
    RunRecord,
)


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path``, a results folder's own file, so that readers never see a
    partial file and a symbolic link in its place is refused (:func:`write_atomic`)."""
    write_atomic(path, lambda fh: pq.write_table(table, fh), own=True)


#: What reading a damaged Parquet file raises: ``ArrowInvalid`` for a truncated or foreign file,
#: ``OSError`` for corrupt pages or a file removed meanwhile.
_ARROW_ERRORS = (OSError, pa.ArrowException)


def _open_regular(path: str | Path) -> BinaryIO:
    """The regular file at ``path``, opened for reading; anything else (a FIFO, whose ``open``
    waits for a writer forever, a device, a folder) raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # returns at once, a FIFO too
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_table(path: str | Path, **kwargs: Any) -> pa.Table:
    """``pq.read_table`` of the regular file at ``path`` (:func:`_open_regular`), opened by
    Python: pyarrow's own path handling encodes the name as UTF-8, which a name holding other
    bytes (surrogate-escaped by Python) cannot be, so a results folder of such a name failed to
    read with a traceback.

    Read in this thread, without pre-buffering: pyarrow's I/O threads keep the Python file's
    buffers and may release them while the interpreter shuts down, which aborts the process
    ("terminate called without an active exception", exit 134 instead of the command's 2; 4 of
    25 exits under load)."""
    with _open_regular(path) as fh:
        return pq.read_table(fh, **{"use_threads": False, "pre_buffer": False, **kwargs})


def read_footer(path: str | Path) -> pq.FileMetaData:
    """``pq.read_metadata`` of the regular file at ``path``, opened by Python
    (:func:`read_table`)."""
    with _open_regular(path) as fh:
        return pq.read_metadata(fh)


class _UnreadableFileError(ResultsError):
    """A file under ``runs/`` or ``probe/`` that is not an orthobench results file: not readable
    Parquet (truncated, corrupt), or Parquet that orthobench did not write (foreign)."""


def _unreadable(path: str | Path, err: BaseException) -> _UnreadableFileError:
    return _UnreadableFileError(f"{path}: not a readable results file ({one_line(str(err), 200)})")


#: The shape of the orthobench metadata where orthobench reads it (:func:`parse_metadata`): a
#: value's type (or types), or the shapes of an object's fields.
_COMPONENT = {"name": str, "label": str, "params": dict}
_UNIT = {"task": _COMPONENT, "optimizer": _COMPONENT, "suite": str, "n_init": int, "budget": int}
_METADATA_SHAPE = {
    **dict.fromkeys(("cell", "state", "config"), _UNIT),
    **dict.fromkeys(("versions", "probe"), dict),
    **dict.fromkeys(("device", "gpu", "cpu", "git_sha", "python", "code_version"), str),
    **dict.fromkeys(("threads_per_cell", "threads"), int),
    "seconds": (int, float),
}


def _check_shape(value: Any, shape: Any, where: str) -> None:
    """Raise ``ValueError`` naming the first field of ``value`` (called ``where``) that is not of
    ``shape``: a type or tuple of types, or a dict of the shapes of an object's fields (each
    checked where present and not null)."""
    if isinstance(shape, dict):
        _check_shape(value, dict, where)
        for key, inner in shape.items():
            if value.get(key) is not None:
                _check_shape(value[key], inner, f"{where}.{key}")
    elif not isinstance(value, shape):
        types = shape if isinstance(shape, tuple) else (shape,)
        wanted = " or ".join(t.__name__ for t in types)
        raise ValueError(f"{where} is {reprlib.repr(value)}, not {wanted}")


def parse_metadata(raw: bytes) -> dict[str, Any]:
    """The orthobench metadata of a footer's :data:`METADATA_KEY` entry ``raw``, its shape
    checked where orthobench reads it (:data:`_METADATA_SHAPE`): valid JSON of another shape is
    damage (or a file orthobench did not write), which every reader skips rather than crash on.

    Raises:
        ValueError: naming the field, when ``raw`` is not JSON, is nested too deeply to decode,
            or is not of that shape.
    """
    try:
        meta = json.loads(raw)
    except RecursionError:  # valid JSON nested deeper than the interpreter's stack
        raise ValueError("metadata nested too deeply to read") from None
    _check_shape(meta, _METADATA_SHAPE, "metadata")
    return meta


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The orthobench metadata (schema version, versions, device, configuration) of one file.

    Reads the Parquet footer only (:func:`parse_metadata`).

    Raises:
        ResultsError: naming the file when it is not readable Parquet (truncated, corrupt) or
            holds no orthobench metadata of its shape (a Parquet file that orthobench did not
            write, a damaged one).
    """
    try:
        meta = read_footer(path).metadata or {}
        if METADATA_KEY not in meta:
            raise _UnreadableFileError(
                f"{path}: not an orthobench results file (its Parquet metadata has no "
                f"{METADATA_KEY.decode()!r} entry)"
            )
        return parse_metadata(meta[METADATA_KEY])
    except (*_ARROW_ERRORS, ValueError) as err:
        raise _unreadable(path, err) from err


def stored_threads(meta: dict[str, Any]) -> int | None:
    """The torch threads a stored unit ran with, from its metadata (:func:`read_metadata`): a
    cell's ``threads_per_cell``, a probe state's ``threads``; None where neither is recorded."""
    return meta.get("threads_per_cell", meta.get("threads"))


def read_records(path: str | Path, record_type: type) -> pd.DataFrame:
    """Rows of one stored file as a frame with the columns of ``record_type``.

    A cell file written before the :class:`RunRecord` columns :data:`ADDED_RUN_COLUMNS` existed
    reads with them filled in (:func:`_with_added_run_columns`).

    Raises:
        ResultsError: when the file was written with another :data:`SCHEMA_VERSION`, or is not
            readable Parquet.
    """
    return _records(path, record_type, read_metadata(path))


def _records(path: str | Path, record_type: type, meta: dict[str, Any]) -> pd.DataFrame:
    """:func:`read_records` of a file whose metadata ``meta`` is read."""
    found = meta.get("schema_version")
    if found != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: results schema version {found if found is not None else '(none)'}, but this "
            f"orthobench reads version {SCHEMA_VERSION}; "
            "rerun its suite (orthobench run or probe) to rewrite it."
        )
    try:
        if record_type is RunRecord:
            return _with_added_run_columns(read_table(path)).to_pandas()
        return read_table(path, schema=_SCHEMAS[record_type]).to_pandas()
    except _ARROW_ERRORS as err:
        raise _unreadable(path, err) from err


def _with_added_run_columns(table: pa.Table) -> pa.Table:
    """A cell file's ``table`` in :data:`RUN_SCHEMA`, the :data:`ADDED_RUN_COLUMNS` it lacks
    filled in as :func:`~orthobench.results._records.fill_added_run_fields` fills them (its
    ``n_init``: its ``init`` rows). Any other missing column raises ``ArrowInvalid``, as reading
    with the schema would."""
    missing = [name for name in ADDED_RUN_COLUMNS if name not in table.column_names]
    if missing:
        phase = table.column("phase").to_numpy(zero_copy_only=False)
        iteration = table.column("iteration").to_numpy()
        init = phase == "init"
        added = {
            "q": np.ones(table.num_rows, dtype=np.int64),
            "batch": np.where(init, 0, iteration - int(init.sum()) + 1).astype(np.int64),
            "wall_seconds": np.full(table.num_rows, np.nan),
            "constraints": [[]] * table.num_rows,
            "feasible": np.ones(table.num_rows, dtype=bool),
        }
        for name in missing:
            field = RUN_SCHEMA.field(name)
            table = table.append_column(field, pa.array(added[name], type=field.type))
    absent = [name for name in RUN_SCHEMA.names if name not in table.column_names]
    if absent:
        raise pa.ArrowInvalid(f"no column {absent[0]!r} of the cell record schema")
    return table.select(RUN_SCHEMA.names).cast(RUN_SCHEMA)


def unique_dirs(dirs: Iterable[str | Path]) -> list[str]:
    """``dirs`` as given, each directory once: a later spelling of one already given (the same
    path resolved, ``out/a`` and ``./out/a``) is left out with a warning. Read twice, its rows
    would count twice: a cell of 7 evaluations would show 14."""
    first: dict[Path, str] = {}
    for d in dirs:
        key = Path(d).resolve()
        if key in first:
            warnings.warn(
                f"directory {str(d)!r} is {first[key]!r} given again; it is read once.",
                OrthobenchWarning,
                stacklevel=3,
            )
            continue
        first[key] = str(d)
    return list(first.values())


def read_files(
    paths: Iterable[Path], record_type: type
) -> tuple[pd.DataFrame, list[tuple[Path, dict[str, Any]]]]:
    """The rows of the results files ``paths`` (:func:`read_records`), and the path and metadata
    of each file read; one that is not an orthobench results file is skipped with a warning
    naming it.

    Raises:
        ResultsError: for a file of another :data:`SCHEMA_VERSION`.
    """
    frames, files = [], []
    for path in paths:
        try:
            meta = read_metadata(path)
            frames.append(_records(path, record_type, meta))
        except _UnreadableFileError as err:
            warnings.warn(f"{err}; skipped", OrthobenchWarning, stacklevel=2)
            continue
        files.append((path, meta))
    if not frames:
        return _SCHEMAS[record_type].empty_table().to_pandas(), files
    return pd.concat(frames, ignore_index=True), files


def _load(dirs: Iterable[str | Path], subdir: str, record_type: type) -> pd.DataFrame:
    """The rows of every file under ``DIR/subdir`` (:func:`read_files`)."""
    paths = (f for d in dirs for f in sorted((Path(d) / subdir).glob("*.parquet")))
    return read_files(paths, record_type)[0]


def load_runs(dirs: Iterable[str | Path]) -> pd.DataFrame:
    """The :class:`RunRecord` rows of every cell file under ``DIR/runs`` of each dir.

    A file that is not an orthobench results file (not readable Parquet, or Parquet without
    orthobench metadata: a file someone put there) is skipped with an
    :class:`~orthobench.exceptions.OrthobenchWarning` naming it.

    Raises:
        ResultsError: for a file of another :data:`SCHEMA_VERSION`.
    """
    return _load(dirs, "runs", RunRecord)


def load_probe(dirs: Iterable[str | Path]) -> pd.DataFrame:
    """The :class:`ProbeRecord` rows of every probe state file under ``DIR/probe`` of each dir.

    Unreadable files are skipped as in :func:`load_runs`.
    """
    return _load(dirs, "probe", ProbeRecord)
