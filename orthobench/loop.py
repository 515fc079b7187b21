"""The BO loop for one cell: shared initial design, ask/evaluate/tell, per-evaluation records.

Seeds (all from :func:`orthobench.seeding.derive_seed`):

- initial design: ``(seed, "init", task label)`` -- identical for every optimizer of a seed;
- initial evaluations: ``(seed, "eval-init", task label, i)`` -- identical observations too;
- optimizer: ``(seed, "optimizer", task label, optimizer label)``;
- BO evaluations: ``(seed, "eval", task label, optimizer label, iteration)``.

A BO step proposes the cell's ``q`` points at once (:func:`run_cell`); :class:`Evaluations` says
where its evaluations run (here, one after the other; at once in worker processes or on Dask:
:mod:`orthobench.executors._evaluations`).

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
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from torch.quasirandom import SobolEngine

from orthobench.bests import Bests
from orthobench.deadlines import (
    EvaluationTimeout,
    descendants,
    evaluation_deadline,
    kill_descendants,
)
from orthobench.exceptions import (
    ConfigError,
    OrthobenchError,
    OrthobenchWarning,
    ResultsError,
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
    except EvaluationTimeout:
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


def _task_shape(cell: Cell) -> tuple[int, int]:
    """The dimension and the number of constraints of the cell's task."""
    task = make_task(cell)
    return task.space.dim, task.n_constraints


def check_buildable(cells: Iterable[Cell], timeout: float | None = None) -> dict[str, int]:
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

    Each optimizer must also propose the largest batch size ``q`` of its cells in one ask (its
    :attr:`~orthobench.optimizers.base.Optimizer.max_batch`), and handle constraints
    (:attr:`~orthobench.optimizers.base.Optimizer.handles_constraints`) where its task has some
    (:attr:`~orthobench.tasks.base.Task.n_constraints`).

    Returns:
        The number of constraints of each task, by label.

    Raises:
        OrthobenchError: a task's or optimizer's own, as it raised it.
        ConfigError: at field ``tasks.<label>`` or ``optimizers.<label>``, with the constructor's
            error, for a component that cannot be built or is not built in time; at
            ``optimizers.<label>`` for an optimizer whose ``max_batch`` is below a cell's ``q``
            or that does not handle its task's constraints; at ``tasks.<label>`` for an
            ``n_constraints`` that is not a non-negative int.
    """
    timeout = BUILD_TIMEOUT_S if timeout is None else timeout
    shapes: dict[str, tuple[int, int]] = {}
    largest: dict[tuple[str, str], Cell] = {}
    for c in cells:
        key = (c.task.label, c.optimizer.label)
        if key not in largest or c.q > largest[key].q:
            largest[key] = c
    for cell in largest.values():
        if cell.task.label not in shapes:
            shapes[cell.task.label] = _build(
                f"tasks.{cell.task.label}", functools.partial(_task_shape, cell), timeout
            )
        dim, n_constraints = shapes[cell.task.label]
        if (
            isinstance(n_constraints, bool)
            or not isinstance(n_constraints, int)
            or n_constraints < 0
        ):
            raise ConfigError(
                f"tasks.{cell.task.label}",
                f"{cell.task.name!r} must declare `n_constraints` as an int >= 0, but has "
                f"{show_value(n_constraints)}.",
            )
        optimizer = _build(
            f"optimizers.{cell.optimizer.label}",
            functools.partial(make_optimizer, cell, dim, torch.device("cpu")),
            timeout,
            f" for task {cell.task.label!r}",
        )
        limit = optimizer.max_batch
        if limit is not None and cell.q > limit:
            raise ConfigError(
                f"optimizers.{cell.optimizer.label}",
                f"{cell.optimizer.name!r} proposes at most {limit} point(s) per BO step, "
                f"but the suite asks q={cell.q}; lower q or choose an optimizer with batch "
                "proposals.",
            )
        if n_constraints and not optimizer.handles_constraints:
            raise ConfigError(
                f"optimizers.{cell.optimizer.label}",
                f"{cell.optimizer.name!r} does not handle constraints, but task "
                f"{cell.task.label!r} has {n_constraints}: choose an optimizer that does (sobol) "
                "or an unconstrained task.",
            )
    return {label: n_constraints for label, (_, n_constraints) in shapes.items()}


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


@dataclass(frozen=True)
class EvaluationRequest:
    """One point of a cell to evaluate.

    Args:
        position: Its index in its step (the initial design is step 0).
        iteration: Its index in the cell.
        x: ``d`` values in native units.
        seed: The evaluation's seed.
    """

    position: int
    iteration: int
    x: np.ndarray
    seed: int


@dataclass(frozen=True)
class Outcome:
    """What one evaluation gave: ``status`` ``ok``, ``invalid`` (a non-finite ``y``) or
    ``timeout`` (``y`` NaN, each constraint value NaN), the task's values and extras, its wall
    seconds and its ``n_constraints`` constraint values."""

    status: str
    y: float
    y_true: float | None
    is_outlier: bool
    info: dict[str, Any]
    seconds: float
    constraints: tuple[float, ...] = ()


def evaluate_point(
    task: Task,
    request: EvaluationRequest,
    device: torch.device,
    timeout: float | None,
    label: str,
) -> Outcome:
    """Evaluate ``task`` (labelled ``label``) at ``request`` within ``timeout`` seconds
    (:func:`evaluation_deadline`; None: no limit), seeded by the request; the processes a
    timed-out evaluation started (and theirs) are killed.

    Raises:
        TypeError: when ``evaluate`` returns something else than an
            :class:`~orthobench.tasks.base.Evaluation`, or one with another number of constraint
            values than the task's ``n_constraints``. An exception of the task's is raised as
            it is: either fails the cell.
    """
    timed_out, evaluation, seconds = call_within(
        timeout, request.seed, lambda: task.evaluate(request.x, seed=request.seed, device=device)
    )
    if timed_out:
        return timeout_outcome(task, seconds)
    return outcome_of(task, evaluation, seconds, request.iteration, label)


def call_within(
    timeout: float | None, seed: int, call: Callable[[], _T]
) -> tuple[bool, _T | None, float]:
    """``(timed_out, call(), seconds)`` under ``torch_seed(seed)``, stopped after ``timeout``
    seconds (:func:`~orthobench.deadlines.evaluation_deadline`): then ``(True, None, seconds)``,
    and the processes it started (and theirs) are killed."""
    start = time.perf_counter()
    children = descendants() if timeout is not None else None
    try:
        with _runner_signals_kept(), evaluation_deadline(timeout), torch_seed(seed):
            return False, call(), time.perf_counter() - start
    except EvaluationTimeout:
        if not kill_descendants(spare=children):
            warnings.warn(
                "the processes a timed-out evaluation started are not stopped here: there is "
                "no /proc to find them in.",
                OrthobenchWarning,
                stacklevel=3,
            )
        return True, None, time.perf_counter() - start


def timeout_outcome(task: Task, seconds: float) -> Outcome:
    """The :class:`Outcome` of an evaluation of ``task`` stopped after ``seconds``."""
    return Outcome("timeout", math.nan, None, False, {}, seconds, (math.nan,) * task.n_constraints)


def outcome_of(
    task: Task, evaluation: object, seconds: float, iteration: int, label: str
) -> Outcome:
    """The :class:`Outcome` of what ``task``'s evaluation at ``iteration`` returned, checked as
    :func:`evaluate_point` says."""
    if not isinstance(evaluation, Evaluation):
        raise TypeError(
            f"`evaluate` of task {label!r} must return an Evaluation, but returned "
            f"{show_value(evaluation)} (at iteration {iteration})."
        )
    if len(evaluation.constraints) != task.n_constraints:
        raise TypeError(
            f"`evaluate` of task {label!r} must return {task.n_constraints} constraint value(s) "
            f"(its `n_constraints`), but returned {len(evaluation.constraints)} (at iteration "
            f"{iteration})."
        )
    y = float(evaluation.y)
    return Outcome(
        "ok" if math.isfinite(y) else "invalid",
        y,
        None if evaluation.y_true is None else float(evaluation.y_true),
        bool(evaluation.is_outlier),
        evaluation.info,
        seconds,
        evaluation.constraints,
    )


class Evaluations:
    """Where a cell's evaluations run: here, one after the other, with the task the cell built.

    :func:`run_cell` calls :meth:`open` once, :meth:`run` with the points of each step (the
    initial design is one), and :meth:`close` when the cell ends, however it ends. Subclasses
    run the points of a step at once (:mod:`orthobench.executors._evaluations`).
    """

    #: How many evaluations run at once.
    workers: int = 1

    def open(self, cell: Cell, task: Task, device: torch.device, timeout: float | None) -> None:
        """Get ready to evaluate ``cell``'s points; its ``task`` is built in this process."""
        self._task, self._device, self._timeout, self._label = (
            task,
            device,
            timeout,
            cell.task.label,
        )

    def run(self, requests: list[EvaluationRequest]) -> Iterator[tuple[EvaluationRequest, Outcome]]:
        """Evaluate ``requests``, yielding each with its outcome as it finishes (here: in order).

        Raises:
            Exception: what an evaluation raised (:func:`evaluate_point`); the cell fails.
        """
        for request in requests:
            yield (
                request,
                evaluate_point(self._task, request, self._device, self._timeout, self._label),
            )

    def close(self) -> None:
        """Stop what evaluates (nothing here)."""


#: Unit-cube distance within which a re-asked point of an unfinished step is the journaled one.
_REASK_ATOL = 1e-6

_Journaled = dict[int, tuple[RunRecord, dict[str, Any] | None]]


def _eval_seed(cell: Cell, iteration: int) -> int:
    if iteration < cell.n_init:
        return derive_seed(cell.seed, "eval-init", cell.task.label, iteration)
    return derive_seed(cell.seed, "eval", cell.task.label, cell.optimizer.label, iteration)


def _resume_point(steps: list[range], stored: _Journaled) -> int:
    """How many leading steps the journal holds whole: every evaluation of the initial design;
    of a BO step, every evaluation and the optimizer's state after it was told."""
    for k, iterations in enumerate(steps):
        if any(i not in stored for i in iterations) or (
            k > 0 and all(stored[i][1] is None for i in iterations)
        ):
            return k
    return len(steps)


def _check_reasked(
    cell: Cell, space: Any, units: np.ndarray, iterations: range, done: dict[int, RunRecord]
) -> None:
    """Raise :class:`~orthobench.exceptions.ResultsError` unless each journaled evaluation of
    an unfinished step is at the point asked again (``len(iterations) x d``, unit cube),
    compared in the unit cube as evaluated (ints rounded, bounds clipped)."""
    for i, journaled in done.items():
        j = i - iterations.start
        asked = space.to_unit(space.from_unit(units[j : j + 1]))[0]
        found = space.to_unit(np.array([journaled.x]))[0]
        if not np.allclose(asked, found, rtol=0.0, atol=_REASK_ATOL):
            raise ResultsError(
                f"cell {cell.id}: the point asked again at iteration {i} is not the journaled "
                f"one ({asked.tolist()} vs {found.tolist()} in the unit cube): optimizer "
                f"{cell.optimizer.label!r} does not ask reproducibly from its state; rerun with "
                "--force to start the cell over."
            )


def run_cell(
    cell: Cell,
    device: torch.device | str = "cpu",
    on_evaluation: ProgressCallback | None = None,
    journal: EvaluationJournal | None = None,
    evaluation_timeout: float | None = None,
    evaluations: Evaluations | None = None,
) -> list[RunRecord]:
    """Run one cell and return one :class:`~orthobench.results.RunRecord` per evaluation.

    Each BO step asks the optimizer for ``cell.q`` points, evaluates them (at once where
    ``evaluations`` runs several; default: here, one after the other, as the initial design)
    and tells it the valid ones together. Iterations are consecutive, ``n_init + (k - 1) * q +
    j`` for the ``j``-th point of step ``k`` (the initial design is step 0), each seeded by its
    iteration as with ``q = 1``.

    ``regret`` is the best-so-far simple regret: the lowest noise-free value among the points of
    this and lower iterations (:attr:`Evaluation.y_true` where the task reports it, else ``y``)
    minus the known optimum; None when the optimum is unknown. Of a constrained task, only
    feasible points count, for ``best_y`` too, and both are None before the first
    (:class:`~orthobench.bests.Bests`); the optimizer is told the objective values alone. Evaluations with a non-finite
    ``y`` are recorded with ``status="invalid"`` and not told to the optimizer; so are
    evaluations stopped after ``evaluation_timeout`` seconds (:func:`evaluation_deadline`), with
    ``status="timeout"`` and ``y`` NaN. An exception of an evaluation, or an evaluation that
    returns something else than an :class:`~orthobench.tasks.base.Evaluation` (``TypeError``),
    fails the cell, as does one with another number of constraint values than the task's
    ``n_constraints``; its journal keeps the evaluations finished before. Non-finite floats in the
    stored ``info`` become null.

    With a ``journal``, each evaluation is appended to it as it finishes, but the one that
    completes a BO step: that one is appended after the step is told, with the optimizer's
    :meth:`~orthobench.optimizers.base.Optimizer.state_dict`. A rerun reuses what the journal
    holds. The initial design and the whole steps are replayed (told, the last step's state
    loaded); the first unfinished step is asked again (an ask is deterministic given the seed,
    the history and the state) and only its missing points are evaluated. The finished cell
    equals an uninterrupted one (up to the timings).

    Raises:
        ResultsError: when a point asked again for an unfinished step is not the one its
            journaled evaluation was made at (an optimizer whose asks are not reproducible).
    """
    clock = time.perf_counter()
    device = torch.device(device)
    evaluations = evaluations or Evaluations()
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
    steps = [range(cell.n_init)] + [
        range(cell.n_init + k * cell.q, cell.n_init + (k + 1) * cell.q) for k in range(cell.budget)
    ]
    stored: _Journaled = {}
    if journal is not None:
        stored = {record.iteration: (record, state) for record, state in journal.read()}
    whole = _resume_point(steps, stored)
    # Of the unfinished step, what was journaled is kept; what follows it is not replayable.
    reused = [i for k in steps[: whole + 1] for i in k if i in stored]
    # The cell's clock continues from its replayed evaluations: time it did not run is not counted.
    offset = max(
        (stored[i][0].wall_seconds for i in reused if math.isfinite(stored[i][0].wall_seconds)),
        default=0.0,
    )
    records: list[RunRecord] = []
    bests = Bests(task)

    def progress() -> None:
        if on_evaluation is not None:
            on_evaluation(1)

    def told(batch: list[RunRecord]) -> None:
        """Tell the valid records: their evaluated points (ints rounded, bounds clipped) in the
        unit cube, their values and, on a constrained task, their constraint values."""
        ok = [r for r in batch if r.status == "ok"]
        if ok:
            x, y = space.to_unit(np.array([r.x for r in ok])), np.array([r.y for r in ok])
            # Constraints only where there are some: a plugin's ``tell(x, y)`` keeps working.
            if task.n_constraints:
                tell(x, y, np.array([r.constraints for r in ok]))
            else:
                tell(x, y)

    def record(request: EvaluationRequest, outcome: Outcome, batch: int, step: dict) -> RunRecord:
        """The record of a finished evaluation, its bests not yet set."""
        return RunRecord(
            suite=cell.suite,
            cell_id=cell.id,
            task=cell.task.label,
            optimizer=cell.optimizer.label,
            seed=cell.seed,
            iteration=request.iteration,
            phase="init" if batch == 0 else "bo",
            q=cell.q,
            batch=batch,
            x=[float(v) for v in request.x],
            y=outcome.y,
            y_true=outcome.y_true,
            best_y=None,
            regret=None,
            is_outlier=outcome.is_outlier,
            fit_seconds=step.get("fit_seconds", 0.0),
            acq_seconds=step.get("acq_seconds", 0.0),
            eval_seconds=outcome.seconds,
            wall_seconds=offset + time.perf_counter() - clock,
            status=outcome.status,
            fallback=step.get("fallback"),
            info=json.dumps(
                _nonfinite_as_null({**step.get("info", {}), **outcome.info}),
                default=str,
                allow_nan=False,
            ),
            constraints=list(outcome.constraints),
            feasible=all(c <= 0 for c in outcome.constraints),
        )

    def run_step(batch: int, units: np.ndarray, step: dict[str, Any]) -> None:
        """Evaluate the points of step ``batch`` (``len x d``, unit cube) that the journal
        lacks, journal them, keep the step's records in order and tell them."""
        iterations = steps[batch]
        done = {i: stored[i][0] for i in iterations if i in stored and batch == whole}
        _check_reasked(cell, space, units, iterations, done)
        for _ in done:
            progress()
        requests = [
            EvaluationRequest(j, i, space.from_unit(units[j : j + 1])[0], _eval_seed(cell, i))
            for j, i in enumerate(iterations)
            if i not in done
        ]
        closing = iterations[-1]
        for n, (request, outcome) in enumerate(evaluations.run(requests), start=1):
            done[request.iteration] = bests.provisional(record(request, outcome, batch, step), done)
            if batch > 0 and n == len(requests):
                closing = request.iteration  # journaled after the tell, with the state
            elif journal is not None:
                journal.append(done[request.iteration], None)
            progress()
        final = [bests.take(done[i]) for i in iterations]
        records.extend(final)
        told(final)
        if batch > 0 and journal is not None:
            journal.append(final[closing - iterations.start], state_dict())

    evaluations.open(cell, task, device, evaluation_timeout)
    try:
        if whole >= 1:
            replayed = [stored[i][0] for i in steps[0]]
            records.extend(bests.take(r) for r in replayed)
            told(replayed)
        if whole > 1:
            replayed = [stored[i][0] for k in steps[1:whole] for i in k]
            records.extend(bests.take(r) for r in replayed)
            told(replayed)
            load_state_dict(next(s for i in steps[whole - 1] if (s := stored[i][1]) is not None))
        for _ in records:
            progress()
        for batch in range(whole, cell.budget + 1):
            if batch == 0:
                init = derive_seed(cell.seed, "init", cell.task.label)
                run_step(0, initial_design(space.dim, cell.n_init, init), {})
                continue
            suggestion = ask(cell.q)
            info = dict(suggestion.info)
            step = {
                "fit_seconds": suggestion.fit_seconds,
                "acq_seconds": suggestion.acq_seconds,
                "fallback": info.pop("fallback", None),
                "info": info,
            }
            run_step(batch, suggestion.x, step)
    finally:
        evaluations.close()
    return records
