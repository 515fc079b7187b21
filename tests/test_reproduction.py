"""The committed figures of docs/reproduction/ are what HEAD computes.

A figure in the docs is a function of the code: these slow tests rerun a few rows of the committed
CSVs with the documented commands (``orthobench run`` / ``orthobench probe``, then
``benchmarks/paper_tables.py``) and compare the CSV text. Every cell and probe state runs with one
torch thread, so the rows are reproduced exactly on the machine that wrote them; across BLAS builds
the values that pass through an optimizer may differ in their last digits, so numbers are compared
to :data:`tests.helpers.CSV_RTOL` (the CSVs round to 4 significant digits, so equal values print equally; the
tolerance only absorbs a rounding boundary). A change of seeding or numerics moves these rows by
far more, as it moves the golden values (tests/test_golden.py): then regenerate the figures
(``make reproduce``) in the same change. Another CPU type can move rows that pass through BO
steps further than rounding; its rows are kept in :data:`MACHINE_ROWS`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.golden_cases import machine
from tests.helpers import assert_rows_equal

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "docs" / "reproduction"
#: The rows other machines compute for the same code, where they differ from the committed
#: CSVs (written on an AMD EPYC): a probe state after BO steps follows the CPU's rounding as the
#: golden BO values do (tests/golden_cases.py, "Machines"), and on an AVX-512 Intel Xeon the
#: Hartmann6 probe rows' ratios moved by up to 32%. One folder per machine: ``machine.txt``
#: (:func:`tests.golden_cases.machine`) and the regenerated rows of each CSV it differs in.
MACHINE_ROWS = Path(__file__).with_name("machine_rows")


def _orthobench(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "orthobench", *args], check=True, cwd=ROOT)


def _tables(results: Path, out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "paper_tables.py"),
            str(results),
            "-o",
            str(out),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )


def _assert_committed_rows(new: pd.DataFrame, name: str, key: list[str]) -> None:
    """:func:`assert_rows_equal` against the committed ``name``, or against this machine's rows
    of it (:data:`MACHINE_ROWS`) where it has some; the committed CSV's error otherwise."""
    try:
        assert_rows_equal(new, pd.read_csv(COMMITTED / name), key)
    except AssertionError:
        here = next(
            (
                folder / name
                for folder in sorted(MACHINE_ROWS.iterdir())
                if (folder / "machine.txt").read_text().strip() == machine()
                and (folder / name).exists()
            ),
            None,
        )
        if here is None:
            raise
        assert_rows_equal(new, pd.read_csv(here), key)


@pytest.mark.slow
def test_misspecified_tables_regenerate_at_head(tmp_path):
    """Every row of misspecified-final.csv and misspecified-paired.csv (the smallest BO suite;
    the -runtime.csv files hold wall-clock seconds, not a function of the code)."""
    results = tmp_path / "results"
    _orthobench(
        "run",
        "suites/paper/misspecified-reduced.yaml",
        "-o",
        str(results / "paper-misspecified-reduced"),
        "-q",
    )
    _tables(results, tmp_path / "tables")
    for name, key in (
        ("misspecified-final.csv", ["task", "optimizer"]),
        ("misspecified-paired.csv", ["task", "optimizer", "versus"]),
    ):
        _assert_committed_rows(pd.read_csv(tmp_path / "tables" / name), name, key)


@pytest.mark.slow
def test_probe_ratio_rows_regenerate_at_head(tmp_path):
    """The probe-ratios.csv rows of Hartmann6 with the Matérn ARD kernel (9 states, both S).

    The suite is probe-reduced.yaml cut to that task, kernel and the paper's estimator; states
    and their draws derive from the suite name, task, kernel, seed and iteration alone.
    """
    suite = yaml.safe_load((ROOT / "suites" / "paper" / "probe-reduced.yaml").read_text())
    suite["probe"].update(tasks=["hartmann6"], kernels=["matern52-ard"], estimators=["orth"])
    path = tmp_path / "probe-reduced.yaml"
    path.write_text(yaml.safe_dump(suite))
    results = tmp_path / "results"
    _orthobench("probe", str(path), "-o", str(results / "paper-probe-reduced"), "-q")
    _tables(results, tmp_path / "tables")
    new = pd.read_csv(tmp_path / "tables" / "probe-ratios.csv")
    _assert_committed_rows(
        new, "probe-ratios.csv", ["suite", "task", "kernel", "mc_samples", "estimator"]
    )
