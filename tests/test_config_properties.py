"""Properties of suites, their sections, search spaces, registries and executors that a user relies
on: bounds accepted up to their limit and refused one past it, ids and hashes that tell cells
apart, the documented order of cells, and the settings that reach what they configure.

The module also holds the plugins some tests name by import path
(``tests.test_config_properties:...``), as a user's module next to their suite would.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from orthobench import optimizer_factory, task_factory
from orthobench.config.params import is_integer
from orthobench.exceptions import ConfigError, OrthobenchError, SuiteError
from orthobench.executors import EXECUTORS, make_executor
from orthobench.noise import acquisition_noise
from orthobench.space import Parameter, SearchSpace
from orthobench.suite import (
    MAX_CELLS,
    MAX_EVALUATIONS,
    MAX_LABEL,
    Cell,
    ComponentSpec,
    parse_suite,
)

HERE = "tests.test_config_properties"


# ----------------------------------------------------------------------------------------------
# Plugins named by import path


@optimizer_factory
def needy(dim, *, seed, device, dtype, kernel: str = "matern52-ard"):
    """A state optimizer that needs five observations before its first step."""
    raise AssertionError("never built")


needy.min_observations = 5


class NotAcq:
    """A plain class with a probe estimator's ``build``, but not a ProbeAcquisition subclass."""

    def build(self, model, *, best_f, samples, rebuild):
        raise AssertionError("never called")


@task_factory
def any_params(dim: int = 2, **kwargs):
    """A task factory that takes any keyword parameter."""
    raise AssertionError("never built")


def _suite(**fields):
    """A small valid suite mapping with ``fields`` set."""
    return {"name": "s", "budget": 1, "tasks": ["hartmann6"], "optimizers": ["sobol"], **fields}


def _accepted(**fields):
    return parse_suite(_suite(**fields), "s.yaml")


def _refused(**fields) -> str:
    with pytest.raises(SuiteError) as info:
        parse_suite(_suite(**fields), "s.yaml")
    return str(info.value)


# ----------------------------------------------------------------------------------------------
# suite.py: cells


def test_cell_ids_are_distinct_for_every_batch_size_q_2_included():
    """Each cell is one result file named by its id: cells of q = 1, 2 and 3 of one task,
    optimizer and seed must not share an id (they would overwrite one another's file)."""
    suite = _accepted(q=[1, 2, 3])
    ids = [cell.id for cell in suite.cells()]
    assert len(ids) == 3 and len(set(ids)) == 3


def test_q_is_in_the_cell_config_and_changes_its_hash_for_every_q_other_than_1():
    """A stored cell is reused only when its configuration hash matches: a q = 2 or q = 3 cell
    must not hash as the q = 1 cell (its result would be taken for the other's). Only q = 1
    leaves ``q`` out of the configuration (its hash predates batch steps)."""
    one, two, three = _accepted(q=[1, 2, 3]).cells()
    assert "q" not in one.config()
    assert two.config()["q"] == 2 and three.config()["q"] == 3
    assert len({one.config_hash, two.config_hash, three.config_hash}) == 3


def test_q_times_budget_of_exactly_max_evaluations_is_accepted_and_one_more_refused():
    """A cell makes ``n_init + q * budget`` evaluations; ``q * budget`` is bounded by
    MAX_EVALUATIONS inclusive, as the budget is."""
    assert MAX_EVALUATIONS == 100_000  # the factorizations below
    _accepted(q=10, budget=MAX_EVALUATIONS // 10)
    message = _refused(q=11, budget=9091)  # 11 x 9091 = MAX_EVALUATIONS + 1
    assert "q * budget must be <= 100000" in message and "make 100001" in message


def test_a_suite_of_exactly_max_cells_is_accepted_and_one_more_cell_refused():
    """A suite holds at most MAX_CELLS cells (tasks x optimizers x seeds x batch sizes); the
    bound is reached through seeds x batch sizes to keep the suite cheap to validate."""
    assert MAX_CELLS == 100_000  # the factorizations below
    _accepted(budget=0, seeds=1000, q=list(range(1, 101)))
    message = _refused(budget=0, seeds=9091, q=list(range(1, 12)))  # 100001 cells
    assert "make 100001 cells; a suite holds at most 100000" in message


def test_a_label_of_max_label_characters_is_accepted_and_one_more_refused():
    """Names and labels of up to MAX_LABEL characters are allowed (they become file names)."""
    assert _accepted(name="a" * MAX_LABEL).name == "a" * MAX_LABEL
    assert "name: must be 1 to 64" in _refused(name="a" * (MAX_LABEL + 1))


def test_a_state_optimizer_needing_more_observations_than_the_probe_n_init_is_refused():
    """The probe's state optimizer steps after ``probe.n_init`` points: one that needs five
    observations before its first step cannot build states from three (refused at load time,
    not after the states started)."""
    probe = {"tasks": ["hartmann6"], "n_init": 3, "state_optimizer": f"{HERE}:needy"}
    assert "probe.n_init: must be >= 5" in _refused(probe=probe)
    _accepted(probe={**probe, "n_init": 5})


def test_a_probe_n_init_of_1_is_refused():
    """A probe state's GP is fitted on its initial design: one point is not enough (>= 2)."""
    message = _refused(probe={"tasks": ["hartmann6"], "n_init": 1})
    assert "probe.n_init" in message
    _accepted(probe={"tasks": ["hartmann6"], "n_init": 2})


def test_an_asynchronous_cell_of_q_1_built_directly_is_refused():
    """An asynchronous cell keeps q - 1 evaluations pending: at q = 1 there is nothing to keep
    running, and a Cell refuses it however it is built (not only through a suite)."""
    task = ComponentSpec(name="hartmann6", label="h")
    optimizer = ComponentSpec(name="sobol", label="o")
    common = {"suite": "s", "task": task, "optimizer": optimizer, "seed": 0, "n_init": 4}
    with pytest.raises(ConfigError, match="asynchronous"):
        Cell(**common, budget=1, q=1, asynchronous=True)
    assert Cell(**common, budget=1, q=2, asynchronous=True).asynchronous


def test_cells_are_ordered_task_then_seed_then_q_then_optimizer():
    """``Suite.cells()`` documents its order: task-major, then seed, then batch size q, then
    optimizer (the order cells run and are listed in)."""
    suite = _accepted(
        tasks=[{"name": "hartmann6", "label": "t1"}, {"name": "hartmann6", "label": "t2"}],
        optimizers=[{"name": "sobol", "label": "o1"}, {"name": "sobol", "label": "o2"}],
        seeds=2,
        q=[1, 2],
    )
    got = [(c.task.label, c.seed, c.q, c.optimizer.label) for c in suite.cells()]
    assert got == list(itertools.product(["t1", "t2"], [0, 1], [1, 2], ["o1", "o2"]))


# ----------------------------------------------------------------------------------------------
# config/params.py


def test_a_bool_is_not_an_integer_for_counts_and_seeds():
    """Python counts ``True`` as the int 1; a count or seed given as a bool is a mistake, and
    refused as one (``acquisition_noise(seed=True)`` too)."""
    assert is_integer(3) and is_integer(np.int64(3))
    assert not is_integer(True) and not is_integer(False)
    X = torch.linspace(0, 1, 3, dtype=torch.float64).reshape(3, 1)
    with pytest.raises(ValueError, match="`seed` must be an int"):
        acquisition_noise(lambda r: lambda X: X[..., 0, 0], X, rebuilds=2, seed=True)


def test_the_antithetic_point_set_takes_an_odd_budget():
    """``check_even_budgets``: the ``antithetic`` point set takes the largest even count within
    its budget, so ``mc_samples: [9]`` is allowed for it (only ``@antithetic`` draws need even
    budgets)."""
    probe = {"tasks": ["hartmann6"], "estimators": ["antithetic"], "mc_samples": [9]}
    assert _accepted(probe=probe).probe.mc_samples == (9,)
    odd = {**probe, "estimators": ["orth@antithetic"]}
    assert "must be even" in _refused(probe=odd)


# ----------------------------------------------------------------------------------------------
# config/schema.py


def test_an_explicit_null_is_accepted_for_an_optional_section_and_fields():
    """YAML ``probe: null`` or ``timeout_s: null`` (``timeout_s:`` with no value) means the
    default, none, as leaving the key out does."""
    suite = _accepted(probe=None, timeout_s=None, evaluation_timeout_s=None)
    assert suite.probe is None and suite.timeout_s is None and suite.evaluation_timeout_s is None


@pytest.mark.parametrize("text", ["1e4", "-1e4", "+2E-3"])
def test_a_signed_exponent_read_as_text_gets_the_exponent_hint(text):
    """YAML 1.1 reads ``1e4``, ``-1e4`` and ``+2E-3`` as text; the message says so, whatever the
    sign, rather than only 'must be a number'."""
    assert "YAML reads an exponent" in _refused(timeout_s=text)


# ----------------------------------------------------------------------------------------------
# space.py


def test_as_dict_gives_int_parameters_as_python_ints():
    """A task's int parameter (layers, a batch size) arrives as a Python ``int``, usable as a
    count, not as a float like 3.0."""
    space = SearchSpace(
        (Parameter(name="i", low=0, high=5, kind="int"), Parameter(name="f", low=0.0, high=1.0))
    )
    point = space.as_dict(np.array([3.0, 0.5]))
    assert point == {"i": 3, "f": 0.5}
    assert type(point["i"]) is int and type(point["f"]) is float


def test_duplicate_parameter_names_are_refused():
    """A point is passed as ``{name: value}``: two parameters of one name would lose one."""
    with pytest.raises(ValueError, match="unique"):
        SearchSpace((Parameter(name="x", low=0, high=1), Parameter(name="x", low=0, high=2)))


# ----------------------------------------------------------------------------------------------
# registry.py


def test_a_class_that_is_not_a_probe_acquisition_subclass_is_refused_as_a_probe_estimator():
    """A probe names only ProbeAcquisition subclasses: a plain class with a ``build`` of the right
    signature is refused at load time."""
    probe = {"tasks": ["hartmann6"], "estimators": ["mc", f"{HERE}:NotAcq"]}
    assert "not a ProbeAcquisition subclass" in _refused(probe=probe)


def test_a_factory_taking_kwargs_accepts_unknown_parameters():
    """A plugin factory with ``**kwargs`` takes any parameter: the suite passes it on rather
    than refusing a name the signature does not list."""
    task = {"name": f"{HERE}:any_params", "params": {"noise": 0.1}, "label": "any"}
    assert dict(_accepted(tasks=[task]).tasks[0].params) == {"noise": 0.1}


# ----------------------------------------------------------------------------------------------
# executors/_choose.py


@pytest.mark.parametrize("name", EXECUTORS)
def test_the_cell_timeout_reaches_every_executor(name):
    """``--cell-timeout`` (``timeout_s``) is the executor's ``timeout``, whichever executor runs
    the cells (building a Dask executor starts no cluster)."""
    assert make_executor(name, timeout=5.0).timeout == 5.0


@pytest.mark.parametrize("name", ["inline", "process"])
def test_a_scheduler_is_refused_for_an_executor_other_than_dask(name):
    """``--scheduler`` is a Dask address: given with another executor it would be silently
    ignored, so it is refused."""
    with pytest.raises(OrthobenchError, match="--scheduler needs --executor dask"):
        make_executor(name, scheduler="tcp://127.0.0.1:8786")
