"""Per-task tables from the per-evaluation rows: best-so-far traces, curves, final values, runtime.

Every table is keyed by ``(run_set, task, optimizer)`` (:mod:`orthobench.report.data`): rows of
different suites, or of one suite stored twice, are never pooled. The curve metric of a task is
``regret`` when the task has a known optimum (some row has a regret) and the best-so-far
objective ``best_y`` otherwise (:func:`curve_metric`); lower is better for both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.report import stats

KEY = ["run_set", "task", "optimizer"]


def curve_metric(frame: pd.DataFrame) -> str:
    """``regret`` when some row of one task's ``frame`` has it (known optimum), else ``best_y``.

    Rows before a seed's first finite evaluation have neither, whatever the task.
    """
    return "regret" if frame["regret"].notna().any() else "best_y"


def traces(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per evaluation with its best-so-far value, trimmed to each key's shortest seed.

    Columns: the :data:`KEY`, ``seed``, ``evaluation`` (1-based), ``n_init``, ``metric``,
    ``value`` (the best-so-far metric; NaN before the seed's first finite evaluation),
    ``seconds`` (the seed's cumulative fit + acquisition + evaluation seconds) and ``is_outlier``.
    Trimming makes every evaluation of a curve average the same seeds.
    """
    parts = []
    for (run_set, task), frame in runs.groupby(["run_set", "task"], sort=True):
        metric = curve_metric(frame)
        frame = frame.sort_values(["optimizer", "seed", "iteration"])
        length = frame.groupby(["optimizer", "seed"])["iteration"].transform("size")
        shortest = length.groupby(frame["optimizer"]).transform("min")
        frame = frame[frame["iteration"] < shortest]
        step = frame[["fit_seconds", "acq_seconds", "eval_seconds"]].sum(axis=1)
        n_init = (
            (frame["phase"] == "init").groupby([frame["optimizer"], frame["seed"]]).transform("sum")
        )
        parts.append(
            pd.DataFrame(
                {
                    "run_set": run_set,
                    "task": task,
                    "optimizer": frame["optimizer"],
                    "seed": frame["seed"],
                    "evaluation": frame["iteration"] + 1,
                    "n_init": n_init,
                    "metric": metric,
                    "value": frame[metric].astype(float),
                    "seconds": step.groupby([frame["optimizer"], frame["seed"]]).cumsum(),
                    "is_outlier": frame["is_outlier"].astype(bool),
                }
            )
        )
    columns = [*KEY, "seed", "evaluation", "n_init", "metric", "value", "seconds", "is_outlier"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def curves(trace: pd.DataFrame) -> pd.DataFrame:
    """Mean best-so-far curve per key and evaluation, with its t interval over seeds.

    Columns: the :data:`KEY`, ``metric``, ``evaluation``, ``seconds`` (mean cumulative seconds over
    seeds), ``mean``, ``low``, ``high`` (:func:`orthobench.report.stats.t_interval` within the
    metric's range, NaN with fewer than two finite seeds) and ``n`` (seeds with a finite value).
    """
    rows = []
    for (*key, metric, evaluation), group in trace.groupby(
        [*KEY, "metric", "evaluation"], sort=True
    ):
        values = group["value"].to_numpy(dtype=float)
        finite = values[np.isfinite(values)]
        low, high = stats.t_interval(finite, bounds=stats.metric_bounds(metric))
        rows.append(
            (
                *key,
                metric,
                evaluation,
                group["seconds"].mean(),
                finite.mean() if finite.size else np.nan,
                low,
                high,
                finite.size,
            )
        )
    columns = [*KEY, "metric", "evaluation", "seconds", "mean", "low", "high", "n"]
    return pd.DataFrame(rows, columns=columns)


def final_values(runs: pd.DataFrame) -> pd.DataFrame:
    """The last best-so-far value of every seed (not trimmed): one row per cell.

    Columns: the :data:`KEY`, ``seed``, ``metric``, ``final`` (NaN when the seed has no finite
    evaluation), ``evaluations``.
    """
    parts = []
    for (run_set, task), frame in runs.groupby(["run_set", "task"], sort=True):
        metric = curve_metric(frame)
        last = frame.sort_values("iteration").groupby(["optimizer", "seed"], sort=True)
        parts.append(
            pd.DataFrame(
                {
                    "final": last[metric].last().astype(float),
                    "evaluations": last.size(),
                }
            )
            .reset_index()
            .assign(run_set=run_set, task=task, metric=metric)
        )
    columns = [*KEY, "seed", "metric", "final", "evaluations"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def final_table(runs: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """Final best-so-far value per key: summary, rank and a seed-paired test against ``reference``.

    Every optimizer of a seed starts from the same initial design, so the test pairs each seed's
    final value with ``reference``'s final value of the same seed (run set and task), an inner
    join on the seed, and applies :func:`orthobench.report.stats.signed_rank_test` to the
    differences (own - reference).

    Columns: the :data:`KEY`, ``metric``, ``seeds`` (with a finite final value), ``mean``,
    ``low``, ``high`` (t interval), ``median``, ``rank`` (of the mean within the run set and
    task, 1 = lowest), ``best``, ``pairs`` (seeds with a finite final value here and in
    ``reference``; 0 for the reference itself), ``p_min`` (the smallest p-value the exact test
    can give with these pairs, ``2 / 2^pairs`` without zero differences; NaN for the reference),
    ``testable`` (``p_min < 0.05``: False means too few seeds for a test), ``p_value`` (two-sided
    Wilcoxon signed-rank; NaN for the reference and where not ``testable``), ``p_holm`` (Holm
    over the task's testable comparisons), ``significant`` (``p_holm < 0.05``), ``evaluations``
    (the largest count of a seed), ``failed_evals`` (``status != "ok"``), ``outliers``
    (``is_outlier``) and ``fallbacks`` (rows with a recorded fallback).
    """
    finals = final_values(runs)
    rows = []
    for (run_set, task, optimizer), group in finals.groupby(KEY, sort=True):
        values = group["final"].to_numpy(dtype=float)
        finite = values[np.isfinite(values)]
        cell = runs[
            (runs["run_set"] == run_set) & (runs["task"] == task) & (runs["optimizer"] == optimizer)
        ]
        metric = group["metric"].iloc[0]
        low, high = stats.t_interval(finite, bounds=stats.metric_bounds(metric))
        test = stats.SignedRankTest(0, np.nan, np.nan)
        if optimizer != reference:
            ref = finals[
                (finals["run_set"] == run_set)
                & (finals["task"] == task)
                & (finals["optimizer"] == reference)
            ]
            paired = group.merge(ref, on="seed", suffixes=("", "_ref"))
            test = stats.signed_rank_test(paired["final"] - paired["final_ref"])
        rows.append(
            {
                "run_set": run_set,
                "task": task,
                "optimizer": optimizer,
                "metric": metric,
                "seeds": int(finite.size),
                "mean": float(finite.mean()) if finite.size else np.nan,
                "low": low,
                "high": high,
                "median": float(np.median(finite)) if finite.size else np.nan,
                "pairs": test.pairs,
                "p_min": test.p_min,
                "testable": test.p_min < stats.ALPHA,
                "p_value": test.p_value,
                "evaluations": int(group["evaluations"].max()),
                "failed_evals": int((cell["status"] != "ok").sum()),
                "outliers": int(cell["is_outlier"].sum()),
                "fallbacks": int(cell["fallback"].notna().sum()),
            }
        )
    columns = [
        *KEY, "metric", "seeds", "mean", "low", "high", "median", "rank", "best", "pairs",
        "p_min", "testable", "p_value", "p_holm", "significant", "evaluations", "failed_evals",
        "outliers", "fallbacks",
    ]  # fmt: skip
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=columns)
    by_task = table.groupby(["run_set", "task"], sort=False)
    table["rank"] = by_task["mean"].rank(method="min")
    table["best"] = table["rank"] == 1
    table["p_holm"] = by_task["p_value"].transform(lambda p: stats.holm(p.to_numpy()))
    table["significant"] = table["p_holm"] < stats.ALPHA
    return table[columns]


def runtime_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Seconds per BO step per key: mean and standard deviation of fit, acquisition, evaluation.

    Columns: the :data:`KEY`, ``steps`` and ``<part>_mean``, ``<part>_sd`` for ``part`` in
    ``fit``, ``acq``, ``eval``, ``total``; initial-design rows are left out (no model is fitted).
    """
    bo = runs[runs["phase"] == "bo"].assign(
        fit=lambda f: f["fit_seconds"],
        acq=lambda f: f["acq_seconds"],
        eval=lambda f: f["eval_seconds"],
    )
    bo = bo.assign(total=bo["fit"] + bo["acq"] + bo["eval"])
    parts = ["fit", "acq", "eval", "total"]
    if bo.empty:
        return pd.DataFrame(
            columns=[*KEY, "steps", *[f"{p}_{s}" for p in parts for s in ("mean", "sd")]]
        )
    grouped = bo.groupby(KEY, sort=True)
    table = grouped.size().rename("steps").to_frame()
    for part in parts:
        table[f"{part}_mean"] = grouped[part].mean()
        table[f"{part}_sd"] = grouped[part].std(ddof=1)
    return table.reset_index()
