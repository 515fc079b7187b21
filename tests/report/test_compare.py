"""Comparing a suite run twice: identical cells, moved distributions, missing cells."""

from __future__ import annotations

import pandas as pd
import pytest

from orthobench.report.compare import compare_cells, compare_pairs

SEEDS = range(6)


def _runs(source: str, finals: dict[str, list[float]]) -> pd.DataFrame:
    """Two evaluations per cell: y = final + 1, then final (the best so far is the final)."""
    rows = []
    for optimizer, values in finals.items():
        for seed, final in zip(SEEDS, values, strict=False):
            for iteration, y in enumerate((final + 1.0, final)):
                rows.append(
                    {"source": source, "run_set": "s", "suite": "s", "task": "t",
                     "optimizer": optimizer, "seed": seed, "iteration": iteration, "y": y,
                     "regret": y, "best_y": y, "phase": "bo", "status": "ok"}
                )  # fmt: skip
    return pd.DataFrame(rows)


BASE = {"same": [1, 2, 3, 4, 5, 6], "moved": [5, 6, 7, 8, 9, 10], "noisy": [1, 2, 3, 4, 5, 6],
        "gone": [1, 2]}  # fmt: skip
NEW = {"same": [1, 2, 3, 4, 5, 6], "moved": [1, 2, 3, 0.5, 1.5, 2.5], "noisy": [2, 1, 4, 3, 6, 5],
       "added": [1, 2]}  # fmt: skip


@pytest.fixture
def runs() -> pd.DataFrame:
    return pd.concat([_runs("base", BASE), _runs("new", NEW)], ignore_index=True)


def test_cells_are_matched_and_identical_ones_recognized(runs):
    cells = compare_cells(runs, "base").set_index(["optimizer", "seed"])
    assert cells.loc[("same", 0), "identical"] and cells.loc[("same", 0), "max_abs_dy"] == 0.0
    assert not cells.loc[("noisy", 0), "identical"]
    assert cells.loc[("noisy", 0), "max_abs_dy"] == 1.0 and cells.loc[("noisy", 0), "delta"] == 1.0
    assert pd.isna(cells.loc[("gone", 0), "new"]) and pd.isna(cells.loc[("added", 0), "base"])


def test_one_verdict_per_optimizer(runs):
    pairs = compare_pairs(runs, "base").set_index("optimizer")
    verdict = pairs["verdict"].to_dict()
    assert verdict["same"] == "identical: every y of the 6 common cells is the same"
    # moved: every new final below every base final, 6 vs 6: exact p = 2 / C(12, 6) = 0.00216;
    # Holm over the task's 3 tested optimizers multiplies the smallest p by 3.
    assert pairs.loc["moved", "p_value"] == pytest.approx(2 / 924)
    assert pairs.loc["moved", "p_holm"] == pytest.approx(3 * 2 / 924)
    assert verdict["moved"] == "better: median 7.5 -> 1.75 (Mann-Whitney U, Holm p = 0.00649)"
    assert verdict["noisy"].startswith("no detected change: median 3.5 -> 3.5")
    assert verdict["gone"] == "only in the baseline (2 seeds)"
    assert verdict["added"] == "new: not in the baseline (2 seeds)"
