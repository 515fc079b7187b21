"""The first BO steps of a fresh CUDA process, with and without :func:`orthobench.warmup.warm_up`.

Each case runs in a fresh Python process (the one-time costs are per process): a cell of
``--task`` and ``--optimizer`` (default: OrthoBO as the suites run it, on Hartmann6 with 32 initial
points) runs ``--steps`` BO steps on ``--device`` by the package's loop, and each step's fit and
acquisition seconds are printed, as the run records them. ``cold``: the cell alone, as a worker's
first cell ran before the warm-up; ``warm``: :func:`~orthobench.warmup.warm_up` first (its
seconds printed), as :class:`~orthobench.execution.CellJob` runs a cell now. The cases run cold,
warm, cold, warm: the first process on a fresh machine also pays what the machine then keeps. ``--profile`` adds
a cold case under cProfile, with the 25 functions of largest own time.

Run (on a machine with a GPU): ``python benchmarks/cuda_first_step.py [--device cuda]
[--task hartmann6] [--optimizer orthobo] [--steps 3] [--n0 32] [--threads 1] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
import time

import torch

CASES = ("cold", "warm")
#: The fresh processes, in order: the first on a fresh machine also pays what the machine keeps
#: for later processes (libraries read into its page cache), so each case runs twice.
ORDER = ("cold", "warm", "cold", "warm")


def _case(args: argparse.Namespace) -> None:
    import _states

    from orthobench.loop import run_cell
    from orthobench.warmup import warm_up

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cell = _states.cell(args.task, 0, args.n0, args.steps, args.optimizer)
    start = time.perf_counter()
    if args.case == "warm":
        print(f"  warm_up {warm_up(cell, device):.2f} s")
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    records = run_cell(cell, device)
    if profiler is not None:
        profiler.disable()
    for r in records:
        if r.phase == "bo":
            print(
                f"  step {r.iteration - args.n0 + 1}: fit {r.fit_seconds:.2f} s, "
                f"acquisition {r.acq_seconds:.2f} s"
            )
    print(f"  process total {time.perf_counter() - start:.1f} s")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--task", default="hartmann6")
    parser.add_argument("--optimizer", default="orthobo")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--n0", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        _case(args)
        return
    from _timing import machine_line  # here: a case's process measures its own imports

    print(machine_line(args.threads))
    print(
        f"task={args.task} optimizer={args.optimizer} n0={args.n0} device={args.device} "
        f"threads={args.threads} torch={torch.__version__}"
    )
    plain = [sys.executable, __file__, *(a for a in sys.argv[1:] if a != "--profile")]
    runs = [(case, plain) for case in ORDER]
    if args.profile:
        runs.append(("cold", [*plain, "--profile"]))
    for case, command in runs:
        print(f"{case}{' (profiled)' if '--profile' in command else ''}:", flush=True)
        subprocess.run([*command, "--case", case], check=False)


if __name__ == "__main__":
    main()
