"""The CSV tables behind docs/reproduction.md, from the stored results of the paper suites.

Reads ``RESULTS/paper-<experiment>-<size>/`` for every suite in ``suites/paper/`` of that size
(``make reproduce`` writes them with ``orthobench run`` / ``orthobench probe``) through the
report's loaders (:func:`orthobench.report.data.load_results`) and writes to ``OUT``:

- ``<experiment>-final.csv`` per BO experiment: the final best-so-far regret (best objective for
  the training tasks) per task and optimizer over seeds: ``mean`` with its 95% Student-t
  interval ``low``-``high``, and ``median`` with the quartiles ``q25``-``q75`` and ``min``-``max``;
  ``no_final`` counts the seeds without a final value, ``outliers`` and ``failed_evals`` the
  cell rows (:func:`orthobench.report.tables.final_table`);
  ``seeds_best`` is the number of seeds on which the optimizer has the task's lowest final value
  (:func:`seeds_best`).
- ``<experiment>-paired.csv``: per task, the final value of an OrthoBO variant minus that of a
  comparison optimizer, seed by seed (every optimizer of a seed starts from the same initial
  design, so the pairs share it): mean difference with its 95% Student-t interval over seeds,
  the number of seeds where OrthoBO is lower, and the two-sided Wilcoxon signed-rank test of
  the differences: ``p_min`` (the smallest p-value it can give with these pairs, ``2 / 2^n``),
  ``p_value`` (NaN where ``p_min >= 0.05``: too few seeds for a test) and ``p_holm`` (Holm over
  the comparisons of the experiment and task) (:data:`PAIRS`,
  :func:`orthobench.report.stats.signed_rank_test`).
- ``<experiment>-runtime.csv``: seconds per BO step, mean and sd over steps and seeds of fit,
  acquisition (``acq``) and ``fit_acq`` = fit + acquisition (the optimizer's own time; the
  evaluation is left out) (:func:`orthobench.report.tables.runtime_table`).
- ``runtime-paper-layout.csv``: ``fit_acq`` mean per optimizer (rows) and task (columns), laid out
  like the paper's runtime tables, from the ``regret`` and ``tpe`` experiments.
- ``<experiment>-weights.csv`` where a suite has an ensemble: the member weights at its last step, mean and min-max over
  seeds, and the weights' entropy (:func:`orthobench.report.diagnostics.ensemble_steps`).
- ``probe-ratios.csv``: per (task, kernel, S, estimator) the variance and MSE ratios against naive
  iid theta-MC at the same S (MC-TPE for the TPE rows) over BO states: ``median`` with its
  order-statistic interval ``median_low``-``median_high`` and that interval's exact coverage
  ``median_level``, ``min``, ``max``, and the geometric mean with its Student-t interval of the log
  ratios over states (:func:`orthobench.probe.tables.summary_table`); every statistic is over the
  states with a defined ratio, ``undefined`` counts the others (a variance of ~0: the ratio
  measures round-off); ``var_mc`` and ``var_est`` are the mean probe variances behind the ratio
  (the paper's Tables 7-9 print these).
- ``probe-ranking.csv``: probe variance, top-1 agreement and flip rate, mean and sd over states.
- ``probe-vs-paper.csv``: the paper's Var(MC) / Var(ortho) of Tables 7, 8 and 9 (``paper_ratio``,
  from the printed variances) beside ours for the paper's estimator (``orth`` for the GP,
  ``orthobo-tpe`` for TPE) and the project default ``qmc-owen+rb``, with signed-rank tests over
  states of "no change" (``p_vs_1``) and "the paper's ratio" (``p_vs_paper``), Holm-adjusted
  over the four functions of each (kernel, S, estimator) (:func:`state_tests`).
- ``runtime-vs-paper.csv``: the paper's per-step seconds (appendix "Computational Complexity")
  beside ours (fit + acquisition) for qLogEI, OrthoBO and the two bootstrap TPEs.

Usage::

    python benchmarks/paper_tables.py [RESULTS] [-o OUT] [--size reduced|medium|full]

Defaults: ``results/paper``, ``docs/reproduction``, ``reduced``. A suite without stored results
is skipped with a line on stderr; the probe tables are read from the ``probe`` experiment alone
(another experiment's probe rows are ignored with a line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from _timing import stored_machine_line

from orthobench.probe.intervals import defined_ratios
from orthobench.probe.tables import summary_table
from orthobench.report import stats
from orthobench.report.data import ResultSet, load_results
from orthobench.report.diagnostics import ensemble_steps
from orthobench.report.tables import KEY, final_table, final_values, runtime_table

SUITES_DIR = Path(__file__).resolve().parent.parent / "suites" / "paper"
#: The experiment whose probe rows make the probe tables.
PROBE_EXPERIMENT = "probe"
#: Experiments whose per-step runtimes make the paper-layout runtime table.
RUNTIME_EXPERIMENTS = ("regret", "tpe")
#: (OrthoBO variant, comparison) label pairs per experiment; pairs whose labels a suite lacks are
#: skipped (the full suites have more optimizers than the reduced ones).
PAIRS = {
    "regret": [("orthobo-paper", b) for b in ("orthobo", "mc-ei", "qlogei", "ucb", "turbo", "rpr", "sobol")],
    "weak-fit": [("orthobo-paper", b) for b in ("orthobo", "mc-ei", "qlogei", "ucb", "turbo", "rpr", "sobol")],
    "mc-budget": [(f"orthobo-paper-s{s}", f"{b}-s{s}") for s in (64, 128, 256, 512) for b in ("mc-ei", "qlogei")],
    "misspecified": [(f"orthobo-paper-{k}", b) for k in ("rbf", "linear") for b in (f"mc-ei-{k}", f"qlogei-{k}", f"ucb-{k}", f"turbo-{k}", "sobol")],
    "ensemble": [("orthobo-ensemble", f"orthobo-{m}") for m in ("linear", "rbf", "matern")],
    "tpe": [("orthobo-tpe", "mc-tpe"), ("orthobo-tpe-paper", "mc-tpe"), ("orthobo-tpe", "tpe-optuna")],
    "cnn": [("orthobo-paper", b) for b in ("orthobo", "mc-ei", "qlogei", "ucb", "turbo", "rpr", "sobol")],
    "wm811k-vit": [("orthobo-paper", b) for b in ("orthobo", "mc-ei", "qlogei", "sobol")],
}  # fmt: skip
#: The paper's Tables 7 (Matérn-5/2 ARD) and 8 (isotropic RBF): (Var(MC), Var(ortho)) per S, task.
PAPER_VARIANCES = {
    ("matern52-ard", 8): {"hartmann6": (2e-08, 1.61e-07), "ackley8": (9.68e-09, 5.24e-09),
                          "michalewicz10": (9.51e-08, 4.54e-08), "levy16": (0.00106, 0.000709)},
    ("matern52-ard", 32): {"hartmann6": (2.59e-09, 3.02e-10), "ackley8": (6.3e-09, 4.17e-10),
                           "michalewicz10": (1.67e-08, 1.07e-09), "levy16": (0.000208, 2.27e-05)},
    ("rbf-iso", 8): {"hartmann6": (5.91e-08, 1.91e-07), "ackley8": (1.28e-08, 7.19e-09),
                     "michalewicz10": (1.15e-07, 4.56e-08), "levy16": (0.00129, 0.000758)},
    ("rbf-iso", 32): {"hartmann6": (8.62e-09, 7.3e-10), "ackley8": (3.71e-09, 4e-10),
                      "michalewicz10": (2.61e-08, 1.76e-09), "levy16": (0.000301, 2.85e-05)},
    ("tpe", 32): {"hartmann6": (11.222, 1.214), "ackley8": (13.182, 1.284),
                  "michalewicz10": (21.712, 2.197), "levy16": (20.944, 1.399)},
}  # fmt: skip
#: The paper's per-step seconds (its runtime tables), by our optimizer label and task.
PAPER_SECONDS = {
    "qlogei": {"hartmann6": 0.696, "ackley8": 0.156, "michalewicz10": 0.325, "levy16": 0.582},
    "orthobo-paper": {"hartmann6": 1.607, "ackley8": 0.492, "michalewicz10": 2.362,
                      "levy16": 2.563},
    "mc-tpe": {"hartmann6": 0.224, "ackley8": 0.347, "michalewicz10": 0.356, "levy16": 0.754},
    "orthobo-tpe": {"hartmann6": 0.390, "ackley8": 0.736, "michalewicz10": 2.533, "levy16": 0.360},
}  # fmt: skip
#: Significant digits of the written floats (the CSVs are read by people and diffs).
DIGITS = 4


def experiments(size: str) -> list[str]:
    """The experiments with a suite of ``size`` in ``suites/paper/``, in file order."""
    return sorted(p.stem.removesuffix(f"-{size}") for p in SUITES_DIR.glob(f"*-{size}.yaml"))


def stored_results(root: Path, size: str) -> dict[str, ResultSet]:
    """The results of each experiment of ``size`` under ``root`` that the tables read: its BO
    steps and, of :data:`PROBE_EXPERIMENT` alone, its probe rows (another experiment's would
    overwrite the probe tables). An experiment without them is skipped with a line on stderr."""
    stored = {}
    for experiment in experiments(size):
        directory = root / f"paper-{experiment}-{size}"
        results = load_results([directory])  # no rows from a missing folder
        if experiment != PROBE_EXPERIMENT and not results.probe.empty:
            print(
                f"ignored the probe rows of {directory} (the probe tables are read from "
                f"paper-{PROBE_EXPERIMENT}-{size} only)",
                file=sys.stderr,
            )
            results = dataclasses.replace(results, probe=results.probe.iloc[:0])
        if results.probe.empty and not (results.runs["phase"] == "bo").any():
            print(f"skipped {experiment}: no results in {directory}", file=sys.stderr)
            continue
        stored[experiment] = results
    return stored


def seeds_best(finals: pd.DataFrame) -> pd.DataFrame:
    """Per key: on how many seeds the optimizer has the lowest final value of its task.

    ``finals`` is :func:`final_values`. On each (run set, task, seed), the lowest finite final
    value over the optimizers that have one; every optimizer that attains it counts the seed
    (ties count for each). Columns: the :data:`KEY`, ``seeds_best`` (0 for none).
    """
    lowest = finals.groupby(["run_set", "task", "seed"])["final"].transform("min")
    best = finals.assign(seeds_best=(finals["final"] == lowest).astype(int))
    return best.groupby(KEY, sort=True)["seeds_best"].sum().reset_index()


def final_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`final_table`'s mean and t interval over seeds plus the median, quartiles, range and
    :func:`seeds_best`."""
    table = final_table(runs, reference=None).drop(
        columns=["rank", "best", "pairs", "p_min", "testable", "p_value", "p_holm", "significant"]
    )
    finals = final_values(runs)
    quantiles = (
        finals.groupby(KEY, sort=True)["final"]
        .quantile([0.0, 0.25, 0.75, 1.0])
        .unstack()
        .set_axis(["min", "q25", "q75", "max"], axis=1)
        .reset_index()
    )
    table = table.merge(quantiles, on=KEY, how="left").merge(seeds_best(finals), on=KEY)
    return table.rename(columns={"run_set": "suite"})


def paired_differences(runs: pd.DataFrame, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """Final value of ``a`` minus that of ``b`` per seed, summarized and tested, for each pair.

    Columns: ``suite``, ``task``, ``optimizer`` (``a``), ``versus`` (``b``), ``metric``, ``seeds``
    (seeds with a finite final value for both), ``mean_difference`` with its 95% t interval
    ``low``-``high``, ``orthobo_lower`` (seeds where ``a`` is lower), ``p_min``, ``p_value``
    (:func:`orthobench.report.stats.signed_rank_test` of the differences) and ``p_holm`` (Holm
    over the experiment's comparisons on the task: the rows of one suite and task).
    """
    finals = final_values(runs)
    rows = []
    for (run_set, task), frame in finals.groupby(["run_set", "task"], sort=True):
        by_seed = frame.pivot_table(index="seed", columns="optimizer", values="final")
        for a, b in pairs:
            if a not in by_seed or b not in by_seed:
                continue
            diff = (by_seed[a] - by_seed[b]).dropna().to_numpy(dtype=float)
            low, high = stats.t_interval(diff)
            test = stats.signed_rank_test(diff)
            rows.append(
                {
                    "suite": run_set,
                    "task": task,
                    "optimizer": a,
                    "versus": b,
                    "metric": frame["metric"].iloc[0],
                    "seeds": diff.size,
                    "mean_difference": diff.mean() if diff.size else np.nan,
                    "low": low,
                    "high": high,
                    "orthobo_lower": int((diff < 0).sum()),
                    "p_min": test.p_min,
                    "p_value": test.p_value,
                }
            )
    table = pd.DataFrame(rows)
    if not table.empty:
        table["p_holm"] = table.groupby(["suite", "task"])["p_value"].transform(
            lambda p: stats.holm(p.to_numpy())
        )
    return table


def runtime_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`runtime_table` with ``fit_acq`` (fit + acquisition seconds per step) added."""
    bo = runs[runs["phase"] == "bo"]
    fit_acq = (
        (bo["fit_seconds"] + bo["acq_seconds"]).groupby([bo[k] for k in KEY]).agg(["mean", "std"])
    )
    fit_acq.columns = ["fit_acq_mean", "fit_acq_sd"]
    table = runtime_table(runs).merge(fit_acq.reset_index(), on=KEY, how="left")
    columns = [*KEY, "steps", "fit_mean", "fit_sd", "acq_mean", "acq_sd"]
    return table[[*columns, "fit_acq_mean", "fit_acq_sd"]].rename(columns={"run_set": "suite"})


def paper_layout(runtimes: list[pd.DataFrame]) -> pd.DataFrame:
    """Mean fit + acquisition seconds per step, optimizers as rows and tasks as columns."""
    frame = pd.concat(runtimes, ignore_index=True)
    return frame.pivot_table(
        index=["suite", "optimizer"], columns="task", values="fit_acq_mean", sort=False
    ).reset_index()


def ensemble_weights(runs: pd.DataFrame) -> pd.DataFrame:
    """Member weights and entropy at each ensemble cell's last step, summarized over seeds."""
    steps = ensemble_steps(runs)
    steps = steps[steps.groupby([*KEY, "seed", "evaluation"])["kernel"].transform("size") > 1]
    last_step = steps.groupby([*KEY, "seed"])["evaluation"].transform("max")
    members = steps[steps["evaluation"] == last_step]
    return (
        members.groupby([*KEY, "kernel"], sort=False)
        .agg(
            seeds=("seed", "nunique"),
            weight_mean=("weight", "mean"),
            weight_min=("weight", "min"),
            weight_max=("weight", "max"),
            entropy_mean=("entropy", "mean"),
            max_entropy=("max_entropy", "first"),
        )
        .reset_index()
        .rename(columns={"run_set": "suite"})
    )


def probe_ratios(probe: pd.DataFrame) -> pd.DataFrame:
    """Variance and MSE ratios over states: median with its interval, range, geometric mean with
    its interval, all over the states whose ratio is defined (:func:`defined_ratios`)."""
    group = ["suite", "task", "kernel", "mc_samples", "estimator"]
    ratios = ("var_ratio", "mse_ratio")
    frame = probe.assign(
        suite=probe["run_set"], var_mc=probe["probe_variance"] * probe["var_ratio"]
    )
    defined = frame.assign(**{m: defined_ratios(frame[m]) for m in ratios})
    spread = defined.groupby(group, sort=False).agg(
        var_ratio_min=("var_ratio", "min"),
        var_ratio_max=("var_ratio", "max"),
        mse_ratio_min=("mse_ratio", "min"),
        mse_ratio_max=("mse_ratio", "max"),
        var_mc=("var_mc", "mean"),
        var_est=("probe_variance", "mean"),
    )
    gmeans = summary_table(frame, columns=list(ratios)).rename(
        columns={"var_ratio": "var_ratio_gmean", "mse_ratio": "mse_ratio_gmean"}
    )
    keep = [*group, "states", "n_evaluations", "baseline", "ci_over"]
    keep += [
        f"{m}_{s}"
        for m in ratios
        for s in ("median", "median_low", "median_high", "median_level", "undefined", "gmean",
                  "low", "high")
    ]  # fmt: skip
    return spread.reset_index().merge(gmeans[keep], on=group, how="left")


def probe_ranking(probe: pd.DataFrame) -> pd.DataFrame:
    """Probe variance, top-1 agreement and flip rate: mean and sd over states."""
    metrics = ["probe_variance", "top1_agreement", "flip_rate"]
    table = probe.groupby(["run_set", "task", "kernel", "mc_samples", "estimator"], sort=False)[
        metrics
    ].agg(["mean", "std"])
    table.columns = [f"{m}_{s.replace('std', 'sd')}" for m, s in table.columns]
    return table.reset_index().rename(columns={"run_set": "suite"})


def probe_vs_paper(ratios: pd.DataFrame, probe: pd.DataFrame) -> pd.DataFrame:
    """The paper's variance ratios beside ours (median, range and geometric mean over states),
    with two signed-rank tests over the states of each row (:func:`state_tests`)."""
    estimators = {"orth", "qmc-owen+rb", "orthobo-tpe"}
    rows = ratios[ratios["estimator"].isin(estimators)].copy()
    paper = [
        PAPER_VARIANCES.get((k, s), {}).get(t, (np.nan, np.nan))
        for k, s, t in zip(rows["kernel"], rows["mc_samples"], rows["task"], strict=True)
    ]
    rows["paper_var_mc"] = [mc for mc, _ in paper]
    rows["paper_var_ortho"] = [ortho for _, ortho in paper]
    rows["paper_ratio"] = rows["paper_var_mc"] / rows["paper_var_ortho"]
    rows = state_tests(rows, probe)
    columns = ["suite", "kernel", "mc_samples", "task", "estimator", "states", "paper_var_mc"]
    columns += ["paper_var_ortho", "paper_ratio", "var_mc", "var_est", "var_ratio_median"]
    columns += ["var_ratio_min", "var_ratio_max", "var_ratio_gmean", "var_ratio_low"]
    columns += ["var_ratio_high", "p_min", "p_vs_1", "p_vs_1_holm", "p_vs_paper"]
    columns += ["p_vs_paper_holm"]
    return rows[columns].sort_values(["kernel", "mc_samples", "task", "estimator"])


def state_tests(rows: pd.DataFrame, probe: pd.DataFrame) -> pd.DataFrame:
    """Two-sided Wilcoxon signed-rank tests over the states of each (suite, task, kernel, S,
    estimator) row, on the log variance ratios of its defined states: ``p_vs_1`` (the ratio is
    1: no change against the baseline; each state's ratio is itself a paired comparison, the
    estimator and its baseline on the same state) and ``p_vs_paper`` (the ratio is the paper's
    ``paper_ratio``; NaN where the paper has none). ``p_min`` is the smallest p-value the states
    allow (NaN p-values: too few states for a test); ``*_holm`` adjusts each family over the four
    functions of one (suite, kernel, S, estimator), one paper table's claim
    (:func:`orthobench.report.stats.holm`). States of one seed at several iterations
    share that seed's early history, so they are not independent draws: the tests count them as
    such and read as descriptive where a seed's states agree.
    """
    key = ["suite", "task", "kernel", "mc_samples", "estimator"]
    logs = (
        probe.assign(suite=probe["run_set"], log_ratio=np.log(defined_ratios(probe["var_ratio"])))
        .groupby(key, sort=False)["log_ratio"]
        .apply(lambda v: v.to_numpy())
    )
    tests = []
    for row in rows.itertuples():
        values = logs.get(tuple(getattr(row, k) for k in key), np.array([]))
        one = stats.signed_rank_test(values)
        paper = (
            stats.signed_rank_test(values - np.log(row.paper_ratio))
            if np.isfinite(row.paper_ratio)
            else None
        )
        tests.append(
            {
                "p_min": one.p_min,
                "p_vs_1": one.p_value,
                "p_vs_paper": paper.p_value if paper else np.nan,
            }  # fmt: skip
        )
    rows = pd.concat([rows.reset_index(drop=True), pd.DataFrame(tests)], axis=1)
    family = ["suite", "kernel", "mc_samples", "estimator"]
    for column in ("p_vs_1", "p_vs_paper"):
        rows[f"{column}_holm"] = rows.groupby(family)[column].transform(
            lambda p: stats.holm(p.to_numpy())
        )
    return rows


def runtime_vs_paper(runtimes: list[pd.DataFrame]) -> pd.DataFrame:
    """The paper's per-step seconds beside ours, with each one's ratio to its qLogEI or MC-TPE."""
    frame = pd.concat(runtimes, ignore_index=True)
    frame = frame[frame["optimizer"].isin(PAPER_SECONDS)].copy()
    frame["paper_seconds"] = [
        PAPER_SECONDS[o][t] for o, t in zip(frame["optimizer"], frame["task"], strict=True)
    ]
    base = {"qlogei": "qlogei", "orthobo-paper": "qlogei"}
    frame["baseline"] = frame["optimizer"].map(lambda o: base.get(o, "mc-tpe"))
    ours = frame.set_index(["task", "optimizer"])["fit_acq_mean"]
    frame["ratio_to_baseline"] = [
        s / ours.get((t, b), np.nan)
        for s, t, b in zip(frame["fit_acq_mean"], frame["task"], frame["baseline"], strict=True)
    ]
    frame["paper_ratio_to_baseline"] = [
        s / PAPER_SECONDS[b][t]
        for s, t, b in zip(frame["paper_seconds"], frame["task"], frame["baseline"], strict=True)
    ]
    columns = ["suite", "task", "optimizer", "steps", "fit_mean", "acq_mean", "fit_acq_mean"]
    columns += ["paper_seconds", "baseline", "ratio_to_baseline", "paper_ratio_to_baseline"]
    return frame[columns]


def write(table: pd.DataFrame, path: Path) -> None:
    """Write ``table`` with floats rounded to :data:`DIGITS` significant digits."""
    floats = table.select_dtypes("float").columns
    rounded = table.copy()
    rounded[floats] = table[floats].map(lambda v: float(f"{v:.{DIGITS}g}") if np.isfinite(v) else v)
    rounded.to_csv(path, index=False)
    print(f"wrote {path} ({len(table)} rows)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default="results/paper", type=Path)
    parser.add_argument("-o", "--output", default="docs/reproduction", type=Path)
    parser.add_argument("--size", choices=["reduced", "medium", "full"], default="reduced")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        sys.exit(f"paper_tables: {args.results} is not a folder")
    stored = stored_results(args.results, args.size)
    if not stored:
        sys.exit(f"paper_tables: {args.results} holds no results of the {args.size} paper suites")
    print(stored_machine_line(args.results))  # the values depend on the CPU too
    args.output.mkdir(parents=True, exist_ok=True)
    runtimes = []
    for experiment, results in stored.items():
        if not results.probe.empty:
            ratios = probe_ratios(results.probe)
            write(ratios, args.output / "probe-ratios.csv")
            write(probe_vs_paper(ratios, results.probe), args.output / "probe-vs-paper.csv")
            write(probe_ranking(results.probe), args.output / "probe-ranking.csv")
        runs = results.runs
        if (runs["phase"] == "bo").sum() == 0:
            continue
        write(final_summary(runs), args.output / f"{experiment}-final.csv")
        paired = paired_differences(runs, PAIRS.get(experiment, []))
        if not paired.empty:
            write(paired, args.output / f"{experiment}-paired.csv")
        runtime = runtime_summary(runs)
        write(runtime, args.output / f"{experiment}-runtime.csv")
        if experiment in RUNTIME_EXPERIMENTS:
            runtimes.append(runtime)
        weights = ensemble_weights(runs)
        if not weights.empty:
            write(weights, args.output / f"{experiment}-weights.csv")
    if runtimes:
        write(paper_layout(runtimes), args.output / "runtime-paper-layout.csv")
        write(runtime_vs_paper(runtimes), args.output / "runtime-vs-paper.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
