"""docs/estimators.md is what its committed states CSV gives, and the CSV is what HEAD computes.

The tables of the page are generated blocks (``benchmarks/estimator_tables.py``) computed from
``docs/estimators/states.csv`` alone; the slow test reruns one state of
``suites/probe-estimators.yaml`` for two estimators and compares its rows with the CSV (every
column but the wall time ``seconds_per_call``), to :data:`RTOL` of the CSV's 4 digits.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "docs" / "estimators" / "states.csv"
#: One unit in the 4th significant digit of the CSV (a rounding boundary, not a tolerance on
#: the numerics: a change of seeding moves these rows by far more).
RTOL = 1e-3


def _script():
    spec = importlib.util.spec_from_file_location(
        "estimator_tables", ROOT / "benchmarks" / "estimator_tables.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_estimators_page_tables_are_those_of_the_committed_csv():
    assert _script().main(["--check"]) == 0


def test_a_stale_or_unknown_block_is_reported_and_replaced():
    script = _script()
    page = (
        "text\n<!-- estimator_tables:a -->\nold\n<!-- /estimator_tables -->\n"
        "<!-- estimator_tables:b -->\n| t |\n<!-- /estimator_tables -->\n"
        "<!-- estimator_tables:gone -->\nx\n<!-- /estimator_tables -->\n"
    )
    new, changed = script.render(page, {"a": "| new |\n", "b": "| t |\n"})
    assert changed == ["a", "gone (no such table)"]
    assert "<!-- estimator_tables:a -->\n| new |\n<!-- /estimator_tables -->" in new
    assert "old" not in new and "\nx\n" in new


@pytest.mark.slow
def test_a_state_of_the_estimator_probe_regenerates_at_head(tmp_path):
    suite = yaml.safe_load((ROOT / "suites" / "probe-estimators.yaml").read_text())
    suite["probe"].update(
        tasks=["hartmann6"], kernels=["matern52-ard"], seeds=[5], estimators=["orth", "qmc-owen+rb"]
    )
    path = tmp_path / "probe-estimators.yaml"
    path.write_text(yaml.safe_dump(suite))
    results = tmp_path / "results"
    subprocess.run(
        [sys.executable, "-m", "orthobench", "probe", str(path), "-o", str(results), "-q"],
        check=True,
        cwd=ROOT,
    )
    key = ["task", "kernel", "seed", "state_iteration", "mc_samples", "estimator"]
    new = _script().states_frame(results).drop(columns="seconds_per_call").set_index(key)
    committed = pd.read_csv(CSV).drop(columns="seconds_per_call").set_index(key)
    committed = committed.loc[new.index]
    assert len(new) == 6  # mc, orth and qmc-owen+rb at both budgets
    for column in new.columns:
        if pd.api.types.is_numeric_dtype(new[column]):
            pd.testing.assert_series_equal(
                new[column], committed[column], check_dtype=False, rtol=RTOL, obj=column
            )
        else:
            assert new[column].tolist() == committed[column].tolist(), column
