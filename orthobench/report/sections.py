"""The sections of a report, each built only when its data is present.

A :class:`Section` is a title, an introduction and blocks (:class:`Figure`, :class:`Table`,
notes) in order; :mod:`orthobench.report.html` renders them and writes every :class:`Table` as a
CSV file beside the HTML. Text is plain (the template escapes it); figures are SVG markup.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from orthobench.formatting import ci
from orthobench.probe.tables import ranking_table, summary_table
from orthobench.report import aggregate, diagnostics, figures, tables
from orthobench.report.batch_sections import step_curves_section, step_time_section
from orthobench.report.blocks import Figure, Section, Table, mean_interval_text, series
from orthobench.report.comparison_sections import comparison_section
from orthobench.report.data import ResultSet, is_asynchronous
from orthobench.report.feasibility_sections import feasibility_section
from orthobench.report.stats import sig
from orthobench.report.summary_sections import failures_section, summary_section, value_range


def _percent(value: float) -> str:
    # + 0.0 turns a negative zero (-0.04 rounded) into 0.0: "-0.0" reads as worse than Sobol.
    return f"{round(value, 1) + 0.0:.1f}" if np.isfinite(value) else "-"


# ---------------------------------------------------------------------------------------------
# Per task


def _budget_notes(results: ResultSet) -> list[str]:
    """A note per task stored with different (n_init, budget) in different run sets."""
    cells = results.files[results.files["kind"] == "runs"]
    notes = []
    for task, group in cells.groupby("task", sort=True):
        budgets = group.groupby("run_set")[["n_init", "budget"]].agg(value_range)
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


def _nothing_to_plot(task: str, rows: pd.DataFrame) -> str:
    """Why ``task`` has no best-so-far value to plot, from its ``rows``: no evaluation gave a
    value, or (on a constrained task) none of those that did (status ``ok``) was feasible."""
    ok = rows["status"] == "ok"
    if ok.any() and not (ok & rows["feasible"]).any():
        return (
            f"{task}: no evaluation was feasible (each that returned a value broke some "
            "constraint); nothing to plot."
        )
    return f"{task}: no evaluation returned a finite value; nothing to plot."


def curves_section(results: ResultSet, colors: figures.Palette) -> Section | None:
    runs = results.runs
    if runs.empty:
        return None
    trace = tables.traces(runs)
    curve = tables.curves(trace)
    prefixed = trace["run_set"].nunique() > 1
    trace = trace.assign(series=series(trace, prefixed))
    drawn = curve.assign(series=series(curve, prefixed))
    blocks: list[Figure | Table | str] = list(_budget_notes(results))
    for task, data in trace.groupby("task", sort=True):
        if not np.isfinite(data["value"].to_numpy(dtype=float)).any():
            blocks.append(_nothing_to_plot(task, runs[runs["task"] == task]))
            continue
        metric = "regret" if data["metric"].iloc[0] == "regret" else "objective (no known optimum)"
        shown = mean_interval_text(data[np.isfinite(data["value"].to_numpy(dtype=float))])
        blocks.append(
            Figure(
                figures.task_curves_svg(data, drawn[drawn["task"] == task], colors, task),
                f"{task}: best-so-far {metric}, {shown}.",
            )
        )
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
    step, or budgets): their final values are not at equal evaluations. A method whose every
    cell failed stored no evaluation (0) and has no final value to compare."""
    notes = []
    stored = final[final["evaluations"] > 0]
    for (run_set, task), group in stored.groupby(["run_set", "task"], sort=True):
        if group["evaluations"].nunique() > 1:
            counts = ", ".join(f"{r.optimizer}: {r.evaluations}" for r in group.itertuples())
            notes.append(
                f"{f'{run_set}: ' if multi else ''}{task}: the final values are after different "
                f"numbers of evaluations ({counts}), at the end of each "
                "method's budget of BO steps, not at equal evaluations; the best-so-far curves "
                "compare them at equal evaluations."
            )
    return notes


def _differing_pairs(runs: pd.DataFrame, reference: str | None) -> dict[tuple, int]:
    """Per key: the paired seeds whose final value differs from ``reference``'s on the same seed.

    Equal final values carry no sign, so the signed-rank test drops them
    (:func:`orthobench.report.stats.signed_rank_test`): 6 pairs of which 2 tie are 4 for it.
    """
    finals = tables.final_values(runs)
    ref = finals.loc[finals["optimizer"] == reference, ["run_set", "task", "seed", "final"]]
    paired = finals.merge(ref, on=["run_set", "task", "seed"], suffixes=("", "_ref"))
    delta = (paired["final"] - paired["final_ref"]).to_numpy(dtype=float)
    paired = paired.assign(differ=np.isfinite(delta) & (delta != 0.0))
    return paired.groupby(tables.KEY)["differ"].sum().to_dict()


def _pairs(n: int, differ: int) -> str:
    """``"3 pairs"``, with how many differ where some tie: ``"6 pairs, 4 differ"``."""
    text = f"{n} pair{'' if n == 1 else 's'}"
    return text if differ == n else f"{text}, {differ} differ{'s' if differ == 1 else ''}"


def _final_mean(r) -> str:
    """The final mean with its t interval, or saying why it has none."""
    if r.seeds == 1:
        return f"{sig(r.mean)} (one seed: no interval)"
    return ci(r.mean, r.low, r.high, sig)


def final_section(results: ResultSet, reference: str | None) -> Section | None:
    runs = results.runs
    if runs.empty:
        return None
    final = tables.final_table(runs, reference, results.crashed())
    multi = final["run_set"].nunique() > 1
    differing = _differing_pairs(runs, reference)
    with_reference = set(
        final.loc[final["optimizer"] == reference, ["run_set", "task"]].itertuples(
            index=False, name=None
        )
    )
    rows, bold = [], set()
    for i, r in enumerate(final.itertuples()):
        differ = differing.get((r.run_set, r.task, r.optimizer), 0)
        pairs = _pairs(r.pairs, differ)
        if r.optimizer == reference:
            test = "reference"
        elif r.pairs == 0:
            shared = (r.run_set, r.task) in with_reference
            # Pairs are seeds with a final value on both sides: the seeds may be shared, and one
            # side have no value on any of them (never feasible, every evaluation failed).
            test = "- (no seed with a value in both)" if shared else f"- ({reference} not run here)"
        elif not differ:
            # Nothing to test, however many pairs: not "too few seeds".
            test = f"equal final values on the {r.pairs} paired seed{'' if r.pairs == 1 else 's'}"
        elif not r.testable:
            test = f"too few seeds for a test ({pairs}, min p {sig(r.p_min)})"
        else:
            test = f"{sig(r.p_holm)}{' *' if r.significant else ''} ({pairs})"
        rows.append(
            ([r.run_set] if multi else [])
            + [
                r.task,
                r.optimizer,
                r.metric,
                str(r.seeds),
                _final_mean(r),
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
        f"vs {reference} (Holm p)", "evaluations per seed", "failed evals (all seeds)",
        "outliers (all seeds)", "fallbacks (all seeds)",
    ]  # fmt: skip
    return Section(
        "final",
        "Final values",
        f"Final best-so-far value per task and optimizer, over the seeds that have one (seeds: "
        "their number). Bold: rank 1, the lowest mean among the optimizers with the smallest "
        "share of seeds without a final value (never feasible, every evaluation failed, or the "
        "cell failed and stored nothing: see the failed cells). "
        f"The test compares each optimizer's final value with that of {reference} seed by seed "
        "(both start from the seed's initial design): Wilcoxon signed-rank, two-sided, "
        "Holm-corrected over the task's optimizers, on the seeds both have (the pairs); * marks "
        "p < 0.05. Pairs of equal final values carry no sign and are dropped: with n pairs that "
        "differ no p-value can be below 2 / 2^n (0.25 for 3, 0.0625 for 5), so fewer than 6 "
        "that differ are too few seeds for a test. Evaluations are per seed (the most of any "
        "seed); failed evals, outliers and fallbacks are summed over the row's seeds.",
        [
            *_budget_notes(results),
            *_evaluation_notes(final, multi),
            Table("final-values", header, rows, final, frozenset(bold)),
        ],
        ("final value", "mean [95% CI]", "rank", "Wilcoxon signed-rank, Holm",
         "evaluations per seed", "failed evals", "outlier evaluation", "fallbacks"),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Across tasks and runtime


def sobol_baselines(results: ResultSet) -> dict[str, str]:
    """``run_set -> method label`` of the Sobol run the normalized score divides by: of the
    run set's Sobol methods (a ``q`` sweep has several, a suite may label others), the one with
    the fewest points per BO step, synchronous before asynchronous, then the one labelled
    ``sobol``, then the first label in sorted order (``sobol`` itself where it was run at
    q = 1; the stored order made another label of equal q the baseline)."""
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
                    label != "sobol",
                    label,
                ),
            )
    return baselines


def _score_evaluation_notes(
    finals: pd.DataFrame, scores: pd.DataFrame, sobol: dict[str, str], prefixed: bool
) -> list[str]:
    """A note per run set whose scored methods made another number of evaluations than its
    Sobol baseline (a ``q`` sweep scored against Sobol at the smallest ``q``)."""
    made = finals.groupby(["run_set", "optimizer"])["evaluations"].max()
    notes = []
    for run_set, group in scores.groupby("run_set", sort=True):
        base = made.get((run_set, sobol[run_set]))
        others = {o: made[(run_set, o)] for o in dict.fromkeys(group["optimizer"])}
        others = {o: n for o, n in others.items() if n != base}
        if not others:
            continue
        described = ", ".join(
            f"{o} after {n}{' evaluations' if i == 0 else ''}"
            for i, (o, n) in enumerate(others.items())
        )
        notes.append(
            f"{f'{run_set}: ' if prefixed else ''}normalized scores at other evaluation counts "
            f"than the Sobol baseline's: {described}, each against {sobol[run_set]}'s final "
            f"regret after {base} (a final value is at the end of its method's budget of BO "
            "steps, not at equal evaluations)."
        )
    return notes


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
        blocks += _score_evaluation_notes(finals, scores, sobol, prefixed)
        blocks.append(
            Figure(
                figures.score_heatmap_svg(scores),
                "Normalized score (%), median over seeds: 100 is the optimum, 0 is the final "
                f"regret of {', '.join(sorted(set(sobol.values())))} on the same seed.",
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
    crashed = results.crashed()
    ranks = aggregate.mean_ranks(tables.final_table(runs, None, crashed))
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
    curve = aggregate.ecdf(trace, crashed=crashed)
    if not curve.empty:
        curve = curve.assign(series=series(curve, prefixed))
        blocks.append(
            Figure(
                figures.ecdf_svg(curve, colors),
                f"Runtime distribution (COCO-style ECDF) over {aggregate.N_TARGETS} targets per "
                "task; the seed of a failed cell reaches none.",
            )
        )
        blocks.append(
            Table("ecdf", [], [], curve.drop(columns="series"), caption="ECDF (CSV only).")
        )
    return Section(
        "across",
        "Across tasks",
        "How the optimizers compare over all tasks of a run set. A failed cell that stored "
        "nothing counts in the mean rank and the ECDF as a seed without a final value; the "
        "normalized score, a ratio per seed, leaves it out (its seeds column counts the rest).",
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
    header = ["run set", "task", "optimizer", "BO steps (all seeds)", "fit s", "acquisition s",
              "evaluation s", "total s"]  # fmt: skip
    return Section(
        "runtime",
        "Runtime per BO step",
        "Seconds per BO step, mean ± standard deviation over steps and seeds: fit and "
        "acquisition, and one evaluation (the mean of the step's q), so at q > 1 the step's "
        "time when its evaluations run at once; the measured wall time of batch steps is in "
        "'Wall time per BO step'.",
        [
            Figure(
                figures.runtime_svg(runs.assign(series=series(runs)), colors),
                "Seconds per BO step by part, mean ± standard deviation over steps and seeds "
                "(the table below).",
            ),
            Table("runtime", header, rows, table),
        ],
        ("BO steps", "fit / acquisition / evaluation seconds"),
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
        (
            "BO steps",
            "eigenvalue floored",
            "indefinite Hessian",
            "jittered draws",
            "min raw eigenvalue",
            "ensemble entropy",
            "fallbacks",
        ),
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
            str(r.var_ratio_undefined),
            ci(r.mse_ratio_median, r.mse_ratio_median_low, r.mse_ratio_median_high, sig),
            sig(r.mse_ratio_median_level),
            str(r.mse_ratio_undefined),
            str(r.mse_ratio_unconverged),
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
                "geometric mean over states with its 95% Student-t interval of the log ratios "
                "(one state: its rebuild interval), one panel per (task, kernel).",
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
        "undefined states (var ratio)", "MSE ratio median [CI]", "its level",
        "undefined states (MSE ratio)", "unconverged reference states", "worst state [rebuild CI]",
        "which state",
        "MSE ratio gmean [95% CI]", "median point MSE ratio", "top-1 agreement", "flip rate",
        "regret",
    ]  # fmt: skip
    blocks.append(Table("probe-summary", header, _probe_rows(summary, multi), summary))
    ranking = ranking_table(probe.assign(suite=probe["run_set"]))
    batch = "q" in ranking and ranking["q"].nunique() > 1  # batch probes of several q
    blocks.append(
        Table(
            "probe-ranking",
            [
                "run set",
                *(["q"] if batch else []),
                "S",
                "estimator",
                "EI evals",
                "states",
                "unconverged reference states",
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
                    *([str(r.q)] if batch else []),
                    str(r.mc_samples),
                    r.estimator,
                    r.n_evaluations,
                    str(r.states),
                    str(r.unconverged_states),
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
         "CI over states", "worst state", "undefined states", "unconverged reference states",
         "median point ratio",
         "top-1 agreement", "flip rate", "regret (probe)", "probe ranking"),
    )  # fmt: skip


def glossary_section(sections: Sequence[Section]) -> Section | None:
    """The glossary of the terms ``sections`` use, in order of first use; None without any."""
    used = dict.fromkeys(t for s in sections for t in s.terms)
    return Section("glossary", "Glossary", "", [], tuple(used)) if used else None


#: Hue stride of :func:`series_palette` over ``n`` labels: about ``n / golden ratio^2``.
_GOLDEN = (3 - 5**0.5) / 2


def series_palette(results: ResultSet) -> figures.Palette:
    """One colour per legend label of ``results`` (:func:`~orthobench.report.blocks.series`),
    the same in every figure.

    Up to 10 labels take ``tab10`` in sorted order. Beyond, :func:`figures.palette` spreads
    ``husl`` hues evenly in the order given, so the sorted labels, where a run set's series sit
    side by side and share a figure, are placed with a stride of about 0.38 of the circle
    (coprime with the count, so each hue is used once): neighbours are about 137 degrees
    apart, not 360 / n (22.5 degrees for 16 labels, two lines of one figure alike).
    """
    # A method whose every cell failed has no stored row, but a line in the ECDF.
    keys = pd.concat([results.runs[["run_set", "optimizer"]], results.crashed()])
    labels = sorted(series(keys).unique()) if not keys.empty else []
    n = len(labels)
    if n <= 10:
        return figures.palette(labels)
    stride = next(k for k in itertools.count(round(n * _GOLDEN)) if math.gcd(k, n) == 1)
    order = [""] * n
    for i, label in enumerate(labels):
        order[i * stride % n] = label
    return figures.palette(order)


def build_sections(
    results: ResultSet, reference: str | None, baseline: str | None
) -> list[Section]:
    """Every section whose data is present, in reading order, the glossary last."""
    colors = series_palette(results)
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
    glossary = glossary_section(sections)
    return [*sections, glossary] if glossary else sections
