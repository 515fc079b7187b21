"""MAP fit of a BO state: BoTorch's ``fit_gpytorch_mll`` vs the fast fit (issue 16).

States: for each of 4 tasks and N seeds, two probe states (:mod:`orthobench.probe.states`): the
shared initial design of ``n`` points that ``orthobench run`` evaluates for the seed, and the same
plus the first BO step of the probe's state optimizer (the state of the next step); Matérn-5/2
ARD GP, for ``n = 32`` (``--seeds``, default 10: 40 designs, 80 states) and for ``n = 64`` and
``n = 128`` (``--seeds-64``, ``--seeds-128``; fewer, the fits take longer). Per state and
method: fit seconds, the final negative log posterior ``-ell``
(:func:`orthobench.surrogates.fit.neg_map_objective`, nats) and the stationarity check. The fast
fit of the ``n + 1``-point state is warm-started from its fit of the ``n``-point state, as in a
BO loop. Both fits of a state run one after the other, so a load on the machine hits them alike.

Printed per ``n`` and task: the median seconds of each fit, the median speed-up (BoTorch
seconds / fast seconds) on the cold (``n``) and warm (``n + 1``) states, the largest
``-ell(fast) - -ell(botorch)`` (negative: the fast fit is better), the states where the fast fit
is worse by more than 1e-3 nats (listed below the table as ``task seed n``), the counts of
non-stationary fits and of fast-fit fallbacks; then per ``n`` the same over all tasks, and
the torch thread count. Run:
``.venv/bin/python benchmarks/fit_benchmark.py [--seeds N] [--seeds-64 N] [--seeds-128 N]
[--threads T]``.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import _states
import torch
from _timing import machine_line, timed

from orthobench.surrogates.fit import STATIONARY_TOL, fit_model, neg_map_objective
from orthobench.surrogates.theta_algebra import get_theta, theta_layout

TASKS = ("hartmann6", "ackley8", "michalewicz10", "levy16")
N0 = 32


def states(task: str, seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``n + 1``-point state (its first ``n`` points: the ``n``-point one), ``y`` negated:
    BoTorch maximizes."""
    x, y = _states.history(task, seed, n, steps=1)
    return x, -y


def _fit(x, y, fit: str, warm_start=None) -> tuple[float, float, dict]:
    """Seconds, ``-ell`` at the fitted theta and the fit info."""
    (model, info), seconds = timed(
        lambda: fit_model(x, y, "matern52-ard", fit=fit, warm_start=warm_start)
    )
    theta = get_theta(model).unsqueeze(0)
    nlp = float(neg_map_objective(theta, theta_layout(model), x, model.train_targets))
    return seconds, nlp, {**info, "theta": get_theta(model)}


def _row(label: str, states: list[dict]) -> str:
    """One table row over ``states`` (dicts of one state's measurements)."""
    cold = [st["speedup"] for st in states if not st["warm"]]
    warm = [st["speedup"] for st in states if st["warm"]]
    diffs = [st["diff"] for st in states]
    return " | ".join(
        (
            label,
            str(len(states)),
            f"{statistics.median(st['botorch_s'] for st in states):.3f}",
            f"{statistics.median(st['fast_s'] for st in states):.3f}",
            f"{statistics.median(cold):.1f}x",
            f"{statistics.median(warm):.1f}x",
            f"{min(st['speedup'] for st in states):.1f}x",
            f"{max(diffs):+.2e}",
            str(sum(d > 1e-3 for d in diffs)),
            str(sum(not st["botorch_stationary"] for st in states)),
            str(sum(not st["fast_stationary"] for st in states)),
            str(sum(st["fallback"] for st in states)),
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds at n = 32")
    parser.add_argument("--seeds-64", type=int, default=5, help="seeds at n = 64")
    parser.add_argument("--seeds-128", type=int, default=3, help="seeds at n = 128")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    warnings.simplefilter("ignore")
    # One fit of each kind first: imports and first-call overheads are not part of a BO step.
    x0 = torch.rand(N0, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    _fit(x0, x0.sum(-1), "botorch")
    _fit(x0, x0.sum(-1), "fast")

    print(f"threads {torch.get_num_threads()}, stationary: ||grad|| <= {STATIONARY_TOL:g}")
    header = (
        "n | task", "states", "botorch s", "fast s", "speed-up cold", "speed-up warm",
        "min speed-up", "max NLP diff", "worse by > 1e-3", "non-stat. botorch", "non-stat. fast",
        "fallbacks",
    )  # fmt: skip
    print(" | ".join(header))
    worse = []
    for n, seeds in ((N0, args.seeds), (2 * N0, args.seeds_64), (4 * N0, args.seeds_128)):
        if seeds == 0:
            continue
        all_states = []
        for task in TASKS:
            measured = []
            for seed in range(seeds):
                x, y = states(task, seed, n)
                previous = None
                for m in (n, n + 1):
                    tb, nlp_b, info_b = _fit(x[:m], y[:m], "botorch")
                    tf, nlp_f, info_f = _fit(x[:m], y[:m], "fast", warm_start=previous)
                    previous = info_f["theta"]
                    if nlp_f - nlp_b > 1e-3:
                        worse.append(f"{task} seed {seed} n {m}: {nlp_f - nlp_b:+.3f} nats")
                    measured.append(
                        {
                            "warm": m > n,
                            "botorch_s": tb,
                            "fast_s": tf,
                            "speedup": tb / tf,
                            "diff": nlp_f - nlp_b,
                            "botorch_stationary": info_b["stationary"],
                            "fast_stationary": info_f["stationary"],
                            "fallback": info_f["fallback"] is not None,
                        }
                    )
            print(_row(f"{n} | {task}", measured), flush=True)
            all_states += measured
        print(_row(f"{n} | all", all_states), flush=True)
    for line in worse:
        print("fast fit worse:", line)


if __name__ == "__main__":
    main()
