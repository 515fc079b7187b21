"""Bootstrap TPE: Parzen estimators, MC-TPE and OrthoBO-TPE.

OrthoBO-TPE's controls need a known mean (docs/design.md, "Controls need a known mean").
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from orthobench.optimizers.tpe import MCTPE, OrthoBOTPE
from orthobench.registry import OPTIMIZERS
from orthobench.surrogates.tpe import (
    ParzenEstimators,
    bandwidth_floor,
    bootstrap_indices,
    fit_tpe,
    scott_bandwidths,
    split_sizes,
)
from tests.helpers import drive

SMALL = dict(bootstrap_fits=8, n_good_candidates=32, n_sobol_candidates=32)


def sphere(x: np.ndarray) -> float:
    return float(np.sum((x - 0.3) ** 2))


def told(opt: MCTPE, t: int = 12, seed: int = 0) -> MCTPE:
    rng = np.random.default_rng(seed)
    x = rng.random((t, opt.dim))
    opt.tell(x, np.array([sphere(row) for row in x]))
    return opt


def test_parzen_density_is_normalized_on_the_cube_and_samples_stay_inside() -> None:
    gen = torch.Generator().manual_seed(0)
    centers = torch.tensor([[[0.0], [0.4], [0.95]]], dtype=torch.float64)  # B=1, n=3, d=1
    est = ParzenEstimators(centers, scott_bandwidths(centers, 0.05), prior_weight=1.0)
    grid = torch.linspace(0.0, 1.0, 20001, dtype=torch.float64).unsqueeze(-1)
    mass = torch.trapezoid(est.log_prob(grid)[0].exp(), grid[:, 0])
    assert mass.item() == pytest.approx(1.0, abs=1e-6)
    draws = est.sample(torch.zeros(500, dtype=torch.long), gen)
    assert draws.shape == (500, 1) and bool(((draws >= 0) & (draws <= 1)).all())


def test_scott_bandwidths_follow_the_rule_and_floor() -> None:
    centers = torch.tensor([[[0.1, 0.5], [0.3, 0.5], [0.5, 0.5]]], dtype=torch.float64)
    bw = scott_bandwidths(centers, 0.01)[0]
    assert bw[0].item() == pytest.approx(0.2 * 3 ** (-1 / 6))  # std 0.2, n=3, d=2
    assert bw[1].item() == 0.01  # zero spread -> floor


def test_magic_clip_floor_follows_optuna() -> None:
    assert bandwidth_floor(8, min_bandwidth=0.01, magic_clip=True) == pytest.approx(0.1)
    assert bandwidth_floor(500, min_bandwidth=0.01, magic_clip=True) == 0.01
    assert bandwidth_floor(8, min_bandwidth=0.01, magic_clip=False) == 0.01


def test_split_puts_the_best_gamma_quantile_in_the_good_set() -> None:
    assert split_sizes(10, 0.2) == (2, 8)
    assert split_sizes(2, 0.2) == (1, 1)
    with pytest.raises(ValueError, match="t=1"):
        split_sizes(1, 0.2)
    x = torch.rand(10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.arange(10, dtype=torch.float64).flip(0)  # the last two rows are best
    fits = fit_tpe(
        x,
        y,
        torch.arange(10).unsqueeze(0),
        gamma=0.2,
        min_bandwidth=0.01,
        magic_clip=True,
        prior_weight=1.0,
    )
    assert torch.equal(fits.good.centers[0], x[[9, 8]])
    assert fits.threshold.item() == 1.0
    assert fits.summary_statistics().shape == (1, 2 * 3 + 1)


def test_mc_tpe_runs_in_the_loop_and_is_deterministic() -> None:
    runs = [drive(MCTPE(3, seed=s, **SMALL), sphere, n_init=6, steps=5) for s in (0, 0, 1)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    suggestion = told(MCTPE(3, seed=0, **SMALL)).ask(1)
    assert (
        math.isfinite(suggestion.info["estimate"])
        and suggestion.fit_seconds >= 0
        and suggestion.acq_seconds > 0
    )


def test_mc_tpe_bootstrap_fits_differ_and_the_acquisition_is_finite() -> None:
    opt = told(MCTPE(3, seed=0, **SMALL))
    draw = opt.draw()
    stats = draw.fits.summary_statistics()
    assert stats.shape == (8, 7)
    assert torch.unique(stats, dim=0).shape[0] == 8  # no two resamples give the same fit
    assert (stats.std(dim=0)[3:] > 0).all()  # bad-set bandwidths and the threshold vary
    x = torch.rand(50, 3, dtype=torch.float64)
    for acquisition in ("ratio", "log-ratio"):
        opt.acquisition = acquisition
        values = opt.values(draw, x)
        assert values.shape == (8, 50) and bool(torch.isfinite(values).all())
        assert bool(torch.isfinite(opt.estimate(draw, values)).all())
    # Another rebuild on the same history is another set of resamples.
    assert not torch.equal(opt.draw(rebuild=1).fits.summary_statistics(), stats)


def test_orthobo_tpe_estimate_differs_from_mc_and_equals_it_when_centered_by_the_sample_mean() -> (
    None
):
    mc = told(MCTPE(3, seed=0, **SMALL))
    orth = told(OrthoBOTPE(3, seed=0, control_mean_draws=256, **SMALL))
    naive = told(OrthoBOTPE(3, seed=0, centering="sample", **SMALL))
    x = torch.rand(64, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    mc_draw, orth_draw, naive_draw = mc.draw(), orth.draw(), naive.draw()
    # Common random numbers: the same S fits; only the centering of the controls differs.
    torch.testing.assert_close(
        orth_draw.fits.summary_statistics(), mc_draw.fits.summary_statistics()
    )
    sample_mean = mc_draw.fits.summary_statistics().mean(dim=0)
    assert not torch.allclose(orth_draw.control_mean, sample_mean)
    values = mc.values(mc_draw, x)
    mc_est = mc.estimate(mc_draw, values)
    assert not torch.allclose(orth.estimate(orth_draw, values), mc_est, rtol=1e-6, atol=0.0)
    # Controls centered by their own sample mean cancel exactly
    # (docs/design.md, "Controls need a known mean").
    torch.testing.assert_close(naive.estimate(naive_draw, values), mc_est, rtol=1e-10, atol=1e-12)
    mc_x, naive_x = mc.ask(1).x, naive.ask(1).x
    np.testing.assert_array_equal(mc_x, naive_x)


@pytest.mark.parametrize("estimator", ["orth", "orth-ridge", "orth-crossfit", "mc"])
def test_orthobo_tpe_estimators_by_name(estimator: str) -> None:
    opt = told(OrthoBOTPE(3, seed=0, estimator=estimator, control_mean_draws=64, **SMALL))
    suggestion = opt.ask(1)
    assert suggestion.info["estimator"] == estimator and math.isfinite(suggestion.info["estimate"])
    assert 0 <= suggestion.info["n_varying_controls"] <= 7


def test_orthobo_tpe_rejects_estimators_it_cannot_feed() -> None:
    with pytest.raises(ValueError, match="orth-quadratic"):
        OrthoBOTPE(2, seed=0, estimator="orth-quadratic")
    with pytest.raises(ValueError, match="nope"):
        OrthoBOTPE(2, seed=0, estimator="nope")


def test_orthobo_tpe_runs_in_the_loop_and_is_deterministic() -> None:
    runs = [
        drive(OrthoBOTPE(3, seed=0, control_mean_draws=128, **SMALL), sphere, n_init=6, steps=4)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])


def test_control_mean_draws_are_independent_of_the_fits() -> None:
    a = told(OrthoBOTPE(3, seed=0, control_mean_draws=64, **SMALL))
    b = told(
        OrthoBOTPE(
            3,
            seed=0,
            control_mean_draws=64,
            bootstrap_fits=16,
            n_good_candidates=32,
            n_sobol_candidates=32,
        )
    )
    # More fits S do not move the independent centering (it is keyed apart from them).
    torch.testing.assert_close(a.draw().control_mean, b.draw().control_mean)


def test_bootstrap_indices_resample_with_replacement() -> None:
    idx = bootstrap_indices(10, 200, torch.Generator().manual_seed(0))
    assert idx.shape == (200, 10) and int(idx.min()) == 0 and int(idx.max()) == 9
    assert (torch.tensor([row.unique().numel() for row in idx]) < 10).any()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(acquisition="ei"), "acquisition="),
        (dict(bootstrap_fits=1), "bootstrap_fits=1"),
        (dict(gamma=1.0), "gamma=1.0"),
        (dict(prior_weight=0.0), "prior_weight=0.0"),
        (dict(n_good_candidates=0, n_sobol_candidates=0), "n_good_candidates=0"),
    ],
)
def test_bad_params_raise_with_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MCTPE(2, seed=0, **kwargs)


def test_ask_needs_two_observations() -> None:
    opt = MCTPE(2, seed=0)
    opt.tell(np.full((1, 2), 0.5), np.array([1.0]))
    with pytest.raises(ValueError, match="has 1"):
        opt.ask(1)


def test_registered_params_have_typed_defaults() -> None:
    params = OPTIMIZERS.resolve("orthobo-tpe").params
    assert (
        params["bootstrap_fits"] == 32
        and params["gamma"] == 0.2
        and params["centering"] == "independent"
    )
    assert params["control_mean_draws"] == 1024 and params["acquisition"] == "ratio"
    assert params["estimator"] == "orth-shrink" and params["n_good_candidates"] == 24
    assert set(OPTIMIZERS.resolve("mc-tpe").params) < set(params)
