r"""Bootstrap Parzen estimators: the TPE surrogate of OrthoBO's appendix ("TPE implementation").

A TPE fit splits the history at a quantile of the objective and fits one Parzen estimator to the
good inputs and one to the rest [Bergstra2011tpe]_ (:func:`fit_tpe`, :class:`ParzenEstimators`);
its acquisition is their density ratio. The parameter distribution ``q_t(theta)`` is the
nonparametric bootstrap of the history (:func:`bootstrap_indices`).

References:
    .. [Bergstra2011tpe] J. Bergstra, R. Bardenet, Y. Bengio, B. Kégl. Algorithms for
       Hyper-Parameter Optimization. NeurIPS 2011.
    .. [Scott1992] D. W. Scott. Multivariate Density Estimation. Wiley, 1992.
    .. [Watanabe2023tpe] S. Watanabe. Tree-Structured Parzen Estimator: Understanding Its
       Algorithm Components and Their Roles for Better Empirical Performance. arXiv:2304.11127.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def split_sizes(t: int, gamma: float) -> tuple[int, int]:
    """Sizes ``(n_good, n_bad)`` of the split of ``t`` points at the ``gamma``-quantile.

    ``n_good = ceil(gamma t)``, kept within ``[1, t - 1]`` so that both densities have data.
    """
    if t < 2:
        raise ValueError(f"A TPE split needs at least 2 observations, but got {t=}.")
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"`gamma` must lie in (0, 1), but got {gamma=}.")
    n_good = min(max(math.ceil(gamma * t), 1), t - 1)
    return n_good, t - n_good


def bandwidth_floor(n: int, *, min_bandwidth: float, magic_clip: bool) -> float:
    """The smallest bandwidth of an estimator with ``n`` kernels (unit-cube units).

    ``max(min_bandwidth, 1 / min(100, n + 2))`` with ``magic_clip`` (Optuna's "magic clip",
    counting its prior kernel [Watanabe2023tpe]_), else ``min_bandwidth``. The floor matters: a
    bootstrap resample often repeats one good point, whose spread is then zero, and without a
    floor that grows as ``n`` shrinks the good density collapses onto the incumbent (proposals
    land ever closer to the good points, which shrinks their spread further).
    """
    return max(min_bandwidth, 1.0 / min(100.0, n + 2.0)) if magic_clip else min_bandwidth


def scott_bandwidths(centers: Tensor, floor: float) -> Tensor:
    r"""Per-dimension Scott's-rule bandwidths ``sigma_j n^{-1/(d+4)}`` clamped to ``[floor, 1]``.

    Scott's rule [Scott1992]_ with ``sigma_j`` the sample standard deviation of the ``n`` centers
    in dimension ``j``; one bandwidth per dimension, shared by the kernels of an estimator.

    Args:
        centers: ``B x n x d`` kernel centers of ``B`` estimators.
        floor: Smallest bandwidth (unit-cube units), e.g. from :func:`bandwidth_floor`.

    Returns:
        ``B x d`` bandwidths.
    """
    n, d = centers.shape[-2:]
    # One center has no spread: its bandwidth is the floor.
    sigma = centers.std(dim=-2, correction=1) if n > 1 else torch.zeros_like(centers[..., 0, :])
    return (sigma * n ** (-1.0 / (d + 4))).clamp(floor, 1.0)


@dataclass(frozen=True)
class ParzenEstimators:
    r"""A batch of ``B`` Parzen estimators on the unit cube ``[0, 1]^d``.

    .. math::

        p(x) = \frac{n}{n + w} \frac{1}{n} \sum_{i=1}^n \prod_{j=1}^d
            \mathcal{TN}(x_j; c_{ij}, s_j, [0, 1]) + \frac{w}{n + w} \cdot 1,

    a product of Gaussian kernels truncated to ``[0, 1]`` and renormalized there (so densities are
    exact and samples never need clipping), mixed with the uniform density on the cube with prior
    weight ``w`` as in [Bergstra2011tpe]_ (this bounds ``g`` from below, hence ``l / g`` from
    above). Bandwidths: :func:`scott_bandwidths`.

    Args:
        centers: ``B x n x d`` kernel centers.
        bandwidths: ``B x d`` per-dimension bandwidths.
        prior_weight: Weight ``w >= 0`` of the uniform component.
    """

    centers: Tensor
    bandwidths: Tensor
    prior_weight: float

    def __post_init__(self) -> None:
        if self.centers.ndim != 3 or self.bandwidths.shape != (
            self.centers.shape[0],
            self.centers.shape[2],
        ):
            raise ValueError(
                f"Need centers B x n x d and bandwidths B x d, but got {tuple(self.centers.shape)} "
                f"and {tuple(self.bandwidths.shape)}."
            )
        if self.prior_weight < 0:
            raise ValueError(f"`prior_weight` must be non-negative, but got {self.prior_weight=}.")

    def _log_normalizers(self) -> Tensor:
        """``B x n x d`` log mass of each untruncated kernel inside ``[0, 1]``."""
        s = self.bandwidths.unsqueeze(-2)
        mass = torch.special.ndtr((1.0 - self.centers) / s) - torch.special.ndtr(-self.centers / s)
        return mass.log()

    def log_prob(self, x: Tensor) -> Tensor:
        """Log densities of ``N x d`` unit-cube points under each estimator -> ``B x N``."""
        n = self.centers.shape[-2]
        log_norm = self._log_normalizers()
        out = []
        # One estimator at a time: the N x n x d kernel tensor of all B at once is too large.
        for c, s, log_z in zip(self.centers, self.bandwidths, log_norm, strict=True):
            z = (x.unsqueeze(-2) - c) / s  # N x n x d
            log_k = (-0.5 * z.square() - _LOG_SQRT_2PI - s.log() - log_z).sum(-1)  # N x n
            out.append(torch.logsumexp(log_k, dim=-1) - math.log(n))
        log_kde = torch.stack(out)  # B x N
        if self.prior_weight == 0:
            return log_kde
        total = n + self.prior_weight
        # The uniform density on the unit cube is 1, i.e. log 0.
        return torch.logaddexp(
            log_kde + math.log(n / total),
            torch.full_like(log_kde, math.log(self.prior_weight / total)),
        )

    def sample(self, which: Tensor, generator: torch.Generator) -> Tensor:
        """One draw from the kernel mixture (no uniform component) of estimator ``which[k]`` each.

        Args:
            which: ``m`` estimator indices in ``[0, B)``.
            generator: Source of the randomness; draws are made on its device and moved, so a
                CPU generator gives the same draws for estimators on any device.

        Returns:
            ``m x d`` points in ``[0, 1]^d`` (inverse-CDF draws from the truncated kernels).
        """
        m = which.shape[0]
        n, d = self.centers.shape[-2:]
        kernel = torch.randint(n, (m,), generator=generator, device=generator.device).to(
            which.device
        )
        c = self.centers[which, kernel]  # m x d
        s = self.bandwidths[which]  # m x d
        lo, hi = torch.special.ndtr(-c / s), torch.special.ndtr((1.0 - c) / s)
        u = torch.rand(m, d, generator=generator, device=generator.device, dtype=c.dtype).to(
            c.device
        )
        # Keep u off {0, 1}, where ndtri is infinite; the clamp only absorbs rounding.
        p = (lo + u * (hi - lo)).clamp(1e-12, 1.0 - 1e-12)
        return (c + s * torch.special.ndtri(p)).clamp(0.0, 1.0)


@dataclass(frozen=True)
class TPEFits:
    """``B`` TPE fits ``theta^(b)``: good and bad estimators and the split thresholds.

    Args:
        good: The good-set estimators ``l`` (``n_good`` centers each).
        bad: The bad-set estimators ``g`` (``n_bad`` centers each).
        threshold: ``B`` split thresholds ``y*`` (the largest good objective value).
    """

    good: ParzenEstimators
    bad: ParzenEstimators
    threshold: Tensor

    @property
    def num_fits(self) -> int:
        return self.threshold.shape[0]

    def log_ratio(self, x: Tensor) -> Tensor:
        """``log l(x) - log g(x)`` of ``N x d`` points under each fit -> ``B x N``."""
        return self.good.log_prob(x) - self.bad.log_prob(x)

    def summary_statistics(self) -> Tensor:
        r"""The control statistics ``phi(theta) = [log s_good, log s_bad, y*]`` -> ``B x (2d + 1)``.

        These are the statistics of OrthoBO's appendix ("TPE implementation"); they need no
        acquisition evaluation, so their mean can be estimated from many cheap extra fits.
        """
        return torch.cat(
            [self.good.bandwidths.log(), self.bad.bandwidths.log(), self.threshold.unsqueeze(-1)],
            dim=-1,
        )


def bootstrap_indices(
    t: int, num_fits: int, generator: torch.Generator, device: torch.device | str = "cpu"
) -> Tensor:
    """``num_fits x t`` row indices, each row ``t`` draws with replacement from ``range(t)``.

    Drawn on the generator's device and moved to ``device``.
    """
    return torch.randint(t, (num_fits, t), generator=generator, device=generator.device).to(device)


def fit_tpe(
    x: Tensor,
    y: Tensor,
    indices: Tensor,
    *,
    gamma: float,
    min_bandwidth: float,
    magic_clip: bool,
    prior_weight: float,
) -> TPEFits:
    """Fit one TPE per row of ``indices`` on the resampled history (minimization).

    A fit ``theta`` splits its resample at the empirical ``gamma``-quantile ``y*`` of the
    objective (the best ``n_good = ceil(gamma t)`` points are "good", :func:`split_sizes`) and
    fits one Parzen estimator to the good inputs, ``l_theta``, and one to the rest, ``g_theta``
    [Bergstra2011tpe]_; the acquisition is ``l_theta(x) / g_theta(x)``. With
    :func:`bootstrap_indices` each fit sees ``t`` points drawn with replacement from the ``t``
    observed ones: a draw from ``q_t(theta)``.

    Args:
        x: ``t x d`` unit-cube inputs.
        y: ``t`` objective values (lower is better).
        indices: ``B x t`` resampling indices (see :func:`bootstrap_indices`); the identity rows
            ``arange(t)`` give the plain fit on the history.
        gamma: Good-set quantile in ``(0, 1)``.
        min_bandwidth: Absolute bandwidth floor, in ``(0, 1]``.
        magic_clip: Raise the floor to Optuna's ``1 / min(100, n + 2)`` (:func:`bandwidth_floor`).
        prior_weight: Weight of the uniform component of every estimator.

    Returns:
        The ``B`` fits.
    """
    if x.ndim != 2 or y.shape != x.shape[:1] or indices.ndim != 2:
        raise ValueError(
            f"Need x t x d, y t and indices B x t, but got {tuple(x.shape)}, {tuple(y.shape)} and {tuple(indices.shape)}."
        )
    if not 0.0 < min_bandwidth <= 1.0:
        # 0 gives a repeated point bandwidth 0 (NaN densities); the clamp to [floor, 1] would
        # lower a floor above 1 to 1 unasked.
        raise ValueError(f"`min_bandwidth` must lie in (0, 1], but got {min_bandwidth=}.")
    n_good, n_bad = split_sizes(indices.shape[-1], gamma)
    y_res = y[indices]  # B x t
    # A stable sort makes ties (repeated bootstrap draws) split in a reproducible order.
    order = torch.sort(y_res, dim=-1, stable=True).indices
    rows = torch.gather(indices, -1, order)  # B x t, best first
    x_res = x[rows]  # B x t x d
    good, bad = x_res[:, :n_good], x_res[:, n_good:]
    good_floor = bandwidth_floor(n_good, min_bandwidth=min_bandwidth, magic_clip=magic_clip)
    bad_floor = bandwidth_floor(n_bad, min_bandwidth=min_bandwidth, magic_clip=magic_clip)
    return TPEFits(
        good=ParzenEstimators(good, scott_bandwidths(good, good_floor), prior_weight),
        bad=ParzenEstimators(bad, scott_bandwidths(bad, bad_floor), prior_weight),
        threshold=y[rows[:, n_good - 1]],
    )
