"""The batch acquisition: joint posterior moments per theta draw, per-draw qEI by inner Monte Carlo,
and the nested marginal qEI (:class:`~orthobench.acquisition.MarginalLogQEI`): qEI at q = 1 is EI,
exchangeable in the batch order, exact gradients, unbiased against a high-precision reference.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from botorch.optim import optimize_acqf
from botorch.test_functions import Hartmann
from botorch.utils.sampling import draw_sobol_normal_samples
from scipy import stats

from orthobench.acquisition import (
    INNER_SAMPLES,
    MarginalLogEI,
    MarginalLogQEI,
    draw_inner_base_samples,
)
from orthobench.exceptions import NumericsWarning
from orthobench.optimizers.orthobo import MCEI, OrthoBO
from orthobench.surrogates.batch_ei import PendingSamples, canonical_order, joint_samples, log_qei
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_algebra import get_theta
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from tests.helpers import assert_device_matches_cpu, value_and_gradient

DTYPE = torch.float64


def _state(kernel: str, n: int = 12, d: int = 2, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=gen, dtype=DTYPE)
    y = torch.sin(5 * x[:, 0]) + torch.cos(4 * x[:, -1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        model, _ = fit_model(x, y, kernel)
        return model, laplace_posterior(model)


@pytest.fixture(scope="module")
def matern():
    return _state("matern52-ard")


def _gp(state, n_draws: int, seed: int = 0, method: str = "qmc", rb: float = 0.0):
    model, lap = state
    z = lap.sample_whitened(n_draws, method, seed=seed)
    return ThetaSampledGP.from_model(model, lap.theta(z), constant_mean_variance=rb), z


def _near_best(state, b: int, q: int, seed: int = 1, spread: float = 0.05) -> torch.Tensor:
    """``b x q x d`` batches around the incumbent, where EI under most draws is comparable."""
    model, _ = state
    x = model.train_inputs[0]
    best = x[model.train_targets.argmax()]
    gen = torch.Generator().manual_seed(seed)
    jitter = spread * torch.randn(b, q, x.shape[-1], generator=gen, dtype=DTYPE)
    return (best + jitter).clamp(0.0, 1.0)


@pytest.mark.parametrize(
    ("kernel", "rb"), [("matern52-ard", 0.0), ("rbf-iso", 0.0), ("matern52-ard", 0.3)]
)
def test_joint_moments_diagonal_equals_the_marginal_moments(kernel: str, rb: float) -> None:
    """mean and diag(cov) of the joint posterior are the marginal ones, and cov is symmetric PSD."""
    state = _state(kernel)
    gp, _ = _gp(state, 8, rb=rb)
    X = torch.rand(5, 3, 2, generator=torch.Generator().manual_seed(2), dtype=DTYPE)
    mean, cov = gp.joint_moments(X)
    assert mean.shape == (8, 5, 3) and cov.shape == (8, 5, 3, 3)
    m, v = gp.mean_and_variance(X.reshape(-1, 1, 2))
    torch.testing.assert_close(mean.reshape(8, -1), m, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        cov.diagonal(dim1=-2, dim2=-1).reshape(8, -1), v, rtol=1e-9, atol=1e-12
    )
    torch.testing.assert_close(cov, cov.transpose(-1, -2), rtol=0, atol=1e-12)
    assert bool((torch.linalg.eigvalsh(cov) > -1e-10).all())


def test_joint_covariance_matches_gpytorch_at_the_map_theta(matern) -> None:
    """At the MAP hyperparameters the joint posterior is the fitted model's own."""
    model, lap = matern
    gp = ThetaSampledGP.from_model(model, get_theta(model).unsqueeze(0))
    X = torch.rand(2, 4, 2, generator=torch.Generator().manual_seed(3), dtype=DTYPE)
    mean, cov = gp.joint_moments(X)
    with torch.no_grad():
        posterior = model.posterior(X)
    tf = model.outcome_transform
    scale = float(tf.stdvs.squeeze())
    ref_mean = (posterior.mean.squeeze(-1) - float(tf.means.squeeze())) / scale
    ref_cov = posterior.mvn.covariance_matrix / scale**2
    torch.testing.assert_close(mean[0], ref_mean, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(cov[0], ref_cov, rtol=1e-5, atol=1e-8)


def test_qei_at_q1_is_ei(matern) -> None:
    """With many base samples the per-draw qEI of one point is its analytic EI: within 1%, or
    1e-3 of the largest EI for the draws whose EI is too small for 2^14 base samples to see."""
    gp, _ = _gp(matern, 8)
    X = _near_best(matern, 6, 1)
    eps = draw_sobol_normal_samples(d=1, n=2**14, seed=0).to(DTYPE)
    ei = gp.log_ei(X).exp()
    torch.testing.assert_close(
        log_qei(gp, X, eps).exp(), ei, rtol=1e-2, atol=1e-3 * float(ei.max())
    )


def test_marginal_qei_at_q1_is_marginal_ei(matern) -> None:
    model, _ = matern
    gp, z = _gp(matern, 16)
    X = _near_best(matern, 6, 1)
    eps = draw_sobol_normal_samples(d=1, n=2**14, seed=0).to(DTYPE)
    ei = MarginalLogEI(model, [gp], [z], [1.0], estimator="orth")(X)
    qei = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps, estimator="orth")(X)
    torch.testing.assert_close(qei.exp(), ei.exp(), rtol=1e-2, atol=0)


def test_exchangeable_in_the_batch_order(matern) -> None:
    model, _ = matern
    gp, z = _gp(matern, 16)
    X = torch.rand(7, 4, 2, generator=torch.Generator().manual_seed(5), dtype=DTYPE)
    eps = draw_sobol_normal_samples(d=4, n=64, seed=1).to(DTYPE)
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps)
    perm = torch.tensor([2, 0, 3, 1])
    torch.testing.assert_close(acqf(X[:, perm]), acqf(X), rtol=0, atol=1e-12)


def test_batch_value_grows_with_the_batch(matern) -> None:
    """Adding a point to a batch never lowers qEI on the same base samples (max over more points)."""
    gp, _ = _gp(matern, 8)
    X = _near_best(matern, 5, 3)
    eps = draw_sobol_normal_samples(d=3, n=256, seed=2).to(DTYPE)
    # Sort each batch by its first coordinate so that the first two points keep their base columns.
    X = X.gather(-2, X[..., 0].argsort(-1).unsqueeze(-1).expand_as(X))
    two = log_qei(gp, X[:, :2], eps[:, :2])
    assert bool((log_qei(gp, X, eps) >= two - 1e-9).all())


def test_log_qei_gradcheck(matern) -> None:
    gp, _ = _gp(matern, 4)
    X = _near_best(matern, 2, 3, spread=0.2).requires_grad_()
    eps = draw_sobol_normal_samples(d=3, n=8, seed=3).to(DTYPE)
    assert torch.autograd.gradcheck(lambda x: log_qei(gp, x, eps), (X,), eps=1e-6, atol=1e-5)


def test_marginal_qei_gradcheck_with_an_ensemble(matern) -> None:
    other = _state("rbf-iso")
    model, _ = matern
    (g1, z1), (g2, z2) = _gp(matern, 8), _gp(other, 8, seed=1)
    eps = draw_sobol_normal_samples(d=2, n=16, seed=4).to(DTYPE)
    acqf = MarginalLogQEI(model, [g1, g2], [z1, z2], [0.7, 0.3], base_samples=eps, estimator="orth")
    X = _near_best(matern, 3, 2, spread=0.2).requires_grad_()
    assert torch.autograd.gradcheck(acqf, (X,), eps=1e-6, atol=1e-5)


def test_pending_points_join_every_batch(matern) -> None:
    """With pending points the value is that of the batch with them prepended, taken in that
    order: the pending points first (on the first base-sample columns), then the candidates in
    canonical order."""
    model, _ = matern
    gp, z = _gp(matern, 8)
    eps = draw_sobol_normal_samples(d=3, n=32, seed=5).to(DTYPE)
    X = _near_best(matern, 4, 2)
    pending = torch.tensor([[0.9, 0.5]], dtype=DTYPE)
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps, X_pending=pending)
    full = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps)
    with full.in_given_order():
        expected = full(torch.cat([pending.expand(4, 1, 2), canonical_order(X)], -2))
    torch.testing.assert_close(acqf(X), expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(acqf(X.flip(-2)), acqf(X))  # exchangeable in the candidates


def test_the_order_of_pending_points_does_not_change_the_value(matern) -> None:
    """The pending points are a set: proposed in another order (an asynchronous run's points
    finishing in another order, a greedy batch's stages), the same points give the same value.
    They take the first base-sample columns, so in their given order the value moved."""
    model, _ = matern
    gp, z = _gp(matern, 8)
    eps = draw_sobol_normal_samples(d=4, n=32, seed=5).to(DTYPE)
    X = _near_best(matern, 4, 1)
    pending = torch.tensor([[0.9, 0.5], [0.1, 0.7], [0.5, 0.2]], dtype=DTYPE)
    values = [
        MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps, X_pending=pending[order])(X)
        for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0])
    ]
    for value in values[1:]:
        torch.testing.assert_close(value, values[0], rtol=1e-12, atol=1e-12)
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps)
    acqf.set_X_pending(pending.flip(0))  # BoTorch's hook, as a greedy stage sets it
    torch.testing.assert_close(acqf(X), values[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rb", [0.0, 0.3])
@pytest.mark.parametrize("per_draw", [True, False])
@pytest.mark.parametrize("q", [1, 2])
def test_pending_samples_give_the_joint_samples(matern, q: int, per_draw: bool, rb: float) -> None:
    """Samples made once at the pending points and the batch's conditional on them are the joint
    samples of ``[pending; batch]`` on the same base samples, per draw or shared, with the
    constant mean integrated out or not: only the cost differs."""
    gp, _ = _gp(matern, 6, rb=rb)
    pending = _near_best(matern, 1, 2, seed=7, spread=0.2)[0]
    X = _near_best(matern, 3, q, spread=0.2)
    if per_draw:
        base = draw_inner_base_samples(6, 2 + q, seed=2, inner=16)
    else:
        base = draw_sobol_normal_samples(d=2 + q, n=16, seed=2).to(DTYPE)
    cached = PendingSamples(gp, pending, base[..., :2])
    joint = joint_samples(gp, torch.cat([pending.expand(3, 2, 2), X], -2), base)
    torch.testing.assert_close(cached.samples.expand(-1, 3, -1, -1), joint[:, :, :2])
    torch.testing.assert_close(joint_samples(gp, X, base[..., 2:], cached), joint[:, :, 2:])


def test_pending_samples_of_another_gp_are_refused(matern) -> None:
    gp, _ = _gp(matern, 4)
    other, _ = _gp(matern, 4, seed=1)
    base = draw_inner_base_samples(4, 2, seed=2, inner=8)
    cached = PendingSamples(gp, _near_best(matern, 1, 1)[0], base[..., :1])
    with pytest.raises(ValueError, match="another GP"):
        joint_samples(other, _near_best(matern, 2, 1), base[..., 1:], cached)


def test_log_qei_gradcheck_with_pending_points(matern) -> None:
    gp, _ = _gp(matern, 4, rb=0.3)
    pending = _near_best(matern, 1, 2, seed=7, spread=0.2)[0]
    eps = draw_inner_base_samples(4, 4, seed=3, inner=8)
    cached = PendingSamples(gp, pending, eps[..., :2])
    X = _near_best(matern, 2, 2, spread=0.2).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x: log_qei(gp, x, eps[..., 2:], cached), (X,), eps=1e-6, atol=1e-5
    )


def test_new_pending_points_replace_the_samples_of_the_old(matern) -> None:
    """``set_X_pending`` (each greedy stage's) makes the next evaluation sample the new pending
    points: the value is that of an acquisition built with them."""
    model, _ = matern
    gp, z = _gp(matern, 8)
    eps = draw_inner_base_samples(8, 3, seed=1, inner=16)
    first, second = _near_best(matern, 2, 1, seed=8, spread=0.2)
    X = _near_best(matern, 4, 1, spread=0.2)
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps, X_pending=first)
    before = acqf(X)
    acqf.set_X_pending(torch.cat([first, second]))
    fresh = MarginalLogQEI(
        model, [gp], [z], [1.0], base_samples=eps, X_pending=torch.cat([first, second])
    )
    torch.testing.assert_close(acqf(X), fresh(X), rtol=0, atol=0)
    assert not torch.allclose(acqf(X), before)


def test_value_is_continuous_where_a_candidate_passes_a_pending_point(matern) -> None:
    """A sequential-greedy stage moves one candidate with the earlier points pending: its value
    must not jump where the candidate's first coordinate crosses a pending point's (the pending
    points are not sorted among the candidates; when they were, the base samples changed
    points there, and L-BFGS-B's line searches ended abnormally)."""
    model, _ = matern
    gp, z = _gp(matern, 16)
    eps = draw_inner_base_samples(16, 2, seed=1, inner=32)
    pending = _near_best(matern, 1, 1, spread=0.0)[0]
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps, X_pending=pending)
    # Two candidates 0.1 from the pending point in the second coordinate, just either side of
    # it in the first.
    X = pending.expand(2, 1, 2) + torch.tensor([[[-1e-9, 0.1]], [[1e-9, 0.1]]], dtype=DTYPE)
    with torch.no_grad():
        values = acqf(X.clamp(0.0, 1.0))
    assert abs(float(values[1] - values[0])) < 1e-6


def test_in_given_order_is_the_acquisition_on_sorted_batches_and_smooth(matern) -> None:
    """Inside ``in_given_order`` a batch's rows are not sorted: the value equals the
    acquisition's on a batch already in canonical order, does not jump where two candidates'
    first coordinates cross, and depends on the rows' order; after the block the sort is back."""
    model, _ = matern
    gp, z = _gp(matern, 16)
    acqf = MarginalLogQEI(
        model, [gp], [z], [1.0], base_samples=draw_inner_base_samples(16, 2, seed=1, inner=32)
    )
    X = canonical_order(_near_best(matern, 4, 2, spread=0.2))
    crossing = X[:1].repeat(2, 1, 1)
    crossing[:, 1, 0] = crossing[0, 0, 0] + torch.tensor([-1e-9, 1e-9], dtype=DTYPE)
    with torch.no_grad():
        sorted_values, sorted_crossing = acqf(X), acqf(crossing)
        with acqf.in_given_order():
            torch.testing.assert_close(acqf(X), sorted_values, rtol=0, atol=0)
            given = acqf(crossing)
            assert not torch.allclose(acqf(X.flip(-2)), sorted_values)
        torch.testing.assert_close(acqf(X.flip(-2)), sorted_values)
    assert abs(float(given[1] - given[0])) < 1e-6
    assert abs(float(sorted_crossing[1] - sorted_crossing[0])) > 1e-3  # the sort's jump


@pytest.mark.slow  # end to end; the default run has the unit tests of both stages just above
def test_a_batch_step_runs_without_line_search_failures() -> None:
    """Neither a greedy stage (a candidate passing a pending point) nor the joint climb (two
    candidates crossing) meets the sort's jumps, so no L-BFGS-B restart ends abnormally and
    BoTorch reruns no stage (the climb on the sorted acquisition ended abnormally here)."""
    x = np.random.default_rng(3).random((30, 6))
    y = Hartmann(dim=6)(torch.as_tensor(x)).numpy()
    opt = OrthoBO(6, seed=0, theta_samples=64, batch_theta_samples=16)
    opt.tell(x, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.ask(4)
    assert not [w for w in caught if "Optimization failed" in str(w.message)]


def test_optimize_acqf_finds_a_batch(matern) -> None:
    model, _ = matern
    gp, z = _gp(matern, 16)
    eps = draw_sobol_normal_samples(d=3, n=32, seed=6).to(DTYPE)
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DTYPE)
    candidate, value = optimize_acqf(acqf, bounds, q=3, num_restarts=2, raw_samples=32)
    assert candidate.shape == (3, 2) and math.isfinite(float(value))
    assert float(torch.pdist(candidate).min()) > 1e-4


def test_draw_s_uses_row_s_of_per_draw_base_samples(matern) -> None:
    """Per-draw base samples: draw ``s``'s function samples are those of its own row, as if every
    draw had the row's samples."""
    gp, _ = _gp(matern, 6)
    X = _near_best(matern, 3, 2, spread=0.2)
    base = draw_inner_base_samples(8, 2, seed=0, inner=16)  # more rows than draws: first 6 used
    per_draw = joint_samples(gp, X, base)
    assert per_draw.shape == (6, 3, 2, 16)
    for s in range(6):
        torch.testing.assert_close(
            per_draw[s], joint_samples(gp, X, base[s])[s], rtol=0, atol=1e-12
        )


def test_inner_base_samples_are_per_draw_and_extend_with_the_draws() -> None:
    base = draw_inner_base_samples(8, 3, seed=4)
    assert base.shape == (8, INNER_SAMPLES, 3) and base.dtype == DTYPE
    assert not torch.equal(base[0], base[1])
    torch.testing.assert_close(draw_inner_base_samples(4, 3, seed=4), base[:4], rtol=0, atol=0)
    # Each draw's block of a power-of-2 count is a net: its mean is near 0 in every column.
    assert float(base.mean(dim=1).abs().max()) < 0.1


def test_per_draw_base_samples_average_the_inner_noise_over_the_draws(matern) -> None:
    """On fixed theta draws, the marginal qEI's spread over base-sample seeds is far smaller with
    each draw's own base samples than with one set shared by every draw (whose error is common to
    all draws and does not shrink with S)."""
    model, _ = matern
    gp, z = _gp(matern, 32)
    X = _near_best(matern, 8, 3, spread=0.1)

    def spread(per_draw: bool) -> float:
        values = []
        for seed in range(12):
            base = draw_inner_base_samples(32, 3, seed=seed, inner=16)
            acqf = MarginalLogQEI(
                model, [gp], [z], [1.0], base_samples=base if per_draw else base[0], estimator="mc"
            )
            with torch.no_grad():
                values.append(acqf(X))
        return float(torch.stack(values).var(dim=0).mean())

    assert spread(per_draw=True) < spread(per_draw=False) / 4


def test_per_draw_base_samples_must_cover_the_draws(matern) -> None:
    model, _ = matern
    gp, z = _gp(matern, 8)
    with pytest.raises(ValueError, match="S' >= 8 draws"):
        MarginalLogQEI(model, [gp], [z], [1.0], base_samples=torch.randn(4, 16, 2, dtype=DTYPE))


def test_base_samples_must_cover_the_batch(matern) -> None:
    model, _ = matern
    gp, z = _gp(matern, 8)
    acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=torch.randn(16, 2, dtype=DTYPE))
    with pytest.raises(ValueError, match="base-sample columns"):
        acqf(torch.rand(1, 3, 2, dtype=DTYPE))


# OrthoBO's case runs with the slow tests: the default run keeps MCEI's (OrthoBO's pipeline with
# the naive estimator) and OrthoBO's batch step in test_orthobo_proposes_a_batch_on_the_device.
@pytest.mark.parametrize(
    "cls",
    [pytest.param(OrthoBO, id="OrthoBO", marks=pytest.mark.slow), pytest.param(MCEI, id="MCEI")],
)
def test_orthobo_proposes_a_reproducible_batch(cls) -> None:
    gen = np.random.default_rng(0)
    x = gen.random((10, 3))
    y = ((x - 0.4) ** 2).sum(-1)
    kwargs = dict(theta_samples=16, batch_theta_samples=8, raw_samples=32, num_restarts=2)
    batches = []
    for _ in range(2):
        opt = cls(3, seed=3, **kwargs)
        opt.tell(x, y)
        batches.append(opt.ask(4))
    assert batches[0].x.shape == (4, 3)
    np.testing.assert_array_equal(batches[0].x, batches[1].x)
    assert (
        min(np.linalg.norm(a - b) for i, a in enumerate(batches[0].x) for b in batches[0].x[:i])
        > 1e-6
    )
    # The greedy search on batch_theta_samples draws, the climb on all theta_samples draws.
    assert batches[0].info["coarse_theta_samples"] == 8
    assert batches[0].info["n_evaluations"] == [16]


def test_orthobo_gives_each_theta_draw_its_own_base_samples() -> None:
    opt = OrthoBO(2, seed=0, theta_samples=16, batch_theta_samples=8)
    x = np.random.default_rng(1).random((8, 2))
    opt.tell(x, (x**2).sum(-1))
    acqf = opt._build_acquisition(opt._fit(), 8, q=3)
    assert acqf.base_samples.shape == (8, INNER_SAMPLES, 3)
    assert not torch.equal(acqf.base_samples[0], acqf.base_samples[1])


def test_nested_marginal_qei_on_the_device_equals_the_cpu_one(matern, to_device, device) -> None:
    """Same fit, same theta draws and per-draw base samples: the nested marginal qEI and its
    gradient on ``device`` agree with the CPU's to rounding."""
    if device.type == "cpu":
        pytest.skip("the CPU values are the reference")
    X = _near_best(matern, 6, 3, spread=0.2)
    base = draw_inner_base_samples(16, 3, seed=2, inner=32)
    results = []
    for state, where in ((matern, torch.device("cpu")), (to_device(matern), device)):
        gp, z = _gp(state, 16)
        acqf = MarginalLogQEI(state[0], [gp], [z], [1.0], base_samples=base.to(where))
        results.append(value_and_gradient(acqf, X, where))
    assert_device_matches_cpu(*results)


def test_orthobo_proposes_a_batch_on_the_device(device) -> None:
    """The whole batch step (greedy search, joint climb) on ``device``: q distinct points in the
    unit cube, and the step's diagnostics."""
    x = np.random.default_rng(0).random((10, 3))
    opt = OrthoBO(
        3,
        seed=3,
        device=device,
        theta_samples=16,
        batch_theta_samples=8,
        raw_samples=32,
        num_restarts=2,
    )
    opt.tell(x, ((x - 0.4) ** 2).sum(-1))
    batch = opt.ask(4)
    assert batch.x.shape == (4, 3) and np.isfinite(batch.x).all()
    assert ((batch.x >= 0) & (batch.x <= 1)).all()
    assert min(np.linalg.norm(a - b) for i, a in enumerate(batch.x) for b in batch.x[:i]) > 1e-6
    assert batch.info["coarse_theta_samples"] == 8


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["mc", "orth-crossfit"])
def test_nested_marginal_qei_is_unbiased(matern, estimator: str) -> None:
    """Mean over 120 rebuilds (S = 16 iid theta draws, K = 16 fresh base samples per draw) within
    3.5 SE of a reference over 2^12 scrambled-Sobol theta draws and 2^10 base samples.

    Unbiased by iterated expectations: each draw's inner mean is unbiased for its (smoothed)
    qEI, and the estimator is unbiased over theta for any fixed per-draw function. One statistic
    per rebuild (the probe-averaged relative error), so its SE is that of 120 independent
    numbers; the reference's own SE, from 4 independent scramblings, is added in quadrature.
    """
    model, lap = matern
    X = _near_best(matern, 4, 2, spread=0.03)
    refs = []
    for i in range(4):
        gp, z = _gp(matern, 2**12, seed=100 + i)
        eps = draw_sobol_normal_samples(d=2, n=2**10, seed=200 + i).to(DTYPE)
        with torch.no_grad():
            refs.append(log_qei(gp, X, eps).exp().mean(0))
    refs = torch.stack(refs)
    ref = refs.mean(0)
    ref_se = float((refs / ref - 1).mean(1).std() / math.sqrt(refs.shape[0]))
    rel = []
    for r in range(120):
        gp, z = _gp(matern, 16, seed=10_000 + r, method="iid")
        eps = torch.randn(16, 16, 2, generator=torch.Generator().manual_seed(r), dtype=DTYPE)
        acqf = MarginalLogQEI(model, [gp], [z], [1.0], base_samples=eps, estimator=estimator)
        with torch.no_grad():
            log_scale, value, _ = acqf.scaled_estimates(X)
        rel.append(float((log_scale.exp() * value / ref - 1).mean()))
    rel = np.array(rel)
    se = math.hypot(rel.std(ddof=1) / math.sqrt(rel.size), ref_se)
    assert abs(rel.mean()) < 3.5 * se, (rel.mean(), se, stats.ttest_1samp(rel, 0.0))
