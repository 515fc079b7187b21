"""What a report says about failed and infeasible evaluations and undefined probe ratios: the
final table's units, a task never feasible, the probe's undefined states per ratio and the
feasibility glossary."""

from __future__ import annotations

import dataclasses

from orthobench.report.data import load_results
from orthobench.report.feasibility_sections import feasibility_table
from orthobench.report.glossary import GLOSSARY
from orthobench.report.sections import (
    curves_section,
    final_section,
    probe_section,
    series_palette,
)

from .conftest import NAN, cell, write_cell, write_probe_state


def _column(table, header: str) -> list[str]:
    """The cells of ``table``'s column titled ``header``."""
    at = table.header.index(header)
    return [row[at] for row in table.rows]


def test_final_table_says_failed_evals_are_over_all_seeds_and_evaluations_per_seed(tmp_path):
    """The reported row: 'evaluations 6 | failed evals 9' for 3 seeds of 6 evaluations with 3
    invalid each; the two columns had different units and said neither."""
    for seed in range(3):
        write_cell(tmp_path, cell("s", "t", "sobol", seed, 3, 3), [3.0, NAN, 2.0, NAN, 1.0, NAN])
    (table,) = final_section(load_results([tmp_path]), None).tables
    assert _column(table, "evaluations per seed") == ["6"]
    assert _column(table, "failed evals (all seeds)") == ["9"]
    assert table.data["failed_evals"].tolist() == [9]  # the CSV column keeps its name
    assert "summed over all seeds" in GLOSSARY["failed evals"]
    assert "constraint" in GLOSSARY["failed evals"]  # invalid: y or a constraint non-finite


def _curve_notes(results) -> list[str]:
    section = curves_section(results, series_palette(results))
    return [block for block in section.blocks if isinstance(block, str)]


def test_a_task_never_feasible_says_so_not_that_no_value_was_finite(tmp_path):
    """Finite values, none feasible: the curves said 'no evaluation returned a finite value'."""
    for seed in range(2):
        write_cell(tmp_path, cell("s", "t", "sobol", seed, 2, 1), [3.0, 2.0, 1.0],
                   constraints=[[1.0], [0.5], [2.0]])  # fmt: skip
    results = load_results([tmp_path])
    (note,) = _curve_notes(results)
    assert note.startswith("t: no evaluation was feasible")
    # The stored rows do not tell whether the optimum is known: the metric stays best_y.
    (table,) = final_section(results, None).tables
    assert _column(table, "metric") == ["best_y"]
    assert "no evaluation was feasible" in GLOSSARY["best-so-far objective"]


def test_a_task_whose_every_evaluation_failed_says_no_finite_value(tmp_path):
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 2, 1), [NAN, NAN, NAN],
               constraints=[[-1.0], [-1.0], [-1.0]])  # fmt: skip
    (note,) = _curve_notes(load_results([tmp_path]))
    assert note == "t: no evaluation returned a finite value; nothing to plot."


def test_probe_summary_shows_the_states_whose_variance_ratio_is_undefined(tmp_path):
    """The var ratio's statistics dropped a state whose var ratio was undefined while the table's
    'undefined states' counted the MSE ratio's alone: 'states 2, var ratio gmean 1.21 (no
    interval: one state), undefined states 0'."""
    for seed in range(2):
        write_probe_state(tmp_path, "p", seed, {("mc", 8): 1.0, ("orth", 8): 2.0})
    results = load_results([tmp_path])
    probe = results.probe
    undefined = (probe["estimator"] == "orth") & (probe["seed"] == 1)
    probe = probe.assign(var_ratio=probe["var_ratio"].mask(undefined, 1e30))
    section = probe_section(dataclasses.replace(results, probe=probe))
    table = next(t for t in section.tables if t.name == "probe-summary")
    assert _column(table, "estimator") == ["mc", "orth"]
    assert _column(table, "undefined states (var ratio)") == ["0", "1"]
    assert _column(table, "undefined states (MSE ratio)") == ["0", "0"]
    text = GLOSSARY["undefined states"]
    assert "'undefined states (var ratio)'" in text and "'undefined states (MSE ratio)'" in text


def test_the_probe_ranking_of_batch_probes_has_a_q_column(tmp_path):
    """Rows of q = 1 and q = 4 with the same S and estimator stood side by side, told apart only
    by "(q=4)" inside the worst-state text."""
    for q in (1, 4):
        write_probe_state(tmp_path, "p", 0, {("mc", 8): 1.0, ("orth", 8): 2.0 * q}, q=q)
    section = probe_section(load_results([tmp_path]))
    table = next(t for t in section.tables if t.name == "probe-ranking")
    assert table.header[:3] == ["run set", "q", "S"]
    single = tmp_path / "single"
    write_probe_state(single, "p", 0, {("mc", 8): 1.0, ("orth", 8): 2.0})
    single_table = next(
        t for t in probe_section(load_results([single])).tables if t.name == "probe-ranking"
    )
    assert "q" not in single_table.header  # every row q = 1: no column of 1s
    assert sorted(zip(_column(table, "q"), _column(table, "estimator"), strict=True)) == [
        ("1", "mc"),
        ("1", "orth"),
        ("4", "mc"),
        ("4", "orth"),
    ]


def test_glossary_feasibility_counts_only_evaluations_with_a_value(tmp_path):
    """A failed evaluation cannot be feasible, as the feasibility table computes; the glossary
    said 'every constraint value was at most 0' alone."""
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 2, 2), [NAN, 2.0, 1.0, 0.5],
               constraints=[[-1.0], [1.0], [-1.0], [1.0]])  # fmt: skip
    (row,) = feasibility_table(load_results([tmp_path]).runs).itertuples()
    assert (row.feasible_median, row.first_median) == (0.25, 3)  # the invalid first one is not
    for term in ("feasible share", "first feasible evaluation"):
        assert "status ok: a finite y and finite constraint values" in GLOSSARY[term], term


def test_probe_tables_count_the_states_whose_reference_is_not_converged(tmp_path):
    """A state whose reference one draw carries is left out of the MSE ratios; the summary
    showed only the undefined states, so it dropped out without a count."""
    for seed in range(3):
        write_probe_state(tmp_path, "p", seed, {("mc", 8): 1.0, ("orth", 8): 2.0})
    results = load_results([tmp_path])
    probe = results.probe
    rough = probe["seed"] == 2  # relative error 1 at both probe points: the reference is noise
    probe = probe.assign(
        reference=[[1.0, 2.0]] * len(probe),
        reference_rse=[[1.0, 1.0] if r else [1e-3, 1e-3] for r in rough],
    )
    section = probe_section(dataclasses.replace(results, probe=probe))
    summary = next(t for t in section.tables if t.name == "probe-summary")
    assert _column(summary, "states") == ["3", "3"]
    assert _column(summary, "unconverged reference states") == ["1", "1"]
    assert _column(summary, "undefined states (MSE ratio)") == ["0", "0"]
    ranking = next(t for t in section.tables if t.name == "probe-ranking")
    assert _column(ranking, "unconverged reference states") == ["1", "1"]
    assert "unconverged reference states" in section.terms
