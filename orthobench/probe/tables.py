"""Text tables of probe summaries (for the terminal and for issue notes)."""

from __future__ import annotations

import pandas as pd

_GROUP = ["task", "kernel", "mc_samples", "estimator"]


def summary_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, kernel, S, estimator): means over probe states (seeds, iterations).

    ``probe_variance`` and the flip/top-1 rates are averaged (their std over states in ``*_sd``);
    ratio columns are averaged with the widest CI bounds across states, so a single state's bad
    CI is not hidden by averaging.
    """
    if frame.empty:
        return frame
    grouped = frame.groupby(_GROUP, sort=False)
    table = grouped.agg(
        states=("seed", "size"),
        probe_variance=("probe_variance", "mean"),
        probe_variance_sd=("probe_variance", "std"),
        probe_variance_log=("probe_variance_log", "mean"),
        bias_sq=("bias_sq", "mean"),
        var_ratio=("var_ratio", "mean"),
        var_ratio_low=("var_ratio_low", "min"),
        var_ratio_high=("var_ratio_high", "max"),
        mse_ratio=("mse_ratio", "mean"),
        mse_ratio_low=("mse_ratio_low", "min"),
        mse_ratio_high=("mse_ratio_high", "max"),
        median_point_var_ratio=("median_point_var_ratio", "mean"),
        top1_agreement=("top1_agreement", "mean"),
        flip_rate=("flip_rate", "mean"),
        regret=("regret", "mean"),
        baseline=("baseline", "first"),
    )
    return table.reset_index()


def format_summary(frame: pd.DataFrame) -> str:
    """Fixed-width text of :func:`summary_table`."""
    table = summary_table(frame)
    if table.empty:
        return "(no probe rows)"
    lines = [
        f"{'task':<14} {'kernel':<13} {'S':>4} {'estimator':<16} {'probe var':>10} {'var log':>8} "
        f"{'var ratio [95% CI]':>22} {'MSE ratio [95% CI]':>22} {'top-1':>6} {'flip':>6} {'regret':>8}"
    ]
    for r in table.itertuples():
        lines.append(
            f"{r.task:<14} {r.kernel:<13} {r.mc_samples:>4} {r.estimator:<16} {r.probe_variance:>10.3g} "
            f"{r.probe_variance_log:>8.3g} {f'{r.var_ratio:.2f} [{r.var_ratio_low:.2f}, {r.var_ratio_high:.2f}]':>22} "
            f"{f'{r.mse_ratio:.2f} [{r.mse_ratio_low:.2f}, {r.mse_ratio_high:.2f}]':>22} "
            f"{r.top1_agreement:>6.3f} {r.flip_rate:>6.3f} {r.regret:>8.3g}"
        )
    return "\n".join(lines)
