"""What a report reads: the stored rows, failed cells and file metadata of one or more directories.

Rows are keyed by ``(run_set, task, optimizer)``. ``run_set`` is the suite name; when the same
cell of a suite is stored in two directories (a suite run twice, e.g. before and after a change),
each directory's rows get their own run set, ``"<suite> @ <dir>"``, so they are shown side by side
and never pooled. Directories holding different cells of one suite (seeds split over machines)
stay one run set, unless they ran a cell with another configuration than the other directory's
cells of the same task and method (another budget, another parameter): those are split the same
way, since pooling them would average different experiments.

A cell proposes ``q`` points per BO step (a batch). The report compares methods, an optimizer at
one ``q``: the ``optimizer`` column of the rows and files is the method label
(:func:`method_label`), so the cells of a ``q`` sweep of one optimizer are never pooled, nor
asynchronous cells with synchronous ones.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from orthobench.registry import OPTIMIZERS
from orthobench.results import ResultStore, stored_threads, unique_dirs
from orthobench.suite import ID_SEPARATOR, LABEL_FIRST, LABEL_REST
from orthobench.work import CELL, ID_FIELDS, PROBE_STATE


def _declared_surrogate(name: str | None) -> str | None:
    """The ``surrogate`` that the optimizer registered as ``name`` declares; None where it
    declares none, or ``name`` names no factory that is loaded already
    (:meth:`~orthobench.registry.Registry.imported`: a plugin not installed here, or not imported
    by this process): a report imports no code that the results files it reads name (a crafted
    footer's ``evilmod:X`` ran on ``orthobench report``, and ``scipy:datasets.x`` imported a
    submodule through scipy's lazy attributes)."""
    factory = None if name is None else OPTIMIZERS.imported(name)
    return getattr(factory, "surrogate", None)


#: The columns that identify one probe row: its state, batch size, estimator and budget.
PROBE_ROW_KEY = ("task", "kernel", "seed", "state_iteration", "q", "estimator", "mc_samples")


def probe_row_keys(frame: pd.DataFrame) -> list[tuple]:
    """The :data:`PROBE_ROW_KEY` of each probe row (rows stored before the ``q`` column read as
    ``q = 1``): what ``load_results(probe_rows=...)`` selects by."""
    q = frame["q"].fillna(1) if "q" in frame else pd.Series(1, index=frame.index)
    keyed = frame.assign(q=q.astype("int64"))
    return list(keyed[list(PROBE_ROW_KEY)].itertuples(index=False, name=None))


@dataclass(frozen=True)
class ResultSet:
    """The stored results of some directories, as the report sections read them.

    Attributes:
        runs: :class:`~orthobench.results.RunRecord` rows plus ``source`` (the directory as
            given) and ``run_set``; ``q``, ``batch`` and ``wall_seconds`` are filled where the
            stored rows lack them (:func:`with_batch_columns`), and ``optimizer`` is the method
            label (:func:`method_label`).
        probe: :class:`~orthobench.results.ProbeRecord` rows plus ``source`` and ``run_set``.
        failures: Cells and probe states whose last journal entry is a failure: ``source``,
            ``kind`` (``cell`` or ``probe state``), ``unit_id`` (the cell's or state's id),
            ``suite`` (as the entry records it; None where it does not), ``error`` (the first
            line of the stored error).
        files: One row per stored file: ``source``, ``kind`` (``runs`` or ``probe``), ``suite``,
            ``run_set``, ``task``, ``optimizer`` (the method label of its rows, else the stored
            label), ``optimizer_name`` (registry name),
            ``n_init``, ``budget``, ``device``, ``threads``, ``cpu`` (model and torch's
            instruction set where the unit ran), ``git_sha``, ``python``,
            ``versions`` (text), ``seconds`` (the unit's compute time; a resumed cell's counts
            the evaluations it replayed: :meth:`orthobench.execution.CellJob.stored_seconds`),
            ``written_at``. Missing values are None.
    """

    runs: pd.DataFrame
    probe: pd.DataFrame
    failures: pd.DataFrame
    files: pd.DataFrame

    @property
    def optimizers(self) -> list[str]:
        """Optimizer labels in the order of their files (:func:`load_results`)."""
        stored = self.files[self.files["kind"] == "runs"].sort_values("order", kind="stable")
        return list(dict.fromkeys(stored["optimizer"]))

    def default_reference(self) -> str | None:
        """The first optimizer (:attr:`optimizers`) whose surrogate is a GP (else the first
        optimizer; None without runs): the default reference of the final-value tests."""
        names = dict(zip(self.files["optimizer"], self.files["optimizer_name"], strict=True))
        labels = self.optimizers
        gp = (label for label in labels if _declared_surrogate(names.get(label)) == "gp")
        return next(gp, next(iter(labels), None))

    def failed_cells(self) -> pd.DataFrame:
        """The failed cells that stored no rows, per directory: ``source``, ``suite``, ``task``,
        ``optimizer`` (the method label) and ``seed``.

        A failure entry records its cell's suite; one that does not (written before entries did)
        takes the one suite its directory stores its task in. One whose id is not a cell id, or
        that finds no suite, stays in :attr:`failures` only; a cell its directory stored (rerun
        after it failed) is not a failed one.
        """
        columns = ["source", "suite", "task", "optimizer", "seed"]
        if self.failures.empty or self.runs.empty:
            return pd.DataFrame(columns=columns)
        failed = self.failures[self.failures["kind"] == CELL]
        suites = self.runs.groupby(["source", "task"])["suite"].unique()
        rows = []
        for source, suite, uid in zip(
            failed["source"], failed["suite"], failed["unit_id"], strict=True
        ):
            key = cell_key(uid)
            if key is not None and not isinstance(suite, str):
                known = suites.get((source, key[0]), ())
                suite = known[0] if len(known) == 1 else None
            if key is not None and suite is not None:
                rows.append((source, suite, *key))
        return _unstored(pd.DataFrame(rows, columns=columns), self.runs, columns)

    def crashed(self) -> pd.DataFrame:
        """The failed cells that stored no rows, as seeds without a final value: ``run_set``,
        ``task``, ``optimizer`` (the method label) and ``seed``, one row per seed.

        A failed cell (:meth:`failed_cells`) takes the run set of the stored cells of its
        directory, suite and task; one that finds none stays in :attr:`failures` only. A seed
        that some directory of the run set stored is not a crashed one.
        """
        columns = ["run_set", "task", "optimizer", "seed"]
        on = ["source", "suite", "task"]
        failed = self.failed_cells()
        if failed.empty:
            return pd.DataFrame(columns=columns)
        run_sets = self.runs.drop_duplicates(on)[[*on, "run_set"]]
        return _unstored(failed.merge(run_sets, on=on), self.runs, columns)


def _unstored(cells: pd.DataFrame, runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The ``columns`` of ``cells`` whose values no row of ``runs`` holds, each once."""
    found = cells[columns].merge(runs[columns].drop_duplicates(), how="left", indicator=True)
    unstored = found[found["_merge"] == "left_only"][columns]
    return unstored.drop_duplicates().reset_index(drop=True)


_FILE_COLUMNS = (
    "source kind file suite task optimizer optimizer_name n_init budget device threads cpu git_sha "
    "python versions seconds written_at"
).split()


def _device(meta: dict) -> str | None:
    """The stored device, with the GPU's name where the file records one: ``cuda:0 (NVIDIA
    H100 80GB HBM3)``."""
    device, gpu = meta.get("device"), meta.get("gpu")
    return f"{device} ({gpu})" if device and gpu else device


def _file_rows(source: str, kind: str, files: list[tuple[Path, dict]]) -> list[dict]:
    """The rows of :attr:`ResultSet.files` of the files of ``kind`` (``runs``, ``probe``), each
    given by its path and metadata (:meth:`ResultStore.read_units`)."""
    rows = []
    for path, meta in files:
        cell = meta.get("cell") or {}
        state = meta.get("state") or {}
        config = {k: v for k, v in (cell or state).items() if k != "seed"}
        task = cell.get("task", {}).get("label") or (state.get("task") or {}).get("label")
        optimizer = cell.get("optimizer") or {}
        versions = meta.get("versions") or {}
        threads = stored_threads(meta)
        rows.append(
            {
                "source": source,
                "kind": kind,
                "file": path.stem,
                "suite": cell.get("suite") or state.get("suite") or "(unknown suite)",
                "task": task,
                "optimizer": optimizer.get("label"),
                "optimizer_name": optimizer.get("name"),
                "n_init": cell.get("n_init"),
                "budget": cell.get("budget"),
                "device": _device(meta),
                "threads": None if threads is None else str(threads),
                "cpu": meta.get("cpu"),
                "git_sha": meta.get("git_sha"),
                "python": meta.get("python"),
                "versions": ", ".join(f"{k} {v}" for k, v in versions.items() if v),
                "seconds": meta.get("seconds"),
                "written_at": meta.get("written_at"),
                "config": json.dumps(config, sort_keys=True),
                # What orders the files of a suite (:func:`_suite_order`).
                "suite_optimizers": _labels(meta.get("suite_optimizers")),
                "q": cell.get("q", 1),
                "asynchronous": cell.get("asynchronous") is True,
            }
        )
    return rows


def _labels(value: object) -> list[str] | None:
    """``value`` where it is a list of labels (a footer's ``suite_optimizers``), else None."""
    if isinstance(value, list) and all(isinstance(label, str) for label in value):
        return value
    return None


def _suite_order(files: list[dict]) -> None:
    """Set each file row's ``order`` to the suite's: its suite's first directory, its optimizer's
    place among the suite's (the ``suite_optimizers`` its cells recorded, in the order
    directories and runs stored them), its ``q`` (synchronous before asynchronous), then the
    stored order (``order``: directory, then journal). A file that recorded no suite order (a
    cell stored before it was, a probe state) keeps the stored order, after those of its
    directory that did. So the order the cells of a run finished in (``--workers``) does not
    decide which optimizer comes first (:meth:`ResultSet.default_reference`)."""
    first: dict[str, int] = {}
    suites: dict[str, dict[str, None]] = {}
    for row in sorted(files, key=lambda row: row["order"]):
        if row["suite_optimizers"] is not None:
            first.setdefault(row["suite"], row["order"][0])
            suites.setdefault(row["suite"], {}).update(dict.fromkeys(row["suite_optimizers"]))
    for row in files:
        if row["suite_optimizers"] is None:
            row["order"] = (row["order"][0], math.inf, 0, False, *row["order"])
            continue
        labels = list(suites[row["suite"]])
        place = labels.index(row["optimizer"]) if row["optimizer"] in labels else len(labels)
        schedule = row["q"] if isinstance(row["q"], int) else 1, row["asynchronous"]
        row["order"] = (first[row["suite"]], place, *schedule, *row["order"])


def _without_seed(unit_id: str) -> str:
    """A cell's or probe state's id without its ``seed<n>`` segment: the unit's task and method
    (and kernel, batch size, schedule), which directories sharding its seeds have in common."""
    return ID_SEPARATOR.join(
        part for part in unit_id.split(ID_SEPARATOR) if not re.fullmatch(r"seed\d+", part)
    )


def _configuration_splits(files: list[dict]) -> set[str]:
    """Suites whose directories hold units of one task and method (seed aside) with different
    stored configurations: their run sets are split by directory, as for a unit stored twice."""
    if not files:
        return set()
    frame = pd.DataFrame(files)
    frame["unit"] = frame["file"].map(_without_seed)
    configs = frame.groupby(["suite", "kind", "unit"])["config"].nunique()
    return set(configs[configs > 1].index.get_level_values("suite"))


def _text(entry: dict, field: str) -> str | None:
    """``entry[field]`` where it is a string, else None: a crafted or damaged journal line's list
    or number would break the report's grouping and merges."""
    value = entry.get(field)
    return value if isinstance(value, str) else None


def _failures(source: str, store: ResultStore) -> list[dict]:
    """The cells and probe states of ``store`` whose last journal entry is a failure (the
    journal skips a line whose id is not a string)."""
    rows = []
    for kind in (CELL, PROBE_STATE):
        id_field = ID_FIELDS[kind]
        last = {e[id_field]: e for e in store.journal(kind).entries()}
        rows += [
            {
                "source": source,
                "kind": kind,
                "unit_id": unit_id,
                "suite": _text(e, "suite"),
                "error": ((_text(e, "error") or "").strip().splitlines() or ["(no error text)"])[0],
            }
            for unit_id, e in last.items()
            if e.get("status") == "failed"
        ]
    return rows


def _run_sets(frame: pd.DataFrame, unit: str, split: set[str]) -> pd.Series:
    """``suite``, or ``suite @ source`` where a unit of the suite is stored in several sources
    or the suite is in ``split`` (:func:`_configuration_splits`)."""
    if frame.empty:
        return pd.Series([], dtype=str, index=frame.index)
    units = frame[["suite", unit, "source"]].drop_duplicates()
    counts = units.groupby(["suite", unit])["source"].nunique()
    split = split | set(counts[counts > 1].index.get_level_values("suite"))
    return pd.Series(
        [
            s if s not in split else f"{s} @ {src}"
            for s, src in zip(frame["suite"], frame["source"], strict=True)
        ],
        index=frame.index,
        dtype=str,
    )


def method_label(optimizer: str, q: int, asynchronous: bool = False) -> str:
    """The label a method is reported under: ``optimizer``, with `` (q=<q>)`` when ``q != 1``
    and `` (q=<q>, async)`` for an asynchronous cell.

    Example:
        >>> method_label("orthobo", 1), method_label("orthobo", 4, asynchronous=True)
        ('orthobo', 'orthobo (q=4, async)')
    """
    if q == 1:
        return optimizer
    return f"{optimizer} (q={q}, async)" if asynchronous else f"{optimizer} (q={q})"


def is_asynchronous(cell_id: str) -> bool:
    """Whether ``cell_id`` is an asynchronous cell's: only its id has five segments
    (``task__optimizer__q4__async__seed0``, :attr:`orthobench.suite.Cell.id`; labels hold no
    ``__``), and the rows carry no other mark of it."""
    return len(cell_id.split(ID_SEPARATOR)) == 5


#: A label of a cell id, by the suite's rule: it starts with a letter or a digit, so a label that
#: ends in ``_`` (``h_``) is not split as ``h`` and ``_...`` at the ``___`` that follows it.
_ID_LABEL = rf"{LABEL_FIRST}{LABEL_REST}*?"
#: A cell id (:attr:`orthobench.suite.Cell.id`): ``task__optimizer[__q<q>[__async]]__seed<n>``.
_CELL_ID = re.compile(
    rf"(?P<task>{_ID_LABEL})__(?P<optimizer>{_ID_LABEL})"
    r"(?:__q(?P<q>\d+)(?:__async)?)?__seed(?P<seed>\d+)"
)


def cell_key(cell_id: str) -> tuple[str, str, int] | None:
    """The task label, method label (:func:`method_label`) and seed of a cell id; None for a
    text that is not one (a journal line written by hand)."""
    match = _CELL_ID.fullmatch(cell_id)
    if match is None:
        return None
    q = int(match["q"] or 1)
    method = method_label(match["optimizer"], q, is_asynchronous(cell_id))
    return match["task"], method, int(match["seed"])


def with_batch_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``q``, ``batch`` and ``wall_seconds`` where rows lack them, and method labels.

    Rows stored before batch BO steps (no column, or a missing value) ran one point per step:
    ``q`` 1, ``batch`` 0 for the initial design and ``iteration - n_init + 1`` after it
    (``n_init`` the cell's initial-design rows, cells keyed by ``source`` and ``cell_id``), and
    ``wall_seconds`` NaN (not recorded). ``optimizer`` becomes :func:`method_label`.
    """
    runs = runs.copy()
    for column in ("q", "batch", "wall_seconds"):
        if column not in runs:
            runs[column] = np.nan
    init = runs["phase"] == "init"
    n_init = init.groupby([runs["source"], runs["cell_id"]]).transform("sum")
    derived = pd.Series(np.where(init, 0, runs["iteration"] - n_init + 1), index=runs.index)
    runs["q"] = runs["q"].fillna(1).astype("int64")
    runs["batch"] = runs["batch"].fillna(derived).astype("int64")
    runs["wall_seconds"] = runs["wall_seconds"].astype(float)
    runs["optimizer"] = [
        method_label(o, q, is_asynchronous(c))
        for o, q, c in zip(runs["optimizer"], runs["q"], runs["cell_id"], strict=True)
    ]
    return runs


def load_results(
    dirs: Iterable[str | Path],
    cell_ids: Collection[str] | None = None,
    probe_rows: Collection[tuple] | None = None,
) -> ResultSet:
    """Read the runs, probe rows, failed cells and file metadata of each directory.

    The rows and the metadata are read from one listing of each folder
    (:meth:`~orthobench.results.ResultStore.read_units`), so a directory that a run is writing
    gives the units stored so far, each whole; the files are ordered by their suites
    (:func:`_suite_order`).

    Args:
        dirs: Results directories, each read once (:func:`unique_dirs`).
        cell_ids: Read only these cells' rows, failures and files (the cells a suite has now,
            for the report ``orthobench run`` writes); None reads every stored cell.
        probe_rows: Read only these probe rows, keyed by :data:`PROBE_ROW_KEY` (the rows a
            suite's probe section names now, for the report ``orthobench probe`` writes: a
            stored state keeps the rows of estimators the suite no longer names); None reads
            every stored row (:func:`probe_row_keys`).

    Warns:
        OrthobenchWarning: naming a directory that a run holds for writing now
            (:meth:`~orthobench.results.ResultStore.writer`).
    """
    rows = {"runs": [], "probe": []}
    failures, files = [], []
    for rank, d in enumerate(unique_dirs(dirs)):
        directory, source = Path(d), str(d)
        store = ResultStore(directory)
        store.warn_if_held(source, "the report shows the cells and probe states")
        failures += _failures(source, store)
        journal = {}
        for entry in store.runs_journal.entries():
            journal.setdefault(entry.get("cell_id"), len(journal))
        for kind, unit in (("runs", CELL), ("probe", PROBE_STATE)):
            stored, paths = store.read_units(unit)
            rows[kind].append(stored.assign(source=source))
            files += [
                {**row, "order": (rank, journal.get(row["file"], len(journal)))}
                for row in _file_rows(source, kind, paths)
            ]
    _suite_order(files)  # by the optimizer labels, before they become method labels
    runs_frame = with_batch_columns(pd.concat(rows["runs"], ignore_index=True))
    methods = runs_frame.drop_duplicates(["source", "cell_id"]).set_index(["source", "cell_id"])
    methods = methods["optimizer"].to_dict()
    for row in files:
        if row["kind"] == "runs":
            row["optimizer"] = methods.get((row["source"], row["file"]), row["optimizer"])
    if cell_ids is not None:
        wanted = set(cell_ids)
        runs_frame = runs_frame[runs_frame["cell_id"].isin(wanted)].reset_index(drop=True)
        failures = [row for row in failures if row["kind"] != CELL or row["unit_id"] in wanted]
        files = [row for row in files if row["kind"] != "runs" or row["file"] in wanted]
    split = _configuration_splits(files)
    runs_frame["run_set"] = _run_sets(runs_frame, "cell_id", split)
    probe_frame = pd.concat(rows["probe"], ignore_index=True)
    if probe_rows is not None:
        wanted = set(probe_rows)
        keep = [key in wanted for key in probe_row_keys(probe_frame)]
        probe_frame = probe_frame[keep].reset_index(drop=True)
    probe_frame = _probe_task_labels(probe_frame)
    state = probe_frame["task"] + "/" + probe_frame["kernel"]
    state = state + "/" + probe_frame["seed"].astype(str) + "/"
    state = state + probe_frame["state_iteration"].astype(str)
    probe_frame["run_set"] = _run_sets(probe_frame.assign(state=state), "state", split)
    files_frame = pd.DataFrame(files, columns=[*_FILE_COLUMNS, "order"])
    files_frame["run_set"] = pd.Series(dtype=str)
    for _, group in files_frame.groupby("kind"):
        files_frame.loc[group.index, "run_set"] = _run_sets(group, "file", split)
    return ResultSet(
        runs=runs_frame,
        probe=probe_frame,
        failures=pd.DataFrame(failures, columns=["source", "kind", "unit_id", "suite", "error"]),
        files=files_frame,
    )


def _probe_task_labels(probe: pd.DataFrame) -> pd.DataFrame:
    """Probe rows with the batch size in the task label of batch states (``hartmann6 (q=4)``),
    so every probe table and figure keeps states of different ``q`` apart (rows stored before
    the ``q`` column read as ``q = 1``)."""
    if "q" not in probe or probe.empty:
        return probe
    q = probe["q"].fillna(1).astype(int)
    batch = q != 1
    probe = probe.assign(q=q)
    probe.loc[batch, "task"] = probe.loc[batch, "task"] + " (q=" + q[batch].astype(str) + ")"
    return probe


def step_info(frame: pd.DataFrame) -> pd.Series:
    """The parsed ``info`` JSON object of each row (an empty dict where it is empty)."""
    return frame["info"].map(lambda text: json.loads(text) if text else {})
