"""The modules beside a suite file: a suite's ``module:attr`` names must import the suite's own.

A suite's folder is searched last for the modules it names (:func:`orthobench.suite.load_suite`),
so a module beside it loses to a module of that name imported already (another suite's, in a
process that loads several) or found first on ``sys.path`` (an installed one).
:func:`check_modules_beside` refuses such a suite in one line naming both files. Torch-free, like
the rest of :mod:`orthobench.config`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from orthobench.config.names import PLUGIN_SEPARATOR
from orthobench.exceptions import SuiteError


def check_modules_beside(data: Any, folder: Path, file: str) -> None:
    """Refuse a ``module:attr`` name of ``data``, the parsed YAML of the suite ``file`` in
    ``folder``, whose module lies beside the suite but is imported (or, for a top-level module not
    imported yet, would be) from elsewhere: a second suite of one process whose ``plug.py`` (or
    namespace package ``pkg/plug.py``) has the name of the first's ran the first's code, and an
    installed module of that name shadows it.

    Raises:
        SuiteError: naming the field, the module's file and the one beside the suite.
    """
    for field, module in _named_modules(data):
        found = _beside(folder, module)
        if found is None:
            continue
        name, beside = found
        loaded = _imported(name)
        if loaded is not None and Path(loaded).resolve() != beside.resolve():
            raise SuiteError(
                file,
                field,
                f"module {name!r} is imported from {loaded}, not from {beside} beside the "
                "suite (another suite's module of that name, or an installed one): rename one "
                "of them.",
            )


def _named_modules(data: Any) -> list[tuple[str, str]]:
    """``(field, module)`` of each ``module:attr`` name of a suite's parsed YAML, read before the
    suite is validated: values of another shape are skipped (validation refuses them)."""
    suite = data if isinstance(data, dict) else {}
    probe = suite.get("probe") if isinstance(suite.get("probe"), dict) else {}
    components = [
        (f"{field}[{i}]", item)
        for field, section in (("tasks", suite), ("optimizers", suite), ("probe.tasks", probe))
        for i, item in enumerate(_items(section, field.rpartition(".")[2]))
    ]
    components.append(("probe.state_optimizer", probe.get("state_optimizer")))
    named = [
        (f"{field}.name", item.get("name") if isinstance(item, dict) else item)
        for field, item in components
    ]
    named += [
        (f"probe.estimators[{i}]", name) for i, name in enumerate(_items(probe, "estimators"))
    ]
    modules = [
        (field, name.partition(PLUGIN_SEPARATOR)[0])
        for field, name in named
        if isinstance(name, str) and PLUGIN_SEPARATOR in name
    ]
    return [(f, m) for f, m in modules if all(part.isidentifier() for part in m.split("."))]


def _items(section: dict[Any, Any], key: str) -> list[Any]:
    """The list at ``key`` of ``section``; ``[]`` for anything else."""
    value = section.get(key)
    return value if isinstance(value, list) else []


def _beside(folder: Path, module: str) -> tuple[str, Path] | None:
    """``(name, file)`` of what Python imports from ``folder`` for ``module``: a package before a
    module of its first name, and below folders without ``__init__.py`` (namespace packages, which
    have no file) the first package or module; None where ``folder`` holds neither."""
    parts = module.split(".")
    path = folder
    for i, part in enumerate(parts):
        for candidate in (path / part / "__init__.py", path / f"{part}.py"):
            if candidate.is_file():
                return ".".join(parts[: i + 1]), candidate
        path = path / part
        if not path.is_dir():
            return None
    return None


def _imported(name: str) -> str | None:
    """Where module ``name`` comes from in this process: the file of the module imported already
    (a namespace package's first folder), else, for a top-level name, the file an import would
    run, found without importing anything; None where that is not known yet (finding a submodule
    imports its packages, which the registry does after its own checks)."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None) or next(
            iter(getattr(module, "__path__", ())), None
        )
    if "." in name:
        return None
    spec = importlib.util.find_spec(name)
    return spec.origin if spec is not None and spec.has_location else None
