"""Conformance: every registered optimizer honours the ask/tell contract.

Each one, built through the registry with small settings: proposes ``n x d`` points in the unit
cube, fills non-negative timings and a JSON-serializable ``info``, and is deterministic (same
seed -> same suggestions; another seed -> different ones).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from orthobench.registry import OPTIMIZERS
from tests.helpers import drive

FAST = {"mc_samples": 8, "raw_samples": 16, "num_restarts": 2}
SMALL_PARAMS = {
    "qlogei": FAST,
    "ucb": FAST,
    "orthobo": FAST,
    "mc-ei": FAST,
    "turbo": {**FAST, "n_candidates": 100},
    "rpr": {**FAST, "fractions_of_outliers": [0.0, 0.2]},
    "mc-tpe": {"mc_samples": 8},
    "orthobo-tpe": {"mc_samples": 8, "control_mean_draws": 64},
}


def objective(u: np.ndarray) -> float:
    return float(np.sum((u - 0.3) ** 2) + 0.1 * np.sin(10 * u[0]))


def make(name: str, seed: int):
    params = {
        k: v for k, v in SMALL_PARAMS.get(name, {}).items() if k in OPTIMIZERS.resolve(name).params
    }
    return OPTIMIZERS.create(
        name, 3, seed=seed, device=torch.device("cpu"), dtype=torch.float64, **params
    )


@pytest.mark.parametrize("name", OPTIMIZERS.names())
def test_optimizer_contract(name):
    first = make(name, seed=11)
    ys = drive(first, objective, n_init=6, steps=3)
    assert ys.shape == (9,) and np.isfinite(ys).all()
    suggestion = first.ask(1)
    assert suggestion.x.shape == (1, 3)
    assert np.all((suggestion.x >= 0) & (suggestion.x <= 1))
    assert suggestion.fit_seconds >= 0 and suggestion.acq_seconds >= 0
    json.dumps(suggestion.info)

    again = make(name, seed=11)
    np.testing.assert_array_equal(drive(again, objective, n_init=6, steps=3), ys)
    other = make(name, seed=12)
    assert not np.array_equal(drive(other, objective, n_init=6, steps=3)[6:], ys[6:])
