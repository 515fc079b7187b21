"""MAP fit of a BO state: BoTorch's ``fit_gpytorch_mll`` vs the fast fit (issue 16).

States: for each of 4 functions and N seeds, a scrambled Sobol design of ``n0 = 32`` points (the
initial design of a run) and the same design plus one point (the state of the next BO step),
Matérn-5/2 ARD GP. Per state and method: fit seconds, the final negative log posterior ``-ell``
(:func:`orthobench.surrogates.fit.neg_map_objective`, nats) and the stationarity check. The fast
fit of the 33-point state is warm-started from its fit of the 32-point state, as in a BO loop.

Printed: per function the median speed-up (BoTorch seconds / fast seconds), the largest
``-ell(fast) - -ell(botorch)`` (negative: the fast fit is better) and the states where the fast
fit is worse by more than 1e-3 nats (listed below the table as ``function seed n``), the counts
of non-stationary fits and of fast-fit fallbacks, and the torch thread count. Run:
``.venv/bin/python benchmarks/fit_benchmark.py [--seeds N] [--threads T]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from botorch.test_functions import Ackley, Hartmann, Levy, Michalewicz
from torch.quasirandom import SobolEngine

from orthobench.surrogates.fit import STATIONARY_TOL, neg_map_objective
from orthobench.surrogates.gp import fit_model, get_theta, theta_layout

FUNCTIONS = {
    "hartmann6": Hartmann(dim=6),
    "ackley8": Ackley(dim=8),
    "michalewicz10": Michalewicz(dim=10),
    "levy16": Levy(dim=16),
}
N0 = 32


def _fit(x, y, fit: str, warm_start=None) -> tuple[float, float, dict]:
    """Seconds, ``-ell`` at the fitted theta and the fit info."""
    start = time.perf_counter()
    model, info = fit_model(x, y, "matern52-ard", fit=fit, warm_start=warm_start)
    seconds = time.perf_counter() - start
    theta = get_theta(model).unsqueeze(0)
    nlp = float(neg_map_objective(theta, theta_layout(model), x, model.train_targets))
    return seconds, nlp, {**info, "theta": get_theta(model)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    # One fit of each kind first: imports and first-call overheads are not part of a BO step.
    x0 = torch.rand(N0, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    _fit(x0, x0.sum(-1), "botorch")
    _fit(x0, x0.sum(-1), "fast")

    print(
        f"threads {torch.get_num_threads()}, seeds {args.seeds}, n = {N0} and {N0 + 1}, "
        f"stationary: ||grad|| <= {STATIONARY_TOL:g}"
    )
    header = (
        "function", "states", "speed-up cold", "speed-up warm", "botorch s", "fast s",
        "max NLP diff", "worse by > 1e-3", "non-stat. botorch", "non-stat. fast", "fallbacks",
    )  # fmt: skip
    print(" | ".join(header))
    worse = []
    for name, function in FUNCTIONS.items():
        low, high = function.bounds.double()
        cold, warm, b_sec, f_sec, diffs = [], [], [], [], []
        non_stat = {"botorch": 0, "fast": 0}
        fallbacks = 0
        for seed in range(args.seeds):
            design = SobolEngine(function.dim, scramble=True, seed=seed)
            x = design.draw(N0 + 1, dtype=torch.float64)
            y = -function(low + (high - low) * x)  # BoTorch maximizes
            previous = None
            for n, speedups in ((N0, cold), (N0 + 1, warm)):
                tb, nlp_b, info_b = _fit(x[:n], y[:n], "botorch")
                tf, nlp_f, info_f = _fit(x[:n], y[:n], "fast", warm_start=previous)
                previous = info_f["theta"]
                speedups.append(tb / tf)
                b_sec.append(tb)
                f_sec.append(tf)
                diffs.append(nlp_f - nlp_b)
                if nlp_f - nlp_b > 1e-3:
                    worse.append(f"{name} seed {seed} n {n}: {nlp_f - nlp_b:+.3f} nats")
                non_stat["botorch"] += not info_b["stationary"]
                non_stat["fast"] += not info_f["stationary"]
                fallbacks += info_f["fallback"] is not None
        row = (
            name,
            str(2 * args.seeds),
            f"{statistics.median(cold):.1f}x",
            f"{statistics.median(warm):.1f}x",
            f"{statistics.median(b_sec):.3f}",
            f"{statistics.median(f_sec):.3f}",
            f"{max(diffs):+.2e}",
            str(sum(d > 1e-3 for d in diffs)),
            str(non_stat["botorch"]),
            str(non_stat["fast"]),
            str(fallbacks),
        )
        print(" | ".join(row), flush=True)
    for line in worse:
        print("fast fit worse:", line)


if __name__ == "__main__":
    main()
