"""Suite validation: every bad suite gives one line naming the file, the field and what is allowed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from orthobench.config.strict_yaml import MAX_DEPTH
from orthobench.exceptions import MESSAGE_LIMIT, ConfigError, SuiteError, UnknownNameError
from orthobench.registry import OPTIMIZERS
from orthobench.suite import (
    DEFAULT_STATE_OPTIMIZER,
    MAX_CELLS,
    MAX_FILE_BYTES,
    MAX_LABEL,
    MAX_SEED,
    MAX_TIMEOUT_S,
    Cell,
    ComponentSpec,
    ProbeSpec,
    Suite,
    load_suite,
)
from tests.helpers import forget_module

PROBE = "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\nprobe:\n  tasks: [levy16]\n"

GOOD = """
name: ok
seeds: [3, 5]
n_init: 4
budget: 2
tasks: [hartmann6, {name: levy16, params: {noise_std: 0.1}, label: levy-noisy}]
optimizers: [sobol, {name: qlogei, params: {function_samples: 16}}]
"""


def test_good_suite_expands_into_cells(write_suite):
    suite = load_suite(write_suite(GOOD))
    cells = suite.cells()
    assert len(cells) == 2 * 2 * 2
    assert {c.seed for c in cells} == {3, 5}
    assert {c.task.label for c in cells} == {"hartmann6", "levy-noisy"}
    assert len({c.id for c in cells}) == len(cells)
    assert cells[0].config_hash != cells[1].config_hash


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [qlogie]\n",
            "optimizers[0].name",
            "Unknown optimizer 'qlogie'",
        ),
        (
            "name: x\nbudget: 1\ntasks: [rosenbrock]\noptimizers: [sobol]\n",
            "tasks[0].name",
            "known: ackley8",
        ),
        (
            "name: x\nbudget: -3\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "budget",
            "must be >= 0",
        ),
        (
            "name: x\nbudget: ten\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "budget",
            "must be an integer",
        ),
        ("name: x\ntasks: [hartmann6]\noptimizers: [sobol]\n", "budget", "missing required field"),
        (
            "name: x\nbudget: 1\nbugdet: 2\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "bugdet",
            "unknown key (did you mean 'budget'?); allowed keys:",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartman6]\noptimizers: [sobol]\n",
            "tasks[0].name",
            "Unknown task 'hartman6' (did you mean 'hartmann6'?); known: ackley8",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobl]\n",
            "optimizers[0].name",
            "Unknown optimizer 'sobl' (did you mean 'sobol'?); known:",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: qlogei, params: {mc_sample: 3}}]\n",
            "optimizers[0].params.mc_sample",
            "no parameter 'mc_sample'",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: ucb, params: {beta: high}}]\n",
            "optimizers[0].params.beta",
            "must be float",
        ),
        (
            "name: x\nbudget: 1\ndevice: gpu\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "device",
            "auto, cpu, cuda or cuda:N",
        ),
        (
            "name: x\nbudget: 1\nseeds: [1, 1]\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "seeds",
            "distinct",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol, sobol]\n",
            "optimizers[1].label",
            "used twice",
        ),
        ("name: x\nbudget: 1\ntasks: hartmann6\noptimizers: [sobol]\n", "tasks", "non-empty list"),
        ("name: x\nbudget: 1\ntasks: []\noptimizers: [sobol]\n", "tasks", "must not be empty"),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [nosuchmodule_xyz:f]\n",
            "optimizers[0].name",
            "Cannot import module 'nosuchmodule_xyz'",
        ),
        (
            "name: x\nbudget: 1\ntasks: [{name: hartmann6, label: 'a b'}]\noptimizers: [sobol]\n",
            "tasks[0].label",
            "letters, digits",
        ),
        (
            PROBE + "  kernels: [matern52-ard, cosine]\n",
            "probe.kernels[1]",
            "Unknown kernel 'cosine'; known: rbf-iso",
        ),
        (
            PROBE + "  estimators: [mc, orth@sobol]\n",
            "probe.estimators[1]",
            "unknown sampling 'sobol' in 'orth@sobol'",
        ),
        (PROBE + "  estimators: []\n", "probe.estimators", "must not be empty"),
        (PROBE + "  seeds: [2, 2]\n", "probe.seeds", "distinct"),
        (PROBE + "  mc_samples: [8, 1]\n", "probe.mc_samples[1]", "must be >= 2, but got 1"),
        (
            PROBE + "  state_optimizer: qlogie\n",
            "probe.state_optimizer.name",
            "Unknown optimizer 'qlogie'",
        ),
        (
            PROBE + "  state_optimizer: {name: orthobo, params: {theta_samples: many}}\n",
            "probe.state_optimizer.params.theta_samples",
            "must be int",
        ),
        (
            PROBE + "  state_optimizer: sobol\n",
            "probe.state_optimizer.name",
            "takes no `kernel` parameter",
        ),
        (
            PROBE + "  state_optimizer: {name: mc-ei, params: {kernel: rbf-iso}}\n",
            "probe.state_optimizer.params.kernel",
            "set by the probe",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\nprobe: {tasks: [levy16], rebuilds: 1}\n",
            "probe.rebuilds",
            "must be >= 2",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6\noptimizers: [sobol]\n",
            "line 4, column 11",
            "malformed YAML",
        ),
        ("- just\n- a list\n", "(top level)", "must be a mapping"),
        ("", "(top level)", "must be a mapping"),
        # Found by fuzzing: each was accepted, failed per cell, or crashed before.
        (
            "name: x\nbudget: 1\nseeds: 1000000000000000000\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "seeds",
            f"in 1..{MAX_CELLS}",
        ),
        (
            f"name: x\nbudget: 1\nseeds: [{MAX_SEED + 1}]\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "seeds[0]",
            f"must be <= {MAX_SEED}",
        ),
        (
            "name: x\nbudget: 1\nseeds: 50000\ntasks: [hartmann6, levy16]\n"
            "optimizers: [sobol, {name: sobol, label: s2}]\n",
            "seeds",
            f"2 tasks x 2 optimizers x 50000 seeds make 200000 cells; a suite holds at most {MAX_CELLS}",
        ),
        (
            "name: x\nbudget: 1000000000\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "budget",
            "must be <= 100000",
        ),
        ('name: "x\\n"\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n', "name", "'x\\n'"),
        ("name: ..\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n", "name", "starting with"),
        (
            "name: x\nbudget: 1\ntasks: [{name: hartmann6, label: .hidden}]\noptimizers: [sobol]\n",
            "tasks[0].label",
            "starting with",
        ),
        (
            f"name: x\nbudget: 1\ntasks: [{{name: hartmann6, label: {'a' * 5000}}}]\noptimizers: [sobol]\n",
            "tasks[0].label",
            f"1 to {MAX_LABEL} ASCII letters",
        ),
        (  # a non-ASCII letter is refused: the message said "letters"
            "name: x\nbudget: 1\ntasks: [{name: hartmann6, label: härtmann}]\noptimizers: [sobol]\n",
            "tasks[0].label",
            "ASCII letters, digits",
        ),
        (
            "name: x\nbudget: 1\ntasks: [{name: hartmann6, params: []}]\noptimizers: [sobol]\n",
            "tasks[0].params",
            "must be a mapping",
        ),
        (
            "name: x\nbudget: 1\nbudget: 2\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "line 3, column 1",
            "duplicate key 'budget'",
        ),
        (
            "name: x\nbudget: 1\ntasks: [{name: hartmann6, params: {noise_std: -1}}]\noptimizers: [sobol]\n",
            "tasks[0].params.noise_std",
            "greater than or equal to 0, but got int -1",
        ),
        (
            "name: x\nbudget: 1\ntasks: [{name: levy16, params: {noise_std: .nan}}]\noptimizers: [sobol]\n",
            "tasks[0].params.noise_std",
            "must be a finite number",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: orthobo, params: {theta_samples: 0}}]\n",
            "optimizers[0].params.theta_samples",
            "greater than or equal to 4",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: qlogei, params: {function_samples: 0}}]\n",
            "optimizers[0].params.function_samples",
            "greater than or equal to 1",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: orthobo, params: {estimator: bogus}}]\n",
            "optimizers[0].params.estimator",
            "unknown estimator 'bogus'",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: qlogei, params: {kernel: nope}}]\n",
            "optimizers[0].params.kernel",
            "Unknown kernel 'nope'",
        ),
        (
            "name: x\nbudget: 1\nn_init: 1\ntasks: [hartmann6]\noptimizers: [sobol, orthobo]\n",
            "n_init",
            "optimizer 'orthobo' needs 2 observations",
        ),
        (
            "name: x\nbudget: 1\ndevice: 'cuda:99999999999999999999'\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "device",
            "cuda:N (N = 0..127)",
        ),
        (
            'name: x\nbudget: 1\ndevice: "cuda:1\\n"\ntasks: [hartmann6]\noptimizers: [sobol]\n',
            "device",
            "'cuda:1\\n'",
        ),
        (
            "name: 2001-02-30\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n",
            "line 1, column 7",
            "day is out of range",
        ),
        (
            "name: x\nbudget: 1\ntasks: &a [*a]\noptimizers: [sobol]\n",
            "line 3, column 8",
            "alias inside its own anchor",
        ),
        (
            "name: x\nbudget: 1\ntasks: " + "[" * 1000 + "]" * 1000 + "\noptimizers: [sobol]\n",
            f"line 3, column {8 + MAX_DEPTH - 1}",
            f"nested deeper than {MAX_DEPTH} levels",
        ),
        (
            PROBE + "  rebuilds: 100000000\n",
            "probe.rebuilds",
            "must be <= 65536",
        ),
        *(
            (
                "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n" + line,
                field,
                fragment,
            )
            for field in ("timeout_s", "evaluation_timeout_s")
            for line, fragment in (
                (f"{field}: 0\n", "must be > 0 and <= 1e+07 seconds, but got int 0"),
                (f"{field}: -2.5\n", "but got float -2.5"),
                (f"{field}: .nan\n", "but got float nan"),
                (f"{field}: .inf\n", "but got float inf"),
                (f"{field}: 1.0e+8\n", "but got float 100000000.0"),
                (f"{field}: 1e4\n", "got str '1e4' (YAML reads an exponent without a '.' and a"),
                (f"{field}: 10 min\n", "must be a number of seconds > 0, but got str '10 min'"),
                (f"{field}: true\n", "must be a number of seconds > 0, but got bool True"),
            )
        ),
    ],
)
def test_bad_suite_names_file_field_and_allowed(write_suite, text, field, fragment):
    path = write_suite(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}: "), message
    assert fragment in message
    assert "\n" not in message and len(info.value.reason) <= MESSAGE_LIMIT


@pytest.mark.parametrize(
    ("tasks", "optimizers", "field", "fragment"),
    [
        # The cells a__b/c and a/b__c once shared the id a__b__c__seed0: one overwrote the other.
        (
            "[{name: hartmann6, label: a__b}, {name: levy16, label: a}]",
            "[{name: sobol, label: c}, {name: sobol, label: b__c}]",
            "tasks[0].label",
            "without '__'",
        ),
        # One file on a case-insensitive file system.
        (
            "[{name: hartmann6, label: H}, {name: levy16, label: h}]",
            "[sobol]",
            "tasks[1].label",
            "label 'h' differs from 'H' only in case",
        ),
        ("[hartmann6]", "[sobol, {name: sobol, label: SOBOL}]", "optimizers[1].label", "case"),
    ],
)
def test_suite_whose_cells_would_share_a_file_is_refused_at_load(
    write_suite, tasks, optimizers, field, fragment
):
    path = write_suite(f"name: x\nbudget: 1\ntasks: {tasks}\noptimizers: {optimizers}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}: {field}: ")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_cell_ids_of_a_suite_are_distinct_ignoring_case(write_suite):
    # Labels may end with '_': a_ + b and a + _b would both give a___b, but no label starts with
    # '_', so the ids still split back in one way.
    suite = load_suite(
        write_suite(
            "name: x\nbudget: 1\nseeds: 2\n"
            "tasks: [{name: hartmann6, label: a_}, {name: levy16, label: a}]\n"
            "optimizers: [{name: sobol, label: b_}, {name: sobol, label: b}]\n"
        )
    )
    ids = [cell.id.casefold() for cell in suite.cells()]
    assert len(set(ids)) == len(ids) == 8


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ("kernels: [rbf-iso, rbf-iso]", "kernels", "kernels must be distinct, but 'rbf-iso'"),
        ("state_iterations: [0, 2, 0]", "state_iterations", "state iterations must be distinct"),
        ("mc_samples: [8, 8]", "mc_samples", "mc samples must be distinct, but 8 is given twice"),
        ("estimators: [mc, orth, orth]", "estimators", "estimators must be distinct, but 'orth'"),
        # Two spellings of one estimator: computed twice, shown as two rows.
        ("estimators: [orth, orth@iid]", "estimators", "estimators must be distinct, but 'orth'"),
    ],
)
def test_a_probe_value_given_twice_is_refused_at_load(write_suite, line, field, reason):
    """The reported bug: a repeated kernel or state iteration made probe states with one id,
    each computed again into the same file, and a repeated budget or estimator the same row
    twice in a state's file."""
    with pytest.raises(SuiteError) as info:
        load_suite(write_suite(PROBE + f"  {line}\n"))
    assert info.value.field == f"probe.{field}" and info.value.reason.startswith(reason)
    values = tuple(yaml.safe_load(line)[field])
    with pytest.raises(ConfigError) as built:  # a probe section built in code too
        ProbeSpec(tasks=(HARTMANN,), **{field: values})
    assert built.value.field == field


def test_file_that_is_not_utf8_or_too_large_is_refused_before_parsing(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: x\nbudget: 1\ndescription: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SuiteError, match=r"line 3: not UTF-8 text \(byte 0xe9\)"):
        load_suite(path)
    path.write_bytes(b"name: x\n" + b"#" * MAX_FILE_BYTES)
    with pytest.raises(SuiteError, match=rf"\(file\): larger than {MAX_FILE_BYTES} bytes"):
        load_suite(path)
    # A NUL byte is UTF-8 but not YAML: PyYAML refuses it as the loader is built, which was
    # outside the one-line error's reach (a ReaderError traceback, exit 1).
    path.write_bytes(b"name: x\n\x00budget: 1\n")
    with pytest.raises(SuiteError, match=r"\(file\): malformed YAML \(.*#x0000"):
        load_suite(path)


def test_alias_bomb_is_refused_at_once_with_a_short_message(write_suite):
    # `name` expands to 10 ** 9 strings: building or printing it would hang or take gigabytes.
    layers = ", ".join(f"&l{i + 1} [{', '.join([f'*l{i}'] * 10)}]" for i in range(8))
    path = write_suite(
        f"description: [&l0 [x, x, x, x, x, x, x, x, x, x], {layers}]\nname: *l8\nbudget: 1\n"
        "tasks: [hartmann6]\noptimizers: [sobol]\n"
    )
    start = time.perf_counter()
    with pytest.raises(SuiteError, match="more than 100000 nodes with its aliases expanded"):
        load_suite(path)
    assert time.perf_counter() - start < 1.0


def test_merge_keys_may_be_overridden_and_empty_params_are_no_params(write_suite):
    suite = load_suite(
        write_suite(
            """
            name: ok
            budget: 1
            tasks:
              - {name: levy16, params: {<<: {noise_std: 0.2}, noise_std: 0.1}}
              - {name: hartmann6, params: }
            optimizers: [sobol]
            """
        )
    )
    assert suite.tasks[0].params == {"noise_std": 0.1} and suite.tasks[1].params == {}


def test_missing_file_is_a_suite_error(tmp_path):
    with pytest.raises(SuiteError, match="cannot read"):
        load_suite(tmp_path / "nope.yaml")


def test_suite_and_cells_pickle(write_suite):
    import pickle

    suite = load_suite(write_suite(GOOD))
    cell = suite.cells()[-1]
    clone = pickle.loads(pickle.dumps(cell))
    assert clone == cell and clone.config_hash == cell.config_hash


# --- the dataclasses check themselves, however they are built --------------------------------

HARTMANN = ComponentSpec(name="hartmann6", label="hartmann6")


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"rebuilds": 1}, "rebuilds", "must be >= 2, but got 1"),
        ({"top_k": 2.5}, "top_k", "must be an integer >= 2"),
        ({"mc_samples": [8, 32]}, "mc_samples", "must be a tuple of integers >= 2"),
        ({"state_iterations": ()}, "state_iterations", "must not be empty"),
        ({"seeds": (0, 1, 0)}, "seeds", "distinct"),
        ({"estimators": ("mc", 3)}, "estimators[1]", "must be a string"),
        ({"tasks": ()}, "tasks", "must not be empty"),
        ({"tasks": (HARTMANN, HARTMANN)}, "tasks[1].label", "used twice"),
        ({"state_optimizer": "mc-ei"}, "state_optimizer", "must be a ComponentSpec"),
        # A "high-precision" reference of 2 draws was accepted beside estimates of 8.
        (
            {"mc_samples": (8, 32), "reference_samples": 16},
            "reference_samples",
            "must be at least the largest of mc_samples (32) for a high-precision reference, "
            "but got 16.",
        ),
    ],
)
def test_probe_spec_built_in_code_is_validated(kwargs, field, fragment):
    with pytest.raises(ConfigError) as info:
        ProbeSpec(**{"tasks": (HARTMANN,), **kwargs})
    assert info.value.field == field and fragment in info.value.reason
    assert str(info.value) == f"{field}: {info.value.reason}"


def test_unknown_names_in_code_raise_one_error_type_with_the_field():
    with pytest.raises(UnknownNameError) as info:
        ProbeSpec(tasks=(HARTMANN,), kernels=("matern52-ard", "cosine"))
    assert (info.value.kind, info.value.name, info.value.field) == (
        "kernel",
        "cosine",
        "kernels[1]",
    )
    with pytest.raises(UnknownNameError) as info:
        ProbeSpec(tasks=(HARTMANN,), estimators=("mc", "nope+rb"))
    assert (info.value.kind, info.value.name, info.value.field) == (
        "estimator",
        "nope",
        "estimators[1]",
    )
    with pytest.raises(UnknownNameError) as info:
        ProbeSpec(tasks=(ComponentSpec(name="rosenbrock", label="r"),))
    assert (info.value.kind, info.value.name, info.value.field) == (
        "task",
        "rosenbrock",
        "tasks[0].name",
    )
    assert "hartmann6" in info.value.known
    with pytest.raises(UnknownNameError) as info:
        Suite(
            name="s",
            budget=1,
            tasks=(HARTMANN,),
            optimizers=(ComponentSpec(name="qlogie", label="q"),),
        )
    assert (info.value.kind, info.value.field) == ("optimizer", "optimizers[0].name")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": ""}, "name"),
        ({"params": {1: 2}}, "params"),
        ({"label": "has space"}, "label"),
    ],
)
def test_component_spec_checks_its_fields(kwargs, field):
    with pytest.raises(ConfigError) as info:
        ComponentSpec(**{"name": "sobol", "label": "sobol", **kwargs})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"seed": -1}, "seed"),
        ({"n_init": 0}, "n_init"),
        ({"dtype": "float16"}, "dtype"),
        ({"suite": "a/b"}, "suite"),
        ({"suite": ".."}, "suite"),
        ({"seed": MAX_SEED + 1}, "seed"),
    ],
)
def test_cell_checks_its_values(kwargs, field):
    sobol = ComponentSpec(name="sobol", label="sobol")
    base = {"suite": "s", "task": HARTMANN, "optimizer": sobol, "seed": 0, "n_init": 2, "budget": 1}
    Cell(**base)
    with pytest.raises(ConfigError) as info:
        Cell(**{**base, **kwargs})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget": -1}, "budget"),
        ({"device": "gpu"}, "device"),
        ({"device": "cuda:128"}, "device"),
        ({"dtype": "half"}, "dtype"),
        ({"n_init": 1, "optimizers": (ComponentSpec(name="orthobo", label="o"),)}, "n_init"),
        ({"seeds": ()}, "seeds"),
        ({"probe": {"tasks": ["hartmann6"]}}, "probe"),
        ({"timeout_s": 0.0}, "timeout_s"),
        ({"evaluation_timeout_s": "5"}, "evaluation_timeout_s"),
    ],
)
def test_suite_built_in_code_is_validated(kwargs, field):
    sobol = ComponentSpec(name="sobol", label="sobol")
    with pytest.raises(ConfigError) as info:
        Suite(**{"name": "s", "budget": 1, "tasks": (HARTMANN,), "optimizers": (sobol,), **kwargs})
    assert info.value.field == field


def test_time_limits_are_execution_settings_that_leave_the_cells_unchanged(write_suite):
    """``timeout_s`` and ``evaluation_timeout_s`` are read (an int is seconds too) but stay out of
    the cells: their ids, configurations and hashes, resolved ones included, are those of the
    suite without the limits, so stored cells stay valid when a limit changes."""
    plain = load_suite(write_suite(GOOD, "plain.yaml"))
    limited = load_suite(
        write_suite(GOOD + "timeout_s: 600\nevaluation_timeout_s: 2.5\n", "limited.yaml")
    )
    assert (plain.timeout_s, plain.evaluation_timeout_s) == (None, None)
    assert (limited.timeout_s, limited.evaluation_timeout_s) == (600, 2.5)
    assert limited.cells() == plain.cells()
    for a, b in zip(limited.cells(), plain.cells(), strict=True):
        assert (a.config(), a.resolved_config(), a.config_hash) == (
            b.config(),
            b.resolved_config(),
            b.config_hash,
        )
    edge = write_suite(GOOD + f"timeout_s: {int(MAX_TIMEOUT_S)}\nevaluation_timeout_s: 0.001\n")
    assert load_suite(edge).timeout_s == MAX_TIMEOUT_S


def test_state_optimizer_default_and_yaml_form(write_suite):
    spec = ProbeSpec(tasks=(HARTMANN,))
    assert spec.state_optimizer == DEFAULT_STATE_OPTIMIZER
    assert (DEFAULT_STATE_OPTIMIZER.name, DEFAULT_STATE_OPTIMIZER.label) == ("mc-ei", "probe-state")
    # The default is not checked against the registry at construction (that would import
    # BoTorch); it is checked here, with the kernel the probe passes.
    entry = OPTIMIZERS.check_params(
        DEFAULT_STATE_OPTIMIZER.name, {**DEFAULT_STATE_OPTIMIZER.params, "kernel": "rbf-iso"}
    )
    assert "kernel" in entry.params
    suite = load_suite(
        write_suite(PROBE + "  state_optimizer: {name: orthobo, params: {theta_samples: 16}}\n")
    )
    assert suite.probe.state_optimizer == ComponentSpec(
        name="orthobo", params={"theta_samples": 16}, label="orthobo"
    )
    assert load_suite(write_suite(PROBE)).probe.state_optimizer == DEFAULT_STATE_OPTIMIZER


def test_probe_yaml_lists_become_tuples_and_one_kernel_needs_no_brackets(write_suite):
    probe = load_suite(
        write_suite(
            PROBE
            + "  kernels: rbf-iso\n  mc_samples: [8]\n  estimators: [sr3+rb, qlogei]\n  seeds: 2\n"
        )
    ).probe
    assert probe.kernels == ("rbf-iso",) and probe.mc_samples == (8,)
    assert probe.estimators == ("sr3+rb", "qlogei") and probe.seeds == (0, 1)


def test_probe_estimator_with_antithetic_draws_needs_even_budgets(write_suite):
    path = write_suite(PROBE + "  estimators: [mc, orth+rb@antithetic]\n  mc_samples: [8, 33]\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value) == (
        f"{path}: probe.mc_samples[1]: must be even: estimator 'orth+rb@antithetic' draws "
        "antithetic pairs, but got 33."
    )
    # The antithetic point set picks its own even count within the budget.
    load_suite(write_suite(PROBE + "  estimators: [antithetic]\n  mc_samples: [33]\n"))


def test_the_keys_a_suite_file_may_hold_are_the_suite_fields_it_does_not_set_itself(write_suite):
    from dataclasses import fields

    keys = [f.name for f in fields(Suite) if f.name != "source"]
    for text, where in (
        (GOOD + "source: x.yaml\n", "source"),
        (PROBE + "  bogus: 1\n", "probe.bogus"),
    ):
        with pytest.raises(SuiteError) as info:
            load_suite(write_suite(text))
        assert info.value.field == where and info.value.reason.startswith("unknown key")
    assert f"allowed keys: {', '.join(f.name for f in fields(ProbeSpec))}." in info.value.reason
    with pytest.raises(SuiteError, match=f"allowed keys: {', '.join(keys)}[.]"):
        load_suite(write_suite(GOOD + "bugdet: 2\n"))


# --- configuration hashes ----------------------------------------------------------------------

SENTINEL_PLUGIN = '''
from orthobench import Optimizer

_AUTO = object()


def _identity(x):
    return x


class Sentinel(Optimizer):
    """Defaults whose text holds a memory address: a sentinel object and a function."""

    min_observations = 0

    def __init__(self, dim, *, scale=_AUTO, transform=_identity, **kwargs):
        super().__init__(dim, **kwargs)
'''


def test_a_default_whose_text_holds_a_memory_address_keeps_the_cell_hash(tmp_path, monkeypatch):
    """The reported bug: a plugin default such as a sentinel ``object()`` or a function entered
    the resolved configuration as ``<object object at 0x7f...>``, an address that differs from
    one process to the next, so every rerun of an unchanged suite refused its stored cells as
    another configuration (and a killed cell could not resume from its journal). Imported again
    (new objects at other addresses, as in another process), the configuration and hash stay."""
    import importlib
    import sys

    (tmp_path / "sentinelplugin.py").write_text(SENTINEL_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_module("sentinelplugin", monkeypatch)
    optimizer = ComponentSpec(name="sentinelplugin:Sentinel", label="s")
    cell = Cell(suite="s", task=HARTMANN, optimizer=optimizer, seed=0, n_init=2, budget=1)
    first = (cell.resolved_config(), cell.config_hash)
    kept = sys.modules["sentinelplugin"].Sentinel  # its defaults stay alive, at their addresses
    importlib.reload(sys.modules["sentinelplugin"])
    assert sys.modules["sentinelplugin"].Sentinel is not kept
    assert (cell.resolved_config(), cell.config_hash) == first
    assert "0x" not in str(first[0]["optimizer"]["params"])


#: The committed top-level suites (``suites/paper/`` has its own tests), less the check gate's
#: thresholds file, which is not a suite.
COMMITTED_SUITES = sorted(
    p
    for p in (Path(__file__).resolve().parents[1] / "suites").glob("*.yaml")
    if not p.name.endswith(".thresholds.yaml")
)


@pytest.mark.parametrize("path", COMMITTED_SUITES, ids=lambda p: p.stem)
def test_every_committed_suite_loads_and_is_named_after_its_file(path):
    """A suite the docs quote must run as written, and results are keyed by suite name, so two
    files with one name would mix their cells in one directory."""
    assert load_suite(path).name == path.stem
