"""Suite files: schema, validation with one-line errors, expansion into cells.

A suite is YAML read with ``yaml.safe_load`` into frozen dataclasses (:class:`Suite`,
:class:`ProbeSpec`, :class:`Cell`, :class:`ComponentSpec`). Each checks its own values in
``__post_init__``, however it is built, and raises a :class:`~orthobench.exceptions.ConfigError`
that names the field (an :class:`~orthobench.exceptions.UnknownNameError` for an unknown name).
:func:`load_suite` turns any problem (malformed YAML, missing field, unknown key, wrong type,
unknown name, bad parameter) into a :class:`SuiteError` whose one-line message names the file, the
YAML path of the field and what is allowed. Nothing below the CLI reads YAML: the rest of the
package sees the dataclasses, which pickle, so cells can be shipped to worker processes or other
machines.

This module imports neither torch nor the probe; the names it checks come from
:mod:`orthobench.config.names` (docs/design.md, "Layers and data flow"). Checking a task or an
optimizer against its registry imports the module of its factory.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from orthobench.config import names
from orthobench.exceptions import ConfigError, SuiteError
from orthobench.registry import OPTIMIZERS, TASKS, Entry, Registry

DTYPES = ("float64", "float32")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_LABEL_CHARS = "letters, digits, '.', '_' or '-'"

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
    "state_optimizer": "optimizer name or {name, params, label} that builds the probed states",
    "mc_samples": "list of ints >= 2",
    "rebuilds": "int >= 2",
    "n_probes": "int >= 2",
    "estimators": "list of estimator names",
    "top_k": "int >= 2",
    "reference_samples": "int >= 2",
    "seeds": "a positive int or a list of ints",
}
_COMPONENT_KEYS = {
    "name": "registry name or module:attr path",
    "params": "mapping of parameters",
    "label": "unique label",
}
# Mapping keys of the YAML that hold lists, and what their entries are.
_PROBE_LISTS = {
    "kernels": "GP kernel names",
    "estimators": "estimator names",
    "mc_samples": "integers >= 2",
    "state_iterations": "integers >= 0",
}


# ----------------------------------------------------------------------------------------------
# Checks shared by the dataclasses. Each raises ConfigError with the field relative to the object
# being checked; load_suite prefixes the object's YAML path.


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _check_int(value: Any, field: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer >= {minimum}, but got {_show(value)}.")
    if value < minimum:
        raise ConfigError(field, f"must be >= {minimum}, but got {value}.")


def _check_tuple(value: Any, field: str, what: str) -> None:
    if not isinstance(value, tuple):
        raise ConfigError(field, f"must be a tuple of {what}, but got {_show(value)}.")
    if not value:
        raise ConfigError(field, f"must not be empty; give at least one of the {what}.")


def _check_ints(value: Any, field: str, minimum: int) -> None:
    _check_tuple(value, field, f"integers >= {minimum}")
    for i, v in enumerate(value):
        _check_int(v, f"{field}[{i}]", minimum)


def _check_seeds(value: Any, field: str) -> None:
    _check_ints(value, field, 0)
    if len(set(value)) != len(value):
        raise ConfigError(field, f"seeds must be distinct, but got {list(value)}.")


def _check_string(value: Any, field: str, pattern: re.Pattern[str], allowed: str) -> None:
    if not isinstance(value, str) or not pattern.match(value):
        raise ConfigError(field, f"must be {allowed}, but got {_show(value)}.")


def _within(prefix: str, err: ConfigError) -> ConfigError:
    """``err`` (same type and attributes) with its field under ``prefix``."""
    moved = copy.copy(err)
    moved.field = f"{prefix}.{err.field}" if prefix else err.field
    moved.args = (f"{moved.field}: {err.reason}",)
    return moved


def _check_components(specs: Any, field: str, registry: Registry) -> None:
    """A non-empty tuple of distinct-label :class:`ComponentSpec` whose names and params
    ``registry`` accepts (which imports each factory's module)."""
    _check_tuple(specs, field, f"{registry.kind} specs (ComponentSpec)")
    for i, spec in enumerate(specs):
        _check_component(spec, f"{field}[{i}]", registry)
        if spec.label in [s.label for s in specs[:i]]:
            raise ConfigError(
                f"{field}[{i}].label",
                f"label {spec.label!r} is used twice; give each entry a distinct `label`.",
            )


def _check_component(spec: Any, field: str, registry: Registry) -> Entry:
    """Check one :class:`ComponentSpec` against ``registry``; returns the registry entry."""
    if not isinstance(spec, ComponentSpec):
        raise ConfigError(field, f"must be a ComponentSpec, but got {_show(spec)}.")
    try:
        return registry.check_params(spec.name, spec.params)
    except ConfigError as err:
        raise _within(field, err) from None


# ----------------------------------------------------------------------------------------------
# The frozen configuration


@dataclass(frozen=True, kw_only=True)
class ComponentSpec:
    """A task or optimizer as named in a suite: registry name, parameters, unique label.

    Its own fields are checked here; whether the registry knows the name and takes the parameters
    is checked by the object that holds it (:class:`Suite`, :class:`ProbeSpec`), which knows the
    registry.

    Raises:
        ConfigError: naming the field (``name``, ``params``, ``label``) and the bad value.
    """

    name: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    label: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("name", f"must be a non-empty string, but got {_show(self.name)}.")
        if not isinstance(self.params, Mapping) or not all(isinstance(k, str) for k in self.params):
            raise ConfigError(
                "params", f"must be a mapping with string keys, but got {_show(self.params)}."
            )
        _check_string(self.label, "label", _LABEL_RE, _LABEL_CHARS)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "params": dict(self.params)}


#: The optimizer that builds the probed BO states unless a probe section names another; the probe
#: passes each probe kernel as its ``kernel`` parameter.
DEFAULT_STATE_OPTIMIZER = ComponentSpec(
    name="mc-ei", params={"theta_samples": 32}, label="probe-state"
)


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    """The probe section of a suite (see :mod:`orthobench.probe`).

    Attributes:
        tasks: The probed tasks.
        kernels: GP kernels of the probed surrogates (:data:`orthobench.config.names.KERNELS`).
        n_init: Size of the shared Sobol initial design of every state.
        state_iterations: BO iterations (of ``state_optimizer``) after which a state is probed.
        state_optimizer: The optimizer that builds the states; it must take a ``kernel``
            parameter, which the probe sets to each of ``kernels``.
        mc_samples: Budgets ``S`` of acquisition evaluations per estimate.
        rebuilds: Independent estimates per budget, state and estimator.
        n_probes: Probe points per state.
        estimators: Estimator names (:func:`orthobench.config.names.parse_estimator`).
        top_k: Size of the top set in the ranking metrics.
        reference_samples: Draws behind each high-precision reference value.
        seeds: Seeds of the states.

    Raises:
        ConfigError: naming the field and the bad value (an
            :class:`~orthobench.exceptions.UnknownNameError` for an unknown name). Checking the
            tasks imports their modules; a ``state_optimizer`` other than
            :data:`DEFAULT_STATE_OPTIMIZER` is checked against the optimizer registry too (the
            default is checked by the tests, so a probe section that keeps it needs no BoTorch
            to validate).
    """

    tasks: tuple[ComponentSpec, ...]
    kernels: tuple[str, ...] = ("matern52-ard",)
    n_init: int = 32
    state_iterations: tuple[int, ...] = (0,)
    state_optimizer: ComponentSpec = DEFAULT_STATE_OPTIMIZER
    mc_samples: tuple[int, ...] = (8, 32)
    rebuilds: int = 16
    n_probes: int = 64
    estimators: tuple[str, ...] = ("mc", "orth")
    top_k: int = 10
    reference_samples: int = 4096
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        _check_components(self.tasks, "tasks", TASKS)
        _check_tuple(self.kernels, "kernels", "GP kernel names")
        for i, kernel in enumerate(self.kernels):
            names.check_kernel(kernel, field=f"kernels[{i}]")
        for key in ("n_init", "rebuilds", "n_probes", "top_k", "reference_samples"):
            _check_int(getattr(self, key), key, 2)
        _check_ints(self.state_iterations, "state_iterations", 0)
        _check_ints(self.mc_samples, "mc_samples", 2)
        _check_tuple(self.estimators, "estimators", "estimator names")
        for i, name in enumerate(self.estimators):
            if not isinstance(name, str):
                raise ConfigError(f"estimators[{i}]", f"must be a string, but got {_show(name)}.")
            names.parse_estimator(name, field=f"estimators[{i}]")
        _check_seeds(self.seeds, "seeds")
        self._check_state_optimizer()

    def _check_state_optimizer(self) -> None:
        spec = self.state_optimizer
        if not isinstance(spec, ComponentSpec):
            raise ConfigError("state_optimizer", f"must be a ComponentSpec, but got {_show(spec)}.")
        if "kernel" in spec.params:
            raise ConfigError(
                "state_optimizer.params.kernel",
                f"is set by the probe to each of `kernels`; remove it (got {spec.params['kernel']!r}).",
            )
        if spec == DEFAULT_STATE_OPTIMIZER:
            return
        entry = _check_component(spec, "state_optimizer", OPTIMIZERS)
        if "kernel" not in entry.params and not entry.accepts_any:
            raise ConfigError(
                "state_optimizer.name",
                f"optimizer {spec.name!r} takes no `kernel` parameter, which the probe sets to "
                f"each of `kernels`; its parameters: {', '.join(entry.params) or 'none'}.",
            )


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One (task, optimizer, seed) run: the unit of execution, storage and resume.

    Its values are checked here; the registry names and parameters of ``task`` and ``optimizer``
    are checked by the :class:`Suite` (or :class:`ProbeSpec`) that made the cell, once.

    Raises:
        ConfigError: naming the field and the bad value.
    """

    suite: str
    task: ComponentSpec
    optimizer: ComponentSpec
    seed: int
    n_init: int
    budget: int
    dtype: str = "float64"

    def __post_init__(self) -> None:
        _check_string(self.suite, "suite", _LABEL_RE, _LABEL_CHARS)
        for key in ("task", "optimizer"):
            if not isinstance(getattr(self, key), ComponentSpec):
                raise ConfigError(
                    key, f"must be a ComponentSpec, but got {_show(getattr(self, key))}."
                )
        _check_int(self.seed, "seed", 0)
        _check_int(self.n_init, "n_init", 1)
        _check_int(self.budget, "budget", 0)
        _check_dtype(self.dtype)

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


def _check_dtype(dtype: Any) -> None:
    if dtype not in DTYPES:
        raise ConfigError("dtype", f"must be {' or '.join(DTYPES)}, but got {_show(dtype)}.")


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A validated suite.

    Raises:
        ConfigError: naming the field and the bad value. Checking ``tasks`` and ``optimizers``
            against the registries imports their modules.
    """

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

    def __post_init__(self) -> None:
        _check_string(self.name, "name", _LABEL_RE, _LABEL_CHARS)
        if not isinstance(self.description, str):
            raise ConfigError(
                "description", f"must be a string, but got {_show(self.description)}."
            )
        _check_seeds(self.seeds, "seeds")
        _check_int(self.n_init, "n_init", 1)
        _check_int(self.budget, "budget", 0)
        _check_string(self.device, "device", _DEVICE_RE, "auto, cpu, cuda or cuda:N")
        _check_dtype(self.dtype)
        _check_components(self.tasks, "tasks", TASKS)
        _check_components(self.optimizers, "optimizers", OPTIMIZERS)
        if self.probe is not None and not isinstance(self.probe, ProbeSpec):
            raise ConfigError("probe", f"must be a ProbeSpec or None, but got {_show(self.probe)}.")

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


# ----------------------------------------------------------------------------------------------
# YAML


class _Validator:
    """Turns parsed YAML into the dataclasses: mappings and their keys, YAML lists into tuples,
    shorthands (a bare name for a component, an int for seeds). The dataclasses check the values;
    every :class:`ConfigError` becomes a :class:`SuiteError` with the file and the YAML path."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, message: str) -> SuiteError:
        return SuiteError(self.file, path, message)

    def build(self, cls: type, path: str, **kwargs: Any) -> Any:
        """``cls(**kwargs)``, its :class:`ConfigError` turned into a :class:`SuiteError`."""
        try:
            return cls(**kwargs)
        except ConfigError as err:
            raise self.fail(_within(path, err).field, err.reason) from None

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

    def required(self, value: dict[str, Any], path: str, keys: Mapping[str, str]) -> None:
        for key in keys:
            if key not in value:
                where = f"{path}.{key}" if path else key
                raise self.fail(where, f"missing required field ({keys[key]}).")

    def tuple_(self, value: Any, path: str, what: str) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"must be a non-empty list of {what}, but got {_show(value)}.")
        return tuple(value)

    def seeds(self, value: Any, path: str) -> tuple[Any, ...]:
        if isinstance(value, list):
            return tuple(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(
                path, f"must be a positive integer or a list of integers, but got {_show(value)}."
            )
        return tuple(range(value))

    def components(self, value: Any, path: str, kind: str) -> tuple[ComponentSpec, ...]:
        items = self.tuple_(value, path, f"{kind} names or {{name, params, label}} mappings")
        return tuple(self.component(v, f"{path}[{i}]", kind) for i, v in enumerate(items))

    def component(self, value: Any, path: str, kind: str) -> ComponentSpec:
        if isinstance(value, str):
            value = {"name": value}
        value = self.mapping(value, path, _COMPONENT_KEYS)
        if "name" not in value:
            raise self.fail(f"{path}.name", f"missing required field ({kind} name).")
        name = value["name"]
        default_label = name.rsplit(":", 1)[-1] if isinstance(name, str) else name
        return self.build(
            ComponentSpec,
            path,
            name=name,
            params=value.get("params") or {},
            label=value.get("label", default_label),
        )

    def probe(self, value: Any, path: str) -> ProbeSpec:
        value = self.mapping(value, path, _PROBE_KEYS)
        self.required(value, path, {"tasks": _PROBE_KEYS["tasks"]})
        kwargs: dict[str, Any] = {"tasks": self.components(value["tasks"], f"{path}.tasks", "task")}
        if isinstance(value.get("kernels"), str):  # one kernel without brackets
            value = {**value, "kernels": [value["kernels"]]}
        for key, what in _PROBE_LISTS.items():
            if key in value:
                kwargs[key] = self.tuple_(value[key], f"{path}.{key}", what)
        for key in ("n_init", "rebuilds", "n_probes", "top_k", "reference_samples"):
            if key in value:
                kwargs[key] = value[key]
        if "state_optimizer" in value:
            kwargs["state_optimizer"] = self.component(
                value["state_optimizer"], f"{path}.state_optimizer", "optimizer"
            )
        if "seeds" in value:
            kwargs["seeds"] = self.seeds(value["seeds"], f"{path}.seeds")
        return self.build(ProbeSpec, path, **kwargs)


def parse_suite(data: Any, file: str = "<suite>") -> Suite:
    """Validate an already-parsed suite mapping; see :func:`load_suite`."""
    v = _Validator(file)
    data = v.mapping(data, "", _TOP_LEVEL)
    v.required(data, "", {key: _TOP_LEVEL[key] for key in _REQUIRED})
    kwargs: dict[str, Any] = {
        "tasks": v.components(data["tasks"], "tasks", "task"),
        "optimizers": v.components(data["optimizers"], "optimizers", "optimizer"),
        "source": file,
    }
    for key in ("name", "budget", "description", "n_init", "device", "dtype"):
        if key in data:
            kwargs[key] = data[key]
    if "seeds" in data:
        kwargs["seeds"] = v.seeds(data["seeds"], "seeds")
    if data.get("probe") is not None:
        kwargs["probe"] = v.probe(data["probe"], "probe")
    return v.build(Suite, "", **kwargs)


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
