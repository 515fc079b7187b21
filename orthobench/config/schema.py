"""Sections of a configuration, declared once: strict, frozen pydantic dataclasses.

A field states its type and bounds (``Annotated[int, Ge(2), Le(MAX_COUNT)]``), its default and its
description; from that one declaration pydantic checks values, :func:`from_yaml` knows the keys a
YAML mapping may hold, and a missing field's message quotes the description. Rules over several
fields are the section's ``model_validator(mode="after")``, raising a
:class:`~orthobench.exceptions.ConfigError` that names the field they blame.

A :func:`section` validates on construction, however it is built, and raises a one-line
:class:`~orthobench.exceptions.ConfigError` whose field is the path of the bad value within it
(``mc_samples[1]``, ``state_optimizer.params.kernel``); an error of a validator keeps its type
(an :class:`~orthobench.exceptions.UnknownNameError` stays one). Sections are stdlib dataclasses
too: ``dataclasses.asdict`` and ``dataclasses.replace`` work, and they pickle.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import pydantic.dataclasses
from pydantic import ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from orthobench.exceptions import ConfigError, did_you_mean, show_value

__all__ = ["Shorthand", "Unit", "float_text_hint", "from_yaml", "section", "within"]

_T = TypeVar("_T")

# Strict: YAML's `"3"` or `true` is not an int; frozen is set by `section` (pydantic warns when
# both the decorator and the config set it).
_STRICT = ConfigDict(strict=True, extra="forbid")

# A number in exponent notation that YAML 1.1 (PyYAML) reads as a string: 1e4, -2E-3.
_FLOAT_TEXT_RE = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+", re.ASCII)

# annotated_types bounds, as the attribute that holds each and how a message writes it.
_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


@dataclasses.dataclass(frozen=True)
class Unit:
    """Metadata of a number type: the unit its messages name (``a number of seconds > 0``)."""

    name: str


@dataclasses.dataclass(frozen=True)
class Shorthand:
    """Metadata of a field type: a shorter YAML form. ``expand`` returns the long form of a value
    (and any other value unchanged) or raises a ConfigError with the field ``""``."""

    expand: Callable[[Any], Any]


def section(cls: type[_T]) -> type[_T]:
    """``cls`` as a frozen, keyword-only, strict pydantic dataclass whose construction raises a
    :class:`~orthobench.exceptions.ConfigError` (the first problem) instead of pydantic's
    ``ValidationError``."""
    cls = pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=_STRICT)(cls)
    validate = cls.__init__

    @functools.wraps(validate)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            validate(self, *args, **kwargs)
        except ValidationError as err:
            raise _config_error(cls, kwargs, err) from None

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


def within(prefix: str, err: ConfigError) -> ConfigError:
    """``err`` (same type and attributes) with its field under ``prefix``."""
    moved = copy.copy(err)
    moved.field = _join(prefix, err.field)
    moved.args = (f"{moved.field}: {err.reason}",)
    return moved


def _yaml_keys(cls: type) -> list[str]:
    """The keys a YAML mapping of section ``cls`` may hold: its fields, less the excluded ones
    (set by the code that reads the file, as a suite's ``source``)."""
    return [name for name, f in _fields(cls).items() if not f.exclude]


def from_yaml(cls: type[_T], value: Any, path: str = "", **excluded: Any) -> _T:
    """Build section ``cls`` from parsed YAML at ``path``: each field's :class:`Shorthand`
    expanded, mappings into sections and lists into tuples as the fields' types say, the rest
    passed as read for the section to check. ``excluded`` sets fields that are not YAML keys.

    Raises:
        ConfigError: with the YAML path of the bad value.
    """
    if not isinstance(value, dict):
        raise ConfigError(path or "(top level)", f"must be a mapping, but got {show_value(value)}.")
    keys = _yaml_keys(cls)
    for key in value:
        if key not in keys:
            raise ConfigError(_join(path, str(key)), _unknown_key(cls, key))
    kwargs = {}
    for key, item in value.items():
        field = _fields(cls)[key]
        kwargs[key] = _yaml_value(
            field.annotation, field.metadata, field.description, item, _join(path, key)
        )
    try:
        return cls(**kwargs, **excluded)
    except ConfigError as err:
        raise within(path, err) from None


def _yaml_value(
    annotation: Any, metadata: Any, description: str | None, value: Any, path: str
) -> Any:
    """``value`` of the field (or tuple item) at ``path``, of type ``annotation``."""
    base, metadata, optional = _unwrap(annotation, metadata)
    for shorthand in (m for m in metadata if isinstance(m, Shorthand)):
        try:
            value = shorthand.expand(value)
        except ConfigError as err:
            raise within(path, err) from None
    if value is None and optional:
        return None
    if _is_section(base):
        return from_yaml(base, value, path)
    if get_origin(base) is tuple:
        if not isinstance(value, list):
            raise ConfigError(
                path,
                f"must be a non-empty list of {description}, but got {show_value(value)}.",
            )
        item = get_args(base)[0]
        return tuple(
            _yaml_value(item, (), description, v, f"{path}[{i}]") for i, v in enumerate(value)
        )
    return value


# ----------------------------------------------------------------------------------------------
# pydantic's errors as one line naming the field


def _config_error(cls: type, kwargs: dict[str, Any], err: ValidationError) -> ConfigError:
    error = err.errors(include_url=False)[0]
    loc, ctx = error["loc"], error.get("ctx", {})
    cause = ctx.get("error")
    if not loc:  # a model validator: its ConfigError names the field
        return cause if isinstance(cause, ConfigError) else ConfigError("", _pydantic_rule(error))
    name = str(loc[0])
    field = _fields(cls).get(name)
    if field is None:
        return ConfigError(name, _unknown_key(cls, name))
    annotation, metadata, optional = _unwrap(field.annotation, field.metadata)
    where, rest, value = name, loc[1:], error["input"]
    if rest and isinstance(rest[0], int) and get_origin(annotation) is tuple:
        where, rest = f"{name}[{rest[0]}]", rest[1:]
        annotation, metadata, optional = _unwrap(get_args(annotation)[0])
    if rest:  # inside a value, as a key of a mapping: the message shows the whole value
        value = kwargs.get(name, value)
    if isinstance(cause, ConfigError):
        return within(where, cause)
    return ConfigError(where, _reason(error, field, annotation, metadata, optional, value))


def _reason(
    error: Any, field: FieldInfo, annotation: Any, metadata: list[Any], optional: bool, value: Any
) -> str:
    kind, ctx, got = error["type"], error.get("ctx", {}), show_value(value)
    if kind in ("missing", "missing_keyword_only_argument"):
        return f"missing required field ({field.description})."
    if kind == "too_short":
        return f"must not be empty; give at least one of the {field.description}."
    if kind == "too_long":
        return f"must hold at most {ctx['max_length']} items, but got {ctx['actual_length']}."
    if kind == "literal_error":
        *others, last = map(str, get_args(annotation))
        return f"must be {', '.join(others)} or {last}, but got {got}."
    if annotation is int and kind == "greater_than_equal":  # short: the value is a small int
        return f"must be >= {ctx['ge']}, but got {value}."
    if annotation is int and kind == "less_than_equal":
        return f"must be <= {ctx['le']}, but got {got}."
    if annotation is float and kind in ("greater_than", "less_than_equal", "finite_number"):
        return f"must be {' and '.join(_bounds(metadata))}{_unit(metadata, ' ')}, but got {got}."
    if kind.endswith("_type") or kind == "string_too_short":
        hint = float_text_hint(value)
        return f"must be {_noun(annotation, metadata, optional)}, but got {got}{hint}."
    return f"{_pydantic_rule(error)}, but got {got}."


def _noun(annotation: Any, metadata: list[Any], optional: bool) -> str:
    """What a value of ``annotation`` is, for ``must be ...``."""
    if annotation in (int, float):
        kind = "an integer" if annotation is int else f"a number{_unit(metadata, ' of ')}"
        return " ".join([kind, *_bounds(metadata)[:1]])
    if annotation is str:
        return (
            "a non-empty string"
            if any(getattr(m, "min_length", 0) for m in metadata)
            else "a string"
        )
    if get_origin(annotation) is Mapping:
        return "a mapping with string keys"
    if get_origin(annotation) is tuple:
        item, item_metadata, _ = _unwrap(get_args(annotation)[0])
        items = {int: "integers", str: "strings"}.get(item, f"{item.__name__} objects")
        return " ".join([f"a tuple of {items}", *_bounds(item_metadata)[:1]])
    name = getattr(annotation, "__name__", str(annotation))
    return f"a {name} or None" if optional else f"a {name}"


def _bounds(metadata: list[Any]) -> list[str]:
    """The bounds in ``metadata``, lower first: ``['> 0', '<= 1e+07']``."""
    return [
        f"{op} {bound:g}" if isinstance(bound, float) else f"{op} {bound}"
        for m in metadata
        for attr, op in _BOUNDS
        if (bound := getattr(m, attr, None)) is not None
    ]


def _unit(metadata: list[Any], before: str) -> str:
    return next((before + m.name for m in metadata if isinstance(m, Unit)), "")


def float_text_hint(value: Any) -> str:
    """What to write instead of ``value``, a number in exponent notation that YAML read as text
    (``" (YAML reads ...: write 5.0e+3)"`` for ``5e3``: the same number as YAML 1.1 reads a
    float, with a ``.`` and a signed exponent), else ``""``: for the end of a ``but got ...``
    message.

    Example:
        >>> float_text_hint("2e-1")
        " (YAML reads an exponent without a '.' and a sign as text: write 2.0e-1)"
    """
    if not (isinstance(value, str) and _FLOAT_TEXT_RE.fullmatch(value.strip())):
        return ""
    mantissa, e, exponent = re.split(r"([eE])", value.strip())
    mantissa += "" if "." in mantissa else ".0"
    exponent = exponent if exponent[0] in "+-" else f"+{exponent}"
    return (
        f" (YAML reads an exponent without a '.' and a sign as text: write {mantissa}{e}{exponent})"
    )


def _pydantic_rule(error: Any) -> str:
    return str(error["msg"]).replace("Input should be", "must be", 1)


def _unknown_key(cls: type, key: object) -> str:
    keys = _yaml_keys(cls)
    return f"unknown key{did_you_mean(key, keys)}; allowed keys: {', '.join(keys)}."


def _join(path: str, field: str) -> str:
    """``field`` (``name``, ``[1]``, ``name.params.beta``, or ``""``: here) under ``path``."""
    if not path or not field:
        return path or field
    return path + ("" if field.startswith("[") else ".") + field


def _fields(cls: type) -> dict[str, FieldInfo]:
    return cls.__pydantic_fields__  # type: ignore[attr-defined]


def _is_section(annotation: Any) -> bool:
    return dataclasses.is_dataclass(annotation) and hasattr(annotation, "__pydantic_fields__")


def _unwrap(annotation: Any, metadata: Any = ()) -> tuple[Any, list[Any], bool]:
    """``(type, metadata, optional)`` of ``annotation`` without ``Annotated`` and ``| None``."""
    metadata, optional = list(metadata), False
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            metadata += extra
        elif origin in (Union, UnionType) and type(None) in get_args(annotation):
            optional = True
            (annotation,) = (a for a in get_args(annotation) if a is not type(None))
        else:
            return annotation, metadata, optional
