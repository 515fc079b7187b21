r"""Screen the open candidates for the marginal EI before building them (issue 17, part 2).

States: built as the probe builds them (:mod:`orthobench.probe.states`): ``n0 = 32`` Sobol
points, Matérn-5/2 ARD, the probe's fit seed and its 64 probe points, for each function and seed.
Everything is on top of ``+rb`` (the constant mean integrated out; whitened draws ``z`` in
``p - 1`` dimensions, column 0 the widest direction of ``q``). Per state, the ``top_k = 8`` probe
points of largest ``Var_q(EI)`` (:func:`~orthobench.probe.screen.top_variance_points`, its own
draws), and there:

* ``qmc``: the default ``qmc-owen+rb``'s variance cut over iid MC at ``S = 32`` (``R = 64``
  randomizations against ``Var_q(EI) / S`` from 8192 iid draws).
* Candidate (a), one direction integrated out in each draw (``g = E[EI | z_perp]``, a 16-node
  Gauss-Hermite rule; :func:`~orthobench.probe.screen.screen_conditional`): ``1 / rho^2``, the cut
  per outer draw, for the noise direction (``a-noise``), the widest direction of ``q``
  (``a-lead``) and per point the least-squares direction of EI on ``z`` (``a-oracle``: an upper
  bound for any one direction; per-point directions are not buildable, every candidate would
  need its own thetas). For ``a-lead`` also ``a-lead/qmc``: the measured cut per outer draw of
  Owen-QMC over ``z_perp`` with the 16-node rule along the direction, over ``qmc-owen+rb`` at the
  same ``S = 32`` outer draws.
* Candidate (b), a defensive importance-sampling mixture ``r = q/2 + r_wide/2`` in whitened
  coordinates (:func:`~orthobench.probe.screen.screen_proposal`, 8192 draws of ``r``): the
  variance cut ``Var_q(EI) / Var_r(w EI)`` for ``r_wide = N(0, 2 I)`` (``b-mix2``),
  ``N(0, 4 I)`` (``b-mix4``), multivariate ``t_4`` (``b-t4``) and ``N(0, I + 3 e_0 e_0^T)``,
  wider along the widest direction only (``b-lead4``).

Predicted cut at equal EI evaluations on top of ``qmc-owen+rb``, optimistic (the candidate keeps
QMC's gain on the remaining coordinates): ``1 / (3 rho^2)`` for (a) (an unbiased nested rule needs
at least 3 nodes per outer draw to be exact to degree 3) and the variance cut itself for (b).
A candidate **passes** when that prediction, median over a state's top points, is at least 1.5
on at least 80% of the states screened.

Printed: per state and candidate the median and min over the top points, and per candidate the
share of states that pass. Run:
``.venv/bin/python benchmarks/screen_candidates.py [--functions ...] [--seeds 5 6 7 8 9]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings

import torch
from _timing import machine_line

from orthobench.pointsets import owen_sobol_points
from orthobench.probe.screen import (
    gauss_hermite,
    screen_conditional,
    screen_proposal,
    top_variance_points,
    whitened_draws,
    whitened_ei,
)
from orthobench.probe.states import ProbeState, build_history, probe_points
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import ComponentSpec, ProbeSpec
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.theta_estimators import constant_mean_conditional

KERNEL = "matern52-ard"
N0 = 32
S = 32
REBUILDS = 64
NODES = 16
PROPOSAL_DRAWS = 8192
NESTED_NODES = 3  # fewest nodes of an unbiased nested rule exact to degree 3
PASS_CUT = 1.5
PASS_SHARE = 0.8
DTYPE = torch.float64


def build_state(task: str, seed: int):
    """``(model, laplace, probes)`` of the probe state (task, Matérn ARD, seed, iteration 0)."""
    spec = ProbeSpec(
        tasks=(ComponentSpec(name=task, label=task),), kernels=(KERNEL,), n_init=N0, seeds=(seed,)
    )
    state = ProbeState(
        suite="screen", task=spec.tasks[0], surrogate=KERNEL, seed=seed, state_iteration=0,
        n_init=N0,
    )  # fmt: skip
    device = torch.device("cpu")
    x, y, *_ = build_history(state, spec, device, DTYPE)
    probes = probe_points(state, spec, x.shape[-1], DTYPE, device)
    with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
        model, _ = fit_model(x, -y, KERNEL)
    return model, laplace_posterior(model), probes


def _log_normal(z: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """``log N(z; 0, diag(var))``: ``n x m`` and ``m`` -> ``n``."""
    return -0.5 * (z.square() / var + var.log() + math.log(2 * math.pi)).sum(-1)


def _log_t(z: torch.Tensor, nu: float) -> torch.Tensor:
    m = z.shape[-1]
    return (
        math.lgamma((nu + m) / 2) - math.lgamma(nu / 2) - 0.5 * m * math.log(nu * math.pi)
        - 0.5 * (nu + m) * torch.log1p(z.square().sum(-1) / nu)
    )  # fmt: skip


def proposals(m: int, n: int, gen: torch.Generator) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{name: (z, log q - log r)}``: ``n`` draws of each defensive mixture ``q/2 + wide/2``."""
    ones = torch.ones(m, dtype=DTYPE)
    lead = ones.clone()
    lead[0] = 4.0
    eps = torch.randn(n, m, generator=gen, dtype=DTYPE)
    wide = (torch.rand(n, generator=gen, dtype=DTYPE) < 0.5)[:, None]
    chi = torch.distributions.Chi2(torch.tensor(4.0, dtype=DTYPE)).sample((n,))
    out = {}
    for name, z_wide, log_wide in [
        ("b-mix2", eps * math.sqrt(2), lambda z: _log_normal(z, 2 * ones)),
        ("b-mix4", eps * 2, lambda z: _log_normal(z, 4 * ones)),
        ("b-t4", eps / (chi / 4).sqrt()[:, None], lambda z: _log_t(z, 4.0)),
        ("b-lead4", eps * lead.sqrt(), lambda z: _log_normal(z, lead)),
    ]:
        z = torch.where(wide, z_wide, eps)
        log_q = _log_normal(z, ones)
        log_r = torch.logaddexp(log_q, log_wide(z)) - math.log(2)
        out[name] = (z, log_q - log_r)
    return out


def screen_state(task: str, seed: int) -> dict[str, torch.Tensor]:
    """Per candidate, ``top_k`` predicted cuts (and the raw statistics) at one state."""
    model, laplace, probes = build_state(task, seed)
    m = laplace.p - 1
    points, _ = top_variance_points(model, laplace, probes, top_k=8, n_draws=4096, seed=0)
    x = probes[points]
    iid_var = whitened_ei(
        model, laplace, whitened_draws(laplace, 8192, rb=True, seed=7), x, rb=True
    ).var(0)
    nodes, weights = gauss_hermite(NODES)
    lead = torch.zeros(m, dtype=DTYPE)
    lead[0] = 1.0
    qmc, line = [], []
    for r in range(REBUILDS):
        z = owen_sobol_points(m, S, generator=torch.Generator().manual_seed(100 + r)).z
        qmc.append(whitened_ei(model, laplace, z, x, rb=True).mean(0))
        z[:, 0] = 0.0
        lines = z[:, None, :] + nodes[:, None] * lead  # S x nodes x m
        values = whitened_ei(model, laplace, lines.reshape(-1, m), x, rb=True)
        line.append(torch.einsum("snj,n->j", values.reshape(S, NODES, -1), weights) / S)
    qmc_var = torch.stack(qmc).var(0)
    out = {"qmc": iid_var / S / qmc_var, "a-lead/qmc": qmc_var / torch.stack(line).var(0)}
    factor, _ = constant_mean_conditional(laplace)
    phi = [j for j, name in enumerate(laplace.layout.names) if name != "mean"]
    noise = laplace.layout.names[phi[0]] == "log_noise"
    # The whitened direction that moves only log noise: B^{-1} e_noise (B: phi's rows of A_rb).
    e_noise = torch.zeros(m, dtype=DTYPE)
    e_noise[0] = 1.0
    directions = {
        "a-noise": torch.linalg.solve(factor[phi], e_noise) if noise else None,
        "a-lead": lead,
        "a-oracle": None,
    }
    for name, direction in directions.items():
        if name == "a-noise" and direction is None:
            continue
        res = screen_conditional(
            model, laplace, x, direction, n_nodes=NODES,
            n_draws=1024 if direction is None else 2048, seed=1,
        )  # fmt: skip
        out[name] = 1.0 / res.kept_variance
    gen = torch.Generator().manual_seed(derive_seed(task, seed, "screen-proposals") % (2**63))
    for name, (z, log_w) in proposals(m, PROPOSAL_DRAWS, gen).items():
        out[name] = screen_proposal(model, laplace, x, z, log_w).variance_factor
    return out


def predicted(name: str, values: torch.Tensor) -> torch.Tensor:
    """Optimistic predicted cut at equal EI evaluations on top of ``qmc-owen+rb``."""
    return values / NESTED_NODES if name.startswith("a-") else values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--functions", nargs="+", default=["hartmann6", "ackley8", "michalewicz10", "levy16"]
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[5, 6, 7, 8, 9])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    warnings.simplefilter("ignore")
    print(f"threads {torch.get_num_threads()}, S = {S}, top_k = 8, Gauss-Hermite nodes {NODES}")
    print("state | candidate | raw median / min | predicted median / min")
    passes: dict[str, list[bool]] = {}
    for task in args.functions:
        for seed in args.seeds:
            start = time.perf_counter()
            out = screen_state(task, seed)
            for name, values in out.items():
                cut = predicted(name, values)
                raw = f"{values.median():.2f} / {values.min():.2f}"
                pred = "" if name == "qmc" else f"{cut.median():.2f} / {cut.min():.2f}"
                print(f"{task} s{seed} | {name} | {raw} | {pred}")
                if name != "qmc":
                    passes.setdefault(name, []).append(bool(cut.median() >= PASS_CUT))
            print(f"# {task} s{seed}: {time.perf_counter() - start:.0f} s", flush=True)
    print(
        f"candidate | states passing (predicted median >= {PASS_CUT}) | passes (>= {PASS_SHARE:.0%})"
    )
    for name, flags in passes.items():
        share = statistics.mean(flags)
        print(f"{name} | {sum(flags)}/{len(flags)} | {'yes' if share >= PASS_SHARE else 'no'}")


if __name__ == "__main__":
    main()
