"""The strict YAML loader: numbers in another base than 10 are refused, the rest reads as PyYAML's
safe loader reads it."""

from __future__ import annotations

import pytest
import yaml

from orthobench.config.strict_yaml import load_yaml, yaml_error_parts


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: 010", "'010' is octal in YAML 1.1, so 8: write a decimal integer"),
        ("a: -010", "'-010' is octal in YAML 1.1, so -8"),
        ("a: 00", "'00' is octal in YAML 1.1, so 0"),
        ("a: 1:30", "'1:30' is base 60 in YAML 1.1, so 90: write a decimal integer"),
        ("a: 1:30.5", "'1:30.5' is base 60 in YAML 1.1, so 90.5: write a decimal number"),
        ("a: 0x10", "'0x10' is hexadecimal in YAML 1.1, so 16"),
        ("a: 0b11", "'0b11' is binary in YAML 1.1, so 3"),
        ("a: [1, !!int '010']", "'010' is octal in YAML 1.1, so 8"),
    ],
)
def test_a_number_in_another_base_is_refused_at_its_place(text, problem):
    """``budget: 010`` was 8 and ``1:30`` 90, silently."""
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml(text)
    where, message = yaml_error_parts(raised.value)
    assert where is not None and where.startswith("line 1, column ")
    assert message.startswith(problem) and message.endswith(", or quote it for a string")


def test_other_scalars_read_as_the_safe_loader_reads_them():
    text = (
        "ints: [0, -0, 7, -3, +4, 1_000]\nfloats: [0.5, 010.5, 1.5e+3, .inf]\n"
        "strings: [0e0, 0o10, '010', '1:30', 12:30:00x, 08]\nflags: [true, no]\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["strings"] == ["0e0", "0o10", "010", "1:30", "12:30:00x", "08"]
