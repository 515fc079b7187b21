r"""The acquisition-noise probe (paper Sec. 5, RQ1-RQ2; appendix "Variance reduction and ranking").

Protocol, per probe *state* (task, surrogate, seed, state iteration):

1. Build the BO state once (:mod:`orthobench.probe.states`): the shared Sobol initial design of
   ``n_init`` points (the same as ``orthobench run`` uses for that seed), then
   ``state_iteration`` steps of the probe section's ``state_optimizer`` with the probe kernel.
   Fit the surrogate (GP: MAP + Laplace ``q(theta)``) and keep it fixed.
2. Draw ``n_probes`` scrambled-Sobol probe points and a high-precision reference of each target:
   the marginal EI over ``reference_samples`` scrambled-Sobol theta draws (theta estimators), the
   analytic EI at the MAP hyperparameters (qLogEI, whose MC noise is over function samples), the
   bootstrap mean over ``reference_samples`` fits (TPE).
3. For each ``S`` in ``mc_samples`` and each rebuild ``r < rebuilds``: draw fresh theta samples (or
   function samples / bootstrap fits), evaluate every estimator on them, and store the values
   (:mod:`orthobench.probe.gp_probe`, :mod:`orthobench.probe.tpe_probe`). Estimators with the
   same sampling share the draws of a rebuild (common random numbers), so ratios against naive
   theta-MC are paired.

Estimator names (:mod:`orthobench.config.names`): theta estimators ``<base>[+rb][@sampling]``,
e.g. ``orth-shrink@qmc``, ``sr3`` or ``qmc-owen+rb``; ``qlogei`` (BoTorch's qLogEI with ``S`` QMC
function samples at the MAP fit); ``mc-tpe`` and ``orthobo-tpe`` (bootstrap TPE, kernel column
``tpe``); a user's acquisition by import path, ``module:Class``
(:class:`~orthobench.probe.plugins.ProbeAcquisition`, probed as qLogEI is). Naive iid theta-MC
(``mc``; ``mc-tpe`` for TPE) is always computed: it is the like-for-like baseline of every ratio
(docs/design.md, "Like-for-like baseline").

Equal evaluation counts. ``S`` in ``mc_samples`` is a budget of EI evaluations. A point set uses
the largest count its rule allows within it (``sr3`` at ``p = 10``: ``1 + 22 K``, so 23 of 32),
recorded per row as ``n_evaluations``; its ratios are against naive iid theta-MC with exactly
``n_evaluations`` draws in the same rebuild (the row's ``mc`` row when the counts agree, else
extra naive draws, stored in ``baseline_values_ei``). Equal-weight estimators use ``S`` draws.

Batch probes. With ``q: [1, 4]`` every GP state is probed once per batch size (a state per
``q``; TPE states at ``q = 1`` only): at ``q > 1`` a probe is a batch of ``q`` points and the
values are batch EI, per theta draw the inner-MC qEI on fixed base samples that OrthoBO's
:class:`~orthobench.acquisition.MarginalLogQEI` uses, and for ``qlogei`` BoTorch's qLogEI
(:mod:`orthobench.probe.gp_probe`). Rows carry their ``q``.

Every metric is defined once, in :mod:`orthobench.probe.metrics`; each state's rows
(:class:`orthobench.results.ProbeRecord`) are stored by :class:`orthobench.results.ResultStore`.
States run as cells do (:func:`orthobench.execution.run_units`), on any executor, with the same
resume and failure isolation; a stored state's rows are reused row by row
(:class:`~orthobench.probe.states.ProbeUnit`) when rows are added at the thread count they
were computed with (at another, the state is recomputed whole: :func:`run_probe`).
EI values are on the GP's standardized outcome scale; the log scale is the outer-log acquisition
OrthoBO maximizes, ``log max(EI_hat, alpha * EI_hat_MC)``
(:class:`orthobench.acquisition.MarginalLogEI`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pandas as pd
import torch

from orthobench.config.names import TPE_ESTIMATORS, parse_estimator
from orthobench.exceptions import ConfigError
from orthobench.execution import RunSummary, run_units
from orthobench.executors import Executor, InlineExecutor, Job
from orthobench.loop import ProgressCallback, check_buildable
from orthobench.probe import metrics
from orthobench.probe.gp_probe import gp_values
from orthobench.probe.states import (
    ProbeState,
    ProbeUnit,
    build_history,
    check_constrained_states,
    probe_points,
    state_cell,
    state_estimators,
)
from orthobench.probe.tpe_probe import tpe_values
from orthobench.results import PROBE_SCHEMA, ProbeRecord, ResultStore, code_version, read_metadata
from orthobench.seeding import derive_seed
from orthobench.suite import ProbeSpec
from orthobench.work import PROBE_STATE, WorkUnit, warn_thread_counts


def _pointwise_mse(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per probe point, the mean over rebuilds of the squared error (``R x N -> N``)."""
    return np.mean((values - reference[None, :]) ** 2, axis=0)


def _summaries(
    state: ProbeState,
    spec: ProbeSpec,
    values: dict[tuple[str, int], dict[str, Any]],
    refs: dict[str, np.ndarray],
    ranks: dict[str, np.ndarray],
    baseline: str,
    regret: float | None,
    info: dict[str, Any],
) -> list[ProbeRecord]:
    """One :class:`~orthobench.results.ProbeRecord` per (estimator, S) of a probed state.

    ``refs`` are the references on the values' scale (``ei``) and ``ranks`` the same references
    on a scale of the same order without underflow (the log of a GP's): the ranking metrics
    compare the log values with ``ranks``, the others the values with ``refs``.
    """
    rows = []
    base_key = "tpe" if "tpe" in refs else "theta"
    # Per-point arrays, kept out of the rows' diagnostics JSON (the rows have a column for them).
    rses = info.get("reference_rse", {})
    diagnostics = json.dumps({k: v for k, v in info.items() if k != "reference_rse"}, default=str)
    for (name, s), v in values.items():
        if name == "qlogei":
            key = "map"
        elif parse_estimator(name).plugin:  # its own reference, under its name
            key = name
        else:
            key = base_key
        reference, rank = refs[key], ranks[key]
        base_reference = refs[base_key]
        own_baseline = v.get("baseline")
        base = values[(baseline, s)]["ei"] if own_baseline is None else own_baseline
        var_ratio = metrics.bootstrap_ratio_ci(
            base, v["ei"], "variance", seed=derive_seed(state.id, name, s) % (2**32)
        )
        mse_ratio = metrics.bootstrap_ratio_ci(
            base,
            v["ei"],
            "mse",
            reference,
            baseline_reference=base_reference,
            seed=derive_seed(state.id, name, s, "mse") % (2**32),
        )
        rows.append(
            ProbeRecord(
                suite=state.suite,
                task=state.task.label,
                kernel=state.surrogate,
                estimator=name,
                mc_samples=s,
                n_evaluations=v.get("n_evaluations", s),
                state_iteration=state.state_iteration,
                seed=state.seed,
                n_init=state.n_init,
                rebuilds=v["ei"].shape[0],
                n_probes=v["ei"].shape[1],
                probe_variance=metrics.probe_variance(v["ei"]),
                probe_variance_log=metrics.probe_variance(v["log"]),
                bias_sq=metrics.bias_squared(v["ei"], reference),
                mse=metrics.mse(v["ei"], reference),
                var_ratio=var_ratio[0],
                var_ratio_low=var_ratio[1],
                var_ratio_high=var_ratio[2],
                mse_ratio=mse_ratio[0],
                mse_ratio_low=mse_ratio[1],
                mse_ratio_high=mse_ratio[2],
                median_point_var_ratio=float(
                    np.median(
                        metrics.pointwise_variance(base)
                        / np.maximum(metrics.pointwise_variance(v["ei"]), 1e-300)
                    )
                ),
                median_point_mse_ratio=float(
                    np.median(
                        _pointwise_mse(base, base_reference)
                        / np.maximum(_pointwise_mse(v["ei"], reference), 1e-300)
                    )
                ),
                top1_agreement=metrics.top1_agreement(v["log"], rank),
                flip_rate=metrics.flip_rate(v["log"], rank, spec.top_k),
                regret=regret,
                baseline=baseline,
                baseline_values_ei=[] if own_baseline is None else own_baseline.ravel().tolist(),
                values_ei=v["ei"].ravel().tolist(),
                values_log=v["log"].ravel().tolist(),
                reference=reference.tolist(),
                cholesky_jitter=info.get("cholesky_jitter"),
                laplace_floored=info.get("laplace_eig_floored"),
                laplace_min_eigenvalue=info.get("laplace_min_eigenvalue"),
                info=diagnostics,
                seconds_per_call=v.get("seconds_per_call"),
                threads=torch.get_num_threads(),
                q=state.q,
                reference_rse=rses[key].tolist() if key in rses else None,
            )
        )
    return rows


def probe_states(suite_name: str, spec: ProbeSpec) -> list[ProbeState]:
    """Every probe state of a suite's probe section: GP kernels at each of its ``q``, plus
    ``tpe`` (at ``q = 1`` only) when asked for.

    Raises:
        ConfigError: at ``probe.q``, for TPE estimators and a ``q`` without 1 (they would
            have no state).
    """
    surrogates = (
        list(spec.kernels)
        if any(parse_estimator(e).base not in TPE_ESTIMATORS for e in spec.estimators)
        else []
    )
    tpe = [e for e in spec.estimators if parse_estimator(e).base in TPE_ESTIMATORS]
    if tpe and 1 not in spec.q:
        raise ConfigError(
            "probe.q",
            f"TPE estimators ({', '.join(tpe)}) are probed at q = 1 only, but q="
            f"{list(spec.q)} has no 1: add it, or probe them in another suite.",
        )
    if tpe:
        surrogates.append("tpe")
    return [
        ProbeState(
            suite=suite_name,
            task=t,
            surrogate=k,
            seed=seed,
            state_iteration=it,
            n_init=spec.n_init,
            q=q,
        )
        for t in spec.tasks
        for k in surrogates
        for q in (spec.q if k != "tpe" else tuple(b for b in spec.q if b == 1))
        for seed in spec.seeds
        for it in spec.state_iterations
    ]


def probe_units(suite_name: str, spec: ProbeSpec) -> list[ProbeUnit]:
    """The states of :func:`probe_states` as units of work."""
    return [ProbeUnit(state, spec) for state in probe_states(suite_name, spec)]


def probe_state(
    state: ProbeState, spec: ProbeSpec, device: torch.device, dtype: torch.dtype = torch.float64
) -> list[ProbeRecord]:
    """Run the probe on one state; one record (with raw values) per (estimator, S)."""
    x, y, regret, constraints = build_history(state, spec, device, dtype)
    probes = probe_points(state, spec, x.shape[-1], dtype, device)
    names = state_estimators(state, spec)
    if state.surrogate == "tpe":
        values, refs, info = tpe_values(spec, state, names, x, y, probes)
        ranks = refs  # computed as they are, not as exponentials: nothing underflows
    else:
        values, refs, ranks, info = gp_values(spec, state, names, x, y, probes, constraints)
    return _summaries(state, spec, values, refs, ranks, names[0], regret, info)


def probe_rows(
    state: ProbeState, spec: ProbeSpec, rows: Sequence[tuple[str, int]], device: torch.device
) -> list[ProbeRecord]:
    """The ``(estimator, S)`` rows ``rows`` of a state (a subset of its
    :meth:`~orthobench.probe.states.ProbeUnit.rows`).

    :func:`probe_state` once per set of estimators wanted at the same budgets, with the section
    narrowed to them. A row depends on the state, its estimator and ``S`` only, so the rows equal
    those of one call for all; the state's fit, reference and baseline draws are made again, and
    the ``cholesky_jitter`` in a row counts the draws of its own call.
    """
    wanted = set(rows)
    budgets: dict[tuple[str, ...], list[int]] = {}
    for s in spec.mc_samples:
        names = tuple(n for n in state_estimators(state, spec) if (n, s) in wanted)
        if names:
            budgets.setdefault(names, []).append(s)
    records = []
    for names, samples in budgets.items():
        part = dataclasses.replace(spec, estimators=names, mc_samples=tuple(samples))
        computed = probe_state(state, part, device)
        records.extend(r for r in computed if (r.estimator, r.mc_samples) in wanted)
    return records


@dataclass(frozen=True)
class ProbeJob(Job):
    """The rows ``rows`` of a probe state (:func:`probe_rows`; its progress: one state)."""

    unit: ProbeUnit
    device: str
    threads: int
    rows: tuple[tuple[str, int], ...]

    progress_unit: ClassVar[str] = "states"

    @property
    def size(self) -> int:
        return 1

    def run(self, on_progress: ProgressCallback | None) -> list[ProbeRecord]:
        records = probe_rows(self.unit.state, self.unit.spec, self.rows, torch.device(self.device))
        if on_progress is not None:
            on_progress(self.size)
        return records

    def metadata(self) -> dict[str, Any]:
        return {"threads": self.threads, "state": _state_dict(self.unit.state)}


class ProbeRun(NamedTuple):
    rows: pd.DataFrame  # the rows the section asks for of every stored state, as stored
    summary: RunSummary


def run_probe(
    suite_name: str,
    spec: ProbeSpec,
    out_dir: str | Path,
    *,
    device: torch.device,
    executor: Executor | None = None,
    threads: int = 1,
    force: bool = False,
    show_progress: bool = False,
) -> ProbeRun:
    """Probe every state of ``spec`` on ``executor``, storing each in the :class:`ResultStore` at
    ``out_dir`` as it finishes (:func:`orthobench.execution.run_units`).

    Each state runs with ``threads`` torch threads (restored afterwards), recorded in its rows
    and metadata: its values depend on the count (BLAS reductions), and so does its cost per call.
    One thread is the default, as for ``orthobench run``'s cells: a probe state is many small
    GP operations, which two threads on two busy cores slow down rather than speed up.

    A state stored with its configuration now has only its missing rows computed (the rows of
    estimators and budgets the section did not ask for before; none: it is not run), and its
    stored rows are kept, unless they were computed with another thread count: then all the
    rows the section asks for are recomputed with ``threads``, with a warning, so that the
    rows of a state, compared with one another, share one count (:func:`_recount`); ``force``
    recomputes every row the section asks for, and a state whose
    stored file is damaged is recomputed, with a warning. A state that raises, or runs past the
    executor's ``timeout``, is journaled as failed and the others go on; a killed probe resumes
    without recomputing a stored state.

    Args:
        executor: Where the states run (default: :class:`~orthobench.executors.InlineExecutor`);
            its ``timeout`` is the time limit of one state.

    Returns:
        The rows the section asks for of every stored state (raw values included), in the order
        of the states and their rows, and the run's summary (its ``failed`` outcomes are the
        states that are not stored).

    Raises:
        OrthobenchError: before anything is computed, when ``out_dir`` is not writable or another
            run holds it.
        RunInterrupted: on Ctrl-C, with the summary of the states finished so far.
    """
    if threads < 1:
        raise ValueError(f"`threads` must be >= 1, but got {threads=}.")
    store = ResultStore(out_dir)
    units = probe_units(suite_name, spec)
    executor = executor or InlineExecutor()

    def plan() -> tuple[list[Job], list[WorkUnit]]:
        _adopt_earlier(store, units)
        stored = store.stored(PROBE_STATE)
        jobs: list[Job] = []
        done: list[WorkUnit] = []
        for unit in units:
            stale = force or not store.is_stored(unit, stored)
            frame = None if stale else store.read_probe_state(unit.id)
            have = set() if frame is None else set(_row_keys(frame))
            missing = tuple(row for row in unit.rows() if row not in have)
            if missing and frame is not None and _recount(unit, frame, threads):
                missing = tuple(unit.rows())
            if missing:
                jobs.append(ProbeJob(unit, str(device), threads, missing))
            else:
                done.append(unit)
        # As for cells: a task or state optimizer that cannot be built stops the probe here with
        # one line, not in every state after the others ran.
        n_constraints = check_buildable(
            [state_cell(job.unit.state, spec, torch.float64) for job in jobs],
            timeout=executor.timeout,
        )
        check_constrained_states([job.unit.state for job in jobs], spec, n_constraints)
        return jobs, done

    summary = run_units(
        store,
        executor,
        plan,
        device=device,
        label=f"[{suite_name}]",
        show_progress=show_progress,
    )
    return ProbeRun(_stored_rows(store, units), summary)


def _recount(unit: ProbeUnit, frame: pd.DataFrame, threads: int) -> bool:
    """Whether a stored state that rows are added to must be recomputed whole, with a warning:
    some of its stored rows that the section asks for record another thread count than
    ``threads``.

    A state's values depend on the count, and its rows are compared with one another (ratios
    against ``mc``, costs per call against ``mc``'s), so its rows share one count, the one its
    metadata records. A state with no row to add is reused at any count, as a stored cell is:
    each row records its own. Rows stored before the count was recorded (None) are not
    compared.
    """
    rows = set(unit.rows())
    asked = frame[[key in rows for key in _row_keys(frame)]]
    others = sorted({int(t) for t in asked["threads"].dropna()} - {threads})
    if others:
        warn_thread_counts(
            unit,
            others,
            threads,
            stored="stored rows were",
            redo=f"all {len(unit.rows())} of its rows are recomputed with {threads} (values "
            "depend on the count)",
            option="--threads",
            keep="add only the missing rows",
            stacklevel=5,
        )
    return bool(others)


def _row_keys(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """The ``(estimator, S)`` of each row of a state's frame."""
    return list(zip(frame["estimator"], frame["mc_samples"], strict=True))


def _stored_rows(store: ResultStore, units: Sequence[ProbeUnit]) -> pd.DataFrame:
    """The stored rows of ``units`` that their sections ask for, in the order of :meth:`rows`."""
    stored = store.stored(PROBE_STATE)
    frames = []
    for unit in units:
        if store.is_stored(unit, stored):
            frame = store.read_probe_state(unit.id)
            at = {key: i for i, key in enumerate(_row_keys(frame))}
            frames.append(frame.iloc[[at[row] for row in unit.rows() if row in at]])
    if not frames:
        return PROBE_SCHEMA.empty_table().to_pandas()
    return pd.concat(frames, ignore_index=True)


def _adopt_earlier(store: ResultStore, units: Sequence[ProbeUnit]) -> None:
    """Store under its configuration now each state that orthobench stored before states had a
    resolved configuration (its journal entry hashed the whole probe section) whose state and
    probe settings, ``estimators`` and ``mc_samples`` aside, are those of its unit: its rows are
    reused, as computed with the defaults of this code."""
    entries = store.stored_entries(PROBE_STATE)
    for unit in units:
        entry = entries.get(unit.id)
        if entry is None or "config" in entry:
            continue
        meta = read_metadata(store.probe_path(unit.id))
        stored_state = {k: v for k, v in meta.get("state", {}).items() if (k, v) != ("q", 1)}
        same_state = stored_state == _as_json(_state_dict(unit.state))
        if same_state and _settings(meta.get("probe", {})) == _settings(
            _as_json(asdict(unit.spec))
        ):
            kept = {k: v for k, v in meta.items() if k not in ("probe", "seconds")}
            store.adopt(unit, kept, entry.get("seconds"), code_version(meta))


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _state_dict(state: ProbeState) -> dict[str, Any]:
    """A state's fields, ``q`` only where it is not 1 (as stored before batch probes)."""
    fields = asdict(state)
    if state.q == 1:
        del fields["q"]
    return fields


def _settings(probe: dict[str, Any]) -> dict[str, Any]:
    """A probe section's JSON without the keys that rows are stored by, nor ``q`` (each state
    has its own; the earlier states were all ``q = 1``)."""
    return {k: v for k, v in probe.items() if k not in ("estimators", "mc_samples", "q")}
