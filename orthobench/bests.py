"""The best-so-far values of a cell's records: ``best_y`` and ``regret`` (:func:`orthobench.loop.run_cell`).

Only ``ok`` and feasible evaluations count: an infeasible point is never the best, however low
its ``y``, so both stay None until the first feasible one.
"""

from __future__ import annotations

import dataclasses
import math

from orthobench.results import RunRecord
from orthobench.tasks.base import Task


def _counts(record: RunRecord) -> bool:
    """Whether ``record`` may be the best so far: it gave a value and met its constraints."""
    return record.status == "ok" and record.feasible


def _true(record: RunRecord) -> float:
    """The noise-free value regret is computed from: ``y_true`` where known, else ``y``; a
    non-finite ``y_true`` (the task could not compute it) is never the best: -inf made every
    later regret of the cell undefined."""
    value = record.y if record.y_true is None else record.y_true
    return value if math.isfinite(value) else math.inf


class Bests:
    """Best-so-far ``best_y`` and ``regret`` of records taken in iteration order.

    Args:
        task: The cell's task; its :meth:`~orthobench.tasks.base.Task.regret` gives the regret.
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.best_y = math.inf
        self.best_true = math.inf

    def _with(self, record: RunRecord, best_y: float, best_true: float) -> RunRecord:
        if _counts(record):
            best_y = min(best_y, record.y)
            best_true = min(best_true, _true(record))
        return dataclasses.replace(
            record,
            best_y=best_y if math.isfinite(best_y) else None,
            regret=self.task.regret(best_true) if math.isfinite(best_true) else None,
        )

    def provisional(self, record: RunRecord, done: dict[int, RunRecord]) -> RunRecord:
        """``record`` with the bests of the taken records and of those of its step in ``done``
        that precede it: its final ones when its step finishes in order (always, one at a time)."""
        best_y, best_true = self.best_y, self.best_true
        for i, r in sorted(done.items()):
            if i < record.iteration and _counts(r):
                best_y = min(best_y, r.y)
                best_true = min(best_true, _true(r))
        return self._with(record, best_y, best_true)

    def take(self, record: RunRecord) -> RunRecord:
        """``record`` with its final bests, which then count for the next."""
        record = self._with(record, self.best_y, self.best_true)
        if record.best_y is not None:
            self.best_y = record.best_y
        if _counts(record):
            self.best_true = min(self.best_true, _true(record))
        return record
