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
