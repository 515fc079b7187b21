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
States: scrambled Sobol designs of ``--n0`` points (default ``32,100``) per function and seed,
and (``--along``, default 8) the states of the first BO steps of an ``all draws`` run from a
``2 d``-point design, per function and seed. Printed per group of states: how many states each
procedure ended more than 1e-3 below the best (and 1e-2), its worst shortfall, and its median
acquisition seconds (``acq_seconds`` of ``ask``; ``reseeded``: ``optimize_acqf`` alone).

Regret (``--steps``, default 15): paired BO runs of ``all draws`` and ``screen 64`` from the same
``2 d``-point design per function and seed; printed per function: the final simple regret of
each (median and range over seeds), how many seeds ended with identical histories, and the
summed acquisition seconds. One torch thread. Run:
``.venv/bin/python benchmarks/maximize_benchmark.py [--seeds N] [--n0 32,100] [--along K]
[--steps T]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import torch
from botorch.optim import optimize_acqf
from botorch.test_functions import Ackley, Hartmann, Levy, Michalewicz
from torch.quasirandom import SobolEngine

from orthobench.optimizers.orthobo import OrthoBO

FUNCTIONS = {
    "hartmann6": Hartmann(dim=6),
    "ackley8": Ackley(dim=8),
    "michalewicz10": Michalewicz(dim=10),
    "levy16": Levy(dim=16),
}
# OrthoBO settings of each procedure that runs through ``ask``.
PROCEDURES = {
    "all draws": {"screen_theta_samples": None},
    "screen 64": {"screen_theta_samples": 64},
    "coarse 64": {"coarse_theta_samples": 64},
}
RESEEDED = "reseeded"


def _evaluate(function, u: torch.Tensor) -> np.ndarray:
    """``function`` at unit-cube points ``u`` (``t x d``), on its own bounds."""
    low, high = function.bounds.double()
    return function(low + (high - low) * u).numpy()


def _design(function, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    u = SobolEngine(function.dim, scramble=True, seed=seed).draw(n, dtype=torch.float64)
    return u.numpy(), _evaluate(function, u)


def _value(acqf, x) -> float:
    with torch.no_grad():
        x = torch.as_tensor(np.asarray(x), dtype=torch.float64)
        return float(acqf(x.reshape(1, 1, -1)))


def _state(run: OrthoBO, seed: int, torch_seed: int) -> dict[str, tuple[float, float]]:
    """``(value, seconds)`` of every procedure at ``run``'s state (its history and ask count)."""
    results = {}
    for label, settings in PROCEDURES.items():
        optimizer = OrthoBO(run.dim, seed=seed, **settings)
        optimizer.tell(run.train_x.cpu().numpy(), run.train_y.cpu().numpy())
        optimizer.load_state_dict(run.state_dict())
        suggestion = optimizer.ask(1)
        results[label] = (suggestion.x, suggestion.acq_seconds)
    acqf = optimizer.acquisition()  # every procedure's fit and draws (same seed and state)
    torch.manual_seed(torch_seed)
    bounds = torch.stack([torch.zeros(run.dim), torch.ones(run.dim)]).double()
    start = time.perf_counter()
    again, _ = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=8, raw_samples=512)
    results[RESEEDED] = (again, time.perf_counter() - start)
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
    for function in FUNCTIONS.values():
        for seed in range(seeds):
            run = OrthoBO(function.dim, seed=seed)
            run.tell(*_design(function, n0, seed))
            states.append(_state(run, seed, 10_000 + seed))
    _summary(f"initial designs, n0 = {n0}", states)


def along_runs(steps: int, seeds: int) -> None:
    for name, function in FUNCTIONS.items():
        states = []
        for seed in range(seeds):
            run = OrthoBO(function.dim, seed=seed, **PROCEDURES["all draws"])
            run.tell(*_design(function, 2 * function.dim, seed))
            for step in range(steps):
                states.append(_state(run, seed, 10_000 + 100 * seed + step))
                u = torch.as_tensor(np.asarray(run.ask(1).x), dtype=torch.float64)
                run.tell(u.numpy(), _evaluate(function, u))
        _summary(f"along runs, {name}", states)


def regret(steps: int, seeds: int) -> None:
    print(
        f"regret after {steps} BO steps from 2d Sobol points: function | procedure | final "
        "regret median [min, max] over seeds | identical histories | acquisition s"
    )
    paired = ("all draws", "screen 64")
    for name, function in FUNCTIONS.items():
        finals = {label: [] for label in paired}
        seconds = dict.fromkeys(paired, 0.0)
        histories = {label: [] for label in paired}
        for seed in range(seeds):
            x, y = _design(function, 2 * function.dim, seed)
            for label in paired:
                optimizer = OrthoBO(function.dim, seed=seed, **PROCEDURES[label])
                optimizer.tell(x, y)
                ys = list(y)
                for _ in range(steps):
                    suggestion = optimizer.ask(1)
                    seconds[label] += suggestion.acq_seconds
                    u = torch.as_tensor(np.asarray(suggestion.x), dtype=torch.float64)
                    value = _evaluate(function, u)
                    optimizer.tell(u.numpy(), value)
                    ys.extend(value.tolist())
                finals[label].append(min(ys) - function.optimal_value)
                histories[label].append(ys)
        same = sum(a == b for a, b in zip(*histories.values(), strict=True))
        for label, values in finals.items():
            print(
                f"{name} | {label} | {statistics.median(values):.3g} [{min(values):.3g}, "
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
