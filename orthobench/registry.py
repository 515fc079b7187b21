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
``kernel: Kernel``; :mod:`orthobench.config.params`). Rules that tie several parameters together
are the factory's ``check_params`` static method, if it has one
(:meth:`orthobench.optimizers.base.Optimizer.check_params`): it gets every parameter, defaults
filled, once each value has passed its type, and the constructor calls it too, so a bad
combination is refused before anything runs by the rule the constructor uses. An optimizer states
how many observations it needs before its first ``ask`` in its ``min_observations`` attribute.

Trust model. A suite names code to import and run, as any plugin system does: only run suites
you trust. What a name may resolve to is still restricted, so that a suite cannot call an
arbitrary function (``os:system``): an import path or entry point must name a subclass of
:class:`~orthobench.tasks.base.Task` / :class:`~orthobench.optimizers.base.Optimizer`, or a
function marked with :func:`task_factory` / :func:`optimizer_factory`. Anything else is an error
before it is called.

Python cannot tell what a module holds without running it, so what a suite's ``module:attr``
may import is restricted too, by its text, before anything is imported
(:meth:`Registry._import_plugin`):

1. ``module`` and ``attr`` are dotted Python identifiers (no relative ``..module``);
2. no component of ``module`` starts with ``_``: no ``__main__`` (``orthobench.__main__:X``
   would run the command line), ``__init__`` or private module;
3. ``module`` is not in Python's standard library (:data:`sys.stdlib_module_names`): it holds no
   Task or Optimizer, and some of its modules act when imported (``this``, ``antigravity``).

Then :func:`importlib.util.find_spec` must find the module (this imports its parent packages, as
any import would), and only then is it imported, which runs its top-level code: an exception or
``sys.exit`` raised there is one :class:`RegistryError` naming the module. A ``KeyboardInterrupt``
is not caught: it is the user's Ctrl-C (a slow import interrupted), not the module's failure, and
the command line exits 130 with it. Entry points are named by installed distributions, not by
suites: rules 1 to 3 do not apply to them, the import errors and the type check do.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from orthobench.config import names
from orthobench.config.params import check_value, is_constrained
from orthobench.config.schema import float_text_hint
from orthobench.exceptions import (
    ConfigError,
    RegistryError,
    UnknownNameError,
    describe_error,
    did_you_mean,
    error_message,
    one_line,
    show_value,
)

# Keyword arguments the loop passes to every optimizer factory itself.
_OPTIMIZER_RESERVED = ("dim", "seed", "device", "dtype")
# The attribute that marks a function as a factory of one kind (see `task_factory`).
_FACTORY_MARK = "__orthobench_factory__"
# What a broken plugin module raises at import, reported as one RegistryError. Other
# BaseExceptions propagate: a KeyboardInterrupt is the user's Ctrl-C, an EvaluationTimeout a
# deadline's.
_IMPORT_FAILURES = (Exception, SystemExit)


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

    def with_defaults(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with the defaults of the parameters it leaves out (a required one stays
        out)."""
        defaults = {k: d for k, d in self.params.items() if d is not inspect.Parameter.empty}
        return {**defaults, **params}

    @property
    def min_observations(self) -> int:
        """Observations an optimizer needs before its first ``ask``: the factory's
        ``min_observations`` attribute (0 where it declares none)."""
        value = getattr(self.factory, "min_observations", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _split_path(path: str) -> tuple[str, str]:
    """``(module, attr)`` of a ``module:attr`` import path whose two parts are dotted identifiers."""
    module_name, _, attr = path.partition(":")
    if not all(part.isidentifier() for text in (module_name, attr) for part in text.split(".")):
        raise RegistryError(
            "name",
            f"Import path {path!r} must look like 'package.module:attribute' (dotted Python "
            "identifiers, no relative module).",
        )
    return module_name, attr


def _attribute(module: Any, attr: str, path: str) -> Any:
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = getattr(module, "__file__", None) or "a namespace package"
            raise RegistryError(
                "name",
                f"Module {module.__name__!r} ({where}) has no attribute {attr!r} (from {path!r}).",
            ) from None
    return obj


def _static_attribute(module_name: str, attr: str) -> Any:
    """The object at ``module:attr`` where the module is imported already and each attribute is
    a plain one, found without running code (:func:`inspect.getattr_static`: a package's lazy
    ``__getattr__`` would import a submodule); None otherwise."""
    if module_name not in sys.modules:
        return None
    obj = sys.modules[module_name]
    for part in attr.split("."):
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            return None
    return obj


def _import_failure(module_name: str, path: str, err: BaseException) -> RegistryError:
    # describe_error: the module's own message may span lines (or fail to print).
    return RegistryError(
        "name", f"Cannot import module {module_name!r} of {path!r}: {describe_error(err)}."
    )


def _import_path(path: str) -> Any:
    """The object at a ``module:attr`` path of the package itself (a built-in, a base class)."""
    module_name, attr = _split_path(path)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # a built-in whose optional dependency is missing
        raise _import_failure(module_name, path, err) from err
    return _attribute(module, attr, path)


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

    def _import_plugin(self, path: str) -> Any:
        """The object at a suite's ``module:attr``, imported only if the module's name passes the
        rules of the module's trust model (checked on the text, before any import).

        Raises:
            RegistryError: (field ``name``) naming the rule broken, a module that is not found,
                or what its import raised (any exception, ``sys.exit``); a ``KeyboardInterrupt``
                propagates.
        """
        module_name, attr = _split_path(path)
        if any(part.startswith("_") for part in module_name.split(".")):
            raise RegistryError(
                "name",
                f"Import path {path!r} names the private module {module_name!r}; a suite may only "
                "name public modules (no component starting with '_', such as '__main__').",
            )
        top = module_name.partition(".")[0]
        if top in sys.stdlib_module_names or _in_stdlib_folder(top):
            raise RegistryError(
                "name",
                f"Import path {path!r} names {module_name!r} of Python's standard library, which "
                f"holds no {self._base.rpartition(':')[2]}; a suite may not import it.",
            )
        # SystemExit too: a module's top-level code may call sys.exit, and a suite must not end the
        # runner with it (find_spec imports the parent packages). Not KeyboardInterrupt: Ctrl-C.
        try:
            spec = importlib.util.find_spec(module_name)
        except _IMPORT_FAILURES as err:
            raise _import_failure(module_name, path, err) from err
        if spec is None:
            raise RegistryError(
                "name",
                f"Cannot import module {module_name!r} of {path!r}: no such module (not installed, "
                "not on PYTHONPATH and not next to the suite file).",
            )
        try:
            module = importlib.import_module(module_name)
        except _IMPORT_FAILURES as err:
            raise _import_failure(module_name, path, err) from err
        return _attribute(module, attr, path)

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
        article = "an" if base_name[:1].lower() in "aeiou" else "a"
        raise RegistryError(
            "name",
            f"{name!r} is {_describe(obj)}, not {article} {base_name} subclass or a function "
            f"marked with @orthobench.{self.kind}_factory; a suite may only name those.",
        )

    def register(self, name: str, factory: Callable[..., Any] | None = None) -> Any:
        """Register ``factory`` under ``name`` (also usable as a decorator). Duplicates raise.

        The name is this process's: a suite component that names it carries the factory to the
        worker processes that build it (:func:`carried_registrations`), so the factory must be
        picklable by reference (a module-level class or function, not a lambda)."""

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
            return self._checked(name, self._import_plugin(name))
        for ep in entry_points(group=self.group):
            if ep.name == name:
                try:
                    loaded = ep.load()
                except _IMPORT_FAILURES as err:  # as in _import_plugin: one error, not an exit
                    raise _import_failure(ep.module, ep.value, err) from err
                return self._checked(name, loaded)
        known = self.names()
        raise UnknownNameError(
            self.kind,
            name,
            known,
            "name",
            f"Unknown {self.kind} {name!r}{did_you_mean(name, known)}; known: "
            f"{', '.join(known)}. Use a 'module:attr' "
            f"import path or an entry point in group {self.group!r} for your own.",
        )

    def resolve(self, name: str) -> Entry:
        """Look up ``name``.

        Raises:
            UnknownNameError: listing the known names (field ``name``) on a miss.
            RegistryError: for an import path that breaks the trust model's rules or does not
                import, or an object that may not be loaded (field ``name``).
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

    def imported(self, name: str) -> Callable[..., Any] | None:
        """The factory ``name`` resolves to (:meth:`resolve`) where finding it imports no code
        but the package's: a registered or built-in name, or an import path or entry point
        whose module is imported already, its attributes walked without running code
        (:func:`_static_attribute`). None for anything else, and for an object that is not a
        factory of this kind: a report asks this of the names that results files store, and
        imports no code that a crafted file names."""
        if name in self._registered or name in self._builtins:
            try:
                return self._factory(name)
            except RegistryError:  # a built-in whose optional dependency is missing
                return None
        if ":" in name:
            module_name, _, attr = name.partition(":")
        else:
            found = (ep for ep in entry_points(group=self.group) if ep.name == name)
            ep = next(found, None)
            if ep is None or ep.attr is None:
                return None
            module_name, attr = ep.module, ep.attr
        obj = _static_attribute(module_name, attr)
        try:
            return self._checked(name, obj)
        except RegistryError:
            return None

    def check_params(self, name: str, params: Mapping[str, Any]) -> Entry:
        """Resolve ``name`` and reject parameters its factory does not take, of the wrong type or
        outside their constrained type (:mod:`orthobench.config.params`), and combinations its
        factory's ``check_params`` refuses.

        Raises:
            RegistryError: as :meth:`resolve`, for an abstract class (field ``name``: it cannot
                be built), or for a parameter (field ``params.<key>``, or
                ``params.<key>[i]`` for an item of a list), missing required parameters (field
                ``params``) or a combination (field ``params``, or ``params.<key>`` where the
                rule blames one parameter).
        """
        entry = self.resolve(name)
        if inspect.isabstract(entry.factory):  # the base class too: refused at load, not built
            cls = entry.factory
            raise RegistryError(
                "name",
                f"{name!r} is the abstract class {cls.__module__}.{cls.__qualname__}: implement "
                f"{', '.join(sorted(cls.__abstractmethods__))}.",
            )
        for key, value in params.items():
            if key not in entry.params:
                if entry.accepts_any:
                    continue
                allowed = ", ".join(entry.params) or "none"
                raise RegistryError(
                    f"params.{key}",
                    f"{self.kind} {name!r} has no parameter {key!r}; allowed: {allowed}.",
                )
            default, annotation = entry.params[key], entry.annotations.get(key, "")
            expected = _expected_type(default, annotation)
            list_allowed = isinstance(value, list) and "list" in annotation
            if not list_allowed and not _same_kind(expected, value):
                hint = float_text_hint(value) if issubclass(expected, float) else ""
                source = (
                    f"annotated {annotation}"
                    if default is inspect.Parameter.empty
                    else f"default {default!r}"
                )
                raise RegistryError(
                    f"params.{key}",
                    f"{self.kind} {name!r} parameter {key!r} must be {expected.__name__} "
                    f"({source}), but got {show_value(value)}{hint}.",
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
        self._check_rules(entry, params)
        return entry

    def _check_rules(self, entry: Entry, params: Mapping[str, Any]) -> None:
        """Run the factory's rules over several parameters on ``params`` with the defaults filled
        (see the module's notes)."""
        rules = getattr(entry.factory, "check_params", None)
        if not callable(rules):
            return
        try:
            rules(**entry.with_defaults(params))
        except ConfigError as err:  # a rule that blames one parameter, its field relative
            raise RegistryError(
                f"params.{err.field}",
                f"{self.kind} {entry.name!r} parameter {err.field!r}: {err.reason}",
            ) from None
        except ValueError as err:  # a plugin's message may span lines
            raise RegistryError(
                "params", f"{self.kind} {entry.name!r}: {one_line(error_message(err))}"
            ) from None

    def create(self, name: str, *args: Any, **params: Any) -> Any:
        return self.resolve(name).factory(*args, **params)


def _in_stdlib_folder(top: str) -> bool:
    """Whether the top-level module ``top`` lies in Python's standard library folder (not its
    site-packages) though ``sys.stdlib_module_names`` misses it: CPython's ``test`` package, whose
    ``test.autotest`` runs the whole regression suite when imported. A top-level ``find_spec``
    imports nothing."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    locations = [] if spec is None else [spec.origin, *(spec.submodule_search_locations or [])]
    paths = sysconfig.get_paths()

    def under(path: str, key: str) -> bool:
        return os.path.realpath(path).startswith(os.path.realpath(paths[key]) + os.sep)

    return any(
        where
        and under(where, "stdlib")
        and not under(where, "purelib")
        and not under(where, "platlib")
        for where in locations
    )


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


#: Annotations of a required parameter that say its type as a default's type would.
_PLAIN_ANNOTATIONS = {t.__name__: t for t in (bool, int, float, str, list, tuple, dict)}


def _expected_type(default: Any, annotation: str) -> type | None:
    """The type a suite value of a parameter must have: its default's, or for a required one
    its plain annotation's (``width: float``); ``None`` where neither says (no check)."""
    if default is inspect.Parameter.empty:
        return _PLAIN_ANNOTATIONS.get(annotation)
    return None if default is None else type(default)


def _same_kind(expected: type | None, value: Any) -> bool:
    """Loose type check of a suite value against the type the factory expects
    (:func:`_expected_type`): an int passes for a float, a list for a tuple."""
    if expected is None or value is None:
        return True
    if issubclass(expected, bool) or isinstance(value, bool):
        return issubclass(expected, bool) and isinstance(value, bool)
    if issubclass(expected, (int, float)):
        return isinstance(value, (int, float)) and (
            issubclass(expected, float) or isinstance(value, int)
        )
    if issubclass(expected, str):
        return isinstance(value, str)
    if issubclass(expected, (list, tuple)):
        return isinstance(value, (list, tuple))
    if issubclass(expected, dict):
        return isinstance(value, dict)
    return True


def carried_registrations(name: str) -> dict[str, Callable[..., Any]]:
    """The factories registered under ``name`` in this process (:meth:`Registry.register`), by
    registry kind: what a pickled component carries to a worker process, where a spawned
    interpreter (or a Dask worker) has no registrations of its own."""
    return {r.kind: r._registered[name] for r in (TASKS, OPTIMIZERS) if name in r._registered}


def install_registrations(name: str, factories: Mapping[str, Callable[..., Any]]) -> None:
    """Register ``factories`` (:func:`carried_registrations`) under ``name`` in this process."""
    for registry in (TASKS, OPTIMIZERS):
        if registry.kind in factories:
            registry._registered[name] = factories[registry.kind]


TASKS = Registry(
    "task",
    "orthobench.tasks",
    {
        "hartmann6": "orthobench.tasks.synthetic:hartmann6",
        "ackley8": "orthobench.tasks.synthetic:ackley8",
        "michalewicz10": "orthobench.tasks.synthetic:michalewicz10",
        "levy16": "orthobench.tasks.synthetic:levy16",
        "delayed": "orthobench.tasks.synthetic:delayed",
        "gramacy": "orthobench.tasks.constrained:gramacy",
        "constrained-hartmann6": "orthobench.tasks.constrained:constrained_hartmann6",
        "pressure-vessel": "orthobench.tasks.constrained:pressure_vessel",
        "tension-compression-string": "orthobench.tasks.constrained:tension_compression_string",
        "welded-beam": "orthobench.tasks.constrained:welded_beam",
        "speed-reducer": "orthobench.tasks.constrained:speed_reducer",
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


# The probe's plugin estimators: imported by the registries' trust model and checked against
# their base by import path (imported only to check one: this layer does not import the probe).
_PROBE_ACQUISITIONS = Registry("probe acquisition", "", {}, base=names.PROBE_ACQUISITION_BASE)


def load_probe_acquisition(path: str, *, field: str = "") -> type:
    """The concrete :class:`~orthobench.probe.plugins.ProbeAcquisition` subclass at the import
    path ``path`` (``module:attr``), imported by the trust model of :mod:`orthobench.registry`.

    Raises:
        ConfigError: with ``field``, for a path the trust model refuses, or any other object.
    """
    try:
        obj = _PROBE_ACQUISITIONS._import_plugin(path)
    except ConfigError as err:
        raise ConfigError(field, err.reason) from None
    if not (inspect.isclass(obj) and issubclass(obj, _import_path(names.PROBE_ACQUISITION_BASE))):
        reason = f"is {_describe(obj)}, not a ProbeAcquisition subclass; a probe names only those"
        raise ConfigError(field, f"{path!r} {reason} (orthobench.ProbeAcquisition).")
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise ConfigError(
            field, f"{path!r} is the abstract class {obj.__name__}: implement {missing}."
        )
    # The probe builds the class with no arguments and calls build(model, best_f=, samples=,
    # rebuild=) only after a state's other estimators are computed: a signature that cannot
    # take those failed every state at its end.
    # A plain method takes the instance too; a static or class method does not.
    own = isinstance(inspect.getattr_static(obj, "build"), staticmethod | classmethod)
    positional = (None,) if own else (None, None)
    for call, bind in (
        (f"{obj.__name__}()", lambda: inspect.signature(obj).bind()),
        (
            "build(model, *, best_f, samples, rebuild)",
            lambda: inspect.signature(obj.build).bind(
                *positional, best_f=0.0, samples=1, rebuild=0
            ),
        ),
    ):
        try:
            bind()
        except TypeError as err:
            raise ConfigError(field, f"{path!r}: the probe calls {call}, but {err}.") from None
        except ValueError:  # no signature to read (a builtin): the call itself will tell
            pass
    return obj
