"""Suite files: schema, validation with one-line errors, expansion into cells.

A suite is YAML read with a safe loader into frozen dataclasses (:class:`Suite`,
:class:`ProbeSpec`, :class:`Cell`, :class:`ComponentSpec`). Each checks its own values in
``__post_init__``, however it is built, and raises a :class:`~orthobench.exceptions.ConfigError`
that names the field (an :class:`~orthobench.exceptions.UnknownNameError` for an unknown name).
:func:`load_suite` turns any problem (a file that is not UTF-8 or too large, malformed YAML,
duplicate keys, nesting or aliases beyond the bounds, missing field, unknown key, wrong type,
unknown name, a parameter value outside its type) into a :class:`SuiteError` whose one-line
message names the file, the YAML path of the field and what is allowed. Nothing below the CLI
reads YAML: the rest of the package sees the dataclasses, which pickle, so cells can be shipped
to worker processes or other machines.

Every size is bounded, so a mistyped number is an error at load time rather than a
``MemoryError`` or a failure after the compute: the file (:data:`MAX_FILE_BYTES`), its nesting
(:data:`MAX_DEPTH`) and its nodes with aliases expanded (:data:`MAX_NODES`), the cells of a suite
(:data:`MAX_CELLS`), the evaluations of a cell (:data:`MAX_EVALUATIONS`), seeds (int64, as
stored), names and labels (:data:`MAX_LABEL` characters: they become file names) and time limits
(:data:`MAX_TIMEOUT_S`).

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
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from orthobench.config import names
from orthobench.config.params import MAX_COUNT
from orthobench.exceptions import ConfigError, SuiteError, UnknownNameError, show_value
from orthobench.registry import OPTIMIZERS, TASKS, Entry, Registry

DTYPES = ("float64", "float32")

#: Longest suite name or label: a cell's file name holds a task and an optimizer label.
MAX_LABEL = 64
#: Largest seed: seeds are stored as int64.
MAX_SEED = 2**63 - 1
#: Most cells (tasks x optimizers x seeds) in one suite.
MAX_CELLS = 100_000
#: Most evaluations in the initial design or the BO budget of one cell.
MAX_EVALUATIONS = 100_000
#: Largest suite file, in bytes.
MAX_FILE_BYTES = 2**20
#: Deepest nesting of YAML collections (a suite needs about 6 levels).
MAX_DEPTH = 32
#: Most YAML nodes of a suite file, counted with its aliases expanded.
MAX_NODES = 100_000
#: Longest time limit, in seconds (about 116 days; ``setitimer`` overflows near 1e10).
MAX_TIMEOUT_S = 1e7

# A safe file-name component: starts with a letter or digit (so never '.', '..' or '-x').
_LABEL_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_LABEL - 1}}}", re.ASCII)
# A number in exponent notation that YAML 1.1 (PyYAML) reads as a string: 1e4, -2E-3.
_FLOAT_TEXT_RE = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+", re.ASCII)
#: Joins the labels of a cell id and a probe state id (``task__optimizer__seed0``). A label never
#: holds it and never starts with ``_``, so an id splits back into its labels in one way only: no
#: two cells share an id (and a file).
ID_SEPARATOR = "__"
_LABEL_CHARS = (
    f"1 to {MAX_LABEL} letters, digits, '.', '_' or '-', starting with a letter or a digit, "
    f"without {ID_SEPARATOR!r} (it joins the labels of a cell id)"
)

_TOP_LEVEL = {
    "name": f"suite name ({_LABEL_CHARS})",
    "description": "free text",
    "seeds": "a positive int (seeds 0..n-1) or a list of distinct ints",
    "n_init": "size of the shared Sobol initial design (int >= 1)",
    "budget": "BO iterations after the initial design (int >= 0)",
    "device": "auto, cpu, cuda or cuda:N",
    "dtype": "float64 or float32",
    "tasks": "list of task names or {name, params, label}",
    "optimizers": "list of optimizer names or {name, params, label}",
    "probe": "probe settings (mapping)",
    "timeout_s": "seconds a cell may run before it is stopped and stored as failed (number > 0)",
    "evaluation_timeout_s": "seconds an evaluation may run before it is recorded as timed out "
    "(number > 0)",
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
    "laplace": "floored (default) or unfloored: the Hessian of the Laplace q(theta)",
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


def _check_int(value: Any, field: str, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer >= {minimum}, but got {show_value(value)}.")
    if value < minimum:
        raise ConfigError(field, f"must be >= {minimum}, but got {value}.")
    if value > maximum:
        raise ConfigError(field, f"must be <= {maximum}, but got {show_value(value)}.")


def _check_tuple(value: Any, field: str, what: str) -> None:
    if not isinstance(value, tuple):
        raise ConfigError(field, f"must be a tuple of {what}, but got {show_value(value)}.")
    if not value:
        raise ConfigError(field, f"must not be empty; give at least one of the {what}.")


def _check_ints(value: Any, field: str, minimum: int, maximum: int) -> None:
    _check_tuple(value, field, f"integers >= {minimum}")
    for i, v in enumerate(value):
        _check_int(v, f"{field}[{i}]", minimum, maximum)


def _check_seeds(value: Any, field: str) -> None:
    _check_tuple(value, field, "integers >= 0")
    if len(value) > MAX_CELLS:
        raise ConfigError(field, f"must hold at most {MAX_CELLS} seeds, but got {len(value)}.")
    _check_ints(value, field, 0, MAX_SEED)
    if len(set(value)) != len(value):
        repeated = next(v for i, v in enumerate(value) if v in value[:i])
        raise ConfigError(field, f"seeds must be distinct, but {repeated} is given twice.")


def _check_seconds(value: Any, field: str) -> None:
    """None (no limit) or a number of seconds in ``(0, MAX_TIMEOUT_S]``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        hint = ""
        if isinstance(value, str) and _FLOAT_TEXT_RE.fullmatch(value.strip()):
            hint = " (YAML reads an exponent without a '.' and a sign as text: write 1.0e+4)"
        raise ConfigError(
            field, f"must be a number of seconds > 0, but got {show_value(value)}{hint}."
        )
    if not 0 < value <= MAX_TIMEOUT_S:
        raise ConfigError(
            field, f"must be > 0 and <= {MAX_TIMEOUT_S:g} seconds, but got {show_value(value)}."
        )


def _check_label(value: Any, field: str) -> None:
    """A name or label: a safe file-name component (:data:`_LABEL_RE`, the whole string)."""
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value) or ID_SEPARATOR in value:
        raise ConfigError(field, f"must be {_LABEL_CHARS}, but got {show_value(value)}.")


def _within(prefix: str, err: ConfigError) -> ConfigError:
    """``err`` (same type and attributes) with its field under ``prefix``."""
    moved = copy.copy(err)
    moved.field = f"{prefix}.{err.field}" if prefix else err.field
    moved.args = (f"{moved.field}: {err.reason}",)
    return moved


def _check_components(specs: Any, field: str, registry: Registry) -> list[Entry]:
    """A non-empty tuple of distinct-label :class:`ComponentSpec` whose names and params
    ``registry`` accepts (which imports each factory's module); returns their entries.

    Labels must differ ignoring case as well: they name result files, and ``A`` and ``a`` are one
    file on a case-insensitive file system (macOS, Windows)."""
    _check_tuple(specs, field, f"{registry.kind} specs (ComponentSpec)")
    entries = []
    for i, spec in enumerate(specs):
        entries.append(_check_component(spec, f"{field}[{i}]", registry))
        twin = next((s.label for s in specs[:i] if s.label.casefold() == spec.label.casefold()), None)
        if twin is not None:
            same = "is used twice" if twin == spec.label else f"differs from {twin!r} only in case"
            raise ConfigError(
                f"{field}[{i}].label",
                f"label {spec.label!r} {same}; give each entry a distinct `label`.",
            )
    return entries


def _check_observations(
    n_init: int, specs: tuple[ComponentSpec, ...], entries: list[Entry]
) -> None:
    """``n_init`` covers the ``min_observations`` of every optimizer (field ``n_init``)."""
    for spec, entry in zip(specs, entries, strict=True):
        if n_init < entry.min_observations:
            raise ConfigError(
                "n_init",
                f"must be >= {entry.min_observations}: optimizer {spec.label!r} needs "
                f"{entry.min_observations} observations before its first step, but got {n_init}.",
            )


def _check_component(spec: Any, field: str, registry: Registry) -> Entry:
    """Check one :class:`ComponentSpec` against ``registry``; returns the registry entry."""
    if not isinstance(spec, ComponentSpec):
        raise ConfigError(field, f"must be a ComponentSpec, but got {show_value(spec)}.")
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
            raise ConfigError(
                "name", f"must be a non-empty string, but got {show_value(self.name)}."
            )
        if not isinstance(self.params, Mapping) or not all(isinstance(k, str) for k in self.params):
            raise ConfigError(
                "params", f"must be a mapping with string keys, but got {show_value(self.params)}."
            )
        _check_label(self.label, "label")

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
        laplace: ``floored`` (default): the Laplace ``q(theta)`` of every optimizer, eigenvalues
            floored; ``unfloored``: the raw Hessian where it is positive definite, the floor
            only where it is not (for comparisons with the paper;
            :data:`orthobench.config.names.LAPLACE_MODES`).

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
    laplace: str = "floored"

    def __post_init__(self) -> None:
        _check_components(self.tasks, "tasks", TASKS)
        _check_tuple(self.kernels, "kernels", "GP kernel names")
        for i, kernel in enumerate(self.kernels):
            names.check_kernel(kernel, field=f"kernels[{i}]")
        _check_int(self.n_init, "n_init", 2, MAX_EVALUATIONS)
        for key in ("rebuilds", "n_probes", "top_k", "reference_samples"):
            _check_int(getattr(self, key), key, 2, MAX_COUNT)
        _check_ints(self.state_iterations, "state_iterations", 0, MAX_EVALUATIONS)
        _check_ints(self.mc_samples, "mc_samples", 2, MAX_COUNT)
        _check_tuple(self.estimators, "estimators", "estimator names")
        for i, name in enumerate(self.estimators):
            if not isinstance(name, str):
                raise ConfigError(
                    f"estimators[{i}]", f"must be a string, but got {show_value(name)}."
                )
            names.parse_estimator(name, field=f"estimators[{i}]")
        _check_seeds(self.seeds, "seeds")
        if self.laplace not in names.LAPLACE_MODES:
            raise UnknownNameError("laplace mode", self.laplace, names.LAPLACE_MODES, "laplace")
        self._check_state_optimizer()

    def _check_state_optimizer(self) -> None:
        spec = self.state_optimizer
        if not isinstance(spec, ComponentSpec):
            raise ConfigError(
                "state_optimizer", f"must be a ComponentSpec, but got {show_value(spec)}."
            )
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
        _check_observations(self.n_init, (spec,), [entry])


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
        _check_label(self.suite, "suite")
        for key in ("task", "optimizer"):
            if not isinstance(getattr(self, key), ComponentSpec):
                raise ConfigError(
                    key, f"must be a ComponentSpec, but got {show_value(getattr(self, key))}."
                )
        _check_int(self.seed, "seed", 0, MAX_SEED)
        _check_int(self.n_init, "n_init", 1, MAX_EVALUATIONS)
        _check_int(self.budget, "budget", 0, MAX_EVALUATIONS)
        _check_dtype(self.dtype)

    @property
    def id(self) -> str:
        """File-name-safe identifier, unique within a suite."""
        return ID_SEPARATOR.join((self.task.label, self.optimizer.label, f"seed{self.seed}"))

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
        raise ConfigError("dtype", f"must be {' or '.join(DTYPES)}, but got {show_value(dtype)}.")


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A validated suite.

    ``timeout_s`` and ``evaluation_timeout_s`` are execution settings, like the executor: they
    stay out of the :class:`Cell` (and so out of its configuration hash), and a limit changed
    between runs does not make stored cells stale.

    Attributes:
        timeout_s: Seconds of wall-clock time a cell attempt may run (its whole run, evaluations
            replayed from its journal included) before it is stopped and stored as failed; None:
            no limit. ``orthobench run --cell-timeout`` overrides it.
        evaluation_timeout_s: Seconds one evaluation may run before it is stopped and recorded
            with ``status="timeout"`` (y NaN, not told to the optimizer), the cell going on; meant
            for training tasks. None: no limit.

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
    timeout_s: float | None = None
    evaluation_timeout_s: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        _check_label(self.name, "name")
        if not isinstance(self.description, str):
            raise ConfigError(
                "description", f"must be a string, but got {show_value(self.description)}."
            )
        _check_seeds(self.seeds, "seeds")
        _check_int(self.n_init, "n_init", 1, MAX_EVALUATIONS)
        _check_int(self.budget, "budget", 0, MAX_EVALUATIONS)
        names.check_device(self.device)
        _check_dtype(self.dtype)
        _check_components(self.tasks, "tasks", TASKS)
        entries = _check_components(self.optimizers, "optimizers", OPTIMIZERS)
        _check_observations(self.n_init, self.optimizers, entries)
        n_cells = len(self.tasks) * len(self.optimizers) * len(self.seeds)
        if n_cells > MAX_CELLS:
            raise ConfigError(
                "seeds",
                f"{len(self.tasks)} tasks x {len(self.optimizers)} optimizers x "
                f"{len(self.seeds)} seeds make {n_cells} cells; a suite holds at most {MAX_CELLS}.",
            )
        if self.probe is not None and not isinstance(self.probe, ProbeSpec):
            raise ConfigError(
                "probe", f"must be a ProbeSpec or None, but got {show_value(self.probe)}."
            )
        _check_seconds(self.timeout_s, "timeout_s")
        _check_seconds(self.evaluation_timeout_s, "evaluation_timeout_s")

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
            raise self.fail(
                path or "(top level)", f"must be a mapping, but got {show_value(value)}."
            )
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
            raise self.fail(
                path, f"must be a non-empty list of {what}, but got {show_value(value)}."
            )
        return tuple(value)

    def seeds(self, value: Any, path: str) -> tuple[Any, ...]:
        if isinstance(value, list):
            return tuple(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CELLS:
            raise self.fail(
                path,
                f"must be an integer in 1..{MAX_CELLS} (seeds 0..n-1) or a list of integers, "
                f"but got {show_value(value)}.",
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
        params = value.get("params")  # `params:` with nothing after it is no params
        return self.build(
            ComponentSpec,
            path,
            name=name,
            params={} if params is None else params,
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
        for key in ("n_init", "rebuilds", "n_probes", "top_k", "reference_samples", "laplace"):
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
    for key in (
        "name",
        "budget",
        "description",
        "n_init",
        "device",
        "dtype",
        "timeout_s",
        "evaluation_timeout_s",
    ):
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
        with path.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise SuiteError(file, "(file)", f"cannot read: {err.strerror or err}.") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SuiteError(file, "(file)", f"larger than {MAX_FILE_BYTES} bytes; not a suite file.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise SuiteError(
            file, f"line {line}", f"not UTF-8 text (byte 0x{raw[err.start]:02x}); save it as UTF-8."
        ) from None
    loader = _SuiteLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(file)"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SuiteError(file, where, f"malformed YAML ({problem}).") from None
    finally:
        loader.dispose()
    return parse_suite(data, file)


class _SuiteLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses, each as a ``MarkedYAMLError`` with its line: duplicate
    keys, collections nested deeper than :data:`MAX_DEPTH`, a document of more than
    :data:`MAX_NODES` nodes with its aliases expanded (an alias bomb names a few nodes that
    expand to billions) or an alias inside its own anchor, and values that do not construct
    (``2001-02-30``)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expanded_size(node)
        return super().construct_document(node)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as err:
            raise ConstructorError(None, None, f"invalid value: {err}", node.start_mark) from None

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # unhashable: the base class refuses it
                continue
            if repeated:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph of more than :data:`MAX_NODES` nodes counted with aliases expanded
    (each alias counts its anchor's whole subtree), or with an alias inside its own anchor.

    Iterative and memoized by node, so it takes time linear in the file whatever the aliases
    expand to.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        children = _children(node)
        if closing:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(node)] > MAX_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"more than {MAX_NODES} nodes with its aliases expanded",
                    node.start_mark,
                )
        elif id(node) not in sizes:
            if id(node) in open_nodes:
                raise ComposerError(None, None, "an alias inside its own anchor", node.start_mark)
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
