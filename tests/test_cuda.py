"""The CUDA path: a GP cell run on the GPU matches the CPU run's shared initial design.

Skipped where there is no GPU (CI); run on a machine with one via ``pytest tests/test_cuda.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from orthobench.loop import run_cell
from tests.test_loop import cell

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]


@pytest.mark.parametrize("optimizer", ["qlogei", "ucb"])
def test_gp_cell_runs_on_cuda(optimizer):
    spec = cell(
        optimizer=optimizer,
        n_init=6,
        budget=3,
        opt_params={"mc_samples": 64, "raw_samples": 64, "num_restarts": 2},
    )
    gpu = run_cell(spec, device="cuda")
    cpu = run_cell(spec, device="cpu")
    assert [r["y"] for r in gpu if r["phase"] == "init"] == [
        r["y"] for r in cpu if r["phase"] == "init"
    ]
    bo = np.array([r["x"] for r in gpu if r["phase"] == "bo"])
    assert bo.shape == (3, 6) and np.isfinite([r["y"] for r in gpu]).all()
