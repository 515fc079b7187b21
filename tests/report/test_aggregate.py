"""Across-task views by value: normalized score, mean rank, targets and the ECDF."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orthobench.report.aggregate import ecdf, mean_ranks, normalized_scores, targets
from orthobench.report.figures import ecdf_svg, palette

FINALS = pd.DataFrame(
    [
        # run_set, task, optimizer, seed, metric, final
        ("s", "t1", "sobol", 0, "regret", 4.0),
        ("s", "t1", "sobol", 1, "regret", 2.0),
        ("s", "t1", "bo", 0, "regret", 1.5),
        ("s", "t1", "bo", 1, "regret", 0.0),
        ("s", "t2", "sobol", 0, "best_y", 1.0),  # no optimum: not scored
        ("s", "t2", "bo", 0, "best_y", 0.5),
    ],
    columns=["run_set", "task", "optimizer", "seed", "metric", "final"],
)


def test_normalized_score_pairs_each_seed_with_sobols_run_of_that_seed() -> None:
    scores = normalized_scores(FINALS, {"s": "sobol"}).set_index("optimizer")
    # Seed 0: 100 (4 - 1.5) / 4 = 62.5; seed 1: 100 (2 - 0) / 2 = 100 (against Sobol's mean 3,
    # an unpaired score, it would be 50 and 100); median 81.25.
    assert scores.loc["bo", "score"] == pytest.approx(81.25)
    assert scores.loc["bo", "seeds"] == 2
    assert scores.loc["sobol", "score"] == 0.0
    # Two seeds: no order-statistic interval reaches 95% (the range covers the median with
    # probability 1/2).
    assert scores[["low", "high"]].isna().all().all()
    assert set(scores["task"]) == {"t1"}
    assert normalized_scores(FINALS, {}).empty  # no Sobol run: no score


def test_normalized_score_leaves_out_seeds_without_a_usable_sobol_run() -> None:
    """Seed 2 has no Sobol run and Sobol's seed 3 hit the optimum (regret 0): neither is scored."""
    extra = pd.DataFrame(
        [("s", "t1", "bo", 2, "regret", 0.5), ("s", "t1", "sobol", 3, "regret", 0.0),
         ("s", "t1", "bo", 3, "regret", 1.0)],
        columns=FINALS.columns,
    )  # fmt: skip
    finals = pd.concat([FINALS, extra], ignore_index=True)
    scores = normalized_scores(finals, {"s": "sobol"}).set_index("optimizer")
    assert scores.loc["bo", "seeds"] == 2 and scores.loc["bo", "score"] == pytest.approx(81.25)


def test_mean_rank_over_tasks() -> None:
    final = pd.DataFrame(
        {"run_set": "s", "optimizer": ["a", "b", "a", "b"], "rank": [1.0, 2.0, 2.0, 1.0]}
    )
    assert mean_ranks(final)["mean_rank"].tolist() == [1.5, 1.5]


def test_targets_are_log_spaced_for_regrets_and_even_otherwise() -> None:
    np.testing.assert_allclose(targets(np.array([100.0, 10.0, 1000.0]), np.array([1.0, 5.0]), 3),
                               [100.0, 10.0, 1.0])  # fmt: skip
    np.testing.assert_allclose(targets(np.array([2.0]), np.array([-2.0]), 3), [2.0, 0.0, -2.0])
    assert targets(np.array([1.0]), np.array([1.0])).size == 0  # nothing improved
    assert targets(np.array([np.nan]), np.array([1.0])).size == 0


def test_ecdf_counts_reached_triples_by_hand() -> None:
    # One task, n_init 1. Three log-spaced targets from 8 (the value at the end of the design)
    # to 1 (the best final): 8, 2.83, 1. "a" reaches 8 at evaluation 1, 2.83 at 2, 1 at 3;
    # "b" reaches only 8, at evaluation 1.
    trace = pd.DataFrame(
        {
            "run_set": "s",
            "task": "t",
            "optimizer": ["a"] * 3 + ["b"] * 3,
            "seed": 0,
            "evaluation": [1, 2, 3] * 2,
            "n_init": 1,
            "value": [8.0, 2.0, 1.0, 8.0, 8.0, 4.0],
        }
    )
    table = ecdf(trace, n_targets=3)
    a = table[table["optimizer"] == "a"]["reached"].tolist()
    b = table[table["optimizer"] == "b"]["reached"].tolist()
    assert a == pytest.approx([1 / 3, 2 / 3, 1.0]) and b == pytest.approx([1 / 3, 1 / 3, 1 / 3])


def test_one_lucky_sobol_seed_does_not_turn_the_score_negative() -> None:
    """``bo`` has 1% of Sobol's regret on 9 of 10 seeds (score 99); on seed 9 Sobol got lucky
    (regret 0.001, bo 0.1: score -9900). A mean of the per-seed ratios would be -891, worse than
    Sobol; the median over seeds, 99, holds over seeds, and so does its 95% interval."""
    rows = [("s", "t", "sobol", s, "regret", 1.0) for s in range(9)]
    rows += [("s", "t", "bo", s, "regret", 0.01) for s in range(9)]
    rows += [("s", "t", "sobol", 9, "regret", 0.001), ("s", "t", "bo", 9, "regret", 0.1)]
    scores = normalized_scores(pd.DataFrame(rows, columns=FINALS.columns), {"s": "sobol"})
    bo = scores.set_index("optimizer").loc["bo"]
    assert bo["seeds"] == 10 and bo["score"] == pytest.approx(99.0)
    assert bo["low"] > 0.0 and bo["high"] <= 100.0


def test_a_score_that_rounds_to_zero_prints_without_a_minus_sign(tmp_path) -> None:
    """Reported: a median score of -0.0435% printed ``-0.0``, as if worse than Sobol."""
    from orthobench.report.data import load_results
    from orthobench.report.sections import across_section, series_palette
    from tests.report.conftest import cell, write_cell

    for task in ("t1", "t2"):
        write_cell(tmp_path, cell("s", task, "sobol", 0, 2, 2), [5.0, 4.0, 3.0, 1.0])
        write_cell(tmp_path, cell("s", task, "bo=qlogei", 0, 2, 2), [5.0, 4.0, 3.0, 1.000435])
    results = load_results([tmp_path])
    section = across_section(results, series_palette(results))
    (table,) = [t for t in section.tables if t.name == "normalized-scores"]
    assert [row[-1] for row in table.rows if row[2] == "bo"] == ["0.0", "0.0"]
    (heatmap,) = [b for b in section.blocks if getattr(b, "svg", "").count("score (%)")]
    assert ">-0.0<" not in heatmap.svg and ">0.0<" in heatmap.svg


def test_each_ecdf_curve_stops_at_its_own_last_evaluation() -> None:
    """Reported: every curve was carried flat to the largest evaluation of the report. ``a`` ran
    3 evaluations, ``b`` 5 and ``gone`` failed on every cell (no evaluation: its run set's 5)."""
    trace = pd.DataFrame(
        {
            "run_set": "s",
            "task": "t",
            "optimizer": ["a"] * 3 + ["b"] * 5,
            "seed": 0,
            "evaluation": [1, 2, 3, 1, 2, 3, 4, 5],
            "n_init": 1,
            "value": [8.0, 2.0, 1.0, 8.0, 8.0, 4.0, 2.0, 1.0],
        }
    )
    crashed = pd.DataFrame({"run_set": ["s"], "task": ["t"], "optimizer": ["gone"], "seed": [0]})
    table = ecdf(trace, n_targets=3, crashed=crashed)
    assert table.groupby("optimizer")["evaluation"].max().to_dict() == {"a": 3, "b": 5, "gone": 5}
    assert table.groupby("optimizer")["evaluation"].min().to_dict() == {"a": 1, "b": 1, "gone": 1}
    # The figure draws curves of different lengths.
    labels = ["a", "b", "gone"]
    assert "<svg" in ecdf_svg(table.assign(series=table["optimizer"]), palette(labels))
