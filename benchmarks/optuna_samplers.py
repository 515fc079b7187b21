"""Final best value of Optuna samplers on orthobench tasks: OrthoBOSampler against Optuna's own.

For each task (built by name with :data:`orthobench.registry.TASKS`), seed and sampler, one
Optuna study of ``--trials`` trials over the task's space (a ``FloatDistribution`` per float
parameter, ``log=True`` for a log one, an ``IntDistribution`` per int one) minimizes
``Task.evaluate(...).y``; a constrained task's values are set with ``Trial.set_constraint`` (read by
OrthoBOSampler and TPESampler; RandomSampler ignores them), and the study's best value is that of its best feasible trial (inf with
none feasible). The samplers:

- ``orthobo``: :class:`orthobench.integrations.optuna.OrthoBOSampler` (OrthoBO's defaults but
  ``--theta-samples``),
- ``tpe``: ``TPESampler`` (Optuna's defaults: multivariate in Optuna 5),
- ``random``: ``RandomSampler``,
- ``botorch``: ``optuna_integration.BoTorchSampler``, only when ``optuna_integration`` is
  installed (otherwise a printed note says it was skipped).

All are seeded with the run's seed and take ``--startup`` random startup trials, so the startup
trials of one seed are the same for every sampler (each draws them with ``RandomSampler(seed)``).
Printed per task and sampler: median, 25th-75th percentile and min-max of the final best value
over seeds, the seeds on which it beat random search (paired by seed, strictly lower) and the
median seconds per study. Run:
``.venv/bin/python benchmarks/optuna_samplers.py [--tasks hartmann6 gramacy] [--seeds 5]
[--trials 18] [--startup 10] [--theta-samples 512]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
import optuna
import torch
from _timing import machine_line

from orthobench.integrations.optuna import OrthoBOSampler
from orthobench.registry import TASKS
from orthobench.seeding import derive_seed
from orthobench.space import Parameter
from orthobench.tasks.base import Task

#: Each sampler's factory of ``(seed, n_startup_trials, theta_samples)``.
SAMPLERS: dict[str, Callable[[int, int, int], optuna.samplers.BaseSampler]] = {
    "orthobo": lambda seed, startup, theta: OrthoBOSampler(
        seed=seed, n_startup_trials=startup, theta_samples=theta
    ),
    "tpe": lambda seed, startup, _: optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup),
    "random": lambda seed, _, __: optuna.samplers.RandomSampler(seed=seed),
}
try:
    from optuna_integration import BoTorchSampler

    SAMPLERS["botorch"] = lambda seed, startup, _: BoTorchSampler(
        seed=seed, n_startup_trials=startup
    )
except ImportError:
    BoTorchSampler = None


def suggest(trial: optuna.Trial, parameter: Parameter) -> float:
    """The trial's value of one of the task's parameters, in native units."""
    if parameter.kind == "int":
        return trial.suggest_int(parameter.name, int(parameter.low), int(parameter.high))
    return trial.suggest_float(
        parameter.name, parameter.low, parameter.high, log=parameter.kind == "log"
    )


def run_study(task: Task, sampler: optuna.samplers.BaseSampler, seed: int, trials: int) -> float:
    """The best (feasible) value of one study of ``trials`` trials."""

    def objective(trial: optuna.Trial) -> float:
        x = np.array([suggest(trial, p) for p in task.space.parameters])
        evaluation = task.evaluate(
            x, seed=derive_seed(seed, "evaluate", trial.number), device=torch.device("cpu")
        )
        for i, c in enumerate(evaluation.constraints):
            trial.set_constraint(f"c{i}", c)
        return evaluation.y

    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=trials)
    try:
        return study.best_value
    except ValueError:  # a constrained study without a feasible trial
        return math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["hartmann6", "gramacy"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=18)
    parser.add_argument("--startup", type=int, default=10)
    parser.add_argument("--theta-samples", type=int, default=512)
    args = parser.parse_args()
    print(machine_line())
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if BoTorchSampler is None:
        print("note: optuna_integration is not installed; BoTorchSampler skipped.")
    print(
        f"{args.seeds} seeds, {args.trials} trials ({args.startup} random startup), OrthoBO "
        f"theta_samples={args.theta_samples}, torch threads {torch.get_num_threads()}"
    )
    for task_name in args.tasks:
        task = TASKS.create(task_name)
        best: dict[str, list[float]] = {}
        seconds: dict[str, list[float]] = {}
        for name, factory in SAMPLERS.items():
            for seed in range(args.seeds):
                start = time.perf_counter()
                value = run_study(
                    task, factory(seed, args.startup, args.theta_samples), seed, args.trials
                )
                seconds.setdefault(name, []).append(time.perf_counter() - start)
                best.setdefault(name, []).append(value)
        optimum = "unknown" if task.optimal_value is None else f"{task.optimal_value:.4g}"
        print(f"\n{task_name} (d={task.dim}, optimum {optimum}): final best value over seeds")
        print(
            f"{'sampler':<9} {'median':>9} {'P25':>9} {'P75':>9} {'min':>9} {'max':>9}  "
            f"{'beats random':>12} {'s/study':>8}"
        )
        for name, values in best.items():
            v = np.array(values)
            wins = int(np.sum(v < np.array(best["random"])))
            p25, p50, p75 = np.percentile(v, [25, 50, 75])
            print(
                f"{name:<9} {p50:9.4f} {p25:9.4f} {p75:9.4f} {v.min():9.4f} {v.max():9.4f}  "
                f"{'-' if name == 'random' else f'{wins}/{len(v)}':>12} "
                f"{np.median(seconds[name]):8.1f}"
            )


if __name__ == "__main__":
    main()
