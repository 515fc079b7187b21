"""Laplace posterior over GP hyperparameters: its Hessian, floor, centre, score and samples.

GPs are fitted on the CPU; on another ``device`` the fitted model is moved there and the Laplace
posterior and batched GP are computed there, so the CPU results are the reference for the same fit.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch

from orthobench.exceptions import NumericsWarning
from orthobench.surrogates.laplace import laplace_posterior, neg_log_posterior_hessian
from orthobench.surrogates.theta_algebra import log_posterior, set_theta
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from tests.helpers import flip_eigenvector_signs
from tests.surrogates.fitted import CASES, DTYPE, fitted, gpytorch_neg_log_posterior


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_laplace_posterior_and_batched_gp_on_the_device_equal_the_cpu_ones(
    kernel: str, outputscale: bool, device: torch.device, to_device
) -> None:
    """Same fit: centre, Hessian (autograd through the closed-form kernels), covariance and the
    batched GP's moments, log-EI and gradient agree with the CPU's to rounding."""
    if device.type == "cpu":
        pytest.skip("the CPU results are the reference")
    cpu_model, cpu_lap = fitted(kernel, outputscale)
    model, lap = to_device((cpu_model, cpu_lap))
    assert lap.theta_hat.device.type == device.type == lap.hessian.device.type
    torch.testing.assert_close(lap.theta_hat.cpu(), cpu_lap.theta_hat, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lap.hessian.cpu(), cpu_lap.hessian, rtol=1e-8, atol=1e-8)
    covariance = lap.cov_factor @ lap.cov_factor.T
    cpu_covariance = cpu_lap.cov_factor @ cpu_lap.cov_factor.T
    torch.testing.assert_close(covariance.cpu(), cpu_covariance, rtol=1e-8, atol=1e-10)
    # the factor itself, not only its square: the same whitened draws give the same thetas
    torch.testing.assert_close(lap.cov_factor.cpu(), cpu_lap.cov_factor, rtol=1e-7, atol=1e-9)
    theta = cpu_lap.theta(cpu_lap.sample_whitened(5, "iid", seed=0))
    x = torch.rand(9, 1, 3, generator=torch.Generator().manual_seed(9), dtype=DTYPE)
    outputs = []
    for m, where in ((cpu_model, torch.device("cpu")), (model, device)):
        gp = ThetaSampledGP.from_model(m, theta.to(where))
        leaf = x.to(where).requires_grad_(True)
        mean, var = gp.mean_and_variance(leaf)
        log_ei = gp.log_ei(leaf)
        (grad,) = torch.autograd.grad(log_ei.sum(), leaf)
        outputs.append([t.detach().cpu() for t in (mean, var, log_ei, grad)])
    for ours, reference in zip(outputs[1], outputs[0], strict=True):
        torch.testing.assert_close(ours, reference, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_hessian_matches_finite_differences_of_unnormalized_log_posterior(
    kernel: str, outputscale: bool
) -> None:
    """||H - H_fd||_F / ||H||_F < 1e-5 for every kernel (observed ~1e-7).

    (docs/design.md, "Unnormalized log posterior"; docs/design.md, "Exact second derivatives")

    ``H_fd`` is a central second difference (step 1e-4) of ``n * ExactMarginalLogLikelihood``
    plus the Jacobian, evaluated by gpytorch's default path (including its RBF autograd function,
    whose *second derivatives* are wrong but whose values are right). A Hessian of the per-datum
    mll would be off by the factor n = 14.
    """
    model, lap = fitted(kernel, outputscale)
    theta = lap.theta_hat.clone()
    hess = neg_log_posterior_hessian(theta, lap.layout, model.train_inputs[0], model.train_targets)
    p, h = theta.shape[0], 1e-4
    fd = torch.zeros(p, p, dtype=DTYPE)
    basis = torch.eye(p, dtype=DTYPE) * h
    for i in range(p):
        for j in range(i, p):
            f = [
                gpytorch_neg_log_posterior(model, theta + si * basis[i] + sj * basis[j])
                for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))
            ]
            fd[i, j] = fd[j, i] = (f[0] - f[1] - f[2] + f[3]) / (4 * h * h)
    rel = float((hess - fd).norm() / hess.norm())
    assert rel < 1e-5, rel
    # The floored precision of q equals the raw Hessian where no eigenvalue was floored.
    if not lap.floored:
        torch.testing.assert_close(lap.hessian, hess, rtol=1e-10, atol=1e-10)


def test_eigenvalue_floor_is_applied_and_recorded() -> None:
    model, lap = fitted("matern52-ard")
    floor = float(lap.raw_eigenvalues.max()) + 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericsWarning)  # a positive-definite H is not a fallback
        floored = laplace_posterior(model, eig_floor=floor)
    assert floored.floored and floored.info()["eig_floored"] is True and not floored.indefinite
    assert torch.linalg.eigvalsh(floored.hessian).min() >= floor * (1 - 1e-10)
    with pytest.raises(ValueError, match="eig_floor=-1.0"):
        laplace_posterior(model, eig_floor=-1.0)


def test_indefinite_hessian_is_floored_warned_and_recorded() -> None:
    """Away from the optimum the Hessian can have negative eigenvalues.

    (docs/design.md, "Indefinite Hessians and the eigenvalue floor")
    """
    model, _ = fitted("rbf-iso")
    set_theta(model, torch.tensor([0.0, -2.0, 2.0], dtype=DTYPE))
    with pytest.warns(NumericsWarning, match="not positive definite"):
        lap = laplace_posterior(model)
    assert lap.indefinite and lap.info()["hessian_indefinite"] is True
    assert torch.linalg.eigvalsh(lap.hessian).min() >= lap.eig_floor * (1 - 1e-10)
    z = lap.sample_whitened(4, "iid", seed=0)
    assert torch.isfinite(lap.theta(z)).all()


def test_keep_raw_keeps_a_positive_definite_hessian_the_floor_would_raise() -> None:
    """``laplace: unfloored``: the paper's ``q``, the raw Hessian, where it is PD."""
    model, lap = fitted("matern52-ard")
    floor = float(lap.raw_eigenvalues.max()) + 1.0  # binds on every eigenvalue
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericsWarning)
        raw = laplace_posterior(model, eig_floor=floor, keep_raw=True)
    hess = neg_log_posterior_hessian(
        lap.theta_hat, lap.layout, model.train_inputs[0], model.train_targets
    )
    assert raw.eig_floor == 0.0 and not raw.floored and not raw.indefinite
    torch.testing.assert_close(raw.hessian, hess, rtol=0, atol=0)
    torch.testing.assert_close(raw.raw_eigenvalues, lap.raw_eigenvalues)
    assert laplace_posterior(model, eig_floor=floor).floored  # the default floors it


def test_keep_raw_falls_back_to_the_floor_for_an_indefinite_hessian() -> None:
    model, _ = fitted("rbf-iso")
    set_theta(model, torch.tensor([0.0, -2.0, 2.0], dtype=DTYPE))
    with pytest.warns(NumericsWarning, match="not positive definite"):
        lap = laplace_posterior(model, keep_raw=True)
    scales = [s for s in lap.layout.prior_scale if not math.isnan(s)]
    assert lap.indefinite and lap.floored
    assert lap.eig_floor == pytest.approx(min(1 / s**2 for s in scales))
    assert torch.linalg.eigvalsh(lap.hessian).min() >= lap.eig_floor * (1 - 1e-10)


def test_default_floor_is_the_smallest_prior_precision() -> None:
    model, lap = fitted("rbf-ard")
    scales = [s for s in lap.layout.prior_scale if not math.isnan(s)]
    assert lap.eig_floor == pytest.approx(min(1 / s**2 for s in scales))
    assert lap.recenter_shift == 0.0 and lap.newton_steps == 0


def test_recentering_reaches_the_theta_density_mode() -> None:
    model, _ = fitted("matern52-ard")
    lap = laplace_posterior(model, recenter=True)
    theta = lap.theta_hat.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(
        log_posterior(theta[None], lap.layout, model.train_inputs[0], model.train_targets).sum(),
        theta,
    )
    assert lap.newton_steps > 0 and lap.recenter_shift > 0
    # Newton decrement at the centre (gradient in the H^{-1} norm) is tiny.
    assert float(grad @ torch.linalg.solve(lap.hessian, grad)) < 1e-8


def test_score_equals_autograd_of_log_q(to_device) -> None:
    _, lap = to_device(fitted("matern52-ard", outputscale=True))
    theta = lap.theta(lap.sample_whitened(16, "iid", seed=0)).requires_grad_(True)
    (grad,) = torch.autograd.grad(lap.log_prob(theta).sum(), theta)
    torch.testing.assert_close(lap.score(theta.detach()), grad)


def test_score_has_mean_zero_and_covariance_h() -> None:
    """E[g] = 0 and Cov(g) = H under q; tolerances in standard errors over 20000 draws."""
    _, lap = fitted("rbf-ard")
    n = 20000
    g = lap.score(lap.theta(lap.sample_whitened(n, "iid", seed=1)))
    se = lap.hessian.diagonal().sqrt() / math.sqrt(n)  # Var(g_i) = H_ii
    assert ((g.mean(0)).abs() < 4 * se).all(), (g.mean(0) / se).tolist()
    cov = g.T @ g / n
    # SE of a covariance entry of Gaussians: sqrt((H_ii H_jj + H_ij^2) / n).
    diag = lap.hessian.diagonal()
    cov_se = ((diag[:, None] * diag[None, :] + lap.hessian.square()) / n).sqrt()
    assert ((cov - lap.hessian).abs() < 5 * cov_se).all()


def test_whitening_inverts_the_sample_map(to_device) -> None:
    _, lap = to_device(fitted("matern52-iso"))
    z = lap.sample_whitened(8, "iid", seed=2)
    torch.testing.assert_close(lap.whiten(lap.theta(z)), z)
    # Score in whitened coordinates: g = -A^{-T} z (the controls z span the score's space).
    a = lap.cov_factor
    torch.testing.assert_close(lap.score(lap.theta(z)), -z @ torch.linalg.inv(a))


def test_theta_draws_do_not_depend_on_the_eigensolvers_signs(monkeypatch) -> None:
    """LAPACK and cuSOLVER return eigenvectors of opposite signs; the sample map must not follow
    them (a posterior moved to a GPU drew other thetas from the same seed). Here the other
    solver's choice is emulated by flipping the signs of some eigenvectors."""
    _, lap = fitted("matern52-ard")
    z = lap.sample_whitened(8, "iid", seed=2)
    reference = dataclasses.replace(lap).theta(z)  # a fresh copy decomposes H again
    flip_eigenvector_signs(monkeypatch)
    flipped = dataclasses.replace(lap)
    torch.testing.assert_close(flipped.theta(z), reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(flipped.whiten(reference), z)


@pytest.mark.parametrize("method", ["iid", "antithetic", "qmc"])
def test_sampling_is_seeded_and_shaped(method: str, device: torch.device, to_device) -> None:
    _, lap = to_device(fitted("rbf-iso"))
    a = lap.sample_whitened(16, method, seed=3)
    assert a.shape == (16, lap.p) and a.dtype == DTYPE and a.device.type == device.type
    torch.testing.assert_close(lap.sample_whitened(16, method, seed=3), a)
    assert not torch.equal(lap.sample_whitened(16, method, seed=4), a)
    if method == "antithetic":
        torch.testing.assert_close(a[1::2], -a[0::2])
        assert a.sum(0).abs().max() < 1e-12


def test_sampling_errors_name_the_value() -> None:
    _, lap = fitted("rbf-iso")
    with pytest.raises(ValueError, match="n=7"):
        lap.sample_whitened(7, "antithetic", seed=0)
    with pytest.raises(ValueError, match="'sobol'"):
        lap.sample_whitened(8, "sobol", seed=0)


def test_qmc_draws_are_more_balanced_than_iid() -> None:
    _, lap = fitted("rbf-ard")
    iid = torch.stack([lap.sample_whitened(256, "iid", seed=s).mean(0) for s in range(20)])
    qmc = torch.stack([lap.sample_whitened(256, "qmc", seed=s).mean(0) for s in range(20)])
    assert qmc.square().mean() < 0.2 * iid.square().mean()


def test_recentering_stopped_by_its_step_cap_is_warned_about_and_recorded() -> None:
    """Three Newton steps reach the mode of this state; one leaves a Newton decrement of 4e-3 at
    ``theta_hat``, which was returned as if re-centred, with no fallback and no warning."""
    model, _ = fitted("matern52-ard")
    with pytest.warns(NumericsWarning, match="max_newton_steps=1"):
        lap = laplace_posterior(model, recenter=True, max_newton_steps=1)
    assert lap.newton_steps == 1 and "max_newton_steps=1" in lap.fallback
    assert lap.info()["fallback"] == lap.fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericsWarning)
        converged = laplace_posterior(model, recenter=True)
    assert converged.fallback is None and converged.newton_steps > 1
