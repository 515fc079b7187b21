"""One evaluation of a point, and where a cell's evaluations run.

An :class:`EvaluationRequest` (a point of a cell, its iteration and seed) becomes an
:class:`Outcome` (the task's values, its status and seconds) by :func:`evaluate_point`, within
an optional time limit (:func:`~orthobench.deadlines.evaluation_deadline`): an evaluation that
runs longer is stopped, the processes it started are killed and its outcome is a ``timeout``.
:class:`Evaluations` runs a cell's requests here, one after the other; its subclasses run them at
once in worker processes or on Dask (:mod:`orthobench.executors._evaluations`). The SIGINT and
SIGTERM handlers and the torch thread count a task or optimizer changes while it runs are put
back afterwards (:func:`runner_state_kept`), so the runner's Ctrl-C keeps working and the cell
runs at its recorded thread count.
"""

from __future__ import annotations

import collections
import contextlib
import math
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from orthobench.deadlines import (
    EvaluationTimeout,
    descendants,
    evaluation_deadline,
    kill_descendants,
)
from orthobench.exceptions import OrthobenchWarning, show_value
from orthobench.seeding import torch_seed
from orthobench.suite import Cell
from orthobench.tasks.base import Evaluation, Task, as_float

_T = TypeVar("_T")

#: The signals whose handlers are the runner's: a task or optimizer that changes them gets them
#: put back (:func:`runner_state_kept`).
_RUNNER_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def runner_state_kept() -> Iterator[None]:
    """Run the block, then put back the SIGINT and SIGTERM handlers and torch's thread count it
    found.

    A task may change them (a training library that ignores SIGINT, or sets its own thread
    count): without this, Ctrl-C would be off for the rest of an inline run, and the optimizer
    would run at a thread count the cell's metadata does not record (its values depend on it).
    Only a process's main thread can set handlers, so elsewhere (a Dask worker thread) only the
    thread count is put back; a handler Python did not install (``signal.getsignal`` gives None)
    is left as it is.
    """
    threads = torch.get_num_threads()
    main = threading.current_thread() is threading.main_thread()
    before = {signum: signal.getsignal(signum) for signum in _RUNNER_SIGNALS} if main else {}
    try:
        yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        for signum, handler in before.items():
            if handler is not None and signal.getsignal(signum) != handler:
                signal.signal(signum, handler)


def nonfinite_as_null(value: Any) -> Any:
    """``value`` with each non-finite float in it (in nested dicts, lists and tuples) replaced by
    None: JSON has no NaN or infinity, and the stored ``info`` must be standard JSON. NumPy and
    torch numbers and arrays become Python ones first (``json.dumps``'s ``default=str`` stored
    ``np.float32(0.25)`` as the string "0.25" and its NaN as "nan")."""
    if isinstance(value, np.generic | np.ndarray | torch.Tensor):
        value = value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: nonfinite_as_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [nonfinite_as_null(item) for item in value]
    return value


@dataclass(frozen=True)
class EvaluationRequest:
    """One point of a cell to evaluate.

    Args:
        position: Its index in its step (the initial design is step 0); of an asynchronous
            cell's BO point, its proposal's index, as ``iteration``.
        iteration: Its index in the cell; of an asynchronous cell's BO point, its proposal's
            index (its record is numbered in the order it finished).
        x: ``d`` values in native units.
        seed: The evaluation's seed.
        batch: Of an asynchronous cell's BO point, the ask that proposed it (its record's
            ``batch``); None otherwise.
    """

    position: int
    iteration: int
    x: np.ndarray
    seed: int
    batch: int | None = None


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
    prepare_once(task, device)
    timed_out, evaluation, seconds = call_within(
        timeout, request.seed, lambda: task.evaluate(request.x, seed=request.seed, device=device)
    )
    if timed_out:
        return timeout_outcome(task, seconds)
    return outcome_of(task, evaluation, seconds, request.iteration, label, request.batch)


#: id(task) -> the devices its :meth:`~orthobench.tasks.base.Task.prepare` ran for (an entry
#: goes with its task: :func:`prepare_once`).
_PREPARED: dict[int, set[str]] = {}


def prepare_once(task: Task, device: torch.device) -> None:
    """Run ``task.prepare(device)`` unless it ran for this task object and device, untimed,
    with the runner's signal handlers and thread count kept (:func:`runner_state_kept`)."""
    done = _PREPARED.get(id(task))
    if done is None:
        done = _PREPARED[id(task)] = set()
        weakref.finalize(task, _PREPARED.pop, id(task), None)
    if str(device) not in done:
        with runner_state_kept():
            task.prepare(device)
        done.add(str(device))


def call_within(
    timeout: float | None, seed: int, call: Callable[[], _T]
) -> tuple[bool, _T | None, float]:
    """``(timed_out, call(), seconds)`` under ``torch_seed(seed)``, stopped after ``timeout``
    seconds (:func:`~orthobench.deadlines.evaluation_deadline`): then ``(True, None, seconds)``,
    and the processes it started (and theirs) are killed."""
    start = time.perf_counter()
    children = descendants() if timeout is not None else None
    try:
        with runner_state_kept(), evaluation_deadline(timeout), torch_seed(seed):
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
    task: Task,
    evaluation: object,
    seconds: float,
    iteration: int,
    label: str,
    batch: int | None = None,
    method: str = "evaluate",
) -> Outcome:
    """The :class:`Outcome` of what ``task``'s evaluation at ``iteration`` returned (by its
    ``method``, named in the errors), checked as :func:`evaluate_point` says. ``batch``: of an
    asynchronous cell's point, the ask that proposed it (:attr:`EvaluationRequest.batch`),
    ``iteration`` being its proposal's index."""
    # An asynchronous cell numbers its records as evaluations finish: a proposal's index is not
    # the iteration of its record, so the messages name the proposal and its batch.
    where = f"iteration {iteration}" if batch is None else f"proposal {iteration}, batch {batch}"
    if not isinstance(evaluation, Evaluation):
        raise TypeError(
            f"`{method}` of task {label!r} must return an Evaluation, but returned "
            f"{show_value(evaluation)} (at {where})."
        )
    if len(evaluation.constraints) != task.n_constraints:
        raise TypeError(
            f"`{method}` of task {label!r} must return {task.n_constraints} constraint value(s) "
            f"(its `n_constraints`), but returned {len(evaluation.constraints)} (at {where})."
        )
    y = as_float(evaluation.y)
    # A non-finite constraint value (a failed simulation) is infeasible and, like a non-finite
    # y, not told: the constraint GPs cannot fit it, and it must not fail the cell.
    told = math.isfinite(y) and all(math.isfinite(c) for c in evaluation.constraints)
    return Outcome(
        "ok" if told else "invalid",
        y,
        None if evaluation.y_true is None else as_float(evaluation.y_true),
        bool(evaluation.is_outlier),
        evaluation.info,
        seconds,
        evaluation.constraints,
    )


class Evaluations:
    """Where a cell's evaluations run: here, one after the other, with the task the cell built.

    :func:`~orthobench.loop.run_cell` calls :meth:`open` once, :meth:`run` with the points of each step (the
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
        return self.stream(collections.deque(requests))

    def stream(
        self, queue: collections.deque[EvaluationRequest]
    ) -> Iterator[tuple[EvaluationRequest, Outcome]]:
        """Evaluate the requests ``queue`` holds and those the caller appends to it while it
        iterates (each yield hands it an outcome, and the queue is read again when it resumes),
        yielding each with its outcome as it finishes; the iterator ends once none is queued or
        running. Here one at a time, in queue order (an asynchronous cell's loop).

        Raises:
            Exception: what an evaluation raised (:func:`evaluate_point`); the cell fails.
        """
        while queue:
            request = queue.popleft()
            yield (
                request,
                evaluate_point(self._task, request, self._device, self._timeout, self._label),
            )

    def close(self) -> None:
        """Stop what evaluates (nothing here)."""
