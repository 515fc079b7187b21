"""RPR: the robust relevance-pursuit GP identifies an injected outlier; qLogNEI runs in the loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from botorch.acquisition import logei
from botorch.acquisition import utils as botorch_utils

from orthobench.optimizers import gp_base, rpr
from orthobench.optimizers.rpr import RPR, fit_robust_gp
from orthobench.registry import OPTIMIZERS
from tests.helpers import drive, record_infos

TINY = dict(function_samples=16, raw_samples=16, num_restarts=2)


def sphere(x: np.ndarray) -> float:
    return float(np.sum((x - 0.3) ** 2))


def test_injected_outlier_is_identified_on_a_toy_set() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(16, 2, dtype=torch.float64, generator=gen)
    y = (x - 0.3).square().sum(-1)
    y[5] += 3.0
    with torch.random.fork_rng():
        torch.manual_seed(0)
        _, info = fit_robust_gp(x, -y)
    assert info["outliers"] == [5] and info["fallback"] is None


@pytest.mark.slow
def test_rpr_runs_in_the_loop_reports_outliers_and_is_deterministic() -> None:
    calls = {"n": 0}

    def corrupted(x: np.ndarray) -> float:
        calls["n"] += 1
        # The third initial point is a gross outlier (e.g. a crashed training run scored high).
        return sphere(x) + (5.0 if calls["n"] == 3 else 0.0)

    runs, infos = [], []
    for _ in range(2):
        calls["n"] = 0
        opt = RPR(2, seed=0, **TINY)
        infos.append(record_infos(opt))
        runs.append(drive(opt, corrupted, n_init=8, steps=2))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert infos[0][0]["outliers"] == [2] and infos[0][0]["n_outliers"] == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(kernel="rbf"), "rbf"),
        (dict(fractions_of_outliers=(0.0, 1.5)), "1.5"),
        (dict(prior_outlier_fraction=0.0), "prior_outlier_fraction=0.0"),
        (dict(raw_samples=0), "raw_samples"),
    ],
)
def test_bad_params_raise_with_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RPR(2, seed=0, **kwargs)


def test_registered_with_botorch_defaults() -> None:
    entry = OPTIMIZERS.resolve("rpr")
    assert entry.factory is RPR
    assert (
        entry.params["fractions_of_outliers"][0] == 0.0
        and entry.params["prior_outlier_fraction"] == 0.2
    )
    OPTIMIZERS.check_params("rpr", {"fractions_of_outliers": [0.0, 0.1, 0.2]})


def test_the_baseline_is_pruned_once_and_pending_points_reach_qlognei_once(monkeypatch) -> None:
    """With pending points, qLogNEI's baseline is the history pruned once (BoTorch's
    ``prune_inferior_points`` on the told points) followed by the pending points once each; the
    baseline is not pruned again when the pending points are set."""
    pruned: list[tuple[torch.Tensor, torch.Tensor]] = []  # (points in, points kept) per prune
    prune = botorch_utils.prune_inferior_points

    def counting_prune(model, X, **kwargs):
        kept = prune(model, X, **kwargs)
        pruned.append((X.clone(), kept.clone()))
        return kept

    acqfs = []
    maximize = gp_base.optimize_acqf

    def capturing_optimize_acqf(acq_function, **kwargs):
        acqfs.append(acq_function)
        return maximize(acq_function, **kwargs)

    for module in (botorch_utils, logei, rpr):
        monkeypatch.setattr(module, "prune_inferior_points", counting_prune, raising=False)
    monkeypatch.setattr(gp_base, "optimize_acqf", capturing_optimize_acqf)
    opt = RPR(2, seed=0, **TINY)
    drive(opt, sphere, n_init=8, steps=0)
    pending = np.array([[0.31, 0.29], [0.7, 0.1]])
    assert opt.ask(2, pending=pending).x.shape == (2, 2)
    assert len(pruned) == 1
    (points_in, kept), (acqf,) = pruned[0], acqfs
    torch.testing.assert_close(points_in, opt.train_x)
    torch.testing.assert_close(acqf.X_baseline, torch.cat([kept, torch.as_tensor(pending)]))
