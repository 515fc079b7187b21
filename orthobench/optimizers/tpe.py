r"""Bootstrap TPE: MC-TPE (naive mean over bootstrap fits) and OrthoBO-TPE (control variates).

Both follow OrthoBO's appendix ("TPE implementation") on the bootstrap TPE surrogate of
:mod:`orthobench.surrogates.tpe` [Bergstra2011tpe]_: :class:`MCTPE` estimates the acquisition
``E_q[h(x; theta)]`` by the naive mean over bootstrap fits, :class:`OrthoBOTPE` with control
variates centred by an independent estimate of their mean (docs/design.md, "Controls need a
known mean").

References:
    .. [Bergstra2011tpe] J. Bergstra, R. Bardenet, Y. Bengio, B. Kégl. Algorithms for
       Hyper-Parameter Optimization. NeurIPS 2011.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch
from annotated_types import Ge, Interval
from torch import Tensor
from torch.quasirandom import SobolEngine

from orthobench.config.params import Count, NonNegativeCount, PositiveFloat
from orthobench.estimators import DEFAULT_CONTROL_VARIATE, ESTIMATORS, get_estimator, min_draws
from orthobench.optimizers.base import Optimizer, Suggestion, check_at_least
from orthobench.seeding import derive_seed, torch_generator
from orthobench.surrogates.tpe import (
    TPEFits,
    bandwidth_floor,
    bootstrap_indices,
    fit_tpe,
    split_sizes,
)

ACQUISITIONS: tuple[str, ...] = ("ratio", "log-ratio")
CENTERINGS: tuple[str, ...] = ("independent", "sample")
#: Estimators for bootstrap values: ``orth-quadratic`` needs a known control covariance.
BOOTSTRAP_CONTROL_VARIATES: tuple[str, ...] = tuple(e for e in ESTIMATORS if e != "orth-quadratic")


@dataclass(frozen=True)
class BootstrapDraw:
    """The ``S`` bootstrap TPE fits of one acquisition build.

    Args:
        fits: The fits ``theta^(1..S)``.
        control_mean: ``K = 2d + 1`` centering of the controls (OrthoBO-TPE), else None.
    """

    fits: TPEFits
    control_mean: Tensor | None = None


class MCTPE(Optimizer):
    r"""Bootstrap TPE with the naive Monte Carlo mean of ``l / g`` over ``S`` bootstrap fits.

    ``q_t(theta)`` is the nonparametric bootstrap of the history; each of ``S`` resamples gives a
    TPE fit ``theta^(s)`` (good and bad Parzen estimators,
    :func:`~orthobench.surrogates.tpe.fit_tpe`), and the acquisition of a candidate ``x`` is

    .. math::

        h(x; \theta) = \frac{l_\theta(x)}{g_\theta(x)}
        \quad \text{or, with ``acquisition="log-ratio"``,} \quad
        h(x; \theta) = \log l_\theta(x) - \log g_\theta(x),

    estimated by the naive mean ``(1/S) sum_s h(x; theta^(s))``.

    Candidates (``N = n_good_candidates + n_sobol_candidates``, 24 + 8 by default): draws from
    the good densities ``l_theta^(s)`` of uniformly chosen fits (where the ratio is large, as in
    [Bergstra2011tpe]_; 24 is Optuna's ``n_ei_candidates``, a small set keeps the argmax from
    being too greedy), plus scrambled Sobol' points over the whole cube (so regions the good
    densities miss are still scored). The best candidate by the estimated acquisition is
    proposed, one per ask (:attr:`max_batch`). Fits, candidates and Sobol' points are keyed by
    the same seeds in every subclass, so on the same history MC-TPE and OrthoBO-TPE score the
    same candidates under the same bootstrap fits (common random numbers): only the estimator
    differs.

    Args:
        dim: Number of search dimensions ``d``.
        bootstrap_fits: Bootstrap fits ``S`` per step (paper: 32).
        gamma: Good-set quantile; ``ceil(gamma t)`` of ``t`` points are good (paper: 0.2).
        acquisition: ``"ratio"`` (``l / g``, the paper's) or ``"log-ratio"`` (``log l - log g``).
        min_bandwidth: Absolute floor of Scott's-rule bandwidths (unit-cube units): a resample
            that repeats one point has zero spread.
        magic_clip: Raise the floor to Optuna's ``1 / min(100, n + 2)`` for ``n`` kernels. Without
            it the good density collapses onto the incumbent
            (:func:`~orthobench.surrogates.tpe.bandwidth_floor`; measured: docs/benchmarks.md,
            "Bootstrap TPE: bandwidth floor and candidates").
        prior_weight: Weight of the uniform component of every Parzen estimator (Optuna's
            default, 1.0); positive, so ``g > 0`` and ``l / g`` stays finite.
        n_good_candidates: Candidates drawn from the good densities per step (Optuna's
            ``n_ei_candidates``, 24). It sets how greedy the argmax of ``l / g`` is
            (docs/benchmarks.md, "Bootstrap TPE: bandwidth floor and candidates").
        n_sobol_candidates: Scrambled Sobol candidates per step (8): they rarely win, but keep
            every region of the cube scorable.
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.

    Example:
        >>> import numpy as np
        >>> opt = MCTPE(2, seed=0)
        >>> opt.tell(np.random.rand(8, 2), np.random.rand(8))
        >>> opt.ask(1).x.shape
        (1, 2)
    """

    min_observations = 2
    surrogate = "tpe"

    def __init__(
        self,
        dim: int,
        *,
        bootstrap_fits: Annotated[Count, Ge(2)] = 32,
        gamma: Annotated[float, Interval(gt=0.0, lt=1.0)] = 0.2,
        acquisition: Literal[ACQUISITIONS] = "ratio",
        min_bandwidth: Annotated[float, Interval(gt=0.0, le=1.0)] = 0.01,
        magic_clip: bool = True,
        prior_weight: PositiveFloat = 1.0,
        n_good_candidates: NonNegativeCount = 24,
        n_sobol_candidates: NonNegativeCount = 8,
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(dim, seed=seed, device=device, dtype=dtype)
        if bootstrap_fits < 2:
            raise ValueError(f"`bootstrap_fits` must be >= 2, but got {bootstrap_fits=}.")
        if acquisition not in ACQUISITIONS:
            raise ValueError(
                f"`acquisition` must be one of {ACQUISITIONS}, but got {acquisition=}."
            )
        if not 0.0 < min_bandwidth <= 1.0:
            raise ValueError(f"`min_bandwidth` must lie in (0, 1], but got {min_bandwidth=}.")
        if not prior_weight > 0.0:
            raise ValueError(f"`prior_weight` must be positive, but got {prior_weight=}.")
        check_at_least(
            0, n_good_candidates=n_good_candidates, n_sobol_candidates=n_sobol_candidates
        )
        MCTPE.check_params(
            n_good_candidates=n_good_candidates, n_sobol_candidates=n_sobol_candidates
        )
        split_sizes(2, gamma)  # validates gamma
        self.bootstrap_fits = bootstrap_fits
        self.gamma = gamma
        self.acquisition = acquisition
        self.min_bandwidth = min_bandwidth
        self.magic_clip = magic_clip
        self.prior_weight = prior_weight
        self.n_good_candidates = n_good_candidates
        self.n_sobol_candidates = n_sobol_candidates

    @staticmethod
    def check_params(*, n_good_candidates: int, n_sobol_candidates: int, **_: Any) -> None:
        """MC-TPE's rule over several parameters
        (:meth:`~orthobench.optimizers.base.Optimizer.check_params`): a step scores at least one
        candidate."""
        if n_good_candidates + n_sobol_candidates < 1:
            raise ValueError(
                "`n_good_candidates + n_sobol_candidates >= 1` must hold, but got "
                f"({n_good_candidates=}, {n_sobol_candidates=})."
            )

    def _fit(self, indices: Tensor) -> TPEFits:
        return fit_tpe(
            self.train_x,
            self.train_y,
            indices,
            gamma=self.gamma,
            min_bandwidth=self.min_bandwidth,
            magic_clip=self.magic_clip,
            prior_weight=self.prior_weight,
        )

    def draw(self, rebuild: int = 0) -> BootstrapDraw:
        """``S`` bootstrap fits on the current history, keyed by ``(seed, ask, rebuild)``.

        ``rebuild`` 0 is the draw :meth:`ask` uses; other values give independent rebuilds of the
        estimator on the same history (what an acquisition-variance probe needs).
        """
        t = self.train_y.shape[0]
        # CPU generators throughout: the same seed gives the same resamples on every device.
        gen = torch_generator(self.seed, self._asks, rebuild, "tpe-bootstrap")
        return BootstrapDraw(self._fit(bootstrap_indices(t, self.bootstrap_fits, gen, self.device)))

    def values(self, draw: BootstrapDraw, x: Tensor) -> Tensor:
        """Per-fit acquisition ``h(x; theta^(s))`` of ``N x d`` points -> ``S x N``."""
        log_ratio = draw.fits.log_ratio(x)
        return log_ratio if self.acquisition == "log-ratio" else log_ratio.exp()

    def estimate(self, draw: BootstrapDraw, values: Tensor) -> Tensor:
        """The naive MC mean of ``S x N`` per-fit values -> ``N``."""
        return values.mean(dim=0)

    def _candidates(self, draw: BootstrapDraw) -> Tensor:
        """``N x d`` candidates: good-density draws first, then Sobol points."""
        gen = torch_generator(self.seed, self._asks, "tpe-candidates")
        which = torch.randint(draw.fits.num_fits, (self.n_good_candidates,), generator=gen).to(
            self.device
        )
        good = draw.fits.good.sample(which, gen)
        if self.n_sobol_candidates == 0:
            return good
        sobol = SobolEngine(
            self.dim, scramble=True, seed=derive_seed(self.seed, self._asks, "tpe-sobol") % (2**31)
        )
        return torch.cat(
            [good, sobol.draw(self.n_sobol_candidates, dtype=self.dtype).to(self.device)]
        )

    @property
    def max_batch(self) -> int:
        """One point per ask: no liar (fantasized or penalized pending points) is implemented, and
        the top ``q`` candidates of one estimate of ``l / g`` cluster around its maximum, a
        batch without diversity."""
        return 1

    def _ask(self, n: int) -> Suggestion:
        t0 = time.perf_counter()
        draw = self.draw()
        t1 = time.perf_counter()
        candidates = self._candidates(draw)
        estimate = self.estimate(draw, self.values(draw, candidates))
        best = estimate.topk(n).indices
        t2 = time.perf_counter()
        info = self._info(draw)
        info["estimate"] = estimate[best[0]].item()
        info["from_good_density"] = bool(best[0] < self.n_good_candidates)
        return Suggestion(
            x=candidates[best].cpu().numpy(), fit_seconds=t1 - t0, acq_seconds=t2 - t1, info=info
        )

    def _info(self, draw: BootstrapDraw) -> dict[str, Any]:
        fits = draw.fits
        floored = [
            est.bandwidths.le(
                bandwidth_floor(
                    est.centers.shape[1],
                    min_bandwidth=self.min_bandwidth,
                    magic_clip=self.magic_clip,
                )
            )
            for est in (fits.good, fits.bad)
        ]
        return {
            "bootstrap_fits": self.bootstrap_fits,
            "n_good": fits.good.centers.shape[1],
            "threshold_mean": fits.threshold.mean().item(),
            # Shares of bandwidths at the floor: floored bandwidths are constant controls.
            "floored_good_share": floored[0].double().mean().item(),
            "floored_bad_share": floored[1].double().mean().item(),
        }


class OrthoBOTPE(MCTPE):
    r"""Bootstrap TPE with the orthogonalized (control-variate) estimate of OrthoBO.

    .. math::

        \widehat{h}(x) = \frac{1}{S} \sum_s h(x; \theta^{(s)})
            - \hat\gamma(x)^\top \Big(\frac{1}{S} \sum_s \phi(\theta^{(s)}) - \bar\phi\Big),

    with ``phi = [log s_good, log s_bad, y*]`` (``K = 2d + 1``), ``gamma(x)`` fitted by the
    named estimator of :mod:`orthobench.estimators` on the ``S`` fits, and ``bar phi`` the mean of
    ``phi`` over ``control_mean_draws`` bootstrap fits drawn independently of the ``S`` fits.

    Args:
        dim: Number of search dimensions ``d``.
        estimator: Estimator name (:data:`orthobench.estimators.ESTIMATORS`). The default
            (``"orth-shrink"``, OrthoBO's) is, for TPE's statistics with no known covariance,
            the plug-in of :func:`~orthobench.estimators.orthogonal_mean` with ``4K`` ridge
            pseudo-samples: ``S = 32`` is at or below ``K = 2d + 1`` from ``d = 16`` (Levy16),
            where the plain plug-in ``"orth"`` (the paper's) interpolates noise
            (docs/design.md, "Never worse than naive MC").
            ``"orth-quadratic"`` needs a known control covariance and is rejected.
        control_mean_draws: Independent bootstrap fits that estimate ``E_q[phi]`` (they need no
            acquisition evaluation, so they are cheap).
        centering: ``"independent"`` (the above) or ``"sample"``: ``bar phi`` is the mean over the
            same ``S`` fits, as in the paper's appendix. The correction is then exactly zero and
            the estimate equals MC-TPE's (docs/design.md, "Controls need a known mean";
            exactly so for every estimator but the cross-fitted one, whose folds have their own
            means); kept to reproduce the paper.
        bootstrap_fits, gamma, acquisition, min_bandwidth, magic_clip, prior_weight, n_good_candidates,
            n_sobol_candidates, seed, device, dtype: See :class:`MCTPE`.
    """

    def __init__(
        self,
        dim: int,
        *,
        bootstrap_fits: Annotated[Count, Ge(2)] = 32,
        gamma: Annotated[float, Interval(gt=0.0, lt=1.0)] = 0.2,
        acquisition: Literal[ACQUISITIONS] = "ratio",
        min_bandwidth: Annotated[float, Interval(gt=0.0, le=1.0)] = 0.01,
        magic_clip: bool = True,
        prior_weight: PositiveFloat = 1.0,
        n_good_candidates: NonNegativeCount = 24,
        n_sobol_candidates: NonNegativeCount = 8,
        estimator: Literal[BOOTSTRAP_CONTROL_VARIATES] = DEFAULT_CONTROL_VARIATE,
        control_mean_draws: Annotated[Count, Ge(2)] = 1024,
        centering: Literal[CENTERINGS] = "independent",
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(
            dim,
            bootstrap_fits=bootstrap_fits,
            gamma=gamma,
            acquisition=acquisition,
            min_bandwidth=min_bandwidth,
            magic_clip=magic_clip,
            prior_weight=prior_weight,
            n_good_candidates=n_good_candidates,
            n_sobol_candidates=n_sobol_candidates,
            seed=seed,
            device=device,
            dtype=dtype,
        )
        get_estimator(estimator)  # fail at construction on an unknown name
        if estimator == "orth-quadratic":
            raise ValueError(
                f"{estimator=} needs a known control covariance; TPE's bootstrap statistics have none."
            )
        if control_mean_draws < 2:
            raise ValueError(f"`control_mean_draws` must be >= 2, but got {control_mean_draws=}.")
        if centering not in CENTERINGS:
            raise ValueError(f"`centering` must be one of {CENTERINGS}, but got {centering=}.")
        OrthoBOTPE.check_params(
            bootstrap_fits=bootstrap_fits,
            estimator=estimator,
            n_good_candidates=n_good_candidates,
            n_sobol_candidates=n_sobol_candidates,
        )
        self.estimator = estimator
        self.control_mean_draws = control_mean_draws
        self.centering = centering

    @staticmethod
    def check_params(*, bootstrap_fits: int, estimator: str, **rest: Any) -> None:
        """MC-TPE's rules (:meth:`MCTPE.check_params`), and as many fits as the estimator takes:
        cross-fitting needs 4 (2 per fold), which the first step refused after the initial
        design."""
        MCTPE.check_params(**rest)
        fewest = min_draws(estimator)
        if bootstrap_fits < fewest:
            raise ValueError(
                f"`bootstrap_fits` must be >= {fewest} for {estimator=}, but got {bootstrap_fits=}."
            )

    def draw(self, rebuild: int = 0) -> BootstrapDraw:
        draw = super().draw(rebuild)
        if self.centering == "sample":
            return BootstrapDraw(draw.fits, draw.fits.summary_statistics().mean(dim=0))
        # Keyed apart from the S fits: the centering must not depend on them.
        gen = torch_generator(self.seed, self._asks, rebuild, "tpe-control-mean")
        extra = self._fit(
            bootstrap_indices(self.train_y.shape[0], self.control_mean_draws, gen, self.device)
        )
        return BootstrapDraw(draw.fits, extra.summary_statistics().mean(dim=0))

    def estimate(self, draw: BootstrapDraw, values: Tensor) -> Tensor:
        """The control-variate estimate of ``S x N`` per-fit values -> ``N``."""
        controls = draw.fits.summary_statistics()
        return get_estimator(self.estimator)(values, controls, draw.control_mean, None)

    def _info(self, draw: BootstrapDraw) -> dict[str, Any]:
        info = super()._info(draw)
        controls = draw.fits.summary_statistics()
        info["estimator"] = self.estimator
        # Controls constant over the S fits (floored bandwidths) drop out of the regression.
        info["n_varying_controls"] = int((controls != controls[:1]).any(dim=0).sum())
        return info
