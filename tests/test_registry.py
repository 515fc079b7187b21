"""Registry: built-ins, import-path plugins, entry points, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest
from click.testing import CliRunner

from orthobench import registry as registry_module
from orthobench.cli import cli
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
        ({"jitter": "big"}, "params.jitter", "must be float (default 0.1), but got str 'big'."),
        # YAML 1.1 reads 1e-2 (no '.') as text: the message says so, as for a suite's own fields.
        (
            {"jitter": "1e-2"},
            "params.jitter",
            "but got str '1e-2' (YAML reads an exponent without a '.' and a sign as text",
        ),
    ],
)
def test_parameter_errors_name_the_parameter_field(plugin, params, field, fragment):
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params(f"{plugin}:CenterOptimizer", params)
    assert info.value.field == field and fragment in info.value.reason
    assert not isinstance(info.value, UnknownNameError)


def test_missing_required_parameters_are_a_params_error():
    reg = Registry("task", "orthobench.test-group", {}, base="orthobench.tasks.base:Task")
    reg.register("needs", lambda size, scale=1.0: None)
    with pytest.raises(RegistryError, match=r"needs parameter\(s\): size") as info:
        reg.check_params("needs", {"scale": 2.0})
    assert info.value.field == "params"


def test_a_required_parameter_is_checked_against_its_plain_annotation():
    """A required parameter has no default to take a type from: its annotation says it."""

    def needs(size: int, width: float, rule: str, anything) -> None: ...

    reg = Registry("task", "orthobench.test-group", {}, base="orthobench.tasks.base:Task")
    reg.register("needs", needs)
    good = {"size": 3, "width": 2, "rule": "x", "anything": "y"}
    assert reg.check_params("needs", good).name == "needs"
    for key, value, fragment in [
        ("width", "x", "'width' must be float (annotated float), but got str 'x'."),
        ("size", 2.5, "'size' must be int (annotated int), but got float 2.5."),
        ("rule", 1, "'rule' must be str (annotated str), but got int 1."),
    ]:
        with pytest.raises(RegistryError) as info:
            reg.check_params("needs", {**good, key: value})
        assert info.value.field == f"params.{key}" and fragment in info.value.reason


@pytest.mark.parametrize(
    "path",
    ["nosuchmodule_xyz:f", "orthobench.registry:nothing", "justaname:", "..tasks:x", "a-b:c"],
)
def test_bad_import_paths_raise_registry_errors(path):
    with pytest.raises(RegistryError) as info:
        TASKS.resolve(path)
    assert info.value.field == "name" and path in info.value.reason


def test_duplicate_registration_is_rejected():
    reg = Registry("task", "orthobench.test-group", {"a": "x:y"}, base="orthobench.tasks.base:Task")
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


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("numpy:ndarray", "the class numpy.ndarray"),
        ("orthobench.seeding:derive_seed", "unmarked callable"),
        ("orthobench.seeding:_SEED_BITS", "a int"),
    ],
)
def test_import_paths_must_name_a_task_class_or_a_marked_factory(name, what):
    with pytest.raises(RegistryError, match=f"{what}.*not a Task subclass") as err:
        TASKS.check_params(name, {})
    assert err.value.field == "name"


def test_a_suite_naming_os_system_runs_nothing(write_suite, tmp_path):
    marker = tmp_path / "pwned"
    suite = write_suite(
        f"""
        name: evil
        budget: 1
        tasks: [{{name: "os:system", params: {{command: "touch {marker}"}}}}]
        optimizers: [sobol]
        """
    )
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and not marker.exists()
    assert result.output.count("\n") == 1 and "tasks[0].name" in result.output
    assert "'os' of Python's standard library" in result.output


@pytest.mark.parametrize(
    ("name", "module", "fragment"),
    [
        ("this:x", "this", "'this' of Python's standard library"),  # prints the Zen of Python
        ("antigravity:x", "antigravity", "standard library"),  # opens a web browser
        # Not in sys.stdlib_module_names, but in its folder: runs the regression suite on import
        ("test.autotest:x", "test.autotest", "'test.autotest' of Python's standard library"),
        ("venv.__main__:X", "venv.__main__", "private module"),  # builds a virtualenv in cwd
        ("orthobench.__main__:cli", "orthobench.__main__", "private module"),  # runs the CLI
        ("orthobench.tasks.__init__:x", "orthobench.tasks.__init__", "private module"),
        ("userpkg._hidden:Task", "userpkg", "private module"),  # not even its package
    ],
)
def test_modules_that_may_act_on_import_are_refused_before_any_import(
    name, module, fragment, capsys, tmp_path, monkeypatch
):
    (tmp_path / "userpkg").mkdir()
    (tmp_path / "userpkg" / "__init__.py").write_text("print('imported')\n")
    (tmp_path / "userpkg" / "_hidden.py").write_text("print('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match=fragment) as info:
        TASKS.resolve(name)
    assert info.value.field == "name" and name in info.value.reason
    assert module not in sys.modules and capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("files", "name", "raised"),
    [
        ({"exits.py": "import sys\nsys.exit(3)\n"}, "exits:Task", "SystemExit: 3"),
        ({"raises.py": "raise ImportError('needs libfoo')\n"}, "raises:Task", "ImportError"),
        # find_spec of a submodule imports its package first
        ({"exitpkg/__init__.py": "raise SystemExit('bye')\n"}, "exitpkg.sub:X", "SystemExit: bye"),
    ],
)
def test_a_module_that_raises_or_exits_at_import_is_one_registry_error(
    tmp_path, monkeypatch, files, name, raised
):
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(exist_ok=True)
        (tmp_path / relative).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError) as info:
        TASKS.resolve(name)
    assert info.value.field == "name" and f"{name!r}: {raised}" in info.value.reason


def test_a_suite_whose_plugin_calls_sys_exit_gets_one_line_and_exit_code_2(
    tmp_path, write_suite, monkeypatch
):
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    suite = write_suite("name: x\nbudget: 1\ntasks: [exits:Task]\noptimizers: [sobol]\n")
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "tasks[0].name" in result.output and "SystemExit: 0" in result.output


def test_ctrl_c_while_a_plugin_module_imports_is_not_an_import_error(tmp_path, monkeypatch):
    """The reported bug: a Ctrl-C while a suite's plugin module imported (a slow import of torch,
    say) became 'Cannot import module ...: KeyboardInterrupt.', exit 2. It propagates, by an
    import path and by an entry point alike."""
    (tmp_path / "stops.py").write_text("raise KeyboardInterrupt\n")  # as the signal handler does
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        TASKS.resolve("stops:Task")
    ep = EntryPoint(name="stops", value="stops:Task", group="orthobench.tasks")
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [ep])
    with pytest.raises(KeyboardInterrupt):
        TASKS.resolve("stops")


def test_ctrl_c_while_a_suites_plugin_imports_exits_130(tmp_path, write_suite, monkeypatch):
    (tmp_path / "stops.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    suite = write_suite("name: x\nbudget: 1\ntasks: [stops:Task]\noptimizers: [sobol]\n")
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out")])
    assert result.exit_code == 130
    assert result.output.splitlines() == [
        "orthobench: interrupted; what is stored stays stored: rerun the same command to resume."
    ]


def test_marked_factories_and_subclasses_load_by_import_path(plugin):
    assert TASKS.resolve(f"{plugin}:make_sphere").params["dim"] == 2
    assert TASKS.resolve(f"{plugin}:Mixed").factory.__name__ == "Mixed"
    assert OPTIMIZERS.resolve(f"{plugin}:CenterOptimizer").params["jitter"] == 0.1
    with pytest.raises(RegistryError, match="not an Optimizer subclass"):
        OPTIMIZERS.resolve(f"{plugin}:make_sphere")  # a task factory is no optimizer


def test_a_missing_attribute_names_the_file_it_was_looked_up_in(plugin):
    with pytest.raises(RegistryError, match=r"userplugin.py\) has no attribute 'Nope'"):
        TASKS.resolve(f"{plugin}:Nope")


SUITE_NEXT_TO_MODULE = """
name: local
seeds: 2
n_init: 2
budget: 1
tasks: [{name: "mytasks:Quadratic", label: quadratic}, hartmann6]
optimizers: [sobol]
"""

# A module named like an installed package that the run imports: the runner imports botorch
# after loading the suite (for hartmann6), a spawned worker imports all of these afresh.
SHADOWING_MODULE = """
import pathlib
pathlib.Path({marker!r}).write_text("executed")
raise SystemExit("a module next to the suite shadowed an installed package")
"""

LOCAL_TASK = """
import numpy as np
from orthobench import Evaluation, SearchSpace, Task


class Quadratic(Task):
    optimal_value = 0.0

    def __init__(self):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))

    def evaluate(self, x, *, seed, device):
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))
"""


@pytest.mark.slow  # 5 s per worker count (a process pool imports the suite's module)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_module_next_to_the_suite_resolves_and_shadows_no_installed_one(tmp_path, workers):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "mytasks.py").write_text(LOCAL_TASK)
    (folder / "suite.yaml").write_text(SUITE_NEXT_TO_MODULE)
    for shadowed in ("botorch", "yaml", "scipy", "pyarrow"):
        marker = tmp_path / f"{shadowed}-executed"
        (folder / f"{shadowed}.py").write_text(SHADOWING_MODULE.format(marker=str(marker)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-m", "orthobench", "run", str(folder / "suite.yaml"), "-q"]
        + ["-o", str(tmp_path / "out"), "--workers", workers],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "4 run, 0 already stored, 0 failed" in result.stdout
    assert not list(tmp_path.glob("*-executed"))


def test_the_public_load_suite_finds_a_module_next_to_the_suite(tmp_path):
    """``orthobench.load_suite(path)`` refused what ``orthobench run path`` loads ("not next to
    the suite file", which it had not searched), so ``run_suite(load_suite(path))`` failed."""
    (tmp_path / "mytasks.py").write_text(LOCAL_TASK)
    (tmp_path / "suite.yaml").write_text(SUITE_NEXT_TO_MODULE)
    code = (
        "import sys, orthobench; "
        f"suite = orthobench.load_suite({str(tmp_path / 'suite.yaml')!r}); "
        "print([task.label for task in suite.tasks], sys.path[-1])"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['quadratic',", "'hartmann6']", str(tmp_path.resolve())]


def test_a_second_suites_same_named_module_is_refused_not_swapped_for_the_first(tmp_path):
    """Two suites of one process, each with its own ``plug.py``: the second ran the first's
    module (its Hartmann6 for the second's Ackley8), without a word."""
    for folder, function in (("a", "hartmann6"), ("b", "ackley8")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "plug.py").write_text(
            "from orthobench.registry import task_factory\n"
            f"from orthobench.tasks.synthetic import {function}\n\n\n"
            f"@task_factory\ndef mytask(noise_std: float = 0.0):\n    return {function}()\n"
        )
        (tmp_path / folder / "suite.yaml").write_text(
            f"name: s{folder}\nbudget: 0\nn_init: 2\n"
            "tasks: [{name: 'plug:mytask', label: t}]\noptimizers: [sobol]\n"
        )
    code = (
        "import orthobench\n"
        f"orthobench.load_suite({str(tmp_path / 'a' / 'suite.yaml')!r})\n"
        f"orthobench.load_suite({str(tmp_path / 'b' / 'suite.yaml')!r})\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode != 0
    assert f"tasks[0].name: module 'plug' is imported from {tmp_path / 'a' / 'plug.py'}, not " in (
        result.stderr
    )


def test_what_python_would_not_import_beside_the_suite_is_no_module_beside_it(tmp_path):
    """A folder named like an installed package (not a package: no __init__.py) refused a suite
    naming that package; with plug.py and a plug/ package beside it, the package Python imports
    was taken for another suite's module."""
    folder = tmp_path / "s"
    (folder / "orthobench").mkdir(parents=True)
    (folder / "plug").mkdir()
    for module in (folder / "plug.py", folder / "plug" / "__init__.py"):
        module.write_text(LOCAL_TASK)
    (folder / "suite.yaml").write_text(
        "name: s\nbudget: 0\nn_init: 2\noptimizers: [sobol]\n"
        "tasks: [{name: 'orthobench.tasks.synthetic:hartmann6', label: h}, "
        "{name: 'plug:Quadratic', label: q}]\n"
    )
    code = f"import orthobench; orthobench.load_suite({str(folder / 'suite.yaml')!r})"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr


CONSTRAINED_PLUGIN = """
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from annotated_types import Ge

from orthobench import optimizer_factory, task_factory
from orthobench.config.params import Count, Probability

if TYPE_CHECKING:
    from collections import OrderedDict


@optimizer_factory
def constrained(dim, *, seed, device, dtype, draws: Annotated[Count, Ge(4)] = 8,
                mode: Literal["fast", "slow"] = "fast", weight: float = 1.0,
                budget: Annotated[Count, Ge(4)] | None = None):
    raise NotImplementedError


constrained.min_observations = 3


@task_factory
def typed_for_checkers(p: Probability = 0.5, table: OrderedDict[str, int] | None = None):
    raise NotImplementedError
"""


@pytest.fixture
def constrained_plugin(tmp_path, monkeypatch):
    (tmp_path / "constrainedplugin.py").write_text(CONSTRAINED_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "constrainedplugin"


@pytest.mark.parametrize(
    ("params", "field", "fragment"),
    [
        ({"draws": 2}, "params.draws", "parameter 'draws': must be greater than or equal to 4"),
        ({"draws": 10**9}, "params.draws", "must be less than or equal to 65536"),
        ({"mode": "medium"}, "params.mode", "must be 'fast' or 'slow', but got str 'medium'"),
        # an optional constrained parameter: null or a value of the constrained type
        ({"budget": 2}, "params.budget", "must be greater than or equal to 4, but got int 2"),
        ({"budget": "x"}, "params.budget", "but got str 'x'"),
    ],
)
def test_values_outside_a_constrained_signature_type_are_registry_errors(
    constrained_plugin, params, field, fragment
):
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params(f"{constrained_plugin}:constrained", params)
    assert info.value.field == field and fragment in info.value.reason


def test_plain_annotations_are_only_type_checked_and_min_observations_is_read(
    constrained_plugin,
):
    entry = OPTIMIZERS.check_params(
        f"{constrained_plugin}:constrained",
        {"draws": 4, "mode": "slow", "weight": -1e300, "budget": None},
    )
    assert sorted(entry.constraints) == ["budget", "draws", "mode"]
    assert entry.min_observations == 3
    assert OPTIMIZERS.resolve("orthobo").min_observations == 2
    assert OPTIMIZERS.resolve("sobol").min_observations == 0


def test_an_annotation_that_does_not_evaluate_stays_text_and_the_others_constrain(
    constrained_plugin,
):
    # `OrderedDict` exists only for type checkers: that (string) annotation does not evaluate.
    name = f"{constrained_plugin}:typed_for_checkers"
    entry = TASKS.check_params(name, {"table": None})
    assert list(entry.constraints) == ["p"]
    assert entry.annotations["table"] == "OrderedDict[str, int] | None"
    with pytest.raises(RegistryError, match="less than or equal to 1"):
        TASKS.check_params(name, {"p": 2.0})


@pytest.mark.parametrize(
    ("name", "params", "field", "fragment"),
    [
        ("orthobo", {"kernel": ["rbf-iso", "cosine"]}, "params.kernel[1]", "Unknown kernel"),
        ("orthobo", {"theta_sampling": "sobol"}, "params.theta_sampling", "'iid', 'antithetic'"),
        ("orthobo", {"alpha": 0.0}, "params.alpha", "greater than 0"),
        ("mc-ei", {"theta_samples": 3}, "params.theta_samples", "greater than or equal to 4"),
        ("ucb", {"beta": float("inf")}, "params.beta", "finite number"),
        ("turbo", {"kernel": "linear"}, "params.kernel", "'matern52-ard', but got str 'linear'"),
        ("turbo", {"n_candidates": -1}, "params.n_candidates", "greater than or equal to 0"),
        ("rpr", {"fractions_of_outliers": [0.1, 1.5]}, "params.fractions_of_outliers[1]", "<= 1"),
        ("mc-tpe", {"gamma": 1.0}, "params.gamma", "less than 1"),
        ("orthobo-tpe", {"estimator": "orth-quadratic"}, "params.estimator", "'orth-shrink'"),
        ("tpe-optuna", {"n_ei_candidates": 0}, "params.n_ei_candidates", "greater than or equal"),
    ],
)
def test_builtin_optimizers_declare_their_value_ranges(name, params, field, fragment):
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params(name, params)
    assert info.value.field == field
    assert fragment.replace("<= 1", "less than or equal to 1") in info.value.reason


def test_a_module_that_fails_to_import_is_one_registry_error(tmp_path, monkeypatch):
    (tmp_path / "brokenplugin.py").write_text("raise RuntimeError('no licence server')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match="RuntimeError: no licence server") as info:
        TASKS.resolve("brokenplugin:Task")
    assert info.value.field == "name"


ABSTRACT_PLUGIN = """
from orthobench import Optimizer


class HalfDone(Optimizer):
    \"\"\"Forgot to implement _ask.\"\"\"
"""


@pytest.mark.parametrize(
    ("registry", "name", "missing"),
    [
        (OPTIMIZERS, "orthobench.optimizers.base:Optimizer", "_ask"),
        (OPTIMIZERS, "orthobench.optimizers.gp_base:GPOptimizer", "_ask"),
        (OPTIMIZERS, "orthobench.optimizers.sobol:SobolSearch.__base__", "_ask"),
        (OPTIMIZERS, "halfdoneplugin:HalfDone", "_ask"),
        (TASKS, "orthobench.tasks.base:Task", "evaluate"),
    ],
)
def test_an_abstract_class_is_refused_when_the_suite_loads(
    registry, name, missing, tmp_path, monkeypatch
):
    """An abstract class passed the check (it is a subclass of the base: the base itself) and
    failed only when the run built it."""
    (tmp_path / "halfdoneplugin.py").write_text(ABSTRACT_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match=f"abstract class .*: implement {missing}") as info:
        registry.check_params(name, {})
    assert info.value.field == "name" and name in info.value.reason


def test_what_a_module_raised_at_import_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "multilineimport.py").write_text("raise RuntimeError('first line\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.resolve("multilineimport:X")
    assert "\n" not in str(info.value)
    assert "RuntimeError: first line\\nsecond line" in info.value.reason


RULE_PLUGIN = """
from orthobench import Optimizer, Suggestion


class Ruled(Optimizer):
    @staticmethod
    def check_params(*, width: float, **_):
        if width > 1:
            raise ValueError(f"width={width} is too wide;\\nsee the docs")

    def __init__(self, dim, *, width: float = 0.5, **kwargs):
        super().__init__(dim, **kwargs)

    def _ask(self, n):
        return Suggestion(x=[[0.5] * self.dim] * n)
"""


def test_a_rule_of_a_plugin_is_reported_on_one_line(tmp_path, monkeypatch):
    (tmp_path / "multilinerule.py").write_text(RULE_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params("multilinerule:Ruled", {"width": 2.0})
    assert info.value.field == "params" and "\n" not in str(info.value)
    assert "width=2.0 is too wide" in info.value.reason
