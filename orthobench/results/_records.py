"""Record types of the results store and the Arrow schemas their fields generate.

:class:`RunRecord` is one evaluation of a cell, :class:`ProbeRecord` one probe summary of an
(estimator, S) pair on a probe state, raw values included. Every writer and reader uses the schemas
:func:`arrow_schema` makes of them, so a column cannot drift between the loop, the probe, the
report and the check gate.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

METADATA_KEY = b"orthobench"
#: Version of the record schemas below; stored in every file's metadata and journal entry.
#: Files written before schemas were versioned have none and read as a mismatch. Version 2 added
#: the per-state numerics of :class:`ProbeRecord` (``cholesky_jitter``, ``laplace_floored``,
#: ``laplace_min_eigenvalue``); version 3 its cost columns (``seconds_per_call``, ``threads``).
#: Columns added to a version since (:data:`ADDED_RUN_COLUMNS`) keep the version: files and
#: journals without them read with their values filled in (:func:`fill_added_run_fields`), so
#: stored cells stay reusable.
SCHEMA_VERSION = 3

#: The :class:`RunRecord` columns added within :data:`SCHEMA_VERSION` 3: with batch BO steps
#: (``q``, ``batch``, ``wall_seconds``), then with constrained tasks (``constraints``,
#: ``feasible``).
ADDED_RUN_COLUMNS = ("q", "batch", "wall_seconds", "constraints", "feasible")


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One evaluation of a cell: a row of ``DIR/runs/<cell id>.parquet``.

    Args:
        iteration: The evaluation's index in the cell: ``n_init + (batch - 1) * q + j`` for the
            ``j``-th point of BO step ``batch``.
        phase: ``init`` (shared initial design) or ``bo``.
        q: The cell's batch size: points proposed per BO step.
        batch: 0 in the initial design, ``k`` for the point proposed by the ``k``-th BO step.
        x: ``d`` values in native units (ints whole, log parameters unlogged).
        y: Observed value, noise included (NaN where the evaluation gave none: ``status`` not ``ok``).
        y_true: Noise-free value where the task reports it.
        best_y: Lowest ``y`` of the ``ok`` and feasible evaluations so far (None before the
            first).
        regret: Best-so-far simple regret from ``y_true`` (else ``y``) of the same evaluations,
            minus the known (feasible) optimum; None when the optimum is unknown or before the
            first such evaluation.
        wall_seconds: Seconds of the cell's running time (fits, acquisitions, evaluations) at
            which the evaluation finished; a resumed cell continues from its last replayed
            evaluation, so the time it was not running does not count. NaN in results stored
            before it was recorded.
        status: ``ok``, ``invalid`` (a non-finite ``y`` or constraint value, or one beyond the
            range of the suite's ``dtype``) or ``timeout`` (stopped at the suite's
            ``evaluation_timeout_s``); only ``ok`` evaluations are told to the optimizer.
        fallback: What the optimizer fell back to in this step, if anything.
        info: JSON object: the optimizer's step diagnostics and the task's extras.
        constraints: The task's ``n_constraints`` constraint values ``c_i(x)`` (feasible where
            all are ``<= 0``); NaN each where the evaluation gave none (a timeout); empty for an
            unconstrained task and in results stored before they were recorded.
        feasible: Whether every constraint value is finite and ``<= 0``: True without
            constraints (and in results stored before they were recorded, all unconstrained).
    """

    suite: str
    cell_id: str
    task: str
    optimizer: str
    seed: int
    iteration: int
    phase: str
    q: int
    batch: int
    x: list[float]
    y: float
    y_true: float | None
    best_y: float | None
    regret: float | None
    is_outlier: bool
    fit_seconds: float
    acq_seconds: float
    eval_seconds: float
    wall_seconds: float
    status: str
    fallback: str | None
    info: str
    constraints: list[float] = dataclasses.field(default_factory=list)
    feasible: bool = True


def fill_added_run_fields(fields: dict[str, Any], n_init: int) -> dict[str, Any]:
    """``fields`` of a :class:`RunRecord` stored before :data:`ADDED_RUN_COLUMNS` existed (one
    point per BO step), with them filled in: ``q`` 1, ``batch`` from ``phase`` and ``iteration``
    (``iteration - n_init + 1`` in the BO phase; ``n_init``: the cell's initial evaluations),
    ``wall_seconds`` NaN, ``constraints`` empty and ``feasible`` True (the tasks of such results
    were unconstrained). Fields already there are kept."""
    batch = 0 if fields["phase"] == "init" else fields["iteration"] - n_init + 1
    return {
        "q": 1,
        "batch": batch,
        "wall_seconds": math.nan,
        "constraints": [],
        "feasible": True,
        **fields,
    }


@dataclass(frozen=True, kw_only=True)
class ProbeRecord:
    """One estimator at one budget ``S`` on one probe state: a row of ``DIR/probe/<state>.parquet``.

    Metrics are defined in :mod:`orthobench.probe.metrics`; ratios are baseline / estimator with
    a 95% bootstrap CI (``*_low``, ``*_high``). Raw values are flattened row-major from
    ``rebuilds x n_probes``.

    Args:
        kernel: GP kernel of the state, or ``tpe``.
        mc_samples: The budget ``S`` of EI evaluations (theta draws, function samples or fits).
        n_evaluations: EI evaluations behind one estimate: ``S``, or a point set's count (the
            most within ``S``, or one whole rule where a rule needs more than ``S``).
        regret: Best-so-far regret of the state's history (None when the optimum is unknown).
        baseline: The like-for-like baseline estimator of the ratios (``mc`` or ``mc-tpe``).
        baseline_values_ei: Naive iid theta-MC values at ``n_evaluations`` draws when that count
            differs from ``S``; empty when the ``baseline`` row's values are the baseline.
        values_ei: Rebuild values on the EI scale (the GP's standardized outcome scale).
        values_log: Rebuild values of the outer-log acquisition.
        reference: ``n_probes`` high-precision reference values of the estimator's target.
        cholesky_jitter: Theta samples of the state (reference and rebuild draws, all
            estimators and budgets) whose kernel matrix needed jitter for its Cholesky factor;
            None for TPE states.
        laplace_floored: Whether the Laplace ``q(theta)`` of the state has a Hessian eigenvalue
            raised to the floor (docs/design.md, "Indefinite Hessians and the eigenvalue floor");
            None for TPE states.
        laplace_min_eigenvalue: The smallest eigenvalue of the raw (unfloored) Hessian; None for
            TPE states.
        info: JSON object: fit and Laplace diagnostics of the state.
        seconds_per_call: Wall seconds of one forward + backward pass of OrthoBO's acquisition
            with this estimator and budget on 512 candidates, median of a few calls
            (:func:`orthobench.probe.gp_probe.seconds_per_call`); None for qLogEI and TPE rows.
        threads: Torch's intra-op thread count the state ran with (its values and
            ``seconds_per_call`` depend on it).
        q: The probe's batch size: each probe point is a batch of ``q`` points (qEI values at
            ``q > 1``); files stored before it was recorded read NaN (``q = 1``).
        reference_rse: ``n_probes`` relative standard errors of ``reference``, estimated from
            its draws (:func:`orthobench.probe.gp_probe.reference_rse`; 0 for an analytic
            reference, NaN at a probe whose reference underflows to 0); None where no estimate
            exists (TPE, plugin and ``q > 1`` qLogEI references) and in files stored before it
            was recorded, whose rows a state keeps beside the ones it adds.
    """

    suite: str
    task: str
    kernel: str
    estimator: str
    mc_samples: int
    n_evaluations: int
    state_iteration: int
    seed: int
    n_init: int
    rebuilds: int
    n_probes: int
    probe_variance: float
    probe_variance_log: float
    bias_sq: float
    mse: float
    var_ratio: float
    var_ratio_low: float
    var_ratio_high: float
    mse_ratio: float
    mse_ratio_low: float
    mse_ratio_high: float
    median_point_var_ratio: float
    median_point_mse_ratio: float
    top1_agreement: float
    flip_rate: float
    regret: float | None
    baseline: str
    baseline_values_ei: list[float]
    values_ei: list[float]
    values_log: list[float]
    reference: list[float]
    cholesky_jitter: int | None
    laplace_floored: bool | None
    laplace_min_eigenvalue: float | None
    info: str
    seconds_per_call: float | None = None
    threads: int | None = None
    q: int = 1
    reference_rse: list[float] | None = None


_ARROW_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def _arrow_type(annotation: Any) -> pa.DataType:
    if typing.get_origin(annotation) is list:
        return pa.list_(_arrow_type(typing.get_args(annotation)[0]))
    if annotation in _ARROW_TYPES:
        return _ARROW_TYPES[annotation]
    raise TypeError(f"No Arrow type for the field annotation {annotation!r}.")


def arrow_schema(record_type: type) -> pa.Schema:
    """The Arrow schema of a record dataclass: one column per field, in field order.

    ``bool``, ``int``, ``float``, ``str`` map to ``bool``, ``int64``, ``float64``, ``string``;
    ``list[T]`` to a list of ``T``; ``T | None`` to a nullable ``T`` (other fields are not null).
    """
    hints = typing.get_type_hints(record_type)
    fields = []
    for f in dataclasses.fields(record_type):
        annotation = hints[f.name]
        args = typing.get_args(annotation)
        nullable = typing.get_origin(annotation) in (typing.Union, types.UnionType) and (
            type(None) in args
        )
        if nullable:
            (annotation,) = [a for a in args if a is not type(None)]
        fields.append(pa.field(f.name, _arrow_type(annotation), nullable=nullable))
    return pa.schema(fields)


RUN_SCHEMA = arrow_schema(RunRecord)
PROBE_SCHEMA = arrow_schema(ProbeRecord)
_SCHEMAS = {RunRecord: RUN_SCHEMA, ProbeRecord: PROBE_SCHEMA}
