"""Regression gate on the probe: fail when variance reduction or ranking stability regresses.

A thresholds file (YAML, versioned in the repo next to its suite) lists rules::

    version: 1
    thresholds:
      - estimator: orth-shrink        # rows of this estimator ...
        metric: var_ratio_low         # ... this probe column (orthobench.results.ProbeRecord) ...
        min: 1.0                      # ... must be >= 1.0 (or `max:` for <=)
        mc_samples: 32                # optional filters: mc_samples, kernel, task
        relative_to_baseline: false   # true: compare metric(estimator) - metric(baseline), same state and S
        description: lower 95% bootstrap bound of Var(mc)/Var(est) stays above 1

Every rule is checked on every matching probe row, one per BO state (seed, state iteration) and
S, never on an aggregate over states: a threshold holds on every state, so the worst state
decides (a mean over states would let a good state hide a bad one). A ``relative_to_baseline``
rule compares with the baseline row of the same state and S (and batch size ``q``, where the
rows of batch probes carry one; a rule applies to the rows of every ``q``). For a point set whose
evaluation count differs from S that row is naive MC at S, not the like-for-like baseline of the
row's ratios (naive MC at the point set's count, :class:`~orthobench.results.ProbeRecord`). The
difference passes a bound it misses by at most :data:`_ULPS` ulps of the larger operand: shares
are not exact in binary, and 17/20 - 18/20 is -0.05000000000000004, below ``min: -0.05``.

A rule on a row whose metric (or whose baseline's row or metric) is missing, NaN or, for a ratio,
undefined (:func:`~orthobench.probe.intervals.defined_ratios`: the report leaves such a ratio out)
fails, and so does a rule that matches no row once the probe ran (a state failed). A ratio's
rebuild-CI bound (``*_low``, ``*_high``) is undefined where its ratio is and compared as stored
otherwise, as the report shows it: a bound beyond 1e12 (or ``inf``) is a CI that reaches a
resample whose variance is ~0 (or 0), still a bound. The table prints such a value, a missing or
NaN one and a difference without its baseline's row as ``undefined`` and says why. So does an MSE ratio (``mse_ratio``, its bounds,
``median_point_mse_ratio``) on a state whose reference is too far from converged for it to
compare estimators (:func:`~orthobench.probe.tables.unconverged_reference`): the rule cannot be
evaluated there, and fails, as on an undefined ratio, rather than pass or fail on the reference's
error; a larger ``probe.reference_samples`` is the fix.

Everything the file alone can tell is a one-line error when it is read, before the probe runs
(minutes of it in CI): a file that is not UTF-8 or not YAML, a duplicate key (the last would win
and could weaken a bound unseen), a value of the wrong type, an infinite bound (``min: .inf``
passes no finite value, ``max: .inf`` every one), ``min`` above ``max``, an ``mc_samples`` below
1, a ``metric`` that is not a numeric probe column and a ``kernel`` that no probe state has. A rule
that matches no row the suite's probe asks for (a renamed estimator, an S the suite does not
probe) is refused before the probe too (:func:`check_rules_match`), so it cannot pass the gate
silently, and so is a rule on a metric its rows never have (``seconds_per_call`` of qLogEI, TPE
and plugin rows, the GP diagnostics of TPE rows: they store null), which would fail.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import yaml

from orthobench.config.names import (
    FUNCTION_SAMPLE_ESTIMATORS,
    KERNELS,
    TPE_ESTIMATORS,
    ThetaEstimator,
    parse_estimator,
)
from orthobench.config.schema import float_text_hint
from orthobench.config.strict_yaml import load_yaml, yaml_error_parts
from orthobench.exceptions import OrthobenchError
from orthobench.probe.intervals import MAX_RATIO, defined_ratios
from orthobench.probe.tables import (
    MAX_REFERENCE_ERROR,
    POINT_RATIOS,
    RATIOS,
    REFERENCE_RATIOS,
    unconverged_reference,
)
from orthobench.results import PROBE_SCHEMA

if TYPE_CHECKING:
    from orthobench.probe.states import ProbeUnit

_RULE_KEYS = (
    "estimator",
    "metric",
    "min",
    "max",
    "mc_samples",
    "kernel",
    "task",
    "relative_to_baseline",
    "description",
)
#: Keys whose value may be null (their default): the bounds and the filters.
_OPTIONAL = ("min", "max", "mc_samples", "kernel", "task")
#: The probe columns a rule can bound: the numeric fields of ``ProbeRecord``, whose columns every
#: probe frame has (a string or list column would read NaN on every row and fail the rule).
_METRICS = tuple(
    f.name
    for f in PROBE_SCHEMA
    if pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)
)
#: The ratio columns (:func:`defined_ratios` applies) and the rebuild-CI bounds of a ratio, each
#: with the ratio whose definedness it takes (not every column with "ratio" in its name: the
#: ``state_iteration`` of a state is not one).
_RATIO_OF = {
    **{ratio: ratio for ratio in (*RATIOS, *POINT_RATIOS)},
    **{f"{ratio}_{end}": ratio for ratio in RATIOS for end in ("low", "high")},
}
#: Slack of a ``relative_to_baseline`` comparison, in ulps of the larger operand.
_ULPS = 4
#: The ``kernel`` column of probe rows: a GP kernel, or ``tpe`` for TPE states
#: (:func:`orthobench.probe.runner.probe_states`).
_KERNELS = (*KERNELS, "tpe")
#: The diagnostics of a state's GP and Laplace fit, which TPE states have none of.
_GP_DIAGNOSTICS = ("cholesky_jitter", "laplace_floored", "laplace_min_eigenvalue")


@dataclass(frozen=True, kw_only=True)
class Threshold:
    estimator: str
    metric: str
    min: float | None = None
    max: float | None = None
    mc_samples: int | None = None
    kernel: str | None = None
    task: str | None = None
    relative_to_baseline: bool = False
    description: str = ""

    def selection(self) -> str:
        """The rows the rule selects, e.g. ``estimator 'orth', mc_samples 32``."""
        filters = [
            f"{column} {getattr(self, column)!r}"
            for column in ("mc_samples", "kernel", "task")
            if getattr(self, column) is not None
        ]
        return ", ".join([f"estimator {self.estimator!r}", *filters])

    def bound(self) -> str:
        """The bounds as written, e.g. ``>= 1 and <= 2.5`` (``:g`` where it reads back exactly:
        its 6 digits printed ``min: -0.0499999999`` as ``>= -0.05``)."""
        parts = [
            f"{op} {value:g}" if float(f"{value:g}") == value else f"{op} {value!r}"
            for op, value in ((">=", self.min), ("<=", self.max))
            if value is not None
        ]
        return " and ".join(parts)


@dataclass(frozen=True)
class CheckResult:
    threshold: Threshold
    task: str
    kernel: str
    mc_samples: int | None  # None: the rule's S where it matched no row and has no S filter
    state: str
    value: float  # NaN where undefined, missing or not a number
    passed: bool
    why: str = ""  # why ``value`` is NaN though a number is stored


def load_thresholds(path: str | Path) -> list[Threshold]:
    """Read and validate a thresholds file; raises :class:`OrthobenchError` naming file and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise OrthobenchError(f"{path}: cannot read thresholds: {err.strerror or err}.") from None
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise OrthobenchError(
            f"{path}: line {line}: not UTF-8 text (byte 0x{err.object[err.start]:02x}); "
            "save it as UTF-8."
        ) from None
    data = _parse_yaml(text, path)
    if (
        not isinstance(data, dict)
        or type(data.get("version")) is not int  # `true` and 1.0 equal 1
        or data["version"] != 1
        or not isinstance(data.get("thresholds"), list)
        or not data["thresholds"]
    ):
        raise OrthobenchError(
            f"{path}: expected a mapping with `version: 1` and a non-empty `thresholds` list."
        )
    rules = []
    for i, rule in enumerate(data["thresholds"]):
        where = f"{path}: thresholds[{i}]"
        if not isinstance(rule, dict):
            raise OrthobenchError(f"{where}: must be a mapping, but got {rule!r}.")
        unknown = set(rule) - set(_RULE_KEYS)
        if unknown:
            raise OrthobenchError(
                f"{where}: unknown key(s) {sorted(unknown)}; allowed: {', '.join(_RULE_KEYS)}."
            )
        if "estimator" not in rule or "metric" not in rule:
            raise OrthobenchError(f"{where}: needs `estimator` and `metric`.")
        if rule.get("min") is None and rule.get("max") is None:
            raise OrthobenchError(f"{where}: needs `min` or `max`.")
        _check_types(rule, where)
        _check_names(rule, where)
        if (
            rule.get("min") is not None
            and rule.get("max") is not None
            and rule["min"] > rule["max"]
        ):
            raise OrthobenchError(
                f"{where}: `min` {rule['min']:g} is above `max` {rule['max']:g}; no value passes."
            )
        if rule.get("mc_samples") is not None and rule["mc_samples"] < 1:
            raise OrthobenchError(
                f"{where}: `mc_samples` must be >= 1, but got {rule['mc_samples']}."
            )
        try:
            rules.append(Threshold(**rule))
        except TypeError as err:
            raise OrthobenchError(f"{where}: {err}.") from None
    return rules


def _parse_yaml(text: str, path: Path) -> object:
    """``text`` parsed strictly (:func:`~orthobench.config.strict_yaml.load_yaml`: a repeated
    ``min:`` would silently replace the first); any YAML error becomes one line naming the file
    and, where known, the place."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as err:
        where, problem = yaml_error_parts(err)
        at = f" at {where}" if where else ""
        raise OrthobenchError(f"{path}: malformed YAML{at} ({problem}).") from None


def _check_names(rule: dict, where: str) -> None:
    """Raise :class:`OrthobenchError` for a ``metric`` or ``kernel`` that no probe row can have:
    both sets are fixed by the code, not the suite, so a typo is refused before minutes of probing
    rather than reported after them."""
    if rule["metric"] not in _METRICS:
        raise OrthobenchError(
            f"{where}: `metric` {rule['metric']!r} is not a numeric probe column; "
            f"allowed: {', '.join(_METRICS)}."
        )
    if rule.get("kernel") is not None and rule["kernel"] not in _KERNELS:
        raise OrthobenchError(
            f"{where}: `kernel` {rule['kernel']!r} is not a probe kernel; allowed: {', '.join(_KERNELS)}."
        )


def _check_types(rule: dict, where: str) -> None:
    """Raise :class:`OrthobenchError` for a value of the wrong type, before anything is probed:
    a bound that is not a finite number would fail or pass every row only after the probe, and a
    quoted ``"no"`` would make a rule relative to the baseline."""
    for key, value in rule.items():
        if value is None and key in _OPTIONAL:
            continue
        if key in ("min", "max"):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok, kind = ok and math.isfinite(value), "a finite number"
        elif key == "mc_samples":
            ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
        elif key == "relative_to_baseline":
            ok, kind = isinstance(value, bool), "true or false"
        else:
            ok, kind = isinstance(value, str), "a string"
        if not ok:
            hint = float_text_hint(value) if key in ("min", "max") else ""
            raise OrthobenchError(f"{where}: `{key}` must be {kind}, but got {value!r}{hint}.")


def check_rules_match(rules: list[Threshold], units: list[ProbeUnit], path: str | Path) -> None:
    """Refuse a rule that matches none of the rows ``units`` (the suite's probe states) ask for,
    or matches a row that never has the rule's metric (:func:`_unmeasured`), before they are
    probed: after the probe it would only fail, minutes later.

    Raises:
        OrthobenchError: one line naming the rule and what the suite probes, or why the row
            has no value.
    """
    rows = pd.DataFrame(
        [
            (name, s, unit.state.task.label, unit.state.surrogate)
            for unit in units
            for name, s in unit.rows()
        ],
        columns=["estimator", "mc_samples", "task", "kernel"],
    )
    for i, rule in enumerate(rules):
        if _matching(rows, rule).empty:
            probed = "; ".join(
                f"{column}: {', '.join(str(v) for v in sorted(rows[column].unique()))}"
                for column in rows
            )
            raise OrthobenchError(
                f"{path}: thresholds[{i}] ({rule.selection()}) matches no row the suite's probe "
                f"asks for ({probed})."
            )
        for row in _matching(rows, rule).itertuples():
            why = _unmeasured(rule.metric, row.estimator, row.kernel)
            if why:
                raise OrthobenchError(
                    f"{path}: thresholds[{i}] ({rule.selection()}): {why}; the rule would fail."
                )


@functools.cache
def _parsed(estimator: str) -> ThetaEstimator | None:
    """``estimator`` parsed (:func:`~orthobench.config.names.parse_estimator`); None for a name
    that does not parse."""
    try:
        return parse_estimator(estimator)
    except OrthobenchError:
        return None


def _canonical(estimator: str) -> str:
    """The one name of ``estimator`` (``orth@iid`` is ``orth``), as a suite refuses both in one
    probe; a name that does not parse stays as written (it matches only itself)."""
    parsed = _parsed(estimator)
    return estimator if parsed is None else parsed.name


def _unmeasured(metric: str, estimator: str, kernel: str) -> str:
    """Why a row of ``estimator`` on ``kernel`` never has ``metric`` (the probe stores null
    there, :class:`~orthobench.results.ProbeRecord`), or "" where it can."""
    if metric in _GP_DIAGNOSTICS and kernel == "tpe":
        return f"{metric} is not measured on TPE rows (no GP kernel matrix or Laplace fit)"
    parsed = _parsed(estimator)
    untimed = parsed is not None and (
        parsed.plugin or parsed.base in (*FUNCTION_SAMPLE_ESTIMATORS, *TPE_ESTIMATORS)
    )
    if metric == "seconds_per_call" and untimed:
        return (
            f"seconds_per_call is not measured on {estimator} rows (only the acquisition "
            "calls of OrthoBO's theta estimators are timed)"
        )
    return ""


def _matching(frame: pd.DataFrame, rule: Threshold) -> pd.DataFrame:
    """The rows of ``frame`` a rule applies to: its estimator, by its one name (a rule's ``orth``
    selects a suite's ``orth@iid``), and filters."""
    rows = frame[frame["estimator"].map(_canonical) == _canonical(rule.estimator)]
    for column in ("mc_samples", "kernel", "task"):
        if getattr(rule, column) is not None:
            rows = rows[rows[column] == getattr(rule, column)]
    return rows


def _float(value: object) -> float:
    """``value`` as a float; NaN where it is missing or not a number."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _number(row: object, metric: str) -> tuple[float, str]:
    """The value of ``metric`` on ``row`` that a rule compares, and why it is NaN ("" otherwise;
    the rule fails): a ratio that is undefined, an MSE ratio whose state's reference is not
    converged (``row.reference_unconverged``), or the CI bound of one; a metric the row's kind
    never has (:func:`_unmeasured`), or none stored. A bound of a row without its ratio's column
    is compared as stored."""
    number = _float(getattr(row, metric))
    ratio = _RATIO_OF.get(metric)
    if ratio is not None and hasattr(row, ratio):
        # The ratio first: an undefined ratio's bounds are stored as NaN, which says nothing why.
        stored = _float(getattr(row, ratio))
        if ratio.startswith(REFERENCE_RATIOS) and row.reference_unconverged:
            return math.nan, (
                f"{ratio} not evaluable: the state's reference is not converged (squared error > "
                f"{MAX_REFERENCE_ERROR:g} of its mean square)"
            )
        if math.isnan(defined_ratios([stored])[0]):
            bounds = f"[{1 / MAX_RATIO:g}, {MAX_RATIO:g}]"
            return math.nan, f"{ratio} {stored:.4g} is undefined: not in {bounds}"
    if math.isnan(number):
        return number, _unmeasured(metric, row.estimator, row.kernel) or f"{metric} is missing"
    return number, ""


def _slack(a: float, b: float) -> float:
    """:data:`_ULPS` ulps of the larger of ``a`` and ``b``, the rounding ``a - b`` can carry; 0
    where either is not finite (an infinite slack would pass anything)."""
    return _ULPS * math.ulp(max(abs(a), abs(b))) if math.isfinite(a - b) else 0.0


def _holds(value: float, rule: Threshold, slack: float = 0.0) -> bool:
    """Whether ``value`` is within the rule's bounds, either widened by ``slack``."""
    return (rule.min is None or value >= rule.min - slack) and (
        rule.max is None or value <= rule.max + slack
    )


def evaluate(frame: pd.DataFrame, thresholds: list[Threshold]) -> list[CheckResult]:
    """Apply every rule to the matching probe rows of ``frame`` (summary rows of ``run_probe``).

    A rule's metric is a column of ``frame``: :func:`load_thresholds` refuses any other, before
    the probe that makes the frame runs.
    """
    results = []
    frame = frame.assign(reference_unconverged=unconverged_reference(frame))
    if "q" in frame:  # batch probes: a row's baseline is at its q (rows stored before: q = 1)
        frame = frame.assign(q=frame["q"].fillna(1).astype(int))
    for rule in thresholds:
        rows = _matching(frame, rule)
        if rows.empty:  # the suite asks for such rows (check_rules_match): their states failed
            results.append(
                CheckResult(
                    rule,
                    rule.task or "*",
                    rule.kernel or "*",
                    rule.mc_samples,
                    "no matching probe rows",
                    math.nan,
                    False,
                )
            )
            continue
        for row in rows.itertuples():
            value, why = _number(row, rule.metric)
            slack = 0.0
            if rule.relative_to_baseline:
                base = frame[
                    (frame["estimator"] == row.baseline)
                    & (frame["task"] == row.task)
                    & (frame["kernel"] == row.kernel)
                    & (frame["seed"] == row.seed)
                    & (frame["state_iteration"] == row.state_iteration)
                    & (frame["mc_samples"] == row.mc_samples)
                    & ((frame["q"] == row.q) if "q" in frame else True)
                ]
                # No baseline row (or no number in it): NaN, the rule fails on this row.
                if base.empty:
                    base_value, base_why = math.nan, f"no {row.baseline} row"
                else:
                    base_value, base_why = _number(next(base.itertuples()), rule.metric)
                    base_why = base_why and f"{row.baseline}'s {base_why}"
                slack = _slack(value, base_value)
                value -= base_value
                why = "; ".join(w for w in (why, base_why) if w)
            state = f"seed {row.seed}, it {row.state_iteration}"
            if getattr(row, "q", 1) != 1:
                state += f", q {row.q}"
            passed = _holds(value, rule, slack)
            results.append(
                CheckResult(
                    rule, row.task, row.kernel, int(row.mc_samples), state, value, passed, why
                )
            )
    return results


def _shown(result: CheckResult) -> str:
    """The result's value to 4 significant digits, or as many more as its verdict needs: 4 digits
    printed the failing 2.543734 against ``min: 2.5438`` as "2.544 >= 2.5438"; it is "2.5437"
    now. A difference that passes within its slack (:data:`_ULPS`) reads as the bound it meets."""
    if result.why:
        return "undefined"
    for digits in range(4, 18):
        text = f"{result.value:.{digits}g}"
        if _holds(float(text), result.threshold) == result.passed:
            return text
    return repr(result.value)


def format_results(results: list[CheckResult]) -> str:
    """A table of the check, one line per (rule, probe row), each column as wide as its longest
    entry (a task named ``tension-compression-string`` shifted every column after it); why a
    value is undefined and a failing rule's description follow its bound."""
    rows = [
        (
            "ok" if r.passed else "FAIL",
            r.threshold.estimator,
            r.threshold.metric + (" - base" if r.threshold.relative_to_baseline else ""),
            r.task,
            r.kernel,
            "*" if r.mc_samples is None else str(r.mc_samples),
            r.state,
            _shown(r),
        )
        for r in results
    ]
    header = ("", "estimator", "metric", "task", "kernel", "S", "state", "value")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    right = {5, 7}  # S and value

    def line(cells: tuple[str, ...]) -> str:
        return " ".join(
            f"{c:>{w}}" if i in right else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    lines = [f"{line(header)}  bound"]
    for r, cells in zip(results, rows, strict=True):
        notes = [r.why, r.threshold.description if not r.passed else ""]
        why = "".join(f"  ({note})" for note in notes if note)
        lines.append(f"{line(cells)}  {r.threshold.bound()}{why}")
    return "\n".join(lines)
