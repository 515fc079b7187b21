r"""The statistics behind every interval, test and rounded number of a report (scipy.stats).

Means over seeds carry a Student-t interval (:func:`t_interval`), medians an order-statistic
interval (:func:`median_interval`); two optimizers are compared on
their seed-matched final values by the Wilcoxon signed-rank test (:func:`signed_rank_test`), with
Holm's correction over the comparisons of one task (:func:`holm`); every figure a report prints
goes through :func:`sig`. Probe ratios over BO states: :mod:`orthobench.probe.tables`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import special, stats

#: Confidence level of every interval.
LEVEL = 0.95
#: Level of every test: a Holm-adjusted p below it is significant.
ALPHA = 0.05


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values)]


def t_interval(
    values: Sequence[float] | np.ndarray,
    level: float = LEVEL,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> tuple[float, float]:
    """Student-t interval of the mean of the finite ``values``: ``mean +- t_{(1+level)/2, n-1} SE``.

    The interval is intersected with ``bounds``, the range the mean cannot leave (``(0, inf)`` for
    a regret), which keeps its coverage. ``(nan, nan)`` with fewer than two finite values;
    ``(mean, mean)`` when they are all equal. With ``level`` and ``bounds`` bound
    (``functools.partial``) it fits seaborn's ``errorbar=`` callable. The normal quantile 1.96
    instead of ``t`` would cover about 70% with two seeds.

    Example:
        >>> low, high = t_interval([1.0, 2.0, 3.0])
        >>> print(sig(low), sig(high))
        -0.484 4.48
        >>> t_interval([1.0, 2.0, 3.0], bounds=metric_bounds("regret"))[0]
        0.0
    """
    values = _finite(values)
    if values.size < 2:
        return float("nan"), float("nan")
    mean = float(values.mean())
    sem = float(values.std(ddof=1) / np.sqrt(values.size))  # scipy.stats.sem
    if sem == 0.0:
        return mean, mean
    # scipy.stats.t.interval's arithmetic on its quantile function, scipy.special.stdtrit, called
    # directly: the same numbers at a twentieth of the time (0.27 ms a call through the
    # distribution object), which a report pays at every point of every curve and band.
    low, high = (special.stdtrit(values.size - 1, p) * sem + mean for p in _tails(level))
    return float(max(low, bounds[0])), float(min(high, bounds[1]))


def _tails(level: float) -> tuple[float, float]:
    """The lower and upper tail probabilities of a two-sided ``level`` interval."""
    return (1.0 - level) / 2.0, (1.0 + level) / 2.0


def median_interval(
    values: Sequence[float] | np.ndarray, level: float = LEVEL
) -> tuple[float, float, float]:
    """Median of the finite ``values`` and its distribution-free ``level`` interval.

    The interval is a pair of order statistics, those of
    ``scipy.stats.quantile_test(values, p=0.5).confidence_interval(level)``: it covers the
    population median with probability at least ``level`` whatever the distribution (a
    heavy-tailed one included). At 95% that needs 6 values; with fewer the bounds are NaN (the
    range of 5 values covers the median with probability 0.9375 only). ``(nan, nan, nan)``
    without a finite value.

    Example:
        >>> median_interval([5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 100.0])
        (4.0, 1.0, 100.0)
        >>> median_interval([1.0, 2.0, 3.0])
        (2.0, nan, nan)
    """
    values = _finite(values)
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    interval = stats.quantile_test(values, p=0.5).confidence_interval(level)
    return float(np.median(values)), float(interval.low), float(interval.high)


def metric_bounds(metric: str) -> tuple[float, float]:
    """The range of a curve metric's mean: ``(0, inf)`` for ``regret``, unbounded otherwise."""
    return (0.0, np.inf) if metric == "regret" else (-np.inf, np.inf)


class SignedRankTest(NamedTuple):
    """A Wilcoxon signed-rank test of paired differences (:func:`signed_rank_test`).

    Attributes:
        pairs: Finite differences, i.e. seeds with a finite final value on both sides.
        p_min: The smallest p-value the exact two-sided test can give with these pairs,
            :func:`min_signed_rank_p` of the nonzero differences (``2 / 2^pairs`` when none is 0).
        p_value: The two-sided p-value; NaN when ``p_min >= alpha``, where no outcome could be
            significant ("too few seeds for a test").
    """

    pairs: int
    p_min: float
    p_value: float


def min_signed_rank_p(n: int) -> float:
    r"""Smallest two-sided p-value of the exact signed-rank test of ``n`` nonzero differences.

    All ``n`` differences of one sign is the most extreme outcome; under the null each of the
    :math:`2^n` sign patterns is equally likely, so :math:`p_{min} = \min(1, 2 / 2^n)`: 0.25 for
    3 pairs, 0.0625 for 5, 0.03125 for 6. Ties among the ``|d|`` do not change it.

    >>> [min_signed_rank_p(n) for n in (0, 1, 3, 5, 6)]
    [1.0, 1.0, 0.25, 0.0625, 0.03125]
    """
    return min(1.0, 2.0 ** (1 - n))


def signed_rank_test(
    differences: Sequence[float] | np.ndarray, alpha: float = ALPHA
) -> SignedRankTest:
    r"""Two-sided Wilcoxon signed-rank test that the paired ``differences`` are symmetric about 0.

    ``differences`` are seed-matched ``x_s - y_s`` (shape ``n``); non-finite ones are left out.
    Zero differences (equal final values) carry no sign and are dropped before ranking
    (Wilcoxon's ``zero_method="wilcox"``), so the test is on the ``m`` nonzero ones and cannot
    give a p-value below :func:`min_signed_rank_p` ``(m)``; when every difference is 0 nothing is
    tested (``p_min = 1``). Where ``p_min >= alpha`` no p-value is computed (NaN): the comparison
    cannot be significant at ``alpha``, and leaving it out of :func:`holm`'s family does not
    weaken the others'.

    The p-value is ``scipy.stats.wilcoxon``'s: the exact null distribution of the signed-rank
    sum, or, with tied ``|d|`` and ``m <= 13``, the exact permutation distribution over the
    :math:`2^m` sign flips (scipy >= 1.15; normal approximation above 13 tied differences).

    Every optimizer of a seed starts from the same initial design, hence the pairing. Fewer than
    6 pairs cannot reach p < 0.05, and such a comparison is reported as untestable (NaN p) rather
    than as a large p-value.

    Example:
        >>> signed_rank_test([-1.0, -2.0, -0.5, -3.0, -1.5, -2.5])  # lower on all 6 seeds
        SignedRankTest(pairs=6, p_min=0.03125, p_value=0.03125)
        >>> signed_rank_test([-1.0, -2.0, -0.5])  # 3 seeds: p >= 0.25 whatever the values
        SignedRankTest(pairs=3, p_min=0.25, p_value=nan)
    """
    differences = _finite(differences)
    nonzero = differences[differences != 0.0]
    p_min = min_signed_rank_p(nonzero.size)
    p_value = float("nan")
    if p_min < alpha:
        p_value = float(stats.wilcoxon(nonzero, zero_method="wilcox").pvalue)
    return SignedRankTest(int(differences.size), p_min, p_value)


def signed_rank_direction(differences: Sequence[float] | np.ndarray) -> int:
    """The side the signed-rank test of ``differences`` leans to: -1 where the negative
    differences carry the larger sum of ranks of ``|d|``, +1 where the positive ones do, 0 when
    the sums are equal or no finite difference is nonzero.

    This is the direction of the statistic that :func:`signed_rank_test` tests, so a
    significant result reads in its direction; the median difference can disagree with it (it
    is 0 when most seeds tie, whatever the sign of the rest).

    >>> signed_rank_direction([0.0, 0.0, 0.0, -1.0, -2.0]), signed_rank_direction([1.0, -1.0])
    (-1, 0)
    """
    differences = _finite(differences)
    nonzero = differences[differences != 0.0]
    ranks = stats.rankdata(np.abs(nonzero))
    return int(np.sign(ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    r"""Holm's step-down adjusted p-values (NaN entries are left out and stay NaN).

    With the ``m`` finite p-values sorted, :math:`p_{(1)} \le \dots \le p_{(m)}`, the adjusted
    value of the ``i``-th is :math:`\max_{j \le i} \min(1, (m - j + 1) p_{(j)})`; rejecting where
    it is below ``alpha`` controls the family-wise error rate at ``alpha``.

    Example:
        >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    index = np.flatnonzero(np.isfinite(p))
    if index.size == 0:
        return out
    order = index[np.argsort(p[index], kind="stable")]
    m = order.size
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def sig(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits (``-`` for None or NaN).

    >>> sig(3.8123e29), sig(0.0123456), sig(12345.0), sig(float("nan"))
    ('3.81e+29', '0.0123', '1.23e+04', '-')
    """
    if value is None or not np.isfinite(value):
        return "-" if value is None or np.isnan(value) else str(value)
    return f"{value:.{digits}g}"
