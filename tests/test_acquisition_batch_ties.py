"""Exchangeability of the batch acquisitions where candidates tie in their first coordinate.

``optimize_acqf`` clamps candidates to the box, so several points of a batch often share a
bound in the first coordinate; the canonical order must then still be a function of the set of
points, not of the order they come in.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from orthobench.acquisition import MarginalLogQCEI, MarginalLogQEI, draw_inner_base_samples
from orthobench.exceptions import NumericsWarning
from orthobench.surrogates.batch_ei import canonical_order
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

DTYPE = torch.float64


@pytest.fixture(scope="module")
def state():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(12, 2, generator=gen, dtype=DTYPE)
    y = torch.sin(5 * x[:, 0]) + torch.cos(4 * x[:, 1])
    c = 0.3 - x.sum(-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        objective, _ = fit_model(x, y, "matern52-ard")
        constraint, _ = fit_model(x, c, "matern52-ard")
        return [(m, laplace_posterior(m)) for m in (objective, constraint)]


def _draws(model_and_lap, n: int, seed: int):
    model, lap = model_and_lap
    z = lap.sample_whitened(n, "qmc", seed=seed)
    return ThetaSampledGP.from_model(model, lap.theta(z)), z


def _tied_batches() -> torch.Tensor:
    """``4 x 3 x 2`` batches whose points all lie on the bound ``x_0 = 1`` (two of them on
    ``x_0 = 0`` in the last batch)."""
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(4, 3, 2, generator=gen, dtype=DTYPE)
    X[:3, :, 0] = 1.0
    X[3, :2, 0] = 0.0
    return X


def _all_orders(acqf, X: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.stack([acqf(X[:, list(p)]) for p in itertools.permutations(range(3))])


def test_canonical_order_breaks_ties_by_the_next_coordinates() -> None:
    X = _tied_batches()
    for perm in itertools.permutations(range(3)):
        torch.testing.assert_close(canonical_order(X[:, list(perm)]), canonical_order(X))
    ordered = canonical_order(X)
    # Lexicographic: first coordinates non-decreasing, ties ordered by the second.
    assert bool((ordered[..., 1:, 0] >= ordered[..., :-1, 0]).all())
    tied = ordered[..., 1:, 0] == ordered[..., :-1, 0]
    assert bool((ordered[..., 1:, 1] >= ordered[..., :-1, 1])[tied].all())


def test_canonical_order_is_the_first_coordinates_sort_without_ties() -> None:
    X = torch.rand(16, 4, 3, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    order = X[..., 0].argsort(dim=-1)
    torch.testing.assert_close(
        canonical_order(X), X.gather(-2, order.unsqueeze(-1).expand_as(X)), rtol=0, atol=0
    )


def test_batch_qei_is_exchangeable_with_tied_first_coordinates(state) -> None:
    objective = state[0]
    gp, z = _draws(objective, 16, 0)
    acqf = MarginalLogQEI(
        objective[0],
        [gp],
        [z],
        [1.0],
        base_samples=draw_inner_base_samples(16, 4, seed=1, inner=32),
        X_pending=torch.tensor([[0.5, 0.5]], dtype=DTYPE),
    )
    values = _all_orders(acqf, _tied_batches())
    torch.testing.assert_close(values, values[:1].expand_as(values), rtol=0, atol=1e-12)


def test_batch_cei_is_exchangeable_with_tied_first_coordinates(state) -> None:
    (gp, z), (cgp, cz) = _draws(state[0], 16, 0), _draws(state[1], 16, 1)
    acqf = MarginalLogQCEI(
        state[0][0],
        [gp],
        [z],
        [1.0],
        base_samples=draw_inner_base_samples(16, 3, seed=1, inner=32),
        constraints=[cgp],
        constraint_controls=[cz],
        constraint_base_samples=[draw_inner_base_samples(16, 3, seed=2, inner=32)],
    )
    values = _all_orders(acqf, _tied_batches())
    torch.testing.assert_close(values, values[:1].expand_as(values), rtol=0, atol=1e-12)
