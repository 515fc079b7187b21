"""Suites as input: what a suite file names or spells reaches the run as the file means it.

A module beside the suite is the one that runs (or the suite is refused naming both files), a
value has one configuration hash whatever its spelling or the process, and a probe section's
size is bounded before anything is made.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from orthobench.exceptions import SuiteError
from orthobench.suite import MAX_CELLS, Cell, ComponentSpec, load_suite
from tests.helpers import forget_module

PLUG = (
    "from orthobench.registry import task_factory\n"
    "from orthobench.tasks.synthetic import hartmann6\n\n\n"
    "@task_factory\ndef mytask(noise_std: float = 0.0):\n    return hartmann6()\n"
)


def _suite(folder, name: str) -> str:
    """A suite file in ``folder`` whose task is ``name``, and its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.yaml"
    tasks = f"tasks: [{{name: '{name}', label: t}}]"
    path.write_text(f"name: s\nbudget: 0\nn_init: 2\n{tasks}\noptimizers: [sobol]\n")
    return str(path)


@pytest.mark.parametrize("first", ["imported", "on sys.path"])
def test_a_second_suites_namespace_package_is_refused_not_swapped_for_the_first(
    first, tmp_path, monkeypatch
):
    """Folders ``a/nsbeside/plug.py`` and ``b/nsbeside/plug.py`` without ``__init__.py``: suite
    b ran a's module, whether suite a had imported it or only put its folder first on
    ``sys.path``, without a word (a plain module was refused)."""
    monkeypatch.setattr(sys, "path", [*sys.path])  # load_suite appends each suite's folder
    for module in ("nsbeside", "nsbeside.plug"):
        forget_module(module, monkeypatch)
    for folder in "ab":
        (tmp_path / folder / "nsbeside").mkdir(parents=True)
        (tmp_path / folder / "nsbeside" / "plug.py").write_text(PLUG)
    if first == "imported":
        load_suite(_suite(tmp_path / "a", "nsbeside.plug:mytask"))
    else:
        sys.path.append(str(tmp_path / "a"))
    with pytest.raises(SuiteError) as raised:
        load_suite(_suite(tmp_path / "b", "nsbeside.plug:mytask"))
    assert (
        f"tasks[0].name: module 'nsbeside.plug' is imported from "
        f"{tmp_path / 'a' / 'nsbeside' / 'plug.py'}, not from "
        f"{tmp_path / 'b' / 'nsbeside' / 'plug.py'} beside the suite"
    ) in str(raised.value)


@pytest.mark.parametrize("imported", [True, False])
def test_a_module_beside_named_like_an_installed_one_is_refused_naming_both_files(
    imported, tmp_path, monkeypatch
):
    """``yaml.py`` beside the suite: refused with "Module 'yaml' (.../yaml/__init__.py) has no
    attribute 'mytask'", which never named the file beside the suite; so was a module of an
    installed name not imported yet (here ``shadowed``, on ``sys.path`` before the suite)."""
    monkeypatch.setattr(sys, "path", [*sys.path])
    name = "yaml" if imported else "shadowed"
    if imported:
        installed = yaml.__file__
    else:
        forget_module(name, monkeypatch)
        (tmp_path / "site").mkdir()
        installed = str(tmp_path / "site" / "shadowed.py")
        (tmp_path / "site" / "shadowed.py").write_text("")
        sys.path.append(str(tmp_path / "site"))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / f"{name}.py").write_text(PLUG)
    with pytest.raises(SuiteError) as raised:
        load_suite(_suite(tmp_path / "s", f"{name}:mytask"))
    assert (
        f"tasks[0].name: module {name!r} is imported from {installed}, not from "
        f"{tmp_path / 's' / name}.py beside the suite"
    ) in str(raised.value)


SET_HASH = (
    "from orthobench.work import canonical\n"
    "print(canonical({'tags': frozenset({'alpha', 'beta', 'gamma', 'delta', 'eps'}), "
    "'mixed': {2, 'b', (1, 'a'), None}}))\n"
)


def test_a_set_has_one_configuration_text_whatever_the_string_hash_seed():
    """A plugin's ``frozenset`` default was hashed as its ``str``, whose order follows
    ``PYTHONHASHSEED``: a stored cell was "stored with another configuration" in the next
    process. Items of mixed types sort too."""
    texts = {
        subprocess.run(
            [sys.executable, "-c", SET_HASH],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert texts == {
        '{"mixed": ["b", 2, [1, "a"], null], "tags": ["alpha", "beta", "delta", "eps", "gamma"]}\n'
    }


def _orthobo_cell(estimator: str) -> Cell:
    return Cell(
        suite="s",
        task=ComponentSpec(name="hartmann6", label="h"),
        optimizer=ComponentSpec(name="orthobo", params={"estimator": estimator}, label="o"),
        seed=0,
        n_init=2,
        budget=1,
    )


@pytest.mark.parametrize("spelled", ["orth@iid", "mc@iid", "orth-shrink+rb@iid"])
def test_an_estimator_keeps_the_spelling_its_cells_were_stored_under(spelled):
    """Hashing ``orth@iid`` as ``orth`` refused every cell stored under ``orth@iid`` by earlier
    versions ("stored with another configuration", exit 2): the suite's spelling is hashed."""
    cell = _orthobo_cell(spelled)
    assert cell.resolved_config()["optimizer"]["params"]["estimator"] == spelled
    assert cell.config_hash != _orthobo_cell(spelled.replace("@iid", "")).config_hash


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("budget: 010", "line 3, column 9", "'010' is octal in YAML 1.1, so 8"),
        ("budget: 1\nseeds: [1, -010]", "line 4, column 12", "'-010' is octal"),
        ("budget: 1:30", "line 3, column 9", "'1:30' is base 60 in YAML 1.1, so 90"),
        ("budget: 0x10", "line 3, column 9", "'0x10' is hexadecimal in YAML 1.1, so 16"),
    ],
)
def test_a_number_yaml_reads_in_another_base_is_refused_naming_its_line(
    text, where, fragment, write_suite
):
    """``budget: 010`` ran 8 BO steps, ``seeds: [010]`` seed 8 and ``budget: 1:30`` 90."""
    path = write_suite(f"name: x\nn_init: 2\n{text}\ntasks: [hartmann6]\noptimizers: [sobol]\n")
    with pytest.raises(SuiteError) as raised:
        load_suite(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: {where}: ") and fragment in message
    assert "write a decimal integer, or quote it for a string" in message


@pytest.mark.parametrize(
    ("probe", "states"),
    [
        # 4 tasks x (5 kernels x 2 q) x 100000 seeds x 5 iterations: 2.4 GB, never started
        (
            "tasks: [hartmann6, ackley8, levy16, michalewicz10]\n"
            "  kernels: [rbf-iso, rbf-ard, matern52-iso, matern52-ard, linear]\n"
            "  q: [1, 2]\n  state_iterations: [0, 1, 2, 3, 4]\n  seeds: 100000\n",
            "4 tasks x (5 kernels x 2 q) x 100000 seeds x 5 state iterations make 20000000",
        ),
        # TPE states are made at q = 1 only
        (
            "tasks: [hartmann6, ackley8]\n  estimators: [mc, mc-tpe]\n  q: [1, 2]\n"
            "  seeds: 25001\n",
            "2 tasks x (1 kernels x 2 q + tpe) x 25001 seeds x 1 state iterations make 150006",
        ),
    ],
)
def test_a_probe_sections_states_are_bounded_before_any_is_made(probe, states, write_suite):
    """Cells stop at MAX_CELLS but probe states grew without bound."""
    path = write_suite(
        f"name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\nprobe:\n  {probe}"
    )
    with pytest.raises(SuiteError) as raised:
        load_suite(path)
    assert str(raised.value) == (
        f"{path}: probe.seeds: {states} probe states; a probe section holds at most {MAX_CELLS}."
    )


def test_a_probe_section_of_max_cells_states_is_accepted(write_suite):
    path = write_suite(
        "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\nprobe:\n"
        f"  tasks: [hartmann6]\n  estimators: [mc, mc-tpe]\n  seeds: {MAX_CELLS // 2}\n"
    )
    assert len(load_suite(path).probe.seeds) == MAX_CELLS // 2
