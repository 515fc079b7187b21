"""Per-step seconds of OrthoBO (S = 512, BoTorch's fit and the fast fit) vs BoTorch-default qLogEI.

OrthoBO runs with BoTorch's fit, with the fast fit (the default), with the fast fit and the raw
samples screened on all draws (``screen_theta_samples: null``, the paper's multistart; the
default screens on 64) and with the fast fit and the coarse-to-fine acquisition maximization
(``coarse_theta_samples: 64``, CPU only).

For each function (Hartmann6, Levy16) and seed, a scrambled Sobol design of ``n0`` points (32
unless ``--n0`` says otherwise) is told to every optimizer, then each runs ``--steps`` BO steps through its ``ask``/``tell`` API
on the same function; the methods of one (function, seed) run one after the other, so a load on
the machine hits them alike. Seconds are the optimizers' own ``fit_seconds`` and
``acq_seconds`` (what a run records per step). The first BO step is left out of the summary
(no warm start yet, first-call overheads), as in issue 16's measurement (steps 2-4).

``--devices cpu,cuda`` runs every method on each device, the devices of one (function, seed,
method) back to back after an untimed warm-up step on each; the second table then gives each
method's step on a device over its step on the CPU at the same (seed, step). ``--fit-device``
is the optimizers' ``fit_device`` (``auto``: GPs of up to
:data:`orthobench.devices.CPU_FIT_MAX_POINTS` points are fitted on the CPU, whatever the device).

Printed per function and method: median fit, acquisition and step seconds over the kept steps
and seeds, and the ratio of the method's step to qLogEI's *at the same (seed, step)*: geometric
mean with min and max over the kept steps and seeds. Run:
``.venv/bin/python benchmarks/step_benchmark.py [--seeds N] [--steps T] [--threads K] [--n0 M]
[--devices cpu,cuda] [--fit-device auto|cpu|device] [--methods qlogei,...]``.
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

from orthobench.devices import FIT_DEVICES
from orthobench.optimizers.botorch_baselines import QLogEI
from orthobench.optimizers.orthobo import OrthoBO

FUNCTIONS = {"hartmann6": Hartmann(dim=6), "levy16": Levy(dim=16)}
METHODS = {
    "qlogei": lambda d, **kw: QLogEI(d, **kw),
    "orthobo fit=botorch": lambda d, **kw: OrthoBO(d, theta_samples=512, fit="botorch", **kw),
    "orthobo fit=fast": lambda d, **kw: OrthoBO(d, theta_samples=512, fit="fast", **kw),
    "orthobo fit=fast screen=all": lambda d, **kw: OrthoBO(
        d, theta_samples=512, fit="fast", screen_theta_samples=None, **kw
    ),
    "orthobo fit=fast coarse=64": lambda d, **kw: OrthoBO(
        d, theta_samples=512, fit="fast", coarse_theta_samples=64, **kw
    ),
}


def run(
    function,
    method: str,
    seed: int,
    steps: int,
    n0: int,
    device: str = "cpu",
    fit_device: str = "auto",
) -> list[tuple[float, float]]:
    """``(fit_seconds, acq_seconds)`` of each of ``steps`` BO steps of ``method`` on ``device``
    after ``n0`` design points."""
    d = function.dim
    low, high = function.bounds.double()
    x = SobolEngine(d, scramble=True, seed=seed).draw(n0, dtype=torch.float64)
    optimizer = METHODS[method](d, seed=seed, device=device, fit_device=fit_device)
    optimizer.tell(x.numpy(), function(low + (high - low) * x).numpy())
    seconds = []
    for _ in range(steps):
        suggestion = optimizer.ask(1)
        seconds.append((suggestion.fit_seconds, suggestion.acq_seconds))
        u = torch.as_tensor(np.asarray(suggestion.x), dtype=torch.float64)
        optimizer.tell(u.numpy(), function(low + (high - low) * u).numpy())
    return seconds


def _ratio_summary(ratios: list[float]) -> str:
    """Geometric mean [min, max] of per-step ratios."""
    geo = math.exp(statistics.mean(math.log(r) for r in ratios))
    return f"{geo:.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n0", type=int, default=32)
    parser.add_argument("--devices", default="cpu", help="comma-separated, e.g. cpu,cuda")
    parser.add_argument("--fit-device", default="auto", choices=FIT_DEVICES)
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help="comma-separated subset; qlogei is the reference",
    )
    args = parser.parse_args()
    devices = args.devices.split(",")
    methods = ["qlogei", *(m for m in args.methods.split(",") if m != "qlogei")]
    if unknown := set(methods) - set(METHODS):
        parser.error(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    print(
        f"threads {torch.get_num_threads()}, seeds {args.seeds}, n0 {args.n0}, BO steps "
        f"{args.steps} (summary: steps 2-{args.steps}), devices {devices}, fit_device "
        f"{args.fit_device}"
    )
    for device in devices:
        if device != "cpu":
            print(f"{device}: {torch.cuda.get_device_name(torch.device(device))}")
    for name, function in FUNCTIONS.items():
        for device in devices:  # untimed: CUDA context, kernel caches, first-call overheads
            run(function, "qlogei", 0, 1, 8, device, args.fit_device)
        seconds = {(m, dev): [] for m in methods for dev in devices}
        for seed in range(args.seeds):
            for method in methods:
                for device in devices:
                    timed = run(
                        function, method, seed, args.steps, args.n0, device, args.fit_device
                    )
                    seconds[method, device].append(timed[1:])
        totals = {
            key: [fit + acq for per_seed in per_seeds for fit, acq in per_seed]
            for key, per_seeds in seconds.items()
        }
        print("function | device | method | fit s | acq s | step s | step / qlogei step")
        for (method, device), per_seeds in seconds.items():
            steps = [step for per_seed in per_seeds for step in per_seed]
            ratios = [
                t / r for t, r in zip(totals[method, device], totals["qlogei", device], strict=True)
            ]
            print(
                f"{name} | {device} | {method} | {statistics.median(f for f, _ in steps):.3f} | "
                f"{statistics.median(a for _, a in steps):.3f} | "
                f"{statistics.median(totals[method, device]):.3f} | {_ratio_summary(ratios)}",
                flush=True,
            )
        if len(devices) > 1:
            print("function | device | method | step / cpu step")
            for (method, device), total in totals.items():
                if device != "cpu":
                    ratios = [t / r for t, r in zip(total, totals[method, "cpu"], strict=True)]
                    print(f"{name} | {device} | {method} | {_ratio_summary(ratios)}", flush=True)


if __name__ == "__main__":
    main()
