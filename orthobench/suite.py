"""Suite files: schema, validation with one-line errors, expansion into cells.

A suite is YAML read with ``yaml.safe_load``. Every problem (malformed YAML, missing field, unknown
key, wrong type, unknown task or optimizer, bad parameter) raises :class:`SuiteError` whose message
names the file, the field and what is allowed. Nothing below the CLI reads YAML: the rest of the
package sees the frozen :class:`Suite` and its :class:`Cell` s, which pickle, so cells can be
shipped to worker processes or other machines.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orthobench.exceptions import RegistryError, SuiteError
from orthobench.registry import OPTIMIZERS, TASKS, Registry

DTYPES = ("float64", "float32")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9._-]+$")

_TOP_LEVEL = {
    "name": "suite name (letters, digits, '.', '_', '-')",
    "description": "free text",
    "seeds": "a positive int (seeds 0..n-1) or a list of distinct ints",
    "n_init": "size of the shared Sobol initial design (int >= 1)",
    "budget": "BO iterations after the initial design (int >= 0)",
    "device": "auto, cpu, cuda or cuda:N",
    "dtype": "float64 or float32",
    "tasks": "list of task names or {name, params, label}",
    "optimizers": "list of optimizer names or {name, params, label}",
    "probe": "probe settings (mapping)",
}
_REQUIRED = ("name", "budget", "tasks", "optimizers")
_PROBE_KEYS = {
    "tasks": "list of task names or {name, params, label}",
    "kernels": "list of GP kernel names",
    "n_init": "int >= 2",
    "state_iterations": "list of BO iterations (int >= 0) at which the state is probed",
    "mc_samples": "list of ints >= 2",
    "rebuilds": "int >= 2",
    "n_probes": "int >= 2",
    "estimators": "list of estimator names",
    "top_k": "int >= 2",
    "reference_samples": "int >= 2",
    "seeds": "a positive int or a list of ints",
}


@dataclass(frozen=True, kw_only=True)
class ComponentSpec:
    """A task or optimizer as named in a suite: registry name, parameters, unique label."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "params": dict(self.params)}


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    """The probe section of a suite (see :mod:`orthobench.probe`)."""

    tasks: tuple[ComponentSpec, ...]
    kernels: tuple[str, ...] = ("matern52-ard",)
    n_init: int = 32
    state_iterations: tuple[int, ...] = (0,)
    mc_samples: tuple[int, ...] = (8, 32)
    rebuilds: int = 16
    n_probes: int = 64
    estimators: tuple[str, ...] = ("mc", "orth")
    top_k: int = 10
    reference_samples: int = 4096
    seeds: tuple[int, ...] = (0,)


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One (task, optimizer, seed) run: the unit of execution, storage and resume."""

    suite: str
    task: ComponentSpec
    optimizer: ComponentSpec
    seed: int
    n_init: int
    budget: int
    dtype: str = "float64"

    @property
    def id(self) -> str:
        """File-name-safe identifier, unique within a suite."""
        return f"{self.task.label}__{self.optimizer.label}__seed{self.seed}"

    def config(self) -> dict[str, Any]:
        """The resolved configuration (JSON-serializable) stored with the results."""
        cfg = asdict(self)
        cfg["task"] = self.task.config()
        cfg["optimizer"] = self.optimizer.config()
        return cfg

    @property
    def config_hash(self) -> str:
        """Hash of :meth:`config`: stored results are reused only when it matches."""
        blob = json.dumps(self.config(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A validated suite."""

    name: str
    description: str = ""
    seeds: tuple[int, ...] = (0,)
    n_init: int = 8
    budget: int
    device: str = "auto"
    dtype: str = "float64"
    tasks: tuple[ComponentSpec, ...]
    optimizers: tuple[ComponentSpec, ...]
    probe: ProbeSpec | None = None
    source: str = ""

    def cells(self) -> list[Cell]:
        """All cells, ordered task-major, then seed, then optimizer."""
        return [
            Cell(
                suite=self.name,
                task=t,
                optimizer=o,
                seed=s,
                n_init=self.n_init,
                budget=self.budget,
                dtype=self.dtype,
            )
            for t in self.tasks
            for s in self.seeds
            for o in self.optimizers
        ]


class _Validator:
    """Walks the parsed YAML, raising :class:`SuiteError` with the file and field path."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, message: str) -> SuiteError:
        return SuiteError(self.file, path, message)

    def mapping(self, value: Any, path: str, allowed: Mapping[str, str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path or "(top level)", f"must be a mapping, but got {_show(value)}.")
        for key in value:
            if key not in allowed:
                raise self.fail(
                    f"{path}.{key}" if path else str(key),
                    f"unknown key; allowed keys: {', '.join(allowed)}.",
                )
        return value

    def integer(self, value: Any, path: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer >= {minimum}, but got {_show(value)}.")
        if value < minimum:
            raise self.fail(path, f"must be >= {minimum}, but got {value}.")
        return value

    def string(
        self, value: Any, path: str, pattern: re.Pattern[str] | None = None, allowed: str = ""
    ) -> str:
        if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
            raise self.fail(path, f"must be {allowed or 'a string'}, but got {_show(value)}.")
        return value

    def int_list(self, value: Any, path: str, minimum: int) -> tuple[int, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(
                path, f"must be a non-empty list of integers >= {minimum}, but got {_show(value)}."
            )
        return tuple(self.integer(v, f"{path}[{i}]", minimum) for i, v in enumerate(value))

    def seeds(self, value: Any, path: str) -> tuple[int, ...]:
        if isinstance(value, list):
            seeds = self.int_list(value, path, 0)
            if len(set(seeds)) != len(seeds):
                raise self.fail(path, f"seeds must be distinct, but got {list(seeds)}.")
            return seeds
        return tuple(range(self.integer(value, path, 1)))

    def components(self, value: Any, path: str, registry: Registry) -> tuple[ComponentSpec, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(
                path,
                f"must be a non-empty list of {registry.kind} names or {{name, params, label}} mappings, but got {_show(value)}.",
            )
        specs = tuple(self.component(v, f"{path}[{i}]", registry) for i, v in enumerate(value))
        labels = [s.label for s in specs]
        for i, label in enumerate(labels):
            if label in labels[:i]:
                raise self.fail(
                    f"{path}[{i}].label",
                    f"label {label!r} is used twice; give each entry a distinct `label`.",
                )
        return specs

    def component(self, value: Any, path: str, registry: Registry) -> ComponentSpec:
        if isinstance(value, str):
            value = {"name": value}
        entry_keys = {
            "name": f"{registry.kind} name or module:attr path",
            "params": "mapping of parameters",
            "label": "unique label",
        }
        value = self.mapping(value, path, entry_keys)
        if "name" not in value:
            raise self.fail(f"{path}.name", "missing required field.")
        name = self.string(value["name"], f"{path}.name", allowed=f"a {registry.kind} name")
        params = value.get("params") or {}
        if not isinstance(params, dict):
            raise self.fail(f"{path}.params", f"must be a mapping, but got {_show(params)}.")
        try:
            registry.check_params(name, params)
        except RegistryError as err:
            raise self.fail(
                f"{path}.name"
                if "Unknown" in str(err) or "import" in str(err).lower()
                else f"{path}.params",
                str(err),
            ) from None
        default_label = name.rsplit(":", 1)[-1]
        label = self.string(
            value.get("label", default_label),
            f"{path}.label",
            _LABEL_RE,
            "letters, digits, '.', '_' or '-'",
        )
        return ComponentSpec(name=name, params=params, label=label)

    def probe(self, value: Any, path: str) -> ProbeSpec:
        value = self.mapping(value, path, _PROBE_KEYS)
        if "tasks" not in value:
            raise self.fail(f"{path}.tasks", "missing required field.")
        kwargs: dict[str, Any] = {"tasks": self.components(value["tasks"], f"{path}.tasks", TASKS)}
        if "kernels" in value:
            from orthobench.surrogates.gp import KERNELS

            kernels = value["kernels"] if isinstance(value["kernels"], list) else [value["kernels"]]
            kernel_re = re.compile(f"^({'|'.join(map(re.escape, KERNELS))})$")
            kwargs["kernels"] = tuple(
                self.string(k, f"{path}.kernels[{i}]", kernel_re, "one of " + ", ".join(KERNELS))
                for i, k in enumerate(kernels)
            )
        if "estimators" in value:
            if not isinstance(value["estimators"], list) or not value["estimators"]:
                raise self.fail(
                    f"{path}.estimators",
                    f"must be a non-empty list of estimator names, but got {_show(value['estimators'])}.",
                )
            from orthobench.probe.runner import (
                parse_estimator,
            )  # heavy import, only for probe suites

            names = tuple(
                self.string(e, f"{path}.estimators[{i}]") for i, e in enumerate(value["estimators"])
            )
            for i, name in enumerate(names):
                try:
                    parse_estimator(name)
                except ValueError as err:
                    raise self.fail(f"{path}.estimators[{i}]", str(err)) from None
            kwargs["estimators"] = names
        for key, minimum in (
            ("n_init", 2),
            ("rebuilds", 2),
            ("n_probes", 2),
            ("top_k", 2),
            ("reference_samples", 2),
        ):
            if key in value:
                kwargs[key] = self.integer(value[key], f"{path}.{key}", minimum)
        if "mc_samples" in value:
            kwargs["mc_samples"] = self.int_list(value["mc_samples"], f"{path}.mc_samples", 2)
        if "state_iterations" in value:
            kwargs["state_iterations"] = self.int_list(
                value["state_iterations"], f"{path}.state_iterations", 0
            )
        if "seeds" in value:
            kwargs["seeds"] = self.seeds(value["seeds"], f"{path}.seeds")
        return ProbeSpec(**kwargs)


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def parse_suite(data: Any, file: str = "<suite>") -> Suite:
    """Validate an already-parsed suite mapping; see :func:`load_suite`."""
    v = _Validator(file)
    data = v.mapping(data, "", _TOP_LEVEL)
    for key in _REQUIRED:
        if key not in data:
            raise v.fail(key, f"missing required field ({_TOP_LEVEL[key]}).")
    kwargs: dict[str, Any] = {
        "name": v.string(data["name"], "name", _LABEL_RE, "letters, digits, '.', '_' or '-'"),
        "budget": v.integer(data["budget"], "budget", 0),
        "tasks": v.components(data["tasks"], "tasks", TASKS),
        "optimizers": v.components(data["optimizers"], "optimizers", OPTIMIZERS),
        "source": file,
    }
    if "description" in data:
        kwargs["description"] = v.string(data["description"], "description")
    if "seeds" in data:
        kwargs["seeds"] = v.seeds(data["seeds"], "seeds")
    if "n_init" in data:
        kwargs["n_init"] = v.integer(data["n_init"], "n_init", 1)
    if "device" in data:
        kwargs["device"] = v.string(
            data["device"], "device", _DEVICE_RE, "auto, cpu, cuda or cuda:N"
        )
    if "dtype" in data:
        kwargs["dtype"] = v.string(
            data["dtype"], "dtype", re.compile(f"^({'|'.join(DTYPES)})$"), " or ".join(DTYPES)
        )
    if data.get("probe") is not None:
        kwargs["probe"] = v.probe(data["probe"], "probe")
    return Suite(**kwargs)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file.

    Raises:
        SuiteError: on any problem, with a one-line message naming the file and the field.
    """
    path = Path(path)
    file = str(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise SuiteError(file, "(file)", f"cannot read: {err.strerror or err}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(file)"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SuiteError(file, where, f"malformed YAML ({problem}).") from None
    return parse_suite(data, file)
