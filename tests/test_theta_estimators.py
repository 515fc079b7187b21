"""Estimators of E_q[EI] by name: grammar, draws and counts, weighted rules, Rao-Blackwellization.

The ``fitted`` states are fitted on the CPU and moved to each available ``device``; draws are made
on the CPU and moved (:func:`~orthobench.theta_estimators.draw_thetas`), so every device
evaluates the same thetas.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
import torch

from orthobench.estimators import ESTIMATORS, mc_mean, shrunk_mean, weighted_mean
from orthobench.exceptions import NumericsWarning
from orthobench.pointsets import POINT_SETS, point_count
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from orthobench.theta_estimators import (
    ThetaDraws,
    ThetaEstimator,
    constant_mean_conditional,
    draw_thetas,
    estimate,
    parse_theta_estimator,
)
from tests.helpers import flip_eigenvector_signs

DTYPE = torch.float64


def _fitted(kernel: str, n: int = 10, d: int = 2, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=gen, dtype=DTYPE)
    y = torch.sin(6.0 * x[:, 0]) + x[:, 1] ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, kernel)
        return model, laplace_posterior(model)


@pytest.fixture(scope="module", params=["matern52-ard", "rbf-iso"])
def fitted(request, to_device):
    return to_device(_fitted(request.param))


def _candidates(d: int = 2, n: int = 9, device: torch.device | str = "cpu") -> torch.Tensor:
    x = torch.rand(n, 1, d, generator=torch.Generator().manual_seed(7), dtype=DTYPE)
    return x.to(device)


# ----------------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize(
    ("name", "parsed", "canonical"),
    [
        ("orth", ("orth", "iid", False), "orth"),
        ("orth-shrink@qmc", ("orth-shrink", "qmc", False), "orth-shrink@qmc"),
        ("mc+rb@antithetic", ("mc", "antithetic", True), "mc+rb@antithetic"),
        ("mc@iid", ("mc", "iid", False), "mc"),
        ("sr3", ("sr3", "sr3", False), "sr3"),
        ("radial-cross+rb", ("radial-cross", "radial-cross", True), "radial-cross+rb"),
        ("qmc-owen+rb", ("qmc-owen", "qmc-owen", True), "qmc-owen+rb"),
    ],
)
def test_names_parse_to_base_sampling_and_rb(name: str, parsed: tuple, canonical: str) -> None:
    spec = parse_theta_estimator(name)
    assert tuple(spec) == parsed
    assert spec.name == canonical
    assert spec.point_set == (spec.base in POINT_SETS)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("nope", "unknown estimator 'nope'"),
        ("sr3@qmc", "takes no '@sampling'"),
        ("orth@sobol", "unknown sampling 'sobol'"),
        ("orth+RB", "unknown estimator 'orth\\+RB'"),
    ],
)
def test_bad_names_are_rejected_with_the_value(name: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_theta_estimator(name)


# ----------------------------------------------------------------------------------------------
# Draws, counts and weighted estimates


@pytest.mark.parametrize("name", sorted(POINT_SETS))
@pytest.mark.parametrize("rb", [False, True])
def test_point_set_draws_have_the_rule_count_and_weights(fitted, name: str, rb: bool) -> None:
    _, lap = fitted
    dims = lap.p - 1 if rb else lap.p
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a rule larger than the budget warns; tested in pointsets
        draws = draw_thetas(lap, ThetaEstimator(name, name, rb), 20, seed=3)
    assert draws.n_evaluations == point_count(name, dims, 20)
    assert draws.z.shape == (draws.n_evaluations, dims)
    assert draws.theta.shape == (draws.n_evaluations, lap.p)
    assert float(draws.weights.sum()) == pytest.approx(1.0)
    assert (draws.constant_mean_variance > 0) == rb


def test_weighted_rule_with_equal_iid_weights_is_plain_mc(fitted, device: torch.device) -> None:
    model, lap = fitted
    draws = draw_thetas(lap, "iid", 24, seed=0)
    torch.testing.assert_close(draws.weights, torch.full((24,), 1 / 24, dtype=DTYPE, device=device))
    values = draws.gp(model).log_ei(_candidates(device=device)).exp()
    torch.testing.assert_close(estimate(values, draws), mc_mean(values), rtol=1e-14, atol=0)
    torch.testing.assert_close(
        weighted_mean(values, draws.weights), values.mean(0), rtol=1e-14, atol=0
    )
    # `mc` on equal-weight draws of the same count and seed is the same estimate.
    mc = draw_thetas(lap, "mc", 24, seed=0)
    assert mc.weights is None
    mc_values = mc.gp(model).log_ei(_candidates(device=device)).exp()
    torch.testing.assert_close(estimate(mc_values, mc), mc_values.mean(0))


def test_equal_weight_draws_are_those_of_sample_whitened_and_rb_keeps_p_minus_1(fitted) -> None:
    _, lap = fitted
    for sampling in ("iid", "antithetic", "qmc"):
        plain = draw_thetas(lap, f"orth@{sampling}", 16, seed=5)
        rb = draw_thetas(lap, f"orth+rb@{sampling}", 16, seed=5)
        z = lap.sample_whitened(16, sampling, seed=5)
        torch.testing.assert_close(plain.z, z)
        torch.testing.assert_close(plain.theta, lap.theta(z))
        torch.testing.assert_close(rb.z, z[:, : lap.p - 1])


def test_estimate_refuses_mismatched_draws(fitted, device: torch.device) -> None:
    _, lap = fitted
    rule = draw_thetas(lap, "sr3", 30, seed=0)
    plain = draw_thetas(lap, "mc", 30, seed=0)
    values = torch.rand(rule.n_evaluations, 3, dtype=DTYPE, device=device)
    with pytest.raises(ValueError, match="needs equal-weight draws"):
        estimate(values, rule, parse_theta_estimator("orth"))
    with pytest.raises(ValueError, match="needs its own draws"):
        estimate(torch.rand(30, 3, dtype=DTYPE, device=device), plain, parse_theta_estimator("sr3"))
    with pytest.raises(ValueError, match="one row per draw"):
        estimate(torch.rand(4, 3, dtype=DTYPE, device=device), plain)


def test_weighted_mean_checks_its_weights() -> None:
    with pytest.raises(ValueError, match=r"shape \(5,\), but got \(4,\)"):
        weighted_mean(torch.rand(5, 2), torch.rand(4))


# ----------------------------------------------------------------------------------------------
# Rao-Blackwellization over the constant mean


def test_conditional_factor_reproduces_the_laplace_covariance(fitted) -> None:
    """``A_rb A_rb^T + v_c e_m e_m^T = H^{-1}`` and ``v_c = 1 / H_mm``."""
    _, lap = fitted
    factor, variance = constant_mean_conditional(lap)
    assert factor.shape == (lap.p, lap.p - 1)
    cov = factor @ factor.T
    cov[0, 0] += variance
    torch.testing.assert_close(cov, torch.linalg.inv(lap.hessian), rtol=1e-10, atol=1e-12)
    assert variance == pytest.approx(1.0 / float(lap.hessian[0, 0]))


def test_rao_blackwellized_ei_equals_gauss_hermite_integration_over_the_mean(
    fitted, device: torch.device
) -> None:
    """EI_RB(x; phi) = E_{m | phi}[EI(x; m, phi)]: 120-node Gauss-Hermite over the constant mean,
    each node a plain GP evaluation, agrees to rounding (log scale, down to log-EI ~ -1e3)."""
    model, lap = fitted
    draws = draw_thetas(lap, "mc+rb", 6, seed=1)
    X = _candidates(device=device)
    rb = draws.gp(model).log_ei(X)  # S x N
    nodes, w = np.polynomial.hermite_e.hermegauss(120)  # weight exp(-t^2 / 2)
    nodes = torch.tensor(nodes, dtype=DTYPE, device=device)
    log_w = torch.tensor(np.log(w / w.sum()), dtype=DTYPE, device=device)
    theta = draws.theta.repeat_interleave(nodes.numel(), 0).clone()
    theta[:, 0] += math.sqrt(draws.constant_mean_variance) * nodes.repeat(draws.n_evaluations)
    log_ei = ThetaSampledGP.from_model(model, theta).log_ei(X).reshape(6, nodes.numel(), -1)
    brute = torch.logsumexp(log_ei + log_w[None, :, None], dim=1)
    torch.testing.assert_close(rb, brute, rtol=1e-9, atol=1e-9)
    # The moments: mean at the conditional mean, variance + v_c a^2 with a = d mu / d m.
    mean, var = draws.gp(model).mean_and_variance(X)
    plain_mean, plain_var = ThetaSampledGP.from_model(model, draws.theta).mean_and_variance(X)
    shifted = draws.theta.clone()
    shifted[:, 0] += 1.0
    slope = ThetaSampledGP.from_model(model, shifted).mean_and_variance(X)[0] - plain_mean
    torch.testing.assert_close(mean, plain_mean)
    torch.testing.assert_close(var, plain_var + draws.constant_mean_variance * slope.square())


def test_rao_blackwellized_gp_passes_gradcheck(fitted, device: torch.device) -> None:
    model, lap = fitted
    gp = draw_thetas(lap, "mc+rb", 4, seed=2).gp(model)
    x = _candidates(n=3, device=device).requires_grad_(True)
    assert torch.autograd.gradcheck(gp.mean_and_variance, (x,))
    assert torch.autograd.gradcheck(gp.log_ei, (x,))


def test_rao_blackwellized_rules_target_the_same_marginal_ei() -> None:
    """E_q[EI] from 4096 plain QMC draws == from 4096 RB QMC draws, to QMC accuracy; the RB
    integrand varies less across draws (Rao-Blackwell)."""
    model, lap = _fitted("matern52-ard", n=12)
    X = _candidates(n=16)
    plain = draw_thetas(lap, "mc@qmc", 4096, seed=0)
    rb = draw_thetas(lap, "mc+rb@qmc", 4096, seed=0)
    v_plain, v_rb = plain.gp(model).log_ei(X).exp(), rb.gp(model).log_ei(X).exp()
    torch.testing.assert_close(v_rb.mean(0), v_plain.mean(0), rtol=2e-2, atol=1e-6)
    assert float(v_rb.var(0).sum()) < float(v_plain.var(0).sum())


def test_constant_mean_variance_must_be_non_negative(fitted) -> None:
    model, lap = fitted
    with pytest.raises(ValueError, match="constant_mean_variance=-1.0"):
        ThetaSampledGP.from_model(model, lap.theta_hat[None], constant_mean_variance=-1.0)


def test_rb_draws_do_not_depend_on_the_eigensolvers_signs(monkeypatch) -> None:
    """What ``test_theta_draws_do_not_depend_on_the_eigensolvers_signs`` (test_laplace.py) checks
    for plain draws: the Schur complement's eigenvectors in :func:`constant_mean_conditional`
    get canonical signs, so another solver's choice (cuSOLVER, another LAPACK) gives the same
    thetas from the same seed."""
    _, lap = _fitted("matern52-ard")
    reference = draw_thetas(lap, "mc+rb", 8, seed=1).theta
    flip_eigenvector_signs(monkeypatch)
    flipped = draw_thetas(dataclasses.replace(lap), "mc+rb", 8, seed=1).theta
    torch.testing.assert_close(flipped, reference, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["qmc-owen", "qmc-owen+rb", "mc+rb", "sr3+rb"])
def test_draws_from_a_posterior_built_on_the_device_equal_the_cpus(
    name: str, device: torch.device, to_device
) -> None:
    """The reproducibility the canonical signs buy: the Laplace posterior (and the ``+rb``
    factor) computed on another device by its own eigensolver (cuSOLVER) gives the thetas and
    weights the CPU gives from the same seed, so a cell's draws do not depend on where its
    acquisition runs."""
    if device.type == "cpu":
        pytest.skip("the CPU draws are the reference")
    cpu_state = _fitted("matern52-ard")
    _, lap = to_device(cpu_state)
    reference = draw_thetas(cpu_state[1], name, 16, seed=3)
    draws = draw_thetas(lap, name, 16, seed=3)
    assert draws.theta.device.type == device.type
    torch.testing.assert_close(draws.theta.cpu(), reference.theta, rtol=1e-7, atol=1e-9)
    assert (draws.weights is None) == (reference.weights is None)
    if reference.weights is not None:
        torch.testing.assert_close(draws.weights.cpu(), reference.weights, rtol=1e-12, atol=1e-12)
    assert draws.constant_mean_variance == pytest.approx(reference.constant_mean_variance, rel=1e-9)


def test_estimate_passes_the_whitened_draws_known_identity_covariance() -> None:
    """The whitened draws ``z`` have known mean 0 and covariance I (:func:`estimate`): an
    ``orth-shrink`` estimate is :func:`shrunk_mean`'s known-covariance path, not its
    sample-covariance fallback, and ``orth-quadratic``, which needs the known covariance, works
    through :func:`estimate` and equals its estimator given the identity."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(16, 3, generator=gen, dtype=DTYPE)
    values = (z @ torch.tensor([[0.5, 0.1], [0.2, -0.4], [1.0, 0.3]], dtype=DTYPE)).exp()
    eye = torch.eye(3, dtype=DTYPE)

    def draws(name: str) -> ThetaDraws:
        return ThetaDraws(parse_theta_estimator(name), z, z, None, 0.0)

    shrink = estimate(values, draws("orth-shrink"))
    torch.testing.assert_close(shrink, shrunk_mean(values, z, None, eye))
    fallback = shrunk_mean(values, z)  # the sample covariance: a different estimate
    assert (shrink - fallback).abs().min() > 1e-3 * shrink.abs().max()
    torch.testing.assert_close(
        estimate(values, draws("orth-quadratic")),
        ESTIMATORS["orth-quadratic"](values, z, None, eye),
    )
