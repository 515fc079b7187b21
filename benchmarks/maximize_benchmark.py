"""OrthoBO's coarse-to-fine acquisition maximization against the multistart on all draws.

``coarse_theta_samples: 64`` runs ``optimize_acqf``'s multistart (raw-sample screen and
restarts) on a coarse acquisition of 64 draws, then polishes the best two results on all
``S = 512``; ``coarse_theta_samples: null`` (the default) is the multistart on all draws (the
paper's).

Quality (``--n0``, default ``32,100``): for each function and seed, a scrambled Sobol design of
``n0`` points is told to two OrthoBOs of one seed (hence the same fit and the same draws), one
per procedure; each asks once. Printed per state: the full acquisition (all 512 draws, rebuilt
by ``acquisition()``) at the coarse-to-fine candidate minus at the all-draws candidate (log-EI,
negative: the coarse stage ended lower), the distance between the candidates, and the
acquisition seconds of each. For scale, the same difference for a second all-draws multistart
from another torch seed on the same acquisition (``optimize_acqf`` called directly).

Along runs (``--along``, default 8): the same comparison at the states of an all-draws BO run
from a ``2 d``-point design (the first ``--along`` steps, per function and seed), where the
coarse OrthoBO is given the run's state (``load_state_dict``: the same fit and draws). Printed
per function: the states where each differs from the all-draws candidate by less than -1e-3.

Regret (``--steps``, default 15): paired BO runs of both procedures from the same ``2 d``-point
design per function and seed; printed per function: the final simple regret of each (median
and range over seeds), how many seeds ended with identical histories, and the summed
acquisition seconds. One torch thread. Run:
``.venv/bin/python benchmarks/coarse_benchmark.py [--seeds N] [--n0 32,100] [--along K]
[--steps T]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
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
PROCEDURES = {"all draws": None, "coarse 64": 64}


def _evaluate(function, u: torch.Tensor) -> np.ndarray:
    """``function`` at unit-cube points ``u`` (``t x d``), on its own bounds."""
    low, high = function.bounds.double()
    return function(low + (high - low) * u).numpy()


def _design(function, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    u = SobolEngine(function.dim, scramble=True, seed=seed).draw(n, dtype=torch.float64)
    return u.numpy(), _evaluate(function, u)


def _value(acqf, x) -> float:
    with torch.no_grad():
        return float(acqf(torch.as_tensor(np.asarray(x), dtype=torch.float64).reshape(1, 1, -1)))


def _reseeded(acqf, dim: int, seed: int) -> torch.Tensor:
    """Another all-draws multistart on ``acqf``, from torch seed ``seed``."""
    torch.manual_seed(seed)
    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).double()
    candidate, _ = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=8, raw_samples=512)
    return candidate


def quality(n0: int, seeds: int) -> None:
    print(
        f"n0 {n0}: state | coarse - all (log-EI) | distance | all-draws reseeded - all | acq s all, coarse"
    )
    diffs, reseeded, ratios = [], [], []
    for name, function in FUNCTIONS.items():
        for seed in range(seeds):
            x, y = _design(function, n0, seed)
            suggestions, acqf = {}, None
            for label, coarse in PROCEDURES.items():
                optimizer = OrthoBO(function.dim, seed=seed, coarse_theta_samples=coarse)
                optimizer.tell(x, y)
                suggestions[label] = optimizer.ask(1)
                acqf = optimizer.acquisition()  # the same fit and draws for both
            full, fine = suggestions["all draws"], suggestions["coarse 64"]
            again = _reseeded(acqf, function.dim, 10_000 + seed)
            diffs.append(_value(acqf, fine.x) - _value(acqf, full.x))
            reseeded.append(_value(acqf, again) - _value(acqf, full.x))
            ratios.append(fine.acq_seconds / full.acq_seconds)
            distance = float(np.linalg.norm(np.asarray(fine.x) - np.asarray(full.x)))
            print(
                f"{name} seed {seed} | {diffs[-1]:+.2e} | {distance:.3f} | {reseeded[-1]:+.2e} | "
                f"{full.acq_seconds:.3f}, {fine.acq_seconds:.3f}",
                flush=True,
            )
    geo = math.exp(statistics.mean(math.log(r) for r in ratios))
    print(
        f"n0 {n0}, {len(diffs)} states: coarse - all: min {min(diffs):+.2e}, median "
        f"{statistics.median(diffs):+.2e}, below -1e-3 on {sum(d < -1e-3 for d in diffs)}; "
        f"reseeded - all: min {min(reseeded):+.2e}, max {max(reseeded):+.2e}, below -1e-3 on "
        f"{sum(d < -1e-3 for d in reseeded)}; acquisition seconds coarse / all: geo-mean "
        f"{geo:.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
    )


def along_runs(steps: int, seeds: int) -> None:
    print(
        f"along all-draws runs, BO steps 1-{steps} from 2d Sobol points: function | states | "
        "coarse - all < -1e-3 (min) | reseeded - all < -1e-3 (min) | acq s all, coarse"
    )
    for name, function in FUNCTIONS.items():
        diffs, reseeded, seconds = [], [], [0.0, 0.0]
        for seed in range(seeds):
            x, y = _design(function, 2 * function.dim, seed)
            run = OrthoBO(function.dim, seed=seed)
            run.tell(x, y)
            for step in range(steps):
                coarse = OrthoBO(function.dim, seed=seed, coarse_theta_samples=64)
                coarse.tell(run.train_x.cpu().numpy(), run.train_y.cpu().numpy())
                coarse.load_state_dict(run.state_dict())
                full, fine = run.ask(1), coarse.ask(1)
                acqf = coarse.acquisition()
                again = _reseeded(acqf, function.dim, 10_000 + 100 * seed + step)
                diffs.append(_value(acqf, fine.x) - _value(acqf, full.x))
                reseeded.append(_value(acqf, again) - _value(acqf, full.x))
                seconds[0] += full.acq_seconds
                seconds[1] += fine.acq_seconds
                u = torch.as_tensor(np.asarray(full.x), dtype=torch.float64)
                run.tell(u.numpy(), _evaluate(function, u))
        print(
            f"{name} | {len(diffs)} | {sum(d < -1e-3 for d in diffs)} ({min(diffs):+.1e}) | "
            f"{sum(d < -1e-3 for d in reseeded)} ({min(reseeded):+.1e}) | "
            f"{seconds[0]:.1f}, {seconds[1]:.1f}",
            flush=True,
        )


def regret(steps: int, seeds: int) -> None:
    print(
        f"regret after {steps} BO steps from 2d Sobol points: function | procedure | final "
        "regret median [min, max] over seeds | identical histories | acquisition s"
    )
    for name, function in FUNCTIONS.items():
        finals = {label: [] for label in PROCEDURES}
        seconds = dict.fromkeys(PROCEDURES, 0.0)
        histories = {label: [] for label in PROCEDURES}
        for seed in range(seeds):
            x, y = _design(function, 2 * function.dim, seed)
            for label, coarse in PROCEDURES.items():
                optimizer = OrthoBO(function.dim, seed=seed, coarse_theta_samples=coarse)
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
    for n0 in filter(None, args.n0.split(",")):
        quality(int(n0), args.seeds)
    if args.along:
        along_runs(args.along, args.seeds)
    if args.steps:
        regret(args.steps, args.seeds)


if __name__ == "__main__":
    main()
