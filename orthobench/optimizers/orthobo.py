r"""OrthoBO (paper Alg. 1) and its like-for-like naive baseline MC-EI.

Each step: MAP-fit every ensemble member (:mod:`orthobench.surrogates.fit`), build its Laplace
posterior over hyperparameters (:mod:`orthobench.surrogates.laplace`), draw ``S`` whitened
hyperparameter samples once, and maximize the outer-log marginal EI over those fixed draws
(:class:`orthobench.acquisition.MarginalLogEI`) with ``optimize_acqf``; a step of several
points, or one with points still being evaluated (``ask(n, pending=P)``), maximizes the nested
marginal qEI (:class:`orthobench.acquisition.MarginalLogQEI`) instead, the pending points its
``X_pending``. After the new observation arrives, ensemble weights are updated from each
member's predictive log score (:mod:`orthobench.surrogates.ensemble`).

:class:`MCEI` runs the same pipeline with the naive mean of iid theta draws: the like-for-like
baseline of every comparison (docs/design.md, "Like-for-like baseline"). Given the same seed, an
OrthoBO with a control-variate estimator on iid draws (``orth``, ``orth-shrink``, ...) uses
exactly MCEI's draws and only the estimator differs (a suite seeds each label apart); the default
(``qmc-owen+rb``, :mod:`orthobench.theta_estimators`) draws its own points.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import torch
from annotated_types import Ge, Interval

from orthobench.acquisition import (
    INNER_SAMPLES,
    MarginalLogCEI,
    MarginalLogEI,
    MarginalLogQCEI,
    MarginalLogQEI,
    constrained_incumbent,
    draw_inner_base_samples,
)
from orthobench.config.params import (
    Count,
    KernelEnsemble,
    PositiveFloat,
    ThetaEstimatorName,
    check_even_budgets,
    check_value,
)
from orthobench.devices import FIT_DEVICES
from orthobench.diagnostics import OrthoBOStep
from orthobench.optimizers.base import Suggestion
from orthobench.optimizers.gp_base import GPOptimizer
from orthobench.seeding import torch_seed
from orthobench.surrogates.batch_ei import canonical_order
from orthobench.surrogates.ensemble import EnsembleMember, SurrogateEnsemble, check_weight_floor
from orthobench.surrogates.fit import FITS, ConstraintFit, WarmStarts, constraint_fit
from orthobench.surrogates.laplace import THETA_SAMPLING, LaplacePosterior
from orthobench.surrogates.theta_algebra import get_theta
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from orthobench.theta_estimators import (
    DEFAULT_THETA_ESTIMATOR,
    ThetaEstimator,
    draw_thetas,
    parse_theta_estimator,
    require_equal_weight_rule,
    require_equal_weights,
)

# Raw-sample evaluations are chunked to about this many (draw, candidate, training point) kernel
# entries (8 MiB in float64). The marginal moments already work through the draws in blocks
# that stay in cache, so larger chunks only save per-call overhead; one 512 x 512 x n chunk
# would need gigabytes at n = 100.
_RAW_CHUNK_ENTRIES = 2**20

#: A budget of theta draws per member and step: cross-fitting (``orth-crossfit``) needs 2 draws
#: per fold. The registry checks a suite's value at load, the constructor one given in code.
ThetaBudget = Annotated[Count, Ge(4)]

#: How a step of ``q > 1`` points maximizes the batch acquisition (:class:`OrthoBO`'s
#: ``batch_maximization``).
BATCH_MAXIMIZATIONS = ("greedy", "joint")

# Coarse-stage results polished on all the draws (the best by the full acquisition); polishing
# all 8 restarts instead missed the best basin about as often (docs/benchmarks.md,
# "Acquisition maximization").
_POLISHED_STARTS = 2


class OrthoBO(GPOptimizer):
    r"""Orthogonalized marginal-EI Bayesian optimization with a GP ensemble (paper Alg. 1).

    Args:
        dim: Number of search dimensions ``d``.
        kernel: GP kernel name, or a list of names for an ensemble (one member each; see
            :data:`orthobench.surrogates.gp.KERNELS`).
        theta_samples: Hyperparameter draws ``S`` per member and step, i.e. EI evaluations per
            candidate and member; for a point-set estimator the budget of EI evaluations (the
            rule uses the largest count it allows within it).
        estimator: Estimator name ``<base>[+rb][@sampling]`` (:mod:`orthobench.theta_estimators`):
            a control-variate estimator of :data:`orthobench.estimators.ESTIMATORS` (``orth`` is
            the paper's), or a point set (``sr3``, ``radial-cross``, ``qmc-owen``, ...) whose
            weighted sum is the estimate, optionally Rao-Blackwellized over the constant mean.
        theta_sampling: ``"iid"``, ``"antithetic"`` or ``"qmc"`` draws of theta for a
            control-variate estimator named without ``@sampling``. Point sets fix their own
            points: with one, this must stay ``"iid"``. (Point sets are named in ``estimator``,
            not here, so that one string names the whole estimator everywhere: in suites, in probe
            tables, and as the default.)
        rb: Integrate the GP's constant mean out in closed form (Rao-Blackwellization); the same
            as the ``+rb`` suffix of ``estimator`` (either turns it on).
        alpha: Relative floor of the outer log (see :mod:`orthobench.acquisition`).
        tau: Temperature of the ensemble weight update.
        delta: Floor of the ensemble weights.
        raw_samples: Raw samples of ``optimize_acqf``'s initialization.
        num_restarts: Restarts of ``optimize_acqf``.
        screen_theta_samples: Draws of the acquisition that scores the ``raw_samples`` points of
            ``optimize_acqf``'s initialization (the same estimator with this budget); the
            ``num_restarts`` starting points drawn from those scores are then climbed on all
            ``theta_samples`` draws, so the candidate is a local maximum of the full
            acquisition. ``None``, or a budget of at least ``theta_samples``, screens on all
            draws (the paper's procedure); the default's cost and candidate quality against it
            are in docs/benchmarks.md, "Acquisition maximization". Not used when the coarse stage
            runs (it screens on its own draws).
        coarse_theta_samples: Draws of a coarse acquisition (the same estimator with this budget)
            on which the whole multistart, screen and restarts, runs first; the two best results
            by the full acquisition are then polished on all ``theta_samples`` draws. ``None``
            (default), or a budget of at least ``theta_samples``, runs no coarse stage. Only on
            the CPU, where the draws are the cost. Not the default: the restarts climb the coarse
            acquisition's own local maxima, so its candidate falls short of the full
            acquisition's best more often (docs/benchmarks.md, "Acquisition maximization"). On a
            GPU an evaluation costs its kernel launches, so fewer draws save little there, and
            the stage is skipped.
        batch_theta_samples: Draws per member of the search when a step proposes ``q > 1``
            points (the nested marginal qEI, :class:`~orthobench.acquisition.MarginalLogQEI`):
            the smaller of this and ``theta_samples``; ``None``: ``theta_samples``. Its own
            budget because a batch evaluation costs about ``q`` :data:`INNER_SAMPLES`-sample
            evaluations per draw. With ``batch_maximization: greedy`` only the greedy search
            runs on these draws and the joint climb that ends the step on all ``theta_samples``
            (docs/benchmarks.md, "Batch steps").
        batch_maximization: How a step of ``q > 1`` points maximizes the batch acquisition:
            ``"greedy"`` (default) builds the batch one point at a time on
            ``batch_theta_samples`` draws, each point maximized with the earlier ones pending
            (``optimize_acqf(sequential=True)``; its raw samples scored by that acquisition, as
            the screen knows no pending points), then climbs all ``q x d`` coordinates jointly
            from it on all ``theta_samples`` draws, so the batch is a local maximum of the full
            acquisition; ``"joint"`` runs the multistart over all ``q x d`` coordinates from the
            screened raw batches, on ``batch_theta_samples`` draws. On 20 states at ``q = 4``
            the joint multistart fell short of the best batch found by up to 0.49 in log qEI,
            the default by at most 0.018 (docs/benchmarks.md, "Batch steps"). The coarse stage,
            when it runs, is joint.
        fit: MAP fit of the members: ``"fast"`` (default;
            :func:`orthobench.surrogates.fit.fit_fast`, warm-started from the previous step's
            fit of each member; docs/benchmarks.md, "GP fit", compares it with BoTorch's) or
            ``"botorch"`` (``fit_gpytorch_mll``).
        fit_device: Where the members are fitted and their Laplace posteriors built
            (:data:`orthobench.devices.FIT_DEVICES`; ``auto``: on the CPU for small GPs,
            :func:`orthobench.devices.fit_device`); the acquisition runs on ``device``.
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.

    Pending points (``ask(n, pending=P)``, ``p x d``): the closed-form marginal EI knows none, so
    such a step is a batch step at every ``n``, on the nested marginal qEI (constrained: qCEI)
    with ``X_pending = P`` on every acquisition of the step (search, screen, coarse stage, climb):
    ``batch_theta_samples`` draws, ``batch_maximization`` and the coarse stage as for ``q > 1``
    (at ``n = 1`` the greedy path is one maximization of the candidate beside the pending
    points, then its climb on all ``theta_samples`` draws). The pending points take the first
    ``p`` columns of each draw's inner base samples, the candidates the next ``n``.

    ``ask`` records in ``Suggestion.info`` an :class:`~orthobench.diagnostics.OrthoBOStep` (the
    estimator, the screen's and the coarse stage's draw budgets, the ensemble weights, per member
    the Laplace Hessian's eigenvalues, the draws that needed Cholesky jitter and the fit's
    stationarity) and a ``fallback`` string when a fallback was taken (GP fit kept its
    initialization, Hessian not positive definite, re-centring stalled, Cholesky jitter).

    State beyond the history (:meth:`state_dict`): the ensemble weights, and with ``fit="fast"``
    the members' last fitted thetas (the warm starts).
    """

    min_observations = 2
    handles_constraints = True
    accepts_pending = True

    def __init__(
        self,
        dim: int,
        *,
        kernel: KernelEnsemble = "matern52-ard",
        theta_samples: ThetaBudget = 512,
        estimator: ThetaEstimatorName = DEFAULT_THETA_ESTIMATOR,
        theta_sampling: Literal[THETA_SAMPLING] = "iid",
        rb: bool = False,
        alpha: Annotated[float, Interval(gt=0.0, le=1.0)] = 1e-3,
        tau: PositiveFloat = 1.0,
        delta: Annotated[float, Interval(ge=0.0, lt=1.0)] = 0.001,
        raw_samples: Count = 512,
        num_restarts: Count = 8,
        screen_theta_samples: ThetaBudget | None = 64,
        coarse_theta_samples: ThetaBudget | None = None,
        batch_theta_samples: ThetaBudget | None = 64,
        batch_maximization: Literal[BATCH_MAXIMIZATIONS] = "greedy",
        fit: Literal[FITS] = "fast",
        fit_device: Literal[FIT_DEVICES] = "auto",
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(
            dim,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            fit_device=fit_device,
            seed=seed,
            device=device,
            dtype=dtype,
        )
        check_value(ThetaBudget, theta_samples, field="theta_samples")
        check_value(ThetaBudget | None, screen_theta_samples, field="screen_theta_samples")
        check_value(ThetaBudget | None, coarse_theta_samples, field="coarse_theta_samples")
        check_value(ThetaBudget | None, batch_theta_samples, field="batch_theta_samples")
        if batch_maximization not in BATCH_MAXIMIZATIONS:
            raise ValueError(
                f"`batch_maximization` must be one of {BATCH_MAXIMIZATIONS}, but got "
                f"{batch_maximization!r}."
            )
        if theta_sampling not in THETA_SAMPLING:
            raise ValueError(
                f"`theta_sampling` must be one of {THETA_SAMPLING}, but got {theta_sampling!r}."
            )
        OrthoBO.check_params(
            kernel=kernel,
            theta_samples=theta_samples,
            estimator=estimator,
            theta_sampling=theta_sampling,
            delta=delta,
            screen_theta_samples=screen_theta_samples,
            coarse_theta_samples=coarse_theta_samples,
            batch_theta_samples=batch_theta_samples,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
        )
        spec = _resolve_estimator(estimator, theta_sampling)
        self.theta_estimator = spec._replace(rb=spec.rb or rb)
        if not 0 < alpha <= 1:
            raise ValueError(
                f"`alpha` is relative to the naive estimate and must be in (0, 1], but got {alpha=}."
            )
        self.ensemble = SurrogateEnsemble(_kernels(kernel), tau=tau, delta=delta, fit=fit)
        self.fit = fit
        self._warm_starts = WarmStarts(fit)
        self.theta_samples = theta_samples
        self.screen_theta_samples = screen_theta_samples
        self.coarse_theta_samples = coarse_theta_samples
        self.batch_theta_samples = batch_theta_samples
        self.batch_maximization = batch_maximization
        self.estimator = estimator
        self.theta_sampling = theta_sampling
        self.rb = self.theta_estimator.rb
        self.alpha = alpha
        # The previous step's members, kept to score the observation that follows them.
        self._previous: list[ThetaSampledGP] = []
        # On a constrained task, this step's (model, Laplace posterior) of each constraint.
        self._constraint_fits: list[ConstraintFit] = []

    @staticmethod
    def check_params(
        *,
        kernel: str | list[str],
        theta_samples: int,
        estimator: str,
        theta_sampling: str,
        delta: float,
        screen_theta_samples: int | None,
        coarse_theta_samples: int | None,
        batch_theta_samples: int | None = None,
        **rest: Any,
    ) -> None:
        """OrthoBO's rules over several parameters
        (:meth:`~orthobench.optimizers.base.Optimizer.check_params`): the multistart's
        (:meth:`GPOptimizer.check_params <orthobench.optimizers.gp_base.GPOptimizer.check_params>`);
        ``estimator`` and
        ``theta_sampling`` name one sampling (:func:`_resolve_estimator`); with antithetic draws
        every budget that draws is even, checked here rather than when the screen or coarse
        stage first draws (:func:`~orthobench.config.params.check_even_budgets`); the weight
        floor ``delta`` suits the ensemble of ``kernel``
        (:func:`~orthobench.surrogates.ensemble.check_weight_floor`)."""
        budgets = {
            "theta_samples": theta_samples,
            "screen_theta_samples": screen_theta_samples,
            "coarse_theta_samples": coarse_theta_samples,
            "batch_theta_samples": batch_theta_samples,
        }
        GPOptimizer.check_params(**rest)
        check_even_budgets(_resolve_estimator(estimator, theta_sampling), budgets)
        check_weight_floor(delta, len(_kernels(kernel)))

    def check_constraints(self) -> None:
        """A point set with unequal weights cannot pair the draws of several GPs
        (:func:`~orthobench.theta_estimators.require_equal_weight_rule`)."""
        require_equal_weight_rule(self.theta_estimator)

    def _on_tell(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Update the ensemble weights from the log predictive density of the new points under
        the members fitted before them (each observation is scored once)."""
        self._warm_starts.advance()
        if self._previous:
            scores = torch.stack([gp.log_predictive_density(x, -y) for gp in self._previous])
            self.ensemble.update(scores)
            self._previous = []

    def acquisition(self) -> MarginalLogEI:
        """Fit the ensemble on the current history and build its acquisition (for probes).

        Fits and theta draws are seeded by the optimizer seed and the number of asks so far:
        called after an ``ask(1)`` without pending points and before the matching ``tell``, this
        rebuilds exactly the acquisition that ``ask`` maximized (a batch step's, ``n > 1`` or
        with pending points, is the nested marginal qEI, which this one-point acquisition is
        not). Fresh draws for probe rebuilds come from
        :func:`orthobench.theta_estimators.draw_thetas` on ``self.ensemble.members[m].laplace``
        with the probe's own seeds.
        """
        return self._build_acquisition(self._fit())

    def _fit(self) -> list[EnsembleMember]:
        """Fit the ensemble on the objective and, on a constrained task, one GP (the first
        member's kernel, MAP and Laplace posterior) per constraint, kept for the acquisition."""
        device = self._fit_device(self.train_x.shape[0])
        with torch_seed(self._step_seed("fit")):
            members = self.ensemble.fit(
                self.train_x, -self.train_y, warm_starts=self._warm_starts.current, device=device
            )
            self._constraint_fits = [
                constraint_fit(self.train_x, c, members[0].kernel, self.fit) for c in self.train_c.T
            ]
        self._warm_starts.record([get_theta(m.model) for m in members])
        return members

    def _incumbent(self, member: EnsembleMember) -> float | None:
        """EI's incumbent on ``member``'s standardized scale: on a constrained task
        :func:`~orthobench.acquisition.constrained_incumbent`; None (the best observation) otherwise."""
        if not self._constraint_fits:
            return None
        return constrained_incumbent(member.model.train_targets, self.feasible)

    def _build_acquisition(
        self, members: list[EnsembleMember], theta_samples: int | None = None, q: int = 1
    ) -> MarginalLogEI | MarginalLogQEI | MarginalLogCEI | MarginalLogQCEI:
        """The acquisition of batches of ``q`` points on ``theta_samples`` draws per member
        (default: ``self.theta_samples``): marginal EI at ``q = 1``, the nested marginal qEI on
        :data:`INNER_SAMPLES` scrambled-Sobol' normal base samples per draw, seeded per step,
        above or with the ask's pending points (its ``X_pending``; :meth:`_batch_step`); on a
        constrained task the marginal constrained EI (batch constrained EI in a batch step), each
        joint draw pairing a member's draw with every constraint GP's draw of the same index
        (each GP's draws of its own seed: independent, so a pair is a draw of the joint
        posterior)."""
        budget = theta_samples or self.theta_samples
        gps: list[ThetaSampledGP] = []
        controls, point_weights = [], []
        for i, member in enumerate(members):
            draws = draw_thetas(
                member.laplace, self.theta_estimator, budget, seed=self._step_seed("theta", i)
            )
            gps.append(draws.gp(member.model, self._incumbent(member)))
            controls.append(draws.z)
            point_weights.append(draws.weights)
        spec = self.theta_estimator
        common = {
            "estimator": "mc" if spec.point_set else spec.base,
            "alpha": self.alpha,
            "point_weights": point_weights,
        }
        args = (members[0].model, gps, controls, self.ensemble.weights)
        if self._constraint_fits:
            return self._constrained_acquisition(args, budget, q, common)
        if not self._batch_step(q):
            return MarginalLogEI(*args, **common)
        return MarginalLogQEI(
            *args,
            base_samples=self._inner_base_samples(gps, q)[0],
            X_pending=self.pending,
            **common,
        )

    def _batch_step(self, q: int) -> bool:
        """Whether a step of ``q`` points runs on the batch acquisition: at ``q > 1``, and with
        pending points, which the closed-form marginal EI knows nothing of."""
        return q > 1 or self.pending is not None

    def _inner_base_samples(
        self, gps: list[ThetaSampledGP], q: int, count: int = 1
    ) -> list[torch.Tensor]:
        """The step's inner base samples of a batch acquisition of ``q`` points on ``gps``' draws,
        each draw its own :data:`~orthobench.acquisition.INNER_SAMPLES`
        (:func:`draw_inner_base_samples`), for ``count`` independent GPs (the objective, then
        each constraint): one ``S x K x (p + q)`` block each, the first ``p`` columns the ask's
        ``p`` pending points'.

        A draw's blocks are the columns of *one* scrambled Sobol' net of ``count (p + q)``
        dimensions, so that sample ``k`` of every GP is jointly stratified. A net of its own per
        GP, scrambled by a seed of its own, would not do: a scrambling keeps or flips a point's
        leading digits for every point alike, so one GP's sample ``k`` would be a fixed function
        of another's, and a draw's batch constrained EI would converge with ``K`` to another
        value than its own (42% off on a Gramacy state)."""
        seed = self._step_seed("inner") % (2**31)
        draws = max(gp.num_samples for gp in gps)
        width = self._n_pending() + q
        joint = draw_inner_base_samples(draws, count * width, seed).to(self.train_x)
        return list(joint.split(width, dim=-1))

    def _n_pending(self) -> int:
        """Number ``p`` of the ask's pending points."""
        return 0 if self.pending is None else self.pending.shape[0]

    def _constrained_acquisition(
        self, args: tuple, budget: int, q: int, common: dict[str, Any]
    ) -> MarginalLogCEI | MarginalLogQCEI:
        """:class:`MarginalLogCEI` (``q = 1``) or :class:`MarginalLogQCEI` (:meth:`_batch_step`)
        of the members' draws (``args``: model, members, controls, ensemble weights) and the
        constraint GPs' draws, each GP with its own inner base samples in the batch case
        (:meth:`_inner_base_samples`: the blocks of one net per draw).

        Raises:
            ValueError: for a point set with unequal weights
                (:func:`~orthobench.theta_estimators.require_equal_weights`).
        """
        for w in common["point_weights"]:
            require_equal_weights(w, self.estimator)
        constraint_gps, constraint_controls = [], []
        for i, fit in enumerate(self._constraint_fits):
            draws = draw_thetas(
                fit.laplace,
                self.theta_estimator,
                budget,
                seed=self._step_seed("theta-constraint", i),
            )
            constraint_gps.append(draws.gp(fit.model))
            constraint_controls.append(draws.z)
        common = {
            **common,
            "constraints": constraint_gps,
            "constraint_controls": constraint_controls,
        }
        if not self._batch_step(q):
            return MarginalLogCEI(*args, **common)
        base_samples, *constraint_base_samples = self._inner_base_samples(
            args[1], q, 1 + len(constraint_gps)
        )
        return MarginalLogQCEI(
            *args,
            base_samples=base_samples,
            constraint_base_samples=constraint_base_samples,
            X_pending=self.pending,
            **common,
        )

    def _theta_budget(self, q: int) -> int:
        """Draws per member of a step that proposes ``q`` points (``batch_theta_samples`` for a
        batch step, :meth:`_batch_step`)."""
        if not self._batch_step(q) or self.batch_theta_samples is None:
            return self.theta_samples
        return min(self.theta_samples, self.batch_theta_samples)

    def _coarse_samples(self, budget: int) -> int | None:
        """The coarse stage's draw budget for a step on ``budget`` draws, or ``None`` when it
        does not run."""
        coarse = self.coarse_theta_samples
        if coarse is None or coarse >= budget or self.device.type != "cpu":
            return None
        return coarse

    def _screen_samples(self, budget: int) -> int | None:
        """The raw-sample screen's draw budget for a step on ``budget`` draws, or ``None`` when
        it screens on all of them."""
        screen = self.screen_theta_samples
        return None if screen is None or screen >= budget else screen

    def _raw_chunk(self, theta_samples: int, q: int) -> int:
        """Raw batches per chunk: the kernel entries per batch (with the training and the
        pending points), plus in a batch step its inner samples, to about
        :data:`_RAW_CHUNK_ENTRIES`."""
        inner = INNER_SAMPLES if self._batch_step(q) else 0
        per_batch = theta_samples * q * (self.train_x.shape[0] + self._n_pending() + inner)
        return max(1, _RAW_CHUNK_ENTRIES // per_batch)

    def _ask(self, n: int) -> Suggestion:
        """The ``n`` points maximize the marginal acquisition: in a batch step (``n > 1`` or
        pending points, :meth:`_batch_step`) as ``batch_maximization`` says
        (:meth:`_maximize_greedy`, or jointly as BoTorch's qLogEI)."""
        start = time.perf_counter()
        members = self._fit()
        fitted = time.perf_counter()
        budget = self._theta_budget(n)
        acqf = self._build_acquisition(members, budget, n)
        coarse, screen = self._coarse_samples(budget), self._screen_samples(budget)
        if coarse is None and self._batch_step(n) and self.batch_maximization == "greedy":
            search, screen = acqf, None
            if budget < self.theta_samples:
                acqf = self._build_acquisition(members, self.theta_samples, n)
                coarse = budget  # the greedy search is the coarse stage
            candidate = self._maximize_greedy(search, acqf, n, budget)
        elif coarse is None:
            screen_acqf = None if screen is None else self._build_acquisition(members, screen, n)
            options = {"init_batch_limit": self._raw_chunk(screen or budget, n)}
            candidate = self._maximize(acqf, q=n, options=options, screen=screen_acqf)
        else:
            screen = None
            # Coarse to fine: the multistart on fewer draws, then the best of its results by the
            # full acquisition polished on all of them.
            results = self._maximize(
                self._build_acquisition(members, coarse, n),
                q=n,
                options={"init_batch_limit": self._raw_chunk(coarse, n)},
                return_best_only=False,
            ).reshape(-1, n, self.dim)
            with torch.no_grad():
                values = acqf(results)
            best = results[values.argsort(descending=True)[:_POLISHED_STARTS]]
            candidate = self._maximize(acqf, q=n, batch_initial_conditions=best)
        end = time.perf_counter()
        self._previous = acqf.members if len(acqf.members) > 1 else []
        return Suggestion(
            x=candidate.detach().cpu().numpy(),
            fit_seconds=fitted - start,
            acq_seconds=end - fitted,
            info={
                **self._diagnostics(acqf, screen, coarse).to_info(),
                "fallback": self._fallback(acqf),
            },
        )

    def _maximize_greedy(
        self, search: MarginalLogQEI, acqf: MarginalLogQEI, n: int, budget: int
    ) -> torch.Tensor:
        """Sequential greedy on ``search`` (``budget`` draws), then a joint climb on ``acqf``
        from it: ``n`` one-point maximizations, each with the earlier points pending after the
        ask's own (the acquisitions' ``X_pending``, which ``optimize_acqf`` restores), then one
        L-BFGS-B restart over all ``n d`` coordinates from the greedy batch. The climb keeps the
        better of the two batches by ``acqf`` (L-BFGS-B only climbs, but a failed climb falls
        back to a Sobol' batch)."""
        options = {"init_batch_limit": self._raw_chunk(budget, n)}
        greedy = self._maximize(search, q=n, options=options, sequential=True)
        # The climb from the greedy batch in its canonical order, on the acquisition without the
        # sort (smooth where points cross; the same value at the start).
        start = canonical_order(greedy.unsqueeze(0))
        with acqf.in_given_order():
            climbed = self._maximize(acqf, q=n, batch_initial_conditions=start)
        greedy = start[0]
        with torch.no_grad():
            values = acqf(torch.stack([greedy, climbed]))
        return climbed if values[1] >= values[0] else greedy

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "ensemble_weights": self.ensemble.weights.tolist(),
            **self._warm_starts.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        weights = torch.tensor(state["ensemble_weights"], dtype=self.ensemble.weights.dtype)
        if weights.shape != self.ensemble.weights.shape:
            raise ValueError(
                f"The state has {weights.shape[0]} ensemble weights, but the ensemble has "
                f"{self.ensemble.weights.shape[0]} members."
            )
        self.ensemble.weights = weights
        self._warm_starts.load_state_dict(state)

    def _diagnostics(
        self, acqf: MarginalLogEI, screen: int | None, coarse: int | None
    ) -> OrthoBOStep:
        members = self.ensemble.members
        return OrthoBOStep(
            estimator=self.estimator,
            theta_sampling=self.theta_sampling,
            rb=self.rb,
            theta_samples=self.theta_samples,
            n_evaluations=tuple(gp.num_samples for gp in acqf.members),
            ensemble=self.ensemble.diagnostics(),
            eig_floored=tuple(m.laplace.floored for m in members),
            min_eigenvalue=tuple(float(m.laplace.raw_eigenvalues[0]) for m in members),
            recenter_shift=tuple(m.laplace.recenter_shift for m in members),
            jittered_draws=tuple(gp.n_jittered for gp in acqf.members),
            fit_device=self._fit_device(self.train_x.shape[0]).type,
            fit_grad_norm=tuple(m.fit_info["grad_norm"] for m in members),
            fit_stationary=tuple(m.fit_info["stationary"] for m in members),
            screen_theta_samples=screen,
            coarse_theta_samples=coarse,
        )

    def _fallback(self, acqf: MarginalLogEI) -> str | None:
        """Every fallback the step's members and constraint GPs took, and the ensemble's last
        weight update (:attr:`~orthobench.surrogates.ensemble.SurrogateEnsemble.fallback`), as
        one text (None: none)."""
        fallbacks = (
            [] if self.ensemble.fallback is None else [f"ensemble: {self.ensemble.fallback}"]
        )
        for member, gp in zip(self.ensemble.members, acqf.members, strict=True):
            fallbacks += _gp_fallbacks(member.kernel, member.fit_info, member.laplace, gp)
        for i, (fit, gp) in enumerate(
            zip(self._constraint_fits, getattr(acqf, "constraints", ()), strict=True)
        ):
            fallbacks += _gp_fallbacks(f"constraint {i}", fit.fit_info, fit.laplace, gp)
        return "; ".join(fallbacks) or None


def _gp_fallbacks(
    name: str, fit_info: dict[str, Any], lap: LaplacePosterior, gp: ThetaSampledGP
) -> list[str]:
    """The fallbacks of one GP's step, each prefixed by ``name``: its MAP fit's, its Laplace
    posterior's, an indefinite Hessian, and theta draws that needed Cholesky jitter."""
    fallbacks = [f"{name}: {text}" for text in (fit_info.get("fallback"), lap.fallback) if text]
    if lap.indefinite:
        fallbacks.append(
            f"{name}: Laplace Hessian not positive definite (min eigenvalue "
            f"{float(lap.raw_eigenvalues[0]):.3g}); eigenvalues floored at {lap.eig_floor:.3g}"
        )
    if gp.n_jittered:
        fallbacks.append(f"{name}: {gp.n_jittered} theta draw(s) needed Cholesky jitter")
    return fallbacks


def _kernels(kernel: str | list[str]) -> list[str]:
    """The ensemble's kernels: one member per name."""
    return [kernel] if isinstance(kernel, str) else list(kernel)


def _resolve_estimator(estimator: str, theta_sampling: str) -> ThetaEstimator:
    """The estimator that ``estimator`` and ``theta_sampling`` name together (its ``rb`` is the
    name's own)."""
    spec = parse_theta_estimator(estimator)
    if spec.point_set and theta_sampling != "iid":
        raise ValueError(
            f"Point set {spec.base!r} fixes its own points; `theta_sampling` must stay 'iid', but got "
            f"{theta_sampling!r}. Name a control-variate estimator (e.g. `estimator: orth-shrink`) to "
            "choose the sampling."
        )
    if "@" in estimator and theta_sampling not in ("iid", spec.sampling):
        raise ValueError(
            f"`estimator` {estimator!r} and `theta_sampling` {theta_sampling!r} name different samplings."
        )
    if not spec.point_set and "@" not in estimator:
        return spec._replace(sampling=theta_sampling)
    return spec


class MCEI(OrthoBO):
    """MC-EI: OrthoBO's pipeline with the naive theta-MC mean (the like-for-like baseline).

    Same fits, Laplace posteriors and seeds as :class:`OrthoBO` with the same seed, hence the same
    theta draws as OrthoBO with a control-variate estimator on the same ``theta_sampling``; the
    estimator is ``"mc"`` (paper Eq. (3)), so the outer log is the log of the naive estimate.
    Args as :class:`OrthoBO` without ``estimator``, ``rb`` and ``alpha``.
    """

    #: The one estimator of MC-EI: the naive mean of the draws.
    _ESTIMATOR = "mc"

    @staticmethod
    def check_params(**params: Any) -> None:
        """OrthoBO's rules (:meth:`OrthoBO.check_params`) with MC-EI's estimator."""
        OrthoBO.check_params(**params, estimator=MCEI._ESTIMATOR)

    def __init__(
        self,
        dim: int,
        *,
        kernel: KernelEnsemble = "matern52-ard",
        theta_samples: ThetaBudget = 512,
        theta_sampling: Literal[THETA_SAMPLING] = "iid",
        tau: PositiveFloat = 1.0,
        delta: Annotated[float, Interval(ge=0.0, lt=1.0)] = 0.001,
        raw_samples: Count = 512,
        num_restarts: Count = 8,
        screen_theta_samples: ThetaBudget | None = 64,
        coarse_theta_samples: ThetaBudget | None = None,
        batch_theta_samples: ThetaBudget | None = 64,
        batch_maximization: Literal[BATCH_MAXIMIZATIONS] = "greedy",
        fit: Literal[FITS] = "fast",
        fit_device: Literal[FIT_DEVICES] = "auto",
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(
            dim,
            kernel=kernel,
            theta_samples=theta_samples,
            estimator=self._ESTIMATOR,
            theta_sampling=theta_sampling,
            alpha=1.0,
            tau=tau,
            delta=delta,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            screen_theta_samples=screen_theta_samples,
            coarse_theta_samples=coarse_theta_samples,
            batch_theta_samples=batch_theta_samples,
            batch_maximization=batch_maximization,
            fit=fit,
            fit_device=fit_device,
            seed=seed,
            device=device,
            dtype=dtype,
        )
