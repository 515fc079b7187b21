r"""Probe metrics: how noisy an acquisition estimate is and how stable the ranking it induces is.

Every function takes the raw probe values of one estimator: ``values`` is ``R x N`` (R rebuilds of
the estimator -- fresh theta draws or MC base samples, the fitted surrogate untouched -- at N fixed
probe points) and, where a target is needed, ``reference`` of shape ``N``: a high-precision value of
the same target (e.g. many scrambled-Sobol theta draws). Larger acquisition values are better.

Definitions (each exactly as computed, also in the report glossary):

- probe variance: :math:`\frac1N \sum_j \widehat{\mathrm{Var}}_r(v_{rj})`, the across-rebuild
  sample variance (ddof 1) at each probe point, averaged over points, never the per-sample
  residual variance (docs/design.md, "Probe variance is across rebuilds"). Computed on the EI
  scale and on the log scale (of the outer-log acquisition) by the caller passing the matching
  values; names carry the scale.
- bias^2: :math:`\frac1N \sum_j (\bar v_j - \mathrm{ref}_j)^2` with :math:`\bar v_j` the rebuild mean.
- MSE: :math:`\frac1N \sum_j \frac1R \sum_r (v_{rj} - \mathrm{ref}_j)^2`.
- top-1 agreement: share of rebuilds whose best probe (argmax over j) is a best probe of the
  reference (any of them where several tie).
- flip rate: take the top-k probes of the reference ranking, ordered; over the k-1 adjacent pairs
  (a, b) with ref_a > ref_b and all rebuilds, the share with :math:`v_{ra} < v_{rb}`. A pair the
  reference ties has no right order and is left out; NaN when every pair ties.
- ratio (variance or MSE) versus a baseline estimator at the same S: baseline / estimator
  (> 1 means the estimator is better), with a percentile bootstrap CI over rebuilds. Rebuild r of
  both estimators shares its theta draws (common random numbers), so rebuilds are resampled in
  pairs.

The two ranking metrics read only the order of ``values`` and of ``reference``, each on any scale
that keeps it: the probe passes log values and the log reference, whose exponential would be
ties of 0 where log EI < -745 (float64), on a state far below its incumbent.
"""

from __future__ import annotations

import numpy as np

#: Relative floor ``alpha`` of the outer-log acquisition ``log max(EI_hat, alpha * EI_hat_MC)``
#: whose values the log-scale metrics take: OrthoBO's default
#: (:class:`orthobench.acquisition.MarginalLogEI`; docs/design.md, "Relative outer-log floor").
ALPHA = 1e-3


def _check(values: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] < 2:
        raise ValueError(
            f"`values` must be R x N with R >= 2 rebuilds, but got shape {values.shape}."
        )
    if reference is not None and np.shape(reference) != (values.shape[1],):
        raise ValueError(
            f"`reference` must have shape ({values.shape[1]},), but got {np.shape(reference)}."
        )
    return values


def probe_variance(values: np.ndarray) -> float:
    """Across-rebuild variance per probe point, averaged over points (``R x N -> scalar``)."""
    return float(np.mean(np.var(_check(values), axis=0, ddof=1)))


def pointwise_variance(values: np.ndarray) -> np.ndarray:
    """Across-rebuild variance per probe point (``R x N -> N``)."""
    return np.var(_check(values), axis=0, ddof=1)


def bias_squared(values: np.ndarray, reference: np.ndarray) -> float:
    """Mean over points of the squared difference between the rebuild mean and the reference."""
    values = _check(values, reference)
    return float(np.mean((values.mean(axis=0) - reference) ** 2))


def mse(values: np.ndarray, reference: np.ndarray) -> float:
    """Mean over points and rebuilds of the squared error against the reference."""
    values = _check(values, reference)
    return float(np.mean((values - reference[None, :]) ** 2))


def reference_error_share(rse: np.ndarray, reference: np.ndarray) -> float:
    r"""The reference's squared error over its mean square, from its relative standard errors
    ``rse`` (``N``, :func:`orthobench.probe.gp_probe.reference_rse`):
    :math:`\sum_j (\mathrm{rse}_j\, \mathrm{ref}_j)^2 / \sum_j \mathrm{ref}_j^2`, over the points
    whose ``rse`` is known (NaN: the reference underflows there). The denominator is the MSE of
    the estimate 0; about ``1 / k`` where ``k`` equal draws carry the reference. NaN where every
    reference value is 0."""
    rse, reference = np.asarray(rse, dtype=float), np.asarray(reference, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.nansum((rse * reference) ** 2) / np.sum(reference**2))


def top1_agreement(values: np.ndarray, reference: np.ndarray) -> float:
    """Share of rebuilds whose argmax probe is a best probe of the reference (any of its tied
    best: the reference cannot tell them apart)."""
    values = _check(values, reference)
    reference = np.asarray(reference, dtype=float)
    return float(np.mean(reference[values.argmax(axis=1)] == reference.max()))


def flip_rate(values: np.ndarray, reference: np.ndarray, top_k: int = 10) -> float:
    """Share of (rebuild, adjacent pair among the reference's top-k with ``ref_a > ref_b``) whose
    order is reversed; pairs the reference ties are left out (NaN when all are)."""
    values = _check(values, reference)
    if top_k < 2:
        raise ValueError(f"`top_k` must be >= 2, but got {top_k=}.")
    reference = np.asarray(reference, dtype=float)
    order = np.argsort(-reference, kind="stable")[: min(top_k, values.shape[1])]
    ordered = reference[order[:-1]] > reference[order[1:]]
    if not ordered.any():
        return float("nan")
    upper, lower = values[:, order[:-1][ordered]], values[:, order[1:][ordered]]
    return float(np.mean(upper < lower))


def bootstrap_ratio_ci(
    baseline: np.ndarray,
    values: np.ndarray,
    statistic: str = "variance",
    reference: np.ndarray | None = None,
    *,
    baseline_reference: np.ndarray | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Ratio ``stat(baseline) / stat(values)`` and its percentile bootstrap CI over paired rebuilds.

    Args:
        baseline: ``R x N`` values of the baseline estimator (e.g. naive theta-MC at the same S).
        values: ``R x N`` values of the estimator, rebuild r paired with the baseline's rebuild r.
        statistic: ``"variance"`` (probe variance) or ``"mse"`` (needs ``reference``).
        reference: ``N`` reference values of the estimator's target, for ``"mse"``.
        baseline_reference: ``N`` reference values of the baseline's target when it differs
            (e.g. qLogEI targets EI at the MAP fit, naive theta-MC the marginal EI); default
            ``reference``.
        n_boot: Bootstrap resamples of the R rebuild indices.
        level: Confidence level.
        seed: Seed of the resampling.

    Returns:
        ``(ratio, low, high)``; NaN where both statistics are 0, and a bound +inf where its
        percentile reaches the resamples whose estimator statistic is 0.
    """
    baseline, values = _check(baseline, reference), _check(values, reference)
    if baseline.shape != values.shape:
        raise ValueError(
            f"Paired rebuilds need equal shapes, but got {baseline.shape} and {values.shape}."
        )
    if statistic == "variance":

        def stat(v: np.ndarray) -> np.ndarray:  # (B x R x N) -> B
            return np.var(v, axis=1, ddof=1).mean(axis=-1)
    elif statistic == "mse":
        if reference is None:
            raise ValueError("statistic='mse' needs `reference`.")
        # On errors against each side's own target, the MSE is the mean square.
        baseline = baseline - (reference if baseline_reference is None else baseline_reference)
        values = values - reference

        def stat(v: np.ndarray) -> np.ndarray:
            return (v**2).mean(axis=(1, 2))
    else:
        raise ValueError(f"`statistic` must be 'variance' or 'mse', but got {statistic!r}.")
    # 0 / 0 where every value is 0 (constrained EI underflows where no probe can be feasible):
    # the ratio is undefined, NaN, and the tables count it as such.
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(stat(baseline[None])[0] / stat(values[None])[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.shape[0], size=(n_boot, values.shape[0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = stat(baseline[idx]) / stat(values[idx])
    # A resample whose estimator statistic is 0 (no variance or no error) has ratio +inf: a
    # quantile that reaches such resamples is +inf (dropping them shrank the bound). Only the
    # undefined 0 / 0 resamples are left out.
    boot = boot[~np.isnan(boot)]
    alpha = (1.0 - level) / 2.0
    if not boot.size:
        return ratio, np.nan, np.nan
    low, high = _percentiles(boot, [alpha, 1.0 - alpha])
    return ratio, float(low), float(high)


def _percentiles(values: np.ndarray, probs: list[float]) -> np.ndarray:
    """:func:`numpy.quantile` (linear) of ``values`` (``n``, no NaN, none below 0) at ``probs``,
    +inf where the interpolation reaches an infinite value (numpy gives NaN there, from
    ``inf - inf`` or ``0 * inf``); on finite ``values`` exactly numpy's."""
    reaches = np.isinf(np.quantile(values, probs, method="higher"))
    # Elsewhere an infinite value gets weight 0 (numpy's 0 * inf = NaN); the largest float adds 0.
    finite = np.quantile(np.minimum(values, np.finfo(float).max), probs)
    return np.where(reaches, np.inf, finite)
