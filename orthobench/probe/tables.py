"""Text tables of probe summaries (for the terminal and for issue notes)."""

from __future__ import annotations

import pandas as pd

_GROUP = ["task", "kernel", "mc_samples", "estimator"]


def summary_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, kernel, S, estimator): means over probe states (seeds, iterations).

    ``probe_variance`` and the flip/top-1 rates are averaged (their std over states in ``*_sd``);
    ratio columns are averaged with the widest CI bounds across states, so a single state's bad
    CI is not hidden by averaging. ``n_evaluations`` is the largest EI count of the estimator
    over states (its ratios are against naive MC at that count); ``bias_share`` is the mean over
    states of ``bias_sq / mse``: about ``1 / rebuilds`` for an unbiased estimator with an exact
    reference (the rebuild mean's own variance), plus the reference's squared error share.
    """
    if frame.empty:
        return frame
    frame = frame.assign(bias_share=frame["bias_sq"] / frame["mse"])
    columns = {
        "states": ("seed", "size"),
        "n_evaluations": ("n_evaluations", "max"),
        "probe_variance": ("probe_variance", "mean"),
        "probe_variance_sd": ("probe_variance", "std"),
        "probe_variance_log": ("probe_variance_log", "mean"),
        "bias_sq": ("bias_sq", "mean"),
        "bias_share": ("bias_share", "mean"),
        "var_ratio": ("var_ratio", "mean"),
        "var_ratio_low": ("var_ratio_low", "min"),
        "var_ratio_high": ("var_ratio_high", "max"),
        "mse_ratio": ("mse_ratio", "mean"),
        "mse_ratio_low": ("mse_ratio_low", "min"),
        "mse_ratio_high": ("mse_ratio_high", "max"),
        "median_point_var_ratio": ("median_point_var_ratio", "mean"),
        "median_point_mse_ratio": ("median_point_mse_ratio", "mean"),
        "top1_agreement": ("top1_agreement", "mean"),
        "flip_rate": ("flip_rate", "mean"),
        "regret": ("regret", "mean"),
        "baseline": ("baseline", "first"),
    }
    return frame.groupby(_GROUP, sort=False).agg(**columns).reset_index()


def ranking_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (S, estimator), the worst and median over (task, kernel) of :func:`summary_table`.

    Columns: ``worst_mse_ratio`` (the smallest state-averaged MSE ratio vs naive iid MC at equal
    EI evaluations), ``worst_cell`` (its task/kernel), ``worst_mse_ratio_low`` (the smallest lower
    CI bound), ``median_mse_ratio``, ``worst_point_mse_ratio`` (the smallest per-point median
    ratio), ``max_bias_share``, ``n_evaluations`` (range). Sorted by ``worst_mse_ratio``, best
    first, within each ``S``: how the default estimator is chosen (README).
    """
    table = summary_table(frame)
    if table.empty:
        return table
    table = table.assign(cell=table["task"] + "/" + table["kernel"])
    rows = []
    for (s, name), group in table.groupby(["mc_samples", "estimator"], sort=False):
        worst = group.loc[group["mse_ratio"].idxmin()]
        rows.append(
            {
                "mc_samples": s,
                "estimator": name,
                "n_evaluations": f"{group['n_evaluations'].min()}-{group['n_evaluations'].max()}",
                "worst_mse_ratio": worst["mse_ratio"],
                "worst_cell": worst["cell"],
                "worst_mse_ratio_low": group["mse_ratio_low"].min(),
                "median_mse_ratio": group["mse_ratio"].median(),
                "worst_point_mse_ratio": group["median_point_mse_ratio"].min(),
                "max_bias_share": group["bias_share"].max(),
            }
        )
    ranking = pd.DataFrame(rows)
    return ranking.sort_values(
        ["mc_samples", "worst_mse_ratio"], ascending=[True, False], kind="stable"
    ).reset_index(drop=True)


def _ci(value: float, low: float, high: float) -> str:
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def format_summary(frame: pd.DataFrame) -> str:
    """Fixed-width text of :func:`summary_table`, then of :func:`ranking_table`.

    ``n_ev``: EI evaluations behind one estimate (ratios are against naive MC at that count);
    ``bias/MSE``: ``bias_share``; ``pt MSE``: median over probe points of the per-point MSE ratio.
    """
    table = summary_table(frame)
    if table.empty:
        return "(no probe rows)"
    lines = [
        f"{'task':<14} {'kernel':<13} {'S':>4} {'estimator':<18} {'n_ev':>4} {'probe var':>10} "
        f"{'var log':>8} {'var ratio [95% CI]':>22} {'MSE ratio [95% CI]':>24} {'pt MSE':>7} "
        f"{'bias/MSE':>8} {'top-1':>6} {'flip':>6} {'regret':>8}"
    ]
    for r in table.itertuples():
        lines.append(
            f"{r.task:<14} {r.kernel:<13} {r.mc_samples:>4} {r.estimator:<18} {r.n_evaluations:>4} "
            f"{r.probe_variance:>10.3g} {r.probe_variance_log:>8.3g} "
            f"{_ci(r.var_ratio, r.var_ratio_low, r.var_ratio_high):>22} "
            f"{_ci(r.mse_ratio, r.mse_ratio_low, r.mse_ratio_high):>24} "
            f"{r.median_point_mse_ratio:>7.2f} "
            f"{r.bias_share:>8.3f} {r.top1_agreement:>6.3f} {r.flip_rate:>6.3f} {r.regret:>8.3g}"
        )
    ranking = ranking_table(frame)
    lines += [
        "",
        "Ranking: worst case over (task, kernel) of the MSE ratio vs naive iid MC at equal EI evaluations",
        f"{'S':>4} {'estimator':<18} {'n_ev':>8} {'worst MSE ratio':>15} {'worst cell':<28} "
        f"{'worst low':>9} {'median':>8} {'worst pt':>8} {'max bias/MSE':>12}",
    ]
    for r in ranking.itertuples():
        lines.append(
            f"{r.mc_samples:>4} {r.estimator:<18} {r.n_evaluations:>8} {r.worst_mse_ratio:>15.2f} "
            f"{r.worst_cell:<28} {r.worst_mse_ratio_low:>9.2f} {r.median_mse_ratio:>8.2f} "
            f"{r.worst_point_mse_ratio:>8.2f} {r.max_bias_share:>12.3f}"
        )
    return "\n".join(lines)
