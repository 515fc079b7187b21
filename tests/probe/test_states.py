"""Probe states: the history comes from the spec's state optimizer, run with the probe kernel."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from orthobench.loop import run_cell
from orthobench.probe.states import ProbeState, build_history, probe_points, state_cell
from orthobench.suite import ComponentSpec, ProbeSpec

HARTMANN = ComponentSpec(name="hartmann6", label="hartmann6")
SPEC = ProbeSpec(tasks=(HARTMANN,), n_init=6, state_iterations=(1,), n_probes=5)
QLOGEI = ComponentSpec(
    name="qlogei",
    params={"function_samples": 16, "raw_samples": 16, "num_restarts": 2},
    label="qlogei",
)


def state(surrogate: str = "rbf-iso") -> ProbeState:
    return ProbeState(
        suite="t", task=HARTMANN, surrogate=surrogate, seed=0, state_iteration=1, n_init=6
    )


def test_the_state_cell_runs_the_spec_optimizer_with_the_probe_kernel():
    cell = state_cell(state(), dataclasses.replace(SPEC, state_optimizer=QLOGEI), torch.float64)
    assert cell.optimizer.name == "qlogei"
    assert dict(cell.optimizer.params) == {**QLOGEI.params, "kernel": "rbf-iso"}
    assert (cell.n_init, cell.budget, cell.seed) == (6, 1, 0)
    default = state_cell(state("tpe"), SPEC, torch.float64).optimizer
    assert default.name == "mc-ei" and default.params["kernel"] == "matern52-ard"
    # The label (hence every seed of the run) does not depend on the optimizer's name.
    assert cell.optimizer.label == "probe-rbf-iso" and default.label == "probe-matern52-ard"


def test_the_history_is_the_state_cell_run_in_the_unit_cube():
    spec = dataclasses.replace(SPEC, state_optimizer=QLOGEI)
    x, y, regret, _ = build_history(state(), spec, torch.device("cpu"), torch.float64)
    records = run_cell(state_cell(state(), spec, torch.float64))
    assert x.shape == (7, 6) and torch.all((x >= 0) & (x <= 1))
    np.testing.assert_array_equal(y.numpy(), [r.y for r in records])
    assert regret == records[-1].regret
    # The shared initial design is the same whatever the optimizer; the BO step is its own.
    x_default, *_ = build_history(state(), SPEC, torch.device("cpu"), torch.float64)
    torch.testing.assert_close(x[:6], x_default[:6], rtol=0, atol=0)
    assert not torch.equal(x[6], x_default[6])


def test_probe_points_are_shared_by_surrogates_and_differ_by_seed():
    cpu = torch.device("cpu")
    a = probe_points(state(), SPEC, 6, torch.float64, cpu)
    b = probe_points(state("tpe"), SPEC, 6, torch.float64, cpu)
    c = probe_points(dataclasses.replace(state(), seed=1), SPEC, 6, torch.float64, cpu)
    assert a.shape == (5, 6) and torch.equal(a, b) and not torch.equal(a, c)
