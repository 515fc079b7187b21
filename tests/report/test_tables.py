"""Report tables by value on a hand-built results frame (expected numbers worked out by hand).

Run set ``s``. Task ``known`` has a known optimum (a ``regret`` on its rows): optimizer ``a`` has
two seeds of 3 evaluations, ``b`` a second seed that stopped after 2, ``c`` two seeds of one
initial point. Task ``unknown`` has no regret (``best_y`` is its metric) and one seed of ``a``.
Every row takes 1 s to evaluate. Intervals are Student-t: with two seeds ``u, v`` the half-width
is ``t_{0.975, 1} |u - v| / 2``, and a regret interval is cut at 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from orthobench.report.tables import curves, final_table, final_values, runtime_table, traces

T1 = 12.706204736174707  # t_{0.975} with 1 degree of freedom (two seeds)
NAN = float("nan")
COLUMNS = (
    "run_set task optimizer seed iteration phase regret best_y fit_seconds acq_seconds "
    "eval_seconds is_outlier status fallback"
).split()
ROWS = [
    ("s", "known", "a", 0, 0, "init", 3.0, 3.5, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "known", "a", 0, 1, "bo", 2.0, 2.5, 1.0, 0.5, 1.0, False, "ok", None),
    ("s", "known", "a", 0, 2, "bo", 1.0, 1.5, 3.0, 0.5, 1.0, False, "ok", "sobol"),
    ("s", "known", "a", 1, 0, "init", 5.0, 5.5, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "known", "a", 1, 1, "bo", 2.0, 2.5, 2.0, 1.5, 1.0, False, "invalid", None),
    ("s", "known", "a", 1, 2, "bo", 0.0, 0.5, 2.0, 1.5, 1.0, False, "ok", None),
    ("s", "known", "b", 0, 0, "init", 4.0, 4.5, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "known", "b", 0, 1, "bo", 4.0, 4.5, 1.0, 1.0, 1.0, False, "ok", None),
    ("s", "known", "b", 0, 2, "bo", 2.0, 2.5, 1.0, 1.0, 1.0, True, "ok", None),
    ("s", "known", "b", 1, 0, "init", 6.0, 6.5, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "known", "b", 1, 1, "bo", 3.0, 3.5, 4.0, 2.0, 1.0, False, "ok", None),
    ("s", "known", "c", 0, 0, "init", 0.5, 1.0, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "known", "c", 1, 0, "init", 4.0, 4.5, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "unknown", "a", 0, 0, "init", NAN, 9.0, 0.0, 0.0, 1.0, False, "ok", None),
    ("s", "unknown", "a", 0, 1, "bo", NAN, 7.0, 0.5, 0.25, 1.0, False, "ok", None),
]


@pytest.fixture
def runs() -> pd.DataFrame:
    # Rows shuffled: no table may depend on the stored order.
    rows = [ROWS[i] for i in np.random.default_rng(0).permutation(len(ROWS))]
    return pd.DataFrame(rows, columns=COLUMNS)


def _rows(table: pd.DataFrame, columns: list[str]) -> list[tuple]:
    return [tuple(row) for row in table[columns].itertuples(index=False)]


def test_traces_trim_to_the_shortest_seed_and_accumulate_seconds(runs: pd.DataFrame) -> None:
    trace = traces(runs)
    # b's seed 1 has 2 evaluations, so b's seed 0 loses its third.
    known_b = trace[(trace["task"] == "known") & (trace["optimizer"] == "b")]
    assert _rows(known_b, ["seed", "evaluation", "value"]) == [
        (0, 1, 4.0), (0, 2, 4.0), (1, 1, 6.0), (1, 2, 3.0)
    ]  # fmt: skip
    # Cumulative fit + acquisition + evaluation seconds of a's seed 0: 1, 1 + 2.5, 3.5 + 4.5.
    known_a0 = trace[
        (trace["task"] == "known") & (trace["optimizer"] == "a") & (trace["seed"] == 0)
    ]
    assert known_a0["seconds"].tolist() == [1.0, 3.5, 8.0]
    assert set(known_a0["n_init"]) == {1}
    assert known_b["is_outlier"].tolist() == [False, False, False, False]  # the outlier was trimmed
    assert set(trace.loc[trace["task"] == "known", "metric"]) == {"regret"}
    unknown = trace[trace["task"] == "unknown"]
    assert set(unknown["metric"]) == {"best_y"} and unknown["value"].tolist() == [9.0, 7.0]


def test_curves_mean_and_t_interval_by_hand(runs: pd.DataFrame) -> None:
    table = curves(traces(runs))
    expected = [
        # task, optimizer, evaluation, mean, half-width, seeds, mean cumulative seconds
        ("known", "a", 1, 4.0, T1, 2, 1.0),  # seeds 3, 5
        ("known", "a", 2, 2.0, 0.0, 2, 4.5),  # 2, 2: a zero-width interval
        ("known", "a", 3, 0.5, T1 / 2, 2, 9.0),  # 1, 0
        ("known", "b", 1, 5.0, T1, 2, 1.0),  # 4, 6
        ("known", "b", 2, 3.5, T1 / 2, 2, 6.0),  # 4, 3 (trimmed); seconds (1 + 3 + 1 + 7) / 2
        ("known", "c", 1, 2.25, 1.75 * T1, 2, 1.0),  # 0.5, 4
        ("unknown", "a", 1, 9.0, NAN, 1, 1.0),  # one seed: no interval
        ("unknown", "a", 2, 7.0, NAN, 1, 2.75),
    ]
    assert _rows(table, ["task", "optimizer", "evaluation", "n"]) == [
        (task, opt, ev, n) for task, opt, ev, _, _, n, _ in expected
    ]
    assert table["metric"].tolist() == ["regret"] * 6 + ["best_y"] * 2
    mean = np.array([e[3] for e in expected])
    half = np.array([e[4] for e in expected])
    np.testing.assert_allclose(table["mean"], mean, rtol=1e-12)
    # A mean regret cannot be negative: the interval is cut at 0 (best_y rows are not).
    floor = np.where(table["metric"] == "regret", 0.0, -np.inf)
    np.testing.assert_allclose(table["low"], np.maximum(mean - half, floor), rtol=1e-9)
    np.testing.assert_allclose(table["high"], mean + half, rtol=1e-9)
    np.testing.assert_allclose(table["seconds"], [e[6] for e in expected], rtol=1e-12)


def test_final_values_are_the_last_of_every_seed_untrimmed(runs: pd.DataFrame) -> None:
    finals = final_values(runs)
    assert _rows(finals, ["task", "optimizer", "seed", "final", "evaluations"]) == [
        ("known", "a", 0, 1.0, 3),
        ("known", "a", 1, 0.0, 3),
        ("known", "b", 0, 2.0, 3),
        ("known", "b", 1, 3.0, 2),
        ("known", "c", 0, 0.5, 1),
        ("known", "c", 1, 4.0, 1),
        ("unknown", "a", 0, 7.0, 2),
    ]


def test_final_table_by_hand(runs: pd.DataFrame) -> None:
    table = final_table(runs, reference="a").set_index(["task", "optimizer"])
    assert list(table.index) == [("known", "a"), ("known", "b"), ("known", "c"), ("unknown", "a")]
    # Finals: a (1, 0), b (2, 3), c (0.5, 4); unknown a (7).
    mean = np.array([0.5, 2.5, 2.25, 7.0])
    half = np.array([T1 / 2, T1 / 2, 1.75 * T1, NAN])
    np.testing.assert_allclose(table["mean"], mean)
    np.testing.assert_allclose(table["median"], mean)
    np.testing.assert_allclose(table["low"], [0.0, 0.0, 0.0, NAN])  # regret intervals cut at 0
    np.testing.assert_allclose(table["high"], mean + half, rtol=1e-9)
    assert table["metric"].tolist() == ["regret", "regret", "regret", "best_y"]
    assert table["seeds"].tolist() == [2, 2, 2, 1]
    assert table["rank"].tolist() == [1, 3, 2, 1] and table["best"].tolist() == [1, 0, 0, 1]
    # Paired with a's (1, 0) by seed: b - a = (1, 3), c - a = (-0.5, 4). Two pairs: the exact
    # signed-rank p is at least 2 / 2^2 = 0.5, so neither is tested; the reference has no pairs.
    assert table["pairs"].tolist() == [0, 2, 2, 0]
    np.testing.assert_allclose(table["p_min"], [NAN, 0.5, 0.5, NAN])
    assert not table["testable"].any()
    assert table[["p_value", "p_holm"]].isna().all().all() and not table["significant"].any()
    assert table["evaluations"].tolist() == [3, 3, 1, 2]
    assert table["failed_evals"].tolist() == [1, 0, 0, 0]
    assert table["outliers"].tolist() == [0, 1, 0, 0]  # the untrimmed rows count
    assert table["fallbacks"].tolist() == [1, 0, 0, 0]


def test_runtime_table_by_hand(runs: pd.DataFrame) -> None:
    """Per BO step (init rows left out): a's fit 1, 3, 2, 2 -> mean 2, sd sqrt(2/3), etc."""
    table = runtime_table(runs).set_index(["task", "optimizer"])
    assert list(table.index) == [("known", "a"), ("known", "b"), ("unknown", "a")]  # c: init only
    assert table["steps"].tolist() == [4, 3, 1]
    np.testing.assert_allclose(table["fit_mean"], [2.0, 2.0, 0.5])
    np.testing.assert_allclose(table["acq_mean"], [1.0, 4 / 3, 0.25])
    np.testing.assert_allclose(table["eval_mean"], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(table["total_mean"], [4.0, 13 / 3, 1.75])
    np.testing.assert_allclose(table["fit_sd"], [math.sqrt(2 / 3), math.sqrt(3), NAN])
    np.testing.assert_allclose(table["acq_sd"], [math.sqrt(1 / 3), math.sqrt(1 / 3), NAN])
    np.testing.assert_allclose(table["total_sd"], [1.0, 4 / math.sqrt(3), NAN])


def test_run_sets_are_never_pooled(runs: pd.DataFrame) -> None:
    """The same rows stored as a second run set with every value doubled: each run set's tables
    are those of its own rows."""
    doubled = runs.assign(run_set="t", regret=2 * runs["regret"], best_y=2 * runs["best_y"])
    both = final_table(pd.concat([runs, doubled], ignore_index=True), reference="a")
    alone = final_table(runs, reference="a")
    first = both[both["run_set"] == "s"].reset_index(drop=True)
    pd.testing.assert_frame_equal(first, alone)
    second = both[both["run_set"] == "t"].reset_index(drop=True)
    np.testing.assert_allclose(second["mean"], 2 * alone["mean"])
    assert second["seeds"].tolist() == alone["seeds"].tolist()


def test_a_known_optimum_task_keeps_its_regret_when_a_first_evaluation_failed() -> None:
    """A seed whose first evaluation failed has no regret on that row, yet the task still has an
    optimum: the curve stays on regret and the first evaluation averages the other seed only."""
    rows = [
        ("s", "known", "a", 0, 0, "init", NAN, NAN, 0.0, 0.0, 1.0, False, "invalid", None),
        ("s", "known", "a", 0, 1, "bo", 2.0, 2.5, 0.0, 0.0, 1.0, False, "ok", None),
        ("s", "known", "a", 1, 0, "init", 4.0, 4.5, 0.0, 0.0, 1.0, False, "ok", None),
        ("s", "known", "a", 1, 1, "bo", 1.0, 1.5, 0.0, 0.0, 1.0, False, "ok", None),
    ]
    table = curves(traces(pd.DataFrame(rows, columns=COLUMNS)))
    assert table["metric"].tolist() == ["regret", "regret"]
    assert table["mean"].tolist() == [4.0, 1.5] and table["n"].tolist() == [1, 2]


def test_a_task_whose_evaluations_all_failed_gives_empty_values_not_an_error() -> None:
    rows = [
        ("s", "broken", "a", seed, i, "init" if i == 0 else "bo", NAN, NAN, 0.0, 0.0, 1.0,
         False, "invalid", None)
        for seed in (0, 1) for i in (0, 1)
    ]  # fmt: skip
    runs = pd.DataFrame(rows, columns=COLUMNS)
    table = curves(traces(runs))
    assert table["n"].tolist() == [0, 0] and table["mean"].isna().all()
    final = final_table(runs, reference="a")
    assert final["seeds"].tolist() == [0] and final["mean"].isna().all()
    assert final["failed_evals"].tolist() == [4]


def _final_runs(finals: dict[str, dict[int, float]]) -> pd.DataFrame:
    """One initial evaluation per cell of task ``t`` whose regret is ``finals[optimizer][seed]``."""
    rows = [
        ("s", "t", optimizer, seed, 0, "init", value, value, 0.0, 0.0, 1.0, False, "ok", None)
        for optimizer, by_seed in finals.items()
        for seed, value in by_seed.items()
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


#: Reference finals of seeds 0-6; the seed effect (1 to 13) is far larger than any method's.
REFERENCE = dict(enumerate([13.0, 1.0, 11.0, 3.0, 9.0, 5.0, 7.0]))


def test_final_table_pairs_seeds_and_holm_corrects_the_testable_comparisons() -> None:
    """``lower`` is 0.5 below the reference on each of 7 seeds: the pooled values overlap, yet
    the signed-rank p is the exact minimum 2 / 2^7. ``mixed`` differs by +-1..7, p = 0.8125
    (scipy). ``few`` has 3 seeds, too few for a test: it stays out of Holm's family, so m = 2."""
    mixed = {
        s: v + d for (s, v), d in zip(REFERENCE.items(), [1, -2, 3, -4, 5, -6, 7], strict=True)
    }
    runs = _final_runs(
        {
            "ref": REFERENCE,
            "lower": {s: v - 0.5 for s, v in REFERENCE.items()},
            "mixed": mixed,
            "few": {s: REFERENCE[s] - 0.5 for s in (0, 1, 2)},
        }
    )
    table = final_table(runs, reference="ref").set_index("optimizer")
    assert table["pairs"].to_dict() == {"few": 3, "lower": 7, "mixed": 7, "ref": 0}
    assert table.loc["lower", "p_value"] == pytest.approx(2 / 2**7)
    p_mixed = scipy_stats.wilcoxon([1, -2, 3, -4, 5, -6, 7]).pvalue
    assert table.loc["mixed", "p_value"] == pytest.approx(p_mixed)
    assert table.loc["few", "p_min"] == 0.25 and not table.loc["few", "testable"]
    assert math.isnan(table.loc["few", "p_value"]) and math.isnan(table.loc["few", "p_holm"])
    # Holm over the 2 testable comparisons: 2 * 0.015625, then max(0.03125, p_mixed).
    assert table.loc["lower", "p_holm"] == pytest.approx(2 * 2 / 2**7)
    assert table.loc["mixed", "p_holm"] == pytest.approx(p_mixed)
    assert table["significant"].to_dict() == {"few": False, "lower": True, "mixed": False,
                                              "ref": False}  # fmt: skip


def test_final_table_pairs_by_seed_not_by_position() -> None:
    """``shifted`` lacks seed 0 and has a seed 9 the reference lacks: the inner join on the seed
    keeps seeds 1-6, where it is 0.5 lower every time (p = 2 / 2^6). Paired by position, seeds
    1-6 would meet the reference's seeds 0-5 and the differences would change sign."""
    shifted = {s: REFERENCE[s] - 0.5 for s in range(1, 7)} | {9: 100.0}
    table = final_table(_final_runs({"ref": REFERENCE, "shifted": shifted}), reference="ref")
    row = table.set_index("optimizer").loc["shifted"]
    assert row["seeds"] == 7 and row["pairs"] == 6
    assert row["p_min"] == row["p_value"] == pytest.approx(2 / 2**6) and row["significant"]


def test_the_final_section_says_over_how_many_pairs_a_p_value_is() -> None:
    """``more`` has seeds 0-9, the reference 0-6: the test is over the 7 common seeds, and the
    table says so next to the p-value (the seeds column says 10)."""
    from orthobench.report.data import ResultSet
    from orthobench.report.sections import final_section

    more = {s: v - 0.5 for s, v in REFERENCE.items()} | {7: 1.0, 8: 2.0, 9: 3.0}
    runs = _final_runs({"ref": REFERENCE, "more": more}).assign(source="d")
    files = pd.DataFrame(columns=["kind", "task", "run_set", "n_init", "budget"])
    empty = pd.DataFrame()
    section = final_section(ResultSet(runs, empty, empty, files), "ref")
    (table,) = section.tables
    row = next(r for r in table.rows if r[1] == "more")
    assert row[3] == "10" and row[7] == "0.0156 * (7 pairs)"


def test_seeds_without_a_final_value_do_not_win_the_rank() -> None:
    """On a constrained task ``a`` found a feasible point on 1 of 5 seeds (regret 0.1), ``b`` on
    all 5 (0.5). ``a``'s mean over its one seed is lower, but ranking it first would make the
    seeds where it never found a feasible point look good: the rank orders methods by the share
    of their seeds without a final value first, then by the mean."""
    finals = {"a": {0: 0.1} | {s: NAN for s in range(1, 5)}, "b": dict.fromkeys(range(5), 0.5)}
    table = final_table(_final_runs(finals), reference="b").set_index("optimizer")
    assert table["rank"].to_dict() == {"a": 2, "b": 1} and table.loc["b", "best"]
    assert table["no_final"].to_dict() == {"a": 4, "b": 0}
    # Equal shares: the mean decides, and ties share the smaller rank.
    finals = {"a": {0: 0.1, 1: NAN}, "b": {0: 0.5, 1: NAN}, "c": {0: 0.1, 1: NAN}}
    ranks = final_table(_final_runs(finals), reference="b").set_index("optimizer")["rank"]
    assert ranks.to_dict() == {"a": 1, "b": 3, "c": 1}


def test_a_method_without_any_final_value_ranks_last_and_counts_in_the_mean_rank() -> None:
    """The reported bug: a method that failed every seed of a task was unranked there, and the
    mean rank over tasks left that task out: 1.00 over 1 task, ahead of a method ranked 1 and
    2."""
    from orthobench.report.aggregate import mean_ranks

    finals = {"a": dict.fromkeys(range(3), NAN), "b": dict.fromkeys(range(3), 0.5)}
    table = final_table(_final_runs(finals), reference="b").set_index("optimizer")
    assert table["rank"].to_dict() == {"a": 2, "b": 1}
    ranks = mean_ranks(table.reset_index()).set_index("optimizer")
    assert ranks.loc["a", "tasks"] == 1 and ranks.loc["a", "mean_rank"] == 2.0


def test_a_task_where_no_method_has_a_final_value_ranks_none() -> None:
    """The reported bug: there every method got rank 1, in bold, and that 1 went into its mean
    rank. Task ``t`` ranks ``b`` first; on ``failed`` neither has a value: no rank, no bold, and
    the mean rank is over ``t`` alone for both."""
    from orthobench.report.aggregate import mean_ranks

    finals = {"a": dict.fromkeys(range(3), 1.0), "b": dict.fromkeys(range(3), 0.5)}
    ranked = _final_runs(finals)
    failed = _final_runs({o: dict.fromkeys(range(3), NAN) for o in finals}).assign(task="failed")
    table = final_table(pd.concat([ranked, failed], ignore_index=True), reference="b")
    none = table[table["task"] == "failed"]
    assert none["rank"].isna().all() and not none["best"].any()
    ranks = mean_ranks(table).set_index("optimizer")
    assert ranks["tasks"].to_dict() == {"a": 1, "b": 1}
    assert ranks["mean_rank"].to_dict() == {"a": 2.0, "b": 1.0}


def test_a_reference_without_a_value_on_shared_seeds_is_not_called_unshared() -> None:
    """The reference ran the same seeds but has no final value on any (never feasible): the
    test cell said "no seed shared"."""
    from orthobench.report.data import ResultSet
    from orthobench.report.sections import final_section

    finals = {"a": dict.fromkeys(range(3), 0.5), "ref": dict.fromkeys(range(3), NAN)}
    runs = _final_runs(finals).assign(source="d")
    files = pd.DataFrame(columns=["kind", "task", "run_set", "n_init", "budget"])
    empty = pd.DataFrame()
    (table,) = final_section(ResultSet(runs, empty, empty, files), "ref").tables
    row = next(r for r in table.rows if r[1] == "a")
    assert row[7] == "- (no seed with a value in both)"


def test_all_equal_pairs_are_equal_final_values_not_too_few_seeds() -> None:
    """The reported wording: 6 pairs of equal final values read "too few seeds for a test (6
    pairs, 0 differ, min p 1)"; nothing differs, however many seeds."""
    from orthobench.report.data import ResultSet
    from orthobench.report.sections import final_section

    runs = _final_runs({"ref": REFERENCE, "same": REFERENCE}).assign(source="d")
    files = pd.DataFrame(columns=["kind", "task", "run_set", "n_init", "budget"])
    empty = pd.DataFrame()
    (table,) = final_section(ResultSet(runs, empty, empty, files), "ref").tables
    row = next(r for r in table.rows if r[1] == "same")
    assert row[7] == "equal final values on the 7 paired seeds"
