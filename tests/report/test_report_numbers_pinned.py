"""Report numbers a reader relies on, pinned where a plausible slip would change them: the 95%
median interval, Holm's family and its use in verdicts, the paired headline of a comparison, what
counts as identical, and the summaries of the final table, the curves and the across-task views.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from orthobench.report.aggregate import mean_ranks, normalized_scores
from orthobench.report.compare import compare_pairs
from orthobench.report.stats import median_interval
from orthobench.report.tables import curves, final_table, traces

from .test_compare import _runs
from .test_tables import REFERENCE, _final_runs

SIX_BASE = [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
SIX_LOWER = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # new - base = -4 on every seed: p = 2 / 2^6


def _verdicts(frame: pd.DataFrame) -> dict[tuple[str, str], pd.Series]:
    pairs = compare_pairs(frame, "base")
    return {(r["task"], r["optimizer"]): r for _, r in pairs.iterrows()}


# -- stats.median_interval ------------------------------------------------------------------------


def _covering_rank(n: int, level: float = 0.95) -> int | None:
    """The largest ``k`` whose symmetric order-statistic interval ``(x_(k), x_(n+1-k))`` covers
    the median with probability ``1 - 2 P(Bin(n, 1/2) <= k - 1) >= level``; None if none does."""
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, j) for j in range(k)) / 2**n
        if 1 - 2 * tail >= level:
            best = k
    return best


def test_median_interval_is_95_percent_nan_below_6_values_and_the_extremes_at_8() -> None:
    """The documented 95% interval: 5 values cannot give one (their range covers the median with
    probability 1 - 2/32 = 0.9375), so the bounds are NaN. With 8 values the range covers with
    1 - 2/256 = 0.992, while (x_(2), x_(7)) covers with 1 - 2 * 9/256 = 0.930 < 0.95, so the
    interval is the 1st and 8th order statistics (a 90% interval would be the 2nd and 7th)."""
    median, low, high = median_interval([3.0, 1.0, 4.0, 1.5, 9.0])
    assert median == 3.0 and math.isnan(low) and math.isnan(high)
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3, 0.2]
    assert median_interval(values) == (pytest.approx(2.8), 0.2, 9.0)
    # By the binomial, at 95%, for every n from 5 to 13: the order statistics it must pick.
    rng = np.random.default_rng(0)
    for n in range(5, 14):
        sample = rng.permutation(np.arange(1.0, n + 1.0))  # x_(k) = k
        _, low, high = median_interval(sample)
        k = _covering_rank(n)
        if k is None:
            assert math.isnan(low) and math.isnan(high), n
        else:
            assert (low, high) == (k, n + 1 - k), n


# -- compare.compare_pairs ------------------------------------------------------------------------


def test_a_compared_verdict_reads_the_holm_p_not_the_raw_p() -> None:
    """Two optimizers of one task, each lower in the new set on all 6 seeds: raw p = 2/2^6 =
    0.03125 each, Holm over the task's 2 tests 0.0625 each. At the 5% level after correcting for
    the family, neither is a detected change."""
    base = _runs("base", {"a": SIX_BASE, "b": SIX_BASE})
    new = _runs("new", {"a": SIX_LOWER, "b": SIX_LOWER})
    for key, row in _verdicts(pd.concat([base, new], ignore_index=True)).items():
        assert row["p_value"] == pytest.approx(0.03125) and row["p_holm"] == pytest.approx(0.0625)
        assert row["verdict"].startswith(
            "no detected change: median 7.5 -> 3.5 (Holm p = 0.0625"
        ), (
            key,
            row["verdict"],
        )


def test_the_holm_family_of_a_comparison_is_the_optimizers_of_one_task() -> None:
    """Two tasks with one optimizer each, lower on all 6 seeds: each task's family holds one
    test, so Holm p = raw p = 0.03125 and each says better (pooling the tasks would double it)."""
    frames = [
        _runs(source, {"a": values}).assign(task=task)
        for task in ("t1", "t2")
        for source, values in (("base", SIX_BASE), ("new", SIX_LOWER))
    ]
    verdicts = _verdicts(pd.concat(frames, ignore_index=True))
    assert set(verdicts) == {("t1", "a"), ("t2", "a")}
    for row in verdicts.values():
        assert row["p_holm"] == pytest.approx(0.03125)
        assert row["verdict"] == (
            "better: median 7.5 -> 3.5 (Wilcoxon signed-rank over 6 paired seeds, Holm p = 0.0312)"
        )


def test_an_extra_seed_in_the_new_set_does_not_enter_the_headline_median() -> None:
    """The new set ran a 7th seed (final 100) the baseline lacks: the test is over the 6 paired
    seeds, and so is the median it reports (7.5 -> 3.5), not the new set's 7-seed median 4."""
    frame = pd.concat(
        [_runs("base", {"a": SIX_BASE}), _runs("new", {"a": [*SIX_LOWER, 100.0]})],
        ignore_index=True,
    )
    row = _verdicts(frame)[("t", "a")]
    assert (row["seeds_base"], row["seeds_new"], row["pairs"]) == (6, 7, 6)
    assert row["verdict"].startswith("better: median over the 6 paired seeds 7.5 -> 3.5 ("), row[
        "verdict"
    ]


def test_a_trajectory_that_differs_by_1e_13_is_not_identical() -> None:
    """Identical means every y the same: one first evaluation 1e-13 off (the final values equal)
    is a changed trajectory, which the verdict names with its size."""
    new = _runs("new", {"a": SIX_BASE})
    first = (new["seed"] == 0) & (new["iteration"] == 0)
    new.loc[first, "y"] += 1e-13
    row = _verdicts(pd.concat([_runs("base", {"a": SIX_BASE}), new], ignore_index=True))[("t", "a")]
    assert not row["identical"] and not row["common_identical"]
    assert row["verdict"] == (
        "equal final values on the 6 paired seeds; trajectories differ (max |dy| 1e-13)"
    )


def test_identical_cells_stored_in_another_row_order_are_identical() -> None:
    """The y of a cell are compared evaluation by evaluation (by ``iteration``), not row by row:
    the same cells with the baseline's rows stored in reverse order are identical."""
    base = _runs("base", {"a": SIX_BASE}).iloc[::-1]
    row = _verdicts(pd.concat([base, _runs("new", {"a": SIX_BASE})], ignore_index=True))[("t", "a")]
    assert row["identical"]
    assert row["verdict"] == "identical: every y of the 6 common cells is the same"


def test_a_verdict_says_how_many_paired_seeds_differ_when_some_are_equal() -> None:
    """7 paired seeds, 2 with equal final values: the test runs on the 5 that differ, and the
    verdict says so ("7 paired seeds, 5 differ"), which explains its smallest p of 2/2^5."""
    frame = pd.concat(
        [
            _runs("base", {"a": [*SIX_BASE, 4.0]}),
            _runs("new", {"a": [1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 4.0]}),
        ],
        ignore_index=True,
    )
    row = _verdicts(frame)[("t", "a")]
    assert (row["pairs"], row["differing"]) == (7, 5)
    assert "(7 paired seeds, 5 differ, smallest possible p 0.0625)" in row["verdict"], row[
        "verdict"
    ]


# -- tables.final_table, tables.curves ------------------------------------------------------------


SKEWED = {0: 1.0, 1: 1.0, 2: 1.0, 3: 10.0}


def test_the_final_tables_median_is_the_median_of_the_seeds() -> None:
    """Finals 1, 1, 1, 10: the median column is 1 (the mean, 3.25, is in its own column)."""
    table = final_table(_final_runs({"skew": SKEWED}), reference=None).set_index("optimizer")
    assert table.loc["skew", "median"] == 1.0 and table.loc["skew", "mean"] == 3.25


def test_the_final_tables_significance_is_after_holm() -> None:
    """4 optimizers each lower than the reference on all 7 seeds: raw p = 2/2^7 = 0.0156 each,
    Holm over the task's 4 tests 0.0625 each, so none is marked significant at 5%."""
    finals = {"ref": REFERENCE} | {
        f"lower{i}": {s: v - shift for s, v in REFERENCE.items()}
        for i, shift in enumerate((0.5, 0.25, 0.3, 0.2))
    }
    table = final_table(_final_runs(finals), reference="ref").set_index("optimizer")
    lower = table.drop(index="ref")
    np.testing.assert_allclose(lower["p_value"], 2 / 2**7)
    np.testing.assert_allclose(lower["p_holm"], 4 * 2 / 2**7)
    assert not table["significant"].any()


def test_a_curve_is_the_mean_over_seeds_not_the_median() -> None:
    """Seeds at 1, 1, 1 and 10 at the one evaluation: the curve (a mean with a t interval) is at
    3.25."""
    (row,) = curves(traces(_final_runs({"skew": SKEWED}))).itertuples()
    assert row.mean == 3.25 and row.n == 4


# -- aggregate ------------------------------------------------------------------------------------


def test_the_mean_rank_is_the_mean_over_tasks() -> None:
    """Ranks a = 1, 1, 2 and b = 2, 2, 1 over three tasks: mean ranks 4/3 and 5/3 (their medians,
    1 and 2, would overstate the gap)."""
    final = pd.DataFrame(
        {
            "run_set": "s",
            "optimizer": ["a"] * 3 + ["b"] * 3,
            "task": ["t1", "t2", "t3"] * 2,
            "rank": [1, 1, 2, 2, 2, 1],
        }
    )
    ranks = mean_ranks(final).set_index("optimizer")
    assert ranks["tasks"].to_dict() == {"a": 3, "b": 3}
    assert ranks["mean_rank"].to_list() == pytest.approx([4 / 3, 5 / 3])


def test_a_sobol_seed_with_a_negative_regret_is_not_scored() -> None:
    """Sobol's seed 5 has regret -1e-9 (below the optimum by rounding): dividing by it would give
    that seed a score of about 1e8 %. It is left out: 5 seeds score 50, 75, 50, 75, 50 -> median
    50, too few for a 95% interval (NaN bounds)."""
    finals = pd.DataFrame(
        {
            "run_set": "s",
            "task": "t",
            "metric": "regret",
            "optimizer": ["sobol"] * 6 + ["bo"] * 6,
            "seed": list(range(6)) * 2,
            "final": [1.0, 2.0, 1.0, 2.0, 1.0, -1e-9, 0.5, 0.5, 0.5, 0.5, 0.5, 1e-3],
        }
    )
    bo = normalized_scores(finals, {"s": "sobol"}).set_index("optimizer").loc["bo"]
    assert bo["seeds"] == 5 and bo["score"] == pytest.approx(50.0)
    assert math.isnan(bo["low"]) and math.isnan(bo["high"])
