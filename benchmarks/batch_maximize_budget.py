"""The multistart budget of OrthoBO's joint q-batch maximization: time against the value found.

At ``q > 1`` OrthoBO maximizes the nested marginal qEI jointly over ``q x d`` coordinates with
``optimize_acqf``'s batched L-BFGS-B (8 restarts, up to 2,000 iterations each, and BoTorch's
rerun, from newly screened raw samples, of the restarts that stop with an optimization warning).
Each setting below changes only those three knobs, on the same states: the initial design of 32
points of Hartmann6 and Levy16 per seed, OrthoBO's default fit and theta draws, its optimizer seed.

Per state and setting: the ``ask(q)`` seconds and the log-acquisition its batch reaches under the
default acquisition of the state (``acqf`` built once from the default optimizer: the same
objective every setting maximizes), minus the default's. Summary per setting: seconds over the
default's (geometric mean, min, max over the states), and the value difference (median, worst,
best, states more than 0.01 below). One torch thread. Run: ``.venv/bin/python
benchmarks/batch_maximize_budget.py [--q 4] [--seeds 0-9]``.
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

from orthobench.optimizers import gp_base

TASKS = ("hartmann6", "levy16")
#: Each setting: restarts (None: the optimizer's), L-BFGS-B iterations (None: BoTorch's 2,000),
#: whether restarts that stop with a warning are rerun (BoTorch's default: yes); ``greedy``:
#: ``optimize_acqf(sequential=True)``, one point at a time with the earlier ones pending (the
#: raw samples scored by the acquisition itself: the screen knows no pending points), and
#: ``polish``: the greedy batch then climbed jointly as the one start of a ``q x d`` restart.
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "no rerun": {"retry": False},
    "no rerun, 100 iterations": {"retry": False, "maxiter": 100},
    "8 restarts, 50 iterations": {"maxiter": 50},
    "16 restarts, no rerun, 50 iterations": {"restarts": 16, "retry": False, "maxiter": 50},
    "16 restarts, no rerun, 100 iterations": {"restarts": 16, "retry": False, "maxiter": 100},
    "sequential greedy": {"greedy": True},
    "greedy, then a joint climb from it": {"greedy": True, "polish": True},
}


def _with_setting(setting: dict[str, Any]):
    """``optimize_acqf`` with ``setting``'s knobs (in place of the one ``gp_base`` calls)."""
    optimize_acqf = gp_base.optimize_acqf

    def run(*args: Any, **kwargs: Any):
        if "maxiter" in setting:
            kwargs["options"] = {**(kwargs.get("options") or {}), "maxiter": setting["maxiter"]}
        if "restarts" in setting and kwargs.get("batch_initial_conditions") is None:
            kwargs["num_restarts"] = setting["restarts"]
        if "retry" in setting:
            kwargs["retry_on_optimization_warning"] = setting["retry"]
        if not setting.get("greedy") or kwargs.get("batch_initial_conditions") is not None:
            return optimize_acqf(*args, **kwargs)
        candidate, value = optimize_acqf(
            *args, **{**kwargs, "sequential": True, "ic_generator": None}
        )
        if not setting.get("polish"):
            return candidate, value
        polish = {**kwargs, "ic_generator": None, "num_restarts": 1, "raw_samples": None}
        return optimize_acqf(*args, **{**polish, "batch_initial_conditions": candidate[None]})

    return run


def _seeds(text: str) -> range:
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--q", type=int, default=4)
    parser.add_argument("--seeds", type=_seeds, default=_seeds("0-9"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    original = gp_base.optimize_acqf
    ratios: dict[str, list[float]] = {name: [] for name in SETTINGS}
    gaps: dict[str, list[float]] = {name: [] for name in SETTINGS}
    print(f"q={args.q} seeds={args.seeds.start}-{args.seeds.stop - 1} threads=1")
    for task in TASKS:
        for seed in args.seeds:
            run = _states.run(_states.cell(task, seed, 32, 0, "orthobo", q=args.q))
            reference = run.optimizer(0)
            acqf = reference._build_acquisition(
                reference._fit(), reference._theta_budget(args.q), args.q
            )
            found = {}
            for name, setting in SETTINGS.items():
                gp_base.optimize_acqf = _with_setting(setting)
                try:
                    optimizer = run.optimizer(0)
                    start = time.perf_counter()
                    x = optimizer.ask(args.q).x
                    seconds = time.perf_counter() - start
                finally:
                    gp_base.optimize_acqf = original
                with torch.no_grad():
                    found[name] = (seconds, float(acqf(torch.as_tensor(x).unsqueeze(0))))
            base_s, base_v = found["default"]
            cells = []
            for name, (seconds, value) in found.items():
                ratios[name].append(seconds / base_s)
                gaps[name].append(value - base_v)
                cells.append(f"{seconds:.2f} s {value - base_v:+.3f}")
            print(f"{task} seed {seed}: " + " | ".join(cells), flush=True)
    print(
        "setting | seconds / default: geo mean [min, max] | log-acq - default: median, worst, "
        "best | states below -0.01"
    )
    for name in SETTINGS:
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios[name]))
        g = gaps[name]
        print(
            f"{name} | {geo:.2f} [{min(ratios[name]):.2f}, {max(ratios[name]):.2f}] | "
            f"{statistics.median(g):+.3f}, {min(g):+.3f}, {max(g):+.3f} | "
            f"{sum(v < -0.01 for v in g)} of {len(g)}"
        )


if __name__ == "__main__":
    main()
