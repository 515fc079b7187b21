"""Comparing a suite run twice: identical cells, moved distributions, missing cells."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from orthobench.report.compare import compare_cells, compare_pairs
from orthobench.report.comparison_sections import _comparison_p, comparison_section
from orthobench.report.data import load_results

from .conftest import cell, write_cell

SEEDS = range(7)


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


BASE = {"same": [1, 2, 3, 4, 5, 6, 7], "moved": [5, 6, 7, 8, 9, 10, 11],
        "noisy": [1, 2, 3, 4, 5, 6, 7], "few": [1, 2, 3], "gone": [1, 2]}  # fmt: skip
NEW = {"same": [1, 2, 3, 4, 5, 6, 7], "moved": [1, 2, 3, 0.5, 1.5, 2.5, 3.5],
       "noisy": [2, 1, 4, 3, 6, 5, 8], "few": [0, 1, 2], "added": [1, 2]}  # fmt: skip


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
    assert verdict["same"] == "identical: every y of the 7 common cells is the same"
    # moved: new - base is negative on all 7 seeds: exact signed-rank p = 2 / 2^7 = 0.015625.
    # Holm over the task's 2 testable optimizers (moved, noisy) doubles it; "same" has no nonzero
    # difference and "few" only 3 pairs, so neither is tested nor counted.
    assert pairs.loc["moved", "pairs"] == 7 and pairs.loc["moved", "median_delta"] == -7.5
    assert pairs.loc["moved", "p_value"] == pytest.approx(2 / 2**7)
    assert pairs.loc["moved", "p_holm"] == pytest.approx(2 * 2 / 2**7)
    assert verdict["moved"] == (
        "better: median 8 -> 2 (Wilcoxon signed-rank over 7 paired seeds, Holm p = 0.0312)"
    )
    # noisy: differences +1, -1, +1, -1, +1, -1, +1: no sign dominates.
    assert pairs.loc["noisy", "p_value"] > 0.5
    assert verdict["noisy"].startswith("no detected change: median 4 -> 4")
    assert not pairs.loc["same", "testable"] and pairs.loc["same", "p_min"] == 1.0
    assert pairs.loc["few", "p_min"] == 0.25 and pd.isna(pairs.loc["few", "p_value"])
    assert verdict["few"].startswith(
        "too few seeds for a test: median 2 -> 1 (3 paired seeds, smallest possible p 0.25)"
    )
    assert verdict["gone"] == "only in the baseline (2 seeds)"
    assert verdict["added"] == "new: not in the baseline (2 seeds)"


def test_the_test_pairs_cells_of_the_same_seed(runs):
    """A new set without seeds 0 and 1 of ``moved``: the 5 remaining pairs are too few, though 7
    base and 5 new values would be enough for an unpaired test."""
    runs = runs[~((runs["source"] == "new") & (runs["optimizer"] == "moved") & (runs["seed"] < 2))]
    moved = compare_pairs(runs, "base").set_index("optimizer").loc["moved"]
    assert (moved["seeds_base"], moved["seeds_new"], moved["pairs"]) == (7, 5, 5)
    assert moved["p_min"] == 0.0625 and not moved["testable"]


def _one_optimizer(base: list[float], new: list[float]) -> pd.DataFrame:
    """``base`` and ``new`` finals of optimizer ``o`` by seed (NaN: every evaluation failed)."""
    rows = []
    for source, values in (("base", base), ("new", new)):
        for seed, final in enumerate(values):
            for iteration, y in enumerate((final + 1.0, final)):
                rows.append(
                    {"source": source, "run_set": "s", "suite": "s", "task": "t",
                     "optimizer": "o", "seed": seed, "iteration": iteration, "y": y,
                     "regret": y, "best_y": y, "phase": "bo",
                     "status": "ok" if y == y else "invalid"}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_the_direction_is_the_signed_rank_tests_not_the_median_difference():
    """13 seeds: equal on 7, new lower on the other 6 (p = 2 / 2^6). The median difference is 0,
    yet every difference that carries a sign says new is lower: the verdict is 'better'."""
    pair = compare_pairs(_one_optimizer([5.0] * 13, [5.0] * 7 + [4, 3, 2, 1, 0.5, 4.5]), "base")
    (row,) = pair.itertuples()
    assert row.verdict.startswith("better:"), row.verdict
    assert row.median_delta == 0.0 and row.p_holm == pytest.approx(2 / 2**6)
    assert row.direction == -1


def test_the_verdict_medians_are_over_the_paired_seeds():
    """The new set lost seeds 7-9, the baseline's best: over all seeds the median rises
    (11.5 -> 12), over the 7 paired seeds, where new is 1 lower every time, it falls (13 -> 12)."""
    base = [10.0, 11, 12, 13, 14, 15, 16, 0, 0, 0]
    pair = compare_pairs(_one_optimizer(base, [v - 1 for v in base[:7]]), "base")
    (row,) = pair.itertuples()
    assert row.verdict.startswith("better: median over the 7 paired seeds 13 -> 12 ("), row.verdict
    assert (row.median_base, row.median_new) == (11.5, 12.0)
    assert (row.paired_median_base, row.paired_median_new) == (13.0, 12.0)


def test_cells_without_a_finite_value_are_not_reported_missing():
    """Every evaluation of the new set failed: its cells are there, with no final value; that is
    a regression to report, not a cell 'only in the baseline'."""
    nan = float("nan")
    pair = compare_pairs(_one_optimizer([1.0, 2.0, 3.0], [nan, nan, nan]), "base")
    (row,) = pair.itertuples()
    assert row.verdict == "no finite final value in the new set (3 cells; baseline: 3 seeds)"
    assert (row.cells_base, row.cells_new, row.seeds_new, row.common) == (3, 3, 0, 3)


def test_cells_that_ran_another_number_of_evaluations_are_not_compared(runs):
    """The reported bug: a new set run with a larger budget was 'better' on Holm p = 0.03, its
    finals after more evaluations than the baseline's. The verdict says why it does not test,
    and the task's other optimizers are Holm-corrected without it."""
    extra = runs[(runs["source"] == "new") & (runs["optimizer"] == "moved")]
    extra = extra[extra["iteration"] == 1].assign(iteration=2)
    pairs = compare_pairs(pd.concat([runs, extra], ignore_index=True), "base")
    moved = pairs.set_index("optimizer").loc["moved"]
    assert moved["verdict"] == (
        "not compared: 7 of the 7 common cells ran another number of evaluations in the new set "
        "(baseline 2, new 3), so their final values are not comparable"
    )
    assert not moved["testable"] and pd.isna(moved["p_value"]) and pd.isna(moved["p_holm"])
    noisy = pairs.set_index("optimizer").loc["noisy"]
    assert noisy["p_holm"] == noisy["p_value"]  # the only testable optimizer left
    (row,) = pairs[pairs["optimizer"] == "moved"].itertuples()
    assert _comparison_p(row) == "not compared (other evaluations)"  # not "too few seeds"


def test_a_cell_stored_on_one_side_only_is_neither_identical_nor_not(tmp_path):
    """The cells table said 'identical y: no' (and its CSV identical False) for a cell only in
    the baseline, as if its y had changed: it has none to compare, so '-' and an empty field."""
    base, new = tmp_path / "base", tmp_path / "new"
    for seed in range(2):
        write_cell(base, cell("s", "t", "sobol", seed, 2, 2), [3.0, 2.0, 1.0, 0.5])
    write_cell(new, cell("s", "t", "sobol", 0, 2, 2), [3.0, 2.0, 1.0, 0.5])
    _, cells = comparison_section(load_results([base, new]), str(base)).tables
    column = cells.header.index("identical y")
    assert [(row[4], row[column]) for row in cells.rows] == [("0", "yes"), ("1", "-")]
    stored = pd.read_csv(io.StringIO(cells.data.to_csv(index=False)))
    assert stored["identical"].tolist()[0] and stored["identical"].isna().tolist() == [False, True]
