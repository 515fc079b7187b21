"""The regression gate: passes on the real estimator, fails on a deliberately broken one."""

from __future__ import annotations

import math
import re

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
    assert re.search(r"^FAIL +orth-shrink +var_ratio ", result.output, re.MULTILINE)
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


@pytest.mark.parametrize(("rule", "row"), [("orth", "orth@iid"), ("orth@iid", "orth")])
def test_a_rule_selects_an_estimator_by_its_one_name(rule, row):
    """A suite's ``orth@iid`` and a rule's ``orth`` are one estimator (a suite refuses both in one
    probe); the rule matched no row, refused as a rule the probe cannot match."""
    frame = _states({(row, 0): 2.0}, metric="var_ratio")
    results = evaluate(frame, [Threshold(estimator=rule, metric="var_ratio", min=1.0)])
    assert [(r.value, r.passed) for r in results] == [(2.0, True)]


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
    assert format_results(results).splitlines()[2].endswith("undefined  >= -0.1  (no mc row)")
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
        # YAML 1.1 reads 1e9 as text: the suite loader's hint, not "must be a number" alone
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y, max: 1e9}\n", r"write 1\.0e\+9"),
        ("version: 1\nthresholds:\n  - {estimator: x, metric: y, max: .nan}\n", "`max`"),
        # No finite value passes (as `min` above `max`): every row FAILed after the probe.
        (
            "version: 1\nthresholds:\n  - {estimator: x, metric: var_ratio, min: .inf}\n",
            "`min` must be a finite number, but got inf",
        ),
        (
            "version: 1\nthresholds:\n  - {estimator: x, metric: var_ratio, max: -.inf}\n",
            "`max` must be a finite number, but got -inf",
        ),
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
        # No value passes, or no row has it: they failed every row after the probe.
        (
            "version: 1\nthresholds:\n  - {estimator: x, metric: var_ratio, min: 2, max: 1}\n",
            "`min` 2 is above `max` 1",
        ),
        (
            "version: 1\nthresholds:\n  - {estimator: x, metric: var_ratio, min: 1, mc_samples: -5}\n",
            "`mc_samples` must be >= 1, but got -5",
        ),
        (
            "version: true\nthresholds:\n  - {estimator: x, metric: var_ratio, min: 1}\n",
            "version: 1",
        ),
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


@pytest.fixture
def probes(monkeypatch) -> list[str]:
    """The suites ``check`` started to probe: ``run_probe`` replaced by a stand-in that records
    its call and stops the command (a bad thresholds file must stop it before)."""
    calls: list[str] = []

    def run_probe(suite_name, *args, **kwargs):
        calls.append(suite_name)
        raise RuntimeError("probed")

    monkeypatch.setattr("orthobench.probe.runner.run_probe", run_probe)
    return calls


def check_with(write_suite, tmp_path, thresholds: bytes, suite_text: str = SUITE):
    """``orthobench check`` of the gate suite (or ``suite_text``) with ``thresholds`` as its
    file."""
    suite = write_suite(suite_text, "gate.yaml")
    (tmp_path / "t.yaml").write_bytes(thresholds)
    out = tmp_path / "out"
    args = ["check", str(suite), "-t", str(tmp_path / "t.yaml"), "-o", str(out), "-q", "--force"]
    return CliRunner().invoke(cli, args)


def assert_refused_before_the_probe(result, probes, tmp_path, fragment: str) -> None:
    """Exit 2 with one error line naming the file and ``fragment``, and nothing probed."""
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"orthobench: error: {tmp_path / 't.yaml'}: ") and fragment in line
    assert probes == [] and not (tmp_path / "out" / "probe").exists()


@pytest.mark.parametrize(
    ("thresholds", "fragment"),
    [
        (
            b"version: 1\nthresholds:\n"
            b'  - {estimator: orth-shrink, metric: var_ratio, min: 1.0, description: "caf\xe9"}\n',
            "line 3: not UTF-8 text (byte 0xe9)",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "line 1: not UTF-8 text (byte 0x89)"),
        (b"version: 1\nthresholds: []\n\x00\x01", "unacceptable character #x0000"),
    ],
    ids=["latin-1", "png", "nul"],
)
def test_a_thresholds_file_that_is_not_utf8_text_is_one_line_and_exit_2(
    write_suite, tmp_path, probes, thresholds, fragment
):
    """The reported bug: a Latin-1 or binary file raised ``UnicodeDecodeError`` out of the
    command, a traceback with exit 1 (the code of a failed gate); a control character gave a
    message of several lines."""
    result = check_with(write_suite, tmp_path, thresholds)
    assert_refused_before_the_probe(result, probes, tmp_path, fragment)
    with pytest.raises(OrthobenchError) as raised:
        load_thresholds(tmp_path / "t.yaml")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "rule",
    [
        "{estimator: orth-shrink, metric: var_ratio, min: 100, min: 0}",
        "{estimator: orth-shrink, metric: var_ratio, metric: flip_rate, max: 0.1}",
    ],
)
def test_a_duplicate_key_in_a_thresholds_rule_is_refused(write_suite, tmp_path, probes, rule):
    """The reported bug: the last of two ``min:`` won, so ``min: 100`` then ``min: 0`` passed a
    gate its first bound fails (``check: 2 passed``)."""
    result = check_with(write_suite, tmp_path, f"version: 1\nthresholds:\n  - {rule}\n".encode())
    assert_refused_before_the_probe(result, probes, tmp_path, "duplicate key")
    key = "min" if "min: 0" in rule else "metric"
    assert f"(duplicate key '{key}')" in result.stderr and "at line 3" in result.stderr


def test_a_value_that_does_not_construct_is_one_line_and_exit_2(write_suite, tmp_path, probes):
    """``2001-02-30`` parses as a date and raised ``ValueError`` (a traceback, exit 1)."""
    text = b"version: 1\nthresholds:\n  - {estimator: e, metric: var_ratio, min: 2001-02-30}\n"
    result = check_with(write_suite, tmp_path, text)
    assert_refused_before_the_probe(result, probes, tmp_path, "day is out of range for month")


@pytest.mark.parametrize(
    ("field", "fragment"),
    [
        ("metric: var_ratoi", "`metric` 'var_ratoi' is not a numeric probe column"),
        ("metric: task", "`metric` 'task' is not a numeric probe column"),
        ("metric: var_ratio, kernel: matern52", "`kernel` 'matern52' is not a probe kernel"),
    ],
)
def test_a_metric_or_kernel_that_no_probe_row_has_is_refused_before_the_probe(
    write_suite, tmp_path, probes, field, fragment
):
    """The reported bug: a misspelled metric was an error only after the whole probe had run (a
    string column, or a misspelled kernel, failed the gate after it). Both sets are fixed by the
    code, so the file is refused when it is read."""
    text = f"version: 1\nthresholds:\n  - {{estimator: orth-shrink, {field}, min: 1.0}}\n"
    result = check_with(write_suite, tmp_path, text.encode())
    assert_refused_before_the_probe(result, probes, tmp_path, fragment)
    assert "allowed: " in result.stderr


@pytest.mark.parametrize(
    ("rule", "selection"),
    [
        (
            "{estimator: orth-shrink, metric: var_ratio, min: 1, kernel: rbf-iso}",
            "kernel 'rbf-iso'",
        ),
        ("{estimator: orth-shrink, metric: var_ratio, min: 1, mc_samples: 32}", "mc_samples 32"),
        ("{estimator: orth-shrink, metric: var_ratio, min: 1, task: levy16}", "task 'levy16'"),
        ("{estimator: orth, metric: var_ratio, min: 1}", "estimator 'orth'"),
    ],
)
def test_a_rule_the_suites_probe_cannot_match_is_refused_before_the_probe(
    write_suite, tmp_path, probes, rule, selection
):
    """The reported bug: such a rule failed only after the probe, as a line that named neither
    the rule nor the filter that matched nothing."""
    text = f"version: 1\nthresholds:\n  - {{estimator: orth-shrink, metric: var_ratio, min: 0}}\n  - {rule}\n"
    result = check_with(write_suite, tmp_path, text.encode())
    assert_refused_before_the_probe(result, probes, tmp_path, "thresholds[1] (estimator '")
    assert f"{selection}) matches no row" in result.stderr
    assert "mc_samples: 16; task: hartmann6; kernel: matern52-ard" in result.stderr


@pytest.mark.parametrize(
    ("estimators", "rule", "fragment"),
    [
        (
            "mc-tpe, orthobo-tpe",
            "{estimator: orthobo-tpe, metric: seconds_per_call, max: 0.05}",
            "seconds_per_call is not measured on orthobo-tpe rows (only the acquisition calls",
        ),
        (
            "mc-tpe, orthobo-tpe",
            "{estimator: mc-tpe, metric: cholesky_jitter, max: 0}",
            "cholesky_jitter is not measured on TPE rows (no GP kernel matrix or Laplace fit)",
        ),
        (
            "orth-shrink, qlogei",
            "{estimator: qlogei, metric: seconds_per_call, max: 1}",
            "seconds_per_call is not measured on qlogei rows",
        ),
    ],
)
def test_a_rule_on_a_metric_its_rows_never_have_is_refused_before_the_probe(
    write_suite, tmp_path, probes, estimators, rule, fragment
):
    """The reported bug: the probe stores null there (TPE rows have no timing or GP diagnostics,
    qLogEI rows no timing), so the rule failed every row after the whole probe, printed as a
    bare ``nan``."""
    suite = SUITE.replace("estimators: [orth-shrink]", f"estimators: [{estimators}]")
    text = f"version: 1\nthresholds:\n  - {rule}\n"
    result = check_with(write_suite, tmp_path, text.encode(), suite)
    assert_refused_before_the_probe(result, probes, tmp_path, fragment)
    assert "thresholds[0] (estimator '" in result.stderr


def test_a_rule_on_a_metric_its_rows_have_is_not_refused(write_suite, tmp_path, probes):
    """A theta estimator's row is timed and has a GP: the rule goes to the probe."""
    rules = [
        "{estimator: orth-shrink, metric: seconds_per_call, max: 1}",
        "{estimator: orth-shrink, metric: cholesky_jitter, max: 0}",
    ]
    text = "version: 1\nthresholds:\n" + "".join(f"  - {r}\n" for r in rules)
    check_with(write_suite, tmp_path, text.encode())
    assert probes == ["gate"]


def test_a_nan_that_reaches_the_table_says_why():
    """Rows stored without a value (a TPE or qLogEI row's timing, an unknown optimum's regret)
    failed as a bare ``nan``; they fail as ``undefined`` with the reason, as an undefined ratio."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            {"estimator": e, "seed": 0, "state_iteration": 0, "task": "t", "kernel": kernel,
             "mc_samples": 32, "baseline": "mc", "seconds_per_call": math.nan,
             "regret": math.nan}
            for e, kernel in (("qlogei", "k"), ("mc-tpe", "tpe"))
        ]
    )  # fmt: skip
    rules = [
        Threshold(estimator="qlogei", metric="seconds_per_call", max=1.0),
        Threshold(estimator="mc-tpe", metric="regret", max=1.0),
    ]
    results = evaluate(frame, rules)
    assert not any(r.passed for r in results)
    assert results[0].why.startswith("seconds_per_call is not measured on qlogei rows")
    assert results[1].why == "regret is missing"
    lines = format_results(results).splitlines()[1:]
    assert "nan" not in "".join(lines) and all(" undefined  <= 1  (" in x for x in lines)


def test_the_summary_line_counts_the_states_that_were_not_probed(
    write_suite, tmp_path, monkeypatch
):
    """It read "check: 1 passed, 0 failed" with exit 1, the reason only on stderr."""
    from orthobench.execution import Outcome, RunSummary
    from orthobench.probe.runner import probe_units
    from orthobench.suite import load_suite

    suite = write_suite(SUITE, "gate.yaml")
    (state,) = probe_units("gate", load_suite(suite).probe)
    stored = _states({("orth-shrink", 0): 2.0}, metric="var_ratio")
    failed = RunSummary([Outcome(state, "failed", error="ValueError: x")])
    monkeypatch.setattr("orthobench.probe.runner.run_probe", lambda *a, **k: (stored, failed))
    (tmp_path / "t.yaml").write_text(
        "version: 1\nthresholds:\n  - {estimator: orth-shrink, metric: var_ratio, min: 1}\n"
    )
    args = ["check", str(suite), "-t", str(tmp_path / "t.yaml"), "-o", str(tmp_path / "o"), "-q"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert "check: 1 passed, 0 failed, 1 state(s) not probed (" in result.stdout


def test_a_missing_suite_is_named_not_its_thresholds_file(tmp_path):
    """``check nosuch.yaml`` said that ``nosuch.thresholds.yaml`` could not be read."""
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "nosuch.yaml"), "-q"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'nosuch.yaml'}: (file): cannot read" in result.stderr
    assert "thresholds" not in result.stderr


@pytest.mark.parametrize(
    ("value", "rule", "shown"),
    [
        (2.543734, Threshold(estimator="e", metric="var_ratio", min=2.5438), "2.5437"),
        (0.99997, Threshold(estimator="e", metric="var_ratio", min=1.0), "0.99997"),
        (1.0, Threshold(estimator="e", metric="top1_agreement", max=0.9999999), "1"),
        (2.543734, Threshold(estimator="e", metric="var_ratio", min=1.0), "2.544"),
    ],
)
def test_a_value_is_printed_with_the_digits_its_verdict_needs(value, rule, shown):
    """4 significant digits printed "FAIL ... 2.544 >= 2.5438" and "FAIL ... 1 >= 1"."""
    frame = _states({("e", 0): value}, metric=rule.metric)
    (result,) = evaluate(frame, [rule])
    line = format_results([result]).splitlines()[1]
    assert f" {shown}  {rule.bound()}" in line


def test_an_undefined_ratio_fails_its_rule_as_nan_does():
    """The report leaves a ratio beyond 1e12 out as round-off (one variance ~0); the gate passed
    6.8e23 as ``>= 1``."""
    frame = _states({("e", 0): 6.8e23, ("e", 1): 3.0, ("e", 2): math.inf}, metric="var_ratio")
    results = evaluate(frame, [Threshold(estimator="e", metric="var_ratio", min=1.0)])
    assert [r.passed for r in results] == [False, True, False]
    flips = _states({("e", 0): 0.0}, metric="flip_rate")  # not a ratio: 0 is a value
    assert evaluate(flips, [Threshold(estimator="e", metric="flip_rate", max=0.1)])[0].passed


def test_a_ci_bound_is_undefined_where_its_ratio_is_and_compared_as_stored_otherwise():
    """qLogEI's upper bound 4.156e29 on a state whose ratio is 0.0043: a CI that reaches a
    resample with variance ~0, still >= 1; the gate turned it into NaN, printed ``nan`` and
    failed ``min: 1``. Where the ratio itself is undefined, so is its bound, and the table says
    why. ``state_iteration`` has "ratio" in its name but is no ratio: 0 is a value."""
    frame = _states({("e", 0): 4.156e29, ("e", 1): 2.0}, metric="var_ratio_high").assign(
        var_ratio=[0.004283, 6.8e23]
    )
    rules = [
        Threshold(estimator="e", metric="var_ratio_high", min=1.0),
        Threshold(estimator="e", metric="state_iteration", max=0),
    ]
    results = evaluate(frame, rules)
    assert [r.passed for r in results] == [True, False, True, True]
    lines = format_results(results).splitlines()[1:]
    assert "nan" not in "".join(lines) and lines[0].endswith(" 4.156e+29  >= 1")
    assert lines[1].endswith(
        " undefined  >= 1  (var_ratio 6.8e+23 is undefined: not in [1e-12, 1e+12])"
    )
    # A deterministic acquisition: its ratio is inf, its bounds stored as NaN (printed ``nan``
    # with no reason).
    frame = _states({("e", 0): math.nan}, metric="var_ratio_low").assign(var_ratio=math.inf)
    (result,) = evaluate(frame, [Threshold(estimator="e", metric="var_ratio_low", min=1.0)])
    assert not result.passed and result.why == "var_ratio inf is undefined: not in [1e-12, 1e+12]"


@pytest.mark.parametrize(("bound", "passed"), [(-0.05, True), (-0.0499999999, False)])
def test_a_relative_rule_passes_a_difference_of_shares_on_its_bound(bound, passed):
    """Top-1 agreement 17/20 against the baseline's 18/20: -1/20, but -0.05000000000000004 in
    floats, which failed ``min: -0.05``; a bound a real difference misses still fails, printed
    with the digits that show it."""
    frame = _states({("e", 0): 17 / 20, ("mc", 0): 18 / 20}, metric="top1_agreement")
    rule = Threshold(estimator="e", metric="top1_agreement", relative_to_baseline=True, min=bound)
    (result,) = evaluate(frame, [rule])
    assert result.passed == passed
    line = format_results([result]).splitlines()[1]
    assert line.startswith("ok" if passed else "FAIL") and line.endswith(f" -0.05  >= {bound!r}")


def test_a_failing_rule_shows_its_description_and_a_rule_without_rows_its_filters():
    frame = _states({("e", 0): 0.5}, metric="var_ratio")
    rules = [
        Threshold(estimator="e", metric="var_ratio", min=1.0, description="not noisier than MC"),
        Threshold(estimator="e", metric="var_ratio", min=1.0, mc_samples=64, kernel="rbf-iso"),
    ]
    failing, unmatched = format_results(evaluate(frame, rules)).splitlines()[1:]
    assert failing.endswith(">= 1  (not noisier than MC)")
    assert " rbf-iso " in unmatched and " 64 no matching probe rows" in unmatched


def test_the_check_table_is_as_wide_as_its_longest_names():
    """A task named ``tension-compression-string`` pushed its line's later columns out of line
    with the header's."""
    frame = _states({("e", 0): 2.0}, metric="var_ratio").assign(task="tension-compression-string")
    rule = Threshold(estimator="e", metric="var_ratio", min=1.0)
    header, row = format_results(evaluate(frame, [rule])).splitlines()
    assert header.index("kernel") == row.index(" k ") + 1
    assert header.index("bound") == row.index(">= 1")


def test_every_metric_and_kernel_a_probe_row_has_is_accepted(tmp_path):
    """The allowed sets are not too narrow: every numeric probe column and every kernel."""
    from orthobench.config.names import KERNELS

    numeric = [
        "mse_ratio_low", "var_ratio_high", "top1_agreement", "flip_rate", "regret",
        "seconds_per_call", "laplace_floored", "cholesky_jitter", "q",
    ]  # fmt: skip
    rules = [f"  - {{estimator: e, metric: {m}, max: 1}}" for m in numeric] + [
        f"  - {{estimator: e, metric: var_ratio, min: 1, kernel: {k}}}" for k in (*KERNELS, "tpe")
    ]
    path = tmp_path / "t.yaml"
    path.write_text("version: 1\nthresholds:\n" + "\n".join(rules) + "\n")
    assert len(load_thresholds(path)) == len(rules)
