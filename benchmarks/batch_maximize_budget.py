"""The q-batch maximizations of OrthoBO against each other: time and value found.

``batch_maximization: joint`` maximizes the nested marginal qEI jointly over ``q x d`` coordinates
with ``optimize_acqf``'s batched L-BFGS-B (8 restarts from screened raw batches, up to 2,000
iterations each, and BoTorch's rerun, from newly screened raw samples, of the restarts that stop
with an optimization warning), on ``batch_theta_samples`` (64) draws. The joint settings below
change those three knobs; ``sequential greedy`` is ``optimize_acqf(sequential=True)`` alone;
``greedy`` (the default) is that greedy batch on ``batch_theta_samples`` draws, climbed jointly
from it on all ``theta_samples`` (512) draws (:meth:`OrthoBO._maximize_greedy
<orthobench.optimizers.orthobo.OrthoBO._maximize_greedy>`); the greedy variants move the draws
of either stage. All on the same states: the initial design of 32 points of Hartmann6 and Levy16
per seed, OrthoBO's fit and theta draws, its seed.

Per state and setting: the ``ask(q)`` seconds and the log-acquisition its batch reaches under the
state's full acquisition (``theta_samples`` = 512 draws: the accuracy of the paper's estimator at
its budget; built once, the same objective for every setting), minus the joint setting's.
Summary per setting: seconds over the joint setting's (geometric mean, min, max over the
states), the value difference (median, worst, best, states more than 0.01 below), and the worst
shortfall from the best batch any setting found on the state. One torch thread. Run:
``.venv/bin/python benchmarks/batch_maximize_budget.py [--q 4] [--seeds 0-9] [--settings NAME
...]`` (each name quoted; default: every setting; ``joint`` always runs, as the reference).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings
from typing import Any

import _states
import torch
from _timing import machine_line

from orthobench.optimizers import gp_base

TASKS = ("hartmann6", "levy16")
JOINT = {"batch_maximization": "joint"}
#: Each setting: OrthoBO's parameters, and the knobs of its ``optimize_acqf`` calls: restarts
#: (``restarts``; default the optimizer's 8), L-BFGS-B iterations (``maxiter``; BoTorch's 2,000),
#: whether restarts that stop with a warning are rerun (``retry``; BoTorch's default: yes),
#: ``greedy``: the one joint call replaced by ``optimize_acqf(sequential=True)`` (raw samples
#: scored by the acquisition itself: the screen knows no pending points), and ``climb_maxiter``:
#: L-BFGS-B iterations of the joint climb from the greedy batch alone.
SETTINGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "joint": (JOINT, {}),
    "joint, no rerun": (JOINT, {"retry": False}),
    "joint, no rerun, 100 iterations": (JOINT, {"retry": False, "maxiter": 100}),
    "joint, 50 iterations": (JOINT, {"maxiter": 50}),
    "joint, 16 restarts, no rerun, 50 iterations": (
        JOINT,
        {"restarts": 16, "retry": False, "maxiter": 50},
    ),
    "joint, 16 restarts, no rerun, 100 iterations": (
        JOINT,
        {"restarts": 16, "retry": False, "maxiter": 100},
    ),
    "sequential greedy": (JOINT, {"greedy": True}),
    "greedy and climb on 64 draws": ({"theta_samples": 64}, {}),
    "greedy on 16 draws, climb on 512": ({"batch_theta_samples": 16}, {}),
    "greedy on 32 draws, climb on 512": ({"batch_theta_samples": 32}, {}),
    "greedy on 64 draws, climb on 512 (default)": ({}, {}),
    "greedy and climb on 512 draws": ({"batch_theta_samples": 512}, {}),
    "greedy on 64 draws, climb on 512 for 25 iterations": ({}, {"climb_maxiter": 25}),
}


def _with_setting(setting: dict[str, Any]):
    """``optimize_acqf`` with ``setting``'s knobs (in place of the one ``gp_base`` calls)."""
    optimize_acqf = gp_base.optimize_acqf

    def run(*args: Any, **kwargs: Any):
        climb = kwargs.get("batch_initial_conditions") is not None
        maxiter = setting.get("climb_maxiter") if climb else None
        if maxiter := maxiter or setting.get("maxiter"):
            kwargs["options"] = {**(kwargs.get("options") or {}), "maxiter": maxiter}
        if "restarts" in setting and kwargs.get("batch_initial_conditions") is None:
            kwargs["num_restarts"] = setting["restarts"]
        if "retry" in setting:
            kwargs["retry_on_optimization_warning"] = setting["retry"]
        if setting.get("greedy"):
            kwargs.update(sequential=True, ic_generator=None)
        return optimize_acqf(*args, **kwargs)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--q", type=int, default=4)
    parser.add_argument("--seeds", type=_states.seed_range, default=_states.seed_range("0-9"))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), metavar="NAME")
    args = parser.parse_args()
    unknown = set(args.settings) - set(SETTINGS)
    if unknown:
        parser.error(f"unknown settings {sorted(unknown)}; known: {list(SETTINGS)}")
    settings = {n: v for n, v in SETTINGS.items() if n == "joint" or n in args.settings}
    torch.set_num_threads(1)
    print(machine_line())
    warnings.filterwarnings("ignore")
    original = gp_base.optimize_acqf
    ratios: dict[str, list[float]] = {name: [] for name in settings}
    gaps: dict[str, list[float]] = {name: [] for name in settings}
    shortfalls: dict[str, list[float]] = {name: [] for name in settings}
    print(f"q={args.q} seeds={args.seeds.start}-{args.seeds.stop - 1} threads=1")
    for task in TASKS:
        for seed in args.seeds:
            run = _states.run(_states.cell(task, seed, 32, 0, "orthobo", q=args.q))
            reference = run.optimizer(0)
            acqf = reference._build_acquisition(reference._fit(), reference.theta_samples, args.q)
            found = {}
            for name, (params, knobs) in settings.items():
                gp_base.optimize_acqf = _with_setting(knobs)
                try:
                    optimizer = run.optimizer(0, params)
                    start = time.perf_counter()
                    x = optimizer.ask(args.q).x
                    seconds = time.perf_counter() - start
                finally:
                    gp_base.optimize_acqf = original
                with torch.no_grad():
                    found[name] = (seconds, float(acqf(torch.as_tensor(x).unsqueeze(0))))
            base_s, base_v = found["joint"]
            best = max(value for _, value in found.values())
            cells = []
            for name, (seconds, value) in found.items():
                ratios[name].append(seconds / base_s)
                gaps[name].append(value - base_v)
                shortfalls[name].append(best - value)
                cells.append(f"{seconds:.2f} s {value - base_v:+.3f}")
            print(f"{task} seed {seed}: " + " | ".join(cells), flush=True)
    print(
        "setting | seconds / joint: geo mean [min, max] | log-acq - joint: median, worst, best "
        "| states below -0.01 | worst shortfall from the state's best"
    )
    for name in settings:
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios[name]))
        g = gaps[name]
        print(
            f"{name} | {geo:.2f} [{min(ratios[name]):.2f}, {max(ratios[name]):.2f}] | "
            f"{statistics.median(g):+.3f}, {min(g):+.3f}, {max(g):+.3f} | "
            f"{sum(v < -0.01 for v in g)} of {len(g)} | {max(shortfalls[name]):.3f}"
        )


if __name__ == "__main__":
    main()
