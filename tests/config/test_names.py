"""Names and the estimator-name grammar: one source, matched by the model modules, typed errors."""

from __future__ import annotations

import itertools
import pickle

import pytest

from orthobench.config import names
from orthobench.exceptions import ConfigError, RegistryError, UnknownNameError


def test_model_modules_use_exactly_these_names():
    from orthobench.estimators import ESTIMATORS
    from orthobench.pointsets import POINT_SETS
    from orthobench.surrogates.gp import KERNELS
    from orthobench.surrogates.laplace import THETA_SAMPLING

    assert tuple(ESTIMATORS) == names.ESTIMATORS
    assert tuple(POINT_SETS) == names.POINT_SETS
    assert KERNELS == names.KERNELS
    assert THETA_SAMPLING == names.THETA_SAMPLING


def test_defaults_are_distinct_and_parse():
    theta = names.parse_theta_estimator(names.DEFAULT_THETA_ESTIMATOR)
    assert (theta.base, theta.rb, theta.point_set) == ("qmc-owen", True, True)
    assert names.DEFAULT_TPE_ESTIMATOR in names.ESTIMATORS
    assert names.DEFAULT_TPE_ESTIMATOR == "orth-shrink" != names.DEFAULT_THETA_ESTIMATOR


def _all_theta_names() -> list[str]:
    plain = [
        f"{b}{rb}@{s}"
        for b, rb, s in itertools.product(names.ESTIMATORS, ("", "+rb"), names.THETA_SAMPLING)
    ]
    return plain + [f"{b}{rb}" for b in names.POINT_SETS for rb in ("", "+rb")]


@pytest.mark.parametrize("name", _all_theta_names())
def test_every_name_parses_and_its_canonical_name_round_trips(name):
    parsed = names.parse_theta_estimator(name)
    assert parsed.rb == name.split("@")[0].endswith("+rb")
    assert parsed.point_set == (parsed.base in names.POINT_SETS)
    assert names.parse_theta_estimator(parsed.name) == parsed
    assert names.parse_estimator(name) == parsed
    if parsed.sampling == "iid" and not parsed.point_set:
        assert "@" not in parsed.name  # iid is the default and is left out


@pytest.mark.parametrize(
    ("name", "kind", "bad"),
    [
        ("nope", "estimator", "nope"),
        ("orth+RB", "estimator", "orth+RB"),
        ("orth@sobol", "sampling", "sobol"),
    ],
)
def test_unknown_names_carry_kind_name_known_and_field(name, kind, bad):
    with pytest.raises(UnknownNameError) as info:
        names.parse_theta_estimator(name, field="estimators[2]")
    err = info.value
    assert (err.kind, err.name, err.field) == (kind, bad, "estimators[2]")
    assert err.known == (
        names.THETA_SAMPLING if kind == "sampling" else names.ESTIMATORS + names.POINT_SETS
    )
    assert str(err).startswith(f"estimators[2]: unknown {kind} {bad!r} in {name!r}")
    # One type for every caller: registries catch RegistryError, argument checks ValueError.
    assert isinstance(err, RegistryError) and isinstance(err, ValueError)


def test_point_sets_take_no_sampling_suffix():
    with pytest.raises(ConfigError, match="takes no '@sampling', but got 'sr3@qmc'") as info:
        names.parse_theta_estimator("sr3@qmc")
    assert not isinstance(info.value, UnknownNameError) and info.value.field == "estimator"


@pytest.mark.parametrize("name", [*names.FUNCTION_SAMPLE_ESTIMATORS, *names.TPE_ESTIMATORS])
def test_probe_parser_accepts_its_other_estimators_without_suffix(name):
    assert names.parse_estimator(name) == (name, "", False)
    assert names.parse_estimator(name).name == name
    with pytest.raises(ConfigError, match="takes no '@sampling' suffix"):
        names.parse_estimator(f"{name}@qmc")
    with pytest.raises(UnknownNameError):
        names.parse_theta_estimator(name)


@pytest.mark.parametrize("name", ["nope", "orth@sobol", "sr3@qmc", "qlogei+rb"])
def test_probe_parser_lists_the_other_estimators_on_a_miss(name):
    with pytest.raises(
        ConfigError, match="Other estimators: qlogei, mc-tpe, orthobo-tpe.$"
    ) as info:
        names.parse_estimator(name, field="estimators[0]")
    assert info.value.field == "estimators[0]"
    if isinstance(info.value, UnknownNameError) and info.value.kind == "estimator":
        assert set(info.value.known) >= {"qlogei", "mc-tpe", "orthobo-tpe", "orth-shrink", "sr3"}


def test_check_kernel():
    for kernel in names.KERNELS:
        assert names.check_kernel(kernel) == kernel
    with pytest.raises(UnknownNameError, match=r"^kernels\[1\]: Unknown kernel 'cosine'") as info:
        names.check_kernel("cosine", field="kernels[1]")
    assert info.value.known == names.KERNELS


def test_errors_survive_pickling_with_their_attributes():
    for make in (
        lambda: names.parse_theta_estimator("orth@sobol", field="estimator"),
        lambda: names.parse_theta_estimator("sr3@iid"),
    ):
        with pytest.raises(ConfigError) as info:
            make()
        clone = pickle.loads(pickle.dumps(info.value))
        assert type(clone) is type(info.value) and str(clone) == str(info.value)
        assert vars(clone) == vars(info.value)


@pytest.mark.parametrize("spec", ["auto", "cpu", "cuda", "cuda:0", "cuda:127"])
def test_device_specs_torch_parses_are_accepted(spec):
    assert names.check_device(spec) == spec


@pytest.mark.parametrize(
    "spec",
    ["gpu", "cuda:", "cuda:01", "cuda:128", "cuda:1\n", "cuda:\u0663", "cuda:" + "9" * 20, 0],
)
def test_device_specs_torch_would_misread_or_refuse_are_config_errors(spec):
    with pytest.raises(ConfigError, match="cuda:N") as info:
        names.check_device(spec, field="device")
    assert info.value.field == "device"
