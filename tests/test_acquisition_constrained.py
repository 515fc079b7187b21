"""Constrained EI: the per-draw probability of feasibility, per-draw CEI against Monte Carlo, and
the marginal CEI (:class:`~orthobench.acquisition.MarginalLogCEI`): joint controls, gradients,
unbiasedness against a high-precision reference; batch constrained EI
(:class:`~orthobench.acquisition.MarginalLogQCEI`) against a Monte Carlo reference and qLogEI.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from botorch.utils.sampling import draw_sobol_normal_samples
from scipy import stats

from orthobench.acquisition import (
    MarginalLogCEI,
    MarginalLogEI,
    MarginalLogQCEI,
    MarginalLogQEI,
    draw_inner_base_samples,
)
from orthobench.exceptions import NumericsWarning
from orthobench.optimizers.orthobo import OrthoBO
from orthobench.registry import TASKS
from orthobench.surrogates.batch_ei import canonical_order, log_qcei
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.surrogates.theta_algebra import get_theta
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

DTYPE = torch.float64


@pytest.fixture(scope="module")
def problem():
    """A 2-d objective (maximized by the GP: it is fitted to -y) and one constraint c <= 0."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(14, 2, generator=gen, dtype=DTYPE)
    y = (x - 0.4).square().sum(-1)  # minimized
    c = 0.3 - x.sum(-1)  # feasible where x0 + x1 >= 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        objective, _ = fit_model(x, -y, "matern52-ard")
        constraint, _ = fit_model(x, c, "matern52-ard")
    feasible = c <= 0
    return {
        "x": x,
        "objective": (objective, laplace_posterior(objective)),
        "constraint": (constraint, laplace_posterior(constraint)),
        # The incumbent: the best feasible observation, on the objective model's scale.
        "best_f": _standardized(objective, float((-y)[feasible].max())),
    }


def _standardized(model, value: float) -> float:
    tf = model.outcome_transform
    return (value - float(tf.means.squeeze())) / float(tf.stdvs.squeeze())


def _draws(state, n: int, seed: int, method: str = "qmc", best_f: float | None = None):
    model, lap = state
    z = lap.sample_whitened(n, method, seed=seed)
    return ThetaSampledGP.from_model(model, lap.theta(z), best_f=best_f), z


def _acqf(problem, n: int, seed: int, method: str = "qmc", **kwargs) -> MarginalLogCEI:
    gp, z = _draws(problem["objective"], n, seed, method, problem["best_f"])
    cgp, cz = _draws(problem["constraint"], n, seed + 1, method)
    return MarginalLogCEI(
        problem["objective"][0], [gp], [z], [1.0], constraints=[cgp], constraint_controls=[cz],
        **kwargs,
    )  # fmt: skip


def test_probability_of_feasibility_is_the_map_posteriors(problem) -> None:
    model, _ = problem["constraint"]
    gp = ThetaSampledGP.from_model(model, get_theta(model).unsqueeze(0))
    X = torch.rand(6, 1, 2, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    with torch.no_grad():
        posterior = model.posterior(X)
    mean, sd = posterior.mean.squeeze(), posterior.variance.squeeze().sqrt()
    expected = torch.special.ndtr(-mean / sd)
    torch.testing.assert_close(gp.log_prob_below(X)[0].exp(), expected, rtol=1e-6, atol=1e-9)


def test_per_draw_cei_matches_monte_carlo(problem) -> None:
    """exp(log CEI_s) = E[(f - f*)_+ 1{c <= 0}] under draw s's independent posteriors (3 SE)."""
    acqf = _acqf(problem, 4, seed=2)
    X = torch.tensor([[[0.3, 0.2]], [[0.5, 0.45]], [[0.2, 0.6]]], dtype=DTYPE)
    _, (log_cei,) = acqf._member_log_values(X)  # S x b
    gp, cgp = acqf.members[0], acqf.constraints[0]
    mean, var = gp.mean_and_variance(X)
    cmean, cvar = cgp.mean_and_variance(X)
    bound = (0.0 - cgp.y_mean) / cgp.y_std
    gen = torch.Generator().manual_seed(3)
    n = 2**18
    for s in range(4):
        f = mean[s] + var[s].sqrt() * torch.randn(n, 3, generator=gen, dtype=DTYPE)
        c = cmean[s] + cvar[s].sqrt() * torch.randn(n, 3, generator=gen, dtype=DTYPE)
        values = (f - gp.best_f).clamp_min(0.0) * (c <= bound)
        mc, se = values.mean(0), values.std(0) / math.sqrt(n)
        assert bool((torch.abs(log_cei[s].detach().exp() - mc) <= 3 * se + 1e-12).all()), (s, mc)


def test_cei_is_ei_times_feasibility_and_uses_the_joint_controls(problem) -> None:
    acqf = _acqf(problem, 16, seed=4, estimator="orth")
    gp, z = acqf.members[0], acqf.controls[0]
    assert z.shape == (16, problem["objective"][1].p + problem["constraint"][1].p)
    X = torch.rand(5, 1, 2, generator=torch.Generator().manual_seed(5), dtype=DTYPE)
    _, (log_cei,) = acqf._member_log_values(X)
    torch.testing.assert_close(log_cei, gp.log_ei(X) + acqf.constraints[0].log_prob_below(X))
    # mc weights: the outer log of the naive mean of the per-draw CEI.
    mc = _acqf(problem, 16, seed=4, estimator="mc")
    torch.testing.assert_close(mc(X), torch.logsumexp(log_cei, 0) - math.log(16))


def test_an_infeasible_region_lowers_the_acquisition_below_ei(problem) -> None:
    """Near the origin (c > 0 likely) CEI is far below EI on the same objective draws."""
    cei = _acqf(problem, 16, seed=6, estimator="mc")
    ei = MarginalLogEI(problem["objective"][0], cei.members, [cei.controls[0][:, :-problem["constraint"][1].p]], [1.0], estimator="mc")  # fmt: skip
    X = torch.tensor([[[0.02, 0.03]], [[0.9, 0.9]]], dtype=DTYPE)
    gap = ei(X) - cei(X)
    assert float(gap[0]) > 1.0 and float(gap[1]) < 0.1, gap


def test_gradcheck(problem) -> None:
    acqf = _acqf(problem, 8, seed=7, estimator="orth")
    X = torch.rand(3, 1, 2, generator=torch.Generator().manual_seed(8), dtype=DTYPE)
    assert torch.autograd.gradcheck(acqf, (X.requires_grad_(),), eps=1e-6, atol=1e-5)


def test_constraint_draws_must_match_the_members(problem) -> None:
    gp, z = _draws(problem["objective"], 8, 0)
    cgp, cz = _draws(problem["constraint"], 16, 1)
    with pytest.raises(ValueError, match="same number of draws"):
        MarginalLogCEI(problem["objective"][0], [gp], [z], [1.0], constraints=[cgp], constraint_controls=[cz])  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["mc", "orth-crossfit"])
def test_marginal_cei_is_unbiased(problem, estimator: str) -> None:
    """Mean over 200 rebuilds (S = 16 iid joint draws) within 3.5 SE of a reference over 4 x
    2^13 scrambled-Sobol joint draws, at probes near the incumbent (the statistic: the
    probe-averaged relative error per rebuild; the reference's SE added in quadrature)."""
    x = problem["x"]
    best = x[((x - 0.4).square().sum(-1) + 1e3 * (x.sum(-1) < 0.3)).argmin()]
    jitter = 0.03 * torch.randn(4, 2, generator=torch.Generator().manual_seed(9), dtype=DTYPE)
    X = (best + jitter).clamp(0.0, 1.0).unsqueeze(-2)

    def linear(acqf):
        with torch.no_grad():
            log_scale, value, _ = acqf.scaled_estimates(X)
        return log_scale.exp() * value

    refs = torch.stack(
        [linear(_acqf(problem, 2**13, 100 + 2 * i, estimator="mc")) for i in range(4)]
    )
    ref = refs.mean(0)
    ref_se = float((refs / ref - 1).mean(1).std() / math.sqrt(refs.shape[0]))
    rel = np.array(
        [float((linear(_acqf(problem, 16, 10_000 + 2 * r, "iid", estimator=estimator)) / ref - 1).mean()) for r in range(200)]
    )  # fmt: skip
    se = math.hypot(rel.std(ddof=1) / math.sqrt(rel.size), ref_se)
    assert abs(rel.mean()) < 3.5 * se, (rel.mean(), se, stats.ttest_1samp(rel, 0.0))


def _qcei(problem, n: int, seed: int, q: int, k: int = 256, **kwargs) -> MarginalLogQCEI:
    gp, z = _draws(problem["objective"], n, seed, best_f=problem["best_f"])
    cgp, cz = _draws(problem["constraint"], n, seed + 1)
    return MarginalLogQCEI(
        problem["objective"][0], [gp], [z], [1.0],
        base_samples=draw_sobol_normal_samples(d=q, n=k, seed=seed + 2).to(DTYPE),
        constraints=[cgp], constraint_controls=[cz],
        constraint_base_samples=[draw_sobol_normal_samples(d=q, n=k, seed=seed + 3).to(DTYPE)],
        **kwargs,
    )  # fmt: skip


def test_per_draw_batch_cei_matches_monte_carlo(problem) -> None:
    """exp(log qCEI_s) = E[max_j (f_j - f*)_+ 1{c_j <= 0}] under draw s's independent joint
    posteriors: the inner mean over 2^12 Sobol' base samples per GP within 4 SE of plain Monte
    Carlo over 2^17 samples (plus the smoothings' bias, below 1e-3 of the value)."""
    acqf = _qcei(problem, 3, seed=6, q=2, k=2**12)
    X = torch.tensor([[[0.3, 0.2], [0.5, 0.45]], [[0.2, 0.6], [0.45, 0.35]]], dtype=DTYPE)
    _, (log_qcei,) = acqf._member_log_values(X)  # S x b
    gp, cgp = acqf.members[0], acqf.constraints[0]
    mean, cov = gp.joint_moments(X)
    cmean, ccov = cgp.joint_moments(X)
    bound = cgp.standardized(0.0)
    gen = torch.Generator().manual_seed(7)
    n = 2**17
    for s in range(3):
        for b in range(2):
            f = (
                mean[s, b]
                + torch.randn(n, 2, generator=gen, dtype=DTYPE) @ torch.linalg.cholesky(cov[s, b]).T
            )
            c = (
                cmean[s, b]
                + torch.randn(n, 2, generator=gen, dtype=DTYPE)
                @ torch.linalg.cholesky(ccov[s, b]).T
            )
            values = ((f - gp.best_f).clamp_min(0.0) * (c <= bound)).amax(-1)
            mc, se = values.mean(), values.std() / math.sqrt(n)
            value = log_qcei[s, b].detach().exp()
            assert abs(value - mc) <= 4 * se + 1e-3 * mc, (s, b, float(value), float(mc), float(se))


def test_batch_cei_is_below_batch_ei_and_at_q1_near_cei(problem) -> None:
    """The feasibility factor is at most 1 (qCEI <= qEI on the same draws and base samples), and
    at q = 1 the inner mean estimates the analytic CEI of MarginalLogCEI on the same draws."""
    X = torch.rand(6, 2, 2, generator=torch.Generator().manual_seed(8), dtype=DTYPE)
    qcei = _qcei(problem, 8, seed=9, q=2, estimator="mc")
    qei = MarginalLogQEI(
        qcei.model, qcei.members, [z[:, : problem["objective"][1].p] for z in qcei.controls],
        [1.0], base_samples=qcei.base_samples, estimator="mc",
    )  # fmt: skip
    with torch.no_grad():
        assert bool((qcei(X) <= qei(X) + 1e-9).all())
    one = _qcei(problem, 8, seed=9, q=1, k=2**12, estimator="mc")
    cei = _acqf(problem, 8, seed=9, estimator="mc")
    # Where CEI is not negligible (where it is, few base samples improve, in relative terms).
    x1 = torch.tensor([[[0.3, 0.2]], [[0.5, 0.45]], [[0.4, 0.3]]], dtype=DTYPE)
    with torch.no_grad():
        torch.testing.assert_close(one(x1).exp(), cei(x1).exp(), rtol=0.01, atol=0.0)


def test_batch_cei_is_exchangeable_and_differentiable(problem) -> None:
    acqf = _qcei(problem, 4, seed=10, q=3, k=32, estimator="orth")
    X = torch.rand(2, 3, 2, generator=torch.Generator().manual_seed(11), dtype=DTYPE)
    with torch.no_grad():
        torch.testing.assert_close(acqf(X), acqf(X.flip(-2)))
    X.requires_grad_(True)
    acqf(X).sum().backward()
    assert X.grad is not None and bool(torch.isfinite(X.grad).all()) and X.grad.abs().sum() > 0


def test_batch_cei_needs_base_samples_per_constraint(problem) -> None:
    gp, z = _draws(problem["objective"], 4, 0)
    cgp, cz = _draws(problem["constraint"], 4, 1)
    base = draw_sobol_normal_samples(d=2, n=8, seed=0).to(DTYPE)
    with pytest.raises(ValueError, match="constraint_base_samples"):
        MarginalLogQCEI(
            problem["objective"][0], [gp], [z], [1.0], base_samples=base, constraints=[cgp],
            constraint_controls=[cz], constraint_base_samples=[],
        )  # fmt: skip


def test_batch_cei_with_pending_points_is_that_of_the_batch_after_them(problem) -> None:
    """Pending points are sampled once, on the first base-sample columns of every GP: the value
    is that of the batch with them prepended, taken in that order, for the objective and the
    constraint alike."""
    X = torch.rand(5, 2, 2, generator=torch.Generator().manual_seed(10), dtype=DTYPE)
    pending = torch.tensor([[0.35, 0.4]], dtype=DTYPE)
    acqf = _qcei(problem, 8, seed=11, q=3, k=64, X_pending=pending)
    full = _qcei(problem, 8, seed=11, q=3, k=64)
    with torch.no_grad(), full.in_given_order():
        expected = full(torch.cat([pending.expand(5, 1, 2), canonical_order(X)], -2))
    with torch.no_grad():
        torch.testing.assert_close(acqf(X), expected, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def gramacy_orthobo() -> tuple[OrthoBO, list]:
    """OrthoBO told 10 Sobol' points of ``gramacy`` (2 constraints, 4 of the points feasible),
    and its fitted ensemble (the constraint GPs fitted beside it)."""
    task = TASKS.create("gramacy")
    u = torch.quasirandom.SobolEngine(2, scramble=True, seed=0).draw(10, dtype=DTYPE).numpy()
    evals = [task.evaluate(task.space.from_unit(p[None])[0], seed=0, device=torch.device("cpu")) for p in u]  # fmt: skip
    opt = OrthoBO(2, seed=0, theta_samples=8, batch_theta_samples=8)
    opt.tell(u, np.array([e.y for e in evals]), np.array([e.constraints for e in evals]))
    return opt, opt._fit()


def test_orthobo_pairs_independent_inner_samples_of_the_gps(gramacy_orthobo) -> None:
    """A draw's batch constrained EI pairs the objective's inner sample k with each
    constraint's sample k, which must be independent. Two scramblings of one Sobol' net are
    not: each keeps or flips the leading digit of every point alike, so the signs of two GPs'
    samples would agree on all K rows or on none. Columns of one net are jointly stratified:
    each sign quadrant of two GPs' columns holds K/4 of the rows."""
    opt, members = gramacy_orthobo
    acqf = opt._build_acquisition(members, 8, q=2)
    assert isinstance(acqf, MarginalLogQCEI)
    negative = [b < 0 for b in (acqf.base_samples, *acqf.constraint_base_samples)]  # S x K x q
    for i in range(len(negative)):
        for j in range(i):
            both = (negative[i] & negative[j]).double().mean(-2)  # S x q
            assert bool(((both - 0.25).abs() <= 0.125).all()), (i, j, both)


def test_batch_cei_at_q1_is_each_draws_cei(gramacy_orthobo) -> None:
    """Per draw, at q = 1, batch CEI on the columns of one net per draw (as OrthoBO draws its
    GPs' inner base samples) estimates the closed-form CEI, EI times the product of the 2
    constraints' probabilities of feasibility: within 1.5% at 2^12 inner samples where
    CEI > 0.01 (nets scrambled apart leave it up to 42% off at any K)."""
    opt, members = gramacy_orthobo
    cei = opt._build_acquisition(members, 4)
    assert isinstance(cei, MarginalLogCEI)
    gp, constraints = cei.members[0], cei.constraints
    X = torch.rand(24, 1, 2, generator=torch.Generator().manual_seed(0), dtype=DTYPE)
    with torch.no_grad():
        exact = (gp.log_ei(X) + sum(c.log_prob_below(X) for c in constraints)).exp()  # S x b
        keep = (exact > 0.01).all(0)
        assert int(keep.sum()) >= 3
        X, exact = X[keep], exact[:, keep]
        base = draw_inner_base_samples(gp.num_samples, 3, seed=7, inner=2**12).split(1, -1)
        triples = [(c, b, None) for c, b in zip(constraints, base[1:], strict=True)]
        value = log_qcei(gp, X, base[0], triples).exp()
    assert float((value / exact - 1).abs().max()) <= 0.015
