"""Every CSV a report writes, and each of its columns, is documented in docs/report-tables.md;
every table a report builds is one of :data:`~orthobench.report.blocks.TABLE_NAMES`; the shown
headers on BO steps, OrthoBO diagnostics and the comparison have a glossary entry.

Two reports cover every table: the demo suite (:func:`~tests.report.conftest.demo_dir`: failed
cells, tasks without an optimum, OrthoBO diagnostics, the probe) and a comparison with
``--baseline`` of two directories holding batch cells (``q = 2``, wall seconds), a constrained
task, a batch probe, a cell of the baseline only and a cell failed in the new set.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from orthobench.report import build_report
from orthobench.report.blocks import TABLE_NAMES
from orthobench.report.comparison_sections import comparison_section
from orthobench.report.data import load_results
from orthobench.report.glossary import GLOSSARY
from orthobench.report.sections import orthobo_section, runtime_section, series_palette
from orthobench.results import ResultStore

from .conftest import cell, ensemble_info, write_cell, write_probe_state

DOCS = Path(__file__).resolve().parents[2] / "docs" / "report-tables.md"


def _store_mixed(root: Path, shift: float, seeds: range) -> None:
    """Suite ``mix``: ``qlogei`` at q = 2 with wall seconds on ``known`` and ``sobol`` on the
    constrained ``con``, for ``seeds``; ys moved by ``shift``; one batch probe state."""
    for seed in seeds:
        ys = [v + shift + 0.1 * seed for v in (5.0, 4.0, 3.0, 2.5, 2.0, 1.0)]
        spec = cell("mix", "known", "qlogei", seed, n_init=2, budget=2, q=2)
        write_cell(root, spec, ys, wall_seconds=[1.0, 2.0, 4.0, 4.5, 6.0, 6.5])
        write_cell(root, cell("mix", "con", "sobol", seed, n_init=2, budget=2), ys[:4],
                   constraints=[[1.0], [-1.0], [0.5], [-0.5]])  # fmt: skip
    write_probe_state(root, "mix", 0, {("mc", 8): 1.0, ("orth", 8): 2.0}, q=2)


@pytest.fixture(scope="module")
def written(demo_dir, tmp_path_factory) -> dict[str, list[str]]:
    """The CSVs the two reports write: ``{table name: its columns}``."""
    tmp = tmp_path_factory.mktemp("columns")
    base, new = tmp / "base", tmp / "new"
    _store_mixed(base, 0.0, range(3))  # seed 2: only in the baseline
    _store_mixed(new, -0.5, range(2))
    ResultStore(new).record_failure(
        cell("mix", "con", "sobol", 2, n_init=2, budget=2), "RuntimeError: x", "tb", 0.1
    )
    reports = [
        build_report([demo_dir], tmp / "demo.html"),
        build_report([base, new], tmp / "cmp.html", baseline=base),
    ]
    tables: dict[str, list[str]] = {}
    for report in reports:
        for path in report.parent.glob(f"{report.stem}.*.csv"):
            name = path.name.removeprefix(f"{report.stem}.").removesuffix(".csv")
            columns = list(pd.read_csv(path).columns)
            tables[name] = list(dict.fromkeys(tables.get(name, []) + columns))
    return tables


def _documented() -> dict[str, str]:
    """docs/report-tables.md split at its ``## `<stem>.<name>.csv` `` headings: name -> text."""
    parts = re.split(r"^## `<stem>\.([a-z-]+)\.csv`$", DOCS.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


# The two reports with their figures take seconds: not the 2 s of a fast test.
@pytest.mark.slow
def test_the_reports_write_every_table_and_only_those_named(written):
    """TABLE_NAMES is what a report removes when it no longer writes a table: a name missing
    there leaves a stale CSV, one no report writes is dead (and documented for nothing)."""
    assert set(written) == TABLE_NAMES


@pytest.mark.slow
def test_every_csv_and_column_is_documented(written):
    documented = _documented()
    assert set(documented) == TABLE_NAMES, "one '## `<stem>.<name>.csv`' heading per table"
    missing = {
        name: [c for c in columns if f"`{c}`" not in documented[name]]
        for name, columns in written.items()
    }
    assert not {name: c for name, c in missing.items() if c}, "columns not in the docs"


def test_the_headers_on_steps_diagnostics_and_comparison_have_glossary_entries(tmp_path):
    """'BO steps' was steps times seeds in 'Runtime per BO step' and the longest seed's steps in
    'Wall time per BO step', defined nowhere; so were 'jittered draws', 'min raw eigenvalue',
    'verdict', 'new - base' and 'max |dy|'."""
    base, new = tmp_path / "base", tmp_path / "new"
    for root, shift in ((base, 0.0), (new, 1.0)):
        for seed in range(2):
            ys = [v + shift for v in (5.0, 4.0, 6.0, 2.0, 1.0, 0.5)]
            infos = [ensemble_info(i - 3) for i in range(6)]
            write_cell(root, cell("s", "t", "orthobo", seed, 3, 3), ys, infos=infos)
    results = load_results([base, new])
    runtime = runtime_section(results, series_palette(results))
    assert "BO steps (all seeds)" in runtime.tables[0].header
    shown = [
        (runtime, ["BO steps"]),
        (orthobo_section(results), ["BO steps", "jittered draws", "min raw eigenvalue"]),
        (comparison_section(results, str(base)), ["verdict", "new - base", "max |dy|"]),
    ]
    for section, terms in shown:
        assert set(terms) <= set(section.terms), section.id
    assert "steps times seeds" in GLOSSARY["BO steps"] and "the most" in GLOSSARY["BO steps"]
