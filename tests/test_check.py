"""The regression gate: passes on the real estimator, fails on a deliberately broken one."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from orthobench import estimators
from orthobench.check import Threshold, evaluate, load_thresholds
from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError

SUITE = """
name: gate
budget: 0
tasks: [hartmann6]
optimizers: [sobol]
probe:
  tasks: [hartmann6]
  kernels: [matern52-ard]
  n_init: 12
  mc_samples: [16]
  rebuilds: 24
  n_probes: 32
  reference_samples: 512
  estimators: [orth-shrink]
"""

THRESHOLDS = """
version: 1
thresholds:
  - {estimator: orth-shrink, metric: var_ratio, min: 0.9, description: not noisier than naive MC}
  - {estimator: orth-shrink, metric: top1_agreement, min: -0.25, relative_to_baseline: true}
"""


def run_check(write_suite, tmp_path, *extra):
    suite = write_suite(SUITE, "gate.yaml")
    write_suite(THRESHOLDS, "gate.thresholds.yaml")
    return CliRunner().invoke(
        cli, ["check", str(suite), "-o", str(tmp_path / "out"), "-q", "--force", *extra]
    )


@pytest.mark.slow
def test_check_passes_on_the_real_estimator(write_suite, tmp_path):
    result = run_check(write_suite, tmp_path)
    assert result.exit_code == 0, result.output
    assert "check: 2 passed, 0 failed" in result.output


@pytest.mark.slow
def test_check_fails_on_an_estimator_that_adds_noise(write_suite, tmp_path, monkeypatch):
    real = estimators.ESTIMATORS["orth-shrink"]

    def noisy(values, controls, control_mean=None, control_cov=None):
        estimate = real(values, controls, control_mean, control_cov)
        return estimate + values.std(dim=0) * torch.randn(estimate.shape, dtype=estimate.dtype)

    monkeypatch.setitem(estimators.ESTIMATORS, "orth-shrink", noisy)
    result = run_check(write_suite, tmp_path)
    assert result.exit_code == 1
    assert "FAIL orth-shrink    var_ratio" in result.output
    assert "check: " in result.output and "0 failed" not in result.output


def test_a_rule_matching_no_rows_fails():
    import pandas as pd

    frame = pd.DataFrame(
        {"estimator": ["mc"], "var_ratio": [1.0], "mc_samples": [8], "kernel": ["k"], "task": ["t"]}
    )
    results = evaluate(frame, [Threshold(estimator="orth-shrink", metric="var_ratio", min=1.0)])
    assert len(results) == 1 and not results[0].passed


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("version: 2\nthresholds: []\n", "version: 1"),
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y}\n", "needs `min` or `max`"),
        (
            "version: 1\nthresholds:\n  - {estimator: x, metric: y, min: 1, colour: red}\n",
            "unknown key",
        ),
    ],
)
def test_bad_thresholds_files_are_one_line_errors(tmp_path, text, fragment):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(OrthobenchError, match=fragment):
        load_thresholds(path)


def test_the_ci_thresholds_file_matches_its_suite():
    from pathlib import Path

    from orthobench.suite import load_suite

    root = Path(__file__).resolve().parents[1] / "suites"
    suite = load_suite(root / "ci-variance.yaml")
    rules = load_thresholds(root / "ci-variance.thresholds.yaml")
    named = {e.partition("@")[0] for e in suite.probe.estimators}
    assert {r.estimator for r in rules} <= named
