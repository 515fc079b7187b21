"""Sections declared once: the field declaration gives the checks, the messages and the YAML keys."""

from __future__ import annotations

import dataclasses
import pickle
from functools import partial
from typing import Annotated

import pytest
from annotated_types import Gt, Interval, Le
from pydantic import AfterValidator, Field, model_validator

from orthobench.config import names
from orthobench.config.schema import Shorthand, Unit, float_text_hint, from_yaml, section
from orthobench.config.strict_yaml import load_yaml
from orthobench.exceptions import ConfigError, UnknownNameError


@section
class Part:
    kernel: Annotated[str, AfterValidator(partial(names.check_kernel, field=""))] = Field(
        description="a GP kernel name"
    )


@section
class Outer:
    count: Annotated[int, Interval(ge=2, le=9)] = Field(description="a small count")
    sizes: Annotated[
        tuple[Annotated[int, Interval(ge=1, le=5)], ...],
        Shorthand(lambda v: [v] if isinstance(v, int) else v),
    ] = Field((1,), min_length=1, description="sizes")
    limit: Annotated[float, Gt(0), Le(10.0), Unit("seconds")] | None = Field(
        None, description="a time limit"
    )
    part: Part | None = Field(None, description="an part section")
    origin: str = Field("", exclude=True, description="set by the reader")

    @model_validator(mode="after")
    def _check_rules(self) -> Outer:
        if len(self.sizes) > self.count:
            raise ConfigError("sizes", f"must hold at most `count` = {self.count} sizes.")
        return self


@pytest.mark.parametrize(
    ("kwargs", "field", "reason"),
    [
        ({}, "count", "missing required field (a small count)."),
        ({"count": 1}, "count", "must be >= 2, but got 1."),
        ({"count": 10**30}, "count", "must be <= 9, but got int 1000000000000000000000000000000."),
        ({"count": "3"}, "count", "must be an integer >= 2, but got str '3'."),
        (
            {"count": 3, "sizes": [1]},
            "sizes",
            "must be a tuple of integers >= 1, but got list [1].",
        ),
        ({"count": 3, "sizes": ()}, "sizes", "must not be empty; give at least one of the sizes."),
        ({"count": 3, "sizes": (1, 6)}, "sizes[1]", "must be <= 5, but got int 6."),
        ({"count": 3, "limit": 0}, "limit", "must be > 0 and <= 10 seconds, but got int 0."),
        ({"count": 3, "limit": "1e4"}, "limit", "must be a number of seconds > 0, but got str"),
        ({"count": 3, "part": {}}, "part", "must be a Part or None, but got dict {}."),
        (
            {"count": 3, "other": 1},
            "other",
            "unknown key; allowed keys: count, sizes, limit, part.",
        ),
        ({"count": 2, "sizes": (1, 2, 3)}, "sizes", "must hold at most `count` = 2 sizes."),
    ],
)
def test_a_section_checks_itself_with_the_messages_of_its_declaration(kwargs, field, reason):
    with pytest.raises(ConfigError) as info:
        Outer(**kwargs)
    assert info.value.field == field and info.value.reason.startswith(reason), info.value


def test_a_validator_error_keeps_its_type_with_the_field_moved():
    with pytest.raises(UnknownNameError) as info:
        Part(kernel="cosine")
    assert (info.value.kind, info.value.name, info.value.field) == ("kernel", "cosine", "kernel")


def test_from_yaml_expands_forms_nests_sections_and_names_the_yaml_path():
    outer = from_yaml(Outer, {"count": 3, "sizes": 4, "part": {"kernel": "rbf-iso"}}, origin="f")
    assert outer == Outer(count=3, sizes=(4,), part=Part(kernel="rbf-iso"), origin="f")
    with pytest.raises(UnknownNameError) as info:
        from_yaml(Outer, {"count": 3, "part": {"kernel": "cosine"}}, "top")
    assert info.value.field == "top.part.kernel"
    with pytest.raises(ConfigError, match=r"^part.kernel: missing required field \(a GP kernel"):
        from_yaml(Outer, {"count": 3, "part": {}})
    with pytest.raises(ConfigError, match=r"^sizes: must be a non-empty list of sizes, but got"):
        from_yaml(Outer, {"count": 3, "sizes": "x"})
    # An excluded field is set by the reader, never by the file.
    with pytest.raises(ConfigError, match=r"^origin: unknown key; allowed keys: count, sizes,"):
        from_yaml(Outer, {"count": 3, "origin": "f"})
    with pytest.raises(ConfigError, match=r"^\(top level\): must be a mapping, but got list"):
        from_yaml(Outer, [])


def test_sections_are_frozen_stdlib_dataclasses_that_pickle():
    outer = Outer(count=3, part=Part(kernel="linear"))
    assert dataclasses.asdict(outer)["part"] == {"kernel": "linear"}
    assert dataclasses.replace(outer, count=4).count == 4
    with pytest.raises(ConfigError, match="count: must be >= 2"):
        dataclasses.replace(outer, count=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        outer.count = 5  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(outer)) == outer


@pytest.mark.parametrize("text", ["5e3", "2e-1", "-1e4", "+2E-3", "1.5e3", "1.e3", "7E+2"])
def test_the_exponent_hint_suggests_the_number_the_user_wrote(text):
    """It said "write 1.0e+4" whatever the value: ``beta: 2e-1`` was told to become 10000."""
    suggested = float_text_hint(text).rpartition("write ")[2].rstrip(")")
    assert load_yaml(f"x: {suggested}") == {"x": float(text)}
