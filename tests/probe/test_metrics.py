"""Probe metrics on hand-built arrays with known answers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from orthobench.probe import metrics


def test_probe_variance_is_across_rebuilds_then_averaged():
    values = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 16.0]])
    # per point variances (ddof=1): [4, 12]; mean 8
    assert metrics.probe_variance(values) == pytest.approx(8.0)
    np.testing.assert_allclose(metrics.pointwise_variance(values), [4.0, 12.0])


def test_bias_and_mse_decompose():
    rng = np.random.default_rng(0)
    values = rng.normal(loc=[1.0, 2.0, 3.0], scale=0.5, size=(50, 3))
    reference = np.array([1.2, 2.0, 2.7])
    r = values.shape[0]
    expected = (
        metrics.bias_squared(values, reference) + metrics.probe_variance(values) * (r - 1) / r
    )
    assert metrics.mse(values, reference) == pytest.approx(expected)
    assert metrics.bias_squared(np.tile(reference, (4, 1)), reference) == 0.0


def test_top1_agreement_counts_rebuilds_with_the_reference_best():
    reference = np.array([0.1, 0.9, 0.5])
    values = np.array([[0.1, 0.9, 0.5], [0.1, 0.4, 0.5], [0.2, 0.8, 0.1], [0.9, 0.1, 0.1]])
    assert metrics.top1_agreement(values, reference) == pytest.approx(0.5)


def test_flip_rate_counts_reversed_adjacent_top_k_pairs():
    reference = np.array([4.0, 3.0, 2.0, 1.0])  # top-3 order: 0, 1, 2 -> pairs (0,1), (1,2)
    values = np.array(
        [
            [4.0, 3.0, 2.0, 9.0],  # no flips among the top 3 (point 3 is outside)
            [3.0, 4.0, 2.0, 1.0],  # (0,1) flipped
            [1.0, 2.0, 3.0, 4.0],  # both flipped
        ]
    )
    assert metrics.flip_rate(values, reference, top_k=3) == pytest.approx(3 / 6)
    with pytest.raises(ValueError, match="top_k"):
        metrics.flip_rate(values, reference, top_k=1)


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="R >= 2"):
        metrics.probe_variance(np.ones((1, 4)))
    with pytest.raises(ValueError, match="reference"):
        metrics.mse(np.ones((3, 4)), np.ones(3))


def test_bootstrap_ci_covers_the_true_variance_ratio():
    """Coverage on a synthetic case: baseline noise sd 2, estimator sd 1 -> true ratio 4."""
    covered = 0
    trials = 100
    for t in range(trials):
        rng = np.random.default_rng(1000 + t)
        baseline = 2.0 * rng.standard_normal((32, 40))
        values = rng.standard_normal((32, 40))
        ratio, low, high = metrics.bootstrap_ratio_ci(baseline, values, n_boot=400, seed=t)
        assert low <= ratio <= high
        covered += low <= 4.0 <= high
    # nominal 95%; the percentile bootstrap is a little liberal at R=32
    assert covered / trials >= 0.85


def test_bootstrap_mse_ratio_needs_reference():
    with pytest.raises(ValueError, match="reference"):
        metrics.bootstrap_ratio_ci(np.ones((3, 2)), np.ones((3, 2)), "mse")


def test_the_ratio_of_all_zero_values_is_nan_without_a_warning():
    """A constrained state where every value underflows to 0: 0 / 0 is undefined, not an error."""
    zeros = np.zeros((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ratio, low, high = metrics.bootstrap_ratio_ci(zeros, zeros, "mse", np.zeros(3))
    assert np.isnan(ratio) and np.isnan(low) and np.isnan(high)


def test_flip_rate_counts_only_pairs_the_reference_orders():
    """Adjacent top-k pairs with ``ref_a > ref_b`` only: a tied pair has no right order, so its
    order in a rebuild is neither a flip nor a hold (else the rate would depend on which of the
    tied probes has the smaller index)."""
    reference = np.array([3.0, 2.0, 2.0, 1.0])  # pairs (0,1), (1,2) tied, (2,3)
    values = np.array([[3.0, 1.0, 2.0, 0.0], [3.5, 2.5, 1.5, 0.5]])
    assert metrics.flip_rate(values, reference, top_k=4) == 0.0
    swapped = [0, 2, 1, 3]  # the same probes, the tied two listed the other way round
    assert metrics.flip_rate(values[:, swapped], reference[swapped], top_k=4) == 0.0
    values[1, 3] = 9.0  # now (2,3) is reversed in rebuild 1: 1 of 4 ordered pairs
    assert metrics.flip_rate(values, reference, top_k=4) == pytest.approx(1 / 4)
    flat = np.ones(4)  # no pair ordered: the rate is undefined
    assert np.isnan(metrics.flip_rate(values, flat, top_k=4))


def test_top1_agreement_accepts_any_of_the_references_tied_best():
    reference = np.array([0.0, 1.0, 1.0, 0.5])
    values = np.array([[0.0, 0.9, 0.1, 0.2], [0.0, 0.1, 0.9, 0.2], [0.0, 0.1, 0.2, 0.9]])
    # Rebuilds 0 and 1 pick a best probe of the reference (1 or 2), rebuild 2 does not.
    assert metrics.top1_agreement(values, reference) == pytest.approx(2 / 3)


def _resampled_variance_ratios(baseline, values, n_boot, seed):
    """The bootstrap's resampled variance ratios, by hand: ``n_boot`` resamples of the ``R``
    rebuild indices from ``default_rng(seed)``, the same indices for both (paired rebuilds)."""
    idx = np.random.default_rng(seed).integers(0, values.shape[0], size=(n_boot, values.shape[0]))
    ratios = []
    for rows in idx:
        base = np.var(baseline[rows], axis=0, ddof=1).mean()
        est = np.var(values[rows], axis=0, ddof=1).mean()
        ratios.append(base / est if est > 0 else np.inf)
    return np.array(ratios)


def test_bootstrap_ci_is_the_central_interval_at_its_level():
    """A 95% percentile interval is the 2.5% and 97.5% quantiles of the resampled ratios (equal
    tails), and a 90% one the 5% and 95% quantiles."""
    rng = np.random.default_rng(1)
    baseline, values = rng.normal(0, 1.0, size=(10, 4)), rng.normal(0, 0.5, size=(10, 4))
    boot = _resampled_variance_ratios(baseline, values, n_boot=500, seed=3)
    for level, quantiles in ((0.95, [0.025, 0.975]), (0.9, [0.05, 0.95])):
        _, low, high = metrics.bootstrap_ratio_ci(baseline, values, n_boot=500, level=level, seed=3)
        np.testing.assert_allclose([low, high], np.quantile(boot, quantiles), rtol=1e-12)


def test_bootstrap_ci_keeps_resamples_without_estimator_variance():
    """Most of the estimator's rebuilds are equal, so some resamples have zero variance and an
    infinite ratio (2.8% of them, more than the 2.5% above the high bound): they count, so the
    high bound is +inf and the low one the 2.5% quantile of every resampled ratio. Dropping them
    gave a finite "95%" bound below the resamples it had dropped."""
    rng = np.random.default_rng(1)
    baseline, values = rng.normal(0, 1.0, size=(10, 4)), rng.normal(0, 0.5, size=(10, 4))
    values[:7] = 0.0
    boot = _resampled_variance_ratios(baseline, values, n_boot=2000, seed=0)
    assert np.isinf(boot).mean() > 0.025  # the case under test: the high bound reaches them
    _, low, high = metrics.bootstrap_ratio_ci(baseline, values)
    assert high == math.inf
    np.testing.assert_allclose(low, np.quantile(boot, 0.025), rtol=1e-12)


def test_bootstrap_ci_reaches_inf_only_where_the_interpolation_does():
    """numpy's linear quantile of values with infinities, +inf where it interpolates toward one
    and the finite value where the quantile falls on it exactly (numpy gives NaN for both)."""
    values = np.array([1.0, 2.0, 3.0, math.inf])
    assert metrics._percentiles(values, [0.5, 2 / 3, 0.9]).tolist() == [2.5, 3.0, math.inf]


def test_bootstrap_ci_of_rows_without_an_infinite_resample_is_unchanged():
    """A row like ci-variance's (R = 64 rebuilds of 32 probe points, the estimator 3x less noisy
    than naive MC): no resample is infinite, and the bounds are bit for bit those of commit
    7f925f5, before infinite resamples were kept (exact: the same numpy operations)."""
    rng = np.random.default_rng(7)
    reference = rng.lognormal(-4, 1, size=32)
    baseline = reference * (1 + 0.3 * rng.standard_normal((64, 32)))
    values = reference * (1 + 0.1 * rng.standard_normal((64, 32)))
    assert metrics.bootstrap_ratio_ci(baseline, values, seed=5) == (
        8.743799814466586,
        6.931889160326768,
        11.000535353941778,
    )
    assert metrics.bootstrap_ratio_ci(baseline, values, "mse", reference, seed=5) == (
        8.820913800450025,
        7.003716274460789,
        11.026986515582035,
    )


def test_flip_rate_does_not_count_tied_estimates_as_flips():
    """A rebuild whose estimates of an ordered pair tie has not reversed it: only
    ``upper < lower`` is a flip, so rebuilds that tie every pair have flip rate 0."""
    reference = np.array([3.0, 2.0, 1.0, 0.5])
    tied = np.array([[2.0, 2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [3.0, 2.0, 2.0, 0.0]])
    assert metrics.flip_rate(tied, reference) == 0.0
    tied[2, 3] = 5.0  # now (2, 3) is reversed in rebuild 2: 1 of 9 ordered pairs
    assert metrics.flip_rate(tied, reference) == pytest.approx(1 / 9)
