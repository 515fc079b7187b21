"""Small shared test utilities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
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
