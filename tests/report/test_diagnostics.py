"""OrthoBO diagnostics read from the steps' info by value."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from orthobench.report.diagnostics import diagnostics_table, ensemble_steps

from .conftest import ensemble_info


def test_ensemble_steps_and_counts_by_hand():
    rows = [
        {"run_set": "s", "task": "t", "optimizer": "orthobo", "seed": 0, "iteration": i,
         "phase": "bo", "info": json.dumps(ensemble_info(i)),
         "fallback": "rbf-iso: Laplace Hessian not positive definite" if i == 1 else None}
        for i in range(3)
    ] + [{"run_set": "s", "task": "t", "optimizer": "qlogei", "seed": 0, "iteration": 0,
          "phase": "bo", "info": "{}", "fallback": None}]  # fmt: skip
    steps = ensemble_steps(pd.DataFrame(rows))
    assert len(steps) == 6 and set(steps["optimizer"]) == {"orthobo"}
    second = steps[steps["kernel"] == "matern52-ard"]["weight"].tolist()
    assert second == pytest.approx([0.5, 0.6, 0.7])
    assert steps["entropy"].iloc[0] == pytest.approx(math.log(2))
    table = diagnostics_table(steps).iloc[0]
    # Floored at steps 0 and 2 (even), one indefinite Hessian, one jittered draw per step.
    assert (table["steps"], table["kernels"], table["floored_steps"]) == (3, 2, 2)
    assert (table["indefinite_steps"], table["fallback_steps"], table["jittered_draws"]) == (
        1,
        1,
        3,
    )
    assert table["min_eigenvalue"] == pytest.approx(0.0)  # 0.2 - 0.1 * 2
    assert table["final_entropy"] == pytest.approx(-(0.3 * math.log(0.3) + 0.7 * math.log(0.7)))
