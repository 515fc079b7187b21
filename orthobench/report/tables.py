"""Summary tables computed from the per-evaluation results frame."""

from __future__ import annotations

import numpy as np
import pandas as pd

Z95 = 1.959963984540054


def curve_column(frame: pd.DataFrame) -> str:
    """``regret`` when every row of ``frame`` has it (known optimum), else ``best_y``."""
    return "regret" if frame["regret"].notna().all() else "best_y"


def best_so_far_curves(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean and normal-approximation 95% interval of the best-so-far curve over seeds.

    Returns one row per (task, optimizer, iteration) with columns ``metric`` (the curve column),
    ``mean``, ``low``, ``high`` and ``n`` (seeds). Runs are trimmed to the shortest seed so every
    point averages the same seeds.
    """
    rows = []
    for (task, optimizer), group in frame.groupby(["task", "optimizer"], sort=True):
        column = curve_column(frame[frame["task"] == task])
        wide = group.pivot_table(
            index="iteration", columns="seed", values=column, aggfunc="last"
        ).dropna()
        values = wide.to_numpy(dtype=float)
        n = values.shape[1]
        mean = values.mean(axis=1)
        half = Z95 * values.std(axis=1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros_like(mean)
        rows.append(
            pd.DataFrame(
                {
                    "task": task,
                    "optimizer": optimizer,
                    "metric": column,
                    "iteration": wide.index.to_numpy(),
                    "mean": mean,
                    "low": mean - half,
                    "high": mean + half,
                    "n": n,
                }
            )
        )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def final_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Final best-so-far value per (task, optimizer): mean, 95% half-width, seeds, per-step seconds."""
    rows = []
    for (task, optimizer), group in frame.groupby(["task", "optimizer"], sort=True):
        column = curve_column(frame[frame["task"] == task])
        last = group.sort_values("iteration").groupby("seed").tail(1)[column].to_numpy(dtype=float)
        bo = group[group["phase"] == "bo"]
        n = len(last)
        rows.append(
            {
                "task": task,
                "optimizer": optimizer,
                "metric": column,
                "final_mean": float(np.mean(last)),
                "final_ci95": float(Z95 * np.std(last, ddof=1) / np.sqrt(n))
                if n > 1
                else float("nan"),
                "seeds": n,
                "evaluations": int(group.groupby("seed").size().max()),
                "fit_s_per_step": float(bo["fit_seconds"].mean()) if len(bo) else float("nan"),
                "acq_s_per_step": float(bo["acq_seconds"].mean()) if len(bo) else float("nan"),
                "failed_evals": int((group["status"] != "ok").sum()),
                "fallbacks": int(group["fallback"].notna().sum()),
            }
        )
    return pd.DataFrame(rows)
