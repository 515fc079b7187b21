"""The identity of a cell in the store: its resolved configuration and that configuration's hash.

A cell is reused when its stored config hash is that of its *resolved* configuration (the suite's
parameters with every default of the task and optimizer factories filled in), so a default
changed in the code is a changed configuration even though the suite is not.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from orthobench.registry import OPTIMIZERS, TASKS
from orthobench.suite import Cell


def resolved_config(cell: Cell) -> dict[str, Any]:
    """:meth:`Cell.config` with every default of the task and optimizer factories filled in.

    The parameters a cell really runs with, as JSON values (tuples become lists, other objects
    their ``str``): a default changed in the code changes it though the suite did not. The
    factories are looked up in :data:`orthobench.registry.TASKS` and ``OPTIMIZERS``.
    """
    config = cell.config()
    for key, registry in (("task", TASKS), ("optimizer", OPTIMIZERS)):
        entry = registry.resolve(config[key]["name"])
        defaults = {k: d for k, d in entry.params.items() if d is not inspect.Parameter.empty}
        config[key]["params"] = {**defaults, **config[key]["params"]}
    return json.loads(_canonical(config))


def resolved_hash(cell: Cell) -> str:
    """Hash of :func:`resolved_config`: a stored cell is reused only when it matches."""
    return _hash(resolved_config(cell))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(config).encode()).hexdigest()[:16]


def _leaves(value: Any, path: tuple[str, ...] = ()) -> dict[str, str]:
    """``{"optimizer.params.beta": JSON text}``: the leaves of nested dicts by dotted path."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _leaves(item, (*path, key)).items()}
    return {".".join(path): _canonical(value)}
