"""Wall seconds per BO step at q = 1, 2, 4, 8 points per step, on as many workers as points.

For each batch size ``q`` the script writes a one-cell-per-seed suite of ``--task`` (``delayed``:
Hartmann6 whose evaluations each wait ``--seconds`` without using the CPU; ``cnn-digits``: the
CNN of ``suites/cnn-digits.yaml``, one epoch on scikit-learn's 8x8 digits) and ``--optimizer``,
runs it with ``orthobench run --workers q`` (the process pool: the q evaluations of a step run in
q worker processes of the cell) and reads the stored rows back. Printed per q: the wall seconds
per BO step (each seed's mean over its steps from the recorded ``wall_seconds``, then the median
and [min, max] over seeds), the step's fit and acquisition seconds, the median seconds of one
evaluation, how many of a step's evaluations ran at once (their seconds over the span from the
first one's start to the last one's end, mean over steps; synchronous cells only), the step over
one evaluation, and the best-so-far after the last step, median over seeds: the regret, or the
objective (``best_y``) for a task with no known optimum. Steps and evaluations are the cells'
own records; torch runs 1 thread per cell and per evaluation process.

``--jitter J`` makes the ``delayed`` task's waits unequal (``seconds`` times a factor within
``1 +- J``, drawn from each evaluation's seed), as training runs are. ``--schedules
synchronous,asynchronous`` also runs the cells of ``q > 1`` asynchronously (``asynchronous:
true``: a point is asked as each evaluation finishes, the running ones pending; a "step" is then
one ask), right after the synchronous ones. Both print the wall seconds per BO evaluation: from
the end of the initial design to the last evaluation's end, over the ``q * steps`` BO evaluations
(median over seeds); with both schedules a paired line per ``q`` gives, seed by seed, the
asynchronous cell's wall seconds per BO evaluation over the synchronous one's (geometric mean
[min, max]) and its final best minus the synchronous one's (median [min, max], two-sided
Wilcoxon signed-rank p over the seeds).

A step at ``q`` on ``q`` workers takes about its fit, its acquisition and one evaluation when the
machine has a core per worker; with fewer cores, CPU-bound evaluations (the CNN) share them.
Run: ``.venv/bin/python benchmarks/batch_wall_time.py [--task delayed|cnn-digits] [--q 1,2,4,8]
[--seeds 3] [--steps 3] [--optimizer sobol] [--seconds 2] [--jitter 0.75] [--schedules
synchronous,asynchronous] [--device cuda] -o results/batch-wall-time``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import scipy.stats
import yaml
from _timing import machine_line

from orthobench.results import load_runs

#: The task entry of each ``--task`` choice (``{seconds}`` filled from ``--seconds``).
TASKS = {
    "delayed": {"name": "delayed", "params": {"function": "hartmann6", "seconds": None}},
    "cnn-digits": {"name": "cnn", "params": {"dataset": "digits", "outlier_prob": 0.2}},
}
#: Small acquisition settings, so the step's time is mostly its evaluations.
OPTIMIZER_PARAMS = {
    "sobol": {},
    "qlogei": {"raw_samples": 128, "num_restarts": 4},
    "orthobo": {"theta_samples": 64, "raw_samples": 128, "num_restarts": 4},
    "mc-ei": {"theta_samples": 64, "raw_samples": 128, "num_restarts": 4},
}


def suite(
    task: str,
    optimizer: str,
    q: int,
    seeds: int,
    steps: int,
    seconds: float,
    jitter: float = 0.0,
    asynchronous: bool = False,
) -> dict:
    entry = {**TASKS[task], "label": task}
    if task == "delayed":
        entry["params"] = {**entry["params"], "seconds": seconds, "jitter": jitter}
    return {
        "asynchronous": asynchronous,
        "name": f"batch-wall-time-q{q}",
        "seeds": seeds,
        "n_init": 4,
        "budget": steps,
        "q": q,
        "tasks": [entry],
        "optimizers": [{"name": optimizer, "params": OPTIMIZER_PARAMS[optimizer]}],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="delayed")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZER_PARAMS), default="sobol")
    parser.add_argument("--q", default="1,2,4,8")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="delay of `delayed`")
    parser.add_argument("--jitter", type=float, default=0.0, help="`delayed`'s spread of waits")
    parser.add_argument("--schedules", default="synchronous", help="synchronous,asynchronous")
    parser.add_argument("--device", default="cpu", help="the cells' torch device, e.g. cuda")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    schedules = args.schedules.split(",")
    print(machine_line(threads=1))  # per process: each cell's, each evaluation's
    print(
        f"task {args.task}, optimizer {args.optimizer}, seeds {args.seeds}, BO steps "
        f"{args.steps}, device {args.device}, cores {os.cpu_count()}, 1 torch thread per process, "
        f"jitter {args.jitter}"
    )
    print("q | schedule | wall s per step: median [min, max] | fit + acquisition s | one "
          "evaluation s | evaluations at once | step / evaluation | wall s per BO evaluation | "
          "final best (median)")  # fmt: skip
    for q in (int(v) for v in args.q.split(",")):
        seeds: dict[str, pd.DataFrame] = {}
        for schedule in schedules if q > 1 else schedules[:1]:
            seeds[schedule] = run(args, q, schedule == "asynchronous")
            table = seeds[schedule]
            step = table["step"].median()
            evaluation = table["evaluation"].median()
            # An asynchronous cell's "step" is one ask, of one point after the first: its
            # evaluations overlap those of other asks, which a step's span does not see.
            at_once = "-" if schedule == "asynchronous" else f"{table['at_once'].median():.2f}"
            print(
                f"{q} | {schedule} | {step:.2f} [{table['step'].min():.2f}, "
                f"{table['step'].max():.2f}] | {table['model'].median():.2f} | "
                f"{evaluation:.2f} | {at_once} | {step / evaluation:.2f} | "
                f"{table['per_evaluation'].median():.2f} | {table['final'].median():.3g}",
                flush=True,
            )
        if len(seeds) == 2:
            sync, asyn = seeds["synchronous"], seeds["asynchronous"]
            ratio = asyn["per_evaluation"] / sync["per_evaluation"]
            gain = asyn["final"] - sync["final"]
            p = scipy.stats.wilcoxon(gain).pvalue if gain.abs().sum() else 1.0
            print(
                f"{q} | asynchronous / synchronous, paired by seed | wall s per BO evaluation "
                f"{scipy.stats.gmean(ratio):.2f} [{ratio.min():.2f}, {ratio.max():.2f}] | final "
                f"best difference {gain.median():.3g} [{gain.min():.3g}, {gain.max():.3g}], "
                f"p {p:.2g}",
                flush=True,
            )


def run(args: argparse.Namespace, q: int, asynchronous: bool) -> pd.DataFrame:
    """Run the suite of ``q`` (asynchronously or not) and return per seed its wall seconds per
    BO step, per BO evaluation, the median evaluation's seconds and the final best."""
    out = args.output / (f"q{q}-async" if asynchronous else f"q{q}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "suite.yaml"
    spec = suite(
        args.task, args.optimizer, q, args.seeds, args.steps, args.seconds, args.jitter,
        asynchronous,
    )  # fmt: skip
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    subprocess.run(
        [sys.executable, "-m", "orthobench", "run", str(path), "-o", str(out), "--workers", str(q),
         "--threads-per-cell", "1", "--device", args.device, "-q", "--force"],
        check=True,
    )  # fmt: skip
    rows = []
    for seed, cell in load_runs([out]).groupby("seed"):
        ends = cell.groupby("batch")["wall_seconds"].max().sort_index()
        bo = cell["phase"] == "bo"
        span = cell.loc[bo, "wall_seconds"].max() - cell.loc[~bo, "wall_seconds"].max()
        # A row's wall_seconds is its evaluation's end, so each evaluation ran over
        # [end - eval_seconds, end]; a batch's busy seconds over the span of its evaluations is
        # how many ran at once on average (1: one after another, q: all together).
        batches = cell[bo].assign(start=cell["wall_seconds"] - cell["eval_seconds"])
        batches = batches.groupby("batch").agg(
            start=("start", "min"), end=("wall_seconds", "max"), busy=("eval_seconds", "sum"),
            model=("fit_seconds", "max"), acq=("acq_seconds", "max"),
        )  # fmt: skip
        last = cell.sort_values("iteration").iloc[-1]
        rows.append(
            {
                "seed": seed,
                "step": float(ends.diff().dropna().mean()),
                "model": float((batches["model"] + batches["acq"]).mean()),
                "at_once": float((batches["busy"] / (batches["end"] - batches["start"])).mean()),
                "per_evaluation": float(span / bo.sum()),
                "evaluation": float(cell.loc[bo, "eval_seconds"].median()),
                "final": float(last["best_y"] if pd.isna(last["regret"]) else last["regret"]),
            }
        )
    return pd.DataFrame(rows).set_index("seed")


if __name__ == "__main__":
    main()
