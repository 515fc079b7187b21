"""OrthoBO diagnostics from each BO step's ``info``: ensemble weights and entropy, fallbacks,
Laplace eigenvalue floors.

A step is an OrthoBO-pipeline step (``orthobo``, ``mc-ei``) when its info parses as an
:class:`~orthobench.diagnostics.OrthoBOStep`; other optimizers' rows are ignored here.
"""

from __future__ import annotations

import pandas as pd

from orthobench.diagnostics import OrthoBOStep
from orthobench.report.data import step_info
from orthobench.report.tables import KEY


def ensemble_steps(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (OrthoBO step, ensemble member).

    A step of ``q`` points is one step, at its first evaluation.

    Columns: the :data:`~.tables.KEY`, ``seed``, ``evaluation`` (1-based), ``kernel``, ``weight``,
    ``entropy`` (of the step's weights, nats), ``max_entropy`` (``log M``), ``eig_floored``,
    ``min_eigenvalue`` (of the raw Laplace Hessian), ``jittered_draws``, ``indefinite`` (that
    eigenvalue is <= 0) and ``fallback`` (the step took any).
    """
    columns = [
        *KEY, "seed", "evaluation", "kernel", "weight", "entropy", "max_entropy", "eig_floored",
        "min_eigenvalue", "jittered_draws", "indefinite", "fallback",
    ]  # fmt: skip
    if runs.empty:
        return pd.DataFrame(columns=columns)
    bo = runs[runs["phase"] == "bo"]
    if "batch" in bo:  # the q rows of a step carry its info: one row per step
        bo = bo.sort_values("iteration", kind="stable").drop_duplicates([*KEY, "seed", "batch"])
    info = step_info(bo)
    rows = []
    for row, parsed in zip(bo.itertuples(), info, strict=True):
        step = OrthoBOStep.from_info(parsed)
        if step is None:
            continue
        ensemble = step.ensemble
        for m, kernel in enumerate(ensemble.kernels):
            min_eigenvalue = step.min_eigenvalue[m]  # None: stored non-finite
            rows.append(
                (
                    row.run_set,
                    row.task,
                    row.optimizer,
                    row.seed,
                    row.iteration + 1,
                    kernel,
                    ensemble.weights[m],
                    ensemble.entropy,
                    ensemble.max_entropy,
                    bool(step.eig_floored[m]),
                    min_eigenvalue,
                    step.jittered_draws[m],
                    min_eigenvalue is not None and min_eigenvalue <= 0,
                    isinstance(row.fallback, str) and bool(row.fallback),
                )
            )
    return pd.DataFrame(rows, columns=columns)


def diagnostics_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Counts per cell (key and seed) from :func:`ensemble_steps`.

    Columns: the :data:`~.tables.KEY`, ``seed``, ``steps``, ``kernels``, ``fallback_steps``,
    ``indefinite_steps`` (steps where some member's Hessian was indefinite), ``floored_steps``
    (steps where some member's Hessian eigenvalues were raised to the floor), ``jittered_draws``
    (total), ``min_eigenvalue`` (smallest raw eigenvalue of any step), ``final_entropy`` (of the
    last step's weights).
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
