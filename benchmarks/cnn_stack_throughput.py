"""Evaluations per second of the ``cnn`` task: ``k`` configurations trained as one stack
(:meth:`CNNTask.evaluate_batch <orthobench.tasks.cnn.CNNTask.evaluate_batch>`) against the same
``k`` evaluated one after another (:meth:`CNNTask.evaluate`), and the largest difference of their
test errors.

The ``k`` points are drawn uniformly in the unit cube of the task's space (seeded) and mapped to
native units; evaluation ``i`` gets seed ``i``, so the outlier draws are the task's own (with the
default ``--outlier-prob 0.2`` some networks stop after 100-1000 samples, in both modes). Each
round times the sequential loop, then the stack, on the same points and seeds, so both see the
same machine load; printed per round: evaluations per second of each, their ratio and the largest
``|y_stack - y_sequential|``, then the median ratio over rounds. ``--samples N`` shortens every
evaluation to its first ``N`` training samples (a task subclass whose every evaluation stops
there, so every result is flagged an outlier) for a shorter measurement. ``--sequential M``
times only the first ``M`` of the ``k`` one after another (a GPU stack of 64 would otherwise wait
for 64 sequential epochs); ``max |dy|`` then covers those ``M``, and as the ``M`` may hold more or
fewer outliers than the ``k``, the ratio printed is of training samples per second (with ``M = k``
it is the ratio of evaluations per second).
``--no-cuda-graphs`` trains the stack without CUDA graphs (:attr:`CNNTask.cuda_graphs`).

The goals: on 2 cores, mnist-5k at batch size 1, a stack of 8 at >= 3x the evaluations per
second of one after another, test errors within 0.01; on one H100 or H200, >= 10 evaluations per
second.

Run: ``.venv/bin/python benchmarks/cnn_stack_throughput.py [--k 8] [--threads 2]
[--dataset mnist-5k] [--device cpu] [--rounds 2] [--samples N] [--outlier-prob 0.2]
[--sequential M] [--no-cuda-graphs]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from _timing import machine_line

from orthobench.seeding import numpy_rng
from orthobench.tasks.cnn import CNNTask


class _ShortTask(CNNTask):
    """The ``cnn`` task with every evaluation stopped after at most ``samples`` samples."""

    def __init__(self, samples: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.samples = samples

    def outlier_samples(self, seed: int) -> int | None:
        drawn = super().outlier_samples(seed)
        return self.samples if drawn is None else min(drawn, self.samples)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _positive(text: str) -> int:
    """An argument that counts something: 0 gave an IndexError, a ZeroDivisionError or a
    StatisticsError after the data was read."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, but got {value}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=_positive, default=8, help="configurations per stack")
    parser.add_argument("--threads", type=_positive, default=2, help="torch threads")
    parser.add_argument("--dataset", default="mnist-5k")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=_positive, default=2)
    parser.add_argument("--samples", type=_positive, default=None, help="training samples per run")
    parser.add_argument("--outlier-prob", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0, help="seed of the k points")
    parser.add_argument("--sequential", type=_positive, default=None, help="how many to time alone")
    parser.add_argument("--no-cuda-graphs", action="store_true")
    args = parser.parse_args(argv)
    n_seq = args.k if args.sequential is None else min(args.sequential, args.k)

    torch.set_num_threads(args.threads)
    print(machine_line())
    device = torch.device(args.device)
    params = {"dataset": args.dataset, "outlier_prob": args.outlier_prob}
    task = CNNTask(**params) if args.samples is None else _ShortTask(args.samples, **params)
    task.cuda_graphs = not args.no_cuda_graphs
    xs = task.space.from_unit(numpy_rng(args.seed, "cnn-stack-points").random((args.k, task.dim)))
    seeds = list(range(args.k))
    print(
        f"dataset={args.dataset} k={args.k} threads={torch.get_num_threads()} device={device} "
        f"batch_size={task.batch_size} samples={args.samples or 'full epoch'} "
        f"outlier_prob={args.outlier_prob} sequential={n_seq} "
        f"cuda_graphs={task.cuda_graphs and device.type == 'cuda'} torch={torch.__version__}"
    )
    if device.type == "cuda":
        print(f"gpu={torch.cuda.get_device_name(device)}")
    task.evaluate(xs[0], seed=seeds[0], device=device)  # reads the data, warms up
    ratios = []
    for r in range(args.rounds):
        _synchronize(device)
        start = time.perf_counter()
        sequential = [
            task.evaluate(x, seed=s, device=device)
            for x, s in zip(xs[:n_seq], seeds[:n_seq], strict=True)
        ]
        _synchronize(device)
        seq_s = time.perf_counter() - start
        start = time.perf_counter()
        stacked = task.evaluate_batch(xs, seeds=seeds, device=device)
        _synchronize(device)
        stack_s = time.perf_counter() - start
        diff = max(abs(a.y - b.y) for a, b in zip(stacked[:n_seq], sequential, strict=True))
        seq_rate = sum(e.info["train_samples"] for e in sequential) / seq_s
        stack_rate = sum(e.info["train_samples"] for e in stacked) / stack_s
        ratios.append(stack_rate / seq_rate)
        print(
            f"round {r}: sequential {n_seq / seq_s:.3f} eval/s, {seq_rate:.0f} samples/s "
            f"({seq_s:.1f} s); stacked {args.k / stack_s:.3f} eval/s, {stack_rate:.0f} samples/s "
            f"({stack_s:.1f} s); ratio {ratios[-1]:.2f}, max |dy| {diff:.4f}, outliers "
            f"{sum(e.is_outlier for e in sequential)} of {n_seq} and "
            f"{sum(e.is_outlier for e in stacked)} of {args.k}"
        )
    print(f"median ratio {statistics.median(ratios):.2f} over {args.rounds} rounds")
    print("y sequential", np.round([e.y for e in sequential], 4).tolist())
    print("y stacked   ", np.round([e.y for e in stacked], 4).tolist())


if __name__ == "__main__":
    main()
