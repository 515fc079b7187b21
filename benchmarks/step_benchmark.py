"""Per-step seconds of OrthoBO (S = 512, BoTorch's fit and the fast fit) vs BoTorch-default qLogEI.

OrthoBO runs with BoTorch's fit, with the fast fit (the default; also on S = 256 and 128 draws
instead of 512), with the fast fit and the raw samples screened on all draws
(``screen_theta_samples: null``, the paper's multistart; the default screens on 64) and with the
fast fit and the coarse-to-fine acquisition maximization (``coarse_theta_samples: 64``, CPU only).

For each task (Hartmann6, Levy16) and seed, each method runs as the cell ``orthobench run``
makes of it: the shared initial design of ``n0`` points (32 unless ``--n0`` says otherwise), then
``--steps`` BO steps of the package's loop; the OrthoBO variants share the optimizer seed. The
methods of one (task, seed) run one after the other, so a load on the machine hits them alike.
Seconds are the optimizers' own ``fit_seconds`` and ``acq_seconds`` (what a run records per
step). The first BO step is left out of the summary (no warm start yet, first-call overheads),
as in issue 16's measurement (steps 2-4).

``--q 1,4`` runs every method at each batch size (points per BO step; OrthoBO's draws at
``q > 1`` are its ``batch_theta_samples``); a step's seconds are counted once per batch, the
ratio is against qLogEI's step at the same (q, seed, step), and a last table gives each method's
step at ``q`` over its own step at the first ``q`` listed.

``--devices cpu,cuda`` runs every method on each device, the devices of one (task, seed,
method) back to back after an untimed warm-up step on each; the second table then gives each
method's step on a device over its step on the CPU at the same (seed, step). ``--fit-device``
is the optimizers' ``fit_device`` (``auto``: GPs of up to
:data:`orthobench.devices.CPU_FIT_MAX_POINTS` points are fitted on the CPU, whatever the device).

Printed per task and method: median fit, acquisition and step seconds over the kept steps
and seeds, and the ratio of the method's step to qLogEI's *at the same (seed, step)*: geometric
mean with min and max over the kept steps and seeds. Run:
``.venv/bin/python benchmarks/step_benchmark.py [--seeds N] [--steps T] [--threads K] [--n0 M]
[--q 1,4] [--devices cpu,cuda] [--fit-device auto|cpu|device] [--methods qlogei,...]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import warnings

import _states
import torch
from _timing import machine_line

from orthobench.devices import FIT_DEVICES
from orthobench.results import RunRecord

TASKS = ("hartmann6", "levy16")
#: Each method's optimizer: its registry name and parameters.
METHODS = {
    "qlogei": ("qlogei", {}),
    "orthobo fit=botorch": ("orthobo", {"theta_samples": 512, "fit": "botorch"}),
    "orthobo fit=fast": ("orthobo", {"theta_samples": 512, "fit": "fast"}),
    # Smaller budgets: what the q = 1 step would cost at the budgets the equal-accuracy rule
    # weighed (docs/benchmarks.md, "The q = 1 budget on held-out states").
    "orthobo fit=fast S=256": ("orthobo", {"theta_samples": 256, "fit": "fast"}),
    "orthobo fit=fast S=128": ("orthobo", {"theta_samples": 128, "fit": "fast"}),
    "orthobo fit=fast screen=all": (
        "orthobo",
        {"theta_samples": 512, "fit": "fast", "screen_theta_samples": None},
    ),
    "orthobo fit=fast coarse=64": (
        "orthobo",
        {"theta_samples": 512, "fit": "fast", "coarse_theta_samples": 64},
    ),
}


def run(
    task: str,
    method: str,
    seed: int,
    steps: int,
    n0: int,
    device: str = "cpu",
    fit_device: str = "auto",
    q: int = 1,
) -> list[tuple[float, float]]:
    """``(fit, acquisition)`` seconds of each BO step of ``method``'s cell on ``device``: ``n0``
    initial points, then ``steps`` BO steps of ``q`` points (the step's seconds are on each of
    its records: counted once)."""
    name, params = METHODS[method]
    cell = _states.cell(task, seed, n0, steps, name, q=q, fit_device=fit_device, **params)
    records: list[RunRecord] = _states.run(cell, device).records
    first = {r.batch: r for r in reversed(records) if r.phase == "bo"}
    return [(first[b].fit_seconds, first[b].acq_seconds) for b in sorted(first)]


def _ratio_summary(ratios: list[float]) -> str:
    """Geometric mean [min, max] of per-step ratios."""
    geo = math.exp(statistics.mean(math.log(r) for r in ratios))
    return f"{geo:.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n0", type=int, default=32)
    parser.add_argument("--devices", default="cpu", help="comma-separated, e.g. cpu,cuda")
    parser.add_argument("--fit-device", default="auto", choices=FIT_DEVICES)
    parser.add_argument("--q", default="1", help="comma-separated batch sizes, e.g. 1,4")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help="comma-separated subset; qlogei is the reference",
    )
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2: the summary leaves out the first BO step")
    devices = args.devices.split(",")
    batch_sizes = [int(q) for q in args.q.split(",")]
    methods = ["qlogei", *(m for m in args.methods.split(",") if m != "qlogei")]
    if unknown := set(methods) - set(METHODS):
        parser.error(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
    torch.set_num_threads(args.threads)
    print(machine_line())
    warnings.simplefilter("ignore")
    print(
        f"threads {torch.get_num_threads()}, seeds {args.seeds}, n0 {args.n0}, BO steps "
        f"{args.steps} (summary: steps 2-{args.steps}), devices {devices}, fit_device "
        f"{args.fit_device}, q {batch_sizes}"
    )
    for device in devices:
        if device != "cpu":
            print(f"{device}: {torch.cuda.get_device_name(torch.device(device))}")
    for task in TASKS:
        for device in devices:  # untimed: CUDA context, kernel caches, first-call overheads
            run(task, "qlogei", 0, 1, 8, device, args.fit_device)
        seconds = {(m, dev, q): [] for q in batch_sizes for m in methods for dev in devices}
        for seed in range(args.seeds):
            for q in batch_sizes:
                for method in methods:
                    for device in devices:
                        bo = run(
                            task, method, seed, args.steps, args.n0, device, args.fit_device, q
                        )
                        seconds[method, device, q].append(bo[1:])
        totals = {
            key: [fit + acq for per_seed in per_seeds for fit, acq in per_seed]
            for key, per_seeds in seconds.items()
        }
        print("task | device | q | method | fit s | acq s | step s | step / qlogei step")
        for (method, device, q), per_seeds in seconds.items():
            steps = [step for per_seed in per_seeds for step in per_seed]
            ratios = [
                t / r
                for t, r in zip(totals[method, device, q], totals["qlogei", device, q], strict=True)
            ]
            print(
                f"{task} | {device} | {q} | {method} | "
                f"{statistics.median(f for f, _ in steps):.3f} | "
                f"{statistics.median(a for _, a in steps):.3f} | "
                f"{statistics.median(totals[method, device, q]):.3f} | {_ratio_summary(ratios)}",
                flush=True,
            )
        if len(batch_sizes) > 1:
            first = batch_sizes[0]
            print(f"task | device | q | method | step / q={first} step")
            for (method, device, q), total in totals.items():
                if q != first:
                    ratios = [
                        t / r for t, r in zip(total, totals[method, device, first], strict=True)
                    ]
                    print(f"{task} | {device} | {q} | {method} | {_ratio_summary(ratios)}")
        if len(devices) > 1:
            print("task | device | q | method | step / cpu step")
            for (method, device, q), total in totals.items():
                if device != "cpu":
                    ratios = [t / r for t, r in zip(total, totals[method, "cpu", q], strict=True)]
                    print(f"{task} | {device} | {q} | {method} | {_ratio_summary(ratios)}")


if __name__ == "__main__":
    main()
