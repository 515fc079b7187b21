"""Name -> factory registries for tasks and optimizers.

A name is resolved, in order, as: a built-in name; a ``module:attr`` import path (so users can
benchmark their own objective or optimizer without editing the package); an entry point in the
group ``orthobench.tasks`` / ``orthobench.optimizers`` of an installed distribution. Built-ins are
stored as import paths and imported on first use, which keeps ``import orthobench`` light and
free of import cycles.

Task factories are called as ``factory(**params)``; optimizer factories as
``factory(dim, *, seed, device, dtype, **params)``. The ``params`` a factory accepts are read from
its signature, so unknown or mistyped suite parameters are rejected before anything runs, and so
are values outside a parameter's constrained type (``theta_samples: Annotated[Count, Ge(4)]``,
``kernel: Kernel``; :mod:`orthobench.config.params`). An optimizer states how many observations
it needs before its first ``ask`` in its ``min_observations`` attribute.

Trust model. A suite names code to import and run, as any plugin system does: only run suites
you trust. What a name may resolve to is still restricted, so that a suite cannot call an
arbitrary function (``os:system``): an import path or entry point must name a subclass of
:class:`~orthobench.tasks.base.Task` / :class:`~orthobench.optimizers.base.Optimizer`, or a
function marked with :func:`task_factory` / :func:`optimizer_factory`. Anything else is an error
before it is called.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from orthobench.config.params import check_value, is_constrained
from orthobench.exceptions import ConfigError, RegistryError, UnknownNameError, show_value

# Keyword arguments the loop passes to every optimizer factory itself.
_OPTIMIZER_RESERVED = ("dim", "seed", "device", "dtype")
# The attribute that marks a function as a factory of one kind (see `task_factory`).
_FACTORY_MARK = "__orthobench_factory__"


def task_factory(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a function that returns a :class:`~orthobench.tasks.base.Task` as nameable in suites.

    Example:
        >>> @task_factory
        ... def sphere(dim: int = 2): ...
        >>> sphere.__orthobench_factory__
        'task'
    """
    setattr(function, _FACTORY_MARK, "task")
    return function


def optimizer_factory(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a function that returns an :class:`~orthobench.optimizers.base.Optimizer` as
    nameable in suites."""
    setattr(function, _FACTORY_MARK, "optimizer")
    return function


@dataclass(frozen=True)
class Entry:
    """A resolved registry entry: the factory and the parameters a suite may set."""

    name: str
    factory: Callable[..., Any]
    params: dict[str, Any]  # parameter name -> default (inspect.Parameter.empty if required)
    accepts_any: bool  # the factory takes **kwargs
    annotations: dict[str, str]  # parameter name -> annotation text ("" if none)
    constraints: dict[str, Any]  # parameter name -> its Annotated / Literal type, if it has one

    @property
    def description(self) -> str:
        doc = inspect.getdoc(self.factory) or ""
        return doc.split("\n\n")[0].replace("\n", " ")

    @property
    def min_observations(self) -> int:
        """Observations an optimizer needs before its first ``ask``: the factory's
        ``min_observations`` attribute (0 where it declares none)."""
        value = getattr(self.factory, "min_observations", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _import_path(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise RegistryError(
            "name", f"Import path {path!r} must look like 'package.module:attribute'."
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as err:  # also a relative name ('..', a TypeError) or a module that fails
        raise RegistryError(
            "name",
            f"Cannot import module {module_name!r} of {path!r}: {type(err).__name__}: {err}.",
        ) from err
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RegistryError(
                "name", f"Module {module_name!r} has no attribute {attr!r} (from {path!r})."
            ) from None
    return obj


class Registry:
    """A registry of factories of one kind (``"task"`` or ``"optimizer"``)."""

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: Mapping[str, str],
        *,
        base: str,
        reserved: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins = dict(builtins)
        self._registered: dict[str, Callable[..., Any]] = {}
        self._base = base  # import path of the base class (imported only when checking a name)
        self._reserved = reserved

    def _checked(self, name: str, obj: Any) -> Callable[..., Any]:
        """``obj`` if it may be loaded under ``name``: a subclass of the registry's base class or a
        function marked as a factory of its kind (see the module's trust model)."""
        if inspect.isfunction(obj) and getattr(obj, _FACTORY_MARK, None) == self.kind:
            return obj
        # Imported only for classes: a class of the right base imported it already, and a
        # marked factory needs no base (its module may stay free of torch).
        base_name = self._base.rpartition(":")[2]
        if inspect.isclass(obj) and issubclass(obj, _import_path(self._base)):
            return obj
        raise RegistryError(
            "name",
            f"{name!r} is {_describe(obj)}, not a {base_name} subclass or a function marked "
            f"with @orthobench.{self.kind}_factory; a suite may only name those.",
        )

    def register(self, name: str, factory: Callable[..., Any] | None = None) -> Any:
        """Register ``factory`` under ``name`` (also usable as a decorator). Duplicates raise."""

        def _add(f: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._builtins or name in self._registered:
                raise RegistryError("name", f"A {self.kind} named {name!r} is already registered.")
            self._registered[name] = f
            return f

        return _add if factory is None else _add(factory)

    def names(self) -> list[str]:
        """Built-in, registered and entry-point names, sorted."""
        eps = {ep.name for ep in entry_points(group=self.group)}
        return sorted(set(self._builtins) | set(self._registered) | eps)

    def _factory(self, name: str) -> Callable[..., Any]:
        if name in self._registered:
            return self._registered[name]
        if name in self._builtins:
            return _import_path(self._builtins[name])
        if ":" in name:
            return self._checked(name, _import_path(name))
        for ep in entry_points(group=self.group):
            if ep.name == name:
                return self._checked(name, ep.load())
        known = self.names()
        raise UnknownNameError(
            self.kind,
            name,
            known,
            "name",
            f"Unknown {self.kind} {name!r}; known: {', '.join(known)}. Use a 'module:attr' "
            f"import path or an entry point in group {self.group!r} for your own.",
        )

    def resolve(self, name: str) -> Entry:
        """Look up ``name``.

        Raises:
            UnknownNameError: listing the known names (field ``name``) on a miss.
            RegistryError: for an import path that does not import (field ``name``).
        """
        factory = self._factory(name)
        params, accepts_any, annotations = _signature_params(factory, self._reserved)
        return Entry(
            name=name,
            factory=factory,
            params=params,
            accepts_any=accepts_any,
            annotations={k: _annotation_text(a) for k, a in annotations.items()},
            constraints={k: a for k, a in annotations.items() if is_constrained(a)},
        )

    def check_params(self, name: str, params: Mapping[str, Any]) -> Entry:
        """Resolve ``name`` and reject parameters its factory does not take, of the wrong type or
        outside their constrained type (:mod:`orthobench.config.params`).

        Raises:
            RegistryError: as :meth:`resolve`, or for a parameter (field ``params.<key>``, or
                ``params.<key>[i]`` for an item of a list) or missing required parameters (field
                ``params``).
        """
        entry = self.resolve(name)
        for key, value in params.items():
            if key not in entry.params:
                if entry.accepts_any:
                    continue
                allowed = ", ".join(entry.params) or "none"
                raise RegistryError(
                    f"params.{key}",
                    f"{self.kind} {name!r} has no parameter {key!r}; allowed: {allowed}.",
                )
            default = entry.params[key]
            list_allowed = isinstance(value, list) and "list" in entry.annotations.get(key, "")
            if not list_allowed and not _same_kind(default, value):
                raise RegistryError(
                    f"params.{key}",
                    f"{self.kind} {name!r} parameter {key!r} must be {type(default).__name__} "
                    f"(default {default!r}), but got {show_value(value)}.",
                )
            if key in entry.constraints:
                try:
                    check_value(entry.constraints[key], value, field=f"params.{key}")
                except ConfigError as err:
                    raise RegistryError(
                        err.field, f"{self.kind} {name!r} parameter {key!r}: {err.reason}"
                    ) from None
        missing = [
            k for k, d in entry.params.items() if d is inspect.Parameter.empty and k not in params
        ]
        if missing:
            raise RegistryError(
                "params", f"{self.kind} {name!r} needs parameter(s): {', '.join(missing)}."
            )
        return entry

    def create(self, name: str, *args: Any, **params: Any) -> Any:
        return self.resolve(name).factory(*args, **params)


def _describe(obj: Any) -> str:
    if inspect.isclass(obj):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    if callable(obj):
        return f"the unmarked callable {getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"
    return f"a {type(obj).__name__}"


def _signature_params(
    factory: Callable[..., Any], reserved: tuple[str, ...]
) -> tuple[dict[str, Any], bool, dict[str, Any]]:
    """Parameters a factory accepts, with their defaults and annotations: for a class, its
    ``__init__`` and those it forwards ``**kwargs`` to along the MRO (so a subclass's params
    include its bases' explicit ones), and their annotations (:func:`_evaluated`)."""
    if inspect.isclass(factory):
        targets = [
            vars(c)["__init__"]
            for c in inspect.getmro(factory)
            if "__init__" in vars(c) and c is not object
        ]
    else:
        targets = [factory]
    params: dict[str, Any] = {}
    annotations: dict[str, Any] = {}
    accepts_any = False
    for target in targets:
        accepts_any = False
        for p in inspect.signature(target).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                accepts_any = True
            elif p.kind is p.VAR_POSITIONAL or p.name == "self" or p.name in reserved:
                continue
            else:
                params.setdefault(p.name, p.default)
                annotation = "" if p.annotation is p.empty else _evaluated(p.annotation, target)
                annotations.setdefault(p.name, annotation)
        if not accepts_any:
            break
    return params, accepts_any, annotations


def _evaluated(annotation: Any, function: Callable[..., Any]) -> Any:
    """``annotation`` evaluated in ``function``'s module if it is a string (a module with ``from
    __future__ import annotations``), as ``inspect.signature(eval_str=True)`` would, but one
    parameter at a time: a name imported only for type checkers keeps its text."""
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, getattr(function, "__globals__", {}))
    except Exception:
        return annotation


def _annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _same_kind(default: Any, value: Any) -> bool:
    """Loose type check of a suite value against the factory default's type."""
    if default is inspect.Parameter.empty or default is None or value is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and (
            isinstance(default, float) or isinstance(value, int)
        )
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


TASKS = Registry(
    "task",
    "orthobench.tasks",
    {
        "hartmann6": "orthobench.tasks.synthetic:hartmann6",
        "ackley8": "orthobench.tasks.synthetic:ackley8",
        "michalewicz10": "orthobench.tasks.synthetic:michalewicz10",
        "levy16": "orthobench.tasks.synthetic:levy16",
        "cnn": "orthobench.tasks.cnn:CNNTask",
        "wm811k-vit": "orthobench.tasks.wafer_vit:WaferViTTask",
    },
    base="orthobench.tasks.base:Task",
)

OPTIMIZERS = Registry(
    "optimizer",
    "orthobench.optimizers",
    {
        "sobol": "orthobench.optimizers.sobol:SobolSearch",
        "qlogei": "orthobench.optimizers.botorch_baselines:QLogEI",
        "ucb": "orthobench.optimizers.botorch_baselines:QUCB",
        "orthobo": "orthobench.optimizers.orthobo:OrthoBO",
        "mc-ei": "orthobench.optimizers.orthobo:MCEI",
        "turbo": "orthobench.optimizers.turbo:TuRBO",
        "rpr": "orthobench.optimizers.rpr:RPR",
        "mc-tpe": "orthobench.optimizers.tpe:MCTPE",
        "orthobo-tpe": "orthobench.optimizers.tpe:OrthoBOTPE",
        "tpe-optuna": "orthobench.optimizers.optuna_tpe:OptunaTPE",
    },
    base="orthobench.optimizers.base:Optimizer",
    reserved=_OPTIMIZER_RESERVED,
)
