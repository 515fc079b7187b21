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
``tpe``). Naive iid theta-MC (``mc``; ``mc-tpe`` for TPE) is always computed: it is the
like-for-like baseline of every ratio (docs/design.md, "Like-for-like baseline").

Equal evaluation counts. ``S`` in ``mc_samples`` is a budget of EI evaluations. A point set uses
the largest count its rule allows within it (``sr3`` at ``p = 10``: ``1 + 22 K``, so 23 of 32),
recorded per row as ``n_evaluations``; its ratios are against naive iid theta-MC with exactly
``n_evaluations`` draws in the same rebuild (the row's ``mc`` row when the counts agree, else
extra naive draws, stored in ``baseline_values_ei``). Equal-weight estimators use ``S`` draws.

Every metric is defined once, in :mod:`orthobench.probe.metrics`; each state's rows
(:class:`orthobench.results.ProbeRecord`) are stored by :class:`orthobench.results.ResultStore`.
EI values are on the GP's standardized outcome scale; the log scale is the outer-log acquisition
OrthoBO maximizes, ``log max(EI_hat, alpha * EI_hat_MC)``
(:class:`orthobench.acquisition.MarginalLogEI`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from orthobench.config.names import TPE_ESTIMATORS, parse_estimator
from orthobench.execution import thread_limits
from orthobench.probe import metrics
from orthobench.probe.gp_probe import gp_values
from orthobench.probe.states import ProbeState, build_history, probe_points
from orthobench.probe.tpe_probe import tpe_values
from orthobench.results import PROBE_SCHEMA, ProbeRecord, ResultStore, run_metadata
from orthobench.seeding import derive_seed
from orthobench.suite import ProbeSpec


def _pointwise_mse(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per probe point, the mean over rebuilds of the squared error (``R x N -> N``)."""
    return np.mean((values - reference[None, :]) ** 2, axis=0)


def _summaries(
    state: ProbeState,
    spec: ProbeSpec,
    values: dict[tuple[str, int], dict[str, Any]],
    refs: dict[str, np.ndarray],
    baseline: str,
    regret: float | None,
    info: dict[str, Any],
) -> list[ProbeRecord]:
    """One :class:`~orthobench.results.ProbeRecord` per (estimator, S) of a probed state."""
    rows = []
    for (name, s), v in values.items():
        reference = refs["map"] if name == "qlogei" else refs.get("tpe", refs.get("theta"))
        base_reference = refs.get("tpe", refs.get("theta"))
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
                top1_agreement=metrics.top1_agreement(v["log"], reference),
                flip_rate=metrics.flip_rate(v["log"], reference, spec.top_k),
                regret=regret,
                baseline=baseline,
                baseline_values_ei=[] if own_baseline is None else own_baseline.ravel().tolist(),
                values_ei=v["ei"].ravel().tolist(),
                values_log=v["log"].ravel().tolist(),
                reference=reference.tolist(),
                cholesky_jitter=info.get("cholesky_jitter"),
                laplace_floored=info.get("laplace_eig_floored"),
                laplace_min_eigenvalue=info.get("laplace_min_eigenvalue"),
                info=json.dumps(info, default=str),
                seconds_per_call=v.get("seconds_per_call"),
                threads=torch.get_num_threads(),
            )
        )
    return rows


def probe_states(suite_name: str, spec: ProbeSpec) -> list[ProbeState]:
    """Every probe state of a suite's probe section: GP kernels, plus ``tpe`` when asked for."""
    surrogates = (
        list(spec.kernels)
        if any(parse_estimator(e).base not in TPE_ESTIMATORS for e in spec.estimators)
        else []
    )
    if any(parse_estimator(e).base in TPE_ESTIMATORS for e in spec.estimators):
        surrogates.append("tpe")
    return [
        ProbeState(
            suite=suite_name, task=t, surrogate=k, seed=seed, state_iteration=it, n_init=spec.n_init
        )
        for t in spec.tasks
        for k in surrogates
        for seed in spec.seeds
        for it in spec.state_iterations
    ]


def _config_hash(state: ProbeState, spec: ProbeSpec) -> str:
    blob = json.dumps(
        {"state": asdict(state), "spec": asdict(spec)}, sort_keys=True, default=str
    ).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def probe_state(
    state: ProbeState, spec: ProbeSpec, device: torch.device, dtype: torch.dtype = torch.float64
) -> list[ProbeRecord]:
    """Run the probe on one state; one record (with raw values) per (estimator, S)."""
    x, y, regret = build_history(state, spec, device, dtype)
    probes = probe_points(state, spec, x.shape[-1], dtype, device)
    if state.surrogate == "tpe":
        names = ["mc-tpe", *[e for e in spec.estimators if e in TPE_ESTIMATORS and e != "mc-tpe"]]
        values, refs, info = tpe_values(spec, state, names, x, y, probes)
        return _summaries(state, spec, values, refs, "mc-tpe", regret, info)
    names = [
        "mc",
        *[
            e
            for e in spec.estimators
            if parse_estimator(e).base not in TPE_ESTIMATORS and e not in ("mc", "mc@iid")
        ],
    ]
    values, refs, info = gp_values(spec, state, names, x, y, probes)
    return _summaries(state, spec, values, refs, "mc", regret, info)


def run_probe(
    suite_name: str,
    spec: ProbeSpec,
    out_dir: str | Path,
    *,
    device: torch.device,
    threads: int = 1,
    force: bool = False,
    on_state: Callable[[ProbeState, str], None] | None = None,
) -> pd.DataFrame:
    """Probe every state of ``spec``, storing each in the :class:`ResultStore` at ``out_dir``.

    Each state runs with ``threads`` torch threads (restored afterwards), recorded in its rows
    and metadata: its values depend on the count (BLAS reductions), and so does its cost per call.
    One thread is the default, as for ``orthobench run``'s cells: a probe state is many small
    GP operations, which two threads on two busy cores slow down rather than speed up.

    States already stored with the same configuration are read back, not recomputed (``force``
    recomputes them; so is a state whose stored file is damaged, with a warning). The directory
    is held for this process while it runs (:meth:`ResultStore.open_for_writing`). Returns the
    rows of all states (raw values included), as stored.

    Raises:
        OrthobenchError: before anything is computed, when ``out_dir`` is not writable or another
            run holds it.
    """
    store = ResultStore(out_dir)
    frames = []
    with store.open_for_writing():
        stored = store.probe_journal.stored()
        if threads < 1:
            raise ValueError(f"`threads` must be >= 1, but got {threads=}.")
        metadata = {**run_metadata(str(device)), "threads": threads}
        for state in probe_states(suite_name, spec):
            config_hash = _config_hash(state, spec)
            status = "stored"
            if force or stored.get(state.id) != config_hash:
                start = time.perf_counter()
                with thread_limits(threads):
                    records = probe_state(state, spec, device)
                store.write_probe_state(
                    state.id,
                    config_hash,
                    records,
                    {**metadata, "state": asdict(state), "probe": asdict(spec)},
                    time.perf_counter() - start,
                )
                status = "done"
            frames.append(store.read_probe_state(state.id))
            if on_state:
                on_state(state, status)
    if not frames:
        return PROBE_SCHEMA.empty_table().to_pandas()
    return pd.concat(frames, ignore_index=True)
