"""The report's section on constrained tasks: how often each method's evaluations were feasible,
and when it first found a feasible point. (Best-so-far curves and final values already count
feasible points only: :mod:`orthobench.bests`.)"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.formatting import ci
from orthobench.report.blocks import Section, Table
from orthobench.report.data import ResultSet
from orthobench.report.stats import sig


def feasibility_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (run set, task, optimizer) of the cells with constraints: the feasible share of their
    evaluations (median, min and max over seeds) and the first feasible evaluation (its
    iteration counted from 1; median, min and max over the seeds that found one, and how many
    seeds never did)."""
    constrained = runs[runs["constraints"].map(len) > 0]
    rows = []
    for (run_set, task, optimizer), group in constrained.groupby(["run_set", "task", "optimizer"]):
        shares, firsts = [], []
        for _, cell in group.groupby("cell_id"):
            cell = cell.sort_values("iteration")
            ok = cell["feasible"] & (cell["status"] == "ok")
            shares.append(float(ok.mean()))
            if ok.any():
                firsts.append(int(cell.loc[ok, "iteration"].iloc[0]) + 1)
        rows.append(
            {"run_set": run_set, "task": task, "optimizer": optimizer, "seeds": len(shares),
             "feasible_median": np.median(shares), "feasible_min": min(shares),
             "feasible_max": max(shares),
             "first_median": np.median(firsts) if firsts else np.nan,
             "first_min": min(firsts, default=np.nan), "first_max": max(firsts, default=np.nan),
             "never": len(shares) - len(firsts)}
        )  # fmt: skip
    # Evaluation counts stay integers (2, not 2.0) in a table where some seed found none (empty).
    return pd.DataFrame(rows).astype({"first_min": "Int64", "first_max": "Int64"})


def feasibility_section(results: ResultSet) -> Section | None:
    runs = results.runs
    if runs.empty or "constraints" not in runs or not (runs["constraints"].map(len) > 0).any():
        return None
    table = feasibility_table(runs)
    rows = [
        [r.run_set, r.task, r.optimizer, str(r.seeds),
         ci(r.feasible_median, r.feasible_min, r.feasible_max, sig),
         "-" if np.isnan(r.first_median) else ci(r.first_median, r.first_min, r.first_max, sig),
         str(r.never)]
        for r in table.itertuples()
    ]  # fmt: skip
    header = ["run set", "task", "optimizer", "seeds", "feasible share median [min, max]",
              "first feasible evaluation median [min, max]", "seeds never feasible"]  # fmt: skip
    return Section(
        "feasibility",
        "Feasibility on constrained tasks",
        "How often each method's evaluations met every constraint, and how soon it found a "
        "feasible point; the curves and final values above count feasible points only.",
        [
            Table(
                "feasibility",
                header,
                rows,
                table,
                caption="Over seeds: each seed's share of feasible evaluations (initial design "
                "included) and its first feasible evaluation (counted from 1, over the seeds "
                "that found one).",
            )
        ],
        ("feasible share", "first feasible evaluation"),
    )
