"""BO states as ``orthobench run`` and ``orthobench probe`` make them, for the benchmark scripts.

A run is the one cell of a one-cell suite, read as ``orthobench run`` reads a suite file
(:func:`orthobench.suite.parse_suite`, which checks names and parameters against the registry)
and run by the package's loop (:func:`orthobench.loop.run_cell`): the task's shared initial
design for the seed, then ``budget`` steps of the optimizer. The optimizer's label is its name,
so runs that differ only in its parameters share its seed, as in a suite that names it unlabelled.
A history is the probe's state (:func:`orthobench.probe.states.build_history`).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from orthobench.loop import make_optimizer, make_task, run_cell
from orthobench.optimizers.base import Optimizer
from orthobench.probe.states import ProbeState, build_history
from orthobench.results import EvaluationJournal, RunRecord
from orthobench.suite import Cell, ComponentSpec, ProbeSpec, parse_suite

#: The suite name of every benchmark cell (no seed depends on it).
SUITE = "benchmarks"
#: The GP kernel of a history's state optimizer.
KERNEL = "matern52-ard"


def seed_range(text: str) -> range:
    """Seeds ``"A-B"`` (inclusive) or ``"A"``, as the scripts' ``--seeds`` take them."""
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


def cell(
    task: str, seed: int, n_init: int, budget: int, optimizer: str, *, q: int = 1, **params: Any
) -> Cell:
    """The cell of ``task``, ``optimizer`` (with ``params``) and ``seed``: ``n_init`` initial
    points, then ``budget`` BO steps of ``q`` points."""
    suite = parse_suite(
        {
            "name": SUITE,
            "seeds": [seed],
            "n_init": n_init,
            "budget": budget,
            "q": q,
            "tasks": [task],
            "optimizers": [{"name": optimizer, "params": params}],
        }
    )
    (only,) = suite.cells()
    return only


@dataclasses.dataclass(frozen=True)
class Run:
    """A cell's evaluations and the optimizer's state after each (None in the initial design)."""

    cell: Cell
    records: list[RunRecord]
    states: list[dict[str, Any] | None]

    def optimizer(
        self,
        steps: int,
        params: Mapping[str, Any] | None = None,
        device: torch.device | str = "cpu",
    ) -> Optimizer:
        """The optimizer after ``steps`` BO steps, rebuilt as the loop resumes a cell: built as
        the loop builds it, told the initial design and then the steps' evaluations, given the
        state saved after the last step. ``params`` replace the cell's (same name and label, so
        the same seed): another procedure on the same state.
        """
        cell = self.cell
        if params is not None:
            cell = dataclasses.replace(
                cell, optimizer=dataclasses.replace(cell.optimizer, params=dict(params))
            )
        space = make_task(cell).space
        optimizer = make_optimizer(cell, space.dim, torch.device(device))
        end = cell.n_init + steps
        for told in (self.records[: cell.n_init], self.records[cell.n_init : end]):
            ok = [r for r in told if r.status == "ok"]
            if ok:
                optimizer.tell(
                    space.to_unit(np.array([r.x for r in ok])), np.array([r.y for r in ok])
                )
        if steps:
            optimizer.load_state_dict(self.states[end - 1])
        return optimizer


def run(cell: Cell, device: torch.device | str = "cpu") -> Run:
    """``cell`` run by the package's loop; the optimizer's states come from the loop's journal,
    written to a temporary file (the loop returns only the records)."""
    with tempfile.TemporaryDirectory() as directory:
        # A fresh file holds one configuration: any hash names it.
        journal = EvaluationJournal(Path(directory) / "cell.jsonl", SUITE)
        records = run_cell(cell, device, journal=journal)
        states = [state for _, state in journal.read()]
    return Run(cell, records, states)


def history(task: str, seed: int, n_init: int, steps: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe's BO state of ``task`` and ``seed``: the shared initial design of ``n_init``
    points, then ``steps`` steps of the probe's state optimizer with the :data:`KERNEL`.

    Returns ``x`` (``t x d``, unit cube) and ``y`` (``t``, minimized), float64 on the CPU.
    """
    spec = ProbeSpec(
        tasks=(ComponentSpec(name=task, label=task),),
        kernels=(KERNEL,),
        n_init=n_init,
        seeds=(seed,),
        state_iterations=(steps,),
    )
    state = ProbeState(
        suite=SUITE,
        task=spec.tasks[0],
        surrogate=KERNEL,
        seed=seed,
        state_iteration=steps,
        n_init=n_init,
    )
    x, y, *_ = build_history(state, spec, torch.device("cpu"), torch.float64)
    return x, y
