"""Two result sets of the same suite side by side: ``orthobench report BASE NEW --baseline BASE``.

Cells are matched by ``(suite, task, optimizer, seed)``. Per cell: the final best-so-far value in
each set (NaN where the cell is missing or none of its evaluations gave a value) and whether every
observed ``y`` is the same (the loop is deterministic for a given library version and thread
count, docs/design.md, "Seeds and determinism", so a change that should not move an optimizer
must leave its cells identical). Per ``(suite, task, optimizer)``: the
two-sided Wilcoxon signed-rank test of the per-seed differences new - base over the cells in both
sets (a cell of one seed starts from the same initial design in both), Holm-corrected over the
optimizers of a task, and a one-line verdict, whose direction is that of the test's statistic and
whose medians are over the paired seeds.

A cell that failed and stored nothing (per directory:
:meth:`orthobench.report.data.ResultSet.failed_cells`) is a seed without a final value on its
side, as in the final table. Every verdict names the failed cells of each side, and one cell
that failed in the new set but not in the baseline (of a method the baseline ran) makes the
verdict ``worse: N cells failed in the new set``, followed by the verdict on the other cells: a
method that crashes on its hard seeds is never "better", "identical" or "only in the baseline"
on the ones it finished.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.report import stats
from orthobench.report.tables import final_values

CELL = ["suite", "task", "optimizer", "seed"]
PAIR = ["suite", "task", "optimizer"]


#: The columns that make a side of the comparison: each directory's cells of each suite apart.
SIDE = ["source", "suite"]


def _keyed(frame: pd.DataFrame, sides: pd.MultiIndex) -> pd.DataFrame:
    """``frame`` with ``run_set`` the number of its :data:`SIDE` among ``sides``."""
    return frame.assign(run_set=sides.get_indexer(pd.MultiIndex.from_frame(frame[SIDE])))


def _unkeyed(frame: pd.DataFrame, sides: pd.MultiIndex) -> pd.DataFrame:
    """``frame`` (:func:`_keyed`) with the :data:`SIDE` columns in place of ``run_set``."""
    named = sides[frame["run_set"].to_numpy(dtype=int)].to_frame(index=False)
    return pd.concat([named, frame.drop(columns="run_set").reset_index(drop=True)], axis=1)


def _finals(runs: pd.DataFrame, crashed: pd.DataFrame | None) -> pd.DataFrame:
    """:func:`~orthobench.report.tables.final_values` per ``source`` and :data:`CELL`; a crashed
    cell with no final value and 0 evaluations, its metric that of its suite's task on any
    side (on neither: none, NaN)."""
    sides = pd.MultiIndex.from_frame(runs[SIDE]).unique()
    finals = _unkeyed(final_values(_keyed(runs, sides)), sides)
    if crashed is None or crashed.empty:
        return finals
    metrics = finals[["suite", "task", "metric"]].drop_duplicates(["suite", "task"])
    lost = crashed.merge(metrics, on=["suite", "task"], how="left")
    lost = lost.assign(final=np.nan, evaluations=0)
    return pd.concat([finals, lost[finals.columns]], ignore_index=True)


def _same_y(base: pd.DataFrame, new: pd.DataFrame) -> tuple[bool, float]:
    a = base.sort_values("iteration")["y"].to_numpy(dtype=float)
    b = new.sort_values("iteration")["y"].to_numpy(dtype=float)
    if a.shape != b.shape:
        return False, float("nan")
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.abs(np.where(both_nan, 0.0, a - b))  # NaN where one side alone is NaN
    finite = diff[np.isfinite(diff)]
    largest = float(finite.max()) if finite.size else (0.0 if not diff.size else float("nan"))
    return bool(np.all(diff == 0.0)), largest


def compare_cells(
    runs: pd.DataFrame, baseline: str, crashed: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Cell by cell: ``source`` (the compared set), :data:`CELL`, ``metric``, ``in_base``,
    ``in_new`` (the cell is stored on that side), ``failed_base``, ``failed_new`` (the cell
    failed and stored nothing there: a row of ``crashed``,
    :meth:`~orthobench.report.data.ResultSet.failed_cells`), ``base``,
    ``new`` (final values, NaN without one), ``delta`` (new - base), ``identical`` (every y
    equal), ``max_abs_dy``, ``evaluations_base``, ``evaluations_new`` (a cell stored on both
    sides: its evaluations on each; NaN otherwise).

    Cells of only one side are listed with NaN on the other side.
    """
    finals = _finals(runs, crashed)
    base = finals[finals["source"] == baseline]
    rows = []
    for source, new in finals[finals["source"] != baseline].groupby("source", sort=False):
        merged = base.merge(new, on=CELL, how="outer", suffixes=("_base", "_new"))
        for r in merged.itertuples(index=False):
            key = dict(zip(CELL, (r.suite, r.task, r.optimizer, r.seed), strict=True))
            identical, max_dy = False, float("nan")
            evaluations = [np.nan, np.nan]
            if r.evaluations_base > 0 and r.evaluations_new > 0:
                selected = [
                    runs[
                        (runs["source"] == side)
                        & (runs["suite"] == r.suite)
                        & (runs["task"] == r.task)
                        & (runs["optimizer"] == r.optimizer)
                        & (runs["seed"] == r.seed)
                    ]
                    for side in (baseline, source)
                ]
                identical, max_dy = _same_y(*selected)
                evaluations = [len(side) for side in selected]
            rows.append(
                {
                    "source": source,
                    **key,
                    "metric": r.metric_new if pd.notna(r.metric_new) else r.metric_base,
                    "in_base": r.evaluations_base > 0,
                    "in_new": r.evaluations_new > 0,
                    "failed_base": r.evaluations_base == 0,
                    "failed_new": r.evaluations_new == 0,
                    "base": r.final_base,
                    "new": r.final_new,
                    "delta": r.final_new - r.final_base,
                    "identical": identical,
                    "max_abs_dy": max_dy,
                    "evaluations_base": evaluations[0],
                    "evaluations_new": evaluations[1],
                }
            )
    columns = ["source", *CELL, "metric", "in_base", "in_new", "failed_base", "failed_new",
               "base", "new", "delta", "identical", "max_abs_dy", "evaluations_base",
               "evaluations_new"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _cells(n: int) -> str:
    """``"1 cell"``, ``"3 cells"``."""
    return f"{n} cell{'' if n == 1 else 's'}"


def _only(row: pd.Series) -> str:
    """The cells stored on one side only, as a clause (empty without any)."""
    parts = [
        f"{_cells(n)} only in the {side}"
        for n, side in ((row["only_base"], "baseline"), (row["only_new"], "new set"))
        if n
    ]
    return "; " + ", ".join(parts) if parts else ""


def _failed(row: pd.Series) -> str:
    """The cells that failed and stored nothing on each side, as a clause (empty without any)."""
    return ", ".join(
        f"{_cells(n)} failed in the {side}"
        for n, side in ((row["failed_new"], "new set"), (row["failed_base"], "baseline"))
        if n
    )


def _verdict(row: pd.Series) -> str:
    """The verdict on the stored cells, led by the new set's failures (:func:`compare_pairs`)."""
    failed = _failed(row)
    if row["new_failures"] and (row["cells_base"] or row["failed_base"]):
        lead = f"worse: {_cells(row['new_failures'])} failed in the new set"
        if row["failed_base"]:
            lead += f" that did not fail in the baseline ({failed})"
        if not row["cells_new"]:
            return f"{lead} (baseline: {row['seeds_base']} seeds)"
        return f"{lead}; the other cells: {_stored_verdict(row)}"
    verdict = _stored_verdict(row)
    return f"{verdict}; {failed}" if failed else verdict


def _stored_verdict(row: pd.Series) -> str:
    if not (row["cells_base"] or row["failed_base"]):
        return f"new: not in the baseline ({row['seeds_new']} seeds)"
    if not (row["cells_new"] or row["failed_new"]):
        return f"only in the baseline ({row['seeds_base']} seeds)"
    if not (row["cells_base"] and row["cells_new"]):
        stored = ((row["cells_base"], "baseline"), (row["cells_new"], "new set"))
        return f"no cell stored in the {' or the '.join(side for n, side in stored if not n)}"
    if row["identical"]:
        return f"identical: every y of the {row['common']} common cells is the same"
    if row["common_identical"]:
        # A subset of the seeds run again: what was run twice is unchanged.
        return f"identical on the {row['common']} common cells (every y the same){_only(row)}"
    if row["seeds_new"] == 0:
        return (
            f"no finite final value in the new set ({row['cells_new']} cells; baseline: "
            f"{row['seeds_base']} seeds)"
        )
    if row["seeds_base"] == 0:
        return (
            f"no finite final value in the baseline ({row['cells_base']} cells; new: "
            f"{row['seeds_new']} seeds)"
        )
    if row["unequal_evaluations"]:
        return (
            f"not compared: {row['unequal_evaluations']} of the {row['common']} common cells ran "
            f"another number of evaluations in the new set ({row['evaluations']}), so their "
            "final values are not comparable"
        )
    if row["pairs"] == row["seeds_base"] == row["seeds_new"]:
        moved = f"median {stats.sig(row['median_base'])} -> {stats.sig(row['median_new'])}"
    elif row["pairs"]:
        moved = (
            f"median over the {row['pairs']} paired seeds {stats.sig(row['paired_median_base'])}"
            f" -> {stats.sig(row['paired_median_new'])}"
        )
    else:
        moved = (
            f"no seed with a final value in both (median {stats.sig(row['median_base'])} -> "
            f"{stats.sig(row['median_new'])} over different seeds)"
        )
    # Some common cell differs here (else a branch above returned), unless none is common.
    differ = (
        f"; trajectories differ (max |dy| {stats.sig(row['max_abs_dy'])})" if row["common"] else ""
    )
    paired = f"{row['pairs']} paired seeds"
    if row["differing"] != row["pairs"]:
        paired += f", {row['differing']} differ{'s' if row['differing'] == 1 else ''}"
    if row["pairs"] and not row["differing"]:
        return f"equal final values on the {row['pairs']} paired seeds{differ}"
    if not row["testable"]:
        return (
            f"too few seeds for a test: {moved} ({paired}, smallest possible "
            f"p {stats.sig(row['p_min'])}){differ}"
        )
    if row["p_holm"] < stats.ALPHA:
        direction = "better" if row["direction"] < 0 else "worse"
        return (
            f"{direction}: {moved} (Wilcoxon signed-rank over {paired}, "
            f"Holm p = {stats.sig(row['p_holm'])})"
        )
    return f"no detected change: {moved} (Holm p = {stats.sig(row['p_holm'])}, {paired}){differ}"


def _evaluation_counts(cells: pd.DataFrame) -> str:
    """The evaluations of ``cells`` on each side, as ``baseline 7, new 12`` (each side's distinct
    counts), or empty without cells."""
    if cells.empty:
        return ""
    sides = (("baseline", "evaluations_base"), ("new", "evaluations_new"))
    return ", ".join(
        f"{side} " + "/".join(str(int(n)) for n in sorted(cells[column].unique()))
        for side, column in sides
    )


def compare_pairs(
    runs: pd.DataFrame, baseline: str, crashed: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per compared set and :data:`PAIR`: seeds, medians, the paired test, and a ``verdict``.

    The test pairs the cells present in both sets (the same suite, task, optimizer and seed) and
    applies :func:`orthobench.report.stats.signed_rank_test` to their differences new - base; the
    verdict says better or worse by :func:`orthobench.report.stats.signed_rank_direction` (the
    side of the test's statistic) and gives the medians over the paired seeds where the two sets'
    seeds with a final value differ. ``crashed``
    (:meth:`~orthobench.report.data.ResultSet.failed_cells`): cells that failed and
    stored nothing, seeds without a final value. The verdict names them, and a cell that failed
    in the new set but not in the baseline (of a method the baseline ran) makes it ``worse: N
    cells failed in the new set``, followed by the verdict on the other cells.

    Columns: ``source``, :data:`PAIR`, ``metric``, ``cells_base``, ``cells_new`` (cells stored),
    ``failed_base``, ``failed_new`` (cells that failed and stored nothing), ``new_failures``
    (cells failed in the new set and not in the baseline), ``only_base``, ``only_new`` (cells
    stored on that side and neither stored nor failed on the other), ``seeds_base``,
    ``seeds_new`` (finite final values), ``common`` (cells stored in both),
    ``median_base``, ``median_new`` (over each side's finite final values), ``pairs`` (cells with
    a finite final value in both), ``differing`` (pairs whose final values differ: the test
    drops equal ones), ``paired_median_base``, ``paired_median_new`` (over the pairs),
    ``median_delta`` (median over the pairs of new - base), ``direction`` (-1: the signed ranks
    say new is lower, +1 higher, 0 neither), ``p_min`` (the smallest p-value the
    exact test can give with these pairs), ``testable`` (``p_min < 0.05`` and every common cell ran as
    many evaluations on both sides: False means too few seeds for a test, or final values after
    different budgets), ``p_value`` (two-sided Wilcoxon signed-rank; NaN where not ``testable``),
    ``p_holm`` (Holm over the testable optimizers of the task), ``identical`` (every common
    cell identical and the seeds the same), ``common_identical`` (every common cell identical,
    some seeds maybe on one side only), ``max_abs_dy``, ``unequal_evaluations`` (common cells
    whose evaluations differ between the sides), ``evaluations`` (theirs, as text), ``verdict``.
    """
    cells = compare_cells(runs, baseline, crashed)
    rows = []
    for (source, *pair), group in cells.groupby(["source", *PAIR], sort=True):
        base = group["base"].to_numpy(dtype=float)
        new = group["new"].to_numpy(dtype=float)
        delta = group["delta"].to_numpy(dtype=float)  # NaN unless both sides are finite
        test = stats.signed_rank_test(delta)
        paired = np.isfinite(delta)
        both = group["in_base"] & group["in_new"]
        common = int(both.sum())
        # A changed budget (or initial design) ends the cells at other evaluations: their final
        # values differ by design, so no test is run on them.
        unequal = both & (group["evaluations_base"] != group["evaluations_new"])
        testable = test.p_min < stats.ALPHA and not unequal.any()
        rows.append(
            {
                "source": source,
                **dict(zip(PAIR, pair, strict=True)),
                "metric": group["metric"].iloc[0],
                "cells_base": int(group["in_base"].sum()),
                "cells_new": int(group["in_new"].sum()),
                "failed_base": int(group["failed_base"].sum()),
                "failed_new": int(group["failed_new"].sum()),
                "new_failures": int((group["failed_new"] & ~group["failed_base"]).sum()),
                "only_base": int(
                    (group["in_base"] & ~group["in_new"] & ~group["failed_new"]).sum()
                ),
                "only_new": int(
                    (group["in_new"] & ~group["in_base"] & ~group["failed_base"]).sum()
                ),
                "seeds_base": int(np.isfinite(base).sum()),
                "seeds_new": int(np.isfinite(new).sum()),
                "common": common,
                "median_base": float(np.nanmedian(base)) if np.isfinite(base).any() else np.nan,
                "median_new": float(np.nanmedian(new)) if np.isfinite(new).any() else np.nan,
                "pairs": test.pairs,
                "differing": int((paired & (delta != 0.0)).sum()),
                "paired_median_base": float(np.median(base[paired])) if test.pairs else np.nan,
                "paired_median_new": float(np.median(new[paired])) if test.pairs else np.nan,
                "median_delta": float(np.nanmedian(delta)) if test.pairs else np.nan,
                "direction": stats.signed_rank_direction(delta),
                "p_min": test.p_min,
                "testable": testable,
                "p_value": test.p_value if testable else np.nan,
                "unequal_evaluations": int(unequal.sum()),
                "evaluations": _evaluation_counts(group[unequal]),
                "identical": bool(group["identical"].all()) and common == len(group),
                "common_identical": common > 0
                and bool(group.loc[group["in_base"] & group["in_new"], "identical"].all()),
                "max_abs_dy": float(group["max_abs_dy"].max()),
            }
        )
    columns = [
        "source", *PAIR, "metric", "cells_base", "cells_new", "failed_base", "failed_new",
        "new_failures", "only_base", "only_new", "seeds_base", "seeds_new", "common",
        "median_base", "median_new", "pairs", "differing", "paired_median_base",
        "paired_median_new", "median_delta", "direction", "p_min", "testable", "p_value",
        "p_holm", "identical", "common_identical", "max_abs_dy", "unequal_evaluations",
        "evaluations", "verdict",
    ]  # fmt: skip
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=columns)
    table["p_holm"] = table.groupby(["source", "suite", "task"])["p_value"].transform(
        lambda p: stats.holm(p.to_numpy())
    )
    table["verdict"] = table.apply(_verdict, axis=1)
    return table[columns]
