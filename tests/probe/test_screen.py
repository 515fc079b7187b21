"""The estimator screen: corr(EI, proxy) and E[proxy] / E[EI] at the top-variance probe points."""

from __future__ import annotations

import warnings

import pytest
import torch

from orthobench.exceptions import NumericsWarning
from orthobench.probe.screen import screen_proxy
from orthobench.surrogates.gp import fit_model
from orthobench.surrogates.laplace import ThetaSampledGP, laplace_posterior

DTYPE = torch.float64


@pytest.fixture(scope="module")
def state():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(12, 3, generator=gen, dtype=DTYPE)
    y = torch.sin(6.0 * x[:, 0]) + x[:, 1] ** 2 - 0.5 * x[:, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, "matern52-ard")
        laplace = laplace_posterior(model)
    probes = torch.rand(32, 3, generator=gen, dtype=DTYPE)
    return model, laplace, probes


def _ei(model, laplace, probes):
    def proxy(z: torch.Tensor) -> torch.Tensor:
        gp = ThetaSampledGP.from_model(model, laplace.theta(z))
        return gp.log_ei(probes.unsqueeze(-2)).exp()

    return proxy


def test_ei_itself_passes_with_correlation_one_and_ratio_one(state):
    model, laplace, probes = state
    result = screen_proxy(model, laplace, probes, _ei(*state), top_k=5, n_draws=512, seed=3)
    assert result.points.shape == (5,) and len(set(result.points.tolist())) == 5
    assert (result.ei_variance[:-1] >= result.ei_variance[1:]).all()  # decreasing
    torch.testing.assert_close(result.corr, torch.ones(5, dtype=DTYPE))
    torch.testing.assert_close(result.mean_ratio, torch.ones(5, dtype=DTYPE))


def test_the_top_points_are_those_of_largest_ei_variance(state):
    model, laplace, probes = state
    result = screen_proxy(model, laplace, probes, _ei(*state), top_k=3, n_draws=512, seed=3)
    ei = _ei(*state)(laplace.sample_whitened(512, "iid", seed=3))
    assert result.points.tolist() == ei.var(dim=0).argsort(descending=True)[:3].tolist()


def test_an_independent_proxy_is_uncorrelated(state):
    model, laplace, probes = state
    n = 4096
    gen = torch.Generator().manual_seed(11)

    def noise(z: torch.Tensor) -> torch.Tensor:
        return 1.0 + torch.randn(z.shape[0], probes.shape[0], generator=gen, dtype=DTYPE)

    result = screen_proxy(model, laplace, probes, noise, top_k=6, n_draws=n, seed=5)
    # corr of independent samples: sd 1 / sqrt(n) ~ 0.016; 5 sd.
    assert result.corr.abs().max() < 5 / n**0.5


def test_bad_arguments_name_the_value(state):
    model, laplace, probes = state
    with pytest.raises(ValueError, match="top_k=33"):
        screen_proxy(model, laplace, probes, _ei(*state), top_k=33, seed=0)
    with pytest.raises(ValueError, match=r"\(64, 32\)"):
        screen_proxy(model, laplace, probes, lambda z: z, n_draws=64, seed=0)
