"""The unit of work: what the runner runs, the store keeps and a rerun reuses (cells, probe states).

A unit is known by its id and the hash of its *resolved* configuration: every default of the
factories it names filled in, so a default changed in the code changes the hash though the suite
did not, and a default spelled out in the suite does not. Torch-free, like :mod:`orthobench.suite`.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

from orthobench.exceptions import OrthobenchWarning

#: The kinds of units, as messages and the store name them.
CELL = "cell"
PROBE_STATE = "probe state"
#: The field that names a unit of each kind in the store's journals and the running marker.
ID_FIELDS = {CELL: "cell_id", PROBE_STATE: "state_id"}


class WorkUnit(Protocol):
    """A unit of work (:class:`orthobench.suite.Cell`, :class:`orthobench.probe.states.ProbeUnit`).

    How a unit runs is its job's (:class:`orthobench.executors.Job`), which the executors run
    whatever the unit is.

    Attributes:
        kind: What messages and the store call it: :data:`CELL` or :data:`PROBE_STATE`.
        suite: The name of the suite the unit is of.
    """

    kind: str
    suite: str

    @property
    def id(self) -> str:
        """File-name-safe identifier, unique among the units of its kind in a suite."""
        ...

    def resolved_config(self) -> dict[str, Any]:
        """The configuration the unit computes with, defaults filled in, as JSON values."""
        ...

    @property
    def config_hash(self) -> str:
        """:func:`hash_config` of :meth:`resolved_config`: stored results are reused only when
        it matches."""
        ...


# A memory address in an object's text (``<object object at 0x7f...>``, ``<function f at 0x...>``).
_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")


def _json(value: Any) -> Any:
    """An object that is not JSON as a JSON value that is the same in every process, so that a
    factory default keeps its configuration hash across runs: a set (or frozenset) as the list
    of its items sorted by their canonical text (its ``str`` follows the string hash seed; the
    text sorts items of mixed types too), anything else as its ``str`` without memory addresses
    (a sentinel ``object()``'s or a function's differ from one process to the next)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=canonical)
    return _ADDRESS_RE.sub("", str(value))


def canonical(value: Any) -> str:
    """``value`` as JSON text with sorted keys (sets as sorted lists, other objects as their
    ``str`` without memory addresses)."""
    return json.dumps(value, sort_keys=True, default=_json)


def hash_config(config: dict[str, Any]) -> str:
    """The first 16 hex digits of the SHA-256 of :func:`canonical` ``config``."""
    return hashlib.sha256(canonical(config).encode()).hexdigest()[:16]


def config_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``"optimizer.params.beta 0.1 (stored) -> 0.2 (now)"`` for each leaf that differs."""
    old, new = _leaves(before), _leaves(after)
    return [
        f"{key} {old.get(key, '(unset)')} (stored) -> {new.get(key, '(unset)')} (now)"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _leaves(value: Any, path: tuple[str, ...] = ()) -> dict[str, str]:
    """``{"optimizer.params.beta": JSON text}``: the leaves of nested dicts by dotted path."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _leaves(item, (*path, key)).items()}
    return {".".join(path): canonical(value)}


def warn_thread_counts(
    unit: WorkUnit,
    others: Sequence[int],
    threads: int,
    *,
    stored: str,
    redo: str,
    option: str,
    keep: str,
    stacklevel: int,
) -> None:
    """Warn that ``unit``'s ``stored`` work ran with the thread counts ``others``, not the run's
    ``threads``, so it is recomputed (``redo``), and which ``option`` keeps it (``keep``): values
    depend on the count, so a unit's stored work never mixes two (docs/design.md, "Thread
    counts"; cells and probe states alike)."""
    warnings.warn(
        f"{unit.kind} {unit.id}: its {stored} computed with {', '.join(map(str, others))} "
        f"thread(s), this run uses {threads}: {redo}; run with {option} {others[0]} to {keep}.",
        OrthobenchWarning,
        stacklevel=stacklevel + 1,
    )
