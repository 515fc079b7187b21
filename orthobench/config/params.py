"""Constrained parameter types: the values a task or optimizer parameter accepts.

A factory states them in its signature, as ``typing.Annotated`` types (bounds from
``annotated_types``, names checked by the parsers of :mod:`orthobench.config.names`) or
``Literal`` names::

    def __init__(self, dim, *, theta_samples: Annotated[Count, Ge(4)] = 512, kernel: Kernel = ...)

The registry validates each suite value against its parameter's type with pydantic, strictly
(no coercion of ``"3"`` to ``3``), before anything runs (:meth:`orthobench.registry.Registry.check_params`),
so a bad value is a one-line error naming the parameter, not a failure of every cell. Only
``Annotated`` and ``Literal`` annotations are validated this way; a plain ``int`` or ``float`` is
only checked to match the type of its default. A validator of ours inside an ``Annotated`` type
raises a :class:`~orthobench.exceptions.ConfigError` whose field is relative to the parameter
(``""``, or ``"[i]"`` for a list item). Rules that tie several parameters together are the
factory's ``check_params`` (:meth:`orthobench.optimizers.base.Optimizer.check_params`), which the
registry runs on the resolved parameters once each value has passed its type;
:func:`check_even_budgets` states one of them here, where the torch-free suite layer can use it
too.

Example:
    >>> from pydantic import TypeAdapter
    >>> TypeAdapter(Count).validate_python(512, strict=True)
    512
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from functools import partial
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Interval
from pydantic import AfterValidator, AllowInfNan, PydanticUserError, TypeAdapter, ValidationError

from orthobench.config import names
from orthobench.exceptions import ConfigError, show_value

__all__ = [
    "MAX_COUNT",
    "Count",
    "Kernel",
    "KernelEnsemble",
    "NonNegativeCount",
    "NonNegativeFloat",
    "PositiveFloat",
    "Probability",
    "ThetaEstimatorName",
    "check_even_budgets",
    "check_kernels",
    "check_value",
    "is_constrained",
    "is_integer",
]

#: The largest count a parameter takes (sample sizes, restarts, candidates): a bound that turns
#: a mistyped ``10**18`` into an error at load time instead of a ``MemoryError`` in every cell.
MAX_COUNT = 2**16

#: A count in ``[1, MAX_COUNT]``; ``Annotated[Count, Ge(4)]`` raises the minimum.
Count = Annotated[int, Interval(ge=1, le=MAX_COUNT)]

#: A count in ``[0, MAX_COUNT]`` (0 often means "choose automatically").
NonNegativeCount = Annotated[int, Interval(ge=0, le=MAX_COUNT)]

#: A finite float ``>= 0`` (NaN and infinity are refused).
NonNegativeFloat = Annotated[float, Ge(0.0), AllowInfNan(False)]

#: A finite float ``> 0``.
PositiveFloat = Annotated[float, Gt(0.0), AllowInfNan(False)]

#: A float in ``[0, 1]``.
Probability = Annotated[float, Interval(ge=0.0, le=1.0)]


def check_kernels(value: str | list[str]) -> str | list[str]:
    """``value`` if it is a kernel name or a non-empty list of them (an ensemble).

    Raises:
        UnknownNameError: for an unknown name, with the field ``[i]`` (its place in a list) or
            ``""``, relative to the parameter.
        ConfigError: for an empty list.
    """
    kernels = [value] if isinstance(value, str) else value
    if not kernels:
        raise ConfigError("", "must name at least one kernel, but got [].")
    for i, kernel in enumerate(kernels):
        names.check_kernel(kernel, field="" if isinstance(value, str) else f"[{i}]")
    return value


#: A GP kernel name of :data:`orthobench.config.names.KERNELS`.
Kernel = Annotated[str, AfterValidator(partial(names.check_kernel, field=""))]

#: A kernel name or a non-empty list of them (one ensemble member each).
KernelEnsemble = Annotated[str | list[str], AfterValidator(check_kernels)]

#: An estimator name ``<base>[+rb][@sampling]`` (:func:`orthobench.config.names.parse_theta_estimator`).
ThetaEstimatorName = Annotated[str, AfterValidator(partial(names.parse_theta_estimator, field=""))]


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer (a numpy one too) and not a bool, which Python counts as
    one: the check of a count passed from Python rather than validated from a suite."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_constrained(annotation: Any) -> bool:
    """Whether ``annotation`` states values to validate: an ``Annotated`` or ``Literal`` type, or
    a union with one (``Annotated[Count, Ge(4)] | None``)."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return any(is_constrained(arg) for arg in get_args(annotation))
    return origin in (Annotated, Literal)


def check_value(annotation: Any, value: Any, *, field: str) -> None:
    """Validate ``value`` against a constrained ``annotation`` (strictly, without coercion).

    An annotation pydantic cannot build a validator for (a plugin's own class in ``Annotated``)
    accepts every value.

    Raises:
        ConfigError: with ``field`` (and the index of a bad list item, ``field[i]``) and the rule,
            e.g. ``must be greater than or equal to 4, but got int 0.``

    Example:
        >>> check_value(Annotated[Count, Ge(4)], 2, field="theta_samples")
        Traceback (most recent call last):
        ...
        orthobench.exceptions.ConfigError: theta_samples: must be greater than or equal to 4, but got int 2.
    """
    try:
        adapter = TypeAdapter(annotation)
    except PydanticUserError:
        return
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = field + "".join(f"[{i}]" for i in first["loc"] if isinstance(i, int))
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, ConfigError):  # a validator's own message, its field relative
            raise ConfigError(where + cause.field, cause.reason) from None
        rule = first["msg"].replace("Input should be", "must be", 1)
        if isinstance(bad := first.get("input"), float) and math.isnan(bad):
            # NaN fails every comparison: an interval's first bound named it ("less than 1").
            rule = "must be a finite number"
        raise ConfigError(where, f"{rule}, but got {show_value(value)}.") from None


def check_even_budgets(estimator: names.ThetaEstimator, budgets: Mapping[str, int | None]) -> None:
    """Every budget of ``budgets`` that draws for ``estimator`` (``None``: draws none) is even
    if its equal-weight draws are antithetic: they come in pairs ``z, -z``. The ``antithetic``
    point set needs none: it takes the largest even count within its budget.

    Raises:
        ConfigError: with the name of the first odd budget as the field.

    Example:
        >>> check_even_budgets(names.parse_theta_estimator("orth@antithetic"), {"S": 33})
        Traceback (most recent call last):
        ...
        orthobench.exceptions.ConfigError: S: must be even: estimator 'orth@antithetic' draws antithetic pairs, but got 33.
    """
    if estimator.sampling != "antithetic" or estimator.point_set:
        return
    for field, budget in budgets.items():
        if budget is not None and budget % 2:
            raise ConfigError(
                field,
                f"must be even: estimator {estimator.name!r} draws antithetic pairs, but got "
                f"{budget}.",
            )
