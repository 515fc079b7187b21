"""The report's section comparing result sets with a baseline directory (``--baseline``), from
:mod:`orthobench.report.compare`."""

from __future__ import annotations

import pandas as pd

from orthobench.report import compare
from orthobench.report.blocks import Section, Table
from orthobench.report.data import ResultSet
from orthobench.report.stats import sig


def _comparison_p(r) -> str:
    """The Holm p-value of a row of :func:`~orthobench.report.compare.compare_pairs`, or why
    there is none."""
    if r.testable:
        return sig(r.p_holm)
    if r.unequal_evaluations:
        return "not compared (other evaluations)"
    if r.pairs and not r.differing:
        return f"no difference ({r.pairs} pair{'' if r.pairs == 1 else 's'} equal)"
    return "too few seeds for a test" if r.pairs else "-"


def _unmatched(sides: pd.DataFrame, cells: pd.DataFrame, baseline: str) -> str:
    """A sentence per compared directory that shares no cell with the baseline, naming both
    sides' suites (``sides``: the ``source`` and ``suite`` of stored and failed cells; cells of
    another suite never match), or empty."""
    ran = (cells["in_base"] | cells["failed_base"]) & (cells["in_new"] | cells["failed_new"])
    common = cells[ran].groupby("source").size()
    suites = sides.groupby("source")["suite"].unique()
    return "".join(
        f" {source} shares no cell with the baseline (its suites: "
        f"{', '.join(sorted(suites[source]))}; the baseline's: "
        f"{', '.join(sorted(suites[baseline]))})."
        for source in dict.fromkeys(sides["source"])
        if source != baseline and common.get(source, 0) == 0
    )


def _final(value: float, failed: bool) -> str:
    """A cell's final value, or ``failed`` for a cell that failed and stored nothing."""
    return "failed" if failed else sig(value)


def comparison_section(results: ResultSet, baseline: str) -> Section | None:
    runs = results.runs
    crashed = results.failed_cells()
    # A directory whose every cell failed stored no rows and is compared all the same.
    if runs.empty or len({*runs["source"], *crashed["source"]}) < 2:
        return None
    pairs = compare.compare_pairs(runs, baseline, crashed)
    cells = compare.compare_cells(runs, baseline, crashed)
    # A cell stored on one side only has no y to compare: neither identical nor not (empty).
    cells = cells.assign(identical=cells["identical"].where(cells["in_base"] & cells["in_new"]))
    verdicts = Table(
        "comparison",
        ["compared", "suite", "task", "optimizer", "seeds (base, new)", "median base",
         "median new", "paired seeds", "Holm p", "verdict"],
        [
            [r.source, r.suite, r.task, r.optimizer, f"{r.seeds_base}, {r.seeds_new}",
             sig(r.median_base), sig(r.median_new), str(r.pairs),
             _comparison_p(r), r.verdict]
            for r in pairs.itertuples()
        ],
        pairs,
    )  # fmt: skip
    by_cell = Table(
        "comparison-cells",
        ["compared", "suite", "task", "optimizer", "seed", "metric", "base final", "new final",
         "new - base", "identical y", "max |dy|"],
        [
            [r.source, r.suite, r.task, r.optimizer, str(r.seed),
             r.metric if isinstance(r.metric, str) else "-",  # a task no side stored a cell of
             _final(r.base, r.failed_base), _final(r.new, r.failed_new), sig(r.delta),
             "-" if pd.isna(r.identical) else "yes" if r.identical else "no",
             sig(r.max_abs_dy)]
            for r in cells.itertuples()
        ],
        cells,
    )  # fmt: skip
    return Section(
        "comparison",
        f"Comparison with the baseline {baseline}",
        "Cells matched by suite, task, optimizer and seed. The verdict tests whether the final "
        "values moved, on the seeds present in both (Wilcoxon signed-rank of new - base, "
        "two-sided, Holm-corrected over the task's optimizers; pairs of equal final values "
        "carry no sign and are dropped, and fewer than 6 pairs that differ are too few for a "
        "test). A cell that failed and stored nothing is a seed without a final value on its "
        "side; every verdict names such cells, and one that failed in the new set but not in "
        "the baseline makes the verdict 'worse: N cells failed in the new set', followed by "
        "the verdict on the other cells."
        + _unmatched(pd.concat([runs[compare.SIDE], crashed[compare.SIDE]]), cells, baseline),
        [verdicts, by_cell],
        (
            "final value",
            "Wilcoxon signed-rank, Holm",
            "verdict",
            "new - base",
            "identical y",
            "max |dy|",
        ),
    )
