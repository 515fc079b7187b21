"""The tables of docs/benchmarks.md, "`suites/probe-paper.yaml`: the paper's protocol".

Reads the rows of ``orthobench probe suites/probe-paper.yaml -o DIR`` and prints three markdown
tables (seconds):

1. Per (kernel, S, function): the paper's Var(MC) / Var(orth) (its Tables 7 and 8,
   :data:`paper_tables.PAPER_VARIANCES`), the mean over states of the probe variances of naive
   theta-MC and of ``orth``, and per estimator the variance ratio Var(MC) / Var(estimator) at the
   same S, median [min, max] over the states.
2. TPE at the largest S: the probe variances of MC-TPE and OrthoBO-TPE, mean ± sd over the
   states, and their ratio, median [min, max] over the states (paper Table 9).
3. Ranking stability, Matérn-5/2 ARD at the largest S: probe variance, top-1 agreement and flip
   rate, mean ± sd over the states.

Run: ``.venv/bin/python benchmarks/probe_paper_tables.py results/probe-paper``.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd
from _timing import stored_machine_line
from paper_tables import PAPER_VARIANCES

from orthobench.probe.intervals import defined_ratios
from orthobench.results import load_probe

ESTIMATORS = ["orth", "orth-shrink", "qmc-owen+rb"]
TASKS = ["hartmann6", "ackley8", "michalewicz10", "levy16"]
RANKED = ["qlogei", "mc", "orth", "qmc-owen+rb"]


def spread(ratios: pd.Series) -> str:
    """Median [min, max] over the states with a defined ratio."""
    r = pd.Series(defined_ratios(ratios.to_numpy(dtype=float))).dropna()
    return f"{r.median():.2f} [{r.min():.2f}, {r.max():.2f}]"


def mean_sd(values: pd.Series, fmt: str, sd: str = ".2g") -> str:
    return f"{values.mean():{fmt}} ± {values.std():{sd}}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    directory = parser.parse_args(argv).dir
    rows = load_probe([directory])
    if rows.empty:
        sys.exit(f"probe_paper_tables: {directory} holds no probe results")
    print(stored_machine_line(directory))
    rows = rows.assign(var_mc=rows["probe_variance"] * rows["var_ratio"])
    largest = rows["mc_samples"].max()
    order = {t: i for i, t in enumerate(TASKS)}

    print("| kernel | S | function | paper | ours: Var(MC) / Var(orth) | "
          + " | ".join(f"`{e}`" for e in ESTIMATORS) + " |")  # fmt: skip
    print("|---|---:|---|---:|---|" + "---|" * len(ESTIMATORS))
    gp = rows[rows["kernel"] != "tpe"]
    for (kernel, s), cell in gp.groupby(["kernel", "mc_samples"]):
        for task in sorted(cell["task"].unique(), key=order.get):
            one = cell[cell["task"] == task]
            orth = one[one["estimator"] == "orth"]
            mc_var, orth_var = PAPER_VARIANCES[(kernel, s)][task]
            ours = f"{orth['var_mc'].mean():.2e} / {orth['probe_variance'].mean():.2e}"
            cols = [spread(one[one["estimator"] == e]["var_ratio"]) for e in ESTIMATORS]
            print(f"| {kernel} | {s} | {task} | {mc_var / orth_var:.2f} | {ours} | "
                  + " | ".join(cols) + " |")  # fmt: skip

    print(f"\nTPE at S = {largest}\n")
    print(
        "| function | MC-TPE variance (mean ± sd) | OrthoBO-TPE variance | median ratio [min, max] |"
    )
    print("|---|---|---|---|")
    tpe = rows[(rows["estimator"] == "orthobo-tpe") & (rows["mc_samples"] == largest)]
    for task in TASKS:
        one = tpe[tpe["task"] == task]
        print(f"| {task} | {mean_sd(one['var_mc'], '.3g')} | "
              f"{mean_sd(one['probe_variance'], '.3g')} | {spread(one['var_ratio'])} |")  # fmt: skip

    print(f"\nRanking, matern52-ard, S = {largest}\n")
    print("| function | estimator | probe variance | top-1 agreement | flip rate |")
    print("|---|---|---|---|---|")
    ard = rows[(rows["kernel"] == "matern52-ard") & (rows["mc_samples"] == largest)]
    for task in TASKS:
        for est in RANKED:
            one = ard[(ard["task"] == task) & (ard["estimator"] == est)]
            print(f"| {task} | {est} | {mean_sd(one['probe_variance'], '.2e', '.1e')} | "
                  f"{mean_sd(one['top1_agreement'], '.3f', '.2f')} | "
                  f"{mean_sd(one['flip_rate'], '.3f', '.2f')} |")  # fmt: skip


if __name__ == "__main__":
    main()
