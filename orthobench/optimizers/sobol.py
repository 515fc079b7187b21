"""Scrambled Sobol search: the space-filling baseline."""

from __future__ import annotations

from typing import Any

from torch.quasirandom import SobolEngine

from orthobench.optimizers.base import Optimizer, Suggestion
from orthobench.seeding import derive_seed


class SobolSearch(Optimizer):
    """Proposes the next points of one scrambled Sobol sequence (seeded by the optimizer seed).

    The sequence is independent of the shared initial design, so it continues as a fresh
    space-filling design rather than repeating the initial points. An ``ask(q)`` returns the next
    ``q`` points of the sequence, so batches of any size walk the same sequence. Its state is the
    number of points drawn so far. Pending points change nothing: they are earlier points of the
    sequence, which the next ones fill around.
    """

    min_observations = 0
    #: Its points do not depend on the observations, so constraints change nothing it does: only
    #: the best-so-far counts feasible points alone, and the loop computes that.
    handles_constraints = True
    accepts_pending = True

    def __init__(self, dim: int, **kwargs) -> None:
        super().__init__(dim, **kwargs)
        self._engine = self._new_engine()

    def _new_engine(self) -> SobolEngine:
        return SobolEngine(self.dim, scramble=True, seed=derive_seed(self.seed, "sobol") % (2**31))

    def _ask(self, n: int) -> Suggestion:
        return Suggestion(x=self._engine.draw(n, dtype=self.dtype).numpy())

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "drawn": int(self._engine.num_generated)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._engine = self._new_engine().fast_forward(int(state["drawn"]))
