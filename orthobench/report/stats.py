r"""The statistics behind every interval, test and rounded number of a report (scipy.stats).

* Means over seeds carry a Student-t interval, ``mean +- t_{0.975, n-1} s / sqrt(n)``
  (:func:`t_interval`). The normal quantile 1.96 would cover about 70% with two seeds.
* Optimizers are compared by the two-sided Mann-Whitney U test of their final values
  (:func:`mann_whitney`), with Holm's step-down correction over the comparisons of one task
  (:func:`holm`).
* Probe ratios are aggregated over BO states as geometric means with a percentile bootstrap
  interval over states (:func:`orthobench.probe.tables.geometric_mean_interval`).

Every figure a report prints goes through :func:`sig` (3 significant digits).

Example:
    >>> low, high = t_interval([1.0, 2.0, 3.0])
    >>> print(sig(low), sig(high))
    -0.484 4.48
    >>> t_interval([1.0, 2.0, 3.0], bounds=metric_bounds("regret"))[0]
    0.0
    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95


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
    (``functools.partial``) it fits seaborn's ``errorbar=`` callable.
    """
    values = _finite(values)
    if values.size < 2:
        return float("nan"), float("nan")
    mean = float(values.mean())
    sem = float(stats.sem(values))
    if sem == 0.0:
        return mean, mean
    low, high = stats.t.interval(level, values.size - 1, loc=mean, scale=sem)
    return float(max(low, bounds[0])), float(min(high, bounds[1]))


def metric_bounds(metric: str) -> tuple[float, float]:
    """The range of a curve metric's mean: ``(0, inf)`` for ``regret``, unbounded otherwise."""
    return (0.0, np.inf) if metric == "regret" else (-np.inf, np.inf)


def mann_whitney(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value of finite ``x`` vs finite ``y`` (NaN if either is empty).

    Exact for small samples without ties (scipy's ``method="auto"``): with two values per side
    the smallest possible p-value is 1/3, so two seeds never show a significant difference.
    """
    x, y = _finite(x), _finite(y)
    if x.size == 0 or y.size == 0:
        return float("nan")
    return float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    r"""Holm's step-down adjusted p-values (NaN entries are left out and stay NaN).

    With the ``m`` finite p-values sorted, :math:`p_{(1)} \le \dots \le p_{(m)}`, the adjusted
    value of the ``i``-th is :math:`\max_{j \le i} \min(1, (m - j + 1) p_{(j)})`; rejecting where
    it is below ``alpha`` controls the family-wise error rate at ``alpha``.
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
