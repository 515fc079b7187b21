"""Constrained parameter types: strict validation, one-line errors naming the parameter."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from annotated_types import Ge, Interval

from orthobench.config.params import (
    MAX_COUNT,
    Count,
    Kernel,
    KernelEnsemble,
    NonNegativeFloat,
    Probability,
    ThetaEstimatorName,
    check_value,
    is_constrained,
)
from orthobench.exceptions import ConfigError


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (Count, 1),
        (Count, MAX_COUNT),
        (Annotated[Count, Ge(4)], 4),
        (NonNegativeFloat, 0),  # an int is a float
        (NonNegativeFloat, 2.5),
        (Probability, 1.0),
        (Kernel, "rbf-iso"),
        (KernelEnsemble, "linear"),
        (KernelEnsemble, ["rbf-iso", "matern52-ard"]),
        (ThetaEstimatorName, "orth-shrink+rb@qmc"),
        (Literal["a", "b"], "b"),
    ],
)
def test_good_values_pass(annotation, value):
    check_value(annotation, value, field="p")


@pytest.mark.parametrize(
    ("annotation", "value", "field", "reason"),
    [
        (Count, 0, "p", "must be greater than or equal to 1, but got int 0."),
        (Count, 10**18, "p", f"must be less than or equal to {MAX_COUNT}, but got int"),
        (Count, "3", "p", "must be a valid integer, but got str '3'."),  # strict: no coercion
        (Count, True, "p", "must be a valid integer"),
        (Annotated[Count, Ge(4)], 2, "p", "greater than or equal to 4"),
        (NonNegativeFloat, -1, "p", "greater than or equal to 0, but got int -1."),
        (NonNegativeFloat, float("nan"), "p", "must be a finite number, but got float nan."),
        (NonNegativeFloat, float("inf"), "p", "must be a finite number"),
        (Probability, 1.5, "p", "less than or equal to 1"),
        (Probability, float("nan"), "p", "must be a finite number, but got float nan."),
        (Annotated[float, Interval(gt=0.0, lt=1.0)], float("nan"), "p", "must be a finite number"),
        (Kernel, "nope", "p", "Unknown kernel 'nope'; known: rbf-iso"),
        (KernelEnsemble, ["rbf-iso", "nope"], "p[1]", "Unknown kernel 'nope'"),
        (KernelEnsemble, [], "p", "must name at least one kernel"),
        (ThetaEstimatorName, "bogus", "p", "unknown estimator 'bogus'"),
        (Literal["a", "b"], "c", "p", "must be 'a' or 'b', but got str 'c'."),
        (Annotated[list[Probability], Ge(0)], [0.5, 2.0], "p[1]", "less than or equal to 1"),
    ],
)
def test_bad_values_raise_one_line_with_the_field(annotation, value, field, reason):
    with pytest.raises(ConfigError) as info:
        check_value(annotation, value, field="p")
    assert info.value.field == field and reason in info.value.reason
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_only_annotated_and_literal_types_are_constraints():
    assert is_constrained(Count) and is_constrained(Literal["a"])
    assert not is_constrained(int) and not is_constrained("Count") and not is_constrained("")


def test_a_type_pydantic_cannot_validate_accepts_every_value():
    class Opaque:
        pass

    check_value(Annotated[Opaque, "doc"], object(), field="p")
