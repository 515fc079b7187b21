"""The store interface: what the runner needs from a results store to run units into it.

As Optuna's ``BaseStorage`` is what a study needs, :class:`BaseStore` is what
:func:`orthobench.execution.run_units` needs: hold the store, say what is stored, journal a
cell's evaluations, store a finished unit and journal a failed one.
:class:`~orthobench.results.ResultStore` implements it with Parquet files and JSON-lines journals.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from orthobench.results._journal import EvaluationJournal
from orthobench.suite import Cell
from orthobench.work import WorkUnit, config_differences


class BaseStore(abc.ABC):
    """A store of units of work (:class:`~orthobench.work.WorkUnit`: cells, probe states), each
    known by its kind, its id and the hash of its resolved configuration.

    A unit is stored when the store holds it under its configuration hash now; any other unit is
    (re)computed.

    Attributes:
        root: The absolute directory of the store (the runner keeps its running marker there).
    """

    root: Path

    @abc.abstractmethod
    def open_for_writing(self) -> contextlib.AbstractContextManager[BaseStore]:
        """Hold the store for this process while the block writes to it.

        Raises:
            OrthobenchError: when the store cannot be written or another process holds it.
        """

    @abc.abstractmethod
    def stored_entries(self, kind: str) -> dict[str, dict[str, Any]]:
        """``unit id -> journal entry`` (``config_hash``, and ``config`` where it was stored) of
        the stored units of ``kind``."""

    def stored(self, kind: str = Cell.kind) -> dict[str, str]:
        """``unit id -> config hash`` of the stored units of ``kind``."""
        return {uid: entry["config_hash"] for uid, entry in self.stored_entries(kind).items()}

    def is_stored(self, unit: WorkUnit, stored: dict[str, str] | None = None) -> bool:
        """Whether ``unit`` is stored with its configuration now (``stored``: :meth:`stored` of
        its kind, read once by a caller that asks for many units)."""
        stored = self.stored(unit.kind) if stored is None else stored
        return stored.get(unit.id) == unit.config_hash

    def config_changes(self, units: Iterable[WorkUnit]) -> list[str]:
        """One line per unit stored with another resolved configuration than it has now.

        Such a unit is not reused (:meth:`is_stored`); the caller says so and lets the user
        recompute it or choose another directory. Each line names the values that differ::

            cell hartmann6__qlogei__seed0: stored with another configuration:
            optimizer.params.function_samples 64 (stored) -> 128 (now)

        (one line). Units journaled without their resolved configuration (by orthobench before it
        stored one) are not listed: they are recomputed once.
        """
        entries: dict[str, dict[str, dict[str, Any]]] = {}
        lines = []
        for unit in units:
            if unit.kind not in entries:
                entries[unit.kind] = self.stored_entries(unit.kind)
            entry = entries[unit.kind].get(unit.id)
            if entry is None or "config" not in entry or entry["config_hash"] == unit.config_hash:
                continue
            changes = config_differences(entry["config"], unit.resolved_config())
            lines.append(
                f"{unit.kind} {unit.id}: stored with another configuration: {'; '.join(changes)}"
            )
        return lines

    @abc.abstractmethod
    def evaluation_journal(self, cell: Cell) -> EvaluationJournal:
        """The journal of the cell's evaluations while it runs."""

    @abc.abstractmethod
    def write(
        self, unit: WorkUnit, records: Sequence[Any], metadata: dict[str, Any], seconds: float
    ) -> Path:
        """Store a finished unit (its records and metadata) under its configuration now."""

    def record_failure(
        self, unit: WorkUnit, error: str, traceback_text: str, seconds: float
    ) -> None:
        """Journal a failed unit (its error and traceback); it is retried on the next run."""
        self.journal_failure(
            unit.kind, unit.id, unit.config_hash, error, traceback_text, seconds, unit.suite
        )

    @abc.abstractmethod
    def journal_failure(
        self,
        kind: str,
        uid: str,
        config_hash: str,
        error: str,
        traceback_text: str,
        seconds: float | None,
        suite: str | None = None,
    ) -> None:
        """:meth:`record_failure` for a unit known by its kind, id and configuration hash alone
        (one that an earlier process left unfinished); ``seconds`` None where nobody timed it,
        ``suite`` (the unit's suite, which the report counts a failed cell in) None where it is
        not known."""
