r"""Probe summaries over BO states: the tables of the terminal, the report and issue notes.

Ratios are heavy-tailed across BO states (a state where one estimator's variance is nearly zero
gives an enormous ratio), and the rebuild CIs of one state do not cover the spread between states
(docs/design.md, "Ratios: CIs and several states"). So every ratio column is aggregated over
states as a geometric mean, :math:`\exp(\frac{1}{n}\sum_i \log \rho_i)`, with a 95% percentile
bootstrap interval over states (:func:`geometric_mean_interval`). With one
state there is nothing to resample: the row keeps that state's bootstrap CI over rebuilds, and
``ci_over`` says which interval a row shows.

Example:
    >>> import pandas as pd
    >>> rows = pd.DataFrame({"suite": "s", "task": "t", "kernel": "k", "mc_samples": 8,
    ...     "estimator": "e", "n_evaluations": 8, "seed": [0, 1], "var_ratio": [0.04, 5e29]})
    >>> table = summary_table(rows, columns=["var_ratio"])
    >>> print(f"{table['var_ratio'].iloc[0]:.3g}", table["ci_over"].iloc[0])
    1.41e+14 states
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

#: Bootstrap resamples of :func:`geometric_mean_interval` and their seed (tables are reproducible).
N_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
GROUP = ["suite", "task", "kernel", "mc_samples", "estimator"]
#: Ratio columns of :class:`orthobench.results.ProbeRecord` with a rebuild CI (``*_low``,
#: ``*_high``), aggregated by geometric mean with an interval over states.
RATIOS = ("var_ratio", "mse_ratio")
#: Per-point median ratios, aggregated by geometric mean over states.
POINT_RATIOS = ("median_point_var_ratio", "median_point_mse_ratio")
#: Columns averaged arithmetically over states.
MEANS = ("probe_variance", "probe_variance_log", "bias_sq", "bias_share", "top1_agreement",
         "flip_rate", "regret")  # fmt: skip


def geometric_mean_interval(
    ratios: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """Geometric mean of positive finite ``ratios`` and its percentile bootstrap interval.

    The interval resamples the ratios (one per BO state) with :func:`scipy.stats.bootstrap`
    (``N_RESAMPLES``, seeded). Returns ``(gmean, low, high)``; the bounds are NaN with fewer
    than two ratios, and everything is NaN without any.
    """
    ratios = np.asarray(ratios, dtype=float)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    if ratios.size == 0:
        return float("nan"), float("nan"), float("nan")
    logs = np.log(ratios)
    center = float(np.exp(logs.mean()))
    if ratios.size < 2:
        return center, float("nan"), float("nan")
    if np.ptp(logs) == 0.0:
        return center, center, center
    result = stats.bootstrap(
        (logs,),
        np.mean,
        n_resamples=N_RESAMPLES,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    ci = result.confidence_interval
    return center, float(np.exp(ci.low)), float(np.exp(ci.high))


def _ratio(group: pd.DataFrame, column: str) -> dict[str, float]:
    """Geometric mean over states and its interval (states), or the one state's rebuild CI."""
    values = group[column].to_numpy(dtype=float)
    center, low, high = geometric_mean_interval(values)
    if len(values) == 1 and f"{column}_low" in group:
        low, high = float(group[f"{column}_low"].iloc[0]), float(group[f"{column}_high"].iloc[0])
    finite = values[np.isfinite(values)]
    return {
        column: center,
        f"{column}_low": low,
        f"{column}_high": high,
        f"{column}_worst": float(finite.min()) if finite.size else np.nan,
    }


def summary_table(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (suite, task, kernel, S, estimator), aggregated over probe states.

    Args:
        frame: :class:`~orthobench.results.ProbeRecord` rows (one per state and S); a report
            passes its run sets in ``suite``.
        columns: Metric columns to aggregate (default: every one present).

    Returns:
        The :data:`GROUP` columns, ``states``, ``n_evaluations`` (the largest EI count of the
        estimator over states; its ratios are against naive MC at that count), ``baseline``,
        ``ci_over`` (``states`` or ``rebuilds``) and, per ratio in :data:`RATIOS`, the geometric
        mean over states, ``*_low``/``*_high`` and ``*_worst`` (the smallest state's ratio); the
        geometric mean of each :data:`POINT_RATIOS` column; the mean of each :data:`MEANS` column
        (``bias_share`` is ``bias_sq / mse`` per state: about ``1 / rebuilds`` for an unbiased
        estimator with an exact reference).
    """
    if frame.empty:
        return pd.DataFrame(columns=[*GROUP, "states"])
    if "bias_sq" in frame and "mse" in frame:
        frame = frame.assign(bias_share=frame["bias_sq"] / frame["mse"])
    present = [c for c in (columns or [*RATIOS, *POINT_RATIOS, *MEANS]) if c in frame]
    rows = []
    for key, group in frame.groupby(GROUP, sort=False):
        row = dict(zip(GROUP, key, strict=True))
        row["states"] = len(group)
        row["n_evaluations"] = int(group["n_evaluations"].max())
        row["baseline"] = group["baseline"].iloc[0] if "baseline" in group else None
        row["ci_over"] = "states" if len(group) > 1 else "rebuilds"
        for column in present:
            if column in RATIOS:
                row.update(_ratio(group, column))
            elif column in POINT_RATIOS:
                row[column] = geometric_mean_interval(group[column].to_numpy(dtype=float))[0]
            else:
                row[column] = float(group[column].astype(float).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def ranking_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (suite, S, estimator), the worst and median over (task, kernel) of :func:`summary_table`.

    Columns: ``worst_mse_ratio`` (the smallest geometric-mean MSE ratio over states vs naive iid
    MC at equal EI evaluations), ``worst_cell`` (its task/kernel), ``worst_mse_ratio_low`` (the
    smallest lower CI bound), ``worst_state_mse_ratio`` (the smallest single state's ratio),
    ``median_mse_ratio``, ``worst_point_mse_ratio`` (the smallest per-point median ratio),
    ``max_bias_share``, ``states`` (fewest per cell), ``n_evaluations`` (range). Sorted by
    ``worst_mse_ratio``, best first, within each ``S``: how the default estimator is chosen
    (README).
    """
    table = summary_table(frame)
    if table.empty:
        return table
    table = table.assign(cell=table["task"] + "/" + table["kernel"])
    rows = []
    for (suite, s, name), group in table.groupby(["suite", "mc_samples", "estimator"], sort=False):
        worst = group.loc[group["mse_ratio"].idxmin()]
        rows.append(
            {
                "suite": suite,
                "mc_samples": s,
                "estimator": name,
                "n_evaluations": f"{group['n_evaluations'].min()}-{group['n_evaluations'].max()}",
                "states": int(group["states"].min()),
                "worst_mse_ratio": worst["mse_ratio"],
                "worst_cell": worst["cell"],
                "worst_mse_ratio_low": group["mse_ratio_low"].min(),
                "worst_state_mse_ratio": group["mse_ratio_worst"].min(),
                "median_mse_ratio": group["mse_ratio"].median(),
                "worst_point_mse_ratio": group["median_point_mse_ratio"].min(),
                "max_bias_share": group["bias_share"].max(),
            }
        )
    ranking = pd.DataFrame(rows)
    return ranking.sort_values(
        ["suite", "mc_samples", "worst_mse_ratio"], ascending=[True, True, False], kind="stable"
    ).reset_index(drop=True)


def _ci(value: float, low: float, high: float) -> str:
    return f"{value:.3g} [{low:.3g}, {high:.3g}]"


def format_summary(frame: pd.DataFrame) -> str:
    """Fixed-width text of :func:`summary_table`, then of :func:`ranking_table` (3 significant
    digits).

    ``n_ev``: EI evaluations behind one estimate (ratios are against naive MC at that count);
    ``CI``: over ``states`` or ``rebuilds``; ``bias/MSE``: ``bias_share``; ``pt MSE``: geometric
    mean over states of the median over probe points of the per-point MSE ratio.
    """
    table = summary_table(frame)
    if table.empty:
        return "(no probe rows)"
    lines = [
        f"{'task':<14} {'kernel':<13} {'S':>4} {'estimator':<18} {'n_ev':>4} {'states':>6} "
        f"{'CI':<8} {'probe var':>10} {'var log':>9} {'var ratio [95% CI]':>28} "
        f"{'MSE ratio [95% CI]':>28} {'pt MSE':>8} {'bias/MSE':>8} {'top-1':>6} {'flip':>6} "
        f"{'regret':>8}"
    ]
    for r in table.itertuples():
        lines.append(
            f"{r.task:<14} {r.kernel:<13} {r.mc_samples:>4} {r.estimator:<18} "
            f"{r.n_evaluations:>4} {r.states:>6} {r.ci_over:<8} {r.probe_variance:>10.3g} "
            f"{r.probe_variance_log:>9.3g} "
            f"{_ci(r.var_ratio, r.var_ratio_low, r.var_ratio_high):>28} "
            f"{_ci(r.mse_ratio, r.mse_ratio_low, r.mse_ratio_high):>28} "
            f"{r.median_point_mse_ratio:>8.3g} {r.bias_share:>8.3g} "
            f"{r.top1_agreement:>6.3g} {r.flip_rate:>6.3g} {r.regret:>8.3g}"
        )
    ranking = ranking_table(frame)
    lines += [
        "",
        "Ranking: worst case over (task, kernel) of the geometric-mean MSE ratio over states vs "
        "naive iid MC at equal EI evaluations",
        f"{'S':>4} {'estimator':<18} {'n_ev':>8} {'states':>6} {'worst MSE ratio':>15} "
        f"{'worst cell':<28} {'worst low':>9} {'worst state':>11} {'median':>8} {'worst pt':>8} "
        f"{'max bias/MSE':>12}",
    ]
    for r in ranking.itertuples():
        lines.append(
            f"{r.mc_samples:>4} {r.estimator:<18} {r.n_evaluations:>8} {r.states:>6} "
            f"{r.worst_mse_ratio:>15.3g} {r.worst_cell:<28} {r.worst_mse_ratio_low:>9.3g} "
            f"{r.worst_state_mse_ratio:>11.3g} {r.median_mse_ratio:>8.3g} "
            f"{r.worst_point_mse_ratio:>8.3g} {r.max_bias_share:>12.3g}"
        )
    return "\n".join(lines)
