"""Results store: typed records, one Parquet file per unit written atomically, and journals.

Two record types, one row each: :class:`RunRecord` (one evaluation of a cell) and
:class:`ProbeRecord` (one probe summary of an (estimator, S) pair on a probe state, raw values
included). Their fields generate the Arrow schemas (:func:`arrow_schema`) that every writer and
reader uses, so a column cannot drift between the loop, the probe, the report and the check gate.

Layout of a results directory ``DIR``::

    DIR/runs/<cell id>.parquet     RunRecord rows of one cell
    DIR/runs.jsonl                 journal: one JSON line per finished or failed cell
    DIR/partial/<cell id>.jsonl    evaluation journal of a cell in progress (deleted when stored)
    DIR/probe/<state id>.parquet   ProbeRecord rows of one probe state
    DIR/probe.jsonl                journal: one JSON line per finished probe state
    DIR/.lock                      the PID of the run writing here (locked while it runs)
    DIR/report.html                written by ``orthobench run | probe | report``

A file is written to a temporary name in the same directory, flushed, fsynced and renamed, so a
crash leaves either the whole file or none. Its journal is appended (with fsync) only after the
rename; a torn last line from a crash is skipped on read. A unit (cell or probe state) counts as
stored when the last journal entry of its id says ``ok`` with the current :data:`SCHEMA_VERSION`
and its file agrees with that entry: the Parquet footer reads, with the journaled row count, config
hash and schema version (only the footer is read). A file that does not is reported
(:class:`~orthobench.exceptions.OrthobenchWarning`) and its unit recomputed; readers
(:func:`load_runs`, :func:`load_probe`) skip it with a warning, as they skip a Parquet file that
orthobench did not write. Every Parquet file carries the schema version in its metadata; reading
a file of another version raises :class:`~orthobench.exceptions.ResultsError`.

A cell is reused when its stored config hash is that of its *resolved* configuration
(:func:`resolved_config`: the suite's parameters with every default of the task and optimizer
factories filled in), so a default changed in the code is a changed configuration even though the
suite is not. :meth:`ResultStore.config_changes` says which stored cells differ and how;
:meth:`ResultStore.code_versions` which code versions computed the stored cells.

Within a cell, every finished evaluation is appended to the cell's evaluation journal with the
optimizer's state after it (:class:`EvaluationJournal`), so a cell killed mid-way resumes from
its stored evaluations instead of starting over (:func:`orthobench.loop.run_cell`).

One process writes a directory at a time: :meth:`ResultStore.open_for_writing` checks that it is
writable and holds an exclusive ``flock`` on ``DIR/.lock`` (released by the kernel when the
process dies, so a killed run never leaves it stuck).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import inspect
import json
import os
import platform
import subprocess
import tempfile
import time
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from orthobench.exceptions import OrthobenchError, OrthobenchWarning, ResultsError, one_line
from orthobench.registry import OPTIMIZERS, TASKS
from orthobench.suite import Cell

METADATA_KEY = b"orthobench"
#: Version of the record schemas below; stored in every file's metadata and journal entry.
#: Files written before schemas were versioned have none and read as a mismatch. Version 2 added
#: the per-state numerics of :class:`ProbeRecord` (``cholesky_jitter``, ``laplace_floored``,
#: ``laplace_min_eigenvalue``); version 3 its cost columns (``seconds_per_call``, ``threads``).
SCHEMA_VERSION = 3


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One evaluation of a cell: a row of ``DIR/runs/<cell id>.parquet``.

    Args:
        phase: ``init`` (shared initial design) or ``bo``.
        x: ``d`` values in native units (ints whole, log parameters unlogged).
        y: Observed value, noise included (NaN where the evaluation gave none: ``status`` not ``ok``).
        y_true: Noise-free value where the task reports it.
        best_y: Lowest finite ``y`` so far (None before the first).
        regret: Best-so-far simple regret from ``y_true`` (else ``y``) minus the known optimum;
            None when the optimum is unknown.
        status: ``ok``, ``invalid`` (a non-finite ``y``) or ``timeout`` (stopped at the suite's
            ``evaluation_timeout_s``); only ``ok`` evaluations are told to the optimizer.
        fallback: What the optimizer fell back to in this step, if anything.
        info: JSON object: the optimizer's step diagnostics and the task's extras.
    """

    suite: str
    cell_id: str
    task: str
    optimizer: str
    seed: int
    iteration: int
    phase: str
    x: list[float]
    y: float
    y_true: float | None
    best_y: float | None
    regret: float | None
    is_outlier: bool
    fit_seconds: float
    acq_seconds: float
    eval_seconds: float
    status: str
    fallback: str | None
    info: str


@dataclass(frozen=True, kw_only=True)
class ProbeRecord:
    """One estimator at one budget ``S`` on one probe state: a row of ``DIR/probe/<state>.parquet``.

    Metrics are defined in :mod:`orthobench.probe.metrics`; ratios are baseline / estimator with
    a 95% bootstrap CI (``*_low``, ``*_high``). Raw values are flattened row-major from
    ``rebuilds x n_probes``.

    Args:
        kernel: GP kernel of the state, or ``tpe``.
        mc_samples: The budget ``S`` of EI evaluations (theta draws, function samples or fits).
        n_evaluations: EI evaluations behind one estimate (a point set's count within ``S``).
        regret: Best-so-far regret of the state's history (None when the optimum is unknown).
        baseline: The like-for-like baseline estimator of the ratios (``mc`` or ``mc-tpe``).
        baseline_values_ei: Naive iid theta-MC values at ``n_evaluations`` draws when that count
            differs from ``S``; empty when the ``baseline`` row's values are the baseline.
        values_ei: Rebuild values on the EI scale (the GP's standardized outcome scale).
        values_log: Rebuild values of the outer-log acquisition.
        reference: ``n_probes`` high-precision reference values of the estimator's target.
        cholesky_jitter: Theta samples of the state (reference and rebuild draws, all
            estimators and budgets) whose kernel matrix needed jitter for its Cholesky factor;
            None for TPE states.
        laplace_floored: Whether the Laplace ``q(theta)`` of the state has a Hessian eigenvalue
            raised to the floor (docs/design.md, "Indefinite Hessians and the eigenvalue floor");
            None for TPE states.
        laplace_min_eigenvalue: The smallest eigenvalue of the raw (unfloored) Hessian; None for
            TPE states.
        info: JSON object: fit and Laplace diagnostics of the state.
        seconds_per_call: Wall seconds of one forward + backward pass of OrthoBO's acquisition
            with this estimator and budget on 512 candidates, median of a few calls
            (:func:`orthobench.probe.gp_probe.seconds_per_call`); None for qLogEI and TPE rows.
        threads: Torch's intra-op thread count the state ran with (its values and
            ``seconds_per_call`` depend on it).
    """

    suite: str
    task: str
    kernel: str
    estimator: str
    mc_samples: int
    n_evaluations: int
    state_iteration: int
    seed: int
    n_init: int
    rebuilds: int
    n_probes: int
    probe_variance: float
    probe_variance_log: float
    bias_sq: float
    mse: float
    var_ratio: float
    var_ratio_low: float
    var_ratio_high: float
    mse_ratio: float
    mse_ratio_low: float
    mse_ratio_high: float
    median_point_var_ratio: float
    median_point_mse_ratio: float
    top1_agreement: float
    flip_rate: float
    regret: float | None
    baseline: str
    baseline_values_ei: list[float]
    values_ei: list[float]
    values_log: list[float]
    reference: list[float]
    cholesky_jitter: int | None
    laplace_floored: bool | None
    laplace_min_eigenvalue: float | None
    info: str
    seconds_per_call: float | None = None
    threads: int | None = None


_ARROW_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def _arrow_type(annotation: Any) -> pa.DataType:
    if typing.get_origin(annotation) is list:
        return pa.list_(_arrow_type(typing.get_args(annotation)[0]))
    if annotation in _ARROW_TYPES:
        return _ARROW_TYPES[annotation]
    raise TypeError(f"No Arrow type for the field annotation {annotation!r}.")


def arrow_schema(record_type: type) -> pa.Schema:
    """The Arrow schema of a record dataclass: one column per field, in field order.

    ``bool``, ``int``, ``float``, ``str`` map to ``bool``, ``int64``, ``float64``, ``string``;
    ``list[T]`` to a list of ``T``; ``T | None`` to a nullable ``T`` (other fields are not null).
    """
    hints = typing.get_type_hints(record_type)
    fields = []
    for f in dataclasses.fields(record_type):
        annotation = hints[f.name]
        args = typing.get_args(annotation)
        nullable = typing.get_origin(annotation) in (typing.Union, types.UnionType) and (
            type(None) in args
        )
        if nullable:
            (annotation,) = [a for a in args if a is not type(None)]
        fields.append(pa.field(f.name, _arrow_type(annotation), nullable=nullable))
    return pa.schema(fields)


RUN_SCHEMA = arrow_schema(RunRecord)
PROBE_SCHEMA = arrow_schema(ProbeRecord)
_SCHEMAS = {RunRecord: RUN_SCHEMA, ProbeRecord: PROBE_SCHEMA}


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


def code_version(metadata: Mapping[str, Any] | None = None) -> str:
    """The orthobench version and git SHA of :func:`run_metadata` output, as one label.

    ``"0.1.0 (git 1a2b3c4d5e6f)"``, or the version alone outside a git checkout, or
    ``"unknown"``; ``metadata=None`` gives the running code's label.
    """
    if metadata is None:
        metadata = {"versions": {"orthobench": _version("orthobench")}, "git_sha": _git_sha()}
    release = (metadata.get("versions") or {}).get("orthobench") or "unknown"
    sha = metadata.get("git_sha")
    return f"{release} (git {sha[:12]})" if sha else release


def resolved_config(cell: Cell) -> dict[str, Any]:
    """:meth:`Cell.config` with every default of the task and optimizer factories filled in.

    The parameters a cell really runs with, as JSON values (tuples become lists, other objects
    their ``str``): a default changed in the code changes it though the suite did not. The
    factories are looked up in :data:`orthobench.registry.TASKS` and ``OPTIMIZERS``.
    """
    config = cell.config()
    for key, registry in (("task", TASKS), ("optimizer", OPTIMIZERS)):
        entry = registry.resolve(config[key]["name"])
        defaults = {k: d for k, d in entry.params.items() if d is not inspect.Parameter.empty}
        config[key]["params"] = {**defaults, **config[key]["params"]}
    return json.loads(_canonical(config))


def resolved_hash(cell: Cell) -> str:
    """Hash of :func:`resolved_config`: a stored cell is reused only when it matches."""
    return _hash(resolved_config(cell))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(config).encode()).hexdigest()[:16]


def _leaves(value: Any, path: tuple[str, ...] = ()) -> dict[str, str]:
    """``{"optimizer.params.beta": JSON text}``: the leaves of nested dicts by dotted path."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _leaves(item, (*path, key)).items()}
    return {".".join(path): _canonical(value)}


def os_error_text(err: OSError) -> str:
    """``"<path>: <reason>"`` of a file-system error, for a one-line message (``str(err)`` when
    it names no path)."""
    reason = err.strerror or str(err)
    return f"{err.filename}: {reason}" if err.filename is not None else reason


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Create or replace ``path`` with what ``write`` writes to a binary file handle, so that
    readers never see a partial file and a failure (a full disk) leaves the old file or none.

    The data go to a temporary file beside ``path``, which is flushed, fsynced and renamed over
    ``path``; the temporary file is removed when anything fails.

    Raises:
        OSError: from the file system (a full disk, a folder that cannot be written), naming
            ``path`` where the failing call named no file (a write or an fsync).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with _naming(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            _fsync_dir(path.parent)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Make an ``OSError`` raised in the block name ``path`` when it names no file: a failed
    ``write`` or ``fsync`` (a full disk) says only ``No space left on device``."""
    try:
        yield
    except OSError as err:
        if err.filename is None and err.strerror is not None:  # else str(err) loses its text
            err.filename = str(path)
        raise


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so that readers never see a partial file (:func:`write_atomic`)."""
    write_atomic(path, lambda fh: pq.write_table(table, fh))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: What reading a damaged Parquet file raises: ``ArrowInvalid`` for a truncated or foreign file,
#: ``OSError`` for corrupt pages or a file removed meanwhile.
_ARROW_ERRORS = (OSError, pa.ArrowException)


class _UnreadableFileError(ResultsError):
    """A file under ``runs/`` or ``probe/`` that is not an orthobench results file: not readable
    Parquet (truncated, corrupt), or Parquet that orthobench did not write (foreign)."""


def _unreadable(path: str | Path, err: BaseException) -> _UnreadableFileError:
    return _UnreadableFileError(f"{path}: not a readable results file ({one_line(str(err), 200)})")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The orthobench metadata (schema version, versions, device, configuration) of one file.

    Reads the Parquet footer only.

    Raises:
        ResultsError: naming the file when it is not readable Parquet (truncated, corrupt) or
            holds no orthobench metadata (a Parquet file that orthobench did not write).
    """
    try:
        meta = pq.read_schema(path).metadata or {}
        if METADATA_KEY not in meta:
            raise _UnreadableFileError(
                f"{path}: not an orthobench results file (its Parquet metadata has no "
                f"{METADATA_KEY.decode()!r} entry)"
            )
        return json.loads(meta[METADATA_KEY])
    except (*_ARROW_ERRORS, json.JSONDecodeError) as err:
        raise _unreadable(path, err) from err


def read_records(path: str | Path, record_type: type) -> pd.DataFrame:
    """Rows of one stored file as a frame with the columns of ``record_type``.

    Raises:
        ResultsError: when the file was written with another :data:`SCHEMA_VERSION`, or is not
            readable Parquet.
    """
    found = read_metadata(path).get("schema_version")
    if found != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: results schema version {found if found is not None else '(none)'}, but this "
            f"orthobench reads version {SCHEMA_VERSION}; "
            "rerun its suite (orthobench run or probe) to rewrite it."
        )
    try:
        return pq.read_table(path, schema=_SCHEMAS[record_type]).to_pandas()
    except _ARROW_ERRORS as err:
        raise _unreadable(path, err) from err


def _load(dirs: Iterable[str | Path], subdir: str, record_type: type) -> pd.DataFrame:
    """The rows of every file under ``DIR/subdir``; an unreadable file is skipped with a warning."""
    frames = []
    for path in (f for d in dirs for f in sorted((Path(d) / subdir).glob("*.parquet"))):
        try:
            frames.append(read_records(path, record_type))
        except _UnreadableFileError as err:
            warnings.warn(f"{err}; skipped", OrthobenchWarning, stacklevel=1)
    if not frames:
        return _SCHEMAS[record_type].empty_table().to_pandas()
    return pd.concat(frames, ignore_index=True)


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


def _append_line(path: Path, entry: dict[str, Any]) -> None:
    """Append ``entry`` as one JSON line and fsync it.

    A crash can leave a torn last line without its newline: the entry then starts on a fresh line,
    so it is not glued onto the fragment (the fragment stays unparseable and is skipped).
    """
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b") as fh:
            fh.seek(0, os.SEEK_END)
            torn = False
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
            fh.write((b"\n" if torn else b"") + json.dumps(entry, default=str).encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON entries of a JSON-lines file in order, torn (unparseable) lines skipped."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return entries


def _file_problem(path: Path, entry: dict[str, Any]) -> str | None:
    """Why ``path`` is not the unit its journal ``entry`` records (None when it is).

    Reads the Parquet footer only: it must parse and hold the entry's row count, config hash and
    schema version.
    """
    if not path.exists():
        return f"missing ({path})"
    try:
        footer = pq.read_metadata(path)
        meta = json.loads((footer.metadata or {}).get(METADATA_KEY, b"{}"))
    except (*_ARROW_ERRORS, json.JSONDecodeError) as err:
        return f"corrupt ({path}: {one_line(str(err), 200)})"
    for what, found, journaled in (
        ("rows", footer.num_rows, entry.get("rows")),
        ("config hash", meta.get("config_hash"), entry.get("config_hash")),
        ("schema version", meta.get("schema_version"), entry.get("schema_version")),
    ):
        if found != journaled:
            return f"corrupt ({path}: {what} {found}, but the journal says {journaled})"
    return None


class Journal:
    """An append-only JSON-lines file of unit entries (``{key: id, "config_hash": ..., ...}``).

    Each entry is appended and fsynced; a torn (unparseable) line from a crash is skipped on read.

    Args:
        path: The journal file.
        key: The entry field holding the unit id (``cell_id``, ``state_id``).
        directory: Where the unit files ``<id>.parquet`` are.
        unit: What a unit is called in messages (``cell``, ``probe state``).
    """

    def __init__(self, path: Path, key: str, directory: Path, unit: str) -> None:
        self.path = path
        self.key = key
        self.directory = directory
        self.unit = unit

    def append(self, entry: dict[str, Any]) -> None:
        _append_line(self.path, entry)

    def entries(self) -> list[dict[str, Any]]:
        """Entries in order, torn lines skipped."""
        return _read_lines(self.path)

    def stored_entries(self) -> dict[str, dict[str, Any]]:
        """``id -> last entry`` of the stored units: the entry is ``ok`` at the current schema
        version and the unit's file agrees with it (:func:`_file_problem`).

        A unit whose file does not is left out (so it is recomputed), with an
        :class:`~orthobench.exceptions.OrthobenchWarning`:
        ``cell <id>: stored file is corrupt (<path>: <why>); recomputing``.
        """
        last = {entry[self.key]: entry for entry in self.entries()}
        stored = {}
        for uid, entry in last.items():
            if entry.get("status") != "ok" or entry.get("schema_version") != SCHEMA_VERSION:
                continue
            problem = _file_problem(self.directory / f"{uid}.parquet", entry)
            if problem is None:
                stored[uid] = entry
            else:
                warnings.warn(
                    f"{self.unit} {uid}: stored file is {problem}; recomputing",
                    OrthobenchWarning,
                    stacklevel=1,
                )
        return stored

    def stored(self) -> dict[str, str]:
        """``id -> config hash`` of the stored units (:meth:`stored_entries`)."""
        return {uid: entry["config_hash"] for uid, entry in self.stored_entries().items()}


@dataclass(frozen=True)
class EvaluationJournal:
    """The evaluations of one cell in progress, one JSON line each, with the optimizer's state.

    Each line is ``{"schema_version", "config_hash", "record": RunRecord fields, "state":
    Optimizer.state_dict() after the evaluation was told (None in the initial design)}``, appended
    and fsynced as the evaluation finishes. It pickles, so a worker process writes the journal of
    the cell it runs (one writer per file).

    Args:
        path: The journal file (``DIR/partial/<cell id>.jsonl``).
        config_hash: The cell's configuration hash: entries of another configuration are ignored.
    """

    path: Path
    config_hash: str

    def append(self, record: RunRecord, state: dict[str, Any] | None) -> None:
        _append_line(
            self.path,
            {
                "schema_version": SCHEMA_VERSION,
                "config_hash": self.config_hash,
                "record": dataclasses.asdict(record),
                "state": state,
            },
        )

    def read(self) -> list[tuple[RunRecord, dict[str, Any] | None]]:
        """The stored evaluations of this configuration, in order (torn lines skipped).

        Only the leading run of consecutive evaluations (``iteration`` 0, 1, ...) counts: a gap
        means a line was lost, and what follows it cannot be replayed.
        """
        evaluations = []
        for entry in _read_lines(self.path):
            if (
                entry.get("schema_version") != SCHEMA_VERSION
                or entry.get("config_hash") != self.config_hash
            ):
                continue
            record = RunRecord(**entry["record"])
            if record.iteration != len(evaluations):
                break
            evaluations.append((record, entry["state"]))
        return evaluations

    def discard(self) -> None:
        """Remove the journal (its cell is stored whole)."""
        self.path.unlink(missing_ok=True)


class ResultStore:
    """The results directory of one suite (see the module docstring for the layout).

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
        """The journal of the cell's evaluations while it runs."""
        return EvaluationJournal(self.root / "partial" / f"{cell.id}.jsonl", resolved_hash(cell))

    def probe_path(self, state_id: str) -> Path:
        return self.probe_dir / f"{state_id}.parquet"

    def stored(self) -> dict[str, str]:
        """``cell id -> config hash`` (:func:`resolved_hash`) of the stored cells.

        A cell whose file is missing or does not match its journal entry is not stored (it is
        reported and recomputed: :meth:`Journal.stored_entries`).
        """
        return self.runs_journal.stored()

    def is_stored(self, cell: Cell, stored: dict[str, str] | None = None) -> bool:
        """Whether ``cell`` is stored with its resolved configuration (:func:`resolved_hash`)."""
        stored = self.stored() if stored is None else stored
        return stored.get(cell.id) == resolved_hash(cell)

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

    def record_failure(self, cell: Cell, error: str, traceback_text: str, seconds: float) -> None:
        """Journal a failed cell (its error and traceback); it is retried on the next run."""
        self.journal_failure(cell.id, resolved_hash(cell), error, traceback_text, seconds)

    def journal_failure(
        self,
        cell_id: str,
        config_hash: str,
        error: str,
        traceback_text: str,
        seconds: float | None,
    ) -> None:
        """:meth:`record_failure` for a cell known by its id and configuration hash alone (one
        that an earlier process left unfinished); ``seconds`` None where nobody timed it."""
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
