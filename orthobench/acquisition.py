r"""OrthoBO's acquisitions: an ensemble's marginal acquisition over fixed theta draws, outer log.

:class:`MarginalLogAcquisition` is the generic layer (paper, appendix, Proposition "Generic
extension"): from per-draw log-acquisition values ``log a(X; theta_s)`` of fixed draws, any
estimator of the grammar (a weighted sum with weights from the draws alone,
:func:`~orthobench.estimators.estimator_weights`) gives the marginal estimate and its outer log,
with the gradient. :class:`MarginalLogEI` is paper Alg. 1 with Eqs. (22) and (24) (analytic EI per
draw); :class:`MarginalLogQEI` the batch version (the appendix's nested estimator: qEI per draw by
inner Monte Carlo on fixed base samples); :class:`MarginalLogCEI` constrained EI (the appendix's
Corollary "Orthogonalized constrained EI": EI times the probability of feasibility per draw) and
:class:`MarginalLogQCEI` the two together (batch constrained EI per draw by inner Monte Carlo). Both computed in log space (docs/design.md, "EI in log
space") with the outer log's floor relative to the naive estimate (docs/design.md, "Relative
outer-log floor").
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.exceptions.errors import UnsupportedError
from botorch.models.model import Model
from botorch.utils.sampling import draw_sobol_normal_samples
from botorch.utils.transforms import t_batch_mode_transform
from torch import Tensor

from orthobench.estimators import DEFAULT_CONTROL_VARIATE, estimator_weights, get_estimator
from orthobench.seeding import derive_seed
from orthobench.surrogates.batch_ei import PendingSamples, canonical_order, log_qcei, log_qei
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

#: Inner base samples per theta draw of the batch acquisitions (``q > 1``): the marginal averages
#: over the ``S`` draws' own base samples, so ``S K`` function samples enter each value.
INNER_SAMPLES = 64


def draw_inner_base_samples(
    draws: int, q: int, seed: int, *, inner: int = INNER_SAMPLES, dtype: torch.dtype = torch.float64
) -> Tensor:
    """``draws x inner x q`` standard normals, each theta draw's own base samples for
    :class:`MarginalLogQEI`: per draw ``s`` a scrambled Sobol' net of ``inner`` points, scrambled
    independently (seed ``derive_seed(seed, s)``).

    Independent scrambles make the draws' inner errors independent of each other and of the theta
    draws, so a quasi-Monte Carlo theta estimator keeps its gain. (Consecutive blocks of one
    scrambled sequence were tried first: on a state with a floored Laplace posterior they
    correlated with the scrambled-Sobol' theta draws and made ``qmc-owen+rb`` 2.7x *worse* than
    naive MC at ``S = 512``: docs/negative-results.md.) Row ``s`` depends on ``seed`` and ``s``
    alone, so a longer request extends a shorter one.
    """
    return torch.stack(
        [
            draw_sobol_normal_samples(d=q, n=inner, dtype=dtype, seed=derive_seed(seed, s) % 2**31)
            for s in range(draws)
        ]
    )


class MarginalLogAcquisition(AcquisitionFunction):
    r"""``log max(a_ens(X), alpha a_ens^MC(X))`` over fixed hyperparameter draws, for any
    acquisition ``a`` given per draw in log space (subclasses: :meth:`_member_log_values`).

    The math below is written for EI (:class:`MarginalLogEI`); for another acquisition read
    ``a`` for ``EI`` (:class:`MarginalLogQEI`: batch EI).

    For members ``m = 1..M`` with weights ``pi_m``, fixed whitened draws ``z_{m,s}``
    (``s = 1..S``) and per-draw log-EI ``l_{m,s}(x)`` (:meth:`ThetaSampledGP.log_ei
    <orthobench.surrogates.theta_sampled_gp.ThetaSampledGP.log_ei>`), the acquisition is (paper
    Alg. 1)

    .. math::

        \widehat{\mathrm{EI}}^{\mathrm{ens}}(x) = \sum_m \pi_m \widehat{\mathrm{EI}}_m(x)
        \quad \text{(Eq. (22))}, \qquad
        L(x) = \log \max\big(\widehat{\mathrm{EI}}^{\mathrm{ens}}(x),\
            \alpha\, \widehat{\mathrm{EI}}^{\mathrm{ens,MC}}(x)\big)
        \quad \text{(Eq. (24))},

    with ``hat EI_m`` the chosen estimator (:mod:`orthobench.estimators`; paper Eqs. (6), (17))
    applied to ``exp(l_{m,s})`` with the draws' ``z`` as controls (score ``g = -A^{-T} z``: the
    same control space, known mean 0 and covariance I), and ``hat EI^{ens,MC}`` the same ensemble
    with the naive mean. A member drawn from a point set (:mod:`orthobench.theta_estimators`)
    carries the rule's weights ``w_{m,s}`` instead, ``hat EI_m = sum_s w_{m,s} exp(l_{m,s})``
    (:func:`~orthobench.estimators.weighted_mean`); its naive term is still the equal-weight mean
    of the same values, positive by construction (a rule's estimate can be negative: sr3's centre
    weight is).

    Stability: each member works on ``exp(l - max_s l)`` (every estimator is linear in the
    values) and members are combined in log space, ``L = A + log max(sum_m exp(A_m - A) e_m,
    alpha sum_m exp(A_m - A) mc_m)`` with ``A_m = log pi_m + max_s l_{m,s}`` and
    ``A = max_m A_m``. The naive term is at least ``1/S`` for the leading member, so ``L`` is
    finite wherever log-EI is (docs/design.md, "EI in log space").

    ``alpha`` is *relative*: the floor is ``alpha`` times the naive estimate on the same draws.
    Where the estimate is at least that, ``L`` is its log exactly; the floor binds only where
    the control-variate correction removes more than ``1 - alpha`` of the naive estimate, and
    there ``L`` still ranks candidates by the naive estimate (the paper's absolute floor makes
    ``L`` flat far from the data: docs/design.md, "Relative outer-log floor"). With the ``"mc"``
    estimator ``L`` is the log of the naive estimate for any ``alpha <= 1``.

    ``b x 1 x d`` -> ``b``. The draws are fixed at construction (drawn once per BO step), so the
    acquisition is a deterministic, differentiable function of ``x`` for ``optimize_acqf``. EI is
    on each model's standardized outcome scale (:class:`ThetaSampledGP
    <orthobench.surrogates.theta_sampled_gp.ThetaSampledGP>`); members fitted on the same data
    share it.

    Args:
        model: A BoTorch model for BoTorch utilities that read ``acqf.model`` (device, dtype);
            values come from ``members``.
        members: One :class:`~orthobench.surrogates.theta_sampled_gp.ThetaSampledGP` per ensemble member.
        controls: Per member, the ``S_m x K_m`` whitened draws behind its theta samples
            (``K_m = p_m``, or ``p_m - 1`` when the constant mean is integrated out).
        weights: ``M`` ensemble weights (positive; normalized here).
        estimator: Name in :data:`orthobench.estimators.ESTIMATORS`, for members drawn with equal
            weights.
        alpha: Relative floor in ``(0, 1]`` (above).
        point_weights: Per member, ``S_m`` weights of the point set it was drawn from, or ``None``
            (equal weights: ``estimator`` applies). Members with weights use
            :func:`~orthobench.estimators.weighted_mean`, whatever ``estimator`` says.

    Example:
        >>> from botorch.optim import optimize_acqf
        >>> from orthobench.surrogates.fit import fit_model
        >>> from orthobench.surrogates.laplace import laplace_posterior
        >>> x = torch.rand(10, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> model, _ = fit_model(x, -(x - 0.5).square().sum(-1), "matern52-ard")
        >>> lap = laplace_posterior(model)
        >>> z = lap.sample_whitened(16, "qmc", seed=0)  # S x K = 16 x 4
        >>> gp = ThetaSampledGP.from_model(model, lap.theta(z))
        >>> acqf = MarginalLogEI(model, [gp], [z], [1.0])
        >>> acqf(x[:3].unsqueeze(-2)).shape
        torch.Size([3])
        >>> bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
        >>> candidate, value = optimize_acqf(acqf, bounds, q=1, num_restarts=2, raw_samples=32)
        >>> candidate.shape
        torch.Size([1, 2])
    """

    _log = True

    def __init__(
        self,
        model: Model,
        members: Sequence[ThetaSampledGP],
        controls: Sequence[Tensor],
        weights: Sequence[float] | Tensor,
        *,
        estimator: str = DEFAULT_CONTROL_VARIATE,
        alpha: float = 1e-3,
        point_weights: Sequence[Tensor | None] | None = None,
    ) -> None:
        super().__init__(model=model)
        if len(members) == 0 or len(members) != len(controls):
            raise ValueError(
                f"Need one controls tensor per member, but got {len(members)} members and {len(controls)} controls."
            )
        point_weights = [None] * len(members) if point_weights is None else list(point_weights)
        if len(point_weights) != len(members):
            raise ValueError(
                f"Need one `point_weights` entry per member, but got {len(members)} members and {len(point_weights)} entries."
            )
        for i, (gp, z, w) in enumerate(zip(members, controls, point_weights, strict=True)):
            # One control per whitened coordinate: p, or p - 1 with the constant mean integrated out.
            shape = (gp.num_samples, gp.theta.shape[1] - (gp.constant_mean_variance > 0))
            if z.shape != shape:
                raise ValueError(
                    f"Member {i}: controls must be S x K = {shape}, but got {tuple(z.shape)}."
                )
            if w is not None and w.shape != (gp.num_samples,):
                raise ValueError(
                    f"Member {i}: point weights must have shape ({gp.num_samples},), but got {tuple(w.shape)}."
                )
        weights = torch.as_tensor(
            weights, dtype=members[0].theta.dtype, device=members[0].theta.device
        )
        if weights.shape != (len(members),) or not bool(((weights > 0) & weights.isfinite()).all()):
            raise ValueError(
                f"`weights` must be {len(members)} finite positive numbers, "
                f"but got {weights.tolist()}."
            )
        if not 0 < alpha <= 1:
            raise ValueError(
                f"`alpha` is relative to the naive estimate and must be in (0, 1], but got {alpha=}."
            )
        self.members = list(members)
        self.controls = [z.detach() for z in controls]
        self.point_weights = [None if w is None else w.detach() for w in point_weights]
        self.register_buffer("log_weights", (weights / weights.sum()).log())
        get_estimator(estimator)  # an unknown name fails here, not at the first evaluation
        self.estimator = estimator
        self.alpha = alpha
        self._draw_weights: dict[str, list[Tensor]] = {}

    def draw_weights(self, estimator: str | None = None) -> list[Tensor]:
        r"""Per member, the ``S_m`` weights ``a_m`` of its estimate,
        ``hat EI_m = sum_s a_{m,s} EI_{m,s}``.

        A point-set member's weights are its rule's; otherwise they are ``estimator``'s on the
        member's draws (:func:`~orthobench.estimators.estimator_weights`: every estimator is
        linear in the values, with coefficients that depend on the draws alone), whitened
        controls with known mean 0 and covariance I. Computed once per estimator and cached: an
        evaluation then costs a weighted sum whatever the estimator.

        Args:
            estimator: Estimator name; None: this acquisition's.
        """
        name = self.estimator if estimator is None else estimator
        if name not in self._draw_weights:
            estimate = get_estimator(name)
            self._draw_weights[name] = [
                estimator_weights(
                    estimate, z, None, torch.eye(z.shape[-1], dtype=z.dtype, device=z.device)
                )
                if w is None
                else w
                for z, w in zip(self.controls, self.point_weights, strict=True)
            ]
        return self._draw_weights[name]

    def _apply(
        self, fn: Callable[[Tensor], Tensor], recurse: bool = True
    ) -> MarginalLogAcquisition:
        # `.to`, `.double()`, `.cuda()`, ... convert a module's parameters and buffers, not the
        # tensors the members hold: a conversion would leave the draws behind and convert the
        # user's model in place, so one that changes anything is refused before it starts.
        converted = fn(self.log_weights)
        if (converted.dtype, converted.device) != (self.log_weights.dtype, self.log_weights.device):
            raise UnsupportedError(
                f"A marginal acquisition cannot be converted from {self.log_weights.dtype} on "
                f"{self.log_weights.device} to {converted.dtype} on {converted.device} (its draws "
                f"are not module tensors); build it on a model of that dtype and device."
            )
        return super()._apply(fn, recurse)

    def _log_values(self, X: Tensor) -> tuple[torch.Size, list[Tensor]]:
        """:meth:`_member_log_values` of ``X`` cast to the draws' dtype: BoTorch's acquisitions
        take candidates of either dtype (float64 bounds of a float32 model, or the reverse)."""
        return self._member_log_values(X.to(dtype=self.log_weights.dtype))

    @abstractmethod
    def _member_log_values(self, X: Tensor) -> tuple[torch.Size, list[Tensor]]:
        """``X``'s batch shape and each member's ``S_m x b`` per-draw log-acquisition of its
        ``b`` candidates (batches)."""

    def scaled_estimates(
        self, X: Tensor, estimator: str | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        r"""The ensemble estimates in factored form: ``EI_ens = exp(log_scale) * value``.

        Args:
            X: ``batch x q x d`` candidates (``q = 1`` but for the batch acquisitions).
            estimator: Estimator name for members with equal-weight draws; None: this
                acquisition's.

        Returns:
            ``(log_scale, value, mc_value)``, each of shape ``batch``: ``EI_ens = exp(log_scale) value`` and
            ``EI_ens^MC = exp(log_scale) mc_value``. ``value`` may be zero or negative.
        """
        batch_shape, log_eis = self._log_values(X)
        log_scale, value, mc_value, _, _ = _factored_estimates(
            log_eis, self.draw_weights(estimator), self.log_weights
        )
        return (
            log_scale.reshape(batch_shape),
            value.reshape(batch_shape),
            mc_value.reshape(batch_shape),
        )

    def _log_marginal(self, X: Tensor) -> Tensor:
        """``L(X)`` for ``batch x q x d`` candidates -> ``batch`` (see the class docstring)."""
        batch_shape, log_values = self._log_values(X)
        value = _LogEnsembleEstimate.apply(
            self.alpha, self.draw_weights(), self.log_weights, *log_values
        )
        return value.reshape(batch_shape)


class MarginalLogEI(MarginalLogAcquisition):
    """:class:`MarginalLogAcquisition` of analytic EI per draw, ``q = 1``: ``b x 1 x d`` -> ``b``."""

    def _member_log_values(self, X: Tensor) -> tuple[torch.Size, list[Tensor]]:
        flat = X.reshape(-1, *X.shape[-2:])  # b x 1 x d
        return X.shape[:-2], [gp.log_ei(flat) for gp in self.members]

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """``L(x)`` for ``b x 1 x d`` candidates -> ``b`` (see :class:`MarginalLogAcquisition`)."""
        return self._log_marginal(X)


class MarginalLogQEI(MarginalLogAcquisition):
    r""":class:`MarginalLogAcquisition` of batch EI per draw: the orthogonalized nested qEI.

    Per draw ``theta_s``, ``log qEI_s(X)`` is the inner Monte Carlo mean over ``K`` fixed
    standard-normal base samples (:func:`~orthobench.surrogates.batch_ei.log_qei`, BoTorch's
    qLogEI smoothings);
    the estimator then weights the draws as for EI. Each draw has its own base samples
    (:func:`draw_inner_base_samples`; a member's draw ``s`` uses row ``s``, so members share
    them), fixed at construction: the acquisition is deterministic in ``X`` for
    ``optimize_acqf``, and the inner errors of the draws average out over ``S`` too. Pending
    points (``X_pending``, ``p x d``: a sequential-greedy batch's earlier points, or evaluations
    still running) join every batch, as in BoTorch's MC acquisitions: first in each draw's
    Cholesky order, on the first ``p`` base-sample columns, so they are sampled once per
    ``X_pending`` (:class:`~orthobench.surrogates.batch_ei.PendingSamples`) and the batch's
    candidates take the next ``q``.

    ``batch x q x d`` -> ``batch``, for any ``q >= 1`` (at ``q = 1`` it is an inner-MC estimate of
    :class:`MarginalLogEI`'s per-draw EI).

    Args:
        model, members, controls, weights, estimator, alpha, point_weights: As
            :class:`MarginalLogAcquisition`.
        base_samples: ``S' x K x q_max`` standard normal draws, ``S'`` at least every member's
            draws (:func:`draw_inner_base_samples`), or ``K x q_max`` shared by every draw; a batch
            of ``q`` points with ``p`` pending ones uses the first ``p + q`` columns, so ``q_max``
            bounds their number.
        X_pending: ``p x d`` points whose evaluation is pending.
    """

    #: Whether each batch is sorted before its inner samples (:meth:`in_given_order`).
    _canonical = True

    def __init__(
        self,
        model: Model,
        members: Sequence[ThetaSampledGP],
        controls: Sequence[Tensor],
        weights: Sequence[float] | Tensor,
        *,
        base_samples: Tensor,
        estimator: str = DEFAULT_CONTROL_VARIATE,
        alpha: float = 1e-3,
        point_weights: Sequence[Tensor | None] | None = None,
        X_pending: Tensor | None = None,
    ) -> None:
        super().__init__(
            model,
            members,
            controls,
            weights,
            estimator=estimator,
            alpha=alpha,
            point_weights=point_weights,
        )
        draws = max(gp.num_samples for gp in members)
        if base_samples.ndim not in (2, 3) or (
            base_samples.ndim == 3 and base_samples.shape[0] < draws
        ):
            raise ValueError(
                f"`base_samples` must be K x q_max, or S' x K x q_max with S' >= {draws} draws, "
                f"but got shape {tuple(base_samples.shape)}."
            )
        self.register_buffer("base_samples", base_samples.detach())
        self.set_X_pending(X_pending)

    def set_X_pending(self, X_pending: Tensor | None = None) -> None:
        """Set the pending points (BoTorch's hook; a sequential-greedy maximization sets each
        stage's); their samples are made at the next evaluation. They are kept in canonical order
        (:func:`~orthobench.surrogates.batch_ei.canonical_order`), as a batch's points are: the
        pending points take the first base-sample columns, so in their given order the value
        would depend on the order in which the same points were proposed. ``0 x d`` is none."""
        if X_pending is not None and not X_pending.numel():
            X_pending = None
        if X_pending is not None and X_pending.ndim == 2:
            X_pending = canonical_order(X_pending.unsqueeze(0)).squeeze(0)
        super().set_X_pending(X_pending)
        self._pending: list[PendingSamples | None] | None = None

    def _pending_samples(
        self, gps: Sequence[ThetaSampledGP], base_samples: Tensor
    ) -> list[PendingSamples | None]:
        """Each GP's :class:`~orthobench.surrogates.batch_ei.PendingSamples` on the first
        ``p`` columns of its base samples, or Nones without pending points."""
        if self.X_pending is None:
            return [None] * len(gps)
        p = self.X_pending.shape[-2]
        return [
            PendingSamples(gp, self.X_pending.to(gp.train_x), base_samples[..., :p]) for gp in gps
        ]

    def _columns(self, X: Tensor) -> slice:
        """The base-sample columns of ``X``'s batches, after the pending points', checked
        against their number."""
        p = 0 if self.X_pending is None else self.X_pending.shape[-2]
        q = p + X.shape[-2]
        if q > self.base_samples.shape[-1]:
            raise ValueError(
                f"Batches of {q} points (pending ones included) need {q} base-sample columns, "
                f"but there are {self.base_samples.shape[-1]}."
            )
        return slice(p, q)

    @contextlib.contextmanager
    def in_given_order(self) -> Iterator[None]:
        """Within the block each batch's rows are taken in their given order, not sorted first
        (``canonical=False`` of :func:`~orthobench.surrogates.batch_ei.log_qei`): a smooth
        function of ``X``, equal to the acquisition wherever a batch's rows are in canonical order
        (:func:`~orthobench.surrogates.batch_ei.canonical_order`). For a local climb from a sorted
        batch: the sort is a jump where two points' first coordinates cross, and L-BFGS-B's line
        searches stop at it."""
        self._canonical = False
        try:
            yield
        finally:
            self._canonical = True

    def _member_log_values(self, X: Tensor) -> tuple[torch.Size, list[Tensor]]:
        columns = self._columns(X)
        if self._pending is None:
            self._pending = self._pending_samples(self.members, self.base_samples)
        flat = X.reshape(-1, *X.shape[-2:])  # b x q x d
        eps = self.base_samples[..., columns]
        return X.shape[:-2], [
            log_qei(gp, flat, eps, pending, canonical=self._canonical)
            for gp, pending in zip(self.members, self._pending, strict=True)
        ]

    @t_batch_mode_transform()
    def forward(self, X: Tensor) -> Tensor:
        """``L(X)`` for ``batch x q x d`` candidates -> ``batch`` (see
        :class:`MarginalLogAcquisition`)."""
        return self._log_marginal(X)


class MarginalLogCEI(MarginalLogAcquisition):
    r""":class:`MarginalLogAcquisition` of constrained EI per draw, ``q = 1``.

    With independent GPs for the objective (each ensemble member) and for each constraint
    ``c_i`` (feasible where ``c_i <= 0``), a joint draw ``s`` is the member's draw ``s`` with
    every constraint GP's draw ``s``, and (paper, appendix, constrained EI)

    .. math::

        \log \mathrm{CEI}_s(x) = \log \mathrm{EI}_s(x)
            + \sum_i \log P(c_i(x) \le 0 \mid \theta_{i,s}),

    with EI against the best *feasible* observation (the members' ``best_f``: build them on
    the data with that incumbent). The controls of a joint draw are the whitened draws of every
    GP side by side (independent standard normals: still mean 0 and covariance I), so the
    estimators' weights come from the joint draws as for EI.

    ``b x 1 x d`` -> ``b``.

    Args:
        model, members, controls, weights: As :class:`MarginalLogAcquisition`.
        constraints: One :class:`~orthobench.surrogates.theta_sampled_gp.ThetaSampledGP` per
            constraint, fitted to the constraint values as observed, each with as many draws as
            every member.
        constraint_controls: Per constraint, its ``S x K_i`` whitened draws.
        kwargs: ``estimator``, ``alpha`` and ``point_weights`` of
            :class:`MarginalLogAcquisition`; a member's point weights are of a point set drawn
            in the *joint* space of the member's and the constraints' whitened coordinates.
    """

    def __init__(
        self,
        model: Model,
        members: Sequence[ThetaSampledGP],
        controls: Sequence[Tensor],
        weights: Sequence[float] | Tensor,
        *,
        constraints: Sequence[ThetaSampledGP],
        constraint_controls: Sequence[Tensor],
        **kwargs: Any,
    ) -> None:
        super().__init__(model, members, controls, weights, **kwargs)
        self.constraints = list(constraints)
        self.controls = _joint_controls(self, constraints, constraint_controls)

    def _member_log_values(self, X: Tensor) -> tuple[torch.Size, list[Tensor]]:
        flat = X.reshape(-1, *X.shape[-2:])  # b x 1 x d
        feasible = sum(gp.log_prob_below(flat) for gp in self.constraints)
        return X.shape[:-2], [gp.log_ei(flat) + feasible for gp in self.members]

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: Tensor) -> Tensor:
        """``L(x)`` for ``b x 1 x d`` candidates -> ``b`` (see :class:`MarginalLogAcquisition`)."""
        return self._log_marginal(X)


class MarginalLogQCEI(MarginalLogQEI):
    r""":class:`MarginalLogAcquisition` of batch constrained EI per draw: the appendix's
    constrained and batch extensions together.

    A joint draw pairs each member's draw ``s`` with every constraint GP's draw ``s``, as in
    :class:`MarginalLogCEI`; per joint draw the value is the inner Monte Carlo batch constrained
    EI over fixed base samples, one set per GP
    (:func:`~orthobench.surrogates.batch_ei.log_qcei`: ``max_j`` over the batch of the
    improvement times the smoothed feasibility of point ``j``); the controls are every GP's
    whitened draws side by side. ``batch x q x d`` -> ``batch``; pending points join every batch.

    Args:
        model, members, controls, weights, base_samples: As :class:`MarginalLogQEI`.
        constraints, constraint_controls: As :class:`MarginalLogCEI`.
        constraint_base_samples: Per constraint, its standard normal draws of
            ``base_samples``' shape, independent of them and of each other (the GPs are
            independent): per draw, other columns of one scrambled Sobol' net with
            ``base_samples``, as OrthoBO draws them, not a net scrambled apart (a scrambling
            treats every point alike, so the rows of two would be functions of each other).
        kwargs: ``estimator``, ``alpha``, ``point_weights`` and ``X_pending`` of
            :class:`MarginalLogQEI`.
    """

    def __init__(
        self,
        model: Model,
        members: Sequence[ThetaSampledGP],
        controls: Sequence[Tensor],
        weights: Sequence[float] | Tensor,
        *,
        base_samples: Tensor,
        constraints: Sequence[ThetaSampledGP],
        constraint_controls: Sequence[Tensor],
        constraint_base_samples: Sequence[Tensor],
        **kwargs: Any,
    ) -> None:
        super().__init__(model, members, controls, weights, base_samples=base_samples, **kwargs)
        if len(constraint_base_samples) != len(constraints) or any(
            b.shape != base_samples.shape for b in constraint_base_samples
        ):
            raise ValueError(
                f"Need one `constraint_base_samples` tensor of shape {tuple(base_samples.shape)} "
                f"per constraint, but got shapes {[tuple(b.shape) for b in constraint_base_samples]} "
                f"for {len(constraints)} constraints."
            )
        self.constraints = list(constraints)
        self.controls = _joint_controls(self, constraints, constraint_controls)
        self.constraint_base_samples = [b.detach() for b in constraint_base_samples]

    def _member_log_values(self, X: Tensor) -> tuple[torch.Size, list[Tensor]]:
        columns = self._columns(X)
        if self._pending is None:
            self._pending = self._pending_samples(self.members, self.base_samples)
            self._constraint_pending = [
                self._pending_samples([gp], b)[0]
                for gp, b in zip(self.constraints, self.constraint_base_samples, strict=True)
            ]
        flat = X.reshape(-1, *X.shape[-2:])  # b x q x d
        triples = [
            (gp, b[..., columns], pending)
            for gp, b, pending in zip(
                self.constraints,
                self.constraint_base_samples,
                self._constraint_pending,
                strict=True,
            )
        ]
        eps = self.base_samples[..., columns]
        return X.shape[:-2], [
            log_qcei(gp, flat, eps, triples, pending=pending, canonical=self._canonical)
            for gp, pending in zip(self.members, self._pending, strict=True)
        ]


def _joint_controls(
    acqf: MarginalLogAcquisition,
    constraints: Sequence[ThetaSampledGP],
    constraint_controls: Sequence[Tensor],
) -> list[Tensor]:
    """Per member of ``acqf``, its controls with every constraint's whitened draws side by side
    (a joint draw's controls: independent standard normals, mean 0 and covariance I).

    Raises:
        ValueError: without constraints, or when the GPs' draw counts differ.
    """
    if len(constraints) == 0 or len(constraints) != len(constraint_controls):
        raise ValueError(
            f"Need at least one constraint GP and one controls tensor per constraint, but "
            f"got {len(constraints)} GPs and {len(constraint_controls)} controls."
        )
    for i, (gp, z) in enumerate(zip(constraints, constraint_controls, strict=True)):
        if gp.num_samples != z.shape[0] or any(
            m.num_samples != gp.num_samples for m in acqf.members
        ):
            raise ValueError(
                f"Constraint {i}: every GP needs the same number of draws, but the members "
                f"have {[m.num_samples for m in acqf.members]} and the constraint "
                f"{gp.num_samples} (controls: {z.shape[0]})."
            )
    extra = [z.detach() for z in constraint_controls]
    return [torch.cat([z, *extra], dim=-1) for z in acqf.controls]


def _factored_estimates(
    log_eis: Sequence[Tensor], draw_weights: Sequence[Tensor], log_weights: Tensor
) -> tuple[Tensor, Tensor, Tensor, list[Tensor], Tensor | None]:
    """``(log_scale, value, mc_value, scaled, rel)`` from the members' ``S_m x b`` log-EI.

    ``scaled[m] = exp(l_m - max_s l_m)`` (``S_m x b``) and ``rel`` (``M x b``,
    ``exp(A_m - A)`` of :class:`MarginalLogEI`; None for one member, where it is 1) are what the
    gradient needs. Factoring the maximum out is exact: the estimates are weighted sums.
    """
    scaled, log_terms, estimates, naive = [], [], [], []
    for log_ei, weights, log_weight in zip(log_eis, draw_weights, log_weights, strict=True):
        # The maximum is a constant factor of the values: detached, it changes no gradient.
        top = log_ei.max(dim=0).values.detach()
        values = (log_ei - top).exp()
        scaled.append(values)
        log_terms.append(top + log_weight)
        estimates.append(weights @ values)
        naive.append(values.mean(dim=0))
    if len(scaled) == 1:
        return log_terms[0], estimates[0], naive[0], scaled, None
    terms = torch.stack(log_terms)  # M x b
    log_scale = terms.max(dim=0).values
    rel = (terms - log_scale).exp()
    value = (rel * torch.stack(estimates)).sum(0)
    mc_value = (rel * torch.stack(naive)).sum(0)
    return log_scale, value, mc_value, scaled, rel


class _LogEnsembleEstimate(torch.autograd.Function):
    r"""``L = A + log max(value, alpha mc_value)`` from the members' log-EI, with an analytic
    backward.

    With ``D = max(value, alpha mc_value)`` and ``e_{m,s} = exp(l_{m,s} - max_s l_{m,s})``,
    ``dL / dl_{m,s} = rel_m c_{m,s} e_{m,s} / D``, where ``c_{m,s} = a_{m,s}`` (the draw weights)
    where the estimate is the larger and ``alpha / S_m`` where the floor is. Why by hand:
    autograd records the two dozen operations of the factored form and replays them backward
    (docs/design.md, "EI in log space").
    """

    @staticmethod
    def forward(
        ctx,
        alpha: float,
        draw_weights: list[Tensor],
        log_weights: Tensor,
        *log_eis: Tensor,
    ) -> Tensor:
        log_scale, value, mc_value, scaled, rel = _factored_estimates(
            log_eis, draw_weights, log_weights
        )
        floor = alpha * mc_value
        on_estimate = value >= floor
        ctx.alpha, ctx.draw_weights, ctx.ensemble = alpha, draw_weights, rel is not None
        denominator = torch.where(on_estimate, value, floor)
        ctx.save_for_backward(denominator, on_estimate, *scaled, *([] if rel is None else [rel]))
        return log_scale + denominator.log()

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        denominator, on_estimate, *saved = ctx.saved_tensors
        scaled, rel = (saved[:-1], saved[-1]) if ctx.ensemble else (saved, None)
        coef = grad / denominator
        to_estimate = coef * on_estimate
        to_floor = (coef - to_estimate) * ctx.alpha
        grads = []
        for m, (values, weights) in enumerate(zip(scaled, ctx.draw_weights, strict=True)):
            scale = 1.0 if rel is None else rel[m]
            grads.append(
                torch.outer(weights, to_estimate * scale)
                .add_(to_floor * scale / values.shape[0])
                .mul_(values)
            )
        return None, None, None, *grads


def constrained_incumbent(targets: torch.Tensor, feasible: torch.Tensor) -> float:
    """Constrained EI's incumbent among ``t`` (standardized, maximized) ``targets``: the best
    feasible one, or, with none feasible yet, 6 below the lowest (BoTorch's fallback of a value
    under every observation, so the acquisition seeks feasibility first)."""
    feasible = feasible.to(targets.device)
    return float(targets[feasible].max()) if feasible.any() else float(targets.min()) - 6.0
