"""Where a default OrthoBO step's seconds go on the CPU, and what its two batched GEMMs alone cost.

For Hartmann6 and Levy16 and ``--seeds`` seeds (default 5): the cell ``orthobench run`` makes
of the default OrthoBO (S = 512, the raw samples screened on 64 draws), its 32-point initial
design and two BO steps, then the third step taken apart as ``ask`` runs it: the fit, the two
acquisitions' construction (512 and 64 draws), the screen of the raw samples (the step's seed),
and ``optimize_acqf``'s restarts from the screened starting points, with a spy that records each
evaluation's batch size ``b`` (the restarts still running; each evaluation is one forward and
backward pass, but for the final forward-only scoring of the restarts' ends, counted as one too).

Then, on the same state, for each ``b`` seen: the seconds of one evaluation, and of the two
batched GEMMs of the marginal moments alone: ``S`` products of a ``b x n`` block with the
forward projection ``n x (n + 2)``, and with the backward one ``(n + 2) x n`` (each the median
of 5 rounds of 20 calls, :func:`_timing.time_call`). Summed over the restarts' evaluations, the
GEMMs give a lower bound on any implementation that keeps that form; the rest of an evaluation
is elementwise passes over ``S b n`` entries (square roots and exponentials of Matern-5/2, its
derivative), log-EI and the per-operation overhead of about a hundred torch operations.

Printed per state, in milliseconds: fit, construction, screen, restarts (and evaluations),
restarts priced at one evaluation per ``b``, and at the GEMMs alone. One torch thread. Run:
``.venv/bin/python benchmarks/restart_costs.py [--seeds N]``.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import warnings

import _states
import torch
from _timing import machine_line, time_call, timed
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions

from orthobench.acquisition import MarginalLogEI
from orthobench.optimizers.orthobo import OrthoBO
from orthobench.seeding import torch_seed

TASKS = ("hartmann6", "levy16")
N_INIT = 32
STEPS = 2


def gp_state(task: str, seed: int) -> OrthoBO:
    """The default OrthoBO after its initial design and :data:`STEPS` BO steps on ``task``."""
    return _states.run(_states.cell(task, seed, N_INIT, STEPS, "orthobo")).optimizer(STEPS)


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

    return time_call(evaluation).median, time_call(gemms).median


def take_apart(task: str, seed: int) -> dict[str, float]:
    """The third step's parts, in milliseconds (see the module notes)."""
    optimizer = gp_state(task, seed)
    members, fit_s = timed(optimizer._fit)
    (acqf, screen), build_s = timed(
        lambda: (
            optimizer._build_acquisition(members),
            optimizer._build_acquisition(members, optimizer.screen_theta_samples),
        )
    )
    bounds = optimizer._unit_bounds()
    batch_sizes = []
    forward = MarginalLogEI.forward

    def spy(self, X):
        if self is acqf:
            batch_sizes.append(X.shape[0])
        return forward(self, X)

    chunk = optimizer._raw_chunk(optimizer.screen_theta_samples, q=1)
    with torch_seed(optimizer._step_seed("acq")):
        starts, screen_s = timed(
            lambda: gen_batch_initial_conditions(
                screen,
                bounds,
                q=1,
                num_restarts=optimizer.num_restarts,
                raw_samples=optimizer.raw_samples,
                options={"init_batch_limit": chunk},
            )
        )
        MarginalLogEI.forward = spy
        try:
            _, restarts_s = timed(
                lambda: optimize_acqf(
                    acqf,
                    bounds=bounds,
                    q=1,
                    num_restarts=starts.shape[0],
                    raw_samples=None,
                    batch_initial_conditions=starts,
                )
            )
        finally:
            MarginalLogEI.forward = forward
    counts = collections.Counter(batch_sizes)
    priced = {b: _evaluation_seconds(acqf, b) for b in counts}
    return {
        "fit": 1e3 * fit_s,
        "build": 1e3 * build_s,
        "screen": 1e3 * screen_s,
        "restarts": 1e3 * restarts_s,
        "evaluations": len(batch_sizes),
        "per b": 1e3 * sum(k * priced[b][0] for b, k in counts.items()),
        "gemms": 1e3 * sum(k * priced[b][1] for b, k in counts.items()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    warnings.simplefilter("ignore")
    columns = ["fit", "build", "screen", "restarts", "evaluations", "per b", "gemms"]
    print(f"threads {torch.get_num_threads()}; milliseconds of the third default OrthoBO step")
    print("task | seed | " + " | ".join(columns))
    for task in TASKS:
        rows = [take_apart(task, seed) for seed in range(args.seeds)]
        for seed, row in enumerate(rows):
            print(f"{task} | {seed} | " + " | ".join(f"{row[c]:.0f}" for c in columns))
        medians = {c: statistics.median(row[c] for row in rows) for c in columns}
        print(f"{task} | median | " + " | ".join(f"{medians[c]:.0f}" for c in columns), flush=True)


if __name__ == "__main__":
    main()
