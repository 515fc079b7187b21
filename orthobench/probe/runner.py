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

Estimator names: any of :data:`orthobench.estimators.ESTIMATORS` with an optional ``@sampling``
suffix (``iid`` default, ``antithetic``, ``qmc``) for theta draws, e.g. ``orth-shrink@qmc``;
``qlogei`` (BoTorch's qLogEI with ``S`` QMC function samples at the MAP fit); ``mc-tpe`` and
``orthobo-tpe`` (bootstrap TPE, kernel column ``tpe``). Naive iid theta-MC (``mc``; ``mc-tpe``
for TPE) is always computed: it is the like-for-like baseline of every ratio (design pitfall 6).

Every metric is defined once, in :mod:`orthobench.probe.metrics`. EI values are on the GP's
standardized outcome scale; the log scale is the outer-log acquisition OrthoBO maximizes,
``log max(EI_hat, alpha * EI_hat_MC)`` (:class:`orthobench.acquisition.MarginalLogEI`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
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

from orthobench.estimators import ESTIMATORS, get_estimator
from orthobench.loop import run_cell
from orthobench.probe import metrics
from orthobench.registry import TASKS
from orthobench.results import METADATA_KEY, run_metadata, write_parquet_atomic
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import Cell, ComponentSpec, ProbeSpec
from orthobench.surrogates.gp import fit_model
from orthobench.surrogates.laplace import THETA_SAMPLING, ThetaSampledGP, laplace_posterior

TPE_ESTIMATORS = ("mc-tpe", "orthobo-tpe")
FUNCTION_SAMPLE_ESTIMATORS = ("qlogei",)
#: Relative floor of the outer log, as OrthoBO's default (:class:`MarginalLogEI`).
ALPHA = 1e-3
_REFERENCE_CHUNK = 512


def parse_estimator(name: str) -> tuple[str, str]:
    """Split ``"orth-shrink@qmc"`` into ``("orth-shrink", "qmc")``; validates both parts.

    Raises:
        ValueError: naming the allowed estimators and samplings.
    """
    base, _, sampling = name.partition("@")
    if base in TPE_ESTIMATORS or base in FUNCTION_SAMPLE_ESTIMATORS:
        if sampling:
            raise ValueError(f"estimator {base!r} takes no '@sampling' suffix, but got {name!r}.")
        return base, ""
    if base not in ESTIMATORS:
        known = ", ".join([*ESTIMATORS, *FUNCTION_SAMPLE_ESTIMATORS, *TPE_ESTIMATORS])
        raise ValueError(
            f"unknown estimator {base!r}; known: {known} (theta estimators take @iid|@antithetic|@qmc)."
        )
    sampling = sampling or "iid"
    if sampling not in THETA_SAMPLING:
        raise ValueError(
            f"unknown sampling {sampling!r} in {name!r}; allowed: {', '.join(THETA_SAMPLING)}."
        )
    return base, sampling


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
    space = TASKS.create(state.task.name, **state.task.params).space
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


def _gp_values(
    spec: ProbeSpec,
    state: ProbeState,
    names: list[str],
    x: torch.Tensor,
    y: torch.Tensor,
    probes: torch.Tensor,
) -> tuple[dict[tuple[str, int], dict[str, np.ndarray]], dict[str, np.ndarray], dict[str, Any]]:
    """Rebuild values of GP estimators: ``{(name, S): {"ei": R x N, "log": R x N}}``, references."""
    with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
        model, fit_info = fit_model(x, -y, state.surrogate)
    laplace = laplace_posterior(model)
    X = probes.unsqueeze(-2)  # N x 1 x d
    eye = torch.eye(laplace.p, dtype=x.dtype, device=x.device)

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
    with torch.no_grad():
        reference["map"] = LogExpectedImprovement(model, best_f=(-y).max())(X)

    out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    parsed = [(n, *parse_estimator(n)) for n in names]
    for s in spec.mc_samples:
        per_name: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
            n: ([], []) for n, _, _ in parsed
        }
        for r in range(spec.rebuilds):
            for sampling in sorted({smp for _, base, smp in parsed if smp}):
                z = laplace.sample_whitened(
                    s,
                    sampling,
                    seed=derive_seed(state.seed, "probe-rebuild", state.id, s, r, sampling),
                )
                with torch.no_grad():
                    log_ei = ThetaSampledGP.from_model(model, laplace.theta(z)).log_ei(X)  # S x N
                top = log_ei.max(dim=0).values
                values = (log_ei - top).exp()
                mc = values.mean(dim=0)
                for name, base, smp in parsed:
                    if smp != sampling:
                        continue
                    est = get_estimator(base)(values, z, None, eye)
                    per_name[name][0].append((top.exp() * est).cpu().numpy())
                    per_name[name][1].append(_outer_log(top, est, mc).cpu().numpy())
            if "qlogei" in per_name:
                sampler = SobolQMCNormalSampler(
                    torch.Size([s]),
                    seed=derive_seed(state.seed, "probe-qlogei", state.id, s, r) % (2**31),
                )
                with torch.no_grad():
                    log_value = qLogExpectedImprovement(model, best_f=(-y).max(), sampler=sampler)(
                        X
                    )
                per_name["qlogei"][0].append(log_value.exp().cpu().numpy())
                per_name["qlogei"][1].append(log_value.cpu().numpy())
        for name, (ei, log) in per_name.items():
            out[(name, s)] = {"ei": np.stack(ei), "log": np.stack(log)}
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


def _summaries(
    state: ProbeState,
    spec: ProbeSpec,
    values: dict[tuple[str, int], dict[str, np.ndarray]],
    refs: dict[str, np.ndarray],
    baseline: str,
    regret: float | None,
    info: dict[str, Any],
) -> list[dict[str, Any]]:
    rows = []
    for (name, s), v in values.items():
        reference = refs["map"] if name == "qlogei" else refs.get("tpe", refs.get("theta"))
        base = values[(baseline, s)]["ei"]
        var_ratio = metrics.bootstrap_ratio_ci(
            base, v["ei"], "variance", seed=derive_seed(state.id, name, s) % (2**32)
        )
        mse_ratio = metrics.bootstrap_ratio_ci(
            base,
            v["ei"],
            "mse",
            reference,
            baseline_reference=refs.get("tpe", refs.get("theta")),
            seed=derive_seed(state.id, name, s, "mse") % (2**32),
        )
        rows.append(
            {
                "suite": state.suite,
                "task": state.task.label,
                "kernel": state.surrogate,
                "estimator": name,
                "mc_samples": s,
                "n_evaluations": s,
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
                "top1_agreement": metrics.top1_agreement(v["log"], reference),
                "flip_rate": metrics.flip_rate(v["log"], reference, spec.top_k),
                "regret": regret,
                "baseline": baseline,
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


def load_probe(dirs: Iterable[str | Path]) -> pd.DataFrame:
    """All stored probe rows under ``DIR/probe`` of each dir."""
    files = [f for d in dirs for f in sorted((Path(d) / "probe").glob("*.parquet"))]
    return (
        pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
        if files
        else pd.DataFrame()
    )
