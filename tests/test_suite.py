"""Suite validation: every bad suite gives one line naming the file, the field and what is allowed."""

from __future__ import annotations

import pytest

from orthobench.exceptions import SuiteError
from orthobench.suite import load_suite

GOOD = """
name: ok
seeds: [3, 5]
n_init: 4
budget: 2
tasks: [hartmann6, {name: levy16, params: {noise_std: 0.1}, label: levy-noisy}]
optimizers: [sobol, {name: qlogei, params: {mc_samples: 16}}]
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
            "unknown key",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: qlogei, params: {mc_sample: 3}}]\n",
            "optimizers[0].params",
            "no parameter 'mc_sample'",
        ),
        (
            "name: x\nbudget: 1\ntasks: [hartmann6]\noptimizers: [{name: ucb, params: {beta: high}}]\n",
            "optimizers[0].params",
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
    ],
)
def test_bad_suite_names_file_field_and_allowed(write_suite, text, field, fragment):
    path = write_suite(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}: "), message
    assert fragment in message
    assert "\n" not in message


def test_missing_file_is_a_suite_error(tmp_path):
    with pytest.raises(SuiteError, match="cannot read"):
        load_suite(tmp_path / "nope.yaml")


def test_suite_and_cells_pickle(write_suite):
    import pickle

    suite = load_suite(write_suite(GOOD))
    cell = suite.cells()[-1]
    clone = pickle.loads(pickle.dumps(cell))
    assert clone == cell and clone.config_hash == cell.config_hash
