r"""Statistics of a ratio over probe states: which ratios are defined, their median with its
order-statistic interval and their geometric mean with its Student-t interval.

Ratios are heavy-tailed across BO states and the rebuild CIs of one state do not cover the spread
between states (docs/design.md, "Ratios: CIs and several states"); :mod:`orthobench.probe.tables`
aggregates the probe's rows with these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats

#: Confidence level of the intervals over states (the median's interval reaches it from 6 states).
LEVEL = 0.95
#: A ratio outside ``[1 / MAX_RATIO, MAX_RATIO]`` is undefined (:func:`defined_ratios`; why
#: ``1e12``: docs/design.md, "Ratios: CIs and several states").
MAX_RATIO = 1e12


class Interval(NamedTuple):
    """A statistic over states, its interval and the interval's coverage probability.

    Floats for ``n`` ratios in; arrays of shape ``(b)`` for ``(b) x n`` ratios in.
    """

    center: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    level: float | np.ndarray


def _interval(*fields: np.ndarray) -> Interval:
    """An :class:`Interval` with 0-d fields as floats."""
    return Interval(*(float(f) if np.ndim(f) == 0 else f for f in fields))


def defined_ratios(ratios: Sequence[float] | np.ndarray) -> np.ndarray:
    """``ratios`` with NaN where a ratio is undefined: ``(b) x n -> (b) x n``.

    A ratio is undefined where it is NaN, not positive, infinite or beyond :data:`MAX_RATIO`
    either way (one estimator's variance is ~0 on that state: the ratio measures round-off, not a
    variance reduction). The statistics over states are taken over the defined ratios only.
    """
    ratios = np.asarray(ratios, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where((ratios >= 1.0 / MAX_RATIO) & (ratios <= MAX_RATIO), ratios, np.nan)


def _order_statistic(ascending: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The ``k``-th smallest (1-based) of each row: ``(b) x n, (b) -> (b)``; NaN rows stay NaN."""
    index = np.clip(k - 1, 0, ascending.shape[-1] - 1)[..., None]
    return np.take_along_axis(ascending, index, axis=-1)[..., 0]


def geometric_mean_interval(ratios: Sequence[float] | np.ndarray, level: float = LEVEL) -> Interval:
    r"""Geometric mean over states of the defined ``ratios`` and its Student-t interval.

    With :math:`y_i = \log\rho_i` over the :math:`n` defined ratios (:func:`defined_ratios`):
    :math:`\exp(\bar y)` and :math:`\exp(\bar y \pm t_{(1+\text{level})/2,\, n-1}\, s_y/\sqrt n)`
    (:func:`scipy.stats.t`), an exact ``level`` interval for lognormal ratios.

    Args:
        ratios: ``(b) x n`` ratios, one per state (NaN for a missing one).
        level: Confidence level.

    Returns:
        :class:`Interval` ``(gmean, low, high, level)``, each ``(b)``: NaN bounds and level with
        fewer than two defined ratios, everything NaN without any.
    """
    logs = np.log(defined_ratios(ratios))
    n = np.sum(~np.isnan(logs), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.nansum(logs, axis=-1) / n
        sd = np.sqrt(np.nansum((logs - mean[..., None]) ** 2, axis=-1) / (n - 1))
        half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n)  # NaN for n < 2
    return _interval(
        np.exp(mean), np.exp(mean - half), np.exp(mean + half), np.where(n >= 2, level, np.nan)
    )


def median_interval(ratios: Sequence[float] | np.ndarray, level: float = LEVEL) -> Interval:
    r"""Median over states of the defined ``ratios`` and its order-statistic interval.

    With :math:`\rho_{(1)} \le \dots \le \rho_{(n)}` the :math:`n` defined ratios
    (:func:`defined_ratios`), the median is the geometric midpoint of
    :math:`\rho_{(\lceil n/2 \rceil)}` and :math:`\rho_{(\lfloor n/2 \rfloor + 1)}`. The interval :math:`[\rho_{(k)}, \rho_{(n+1-k)}]`
    misses the population median :math:`m` when at most :math:`k-1` states fall below :math:`m`
    or at most :math:`k-1` above it, each with probability :math:`F_{n,1/2}(k-1)`
    (:math:`F_{n,1/2}` the Binomial(n, 1/2) CDF), so it covers :math:`m` with probability
    :math:`1 - 2 F_{n,1/2}(k-1)` for any continuous distribution of the states. ``k`` is the largest order with that
    probability at least ``level`` (the narrowest such pair); when none exists (:math:`n < 6` at
    95%), :math:`k = 1`, the range of the states, whose probability :math:`1 - 2^{1-n}` is below
    ``level`` (0.75 with 3 states, 0.9375 with 5).

    Args:
        ratios: ``(b) x n`` ratios, one per state (NaN for a missing one).
        level: The smallest coverage wanted.

    Returns:
        :class:`Interval` ``(median, low, high, level)``, each ``(b)``, ``level`` being the
        interval's exact coverage (>= the ``level`` argument, or below it where the range is all
        the states give); NaN bounds and level with fewer than two defined ratios, everything NaN
        without any.
    """
    ascending = np.sort(defined_ratios(ratios), axis=-1)  # NaN last
    if ascending.shape[-1] == 0:  # no state: one NaN state keeps the indexing below valid
        ascending = np.full((*ascending.shape[:-1], 1), np.nan)
    n = np.sum(~np.isnan(ascending), axis=-1)
    median = np.sqrt(
        _order_statistic(ascending, (n + 1) // 2) * _order_statistic(ascending, n // 2 + 1)
    )
    # NOTE: scipy.stats.quantile_test(...).confidence_interval() takes the same k from 6 states
    # on (the tests check it), but gives NaN below 6 states, our usual case, and not the
    # interval's coverage; both need k, so it is computed once here, vectorized. binom.ppf is
    # the smallest j with F(j) >= alpha/2, so F(k - 1) < alpha/2: coverage above `level`.
    k = np.maximum(stats.binom.ppf((1 - level) / 2, n, 0.5).astype(int), 1)
    covered = np.where(n >= 2, 1 - 2 * stats.binom.cdf(k - 1, n, 0.5), np.nan)
    low = np.where(n >= 2, _order_statistic(ascending, k), np.nan)
    high = np.where(n >= 2, _order_statistic(ascending, n + 1 - k), np.nan)
    return _interval(median, low, high, covered)
