"""The store interface: what the runner needs from a results store to run units into it.

As Optuna's ``BaseStorage`` is what a study needs, :class:`BaseStore` is what
:func:`orthobench.execution.run_suite` needs: hold the store, say what is stored, journal a
unit's evaluations, store a finished unit and journal a failed one.
:class:`~orthobench.results.ResultStore` implements it with Parquet files and JSON-lines journals.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orthobench.results._identity import resolved_hash
from orthobench.results._journal import EvaluationJournal
from orthobench.results._records import RunRecord
from orthobench.suite import Cell


class BaseStore(abc.ABC):
    """A store of cells, each known by its id and the hash of its resolved configuration.

    A cell is stored when the store holds it under the hash of its configuration now
    (:func:`~orthobench.results.resolved_hash`); any other cell is (re)computed.

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
    def stored(self) -> dict[str, str]:
        """``cell id -> config hash`` of the stored cells."""

    def is_stored(self, cell: Cell, stored: dict[str, str] | None = None) -> bool:
        """Whether ``cell`` is stored with its resolved configuration (:func:`resolved_hash`)."""
        stored = self.stored() if stored is None else stored
        return stored.get(cell.id) == resolved_hash(cell)

    @abc.abstractmethod
    def evaluation_journal(self, cell: Cell) -> EvaluationJournal:
        """The journal of the cell's evaluations while it runs."""

    @abc.abstractmethod
    def write_cell(
        self, cell: Cell, records: Sequence[RunRecord], metadata: dict[str, Any], seconds: float
    ) -> Path:
        """Store a finished cell (its records and metadata) and discard its evaluation journal."""

    def record_failure(self, cell: Cell, error: str, traceback_text: str, seconds: float) -> None:
        """Journal a failed cell (its error and traceback); it is retried on the next run."""
        self.journal_failure(cell.id, resolved_hash(cell), error, traceback_text, seconds)

    @abc.abstractmethod
    def journal_failure(
        self,
        cell_id: str,
        config_hash: str,
        error: str,
        traceback_text: str,
        seconds: float | None,
    ) -> None:
        """:meth:`record_failure` for a cell known by its id and configuration hash alone (one
        that an earlier process left unfinished); ``seconds`` None where nobody timed it."""
