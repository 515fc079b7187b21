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

    Rows before a seed's first finite (on a constrained task, feasible) evaluation have
    neither, whatever the task. So a task on which no evaluation was feasible has no regret on
    any row and reads ``best_y`` (NaN throughout) even with a known optimum: no stored row or
    file metadata records the optimum.
    """
    return "regret" if frame["regret"].notna().any() else "best_y"


#: The x-axes of a best-so-far curve: evaluations (1-based), BO steps (``batch``; 0 is the
#: initial design) and the cell's running time (``wall_seconds``).
AXES = ("evaluation", "batch", "wall_seconds")


def _positions(frame: pd.DataFrame, axis: str, by_seed: list[pd.Series]) -> pd.Series:
    """Where each row of ``frame`` (sorted by seed and iteration) lies on ``axis``."""
    if axis == "evaluation":
        return frame["iteration"] + 1
    if axis == "batch":
        # An evaluation counts at step k once it and every evaluation stored before it were
        # asked by step k. Synchronous cells store their steps in order (no change); an
        # asynchronous cell stores evaluations as they finished, its `batch` the ask that
        # proposed the point, so a step read at its own last row would leave out points asked
        # before it that finished later, and its curve could rise.
        return frame["batch"].groupby(by_seed).cummax()
    if axis == "wall_seconds":
        # An evaluation counts once it and every evaluation stored before it have finished.
        return frame["wall_seconds"].astype(float).groupby(by_seed).cummax()
    raise ValueError(f"`axis` must be one of {AXES}, but got {axis=!r}.")


def _first_of_step(frame: pd.DataFrame) -> pd.Series:
    """Whether a row is the first stored of its BO step (optimizer, seed and ``batch``; each row
    its own step in frames without ``batch``): every row of a step carries the step's fit and
    acquisition seconds, spent once for its ``q`` points."""
    step = "batch" if "batch" in frame else "iteration"
    return ~frame.duplicated(["optimizer", "seed", step])


def _as_of(rows: pd.DataFrame, axis: str) -> pd.DataFrame:
    """One optimizer's seeds read at every point of ``axis`` any of its seeds has, up to the
    smallest last point of a seed: each seed's last row at or before the point."""
    limit = rows.groupby("seed")[axis].max().min()
    rows = rows[rows[axis] <= limit]
    n_init = rows.groupby("seed")["init"].sum().rename("n_init")
    last = rows.drop_duplicates(["seed", axis], keep="last").sort_values(axis, kind="stable")
    grid = pd.MultiIndex.from_product([n_init.index, np.unique(rows[axis])], names=["seed", axis])
    points = grid.to_frame(index=False).sort_values(axis, kind="stable")
    read = pd.merge_asof(points, last.drop(columns="init"), on=axis, by="seed")
    read = read.merge(n_init, on="seed").sort_values(["seed", axis], kind="stable")
    return read.assign(is_outlier=read["is_outlier"].eq(True))


def traces(runs: pd.DataFrame, axis: str = "evaluation") -> pd.DataFrame:
    """Each seed's best-so-far value along ``axis`` (:data:`AXES`), trimmed to its key's shortest
    seed.

    A seed's value at a point ``x`` is that of its last evaluation at or before ``x``: per
    evaluation, the evaluation itself; per ``batch``, the end of the BO step (after its ``q``
    evaluations; of an asynchronous cell, whose rows are stored as evaluations finished, the last
    evaluation that, with every evaluation stored before it, was asked by step ``x``); on
    ``wall_seconds``, the last evaluation that had finished by ``x`` together with every
    evaluation stored before it (rows without ``wall_seconds`` are left out). The points of a key
    are the values of ``axis`` its seeds have (on ``wall_seconds`` each seed is read at every
    seed's times), up to the smallest last point of a seed: trimming makes every point of a curve
    average the same seeds.

    Columns: the :data:`KEY`, ``seed``, ``axis``, ``n_init`` (initial-design rows up to the
    last point), ``metric``, ``value`` (the best-so-far metric; NaN before the seed's first
    finite evaluation), ``seconds`` (the seed's cumulative fit + acquisition + evaluation
    seconds, a step's fit and acquisition counted once though each of its ``q`` rows carries
    them) and ``is_outlier`` (of the evaluation read).
    """
    parts = []
    for (run_set, task), frame in runs.groupby(["run_set", "task"], sort=True):
        metric = curve_metric(frame)
        frame = frame.sort_values(["optimizer", "seed", "iteration"])
        by_seed = [frame["optimizer"], frame["seed"]]
        model = frame[["fit_seconds", "acq_seconds"]].sum(axis=1).where(_first_of_step(frame), 0.0)
        step = model + frame["eval_seconds"]
        rows = pd.DataFrame(
            {
                "optimizer": frame["optimizer"],
                "seed": frame["seed"],
                axis: _positions(frame, axis, by_seed),
                "init": frame["phase"] == "init",
                "value": frame[metric].astype(float),
                "seconds": step.groupby(by_seed).cumsum(),
                "is_outlier": frame["is_outlier"].astype(bool),
            }
        ).dropna(subset=[axis])
        for optimizer, seeds in rows.groupby("optimizer", sort=True):
            read = _as_of(seeds.drop(columns="optimizer"), axis)
            parts.append(
                read.assign(run_set=run_set, task=task, optimizer=optimizer, metric=metric)
            )
    columns = [*KEY, "seed", axis, "n_init", "metric", "value", "seconds", "is_outlier"]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]


def curves(trace: pd.DataFrame, axis: str = "evaluation") -> pd.DataFrame:
    """Mean best-so-far curve per key and point of ``axis``, with its t interval over seeds.

    ``trace`` is :func:`traces` along the same ``axis``. Columns: the :data:`KEY`, ``metric``,
    ``axis``, ``seconds`` (mean cumulative seconds over seeds), ``mean``, ``low``, ``high``
    (:func:`orthobench.report.stats.t_interval` within the metric's range, NaN with fewer than
    two finite seeds) and ``n`` (seeds with a finite value).
    """
    columns = [*KEY, "metric", axis, "seconds", "mean", "low", "high", "n"]
    keys = [*KEY, "metric", axis]
    # The groups as slices of the sorted arrays: a curve on wall seconds has a point per seed
    # and evaluation, and pandas' per-group objects cost more than the statistics.
    ordered = trace.dropna(subset=keys).sort_values(keys, kind="stable")
    if ordered.empty:
        return pd.DataFrame(columns=columns)
    group = ordered.groupby(keys, sort=False).ngroup().to_numpy()
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    rows = []
    for key, values, seconds in zip(
        ordered[keys].iloc[starts].itertuples(index=False),
        np.split(ordered["value"].to_numpy(dtype=float), starts[1:]),
        np.split(ordered["seconds"].to_numpy(dtype=float), starts[1:]),
        strict=True,
    ):
        finite = values[np.isfinite(values)]
        low, high = stats.t_interval(finite, bounds=stats.metric_bounds(key[-2]))
        mean = finite.mean() if finite.size else np.nan
        timed = seconds[~np.isnan(seconds)]
        rows.append((*key, timed.mean() if timed.size else np.nan, mean, low, high, finite.size))
    return pd.DataFrame(rows, columns=columns)


def final_values(runs: pd.DataFrame, crashed: pd.DataFrame | None = None) -> pd.DataFrame:
    """The last best-so-far value of every seed (not trimmed): one row per cell.

    ``crashed`` (:meth:`~orthobench.report.data.ResultSet.crashed`) adds a row per failed cell
    that stored none, with no final value and 0 evaluations, on the tasks of its run set that
    have stored rows.

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
    if not parts:
        return pd.DataFrame(columns=columns)
    finals = pd.concat(parts, ignore_index=True)[columns]
    if crashed is None or crashed.empty:
        return finals
    metrics = finals[["run_set", "task", "metric"]].drop_duplicates()
    lost = crashed.merge(metrics, on=["run_set", "task"]).assign(final=np.nan, evaluations=0)
    finals = pd.concat([finals, lost[columns]], ignore_index=True)
    return finals.sort_values([*KEY, "seed"], kind="stable", ignore_index=True)


def final_table(
    runs: pd.DataFrame, reference: str | None, crashed: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Final best-so-far value per key: summary, rank and a seed-paired test against ``reference``.

    Every optimizer of a seed starts from the same initial design, so the test pairs each seed's
    final value with ``reference``'s final value of the same seed (run set and task), an inner
    join on the seed, and applies :func:`orthobench.report.stats.signed_rank_test` to the
    differences (own - reference). ``crashed``: failed cells that stored no rows
    (:func:`final_values`), seeds without a final value.

    Columns: the :data:`KEY`, ``metric``, ``seeds`` (with a finite final value), ``mean``,
    ``low``, ``high`` (t interval), ``median``, ``no_final`` (seeds without a finite final
    value: never feasible on a constrained task, every evaluation failed, or the cell failed
    and stored nothing), ``rank`` (within
    the run set and task, 1 = best: by the share of seeds without a final value, then by the
    mean, :func:`_rank`; NaN on a task where no key has a final value), ``best``, ``pairs``
    (seeds with a finite final value here and in ``reference``; 0 for the reference itself),
    ``p_min`` (the smallest p-value the exact test can give with these pairs, ``2 / 2^pairs``
    without zero differences; NaN for the reference),
    ``testable`` (``p_min < 0.05``: False means too few seeds for a test), ``p_value`` (two-sided
    Wilcoxon signed-rank; NaN for the reference and where not ``testable``), ``p_holm`` (Holm
    over the task's testable comparisons), ``significant`` (``p_holm < 0.05``), ``evaluations``
    (per seed: the largest count of a seed, failed evaluations included; 0 where every cell
    failed and stored nothing) and, summed over every
    seed of the key, ``failed_evals`` (rows with ``status != "ok"``), ``outliers``
    (``is_outlier``) and ``fallbacks`` (BO steps with a recorded fallback: a step's ``q`` rows
    carry its fallback, and count once).
    """
    finals = final_values(runs, crashed)
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
                "no_final": int(values.size - finite.size),
                "pairs": test.pairs,
                "p_min": test.p_min,
                "testable": test.p_min < stats.ALPHA,
                "p_value": test.p_value,
                "evaluations": int(group["evaluations"].max()),
                "failed_evals": int((cell["status"] != "ok").sum()),
                "outliers": int(cell["is_outlier"].sum()),
                "fallbacks": _steps(cell[cell["fallback"].notna()]),
            }
        )
    columns = [
        *KEY, "metric", "seeds", "mean", "low", "high", "median", "no_final", "rank", "best",
        "pairs", "p_min", "testable", "p_value", "p_holm", "significant", "evaluations",
        "failed_evals", "outliers", "fallbacks",
    ]  # fmt: skip
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=columns)
    by_task = table.groupby(["run_set", "task"], sort=False)
    table["rank"] = _rank(table)
    table["best"] = table["rank"] == 1
    table["p_holm"] = by_task["p_value"].transform(lambda p: stats.holm(p.to_numpy()))
    table["significant"] = table["p_holm"] < stats.ALPHA
    return table[columns]


def _rank(table: pd.DataFrame) -> pd.Series:
    """The rank of each key within its run set and task (1 = best, ties share the smaller rank):
    a smaller share of seeds without a final value first (a failed cell that stored nothing is
    such a seed), then a lower mean. A key without a final value on any seed (share 1) ranks
    after every key with one, tied with the others that have none: left unranked, it dropped out
    of the mean rank over tasks, so failing a task made a method look better. A task where no key
    has a final value ranks none (NaN): it tells no method from another, and a rank 1 shared there
    would pull every method's mean rank towards 1, so it is left out of the mean rank for all.

    The mean is over the seeds with a final value only, so ranking by it alone would put a
    method that found a feasible point on one seed of five ahead of one that found one on
    every seed: the seeds it failed on would look good.
    """
    rank = pd.Series(np.nan, index=table.index)
    for _, group in table.groupby(["run_set", "task"], sort=False):
        share = (group["no_final"] / (group["no_final"] + group["seeds"])).to_numpy(dtype=float)
        mean = group["mean"].to_numpy(dtype=float)
        if (share == 1.0).all():
            continue
        ahead = (share[None, :] < share[:, None]) | (
            (share[None, :] == share[:, None]) & (mean[None, :] < mean[:, None])
        )  # ahead[i, j]: j ranks before i
        rank[group.index] = np.where(np.isnan(share), np.nan, 1.0 + ahead.sum(axis=1))
    return rank


def _steps(rows: pd.DataFrame) -> int:
    """The BO steps ``rows`` belong to: distinct ``(seed, batch)``, or rows where a frame has
    no ``batch`` (one point per step)."""
    return len(rows.drop_duplicates(["seed", "batch"])) if "batch" in rows else len(rows)


#: The parts of a BO step's seconds in :func:`step_seconds` and :func:`runtime_table`.
STEP_PARTS = ("fit", "acq", "eval", "total")


def step_seconds(runs: pd.DataFrame) -> pd.DataFrame:
    """Seconds of every BO step of ``runs``: one row per key, seed and step.

    A BO step is one ``batch`` of a seed (one row where a frame has no ``batch``): its fit and
    acquisition seconds are counted once (each of its ``q`` rows carries them), its evaluation
    seconds are the mean over its evaluations (one evaluation; they run at once where the
    executor allows), and its total is their sum. Initial-design rows are left out (no model is
    fitted).

    Columns: the :data:`KEY`, ``seed``, ``step`` and the :data:`STEP_PARTS`.
    """
    bo = runs[runs["phase"] == "bo"]
    step = (bo["batch"] if "batch" in bo else bo["iteration"]).rename("step")
    by_step = bo.groupby([*(bo[k] for k in KEY), bo["seed"], step], sort=True)
    steps = by_step.agg(
        fit=("fit_seconds", "max"), acq=("acq_seconds", "max"), eval=("eval_seconds", "mean")
    )
    steps = steps.assign(total=steps["fit"] + steps["acq"] + steps["eval"]).reset_index()
    return steps[[*KEY, "seed", "step", *STEP_PARTS]]


def runtime_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Seconds per BO step per key: mean and standard deviation of fit, acquisition, evaluation
    and their total over the steps of :func:`step_seconds`.

    Columns: the :data:`KEY`, ``steps`` and ``<part>_mean``, ``<part>_sd`` (over steps and
    seeds) for ``part`` in :data:`STEP_PARTS`.
    """
    steps = step_seconds(runs)
    if steps.empty:
        return pd.DataFrame(
            columns=[*KEY, "steps", *[f"{p}_{s}" for p in STEP_PARTS for s in ("mean", "sd")]]
        )
    grouped = steps.groupby(KEY, sort=True)
    table = grouped.size().rename("steps").to_frame()
    for part in STEP_PARTS:
        table[f"{part}_mean"] = grouped[part].mean()
        table[f"{part}_sd"] = grouped[part].std(ddof=1)
    return table.reset_index()


def step_time_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Wall seconds per BO step per key, from ``wall_seconds`` (rows without it are left out).

    A seed's wall seconds per step are the time from the end of its initial design (batch 0) to
    its last BO evaluation's end, over its BO steps (batches): for synchronous steps the mean of
    each step's end minus the step's before; an asynchronous cell's asks finish out of order, so
    the span, not the last ask's end, counts the evaluations that finish after it. A step's fit
    and acquisition seconds are the largest of its rows' (a step fits and acquires once for its
    ``q`` points).

    Columns: the :data:`KEY`, ``q``, ``seeds``, ``steps`` (BO steps of the longest seed),
    ``wall_median``, ``wall_min``, ``wall_max`` (over seeds, of each seed's wall seconds per
    step), ``fit_median``, ``acq_median`` (over every BO step of every seed) and ``eval_median``
    (seconds of one BO evaluation, over every BO evaluation).
    """
    columns = [*KEY, "q", "seeds", "steps", "wall_median", "wall_min", "wall_max",
               "fit_median", "acq_median", "eval_median"]  # fmt: skip
    timed = runs[runs["wall_seconds"].notna()]
    if timed.empty:
        return pd.DataFrame(columns=columns)
    cell = [*KEY, "q", "seed"]
    steps = timed.groupby([*cell, "batch"], sort=True).agg(
        end=("wall_seconds", "max"), fit=("fit_seconds", "max"), acq=("acq_seconds", "max")
    )
    init_end = steps[steps.index.get_level_values("batch") == 0]["end"].droplevel("batch")
    steps = steps[steps.index.get_level_values("batch") >= 1].reset_index()
    if steps.empty:
        return pd.DataFrame(columns=columns)
    per_seed = steps.groupby(cell, sort=True).agg(end=("end", "max"), steps=("batch", "size"))
    per_seed["wall"] = (per_seed["end"] - init_end.reindex(per_seed.index)) / per_seed["steps"]
    by_key = per_seed.groupby([*KEY, "q"], sort=True)
    table = by_key.agg(
        seeds=("wall", "size"),
        steps=("steps", "max"),
        wall_median=("wall", "median"),
        wall_min=("wall", "min"),
        wall_max=("wall", "max"),
    )
    step_parts = steps.groupby([*KEY, "q"], sort=True)
    table["fit_median"] = step_parts["fit"].median()
    table["acq_median"] = step_parts["acq"].median()
    bo = timed[timed["batch"] >= 1]
    table["eval_median"] = bo.groupby([*KEY, "q"], sort=True)["eval_seconds"].median()
    return table.reset_index()[columns]
