"""Ensemble weights (tempered exponential weights with a floor) and the surrogate ensemble."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from orthobench.exceptions import NumericsWarning
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
    with pytest.raises(ValueError, match="inf"):
        update_weights(w, torch.tensor([0.0, -math.inf], dtype=DTYPE), tau=1.0, delta=0.0)


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
