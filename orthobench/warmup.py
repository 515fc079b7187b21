"""Warming up a CUDA process before a cell's first timed proposal.

The first proposal a CUDA process makes pays costs that later ones do not: imports and first
calls, the CUDA context and library handles, kernels loaded on first use. Measured on an H100
(docs/benchmarks.md, "CUDA: the first proposal of a process"): 4-5 s in every fresh process, and
16 s of first acquisition in the first process of a fresh machine, against 0.2-0.4 s for later
steps. A run records every step's seconds, and these costs would be charged to whichever cell a
worker process runs first, so :func:`warm_up` pays them before that cell's clock starts: once per
process, device and optimizer (another optimizer runs other kernels)."""

from __future__ import annotations

import time

import torch

from orthobench.loop import make_optimizer, make_task
from orthobench.seeding import numpy_rng
from orthobench.suite import Cell

#: The (optimizer name, device) pairs this process has warmed up.
_WARM: set[tuple[str, str]] = set()


def warm_up(cell: Cell, device: torch.device) -> float:
    """Make one untimed proposal of ``cell``'s optimizer on ``device`` (:func:`propose_once`),
    once per process, device and optimizer name; on a CPU nothing is done (its one-time costs
    are small).

    A proposal that fails here is left to fail, if it does, as the cell's own first step,
    where the run records the error: the warm-up only moves costs.

    Returns:
        The seconds spent (0.0 when nothing was done, or the proposal failed).
    """
    key = (cell.optimizer.name, str(device))
    if device.type != "cuda" or key in _WARM:
        return 0.0
    start = time.perf_counter()
    try:
        propose_once(cell, device)
        torch.cuda.synchronize(device)
    except Exception:  # noqa: BLE001 -- the cell's own first proposal reports its error, if any
        return 0.0
    _WARM.add(key)
    return time.perf_counter() - start


def propose_once(cell: Cell, device: torch.device) -> None:
    """One proposal of ``cell``'s optimizer on a made-up history, thrown away.

    The optimizer is built as the cell builds it (same name, parameters, dtype and batch size
    ``q``) and told ``n_init`` random points of a quadratic in the cell's dimension (with as many
    random constraint values as the task has), so the proposal runs the cell's code on tensors of
    its first step's shapes. Every draw is seeded on its own: the cell's results do not change.
    """
    task = make_task(cell)
    optimizer = make_optimizer(cell, task.dim, device)
    rng = numpy_rng(0, "warm-up")
    n = max(cell.n_init, optimizer.min_observations)
    x = rng.random((n, task.dim))
    y = ((x - 0.3) ** 2).sum(axis=1)
    constraints = rng.random((n, task.n_constraints)) - 0.7 if task.n_constraints else None
    optimizer.tell(x, y, constraints)
    optimizer.ask(cell.q)
