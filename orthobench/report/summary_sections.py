"""The report's first sections: what was run, where and with which code (the summary), and the
cells whose last attempt failed."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from orthobench.report.blocks import Section, Table
from orthobench.report.data import ResultSet
from orthobench.results import short_sha

#: The columns of the summary's CSV, written even without a row (a CSV without a header row is
#: one that pandas cannot read).
SUMMARY_COLUMNS = [
    "kind", "run_set", "sources", "tasks", "optimizers", "seeds", "n_init", "budget", "files",
    "evaluations", "devices", "threads", "cpus", "python", "versions", "compute_seconds",
    "first_stamp", "last_stamp",
]  # fmt: skip


def _join(values: Sequence, empty: str = "-") -> str:
    distinct = [str(v) for v in dict.fromkeys(v for v in values if pd.notna(v) and v != "")]
    return ", ".join(distinct) or empty


def value_range(values: pd.Series) -> str:
    """The smallest and largest of the integer ``values``: ``"4"`` or ``"4-8"`` (``-`` without
    any)."""
    values = values.dropna()
    if values.empty:
        return "-"
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 600 else f"{seconds / 60:.1f} min"


def _stamps(stamps: pd.Series) -> tuple[str | None, str | None, str]:
    """The earliest and latest ``written_at`` stamp as stored, and both as UTC minutes (one
    where they fall in the same minute; ``-`` without a readable stamp)."""
    parsed = pd.to_datetime(stamps, errors="coerce", utc=True)
    if parsed.isna().all():
        return None, None, "-"
    first, last = parsed.idxmin(), parsed.idxmax()
    shown = [f"{parsed[i]:%Y-%m-%d %H:%M} UTC" for i in (first, last)]
    return stamps[first], stamps[last], shown[0] if shown[0] == shown[1] else " to ".join(shown)


def summary_section(results: ResultSet) -> Section:
    files = results.files
    intro = (
        "What was run, where and with which code. Compute time: the sum of the cells' (or probe "
        "states') own seconds; a cell resumed after an interruption counts the evaluations it "
        "kept from the interrupted run, as their wall_seconds say. Dated: the written_at stamps "
        "of the files, first to last (a run stamps every file it writes with the time it "
        "started), in UTC."
    )
    if files.empty:
        # Nothing stored (failed cells only): a note, not tables without a row.
        return Section(
            "summary",
            "Summary",
            "What was run, where and with which code.",
            [
                "There is no stored cell or probe state in "
                f"{', '.join(dict.fromkeys(results.failures['source'])) or 'these directories'}"
                f"; {len(results.failures)} failed cell(s) or probe state(s) are listed below."
            ],
        )
    rows, records = [], []
    for (kind, run_set), group in files.groupby(["kind", "run_set"], sort=True):
        runs = results.runs[results.runs["run_set"] == run_set] if kind == "runs" else None
        first, last, dated = _stamps(group["written_at"].reset_index(drop=True))
        record = {
            "kind": kind,
            "run_set": run_set,
            "sources": _join(group["source"]),
            "tasks": _join(sorted(group["task"].dropna())),
            "optimizers": _join(group.sort_values("order", kind="stable")["optimizer"]),
            "seeds": _join(sorted(runs["seed"].unique())) if runs is not None else "-",
            "n_init": value_range(group["n_init"]),
            "budget": value_range(group["budget"]),
            "files": len(group),
            "evaluations": len(runs) if runs is not None else 0,
            "devices": _join(group["device"]),
            "threads": _join(group["threads"], "not recorded"),
            "cpus": _join(group["cpu"], "not recorded"),
            "python": _join(group["python"]),
            "versions": _join(group["versions"]),
            "compute_seconds": float(group["seconds"].astype(float).sum()),
            "first_stamp": first,
            "last_stamp": last,
        }
        records.append(record)
        rows.append(
            [
                "run" if kind == "runs" else "probe",
                run_set,
                record["sources"],
                record["tasks"],
                record["optimizers"],
                record["seeds"],
                record["n_init"],
                record["budget"],
                f"{len(group)} {'cells' if kind == 'runs' else 'states'}",
                record["devices"],
                record["threads"],
                record["cpus"],
                record["versions"] + f", python {record['python']}",
                _seconds(record["compute_seconds"]),
                dated,
            ]
        )
    overview = Table(
        "summary",
        ["kind", "run set", "from", "tasks", "optimizers", "seeds", "n_init", "budget", "stored",
         "devices", "threads", "CPUs", "versions", "compute time", "dated"],
        rows,
        pd.DataFrame(records, columns=SUMMARY_COLUMNS),
    )  # fmt: skip
    shas = (
        files.assign(git_sha=files["git_sha"].fillna("(none)"))
        .groupby(["run_set", "kind", "optimizer"], dropna=False, sort=True)["git_sha"]
        .agg(
            lambda s: ", ".join(
                f"{short_sha(sha, 10)} ({n})" for sha, n in s.value_counts().items()
            )
        )
        .reset_index()
    )
    sha_table = Table(
        "git-shas",
        ["run set", "kind", "optimizer", "git SHAs (files)"],
        [
            [r.run_set, r.kind, r.optimizer if isinstance(r.optimizer, str) else "-", r.git_sha]
            for r in shas.itertuples()
        ],
        shas,
        caption="Every git SHA found in the files' metadata, with the number of files.",
    )
    blocks: list[Table | str] = [overview, sha_table]
    cpus = sorted(files["cpu"].dropna().unique())
    if len(cpus) > 1:
        blocks.insert(
            0,
            f"These results were computed on {len(cpus)} CPU types ({', '.join(cpus)}). A BO "
            "run or probe state is reproducible for a thread count and a CPU type: on another CPU "
            "the same cell can take another path, so differences between run sets computed on "
            "different CPUs are partly the CPUs'.",
        )
    return Section("summary", "Summary", intro, blocks)


def failures_section(results: ResultSet) -> Section | None:
    failures = results.failures
    if failures.empty:
        return None
    table = Table(
        "failed-cells",
        ["from", "kind", "id", "error (first line)"],
        [[r.source, r.kind, r.unit_id, r.error] for r in failures.itertuples()],
        failures,
    )
    return Section(
        "failed",
        "Failed cells and probe states",
        f"{len(failures)} cell(s) or probe state(s) whose last attempt failed; they store no "
        "values, and a failed cell counts as a seed without a final value in the ranks and the "
        "ECDF. Full tracebacks are in runs.jsonl (cells) and probe.jsonl (probe "
        "states) of their directory; a rerun retries them.",
        [table],
    )
