"""Stored result sets for the report tests, written as the loop and the probe write them.

Runs: :func:`write_cell` turns a list of observed values into the
:class:`~orthobench.results.RunRecord` rows of one cell (best-so-far and regret computed as
:func:`orthobench.loop.run_cell` does) and stores them with
:meth:`~orthobench.results.ResultStore.write_cell`. Probe: :func:`write_probe_state` stores one
state's :class:`~orthobench.results.ProbeRecord` rows with given ratios.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from orthobench.diagnostics import EnsembleWeights, OrthoBOStep
from orthobench.results import ProbeRecord, ResultStore, RunRecord
from orthobench.suite import Cell, ComponentSpec

NAN = float("nan")


def cell(
    suite: str, task: str, optimizer: str, seed: int, n_init: int, budget: int, q: int = 1
) -> Cell:
    """A cell of a built-in task and optimizer proposing ``q`` points per BO step; ``task`` and
    ``optimizer`` are ``label`` or ``label=name``."""
    task_label, _, task_name = task.partition("=")
    opt_label, _, opt_name = optimizer.partition("=")
    return Cell(
        suite=suite,
        task=ComponentSpec(name=task_name or "hartmann6", label=task_label),
        optimizer=ComponentSpec(name=opt_name or opt_label, label=opt_label),
        seed=seed,
        n_init=n_init,
        budget=budget,
        q=q,
    )


def write_cell(
    root: Path,
    spec: Cell,
    ys: Sequence[float],
    *,
    optimum: float | None = 0.0,
    outliers: Sequence[int] = (),
    infos: Sequence[dict] | None = None,
    fallbacks: Sequence[str | None] | None = None,
    seconds: float = 0.5,
    wall_seconds: Sequence[float] | None = None,
    label: str | None = None,
    metadata: dict | None = None,
    constraints: Sequence[Sequence[float]] | None = None,
) -> None:
    """Store a cell whose evaluation ``i`` observed ``ys[i]`` (NaN: a failed evaluation) and
    finished at ``wall_seconds[i]`` (default NaN: not recorded), with ``constraints[i]`` (feasible
    where all are <= 0; default none); BO evaluation ``j`` belongs to step ``j // spec.q + 1``."""
    records, best = [], math.inf
    for i, y in enumerate(ys):
        values = [float(v) for v in constraints[i]] if constraints else []
        feasible = all(v <= 0 for v in values)
        ok = math.isfinite(y)
        best = min(best, y) if ok and feasible else best
        bo = i >= spec.n_init
        records.append(
            RunRecord(
                suite=spec.suite,
                cell_id=spec.id,
                task=spec.task.label,
                optimizer=label or spec.optimizer.label,
                seed=spec.seed,
                iteration=i,
                phase="bo" if bo else "init",
                q=spec.q,
                batch=(i - spec.n_init) // spec.q + 1 if bo else 0,
                x=[float(i)],
                y=y,
                y_true=None,
                best_y=best if math.isfinite(best) else None,
                regret=best - optimum if optimum is not None and math.isfinite(best) else None,
                is_outlier=i in outliers,
                fit_seconds=seconds if bo else 0.0,
                acq_seconds=seconds / 2 if bo else 0.0,
                eval_seconds=0.01,
                wall_seconds=NAN if wall_seconds is None else wall_seconds[i],
                status="ok" if ok else "invalid",
                fallback=(fallbacks[i] if fallbacks else None),
                info=json.dumps(infos[i] if infos and bo else {}),
                constraints=values,
                feasible=feasible,
            )
        )
    meta = {"device": "cpu", "git_sha": "a" * 40, "versions": {"orthobench": "0.1.0"}}
    ResultStore(root).write_cell(spec, records, {**meta, **(metadata or {})}, seconds * len(ys))


def write_probe_state(
    root: Path,
    suite: str,
    seed: int,
    ratios: dict[tuple[str, int], float],
    task: str = "hartmann6",
    kernel: str = "matern52-ard",
    q: int = 1,
) -> None:
    """Store one probe state of batch size ``q`` whose ``(estimator, S)`` rows have variance and
    MSE ratio ``ratios[...]`` (rebuild CI: the ratio / 2 to the ratio * 2)."""
    records = [
        ProbeRecord(
            suite=suite,
            task=task,
            kernel=kernel,
            estimator=name,
            mc_samples=s,
            n_evaluations=s,
            state_iteration=0,
            seed=seed,
            n_init=8,
            rebuilds=4,
            n_probes=2,
            probe_variance=1e-3 / ratio,
            probe_variance_log=0.1,
            bias_sq=1e-5,
            mse=1e-3 / ratio,
            var_ratio=ratio,
            var_ratio_low=ratio / 2,
            var_ratio_high=ratio * 2,
            mse_ratio=ratio,
            mse_ratio_low=ratio / 2,
            mse_ratio_high=ratio * 2,
            median_point_var_ratio=ratio,
            median_point_mse_ratio=ratio,
            top1_agreement=0.5,
            flip_rate=0.25,
            regret=1.0,
            baseline="mc",
            baseline_values_ei=[],
            values_ei=[0.0] * 8,
            values_log=[0.0] * 8,
            reference=[0.0, 0.0],
            cholesky_jitter=0,
            laplace_floored=False,
            laplace_min_eigenvalue=0.5,
            info="{}",
            q=q,
        )
        for (name, s), ratio in ratios.items()
    ]
    state_id = f"{task}__{kernel}__seed{seed}__it0" + (f"__q{q}" if q != 1 else "")
    state = {"suite": suite, "task": {"label": task}, "surrogate": kernel, "seed": seed}
    # A probe state's thread count is `threads` (ProbeJob.metadata), a cell's threads_per_cell.
    metadata = {"device": "cpu", "git_sha": "b" * 40, "state": state, "threads": 1}
    ResultStore(root).write_probe_state(state_id, "h", records, metadata, 1.0)


def ensemble_info(step: int) -> dict:
    """An OrthoBO step's info with a two-kernel ensemble moving towards the second kernel; the
    first kernel's Hessian is floored at even steps and indefinite from step 2."""
    w = min(0.5 + 0.1 * step, 0.9)
    return OrthoBOStep(
        estimator="orth-shrink",
        theta_sampling="iid",
        ensemble=EnsembleWeights(
            kernels=("rbf-iso", "matern52-ard"),
            weights=(1 - w, w),
            entropy=-((1 - w) * math.log(1 - w) + w * math.log(w)),
            max_entropy=math.log(2),
        ),
        eig_floored=(step % 2 == 0, False),
        min_eigenvalue=(0.2 - 0.1 * step, 0.5),
        recenter_shift=(0.0, 0.0),
        jittered_draws=(0, 1),
    ).to_info()


@pytest.fixture(scope="package")
def demo_dir(tmp_path_factory) -> Path:
    """Suite ``demo``: every report section has data.

    Tasks ``known`` (regret), ``noopt`` (no optimum; evaluation 4 of each seed an outlier) and
    ``broken`` (every evaluation NaN); optimizers ``sobol``, ``orthobo`` (a two-kernel ensemble
    whose last BO step had an indefinite Hessian, a fallback) and ``qlogei``; seeds 0-2; 3
    initial points + 3 BO steps. ``qlogei`` on ``known`` seed 2 failed. Probe: 2 states.
    """
    root = tmp_path_factory.mktemp("demo")
    init = {0: [5.0, 4.0, 6.0], 1: [3.0, 7.0, 5.0], 2: [6.0, 6.5, 4.5]}
    steps = {"sobol": [3.5, 3.2, 3.1], "orthobo": [2.0, 1.0, 0.5], "qlogei": [2.5, 2.0, 1.5]}
    for seed in range(3):
        for optimizer, bo in steps.items():
            for task in ("known", "noopt", "broken"):
                spec = cell("demo", task, optimizer, seed, n_init=3, budget=3)
                if (task, optimizer, seed) == ("known", "qlogei", 2):
                    ResultStore(root).record_failure(
                        spec, "RuntimeError: simulated crash\nsecond line", "Traceback ...", 1.0
                    )
                    continue
                ys = [v + 0.1 * seed for v in init[seed] + bo]
                if task == "broken":
                    ys = [NAN] * len(ys)
                write_cell(
                    root,
                    spec,
                    ys,
                    optimum=None if task != "known" else 0.0,
                    outliers=(4,) if task == "noopt" else (),
                    infos=[ensemble_info(i - 3) for i in range(6)]
                    if optimizer == "orthobo"
                    else None,
                    fallbacks=[
                        None,
                        None,
                        None,
                        None,
                        None,
                        "rbf-iso: Laplace Hessian not positive definite",
                    ]
                    if optimizer == "orthobo"
                    else None,
                )
    for seed, spread in ((0, 1.0), (1, 4.0)):
        write_probe_state(
            root,
            "demo",
            seed,
            {("mc", 8): 1.0, ("qmc-owen+rb", 8): 2.0 * spread, ("qlogei", 8): 0.05 * spread,
             ("mc", 16): 1.0, ("qmc-owen+rb", 16): 3.0 * spread, ("qlogei", 16): 0.1 * spread},
        )  # fmt: skip
    return root
