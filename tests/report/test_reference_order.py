"""The report orders optimizers as their suite lists them, not as their cells finished: the
default reference ("the first GP optimizer") of ``orthobench run w.yaml`` was qlogei, and of
the same run with ``--workers 2`` orthobo, whose cells happened to finish first."""

from __future__ import annotations

import torch

from orthobench.execution import run_suite
from orthobench.report.data import load_results
from orthobench.results import ResultStore, read_metadata
from orthobench.suite import parse_suite
from tests.report.conftest import cell, write_cell


def test_the_default_reference_is_the_suites_first_gp_optimizer_whatever_finished_first(
    tmp_path,
):
    listed = {"suite_optimizers": ["qlogei", "orthobo"]}
    for optimizer in ("orthobo", "qlogei"):  # orthobo's cell finished first
        write_cell(tmp_path, cell("s", "t", optimizer, 0, 1, 1), [2.0, 1.0], metadata=listed)
    results = load_results([tmp_path])
    assert results.optimizers == ["qlogei", "orthobo"]
    assert results.default_reference() == "qlogei"


def test_a_suites_batch_sizes_follow_its_optimizers_and_files_without_the_order_keep_theirs(
    tmp_path,
):
    old, new = tmp_path / "old", tmp_path / "new"
    for optimizer in ("c", "a"):  # stored before the suite order was recorded
        write_cell(old, cell("old", "t", f"{optimizer}=sobol", 0, 1, 1), [2.0, 1.0])
    listed = {"suite_optimizers": ["b", "a"]}
    for optimizer, q in (("a", 1), ("b", 2), ("a", 2), ("b", 1)):
        spec = cell("new", "t", f"{optimizer}=sobol", 0, 1, 1, q=q)
        write_cell(new, spec, [2.0] * (1 + q), metadata=listed)
    assert load_results([old, new]).optimizers == ["c", "a", "b", "b (q=2)", "a (q=2)"]
    assert load_results([new, old]).optimizers == ["b", "b (q=2)", "a", "a (q=2)", "c"]


def test_a_run_records_its_suites_order_which_the_report_follows(tmp_path):
    suite = parse_suite(
        {
            "name": "w",
            "seeds": 1,
            "n_init": 2,
            "budget": 1,
            "tasks": ["hartmann6"],
            "optimizers": [{"name": "sobol", "label": "b"}, {"name": "sobol", "label": "a"}],
        }
    )
    store = ResultStore(tmp_path)
    run_suite(suite, store, device=torch.device("cpu"), show_progress=False)
    for spec in suite.cells():
        assert read_metadata(store.cell_path(spec))["suite_optimizers"] == ["b", "a"]
    assert load_results([tmp_path]).default_reference() == "b"
    # As if a's cell had finished first (--workers 2): the journal in the other order.
    lines = store.runs_journal.path.read_bytes().splitlines(keepends=True)
    store.runs_journal.path.write_bytes(b"".join(reversed(lines)))
    assert load_results([tmp_path]).default_reference() == "b"
    store.runs_journal.path.unlink()  # without a journal, the order was alphabetical
    assert load_results([tmp_path]).default_reference() == "b"
