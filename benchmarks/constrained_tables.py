"""The tables of a constrained run (``orthobench run suites/constrained-medium.yaml -o DIR``).

Per task and optimizer, over seeds: the final best-so-far regret of the feasible evaluations
(best feasible value minus the task's minimum over its feasible points; median [min, max] over
the seeds that found a feasible point), the seeds that never did, the first feasible evaluation
(median, counted from 1) and the feasible share of the evaluations (median)
(:func:`orthobench.report.feasibility_sections.feasibility_table`). Then, per task, OrthoBO's
final regret minus each other optimizer's, seed by seed (every optimizer of a seed starts from
the same Sobol' design): the mean difference with its 95% Student-t interval over the seeds
where both found a feasible point, and the seeds where OrthoBO is lower; with 5 seeds a
signed-rank test cannot go below p = 0.0625, so none is printed. Tasks without constraints in
``DIR`` are left out (a line names them).

Run: ``.venv/bin/python benchmarks/constrained_tables.py DIR [--reference orthobo]``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from _timing import stored_machine_line

from orthobench.report.data import load_results
from orthobench.report.feasibility_sections import feasibility_table
from orthobench.report.stats import t_interval
from orthobench.report.tables import final_values


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, optimizer) of ``runs`` (constrained tasks' rows): final regret over
    seeds and the feasibility columns."""
    finals = final_values(runs)
    rows = []
    for (task, optimizer), group in finals.groupby(["task", "optimizer"], sort=True):
        found = group["final"].dropna().to_numpy(dtype=float)
        rows.append(
            {"task": task, "optimizer": optimizer, "seeds": len(group),
             "median": np.median(found) if found.size else np.nan,
             "min": found.min() if found.size else np.nan,
             "max": found.max() if found.size else np.nan}
        )  # fmt: skip
    feasibility = feasibility_table(runs)[
        ["task", "optimizer", "feasible_median", "first_median", "never"]
    ]
    return pd.DataFrame(rows).merge(feasibility, on=["task", "optimizer"], how="left")


def paired(runs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per (task, other optimizer): ``reference``'s final regret minus the other's, by seed."""
    finals = final_values(runs)
    rows = []
    for task, frame in finals.groupby("task", sort=True):
        by_seed = frame.pivot_table(index="seed", columns="optimizer", values="final")
        if reference not in by_seed:
            continue
        for other in by_seed.columns.drop(reference):
            diff = (by_seed[reference] - by_seed[other]).dropna().to_numpy(dtype=float)
            low, high = t_interval(diff)
            rows.append(
                {"task": task, "versus": other, "seeds": diff.size,
                 "mean": diff.mean() if diff.size else np.nan, "low": low, "high": high,
                 "lower": int((diff < 0).sum())}
            )  # fmt: skip
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--reference", default="orthobo")
    args = parser.parse_args(argv)
    runs = load_results([args.dir]).runs
    tasks = set(runs.loc[runs["constraints"].map(len) > 0, "task"])
    if not tasks:
        sys.exit(f"constrained_tables: {args.dir} holds no constrained runs")
    unconstrained = sorted(set(runs["task"]) - tasks)
    runs = runs[runs["task"].isin(tasks)]
    if args.reference not in set(runs["optimizer"]):
        have = ", ".join(sorted(runs["optimizer"].unique()))
        sys.exit(
            f"constrained_tables: no optimizer {args.reference} (--reference); the run has {have}"
        )
    print(stored_machine_line(args.dir))
    if unconstrained:
        print(f"Left out, without constraints: {', '.join(unconstrained)}.")
    print("| task | optimizer | final regret, median [min, max] | never feasible | "
          "first feasible (median) | feasible share (median) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in summary(runs).itertuples():
        print(
            f"| {r.task} | `{r.optimizer}` | {r.median:.4g} [{r.min:.3g}, {r.max:.3g}] | "
            f"{r.never} of {r.seeds} | {r.first_median:g} | {r.feasible_median:.2f} |"
        )
    print(f"\n| task | `{args.reference}` minus | seeds | mean [95% t interval] | "
          f"`{args.reference}` lower |")  # fmt: skip
    print("|---|---|---|---|---|")
    for r in paired(runs, args.reference).itertuples():
        print(
            f"| {r.task} | `{r.versus}` | {r.seeds} | {r.mean:.3g} [{r.low:.3g}, {r.high:.3g}] "
            f"| {r.lower} of {r.seeds} |"
        )


if __name__ == "__main__":
    main()
