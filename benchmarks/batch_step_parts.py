"""Where an OrthoBO batch step's seconds go: each greedy stage and the joint climb.

For each task (Hartmann6, Levy16) and seed, OrthoBO's first BO step after the shared initial
design of 32 points proposes ``q`` points with the default batch maximization (sequential greedy
on ``batch_theta_samples`` draws, then a joint climb on all ``theta_samples``:
:meth:`OrthoBO._maximize_greedy <orthobench.optimizers.orthobo.OrthoBO._maximize_greedy>`).
Each of BoTorch's batch multistarts in the step (its raw-sample screen and its L-BFGS-B
restarts, with BoTorch's rerun of restarts that end with an optimization warning) is timed: the
``q`` greedy stages, then the climb. Printed per state: the stages' seconds, the
climb's, the rest of the acquisition's seconds (building the acquisitions and their draws) and
the fit's; then the median of each over the states. One torch thread. Run:
``.venv/bin/python benchmarks/batch_step_parts.py [--q 4] [--seeds 0-4]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import _states
import torch
from _timing import machine_line
from botorch.optim import optimize as botorch_optimize

TASKS = ("hartmann6", "levy16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--q", type=int, default=4)
    parser.add_argument("--seeds", type=_states.seed_range, default=_states.seed_range("0-4"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    warnings.filterwarnings("ignore")
    multistart = botorch_optimize._optimize_acqf_batch
    seconds: list[float] = []

    def timed(*a: Any, **kw: Any):
        start = time.perf_counter()
        try:
            return multistart(*a, **kw)
        finally:
            seconds.append(time.perf_counter() - start)

    botorch_optimize._optimize_acqf_batch = timed
    parts: dict[str, list[float]] = {}
    print(f"q={args.q} seeds={args.seeds.start}-{args.seeds.stop - 1} threads=1")
    print("state | greedy stages s | climb s | rest of the acquisition s | fit s")
    try:
        for task in TASKS:
            for seed in args.seeds:
                run = _states.run(_states.cell(task, seed, 32, 0, "orthobo", q=args.q))
                optimizer = run.optimizer(0)
                seconds.clear()
                suggestion = optimizer.ask(args.q)
                *stages, climb = seconds
                rest = suggestion.acq_seconds - sum(seconds)
                row = {"greedy": sum(stages), "climb": climb, "rest": rest}
                row["fit"] = suggestion.fit_seconds
                for name, value in row.items():
                    parts.setdefault(name, []).append(value)
                print(
                    f"{task} seed {seed} | {' + '.join(f'{s:.2f}' for s in stages)} | "
                    f"{climb:.2f} | {rest:.2f} | {suggestion.fit_seconds:.2f}",
                    flush=True,
                )
    finally:
        botorch_optimize._optimize_acqf_batch = multistart
    print(
        "median | "
        + " | ".join(f"{name} {statistics.median(values):.2f}" for name, values in parts.items())
    )


if __name__ == "__main__":
    main()
