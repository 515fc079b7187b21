r"""OrthoBO as an Optuna sampler: :class:`OrthoBOSampler`.

Each relative sample fits :class:`~orthobench.optimizers.orthobo.OrthoBO` (paper Alg. 1: a GP
ensemble, its Laplace posterior over hyperparameters and the orthogonalized marginal EI) to the
study's trials in the unit cube and decodes its one proposal, as Optuna's ``GPSampler``
(``optuna/samplers/_gp/sampler.py``) does with its own GP. The tutorial is
docs/tutorials/optuna.md.
"""

from __future__ import annotations

import math
import os
import secrets
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import BaseDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.samplers._base import (
    _INDEPENDENT_SAMPLING_WARNING_TEMPLATE,
    _process_constraints_after_trial,
)
from optuna.search_space import intersection_search_space
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from orthobench.config.params import is_integer
from orthobench.exceptions import ConfigError, OrthobenchWarning, one_line
from orthobench.optimizers.orthobo import OrthoBO
from orthobench.registry import OPTIMIZERS
from orthobench.seeding import derive_seed

# A child of Optuna's library logger ``optuna``, as every Optuna sampler's logger is, so that
# ``optuna.logging.set_verbosity``, ``disable_default_handler`` and ``disable_propagation``
# govern its warnings too (``get_logger(__name__)``, as optuna-integration names its loggers,
# escapes them).
_logger = optuna.logging.get_logger(f"optuna.{__name__}")

# A trial's system attribute per parameter proposed by this sampler and not yet suggested by the
# objective (``Trial.suggest_*`` stores it), so that other workers can lie about the trial.
_PROPOSED_KEY = "orthobo:proposed:"
# A trial's system attribute holding the fallbacks OrthoBO took for its proposal, if any.
_FALLBACK_KEY = "orthobo:fallback"
# Why a complete trial is left out of OrthoBO's history (the class docstring's rules).
_NO_PARAMETER = "a parameter of the search space missing"
_NAN_VALUE = "a NaN value"
_OUT_OF_RANGE = "a parameter outside its distribution's range"
_NO_CONSTRAINTS = "no constraint values"
_NON_FINITE_CONSTRAINT = "a non-finite constraint value"
# The folders of Optuna's and orthobench's code, whose frames a warning skips to point at the
# user's line (`study.ask`, `study.optimize` or the objective's `trial.suggest_*`), as
# `optuna._warnings.optuna_warn` does on Python 3.12+ with `skip_file_prefixes` (not in 3.10-3.11).
_LIBRARY_FOLDERS = tuple(
    str(folder) + os.sep for folder in (Path(optuna.__file__).parent, Path(__file__).parents[1])
)


class OrthoBOSampler(BaseSampler):
    r"""Optuna sampler that proposes each trial with OrthoBO.

    For each trial, once ``n_startup_trials`` trials are complete, the sampler builds a fresh
    ``OrthoBO(d, seed=..., **orthobo_params)``, tells it the study's history in the unit cube and
    returns its proposal, decoded. The rules:

    - Search space: the intersection of the complete trials' spaces
      (``optuna.search_space.intersection_search_space``, as ``GPSampler`` and
      ``BoTorchSampler``), without single-valued distributions, computed from each study's
      trials, so one sampler serves several studies. Other parameters (conditional ones, and all of them
      during startup) come from ``independent_sampler``.
    - Encoding (``optuna._transform._SearchSpaceTransform(..., transform_0_1=True)``): a float is
      scaled linearly, or its log if ``log=True``, onto ``[0, 1]``; an int or a stepped float has
      its range widened by half a step at both ends, so each value owns an equal share of
      ``[0, 1]``, and decodes to the nearest value. A categorical with ``k`` choices takes ``k``
      one-hot columns in ``[0, 1]``; a proposal decodes to the choice of its largest column
      (argmax). ``d`` is the number of numerical parameters plus the number of choices.
    - History: the COMPLETE trials that hold every parameter of the space, ``t x d`` points and
      ``t`` values, negated for ``direction="maximize"`` (OrthoBO minimizes).
    - Infinite values (a NaN one makes Optuna's trial FAIL): as in ``GPSampler``
      (``optuna._gp.gp.warn_and_convert_inf``), each is told as the nearest of the least and
      the largest finite value, so an infinitely bad trial counts as the worst one seen and the
      model learns that its region is bad; with no finite value, every value is told as 0. An
      :class:`~orthobench.exceptions.OrthobenchWarning` names the trials.
    - Values outside a distribution's range: ``Study.enqueue_trial`` may fix one (Optuna only
      warns); it would lie outside the unit cube, where OrthoBO's GP is not meant to see points,
      and clipping it would tell a value at a point that was not evaluated. So a trial, complete
      or running, with such a parameter is left out, with an ``OrthobenchWarning`` naming it and
      its values. (``GPSampler`` passes them to its GP unchecked.) A value inside the range but
      off the step grid keeps its own place in ``[0, 1]``.
    - Startup: with fewer than ``max(n_startup_trials, 2)`` such trials (OrthoBO needs two), the
      relative sample is empty and ``independent_sampler`` samples every parameter.
    - Running trials (parallel workers): each RUNNING trial whose parameters of the space are
      known (suggested, fixed by ``enqueue_trial``, or proposed by this sampler) is told the
      incumbent's outcome, a *constant liar* [Ginsbourger2010cl]_: the best observed value
      ("CL-min" for minimization), and on a constrained study the value and constraint values
      of the best feasible trial (with none feasible, of the trial with the least total
      violation ``sum_i max(c_i, 0)``). The GP then interpolates the incumbent at the pending
      point, where EI has nothing to gain, so the next worker proposes elsewhere; the lie moves
      neither the incumbent nor, as a worst-value lie would on a short history, the
      standardized GP fit.
    - Constraints: values from ``constraints_func`` (stored by :meth:`after_trial`) or from
      ``Trial.set_constraint`` (Optuna 5's per-trial API), read as ``FrozenTrial.constraints``;
      feasible where every value is ``<= 0``. Once one complete trial has constraint values,
      those without them (their ``constraints_func`` failed) or with a non-finite one are left
      out, and OrthoBO gets the ``t x m`` constraint values and maximizes the marginal
      constrained EI. ``GPSampler`` clips constraint values as it clips objective values, but
      decides feasibility from the unclipped ones; OrthoBO decides it from the values it is
      told, and ``inf`` clipped to a largest finite value ``<= 0`` would turn an infeasible
      trial feasible (``-inf`` a feasible one infeasible, when every finite value is ``> 0``).
    - Seeding: the proposal for trial number ``k`` uses ``OrthoBO(seed=derive_seed(seed,
      "optuna", k))`` (:func:`orthobench.seeding.derive_seed`), so it is a function of the seed,
      ``k`` and the history: two studies with the same seed and objective get identical
      parameters, and no two trials share a seed. ``seed=None`` draws one seed at construction.
      :meth:`reseed_rng` (Optuna calls it for ``n_jobs > 1``) reseeds ``independent_sampler``
      only: the per-trial seeds are distinct already.
    - OrthoBO runs on the CPU in float64, from scratch for each trial: no warm starts carry
      over, and a kernel ensemble (``kernel=[...]``) keeps uniform weights.
    - Fallbacks: one OrthoBO took for a proposal (a GP fit kept its initialization, Cholesky
      jitter, ...; ``Suggestion.info["fallback"]``) is logged as a warning and stored in the
      trial's system attribute ``orthobo:fallback``. A parameter sampled by
      ``independent_sampler`` after the startup is logged with its reason: missing from some
      complete trials or suggested from different distributions (a dynamic search space), a
      distribution other than the complete trials', or too few complete trials left to tell
      OrthoBO by the rules above.
    - Logging: on the logger ``optuna.orthobench.integrations.optuna``, a child of Optuna's,
      so ``optuna.logging.set_verbosity`` and ``disable_default_handler`` govern it as they do
      Optuna's samplers. Data the user can fix (infinite values, values outside a range) warn
      through :mod:`warnings` instead, at the user's line, as ``GPSampler`` and Optuna's ``Trial`` do.

    Args:
        seed:
            Seed of every proposal (see the seeding rule) and of the default
            ``independent_sampler``. Defaults to :obj:`None` (a random seed).
        n_startup_trials:
            Complete trials before OrthoBO takes over. Defaults to 10, as Optuna's ``GPSampler``
            and ``TPESampler``.
        independent_sampler:
            Sampler for the startup trials and for parameters outside the relative search
            space. Defaults to ``RandomSampler(seed)``.
        constraints_func:
            ``constraints_func(frozen_trial) -> Sequence[float]``, called after each complete
            or pruned trial; the trial is feasible when every value is ``<= 0``. Defaults to
            :obj:`None` (constraints only from ``Trial.set_constraint``, if any).
        warn_independent_sampling:
            Log a warning when a parameter is sampled by ``independent_sampler`` after the
            startup trials. Defaults to :obj:`True`.
        orthobo_params:
            Keyword parameters of :class:`~orthobench.optimizers.orthobo.OrthoBO` but ``dim``,
            ``seed``, ``device`` and ``dtype`` (``kernel``, ``theta_samples``, ``estimator``,
            ``raw_samples``, ...), OrthoBO's defaults otherwise (``theta_samples=512``,
            ``raw_samples=512``, ``num_restarts=8``).

    Raises:
        ValueError: on one line, at construction, for an ``n_startup_trials`` other than an int
            ``>= 0`` (a bool, None or a float included) or an unknown or invalid OrthoBO
            parameter (the registry's check of a suite's parameters,
            :meth:`orthobench.registry.Registry.check_params`); in :meth:`sample_relative`, for
            a multi-objective study or complete trials with different constraint names.

    Example:
        >>> sampler = OrthoBOSampler(seed=0, n_startup_trials=5, theta_samples=16)
        >>> study = optuna.create_study(sampler=sampler)
        >>> study.optimize(lambda t: (t.suggest_float("x", -2, 2) - 1) ** 2, n_trials=8)
        >>> study.best_value < 0.5
        True

    References:
        .. [Ginsbourger2010cl] D. Ginsbourger, R. Le Riche, L. Carraro. Kriging Is Well-Suited
           to Parallelize Optimization. Computational Intelligence in Expensive Optimization
           Problems, 2010.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        n_startup_trials: int = 10,
        independent_sampler: BaseSampler | None = None,
        constraints_func: Callable[[FrozenTrial], Sequence[float]] | None = None,
        warn_independent_sampling: bool = True,
        **orthobo_params: Any,
    ) -> None:
        # An int only: 1.5 would act as 2 trials, and None fails its comparison with a TypeError.
        if not is_integer(n_startup_trials) or n_startup_trials < 0:
            raise ValueError(
                f"`n_startup_trials` must be an int >= 0, but got {n_startup_trials=}."
            )
        try:
            OPTIMIZERS.check_params("orthobo", orthobo_params)
        except ConfigError as err:  # its field, `params.<key>`, is a suite file's
            raise ValueError(f"OrthoBOSampler: {err.reason}") from None
        if seed is not None and not is_integer(seed):
            raise ValueError(f"`seed` must be an int or None, but got {seed=}.")
        if independent_sampler is None and seed is not None and not 0 <= seed < 2**32:
            # RandomSampler's (NumPy's) range: it failed at the first trial, with NumPy's words.
            raise ValueError(
                f"`seed` must be in [0, 2**32 - 1] with the default independent_sampler "
                f"(RandomSampler), but got {seed=}."
            )
        # A Python int: derive_seed hashes the text, and np.int64(0)'s is not 0's.
        self._seed = secrets.randbits(63) if seed is None else int(seed)
        self._n_startup_trials = n_startup_trials
        self._independent_sampler = independent_sampler or RandomSampler(seed=seed)
        self._constraints_func = constraints_func
        self._warn_independent_sampling = warn_independent_sampling
        self._orthobo_params = orthobo_params
        # (study name, message) pairs warned already: Python's once-per-location memory is reset
        # by every `warnings.catch_warnings()`, which each OrthoBO step enters (fits), so the
        # default filter showed them at every trial.
        self._warned: set[tuple[str, str]] = set()

    def _warn_once(self, study: Study, message: str) -> None:
        if (study.study_name, message) not in self._warned:
            self._warned.add((study.study_name, message))
            warnings.warn(message, OrthobenchWarning, stacklevel=_user_stacklevel())

    def reseed_rng(self) -> None:
        self._independent_sampler.reseed_rng()

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        # Computed from the study's trials, not cached in the sampler: Optuna's
        # IntersectionSearchSpace caches one study, so a sampler reused for a second study
        # got the first one's space (or, with both in one database, a ValueError).
        trials = study.get_trials(deepcopy=False)
        return {
            name: distribution
            for name, distribution in intersection_search_space(trials).items()
            if not distribution.single()
        }

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """OrthoBO's proposal for ``trial`` over ``search_space`` (``{}`` during startup)."""
        self._raise_error_if_multi_objective(study)
        if not search_space:
            return {}
        complete, left_out = _history(
            study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), search_space
        )
        running = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if t.number != trial.number
        ]
        if values := ", ".join(
            f"trial {t.number} {name}={value!r}"
            for t in [*left_out.get(_OUT_OF_RANGE, []), *running]
            for name, value in _outside_range(t, search_space)
        ):
            self._warn_once(
                study,
                one_line(
                    f"OrthoBOSampler leaves out the trials with a parameter outside its "
                    f"distribution's range (fixed by `Study.enqueue_trial`?): {values}."
                ),
            )
        if len(complete) < self._min_trials:
            return {}
        transform = _SearchSpaceTransform(search_space, transform_0_1=True)
        sign = -1.0 if study.direction == StudyDirection.MAXIMIZE else 1.0
        x = np.stack([transform.transform(t.params) for t in complete])  # t x d
        y = sign * np.array([t.value for t in complete])  # t
        if not np.isfinite(y).all():
            # Named by the first such trial only, so the message stays the same as the study
            # grows and is shown once rather than at every trial.
            first = min(t.number for t in complete if math.isinf(t.value))
            self._warn_once(
                study,
                f"OrthoBOSampler tells an infinite value (first in trial {first}) as the least or "
                "the largest finite value, whichever is nearer, as GPSampler does.",
            )
            y = _clip_infinite(y)
        c = _constraint_values(complete)  # t x m, m = 0 without constraints
        pending = [
            params
            for t in running
            if search_space.keys() <= (params := _known_params(t, search_space)).keys()
        ]
        if pending:
            best = _incumbent(y, c)
            x = np.concatenate([x, np.stack([transform.transform(p) for p in pending])])
            y = np.concatenate([y, np.full(len(pending), y[best])])
            c = np.concatenate([c, np.repeat(c[best : best + 1], len(pending), axis=0)])
        optimizer = OrthoBO(
            x.shape[1],
            seed=derive_seed(self._seed, "optuna", trial.number),
            **self._orthobo_params,
        )
        optimizer.tell(x, y, c if c.shape[1] else None)
        suggestion = optimizer.ask(1)
        if fallback := suggestion.info.get("fallback"):
            _logger.warning(f"Trial {trial.number}: OrthoBO took a fallback: {fallback}.")
            study._storage.set_trial_system_attr(trial._trial_id, _FALLBACK_KEY, fallback)
        params = transform.untransform(suggestion.x[0])
        for name, value in params.items():
            study._storage.set_trial_system_attr(
                trial._trial_id, _PROPOSED_KEY + name, search_space[name].to_internal_repr(value)
            )
        return params

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        if self._warn_independent_sampling and not param_distribution.single():
            complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if len(complete) >= self._min_trials:
                _logger.warning(
                    _INDEPENDENT_SAMPLING_WARNING_TEMPLATE.format(
                        param_name=param_name,
                        trial_number=trial.number,
                        independent_sampler_name=type(self._independent_sampler).__name__,
                        sampler_name=type(self).__name__,
                        fallback_reason=self._independent_sampling_reason(
                            study, trial, complete, param_name, param_distribution
                        ),
                    )
                )
        return self._independent_sampler.sample_independent(
            study, trial, param_name, param_distribution
        )

    @property
    def _min_trials(self) -> int:
        """Complete trials to tell before OrthoBO proposes (OrthoBO needs two)."""
        return max(self._n_startup_trials, OrthoBO.min_observations)

    def _independent_sampling_reason(
        self,
        study: Study,
        trial: FrozenTrial,
        complete: list[FrozenTrial],
        name: str,
        distribution: BaseDistribution,
    ) -> str:
        """Why parameter ``name`` of ``trial`` is not OrthoBO's after the startup (``complete``
        holds at least :attr:`_min_trials` trials), recomputed from the study now: trials that
        other workers finished since the trial's relative sample may have changed the answer,
        which is the last reason."""
        search_space = self.infer_relative_search_space(study, trial)
        if name not in search_space:
            if missing := [t.number for t in complete if name not in t.params]:
                return (
                    f"the parameter is missing from complete {_trials(missing)} "
                    "(dynamic search space)"
                )
            seen = {t.distributions[name] for t in complete}
            if len(seen) > 1:
                return (
                    f"the complete trials suggest it from {len(seen)} different distributions "
                    "(dynamic search space)"
                )
            # The relative search space leaves single-valued distributions out.
            if (only := seen.pop()).single():
                return (
                    f"its distribution {distribution} differs from the complete trials' "
                    f"single-valued {only}"
                )
        else:
            told, left_out = _history(complete, search_space)
            if len(told) < self._min_trials:
                reasons = "; ".join(
                    f"{_trials([t.number for t in trials])}: {reason}"
                    for reason, trials in left_out.items()
                )
                return (
                    f"only {len(told)} of the {len(complete)} complete trials can be told to "
                    f"OrthoBO, which needs {self._min_trials} ({reasons})"
                )
            if search_space[name] != distribution:
                return (
                    f"its distribution {distribution} differs from the complete trials' "
                    f"{search_space[name]}"
                )
        return "the complete trials changed since this trial's relative sample (parallel workers)"

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._independent_sampler.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        if self._constraints_func is not None:
            _process_constraints_after_trial(self._constraints_func, study, trial, state)
        self._independent_sampler.after_trial(study, trial, state, values)


def _user_stacklevel() -> int:
    """``warnings.warn``'s ``stacklevel``, in the caller of this function, of the first frame
    outside :data:`_LIBRARY_FOLDERS`."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_LIBRARY_FOLDERS):
        frame, level = frame.f_back, level + 1
    return level


def _history(
    trials: list[FrozenTrial], search_space: dict[str, BaseDistribution]
) -> tuple[list[FrozenTrial], dict[str, list[FrozenTrial]]]:
    """The complete ``trials`` OrthoBO is told, and the others by why they are left out."""
    constrained = any(t.constraints for t in trials)
    told: list[FrozenTrial] = []
    left_out: dict[str, list[FrozenTrial]] = {}
    for t in trials:
        if not search_space.keys() <= t.params.keys():
            reason = _NO_PARAMETER
        elif math.isnan(t.value):  # Optuna makes such trials FAIL; one added by hand may not be
            reason = _NAN_VALUE
        elif not all(_in_range(d, t.params[name]) for name, d in search_space.items()):
            reason = _OUT_OF_RANGE
        elif constrained and not t.constraints:
            reason = _NO_CONSTRAINTS
        elif constrained and not all(map(math.isfinite, t.constraints.values())):
            reason = _NON_FINITE_CONSTRAINT
        else:
            told.append(t)
            continue
        left_out.setdefault(reason, []).append(t)
    return told, left_out


def _clip_infinite(y: np.ndarray) -> np.ndarray:
    """``t`` values ``y`` with each infinite one replaced by the nearest finite extreme, or all
    0 without a finite one (``optuna._gp.gp.warn_and_convert_inf``)."""
    finite = y[np.isfinite(y)]
    if not finite.size:
        return np.zeros_like(y)
    return np.clip(y, finite.min(), finite.max())


def _trials(numbers: list[int]) -> str:
    """``trial 3`` or ``trials 1, 4, 7``; a list of more than six shows its ends and length."""
    if len(numbers) == 1:
        return f"trial {numbers[0]}"
    if len(numbers) > 6:
        return f"trials {', '.join(map(str, numbers[:3]))}, ..., {numbers[-1]} ({len(numbers)})"
    return f"trials {', '.join(map(str, numbers))}"


def _constraint_values(trials: list[FrozenTrial]) -> np.ndarray:
    """The ``t x m`` constraint values of ``trials`` (``m = 0`` without any), by the first
    trial's constraint names.

    Raises:
        ValueError: if two trials have different constraint names.
    """
    names = list(trials[0].constraints)
    for t in trials:
        if sorted(t.constraints) != sorted(names):
            raise ValueError(
                f"Every trial needs the same constraints, but trial {trials[0].number} has "
                f"{names} and trial {t.number} has {list(t.constraints)}."
            )
    return np.array([[t.constraints[n] for n in names] for t in trials]).reshape(len(trials), -1)


def _incumbent(y: np.ndarray, c: np.ndarray) -> int:
    """Index of the best feasible of ``t`` values ``y`` (minimized) with ``t x m`` constraint
    values ``c``, or, with none feasible, of the least total violation ``sum_i max(c_i, 0)``."""
    violation = np.clip(c, 0.0, None).sum(axis=1)
    feasible = violation == 0
    if feasible.any():
        return int(np.flatnonzero(feasible)[np.argmin(y[feasible])])
    return int(np.argmin(violation))


def _known_params(trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
    """A running trial's parameters of ``search_space`` known so far: those suggested from the
    same distribution, then those fixed by ``Study.enqueue_trial`` (the trial suggests them, not
    a proposal), both within the distribution's range, then those proposed by this sampler."""
    known = {}
    fixed = trial.system_attrs.get("fixed_params") or {}
    for name, distribution in search_space.items():
        proposed = trial.system_attrs.get(_PROPOSED_KEY + name)
        if name in trial.params:
            if trial.distributions[name] == distribution and _in_range(
                distribution, trial.params[name]
            ):
                known[name] = trial.params[name]
        elif name in fixed:
            if _in_range(distribution, fixed[name]):
                known[name] = fixed[name]
        elif proposed is not None and distribution._contains(proposed):
            known[name] = distribution.to_external_repr(proposed)
    return known


def _outside_range(
    trial: FrozenTrial, search_space: dict[str, BaseDistribution]
) -> list[tuple[str, Any]]:
    """The parameters of ``search_space`` that ``trial`` holds (suggested, or fixed by
    ``Study.enqueue_trial`` and not yet suggested) outside their distribution's range."""
    values = {**(trial.system_attrs.get("fixed_params") or {}), **trial.params}
    return [
        (name, values[name])
        for name, distribution in search_space.items()
        if name in values and not _in_range(distribution, values[name])
    ]


def _in_range(distribution: BaseDistribution, value: Any) -> bool:
    """Whether the external ``value`` lies in ``distribution``'s range, on its step grid or not
    (False for a value it cannot hold)."""
    try:
        internal = distribution.to_internal_repr(value)
    except (TypeError, ValueError):
        return False
    if isinstance(distribution, (FloatDistribution, IntDistribution)):
        return distribution.low <= internal <= distribution.high
    return distribution._contains(internal)
