"""docs/estimators.md is what its committed states CSV gives, and the CSV is what HEAD computes.

The tables of the page are generated blocks (``benchmarks/estimator_tables.py``) computed from
``docs/estimators/states.csv`` alone; the slow test reruns one state of
``suites/probe-estimators.yaml`` for two estimators and compares its rows with the CSV (every
column but the wall time ``seconds_per_call``), to :data:`tests.helpers.CSV_RTOL`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers import assert_rows_equal, load_script

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "docs" / "estimators" / "states.csv"


@pytest.mark.slow
def test_estimators_page_tables_are_those_of_the_committed_csv():
    assert load_script("estimator_tables").main(["--check"]) == 0


def test_a_stale_or_unknown_block_is_reported_and_replaced():
    script = load_script("estimator_tables")
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
    new = load_script("estimator_tables").states_frame(results).drop(columns="seconds_per_call")
    assert len(new) == 6  # mc, orth and qmc-owen+rb at both budgets
    committed = pd.read_csv(CSV).drop(columns="seconds_per_call")
    assert_rows_equal(new, committed, key)
