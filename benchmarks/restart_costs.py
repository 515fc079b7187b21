"""Where a default OrthoBO step's seconds go on the CPU, and what its two batched GEMMs alone cost.

For Hartmann6 and Levy16 and ``--seeds`` seeds (default 5): a scrambled Sobol design of 32
points and two default OrthoBO steps (S = 512, the raw samples screened on 64 draws), then the
third step taken apart as ``ask`` runs it: the fit, the two acquisitions' construction (512 and 64
draws), the screen of the raw samples (the step's seed), and ``optimize_acqf``'s restarts from
the screened starting points, with a spy that records each evaluation's batch size ``b`` (the
restarts still running; each evaluation is one forward and backward pass, but for the final
forward-only scoring of the restarts' ends, counted as one too).

Then, on the same state, for each ``b`` seen: the seconds of one evaluation, and of the two
batched GEMMs of the marginal moments alone: ``S`` products of a ``b x n`` block with the
forward projection ``n x (n + 2)``, and with the backward one ``(n + 2) x n`` (best of 5 x 20
calls each). Summed over the restarts' evaluations, the GEMMs give a lower bound on any
implementation that keeps that form; the rest of an evaluation is elementwise passes over ``S b
n`` entries (square roots and exponentials of Matern-5/2, its derivative), log-EI and the
per-operation overhead of about a hundred torch operations.

Printed per state, in milliseconds: fit, construction, screen, restarts (and evaluations),
restarts priced at one evaluation per ``b``, and at the GEMMs alone. One torch thread. Run:
``.venv/bin/python benchmarks/restart_costs.py [--seeds N]``.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
import warnings

import numpy as np
import torch
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from botorch.test_functions import Hartmann, Levy
from torch.quasirandom import SobolEngine

from orthobench.acquisition import MarginalLogEI
from orthobench.optimizers.orthobo import OrthoBO
from orthobench.seeding import torch_seed

FUNCTIONS = {"hartmann6": Hartmann(dim=6), "levy16": Levy(dim=16)}


def _best_seconds(call, repeats: int = 20) -> float:
    call()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def _state(function, seed: int) -> OrthoBO:
    """The default OrthoBO after 32 Sobol points and two BO steps on ``function``."""
    d = function.dim
    low, high = function.bounds.double()

    def evaluate(u: torch.Tensor) -> np.ndarray:
        return function(low + (high - low) * u).numpy()

    x = SobolEngine(d, scramble=True, seed=seed).draw(32, dtype=torch.float64)
    optimizer = OrthoBO(d, seed=seed)
    optimizer.tell(x.numpy(), evaluate(x))
    for _ in range(2):
        u = torch.as_tensor(np.asarray(optimizer.ask(1).x), dtype=torch.float64)
        optimizer.tell(u.numpy(), evaluate(u))
    return optimizer


def _evaluation_seconds(acqf: MarginalLogEI, b: int) -> tuple[float, float]:
    """Seconds of one forward and backward evaluation of ``b`` candidates, and of the two
    batched GEMMs of the moments alone at that ``b``."""
    gp = acqf.members[0]
    x = torch.rand(b, 1, gp.train_x.shape[1], dtype=gp.train_x.dtype)

    def evaluation() -> None:
        xg = x.clone().requires_grad_(True)
        torch.autograd.grad(acqf(xg).sum(), xg)

    forward_proj, backward_proj = gp._forward_proj, gp._backward_proj
    corr = torch.rand(gp.num_samples, b, forward_proj.shape[1], dtype=forward_proj.dtype)
    grad_proj = torch.rand(gp.num_samples, b, backward_proj.shape[1], dtype=forward_proj.dtype)

    def gemms() -> None:
        torch.bmm(corr, forward_proj)
        torch.bmm(grad_proj, backward_proj)

    return _best_seconds(evaluation), _best_seconds(gemms)


def take_apart(function, seed: int) -> dict[str, float]:
    """The third step's parts, in milliseconds (see the module notes)."""
    optimizer = _state(function, seed)
    start = time.perf_counter()
    members = optimizer._fit()
    fitted = time.perf_counter()
    acqf = optimizer._build_acquisition(members)
    screen = optimizer._build_acquisition(members, optimizer.screen_theta_samples)
    built = time.perf_counter()
    bounds = optimizer._unit_bounds()
    batch_sizes = []
    forward = MarginalLogEI.forward

    def spy(self, X):
        if self is acqf:
            batch_sizes.append(X.shape[0])
        return forward(self, X)

    with torch_seed(optimizer._step_seed("acq")):
        starts = gen_batch_initial_conditions(
            screen,
            bounds,
            q=1,
            num_restarts=optimizer.num_restarts,
            raw_samples=optimizer.raw_samples,
            options={"init_batch_limit": optimizer._raw_chunk(optimizer.screen_theta_samples)},
        )
        screened = time.perf_counter()
        MarginalLogEI.forward = spy
        try:
            optimize_acqf(
                acqf,
                bounds=bounds,
                q=1,
                num_restarts=starts.shape[0],
                raw_samples=None,
                batch_initial_conditions=starts,
            )
        finally:
            MarginalLogEI.forward = forward
        restarted = time.perf_counter()
    counts = collections.Counter(batch_sizes)
    priced = {b: _evaluation_seconds(acqf, b) for b in counts}
    return {
        "fit": 1e3 * (fitted - start),
        "build": 1e3 * (built - fitted),
        "screen": 1e3 * (screened - built),
        "restarts": 1e3 * (restarted - screened),
        "evaluations": len(batch_sizes),
        "per b": 1e3 * sum(k * priced[b][0] for b, k in counts.items()),
        "gemms": 1e3 * sum(k * priced[b][1] for b, k in counts.items()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    columns = ["fit", "build", "screen", "restarts", "evaluations", "per b", "gemms"]
    print(f"threads {torch.get_num_threads()}; milliseconds of the third default OrthoBO step")
    print("function | seed | " + " | ".join(columns))
    for name, function in FUNCTIONS.items():
        rows = [take_apart(function, seed) for seed in range(args.seeds)]
        for seed, row in enumerate(rows):
            print(f"{name} | {seed} | " + " | ".join(f"{row[c]:.0f}" for c in columns))
        medians = {c: statistics.median(row[c] for row in rows) for c in columns}
        print(f"{name} | median | " + " | ".join(f"{medians[c]:.0f}" for c in columns), flush=True)


if __name__ == "__main__":
    main()
