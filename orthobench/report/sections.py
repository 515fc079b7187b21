"""The sections of a report, each built only when its data is present.

A :class:`Section` is a title, an introduction and blocks (:class:`Figure`, :class:`Table`,
notes) in order; :mod:`orthobench.report.html` renders them and writes every :class:`Table` as a
CSV file beside the HTML. Text is plain (the template escapes it); figures are SVG markup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from orthobench.formatting import ci
from orthobench.probe.tables import ranking_table, summary_table
from orthobench.report import aggregate, compare, diagnostics, figures, tables
from orthobench.report.batch_sections import step_curves_section, step_time_section
from orthobench.report.blocks import Figure, Section, Table, series
from orthobench.report.data import ResultSet, is_asynchronous
from orthobench.report.feasibility_sections import feasibility_section
from orthobench.report.stats import sig


def _percent(value: float) -> str:
    return f"{value:.1f}" if np.isfinite(value) else "-"


def _join(values: Sequence, empty: str = "-") -> str:
    distinct = [str(v) for v in dict.fromkeys(v for v in values if pd.notna(v) and v != "")]
    return ", ".join(distinct) or empty


def _range(values: pd.Series) -> str:
    values = values.dropna()
    if values.empty:
        return "-"
    low, high = int(values.min()), int(values.max())
    return str(low) if low == high else f"{low}-{high}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 600 else f"{seconds / 60:.1f} min"


# ---------------------------------------------------------------------------------------------
# Summary and failures


def summary_section(results: ResultSet) -> Section:
    files = results.files
    rows, records = [], []
    for (kind, run_set), group in files.groupby(["kind", "run_set"], sort=True):
        runs = results.runs[results.runs["run_set"] == run_set] if kind == "runs" else None
        written = pd.to_datetime(group["written_at"], errors="coerce", utc=True).dropna()
        span = (written.max() - written.min()).total_seconds() if len(written) else float("nan")
        record = {
            "kind": kind,
            "run_set": run_set,
            "sources": _join(group["source"]),
            "tasks": _join(sorted(group["task"].dropna())),
            "optimizers": _join(group.sort_values("order", kind="stable")["optimizer"]),
            "seeds": _join(sorted(runs["seed"].unique())) if runs is not None else "-",
            "n_init": _range(group["n_init"]),
            "budget": _range(group["budget"]),
            "files": len(group),
            "evaluations": len(runs) if runs is not None else 0,
            "devices": _join(group["device"]),
            "threads": _join(group["threads"], "not recorded"),
            "python": _join(group["python"]),
            "versions": _join(group["versions"]),
            "compute_seconds": float(group["seconds"].astype(float).sum()),
            "written_span_seconds": span,
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
                record["versions"] + f", python {record['python']}",
                f"{_seconds(record['compute_seconds'])} "
                f"(written over {_seconds(span) if np.isfinite(span) else '-'})",
            ]
        )
    overview = Table(
        "summary",
        [
            "kind",
            "run set",
            "from",
            "tasks",
            "optimizers",
            "seeds",
            "n_init",
            "budget",
            "stored",
            "devices",
            "threads",
            "versions",
            "wall time",
        ],  # fmt: skip
        rows,
        pd.DataFrame(records),
    )
    shas = (
        files.assign(git_sha=files["git_sha"].fillna("(none)"))
        .groupby(["run_set", "kind", "optimizer"], dropna=False, sort=True)["git_sha"]
        .agg(lambda s: ", ".join(f"{sha[:10]} ({n})" for sha, n in s.value_counts().items()))
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
    return Section(
        "summary",
        "Summary",
        "What was run, where and with which code. Wall time: the sum of the cells' (or probe "
        "states') own seconds, and the span between the first and last file written.",
        [overview, sha_table],
    )


def failures_section(results: ResultSet) -> Section | None:
    failures = results.failures
    if failures.empty:
        return None
    table = Table(
        "failed-cells",
        ["from", "cell", "error (first line)"],
        [[r.source, r.cell_id, r.error] for r in failures.itertuples()],
        failures,
    )
    return Section(
        "failed",
        "Failed cells",
        f"{len(failures)} cell(s) whose last attempt failed; they are not in the tables below. "
        "Full tracebacks are in runs.jsonl of their directory; a rerun retries them.",
        [table],
    )


# ---------------------------------------------------------------------------------------------
# Per task


def _budget_notes(results: ResultSet) -> list[str]:
    """A note per task stored with different (n_init, budget) in different run sets."""
    cells = results.files[results.files["kind"] == "runs"]
    notes = []
    for task, group in cells.groupby("task", sort=True):
        budgets = group.groupby("run_set")[["n_init", "budget"]].agg(_range)
        if len(budgets) > 1 and len(budgets.drop_duplicates()) > 1:
            described = "; ".join(
                f"{run_set}: n_init {b.n_init}, budget {b.budget}"
                for run_set, b in budgets.iterrows()
            )
            notes.append(
                f"{task} was run with different budgets ({described}): its run sets are shown "
                "side by side, and their final values are not comparable."
            )
    return notes


def curves_section(results: ResultSet, colors: figures.Palette) -> Section | None:
    runs = results.runs
    if runs.empty:
        return None
    trace = tables.traces(runs)
    trace = trace.assign(series=series(trace))
    blocks: list[Figure | Table | str] = list(_budget_notes(results))
    for task, data in trace.groupby("task", sort=True):
        if not np.isfinite(data["value"].to_numpy(dtype=float)).any():
            blocks.append(f"{task}: no evaluation returned a finite value; nothing to plot.")
            continue
        metric = "regret" if data["metric"].iloc[0] == "regret" else "objective (no known optimum)"
        blocks.append(
            Figure(
                figures.task_curves_svg(data, colors, task),
                f"{task}: best-so-far {metric}, mean over seeds with its 95% t interval.",
            )
        )
    curve = tables.curves(trace)
    blocks.append(
        Table(
            "curves",
            [],
            [],
            curve,
            caption="Curve values per evaluation (CSV only).",
        )
    )
    return Section(
        "curves",
        "Best-so-far curves",
        "Each task: the best-so-far regret (the objective where no optimum is known) against "
        "evaluations (left, the dashed line ends the shared initial design) and against "
        "cumulative seconds of fitting, acquisition and evaluation (right; with q points per "
        "BO step evaluated at once, the wall time is in the section on BO steps).",
        blocks,
        ("best-so-far regret", "best-so-far objective", "mean [95% CI]", "outlier evaluation",
         "cumulative seconds"),
    )  # fmt: skip


def _evaluation_notes(final: pd.DataFrame, multi: bool) -> list[str]:
    """A note per task whose methods made different numbers of evaluations (``q`` points per BO
    step, or budgets): their final values are not at equal evaluations."""
    notes = []
    for (run_set, task), group in final.groupby(["run_set", "task"], sort=True):
        if group["evaluations"].nunique() > 1:
            counts = ", ".join(f"{r.optimizer}: {r.evaluations}" for r in group.itertuples())
            notes.append(
                f"{f'{run_set}: ' if multi else ''}{task}: the final values are after different "
                f"numbers of evaluations ({counts}), at the end of each "
                "method's budget of BO steps, not at equal evaluations; the best-so-far curves "
                "compare them at equal evaluations."
            )
    return notes


def final_section(results: ResultSet, reference: str | None) -> Section | None:
    runs = results.runs
    if runs.empty:
        return None
    final = tables.final_table(runs, reference)
    multi = final["run_set"].nunique() > 1
    rows, bold = [], set()
    for i, r in enumerate(final.itertuples()):
        if r.optimizer == reference:
            test = "reference"
        elif r.pairs == 0:
            test = "-"  # no seed shared with the reference
        elif not r.testable:
            test = f"too few seeds for a test ({r.pairs} pairs, min p {sig(r.p_min)})"
        else:
            test = f"{sig(r.p_holm)}{' *' if r.significant else ''} ({r.pairs} pairs)"
        rows.append(
            ([r.run_set] if multi else [])
            + [
                r.task,
                r.optimizer,
                r.metric,
                str(r.seeds),
                ci(r.mean, r.low, r.high, sig),
                sig(r.median),
                "-" if not np.isfinite(r.rank) else f"{r.rank:g}",
                test,
                str(r.evaluations),
                str(r.failed_evals),
                str(r.outliers),
                str(r.fallbacks),
            ]
        )
        if r.best:
            bold.add((i, 4 + multi))
    header = (["run set"] if multi else []) + [
        "task", "optimizer", "metric", "seeds", "final mean [95% CI]", "median", "rank",
        f"vs {reference} (Holm p)", "evaluations", "failed evals", "outliers", "fallbacks",
    ]  # fmt: skip
    return Section(
        "final",
        "Final values",
        f"Final best-so-far value per task and optimizer, over the seeds that have one (seeds: "
        "their number). Bold: rank 1, the lowest mean among the optimizers with the smallest "
        "share of seeds without a final value (never feasible, or every evaluation failed). "
        f"The test compares each optimizer's final value with that of {reference} seed by seed "
        "(both start from the seed's initial design): Wilcoxon signed-rank, two-sided, "
        "Holm-corrected over the task's optimizers, on the seeds both have (the pairs); * marks "
        "p < 0.05. With n paired seeds no "
        "p-value can be below 2 / 2^n (0.25 for 3 seeds, 0.0625 for 5), so fewer than 6 are "
        "too few seeds for a test.",
        [
            *_budget_notes(results),
            *_evaluation_notes(final, multi),
            Table("final-values", header, rows, final, frozenset(bold)),
        ],
        ("final value", "mean [95% CI]", "rank", "Wilcoxon signed-rank, Holm", "failed evals",
         "outlier evaluation", "fallbacks"),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Across tasks and runtime


def sobol_baselines(results: ResultSet) -> dict[str, str]:
    """``run_set -> method label`` of the Sobol run the normalized score divides by: of the
    run set's Sobol methods (a ``q`` sweep has several), the one with the fewest points per BO
    step, synchronous before asynchronous (``sobol`` itself where it was run at q = 1)."""
    files = results.files
    names = files[(files["kind"] == "runs") & (files["optimizer_name"] == "sobol")]
    names = names.dropna(subset=["optimizer"])
    cells = results.runs.drop_duplicates(["run_set", "optimizer"]).set_index(
        ["run_set", "optimizer"]
    )
    baselines = {}
    for run_set, group in names.groupby("run_set", sort=True):
        labels = [
            label for label in dict.fromkeys(group["optimizer"]) if (run_set, label) in cells.index
        ]
        if labels:
            baselines[run_set] = min(
                labels,
                key=lambda label: (
                    int(cells.loc[(run_set, label), "q"]),
                    is_asynchronous(str(cells.loc[(run_set, label), "cell_id"])),
                ),
            )
    return baselines


def across_section(results: ResultSet, colors: figures.Palette) -> Section | None:
    runs = results.runs
    if runs.empty or runs.groupby("run_set")["task"].nunique().max() < 2:
        return None
    finals = tables.final_values(runs)
    # The scores and the ECDF may leave out a run set (no scored task, no target): their labels
    # stay the palette's, prefixed where the report has several run sets.
    prefixed = runs["run_set"].nunique() > 1
    sobol = sobol_baselines(results)
    blocks: list[Figure | Table | str] = []
    scores = aggregate.normalized_scores(finals, sobol)
    if not scores.empty:
        scores = scores.assign(series=series(scores, prefixed))
        blocks.append(
            Figure(
                figures.score_heatmap_svg(scores),
                "Normalized score (%), median over seeds: 100 is the optimum, 0 is Sobol's final "
                "regret on the same seed.",
            )
        )
        blocks.append(
            Table(
                "normalized-scores",
                ["run set", "task", "optimizer", "seeds", "median score % [95% CI]"],
                [
                    [
                        r.run_set,
                        r.task,
                        r.optimizer,
                        str(r.seeds),
                        ci(r.score, r.low, r.high, _percent),
                    ]  # fmt: skip
                    for r in scores.itertuples()
                ],
                scores.drop(columns="series"),
            )
        )
    else:
        blocks.append("No normalized score: it needs a Sobol run and tasks with a known optimum.")
    ranks = aggregate.mean_ranks(tables.final_table(runs, None))
    blocks.append(
        Table(
            "mean-ranks",
            ["run set", "optimizer", "tasks", "mean rank"],
            [
                [r.run_set, r.optimizer, str(r.tasks), f"{r.mean_rank:.2f}"]
                for r in ranks.itertuples()
            ],
            ranks,
        )
    )
    trace = tables.traces(runs)
    curve = aggregate.ecdf(trace)
    if not curve.empty:
        curve = curve.assign(series=series(curve, prefixed))
        blocks.append(
            Figure(
                figures.ecdf_svg(curve, colors),
                f"Runtime distribution (COCO-style ECDF) over {aggregate.N_TARGETS} targets per "
                "task.",
            )
        )
        blocks.append(
            Table("ecdf", [], [], curve.drop(columns="series"), caption="ECDF (CSV only).")
        )
    return Section(
        "across",
        "Across tasks",
        "How the optimizers compare over all tasks of a run set.",
        blocks,
        ("normalized score", "mean rank", "ECDF of evaluations to target"),
    )


def runtime_section(results: ResultSet, colors: figures.Palette) -> Section | None:
    runs = results.runs
    table = tables.runtime_table(runs)
    if table.empty:
        return None
    rows = [
        [r.run_set, r.task, r.optimizer, str(r.steps)]
        + [
            f"{sig(getattr(r, f'{p}_mean'))} ± {sig(getattr(r, f'{p}_sd'))}"
            for p in ("fit", "acq", "eval", "total")
        ]
        for r in table.itertuples()
    ]
    header = ["run set", "task", "optimizer", "BO steps", "fit s", "acquisition s",
              "evaluation s", "total s"]  # fmt: skip
    return Section(
        "runtime",
        "Runtime per BO step",
        "Wall-clock seconds per BO step, mean ± standard deviation over steps and seeds.",
        [
            Figure(figures.runtime_svg(runs.assign(series=series(runs)), colors)),
            Table("runtime", header, rows, table),
        ],
        ("fit / acquisition / evaluation seconds",),
    )


def orthobo_section(results: ResultSet) -> Section | None:
    steps = diagnostics.ensemble_steps(results.runs)
    if steps.empty:
        return None
    table = diagnostics.diagnostics_table(steps)
    blocks: list[Figure | Table | str] = []
    ensembles = steps[
        steps.groupby([*tables.KEY, "seed", "evaluation"])["kernel"].transform("size") > 1
    ]
    if not ensembles.empty:
        blocks.append(
            Figure(
                figures.ensemble_svg(ensembles.assign(series=series(ensembles))),
                "Ensemble weights per kernel and their entropy, mean over seeds with 95% t "
                "interval.",
            )
        )
    rows = [
        [r.run_set, r.task, r.optimizer, str(r.seed), str(r.steps), str(r.kernels),
         str(r.fallback_steps), str(r.indefinite_steps), str(r.floored_steps),
         str(r.jittered_draws), sig(r.min_eigenvalue), sig(r.final_entropy)]
        for r in table.itertuples()
    ]  # fmt: skip
    header = ["run set", "task", "optimizer", "seed", "BO steps", "kernels", "fallback steps",
              "indefinite Hessian", "eigenvalue floored", "jittered draws",
              "min raw eigenvalue", "final entropy"]  # fmt: skip
    blocks.append(Table("orthobo-diagnostics", header, rows, table))
    return Section(
        "orthobo",
        "OrthoBO diagnostics",
        "Per cell of the OrthoBO pipeline (orthobo, mc-ei): the Laplace posterior's fallbacks and "
        "eigenvalue floors, Cholesky jitter, and the ensemble weights.",
        blocks,
        ("eigenvalue floored", "indefinite Hessian", "ensemble entropy", "fallbacks"),
    )


# ---------------------------------------------------------------------------------------------
# Probe


def _probe_rows(summary: pd.DataFrame, multi: bool) -> list[list[str]]:
    return [
        ([r.suite] if multi else [])
        + [
            r.task,
            r.kernel,
            str(r.mc_samples),
            str(r.n_evaluations),
            r.estimator,
            str(r.states),
            r.ci_over,
            sig(r.probe_variance),
            sig(r.probe_variance_log),
            sig(r.bias_share),
            ci(r.var_ratio, r.var_ratio_low, r.var_ratio_high, sig),
            sig(r.var_ratio_worst),
            ci(r.mse_ratio_median, r.mse_ratio_median_low, r.mse_ratio_median_high, sig),
            sig(r.mse_ratio_median_level),
            str(r.mse_ratio_undefined),
            ci(r.mse_ratio_worst, r.mse_ratio_worst_low, r.mse_ratio_worst_high, sig),
            r.mse_ratio_worst_state,
            ci(r.mse_ratio, r.mse_ratio_low, r.mse_ratio_high, sig),
            sig(r.median_point_mse_ratio),
            sig(r.top1_agreement),
            sig(r.flip_rate),
            sig(r.regret),
        ]  # fmt: skip
        for r in summary.itertuples()
    ]


def probe_section(results: ResultSet) -> Section | None:
    probe = results.probe
    if probe.empty:
        return None
    summary = summary_table(probe.assign(suite=probe["run_set"]))
    multi = summary["suite"].nunique() > 1
    blocks: list[Figure | Table | str] = []
    for run_set, table in summary.groupby("suite", sort=True):
        prefix = f"{run_set}: " if multi else ""
        blocks.append(
            Figure(
                figures.probe_ratio_svg(table, "mse_ratio"),
                f"{prefix}MSE ratio vs naive iid theta-MC at equal EI evaluations (> 1: better), "
                "geometric mean over states with its 95% interval, one panel per (task, kernel).",
            )
        )
        if table["mc_samples"].nunique() > 1:
            blocks.append(
                Figure(
                    figures.ratio_vs_s_svg(table, "var_ratio"),
                    f"{prefix}Variance ratio vs naive MC against the budget S.",
                )
            )
    header = (["run set"] if multi else []) + [
        "task", "kernel", "S", "EI evals", "estimator", "states", "CI over", "probe var (EI)",
        "probe var (log)", "bias²/MSE", "var ratio gmean [95% CI]", "worst state",
        "MSE ratio median [CI]", "its level", "undefined states", "worst state [rebuild CI]",
        "which state",
        "MSE ratio gmean [95% CI]", "median point MSE ratio", "top-1 agreement", "flip rate",
        "regret",
    ]  # fmt: skip
    blocks.append(Table("probe-summary", header, _probe_rows(summary, multi), summary))
    ranking = ranking_table(probe.assign(suite=probe["run_set"]))
    blocks.append(
        Table(
            "probe-ranking",
            [
                "run set",
                "S",
                "estimator",
                "EI evals",
                "states",
                "worst state MSE ratio",
                "upper rebuild CI",
                "worst state",
                "median",
                "worst median",
                "worst cell",
                "max excess bias²/MSE",
            ],
            [
                [
                    r.suite,
                    str(r.mc_samples),
                    r.estimator,
                    r.n_evaluations,
                    str(r.states),
                    sig(r.worst_state_mse_ratio),
                    sig(r.worst_state_high),
                    r.worst_state,
                    sig(r.median_mse_ratio),
                    sig(r.worst_median_mse_ratio),
                    r.worst_cell,
                    sig(r.max_excess_bias_share),
                ]
                for r in ranking.itertuples()
            ],
            ranking,
            caption="MSE ratio vs naive MC per budget: the worst state over every (task, kernel), "
            "best first, and the median over states (median over cells); the default estimator "
            "is chosen by the worst state (README).",
        )  # fmt: skip
    )
    return Section(
        "probe",
        "Acquisition-noise probe",
        "Each estimator rebuilt on fixed BO states with the fitted surrogate untouched; ratios "
        "are against naive iid theta-MC at the same number of EI evaluations and are aggregated "
        "over states by geometric mean.",
        blocks,
        ("probe state", "rebuild", "probe variance", "bias²", "EI evals", "variance / MSE ratio",
         "CI over states", "worst state", "median point ratio", "top-1 agreement", "flip rate",
         "regret (probe)"),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Comparison


def comparison_section(results: ResultSet, baseline: str) -> Section | None:
    runs = results.runs
    if runs.empty or runs["source"].nunique() < 2:
        return None
    pairs = compare.compare_pairs(runs, baseline)
    cells = compare.compare_cells(runs, baseline)
    verdicts = Table(
        "comparison",
        ["compared", "suite", "task", "optimizer", "seeds (base, new)", "median base",
         "median new", "paired seeds", "Holm p", "verdict"],
        [
            [r.source, r.suite, r.task, r.optimizer, f"{r.seeds_base}, {r.seeds_new}",
             sig(r.median_base), sig(r.median_new), str(r.pairs),
             sig(r.p_holm) if r.testable else "too few seeds for a test", r.verdict]
            for r in pairs.itertuples()
        ],
        pairs,
    )  # fmt: skip
    by_cell = Table(
        "comparison-cells",
        ["compared", "suite", "task", "optimizer", "seed", "metric", "base final", "new final",
         "new - base", "identical y", "max |dy|"],
        [
            [r.source, r.suite, r.task, r.optimizer, str(r.seed), r.metric, sig(r.base),
             sig(r.new), sig(r.delta), "yes" if r.identical else "no", sig(r.max_abs_dy)]
            for r in cells.itertuples()
        ],
        cells,
    )  # fmt: skip
    return Section(
        "comparison",
        f"Comparison with the baseline {baseline}",
        "Cells matched by suite, task, optimizer and seed. The verdict tests whether the final "
        "values moved, on the seeds present in both (Wilcoxon signed-rank of new - base, "
        "two-sided, Holm-corrected over the task's optimizers; fewer than 6 paired seeds are "
        "too few for a test).",
        [verdicts, by_cell],
        ("final value", "Wilcoxon signed-rank, Holm", "identical y"),
    )


def glossary_section(sections: Sequence[Section]) -> Section:
    used = dict.fromkeys(t for s in sections for t in s.terms)
    return Section("glossary", "Glossary", "", [], tuple(used))


def build_sections(
    results: ResultSet, reference: str | None, baseline: str | None
) -> list[Section]:
    """Every section whose data is present, in reading order, the glossary last."""
    labels = series(results.runs) if not results.runs.empty else pd.Series([], dtype=str)
    colors = figures.palette(sorted(labels.unique()))
    builders: list[Callable[[], Section | None]] = [
        lambda: summary_section(results),
        lambda: failures_section(results),
        lambda: comparison_section(results, baseline) if baseline else None,
        lambda: curves_section(results, colors),
        lambda: step_curves_section(results, colors),
        lambda: final_section(results, reference),
        lambda: feasibility_section(results),
        lambda: across_section(results, colors),
        lambda: runtime_section(results, colors),
        lambda: step_time_section(results),
        lambda: orthobo_section(results),
        lambda: probe_section(results),
    ]
    sections = [s for s in (build() for build in builders) if s is not None]
    return [*sections, glossary_section(sections)]
