r"""How noisy an acquisition function is: its values across rebuilds at fixed candidates.

:func:`acquisition_noise` evaluates ``R`` rebuilds of an acquisition (fresh MC base samples, fresh
theta draws, ... -- whatever ``make_acqf(r)`` changes with ``r``) on the same candidates and
reports the probe's metrics (:mod:`orthobench.probe.metrics`): the across-rebuild variance per
candidate, top-1 agreement and flip rate, with confidence intervals over rebuilds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike
from scipy import stats
from torch import Tensor

from orthobench.config.params import is_integer
from orthobench.probe.metrics import flip_rate, pointwise_variance, probe_variance, top1_agreement

__all__ = ["AcquisitionNoise", "acquisition_noise"]

#: Bootstrap resamples of the rebuilds behind the flip rate's interval.
_N_BOOT = 2000


@dataclass(frozen=True)
class AcquisitionNoise:
    r"""Rebuild-to-rebuild noise of an acquisition at ``n`` fixed candidates.

    Attributes:
        values: ``R x n`` acquisition values, rebuild ``r`` in row ``r``.
        variance: ``n`` across-rebuild sample variances (ddof 1), one per candidate.
        mean_variance: ``variance`` averaged over candidates (the probe variance).
        top1_agreement: Share of rebuilds whose best candidate (argmax) is a best one of the
            reference (any of its tied best).
        top1_interval: ``(low, high)`` Clopper-Pearson interval of ``top1_agreement``.
        flip_rate: Over the ``top_k - 1`` adjacent pairs ``(a, b)`` of the reference's top
            ``top_k`` (``ref_a > ref_b``: pairs the reference ties are left out) and all
            rebuilds, the share with ``v_{ra} < v_{rb}``; NaN when the reference ties them all.
        flip_interval: ``(low, high)`` percentile-bootstrap interval of ``flip_rate``.
        reference: ``n`` values that rank the candidates: the one passed in, or the mean over
            rebuilds.
        reference_is_mean: Whether ``reference`` is the mean over rebuilds (then the agreement
            and flip rate measure stability, not correctness).
        top_k: Candidates of the reference's top behind the flip rate (at most ``n``).
        confidence: Level of both intervals.
    """

    values: np.ndarray
    variance: np.ndarray
    mean_variance: float
    top1_agreement: float
    top1_interval: tuple[float, float]
    flip_rate: float
    flip_interval: tuple[float, float]
    reference: np.ndarray
    reference_is_mean: bool
    top_k: int
    confidence: float

    @property
    def rebuilds(self) -> int:
        """``R``, the number of rebuilds."""
        return self.values.shape[0]

    def summary(self) -> str:
        """One paragraph: what was measured and the numbers, with their intervals."""
        level = f"{100 * self.confidence:g}%"
        ranking = (
            "the mean over rebuilds (stability, not correctness)"
            if self.reference_is_mean
            else "the given reference"
        )
        low, high = self.top1_interval
        f_low, f_high = self.flip_interval
        return (
            f"Acquisition noise over R={self.rebuilds} rebuilds at n={self.values.shape[1]} "
            f"candidates: mean across-rebuild variance {self.mean_variance:.4g} (per candidate "
            f"median {float(np.median(self.variance)):.4g}, max {float(self.variance.max()):.4g}). "
            f"Against the ranking of {ranking}: top-1 agreement {self.top1_agreement:.3f} "
            f"({level} Clopper-Pearson interval over rebuilds [{low:.3f}, {high:.3f}]) and flip "
            f"rate among the top {self.top_k} {self.flip_rate:.3f} ({level} bootstrap interval "
            f"over rebuilds [{f_low:.3f}, {f_high:.3f}])."
        )

    def __str__(self) -> str:
        return self.summary()


def _clopper_pearson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """Exact binomial interval of ``successes / trials`` (``scipy.stats.binomtest``)."""
    ci = stats.binomtest(successes, trials).proportion_ci(confidence, method="exact")
    return float(ci.low), float(ci.high)


def _check_arguments(
    X: Tensor,
    rebuilds: int,
    top_k: int,
    reference: Tensor | np.ndarray | None,
    confidence: float,
    seed: int,
) -> tuple[Tensor, np.ndarray | None]:
    """``X`` as ``n x q x d`` and the reference as a float array (or None), after refusing bad
    arguments of :func:`acquisition_noise` before its first rebuild.

    Raises:
        TypeError: for an ``X`` that is not a tensor.
        ValueError: one line naming the argument and its value.
    """
    if not isinstance(X, Tensor):
        raise TypeError(f"`X` must be a torch.Tensor, but got {type(X).__name__}.")
    if X.ndim == 2:
        X = X.unsqueeze(-2)
    if X.ndim != 3 or X.shape[0] == 0:
        raise ValueError(
            f"`X` must be n x q x d (or n x d for q = 1) with n >= 1, but got shape "
            f"{tuple(X.shape)}."
        )
    if not is_integer(rebuilds) or rebuilds < 2:
        raise ValueError(
            f"`rebuilds` must be an int >= 2 for an across-rebuild variance, but got {rebuilds=}."
        )
    if not is_integer(top_k) or top_k < 2:
        raise ValueError(f"`top_k` must be an int >= 2, but got {top_k=}.")
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be in (0, 1), but got {confidence=}.")
    # The bootstrap's only randomness: None would seed it from the OS, unreproducibly.
    if not is_integer(seed) or seed < 0:
        raise ValueError(f"`seed` must be an int >= 0, but got {seed=}.")
    if reference is None:
        return X, None
    ref = np.asarray(
        reference.detach().cpu().double().numpy() if isinstance(reference, Tensor) else reference,
        dtype=float,
    )
    n = X.shape[0]
    if ref.shape != (n,):
        raise ValueError(f"`reference` must have shape ({n},), but got {ref.shape}.")
    bad = np.flatnonzero(~np.isfinite(ref))
    if bad.size:
        raise ValueError(
            f"`reference` must be finite, but got {ref[bad[0]]} at index {int(bad[0])} "
            f"({bad.size} non-finite)."
        )
    return X, ref


def _as_values(value: object, r: int) -> Tensor:
    """The values of rebuild ``r`` as a tensor: ``make_acqf``'s callable may give a NumPy array,
    a list or a float rather than a tensor. Those are read in float64, the dtype the values are
    reduced in, so none is rounded (``X``'s dtype, if float32, would round a float64 array).

    Raises:
        TypeError: naming the rebuild and the type, for values that are not numbers.
    """
    if isinstance(value, Tensor):
        return value
    try:
        return torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"make_acqf({r}) must map X to n numbers, but got a {type(value).__name__}."
        ) from None


def acquisition_noise(
    make_acqf: Callable[[int], Callable[[Tensor], Tensor | ArrayLike]],
    X: Tensor,
    *,
    rebuilds: int = 32,
    top_k: int = 10,
    reference: Tensor | np.ndarray | None = None,
    confidence: float = 0.95,
    seed: int = 0,
) -> AcquisitionNoise:
    r"""Evaluate ``rebuilds`` rebuilds of an acquisition at fixed candidates and measure its noise.

    Rebuild ``r`` is ``make_acqf(r)`` (``r = 0..R-1``), evaluated on ``X`` without gradients to
    ``v_r = acqf(X)``. With ``ref`` the reference values (``reference``, or the mean over
    rebuilds ``bar v``), exactly as the probe computes them (:mod:`orthobench.probe.metrics`):

    .. math::

        \mathrm{Var}_j = \frac{1}{R - 1} \sum_r (v_{rj} - \bar v_j)^2, \qquad
        \mathrm{top1} = \frac1R \sum_r 1[\arg\max_j v_{rj} \in \arg\max_j \mathrm{ref}_j],

    and the flip rate, the share of (rebuild, adjacent pair ``(a, b)`` of the reference's top
    ``top_k``, ``ref_a > ref_b``) with ``v_{ra} < v_{rb}``.

    Without ``reference`` the ranking is the mean over rebuilds, so top-1 agreement and flip
    rate measure how *stable* the ranking is, not whether it is *right*; pass a high-precision
    estimate of the target (e.g. many more MC samples or theta draws) to measure correctness.

    Intervals cover the variation over rebuilds, given the reference (with the mean ranking,
    that ranking is held fixed). Top-1 agreement is a share of ``R`` independent rebuilds, each
    agreeing or not, so its interval is the exact binomial (Clopper-Pearson) one, which stays
    honest at 0 or ``R`` agreements where a bootstrap collapses to a point. The flip rate pools
    ``top_k - 1`` pairs per rebuild that share the rebuild's draws, so the pairs are not
    independent trials (a binomial interval over ``R (top_k - 1)`` trials would be too narrow);
    its interval is a percentile bootstrap that resamples whole rebuilds (``seed`` seeds it),
    widened if needed to contain the estimate. When no rebuild flips any pair it is ``[0, 0]``.

    Args:
        make_acqf: ``r -> acquisition``: any callable mapping ``n x q x d`` candidates to ``n``
            values, a tensor or an array-like (NumPy array, list; read in float64), e.g. a
            BoTorch ``AcquisitionFunction`` such as an MC acquisition whose sampler is seeded by
            ``r``.
        X: ``n x q x d`` candidates (``n x d`` is read as ``q = 1``), ``n >= 1``.
        rebuilds: ``R >= 2``.
        top_k: Reference top behind the flip rate, ``>= 2`` (at most ``n`` are used).
        reference: ``n`` finite reference values (larger is better); None: the mean over
            rebuilds.
        confidence: Level of the intervals, in ``(0, 1)``.
        seed: Seed of the bootstrap, ``>= 0`` (the rebuilds are ``make_acqf``'s); it uses its
            own generator, not torch's or NumPy's global one.

    Returns:
        The :class:`AcquisitionNoise`.

    Raises:
        ValueError: for a bad argument (before the first rebuild), a rebuild whose values do
            not have shape ``(n,)``, or a NaN or infinite value (its variance is undefined).
        TypeError: for an ``X`` that is not a tensor, or a rebuild whose values are not numbers.

    Example:
        >>> import torch
        >>> X = torch.linspace(0, 1, 5, dtype=torch.float64).reshape(5, 1)
        >>> def make_acqf(r):
        ...     noise = torch.randn(5, generator=torch.Generator().manual_seed(r), dtype=X.dtype)
        ...     return lambda X: -(X[..., 0, 0] - 0.3).square() + 0.01 * noise
        >>> result = acquisition_noise(make_acqf, X, rebuilds=8)
        >>> result.values.shape, result.variance.shape
        ((8, 5), (5,))
        >>> round(result.mean_variance, 6) > 0, result.top1_interval[0] <= result.top1_agreement
        (True, True)
    """
    X, ref = _check_arguments(X, rebuilds, top_k, reference, confidence, seed)
    n = X.shape[0]
    rows = []
    for r in range(rebuilds):
        acqf = make_acqf(r)
        with torch.no_grad():
            value = _as_values(acqf(X), r)
        if tuple(value.shape) != (n,):
            raise ValueError(
                f"make_acqf({r}) must map X of shape {tuple(X.shape)} to ({n},), but got {tuple(value.shape)}."
            )
        row = value.detach().cpu().double().numpy()
        bad = np.flatnonzero(~np.isfinite(row))
        if bad.size:
            # The variance and ranks of a NaN or infinite value are undefined (NaN metrics).
            raise ValueError(
                f"make_acqf({r}) returned {bad.size} non-finite values, at candidates "
                f"{bad[:10].tolist()} (e.g. {row[bad[0]]}); leave those candidates out."
            )
        rows.append(row)
    values = np.stack(rows)  # R x n
    is_mean = ref is None
    if ref is None:
        ref = values.mean(axis=0)
    top1 = top1_agreement(values, ref)
    flips = flip_rate(values, ref, top_k)
    rng = np.random.default_rng(seed)
    boot = np.array(
        [
            flip_rate(values[idx], ref, top_k)
            for idx in rng.integers(0, rebuilds, (_N_BOOT, rebuilds))
        ]
    )
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return AcquisitionNoise(
        values=values,
        variance=pointwise_variance(values),
        mean_variance=probe_variance(values),
        top1_agreement=top1,
        top1_interval=_clopper_pearson(round(top1 * rebuilds), rebuilds, confidence),
        flip_rate=flips,
        # A percentile interval of a mean contains it but for rounding: widened to be sure.
        flip_interval=(min(float(low), flips), max(float(high), flips)),
        reference=ref,
        reference_is_mean=is_mean,
        top_k=min(top_k, n),
        confidence=confidence,
    )
