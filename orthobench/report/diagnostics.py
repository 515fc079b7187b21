"""OrthoBO diagnostics from each BO step's ``info``: ensemble weights and entropy, fallbacks,
Laplace eigenvalue floors (:class:`orthobench.optimizers.orthobo.OrthoBO` writes them).

A step is an OrthoBO-pipeline step (``orthobo`` or ``mc-ei``) when its info has
``ensemble_weights``; other optimizers' rows are ignored here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.report.data import step_info
from orthobench.report.tables import KEY


def ensemble_steps(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (OrthoBO step, ensemble member).

    Columns: the :data:`~.tables.KEY`, ``seed``, ``evaluation`` (1-based), ``kernel``, ``weight``,
    ``entropy`` (of the step's weights, nats), ``max_entropy`` (``log M``), ``eig_floored``,
    ``min_eigenvalue`` (of the raw Laplace Hessian), ``jittered_draws``, ``indefinite`` (the step's
    fallback says the Hessian was not positive definite) and ``fallback`` (the step took any).
    """
    columns = [
        *KEY, "seed", "evaluation", "kernel", "weight", "entropy", "max_entropy", "eig_floored",
        "min_eigenvalue", "jittered_draws", "indefinite", "fallback",
    ]  # fmt: skip
    if runs.empty:
        return pd.DataFrame(columns=columns)
    bo = runs[runs["phase"] == "bo"]
    info = step_info(bo)
    rows = []
    for row, step in zip(bo.itertuples(), info, strict=True):
        if "ensemble_weights" not in step:
            continue
        fallback = row.fallback if isinstance(row.fallback, str) else ""
        members = len(step["ensemble_weights"])
        for m in range(members):
            rows.append(
                (
                    row.run_set,
                    row.task,
                    row.optimizer,
                    row.seed,
                    row.iteration + 1,
                    step["ensemble_kernels"][m],
                    step["ensemble_weights"][m],
                    step.get("ensemble_entropy", np.nan),
                    step.get("ensemble_max_entropy", np.nan),
                    bool(step.get("eig_floored", [False] * members)[m]),
                    step.get("min_eigenvalue", [np.nan] * members)[m],
                    step.get("jittered_draws", [0] * members)[m],
                    "not positive definite" in fallback,
                    bool(fallback),
                )
            )
    return pd.DataFrame(rows, columns=columns)


def diagnostics_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Counts per cell (key and seed) from :func:`ensemble_steps`.

    Columns: the :data:`~.tables.KEY`, ``seed``, ``steps``, ``kernels``, ``fallback_steps``,
    ``indefinite_steps``, ``floored_steps`` (steps where some member's Hessian eigenvalues were
    raised to the floor), ``jittered_draws`` (total), ``min_eigenvalue`` (smallest raw eigenvalue
    of any step), ``final_entropy`` (of the last step's weights).
    """
    columns = [
        *KEY, "seed", "steps", "kernels", "fallback_steps", "indefinite_steps", "floored_steps",
        "jittered_draws", "min_eigenvalue", "final_entropy",
    ]  # fmt: skip
    if steps.empty:
        return pd.DataFrame(columns=columns)
    per_step = steps.groupby([*KEY, "seed", "evaluation"], sort=True).agg(
        kernels=("kernel", "size"),
        fallback=("fallback", "any"),
        indefinite=("indefinite", "any"),
        floored=("eig_floored", "any"),
        jittered=("jittered_draws", "sum"),
        min_eigenvalue=("min_eigenvalue", "min"),
        entropy=("entropy", "first"),
    )
    table = per_step.groupby([*KEY, "seed"], sort=True).agg(
        steps=("kernels", "size"),
        kernels=("kernels", "max"),
        fallback_steps=("fallback", "sum"),
        indefinite_steps=("indefinite", "sum"),
        floored_steps=("floored", "sum"),
        jittered_draws=("jittered", "sum"),
        min_eigenvalue=("min_eigenvalue", "min"),
        final_entropy=("entropy", "last"),
    )
    return table.reset_index()[columns]
