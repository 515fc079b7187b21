r"""The GP probe: rebuild values of the theta estimators, qLogEI and plugins on one probe state.

The surrogate is fitted once (MAP + Laplace ``q(theta)``, docs/design.md, "Laplace posterior on
log-parameters") and kept fixed; only the draws change between rebuilds (docs/design.md, "Probe
variance is across rebuilds").

References of the targets:

- theta estimators: the marginal EI over ``reference_samples`` scrambled-Sobol theta draws;
- ``qlogei``: the analytic EI at the MAP hyperparameters (its MC noise is over function samples);
  at ``q > 1``, qLogEI at the MAP hyperparameters on ``reference_samples`` scrambled-Sobol
  function samples (no closed form; the same smoothings as the rebuilds, so the reference is of
  the rebuilds' own target);
- a plugin estimator (``module:attr``, :class:`~orthobench.probe.plugins.ProbeAcquisition`): its
  own build with ``reference_samples`` and the rebuild index ``rebuilds``, which no rebuild uses
  (:func:`_plugin_values`; its values, like qLogEI's, divided by the outcome std).

Batch probes (a state's ``q > 1``, :mod:`orthobench.probe.states`): each probe is a batch of ``q``
points (``N x q x d``) and the per-draw values are
:func:`~orthobench.surrogates.batch_ei.log_qei`, the inner Monte Carlo
mean over ``K = INNER_SAMPLES`` (OrthoBO's count) scrambled-Sobol normal base samples per theta
draw, as :class:`~orthobench.acquisition.MarginalLogQEI` evaluates OrthoBO's batch acquisition.
Each rebuild draws its own base samples (:func:`inner_base_samples`), shared by the estimators of
the rebuild (common random numbers: draw ``s`` of every estimator gets the same row), as each BO
step of OrthoBO draws its own: the rebuilds' values are the
nested estimator of the paper's appendix, whose noise is over theta draws and base samples, and
whose target is the marginal qEI itself. The reference averages the per-draw values of
``reference_samples`` scrambled-Sobol theta draws, each chunk of :data:`_REFERENCE_CHUNK` draws
on its own :data:`REFERENCE_INNER_SAMPLES` base samples, so its inner-MC error averages out over
the chunks too. (Base samples fixed for the whole state would make the target the marginal of
one set of base samples, which differs between estimators whose per-draw covariance differs: the
Rao-Blackwellized draws add a rank-one term, so the same base samples give other function
samples, and their MSE would count that difference as bias.)

Estimators with the same draws (equal-weight sampling, or the same rule; RB or not) share them in
a rebuild (common random numbers), so every ratio against naive iid theta-MC (``mc``) is paired.
A point set uses the largest evaluation count its rule allows within the budget ``S``; when that
count differs from ``S``, its baseline is naive iid theta-MC with exactly that many draws in the
same rebuild (docs/design.md, "Like-for-like baseline"). Values are on the GP's standardized
outcome scale; the log values are the outer-log acquisition
``log max(EI_hat, alpha * EI_hat_MC)`` (docs/design.md, "Relative outer-log floor").

Cost: per theta estimator and budget, :func:`seconds_per_call` times one call of the acquisition
OrthoBO maximizes (:class:`~orthobench.acquisition.MarginalLogEI` built as ``orthobo`` builds it),
forward and backward, on a ``512 x 1 x d`` batch: the batch ``optimize_acqf`` evaluates per
L-BFGS step. Building the draws and their Cholesky factors is once per BO step and not included.
At ``q > 1`` the call is :class:`~orthobench.acquisition.MarginalLogQEI` on ``512 / q`` batches
of ``q`` points (512 points, as at ``q = 1``; OrthoBO climbs a few restarts of batches, not a
raw-sample screen of them, so 512 batches would overstate a step's cost).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from botorch.acquisition import LogExpectedImprovement, qLogExpectedImprovement
from botorch.sampling import SobolQMCNormalSampler

from orthobench.acquisition import (
    INNER_SAMPLES,
    MarginalLogCEI,
    MarginalLogEI,
    MarginalLogQEI,
    constrained_incumbent,
    draw_inner_base_samples,
)
from orthobench.config.names import FUNCTION_SAMPLE_ESTIMATORS, ThetaEstimator, parse_estimator
from orthobench.probe.metrics import ALPHA
from orthobench.probe.plugins import ProbeAcquisition
from orthobench.probe.states import ProbeState, check_constrained_states
from orthobench.registry import load_probe_acquisition
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import ProbeSpec
from orthobench.surrogates.batch_ei import log_qei
from orthobench.surrogates.fit import ConstraintFit, constraint_fit, fit_model
from orthobench.surrogates.laplace import LaplacePosterior, laplace_posterior
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from orthobench.theta_estimators import ThetaDraws, draw_thetas, estimate, require_equal_weights

#: Theta draws per batch of the reference (bounds the ``S x N`` memory of one batch).
_REFERENCE_CHUNK = 512
#: Inner base samples of each reference chunk at ``q > 1`` (8 times a rebuild's, and every chunk
#: has its own).
REFERENCE_INNER_SAMPLES = 8 * INNER_SAMPLES
#: Candidates per timed acquisition call, and timed calls per estimator and budget (after one
#: untimed warm-up call); :func:`seconds_per_call` reports their median.
COST_CANDIDATES = 512
COST_REPEATS = 5


def _outer_log(log_top: torch.Tensor, est: torch.Tensor, mc: torch.Tensor) -> torch.Tensor:
    """``log max(EI_hat, alpha * EI_hat_MC)`` from values scaled by ``exp(-log_top)``."""
    return log_top + torch.maximum(est, ALPHA * mc).log()


def inner_base_samples(
    state: ProbeState, draws: int, dtype: torch.dtype, device: torch.device, *keys: object
) -> torch.Tensor | None:
    """``draws x K x q`` inner base samples of batch EI for the rebuild or reference chunk
    ``keys``, each theta draw its own (:func:`~orthobench.acquisition.draw_inner_base_samples`,
    as OrthoBO draws them per step), ``K = INNER_SAMPLES`` for a rebuild and
    :data:`REFERENCE_INNER_SAMPLES` for the reference (``keys`` starting with ``"reference"``),
    seeded by the state and ``keys``: estimators of a rebuild share the first rows whatever their
    draw counts (common random numbers). None at ``q = 1`` (analytic EI per draw)."""
    if state.q == 1:
        return None
    count = REFERENCE_INNER_SAMPLES if keys[:1] == ("reference",) else INNER_SAMPLES
    seed = derive_seed(state.seed, "probe-inner", state.id, *keys) % (2**31)
    return draw_inner_base_samples(draws, state.q, seed, inner=count, dtype=dtype).to(device)


def reference_rse(log: torch.Tensor) -> torch.Tensor:
    r"""Relative standard error of a reference, the mean of the per-draw values ``e = exp(log)``
    (``S x N -> N``): :math:`\sqrt{(\overline{e^2} / \bar e^2 - 1) / S}`, the iid standard error
    of the mean over the mean, computed from logsumexps (the values underflow where log EI <
    -745). NaN at a probe whose values are all 0.

    The reference's draws are scrambled Sobol' points, whose mean errs less than ``S`` iid draws'
    on a smooth integrand, so this is an upper estimate there; on a rare event (a few draws
    carry the mass, or none of them) the points do not help, and the estimate is about right
    or, with no draw in the mass, too small.
    """
    n = log.shape[0]
    log_m1 = torch.logsumexp(log, dim=0) - math.log(n)
    log_m2 = torch.logsumexp(2 * log, dim=0) - math.log(n)
    return (torch.expm1(log_m2 - 2 * log_m1).clamp(min=0) / n).sqrt()


def log_values(
    gp: ThetaSampledGP,
    X: torch.Tensor,
    base: torch.Tensor | None,
    constraints: Sequence[ThetaSampledGP] = (),
) -> torch.Tensor:
    """Per-draw log acquisition values ``S x N`` at ``N x q x d`` probes: analytic log-EI
    (``base`` None, ``q = 1``) or log-qEI on the ``S' x K x q`` base samples ``base``; with
    ``constraints`` (their GPs under draws paired with ``gp``'s by index, ``q = 1``) log-CEI,
    ``log EI + sum_i log P(c_i <= 0)`` (:class:`~orthobench.acquisition.MarginalLogCEI`)."""
    with torch.no_grad():
        log = gp.log_ei(X) if base is None else log_qei(gp, X, base)
        return log + sum(c.log_prob_below(X) for c in constraints)


@dataclass(frozen=True)
class _Outcomes:
    """A state's fitted GPs: the objective's and, on a constrained task, one fit
    (:class:`~orthobench.surrogates.fit.ConstraintFit`) per constraint, with constrained EI's incumbent (standardized; None: the best
    observation)."""

    model: Any
    laplace: LaplacePosterior
    constraints: tuple[ConstraintFit, ...] = ()
    best_f: float | None = None


@dataclass(frozen=True)
class _Draws:
    """One estimate's draws: the objective's and, paired by index, each constraint's."""

    objective: ThetaDraws
    constraints: tuple[ThetaDraws, ...] = ()

    @property
    def joint(self) -> ThetaDraws:
        """The objective's draws with every GP's whitened draws side by side as controls
        (independent standard normals: mean 0, covariance I), as
        :class:`~orthobench.acquisition.MarginalLogCEI` takes them.

        Raises:
            ValueError: for a point set with unequal weights and constraints
                (:func:`~orthobench.theta_estimators.require_equal_weights`).
        """
        if self.constraints:
            require_equal_weights(self.objective.weights, self.objective.estimator.name)
        z = torch.cat([self.objective.z, *(d.z for d in self.constraints)], dim=-1)
        return dataclasses.replace(self.objective, z=z)


def _draw(outcomes: _Outcomes, estimator: ThetaEstimator | str, budget: int, seed: int) -> _Draws:
    """The draws of ``estimator`` within ``budget`` on every GP of the state, each GP's of its
    own seed (``seed``; ``derive_seed(seed, "constraint", i)`` for constraint ``i``), as OrthoBO
    draws them per step."""
    return _Draws(
        draw_thetas(outcomes.laplace, estimator, budget, seed=seed),
        tuple(
            draw_thetas(fit.laplace, estimator, budget, seed=derive_seed(seed, "constraint", i))
            for i, fit in enumerate(outcomes.constraints)
        ),
    )


def _scaled_values(
    outcomes: _Outcomes, draws: _Draws, X: torch.Tensor, base: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(top, values, jittered)``: per-probe max log value ``N``, ``exp(log - top)`` ``S x N``
    (:func:`log_values`; at ``q > 1`` on the rebuild's base samples ``base``, at least one row
    per draw) and the number of draws whose Cholesky factor needed jitter."""
    gp = draws.objective.gp(outcomes.model, outcomes.best_f)
    constraints = [
        d.gp(fit.model) for d, fit in zip(draws.constraints, outcomes.constraints, strict=True)
    ]
    log = log_values(gp, X, base, constraints)  # S x N
    top = log.max(dim=0).values
    return top, (log - top).exp(), gp.n_jittered + sum(c.n_jittered for c in constraints)


def seconds_per_call(
    outcomes: _Outcomes,
    estimator: ThetaEstimator,
    budget: int,
    dim: int,
    *,
    seed: int,
    q: int = 1,
) -> float:
    """Median wall seconds of one forward + backward pass of OrthoBO's acquisition.

    The acquisition is :class:`~orthobench.acquisition.MarginalLogEI` on ``estimator``'s draws
    within ``budget`` EI evaluations (as ``orthobo`` builds it: point sets by their weights, the
    others by the estimator), with constraints :class:`~orthobench.acquisition.MarginalLogCEI`,
    or at ``q > 1`` :class:`~orthobench.acquisition.MarginalLogQEI` (on ``INNER_SAMPLES`` base
    samples per draw), called on ``COST_CANDIDATES // q`` uniform batches of ``q`` points,
    ``(COST_CANDIDATES // q) x q x dim``, with ``L(X).sum().backward()``; the median of
    ``COST_REPEATS`` calls after one warm-up call. It runs on torch's current thread count
    (recorded beside it by the probe).
    """
    draws = _draw(outcomes, estimator, budget, seed)
    model, objective = outcomes.model, draws.objective
    gp = objective.gp(model, outcomes.best_f)
    common: dict[str, Any] = {
        "estimator": "mc" if estimator.point_set else estimator.base,
        "point_weights": [objective.weights],
    }
    acqf: MarginalLogEI | MarginalLogQEI | MarginalLogCEI
    if draws.constraints:
        acqf = MarginalLogCEI(
            model,
            [gp],
            [objective.z],
            [1.0],
            constraints=[
                d.gp(fit.model)
                for d, fit in zip(draws.constraints, outcomes.constraints, strict=True)
            ],
            constraint_controls=[d.z for d in draws.constraints],
            **common,
        )
    elif q == 1:
        acqf = MarginalLogEI(model, [gp], [objective.z], [1.0], **common)
    else:
        base = draw_inner_base_samples(
            objective.theta.shape[0], q, derive_seed(seed, "inner") % (2**31)
        ).to(objective.theta)
        acqf = MarginalLogQEI(model, [gp], [objective.z], [1.0], base_samples=base, **common)
    theta = outcomes.laplace.theta_hat
    generator = torch.Generator(device="cpu").manual_seed(seed % (2**63 - 1))
    X = torch.rand(max(COST_CANDIDATES // q, 1), q, dim, generator=generator, dtype=theta.dtype)
    X = X.to(theta.device).requires_grad_(True)
    seconds = []
    for _ in range(COST_REPEATS + 1):
        X.grad = None
        if theta.device.type == "cuda":
            torch.cuda.synchronize(theta.device)
        start = time.perf_counter()
        acqf(X).sum().backward()
        if theta.device.type == "cuda":
            torch.cuda.synchronize(theta.device)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds[1:]))


def _plugin_log(
    plugin: ProbeAcquisition,
    name: str,
    model: Any,
    X: torch.Tensor,
    best_f: float,
    samples: int,
    rebuild: int,
    seed: int,
) -> torch.Tensor:
    """``N`` log values of one build of the plugin estimator ``name`` at the ``N x q x d``
    probes ``X`` in the model's original outcome units, built on a copy of ``model`` under
    torch's global RNG seeded by ``seed`` (restored afterwards).

    Raises:
        ValueError: naming the plugin, for values of another shape than ``N``.
    """
    with torch_seed(seed), torch.no_grad():
        acqf = plugin.build(copy.deepcopy(model), best_f=best_f, samples=samples, rebuild=rebuild)
        value = acqf(X)
    if not isinstance(value, torch.Tensor):
        # "Any callable" (ProbeAcquisition.build) may give a NumPy array or a list, as
        # acquisition_noise's rebuilds may; read in float64, so no value is rounded first.
        with contextlib.suppress(TypeError, ValueError, RuntimeError):
            value = torch.as_tensor(value, dtype=torch.float64)
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != (X.shape[0],):
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(
            f"Plugin estimator {name!r} (samples={samples}, rebuild={rebuild}) must map probes "
            f"of shape {tuple(X.shape)} to log values of shape ({X.shape[0]},), but got {shape}."
        )
    return value.detach().to(X)


def _plugin_values(
    spec: ProbeSpec,
    state: ProbeState,
    name: str,
    model: Any,
    X: torch.Tensor,
    best_f: float,
    log_std: float,
) -> tuple[dict[tuple[str, int], dict[str, Any]], torch.Tensor]:
    """The rows of the plugin estimator ``name`` (:class:`~orthobench.probe.plugins.ProbeAcquisition`)
    and its log reference ``N``, on the standardized scale (``log a - log_std``, as ``qlogei``'s).

    Rebuild ``r`` at budget ``S`` is ``build(model, best_f, samples=S, rebuild=r)`` evaluated at
    the ``N x q x d`` probes ``X``; the reference is the build with ``reference_samples`` and
    ``rebuild = rebuilds``, an index no rebuild uses. Each build runs on its own copy of the
    fitted ``model`` under its own seed (:func:`_plugin_log`), so the rows do not depend on which
    others are computed.
    """
    plugin = load_probe_acquisition(name, field="probe.estimators")()

    def log_at(samples: int, rebuild: int) -> torch.Tensor:
        seed = derive_seed(state.seed, "probe-plugin", state.id, name, samples, rebuild)
        return _plugin_log(plugin, name, model, X, best_f, samples, rebuild, seed) - log_std

    out: dict[tuple[str, int], dict[str, Any]] = {}
    for s in spec.mc_samples:
        log = torch.stack([log_at(s, r) for r in range(spec.rebuilds)])  # R x N
        out[(name, s)] = {
            "ei": log.exp().cpu().numpy(),
            "log": log.cpu().numpy(),
            "n_evaluations": s,
            "baseline": None,
        }
    return out, log_at(spec.reference_samples, spec.rebuilds)


def gp_values(
    spec: ProbeSpec,
    state: ProbeState,
    names: list[str],
    x: torch.Tensor,
    y: torch.Tensor,
    probes: torch.Tensor,
    constraints: torch.Tensor | None = None,
) -> tuple[
    dict[tuple[str, int], dict[str, Any]],
    dict[str, np.ndarray],
    dict[str, np.ndarray],
    dict[str, Any],
]:
    """Rebuild values of the GP estimators ``names`` and their references on one state.

    On a constrained task the values are constrained EI (:func:`log_values`), as OrthoBO
    maximizes it: one GP per constraint (the state's kernel, fitted as the objective's), EI
    against the best feasible observation (:func:`~orthobench.acquisition.constrained_incumbent`),
    and each estimate's draws of every GP paired by index, their whitened draws side by side as
    the estimators' controls; the reference pairs ``reference_samples`` scrambled-Sobol draws of
    each GP likewise. Only equal-weight estimators at ``q = 1`` are probed there
    (:func:`~orthobench.probe.states.check_constrained_states`).

    Args:
        x: ``t x d`` history in the unit cube.
        y: ``t`` observed values (minimized; the GP is fitted to ``-y``).
        probes: ``N x d`` probe points, or ``N x q x d`` batches at the state's ``q > 1``.
        constraints: ``t x m`` constraint values of the history (feasible where all are
            ``<= 0``), or None on an unconstrained task.

    Returns:
        ``{(name, S): {"ei": R x N, "log": R x N, "n_evaluations": int, "baseline": R x N |
        None}}`` (``baseline``: naive iid theta-MC at ``n_evaluations`` draws when that differs
        from ``S``; None: the ``mc`` values at ``S`` are the baseline), the references
        ``{"theta": N, "map": N, <plugin name>: N}`` (``map`` with ``qlogei`` only; one per
        plugin estimator), the same references' logs (what rankings compare: the references
        underflow to 0 where log EI < -745) and the fit and Laplace
        diagnostics (``cholesky_jitter``: theta samples, reference and rebuilds, whose Cholesky
        factor needed jitter) with ``reference_rse``, the references' relative standard errors
        ``{"theta": N, "map": N}`` (:func:`reference_rse`; ``map`` at ``q = 1`` only, where it is
        analytic, 0; none for a plugin's). Theta
        estimators' entries also hold ``"seconds_per_call"`` (:func:`seconds_per_call`).
    """
    with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
        model, fit_info = fit_model(x, -y, state.surrogate)
    laplace = laplace_posterior(model, keep_raw=spec.laplace == "unfloored")
    outcomes = _Outcomes(model, laplace)
    if constraints is not None:
        check_constrained_states([state], spec, {state.task.label: constraints.shape[-1]})
        fits = []
        for i, values in enumerate(constraints.T):
            with torch_seed(derive_seed(state.seed, "probe-fit", state.id, "constraint", i)):
                fits.append(constraint_fit(x, values, state.surrogate, "botorch"))
        feasible = (constraints <= 0).all(dim=-1)
        best_f = constrained_incumbent(model.train_targets, feasible)
        outcomes = _Outcomes(model, laplace, tuple(fits), best_f)
    X = probes.unsqueeze(-2) if probes.ndim == 2 else probes  # N x q x d
    jittered = 0  # theta samples of the state whose Cholesky factor needed jitter

    # Reference of the theta-marginal target: many scrambled-Sobol theta draws (chunked).
    reference_seed = derive_seed(state.seed, "probe-reference", state.id)
    z_ref = laplace.sample_whitened(spec.reference_samples, "qmc", seed=reference_seed)
    constraint_refs = [
        (
            fit.model,
            fit.laplace,
            fit.laplace.sample_whitened(
                spec.reference_samples, "qmc", seed=derive_seed(reference_seed, "constraint", i)
            ),
        )
        for i, fit in enumerate(outcomes.constraints)
    ]
    log_chunks = []
    for chunk, z in enumerate(z_ref.split(_REFERENCE_CHUNK)):
        rows = slice(chunk * _REFERENCE_CHUNK, chunk * _REFERENCE_CHUNK + z.shape[0])
        gp = ThetaSampledGP.from_model(model, laplace.theta(z), best_f=outcomes.best_f)
        constraint_gps = [
            ThetaSampledGP.from_model(m, lap.theta(zc[rows])) for m, lap, zc in constraint_refs
        ]
        jittered += gp.n_jittered + sum(c.n_jittered for c in constraint_gps)
        base = inner_base_samples(state, z.shape[0], X.dtype, X.device, "reference", chunk)
        log_chunks.append(log_values(gp, X, base, constraint_gps))
    log_ref = torch.cat(log_chunks)
    reference = {"theta": torch.logsumexp(log_ref, dim=0) - math.log(log_ref.shape[0])}
    rse = {"theta": reference_rse(log_ref)}
    # qLogEI's target: EI at the MAP hyperparameters (at q > 1 qLogEI on many Sobol' function
    # samples). BoTorch returns it in original outcome units; the theta estimators work on the
    # model's standardized scale, so qLogEI values are divided by the outcome std to be comparable.
    log_std = float(model.outcome_transform.stdvs.squeeze().log())
    if "qlogei" in names:
        with torch.no_grad():
            if state.q == 1:
                reference["map"] = LogExpectedImprovement(model, best_f=(-y).max())(X) - log_std
                rse["map"] = torch.zeros_like(reference["map"])  # analytic: exact
            else:
                sampler = SobolQMCNormalSampler(
                    torch.Size([spec.reference_samples]),
                    seed=derive_seed(state.seed, "probe-qlogei-reference", state.id) % (2**31),
                )
                acqf = qLogExpectedImprovement(model, best_f=(-y).max(), sampler=sampler)
                reference["map"] = acqf(X) - log_std

    out: dict[tuple[str, int], dict[str, Any]] = {}
    parsed = {n: parse_estimator(n) for n in names}
    plugins = [n for n in names if parsed[n].plugin]  # computed last (_plugin_values)
    own = [n for n in names if not parsed[n].plugin]
    # RB draws are the first p - 1 coordinates of the plain ones, so RB or not share a group.
    groups: dict[tuple[bool, str, bool], list[str]] = {}
    for n in own:
        if n not in FUNCTION_SAMPLE_ESTIMATORS:
            e = parsed[n]
            groups.setdefault((e.point_set, e.sampling, e.rb), []).append(n)
    for s in spec.mc_samples:
        ei: dict[str, list[np.ndarray]] = {n: [] for n in own}
        log: dict[str, list[np.ndarray]] = {n: [] for n in own}
        counts = dict.fromkeys(own, s)
        naive: dict[int, list[np.ndarray]] = {}  # count != S -> naive iid MC values per rebuild
        for r in range(spec.rebuilds):
            drawn = []
            for (is_rule, sampling, _), members in groups.items():
                keys = ("rule", sampling) if is_rule else (sampling,)
                rebuild_seed = derive_seed(state.seed, "probe-rebuild", state.id, s, r, *keys)
                drawn.append((members, _draw(outcomes, parsed[members[0]], s, rebuild_seed)))
            # The rebuild's base samples, drawn once with as many rows as the most draws of any
            # group (the naive counts below are groups' counts); each draw index gets the same row
            # in every group.
            rows = max([s, *(d.objective.theta.shape[0] for _, d in drawn)])
            base = inner_base_samples(state, rows, X.dtype, X.device, s, r)  # None at q = 1
            for members, draws in drawn:
                top, values, n_jittered = _scaled_values(outcomes, draws, X, base)
                jittered += n_jittered
                mc = values.mean(dim=0)
                for name in members:
                    est = estimate(values, draws.joint, parsed[name])
                    ei[name].append((top.exp() * est).cpu().numpy())
                    log[name].append(_outer_log(top, est, mc).cpu().numpy())
                    counts[name] = draws.objective.n_evaluations
            for count in sorted(set(counts.values()) - {s}):
                # Naive iid theta-MC at the rule's count; the seed is the one `mc` would use with
                # a budget of `count`, so the same state probed at S = count pairs with it.
                draws = _draw(
                    outcomes,
                    "mc",
                    count,
                    derive_seed(state.seed, "probe-rebuild", state.id, count, r, "iid"),
                )
                top, values, n_jittered = _scaled_values(outcomes, draws, X, base)
                jittered += n_jittered
                naive.setdefault(count, []).append((top.exp() * values.mean(dim=0)).cpu().numpy())
            if "qlogei" in ei:
                sampler = SobolQMCNormalSampler(
                    torch.Size([s]),
                    seed=derive_seed(state.seed, "probe-qlogei", state.id, s, r) % (2**31),
                )
                with torch.no_grad():
                    log_value = (
                        qLogExpectedImprovement(model, best_f=(-y).max(), sampler=sampler)(X)
                        - log_std
                    )
                ei["qlogei"].append(log_value.exp().cpu().numpy())
                log["qlogei"].append(log_value.cpu().numpy())
        for name in own:
            out[(name, s)] = {
                "ei": np.stack(ei[name]),
                "log": np.stack(log[name]),
                "n_evaluations": counts[name],
                "baseline": np.stack(naive[counts[name]]) if counts[name] != s else None,
            }
            if name not in FUNCTION_SAMPLE_ESTIMATORS:
                out[(name, s)]["seconds_per_call"] = seconds_per_call(
                    outcomes,
                    parsed[name],
                    s,
                    probes.shape[-1],
                    seed=derive_seed(state.seed, "probe-cost", state.id, name, s),
                    q=state.q,
                )
    if plugins:
        best = float((-y).max())
        for name in plugins:
            entries, reference[name] = _plugin_values(spec, state, name, model, X, best, log_std)
            out.update(entries)
        out = {(n, s): out[(n, s)] for s in spec.mc_samples for n in names}  # the rows' order
    refs = {k: v.exp().cpu().numpy() for k, v in reference.items()}
    # Rankings read the log references: their exponentials underflow to 0 (false ties) where
    # log EI < -745, on a state far below its incumbent.
    log_refs = {k: v.cpu().numpy() for k, v in reference.items()}
    info = {
        "p": laplace.p,
        "fit_fallback": fit_info["fallback"],
        "cholesky_jitter": jittered,
        **{f"laplace_{k}": v for k, v in laplace.info().items()},
        "reference_rse": {k: v.cpu().numpy() for k, v in rse.items()},
    }
    return out, refs, log_refs, info
