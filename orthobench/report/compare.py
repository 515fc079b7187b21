"""Two result sets of the same suite side by side: ``orthobench report BASE NEW --baseline BASE``.

Cells are matched by ``(suite, task, optimizer, seed)``. Per cell: the final best-so-far value in
each set and whether every observed ``y`` is the same (the loop is deterministic for a given
library version and thread count, docs/design.md, "Seeds and determinism", so a change that should
not move an optimizer must leave its cells identical). Per ``(suite, task, optimizer)``: the
two-sided Wilcoxon signed-rank test of the per-seed differences new - base over the cells in both
sets (a cell of one seed starts from the same initial design in both), Holm-corrected over the
optimizers of a task, and a one-line verdict.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.report import stats
from orthobench.report.tables import final_values

CELL = ["suite", "task", "optimizer", "seed"]
PAIR = ["suite", "task", "optimizer"]


def _finals(runs: pd.DataFrame) -> pd.DataFrame:
    suites = runs[["source", "task", "optimizer", "seed", "suite"]].drop_duplicates()
    finals = final_values(runs.assign(run_set=runs["source"])).rename(columns={"run_set": "source"})
    return finals.merge(suites, on=["source", "task", "optimizer", "seed"])


def _same_y(base: pd.DataFrame, new: pd.DataFrame) -> tuple[bool, float]:
    a = base.sort_values("iteration")["y"].to_numpy(dtype=float)
    b = new.sort_values("iteration")["y"].to_numpy(dtype=float)
    if a.shape != b.shape:
        return False, float("nan")
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.abs(np.where(both_nan, 0.0, a - b))
    return bool(np.all(diff == 0.0)), float(np.nanmax(diff)) if diff.size else 0.0


def compare_cells(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Cell by cell: ``source`` (the compared set), :data:`CELL`, ``metric``, ``base``, ``new``,
    ``delta`` (new - base), ``identical`` (every y equal), ``max_abs_dy``.

    Cells of only one side are listed with NaN on the other side.
    """
    finals = _finals(runs)
    base = finals[finals["source"] == baseline]
    rows = []
    for source, new in finals[finals["source"] != baseline].groupby("source", sort=False):
        merged = base.merge(new, on=CELL, how="outer", suffixes=("_base", "_new"))
        for r in merged.itertuples(index=False):
            key = dict(zip(CELL, (r.suite, r.task, r.optimizer, r.seed), strict=True))
            identical, max_dy = False, float("nan")
            if pd.notna(r.source_base) and pd.notna(r.source_new):
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
            rows.append(
                {
                    "source": source,
                    **key,
                    "metric": r.metric_new if pd.notna(r.metric_new) else r.metric_base,
                    "base": r.final_base,
                    "new": r.final_new,
                    "delta": r.final_new - r.final_base,
                    "identical": identical,
                    "max_abs_dy": max_dy,
                }
            )
    columns = ["source", *CELL, "metric", "base", "new", "delta", "identical", "max_abs_dy"]
    return pd.DataFrame(rows, columns=columns)


def _verdict(row: pd.Series) -> str:
    if row["seeds_new"] == 0:
        return f"only in the baseline ({row['seeds_base']} seeds)"
    if row["seeds_base"] == 0:
        return f"new: not in the baseline ({row['seeds_new']} seeds)"
    moved = f"median {stats.sig(row['median_base'])} -> {stats.sig(row['median_new'])}"
    if row["identical"]:
        return f"identical: every y of the {row['common']} common cells is the same"
    differ = f"trajectories differ (max |dy| {stats.sig(row['max_abs_dy'])})"
    if not row["testable"]:
        return (
            f"too few seeds for a test: {moved} ({row['pairs']} paired seeds, smallest possible "
            f"p {stats.sig(row['p_min'])}); {differ}"
        )
    if row["p_holm"] < stats.ALPHA:
        direction = "better" if row["median_delta"] < 0 else "worse"
        return (
            f"{direction}: {moved} (Wilcoxon signed-rank over {row['pairs']} paired seeds, "
            f"Holm p = {stats.sig(row['p_holm'])})"
        )
    return (
        f"no detected change: {moved} (Holm p = {stats.sig(row['p_holm'])}, "
        f"{row['pairs']} paired seeds); {differ}"
    )


def compare_pairs(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per compared set and :data:`PAIR`: seeds, medians, the paired test, and a ``verdict``.

    The test pairs the cells present in both sets (the same suite, task, optimizer and seed) and
    applies :func:`orthobench.report.stats.signed_rank_test` to their differences new - base.

    Columns: ``source``, :data:`PAIR`, ``metric``, ``seeds_base``, ``seeds_new`` (finite final
    values), ``common`` (cells in both), ``median_base``, ``median_new``, ``pairs`` (cells with a
    finite final value in both), ``median_delta`` (median over the pairs of new - base; < 0 means
    new is lower), ``p_min`` (the smallest p-value the exact test can give with these pairs),
    ``testable`` (``p_min < 0.05``: False means too few seeds for a test), ``p_value`` (two-sided
    Wilcoxon signed-rank; NaN where not ``testable``), ``p_holm`` (Holm over the testable
    optimizers of the task), ``identical`` (every common cell identical and the seeds the same),
    ``max_abs_dy``, ``verdict``.
    """
    cells = compare_cells(runs, baseline)
    rows = []
    for (source, *pair), group in cells.groupby(["source", *PAIR], sort=True):
        base = group["base"].to_numpy(dtype=float)
        new = group["new"].to_numpy(dtype=float)
        delta = group["delta"].to_numpy(dtype=float)  # NaN unless both sides are finite
        test = stats.signed_rank_test(delta)
        common = int((group["base"].notna() & group["new"].notna()).sum())
        rows.append(
            {
                "source": source,
                **dict(zip(PAIR, pair, strict=True)),
                "metric": group["metric"].iloc[0],
                "seeds_base": int(np.isfinite(base).sum()),
                "seeds_new": int(np.isfinite(new).sum()),
                "common": common,
                "median_base": float(np.nanmedian(base)) if np.isfinite(base).any() else np.nan,
                "median_new": float(np.nanmedian(new)) if np.isfinite(new).any() else np.nan,
                "pairs": test.pairs,
                "median_delta": float(np.nanmedian(delta)) if test.pairs else np.nan,
                "p_min": test.p_min,
                "testable": test.p_min < stats.ALPHA,
                "p_value": test.p_value,
                "identical": bool(group["identical"].all()) and common == len(group),
                "max_abs_dy": float(group["max_abs_dy"].max()),
            }
        )
    columns = [
        "source", *PAIR, "metric", "seeds_base", "seeds_new", "common", "median_base",
        "median_new", "pairs", "median_delta", "p_min", "testable", "p_value", "p_holm",
        "identical", "max_abs_dy", "verdict",
    ]  # fmt: skip
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=columns)
    table["p_holm"] = table.groupby(["source", "suite", "task"])["p_value"].transform(
        lambda p: stats.holm(p.to_numpy())
    )
    table["verdict"] = table.apply(_verdict, axis=1)
    return table[columns]
