"""Ensemble weights (tempered exponential weights with a floor) and the surrogate ensemble."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch

from orthobench.exceptions import NumericsWarning
from orthobench.optimizers.orthobo import OrthoBO
from orthobench.surrogates.ensemble import SurrogateEnsemble, update_weights, weight_entropy

DTYPE = torch.float64


def test_update_is_normalized_exponential_weights_then_floor() -> None:
    weights = torch.tensor([0.5, 0.3, 0.2], dtype=DTYPE)
    scores = torch.tensor([-1.0, -3.0, -30.0], dtype=DTYPE)
    tilted = weights * torch.exp(scores / 2.0)
    tilted = tilted / tilted.sum()
    expected = tilted.clamp_min(0.01)
    expected = expected / expected.sum()
    new = update_weights(weights, scores, tau=2.0, delta=0.01)
    torch.testing.assert_close(new, expected)
    assert float(new.sum()) == pytest.approx(1.0)
    # The floor was active for the collapsed member and keeps it alive.
    assert tilted[2] < 0.01 and new[2] > 0.009


def test_update_is_invariant_to_a_common_shift_of_the_scores() -> None:
    """Log densities shift with the units of y; the weights must not (module notes)."""
    weights = torch.tensor([0.6, 0.4], dtype=DTYPE)
    scores = torch.tensor([-2.0, -2.5], dtype=DTYPE)
    a = update_weights(weights, scores, tau=1.0, delta=1e-3)
    b = update_weights(weights, scores - 1000.0, tau=1.0, delta=1e-3)
    torch.testing.assert_close(a, b)
    assert a[0] > weights[0]


def test_large_temperature_barely_moves_the_weights() -> None:
    weights = torch.tensor([0.25, 0.75], dtype=DTYPE)
    new = update_weights(weights, torch.tensor([0.0, -5.0], dtype=DTYPE), tau=1e6, delta=1e-3)
    torch.testing.assert_close(new, weights, rtol=1e-5, atol=0)


def test_update_rejects_bad_arguments_with_their_values() -> None:
    w = torch.tensor([0.5, 0.5], dtype=DTYPE)
    with pytest.raises(ValueError, match="tau=0.0"):
        update_weights(w, torch.zeros(2, dtype=DTYPE), tau=0.0, delta=0.0)
    with pytest.raises(ValueError, match="delta=0.6"):
        update_weights(w, torch.zeros(2, dtype=DTYPE), tau=1.0, delta=0.6)
    with pytest.raises(ValueError, match="nan"):
        update_weights(w, torch.tensor([0.0, math.nan], dtype=DTYPE), tau=1.0, delta=0.0)
    with pytest.raises(ValueError, match="inf"):
        update_weights(w, torch.tensor([0.0, math.inf], dtype=DTYPE), tau=1.0, delta=0.0)


def test_entropy() -> None:
    assert weight_entropy(torch.full((4,), 0.25, dtype=DTYPE)) == pytest.approx(math.log(4))
    assert weight_entropy(torch.tensor([1.0, 0.0], dtype=DTYPE)) == 0.0


def test_ensemble_fits_members_and_learns_from_scores() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(16, 2, generator=gen, dtype=DTYPE)
    y = torch.sin(8 * x[:, 0]) * torch.cos(5 * x[:, 1])
    ens = SurrogateEnsemble(["linear", "matern52-ard"], tau=1.0, delta=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        members = ens.fit(x, y)
    assert [m.kernel for m in members] == ["linear", "matern52-ard"]
    assert all(m.laplace.layout.kernel == m.kernel for m in members)
    recorded = ens.diagnostics()
    assert recorded.kernels == ("linear", "matern52-ard") and recorded.weights == (0.5, 0.5)
    assert recorded.entropy == pytest.approx(math.log(2)) == recorded.max_entropy
    ens.update([-10.0, -1.0])
    assert ens.weights[1] > 0.99 and ens.weights[0] >= 1e-3 / (1 + 1e-3) - 1e-12
    json.dumps(ens.diagnostics().to_info())


def test_ensemble_rejects_unknown_kernels_and_empty_lists() -> None:
    with pytest.raises(ValueError, match="'cosine'"):
        SurrogateEnsemble(["matern52-ard", "cosine"])
    with pytest.raises(ValueError, match="at least one kernel"):
        SurrogateEnsemble([])
    with pytest.raises(ValueError, match="delta=0.5"):
        SurrogateEnsemble(["rbf-iso", "linear", "matern52-iso"], delta=0.5)


def test_a_minus_inf_log_score_sends_that_member_to_the_floor_with_a_warning() -> None:
    """A Gaussian predictive density is never 0: a ``-inf`` log score is an underflow (an
    observation ``1e154`` standard deviations off). Exponential weights give that member
    ``exp(-inf) = 0``, and the floor keeps it alive; the update used to raise and stop the run."""
    weights = torch.tensor([0.5, 0.3, 0.2], dtype=DTYPE)
    scores = torch.tensor([-1.0, -math.inf, -2.0], dtype=DTYPE)
    with pytest.warns(NumericsWarning, match=r"-inf .*member\(s\) \[1\]"):
        new = update_weights(weights, scores, tau=1.0, delta=0.01)
    tilted = weights * scores.exp()
    expected = (tilted / tilted.sum()).clamp_min(0.01)
    torch.testing.assert_close(new, expected / expected.sum())


@pytest.mark.parametrize(
    ("weights", "scores", "delta"),
    [
        ([0.5, 0.5], [-math.inf, -math.inf], 1e-3),  # every member underflowed
        ([1.0, 0.0], [-math.inf, 0.0], 0.0),  # no floor: the only weighted member underflowed
        ([0.5, 0.5], [-1e300, -2e300], 0.0),  # l / tau underflows to -inf for both
    ],
)
def test_an_update_without_a_usable_score_keeps_the_weights_with_a_warning(
    weights, scores, delta: float
) -> None:
    """Where no member keeps a finite tilted weight, softmax would give NaN weights; the update
    keeps the weights instead (a recorded, warned fallback)."""
    weights = torch.tensor(weights, dtype=DTYPE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        new = update_weights(weights, torch.tensor(scores, dtype=DTYPE), tau=1e-10, delta=delta)
    assert torch.isfinite(new).all() and float(new.sum()) == pytest.approx(1.0)
    if math.isinf(scores[0]):
        torch.testing.assert_close(new, weights)
        assert any("kept the weights" in str(w.message) for w in caught)
    else:  # finite scores whose l / tau underflows: the larger one wins, as in exact arithmetic
        torch.testing.assert_close(new, torch.tensor([1.0, 0.0], dtype=DTYPE))


def test_a_tiny_temperature_does_not_overflow_into_nan_weights() -> None:
    """``l / tau`` overflowing to ``+inf`` made softmax NaN; the winner takes the weight."""
    weights = torch.tensor([0.5, 0.5], dtype=DTYPE)
    new = update_weights(weights, torch.tensor([2.0, 1.0], dtype=DTYPE), tau=1e-308, delta=1e-3)
    torch.testing.assert_close(new, torch.tensor([1.0, 1e-3], dtype=DTYPE) / 1.001)


def test_ensemble_records_the_fallback_of_its_last_update() -> None:
    ens = SurrogateEnsemble(["matern52-iso", "rbf-iso"], delta=1e-3)
    assert ens.fallback is None
    with pytest.warns(NumericsWarning, match="kept the weights"):
        ens.update([-math.inf, -math.inf])
    assert "kept the weights" in ens.fallback
    torch.testing.assert_close(ens.weights, torch.full((2,), 0.5, dtype=DTYPE))
    ens.update([-1.0, -2.0])
    assert ens.fallback is None and ens.weights[0] > 0.5


def test_orthobo_survives_an_observation_no_member_can_score() -> None:
    """An observation of ``1e200`` makes every member's log score ``-inf``; ``tell`` raised
    ``ValueError`` from the weight update and stopped the run."""
    opt = OrthoBO(
        2,
        kernel=["matern52-iso", "rbf-iso"],
        theta_samples=8,
        raw_samples=8,
        num_restarts=1,
        seed=0,
        fit="fast",
    )
    x = torch.rand(6, 2, generator=torch.Generator().manual_seed(0), dtype=DTYPE).numpy()
    opt.tell(x, np.sin(3.0 * x[:, 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        suggestion = opt.ask(1)
    with pytest.warns(NumericsWarning, match="kept the weights"):
        opt.tell(suggestion.x, np.array([1e200]))
    assert torch.isfinite(opt.ensemble.weights).all()
    # The next step's record names the fallback (the results' ``fallback`` column).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        after = opt.ask(1)
    assert "ensemble: no member has a usable log score" in after.info["fallback"]
