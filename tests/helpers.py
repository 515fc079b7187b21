"""Small shared test utilities."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch.quasirandom import SobolEngine

from orthobench.optimizers.base import Optimizer


def drive(
    optimizer: Optimizer,
    objective: Callable[[np.ndarray], float],
    *,
    n_init: int,
    steps: int,
    seed: int = 0,
) -> np.ndarray:
    """Run ``optimizer`` by ask/tell on a unit-cube ``objective``; returns all observed y values."""
    x0 = SobolEngine(optimizer.dim, scramble=True, seed=seed).draw(n_init).double().numpy()
    y0 = np.array([objective(x) for x in x0])
    optimizer.tell(x0, y0)
    ys = list(y0)
    for _ in range(steps):
        suggestion = optimizer.ask(1)
        assert suggestion.x.shape == (1, optimizer.dim)
        assert np.all((suggestion.x >= 0) & (suggestion.x <= 1))
        y = np.array([objective(x) for x in suggestion.x])
        optimizer.tell(suggestion.x, y)
        ys.extend(y)
    return np.asarray(ys)


def record_infos(opt: Optimizer) -> list[dict[str, Any]]:
    """Make ``opt.ask`` append each suggestion's info to the returned list."""
    infos: list[dict[str, Any]] = []
    ask = opt.ask

    def _ask(n: int = 1):
        suggestion = ask(n)
        infos.append(suggestion.info)
        return suggestion

    opt.ask = _ask  # type: ignore[method-assign]
    return infos


BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
#: One unit in the 4th significant digit of the committed figure CSVs: a rounding boundary, not
#: a tolerance on the numerics (a change of seeding moves their rows by far more).
CSV_RTOL = 1e-3


def load_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py``, a script, imported from its file with its folder importable, as
    ``python benchmarks/<name>.py`` has it: its shared modules (``_timing``, ``_states``) are
    found whichever test imported them first, or none did."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def assert_rows_equal(new: pd.DataFrame, committed: pd.DataFrame, key: list[str]) -> None:
    """The rows of ``new`` equal the committed rows of the same ``key``, numbers to
    :data:`CSV_RTOL`, every column in the same order."""
    assert not new.empty
    new = new.set_index(key)
    committed = committed.set_index(key).loc[new.index]
    assert list(new.columns) == list(committed.columns)
    for column in new.columns:
        if pd.api.types.is_numeric_dtype(new[column]):
            pd.testing.assert_series_equal(
                new[column], committed[column], check_dtype=False, rtol=CSV_RTOL, obj=column
            )
        else:
            assert new[column].tolist() == committed[column].tolist(), column


def value_and_gradient(
    acqf: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor, where: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``acqf``'s values at ``X`` moved to ``where`` and their summed gradient in ``X``, both back
    on the CPU; asserts the values were computed on ``where``."""
    leaf = X.to(where).requires_grad_(True)
    value = acqf(leaf)
    assert value.device.type == where.type
    (grad,) = torch.autograd.grad(value.sum(), leaf)
    return value.detach().cpu(), grad.cpu()


def assert_device_matches_cpu(
    on_cpu: tuple[torch.Tensor, torch.Tensor], on_device: tuple[torch.Tensor, torch.Tensor]
) -> None:
    """Values and gradients (:func:`value_and_gradient`) of the same computation on another
    device agree with the CPU's to rounding."""
    torch.testing.assert_close(on_device[0], on_cpu[0], rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(on_device[1], on_cpu[1], rtol=1e-6, atol=1e-8)


class KeptResults:
    """An executor :class:`~orthobench.executors.Session` that keeps each job's result by its
    unit's id and ignores progress."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}
        self.progress = SimpleNamespace(advance=lambda n: None)

    def finish(self, job: Any, result: Any) -> None:
        self.results[job.unit.id] = result


def flip_eigenvector_signs(monkeypatch: Any) -> None:
    """Make ``torch.linalg.eigh`` return every other eigenvector negated: another solver's
    choice of signs (LAPACK and cuSOLVER differ), for tests that results do not follow it."""
    eigh = torch.linalg.eigh

    def other_signs(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        evals, evecs = eigh(matrix)
        flip = torch.tensor([(-1.0) ** i for i in range(evecs.shape[-1])], dtype=evecs.dtype)
        return evals, evecs * flip

    monkeypatch.setattr(torch.linalg, "eigh", other_signs)


def process_running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not); Linux
    (``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def forget_module(name: str, monkeypatch: Any) -> None:
    """Take ``name`` out of ``sys.modules`` for this test, and after it whatever the test
    imported under that name: a module of that name another test imported from its own folder
    is not found, and a suite refuses one imported from elsewhere than beside it.

    (``monkeypatch.delitem`` of a missing key records nothing, so the test's own import would
    outlive it; ``setitem`` records the entry as it was, which the undo puts back.)
    """
    monkeypatch.setitem(sys.modules, name, ModuleType(name))
    del sys.modules[name]


def install_plugin(root: Path, module: str, source: str, monkeypatch: Any) -> None:
    """Write ``source`` as ``root/<module>.py`` and make it importable here and in child
    processes (spawned workers, a CLI subprocess): ``root`` on ``sys.path`` and ``PYTHONPATH``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(source)
    forget_module(module, monkeypatch)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
