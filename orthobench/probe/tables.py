r"""Probe summaries over BO states: the tables of the terminal, the report and docs/estimators.md.

Ratios are heavy-tailed across BO states and the rebuild CIs of one state do not cover the spread
between states (docs/design.md, "Ratios: CIs and several states"), so :func:`summary_table` gives
each ratio's median over states with its order-statistic interval, the worst state and the
geometric mean (:mod:`orthobench.probe.intervals`); :func:`equal_time_frame` and
:func:`ranking_table` rank estimators at equal EI evaluations and at equal time, and
:func:`default_rule_table` applies the rule that picks orthobo's default estimator.

Batch probes: rows with a ``q`` column (:class:`orthobench.results.ProbeRecord`) are grouped by
``q`` too, after ``kernel`` (:func:`with_batch`); rows stored before ``q`` was recorded are
``q = 1``, and frames without the column are grouped as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from orthobench.config.names import DEFAULT_THETA_ESTIMATOR
from orthobench.formatting import ci
from orthobench.probe.intervals import defined_ratios, geometric_mean_interval, median_interval
from orthobench.probe.metrics import reference_error_share

GROUP = ["suite", "task", "kernel", "mc_samples", "estimator"]
#: The batch-size column, a group key where a frame has it (:func:`with_batch`).
BATCH = "q"
#: The columns that identify one BO state within a (suite, task, kernel).
STATE = ["seed", "state_iteration"]
#: Ratio columns of :class:`orthobench.results.ProbeRecord` with a rebuild CI (``*_low``,
#: ``*_high``), aggregated by median, worst state and geometric mean over states.
RATIOS = ("var_ratio", "mse_ratio")
#: Per-point median ratios, aggregated by geometric mean over states.
POINT_RATIOS = ("median_point_var_ratio", "median_point_mse_ratio")
#: Columns averaged arithmetically over states.
MEANS = ("probe_variance", "probe_variance_log", "bias_sq", "bias_share", "top1_agreement",
         "flip_rate", "regret")  # fmt: skip
#: The estimator an estimator must beat at equal wall time (with a larger ``S``): orthobo's default.
TIME_BASELINE = DEFAULT_THETA_ESTIMATOR
#: Largest median over states of the excess bias share (:func:`_with_bias_share`) for an estimator
#: to count as unbiased in :func:`default_rule_table`.
NEGLIGIBLE_BIAS_SHARE = 0.05
#: Largest squared error of a state's reference over its mean square for its MSE ratios to count
#: (:func:`unconverged_reference`; why 0.1: docs/design.md, "The probe's reference and its error").
MAX_REFERENCE_ERROR = 0.1
#: The ratio columns (by prefix, bounds included) that compare MSEs against the reference.
REFERENCE_RATIOS = ("mse_ratio", "median_point_mse_ratio")
#: The other columns measured against the reference: the MSE, the squared bias and their shares
#: (:func:`_with_bias_share`).
REFERENCE_ERRORS = ("mse", "bias_sq", "bias_share", "excess_bias_share")


def unconverged_reference(frame: pd.DataFrame) -> np.ndarray:
    """Per row of ``frame``, whether its state's reference is too far from converged for the
    state's MSE ratios to compare estimators (``n`` rows -> ``n`` bools): some row of the state
    (:data:`STATE` within a suite, task, kernel and ``q``) has a :func:`reference_error_share`
    above :data:`MAX_REFERENCE_ERROR`; not where ``reference_rse`` is unknown (absent, empty)."""
    if "reference_rse" not in frame:
        return np.zeros(len(frame), dtype=bool)
    share = [
        reference_error_share(rse, ref) if rse is not None and len(rse) else np.nan
        for rse, ref in zip(frame["reference_rse"], frame["reference"], strict=True)
    ]
    frame, batch = with_batch(frame)
    keys = [frame[k] for k in ["suite", "task", "kernel", *batch, *STATE] if k in frame]
    flagged = pd.Series(np.nan_to_num(share) > MAX_REFERENCE_ERROR, index=frame.index)
    return flagged.groupby(keys, sort=False).transform("any").to_numpy()


def _without_unconverged(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every column measured against the reference (:data:`REFERENCE_RATIOS`,
    :data:`REFERENCE_ERRORS`) NaN on the states of :func:`unconverged_reference`, marked in a
    ``reference_unconverged`` column."""
    flagged = unconverged_reference(frame)
    frame = frame.assign(reference_unconverged=flagged)
    measured = [c for c in frame if c.startswith(REFERENCE_RATIOS) or c in REFERENCE_ERRORS]
    frame.loc[flagged, measured] = np.nan
    return frame


def _unconverged(group: pd.DataFrame, column: str) -> int:
    """The states of ``group`` whose ``column`` ratio :func:`_without_unconverged` left out."""
    return int(group["reference_unconverged"].sum()) if column.startswith(REFERENCE_RATIOS) else 0


def _smallest_defined(group: pd.DataFrame, column: str, by: str | None = None) -> pd.Series | None:
    """The row of the smallest ``by`` (default ``column``; NaN last, the first of ties) among the
    rows whose ``column`` ratio is defined (:func:`defined_ratios`); None without any: the
    worst state of every table over states."""
    defined = np.flatnonzero(~np.isnan(defined_ratios(group[column].to_numpy(dtype=float))))
    if not defined.size:
        return None
    values = group[by or column].to_numpy(dtype=float)[defined]
    return group.iloc[int(defined[np.argsort(values, kind="stable")[0]])]


def with_batch(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` with its ``q`` column as ints (missing values, from rows stored before batch
    probes, are 1) and the :data:`BATCH` key list to group by: ``["q"]``, or ``[]`` without the
    column."""
    if BATCH not in frame:
        return frame, []
    return frame.assign(**{BATCH: frame[BATCH].fillna(1).astype(int)}), [BATCH]


def _group_keys(batch: list[str]) -> list[str]:
    """:data:`GROUP` with the batch key after ``kernel``."""
    at = GROUP.index("kernel") + 1
    return [*GROUP[:at], *batch, *GROUP[at:]]


def _state_label(row: pd.Series | dict, with_iteration: bool) -> str:
    label = f"seed {int(row['seed'])}"
    return f"{label} it {int(row['state_iteration'])}" if with_iteration else label


def _with_iteration(frame: pd.DataFrame) -> bool:
    return "state_iteration" in frame and frame["state_iteration"].nunique() > 1


def _ratio(group: pd.DataFrame, column: str, with_iteration: bool) -> dict[str, float | str]:
    """Median, worst state and geometric mean over the defined states of one ratio column."""
    values = group[column].to_numpy(dtype=float)
    defined = ~np.isnan(defined_ratios(values))
    unconverged = _unconverged(group, column)
    median = median_interval(values)
    gmean = geometric_mean_interval(values)
    out: dict[str, float | str] = {
        f"{column}_median": median.center,
        f"{column}_median_low": median.low,
        f"{column}_median_high": median.high,
        f"{column}_median_level": median.level,
        column: gmean.center,
        f"{column}_low": gmean.low,
        f"{column}_high": gmean.high,
        f"{column}_worst": np.nan,
        f"{column}_worst_low": np.nan,
        f"{column}_worst_high": np.nan,
        f"{column}_worst_state": "",
        f"{column}_undefined": int(np.sum(~defined)) - unconverged,
        f"{column}_unconverged": unconverged,
    }
    rebuild_ci = f"{column}_low" in group
    if len(values) == 1 and defined[0] and rebuild_ci:
        low, high = float(group[f"{column}_low"].iloc[0]), float(group[f"{column}_high"].iloc[0])
        out.update({f"{column}_median_low": low, f"{column}_median_high": high})
        out.update({f"{column}_low": low, f"{column}_high": high})
    worst = _smallest_defined(group, column)
    if worst is not None:
        out[f"{column}_worst"] = float(worst[column])
        out[f"{column}_worst_state"] = _state_label(worst, with_iteration)
        if rebuild_ci:
            out[f"{column}_worst_low"] = float(worst[f"{column}_low"])
            out[f"{column}_worst_high"] = float(worst[f"{column}_high"])
    return out


def _with_bias_share(frame: pd.DataFrame) -> pd.DataFrame:
    r"""Adds ``bias_share = bias_sq / mse`` and, with ``probe_variance`` and ``rebuilds``,
    ``excess_bias_share``.

    ``bias_sq`` is the squared mean error over ``R`` rebuilds, so for an unbiased estimator it is
    ``probe_variance / R`` in expectation, not 0. ``excess_bias_share``
    :math:`= \max(\mathrm{bias\_sq} - \mathrm{probe\_variance} / R, 0) / \mathrm{mse}`
    removes that term (an unbiased estimate of the squared bias, clipped at 0): about 0 for an
    unbiased estimator, whatever ``R``.
    """
    if "bias_sq" not in frame or "mse" not in frame:
        return frame
    frame = frame.assign(bias_share=frame["bias_sq"] / frame["mse"])
    if "probe_variance" in frame and "rebuilds" in frame:
        excess = (frame["bias_sq"] - frame["probe_variance"] / frame["rebuilds"]).clip(lower=0.0)
        frame = frame.assign(excess_bias_share=excess / frame["mse"])
    return frame


def summary_table(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (suite, task, kernel, [q,] S, estimator), aggregated over probe states.

    A *state* is one BO state of the probe (a ``seed`` and ``state_iteration`` of a task and
    kernel). Each ratio's statistics are over the states where it is defined
    (:func:`defined_ratios`) and, for MSE ratios, whose reference converged
    (:func:`unconverged_reference`; so are the means and maxima of the :data:`REFERENCE_ERRORS`
    columns, measured against the same reference); ``states`` counts all states,
    ``*_undefined`` the undefined ones and ``*_unconverged`` the others left out, so a dropped
    state always shows. With one state there is no interval over states: the median and
    geometric mean keep that state's rebuild CI (if its ratio is defined), and ``ci_over`` says
    which interval a row shows. With several states of which fewer than two are defined, the
    intervals are NaN.

    Args:
        frame: :class:`~orthobench.results.ProbeRecord` rows (one per state and S); a report
            passes its run sets in ``suite``.
        columns: Metric columns to aggregate (default: every one present).

    Returns:
        The :data:`GROUP` columns (and ``q`` after ``kernel`` where ``frame`` has it), ``states``, ``n_evaluations`` (the largest EI count of the
        estimator over states; its ratios are against naive MC at that count), ``baseline``,
        ``ci_over`` (``states`` or ``rebuilds``) and, per ratio in :data:`RATIOS`, over the
        states with a defined ratio: ``*_median`` with
        ``*_median_low``/``*_median_high`` (order-statistic interval over states,
        :func:`median_interval`) and ``*_median_level`` (its exact coverage; NaN unless the
        interval is over two or more states), ``*_worst`` (the smallest state's ratio) with
        ``*_worst_state`` (``seed N``, plus ``it K`` when several iterations are probed) and
        ``*_worst_low``/``*_worst_high`` (its rebuild CI), the geometric mean (the bare column
        name) with ``*_low``/``*_high`` (95% Student-t interval over states,
        :func:`geometric_mean_interval`), ``*_undefined`` (the states whose ratio is
        undefined) and ``*_unconverged`` (the states left out for their reference, 0 for a
        variance ratio); the geometric mean of each :data:`POINT_RATIOS` column with its
        ``*_undefined`` and ``*_unconverged``; the mean of each :data:`MEANS`
        column (``bias_share`` is ``bias_sq / mse`` per state: about ``1 / rebuilds`` for an
        unbiased estimator with an exact reference) and ``bias_share_max`` over states,
        ``excess_bias_share_max`` (:func:`_with_bias_share`) over states; with
        ``seconds_per_call``, its median over states and ``threads``.

    Example:
        Three defined states and one where the estimator's variance is ~0: the median of the
        three with the range of the three, which covers the median over states with probability
        0.75.

        >>> rows = pd.DataFrame({"suite": "s", "task": "t", "kernel": "k", "mc_samples": 8,
        ...     "estimator": "e", "n_evaluations": 8, "seed": [0, 1, 2, 3], "state_iteration": 0,
        ...     "mse_ratio": [0.5, 2.0, 8.0, 1e30]})
        >>> row = summary_table(rows, columns=["mse_ratio"]).iloc[0]
        >>> print(*row[["mse_ratio_median", "mse_ratio_median_low", "mse_ratio_median_high"]])
        2.0 0.5 8.0
        >>> print(row["mse_ratio_median_level"], row["states"], row["mse_ratio_undefined"])
        0.75 4 1
        >>> print(row["mse_ratio_worst"], row["mse_ratio_worst_state"])
        0.5 seed 0
    """
    frame, batch = with_batch(frame)
    keys = _group_keys(batch)
    if frame.empty:
        return pd.DataFrame(columns=[*keys, "states"])
    frame = _without_unconverged(_with_bias_share(frame))
    if "state_iteration" not in frame:
        frame = frame.assign(state_iteration=0)
    with_iteration = _with_iteration(frame)
    present = [c for c in (columns or [*RATIOS, *POINT_RATIOS, *MEANS]) if c in frame]
    rows = []
    for key, group in frame.groupby(keys, sort=False):
        row = dict(zip(keys, key, strict=True))
        row["states"] = len(group)
        row["n_evaluations"] = int(group["n_evaluations"].max())
        row["baseline"] = group["baseline"].iloc[0] if "baseline" in group else None
        row["ci_over"] = "states" if len(group) > 1 else "rebuilds"
        for column in present:
            if column in RATIOS:
                row.update(_ratio(group, column, with_iteration))
            elif column in POINT_RATIOS:
                values = group[column].to_numpy(dtype=float)
                row[column] = geometric_mean_interval(values).center
                unconverged = row[f"{column}_unconverged"] = _unconverged(group, column)
                undefined = int(np.isnan(defined_ratios(values)).sum())
                row[f"{column}_undefined"] = undefined - unconverged
            else:
                row[column] = float(group[column].astype(float).mean())
        if "bias_share" in present:
            row["bias_share_max"] = float(group["bias_share"].astype(float).max())
        if "excess_bias_share" in group:
            row["excess_bias_share_max"] = float(group["excess_bias_share"].max())
        if "seconds_per_call" in group:
            row["seconds_per_call"] = float(group["seconds_per_call"].astype(float).median())
            row["threads"] = group["threads"].max()
        rows.append(row)
    return pd.DataFrame(rows)


def _loglog(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    """``y(x)`` linear in log-log between the points ``(xs, ys)`` (sorted by ``xs``),
    extrapolated along the end segments."""
    lx, lxs, lys = np.log(x), np.log(xs), np.log(ys)
    i = int(np.clip(np.searchsorted(lxs, lx) - 1, 0, len(xs) - 2))
    slope = (lys[i + 1] - lys[i]) / (lxs[i + 1] - lxs[i])
    return float(np.exp(lys[i] + slope * (lx - lxs[i])))


def _rising(values: np.ndarray) -> list[int]:
    """Indices of a longest strictly increasing subsequence of ``values`` (the first such, of
    the earliest indices; ``O(n^2)`` for a handful of budgets)."""
    best: list[list[int]] = []  # best[i]: the longest rising run ending at i
    for i, value in enumerate(values):
        before = [best[j] for j in range(i) if values[j] < value]
        best.append([*max(before, key=len, default=[]), i])
    return max(best, key=len, default=[])


def equal_time_frame(frame: pd.DataFrame, baseline: str = TIME_BASELINE) -> pd.DataFrame:
    """Per state and row, the baseline's budget at equal time and the equal-time MSE ratio.

    Each row holds the wall seconds of one acquisition call (``seconds_per_call``;
    :func:`orthobench.probe.gp_probe.seconds_per_call`). At equal time the baseline to beat is
    ``baseline`` with a larger ``S``: per state, the budget ``S'`` at which the baseline's call
    costs what the row's call costs, and the baseline's MSE there, both by linear interpolation in
    log-log coordinates between the baseline's probed budgets (extrapolated along the end segment
    outside them; with two budgets that is ``cost ~ S^b`` and ``MSE ~ S^-a`` fitted through the
    two points of the state).

    For every row of ``frame`` with a ``seconds_per_call`` whose state has the ``baseline`` at
    two or more budgets whose costs rise with ``S`` (the fewest budgets whose timing breaks
    that, noise, are left out: a longest rising run of them is kept): ``time_budget`` (``S'``: the baseline's budget whose call
    costs the row's ``seconds_per_call``), ``time_extrapolated`` (``S'`` outside the baseline's
    probed budgets), ``time_mse_ratio`` (``MSE_baseline(S') / mse``; > 1: the row beats the
    baseline at equal time) and ``cost_vs_mc`` (the row's call seconds over naive ``mc``'s at the
    same ``S`` in the same state). Other rows get NaN.
    """
    frame, batch = with_batch(frame)
    key = ["suite", "task", "kernel", *batch, *STATE]
    if "state_iteration" not in frame:
        frame = frame.assign(state_iteration=0)
    out = frame.assign(
        time_budget=np.nan, time_extrapolated=False, time_mse_ratio=np.nan, cost_vs_mc=np.nan
    )
    if "seconds_per_call" not in frame:
        return out
    for _, state in out.groupby(key, sort=False):
        mc = state[state["estimator"] == "mc"].set_index("mc_samples")["seconds_per_call"]
        base = state[state["estimator"] == baseline].sort_values("mc_samples")
        base = base[np.isfinite(base["seconds_per_call"].astype(float)) & (base["mse"] > 0)]
        # The interpolation needs costs rising with S: the fewest budgets whose timing breaks
        # that (noise) are left out, not the whole state.
        base = base.iloc[_rising(base["seconds_per_call"].to_numpy(dtype=float))]
        costs = base["seconds_per_call"].to_numpy(dtype=float)
        budgets = base["mc_samples"].to_numpy(dtype=float)
        for index, row in state.iterrows():
            seconds = (
                float(row["seconds_per_call"]) if pd.notna(row["seconds_per_call"]) else np.nan
            )
            if row["mc_samples"] in mc.index:
                out.loc[index, "cost_vs_mc"] = seconds / float(mc[row["mc_samples"]])
            if len(base) < 2 or not np.isfinite(seconds):
                continue
            budget = _loglog(seconds, costs, budgets)
            mse = _loglog(budget, budgets, base["mse"].to_numpy(dtype=float))
            out.loc[index, "time_budget"] = budget
            # Relative slack: the log-log round trip gives the baseline's own S = 8 back as
            # 7.999999999999998, which a strict bound calls extrapolated.
            inside = budgets[0] * (1 - 1e-9) <= budget <= budgets[-1] * (1 + 1e-9)
            out.loc[index, "time_extrapolated"] = not inside
            out.loc[index, "time_mse_ratio"] = mse / float(row["mse"])
    return out


def ranking_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (suite, [q,] S, estimator), the worst and median over (task, kernel) of
    :func:`summary_table`.

    Columns: ``worst_state_mse_ratio`` (the smallest single state's MSE ratio vs naive iid MC at
    equal EI evaluations over every cell), ``worst_state`` (its task/kernel and seed),
    ``worst_state_high`` (that state's upper rebuild CI bound), ``median_mse_ratio`` (median over
    cells of the median over states; with an even count, the geometric midpoint of the middle two,
    as :func:`median_interval`), ``worst_median_mse_ratio`` (the smallest median over
    states) with ``worst_cell``, ``worst_mse_ratio`` (the smallest geometric mean over states)
    and ``worst_mse_ratio_low`` (the smallest lower bound of it), ``worst_point_mse_ratio``,
    ``max_bias_share`` and ``max_excess_bias_share`` (over states), ``states`` (fewest per cell),
    ``undefined_states`` (states over all cells whose MSE ratio is undefined, left out of the
    above; :func:`defined_ratios`), ``unconverged_states`` (those left out for their reference,
    :func:`unconverged_reference`), ``n_evaluations`` (range), and where the rows have a cost:
    ``seconds_per_call`` (median over cells), ``cost_vs_mc`` (median over states of the call's
    cost over naive MC's, by :func:`median_interval` as every median of ratios here) and
    ``time_mse_ratio_median`` / ``time_mse_ratio_worst`` (median and smallest over states of the equal-time MSE ratio against
    :data:`TIME_BASELINE`, :func:`equal_time_frame`). Sorted by ``worst_state_mse_ratio``, best
    first, within each ``S``.
    """
    table = summary_table(frame)
    if table.empty:
        return table
    frame, batch = with_batch(frame)
    table = table.assign(cell=table["task"] + "/" + table["kernel"])
    timed = equal_time_frame(_with_bias_share(frame)) if "seconds_per_call" in frame else None
    if timed is not None:  # an equal-time ratio is of MSEs against the reference too
        timed.loc[unconverged_reference(timed), "time_mse_ratio"] = np.nan
    rows = []
    for key, group in table.groupby(["suite", *batch, "mc_samples", "estimator"], sort=False):
        suite, s, name = key[0], key[-2], key[-1]
        # Smallest first, NaN (no defined state in the cell) last: without any defined ratio
        # the row is NaN, where idxmin would raise.
        worst_state = group.sort_values("mse_ratio_worst", kind="stable").iloc[0]
        worst_median = group.sort_values("mse_ratio_median", kind="stable").iloc[0]
        row = {
            "suite": suite,
            **({BATCH: key[1]} if batch else {}),
            "mc_samples": s,
            "estimator": name,
            "n_evaluations": f"{group['n_evaluations'].min()}-{group['n_evaluations'].max()}",
            "states": int(group["states"].min()),
            "undefined_states": int(group["mse_ratio_undefined"].sum()),
            "unconverged_states": int(group["mse_ratio_unconverged"].sum()),
            "worst_state_mse_ratio": worst_state["mse_ratio_worst"],
            "worst_state": f"{worst_state['cell']} {worst_state['mse_ratio_worst_state']}",
            "worst_state_high": worst_state["mse_ratio_worst_high"],
            "median_mse_ratio": median_interval(group["mse_ratio_median"]).center,
            "worst_median_mse_ratio": worst_median["mse_ratio_median"],
            "worst_cell": worst_median["cell"],
            "worst_mse_ratio": group["mse_ratio"].min(),
            "worst_mse_ratio_low": group["mse_ratio_low"].min(),
            "worst_point_mse_ratio": group["median_point_mse_ratio"].min(),
            "max_bias_share": group["bias_share_max"].max(),
            "max_excess_bias_share": group["excess_bias_share_max"].max()
            if "excess_bias_share_max" in group
            else np.nan,
        }
        if timed is not None:
            mine = timed[
                (timed["suite"] == suite)
                & (timed["mc_samples"] == s)
                & (timed["estimator"] == name)
                & (timed[BATCH] == key[1] if batch else True)
            ]
            ratios = mine["time_mse_ratio"].to_numpy(dtype=float)
            row["seconds_per_call"] = group["seconds_per_call"].median()
            row["cost_vs_mc"] = median_interval(mine["cost_vs_mc"]).center
            row["time_mse_ratio_median"] = median_interval(ratios).center
            row["time_mse_ratio_worst"] = (
                float(np.nanmin(ratios)) if np.isfinite(ratios).any() else np.nan
            )
            row["time_extrapolated"] = int(mine["time_extrapolated"].sum())
        rows.append(row)
    ranking = pd.DataFrame(rows)
    return ranking.sort_values(
        ["suite", *batch, "mc_samples", "worst_state_mse_ratio"],
        ascending=[True, *[True] * len(batch), True, False],
        kind="stable",
    ).reset_index(drop=True)


def default_rule_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The rule that picks orthobo's default estimator, per (suite, [q,] estimator) over all
    budgets.

    Per estimator, over every (task, kernel, S, state) whose MSE ratio is defined
    and whose reference converged (:func:`defined_ratios`, :func:`unconverged_reference`, as in
    :func:`summary_table`; ``undefined_states`` and ``unconverged_states`` count the others,
    ``states`` all, each a state at one S, a state-budget): ``worst_state_mse_ratio`` (the smallest
    MSE ratio vs naive iid MC at equal EI evaluations) and ``worst_state`` (where),
    ``min_upper_bound`` (the smallest upper rebuild-CI bound over states: below 1 means
    significantly worse than naive MC on some state) with ``min_upper_state``,
    ``max_bias_share``, ``median_excess_bias_share`` and ``max_excess_bias_share`` (over the
    states whose reference converged; :func:`_with_bias_share`) and ``eligible``
    (``median_excess_bias_share <=`` :data:`NEGLIGIBLE_BIAS_SHARE` and ``min_upper_bound >= 1``).
    The bias test takes the median over states because the excess share of one state is noisy
    (its bias estimate is a difference of two terms of order ``Var / R``); the worst-state MSE
    ratio already charges a state's bias. Sorted eligible first, then by
    ``worst_state_mse_ratio``: the first row is the default by the rule (README, "Choosing the
    default estimator").
    """
    frame, batch = with_batch(_with_bias_share(frame))
    if frame.empty:
        return pd.DataFrame(columns=["suite", *batch, "estimator"])
    frame = _without_unconverged(frame)
    if "state_iteration" not in frame:
        frame = frame.assign(state_iteration=0)
    with_iteration = _with_iteration(frame)

    def where(row: pd.Series) -> str:
        batch_size = f" q={row[BATCH]}" if batch and row[BATCH] != 1 else ""
        return (
            f"{row['task']}/{row['kernel']}{batch_size} S={row['mc_samples']} "
            f"{_state_label(row, with_iteration)}"
        )

    rows = []
    for key, group in frame.groupby(["suite", *batch, "estimator"], sort=False):
        suite, name = key[0], key[-1]
        # Over the states with a defined MSE ratio, as the summary tables: an estimator without
        # any (0 / 0 on every state, constrained EI underflowing) gets NaN, not eligible.
        worst = _smallest_defined(group, "mse_ratio")
        upper = _smallest_defined(group, "mse_ratio", by="mse_ratio_high")
        worst_ratio = np.nan if worst is None else float(worst["mse_ratio"])
        min_upper = np.nan if upper is None else float(upper["mse_ratio_high"])
        share = group["excess_bias_share" if "excess_bias_share" in group else "bias_share"]
        bias = float(share.median())
        unconverged = _unconverged(group, "mse_ratio")
        rows.append(
            {
                "suite": suite,
                **({BATCH: key[1]} if batch else {}),
                "estimator": name,
                "states": len(group),
                "undefined_states": int(np.isnan(defined_ratios(group["mse_ratio"])).sum())
                - unconverged,
                "unconverged_states": unconverged,
                "worst_state_mse_ratio": worst_ratio,
                "worst_state": "" if worst is None else where(worst),
                "min_upper_bound": min_upper,
                "min_upper_state": "" if upper is None else where(upper),
                "max_bias_share": float(group["bias_share"].max()),
                "median_excess_bias_share": bias,
                "max_excess_bias_share": float(share.max()),
                "eligible": bool(bias <= NEGLIGIBLE_BIAS_SHARE and min_upper >= 1.0),
            }
        )
    table = pd.DataFrame(rows)
    return table.sort_values(
        ["suite", *batch, "eligible", "worst_state_mse_ratio"],
        ascending=[True, *[True] * len(batch), False, False],
        kind="stable",
    ).reset_index(drop=True)


def format_summary(frame: pd.DataFrame) -> str:
    """Fixed-width text of :func:`summary_table`, :func:`ranking_table` and
    :func:`default_rule_table` (3 significant digits).

    ``n_ev``: EI evaluations behind one estimate (ratios are against naive MC at that count);
    ``undef``: states whose MSE ratio is undefined, left out of its statistics
    (:func:`defined_ratios`); ``unref``: states left out of them for a reference too far from
    converged (:func:`unconverged_reference`);
    ``CI``: over ``states`` or ``rebuilds``; ``median``: median over states [order-statistic
    interval over states] and ``level``, that interval's exact coverage (0.75 with 3 states);
    ``worst state``: the smallest state's ratio [its rebuild CI] and which state;
    ``gmean``: geometric mean over states; ``bias/MSE``: mean over states; ``excess``: the largest
    excess bias share over states (:func:`_with_bias_share`); ``ms/call``:
    median over states of one acquisition call's wall time (forward + backward, 512 candidates);
    ``q``: the batch size, a column where some row's is not 1; ``state-budgets``: the default
    rule's rows, a state at each S.
    """
    table = summary_table(frame)
    if table.empty:
        return "(no probe rows)"
    has_cost = "seconds_per_call" in table
    show_q = BATCH in table and bool((table[BATCH] != 1).any())

    def q_of(r: object) -> str:
        return f"{getattr(r, BATCH):>3} " if show_q else ""

    q_head = f"{'q':>3} " if show_q else ""
    lines = [
        f"{'task':<14} {'kernel':<13} {q_head}{'S':>4} {'estimator':<18} {'n_ev':>4} {'states':>6} "
        f"{'undef':>5} {'unref':>5} {'CI':<8} {'MSE ratio median [CI]':>28} {'level':>5} "
        f"{'worst state [rebuild CI]':>26} "
        f"{'(state)':<9} {'gmean':>7} {'var ratio median':>16} {'var worst':>9} "
        f"{'bias/MSE':>8} {'excess':>6} {'top-1':>6} {'flip':>6}"
        + (f" {'ms/call':>8}" if has_cost else "")
    ]
    for r in table.itertuples():
        lines.append(
            f"{r.task:<14} {r.kernel:<13} {q_of(r)}{r.mc_samples:>4} {r.estimator:<18} "
            f"{r.n_evaluations:>4} {r.states:>6} {r.mse_ratio_undefined:>5} "
            f"{r.mse_ratio_unconverged:>5} {r.ci_over:<8} "
            f"{ci(r.mse_ratio_median, r.mse_ratio_median_low, r.mse_ratio_median_high):>28} "
            f"{r.mse_ratio_median_level:>5.3g} "
            f"{ci(r.mse_ratio_worst, r.mse_ratio_worst_low, r.mse_ratio_worst_high):>26} "
            f"{r.mse_ratio_worst_state:<9} {r.mse_ratio:>7.3g} {r.var_ratio_median:>16.3g} "
            f"{r.var_ratio_worst:>9.3g} {r.bias_share:>8.3g} "
            f"{getattr(r, 'excess_bias_share_max', np.nan):>6.3g} "
            f"{r.top1_agreement:>6.3g} {r.flip_rate:>6.3g}"
            + (f" {1000 * r.seconds_per_call:>8.3g}" if has_cost else "")
        )
    ranking = ranking_table(frame)
    timed = "time_mse_ratio_median" in ranking
    lines += [
        "",
        "Ranking at equal EI evaluations: worst state over every (task, kernel) of the MSE ratio "
        "vs naive iid MC [its upper rebuild CI bound]"
        + (
            f"; at equal time: MSE of {TIME_BASELINE} at the budget of equal call time / MSE "
            "(> 1: better than it), median and worst state"
            if timed
            else ""
        ),  # fmt: skip
        f"{q_head}{'S':>4} {'estimator':<18} {'n_ev':>8} {'states':>6} {'undef':>5} {'unref':>5} "
        f"{'worst state':>11} "
        f"{'(high)':>7} "
        f"{'where':<36} {'median':>7} {'worst median':>12} {'max excess bias':>15}"
        + (f" {'ms/call':>8} {'x mc':>5} {'time median':>11} {'time worst':>10}" if timed else ""),
    ]
    for r in ranking.itertuples():
        lines.append(
            f"{q_of(r)}{r.mc_samples:>4} {r.estimator:<18} {r.n_evaluations:>8} {r.states:>6} "
            f"{r.undefined_states:>5} {r.unconverged_states:>5} "
            f"{r.worst_state_mse_ratio:>11.3g} {r.worst_state_high:>7.3g} {r.worst_state:<36} "
            f"{r.median_mse_ratio:>7.3g} {r.worst_median_mse_ratio:>12.3g} "
            f"{r.max_excess_bias_share:>15.3g}"
            + (
                f" {1000 * r.seconds_per_call:>8.3g} {r.cost_vs_mc:>5.2f} "
                f"{r.time_mse_ratio_median:>11.3g} {r.time_mse_ratio_worst:>10.3g}"
                if timed
                else ""
            )
        )
    rule = default_rule_table(frame)
    lines += [
        "",
        "Default rule: among estimators with a median excess bias/MSE over states <= "
        f"{NEGLIGIBLE_BIAS_SHARE:g} and no state significantly below naive MC "
        "(upper rebuild CI bound >= 1), the best worst-state MSE ratio over all cells and budgets",
        f"{q_head}{'estimator':<18} {'state-budgets':>13} {'worst state':>11} {'where':<40} "
        f"{'min high':>8} {'where':<40} {'excess bias median':>18} {'max':>6} {'eligible':>8}",
    ]
    for r in rule.itertuples():
        lines.append(
            f"{q_of(r)}{r.estimator:<18} {r.states:>13} {r.worst_state_mse_ratio:>11.3g} "
            f"{r.worst_state:<40} "
            f"{r.min_upper_bound:>8.3g} {r.min_upper_state:<40} {r.median_excess_bias_share:>18.3g} "
            f"{r.max_excess_bias_share:>6.3g} {'yes' if r.eligible else 'no':>8}"
        )
    return "\n".join(lines)
