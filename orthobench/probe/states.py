"""Probe states: the fixed BO history and probe points that every estimator is compared on.

A state is (task, surrogate, seed, state iteration). Its history is what ``orthobench run`` would
produce for that seed: the shared Sobol initial design of ``n_init`` points, then
``state_iteration`` steps of the probe section's ``state_optimizer``
(:data:`orthobench.suite.DEFAULT_STATE_OPTIMIZER`: ``mc-ei``), run with the state's GP kernel as
its ``kernel`` parameter (``matern52-ard`` for a TPE state). Its probe
points are ``n_probes`` scrambled-Sobol points seeded by the seed and the task. A state probed
with a probe section's settings is a unit of work, :class:`ProbeUnit`.

A state also has a batch size ``q`` (the probe section's ``q``, default 1). At ``q > 1`` its probe
points are ``n_probes`` batches of ``q`` points (scrambled Sobol' in ``q d`` dimensions, seeded
with ``q`` too) and its values are batch EI (:mod:`orthobench.probe.gp_probe`); a ``q = 1`` state
has the id, configuration and probe points it had before batch probes existed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch.quasirandom import SobolEngine

from orthobench.config.names import FUNCTION_SAMPLE_ESTIMATORS, TPE_ESTIMATORS, parse_estimator
from orthobench.exceptions import ConfigError
from orthobench.loop import make_task, run_cell
from orthobench.seeding import derive_seed
from orthobench.suite import ID_SEPARATOR, Cell, ComponentSpec, ProbeSpec
from orthobench.theta_estimators import parse_theta_estimator, require_equal_weight_rule
from orthobench.work import PROBE_STATE, canonical, hash_config

#: The probe settings that every row of a state depends on: its probe points, rebuilds, ranking
#: metric, reference and Laplace posterior (the others, estimators and budgets, key its rows).
STATE_SETTINGS = ("n_probes", "rebuilds", "top_k", "reference_samples", "laplace")

#: The GP kernel that builds the history of a TPE state (TPE has no kernel of its own).
TPE_STATE_KERNEL = "matern52-ard"


@dataclass(frozen=True)
class ProbeState:
    """Identity of one probe state (one output file)."""

    suite: str
    task: ComponentSpec
    surrogate: str  # GP kernel name, or "tpe"
    seed: int
    state_iteration: int
    n_init: int
    q: int = 1  # batch size of the probed acquisition

    @property
    def id(self) -> str:
        """``task__kernel__seed0__it0``, and ``task__kernel__q4__seed0__it0`` at ``q != 1``."""
        batch = () if self.q == 1 else (f"q{self.q}",)
        parts = (
            self.task.label,
            self.surrogate,
            *batch,
            f"seed{self.seed}",
            f"it{self.state_iteration}",
        )
        return ID_SEPARATOR.join(parts)

    @property
    def kernel(self) -> str:
        """The GP kernel that builds the history: the surrogate's, or :data:`TPE_STATE_KERNEL`."""
        return TPE_STATE_KERNEL if self.surrogate == "tpe" else self.surrogate


def state_estimators(state: ProbeState, spec: ProbeSpec) -> list[str]:
    """The estimators a state's rows are for: naive MC first (``mc``, ``mc-tpe`` for TPE), the
    baseline of every ratio, then the section's others of the state's surrogate (plugin
    estimators, :class:`~orthobench.probe.plugins.ProbeAcquisition`, are GP estimators)."""
    if state.surrogate == "tpe":
        return ["mc-tpe", *[e for e in spec.estimators if e in TPE_ESTIMATORS and e != "mc-tpe"]]
    return [
        "mc",
        *[
            e
            for e in spec.estimators
            if parse_estimator(e).base not in TPE_ESTIMATORS and e not in ("mc", "mc@iid")
        ],
    ]


@dataclass(frozen=True)
class ProbeUnit:
    """A probe state as a unit of work (:class:`~orthobench.work.WorkUnit`): the state and the
    probe section it is probed with.

    Its resolved configuration is what every row of the state depends on: the state's history
    (its :func:`state_cell`, resolved: the task and the state optimizer with their defaults), the
    surrogate, :data:`STATE_SETTINGS` and, where it is not 1, the state's ``q`` (so a ``q = 1``
    state keeps the configuration hash it had before batch probes). A row depends on that, its
    estimator and its budget ``S`` only (draws are keyed by the state, ``S`` and the rebuild),
    so the section's
    ``estimators`` and ``mc_samples`` are not in it: a stored state keeps its rows when
    estimators or budgets are added, and only the new rows (:meth:`rows`) are computed.
    """

    kind: ClassVar[str] = PROBE_STATE

    state: ProbeState
    spec: ProbeSpec

    @property
    def id(self) -> str:
        return self.state.id

    @property
    def suite(self) -> str:
        return self.state.suite

    def resolved_config(self) -> dict[str, Any]:
        history = state_cell(self.state, self.spec, torch.float64).resolved_config()
        settings = {key: getattr(self.spec, key) for key in STATE_SETTINGS}
        if self.state.q != 1:
            settings["q"] = self.state.q
        config = {"state": history, "surrogate": self.state.surrogate, "probe": settings}
        return json.loads(canonical(config))

    @property
    def config_hash(self) -> str:
        return hash_config(self.resolved_config())

    def rows(self) -> list[tuple[str, int]]:
        """The ``(estimator, S)`` rows the section asks for, in the order they are computed."""
        names = state_estimators(self.state, self.spec)
        return [(name, s) for s in self.spec.mc_samples for name in names]


def check_constrained_states(
    states: Iterable[ProbeState], spec: ProbeSpec, n_constraints: Mapping[str, int]
) -> None:
    """Refuse a probe of a constrained task (``n_constraints`` by task label) that asks for what
    the constrained probe does not measure: a TPE, qLogEI or plugin estimator (a plugin gets
    no constraint models), a point set with unequal weights (its rule's weights hold in one
    GP's space, not in the joint space of paired draws:
    :func:`~orthobench.theta_estimators.require_equal_weight_rule`), or ``q > 1``.

    Raises:
        ConfigError: at ``probe.estimators`` or ``probe.q``, naming the task.
    """
    refused = [
        name
        for name in spec.estimators
        if name in FUNCTION_SAMPLE_ESTIMATORS
        or parse_estimator(name).base in TPE_ESTIMATORS
        or parse_estimator(name).plugin
    ]
    for state in states:
        if not n_constraints.get(state.task.label):
            continue
        where = f"task {state.task.label!r} has constraints"
        if refused:
            raise ConfigError(
                "probe.estimators",
                f"{where}: the constrained probe measures OrthoBO's theta estimators of "
                f"constrained EI only, not {', '.join(refused)}; probe those on "
                "unconstrained tasks in another suite.",
            )
        for name in spec.estimators:
            try:
                require_equal_weight_rule(parse_theta_estimator(name))
            except ValueError as err:
                raise ConfigError("probe.estimators", f"{where}: {err}") from None
        if state.q != 1:
            raise ConfigError(
                "probe.q", f"{where}: constrained EI is probed at q = 1 only, but got q={state.q}."
            )


def state_cell(state: ProbeState, spec: ProbeSpec, dtype: torch.dtype) -> Cell:
    """The cell whose run is the state's history: ``n_init`` shared initial points, then
    ``state_iteration`` steps of the state optimizer with the state's kernel.

    The optimizer label is ``probe-<kernel>`` whatever the optimizer, so its seeds (derived from
    the label, :mod:`orthobench.loop`) do not depend on how the optimizer is named.
    """
    optimizer = spec.state_optimizer
    return Cell(
        suite=state.suite,
        task=state.task,
        optimizer=ComponentSpec(
            name=optimizer.name,
            params={**optimizer.params, "kernel": state.kernel},
            label=f"probe-{state.kernel}",
        ),
        seed=state.seed,
        n_init=state.n_init,
        budget=state.state_iteration,
        dtype=str(dtype).removeprefix("torch."),
    )


class History(NamedTuple):
    """A state's valid history (:func:`build_history`)."""

    x: torch.Tensor  # t x d, in the unit cube
    y: torch.Tensor  # t observed values (minimized)
    regret: float | None  # best-so-far regret of the last evaluation; None: optimum unknown
    constraints: torch.Tensor | None  # t x m constraint values; None on an unconstrained task


def build_history(
    state: ProbeState, spec: ProbeSpec, device: torch.device, dtype: torch.dtype
) -> History:
    """The state's valid (``ok``) evaluations, as its state optimizer made them."""
    cell = state_cell(state, spec, dtype)
    records = [r for r in run_cell(cell, device) if r.status == "ok"]
    task = make_task(cell)
    as_tensor = functools.partial(torch.as_tensor, dtype=dtype, device=device)
    x = as_tensor(task.space.to_unit(np.array([r.x for r in records])))
    y = as_tensor([r.y for r in records])
    constraints = as_tensor([r.constraints for r in records]) if task.n_constraints else None
    return History(x, y, records[-1].regret, constraints)


def probe_points(
    state: ProbeState, spec: ProbeSpec, dim: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Scrambled-Sobol probe points in the unit cube, the same for every surrogate and state
    iteration of a seed, task and ``q``: ``n_probes x d`` at ``q = 1``; at ``q > 1``
    ``n_probes x q x d``, the first ``n_probes`` points of a Sobol' sequence in ``q d``
    dimensions (a batch is one point of the ``q d``-dimensional space the batch acquisition is
    maximized over), seeded with ``q`` as well."""
    q = state.q
    keys = (state.seed, "probe-points", state.task.label) + (() if q == 1 else (f"q{q}",))
    engine = SobolEngine(dim * q, scramble=True, seed=derive_seed(*keys) % (2**31))
    points = engine.draw(spec.n_probes, dtype=dtype).to(device)
    return points if q == 1 else points.reshape(spec.n_probes, q, dim)
