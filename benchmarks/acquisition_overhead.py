"""Cost of a control-variate estimator in OrthoBO's acquisition: per call, and once per step.

For a GP state of 32 Sobol points on Hartmann6 and Levy16 and S in {32, 512} theta draws, times
``acqf(X).sum().backward()`` for a batch of 8 candidates (one L-BFGS restart block) with the
naive mean and with each estimator on the *same* draws, and reports the estimator's extra cost as
a share of the call; then the one-off seconds of the estimator's draw weights
(:meth:`~orthobench.acquisition.MarginalLogEI.draw_weights`, computed when an acquisition first
evaluates with that estimator). Run: ``.venv/bin/python benchmarks/acquisition_overhead.py``.
"""

from __future__ import annotations

import time
import warnings

import torch
from botorch.test_functions import Hartmann, Levy
from torch.quasirandom import SobolEngine

from orthobench.optimizers.orthobo import OrthoBO

ESTIMATORS = ("orth", "orth-shrink")


def seconds_per_call(acqf, X: torch.Tensor, repeats: int = 20) -> float:
    for _ in range(3):
        acqf(X).sum().backward()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            acqf(X).sum().backward()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def main() -> None:
    warnings.simplefilter("ignore")
    for name, function in (("hartmann6", Hartmann(dim=6)), ("levy16", Levy(dim=16))):
        d = function.dim
        low, high = function.bounds
        x0 = SobolEngine(d, scramble=True, seed=0).draw(32).double()
        y0 = function(low + (high - low) * x0).numpy()
        for s in (32, 512):
            opt = OrthoBO(d, seed=0, theta_samples=s, estimator="mc")
            opt.tell(x0.numpy(), y0)
            acqf = opt.acquisition()
            X = torch.rand(
                8,
                1,
                d,
                dtype=torch.float64,
                generator=torch.Generator().manual_seed(0),
                requires_grad=True,
            )
            base = seconds_per_call(acqf, X)
            parts = [f"{name:10s} S={s:4d} mc {1000 * base:7.2f} ms"]
            for estimator in ESTIMATORS:
                start = time.perf_counter()
                acqf.draw_weights(estimator)
                once = time.perf_counter() - start
                acqf.estimator = estimator
                t = seconds_per_call(acqf, X)
                parts.append(
                    f"{estimator} {1000 * t:7.2f} ms ({100 * (t - base) / t:+5.1f}%; "
                    f"weights once {1000 * once:5.2f} ms)"
                )
            print(" | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
