"""Failed cells in a comparison with a baseline: seeds without a final value, named by every
verdict (reported: a method crashing on 2 of 10 seeds in the new set was 'better' on the other 8,
one crashing on all 10 'only in the baseline', one crashing on 3 'identical on the 7 common
cells')."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from orthobench.exceptions import OrthobenchError
from orthobench.report import build_report
from orthobench.report.compare import compare_pairs
from orthobench.report.data import load_results
from orthobench.report.sections import comparison_section
from orthobench.results import ResultStore
from tests.report.conftest import cell, write_cell


def _runs(source: str, finals: dict[int, float], optimizer: str = "o") -> pd.DataFrame:
    """Two evaluations per seed of ``optimizer``: y = final + 1, then final."""
    rows = [
        {"source": source, "run_set": "s", "suite": "s", "task": "t", "optimizer": optimizer,
         "seed": seed, "iteration": iteration, "y": y, "regret": y, "best_y": y, "phase": "bo",
         "status": "ok"}
        for seed, final in finals.items()
        for iteration, y in enumerate((final + 1.0, final))
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _crashed(source: str, seeds: range, optimizer: str = "o") -> pd.DataFrame:
    """Cells of ``optimizer`` that failed and stored nothing in ``source``, as
    :meth:`~orthobench.report.data.ResultSet.failed_cells` gives them."""
    return pd.DataFrame(
        {"source": source, "suite": "s", "task": "t", "optimizer": optimizer, "seed": list(seeds)}
    )


def _verdict(base: dict, new: dict, crashed: list[pd.DataFrame]) -> pd.Series:
    """The one row of :func:`compare_pairs` of ``o`` with these finals and failed cells."""
    runs = pd.concat([_runs("base", base), _runs("new", new)], ignore_index=True)
    pairs = compare_pairs(runs, "base", pd.concat(crashed, ignore_index=True))
    assert len(pairs) == 1
    return pairs.iloc[0]


BASE = {seed: 5.0 + seed for seed in range(10)}


def test_new_failures_make_a_lower_median_worse() -> None:
    row = _verdict(BASE, {s: v - 4 for s, v in BASE.items() if s >= 2}, [_crashed("new", range(2))])
    assert row.verdict.startswith(
        "worse: 2 cells failed in the new set; the other cells: better: median over the 8 paired "
        "seeds"
    ), row.verdict
    assert (row.failed_new, row.new_failures, row.only_base, row.seeds_new) == (2, 2, 0, 8)


def test_a_method_failing_on_every_seed_is_not_only_in_the_baseline() -> None:
    runs = pd.concat([_runs("base", BASE), _runs("new", {0: 1.0}, "other")], ignore_index=True)
    pairs = compare_pairs(runs, "base", _crashed("new", range(10))).set_index("optimizer")
    assert pairs.loc["o", "verdict"] == "worse: 10 cells failed in the new set (baseline: 10 seeds)"


def test_new_failures_are_not_hidden_by_identical_common_cells() -> None:
    row = _verdict(BASE, {s: v for s, v in BASE.items() if s >= 3}, [_crashed("new", range(3))])
    assert row.verdict == (
        "worse: 3 cells failed in the new set; the other cells: identical on the 7 common cells "
        "(every y the same)"
    )


def test_failures_of_the_baseline_or_of_both_are_named_without_making_it_worse() -> None:
    stored = {s: v for s, v in BASE.items() if s >= 2}
    both = _verdict(stored, stored, [_crashed("base", range(2)), _crashed("new", range(2))])
    assert both.verdict == (
        "identical on the 8 common cells (every y the same); 2 cells failed in the new set, "
        "2 cells failed in the baseline"
    )
    fixed = _verdict(stored, BASE, [_crashed("base", range(2))])
    assert fixed.verdict.endswith("; 2 cells failed in the baseline"), fixed.verdict
    assert "only in the new set" not in fixed.verdict
    # Seed 0 failed on both sides, seed 1 in the new set only: one new failure.
    moved = _verdict(
        {s: v for s, v in BASE.items() if s >= 1},
        stored,
        [_crashed("base", range(1)), _crashed("new", range(2))],
    )
    assert moved.verdict.startswith(
        "worse: 1 cell failed in the new set that did not fail in the baseline (2 cells failed "
        "in the new set, 1 cell failed in the baseline); the other cells: "
    ), moved.verdict


def test_a_new_method_with_failures_is_not_worse_but_names_them() -> None:
    runs = pd.concat([_runs("base", BASE, "old"), _runs("new", {2: 1.0, 3: 2.0})])
    pairs = compare_pairs(runs, "base", _crashed("new", range(2))).set_index("optimizer")
    assert pairs.loc["o", "verdict"] == (
        "new: not in the baseline (2 seeds); 2 cells failed in the new set"
    )


def _store(root: Path, stored: range, crashed: range) -> None:
    """Seeds ``stored`` of optimizer ``o`` on task ``t`` (final 2 + seed), ``crashed`` failed."""
    for seed in stored:
        write_cell(root, cell("s", "t", "o=sobol", seed, 2, 2), [9.0, 8.0, 7.0, 2.0 + seed])
    for seed in crashed:
        spec = cell("s", "t", "o=sobol", seed, n_init=2, budget=2)
        ResultStore(root).record_failure(spec, "RuntimeError: crashed", "Traceback ...", 0.1)


def _section_rows(base: Path, new: Path) -> tuple[list, list]:
    section = comparison_section(load_results([base, new]), str(base))
    verdicts, cells = section.tables
    return verdicts.rows, cells.rows


def test_a_report_names_the_new_sets_failed_cells(tmp_path) -> None:
    base, new = tmp_path / "base", tmp_path / "new"
    _store(base, range(3), range(0))
    _store(new, range(1), range(1, 3))  # seed 0 identical to the baseline's
    verdicts, cells = _section_rows(base, new)
    assert verdicts[0][-1] == (
        "worse: 2 cells failed in the new set; the other cells: identical on the 1 common cells "
        "(every y the same)"
    )
    assert [row[6:8] for row in cells] == [["2", "2"], ["3", "failed"], ["4", "failed"]]


def test_a_failed_cell_counts_on_its_own_side_when_the_run_sets_are_pooled(tmp_path) -> None:
    """The new set stored seed 2 only and crashed on seeds 0 and 1, which the baseline stored:
    one run set (no cell stored twice), whose crashed() leaves out seeds that another directory
    stored; per directory they are the new set's failures."""
    base, new = tmp_path / "base", tmp_path / "new"
    _store(base, range(2), range(0))
    _store(new, range(2, 3), range(2))
    assert load_results([base, new]).crashed().empty
    verdicts, cells = _section_rows(base, new)
    assert verdicts[0][-1].startswith("worse: 2 cells failed in the new set; "), verdicts
    assert [row[6:8] for row in cells] == [["2", "failed"], ["3", "failed"], ["-", "4"]]


def test_a_task_whose_every_cell_failed_in_one_directory_counts_its_failures(tmp_path) -> None:
    """A task whose cells all failed in the new set (a cell timeout) was 'only in the baseline',
    and with the sides swapped 'new: not in the baseline': failed cells counted only beside
    stored cells of their task."""
    base, new = tmp_path / "base", tmp_path / "new"
    for root in (base, new):
        _store(root, range(2), range(0))
    for seed in range(2):
        spec = cell("s", "u", "o=sobol", seed, n_init=2, budget=2)
        write_cell(base, spec, [9.0, 8.0, 7.0, 2.0])
        ResultStore(new).record_failure(spec, "timed out", "", 0.1)
    verdicts = comparison_section(load_results([base, new]), str(base)).tables[0].rows
    assert {row[2]: row[-1] for row in verdicts}["u"] == (
        "worse: 2 cells failed in the new set (baseline: 2 seeds)"
    )
    swapped = comparison_section(load_results([new, base]), str(new)).tables[0].rows
    assert {row[2]: row[-1] for row in swapped}["u"] == (
        "no cell stored in the baseline; 2 cells failed in the baseline"
    )


def test_a_directory_whose_every_cell_failed_is_compared(tmp_path) -> None:
    """It was refused: '--baseline compares BO run cells, but no other directory does'."""
    base, new = tmp_path / "base", tmp_path / "new"
    _store(base, range(2), range(0))
    _store(new, range(0), range(2))
    out = build_report([base, new], tmp_path / "r.html", baseline=base)
    verdicts = pd.read_csv(out.with_name("r.comparison.csv"))
    assert verdicts["verdict"].tolist() == [
        "worse: 2 cells failed in the new set (baseline: 2 seeds)"
    ]
    assert "shares no cell" not in out.read_text()


def test_failures_on_a_task_the_baseline_lacks_are_named(tmp_path) -> None:
    """They were dropped (no stored metric of that task on either side): the section was empty,
    or listed only the other task, against a text saying every verdict names such cells."""
    base, new = tmp_path / "base", tmp_path / "new"
    _store(base, range(2), range(0))
    _store(new, range(2), range(0))
    for seed in range(2):
        spec = cell("s", "u", "o=sobol", seed, n_init=2, budget=2)
        ResultStore(new).record_failure(spec, "RuntimeError: crashed", "", 0.1)
    verdicts, cells = comparison_section(load_results([base, new]), str(base)).tables
    assert {row[2]: row[-1] for row in verdicts.rows}["u"] == (
        "new: not in the baseline (0 seeds); 2 cells failed in the new set"
    )
    assert [row[5:8] for row in cells.rows if row[2] == "u"] == [["-", "-", "failed"]] * 2


def test_a_failure_entry_without_its_suite_takes_the_suite_that_stores_its_task(tmp_path) -> None:
    """Entries written before they recorded the suite counted nowhere in a folder of two suites:
    a method failing on every seed was 'only in the baseline'."""
    base, new = tmp_path / "base", tmp_path / "new"
    for root in (base, new):
        write_cell(root, cell("other", "v", "o=sobol", 0, 2, 2), [9.0, 8.0, 7.0, 6.0])
        write_cell(root, cell("s", "t", "p=sobol", 0, 2, 2), [9.0, 8.0, 7.0, 6.0])
    _store(base, range(2), range(0))
    _store(new, range(0), range(2))
    journal = new / "runs.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    for entry in entries:
        entry.pop("suite", None)  # as entries were written before they recorded it
    journal.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    verdicts = comparison_section(load_results([base, new]), str(base)).tables[0].rows
    assert {(row[1], row[2], row[3]): row[-1] for row in verdicts}[("s", "t", "o")] == (
        "worse: 2 cells failed in the new set (baseline: 2 seeds)"
    )


def test_a_report_of_directories_that_stored_no_cell_refuses_the_comparison(tmp_path) -> None:
    """It wrote a report without a comparison section and said nothing."""
    first, second = tmp_path / "first", tmp_path / "second"
    _store(first, range(0), range(2))
    _store(second, range(0), range(2))
    with pytest.raises(OrthobenchError, match="--baseline compares BO run cells"):
        build_report([first, second], tmp_path / "r.html", baseline=first)
