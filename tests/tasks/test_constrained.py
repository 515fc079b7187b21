"""The constrained synthetic tasks: shape, bounds, constraint sign, known optima."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from botorch.test_functions.synthetic import ConstrainedGramacy

from orthobench.registry import TASKS
from orthobench.tasks.base import Evaluation
from orthobench.tasks.constrained import ConstrainedTask

CPU = torch.device("cpu")

#: name -> (dim, n_constraints, optimal value, lower bounds, upper bounds): the BoTorch classes'
#: shapes, and the minima of their formulations (OPTIMA).
SHAPES = {
    "gramacy": (2, 2, 0.59978805, [0.0] * 2, [1.0] * 2),
    "constrained-hartmann6": (6, 1, -3.32237, [0.0] * 6, [1.0] * 6),
    "pressure-vessel": (4, 4, 6059.714335, [0.0, 0.0, 10.0, 150.0], [10.0, 10.0, 50.0, 200.0]),
    "tension-compression-string": (3, 4, 0.012665232, [0.01] * 3, [1.0, 1.0, 20.0]),
    "welded-beam": (4, 6, 1.5870775, [0.125, 0.1, 0.1, 0.1], [10.0] * 4),
    "speed-reducer": (
        7,
        11,
        2996.3481649,
        [2.6, 0.7, 17.0, 7.3, 7.8, 2.9, 5.0],
        [3.6, 0.8, 28.0, 8.3, 8.3, 3.9, 5.5],
    ),
}

#: A feasible point at each task's minimum (multistart SLSQP and differential evolution on the
#: task's own constraints, nudged into feasibility): name -> (x, how far above optimal_value its
#: value may be). The literature's values (BoTorch's ``optimal_value``) lie above feasible
#: values: Gramacy's 0.5998 and the speed reducer's 2996.3482 are rounded up, the spring's
#: 0.012681 and the pressure vessel's 6059.946341 are Coello Coello's 2002 results, not minima,
#: and the welded beam's 1.728226 is for another buckling load than BoTorch's (its minimum
#: 1.5870775 has x3 at its bound 10).
OPTIMA = {
    "gramacy": ((0.19512267070388112, 0.4046653813062055), 1e-8),
    "constrained-hartmann6": ((0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573), 1e-4),
    "pressure-vessel": ((0.8125, 0.4375, 42.0984455958, 176.63659585), 1e-6),
    "tension-compression-string": (
        (0.05168915783659955, 0.35672006744673845, 11.288829290206422),
        1e-8,
    ),
    "welded-beam": (
        (0.16800000000000725, 4.067084773077951, 9.99999999999978, 0.16800000000001525),
        1e-7,
    ),
    "speed-reducer": ((3.5, 0.7, 17.0, 7.3, 7.8, 3.3502146661, 5.2866832298), 1e-6),
}


def evaluate(task, x, seed=0):
    return task.evaluate(np.asarray(x, dtype=float), seed=seed, device=CPU)


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_task_has_its_dimension_bounds_constraints_and_optimum(name):
    dim, n_constraints, optimum, low, high = SHAPES[name]
    task = TASKS.create(name)
    assert task.dim == dim and task.n_constraints == n_constraints
    assert task.optimal_value == optimum
    np.testing.assert_allclose(task.space.from_unit(np.zeros((1, dim)))[0], low)
    np.testing.assert_allclose(task.space.from_unit(np.ones((1, dim)))[0], high)
    # A corner breaks at least one constraint of every task (read off the classes): the lower
    # one, but for Hartmann's ||x|| <= 1, which the origin meets and (1, ..., 1) does not.
    corner = evaluate(task, high if name == "constrained-hartmann6" else low)
    assert len(corner.constraints) == n_constraints
    assert max(corner.constraints) > 0 and not corner.feasible


@pytest.mark.parametrize("name", list(OPTIMA))
def test_the_optimal_value_is_the_minimum_over_the_feasible_points(name):
    """optimal_value is at most the value of a feasible point at the minimum (a larger one
    makes regret negative there), and within ``tol`` of it."""
    x, tol = OPTIMA[name]
    task = TASKS.create(name)
    found = evaluate(task, x)
    assert found.feasible and all(c <= 0 for c in found.constraints)
    assert 0.0 <= found.y_true - task.optimal_value <= tol, found.y_true - task.optimal_value


def test_constraints_are_the_negated_botorch_slack():
    """BoTorch's feasible is slack >= 0; ours c <= 0. On the Gramacy point (0.5, 0.5) the first
    constraint 1.5 - x1 - 2 x2 - 0.5 sin(2 pi (x1^2 - 2 x2)) = 1.5 - 1.5 - 0.5 sin(-1.5 pi) = -0.5
    and the second x1^2 + x2^2 - 1.5 = -1."""
    found = evaluate(TASKS.create("gramacy"), [0.5, 0.5])
    np.testing.assert_allclose(found.constraints, [-0.5, -1.0], atol=1e-12)
    assert found.feasible


def test_pressure_vessel_checks_its_constraints_on_the_rounded_thicknesses():
    """The objective costs x1 rounded to a multiple of 0.0625: at x3 = 50 the bound is
    x1 >= 0.0193 x3 = 0.965, and x1 = 0.966 costs as 0.9375, below it, so it is infeasible
    (BoTorch's slack checks 0.966 and calls it feasible)."""
    found = evaluate(TASKS.create("pressure-vessel"), [0.966, 1.0, 50.0, 150.0])
    assert found.constraints[0] == pytest.approx(0.965 - 0.9375) and not found.feasible


def test_objective_noise_is_seeded_and_leaves_the_constraints_alone():
    task = TASKS.create("welded-beam", noise_std=0.5)
    x = [1.0, 2.0, 3.0, 4.0]
    a, b, c = evaluate(task, x, seed=1), evaluate(task, x, seed=1), evaluate(task, x, seed=2)
    assert a == b and a.y != c.y and a.y != a.y_true
    assert a.constraints == c.constraints == evaluate(TASKS.create("welded-beam"), x).constraints


def test_a_function_with_its_own_constraint_noise_is_refused():
    with pytest.raises(ValueError, match="constraint noise"):
        ConstrainedTask(ConstrainedGramacy(constraint_noise_std=0.1))


def test_evaluation_constraints_are_checked_and_stored_as_floats():
    evaluation = Evaluation(y=1.0, constraints=[np.float32(-1.5), 2])
    assert evaluation.constraints == (-1.5, 2.0) and not evaluation.feasible
    assert Evaluation(y=1.0).constraints == () and Evaluation(y=1.0).feasible
    assert not Evaluation(y=1.0, constraints=(math.nan,)).feasible
    for bad in [(True,), ("1",), 0.5, None]:
        with pytest.raises(TypeError, match="`Evaluation.constraints` must be a tuple"):
            Evaluation(y=1.0, constraints=bad)
