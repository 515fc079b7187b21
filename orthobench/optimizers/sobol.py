"""Scrambled Sobol search: the space-filling baseline."""

from __future__ import annotations

from torch.quasirandom import SobolEngine

from orthobench.optimizers.base import Optimizer, Suggestion
from orthobench.seeding import derive_seed


class SobolSearch(Optimizer):
    """Proposes the next points of one scrambled Sobol sequence (seeded by the optimizer seed).

    The sequence is independent of the shared initial design, so it continues as a fresh
    space-filling design rather than repeating the initial points.
    """

    def __init__(self, dim: int, **kwargs) -> None:
        super().__init__(dim, **kwargs)
        self._engine = SobolEngine(
            dim, scramble=True, seed=derive_seed(self.seed, "sobol") % (2**31)
        )

    def ask(self, n: int = 1) -> Suggestion:
        self._asks += 1
        return Suggestion(x=self._engine.draw(n, dtype=self.dtype).numpy())
