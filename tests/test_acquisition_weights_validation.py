"""Ensemble weights of the marginal acquisitions: finite and positive, or refused with the value."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from orthobench.acquisition import MarginalLogEI
from orthobench.exceptions import NumericsWarning
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

DTYPE = torch.float64


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_non_finite_ensemble_weights_are_refused(bad: float) -> None:
    """An infinite weight normalizes to inf / inf = nan, and every value would be nan."""
    x = torch.rand(8, 2, generator=torch.Generator().manual_seed(0), dtype=DTYPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, x.sum(-1), "rbf-iso")
        lap = laplace_posterior(model)
    members, controls = [], []
    for seed in range(2):
        z = lap.sample_whitened(8, "iid", seed=seed)
        members.append(ThetaSampledGP.from_model(model, lap.theta(z)))
        controls.append(z)
    with pytest.raises(ValueError, match=rf"\[1.0, {bad}\]"):
        MarginalLogEI(model, members, controls, [1.0, bad])
