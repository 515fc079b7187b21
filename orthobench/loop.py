"""The BO loop for one cell: shared initial design, ask/evaluate/tell, per-evaluation records.

Seeds (all from :func:`orthobench.seeding.derive_seed`):

- initial design: ``(seed, "init", task label)`` -- identical for every optimizer of a seed;
- initial evaluations: ``(seed, "eval-init", task label, i)`` -- identical observations too;
- optimizer: ``(seed, "optimizer", task label, optimizer label)``;
- BO evaluations: ``(seed, "eval", task label, optimizer label, iteration)``.

An evaluation may be given a time limit (:func:`evaluation_deadline`): one that runs longer is
stopped and recorded with ``status="timeout"``, and the cell goes on.

The loop never knows how it is executed (inline, process pool, cluster).
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch
from torch.quasirandom import SobolEngine

from orthobench.exceptions import ConfigError, OrthobenchError, OrthobenchWarning
from orthobench.optimizers.base import Optimizer
from orthobench.registry import OPTIMIZERS, TASKS
from orthobench.results import EvaluationJournal, RunRecord
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import Cell
from orthobench.tasks.base import Task

#: Per-evaluation callback: called with the number of evaluations just finished (1).
ProgressCallback = Callable[[int], None]


def initial_design(dim: int, n: int, seed: int) -> np.ndarray:
    """``n x dim`` scrambled Sobol points in the unit cube."""
    return SobolEngine(dim, scramble=True, seed=seed % (2**31)).draw(n, dtype=torch.float64).numpy()


def make_task(cell: Cell) -> Task:
    return TASKS.create(cell.task.name, **cell.task.params)


def make_optimizer(cell: Cell, dim: int, device: torch.device) -> Optimizer:
    """The cell's optimizer for a ``dim``-dimensional space, seeded as the loop seeds it."""
    return OPTIMIZERS.create(
        cell.optimizer.name,
        dim,
        seed=derive_seed(cell.seed, "optimizer", cell.task.label, cell.optimizer.label),
        device=device,
        dtype=getattr(torch, cell.dtype),
        **cell.optimizer.params,
    )


def check_buildable(cells: Iterable[Cell]) -> None:
    """Build the task and the optimizer of every (task, optimizer) pair among ``cells`` once,
    before any of them runs.

    A task raises its own error (a missing dataset names the command that fetches it). The
    registries check each parameter against its type; an optimizer's constructor also checks how
    parameters combine (OrthoBO's antithetic draws need even budgets, ...). Without this, such a
    suite would fail every cell of that task or optimizer, one by one, after the others ran.
    Optimizers are built on the CPU: the run's device is checked already, and so the runner
    process makes no CUDA context of its own when its cells run in worker processes.

    Raises:
        OrthobenchError: a task's, as it raised it.
        ConfigError: at field ``optimizers.<label>``, with the constructor's message, for an
            optimizer that refuses its parameters.
    """
    dims: dict[str, int] = {}
    for cell in {(c.task.label, c.optimizer.label): c for c in cells}.values():
        if cell.task.label not in dims:
            dims[cell.task.label] = make_task(cell).space.dim
        try:
            make_optimizer(cell, dims[cell.task.label], torch.device("cpu"))
        except OrthobenchError:
            raise
        except (ValueError, TypeError) as err:
            raise ConfigError(
                f"optimizers.{cell.optimizer.label}",
                f"cannot be built for task {cell.task.label!r}: {err}",
            ) from err


class _EvaluationTimeout(BaseException):
    """Raised into an evaluation past its deadline. A ``BaseException``, like
    ``KeyboardInterrupt``, so that a task's own ``except Exception`` does not swallow it."""


@contextlib.contextmanager
def evaluation_deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`_EvaluationTimeout` in the block once it has run ``seconds`` of wall-clock time.

    A ``SIGALRM`` timer (``signal.setitimer``) whose handler raises; the previous handler is
    restored and the timer cleared on exit. The exception arrives between two Python bytecodes,
    so a sleep or a Python training loop stops at once, but one long call into C code (a single
    huge kernel) only when it returns. Where no timer can be set (outside the main thread, where
    signal handlers run, as in a Dask worker; on Windows), the block runs without a limit, with
    an :class:`~orthobench.exceptions.OrthobenchWarning`.
    """
    if seconds is None:
        yield
        return
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        warnings.warn(
            f"the evaluation timeout of {seconds:g} s is not enforced here: only a process's "
            "main thread can set a SIGALRM timer; evaluations run without a limit.",
            OrthobenchWarning,
            stacklevel=3,
        )
        yield
        return

    def expire(signum, frame) -> None:  # noqa: ANN001 -- signal handler signature
        raise _EvaluationTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cell(
    cell: Cell,
    device: torch.device | str = "cpu",
    on_evaluation: ProgressCallback | None = None,
    journal: EvaluationJournal | None = None,
    evaluation_timeout: float | None = None,
) -> list[RunRecord]:
    """Run one cell and return one :class:`~orthobench.results.RunRecord` per evaluation.

    ``regret`` is the best-so-far simple regret: the lowest noise-free value among the points
    evaluated so far (:attr:`Evaluation.y_true` where the task reports it, else ``y``) minus the
    known optimum; None when the optimum is unknown. Evaluations with a non-finite ``y`` are
    recorded with ``status="invalid"`` and not told to the optimizer; so are evaluations stopped
    after ``evaluation_timeout`` seconds (:func:`evaluation_deadline`), with ``status="timeout"``
    and ``y`` NaN.

    With a ``journal``, every finished evaluation is appended to it with the optimizer's
    :meth:`~orthobench.optimizers.base.Optimizer.state_dict` after the tell, and the evaluations it
    already holds are not run again: their records are reused, the optimizer is rebuilt from the
    told history and the last stored state, and the cell continues with the next evaluation. The
    finished cell equals an uninterrupted one (up to the timings).
    """
    device = torch.device(device)
    task = make_task(cell)
    space = task.space
    optimizer = make_optimizer(cell, space.dim, device)
    stored = journal.read() if journal is not None else []
    records: list[RunRecord] = []
    best_y = math.inf
    best_true = math.inf

    def keep(record: RunRecord, state: dict[str, Any] | None, replayed: bool) -> None:
        nonlocal best_y, best_true
        records.append(record)
        if record.status == "ok":
            best_y = min(best_y, record.y)
            best_true = min(best_true, record.y if record.y_true is None else record.y_true)
        if journal is not None and not replayed:
            journal.append(record, state)
        if on_evaluation is not None:
            on_evaluation(1)

    def evaluate(u: np.ndarray, iteration: int, phase: str, eval_seed: int, step: dict[str, Any]):
        x = space.from_unit(u)[0]
        t0 = time.perf_counter()
        try:
            with evaluation_deadline(evaluation_timeout), torch_seed(eval_seed):
                evaluation = task.evaluate(x, seed=eval_seed, device=device)
        except _EvaluationTimeout:
            evaluation = None
        eval_seconds = time.perf_counter() - t0
        if evaluation is None:
            status, y, y_true, is_outlier, extra = "timeout", math.nan, None, False, {}
        else:
            y, y_true = float(evaluation.y), evaluation.y_true
            status = "ok" if math.isfinite(y) else "invalid"
            is_outlier, extra = bool(evaluation.is_outlier), evaluation.info
        ok = status == "ok"
        if ok:
            observed_best = min(best_y, y)
            true_best = min(best_true, float(y_true) if y_true is not None else y)
        else:
            observed_best, true_best = best_y, best_true
        return RunRecord(
            suite=cell.suite,
            cell_id=cell.id,
            task=cell.task.label,
            optimizer=cell.optimizer.label,
            seed=cell.seed,
            iteration=iteration,
            phase=phase,
            x=[float(v) for v in x],
            y=y,
            y_true=None if y_true is None else float(y_true),
            best_y=observed_best if math.isfinite(observed_best) else None,
            regret=task.regret(true_best) if math.isfinite(true_best) else None,
            is_outlier=is_outlier,
            fit_seconds=step.get("fit_seconds", 0.0),
            acq_seconds=step.get("acq_seconds", 0.0),
            eval_seconds=eval_seconds,
            status=status,
            fallback=step.get("fallback"),
            info=json.dumps({**step.get("info", {}), **extra}, default=str),
        )

    def told(batch: list[RunRecord]) -> tuple[np.ndarray, np.ndarray] | None:
        """The unit-cube points and values of the valid records: what the optimizer is told
        (the evaluated point, ints rounded and bounds clipped)."""
        ok = [r for r in batch if r.status == "ok"]
        if not ok:
            return None
        return space.to_unit(np.array([r.x for r in ok])), np.array([r.y for r in ok])

    init = initial_design(space.dim, cell.n_init, derive_seed(cell.seed, "init", cell.task.label))
    for i, u in enumerate(init):
        if i < len(stored):
            keep(stored[i][0], None, replayed=True)
        else:
            seed = derive_seed(cell.seed, "eval-init", cell.task.label, i)
            keep(evaluate(u[None, :], i, "init", seed, {}), None, replayed=False)
    if (history := told(records)) is not None:
        optimizer.tell(*history)

    replay = stored[cell.n_init : cell.n_init + cell.budget]
    if replay:
        for record, _ in replay:
            keep(record, None, replayed=True)
        if (history := told([r for r, _ in replay])) is not None:
            optimizer.tell(*history)
        optimizer.load_state_dict(replay[-1][1])

    for iteration in range(cell.n_init + len(replay), cell.n_init + cell.budget):
        suggestion = optimizer.ask(1)
        info = dict(suggestion.info)
        step = {
            "fit_seconds": suggestion.fit_seconds,
            "acq_seconds": suggestion.acq_seconds,
            "fallback": info.pop("fallback", None),
            "info": info,
        }
        eval_seed = derive_seed(cell.seed, "eval", cell.task.label, cell.optimizer.label, iteration)
        record = evaluate(suggestion.x[:1], iteration, "bo", eval_seed, step)
        if (history := told([record])) is not None:
            optimizer.tell(*history)
        keep(record, optimizer.state_dict(), replayed=False)
    return records
