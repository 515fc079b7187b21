import numpy as np
import pytest

from orthobench.space import Parameter, SearchSpace


def test_round_trip_float_and_log():
    space = SearchSpace(
        (
            Parameter(name="a", low=-2.0, high=3.0),
            Parameter(name="lr", low=1e-5, high=1e-1, kind="log"),
        )
    )
    u = np.random.default_rng(0).random((50, 2))
    np.testing.assert_allclose(space.to_unit(space.from_unit(u)), u, atol=1e-12)
    # log scale: the unit midpoint is the geometric mean of the bounds
    assert space.from_unit(np.array([[0.5, 0.5]]))[0, 1] == pytest.approx(np.sqrt(1e-5 * 1e-1))


def test_int_parameter_gives_whole_numbers_with_equal_shares():
    p = Parameter(name="layers", low=1, high=4, kind="int")
    u = np.linspace(0, 1, 4001)
    values = p.from_unit(u)
    assert set(np.unique(values)) == {1.0, 2.0, 3.0, 4.0}
    counts = np.array([(values == k).sum() for k in (1, 2, 3, 4)])
    assert counts.min() / counts.max() > 0.99


def test_an_int_parameters_zero_is_not_negative_zero():
    """``rint(-0.4)`` gave -0.0: stored as ``-0.0`` and printed so by a task formatting x."""
    values = Parameter(name="n", low=0, high=5, kind="int").from_unit(np.array([0.0, 0.05]))
    assert not np.signbit(values).any()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"low": 1.0, "high": 1.0}, "low < high"),
        ({"low": 0.0, "high": 1.0, "kind": "log"}, "low > 0"),
        ({"low": 0, "high": 1, "kind": "cat"}, "kind"),
    ],
)
def test_bad_parameters_raise_with_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Parameter(name="p", **kwargs)


@pytest.mark.parametrize(
    ("low", "high"), [(-0.3, 0.1), (-2.3, 0.7), (-0.1, 0.2), (-5.0, 0.1), (1e-3, 7.3)]
)
def test_float_values_stay_within_inclusive_bounds(low, high):
    """``low + u (high - low)`` rounds past ``high`` for some bounds (-0.3, 0.1 gives
    0.10000000000000003 at u = 1): decoded values must stay in ``[low, high]``."""
    p = Parameter(name="x", low=low, high=high)
    values = p.from_unit(np.concatenate([np.linspace(0, 1, 1001), [1 - 1e-17, 1.0]]))
    assert values.min() >= low and values.max() <= high
    assert values[0] == low


@pytest.mark.parametrize(("low", "high"), [(0.5, 3.5), (1, 4.2)])
def test_int_parameter_needs_whole_number_bounds(low, high):
    """An int parameter with fractional bounds decoded to the bounds themselves (0.5, 3.5), which
    are not whole numbers and which ``as_dict`` truncated out of range (0.5 -> 0)."""
    with pytest.raises(ValueError, match="whole numbers"):
        Parameter(name="k", low=low, high=high, kind="int")
    assert Parameter(name="k", low=1.0, high=np.int64(4), kind="int").high == 4


@pytest.mark.parametrize(("low", "high"), [(-np.inf, 0.0), (0.0, np.inf), (1.0, np.inf)])
def test_infinite_bounds_are_refused(low, high):
    """An infinite bound decodes every point to ``nan`` or ``inf``."""
    with pytest.raises(ValueError, match="finite"):
        Parameter(name="x", low=low, high=high)


def test_bounds_whose_width_overflows_are_refused():
    """Both bounds finite, ``high - low`` infinite: every decoded point was NaN or a bound."""
    with pytest.raises(ValueError, match="width `high - low` must be finite"):
        Parameter(name="x", low=-1e308, high=1e308)


def _log_uniform_bound_pairs(n: int = 30) -> list[tuple[float, float]]:
    """``n`` pairs ``low < high`` of log-uniform bounds between 1e-8 and 1e4 (fixed seed)."""
    rng = np.random.default_rng(0)
    pairs = [(1e-5, 0.1)]
    while len(pairs) < n:
        low, high = sorted(10.0 ** rng.uniform(-8, 4, size=2))
        if low < high:
            pairs.append((float(low), float(high)))
    return pairs


@pytest.mark.parametrize(("low", "high"), _log_uniform_bound_pairs())
def test_log_values_stay_within_inclusive_bounds(low, high):
    """``exp(log low + u (log high - log low))`` rounds past a bound for some pairs (at u = 0 or
    u = 1): decoded values of a log parameter must stay in ``[low, high]``, as a float's do."""
    p = Parameter(name="lr", low=low, high=high, kind="log")
    values = p.from_unit(np.concatenate([[0.0], np.linspace(0, 1, 1001), [1 - 1e-17, 1.0]]))
    assert values.min() >= low and values.max() <= high
