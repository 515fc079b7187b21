"""Report tables by value on a hand-built results frame (expected numbers worked out by hand).

Task ``known`` has a known optimum (a ``regret`` on every row), task ``unknown`` has none. On
``known``, optimizer ``a`` has two seeds of 3 evaluations and ``b`` a second seed that stopped
after 2; on ``unknown``, ``a`` has one seed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from orthobench.report.tables import Z95, best_so_far_curves, final_table

NAN = float("nan")
COLUMNS = (
    "task optimizer seed iteration phase regret best_y fit_seconds acq_seconds status fallback"
).split()
ROWS = [
    ("known", "a", 0, 0, "init", 3.0, 3.5, 0.0, 0.0, "ok", None),
    ("known", "a", 0, 1, "bo", 2.0, 2.5, 1.0, 0.5, "ok", None),
    ("known", "a", 0, 2, "bo", 1.0, 1.5, 3.0, 0.5, "ok", "sobol"),
    ("known", "a", 1, 0, "init", 5.0, 5.5, 0.0, 0.0, "ok", None),
    ("known", "a", 1, 1, "bo", 2.0, 2.5, 2.0, 1.5, "invalid", None),
    ("known", "a", 1, 2, "bo", 0.0, 0.5, 2.0, 1.5, "ok", None),
    ("known", "b", 0, 0, "init", 4.0, 4.5, 0.0, 0.0, "ok", None),
    ("known", "b", 0, 1, "bo", 4.0, 4.5, 1.0, 1.0, "ok", None),
    ("known", "b", 0, 2, "bo", 2.0, 2.5, 1.0, 1.0, "ok", None),
    ("known", "b", 1, 0, "init", 6.0, 6.5, 0.0, 0.0, "ok", None),
    ("known", "b", 1, 1, "bo", 1.0, 1.5, 4.0, 2.0, "ok", None),
    ("unknown", "a", 0, 0, "init", NAN, 9.0, 0.0, 0.0, "ok", None),
    ("unknown", "a", 0, 1, "bo", NAN, 7.0, 0.5, 0.25, "ok", None),
]


@pytest.fixture
def frame() -> pd.DataFrame:
    # Rows shuffled: the tables must not depend on the stored order.
    rows = [ROWS[i] for i in np.random.default_rng(0).permutation(len(ROWS))]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_best_so_far_curves_mean_and_interval_by_hand(frame: pd.DataFrame) -> None:
    curves = best_so_far_curves(frame)
    # (known, a): seeds [3, 2, 1] and [5, 2, 0]. Half-width Z95 * sd / sqrt(2), with the sample sd
    # of two values u, v equal to |u - v| / sqrt(2): iteration 0 -> Z95 * 1, 1 -> 0, 2 -> Z95 / 2.
    # (known, b): seed 1 stopped at iteration 1, so both seeds are trimmed to iterations 0-1:
    # [4, 4] and [6, 1] -> means 5, 2.5; half-widths Z95 * 1, Z95 * 1.5.
    # (unknown, a): no regret, so best_y; one seed: a zero-width interval.
    expected = pd.DataFrame(
        {
            "task": ["known"] * 5 + ["unknown"] * 2,
            "optimizer": ["a", "a", "a", "b", "b", "a", "a"],
            "metric": ["regret"] * 5 + ["best_y"] * 2,
            "iteration": [0, 1, 2, 0, 1, 0, 1],
            "mean": [4.0, 2.0, 0.5, 5.0, 2.5, 9.0, 7.0],
            "half": [Z95, 0.0, Z95 / 2, Z95, 1.5 * Z95, 0.0, 0.0],
            "n": [2, 2, 2, 2, 2, 1, 1],
        }
    )
    expected["low"] = expected["mean"] - expected["half"]
    expected["high"] = expected["mean"] + expected["half"]
    expected = expected[["task", "optimizer", "metric", "iteration", "mean", "low", "high", "n"]]
    pd.testing.assert_frame_equal(curves, expected, check_dtype=False, atol=1e-12, rtol=0)


def test_final_table_by_hand(frame: pd.DataFrame) -> None:
    table = final_table(frame).set_index(["task", "optimizer"])
    assert list(table.index) == [("known", "a"), ("known", "b"), ("unknown", "a")]
    # The last evaluation of each seed, not trimmed: (known, a) 1 and 0, (known, b) 2 and 1.
    assert table["metric"].tolist() == ["regret", "regret", "best_y"]
    np.testing.assert_allclose(table["final_mean"], [0.5, 1.5, 7.0])
    np.testing.assert_allclose(table["final_ci95"][:2], [Z95 / 2, Z95 / 2])
    assert math.isnan(table.loc[("unknown", "a"), "final_ci95"])  # one seed: no interval
    assert table["seeds"].tolist() == [2, 2, 1]
    assert table["evaluations"].tolist() == [3, 3, 2]
    # Per-step seconds: means over the `bo` rows only (init rows hold zeros).
    np.testing.assert_allclose(table["fit_s_per_step"], [2.0, 2.0, 0.5])
    np.testing.assert_allclose(table["acq_s_per_step"], [1.0, 4.0 / 3.0, 0.25])
    assert table["failed_evals"].tolist() == [1, 0, 0]
    assert table["fallbacks"].tolist() == [1, 0, 0]


def test_a_task_with_a_row_missing_its_regret_falls_back_to_best_y(frame: pd.DataFrame) -> None:
    frame.loc[(frame["task"] == "known") & (frame["iteration"] == 0), "regret"] = NAN
    curves = best_so_far_curves(frame)
    assert set(curves["metric"]) == {"best_y"}
    known_a = curves[(curves["task"] == "known") & (curves["optimizer"] == "a")]
    np.testing.assert_allclose(known_a["mean"], [4.5, 2.5, 1.0])
    assert final_table(frame)["metric"].tolist() == ["best_y"] * 3
