"""Registry: built-ins, import-path plugins, entry points, clear errors."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from orthobench import registry as registry_module
from orthobench.exceptions import RegistryError, UnknownNameError
from orthobench.registry import OPTIMIZERS, TASKS, Registry


def test_import_path_plugins_resolve_with_their_params(plugin):
    task = TASKS.create(f"{plugin}:make_sphere", dim=3)
    assert task.dim == 3
    entry = OPTIMIZERS.resolve(f"{plugin}:CenterOptimizer")
    assert entry.params == {"jitter": 0.1}
    with pytest.raises(RegistryError, match="no parameter 'jiter'"):
        OPTIMIZERS.check_params(f"{plugin}:CenterOptimizer", {"jiter": 1.0})


def test_entry_point_plugins_are_found(plugin, monkeypatch):
    ep = EntryPoint(name="my-sphere", value=f"{plugin}:make_sphere", group="orthobench.tasks")
    monkeypatch.setattr(
        registry_module, "entry_points", lambda group: [ep] if group == "orthobench.tasks" else []
    )
    assert "my-sphere" in TASKS.names()
    assert TASKS.create("my-sphere").dim == 2


def test_unknown_name_lists_known_names_and_how_to_register():
    with pytest.raises(UnknownNameError) as info:
        TASKS.resolve("rosenbrock")
    err = info.value
    assert (err.kind, err.name, err.field) == ("task", "rosenbrock", "name")
    assert err.known == tuple(TASKS.names()) and "hartmann6" in err.known
    assert "module:attr" in err.reason and isinstance(err, RegistryError)


@pytest.mark.parametrize(
    ("params", "field", "fragment"),
    [
        ({"jiter": 1.0}, "params.jiter", "no parameter 'jiter'"),
        ({"jitter": "big"}, "params.jitter", "must be float"),
    ],
)
def test_parameter_errors_name_the_parameter_field(plugin, params, field, fragment):
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params(f"{plugin}:CenterOptimizer", params)
    assert info.value.field == field and fragment in info.value.reason
    assert not isinstance(info.value, UnknownNameError)


def test_missing_required_parameters_are_a_params_error():
    reg = Registry("task", "orthobench.test-group", {})
    reg.register("needs", lambda size, scale=1.0: None)
    with pytest.raises(RegistryError, match=r"needs parameter\(s\): size") as info:
        reg.check_params("needs", {"scale": 2.0})
    assert info.value.field == "params"


@pytest.mark.parametrize(
    "path", ["nosuchmodule_xyz:f", "orthobench.registry:nothing", "justaname:"]
)
def test_bad_import_paths_raise_registry_errors(path):
    with pytest.raises(RegistryError) as info:
        TASKS.resolve(path)
    assert info.value.field == "name" and path in info.value.reason


def test_duplicate_registration_is_rejected():
    reg = Registry("task", "orthobench.test-group", {"a": "x:y"})
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("a", lambda: None)
    reg.register("b", lambda: None)
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("b", lambda: None)


def test_optimizer_params_include_forwarded_base_params():
    params = OPTIMIZERS.resolve("ucb").params
    assert params["beta"] == 0.2 and params["function_samples"] == 512
    assert "seed" not in params and "dim" not in params


def test_list_values_are_accepted_where_the_annotation_allows_them():
    OPTIMIZERS.check_params("orthobo", {"kernel": ["rbf-iso", "matern52-ard"]})
    with pytest.raises(RegistryError, match="must be str"):
        OPTIMIZERS.check_params("qlogei", {"kernel": ["rbf-iso"]})
