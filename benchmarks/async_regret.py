"""Regret at equal evaluations: asynchronous q = 4 cells against synchronous ones and q = 1.

For each optimizer and seed, three cells of ``--task`` after ``--n-init`` Sobol' points (4)
run inline (so each is deterministic): q = 4 synchronous (4 BO steps of 4 points), q = 4
asynchronous (a point asked as each evaluation finishes, the 3 others pending; inline they
finish in the order asked) and q = 1 (16 BO steps); all make 16 BO evaluations. Printed per
optimizer: each cell's final simple regret per seed, the medians, and the seed-paired
differences asynchronous - synchronous and q = 1 - synchronous (median [min, max], two-sided
Wilcoxon signed-rank p over the seeds). The acquisition settings are those of
``batch_wall_time.py`` (128 raw samples, 4 restarts; OrthoBO and MC-EI on 64 draws). One
torch thread. Run: ``.venv/bin/python benchmarks/async_regret.py [--task hartmann6]
[--optimizers orthobo,qlogei] [--seeds 0-9] [--n-init 4]``.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import _states
import numpy as np
import scipy.stats
import torch
from _timing import machine_line
from batch_wall_time import OPTIMIZER_PARAMS

from orthobench.loop import run_cell
from orthobench.suite import Cell, ComponentSpec

#: Each schedule's cell: (q, budget in BO steps, asynchronous).
SCHEDULES = {"synchronous": (4, 4, False), "asynchronous": (4, 4, True), "q=1": (1, 16, False)}


def final_regret(task: str, optimizer: str, seed: int, schedule: str, n_init: int = 4) -> float:
    q, budget, asynchronous = SCHEDULES[schedule]
    cell = Cell(
        suite="async-regret",
        task=ComponentSpec(name=task, label=task),
        optimizer=ComponentSpec(
            name=optimizer, params=OPTIMIZER_PARAMS[optimizer], label=optimizer
        ),
        seed=seed,
        n_init=n_init,
        budget=budget,
        q=q,
        asynchronous=asynchronous,
    )
    return run_cell(cell)[-1].regret


def paired(a: np.ndarray, b: np.ndarray) -> str:
    d = a - b
    p = scipy.stats.wilcoxon(d).pvalue if np.abs(d).sum() else 1.0
    return f"{np.median(d):+.3f} [{d.min():+.3f}, {d.max():+.3f}], p {p:.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="hartmann6")
    parser.add_argument("--optimizers", default="orthobo,qlogei")
    parser.add_argument("--seeds", type=_states.seed_range, default=_states.seed_range("0-9"))
    parser.add_argument("--n-init", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    warnings.filterwarnings("ignore")
    print(
        f"task {args.task}, seeds {args.seeds.start}-{args.seeds.stop - 1}, "
        f"{args.n_init} Sobol' points, 16 BO evaluations"
    )
    for optimizer in args.optimizers.split(","):
        regrets = {s: [] for s in SCHEDULES}
        for seed in args.seeds:
            for schedule, values in regrets.items():
                values.append(final_regret(args.task, optimizer, seed, schedule, args.n_init))
            row = " | ".join(f"{s} {v[-1]:.3f}" for s, v in regrets.items())
            print(f"{optimizer} seed {seed} | {row}", flush=True)
        final = {s: np.array(v) for s, v in regrets.items()}
        medians = " | ".join(f"{s} {statistics.median(v):.3f}" for s, v in final.items())
        print(f"{optimizer} median | {medians}")
        print(
            f"{optimizer} asynchronous - synchronous | {paired(final['asynchronous'], final['synchronous'])}"
        )
        print(f"{optimizer} q=1 - synchronous | {paired(final['q=1'], final['synchronous'])}")


if __name__ == "__main__":
    main()
