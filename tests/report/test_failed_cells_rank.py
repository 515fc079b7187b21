"""A failed cell that stored nothing counts against its method: in the rank, the mean rank and
the ECDF it is a seed without a final value (reported: a method crashing on its hard seeds got
rank 1 over the seeds it survived, and the best mean rank)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from orthobench.exceptions import OrthobenchWarning
from orthobench.report.aggregate import N_TARGETS
from orthobench.report.data import load_results
from orthobench.report.sections import across_section, final_section, series_palette
from orthobench.results import ResultStore
from tests.report.conftest import cell, write_cell


def _crash(root: Path, task: str, optimizer: str, seed: int, q: int = 1) -> None:
    spec = cell("s", task, optimizer, seed, n_init=2, budget=2, q=q)
    ResultStore(root).record_failure(spec, "RuntimeError: crashed", "Traceback ...", 0.1)


@pytest.fixture
def flaky_dir(tmp_path: Path) -> Path:
    """Tasks t1, t2, seeds 0-2, ``good`` stored on each; ``flaky`` stored only t1 seed 0 (its
    best value of all) and crashed on every other cell."""
    for task in ("t1", "t2"):
        for seed in range(3):
            spec = cell("s", task, "good=sobol", seed, n_init=2, budget=2)
            write_cell(tmp_path, spec, [5.0 + seed, 4.0, 2.0, 1.0 + 0.1 * seed])
            if (task, seed) == ("t1", 0):
                write_cell(tmp_path, cell("s", task, "flaky=sobol", 0, 2, 2), [5.0, 4.0, 0.5, 0.1])
            else:
                _crash(tmp_path, task, "flaky=sobol", seed)
    return tmp_path


def test_crashed_cells_rank_a_method_after_one_that_finished_its_seeds(flaky_dir) -> None:
    results = load_results([flaky_dir])
    section = final_section(results, "good")
    final = section.tables[0].data.set_index(["task", "optimizer"])
    assert final.loc[("t1", "flaky"), ["seeds", "no_final"]].tolist() == [1, 2]
    assert final["rank"].to_dict() == {
        ("t1", "flaky"): 2,
        ("t1", "good"): 1,
        ("t2", "flaky"): 2,  # every cell crashed: ranked last, not left out
        ("t2", "good"): 1,
    }
    assert final.loc[("t2", "flaky"), "evaluations"] == 0
    # A method that stored no evaluation is not one "after a different number of evaluations".
    assert not any(isinstance(b, str) and "different numbers" in b for b in section.blocks)


def test_crashed_cells_count_in_the_mean_rank_and_reach_no_ecdf_target(flaky_dir) -> None:
    results = load_results([flaky_dir])
    section = across_section(results, series_palette(results))
    tables = {t.name: t.data for t in section.tables}
    ranks = tables["mean-ranks"].set_index("optimizer")
    assert ranks.loc["flaky", ["tasks", "mean_rank"]].tolist() == [2, 2.0]
    assert ranks.loc["good", "mean_rank"] == 1.0
    last = tables["ecdf"].groupby("optimizer").last()
    # Every (task, seed, target) triple counts, 2 tasks x 3 seeds x N_TARGETS for each method:
    # flaky's one stored seed reaches all 20 targets of t1, its crashed seeds none.
    assert last["triples"].to_dict() == {"flaky": 6 * N_TARGETS, "good": 6 * N_TARGETS}
    assert last.loc["flaky", "reached"] == pytest.approx(1 / 6)


def test_crashed_seeds_take_the_run_set_and_method_label_of_their_cell(tmp_path) -> None:
    """A ``q`` cell's crash is its method's (``b (q=2)``); a crash whose seed is stored after
    all (a forced rerun that failed) or whose task has no stored cell is not counted."""
    write_cell(tmp_path, cell("s", "t1", "a=sobol", 0, 2, 2), [3.0, 2.0, 1.0, 0.5])
    write_cell(tmp_path, cell("s", "t1", "b=sobol", 1, 2, 2, q=2), [3.0, 2.0, 1.0, 0.5, 0.2, 0.1])
    _crash(tmp_path, "t1", "b=sobol", 0, q=2)
    _crash(tmp_path, "t1", "a=sobol", 0)  # stored before: its rows stand
    _crash(tmp_path, "t9", "a=sobol", 0)  # no stored cell of t9: no run set to count in
    crashed = load_results([tmp_path]).crashed()
    assert crashed.to_dict("records") == [
        {"run_set": "s", "task": "t1", "optimizer": "b (q=2)", "seed": 0}
    ]


def test_a_failed_cell_counts_in_its_own_suite_only(tmp_path: Path) -> None:
    """The reported bug: suite b's failed cells joined suite a's tables (its one run set on the
    task), ranked there though b never ran in a."""
    for seed in range(2):
        write_cell(tmp_path, cell("a", "t1", "good=sobol", seed, 2, 2), [5.0, 4.0, 2.0, 1.0])
        spec = cell("b", "t1", "crashy=sobol", seed, n_init=2, budget=2)
        ResultStore(tmp_path).record_failure(spec, "RuntimeError: crashed", "Traceback ...", 0.1)
    results = load_results([tmp_path])
    assert results.crashed().empty
    final = final_section(results, "good").tables[0].data
    assert final["optimizer"].tolist() == ["good"]
    assert set(results.failures["suite"]) == {"b"}


@pytest.mark.parametrize(
    "entry",
    [
        '{"cell_id": "t1__crashy__seedX", "config_hash": "abc", "status": "failed"}',
        '{"cell_id": "t1", "config_hash": "abc", "status": "failed", "suite": "s"}',
    ],
)
def test_a_failure_entry_that_names_no_cell_of_a_suite_stays_in_the_failures(
    flaky_dir: Path, entry: str
) -> None:
    """A line written by hand crashed the report (``int('X')``); it is listed as failed, and
    counts nowhere."""
    expected = load_results([flaky_dir]).crashed()
    with (flaky_dir / "runs.jsonl").open("a") as journal:
        journal.write(entry + "\n")
    results = load_results([flaky_dir])
    assert results.crashed().equals(expected)
    assert len(results.failures) == len(expected) + 1


def test_a_failure_entry_without_a_suite_counts_in_its_directorys_one_run_set(tmp_path: Path):
    """Entries written before they recorded the suite, and a unit an inline run's process ended
    inside (its marker): they counted nowhere, so the method ranked as if it had finished."""
    write_cell(tmp_path, cell("a", "t1", "good=sobol", 0, 2, 2), [5.0, 4.0, 2.0, 1.0])
    with (tmp_path / "runs.jsonl").open("a") as journal:
        journal.write('{"cell_id": "t1__gone__seed0", "config_hash": "h", "status": "failed"}\n')
    assert load_results([tmp_path]).crashed().values.tolist() == [["a", "t1", "gone", 0]]
    # A second suite on the task: no run set to choose without the entry's suite.
    write_cell(tmp_path, cell("b", "t1", "good=sobol", 1, 2, 2), [5.0, 4.0, 2.0, 1.0])
    assert load_results([tmp_path]).crashed().empty


def test_a_unit_whose_process_ended_inside_it_is_journaled_with_its_suite(tmp_path: Path):
    """Its marker names the suite, and the failure entry the next run writes keeps it."""
    from orthobench.execution import RUNNING_MARKER, Run, _fail_unfinished

    spec = cell("a", "t1", "gone=sobol", 0, n_init=2, budget=2)
    store = ResultStore(tmp_path)
    with Run(store, None, None, {}).running(SimpleNamespace(unit=spec)):
        marker = (tmp_path / RUNNING_MARKER).read_text()
    (tmp_path / RUNNING_MARKER).write_text(marker)  # as a process that ended inside it left it
    with store.open_for_writing(), pytest.warns(OrthobenchWarning, match="never finished"):
        _fail_unfinished(store)
    (entry,) = store.runs_journal.entries()
    assert (entry["suite"], entry["status"]) == ("a", "failed")
