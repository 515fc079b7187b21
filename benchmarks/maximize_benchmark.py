"""OrthoBO's acquisition maximization procedures on the same states: how often each misses.

Procedures (OrthoBO, S = 512, fast fit), all on the same fit and theta draws of a state:

- ``all draws``: the paper's multistart, ``optimize_acqf``'s raw-sample screen and restarts on
  all 512 draws (``screen_theta_samples: null``);
- ``screen 64`` (the default): the raw samples scored on 64 draws, the restarts on all 512;
- ``coarse 64``: the whole multistart on 64 draws, the best two results polished on all 512
  (``coarse_theta_samples: 64``);
- ``reseeded``: ``all draws`` again from another torch seed (the multistart's own luck).

Per state, each procedure's candidate is scored by the full acquisition (log-EI over all 512
draws, rebuilt by ``acquisition()``), and its shortfall is its value minus the best of the four.
States, as ``orthobench run`` makes them: the initial designs of ``--n0`` points (default
``32,100``) per task and seed, and (``--along``, default 8) the states of the first BO steps of
an ``all draws`` run from a ``2 d``-point initial design, per task and seed; each procedure is
OrthoBO with its settings rebuilt on the state (the run's optimizer seed and saved state).
Printed per group of states: how many states each procedure ended more than 1e-3 below the best
(and 1e-2), its worst shortfall, and its median acquisition seconds (``acq_seconds`` of
``ask``; ``reseeded``: ``optimize_acqf`` alone).

Regret (``--steps``, default 15): paired BO runs (same initial design and optimizer seed) of
``all draws`` and ``screen 64`` from the ``2 d``-point initial design per task and seed; printed
per task: the final simple regret of each (median and range over seeds), how many seeds ended
with identical histories, and the summed acquisition seconds. One torch thread. Run:
``.venv/bin/python benchmarks/maximize_benchmark.py [--seeds N] [--n0 32,100] [--along K]
[--steps T]``.
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from collections.abc import Mapping
from typing import Any

import _states
import numpy as np
import torch
from _timing import machine_line, timed
from botorch.optim import optimize_acqf

from orthobench.registry import TASKS as TASK_REGISTRY

TASKS = ("hartmann6", "ackley8", "michalewicz10", "levy16")
# OrthoBO settings of each procedure that runs through ``ask``.
PROCEDURES = {
    "all draws": {"screen_theta_samples": None},
    "screen 64": {"screen_theta_samples": 64},
    "coarse 64": {"coarse_theta_samples": 64},
}
RESEEDED = "reseeded"


def bo_run(
    task: str, seed: int, n_init: int, steps: int, settings: Mapping[str, Any] | None = None
) -> _states.Run:
    """OrthoBO (the default, or with ``settings``) run for ``steps`` BO steps from the initial
    design of ``n_init`` points."""
    return _states.run(_states.cell(task, seed, n_init, steps, "orthobo", **(settings or {})))


def _dim(task: str) -> int:
    return TASK_REGISTRY.create(task).space.dim


def _value(acqf, x) -> float:
    with torch.no_grad():
        x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
        return float(acqf(x.reshape(1, 1, -1)))


def _state(run: _states.Run, step: int, torch_seed: int) -> dict[str, tuple[float, float]]:
    """``(value, seconds)`` of every procedure at ``run``'s state after ``step`` BO steps."""
    results = {}
    for label, settings in PROCEDURES.items():
        optimizer = run.optimizer(step, settings)
        suggestion = optimizer.ask(1)
        results[label] = (suggestion.x, suggestion.acq_seconds)
    acqf = optimizer.acquisition()  # every procedure's fit and draws (same seed and state)
    torch.manual_seed(torch_seed)
    bounds = torch.stack([torch.zeros(optimizer.dim), torch.ones(optimizer.dim)]).double()
    (again, _), seconds = timed(
        lambda: optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=8, raw_samples=512)
    )
    results[RESEEDED] = (again, seconds)
    return {label: (_value(acqf, x), seconds) for label, (x, seconds) in results.items()}


def _summary(group: str, states: list[dict[str, tuple[float, float]]]) -> None:
    for label in [*PROCEDURES, RESEEDED]:
        gaps = [s[label][0] - max(v for v, _ in s.values()) for s in states]
        seconds = statistics.median(s[label][1] for s in states)
        print(
            f"{group} | {len(states)} | {label} | {sum(g < -1e-3 for g in gaps)} | "
            f"{sum(g < -1e-2 for g in gaps)} | {min(gaps):+.1e} | {seconds:.3f}",
            flush=True,
        )


def initial_designs(n0: int, seeds: int) -> None:
    states = []
    for task in TASKS:
        for seed in range(seeds):
            states.append(_state(bo_run(task, seed, n0, 0), 0, 10_000 + seed))
    _summary(f"initial designs, n0 = {n0}", states)


def along_runs(steps: int, seeds: int) -> None:
    for task in TASKS:
        states = []
        for seed in range(seeds):
            # The states before each of the first `steps` steps: the last step is not needed.
            run = bo_run(task, seed, 2 * _dim(task), steps - 1, PROCEDURES["all draws"])
            for step in range(steps):
                states.append(_state(run, step, 10_000 + 100 * seed + step))
        _summary(f"along runs, {task}", states)


def regret(steps: int, seeds: int) -> None:
    print(
        f"regret after {steps} BO steps from the 2d-point initial design: task | procedure | "
        "final regret median [min, max] over seeds | identical histories | acquisition s"
    )
    paired = ("all draws", "screen 64")
    for task in TASKS:
        finals = {label: [] for label in paired}
        seconds = dict.fromkeys(paired, 0.0)
        histories = {label: [] for label in paired}
        for seed in range(seeds):
            for label in paired:
                records = bo_run(task, seed, 2 * _dim(task), steps, PROCEDURES[label]).records
                seconds[label] += sum(r.acq_seconds for r in records if r.phase == "bo")
                finals[label].append(records[-1].regret)
                histories[label].append([r.y for r in records])
        same = sum(a == b for a, b in zip(*histories.values(), strict=True))
        for label, values in finals.items():
            print(
                f"{task} | {label} | {statistics.median(values):.3g} [{min(values):.3g}, "
                f"{max(values):.3g}] | {same}/{seeds} | {seconds[label]:.1f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n0", default="32,100", help="comma-separated design sizes; '' for none")
    parser.add_argument(
        "--along", type=int, default=8, help="BO steps compared along runs; 0: none"
    )
    parser.add_argument(
        "--steps", type=int, default=15, help="BO steps of the regret runs; 0: none"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    warnings.simplefilter("ignore")
    print(f"threads {torch.get_num_threads()}, seeds {args.seeds}")
    print(
        "states | count | procedure | below best - 1e-3 | below best - 1e-2 | worst shortfall "
        "(log-EI) | median acq s"
    )
    for n0 in filter(None, args.n0.split(",")):
        initial_designs(int(n0), args.seeds)
    if args.along:
        along_runs(args.along, args.seeds)
    if args.steps:
        regret(args.steps, args.seeds)


if __name__ == "__main__":
    main()
