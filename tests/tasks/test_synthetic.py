"""Synthetic tasks: bounds, known optima (regret is exact), seeded noise owned by the task."""

import time

import numpy as np
import pytest
import torch

from orthobench.registry import TASKS

CASES = {
    "hartmann6": (6, -3.32237),
    "ackley8": (8, 0.0),
    "michalewicz10": (10, -9.66015),
    "levy16": (16, 0.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dimension_optimum_and_regret_at_known_minimizer(name):
    dim, optimum = CASES[name]
    task = TASKS.create(name)
    assert task.dim == dim
    assert task.optimal_value == pytest.approx(optimum, abs=1e-4)
    if name != "michalewicz10":  # BoTorch lists no minimizer for Michalewicz10
        x_star = np.asarray(task.function._optimizers[0])
        evaluation = task.evaluate(x_star, seed=0, device=torch.device("cpu"))
        assert task.regret(evaluation.y) == pytest.approx(0.0, abs=1e-4)
    # no point in the box beats the optimum
    u = np.random.default_rng(0).random((256, dim))
    ys = [task.evaluate(x, seed=0, device=torch.device("cpu")).y for x in task.space.from_unit(u)]
    assert min(ys) >= task.optimal_value - 1e-6


def test_noise_is_seeded_and_has_the_requested_scale():
    task = TASKS.create("hartmann6", noise_std=0.5)
    x = np.full(6, 0.3)
    cpu = torch.device("cpu")
    assert task.evaluate(x, seed=7, device=cpu).y == task.evaluate(x, seed=7, device=cpu).y
    draws = np.array([task.evaluate(x, seed=s, device=cpu) for s in range(2000)], dtype=object)
    noise = np.array([e.y - e.y_true for e in draws])
    assert abs(noise.mean()) < 4 * 0.5 / np.sqrt(2000)
    assert noise.std() == pytest.approx(0.5, rel=0.1)


def test_negative_noise_is_rejected():
    with pytest.raises(ValueError, match="noise_std"):
        TASKS.create("levy16", noise_std=-1.0)


def test_delayed_waits_and_returns_the_functions_value():
    delayed = TASKS.create("delayed", function="levy16", seconds=0.2)
    x = np.full(16, 0.5)
    start = time.perf_counter()
    evaluation = delayed.evaluate(x, seed=0, device=torch.device("cpu"))
    assert time.perf_counter() - start >= 0.2
    expected = TASKS.create("levy16").evaluate(x, seed=0, device=torch.device("cpu"))
    assert evaluation == expected and delayed.optimal_value == 0.0


def test_delayed_with_jitter_waits_a_seeded_share_of_seconds_and_keeps_the_values():
    """Waits within ``seconds * (1 +- jitter)``, the same for a seed, different across seeds;
    the noisy values are those of the task without jitter."""
    jittered = TASKS.create("delayed", function="hartmann6", seconds=0.1, jitter=0.9, noise_std=0.1)
    plain = TASKS.create("delayed", function="hartmann6", seconds=0.0, noise_std=0.1)
    x = np.full(6, 0.3)
    waits = {}
    for seed in (0, 1, 2, 0):
        start = time.perf_counter()
        evaluation = jittered.evaluate(x, seed=seed, device=torch.device("cpu"))
        waits.setdefault(seed, []).append(time.perf_counter() - start)
        assert evaluation == plain.evaluate(x, seed=seed, device=torch.device("cpu"))
    assert all(0.01 <= w <= 0.19 + 0.05 for ws in waits.values() for w in ws)
    assert max(ws[0] for ws in waits.values()) - min(ws[0] for ws in waits.values()) > 0.01
    with pytest.raises(ValueError, match="jitter"):
        TASKS.check_params("delayed", {"jitter": 1.5})


def _michalewicz10_minimizer() -> np.ndarray:
    """Michalewicz is separable, ``f(x) = sum_i g_i(x_i)``: the minimizer of each 1-d term,
    from a fine grid refined by a bounded scalar search."""
    from scipy.optimize import minimize_scalar

    grid = np.linspace(0.0, np.pi, 20001)
    x = []
    for i in range(1, 11):

        def g(t, i=i):
            return -np.sin(t) * np.sin(i * t**2 / np.pi) ** 20

        t0 = grid[np.argmin(g(grid))]
        step = grid[1]
        bounds = (max(0.0, t0 - step), min(np.pi, t0 + step))
        x.append(minimize_scalar(g, bounds=bounds, method="bounded", options={"xatol": 1e-12}).x)
    return np.array(x)


@pytest.mark.parametrize("name", ["michalewicz10", "delayed"])
def test_michalewicz10_regret_is_not_negative_at_its_minimizer(name):
    """BoTorch's -9.66015 lies 1.7e-6 above the true minimum -9.6601517156413, so a point near
    the minimizer had a negative regret (reports take regret to be >= 0)."""
    params = {"function": "michalewicz10", "seconds": 0.0} if name == "delayed" else {}
    task = TASKS.create(name, **params)
    y = task.evaluate(_michalewicz10_minimizer(), seed=0, device=torch.device("cpu")).y
    assert y == pytest.approx(-9.6601517156413, abs=1e-12)
    assert 0.0 <= task.regret(y) < 1e-12


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"seconds": 1e10}, "seconds"),  # past time.sleep's range (threading.TIMEOUT_MAX)
        ({"seconds": 6e9, "jitter": 0.9}, "seconds"),  # the longest wait is 1.9 x 6e9
    ],
)
def test_delayed_refuses_a_wait_time_sleep_cannot_take_when_built(params, fragment):
    """A wait past ``time.sleep``'s range built (suite load passed), and then every evaluation
    raised OverflowError."""
    with pytest.raises(ValueError, match=fragment) as err:
        TASKS.create("delayed", **params)
    assert "\n" not in str(err.value)
    TASKS.create("delayed", seconds=6e9)  # within range: built, not waited for


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"seconds": -1.0}, "seconds"),
        ({"seconds": float("nan")}, "seconds"),
        ({"jitter": 1.5}, "jitter"),
    ],
)
def test_delayed_task_checks_its_arguments(kwargs, fragment):
    """DelayedTask built directly (not through the factory's annotated types) took a negative
    wait (time.sleep's ValueError at every evaluation) and a jitter above 1."""
    from orthobench.tasks.synthetic import DelayedTask, hartmann6

    with pytest.raises(ValueError, match=fragment):
        DelayedTask(hartmann6(), **{"seconds": 0.0, **kwargs})


@pytest.mark.parametrize("noise_std", [float("nan"), float("inf")])
def test_a_non_finite_noise_std_is_refused(noise_std):
    """``nan < 0`` is False: a NaN noise_std was accepted and made every y NaN."""
    from botorch.test_functions import Hartmann

    from orthobench.tasks.synthetic import SyntheticTask

    with pytest.raises(ValueError, match="noise_std"):
        SyntheticTask(Hartmann(dim=6), noise_std=noise_std)
