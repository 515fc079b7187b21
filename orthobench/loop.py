"""The BO loop for one cell: shared initial design, ask/evaluate/tell, per-evaluation records.

Seeds (all from :func:`orthobench.seeding.derive_seed`):

- initial design: ``(seed, "init", task label)`` -- identical for every optimizer of a seed;
- initial evaluations: ``(seed, "eval-init", task label, i)`` -- identical observations too;
- optimizer: ``(seed, "optimizer", task label, optimizer label)``;
- BO evaluations: ``(seed, "eval", task label, optimizer label, iteration)``.

An evaluation may be given a time limit (:func:`evaluation_deadline`): one that runs longer is
stopped, the processes it started are killed, it is recorded with ``status="timeout"``, and the
cell goes on. The SIGINT and SIGTERM handlers a task or optimizer changes while it is built,
evaluates, asks or is told are put back afterwards, so the runner's Ctrl-C keeps working
(:func:`_runner_signals_kept`).

The loop never knows how it is executed (inline, process pool, cluster).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch.quasirandom import SobolEngine

from orthobench.exceptions import (
    ConfigError,
    OrthobenchError,
    OrthobenchWarning,
    describe_error,
    error_message,
    one_line,
    show_value,
)
from orthobench.optimizers.base import Optimizer
from orthobench.registry import OPTIMIZERS, TASKS
from orthobench.results import EvaluationJournal, RunRecord
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import Cell
from orthobench.tasks.base import Evaluation, Task

#: Per-evaluation callback: called with the number of evaluations just finished (1).
ProgressCallback = Callable[[int], None]

#: Seconds :func:`check_buildable` lets a task or optimizer take to be built when the run has no
#: cell timeout (with one, the cell timeout is the limit).
BUILD_TIMEOUT_S = 300.0

#: The signals whose handlers are the runner's: a task or optimizer that changes them gets them
#: put back (:func:`_runner_signals_kept`).
_RUNNER_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_T = TypeVar("_T")


def initial_design(dim: int, n: int, seed: int) -> np.ndarray:
    """``n x dim`` scrambled Sobol points in the unit cube."""
    return SobolEngine(dim, scramble=True, seed=seed % (2**31)).draw(n, dtype=torch.float64).numpy()


def make_task(cell: Cell) -> Task:
    """The cell's task.

    Raises:
        ConfigError: at field ``tasks.<label>`` when the factory returns something else than a
            :class:`~orthobench.tasks.base.Task`.
    """
    task = TASKS.create(cell.task.name, **cell.task.params)
    if not isinstance(task, Task):
        raise ConfigError(
            f"tasks.{cell.task.label}",
            f"{cell.task.name!r} must build a Task, but returned {show_value(task)}.",
        )
    return task


def make_optimizer(cell: Cell, dim: int, device: torch.device) -> Optimizer:
    """The cell's optimizer for a ``dim``-dimensional space, seeded as the loop seeds it.

    Raises:
        ConfigError: at field ``optimizers.<label>`` when the factory returns something else than
            an :class:`~orthobench.optimizers.base.Optimizer`.
    """
    optimizer = OPTIMIZERS.create(
        cell.optimizer.name,
        dim,
        seed=derive_seed(cell.seed, "optimizer", cell.task.label, cell.optimizer.label),
        device=device,
        dtype=getattr(torch, cell.dtype),
        **cell.optimizer.params,
    )
    if not isinstance(optimizer, Optimizer):
        raise ConfigError(
            f"optimizers.{cell.optimizer.label}",
            f"{cell.optimizer.name!r} must build an Optimizer, but returned "
            f"{show_value(optimizer)}.",
        )
    return optimizer


@contextlib.contextmanager
def _runner_signals_kept() -> Iterator[None]:
    """Run the block, then put back the SIGINT and SIGTERM handlers it found.

    A task may change them (a training library that ignores SIGINT): without this, Ctrl-C would
    be off for the rest of an inline run. Only a process's main thread can set handlers, so
    elsewhere (a Dask worker thread) the block just runs; a handler Python did not install
    (``signal.getsignal`` gives None) is left as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in _RUNNER_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None and signal.getsignal(signum) != handler:
                signal.signal(signum, handler)


def _build(component: str, build: Callable[[], _T], timeout: float, where: str = "") -> _T:
    """``build()`` within ``timeout`` seconds; any failure becomes a one-line :class:`ConfigError`
    at ``component`` (``tasks.<label>``, ``optimizers.<label>``), ``where`` added to its reason.

    A ``ValueError`` or ``TypeError`` (a constructor refusing its parameters) gives its message; any
    other exception, ``SystemExit`` included, its type and message. An
    :class:`~orthobench.exceptions.OrthobenchError` is raised as it is: it names its cause already.
    A ``KeyboardInterrupt`` is not caught: Ctrl-C ends the run.
    """
    try:
        with _runner_signals_kept(), evaluation_deadline(timeout, what="construction"):
            return build()
    except OrthobenchError:
        raise
    except _EvaluationTimeout:
        raise ConfigError(
            component,
            f"still being built{where} after {timeout:g} s (the cell timeout, else "
            f"{BUILD_TIMEOUT_S:g} s); its construction was stopped.",
        ) from None
    except (ValueError, TypeError) as err:
        raise ConfigError(
            component, f"cannot be built{where}: {one_line(error_message(err))}"
        ) from err
    except (Exception, SystemExit) as err:  # noqa: BLE001 -- a plugin's own failure, whatever it is
        raise ConfigError(component, f"cannot be built{where}: {describe_error(err)}") from err


def _task_dim(cell: Cell) -> int:
    return make_task(cell).space.dim


def check_buildable(cells: Iterable[Cell], timeout: float | None = None) -> None:
    """Build the task and the optimizer of every (task, optimizer) pair among ``cells`` once,
    before any of them runs, each within ``timeout`` seconds (None: :data:`BUILD_TIMEOUT_S`).

    A task raises its own error (a missing dataset names the command that fetches it). The
    registries check each parameter against its type; an optimizer's constructor also checks how
    parameters combine (OrthoBO's antithetic draws need even budgets, ...). Without this, such a
    suite would fail every cell of that task or optimizer, one by one, after the others ran.
    Optimizers are built on the CPU: the run's device is checked already, and so the runner
    process makes no CUDA context of its own when its cells run in worker processes.

    These constructors run in the runner's process, so their failures are caught as a cell's
    are: an exception of any kind (``SystemExit`` too), a factory that returns something else
    than a task or optimizer, or one that runs past the time limit stops the run with one line
    naming the component.

    Raises:
        OrthobenchError: a task's or optimizer's own, as it raised it.
        ConfigError: at field ``tasks.<label>`` or ``optimizers.<label>``, with the constructor's
            error, for a component that cannot be built or is not built in time.
    """
    timeout = BUILD_TIMEOUT_S if timeout is None else timeout
    dims: dict[str, int] = {}
    for cell in {(c.task.label, c.optimizer.label): c for c in cells}.values():
        if cell.task.label not in dims:
            dims[cell.task.label] = _build(
                f"tasks.{cell.task.label}", functools.partial(_task_dim, cell), timeout
            )
        _build(
            f"optimizers.{cell.optimizer.label}",
            functools.partial(make_optimizer, cell, dims[cell.task.label], torch.device("cpu")),
            timeout,
            f" for task {cell.task.label!r}",
        )


class _EvaluationTimeout(BaseException):
    """Raised into an evaluation past its deadline. A ``BaseException``, like
    ``KeyboardInterrupt``, so that a task's own ``except Exception`` does not swallow it."""


@contextlib.contextmanager
def evaluation_deadline(seconds: float | None, what: str = "evaluation") -> Iterator[None]:
    """Raise :class:`_EvaluationTimeout` in the block once it has run ``seconds`` of wall-clock time.

    A ``SIGALRM`` timer (``signal.setitimer``) whose handler raises; the previous handler is
    restored and the timer cleared on exit. The exception arrives between two Python bytecodes,
    so a sleep or a Python training loop stops at once, but one long call into C code (a single
    huge kernel) only when it returns. Where no timer can be set (outside the main thread, where
    signal handlers run, as in a Dask worker; on Windows), the block runs without a limit, with
    an :class:`~orthobench.exceptions.OrthobenchWarning` that calls the limit ``what``'s.
    """
    if seconds is None:
        yield
        return
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        warnings.warn(
            f"the {what} timeout of {seconds:g} s is not enforced here: only a process's "
            f"main thread can set a SIGALRM timer; the {what} runs without a limit.",
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


def _descendants(root: int | None = None) -> set[int] | None:
    """The PIDs of process ``root``'s (default: this process's) children, theirs, and so on, from
    Linux's ``/proc/<pid>/task/<tid>/children``, those that left its process group (``setsid``)
    included; None where there is no ``/proc`` (another OS). A process whose parent has ended is
    not found: it was reparented to init."""
    if not Path("/proc/self/task").is_dir():
        return None
    found: set[int] = set()
    parents = [os.getpid() if root is None else root]
    while parents:
        for listing in Path(f"/proc/{parents.pop()}/task").glob("*/children"):
            with contextlib.suppress(OSError):  # the thread or the process ended meanwhile
                new = set(map(int, listing.read_text().split())) - found
                found |= new
                parents.extend(new)
    return found


def _kill_descendants(root: int | None = None, spare: set[int] | None = None) -> bool:
    """SIGKILL process ``root``'s (default: this process's) descendants (:func:`_descendants`)
    but those in ``spare``: what a timed-out evaluation or cell left running. False where there
    is no ``/proc`` to find them in (none are killed)."""
    found = _descendants(root)
    if found is None:
        return False
    for pid in found - (spare or set()):
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(pid, signal.SIGKILL)
    return True


def _nonfinite_as_null(value: Any) -> Any:
    """``value`` with each non-finite float in it (in nested dicts, lists and tuples) replaced by
    None: JSON has no NaN or infinity, and the stored ``info`` must be standard JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _nonfinite_as_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nonfinite_as_null(item) for item in value]
    return value


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
    and ``y`` NaN; the processes a timed-out evaluation started (and theirs) are killed. An
    evaluation that returns something else than an
    :class:`~orthobench.tasks.base.Evaluation` raises ``TypeError`` (the cell fails; its journal
    keeps the evaluations before it). Non-finite floats in the stored ``info`` become null.

    With a ``journal``, every finished evaluation is appended to it with the optimizer's
    :meth:`~orthobench.optimizers.base.Optimizer.state_dict` after the tell, and the evaluations it
    already holds are not run again: their records are reused, the optimizer is rebuilt from the
    told history and the last stored state, and the cell continues with the next evaluation. The
    finished cell equals an uninterrupted one (up to the timings).
    """
    device = torch.device(device)
    with _runner_signals_kept():
        task = make_task(cell)
        space = task.space
        optimizer = make_optimizer(cell, space.dim, device)
    # The optimizer is plugin code too: the handlers it changes while it asks, is told or
    # (re)stores its state are put back after each call (a contextmanager also decorates, with
    # a fresh one per call).
    ask, tell, load_state_dict, state_dict = map(
        _runner_signals_kept(),
        (optimizer.ask, optimizer.tell, optimizer.load_state_dict, optimizer.state_dict),
    )
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
        timed_out = False
        children = _descendants() if evaluation_timeout is not None else None
        try:
            with (
                _runner_signals_kept(),
                evaluation_deadline(evaluation_timeout),
                torch_seed(eval_seed),
            ):
                evaluation = task.evaluate(x, seed=eval_seed, device=device)
        except _EvaluationTimeout:
            timed_out = True
            if not _kill_descendants(spare=children):
                warnings.warn(
                    "the processes a timed-out evaluation started are not stopped here: there is "
                    "no /proc to find them in.",
                    OrthobenchWarning,
                    stacklevel=2,
                )
        eval_seconds = time.perf_counter() - t0
        if timed_out:
            status, y, y_true, is_outlier, extra = "timeout", math.nan, None, False, {}
        elif not isinstance(evaluation, Evaluation):
            raise TypeError(
                f"`evaluate` of task {cell.task.label!r} must return an Evaluation, but "
                f"returned {show_value(evaluation)} (at iteration {iteration})."
            )
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
            info=json.dumps(
                _nonfinite_as_null({**step.get("info", {}), **extra}), default=str, allow_nan=False
            ),
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
        tell(*history)

    replay = stored[cell.n_init : cell.n_init + cell.budget]
    if replay:
        for record, _ in replay:
            keep(record, None, replayed=True)
        if (history := told([r for r, _ in replay])) is not None:
            tell(*history)
        load_state_dict(replay[-1][1])

    for iteration in range(cell.n_init + len(replay), cell.n_init + cell.budget):
        suggestion = ask(1)
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
            tell(*history)
        keep(record, state_dict(), replayed=False)
    return records
