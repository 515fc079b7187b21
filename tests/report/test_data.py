"""Loading result directories: run sets are never pooled, failures come from the journal."""

from __future__ import annotations

import dataclasses
import importlib
import sys

from orthobench.registry import OPTIMIZERS
from orthobench.report.data import cell_key, load_results, method_label
from orthobench.report.tables import final_table

from .conftest import cell, write_cell


def test_two_suites_with_the_same_task_and_optimizer_are_not_merged(tmp_path):
    """The reported bug: two suites' hartmann6/qlogei cells (11 and 18 evaluations) became one
    row with 2 seeds and 29 evaluations. Rows are keyed by (suite, task, optimizer)."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_cell(a, cell("smoke", "hartmann6", "qlogei", 0, n_init=8, budget=3), [3.0] * 11)
    write_cell(b, cell("orthobo-smoke", "hartmann6", "qlogei", 0, n_init=16, budget=2), [2.0] * 18)
    results = load_results([a, b])
    table = final_table(results.runs, reference="qlogei").set_index("run_set")
    assert sorted(table.index) == ["orthobo-smoke", "smoke"]
    assert table.loc["smoke", "evaluations"] == 11 and table.loc["smoke", "seeds"] == 1
    assert table.loc["orthobo-smoke", "evaluations"] == 18
    assert table.loc["orthobo-smoke", "mean"] == 2.0 and table.loc["smoke", "mean"] == 3.0


def test_one_suite_stored_twice_gives_two_run_sets_and_split_seeds_one(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for root in (a, b):
        write_cell(root, cell("s", "t", "sobol", 0, n_init=1, budget=1), [2.0, 1.0])
    write_cell(c, cell("s", "t", "sobol", 1, n_init=1, budget=1), [2.0, 1.0])
    assert set(load_results([a, b]).runs["run_set"]) == {f"s @ {a}", f"s @ {b}"}
    assert set(load_results([a, c]).runs["run_set"]) == {"s"}  # seeds split over directories


def test_directories_that_ran_a_cell_with_another_configuration_are_not_pooled(tmp_path):
    """The reported bug: seeds 0 and 1 run with budget 1, seed 2 with budget 3 in another
    directory were one row of 3 seeds mixing finals after 2 and 4 evaluations. Seeds split
    over directories stay pooled only where the configuration is the same."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for seed in (0, 1):
        write_cell(a, cell("s", "t", "sobol", seed, n_init=1, budget=1), [2.0, 1.0])
    write_cell(b, cell("s", "t", "sobol", 2, n_init=1, budget=3), [2.0, 1.0, 0.5, 0.2])
    write_cell(c, cell("s", "t", "sobol", 2, n_init=1, budget=1), [2.0, 1.0])
    split = load_results([a, b])
    assert set(split.runs["run_set"]) == set(split.files["run_set"]) == {f"s @ {a}", f"s @ {b}"}
    table = final_table(split.runs, reference="sobol").set_index("run_set")
    assert table.loc[f"s @ {a}", "seeds"] == 2 and table.loc[f"s @ {b}", "seeds"] == 1
    assert set(load_results([a, c]).runs["run_set"]) == {"s"}


def test_failed_cells_come_from_the_journal_with_the_first_line_of_their_error(tmp_path):
    from orthobench.results import ResultStore

    spec = cell("s", "t", "sobol", 0, n_init=1, budget=1)
    ResultStore(tmp_path).record_failure(spec, "ValueError: bad\ndetails", "tb", 1.0)
    other = cell("s", "t", "sobol", 1, n_init=1, budget=1)
    ResultStore(tmp_path).record_failure(other, "ValueError: first try", "tb", 1.0)
    write_cell(tmp_path, other, [2.0, 1.0])  # retried and stored: no longer failed
    failures = load_results([tmp_path]).failures
    assert failures[["kind", "unit_id", "error"]].values.tolist() == [
        ["cell", "t__sobol__seed0", "ValueError: bad"]
    ]


def test_a_failure_entry_whose_suite_or_error_is_not_text_reads_as_none(tmp_path):
    """A crafted journal line's list or dict suite crashed the report (unhashable), a number
    failed the merge of int and str suites: they read as no suite, as no error text."""
    import json

    write_cell(tmp_path, cell("s", "t", "sobol", 0, n_init=1, budget=1), [2.0, 1.0])
    with (tmp_path / "runs.jsonl").open("a") as journal:
        for seed, bad in enumerate((["s"], {"s": 1}, 5), start=1):
            entry = {"cell_id": f"t__sobol__seed{seed}", "status": "failed"}
            journal.write(json.dumps({**entry, "suite": bad, "error": bad}) + "\n")
    results = load_results([tmp_path])
    assert results.crashed()["seed"].tolist() == [1, 2, 3]  # by the one run set of the task
    assert results.failures[["suite", "error"]].values.tolist() == [[None, "(no error text)"]] * 3


def test_failed_probe_states_are_listed_and_alone_still_make_a_report(tmp_path):
    """The reported bug: a failed probe state appeared nowhere in a report (failures were read
    from the cells' journal only), and a directory of failed states alone had no report."""
    from orthobench.report import build_report
    from orthobench.results import ResultStore

    ResultStore(tmp_path).journal_failure(
        "probe state", "t__matern52-ard__seed0__it0", "hash", "ValueError: flaky", "tb", 1.0
    )
    failures = load_results([tmp_path]).failures
    assert failures[["kind", "unit_id", "error"]].values.tolist() == [
        ["probe state", "t__matern52-ard__seed0__it0", "ValueError: flaky"]
    ]
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    assert "Failed cells and probe states" in html and "t__matern52-ard__seed0__it0" in html


def test_the_default_reference_is_the_first_gp_optimizer_stored(tmp_path):
    for optimizer in ("sobol", "qlogei", "orthobo"):
        write_cell(tmp_path, cell("s", "t", optimizer, 0, n_init=1, budget=1), [2.0, 1.0])
    results = load_results([tmp_path])
    assert results.optimizers == ["sobol", "qlogei", "orthobo"]
    assert results.default_reference() == "qlogei"


PLUGIN = """
from orthobench.optimizers.base import Optimizer


class MyGP(Optimizer):
    surrogate = "gp"

    def _ask(self, n):
        raise NotImplementedError
"""


def test_the_default_reference_is_what_the_registry_says_the_stored_optimizer_is(
    tmp_path, monkeypatch
):
    """A plugin declaring a GP surrogate is a GP optimizer to the report where its module is
    imported (by the run whose report it is); a stored name that no longer resolves (its plugin
    gone) is passed over, not an error; and a module the process has not imported is not
    imported for a report: a crafted results file's name ran its module's code."""
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "report_gp_plugin.py"
    module.write_text(PLUGIN + "\n\nclass Gone(MyGP):\n    pass\n")
    root = tmp_path / "results"
    for optimizer in ("gone=report_gp_plugin:Gone", "sobol", "mine=report_gp_plugin:MyGP"):
        write_cell(root, cell("s", "t", optimizer, 0, n_init=1, budget=1), [2.0, 1.0])
    module.write_text(PLUGIN)
    monkeypatch.delitem(sys.modules, "report_gp_plugin")
    importlib.invalidate_caches()
    results = load_results([root])
    assert results.optimizers == ["gone", "sobol", "mine"]
    # No optimizer known as a GP: the first one.
    assert results.default_reference() == "gone" and "report_gp_plugin" not in sys.modules
    importlib.import_module("report_gp_plugin")  # as `orthobench run` imports the suite's
    assert load_results([root]).default_reference() == "mine"


LAZY_PACKAGE = """
import importlib


def __getattr__(name):
    return importlib.import_module(f"{__name__}.{name}")
"""


def test_a_stored_name_imports_no_submodule_and_loads_no_entry_point_for_a_report(
    tmp_path, monkeypatch
):
    """A footer's ``scipy:datasets.x`` imported scipy.datasets through scipy's lazy module
    ``__getattr__``, and an entry point's name loaded its module: a report imports no code that
    a results file names. Once the run imported the module, both names are GP optimizers."""
    from importlib.metadata import EntryPoint

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "report_lazy_pkg").mkdir()
    (tmp_path / "report_lazy_pkg" / "__init__.py").write_text(LAZY_PACKAGE)
    (tmp_path / "report_lazy_pkg" / "gp.py").write_text(PLUGIN)
    plugin = EntryPoint("ep-gp", "report_lazy_pkg.gp:MyGP", OPTIMIZERS.group)
    monkeypatch.setattr("orthobench.registry.entry_points", lambda group: [plugin])
    root = tmp_path / "results"
    for optimizer in ("sobol", "lazy=report_lazy_pkg:gp.MyGP", "ep=ep-gp"):
        write_cell(root, cell("s", "t", optimizer, 0, n_init=1, budget=1), [2.0, 1.0])
    for module in ("report_lazy_pkg.gp", "report_lazy_pkg"):  # as a fresh process has them
        monkeypatch.delitem(sys.modules, module)
    importlib.import_module("report_lazy_pkg")
    assert load_results([root]).default_reference() == "sobol"
    assert "report_lazy_pkg.gp" not in sys.modules
    gp = importlib.import_module("report_lazy_pkg.gp")  # as `orthobench run` imports the suite's
    assert load_results([root]).default_reference() == "lazy"
    assert OPTIMIZERS.imported("ep-gp") is gp.MyGP


def test_the_built_in_optimizers_declare_their_surrogates():
    """The GP optimizers are those the report hard-coded before it asked the registry."""
    declared = {name: OPTIMIZERS.resolve(name).factory.surrogate for name in OPTIMIZERS.names()}
    assert {name for name, surrogate in declared.items() if surrogate == "gp"} == {
        "orthobo", "mc-ei", "qlogei", "ucb", "turbo", "rpr"
    }  # fmt: skip
    assert declared["sobol"] is None and declared["mc-tpe"] == declared["tpe-optuna"] == "tpe"


def test_only_the_given_cells_are_read_with_their_failures_and_files(tmp_path):
    """The report `run` writes shows the suite's cells only: rows, failures and file rows."""
    from orthobench.results import ResultStore

    kept, dropped = (cell("s", "t", name, 0, n_init=1, budget=1) for name in ("sobol", "qlogei"))
    write_cell(tmp_path, kept, [2.0, 1.0])
    write_cell(tmp_path, dropped, [3.0, 1.5])
    failed = cell("s", "t", "orthobo", 0, n_init=1, budget=1)
    ResultStore(tmp_path).record_failure(failed, "ValueError: bad", "tb", 1.0)
    every = load_results([tmp_path])
    assert set(every.runs["cell_id"]) == {kept.id, dropped.id}
    assert list(every.failures["unit_id"]) == [failed.id]
    some = load_results([tmp_path], cell_ids=[kept.id])
    assert set(some.runs["cell_id"]) == {kept.id} and some.failures.empty
    assert list(some.files["file"]) == [kept.id] and some.optimizers == ["sobol"]
    assert set(some.runs["run_set"]) == {"s"}


def test_probe_row_keys_tell_batch_sizes_apart_and_read_a_missing_q_as_1():
    """The report ``probe`` writes selects the suite's rows by these keys; without ``q`` in
    them it kept the rows of a batch size the suite no longer probes."""
    import numpy as np
    import pandas as pd

    from orthobench.report.data import probe_row_keys

    frame = pd.DataFrame(
        {"task": ["t", "t"], "kernel": ["k", "k"], "seed": [0, 0], "state_iteration": [0, 0],
         "q": [np.nan, 2.0], "estimator": ["e", "e"], "mc_samples": [8, 8]}
    )  # fmt: skip
    assert probe_row_keys(frame) == [("t", "k", 0, 0, 1, "e", 8), ("t", "k", 0, 0, 2, "e", 8)]
    assert probe_row_keys(frame.drop(columns="q"))[1][4] == 1  # rows stored before the column


def test_a_cell_id_splits_back_into_its_labels_whatever_they_end_with():
    """A label may end in ``_``, ``-`` or ``.`` and hold ``q4`` or ``seed0``: ``h_`` and ``boom``
    were read as ``h`` and ``_boom``, so a failed cell was counted under a method the report
    does not have and left out of the ranks."""
    labels = ["h", "h_", "h-", "h.", "q4", "seed0", "a_q4", "x_seed1", "9_"]
    for task in labels:
        for optimizer in labels:
            for q, asynchronous in ((1, False), (4, False), (4, True)):
                spec = dataclasses.replace(
                    cell("s", f"{task}=hartmann6", f"{optimizer}=sobol", 3, 2, 2, q=q),
                    asynchronous=asynchronous,
                )
                expected = (task, method_label(optimizer, q, asynchronous), 3)
                assert cell_key(spec.id) == expected, spec.id
