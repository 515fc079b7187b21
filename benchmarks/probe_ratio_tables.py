"""A probe's ratio tables: estimators against naive MC per task and q, and equal accuracy.

Reads the rows of ``orthobench probe SUITE -o DIR`` (``suites/probe-batch.yaml``: q = 1 and
q > 1; ``suites/probe-constrained.yaml``: constrained EI) and prints two tables.

A state is one surrogate (a GP kernel, or TPE) of one BO state at one q; each estimator is
compared with its state's naive baseline (``mc``; ``mc-tpe`` on TPE states).

1. Per (function, kernel, q, estimator, S): the MSE ratio of naive theta-MC over the estimator
   (> 1: better; with ``--log`` the variance ratio of the outer-log values), median and
   [min, max] over the states, the states where it is below 1, and
   the two-sided Wilcoxon signed-rank p-value of the log ratios against 0 over the states,
   Holm-adjusted over the functions of each (q, estimator, S) (the states are seed-paired: every
   estimator of a state is rebuilt on that state); rows ``all functions`` pool the states of
   every function (not adjusted). A state whose ratio is undefined (values and reference all 0)
   or, for the MSE ratio, whose reference is too far from converged
   (:func:`~orthobench.probe.tables.unconverged_reference`) is counted and left out.
2. Equal accuracy: per q, for each estimator and S, the MSE over the MSE of the paper's estimator
   (``orth``) at the largest S on the same state, worst (largest) and median over all states of
   every function, and the smallest S whose worst ratio is at most 1 (no worse than ``orth`` at the
   largest budget on any state).

Run: ``.venv/bin/python benchmarks/probe_ratio_tables.py DIR``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from _timing import stored_machine_line
from scipy import stats

from orthobench.probe.tables import unconverged_reference
from orthobench.report.stats import holm
from orthobench.results import load_probe

#: The paper's estimator, the reference of the equal-accuracy table.
PAPER = "orth"
#: The columns of one probed state: a kernel's (or TPE's) surrogate of one BO state, at one q.
STATE = ["task", "kernel", "seed", "state_iteration", "q"]
#: Each state's naive estimator, the one its ratios are against: theta-MC on GP states, the
#: TPE probe's own on TPE states (which have no ``mc`` row).
BASELINES = ("mc", "mc-tpe")


def with_log_variance_ratio(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``mse_ratio`` replaced by the variance ratio of the outer-log values, the
    state's baseline's ``probe_variance_log`` over the estimator's at the same S (``--log``)."""
    key = [*STATE, "mc_samples"]
    base = rows[rows["estimator"].isin(BASELINES)][[*key, "probe_variance_log"]]
    merged = rows.merge(base.rename(columns={"probe_variance_log": "mc_log"}), on=key)
    return merged.assign(mse_ratio=merged["mc_log"] / merged["probe_variance_log"])


def against_mc(rows: pd.DataFrame) -> pd.DataFrame:
    """Table 1: one row per (task, kernel, q, estimator, S) of the estimators other than the
    baselines; ``all functions`` pools the tasks of one kernel. Rows with an ``unconverged``
    column (the MSE ratio: :func:`~orthobench.probe.tables.unconverged_reference`) leave the
    states it marks out, counted."""
    out = []
    others = rows[~rows["estimator"].isin(BASELINES)]
    pooled = others.assign(task="all functions")
    for (task, kernel, q, est, s), group in pd.concat([others, pooled]).groupby(
        ["task", "kernel", "q", "estimator", "mc_samples"]
    ):
        ratio = group["mse_ratio"].to_numpy(dtype=float)
        # Undefined on a state whose values and reference are all 0 (constrained EI underflows
        # where every probe is infeasible): counted, left out of the statistics.
        finite = np.isfinite(ratio)
        unconverged = finite & np.asarray(group.get("unconverged", False), dtype=bool)
        defined = ratio[finite & ~unconverged]
        log = np.log(defined)
        p = stats.wilcoxon(log).pvalue if log.size >= 5 and np.any(log != 0) else np.nan
        out.append(
            {"task": task, "kernel": kernel, "q": q, "estimator": est, "S": s,
             "states": defined.size, "undefined": int((~finite).sum()),
             "unconverged": int(unconverged.sum()), "median": np.median(defined),
             "min": defined.min(), "max": defined.max(), "below_1": int((defined < 1).sum()),
             "p": p}
        )  # fmt: skip
    table = pd.DataFrame(out)
    table["p_holm"] = np.nan
    functions = table[table["task"] != "all functions"]
    for _, group in functions.groupby(["kernel", "q", "estimator", "S"]):
        valid = group["p"].dropna()
        if not valid.empty:
            table.loc[valid.index, "p_holm"] = holm(valid.to_numpy())
    return table


def equal_accuracy(rows: pd.DataFrame) -> pd.DataFrame:
    """Table 2: per (q, estimator, S), MSE over ``orth``'s at the largest S on the same state;
    states an ``unconverged`` column marks are left out (their MSEs are against the reference)."""
    largest = rows["mc_samples"].max()
    paper = rows[(rows["estimator"] == PAPER) & (rows["mc_samples"] == largest)]
    # States without the paper's estimator (TPE states) have nothing to compare with.
    merged = rows.merge(paper[[*STATE, "mse"]].rename(columns={"mse": "paper_mse"}), on=STATE)
    merged["ratio"] = merged["mse"] / merged["paper_mse"]
    # States whose values are all 0 (see above) or whose reference is not converged: the MSEs
    # are against it.
    unconverged = np.asarray(merged.get("unconverged", False), dtype=bool)
    merged = merged[np.isfinite(merged["ratio"]) & ~unconverged]
    table = (
        merged.groupby(["q", "estimator", "mc_samples"])["ratio"]
        .agg(worst="max", median="median", states="size")
        .reset_index()
    )
    return table.rename(columns={"mc_samples": "S"}), largest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument(
        "--log",
        action="store_true",
        help="table 1 on the log scale: variance ratio of the outer-log values (what the "
        "maximizer sees) instead of the EI-scale MSE ratio",
    )
    parser.add_argument(
        "--variance",
        action="store_true",
        help="table 1 as the variance ratio Var(mc) / Var(estimator) of the EI-scale values "
        "(the probe's var_ratio; docs/reproduction.md's metric) instead of the MSE ratio",
    )
    args = parser.parse_args(argv)
    rows = load_probe([args.dir])
    if rows.empty:
        sys.exit(f"probe_ratio_tables: {args.dir} holds no probe results")
    print(stored_machine_line(args.dir))
    rows["q"] = rows["q"].fillna(1).astype(int)
    unconverged = unconverged_reference(rows)
    if args.log:
        table, metric = against_mc(with_log_variance_ratio(rows)), "log-scale variance ratio"
    elif args.variance:
        table, metric = against_mc(rows.assign(mse_ratio=rows["var_ratio"])), "variance ratio"
    else:
        table, metric = against_mc(rows.assign(unconverged=unconverged)), "MSE ratio"
    print(
        f"task | kernel | q | estimator | S | states (undefined, unconverged reference) | {metric} "
        "vs mc: median "
        "[min, max] | below 1 | signed-rank p (Holm over functions)"
    )
    for r in table.itertuples():
        print(
            f"{r.task} | {r.kernel} | {r.q} | {r.estimator} | {r.S} | {r.states} ({r.undefined}, "
            f"{r.unconverged}) "
            f"| {r.median:.2f} [{r.min:.2f}, {r.max:.2f}] | {r.below_1} | {r.p:.3g} "
            f"({r.p_holm:.3g})"
        )
    equal, largest = equal_accuracy(rows.assign(unconverged=unconverged))
    print(f"\nq | estimator | S | states | MSE / MSE of {PAPER} at S={largest}: worst | median")
    for r in equal.itertuples():
        print(f"{r.q} | {r.estimator} | {r.S} | {r.states} | {r.worst:.2f} | {r.median:.2f}")
    print(f"\nsmallest S with worst ratio <= 1 (no worse than {PAPER} at S={largest} on any state)")
    for (q, est), group in equal.groupby(["q", "estimator"]):
        ok = group[group["worst"] <= 1.0]["S"]
        print(f"q={q} {est}: {int(ok.min()) if not ok.empty else 'none of the budgets'}")


if __name__ == "__main__":
    main()
