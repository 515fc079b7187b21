r"""Hypotheses for the OrthoBO paper's variance ratios (Tables 7-9), measured with the probe's tools.

The paper reports ``Var(MC) / Var(orth)`` of 8.6-15.6x at ``S = 32`` (Table 7, Matérn-5/2 ARD,
``n0 = 32``), 9.3-14.8x (Table 8, isotropic RBF) and 9.2-15.0x for TPE (Table 9). On the
project's Laplace posterior the paper's plug-in ``orth`` gives about 0.7-2x. This script measures
``orth`` against naive iid theta-MC on the same draws (common random numbers) under hypotheses
that could explain the gap. Nothing here is an option of the package: each hypothesis changes the
posterior or the metric *after* the library built the probe state.

Posterior hypotheses (GP; ``H`` the Hessian of the unnormalized negative log posterior at the MAP,
``n`` the number of observations, ``= n0`` at the states probed here):

- ``laplace``: the project's ``q = N(theta_hat, H^{-1})``, eigenvalues floored at the smallest
  prior precision (the probe's default, ``probe.laplace: floored``).
- ``unfloored``: the raw ``H`` wherever it is positive definite (``probe.laplace: unfloored``).
- ``cov/n``, ``cov/n^2``: the covariance divided by ``n`` (``H n``) or ``n^2``: a narrower ``q``.
- ``cov*n``: the Hessian of gpytorch's per-datum ``ExactMarginalLogLikelihood`` (``H / n``), the
  raw ``H`` as in ``unfloored``: a wider ``q``.
- ``likelihood-only``: ``H`` without the prior's precision ``diag(1 / scale^2)``; floored like
  ``laplace`` where it is not positive definite (counted).
- ``n0=64``, ``n0=128``: another initial design size, the project's ``q``.

Metric hypotheses (on the ``laplace`` and ``cov/n`` rows; every ratio is ``MC / orth``):

- ``ratio``: the probe's metric, mean over probes of the across-rebuild variance, ``R`` rebuilds;
- ``ratio_r16``: the same from the first 16 rebuilds (the paper's ``R``); ``r16_min``,
  ``r16_median``, ``r16_max``: over the ``R / 16`` disjoint groups of 16 rebuilds;
- ``ratio_probe_mean``: the across-rebuild variance of the mean over probes;
- ``ratio_pointwise_mean``, ``ratio_pointwise_median``: mean / median over probes of the pointwise
  ratios (mean of ratios instead of ratio of means);
- ``ratio_log``: the probe's metric on the outer-log acquisition ``log max(EI_hat, 1e-3 EI_MC)``;
- ``ratio_in_sample``: ``Var_s(h) / Var_s(h - gamma_hat^T c)``, the per-draw variance of one
  rebuild against the in-sample residual variance of the plug-in regression, averaged over
  rebuilds and probes (the variance an iid formula ``Var / S`` would report for each estimator).

``var_mc_orig`` is ``Var(MC)`` on the original outcome scale (the paper's Tables 7-8 quote
variances "x 1e-8"), ``var_mc`` on the GP's standardized scale (the probe's).

TPE (Table 9): OrthoBO-TPE with the plug-in ``orth`` and the project's ``orth-shrink``, controls
centred by the mean of 1024 independent bootstrap fits (``centering: independent``), and the
paper's sample-mean centring, against MC-TPE on the same fits; ``max_abs_diff_sample`` is the
largest ``|orth(sample centring) - MC-TPE|`` over rebuilds and probes.

States: the probe's (``orthobench.probe.states``): ``n0`` shared Sobol points of seed ``k``
(state iteration 0), 64 scrambled-Sobol probe points. Output: one CSV row per (surrogate,
hypothesis, function, seed, S). Run::

    .venv/bin/python benchmarks/paper_table7.py --out-dir DIR [--seeds 5] [--rebuilds 256]
        [--n0-rebuilds 64] [--tpe-rebuilds 64] [--threads 1]

(``--n0-rebuilds`` for the ``n0 = 64, 128`` states, whose GP algebra is 8-64x dearer.)
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from orthobench.estimators import orthogonal_mean
from orthobench.optimizers.tpe import OrthoBOTPE
from orthobench.probe import metrics
from orthobench.probe.states import ProbeState, build_history, probe_points
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import ComponentSpec, load_suite
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import (
    LaplacePosterior,
    laplace_posterior,
    neg_log_posterior_hessian,
)
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

FUNCTIONS = ("hartmann6", "ackley8", "michalewicz10", "levy16")
#: The paper's Var(MC) / Var(orth) at S = 8 and 32 (Tables 7 and 8) and for TPE at S = 32 (Table 9).
PAPER = {
    ("matern52-ard", 8): (
        2e-08 / 1.61e-07,
        9.68e-09 / 5.24e-09,
        9.51e-08 / 4.54e-08,
        0.00106 / 0.000709,
    ),
    ("matern52-ard", 32): (
        2.59e-09 / 3.02e-10,
        6.3e-09 / 4.17e-10,
        1.67e-08 / 1.07e-09,
        0.000208 / 2.27e-05,
    ),
    ("rbf-iso", 8): (
        5.91e-08 / 1.91e-07,
        1.28e-08 / 7.19e-09,
        1.15e-07 / 4.56e-08,
        0.00129 / 0.000758,
    ),
    ("rbf-iso", 32): (
        8.62e-09 / 7.3e-10,
        3.71e-09 / 4e-10,
        2.61e-08 / 1.76e-09,
        0.000301 / 2.85e-05,
    ),
    ("tpe", 32): (11.222 / 1.214, 13.182 / 1.284, 21.712 / 2.197, 20.944 / 1.399),
}
#: The paper's Var(MC) (Tables 7 and 8; original outcome units, we assume).
PAPER_VAR_MC = {
    ("matern52-ard", 8): (2e-08, 9.68e-09, 9.51e-08, 0.00106),
    ("matern52-ard", 32): (2.59e-09, 6.3e-09, 1.67e-08, 0.000208),
    ("rbf-iso", 8): (5.91e-08, 1.28e-08, 1.15e-07, 0.00129),
    ("rbf-iso", 32): (8.62e-09, 3.71e-09, 2.61e-08, 0.000301),
}
GROUP = 16  # the paper's rebuilds
CHUNK_DRAWS = 256  # theta draws per batched GP evaluation (bounds S x n x n memory)
METRIC_ROWS = ("laplace", "cov/n")  # hypotheses whose metric variants are reported
SAMPLE = "orth, sample centring"  # the paper's TPE recipe


def _posteriors(model, n: int) -> dict[str, LaplacePosterior]:
    """The posterior hypotheses of one fitted state (see the module notes)."""
    floored = laplace_posterior(model)
    raw = laplace_posterior(model, keep_raw=True)
    layout = floored.layout
    prior_precision = torch.tensor(
        [0.0 if math.isnan(s) else 1.0 / s**2 for s in layout.prior_scale], dtype=raw.hessian.dtype
    )
    h_raw = neg_log_posterior_hessian(
        floored.theta_hat, layout, model.train_inputs[0], model.train_targets
    )
    h_lik = h_raw - torch.diag(prior_precision)
    evals, evecs = torch.linalg.eigh(h_lik)
    lik_floor = 0.0 if bool(evals[0] > 0) else floored.eig_floor
    h_lik = (evecs * evals.clamp_min(lik_floor)) @ evecs.T if lik_floor else h_lik

    def with_precision(base: LaplacePosterior, hessian: torch.Tensor, floor: float):
        return dataclasses.replace(
            base, hessian=0.5 * (hessian + hessian.T), raw_eigenvalues=evals, eig_floor=floor
        )

    return {
        "laplace": floored,
        "unfloored": raw,
        "cov/n": dataclasses.replace(floored, hessian=floored.hessian * n),
        "cov/n^2": dataclasses.replace(floored, hessian=floored.hessian * n**2),
        "cov*n": dataclasses.replace(raw, hessian=raw.hessian / n),
        "likelihood-only": with_precision(floored, h_lik, lik_floor),
    }


def _ei_rebuilds(model, lap: LaplacePosterior, z: torch.Tensor, X: torch.Tensor):
    """Per-draw EI of ``R x S x p`` whitened draws at ``N x 1 x d`` probes.

    Returns ``top`` (``R x N``, the per-rebuild max log-EI) and ``values``
    (``R x S x N``, ``exp(log_ei - top)``): EI is ``exp(top) * values``.
    """
    r, s, p = z.shape
    chunks = []
    with torch.no_grad():
        for flat in z.reshape(r * s, p).split(CHUNK_DRAWS):
            chunks.append(ThetaSampledGP.from_model(model, lap.theta(flat)).log_ei(X))
    log_ei = torch.cat(chunks).reshape(r, s, -1)
    top = log_ei.max(dim=1).values
    return top, (log_ei - top[:, None]).exp()


def _ratio(mc: np.ndarray, est: np.ndarray) -> float:
    return metrics.probe_variance(mc) / metrics.probe_variance(est)


def _gp_row(top, values, z, y_std: float, with_metrics: bool) -> dict[str, float]:
    """Variances and ratios of ``mc`` and ``orth`` from ``R`` rebuilds (module notes)."""
    rebuilds = values.shape[0]
    orth = torch.stack([orthogonal_mean(values[i], z[i]) for i in range(rebuilds)])
    mc_scaled = values.mean(dim=1)
    mc = (top.exp() * mc_scaled).numpy()
    est = (top.exp() * orth).numpy()
    groups = [_ratio(mc[g : g + GROUP], est[g : g + GROUP]) for g in range(0, rebuilds, GROUP)]
    row = {
        "rebuilds": rebuilds,
        "var_mc": metrics.probe_variance(mc),
        "var_orth": metrics.probe_variance(est),
        "var_mc_orig": metrics.probe_variance(mc) * y_std**2,
        "ratio": _ratio(mc, est),
        "ratio_r16": groups[0],
        "r16_min": min(groups),
        "r16_median": float(np.median(groups)),
        "r16_max": max(groups),
    }
    if not with_metrics:
        return row
    point = metrics.pointwise_variance(mc) / metrics.pointwise_variance(est)
    log_mc = (top + mc_scaled.log()).numpy()
    log_est = (top + torch.maximum(orth, metrics.ALPHA * mc_scaled).log()).numpy()
    # In-sample residuals of the plug-in regression of h on the controls, per rebuild.
    ei = top.exp()[:, None] * values  # R x S x N
    centred_c = z - z.mean(dim=1, keepdim=True)
    centred_h = ei - ei.mean(dim=1, keepdim=True)
    resid = centred_h - centred_c @ (torch.linalg.pinv(centred_c) @ centred_h)
    row.update(
        ratio_probe_mean=float(np.var(mc.mean(1), ddof=1) / np.var(est.mean(1), ddof=1)),
        ratio_pointwise_mean=float(point.mean()),
        ratio_pointwise_median=float(np.median(point)),
        ratio_log=_ratio(log_mc, log_est),
        ratio_in_sample=float(centred_h.square().mean() / resid.square().mean()),
    )
    return row


def gp_rows(spec, kernel: str, n_init: int, seeds, mc_samples, rebuilds: int) -> list[dict]:
    """Rows of every GP hypothesis on the states of ``kernel`` (``n_init`` Sobol points)."""
    rows = []
    for task in FUNCTIONS:
        for seed in seeds:
            state = ProbeState(
                suite="paper-table7",
                task=ComponentSpec(name=task, label=task),
                surrogate=kernel,
                seed=seed,
                state_iteration=0,
                n_init=n_init,
            )
            x, y, *_ = build_history(state, spec, torch.device("cpu"), torch.float64)
            X = probe_points(state, spec, x.shape[-1], torch.float64, torch.device("cpu"))
            X = X.unsqueeze(-2)
            with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
                model, _ = fit_model(x, -y, kernel)
            y_std = float(model.outcome_transform.stdvs.squeeze())
            posteriors = _posteriors(model, x.shape[0])
            if n_init != spec.n_init:  # another n0: only the project's posterior
                posteriors = {f"n0={n_init}": posteriors["laplace"]}
            for s in mc_samples:
                gen = torch.Generator().manual_seed(derive_seed(state.id, "table7-draws", s))
                z = torch.randn(rebuilds, s, posteriors[next(iter(posteriors))].p, generator=gen)
                z = z.to(torch.float64)
                for name, lap in posteriors.items():
                    top, values = _ei_rebuilds(model, lap, z, X)
                    row = _gp_row(top, values, z, y_std, name in METRIC_ROWS)
                    rows.append(
                        {
                            "surrogate": kernel,
                            "hypothesis": name,
                            "function": task,
                            "seed": seed,
                            "S": s,
                            "n0": n_init,
                            "p": lap.p,
                            "q_positive_definite": bool(lap.raw_eigenvalues[0] > 0),
                            "floor_binds": lap.floored,
                            **row,
                        }
                    )
    return rows


def tpe_rows(spec, seeds, rebuilds: int, s: int = 32) -> list[dict]:
    """MC-TPE vs OrthoBO-TPE (``orth``, ``orth-shrink``; independent and sample centring)."""
    rows = []
    variants = {
        "orth": dict(estimator="orth"),
        "orth-shrink": dict(estimator="orth-shrink"),
        SAMPLE: dict(estimator="orth", centering="sample"),
    }
    for task in FUNCTIONS:
        for seed in seeds:
            state = ProbeState(
                suite="paper-table7",
                task=ComponentSpec(name=task, label=task),
                surrogate="tpe",
                seed=seed,
                state_iteration=0,
                n_init=spec.n_init,
            )
            x, y, *_ = build_history(state, spec, torch.device("cpu"), torch.float64)
            X = probe_points(state, spec, x.shape[-1], torch.float64, torch.device("cpu"))
            key = derive_seed(state.seed, "probe-tpe", state.id)
            # Same seed and rebuild: every optimizer has the same S fits (common random numbers);
            # the two independently centred estimators also share the control mean.
            opts = {
                name: OrthoBOTPE(x.shape[-1], seed=key, bootstrap_fits=s, **kw)
                for name, kw in variants.items()
            }
            for opt in opts.values():
                opt.tell(x.numpy(), y.numpy())
            est = {name: [] for name in ("mc", *variants)}
            for r in range(1, rebuilds + 1):
                independent, sample = opts["orth"].draw(r), opts[SAMPLE].draw(r)
                values = opts["orth"].values(independent, X)  # S x N
                est["mc"].append(values.mean(dim=0))
                for name, opt in opts.items():
                    est[name].append(
                        opt.estimate(sample if name == SAMPLE else independent, values)
                    )
            est = {name: torch.stack(v).numpy() for name, v in est.items()}
            diff = float(np.abs(est[SAMPLE] - est["mc"]).max())
            for name in variants:
                groups = [
                    _ratio(est["mc"][g : g + GROUP], est[name][g : g + GROUP])
                    for g in range(0, rebuilds, GROUP)
                ]
                rows.append(
                    {
                        "function": task,
                        "seed": seed,
                        "S": s,
                        "estimator": name,
                        "rebuilds": rebuilds,
                        "var_mc": metrics.probe_variance(est["mc"]),
                        "var_est": metrics.probe_variance(est[name]),
                        "ratio": _ratio(est["mc"], est[name]),
                        "ratio_r16": groups[0],
                        "r16_min": min(groups),
                        "r16_max": max(groups),
                        "max_abs_diff_sample": diff,
                    }
                )
    return rows


def _spread(values: pd.Series) -> str:
    """``median [min, max]`` with 3 significant digits."""
    return f"{values.median():.3g} [{values.min():.3g}, {values.max():.3g}]"


def summarize(gp: pd.DataFrame, tpe: pd.DataFrame) -> str:
    """The markdown tables of the report, from the two CSVs."""
    out = []
    for kernel, s in (("matern52-ard", 32), ("matern52-ard", 8), ("rbf-iso", 32), ("rbf-iso", 8)):
        rows = gp[(gp.surrogate == kernel) & (gp.S == s)]
        paper = " / ".join(f"{v:.3g}" for v in PAPER[(kernel, s)])
        paper_var = " / ".join(f"{v:.2g}" for v in PAPER_VAR_MC[(kernel, s)])
        out += [
            f"\n{kernel}, S = {s}. Paper Var(MC) / Var(orth), {' / '.join(FUNCTIONS)}: {paper}; "
            f"paper Var(MC): {paper_var}.\n",
            "| hypothesis | states | median per function | all states: median [min, max] "
            "| ratio of summed variances per function | median Var(MC), original units "
            "| q not PD / floor binds |",
            "|---|---:|---|---|---|---|---|",
        ]
        for name, h in rows.groupby("hypothesis", sort=False):
            by_fn = h.groupby("function", sort=False)
            medians = " / ".join(f"{by_fn.get_group(f).ratio.median():.3g}" for f in FUNCTIONS)
            pooled = " / ".join(
                f"{by_fn.get_group(f).var_mc.sum() / by_fn.get_group(f).var_orth.sum():.3g}"
                for f in FUNCTIONS
            )
            var_mc = " / ".join(f"{by_fn.get_group(f).var_mc_orig.median():.2g}" for f in FUNCTIONS)
            out.append(
                f"| {name} | {len(h)} | {medians} | {_spread(h.ratio)} | {pooled} | {var_mc} "
                f"| {int((~h.q_positive_definite).sum())} / {int(h.floor_binds.sum())} |"
            )
    metric_columns = (
        "ratio",
        "ratio_r16",
        "r16_min",
        "r16_max",
        "ratio_probe_mean",
        "ratio_pointwise_mean",
        "ratio_pointwise_median",
        "ratio_log",
        "ratio_in_sample",
    )
    for kernel in ("matern52-ard", "rbf-iso"):
        out += [
            f"\nMetric hypotheses, {kernel}, S = 32: median [min, max] over states.\n",
            "| metric | " + " | ".join(METRIC_ROWS) + " |",
            "|---|" + "---|" * len(METRIC_ROWS),
        ]
        rows = gp[(gp.surrogate == kernel) & (gp.S == 32)]
        for column in metric_columns:
            cells = [_spread(rows[rows.hypothesis == h][column]) for h in METRIC_ROWS]
            out.append(f"| {column} | " + " | ".join(cells) + " |")
    smallest = min(PAPER[("matern52-ard", 32)])
    out.append(
        f"\nGroups of 16 rebuilds, S = 32: the largest ratio over states and groups, and the states "
        f"with a group at or above {smallest:.3g} (the paper's smallest Table 7 ratio at S = 32).\n"
    )
    out += ["| surrogate | hypothesis | largest | states |", "|---|---|---:|---:|"]
    for kernel in ("matern52-ard", "rbf-iso"):
        for name in METRIC_ROWS:
            h = gp[(gp.surrogate == kernel) & (gp.S == 32) & (gp.hypothesis == name)]
            out.append(
                f"| {kernel} | {name} | {h.r16_max.max():.3g} "
                f"| {int((h.r16_max >= smallest).sum())} of {len(h)} |"
            )
    out += [
        "\nVar(MC, S = 8) / Var(MC, S = 32) (iid MC: 4 in expectation), "
        + " / ".join(FUNCTIONS)
        + ": median over states.\n",
        "| surrogate | ours, laplace | paper |",
        "|---|---|---|",
    ]
    for kernel in ("matern52-ard", "rbf-iso"):
        rows = gp[(gp.surrogate == kernel) & (gp.hypothesis == "laplace")]
        var = rows.pivot_table(index=["function", "seed"], columns="S", values="var_mc")
        ratio = (var[8] / var[32]).groupby(level="function").median()
        paper = [
            a / b
            for a, b in zip(PAPER_VAR_MC[(kernel, 8)], PAPER_VAR_MC[(kernel, 32)], strict=True)
        ]
        out.append(
            f"| {kernel} | "
            + " / ".join(f"{ratio[f]:.3g}" for f in FUNCTIONS)
            + " | "
            + " / ".join(f"{v:.3g}" for v in paper)
            + " |"
        )
    out += [
        "\nTPE, S = 32: Var(MC-TPE) / Var(estimator), median [min, max] over states.\n",
        "| estimator | states | ratio | ratio_r16 | r16_min | r16_max | max abs diff, sample centring |",
        "|---|---:|---|---|---|---|---:|",
    ]
    var_mc = tpe[tpe.estimator == SAMPLE].groupby("function").var_mc.median()
    out.insert(
        len(out) - 3,
        "\nTPE: median Var(MC-TPE) per function (ours; paper's Table 9: 11.2 / 13.2 / 21.7 / 20.9): "
        + " / ".join(f"{var_mc[f]:.3g}" for f in FUNCTIONS)
        + ".",
    )
    for name, h in tpe.groupby("estimator", sort=False):
        out.append(
            f"| {name} | {len(h)} | {_spread(h.ratio)} | {_spread(h.ratio_r16)} "
            f"| {_spread(h.r16_min)} | {_spread(h.r16_max)} | {h.max_abs_diff_sample.max():.3g} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rebuilds", type=int, default=256)
    parser.add_argument("--n0-rebuilds", type=int, default=64)
    parser.add_argument("--tpe-rebuilds", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--summarize", action="store_true", help="only print the tables from the CSVs in --out-dir"
    )
    args = parser.parse_args()
    if any(r % GROUP for r in (args.rebuilds, args.n0_rebuilds, args.tpe_rebuilds)):
        parser.error(f"Rebuild counts must be multiples of {GROUP}.")
    gp_csv, tpe_csv = args.out_dir / "table7-hypotheses.csv", args.out_dir / "table9-tpe.csv"
    if args.summarize:
        print(summarize(pd.read_csv(gp_csv), pd.read_csv(tpe_csv)))
        return
    # The commit the figures come from (taken before the run: HEAD may move while it runs).
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent,  # the checkout's, wherever the script is run from
    ).stdout.strip()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    spec = dataclasses.replace(
        load_suite(Path(__file__).parents[1] / "suites/probe-paper.yaml").probe,
        seeds=tuple(range(args.seeds)),
    )
    seeds = spec.seeds
    args.out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = []
    for kernel in ("matern52-ard", "rbf-iso"):
        rows += gp_rows(spec, kernel, spec.n_init, seeds, (8, 32), args.rebuilds)
        print(f"{kernel}: {time.perf_counter() - start:.0f} s", flush=True)
    for n_init in (64, 128):
        rows += gp_rows(spec, "matern52-ard", n_init, seeds, (32,), args.n0_rebuilds)
        print(f"n0={n_init}: {time.perf_counter() - start:.0f} s", flush=True)
    pd.DataFrame(rows).to_csv(
        args.out_dir / "table7-hypotheses.csv", index=False, float_format="%.4g"
    )
    tpe = tpe_rows(spec, seeds, args.tpe_rebuilds)
    pd.DataFrame(tpe).to_csv(tpe_csv, index=False, float_format="%.4g")
    print(summarize(pd.DataFrame(rows), pd.DataFrame(tpe)))
    print(
        f"done in {time.perf_counter() - start:.0f} s, torch threads {torch.get_num_threads()}, "
        f"commit {commit}"
    )


if __name__ == "__main__":
    main()
