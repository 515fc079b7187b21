"""The warm-up of a CUDA process: one untimed proposal, once per process, device and optimizer,
that leaves the cell's results as they were."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from orthobench import warmup
from orthobench.loop import run_cell
from orthobench.suite import Cell, ComponentSpec


def _cell(task: str = "hartmann6", optimizer: str = "orthobo", q: int = 1, **params) -> Cell:
    return Cell(
        suite="t",
        task=ComponentSpec(name=task, label=task),
        optimizer=ComponentSpec(name=optimizer, params=params, label=optimizer),
        seed=3,
        n_init=5,
        budget=1,
        q=q,
    )


def _rows(records):
    return [(r.x, r.y, r.batch) for r in records]


def test_nothing_is_done_on_a_cpu(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the CPU is not warmed up")

    monkeypatch.setattr(warmup, "propose_once", fail)
    assert warmup.warm_up(_cell(), torch.device("cpu")) == 0.0


def test_a_failing_warm_up_proposal_is_left_to_the_cell(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("no history like this")

    monkeypatch.setattr(warmup, "propose_once", fail)
    monkeypatch.setattr(warmup, "_WARM", set())
    assert warmup.warm_up(_cell(), torch.device("cuda")) == 0.0
    assert warmup._WARM == set()  # tried again with the next cell


@pytest.mark.parametrize(
    ("cell"),
    [
        pytest.param(_cell(theta_samples=16), id="orthobo"),
        # 1 s on 2 cores: with the slow tests (the default run has q = 1 and the constrained cell)
        pytest.param(_cell(theta_samples=16, q=2), id="orthobo-q2", marks=pytest.mark.slow),
        pytest.param(_cell(task="gramacy", optimizer="mc-ei", theta_samples=16), id="constrained"),
    ],
)
def test_the_proposal_leaves_the_cell_unchanged(cell):
    alone = run_cell(cell)
    warmup.propose_once(cell, torch.device("cpu"))
    assert _rows(run_cell(cell)) == _rows(alone)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_process_is_warmed_up_once_per_optimizer(monkeypatch):
    monkeypatch.setattr(warmup, "_WARM", set())
    cell, cuda = _cell(theta_samples=16), torch.device("cuda")
    assert warmup.warm_up(cell, cuda) > 0.0
    assert warmup.warm_up(dataclasses.replace(cell, seed=4), cuda) == 0.0
    assert warmup.warm_up(_cell(optimizer="qlogei"), cuda) > 0.0
