"""Suite files: the schema of a suite, its one-line errors, its expansion into cells.

A suite is YAML read with a safe loader into frozen sections (:class:`Suite`, :class:`ProbeSpec`,
:class:`Cell`, :class:`ComponentSpec`; :func:`orthobench.config.schema.section`). Each field is
declared once, with its type, bounds, default and description; rules over several fields are the
sections' validators. A section checks itself however it is built and raises a
:class:`~orthobench.exceptions.ConfigError` that names the field (an
:class:`~orthobench.exceptions.UnknownNameError` for an unknown name). :func:`load_suite` turns any
problem (a file that is not UTF-8 or too large, malformed YAML, duplicate keys, nesting or aliases
beyond the bounds, missing field, unknown key, wrong type, unknown name, a parameter value outside
its type) into a :class:`SuiteError` whose one-line message names the file, the YAML path of the
field and what is allowed. Nothing below the CLI reads YAML: the rest of the package sees the
sections, which pickle, so cells can be shipped to worker processes or other machines.

Every size is bounded, so a mistyped number is an error at load time rather than a
``MemoryError`` or a failure after the compute: the file (:data:`MAX_FILE_BYTES`), its nesting
(:data:`~orthobench.config.strict_yaml.MAX_DEPTH`) and its nodes with aliases expanded
(:data:`~orthobench.config.strict_yaml.MAX_NODES`), the cells of a suite and the states of its
probe section (:data:`MAX_CELLS`), the evaluations of a cell (:data:`MAX_EVALUATIONS`), seeds
(int64, as stored), names and labels (:data:`MAX_LABEL` characters: they become file names) and
time limits (:data:`MAX_TIMEOUT_S`); the evaluations of a cell's BO steps, ``q * budget``, are
bounded as its budget is.

This module imports neither torch nor the probe; the names it checks come from
:mod:`orthobench.config.names` (docs/design.md, "Layers and data flow"). Checking a task or an
optimizer against its registry imports the module of its factory, and a probe's plugin estimator
(:func:`~orthobench.registry.load_probe_acquisition`) its module, with the torch-free base it subclasses.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

import yaml
from annotated_types import Gt, Interval, Le, MaxLen, MinLen
from pydantic import AfterValidator, AllowInfNan, BeforeValidator, Field, model_validator

from orthobench.config import names
from orthobench.config.beside import check_modules_beside
from orthobench.config.params import MAX_COUNT, Kernel, check_even_budgets
from orthobench.config.schema import Shorthand, Unit, from_yaml, section, within
from orthobench.config.strict_yaml import load_yaml, yaml_error_parts
from orthobench.exceptions import ConfigError, SuiteError, UnknownNameError, show_value
from orthobench.registry import (
    OPTIMIZERS,
    TASKS,
    Entry,
    Registry,
    carried_registrations,
    install_registrations,
    load_probe_acquisition,
)
from orthobench.work import CELL, canonical, hash_config

#: Longest suite name or label: a cell's file name holds a task and an optimizer label.
MAX_LABEL = 64
#: Largest seed: seeds are stored as int64.
MAX_SEED = 2**63 - 1
#: Most cells (tasks x optimizers x seeds x batch sizes) in one suite, and most states of its
#: probe section.
MAX_CELLS = 100_000
#: Most evaluations in the initial design or the BO budget of one cell.
MAX_EVALUATIONS = 100_000
#: Largest suite file, in bytes.
MAX_FILE_BYTES = 2**20
#: Longest time limit, in seconds (about 116 days; ``setitimer`` overflows near 1e10).
MAX_TIMEOUT_S = 1e7

#: A label's first character and its others (regular expressions): a safe file-name component
#: starts with a letter or digit (so never '.', '..' or '-x').
LABEL_FIRST, LABEL_REST = "[A-Za-z0-9]", "[A-Za-z0-9._-]"
_LABEL_RE = re.compile(rf"{LABEL_FIRST}{LABEL_REST}{{0,{MAX_LABEL - 1}}}", re.ASCII)
#: Joins the labels of a cell id and a probe state id (``task__optimizer__seed0``). A label never
#: holds it and never starts with ``_``, so an id splits back into its labels in one way only: no
#: two cells share an id (and a file).
ID_SEPARATOR = "__"
_LABEL_CHARS = (
    f"1 to {MAX_LABEL} ASCII letters, digits, '.', '_' or '-', starting with a letter or a digit, "
    f"without {ID_SEPARATOR!r} (it joins the labels of a cell id)"
)


# ----------------------------------------------------------------------------------------------
# Field types: each rule once, with the message that states it


def _check_label(value: Any) -> str:
    # Before pydantic's type check: the message states the whole rule, whatever the value's type.
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value) or ID_SEPARATOR in value:
        raise ConfigError("", f"must be {_LABEL_CHARS}, but got {show_value(value)}.")
    return value


def _check_distinct(values: tuple[Any, ...], what: str, field: str = "") -> tuple[Any, ...]:
    """``values`` if none is given twice: a repeated seed, batch size, kernel, state iteration,
    budget or estimator would be a unit or a row twice, computed twice into one file."""
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ConfigError(field, f"{what} must be distinct, but {value!r} is given twice.")
        seen.add(value)
    return values


def _seed_count(value: Any) -> Any:
    """YAML ``seeds: n``: the seeds ``0..n-1``."""
    if isinstance(value, list):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CELLS:
        raise ConfigError(
            "",
            f"must be an integer in 1..{MAX_CELLS} (seeds 0..n-1) or a list of integers, "
            f"but got {show_value(value)}.",
        )
    return list(range(value))


def _one_batch_size(value: Any) -> Any:
    """YAML ``q: 4``: one batch size without brackets."""
    if isinstance(value, list):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            "",
            f"must be an integer >= 1 (points per BO step) or a list of them, but got "
            f"{show_value(value)}.",
        )
    return [value]


def _one_kernel(value: Any) -> Any:
    """YAML ``kernels: rbf-iso``: one kernel without brackets."""
    return [value] if isinstance(value, str) else value


def _check_estimator(name: str) -> str:
    if names.parse_estimator(name, field="").plugin:
        load_probe_acquisition(name)
    return name


def _check_laplace(mode: str) -> str:
    if mode not in names.LAPLACE_MODES:
        raise UnknownNameError("laplace mode", mode, names.LAPLACE_MODES, "")
    return mode


#: A suite name or a label: a safe file-name component (:data:`_LABEL_RE`, the whole string).
Label = Annotated[str, BeforeValidator(_check_label)]
#: A device spec; checked before the type too, as a label is.
Device = Annotated[str, BeforeValidator(partial(names.check_device, field=""))]
#: A seed (stored as int64).
Seed = Annotated[int, Interval(ge=0, le=MAX_SEED)]
#: Distinct seeds; in YAML also a count ``n`` (seeds ``0..n-1``).
Seeds = Annotated[
    tuple[Seed, ...],
    MinLen(1),
    MaxLen(MAX_CELLS),
    AfterValidator(partial(_check_distinct, what="seeds")),
    Shorthand(_seed_count),
]
#: The size of a cell's initial design.
InitialDesign = Annotated[
    int,
    Interval(ge=1, le=MAX_EVALUATIONS),
    Field(description="size of the shared Sobol initial design"),
]
#: The BO iterations of a cell.
Budget = Annotated[
    int,
    Interval(ge=0, le=MAX_EVALUATIONS),
    Field(description="BO iterations after the initial design"),
]
#: The points a cell's optimizer proposes per BO step.
BatchSize = Annotated[
    int,
    Interval(ge=1, le=MAX_EVALUATIONS),
    Field(description="points proposed per BO step"),
]
#: Batch sizes to sweep (``q: 4`` is short for ``[4]``), distinct.
BatchSizes = Annotated[
    tuple[BatchSize, ...],
    MinLen(1),
    AfterValidator(partial(_check_distinct, what="batch sizes")),
    Shorthand(_one_batch_size),
]
#: The dtype of a cell's run.
Dtype = Annotated[Literal["float64", "float32"], Field(description="torch dtype of the run")]
DTYPES: tuple[str, ...] = get_args(get_args(Dtype)[0])
#: Seconds of a time limit.
Seconds = Annotated[float, Gt(0), Le(MAX_TIMEOUT_S), AllowInfNan(False), Unit("seconds")]
#: A count of the probe (estimates, points, draws).
ProbeCount = Annotated[int, Interval(ge=2, le=MAX_COUNT)]


@section
class ComponentSpec:
    """A task or optimizer as named in a suite: registry name, parameters, unique label.

    Its own fields are checked here; whether the registry knows the name and takes the parameters
    is checked by the section that holds it (:class:`Suite`, :class:`ProbeSpec`), which knows the
    registry.

    Raises:
        ConfigError: naming the field (``name``, ``params``, ``label``) and the bad value.
    """

    name: str = Field(min_length=1, description="a registry name or a module:attr import path")
    params: Mapping[str, Any] = Field(default_factory=dict, description="the factory's parameters")
    label: Label = Field(description=f"a label unique in its list ({_LABEL_CHARS})")

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "params": dict(self.params)}

    def __reduce__(self) -> tuple[Any, ...]:
        # A name registered at run time (Registry.register) exists in this process only: the
        # pickled spec carries its factory, so the worker process that builds it knows it too.
        return (_unpickle_component, (self.config(), carried_registrations(self.name)))


def _unpickle_component(config: dict[str, Any], factories: Mapping[str, Any]) -> ComponentSpec:
    install_registrations(config["name"], factories)
    return ComponentSpec(**config)


def _component_form(value: Any) -> Any:
    """The YAML forms of a component: a bare name; a mapping whose label defaults to the name (its
    ``attr`` part for ``module:attr``) and whose empty ``params:`` is no parameters."""
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or "name" not in value:
        return value
    name = value["name"]
    value = {"label": name.rsplit(":", 1)[-1] if isinstance(name, str) else name, **value}
    if "params" in value and value["params"] is None:
        value["params"] = {}
    return value


#: A component; in YAML also a bare name.
Component = Annotated[ComponentSpec, Shorthand(_component_form)]
_COMPONENTS = "names or {name, params, label} mappings"

#: The optimizer that builds the probed BO states unless a probe section names another; the probe
#: passes each probe kernel as its ``kernel`` parameter.
DEFAULT_STATE_OPTIMIZER = ComponentSpec(
    name="mc-ei", params={"theta_samples": 32}, label="probe-state"
)


# ----------------------------------------------------------------------------------------------
# Rules over several fields


def _registered(spec: ComponentSpec, field: str, registry: Registry) -> Entry:
    """The registry entry of ``spec`` if ``registry`` takes its name and parameters (which imports
    the factory's module)."""
    try:
        return registry.check_params(spec.name, spec.params)
    except ConfigError as err:
        raise within(field, err) from None


def _check_components(
    specs: tuple[ComponentSpec, ...], field: str, registry: Registry
) -> list[Entry]:
    """The entries of ``specs``, whose names and parameters ``registry`` takes and whose labels
    differ, ignoring case too: they name result files, and ``A`` and ``a`` are one file on a
    case-insensitive file system (macOS, Windows)."""
    entries = []
    for i, spec in enumerate(specs):
        entries.append(_registered(spec, f"{field}[{i}]", registry))
        twin = next(
            (s.label for s in specs[:i] if s.label.casefold() == spec.label.casefold()), None
        )
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


# ----------------------------------------------------------------------------------------------
# The sections


@section
class ProbeSpec:
    """The probe section of a suite (see :mod:`orthobench.probe`); each field's description says
    what it is. The state optimizer must take a ``kernel`` parameter, which the probe sets to each
    of ``kernels``; an estimator with ``@antithetic`` draws needs every ``mc_samples`` even.

    Raises:
        ConfigError: naming the field and the bad value (an
            :class:`~orthobench.exceptions.UnknownNameError` for an unknown name). Checking the
            tasks imports their modules; a ``state_optimizer`` other than
            :data:`DEFAULT_STATE_OPTIMIZER` is checked against the optimizer registry too (the
            default is checked by the tests, so a probe section that keeps it needs no BoTorch
            to validate).
    """

    tasks: tuple[Component, ...] = Field(min_length=1, description=f"task {_COMPONENTS}")
    kernels: Annotated[tuple[Kernel, ...], Shorthand(_one_kernel)] = Field(
        ("matern52-ard",),
        min_length=1,
        description="GP kernel names",
    )
    n_init: Annotated[int, Interval(ge=2, le=MAX_EVALUATIONS)] = Field(
        32, description="size of the shared Sobol initial design of every state"
    )
    state_iterations: tuple[Annotated[int, Interval(ge=0, le=MAX_EVALUATIONS)], ...] = Field(
        (0,), min_length=1, description="BO iterations after which a state is probed"
    )
    state_optimizer: Component = Field(
        DEFAULT_STATE_OPTIMIZER,
        description="the optimizer that builds the states: a name or {name, params, label}",
    )
    mc_samples: tuple[ProbeCount, ...] = Field(
        (8, 32), min_length=1, description="budgets S of acquisition evaluations per estimate"
    )
    rebuilds: ProbeCount = Field(
        16, description="independent estimates per budget, state and estimator"
    )
    n_probes: ProbeCount = Field(64, description="probe points per state")
    q: BatchSizes = Field(
        (1,),
        description="batch sizes of the probed acquisition (a list: one state per value): at "
        "q > 1 each probe is a batch of q points and the GP estimators' values are qEI "
        "(TPE states are probed at q = 1 only)",
    )
    estimators: tuple[Annotated[str, AfterValidator(_check_estimator)], ...] = Field(
        ("mc", "orth"),
        min_length=1,
        description="estimator names",
    )
    top_k: ProbeCount = Field(
        10, description="size of the top set in the ranking metrics (at most n_probes are used)"
    )
    reference_samples: ProbeCount = Field(
        4096,
        description="draws behind each high-precision reference value (at least the largest "
        "of mc_samples)",
    )
    seeds: Seeds = Field((0,), description="seeds of the states (a count n stands for 0..n-1)")
    laplace: Annotated[str, AfterValidator(_check_laplace)] = Field(
        "floored",
        description="the Hessian of the Laplace q(theta): floored (eigenvalues floored, as "
        "every optimizer's) or unfloored (the raw Hessian where it is positive definite, as "
        "the paper's)",
    )

    @model_validator(mode="after")
    def _check_rules(self) -> ProbeSpec:
        for key in ("kernels", "state_iterations", "mc_samples", "estimators"):
            _check_distinct(getattr(self, key), key.replace("_", " "), key)
        spelled: dict[str, str] = {}  # canonical name -> as the suite spells it first
        for name in self.estimators:
            first = spelled.setdefault(names.parse_estimator(name).name, name)
            if first != name:  # `orth@iid` is `orth`: its rows computed twice
                raise ConfigError(
                    "estimators",
                    f"estimators must be distinct, but {first!r} and {name!r} are one estimator.",
                )
        _check_components(self.tasks, "tasks", TASKS)
        self._check_state_count()
        self._check_state_optimizer()
        if self.reference_samples < max(self.mc_samples):
            # The reference is what each estimate's error is measured against: with fewer draws
            # than an estimate, its own error would dominate the MSE it stands for.
            raise ConfigError(
                "reference_samples",
                f"must be at least the largest of mc_samples ({max(self.mc_samples)}) for a "
                f"high-precision reference, but got {self.reference_samples}.",
            )
        budgets = {f"mc_samples[{i}]": s for i, s in enumerate(self.mc_samples)}
        for name in self.estimators:
            check_even_budgets(names.parse_estimator(name), budgets)
        return self

    def _check_state_count(self) -> None:
        """At most :data:`MAX_CELLS` states, counted as :func:`orthobench.probe.runner.probe_states`
        makes them (each GP kernel at each ``q`` for estimators not TPE's, ``tpe`` at ``q = 1``
        for TPE's) without making them: a mistyped count would fill the memory before a state
        ran."""
        tpe = [names.parse_estimator(e).base in names.TPE_ESTIMATORS for e in self.estimators]
        # The surrogates as the message names them -> their states per task, seed and iteration.
        gp = f"{len(self.kernels)} kernels x {len(self.q)} q"
        surrogates = {} if all(tpe) else {gp: len(self.kernels) * len(self.q)}
        if any(tpe) and 1 in self.q:
            surrogates["tpe"] = 1
        n_states = len(self.tasks) * sum(surrogates.values()) * len(self.seeds)
        n_states *= len(self.state_iterations)
        if n_states > MAX_CELLS:
            raise ConfigError(
                "seeds",
                f"{len(self.tasks)} tasks x ({' + '.join(surrogates)}) x {len(self.seeds)} seeds "
                f"x {len(self.state_iterations)} state iterations make {n_states} probe states; a "
                f"probe section holds at most {MAX_CELLS}.",
            )

    def _check_state_optimizer(self) -> None:
        spec = self.state_optimizer
        if "kernel" in spec.params:
            raise ConfigError(
                "state_optimizer.params.kernel",
                f"is set by the probe to each of `kernels`; remove it (got {spec.params['kernel']!r}).",
            )
        if spec == DEFAULT_STATE_OPTIMIZER:
            return
        entry = _registered(spec, "state_optimizer", OPTIMIZERS)
        if "kernel" not in entry.params and not entry.accepts_any:
            raise ConfigError(
                "state_optimizer.name",
                f"optimizer {spec.name!r} takes no `kernel` parameter, which the probe sets to "
                f"each of `kernels`; its parameters: {', '.join(entry.params) or 'none'}.",
            )
        _check_observations(self.n_init, (spec,), [entry])


@section
class Cell:
    """One (task, optimizer, seed) run: a unit of execution, storage and resume
    (:class:`~orthobench.work.WorkUnit`).

    Its values are checked here; the registry names and parameters of ``task`` and ``optimizer``
    are checked by the :class:`Suite` (or :class:`ProbeSpec`) that made the cell, once.

    Raises:
        ConfigError: naming the field and the bad value.
    """

    kind: ClassVar[str] = CELL

    suite: Label = Field(description="the suite's name")
    task: ComponentSpec = Field(description="the task")
    optimizer: ComponentSpec = Field(description="the optimizer")
    seed: Seed = Field(description="the seed")
    n_init: InitialDesign
    budget: Budget
    dtype: Dtype = "float64"
    q: BatchSize = 1
    asynchronous: bool = False

    @model_validator(mode="after")
    def _check_schedule(self) -> Cell:
        if self.asynchronous and self.q == 1:
            raise ConfigError("asynchronous", "an asynchronous cell needs q >= 2, but has q=1.")
        return self

    @property
    def id(self) -> str:
        """File-name-safe identifier, unique within a suite: ``task__optimizer__seed0``,
        ``task__optimizer__q4__seed0`` for a batch size ``q`` other than 1 and
        ``task__optimizer__q4__async__seed0`` for an asynchronous cell."""
        batch = () if self.q == 1 else (f"q{self.q}",)
        schedule = ("async",) if self.asynchronous else ()
        return ID_SEPARATOR.join(
            (self.task.label, self.optimizer.label, *batch, *schedule, f"seed{self.seed}")
        )

    def config(self) -> dict[str, Any]:
        """The configuration as the suite gives it (JSON-serializable); ``q`` only where it is
        not 1 and ``asynchronous`` only where it is true, so a cell of one point per step keeps
        the configuration (and hash) it had before batch steps existed."""
        cfg = asdict(self)
        if self.q == 1:
            del cfg["q"]
        if not self.asynchronous:
            del cfg["asynchronous"]
        cfg["task"] = self.task.config()
        cfg["optimizer"] = self.optimizer.config()
        return cfg

    def resolved_config(self) -> dict[str, Any]:
        """:meth:`config` with every default of the task and optimizer factories filled in.

        The parameters the cell really runs with, as JSON values (tuples become lists, other
        objects their ``str``, sets sorted lists): a default changed in the code changes it though
        the suite did not. An estimator's name is hashed as the suite spells it (``orth@iid``
        apart from ``orth``), as cells stored under either spelling were.
        """
        config = self.config()
        for key, registry in (("task", TASKS), ("optimizer", OPTIMIZERS)):
            entry = registry.resolve(config[key]["name"])
            config[key]["params"] = entry.with_defaults(config[key]["params"])
        return json.loads(canonical(config))

    @property
    def config_hash(self) -> str:
        """Hash of :meth:`resolved_config`: a stored cell is reused only when it matches."""
        return hash_config(self.resolved_config())


@section
class Suite:
    """A validated suite; each field's description says what it is.

    ``timeout_s``, ``evaluation_timeout_s`` and ``stack_evaluations`` are execution settings,
    like the executor: they stay out of the :class:`Cell` (and so out of its configuration hash),
    and a setting changed between runs does not make stored cells stale (``stack_evaluations``
    changes results by rounding only, as the thread count does; each cell's metadata records
    it). ``orthobench run --cell-timeout`` overrides
    ``timeout_s``; an evaluation past ``evaluation_timeout_s`` is recorded with
    ``status="timeout"`` (y NaN, not told to the optimizer) and the cell goes on.

    Raises:
        ConfigError: naming the field and the bad value. Checking ``tasks`` and ``optimizers``
            against the registries imports their modules.
    """

    name: Label = Field(description=f"the suite's name ({_LABEL_CHARS})")
    description: str = Field("", description="free text")
    seeds: Seeds = Field((0,), description="seeds (a count n stands for 0..n-1)")
    n_init: InitialDesign = 8
    budget: Budget
    q: BatchSizes = Field(
        (1,),
        description="batch sizes: points proposed, and evaluated at once, per BO step (a list: "
        "one cell per value); a cell makes n_init + q * budget evaluations",
    )
    device: Device = Field("auto", description="auto, cpu, cuda or cuda:N")
    dtype: Dtype = "float64"
    tasks: tuple[Component, ...] = Field(min_length=1, description=f"task {_COMPONENTS}")
    optimizers: tuple[Component, ...] = Field(min_length=1, description=f"optimizer {_COMPONENTS}")
    probe: ProbeSpec | None = Field(None, description="probe settings")
    timeout_s: Seconds | None = Field(
        None,
        description="seconds a cell attempt may run (its replayed evaluations included) before "
        "it is stopped and stored as failed; none: no limit",
    )
    evaluation_timeout_s: Seconds | None = Field(
        None,
        description="seconds an evaluation may run before it is recorded as timed out; none: "
        "no limit",
    )
    stack_evaluations: bool = Field(
        False,
        description="hand a task that evaluates several configurations together (the cnn "
        "task: its networks trained as one stack) the initial design and each q-batch at once; "
        "results equal one-at-a-time ones up to rounding",
    )
    asynchronous: bool = Field(
        False,
        description="keep q evaluations running: after the first batch, a point is asked as "
        "each evaluation finishes, the q - 1 running ones pending (q = 1 cells stay as they are)",
    )
    source: str = Field("", exclude=True, description="the file the suite was read from")

    @model_validator(mode="after")
    def _check_rules(self) -> Suite:
        _check_components(self.tasks, "tasks", TASKS)
        entries = _check_components(self.optimizers, "optimizers", OPTIMIZERS)
        _check_observations(self.n_init, self.optimizers, entries)
        n_cells = len(self.tasks) * len(self.optimizers) * len(self.seeds) * len(self.q)
        if n_cells > MAX_CELLS:
            batches = f" x {len(self.q)} batch sizes" if len(self.q) > 1 else ""
            raise ConfigError(
                "seeds",
                f"{len(self.tasks)} tasks x {len(self.optimizers)} optimizers x "
                f"{len(self.seeds)} seeds{batches} make {n_cells} cells; a suite holds at most "
                f"{MAX_CELLS}.",
            )
        for i, q in enumerate(self.q):
            if q * self.budget > MAX_EVALUATIONS:
                raise ConfigError(
                    f"q[{i}]",
                    f"q * budget must be <= {MAX_EVALUATIONS} evaluations, but q={q} and "
                    f"budget={self.budget} make {q * self.budget}.",
                )
        if self.asynchronous and self.stack_evaluations:
            raise ConfigError(
                "asynchronous",
                "asynchronous cells evaluate each point as it is asked, but stack_evaluations "
                "needs a whole batch at once: set one of them to false.",
            )
        return self

    def cells(self) -> list[Cell]:
        """All cells, ordered task-major, then seed, then batch size ``q``, then optimizer."""
        return [
            Cell(
                suite=self.name,
                task=t,
                optimizer=o,
                seed=s,
                n_init=self.n_init,
                budget=self.budget,
                dtype=self.dtype,
                q=q,
                asynchronous=self.asynchronous and q > 1,
            )
            for t in self.tasks
            for s in self.seeds
            for q in self.q
            for o in self.optimizers
        ]


# ----------------------------------------------------------------------------------------------
# YAML


def parse_suite(data: Any, file: str = "<suite>") -> Suite:
    """Validate an already-parsed suite mapping; see :func:`load_suite`."""
    try:
        return from_yaml(Suite, data, source=file)
    except ConfigError as err:
        raise SuiteError(file, err.field, err.reason) from None


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file, with its folder searched last for the ``module:attr``
    names it uses.

    So a user's module next to their suite works without PYTHONPATH and never shadows an installed
    one: the folder is appended to ``sys.path``, after the standard library, site-packages and
    PYTHONPATH (a ``botorch.py`` next to the suite is not what ``import botorch`` finds). It stays
    there: worker processes started later (process pool, the private Dask LocalCluster) inherit
    the parent's ``sys.path`` and import the same module; an external cluster's workers
    (``--scheduler``) do not: the run checks that they find the module before any cell runs.

    Raises:
        SuiteError: on any problem, with a one-line message naming the file and the field.
    """
    path = Path(path)
    file = str(path)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.append(folder)
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
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        where, problem = yaml_error_parts(err)
        raise SuiteError(file, where or "(file)", f"malformed YAML ({problem}).") from None
    # Before the names are resolved, the modules imported already or found first (an installed
    # module's missing attribute would hide the clash); after, those resolving them imported.
    check_modules_beside(data, Path(folder), file)
    suite = parse_suite(data, file)
    check_modules_beside(data, Path(folder), file)
    return suite
