"""Contract edges of the baseline optimizers: what ``tell`` and ``ask`` accept, degenerate
histories, constructor values, and TuRBO's constrained qLogEI (as :class:`QLogEI`'s)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.quasirandom import SobolEngine

from orthobench.optimizers.botorch_baselines import QUCB, QLogEI
from orthobench.optimizers.turbo import TuRBO
from orthobench.registry import OPTIMIZERS

DIM = 3
SMALL = {
    "qlogei": {"raw_samples": 16, "num_restarts": 2, "function_samples": 8},
    "ucb": {"raw_samples": 16, "num_restarts": 2, "function_samples": 8},
    "turbo": {"n_candidates": 64},
    "mc-tpe": {"bootstrap_fits": 8},
    "orthobo-tpe": {"bootstrap_fits": 8, "control_mean_draws": 64},
    "sobol": {},
}


def make(name: str, **overrides):
    return OPTIMIZERS.create(
        name, DIM, seed=0, device="cpu", dtype=torch.float64, **{**SMALL[name], **overrides}
    )


def design(n: int = 6) -> tuple[np.ndarray, np.ndarray]:
    x = SobolEngine(DIM, scramble=True, seed=0).draw(n, dtype=torch.float64).numpy()
    return x, ((x - 0.3) ** 2).sum(-1)


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.array([[0.1, np.nan, 0.2]]), r"finite points in the unit cube, but rows \[0\]"),
        (np.array([[0.1, 0.2, 0.3], [0.5, 1.5, 0.5]]), r"unit cube, but rows \[1\]"),
        (np.array([[-1e-6, 0.2, 0.3]]), r"unit cube, but rows \[0\]"),
    ],
)
def test_tell_refuses_points_that_are_not_finite_unit_cube_points(name, x, match) -> None:
    """A NaN or out-of-cube point was taken into the history: MC-TPE then proposed from it
    without a word, the GP optimizers failed later in BoTorch's input checks."""
    opt = make(name)
    with pytest.raises(ValueError, match=match) as err:
        opt.tell(x, np.zeros(len(x)))
    assert "\n" not in str(err.value)
    assert opt.train_y.shape == (0,) and opt.train_x.shape == (0, DIM)


def test_tell_clips_round_off_beyond_the_cube_and_checks_the_shapes() -> None:
    opt = make("sobol")
    opt.tell(np.array([[1.0 + 1e-12, -1e-12, 0.5]]), np.array([1.0]))
    assert opt.train_x.tolist() == [[1.0, 0.0, 0.5]]
    with pytest.raises(ValueError, match=r"y of shape n, got .* and \(1, 1\)"):
        opt.tell(np.array([[0.5, 0.5, 0.5]]), np.array([[1.0]]))
    with pytest.raises(ValueError, match=r"x of shape n x 3 .* got \(1, 1, 3\)"):
        opt.tell(np.full((1, 1, DIM), 0.5), np.array([1.0]))
    assert opt.train_y.shape == (1,)


@pytest.mark.parametrize(("y", "kind"), [([True], "bool"), ([1 + 2j], "complex128")])
def test_tell_refuses_objective_values_that_are_not_real_numbers(y, kind) -> None:
    """A bool was told as 1.0 and a complex value without its imaginary part (a torch warning
    the only sign); an ``Evaluation`` refuses both, an ask/tell user got neither."""
    opt = make("sobol")
    with pytest.raises(ValueError, match=f"tell\\(\\) needs real numbers as y, but got {kind}"):
        opt.tell(np.full((1, DIM), 0.5), y)
    assert opt.train_y.shape == (0,)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_an_empty_tell_changes_nothing(name: str) -> None:
    """Telling no points (every evaluation of a step invalid, in a plugin loop) is a no-op:
    TuRBO divided by the batch size in its failure tolerance (ZeroDivisionError)."""
    x, y = design()
    opt, ref = make(name), make(name)
    for o in (opt, ref):
        o.tell(x, y)
    opt.tell(np.empty((0, DIM)), np.empty(0))
    assert opt.state_dict() == ref.state_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(opt.ask(1).x, ref.ask(1).x)


@pytest.mark.parametrize("n", [1.5, 2.0, True, "2"])
def test_ask_refuses_a_count_that_is_not_an_integer_before_counting_it(n) -> None:
    opt = make("sobol")
    with pytest.raises(ValueError, match=rf"but got n={n!r}"):
        opt.ask(n)
    assert opt.state_dict()["asks"] == 0


def test_ask_takes_a_numpy_integer_count() -> None:
    opt = make("sobol")
    assert opt.ask(np.int64(2)).x.shape == (2, DIM)


def test_ucb_on_a_constrained_history_searches_the_objective_alone() -> None:
    """QUCB "stays unconstrained": told constraint values (outside the loop, which refuses the
    pair), it fitted a GP per constraint and BoTorch's qUCB refused the multi-output model."""
    x, y = design()
    opt = QUCB(DIM, seed=0, **SMALL["ucb"])
    ref = QUCB(DIM, seed=0, **SMALL["ucb"])
    opt.tell(x, y, np.linspace(-1.0, 1.0, len(y))[:, None])
    ref.tell(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(opt.ask(1).x, ref.ask(1).x)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: QUCB(2, seed=0, beta=float("nan")), "beta=nan"),
        (lambda: QUCB(2, seed=0, beta=float("inf")), "beta=inf"),
        (lambda: TuRBO(2, seed=0, min_improvement=float("nan")), "min_improvement=nan"),
        (lambda: TuRBO(2, seed=0, min_improvement=float("inf")), "min_improvement=inf"),
    ],
)
def test_constructors_refuse_non_finite_floats(build, match) -> None:
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("name", ["qlogei", "ucb", "turbo"])
def test_fewer_raw_samples_than_restarts_is_refused_at_load_and_in_the_constructor(name) -> None:
    """``optimize_acqf`` picks ``num_restarts`` starts among ``raw_samples`` points: with fewer,
    every step fell back to the best raw Sobol' point."""
    params = {"raw_samples": 4, "num_restarts": 8}
    with pytest.raises(ValueError, match=r"raw_samples >= num_restarts.*raw_samples=4"):
        OPTIMIZERS.check_params(name, params)
    with pytest.raises(ValueError, match=r"raw_samples >= num_restarts.*raw_samples=4"):
        OPTIMIZERS.create(name, 2, seed=0, **params)
    OPTIMIZERS.check_params(name, {"raw_samples": 8, "num_restarts": 8})


def _half_plane_history() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A symmetric objective; only ``x0 + x1 > 1`` is feasible (``c = 1 - x0 - x1``)."""
    x = SobolEngine(2, scramble=True, seed=1).draw(12, dtype=torch.float64).numpy()
    return x, ((x - 0.5) ** 2).sum(-1), (1.0 - x.sum(-1))[:, None]


def _captured_acquisition(opt, x, y, c) -> torch.nn.Module:
    """The acquisition ``opt`` maximizes in its first ask on ``(x, y, c)`` (not maximized)."""
    opt.tell(x, y, c)
    built = {}

    def capture(acqf, *, q, bounds, **_):
        built["acqf"] = acqf
        return bounds.mean(dim=0).expand(q, -1)

    opt._maximize = capture
    opt.ask(1)
    return built["acqf"]


def _turbo_qlogei(**kwargs) -> TuRBO:
    return TuRBO(2, seed=0, acquisition="qlogei", raw_samples=16, num_restarts=2, **kwargs)


POINTS = torch.tensor([[0.25, 0.35], [0.75, 0.65], [0.5, 0.52]], dtype=torch.float64)


def test_turbo_constrained_qlogei_does_not_depend_on_the_units_of_a_constraint() -> None:
    """As :class:`QLogEI`'s (which the module doc says TuRBO uses): each constraint in units of
    its observed spread, so values 1e5 times larger (the pressure vessel's) give the same
    acquisition; with BoTorch's fixed eta the infeasible point's value fell from -25 to -48."""
    x, y, c = _half_plane_history()
    values = []
    for scale in (1.0, 1e5):
        acqf = _captured_acquisition(_turbo_qlogei(function_samples=256), x, y, c * scale)
        with torch.no_grad():
            values.append(acqf(POINTS.unsqueeze(-2)))
    torch.testing.assert_close(values[1], values[0], rtol=1e-4, atol=1e-4)


def test_turbo_constrained_qlogei_is_qlogeis_on_a_run_of_the_whole_history() -> None:
    """Before any restart the run is the whole history and the region holds every point: the
    same seeded fits and sampler give QLogEI's acquisition, value for value."""
    x, y, c = _half_plane_history()
    kwargs = {"function_samples": 64, "raw_samples": 16, "num_restarts": 2}
    turbo = _captured_acquisition(_turbo_qlogei(function_samples=64), x, y, c)
    qlogei = _captured_acquisition(QLogEI(2, seed=0, **kwargs), x, y, c)
    with torch.no_grad():
        torch.testing.assert_close(turbo(POINTS.unsqueeze(-2)), qlogei(POINTS.unsqueeze(-2)))
