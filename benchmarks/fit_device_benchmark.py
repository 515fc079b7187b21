"""Where a GP fit is fastest: the same MAP fits on the CPU and on a GPU, by training-set size.

The measurement behind :data:`orthobench.devices.CPU_FIT_MAX_POINTS` (``fit_device: auto``).
States: for Hartmann6 and Levy16 and each seed, the shared initial design of ``n`` points that
``orthobench run`` evaluates for the seed (the probe's state at iteration 0,
:mod:`orthobench.probe.states`), Matérn-5/2 ARD GP, for each ``n`` of ``--sizes``. Each state is
fitted on each device of ``--devices`` one after the other (the fast fit, then BoTorch's
``fit_gpytorch_mll`` for the sizes up to ``--botorch-max``), after an untimed fit per device that
pays for CUDA's context and kernel caches. The fast fit runs on one CPU thread whatever
``--threads`` says (:func:`orthobench.surrogates.fit.fit_fast`); BoTorch's uses ``--threads``.

Printed per ``n``, fit and device: the median seconds over the states, and the median over
states of the device's seconds over the CPU's for the same state (below 1: the device is
faster), with min and max; the largest difference of the final negative log posterior between
the devices (nats). Run:
``.venv/bin/python benchmarks/fit_device_benchmark.py [--devices cpu,cuda] [--sizes 32,64,...]
[--seeds N] [--threads T] [--botorch-max N]``.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import _states
import torch
from _timing import machine_line, timed

from orthobench.surrogates.fit import fit_model, neg_map_objective
from orthobench.surrogates.theta_algebra import get_theta, theta_layout

TASKS = ("hartmann6", "levy16")


def _fit(x: torch.Tensor, y: torch.Tensor, fit: str, device: str) -> tuple[float, float]:
    """Seconds of one fit on ``device`` (synchronized) and ``-ell`` at its theta."""
    x, y = x.to(device), y.to(device)
    (model, _), seconds = timed(lambda: fit_model(x, y, "matern52-ard", fit=fit), device)
    theta = get_theta(model).unsqueeze(0)
    nlp = float(neg_map_objective(theta, theta_layout(model), x, model.train_targets))
    return seconds, nlp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--devices", default="cpu,cuda", help="comma-separated; the first is the baseline"
    )
    parser.add_argument("--sizes", default="32,64,128,256,512,1024")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--botorch-max", type=int, default=256)
    args = parser.parse_args()
    devices = args.devices.split(",")
    torch.set_num_threads(args.threads)
    print(machine_line())
    warnings.simplefilter("ignore")
    print(f"threads {torch.get_num_threads()}, seeds {args.seeds} per task, devices {devices}")
    for device in devices:
        if device != "cpu":
            print(f"{device}: {torch.cuda.get_device_name(torch.device(device))}")
        _fit(*_states.history("hartmann6", 99, 16), "fast", device)
    print("n | fit | device | median s | device s / baseline s: median [min, max] | max |d nlp|")
    for n in (int(s) for s in args.sizes.split(",")):
        fits = ["fast"] + (["botorch"] if n <= args.botorch_max else [])
        designs = [_states.history(task, seed, n) for task in TASKS for seed in range(args.seeds)]
        for fit in fits:
            runs: dict[str, list[tuple[float, float]]] = {device: [] for device in devices}
            for x, y in designs:
                for device in devices:
                    runs[device].append(_fit(x, y, fit, device))
            base = runs[devices[0]]
            for device, measured in runs.items():
                ratios = [s / b for (s, _), (b, _) in zip(measured, base, strict=True)]
                d_nlp = max(abs(v - b) for (_, v), (_, b) in zip(measured, base, strict=True))
                print(
                    f"{n} | {fit} | {device} | {statistics.median(s for s, _ in measured):.3f} | "
                    f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}] | "
                    f"{d_nlp:.1e}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
