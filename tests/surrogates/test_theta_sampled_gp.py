"""The GP under theta samples: batched moments, log-EI and their hand-written gradients."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from botorch.acquisition.analytic import LogExpectedImprovement, _log_ei_helper

from orthobench.exceptions import NumericsWarning
from orthobench.surrogates import theta_sampled_gp
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_algebra import set_theta
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from tests.surrogates.fitted import CASES, DTYPE, fitted


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_batched_theta_evaluation_equals_single_model_evaluations(
    kernel: str, outputscale: bool, device: torch.device, to_device
) -> None:
    """One batched call over S draws == S BoTorch models with those hyperparameters.

    Relative tolerance 1e-6: gpytorch computes distances as ``||a||^2 + ||b||^2 - 2 a.b``, ours
    from differences, which differ by rounding amplified where EI is small.
    """
    model, lap = to_device(fitted(kernel, outputscale))
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
    model, lap = to_device(fitted(kernel, outputscale))
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
    model, lap = fitted(kernel)
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

    monkeypatch.setattr(theta_sampled_gp, "_BLOCK_ENTRIES", 10**9)  # one block
    one_pass = values_and_gradient()
    n = model.train_inputs[0].shape[0]
    monkeypatch.setattr(theta_sampled_gp, "_BLOCK_ENTRIES", 8 * n * n)  # blocks of 8 draws
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
    log_ei = theta_sampled_gp._LogEI.apply(mean, var, best_f)
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
    (grad_var,) = torch.autograd.grad(theta_sampled_gp._LogEI.apply(mean, var, 0.0).sum(), var)
    log_phi = -0.5 * u.square() - 0.5 * math.log(2 * math.pi)
    torch.testing.assert_close(
        grad_var, (log_phi - u.log()).exp() / (2 * 0.5), rtol=1e-12, atol=0.0
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_log_ei_backward_is_accurate_far_below_best_f(dtype: torch.dtype) -> None:
    """u from -1 to -1e9 (float32: -1e6), e.g. a candidate next to a training point under a draw
    with little noise (sigma near the variance clamp's 1e-6): both gradients, ``r / sigma`` and
    ``q / (2 var)``, equal a 50-digit reference at the same inputs. ``exp(log_ndtr(u) - log h(u))``
    alone keeps about ``eps u^2`` of relative accuracy (float64: 1e-3 at u = -3e6, 1e-112 instead
    of 2e9 at u = -1.4e9; float32: 3% at u = -1e3, inf at -1e6), and so does autograd through
    BoTorch's helper (1e-4 at u = -7e5), which is why the reference is mpmath's."""
    mpmath = pytest.importorskip("mpmath")
    top = 9 if dtype == torch.float64 else 6
    u = -torch.logspace(0, top, 120, dtype=torch.float64)
    var = torch.logspace(-12, 1, 120, dtype=torch.float64).flip(0)
    mean = (u * var.sqrt()).to(dtype).requires_grad_(True)
    var = var.to(dtype).requires_grad_(True)
    grads = torch.autograd.grad(theta_sampled_gp._LogEI.apply(mean, var, 0.0).sum(), (mean, var))
    ref_mean, ref_var = [], []
    with mpmath.workdps(50):
        for m, v in zip(mean.tolist(), var.tolist(), strict=True):
            sigma = mpmath.sqrt(mpmath.mpf(v))
            z = mpmath.mpf(m) / sigma
            h = mpmath.npdf(z) + z * mpmath.ncdf(z)
            ref_mean.append(float(mpmath.ncdf(z) / h / sigma))
            ref_var.append(float(mpmath.npdf(z) / h / (2 * mpmath.mpf(v))))
    rtol = 1e-11 if dtype == torch.float64 else 3e-5
    for grad, ref in zip(grads, (ref_mean, ref_var), strict=True):
        assert torch.isfinite(grad).all()
        torch.testing.assert_close(
            grad.double(), torch.tensor(ref, dtype=torch.float64), rtol=rtol, atol=0.0
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
    model, lap = fitted("rbf-ard")
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
