"""The regression gate: passes on the real estimator, fails on a deliberately broken one."""

from __future__ import annotations

import math

import pytest
import torch
from click.testing import CliRunner

from orthobench import estimators
from orthobench.check import Threshold, evaluate, format_results, load_thresholds
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
    (summary,) = [line for line in result.output.splitlines() if line.startswith("check: ")]
    assert "0 failed" not in summary


def test_a_rule_matching_no_rows_fails():
    import pandas as pd

    frame = pd.DataFrame(
        {"estimator": ["mc"], "var_ratio": [1.0], "mc_samples": [8], "kernel": ["k"], "task": ["t"]}
    )
    results = evaluate(frame, [Threshold(estimator="orth-shrink", metric="var_ratio", min=1.0)])
    assert len(results) == 1 and not results[0].passed


def _states(values: dict[tuple[str, int], float], metric: str = "mse_ratio_low"):
    import pandas as pd

    return pd.DataFrame(
        [
            {"estimator": e, "seed": seed, "state_iteration": 0, "task": "t", "kernel": "k",
             "mc_samples": 32, "baseline": "mc", metric: value}
            for (e, seed), value in values.items()
        ]
    )  # fmt: skip


def test_a_rule_holds_on_every_state_not_on_an_aggregate():
    """Two states of one cell: 3.0 and 0.8. Their mean (1.9) or median would pass ``min: 1``; the
    gate checks each state and fails on seed 1, naming it."""
    frame = _states({("qmc-owen+rb", 0): 3.0, ("qmc-owen+rb", 1): 0.8})
    results = evaluate(frame, [Threshold(estimator="qmc-owen+rb", metric="mse_ratio_low", min=1.0)])
    assert [(r.state, r.passed) for r in results] == [
        ("seed 0, it 0", True),
        ("seed 1, it 0", False),
    ]
    assert "FAIL qmc-owen+rb" in format_results(results) and "seed 1, it 0" in format_results(
        results
    )


def test_a_relative_rule_compares_with_the_baseline_of_the_same_state():
    frame = _states(
        {("e", 0): 0.5, ("mc", 0): 0.5, ("e", 1): 0.5, ("mc", 1): 0.7}, metric="top1_agreement"
    )
    rule = Threshold(estimator="e", metric="top1_agreement", relative_to_baseline=True, min=-0.1)
    results = evaluate(frame, [rule])
    assert [r.value for r in results] == pytest.approx([0.0, -0.2])
    assert [r.passed for r in results] == [True, False]


def test_a_relative_rule_without_its_baseline_row_fails_the_rule():
    """The baseline's row missing (or its metric NaN or not a number): the rule fails on that
    row, it neither passes nor stops the gate with a traceback."""
    frame = _states({("e", 0): 0.5, ("mc", 0): 0.5, ("e", 1): 0.5}, metric="top1_agreement")
    rule = Threshold(estimator="e", metric="top1_agreement", relative_to_baseline=True, min=-0.1)
    results = evaluate(frame, [rule])
    assert [(r.state, r.passed) for r in results] == [
        ("seed 0, it 0", True),
        ("seed 1, it 0", False),
    ]
    assert math.isnan(results[1].value)
    frame["top1_agreement"] = frame["top1_agreement"].astype(object)
    frame.loc[frame["estimator"] == "mc", "top1_agreement"] = None
    assert [r.passed for r in evaluate(frame, [rule])] == [False, False]
    plain = Threshold(estimator="e", metric="top1_agreement", max=1.0)
    frame.loc[0, "top1_agreement"] = None
    assert [r.passed for r in evaluate(frame, [plain])] == [False, True]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("version: 2\nthresholds: []\n", "version: 1"),
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y}\n", "needs `min` or `max`"),
        (
            "version: 1\nthresholds:\n  - {estimator: x, metric: y, min: 1, colour: red}\n",
            "unknown key",
        ),
        # Checked when the file is read, before the probe runs: a bound that is not a number
        # would raise in the comparison after the probe, and a quoted "no" is a true string,
        # which would make the rule relative to the baseline.
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y, min: one}\n", "`min`"),
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y, max: .nan}\n", "`max`"),
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y, min: true}\n", "`min`"),
        (
            'version: 1\nthresholds:\n  - {estimator: x, metric: y, min: 1, relative_to_baseline: "no"}\n',
            "`relative_to_baseline`",
        ),
        (
            'version: 1\nthresholds:\n  - {estimator: x, metric: y, min: 1, mc_samples: "32"}\n',
            "`mc_samples`",
        ),
        ("version: 1\nthresholds:\n  - {estimator: [x], metric: y, min: 1}\n", "`estimator`"),
    ],
)
def test_bad_thresholds_files_are_one_line_errors(tmp_path, text, fragment):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(OrthobenchError, match=fragment) as raised:
        load_thresholds(path)
    assert str(raised.value).startswith(f"{path}: ") and "\n" not in str(raised.value)


def test_the_ci_thresholds_file_matches_its_suite():
    from pathlib import Path

    from orthobench.suite import load_suite

    root = Path(__file__).resolve().parents[1] / "suites"
    suite = load_suite(root / "ci-variance.yaml")
    rules = load_thresholds(root / "ci-variance.thresholds.yaml")
    named = {e.partition("@")[0] for e in suite.probe.estimators}
    assert {r.estimator for r in rules} <= named
    assert len(suite.probe.seeds) * len(suite.probe.state_iterations) >= 2  # states per function
