"""Properties of orthobench.noise.acquisition_noise that a user relies on: its intervals are at the
level asked for, the reported top set is one that exists, and bad arguments are refused before
any rebuild runs.

The acquisitions here are fixed values per rebuild at two candidates whose reference ranks
candidate 0 first: a rebuild "flips" the pair when it ranks candidate 1 first, so the flip rate
of any set of rebuilds is the share of flipping ones in it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from orthobench.noise import acquisition_noise

X2 = torch.zeros(2, 1, dtype=torch.float64)
REFERENCE = np.array([1.0, 0.0])


def _flipping(first: int):
    """``make_acqf``: rebuilds ``r < first`` rank candidate 1 first (a flip), the others
    candidate 0."""

    def make_acqf(r: int):
        values = torch.tensor([0.0, 1.0] if r < first else [1.0, 0.0], dtype=torch.float64)
        return lambda X: values

    return make_acqf


def test_the_flip_interval_at_confidence_0_9_is_the_5_and_95_percent_bootstrap_quantiles():
    """The flip interval is a percentile bootstrap over whole rebuilds at the asked level: at
    0.9 its bounds are the 5% and 95% quantiles of the resampled flip rate. With 5 of 14
    rebuilds flipping, a resample's flip rate is Binomial(14, 5/14) / 14, whose 5% and 95%
    quantiles (2/14, 8/14) differ from its 10% and 90% ones (3/14, 7/14); each quantile of the
    2000 resamples lies at least 4 standard errors inside its atom."""
    rebuilds, flips = 14, 5
    result = acquisition_noise(
        _flipping(flips), X2, rebuilds=rebuilds, top_k=2, reference=REFERENCE, confidence=0.9
    )
    assert result.flip_rate == pytest.approx(flips / rebuilds)
    expected = stats.binom.ppf([0.05, 0.95], rebuilds, flips / rebuilds) / rebuilds
    assert result.flip_interval == pytest.approx(tuple(expected))


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.99])
def test_the_top1_interval_is_the_clopper_pearson_interval_at_the_asked_confidence(confidence):
    """Top-1 agreement is a share of independent rebuilds: its interval is the exact binomial
    (Clopper-Pearson) one at ``confidence``, as scipy computes it, not at a fixed 95%."""
    rebuilds, flips = 10, 3  # 7 of 10 rebuilds agree on the best candidate
    result = acquisition_noise(
        _flipping(flips), X2, rebuilds=rebuilds, reference=REFERENCE, confidence=confidence
    )
    assert result.top1_agreement == pytest.approx(0.7)
    ci = stats.binomtest(7, rebuilds).proportion_ci(confidence_level=confidence, method="exact")
    assert result.top1_interval == pytest.approx((ci.low, ci.high))


def test_the_reported_top_k_is_at_most_the_number_of_candidates():
    """The flip rate uses at most ``n`` candidates: with 3 candidates and ``top_k=10`` the result
    (and its summary) reports a top 3, the set the rate was measured on."""
    X = torch.linspace(0, 1, 3, dtype=torch.float64).reshape(3, 1)

    def make_acqf(r: int):
        noise = torch.randn(3, generator=torch.Generator().manual_seed(r), dtype=torch.float64)
        return lambda X: -(X[..., 0, 0] - 0.3).square() + 0.01 * noise

    result = acquisition_noise(make_acqf, X, rebuilds=4, top_k=10)
    assert result.top_k == 3
    assert "among the top 3 " in result.summary()


def test_one_rebuild_is_refused_before_any_rebuild_runs():
    """An across-rebuild variance needs two rebuilds: ``rebuilds=1`` is refused at once, without
    building an acquisition (which may be costly)."""
    built = []

    def make_acqf(r: int):
        built.append(r)
        return lambda X: X[..., 0, 0]

    with pytest.raises(ValueError, match="`rebuilds` must be an int >= 2"):
        acquisition_noise(make_acqf, X2, rebuilds=1)
    assert built == []
