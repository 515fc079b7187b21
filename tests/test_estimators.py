"""Estimators on hand-built arrays and synthetic integrands with a known mean.

Hand-built arrays are drawn in double on the CPU and moved to each available ``device`` (the
``device`` fixture), so every device sees the same numbers. Statistical tests use fixed seeds and
run on the CPU; tolerances are stated in standard errors (SE) of the quantity tested, computed
from the same rebuilds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from orthobench.estimators import (
    DEFAULT_CONTROL_VARIATE,
    ESTIMATORS,
    SHRINK_PER_CONTROL,
    crossfit_mean,
    estimator_weights,
    get_estimator,
    mc_mean,
    orthogonal_mean,
    quadratic_controls,
    shrunk_mean,
)

DTYPE = torch.float64
# Agreement of a device/dtype result with the CPU double result. Single precision: the
# estimators solve least-squares problems (SVD) with condition numbers of a few tens here.
TOLERANCES = {
    torch.float64: {"rtol": 1e-9, "atol": 1e-12},
    torch.float32: {"rtol": 1e-4, "atol": 1e-6},
}


def _arrays(
    n_draws: int = 40,
    n_controls: int = 5,
    n_candidates: int = 7,
    seed: int = 0,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = DTYPE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``S x N`` positive values correlated with ``S x K`` controls, drawn in double on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    controls = torch.randn(n_draws, n_controls, generator=gen, dtype=DTYPE)
    loadings = torch.randn(n_controls, n_candidates, generator=gen, dtype=DTYPE) * 0.5
    noise = torch.randn(n_draws, n_candidates, generator=gen, dtype=DTYPE) * 0.3
    values = (controls @ loadings + noise).exp()
    return values.to(device=device, dtype=dtype), controls.to(device=device, dtype=dtype)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_every_estimator_on_the_device_and_dtype_matches_the_cpu_double_result(
    name: str, device: torch.device, dtype: torch.dtype
) -> None:
    """The same draws on ``device`` in ``dtype``: the estimate stays there and agrees with the
    CPU double estimate within the dtype's tolerance."""
    estimate = get_estimator(name)
    values, controls = _arrays()
    expected = estimate(values, controls, None, torch.eye(controls.shape[1], dtype=DTYPE))
    values, controls = _arrays(device=device, dtype=dtype)
    eye = torch.eye(controls.shape[1], dtype=dtype, device=device)
    result = estimate(values, controls, None, eye)
    assert result.device.type == device.type and result.dtype == dtype
    torch.testing.assert_close(result.cpu().double(), expected, **TOLERANCES[dtype])


def test_mc_mean_is_the_column_mean(device: torch.device) -> None:
    values, _ = _arrays(device=device)
    torch.testing.assert_close(mc_mean(values), values.sum(0) / values.shape[0])


def test_orthogonal_mean_equals_closed_form(device: torch.device) -> None:
    """est = mean(h) - gamma^T (mean(c) - mu_c), gamma by an independent least-squares solve."""
    values, controls = _arrays()
    mu = torch.full((controls.shape[1],), 0.1, dtype=DTYPE)
    centred_c = (controls - controls.mean(0)).numpy()
    centred_h = (values - values.mean(0)).numpy()
    gamma = np.linalg.lstsq(centred_c, centred_h, rcond=None)[0]
    expected = values.mean(0).numpy() - (controls.mean(0) - mu).numpy() @ gamma
    result = orthogonal_mean(values.to(device), controls.to(device), control_mean=mu.to(device))
    np.testing.assert_allclose(result.cpu().numpy(), expected, rtol=1e-10)


def test_plugin_residuals_are_orthogonal_to_controls_in_sample(device: torch.device) -> None:
    values, controls = _arrays(device=device)
    centred_c = controls - controls.mean(0)
    centred_h = values - values.mean(0)
    # The plug-in estimate is the regression intercept at mu; recover gamma from two control means.
    gamma = torch.linalg.lstsq(centred_c, centred_h).solution
    residuals = centred_h - centred_c @ gamma
    assert (centred_c.T @ residuals).abs().max() < 1e-10 * centred_h.abs().sum()
    # And the estimate is the mean of the residual-corrected values, i.e. mean(h - gamma^T (c - mu)).
    corrected = values - (controls - 0.0) @ gamma
    torch.testing.assert_close(orthogonal_mean(values, controls), corrected.mean(0))


def test_self_centred_controls_reduce_to_mc(device: torch.device) -> None:
    """Centring controls by their own mean removes the correction (the TPE recipe).

    (docs/design.md, "Controls need a known mean")
    """
    values, controls = _arrays(device=device)
    trap = orthogonal_mean(values, controls, control_mean=controls.mean(0))
    torch.testing.assert_close(trap, mc_mean(values), rtol=1e-12, atol=1e-12)
    # With the true mean (zero here) the correction is not zero.
    assert (orthogonal_mean(values, controls) - mc_mean(values)).abs().max() > 1e-3


def test_tpe_call_signature_with_estimated_control_mean() -> None:
    """The TPE optimizer calls ``orthogonal_mean(values, controls, control_mean=...)`` with ``K > S``."""
    gen = torch.Generator().manual_seed(3)
    values = torch.rand(32, 10, generator=gen, dtype=DTYPE)
    controls = torch.randn(32, 33, generator=gen, dtype=DTYPE)
    control_mean = torch.randn(1024, 33, generator=gen, dtype=DTYPE).mean(0)
    est = orthogonal_mean(values, controls, control_mean=control_mean)
    assert est.shape == (10,) and torch.isfinite(est).all()


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_every_estimator_is_linear_in_per_candidate_scale_and_differentiable(
    name: str, device: torch.device
) -> None:
    values, controls = _arrays(n_draws=48, n_controls=4, device=device)
    eye = torch.eye(controls.shape[1], dtype=DTYPE, device=device)
    estimate = get_estimator(name)
    scale = torch.logspace(-30, 3, values.shape[1], dtype=DTYPE, device=device)
    torch.testing.assert_close(
        estimate(values * scale, controls, None, eye) / scale,
        estimate(values, controls, None, eye),
        rtol=1e-9,
        atol=0,
    )
    leaf = values.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(estimate(leaf, controls, None, eye).sum(), leaf)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_ridge_interpolates_between_plugin_and_mc(device: torch.device) -> None:
    values, controls = _arrays(device=device)
    torch.testing.assert_close(
        orthogonal_mean(values, controls, ridge=0.0), orthogonal_mean(values, controls)
    )
    torch.testing.assert_close(
        orthogonal_mean(values, controls, ridge=1e12), mc_mean(values), rtol=1e-8, atol=0
    )


def test_crossfit_matches_manual_folds(device: torch.device) -> None:
    values, controls = _arrays(n_draws=41, device=device)
    mu = torch.zeros(controls.shape[1], dtype=DTYPE, device=device)
    first, second = slice(0, 21), slice(21, 41)

    def gamma(rows: slice) -> torch.Tensor:
        c = controls[rows] - controls[rows].mean(0)
        return torch.linalg.lstsq(c, values[rows] - values[rows].mean(0)).solution

    est_second = values[second].mean(0) - (controls[second].mean(0) - mu) @ gamma(first)
    est_first = values[first].mean(0) - (controls[first].mean(0) - mu) @ gamma(second)
    torch.testing.assert_close(
        crossfit_mean(values, controls), (20 * est_second + 21 * est_first) / 41
    )


@pytest.mark.parametrize("n_draws", [6, 8, 10, 30])
def test_crossfit_keeps_antithetic_pairs_within_a_fold(n_draws: int) -> None:
    """Antithetic draws ``z_1, -z_1, z_2, -z_2, ...``: each fold holds whole pairs, so each
    fold's control mean is exactly 0 and the cross-fitted estimate is the naive one (unbiased).
    With the boundary at ``ceil(S/2)``, ``S = 4k + 2`` split a pair: fold B's control mean was
    ``-z/|B|`` for the ``z`` behind fold A's ``gamma``, a bias of 17 standard errors over 2e4
    rebuilds of ``exp(z)`` at ``S = 6`` (0.114 on 1.649) and 10 at ``S = 10``."""
    gen = torch.Generator().manual_seed(3)
    half = torch.randn(n_draws // 2, K_SYN, generator=gen, dtype=DTYPE)
    z = torch.stack([half, -half], dim=1).reshape(n_draws, K_SYN)
    values = (z @ A_SYN).exp()
    eye = torch.eye(K_SYN, dtype=DTYPE)
    torch.testing.assert_close(
        get_estimator("orth-crossfit")(values, z, None, eye),
        mc_mean(values),
        rtol=1e-12,
        atol=1e-12,
    )


def test_shrunk_mean_closed_form_and_known_covariance(device: torch.device) -> None:
    values, controls = _arrays(n_draws=24, n_controls=3, device=device)
    n_draws, k = controls.shape
    eye = torch.eye(k, dtype=DTYPE, device=device)
    kappa = (n_draws - 1) / (n_draws - 1 + SHRINK_PER_CONTROL * k)
    gamma = controls.T @ (values - values.mean(0)) / (n_draws - 1)
    expected = values.mean(0) - kappa * controls.mean(0) @ gamma
    torch.testing.assert_close(shrunk_mean(values, controls, None, eye), expected)
    # A known non-identity covariance is whitened first.
    mixing = torch.tensor(
        [[2.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.3, -0.2, 0.7]], dtype=DTYPE, device=device
    )
    torch.testing.assert_close(
        shrunk_mean(values, controls @ mixing.T, None, mixing @ mixing.T), expected
    )
    # Without a known covariance: the ridge plug-in with 4K pseudo-samples.
    torch.testing.assert_close(
        shrunk_mean(values, controls),
        orthogonal_mean(values, controls, ridge=SHRINK_PER_CONTROL * k),
    )


def test_quadratic_controls_have_zero_mean_and_identity_covariance(device: torch.device) -> None:
    gen = torch.Generator().manual_seed(1)
    n, k = 200_000, 3
    feats = quadratic_controls(torch.randn(n, k, generator=gen, dtype=DTYPE).to(device))
    assert feats.shape == (n, 2 * k + k * (k - 1) // 2)
    # SE of a mean of a unit-variance feature: 1/sqrt(n); of a covariance entry: at most
    # sqrt(E[f^2 g^2]) / sqrt(n) <= sqrt(15)/sqrt(n) for these degree-2 features.
    assert feats.mean(0).abs().max() < 4.0 / math.sqrt(n)
    cov = feats.T @ feats / n
    eye = torch.eye(feats.shape[1], dtype=DTYPE, device=device)
    assert (cov - eye).abs().max() < 4.0 * math.sqrt(15.0 / n)


def test_quadratic_needs_a_known_covariance() -> None:
    values, controls = _arrays()
    with pytest.raises(ValueError, match="known covariance"):
        get_estimator("orth-quadratic")(values, controls, None, None)


def test_unknown_estimator_and_bad_shapes_raise_with_values() -> None:
    with pytest.raises(ValueError, match="'nope'.*orth-shrink"):
        get_estimator("nope")
    values, controls = _arrays()
    with pytest.raises(ValueError, match=r"S x K with S=40, but got shape \(39, 5\)"):
        orthogonal_mean(values, controls[:39])
    with pytest.raises(ValueError, match=r"control_mean` must have shape \(5,\), but got \(4,\)"):
        orthogonal_mean(values, controls, control_mean=torch.zeros(4, dtype=DTYPE))
    with pytest.raises(ValueError, match="ridge=-1.0"):
        orthogonal_mean(values, controls, ridge=-1.0)
    assert DEFAULT_CONTROL_VARIATE in ESTIMATORS


# --- statistics on a synthetic integrand with a known mean ---------------------------------------
# h_n(z) = exp(a_n^T z) with z ~ N(0, I_K): E[h_n] = exp(||a_n||^2 / 2); the score-like control is z.
K_SYN = 4
A_SYN = torch.tensor(
    [[0.6, -0.3, 0.2, 0.0], [0.2, 0.2, -0.5, 0.4], [0.0, 0.0, 0.0, 0.3]], dtype=DTYPE
).T  # K x N
TRUTH = (A_SYN.square().sum(0) / 2).exp()


def _rebuilds(
    n_draws: int, n_rebuilds: int, method: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``R x S x N`` values and ``R x S x K`` controls over independent rebuilds."""
    if method == "iid":
        gen = torch.Generator().manual_seed(seed)
        z = torch.randn(n_rebuilds, n_draws, K_SYN, generator=gen, dtype=DTYPE)
    else:
        from botorch.utils.sampling import draw_sobol_normal_samples

        z = torch.stack(
            [
                draw_sobol_normal_samples(K_SYN, n_draws, dtype=DTYPE, seed=seed + r)
                for r in range(n_rebuilds)
            ]
        )
    return (z @ A_SYN).exp(), z


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "method"),
    [("mc", "iid"), ("orth-crossfit", "iid"), ("mc", "qmc")],
)
def test_unbiased_estimators_are_within_three_standard_errors(name: str, method: str) -> None:
    n_draws, n_rebuilds = 16, 3000
    values, z = _rebuilds(n_draws, n_rebuilds, method, seed=11)
    estimate = get_estimator(name)
    eye = torch.eye(K_SYN, dtype=DTYPE)
    ests = torch.stack([estimate(values[r], z[r], None, eye) for r in range(n_rebuilds)])  # R x N
    se = ests.std(0) / math.sqrt(n_rebuilds)
    assert ((ests.mean(0) - TRUTH).abs() < 3.0 * se).all(), ((ests.mean(0) - TRUTH) / se).tolist()


@pytest.mark.slow
def test_plugin_bias_shrinks_with_the_number_of_draws() -> None:
    """The in-sample plug-in has an O(1/S) bias: clearly present at S=12, much smaller at S=96."""
    biases = {}
    for n_draws, n_rebuilds in ((12, 20000), (96, 4000)):
        values, z = _rebuilds(n_draws, n_rebuilds, "iid", seed=5)
        ests = torch.stack([orthogonal_mean(values[r], z[r]) for r in range(n_rebuilds)])
        bias, se = ests.mean(0) - TRUTH, ests.std(0) / math.sqrt(n_rebuilds)
        biases[n_draws] = (bias, se)
    bias12, se12 = biases[12]
    bias96, se96 = biases[96]
    assert (bias12.abs() > 4 * se12)[0], (
        "the plug-in bias must be detectable at S=12 for candidate 0"
    )
    # O(1/S): 8x fewer draws -> about 8x the bias; require at least a halving beyond noise.
    assert (bias96.abs() + 3 * se96 < 0.5 * bias12.abs())[0]


@pytest.mark.slow
def test_shrunk_excess_variance_matches_its_bound_when_controls_are_uninformative() -> None:
    """h independent of z: Var(shrunk) = Var(mc) (1 + kappa^2 K / (S - 1)) exactly (module notes)."""
    n_draws, k, n_rebuilds = 8, 8, 20000
    gen = torch.Generator().manual_seed(2)
    z = torch.randn(n_rebuilds, n_draws, k, generator=gen, dtype=DTYPE)
    values = torch.empty(n_rebuilds, n_draws, 1, dtype=DTYPE).exponential_(generator=gen)
    eye = torch.eye(k, dtype=DTYPE)
    shrunk = torch.stack([shrunk_mean(values[r], z[r], None, eye) for r in range(n_rebuilds)])[:, 0]
    naive = values.mean(1)[:, 0]
    kappa = (n_draws - 1) / (n_draws - 1 + SHRINK_PER_CONTROL * k)
    predicted = 1.0 + kappa**2 * k / (n_draws - 1)
    ratio = float(shrunk.var() / naive.var())
    # The ratio of two variances over 20000 paired rebuilds is within a few percent.
    assert abs(ratio - predicted) < 0.03, (ratio, predicted)
    assert predicted <= 1.0 + 1.0 / (4 * SHRINK_PER_CONTROL)


def test_linear_controls_vanish_under_antithetic_draws() -> None:
    """With pairs (z, -z) the sample mean of z is exactly zero: linear corrections vanish."""
    gen = torch.Generator().manual_seed(4)
    half = torch.randn(16, K_SYN, generator=gen, dtype=DTYPE)
    z = torch.stack([half, -half], dim=1).reshape(32, K_SYN)
    values = (z @ A_SYN).exp()
    eye = torch.eye(K_SYN, dtype=DTYPE)
    for name in ("orth", "orth-ridge", "orth-shrink"):
        torch.testing.assert_close(
            get_estimator(name)(values, z, None, eye), mc_mean(values), rtol=1e-12, atol=1e-12
        )


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_draw_weights_reproduce_every_estimator(name: str) -> None:
    """Each estimator is a weighted sum of the values with weights from the controls alone:
    ``a^T values`` equals the estimate for values it never saw, with the identity passed in
    chunks that do not divide ``S``, and the weights sum to 1 (a constant is estimated exactly)."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(37, 4, generator=gen, dtype=DTYPE)
    values = torch.randn(37, 5, generator=gen, dtype=DTYPE).exp()
    estimate = get_estimator(name)
    eye = torch.eye(4, dtype=DTYPE)
    weights = estimator_weights(estimate, z, None, eye, chunk=16)
    assert weights.shape == (37,)
    torch.testing.assert_close(
        weights @ values, estimate(values, z, None, eye), rtol=1e-10, atol=1e-12
    )
    torch.testing.assert_close(weights.sum(), torch.tensor(1.0, dtype=DTYPE), rtol=0, atol=1e-12)


# --- the ridge in pseudo-samples of standardized controls ----------------------------------------
# Controls of very different scales (1, 5, 0.2): the ridge acts on the controls standardized to
# unit root-mean-square, so its pull on each coefficient does not depend on a control's units.
SCALES = torch.tensor([1.0, 5.0, 0.2], dtype=DTYPE)


def _scaled_arrays() -> tuple[torch.Tensor, torch.Tensor]:
    """``16 x 2`` positive values driven by ``16 x 3`` controls of scales 1, 5 and 0.2."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(16, 3, generator=gen, dtype=DTYPE)
    loadings = torch.tensor([[0.5, 1.0], [0.2, -0.3], [1.0, 0.1]], dtype=DTYPE)
    noise = 0.1 * torch.randn(16, 2, generator=gen, dtype=DTYPE)
    return (1.0 + z @ loadings + noise).exp(), z * SCALES


def _ridge_by_hand(
    values: torch.Tensor, controls: torch.Tensor, control_mean: torch.Tensor, ridge: float
) -> torch.Tensor:
    """``mean(h) - gamma^T (mean(c) - mu)`` with ``gamma = (C^T C + ridge I)^{-1} C^T H``: ``C``
    the centred controls divided by their root-mean-square (so ``C^T C ~ S I``), ``H`` the
    centred values, and ``gamma`` mapped back to the controls' own units."""
    centred = controls - controls.mean(0)
    rms = centred.square().mean(0).sqrt()
    standard = centred / rms
    gram = standard.T @ standard + ridge * torch.eye(controls.shape[1], dtype=DTYPE)
    gamma = torch.linalg.solve(gram, standard.T @ (values - values.mean(0))) / rms[:, None]
    return values.mean(0) - (controls.mean(0) - control_mean) @ gamma


@pytest.mark.parametrize("ridge", [0.5, 3.0, 12.0, 40.0])
def test_ridge_is_the_documented_closed_form_on_controls_of_any_scale(ridge: float) -> None:
    """``orthogonal_mean(..., ridge)`` is ``(C^T C + ridge I)^{-1} C^T H`` in standardized control
    coordinates (its docstring), ``ridge`` pseudo-samples, on controls of scales 1, 5 and 0.2
    with a nonzero known mean."""
    values, controls = _scaled_arrays()
    mu = torch.tensor([0.1, -0.4, 0.02], dtype=DTYPE)
    torch.testing.assert_close(
        orthogonal_mean(values, controls, mu, ridge=ridge),
        _ridge_by_hand(values, controls, mu, ridge),
        rtol=1e-10,
        atol=1e-12,
    )


def test_orth_ridge_takes_k_pseudo_samples() -> None:
    """``orth-ridge`` is :func:`orthogonal_mean` with ``K`` pseudo-samples (:data:`ESTIMATORS`),
    the closed form with ``ridge = K``, and so not the plug-in ``orth``."""
    values, controls = _scaled_arrays()
    k = controls.shape[1]
    zero = torch.zeros(k, dtype=DTYPE)
    result = ESTIMATORS["orth-ridge"](values, controls, None, None)
    torch.testing.assert_close(result, orthogonal_mean(values, controls, ridge=float(k)))
    torch.testing.assert_close(
        result, _ridge_by_hand(values, controls, zero, float(k)), rtol=1e-10, atol=1e-12
    )
    plugin = ESTIMATORS["orth"](values, controls, None, None)
    assert (result - plugin).abs().min() > 1e-3 * plugin.abs().max()


def test_orth_shrink_without_a_covariance_takes_4k_pseudo_samples() -> None:
    """Without a known covariance ``orth-shrink`` is the ridge plug-in with ``lambda = 4K``
    pseudo-samples (the docstrings of :func:`shrunk_mean` and :data:`ESTIMATORS`): equal to
    ``orthogonal_mean(ridge=4K)`` and to the closed form with ``4K``, for ``K = 3`` and ``K = 5``."""
    values, controls = _scaled_arrays()
    wide_values, wide_controls = _arrays(n_draws=24, n_controls=5, n_candidates=3)
    for h, c in ((values, controls), (wide_values, wide_controls)):
        lam = 4.0 * c.shape[1]
        zero = torch.zeros(c.shape[1], dtype=DTYPE)
        result = ESTIMATORS["orth-shrink"](h, c, None, None)
        torch.testing.assert_close(result, shrunk_mean(h, c))
        torch.testing.assert_close(result, orthogonal_mean(h, c, ridge=lam))
        torch.testing.assert_close(result, _ridge_by_hand(h, c, zero, lam), rtol=1e-10, atol=1e-12)


def test_orth_shrink_with_a_known_covariance_weights_the_correction_by_4k() -> None:
    """With the identity as known covariance, ``kappa = (S - 1) / (S - 1 + 4K)`` (the docstring
    of :func:`shrunk_mean`), written out here rather than taken from the module's constant."""
    values, controls = _arrays(n_draws=24, n_controls=3)
    n_draws, k = controls.shape
    kappa = (n_draws - 1) / (n_draws - 1 + 4.0 * k)
    gamma = controls.T @ (values - values.mean(0)) / (n_draws - 1)
    expected = values.mean(0) - kappa * controls.mean(0) @ gamma
    torch.testing.assert_close(
        ESTIMATORS["orth-shrink"](values, controls, None, torch.eye(k, dtype=DTYPE)), expected
    )
