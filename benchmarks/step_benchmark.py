"""Per-step seconds of OrthoBO (S = 512, BoTorch's fit and the fast fit) vs BoTorch-default qLogEI.

For each function (Hartmann6, Levy16) and seed, a scrambled Sobol design of ``n0`` points (32
unless ``--n0`` says otherwise) is told to every optimizer, then each runs ``--steps`` BO steps through its ``ask``/``tell`` API
on the same function; the methods of one (function, seed) run one after the other, so a load on
the machine hits them alike. Seconds are the optimizers' own ``fit_seconds`` and
``acq_seconds`` (what a run records per step). The first BO step is left out of the summary
(no warm start yet, first-call overheads), as in issue 16's measurement (steps 2-4).

Printed per function and method: median fit, acquisition and step seconds over the kept steps
and seeds, and the ratio of the method's step to qLogEI's *at the same (seed, step)*: geometric
mean with min and max over the kept steps and seeds. Run:
``.venv/bin/python benchmarks/step_benchmark.py [--seeds N] [--steps T] [--threads K] [--n0 M]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import warnings

import numpy as np
import torch
from botorch.test_functions import Hartmann, Levy
from torch.quasirandom import SobolEngine

from orthobench.optimizers.botorch_baselines import QLogEI
from orthobench.optimizers.orthobo import OrthoBO

FUNCTIONS = {"hartmann6": Hartmann(dim=6), "levy16": Levy(dim=16)}
METHODS = {
    "qlogei": lambda d, seed: QLogEI(d, seed=seed),
    "orthobo fit=botorch": lambda d, seed: OrthoBO(d, seed=seed, theta_samples=512, fit="botorch"),
    "orthobo fit=fast": lambda d, seed: OrthoBO(d, seed=seed, theta_samples=512, fit="fast"),
}


def run(function, method: str, seed: int, steps: int, n0: int) -> list[tuple[float, float]]:
    """``(fit_seconds, acq_seconds)`` of each of ``steps`` BO steps of ``method`` after ``n0``
    design points."""
    d = function.dim
    low, high = function.bounds.double()
    x = SobolEngine(d, scramble=True, seed=seed).draw(n0, dtype=torch.float64)
    optimizer = METHODS[method](d, seed)
    optimizer.tell(x.numpy(), function(low + (high - low) * x).numpy())
    seconds = []
    for _ in range(steps):
        suggestion = optimizer.ask(1)
        seconds.append((suggestion.fit_seconds, suggestion.acq_seconds))
        u = torch.as_tensor(np.asarray(suggestion.x), dtype=torch.float64)
        optimizer.tell(u.numpy(), function(low + (high - low) * u).numpy())
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n0", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    print(
        f"threads {torch.get_num_threads()}, seeds {args.seeds}, n0 {args.n0}, BO steps "
        f"{args.steps} (summary: steps 2-{args.steps})"
    )
    print("function | method | fit s | acq s | step s | step / qlogei step: geo-mean [min, max]")
    for name, function in FUNCTIONS.items():
        seconds: dict[str, list[list[tuple[float, float]]]] = {m: [] for m in METHODS}
        for seed in range(args.seeds):
            for method in METHODS:
                seconds[method].append(run(function, method, seed, args.steps, args.n0)[1:])
        reference = [fit + acq for per_seed in seconds["qlogei"] for fit, acq in per_seed]
        for method, per_seeds in seconds.items():
            steps = [step for per_seed in per_seeds for step in per_seed]
            totals = [fit + acq for fit, acq in steps]
            ratios = [t / r for t, r in zip(totals, reference, strict=True)]
            geo = math.exp(statistics.mean(math.log(r) for r in ratios))
            print(
                f"{name} | {method} | {statistics.median(f for f, _ in steps):.3f} | "
                f"{statistics.median(a for _, a in steps):.3f} | {statistics.median(totals):.3f} | "
                f"{geo:.2f} [{min(ratios):.2f}, {max(ratios):.2f}]",
                flush=True,
            )


if __name__ == "__main__":
    main()
