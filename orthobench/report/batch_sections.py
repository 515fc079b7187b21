"""The report's sections on batch BO steps (``q`` points per step): best-so-far per step and
against wall time, and the wall time per step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.formatting import ci
from orthobench.report import figures, tables
from orthobench.report.blocks import Figure, Section, Table, mean_interval_text, series
from orthobench.report.data import ResultSet
from orthobench.report.stats import sig


def _has_batch_steps(runs: pd.DataFrame) -> bool:
    """Whether some cell proposed more than one point per BO step or recorded wall seconds."""
    return bool((runs["q"] > 1).any() or runs["wall_seconds"].notna().any())


def step_curves_section(results: ResultSet, colors: figures.Palette) -> Section | None:
    runs = results.runs
    if runs.empty or not _has_batch_steps(runs):
        return None
    views, curves = {}, {}
    prefixed = runs["run_set"].nunique() > 1  # a run set may have no wall seconds
    for axis in ("batch", "wall_seconds"):
        trace = tables.traces(runs, axis)
        curves[axis] = tables.curves(trace, axis)
        views[axis] = trace.assign(series=series(trace, prefixed))
    lines = {axis: curve.assign(series=series(curve, prefixed)) for axis, curve in curves.items()}
    blocks: list[Figure | Table | str] = []
    for task in sorted(runs["task"].unique()):
        panels = {axis: view[view["task"] == task] for axis, view in views.items()}
        panels = {
            axis: data
            for axis, data in panels.items()
            if np.isfinite(data["value"].to_numpy(dtype=float)).any()
        }
        if not panels:
            continue  # the per-evaluation curves say why nothing is plotted
        shown = " and ".join(
            {"batch": "per BO step", "wall_seconds": "against wall seconds"}[a] for a in panels
        )
        drawn = pd.concat(panels.values())
        seeds = mean_interval_text(drawn[np.isfinite(drawn["value"].to_numpy(dtype=float))])
        blocks.append(
            Figure(
                figures.step_curves_svg(
                    panels, {a: d[d["task"] == task] for a, d in lines.items()}, colors, task
                ),
                f"{task}: best-so-far {shown}, {seeds}.",
            )
        )
    for axis, name in (("batch", "step-curves"), ("wall_seconds", "wall-curves")):
        blocks.append(
            Table(
                name,
                [],
                [],
                curves[axis],
                caption=f"Curve values per {'BO step' if axis == 'batch' else 'wall second'} "
                "(CSV only).",
            )
        )
    return Section(
        "step-curves",
        "Best-so-far per BO step and against wall time",
        "With q points per BO step, one step makes q evaluations, mostly at once: each task's "
        "best-so-far regret (the objective where no optimum is known) at the end of each BO "
        "step (left) and against the cell's wall seconds (right, where recorded).",
        blocks,
        ("q (points per BO step)", "BO step (batch)", "wall seconds", "best-so-far regret",
         "best-so-far objective", "mean [95% CI]"),
    )  # fmt: skip


def step_time_section(results: ResultSet) -> Section | None:
    runs = results.runs
    table = tables.step_time_table(runs) if not runs.empty else pd.DataFrame()
    if table.empty:
        return None
    rows = [
        [r.run_set, r.task, r.optimizer, str(r.q), str(r.seeds), str(r.steps),
         ci(r.wall_median, r.wall_min, r.wall_max, sig), sig(r.fit_median), sig(r.acq_median),
         sig(r.eval_median)]
        for r in table.itertuples()
    ]  # fmt: skip
    header = ["run set", "task", "optimizer", "q", "seeds", "BO steps",
              "wall s per step median [min, max]", "fit s", "acquisition s",
              "one evaluation s"]  # fmt: skip
    return Section(
        "step-time",
        "Wall time per BO step",
        "Wall seconds per BO step from the cells' recorded wall time: with q evaluations run at "
        "once, a step takes about its fit, its acquisition and one evaluation, not q.",
        [
            Table(
                "step-time",
                header,
                rows,
                table,
                caption="Wall seconds per step: each seed's mean over its BO steps, then the "
                "median and [min, max] over seeds. Fit, acquisition: medians over all BO steps "
                "of all seeds; one evaluation: median over all BO evaluations.",
            )
        ],
        ("wall time per BO step", "q (points per BO step)", "BO step (batch)", "wall seconds"),
    )
