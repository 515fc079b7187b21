"""The BO loop for one cell: shared initial design, ask/evaluate/tell, per-evaluation records.

Seeds (all from :func:`orthobench.seeding.derive_seed`):

- initial design: ``(seed, "init", task label)`` -- identical for every optimizer of a seed;
- initial evaluations: ``(seed, "eval-init", task label, i)`` -- identical observations too;
- optimizer: ``(seed, "optimizer", task label, optimizer label)``;
- BO evaluations: ``(seed, "eval", task label, optimizer label, iteration)``.

A BO step proposes the cell's ``q`` points at once (:func:`run_cell`); an asynchronous cell
keeps ``q`` evaluations running instead, asking one point as each finishes.
:class:`~orthobench.evaluation.Evaluations` says where the evaluations run (here, one after the
other; at once in worker processes or on Dask: :mod:`orthobench.executors._evaluations`), each
within the cell's evaluation time limit; an evaluation past it is recorded with
``status="timeout"`` and the cell goes on. The SIGINT and SIGTERM handlers and the torch thread
count a task or optimizer changes while it is built, evaluates, asks or is told are put back
afterwards, so the runner's Ctrl-C keeps working and the cell runs at its recorded thread count
(:func:`~orthobench.evaluation.runner_state_kept`).

The loop never knows how it is executed (inline, process pool, cluster).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import json
import math
import time
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import torch
from torch.quasirandom import SobolEngine

from orthobench.bests import Bests
from orthobench.deadlines import EvaluationTimeout, evaluation_deadline
from orthobench.evaluation import (
    EvaluationRequest,
    Evaluations,
    Outcome,
    nonfinite_as_null,
    runner_state_kept,
)
from orthobench.exceptions import (
    ConfigError,
    OrthobenchError,
    ResultsError,
    describe_error,
    error_message,
    one_line,
    show_value,
)
from orthobench.optimizers.base import Optimizer
from orthobench.registry import OPTIMIZERS, TASKS
from orthobench.results import EvaluationJournal, RunRecord
from orthobench.seeding import derive_seed
from orthobench.suite import Cell
from orthobench.tasks.base import Task, feasible

#: Per-evaluation callback: called with the number of evaluations just finished (1).
ProgressCallback = Callable[[int], None]

#: Seconds :func:`check_buildable` lets a task or optimizer take to be built when the run has no
#: cell timeout (with one, the cell timeout is the limit).
BUILD_TIMEOUT_S = 300.0

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


def _build(component: str, build: Callable[[], _T], timeout: float, where: str = "") -> _T:
    """``build()`` within ``timeout`` seconds; any failure becomes a one-line :class:`ConfigError`
    at ``component`` (``tasks.<label>``, ``optimizers.<label>``), ``where`` added to its reason.

    A ``ValueError`` or ``TypeError`` (a constructor refusing its parameters) gives its message; any
    other exception, ``SystemExit`` included, its type and message. A :class:`ConfigError` keeps
    its reason, its field put under ``component`` unless it is there (``batch_size`` becomes
    ``tasks.<label>.batch_size``: two tasks of one suite may both have one); any other
    :class:`~orthobench.exceptions.OrthobenchError` is raised as it is: it names its cause
    already (a missing dataset, its fetch command). A ``KeyboardInterrupt`` is not caught: Ctrl-C
    ends the run.
    """
    try:
        with runner_state_kept(), evaluation_deadline(timeout, what="construction"):
            return build()
    except ConfigError as err:
        if err.field == component or err.field.startswith(f"{component}."):
            raise  # named already (make_task's check of what the factory built)
        raise ConfigError(
            f"{component}.{err.field}" if err.field else component, err.reason
        ) from None
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


def evaluates_in_parallel(cell: Cell) -> bool:
    """Whether the evaluations of ``cell``'s BO steps are worth a process each: the
    :attr:`~orthobench.tasks.base.Task.parallel_evaluations` of the class its task factory
    builds, read without building it (a class named in the suite, or the factory's return
    annotation); a factory that declares no task class is taken to be expensive."""
    return _parallel_evaluations(cell.task.name)


@functools.cache  # per task name, not per cell: a suite asks it of each cell, twice
def _parallel_evaluations(task_name: str) -> bool:
    factory = TASKS.resolve(task_name).factory
    try:
        built = factory if inspect.isclass(factory) else typing.get_type_hints(factory)["return"]
    except Exception:  # noqa: BLE001 -- a plugin's unresolvable or missing annotation
        return True
    if not (inspect.isclass(built) and issubclass(built, Task)):
        return True
    return built.parallel_evaluations


def _status_in(outcome: Outcome, dtype: str) -> str:
    """The outcome's status, ``invalid`` for an ``ok`` one whose y or constraint values overflow
    the cell's ``dtype``: a finite 1e39 is inf in float32, which the optimizer's ``tell``
    refused, failing the cell (again on every resume)."""
    values = np.array([outcome.y, *outcome.constraints])
    with np.errstate(over="ignore"):
        fits = np.isfinite(values.astype(dtype)).all()
    return "invalid" if outcome.status == "ok" and not fits else outcome.status


def _task_shape(cell: Cell) -> tuple[int, int]:
    """The dimension and the number of constraints of the cell's task."""
    task = make_task(cell)
    if not task.space.dim:  # else each optimizer is blamed for its `dim` of 0
        raise ConfigError("space", "the task's search space has no parameter.")
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
    :attr:`~orthobench.optimizers.base.Optimizer.max_batch`), take pending points where a cell
    is asynchronous (:attr:`~orthobench.optimizers.base.Optimizer.accepts_pending`), and handle
    constraints
    (:attr:`~orthobench.optimizers.base.Optimizer.handles_constraints`) where its task has some
    (:attr:`~orthobench.tasks.base.Task.n_constraints`).

    Returns:
        The number of constraints of each task, by label.

    Raises:
        OrthobenchError: a task's or optimizer's own, as it raised it.
        ConfigError: at field ``tasks.<label>`` or ``optimizers.<label>``, with the constructor's
            error, for a component that cannot be built or is not built in time; at
            ``optimizers.<label>`` for an optimizer whose ``max_batch`` is below a cell's ``q``,
            that takes no pending points for an asynchronous cell or that does not handle its
            task's constraints; at ``tasks.<label>`` for an
            ``n_constraints`` that is not a non-negative int.
    """
    timeout = BUILD_TIMEOUT_S if timeout is None else timeout
    shapes: dict[str, tuple[int, int]] = {}
    largest: dict[tuple[str, str], Cell] = {}
    asynchronous: set[tuple[str, str]] = set()
    for c in cells:
        key = (c.task.label, c.optimizer.label)
        if key not in largest or c.q > largest[key].q:
            largest[key] = c
        if c.asynchronous:
            asynchronous.add(key)
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
                f"but the suite asks q={cell.q}; lower q or {optimizer.batch_advice}.",
            )
        pair = (cell.task.label, cell.optimizer.label)
        if pair in asynchronous and not optimizer.accepts_pending:
            raise ConfigError(
                f"optimizers.{cell.optimizer.label}",
                f"{cell.optimizer.name!r} cannot propose points while others are evaluated "
                "(no pending points), which an asynchronous suite needs: set asynchronous: "
                "false or choose an optimizer that takes them.",
            )
        if n_constraints and not optimizer.handles_constraints:
            raise ConfigError(
                f"optimizers.{cell.optimizer.label}",
                f"{cell.optimizer.name!r} does not handle constraints, but task "
                f"{cell.task.label!r} has {n_constraints}: choose an optimizer that does "
                f"({', '.join(_constrained_optimizers())}) or an unconstrained task.",
            )
        if n_constraints:
            try:
                optimizer.check_constraints()
            except ValueError as err:
                raise ConfigError(
                    f"optimizers.{cell.optimizer.label}",
                    f"{cell.optimizer.name!r} on the constrained task {cell.task.label!r}: "
                    f"{one_line(error_message(err))}",
                ) from None
    return {label: n_constraints for label, (_, n_constraints) in shapes.items()}


def _constrained_optimizers() -> list[str]:
    """The registered optimizers that handle constraints (``handles_constraints``)."""
    names = []
    for name in OPTIMIZERS.names():
        try:
            factory = OPTIMIZERS.resolve(name).factory
        except OrthobenchError:  # a plugin that does not load here is not a suggestion
            continue
        if getattr(factory, "handles_constraints", False) is True:
            names.append(name)
    return names


#: Unit-cube distance within which a re-asked point of an unfinished step is the journaled one.
_REASK_ATOL = 1e-6

_Journaled = dict[int, tuple[RunRecord, dict[str, Any] | None]]


def _eval_seed(cell: Cell, iteration: int) -> int:
    if iteration < cell.n_init:
        return derive_seed(cell.seed, "eval-init", cell.task.label, iteration)
    return derive_seed(cell.seed, "eval", cell.task.label, cell.optimizer.label, iteration)


def _steps(cell: Cell) -> list[range]:
    """The iterations of each step of ``cell``: the initial design, then its BO steps (of one
    evaluation each in an asynchronous cell: each is told, and journaled with the state, as it
    finishes)."""
    size = 1 if cell.asynchronous else cell.q
    return [range(cell.n_init)] + [
        range(cell.n_init + k * size, cell.n_init + (k + 1) * size)
        for k in range(cell.budget * cell.q // size)
    ]


def resumed_clock(cell: Cell, replayed: Iterable[RunRecord]) -> float:
    """Where the clock of ``cell`` resumes after the evaluations ``replayed`` from its journal:
    the ``wall_seconds`` that ended its last whole step (0 before the initial design is whole)
    plus the ``eval_seconds`` of what the next, unfinished step journaled.

    That step is asked again, and the ``wall_seconds`` of its journaled points hold the first
    ask already. An asynchronous cell's steps are its evaluations, each journaled after its tell
    with the points still running, which a rerun submits again as they were asked: only an ask
    after its last journaled evaluation is made again, and it is past that one's
    ``wall_seconds``. Evaluations without a wall time (journaled before it was recorded) are left
    out.
    """
    done = {r.iteration: r for r in replayed if math.isfinite(r.wall_seconds)}
    steps = _steps(cell)
    unfinished = next((k for k, step in enumerate(steps) if any(i not in done for i in step)), None)
    ended = max((done[i].wall_seconds for step in steps[:unfinished] for i in step), default=0.0)
    if unfinished is None:
        return ended
    # Inline, the unfinished step's points ran one after the other; evaluated at once (worker
    # processes, Dask), they overlapped, and their sum is more than the wall time they took.
    return ended + sum(done[i].eval_seconds for i in steps[unfinished] if i in done)


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
    compared in the unit cube as evaluated (ints rounded, bounds clipped). The initial design
    (``iterations`` from 0) is made again, not asked of the optimizer: its message says so."""
    for i, journaled in done.items():
        j = i - iterations.start
        asked = space.to_unit(space.from_unit(units[j : j + 1]))[0]
        found = space.to_unit(np.array([journaled.x]))[0]
        if np.allclose(asked, found, rtol=0.0, atol=_REASK_ATOL):
            continue
        differ = f"({asked.tolist()} vs {found.tolist()} in the unit cube)"
        if iterations.start == 0:
            raise ResultsError(
                f"cell {cell.id}: the initial design point of iteration {i} is not the "
                f"journaled one {differ}: the task's search space or torch's Sobol' sequence "
                "changed since it was journaled; rerun with --force to start the cell over."
            )
        raise ResultsError(
            f"cell {cell.id}: the point asked again at iteration {i} is not the journaled "
            f"one {differ}: optimizer {cell.optimizer.label!r} does not ask reproducibly from "
            "its state; rerun with --force to start the cell over."
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
    (:class:`~orthobench.bests.Bests`); the optimizer is told the objective values alone.
    Evaluations with a non-finite ``y`` or constraint value are recorded with
    ``status="invalid"`` and not told to the optimizer; so are evaluations stopped after ``evaluation_timeout`` seconds (:func:`evaluation_deadline`), with
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
    equals an uninterrupted one (up to the timings) at the thread count the journal was written
    with: the runner discards a journal that records another count than its run's
    (:func:`orthobench.execution.run_suite`).

    An asynchronous cell (``cell.asynchronous``) keeps ``q`` evaluations running instead: after
    a first ask of ``q`` points, each finished evaluation is told alone and one point is asked
    with the running ones as pending points (``Evaluations.stream``). Its records are numbered
    in the order the evaluations finished, each evaluation seeded by its proposal's index, and
    ``batch`` is the ask that proposed the point. Each BO evaluation is journaled after its tell
    with the optimizer's state and the points still running, which a rerun submits again as
    they were asked (docs/design.md, "Asynchronous cells").

    Raises:
        ResultsError: when a point asked again for an unfinished step is not the one its
            journaled evaluation was made at (an optimizer whose asks are not reproducible).
    """
    clock = time.perf_counter()
    device = torch.device(device)
    evaluations = evaluations or Evaluations()
    with runner_state_kept():
        task = make_task(cell)
        space = task.space
        optimizer = make_optimizer(cell, space.dim, device)
    # The optimizer is plugin code too: the handlers and thread count it changes while it asks,
    # is told or (re)stores its state are put back after each call (a contextmanager also decorates, with
    # a fresh one per call).
    ask, tell, load_state_dict, state_dict = map(
        runner_state_kept(),
        (optimizer.ask, optimizer.tell, optimizer.load_state_dict, optimizer.state_dict),
    )
    steps = _steps(cell)
    stored: _Journaled = {}
    if journal is not None:
        stored = {record.iteration: (record, state) for record, state in journal.read()}
    whole = _resume_point(steps, stored)
    # Of the unfinished step, what was journaled is kept; what follows it is not replayable.
    reused = [i for k in steps[: whole + 1] for i in k if i in stored]
    # The cell's clock continues from its replayed evaluations: time it did not run is not counted.
    offset = resumed_clock(cell, (stored[i][0] for i in reused))
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
            status=_status_in(outcome, cell.dtype),
            fallback=step.get("fallback"),
            info=json.dumps(
                nonfinite_as_null({**step.get("info", {}), **outcome.info}),
                default=str,
                allow_nan=False,
            ),
            constraints=list(outcome.constraints),
            feasible=feasible(outcome.constraints),
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

    def asked(n: int, pending: np.ndarray | None) -> tuple[np.ndarray, dict[str, Any]]:
        """``n`` points asked (``n x d``, unit cube) and the step's seconds and info.

        Raises:
            OrthobenchError: when evaluations without a value (timed out, invalid) left the
                optimizer fewer observations than it needs to ask (its ``min_observations``):
                the cell fails saying so, not with the optimizer's "tell the initial design".
        """
        told_values = len(optimizer.train_y)
        if told_values < optimizer.min_observations:
            lost = sum(r.status != "ok" for r in records)
            raise OrthobenchError(
                f"{cell.optimizer.label} needs {optimizer.min_observations} evaluations with a "
                f"value before it proposes, but has {told_values}: {lost} of the cell's "
                f"{len(records)} evaluations so far gave none (timed out or invalid); raise "
                "n_init or evaluation_timeout_s."
            )
        # A plugin's ``ask(n)`` override need not take ``pending``: only asynchronous cells pass it.
        suggestion = ask(n) if pending is None else ask(n, pending=pending)
        info = dict(suggestion.info)
        return suggestion.x, {
            "fit_seconds": suggestion.fit_seconds,
            "acq_seconds": suggestion.acq_seconds,
            "fallback": info.pop("fallback", None),
            "info": info,
        }

    def run_asynchronously(schedule: dict[str, Any]) -> None:
        """The BO evaluations of an asynchronous cell from the journaled ``schedule`` on: ``q``
        kept running; each is told alone as it finishes, journaled with the optimizer's state
        and the points still running, and one new point is asked with those pending."""
        running: dict[int, dict[str, Any]] = {}  # by proposal index, filled by submit
        asks, iteration = schedule["asks"], len(records)
        end = cell.n_init + cell.q * cell.budget
        queue: collections.deque[EvaluationRequest] = collections.deque()

        def submit(proposal: dict[str, Any]) -> None:
            running[proposal["proposal"]] = proposal
            i, x = proposal["proposal"], space.from_unit(np.array([proposal["x"]]))[0]
            queue.append(EvaluationRequest(i, i, x, _eval_seed(cell, i), proposal["batch"]))

        def fill() -> None:
            """Ask for the free places, the running points pending."""
            nonlocal asks
            n = min(cell.q - len(running), end - iteration - len(running))
            if n < 1:
                return
            pending = np.array([p["x"] for p in running.values()]) if running else None
            units, step = asked(n, pending)
            # As the record will store it: the journal keeps the running points' steps.
            step = json.loads(json.dumps(nonfinite_as_null(step), default=str, allow_nan=False))
            asks += 1
            first = iteration + len(running)  # proposals so far, each finished or running
            for j, unit in enumerate(units):
                submit({"proposal": first + j, "x": unit.tolist(), "batch": asks, "step": step})

        for proposal in schedule["running"]:
            submit(proposal)
        fill()
        for request, outcome in evaluations.stream(queue):
            proposal = running.pop(request.iteration)
            done = record(request, outcome, proposal["batch"], proposal["step"])
            done = bests.take(dataclasses.replace(done, iteration=iteration))
            iteration += 1
            records.append(done)
            told([done])
            if journal is not None:
                state = {"asks": asks, "running": list(running.values())}
                journal.append(done, {"optimizer": state_dict(), "schedule": state})
            progress()
            fill()

    opening = time.perf_counter()
    evaluations.open(cell, task, device, evaluation_timeout)
    # Starting evaluation processes (spawned, importing torch, each building the task) is the
    # executor's cost, not the cell's: kept off the clock of its wall_seconds, which would
    # otherwise differ between cells of one run by how long their pool took to start.
    clock += time.perf_counter() - opening
    try:
        if whole >= 1:
            replayed = [stored[i][0] for i in steps[0]]
            records.extend(bests.take(r) for r in replayed)
            told(replayed)
        schedule = {"asks": 0, "running": []}
        if whole > 1:
            replayed = [stored[i][0] for k in steps[1:whole] for i in k]
            records.extend(bests.take(r) for r in replayed)
            told(replayed)
            state = next(s for i in steps[whole - 1] if (s := stored[i][1]) is not None)
            if cell.asynchronous:
                state, schedule = state["optimizer"], state["schedule"]
            load_state_dict(state)
        for _ in records:
            progress()
        if whole == 0:
            init = derive_seed(cell.seed, "init", cell.task.label)
            run_step(0, initial_design(space.dim, cell.n_init, init), {})
        if cell.asynchronous:
            run_asynchronously(schedule)
        else:
            for batch in range(max(whole, 1), len(steps)):
                run_step(batch, *asked(cell.q, None))
    finally:
        evaluations.close()
    return records
