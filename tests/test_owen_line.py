"""``qmc-owen-line``: Owen-QMC outer points with a degree-3 stochastic rule along coordinate 1."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from scipy import stats

from orthobench.acquisition import MarginalLogEI
from orthobench.exceptions import NumericsWarning
from orthobench.pointsets import owen_line_points, point_count, point_set
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from orthobench.theta_estimators import draw_thetas, estimate

DTYPE = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def state():
    gen = _gen(0)
    x = torch.rand(12, 3, generator=gen, dtype=DTYPE)
    y = torch.sin(6.0 * x[:, 0]) + x[:, 1] ** 2 - 0.5 * x[:, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, "matern52-ard")
    return model, laplace_posterior(model), x


@pytest.mark.parametrize("p", [1, 2, 5])
def test_layout_nodes_and_weights(p: int) -> None:
    ps = owen_line_points(p, 7, generator=_gen(1))
    assert ps.z.shape == (21, p) and ps.weights.shape == (21,)
    assert (ps.n_rules, ps.points_per_rule, ps.unbiased, ps.exact_degree) == (7, 3, True, 0)
    torch.testing.assert_close(ps.weights.sum(), torch.tensor(1.0, dtype=DTYPE))
    triples = ps.z.reshape(7, 3, p)
    # Each outer point: the same coordinates 2..p, nodes 0, rho, -rho along coordinate 1.
    assert torch.equal(triples[:, 1:, 1:], triples[:, :1, 1:].expand(-1, 2, -1))
    assert (triples[:, 0, 0] == 0).all() and torch.equal(triples[:, 2, 0], -triples[:, 1, 0])
    rho = triples[:, 1, 0]
    torch.testing.assert_close(ps.weights.reshape(7, 3)[:, 1], 0.5 / rho**2 / 7)


def test_exact_to_degree_3_along_the_line_for_every_draw() -> None:
    # f(t, y) = (1 + t + 2 t^2 - t^3) exp(y_1): E[f | y] = 3 exp(y_1) for every outer point.
    for seed in range(5):
        ps = owen_line_points(4, 8, generator=_gen(seed))
        t, y = ps.z[:, 0], ps.z[:, 1]
        estimate_ = ps.integrate((1 + t + 2 * t**2 - t**3) * y.exp())
        torch.testing.assert_close(estimate_, 3 * y[::3].exp().mean())


@pytest.mark.slow
def test_unbiased_for_an_exponential() -> None:
    # E exp(a^T z) = exp(|a|^2 / 2); mean of 4000 independent rules within 4 standard errors.
    a = torch.tensor([0.9, 0.4, -0.3], dtype=DTYPE)
    rules = [owen_line_points(3, 4, generator=_gen(seed)) for seed in range(4000)]
    values = torch.stack([rule.integrate((rule.z @ a).exp()) for rule in rules])
    truth = math.exp(float(a @ a) / 2)
    se = float(values.std() / math.sqrt(values.shape[0]))
    assert abs(float(values.mean()) - truth) < 4 * se


def test_budget_and_name() -> None:
    assert point_count("qmc-owen-line", 8, 32) == 30
    assert point_count("qmc-owen-line", 8, 128) == 126
    assert point_set("qmc-owen-line", 8, 32, _gen(0)).name == "qmc-owen-line"


@pytest.mark.slow
def test_marginal_ei_is_unbiased_against_a_high_precision_reference(state) -> None:
    model, laplace, _ = state
    z_ref = laplace.sample_whitened(2**15, "qmc", seed=1)
    ref_gp = ThetaSampledGP.from_model(model, laplace.theta(z_ref))
    with torch.no_grad():
        X = torch.rand(64, 1, 3, generator=_gen(2), dtype=DTYPE)
        reference, best = ref_gp.log_ei(X).exp().mean(0).topk(4)
        # The points of largest EI: EI's tail in theta is light there, so 300 rebuilds see it
        # (far from it a t-test of 300 rebuilds against the reference is not informative).
        X = X[best]
        rebuilds = []
        for seed in range(300):
            draws = draw_thetas(laplace, "qmc-owen-line+rb", 32, seed=seed)
            rebuilds.append(estimate(draws.gp(model).log_ei(X).exp(), draws))
    rebuilds = torch.stack(rebuilds).numpy()  # R x 4
    # t-test of the rebuild mean against the reference, per point (Bonferroni over 4 points).
    result = stats.ttest_1samp(rebuilds, reference.numpy(), axis=0)
    assert (result.pvalue > 0.01 / 4).all(), (rebuilds.mean(0), reference, result.pvalue)


def test_acquisition_gradient_passes_gradcheck(state) -> None:
    model, laplace, x = state
    draws = draw_thetas(laplace, "qmc-owen-line+rb", 9, seed=3)
    acqf = MarginalLogEI(
        model, [draws.gp(model)], [draws.z], [1.0], estimator="mc", point_weights=[draws.weights]
    )
    X = torch.rand(3, 1, 3, generator=_gen(5), dtype=DTYPE, requires_grad=True)
    assert acqf(X).shape == (3,)
    assert torch.autograd.gradcheck(acqf, (X,))
