r"""The acquisition-noise probe (paper Sec. 5, RQ1-RQ2; appendix "Variance reduction and ranking").

Protocol, per probe *state* (task, surrogate, seed, state iteration):

1. Build the BO state once: the shared Sobol initial design of ``n_init`` points (the same as
   ``orthobench run`` uses for that seed), then ``state_iteration`` steps of ``mc-ei`` with the
   probe kernel. Fit the surrogate (GP: MAP + Laplace ``q(theta)``) and keep it fixed.
2. Draw ``n_probes`` scrambled-Sobol probe points and a high-precision reference of each target:
   the marginal EI over ``reference_samples`` scrambled-Sobol theta draws (theta estimators), the
   analytic EI at the MAP hyperparameters (qLogEI, whose MC noise is over function samples), the
   bootstrap mean over ``reference_samples`` fits (TPE).
3. For each ``S`` in ``mc_samples`` and each rebuild ``r < rebuilds``: draw fresh theta samples (or
   function samples / bootstrap fits), evaluate every estimator on them, and store the values.
   Estimators with the same sampling share the draws of a rebuild (common random numbers), so
   ratios against naive theta-MC are paired.

Estimator names: theta estimators ``<base>[+rb][@sampling]`` (:mod:`orthobench.theta_estimators`):
any of :data:`orthobench.estimators.ESTIMATORS` with an optional ``@sampling`` suffix (``iid``
default, ``antithetic``, ``qmc``) for theta draws, e.g. ``orth-shrink@qmc``; any point set of
:data:`orthobench.pointsets.POINT_SETS` (``sr3``, ``radial-cross``, ``qmc-owen``, ``unscented``,
...), whose weighted sum is the estimate; ``+rb`` integrates the constant mean out. Also
``qlogei`` (BoTorch's qLogEI with ``S`` QMC function samples at the MAP fit); ``mc-tpe`` and
``orthobo-tpe`` (bootstrap TPE, kernel column ``tpe``). Naive iid theta-MC (``mc``; ``mc-tpe``
for TPE) is always computed: it is the like-for-like baseline of every ratio (design pitfall 6).

Equal evaluation counts. ``S`` in ``mc_samples`` is a budget of EI evaluations. A point set uses
the largest count its rule allows within it (``sr3`` at ``p = 10``: ``1 + 22 K``, so 23 of 32),
recorded per row as ``n_evaluations``; its ratios are against naive iid theta-MC with exactly
``n_evaluations`` draws in the same rebuild (the row's ``mc`` row when the counts agree, else
extra naive draws, stored in ``baseline_values_ei``). Equal-weight estimators use ``S`` draws.

Every metric is defined once, in :mod:`orthobench.probe.metrics`. EI values are on the GP's
standardized outcome scale; the log scale is the outer-log acquisition OrthoBO maximizes,
``log max(EI_hat, alpha * EI_hat_MC)`` (:class:`orthobench.acquisition.MarginalLogEI`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from botorch.acquisition import LogExpectedImprovement, qLogExpectedImprovement
from botorch.sampling import SobolQMCNormalSampler
from torch.quasirandom import SobolEngine

from orthobench.loop import make_task, run_cell
from orthobench.probe import metrics
from orthobench.results import METADATA_KEY, run_metadata, write_parquet_atomic
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import Cell, ComponentSpec, ProbeSpec
from orthobench.surrogates.gp import fit_model
from orthobench.surrogates.laplace import ThetaSampledGP, laplace_posterior
from orthobench.theta_estimators import (
    ThetaDraws,
    ThetaEstimator,
    draw_thetas,
    estimate,
    parse_theta_estimator,
)

TPE_ESTIMATORS = ("mc-tpe", "orthobo-tpe")
FUNCTION_SAMPLE_ESTIMATORS = ("qlogei",)
#: Relative floor of the outer log, as OrthoBO's default (:class:`MarginalLogEI`).
ALPHA = 1e-3
_REFERENCE_CHUNK = 512


def parse_estimator(name: str) -> ThetaEstimator:
    """Parse a probe estimator name: ``"orth-shrink@qmc"`` -> ``("orth-shrink", "qmc", False)``.

    Theta estimators as :func:`orthobench.theta_estimators.parse_theta_estimator`; ``qlogei`` and
    the TPE estimators parse to ``(name, "", False)``.

    Raises:
        ValueError: naming the allowed estimators and samplings.
    """
    base = name.partition("@")[0]
    if base in TPE_ESTIMATORS or base in FUNCTION_SAMPLE_ESTIMATORS:
        if base != name:
            raise ValueError(f"estimator {base!r} takes no '@sampling' suffix, but got {name!r}.")
        return ThetaEstimator(base, "")
    try:
        return parse_theta_estimator(name)
    except ValueError as err:
        raise ValueError(
            f"{err} Other estimators: {', '.join([*FUNCTION_SAMPLE_ESTIMATORS, *TPE_ESTIMATORS])}."
        ) from None


@dataclass(frozen=True)
class ProbeState:
    """Identity of one probe state (one output file)."""

    suite: str
    task: ComponentSpec
    surrogate: str  # GP kernel name, or "tpe"
    seed: int
    state_iteration: int
    n_init: int

    @property
    def id(self) -> str:
        return f"{self.task.label}__{self.surrogate}__seed{self.seed}__it{self.state_iteration}"


def _history(
    state: ProbeState, kernel: str, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, float | None]:
    """The state's history in the unit cube (``t x d``, ``t``) and its best-so-far regret."""
    cell = Cell(
        suite=state.suite,
        task=state.task,
        optimizer=ComponentSpec(
            name="mc-ei", params={"kernel": kernel, "mc_samples": 32}, label=f"probe-{kernel}"
        ),
        seed=state.seed,
        n_init=state.n_init,
        budget=state.state_iteration,
        dtype=str(dtype).removeprefix("torch."),
    )
    records = [r for r in run_cell(cell, device) if r["status"] == "ok"]
    space = make_task(cell).space
    x = torch.as_tensor(
        space.to_unit(np.array([r["x"] for r in records])), dtype=dtype, device=device
    )
    y = torch.as_tensor([r["y"] for r in records], dtype=dtype, device=device)
    return x, y, records[-1]["regret"]


def _probe_points(
    dim: int, spec: ProbeSpec, state: ProbeState, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    engine = SobolEngine(
        dim, scramble=True, seed=derive_seed(state.seed, "probe-points", state.task.label) % (2**31)
    )
    return engine.draw(spec.n_probes, dtype=dtype).to(device)


def _outer_log(log_top: torch.Tensor, est: torch.Tensor, mc: torch.Tensor) -> torch.Tensor:
    return log_top + torch.maximum(est, ALPHA * mc).log()


def _scaled_values(
    model: Any, draws: ThetaDraws, X: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(top, values)``: per-probe max log-EI ``N`` and ``exp(log_ei - top)`` ``S x N``."""
    with torch.no_grad():
        log_ei = draws.gp(model).log_ei(X)  # S x N
    top = log_ei.max(dim=0).values
    return top, (log_ei - top).exp()


def _gp_values(
    spec: ProbeSpec,
    state: ProbeState,
    names: list[str],
    x: torch.Tensor,
    y: torch.Tensor,
    probes: torch.Tensor,
) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[str, np.ndarray], dict[str, Any]]:
    """Rebuild values of GP estimators and references.

    Returns ``{(name, S): {"ei": R x N, "log": R x N, "n_evaluations": int, "baseline": R x N |
    None}}`` (``baseline``: naive iid theta-MC at ``n_evaluations`` draws when that differs from
    ``S``; None: the ``mc`` values at ``S`` are the baseline), the references and fit info.
    """
    with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
        model, fit_info = fit_model(x, -y, state.surrogate)
    laplace = laplace_posterior(model)
    X = probes.unsqueeze(-2)  # N x 1 x d

    # Reference of the theta-marginal target: many scrambled-Sobol theta draws (chunked).
    z_ref = laplace.sample_whitened(
        spec.reference_samples, "qmc", seed=derive_seed(state.seed, "probe-reference", state.id)
    )
    log_ei_ref = torch.cat(
        [
            ThetaSampledGP.from_model(model, laplace.theta(z)).log_ei(X)
            for z in z_ref.split(_REFERENCE_CHUNK)
        ]
    )
    reference = {"theta": torch.logsumexp(log_ei_ref, dim=0) - math.log(log_ei_ref.shape[0])}
    # qLogEI's target: EI at the MAP hyperparameters (its MC noise is over function samples).
    # BoTorch returns it in original outcome units; the theta estimators work on the model's
    # standardized scale, so qLogEI values are divided by the outcome std to be comparable.
    log_std = float(model.outcome_transform.stdvs.squeeze().log())
    with torch.no_grad():
        reference["map"] = LogExpectedImprovement(model, best_f=(-y).max())(X) - log_std

    out: dict[tuple[str, int], dict[str, Any]] = {}
    parsed = {n: parse_estimator(n) for n in names}
    # Estimators with the same draws (equal-weight sampling or rule, RB or not) share them in a
    # rebuild (common random numbers); RB draws are the first p - 1 coordinates of the plain ones.
    groups: dict[tuple[bool, str, bool], list[str]] = {}
    for n in names:
        if n not in FUNCTION_SAMPLE_ESTIMATORS:
            e = parsed[n]
            groups.setdefault((e.point_set, e.sampling, e.rb), []).append(n)
    for s in spec.mc_samples:
        ei: dict[str, list[np.ndarray]] = {n: [] for n in names}
        log: dict[str, list[np.ndarray]] = {n: [] for n in names}
        counts = dict.fromkeys(names, s)
        naive: dict[int, list[np.ndarray]] = {}  # count != S -> naive iid MC values per rebuild
        for r in range(spec.rebuilds):
            for (is_rule, sampling, _), members in groups.items():
                keys = ("rule", sampling) if is_rule else (sampling,)
                draws = draw_thetas(
                    laplace,
                    parsed[members[0]],
                    s,
                    seed=derive_seed(state.seed, "probe-rebuild", state.id, s, r, *keys),
                )
                top, values = _scaled_values(model, draws, X)
                mc = values.mean(dim=0)
                for name in members:
                    est = estimate(values, draws, parsed[name])
                    ei[name].append((top.exp() * est).cpu().numpy())
                    log[name].append(_outer_log(top, est, mc).cpu().numpy())
                    counts[name] = draws.n_evaluations
            for count in sorted(set(counts.values()) - {s}):
                # Naive iid theta-MC at the rule's count; the seed is the one `mc` would use with
                # a budget of `count`, so the same state probed at S = count pairs with it.
                draws = draw_thetas(
                    laplace,
                    "mc",
                    count,
                    seed=derive_seed(state.seed, "probe-rebuild", state.id, count, r, "iid"),
                )
                top, values = _scaled_values(model, draws, X)
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
        for name in names:
            out[(name, s)] = {
                "ei": np.stack(ei[name]),
                "log": np.stack(log[name]),
                "n_evaluations": counts[name],
                "baseline": np.stack(naive[counts[name]]) if counts[name] != s else None,
            }
    refs = {k: v.exp().cpu().numpy() for k, v in reference.items()}
    info = {
        "p": laplace.p,
        "fit_fallback": fit_info["fallback"],
        **{f"laplace_{k}": v for k, v in laplace.info().items()},
    }
    return out, refs, info


def _tpe_values(
    spec: ProbeSpec,
    state: ProbeState,
    names: list[str],
    x: torch.Tensor,
    y: torch.Tensor,
    probes: torch.Tensor,
) -> tuple[dict[tuple[str, int], dict[str, np.ndarray]], dict[str, np.ndarray], dict[str, Any]]:
    """Rebuild values of the bootstrap-TPE estimators (paired: both on the same fits)."""
    from orthobench.optimizers.tpe import MCTPE, OrthoBOTPE

    seed = derive_seed(state.seed, "probe-tpe", state.id)
    out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    reference_opt = MCTPE(
        x.shape[-1], seed=seed, device=x.device, dtype=x.dtype, mc_samples=spec.reference_samples
    )
    reference_opt.tell(x.cpu().numpy(), y.cpu().numpy())
    draw = reference_opt.draw(0)
    reference = reference_opt.values(draw, probes).mean(dim=0).cpu().numpy()
    for s in spec.mc_samples:
        opt = OrthoBOTPE(x.shape[-1], seed=seed, device=x.device, dtype=x.dtype, mc_samples=s)
        opt.tell(x.cpu().numpy(), y.cpu().numpy())
        rows: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {n: ([], []) for n in names}
        # Rebuild 0 keys the reference draw above; rebuilds 1..R are independent of it.
        for r in range(1, spec.rebuilds + 1):
            draw = opt.draw(r)
            values = opt.values(draw, probes)
            mc = values.mean(dim=0)
            estimates = {"mc-tpe": mc, "orthobo-tpe": opt.estimate(draw, values)}
            for name in names:
                rows[name][0].append(estimates[name].cpu().numpy())
                rows[name][1].append(torch.maximum(estimates[name], ALPHA * mc).log().cpu().numpy())
        for name, (ei, log) in rows.items():
            out[(name, s)] = {"ei": np.stack(ei), "log": np.stack(log)}
    return out, {"tpe": reference}, {"p": 2 * x.shape[-1] + 1}


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
) -> list[dict[str, Any]]:
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
            {
                "suite": state.suite,
                "task": state.task.label,
                "kernel": state.surrogate,
                "estimator": name,
                "mc_samples": s,
                "n_evaluations": v.get("n_evaluations", s),
                "state_iteration": state.state_iteration,
                "seed": state.seed,
                "n_init": state.n_init,
                "rebuilds": v["ei"].shape[0],
                "n_probes": v["ei"].shape[1],
                "probe_variance": metrics.probe_variance(v["ei"]),
                "probe_variance_log": metrics.probe_variance(v["log"]),
                "bias_sq": metrics.bias_squared(v["ei"], reference),
                "mse": metrics.mse(v["ei"], reference),
                "var_ratio": var_ratio[0],
                "var_ratio_low": var_ratio[1],
                "var_ratio_high": var_ratio[2],
                "mse_ratio": mse_ratio[0],
                "mse_ratio_low": mse_ratio[1],
                "mse_ratio_high": mse_ratio[2],
                "median_point_var_ratio": float(
                    np.median(
                        metrics.pointwise_variance(base)
                        / np.maximum(metrics.pointwise_variance(v["ei"]), 1e-300)
                    )
                ),
                "median_point_mse_ratio": float(
                    np.median(
                        _pointwise_mse(base, base_reference)
                        / np.maximum(_pointwise_mse(v["ei"], reference), 1e-300)
                    )
                ),
                "top1_agreement": metrics.top1_agreement(v["log"], reference),
                "flip_rate": metrics.flip_rate(v["log"], reference, spec.top_k),
                "regret": regret,
                "baseline": baseline,
                "baseline_values_ei": [] if own_baseline is None else own_baseline.ravel().tolist(),
                "values_ei": v["ei"].ravel().tolist(),
                "values_log": v["log"].ravel().tolist(),
                "reference": reference.tolist(),
                "info": json.dumps(info, default=str),
            }
        )
    return rows


def probe_states(suite_name: str, spec: ProbeSpec) -> list[ProbeState]:
    """Every probe state of a suite's probe section: GP kernels, plus ``tpe`` when asked for."""
    surrogates = (
        list(spec.kernels)
        if any(parse_estimator(e)[0] not in TPE_ESTIMATORS for e in spec.estimators)
        else []
    )
    if any(parse_estimator(e)[0] in TPE_ESTIMATORS for e in spec.estimators):
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
) -> list[dict[str, Any]]:
    """Run the probe on one state; one summary row (with raw values) per (estimator, S)."""
    kernel = "matern52-ard" if state.surrogate == "tpe" else state.surrogate
    x, y, regret = _history(state, kernel, device, dtype)
    probes = _probe_points(x.shape[-1], spec, state, dtype, device)
    if state.surrogate == "tpe":
        names = ["mc-tpe", *[e for e in spec.estimators if e in TPE_ESTIMATORS and e != "mc-tpe"]]
        values, refs, info = _tpe_values(spec, state, names, x, y, probes)
        return _summaries(state, spec, values, refs, "mc-tpe", regret, info)
    names = [
        "mc",
        *[
            e
            for e in spec.estimators
            if parse_estimator(e)[0] not in TPE_ESTIMATORS and e not in ("mc", "mc@iid")
        ],
    ]
    values, refs, info = _gp_values(spec, state, names, x, y, probes)
    return _summaries(state, spec, values, refs, "mc", regret, info)


def run_probe(
    suite_name: str,
    spec: ProbeSpec,
    out_dir: str | Path,
    *,
    device: torch.device,
    force: bool = False,
    on_state: Callable[[ProbeState, str], None] | None = None,
) -> pd.DataFrame:
    """Probe every state of ``spec``, storing ``out_dir/probe/<state id>.parquet`` atomically.

    States already stored with the same configuration are read back, not recomputed (``force``
    recomputes them). Returns the summary rows of all states (raw values included).
    """
    probe_dir = Path(out_dir) / "probe"
    metadata = run_metadata(str(device))
    frames = []
    for state in probe_states(suite_name, spec):
        path = probe_dir / f"{state.id}.parquet"
        config_hash = _config_hash(state, spec)
        if not force and path.exists() and _stored_hash(path) == config_hash:
            frames.append(pq.read_table(path).to_pandas())
            if on_state:
                on_state(state, "stored")
            continue
        rows = probe_state(state, spec, device)
        table = pa.Table.from_pylist(rows)
        meta = {
            **metadata,
            "state": asdict(state),
            "probe": asdict(spec),
            "config_hash": config_hash,
        }
        write_parquet_atomic(
            table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, default=str).encode()}),
            path,
        )
        frames.append(table.to_pandas())
        if on_state:
            on_state(state, "done")
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _stored_hash(path: Path) -> str | None:
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta[METADATA_KEY]).get("config_hash") if METADATA_KEY in meta else None
