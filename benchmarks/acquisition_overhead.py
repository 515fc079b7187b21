"""Cost of a control-variate estimator in OrthoBO's acquisition: per call, and once per step.

For the GP state of ``orthobench run``'s 32-point initial design (seed 0) on Hartmann6 and
Levy16 and S in {32, 512} theta draws, times ``acqf(X).sum().backward()`` for a batch of 8
candidates (one L-BFGS restart block) with the naive mean and with each estimator on the *same*
draws (median [min, max] ms per call over 5 rounds of 20 calls), and reports the estimator's
extra cost as a share of the naive mean's call (medians, :func:`change_per_call`); then the
one-off seconds of the estimator's draw weights
(:meth:`~orthobench.acquisition.MarginalLogEI.draw_weights`, computed when an acquisition first
evaluates with that estimator). Run:
``.venv/bin/python benchmarks/acquisition_overhead.py [--threads T]``.
"""

from __future__ import annotations

import argparse
import functools
import warnings

import _states
import torch
from _timing import Timing, machine_line, time_call, timed

from orthobench.optimizers.orthobo import OrthoBO

TASKS = ("hartmann6", "levy16")
ESTIMATORS = ("orth", "orth-shrink")
SEED = 0
N_INIT = 32


def gp_state(task: str, theta_samples: int) -> OrthoBO:
    """OrthoBO with the naive mean on ``theta_samples`` draws, told the initial design."""
    cell = _states.cell(
        task, SEED, N_INIT, 0, "orthobo", theta_samples=theta_samples, estimator="mc"
    )
    return _states.run(cell).optimizer(0)


def change_per_call(t: Timing, base: Timing) -> float:
    """An estimator's extra time per call (median ``t``) in percent of the naive mean's
    (``base``): docs/benchmarks.md reads it as "x% more per call than the naive mean"."""
    return 100 * (t.median - base.median) / base.median


def row(task: str, theta_samples: int) -> str:
    """The printed row of one state: the naive mean's call, then each estimator's."""
    optimizer = gp_state(task, theta_samples)
    acqf = optimizer.acquisition()
    X = torch.rand(
        8,
        1,
        optimizer.dim,
        dtype=torch.float64,
        generator=torch.Generator().manual_seed(0),
        requires_grad=True,
    )

    def call() -> None:
        acqf(X).sum().backward()

    base = time_call(call)
    parts = [f"{task:10s} S={theta_samples:4d} mc {base}"]
    for estimator in ESTIMATORS:
        _, once = timed(functools.partial(acqf.draw_weights, estimator))
        acqf.estimator = estimator
        t = time_call(call)
        parts.append(
            f"{estimator} {t} ({change_per_call(t, base):+5.1f}%; "
            f"weights once {1000 * once:5.2f} ms)"
        )
    return " | ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    warnings.simplefilter("ignore")
    print(f"threads {torch.get_num_threads()}; ms per call: median [min, max]")
    for task in TASKS:
        for s in (32, 512):
            print(row(task, s), flush=True)


if __name__ == "__main__":
    main()
