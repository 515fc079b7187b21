"""Laplace posterior over GP hyperparameters, its score and samples, and the batched GP.

GPs are fitted on the CPU; on another ``device`` the fitted model is moved there and the Laplace
posterior and batched GP are computed there, so the CPU results are the reference for the same fit.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import torch
from botorch.acquisition.analytic import LogExpectedImprovement, _log_ei_helper
from gpytorch.mlls import ExactMarginalLogLikelihood

from orthobench.exceptions import NumericsWarning
from orthobench.surrogates import laplace
from orthobench.surrogates.gp import (
    KERNELS,
    fit_model,
    get_theta,
    log_posterior,
    set_theta,
    theta_layout,
)
from orthobench.surrogates.laplace import (
    ThetaSampledGP,
    laplace_posterior,
    neg_log_posterior_hessian,
)

DTYPE = torch.float64
CASES = [(k, False) for k in KERNELS] + [("matern52-ard", True), ("rbf-iso", True)]


def _data(n: int = 14, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=gen, dtype=DTYPE)
    y = (
        torch.sin(6.0 * x[:, 0])
        + x[:, 1] ** 2
        - 0.5 * x[:, 2]
        + 0.05 * torch.randn(n, generator=gen, dtype=DTYPE)
    )
    return x, y


def _fitted(kernel: str, outputscale: bool = False):
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, kernel, outputscale=outputscale)
        lap = laplace_posterior(model)
    return model, lap


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_laplace_posterior_and_batched_gp_on_the_device_equal_the_cpu_ones(
    kernel: str, outputscale: bool, device: torch.device, to_device
) -> None:
    """Same fit: centre, Hessian (autograd through the closed-form kernels), covariance and the
    batched GP's moments, log-EI and gradient agree with the CPU's to rounding."""
    if device.type == "cpu":
        pytest.skip("the CPU results are the reference")
    cpu_model, cpu_lap = _fitted(kernel, outputscale)
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


def _gpytorch_neg_log_posterior(model, theta: torch.Tensor) -> float:
    """``-(n * ExactMarginalLogLikelihood + sum of log coordinates)`` through gpytorch's own path."""
    set_theta(model, theta)
    model.train()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with torch.no_grad():
        per_datum = mll(model(*model.train_inputs), model.train_targets)
    return -float(per_datum * model.train_targets.shape[0] + theta[1:].sum())


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_closed_form_log_posterior_is_n_times_gpytorch_mll_plus_jacobian(
    kernel: str, outputscale: bool
) -> None:
    """gpytorch divides by n. Up to its jitter the closed form is n * mll.

    (docs/design.md, "Unnormalized log posterior")
    """
    model, _ = _fitted(kernel, outputscale)
    theta = get_theta(model)
    layout = theta_layout(model)
    ours = float(log_posterior(theta[None], layout, model.train_inputs[0], model.train_targets))
    theirs = -_gpytorch_neg_log_posterior(model, theta)
    assert abs(ours - theirs) < 1e-6 * abs(theirs)


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
    model, lap = _fitted(kernel, outputscale)
    theta = lap.theta_hat.clone()
    hess = neg_log_posterior_hessian(theta, lap.layout, model.train_inputs[0], model.train_targets)
    p, h = theta.shape[0], 1e-4
    fd = torch.zeros(p, p, dtype=DTYPE)
    basis = torch.eye(p, dtype=DTYPE) * h
    for i in range(p):
        for j in range(i, p):
            f = [
                _gpytorch_neg_log_posterior(model, theta + si * basis[i] + sj * basis[j])
                for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))
            ]
            fd[i, j] = fd[j, i] = (f[0] - f[1] - f[2] + f[3]) / (4 * h * h)
    rel = float((hess - fd).norm() / hess.norm())
    assert rel < 1e-5, rel
    # The floored precision of q equals the raw Hessian where no eigenvalue was floored.
    if not lap.floored:
        torch.testing.assert_close(lap.hessian, hess, rtol=1e-10, atol=1e-10)


def test_eigenvalue_floor_is_applied_and_recorded() -> None:
    model, lap = _fitted("matern52-ard")
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
    model, _ = _fitted("rbf-iso")
    set_theta(model, torch.tensor([0.0, -2.0, 2.0], dtype=DTYPE))
    with pytest.warns(NumericsWarning, match="not positive definite"):
        lap = laplace_posterior(model)
    assert lap.indefinite and lap.info()["hessian_indefinite"] is True
    assert torch.linalg.eigvalsh(lap.hessian).min() >= lap.eig_floor * (1 - 1e-10)
    z = lap.sample_whitened(4, "iid", seed=0)
    assert torch.isfinite(lap.theta(z)).all()


def test_keep_raw_keeps_a_positive_definite_hessian_the_floor_would_raise() -> None:
    """``laplace: unfloored``: the paper's ``q``, the raw Hessian, where it is PD."""
    model, lap = _fitted("matern52-ard")
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
    model, _ = _fitted("rbf-iso")
    set_theta(model, torch.tensor([0.0, -2.0, 2.0], dtype=DTYPE))
    with pytest.warns(NumericsWarning, match="not positive definite"):
        lap = laplace_posterior(model, keep_raw=True)
    scales = [s for s in lap.layout.prior_scale if not math.isnan(s)]
    assert lap.indefinite and lap.floored
    assert lap.eig_floor == pytest.approx(min(1 / s**2 for s in scales))
    assert torch.linalg.eigvalsh(lap.hessian).min() >= lap.eig_floor * (1 - 1e-10)


def test_default_floor_is_the_smallest_prior_precision() -> None:
    model, lap = _fitted("rbf-ard")
    scales = [s for s in lap.layout.prior_scale if not math.isnan(s)]
    assert lap.eig_floor == pytest.approx(min(1 / s**2 for s in scales))
    assert lap.recenter_shift == 0.0 and lap.newton_steps == 0


def test_recentering_reaches_the_theta_density_mode() -> None:
    model, _ = _fitted("matern52-ard")
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
    _, lap = to_device(_fitted("matern52-ard", outputscale=True))
    theta = lap.theta(lap.sample_whitened(16, "iid", seed=0)).requires_grad_(True)
    (grad,) = torch.autograd.grad(lap.log_prob(theta).sum(), theta)
    torch.testing.assert_close(lap.score(theta.detach()), grad)


def test_score_has_mean_zero_and_covariance_h() -> None:
    """E[g] = 0 and Cov(g) = H under q; tolerances in standard errors over 20000 draws."""
    _, lap = _fitted("rbf-ard")
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
    _, lap = to_device(_fitted("matern52-iso"))
    z = lap.sample_whitened(8, "iid", seed=2)
    torch.testing.assert_close(lap.whiten(lap.theta(z)), z)
    # Score in whitened coordinates: g = -A^{-T} z (the controls z span the score's space).
    a = lap.cov_factor
    torch.testing.assert_close(lap.score(lap.theta(z)), -z @ torch.linalg.inv(a))


def test_theta_draws_do_not_depend_on_the_eigensolvers_signs(monkeypatch) -> None:
    """LAPACK and cuSOLVER return eigenvectors of opposite signs; the sample map must not follow
    them (a posterior moved to a GPU drew other thetas from the same seed). Here the other
    solver's choice is emulated by flipping the signs of some eigenvectors."""
    _, lap = _fitted("matern52-ard")
    z = lap.sample_whitened(8, "iid", seed=2)
    reference = dataclasses.replace(lap).theta(z)  # a fresh copy decomposes H again
    eigh = torch.linalg.eigh

    def other_signs(matrix: torch.Tensor):
        evals, evecs = eigh(matrix)
        flip = torch.tensor([(-1.0) ** i for i in range(evecs.shape[-1])], dtype=evecs.dtype)
        return evals, evecs * flip

    monkeypatch.setattr(torch.linalg, "eigh", other_signs)
    flipped = dataclasses.replace(lap)
    torch.testing.assert_close(flipped.theta(z), reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(flipped.whiten(reference), z)


@pytest.mark.parametrize("method", ["iid", "antithetic", "qmc"])
def test_sampling_is_seeded_and_shaped(method: str, device: torch.device, to_device) -> None:
    _, lap = to_device(_fitted("rbf-iso"))
    a = lap.sample_whitened(16, method, seed=3)
    assert a.shape == (16, lap.p) and a.dtype == DTYPE and a.device.type == device.type
    torch.testing.assert_close(lap.sample_whitened(16, method, seed=3), a)
    assert not torch.equal(lap.sample_whitened(16, method, seed=4), a)
    if method == "antithetic":
        torch.testing.assert_close(a[1::2], -a[0::2])
        assert a.sum(0).abs().max() < 1e-12


def test_sampling_errors_name_the_value() -> None:
    _, lap = _fitted("rbf-iso")
    with pytest.raises(ValueError, match="n=7"):
        lap.sample_whitened(7, "antithetic", seed=0)
    with pytest.raises(ValueError, match="'sobol'"):
        lap.sample_whitened(8, "sobol", seed=0)


def test_qmc_draws_are_more_balanced_than_iid() -> None:
    _, lap = _fitted("rbf-ard")
    iid = torch.stack([lap.sample_whitened(256, "iid", seed=s).mean(0) for s in range(20)])
    qmc = torch.stack([lap.sample_whitened(256, "qmc", seed=s).mean(0) for s in range(20)])
    assert qmc.square().mean() < 0.2 * iid.square().mean()


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_batched_theta_evaluation_equals_single_model_evaluations(
    kernel: str, outputscale: bool, device: torch.device, to_device
) -> None:
    """One batched call over S draws == S BoTorch models with those hyperparameters.

    Relative tolerance 1e-6: gpytorch computes distances as ``||a||^2 + ||b||^2 - 2 a.b``, ours
    from differences, which differ by rounding amplified where EI is small.
    """
    model, lap = to_device(_fitted(kernel, outputscale))
    theta = lap.theta(lap.sample_whitened(5, "iid", seed=0))
    gp = ThetaSampledGP.from_model(model, theta)
    x = torch.rand(9, 1, 3, generator=torch.Generator().manual_seed(9), dtype=DTYPE).to(device)
    mean, var = gp.mean_and_variance(x)
    log_ei = gp.log_ei(x)
    y_std = float(model.outcome_transform.stdvs.squeeze())
    y_mean = float(model.outcome_transform.means.squeeze())
    best = float(model.train_targets.max()) * y_std + y_mean
    for s in range(theta.shape[0]):
        set_theta(model, theta[s])
        model.eval()
        post = model.posterior(x)
        torch.testing.assert_close(
            mean[s] * y_std + y_mean, post.mean.reshape(-1), rtol=1e-8, atol=1e-9
        )
        torch.testing.assert_close(
            var[s] * y_std**2, post.variance.reshape(-1), rtol=1e-6, atol=1e-10
        )
        # BoTorch's LogEI on the original scale = ours (standardized) + log(std).
        ref = LogExpectedImprovement(model, best_f=best)(x)
        torch.testing.assert_close(log_ei[s] + math.log(y_std), ref, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_batched_gradient_passes_gradcheck(
    kernel: str, outputscale: bool, device: torch.device, to_device
) -> None:
    model, lap = to_device(_fitted(kernel, outputscale))
    gp = ThetaSampledGP.from_model(model, lap.theta(lap.sample_whitened(4, "iid", seed=0)))
    x = torch.rand(3, 1, 3, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    x = x.to(device).requires_grad_(True)
    assert torch.autograd.gradcheck(gp.mean_and_variance, (x,))
    assert torch.autograd.gradcheck(gp.log_ei, (x,))


@pytest.mark.parametrize("kernel", ["matern52-ard", "rbf-iso", "linear"])
@pytest.mark.parametrize("constant_mean_variance", [0.0, 0.3])
def test_blocks_of_draws_give_the_values_and_gradients_of_one_pass(
    kernel: str, constant_mean_variance: float, monkeypatch
) -> None:
    """Kernel matrices, projections and moments computed in cache-sized blocks of draws (here 8,
    8 and 4) equal one pass over all draws: projections, values and gradients."""
    model, lap = _fitted(kernel)
    theta = lap.theta(lap.sample_whitened(20, "iid", seed=0))
    x = torch.rand(4, 1, 3, generator=torch.Generator().manual_seed(2), dtype=DTYPE)

    def values_and_gradient() -> list[torch.Tensor]:
        gp = ThetaSampledGP.from_model(model, theta, constant_mean_variance=constant_mean_variance)
        xg = x.clone().requires_grad_(True)
        mean, var = gp.mean_and_variance(xg)
        log_ei = gp.log_ei(xg)
        (grad,) = torch.autograd.grad((mean + var).sum() + log_ei.sum(), xg)
        with torch.no_grad():
            no_grad_mean, no_grad_var = gp.mean_and_variance(x)
        return [gp._forward_proj, mean, var, log_ei, grad, no_grad_mean, no_grad_var]

    monkeypatch.setattr(laplace, "_BLOCK_ENTRIES", 10**9)  # one block
    one_pass = values_and_gradient()
    n = model.train_inputs[0].shape[0]
    monkeypatch.setattr(laplace, "_BLOCK_ENTRIES", 8 * n * n)  # blocks of 8 draws
    for blocked, reference in zip(values_and_gradient(), one_pass, strict=True):
        # Equal to rounding: a BLAS other than the one measured may round a block's GEMM rows
        # differently.
        torch.testing.assert_close(blocked.detach(), reference.detach(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("u_scale", [0.3, 3.0, 30.0, 300.0])
def test_log_ei_backward_matches_autograd_through_botorchs_helper(u_scale: float) -> None:
    """The analytic log-EI gradients equal autograd's through ``_log_ei_helper`` (both branches,
    u from about -3e3 to 1e3); the variance gradient where autograd's is accurate, u < 4 (its
    ``1/(2 var) - u r/(2 var)`` cancels: next test)."""
    gen = torch.Generator().manual_seed(0)
    var = (torch.rand(64, 5, generator=gen, dtype=DTYPE) * 2 + 1e-6).requires_grad_(True)
    mean = (torch.randn(64, 5, generator=gen, dtype=DTYPE) * u_scale).requires_grad_(True)
    best_f = 0.3
    u = (mean - best_f) / var.sqrt()
    reference = _log_ei_helper(u) + var.sqrt().log()
    ref_mean, ref_var = torch.autograd.grad(reference.sum(), (mean, var))
    log_ei = laplace._LogEI.apply(mean, var, best_f)
    grad_mean, grad_var = torch.autograd.grad(log_ei.sum(), (mean, var))
    assert torch.equal(log_ei, reference)
    torch.testing.assert_close(grad_mean, ref_mean, rtol=1e-9, atol=0.0)
    below = u.detach() < 4
    torch.testing.assert_close(grad_var[below], ref_var[below], rtol=1e-8, atol=0.0)


def test_log_ei_variance_gradient_is_accurate_far_above_best_f() -> None:
    """For u >> 1, d log EI / d var = phi(u) / (2 var h(u)) with h(u) = u Phi(u) + phi(u) = u to
    double precision above u = 8: positive and tiny (EI grows with the variance). Autograd through
    the helper cancels ``1/(2 var) - u r/(2 var)`` to rounding noise of either sign there."""
    u = torch.linspace(8.0, 30.0, 45, dtype=DTYPE)
    var = torch.full_like(u, 0.5, requires_grad=True)
    mean = u * math.sqrt(0.5)
    (grad_var,) = torch.autograd.grad(laplace._LogEI.apply(mean, var, 0.0).sum(), var)
    log_phi = -0.5 * u.square() - 0.5 * math.log(2 * math.pi)
    torch.testing.assert_close(
        grad_var, (log_phi - u.log()).exp() / (2 * 0.5), rtol=1e-12, atol=0.0
    )


def test_log_ei_far_below_underflow_is_finite_with_gradients(device: torch.device) -> None:
    """Candidates between dense, poor observations: EI ~ exp(-1e3) and below, log-EI finite."""
    x = torch.linspace(0, 0.5, 30, dtype=DTYPE).unsqueeze(-1)
    y = torch.cat([torch.zeros(30, dtype=DTYPE)])
    x = torch.cat([x, torch.tensor([[1.0]], dtype=DTYPE)])
    y = torch.cat([y, torch.tensor([5.0], dtype=DTYPE)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, "matern52-iso")
        model = model.to(device)
        lap = laplace_posterior(model)
    gp = ThetaSampledGP.from_model(model, lap.theta(lap.sample_whitened(8, "iid", seed=0)))
    cand = torch.linspace(0.05, 0.45, 7, dtype=DTYPE, device=device).reshape(-1, 1, 1)
    cand.requires_grad_(True)
    log_ei = gp.log_ei(cand)
    assert torch.isfinite(log_ei).all() and log_ei.max() < -100
    (grad,) = torch.autograd.grad(log_ei.sum(), cand)
    assert torch.isfinite(grad).all()


def test_log_predictive_density_matches_botorch_for_one_draw() -> None:
    model, lap = _fitted("rbf-ard")
    theta = lap.theta_hat[None]
    gp = ThetaSampledGP.from_model(model, theta)
    x = torch.rand(3, 3, generator=torch.Generator().manual_seed(5), dtype=DTYPE)
    y = torch.tensor([0.3, -0.1, 1.2], dtype=DTYPE)
    set_theta(model, theta[0])
    model.eval()
    post = model.posterior(x.unsqueeze(-2), observation_noise=True)
    ref = (
        torch.distributions.Normal(post.mean.reshape(-1), post.variance.reshape(-1).sqrt())
        .log_prob(y)
        .sum()
    )
    torch.testing.assert_close(gp.log_predictive_density(x, y), ref, rtol=1e-8, atol=1e-8)


def test_cholesky_jitter_is_used_warned_and_counted(device: torch.device) -> None:
    x = torch.tensor(
        [[0.2, 0.2, 0.2], [0.2, 0.2, 0.2], [0.7, 0.1, 0.5], [0.9, 0.8, 0.3]], dtype=DTYPE
    )
    y = torch.tensor([1.0, 1.0, 0.0, 2.0], dtype=DTYPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, "rbf-iso")
        model = model.to(device)
        lap = laplace_posterior(model)
    theta = lap.theta_hat.repeat(2, 1)
    theta[0, 1] = -80.0  # noise e^-80: duplicated inputs make K_y singular
    with pytest.warns(NumericsWarning, match="1 theta sample"):
        gp = ThetaSampledGP.from_model(model, theta)
    assert gp.n_jittered == 1
    assert torch.isfinite(gp.log_ei(torch.rand(4, 1, 3, dtype=DTYPE, device=device))).all()
