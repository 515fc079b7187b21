"""The report's feasibility section on constrained tasks: feasible share and first feasible
evaluation per method, against a hand computation; absent without constraints."""

from __future__ import annotations

import pytest

from orthobench.report.data import load_results
from orthobench.report.feasibility_sections import feasibility_table
from orthobench.report.sections import build_sections
from tests.report.conftest import cell, write_cell


def test_feasible_share_and_first_feasible_evaluation(tmp_path) -> None:
    # Seed 0: feasible at evaluations 3 and 4 (of 4); seed 1: never feasible.
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 2, 2), [3.0, 2.0, 1.0, 0.5],
               constraints=[[1.0], [0.5], [-1.0], [0.0]])  # fmt: skip
    write_cell(tmp_path, cell("s", "t", "sobol", 1, 2, 2), [3.0, 2.0, 1.0, 0.5],
               constraints=[[1.0], [2.0], [3.0], [0.1]])  # fmt: skip
    results = load_results([tmp_path])
    (row,) = feasibility_table(results.runs).itertuples()
    assert (row.seeds, row.never) == (2, 1)
    assert (row.feasible_median, row.feasible_min, row.feasible_max) == pytest.approx(
        (0.25, 0.0, 0.5)
    )
    assert (row.first_median, row.first_min, row.first_max) == (3, 3, 3)
    ids = [section.id for section in build_sections(results, None, None)]
    assert "feasibility" in ids


def test_no_section_without_constraints(tmp_path) -> None:
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 2, 2), [3.0, 2.0, 1.0, 0.5])
    assert "feasibility" not in [s.id for s in build_sections(load_results([tmp_path]), None, None)]


def test_first_feasible_evaluations_stay_integers_beside_a_method_that_found_none(tmp_path):
    """A CSV wrote first_min 2.0 where a method with no feasible seed made the column float."""
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 2, 1), [3.0, 2.0, 1.0],
               constraints=[[1.0], [-1.0], [-1.0]])  # fmt: skip
    write_cell(tmp_path, cell("s", "t", "qlogei", 0, 2, 1), [3.0, 2.0, 1.0],
               constraints=[[1.0], [1.0], [1.0]])  # fmt: skip
    table = feasibility_table(load_results([tmp_path]).runs)
    csv = table[["optimizer", "first_min", "first_max"]].to_csv(index=False)
    assert csv.splitlines()[1:] == ["qlogei,,", "sobol,2,2"]
