"""Optuna's ``TPESampler`` [Watanabe2023tpe]_ as the reference TPE, through Optuna's public ask/tell API.

The study has one ``FloatDistribution(0, 1)`` per unit-cube dimension (``x0 .. x{d-1}``) and
minimizes. How our ask/tell maps onto the study:

- :meth:`ask` asks the study for ``n`` trials and keeps them pending; a synchronous loop
  evaluates them and tells them all before the next :meth:`ask`.
- :meth:`tell` completes a pending trial with its value when the told point is that trial's
  point (up to float round-off) and no later trial was completed or added before it. Any other
  told point -- the shared initial design, a point the loop changed (integer rounding), or one
  told after a later trial -- is added as a completed trial with
  ``study.add_trial(create_trial(...))`` (its pending trial, if any, marked FAIL), so Optuna
  models exactly the points that were evaluated, in the order they were told, as a study rebuilt
  from the stored history has them: TPE weighs all but the latest 25 trials of a density less
  the older they are, so the order matters.
- Pending trials not told by the next :meth:`ask` (the loop drops non-finite evaluations) are
  marked FAIL, which TPE ignores.
- Points still being evaluated (``ask(n, pending=P)``, an asynchronous loop) are RUNNING trials
  while the ask samples: one is added at each pending point (``create_trial(state=RUNNING)``)
  and marked FAIL once the ``n`` new trials are sampled, so Optuna's constant liar (below) puts
  them into the bad density ``g``, at ``n = 1`` too. The untold trials of earlier asks are marked
  FAIL as above, pending or not, and a pending point told later is added as a completed trial.
  So the sampler sees the completed trials and the pending points whichever ask proposed them,
  and whether or not the optimizer was rebuilt since: the ask is a function of the seed, the
  history, the state and the pending points.
- Each :meth:`ask` gives the study a new ``TPESampler`` seeded by ``(seed, ask)``, as every other
  optimizer seeds its steps: the sampler's random state is then a function of the ask count,
  and a study rebuilt from the stored trials continues exactly where the original stood (the
  resume contract of :class:`~orthobench.optimizers.base.Optimizer`).

A batch (``n > 1``) relies on Optuna's constant liar (``constant_liar=True``, passed explicitly
although it is Optuna 5's default): while the ``n`` trials of one ask are sampled, the earlier
ones are still RUNNING and join the bad density ``g`` of the later ones (Optuna's
``_split_trials``), which lowers ``l / g`` around them, so the later trials are pushed away
instead of all chasing the same maximum of ``l / g``. Before ``n_startup_trials`` trials are
complete the batch is random sampling, liar or not. At ``n = 1`` the liar changes nothing: the
trial being sampled is excluded from its own split, and the pending trials of the previous ask
were told or marked FAIL before it; only pending points passed to the ask are RUNNING then.

On a constrained task each told trial carries its ``m`` constraint values as Optuna constraints
``c0 .. c{m-1}`` (``Trial.set_constraint``, or ``create_trial(constraints=...)`` for an added
trial; feasible where every value is ``<= 0``, our convention too). ``TPESampler`` reads them
from every trial (``FrozenTrial.constraints``) when it splits the history: an infeasible trial
joins the good density ``l`` only after every feasible one, ranked by its total violation
``sum_i max(c_i, 0)`` (Optuna's ``_split_trials``, the constrained TPE of [Watanabe2023ctpe]_).
Optuna 5 deprecates the sampler's ``constraints_func`` for this per-trial API, which needs no
sampler option, so the unconstrained study is exactly what it was.

``multivariate`` is passed explicitly: Optuna 5 defaults to the multivariate TPE for
single-objective studies, while the paper's TPE and most published baselines are univariate
(docs/design.md, "Univariate TPE by default").

References:
    .. [Watanabe2023tpe] S. Watanabe. Tree-Structured Parzen Estimator: Understanding Its
       Algorithm Components and Their Roles for Better Empirical Performance. arXiv:2304.11127.
    .. [Watanabe2023ctpe] S. Watanabe, F. Hutter. c-TPE: Tree-structured Parzen Estimator with
       Inequality Constraints for Expensive Hyperparameter Optimization. IJCAI 2023.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
import optuna
import torch
from optuna.distributions import FloatDistribution
from optuna.trial import Trial, TrialState, create_trial
from torch import Tensor

from orthobench.config.params import Count, NonNegativeCount
from orthobench.optimizers.base import Optimizer, Suggestion

# A told point is the pending trial's point if they differ by no more than float round-off
# of the unit-cube -> native -> unit-cube round trip, or, where either side is float32 (a float32
# optimizer's history and pending points against the trials' float64 parameters), by no more
# than float32 rounding (see `_matches`).
_MATCH_ATOL = 1e-9


class OptunaTPE(Optimizer):
    """Optuna's ``TPESampler`` driven by ask/tell (univariate by default, as in the paper).

    Args:
        dim: Number of search dimensions ``d``.
        multivariate: Use the multivariate TPE (Optuna 5's own default for one objective is
            True; the paper's and ours is False).
        n_startup_trials: Completed trials before TPE takes over from random sampling (Optuna's
            default, 10). The shared initial design counts towards it.
        n_ei_candidates: Candidates per step scored by ``l / g`` (Optuna's default, 24).
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`; the sampler
            is seeded from ``seed``.
    """

    min_observations = 0
    surrogate = "tpe"
    handles_constraints: ClassVar[bool] = True
    accepts_pending: ClassVar[bool] = True

    def __init__(
        self,
        dim: int,
        *,
        multivariate: bool = False,
        n_startup_trials: NonNegativeCount = 10,
        n_ei_candidates: Count = 24,
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(dim, seed=seed, device=device, dtype=dtype)
        if n_startup_trials < 0:
            raise ValueError(f"`n_startup_trials` must be >= 0, but got {n_startup_trials=}.")
        if n_ei_candidates < 1:
            raise ValueError(f"`n_ei_candidates` must be >= 1, but got {n_ei_candidates=}.")
        self.multivariate = multivariate
        self.n_startup_trials = n_startup_trials
        self.n_ei_candidates = n_ei_candidates
        self._names = [f"x{j}" for j in range(dim)]
        self._distributions = {name: FloatDistribution(0.0, 1.0) for name in self._names}
        # Optuna logs "A new study created" at INFO for every study (one per cell); silence that
        # line only, restoring the user's verbosity.
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            self.study = optuna.create_study(direction="minimize", sampler=self._sampler())
        finally:
            optuna.logging.set_verbosity(verbosity)
        self._pending: list[tuple[Trial, np.ndarray]] = []
        self._last_told = -1  # number of the trial last completed or added

    def _sampler(self) -> optuna.samplers.TPESampler:
        return optuna.samplers.TPESampler(
            multivariate=self.multivariate,
            n_startup_trials=self.n_startup_trials,
            n_ei_candidates=self.n_ei_candidates,
            constant_liar=True,
            # NumPy's RandomState (inside Optuna) takes 32-bit seeds.
            seed=self._step_seed("optuna-tpe") % (2**32),
        )

    def _ask(self, n: int) -> Suggestion:
        self.study.sampler = self._sampler()
        pending = np.zeros((0, self.dim)) if self.pending is None else self.pending.cpu().numpy()
        failed = 0
        for trial, point in self._pending:
            self.study.tell(trial, state=TrialState.FAIL)
            # Dropped, not still running (`_matches` allows for the pending points' dtype).
            failed += not _matches(point, pending).any()
        t0 = time.perf_counter()
        self._pending = []
        # Stand-ins for the pending points while the new trials are sampled (numbered in order).
        first_liar, liars = len(self.study.get_trials(deepcopy=False)), 0
        try:
            for point in pending:
                self.study.add_trial(
                    create_trial(
                        state=TrialState.RUNNING,
                        params=dict(zip(self._names, point.tolist(), strict=True)),
                        distributions=self._distributions,
                    )
                )
                liars += 1
            for _ in range(n):
                trial = self.study.ask(self._distributions)
                self._pending.append(
                    (trial, np.array([trial.params[name] for name in self._names]))
                )
        finally:
            # Also when sampling raised: a stand-in left RUNNING would lie in every later ask.
            for number in range(first_liar, first_liar + liars):
                self.study.tell(number, state=TrialState.FAIL)
        t1 = time.perf_counter()
        x = np.stack([point for _, point in self._pending])
        info = {
            "multivariate": self.multivariate,
            "n_complete": len(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))),
        }
        if failed:
            info["failed_pending"] = failed
        return Suggestion(x=x, acq_seconds=t1 - t0, info=info)

    def tell(self, x: np.ndarray, y: np.ndarray, constraints: np.ndarray | None = None) -> None:
        """:meth:`Optimizer.tell`, then the told points join the study (see the module doc)."""
        start = self.train_y.shape[0]
        super().tell(x, y, constraints)
        self._tell_study(self.train_x[start:], self.train_y[start:], self.train_c[start:])

    def _tell_study(self, x: Tensor, y: Tensor, c: Tensor) -> None:
        """Complete the matching pending trials or add completed ones, in told order.

        Args:
            x: ``n x d`` told points (unit cube).
            y: ``n`` objective values.
            c: ``n x m`` constraint values (``m = 0``: no constraints are set).
        """
        for point, value, row in zip(x.cpu().numpy(), y.tolist(), c.tolist(), strict=True):
            constraints = {f"c{i}": float(v) for i, v in enumerate(row)}
            match = next(
                (k for k, (_, p) in enumerate(self._pending) if _matches(point, p[None]).any()),
                None,
            )
            trial = None if match is None else self._pending.pop(match)[0]
            if trial is not None and trial.number > self._last_told:
                for key, v in constraints.items():
                    trial.set_constraint(key, v)
                self.study.tell(trial, value)
                self._last_told = trial.number
            else:
                if trial is not None:
                    self.study.tell(trial, state=TrialState.FAIL)
                self._last_told = len(self.study.get_trials(deepcopy=False))
                params = {
                    name: float(v)
                    for name, v in zip(self._names, np.clip(point, 0.0, 1.0), strict=True)
                }
                self.study.add_trial(
                    create_trial(
                        params=params,
                        distributions=self._distributions,
                        value=value,
                        constraints=constraints or None,
                    )
                )


def _matches(point: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``k`` bools: which of ``k x d`` ``points`` is ``point`` (``d``) up to :data:`_MATCH_ATOL`,
    or up to the machine epsilon of the coarser dtype of the two where that is larger."""
    # Unit-cube values rounded to float32 move by up to 3e-8, far above the float64 tolerance;
    # the epsilon (1.2e-7) covers that, and a trial that close to the told point is, to the
    # float32 optimizer, that point.
    eps = max(np.finfo(point.dtype).eps, np.finfo(points.dtype).eps)
    return (np.abs(points - point) <= max(_MATCH_ATOL, eps)).all(axis=-1)
