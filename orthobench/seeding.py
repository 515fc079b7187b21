"""Seed derivation: every random draw in a run comes from a seed derived here.

Seeds are derived by hashing, never from Python's ``hash`` (salted per process) or global RNG
state, so a cell gives the same numbers inline, in a process pool or on another machine.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import numpy as np
import torch

_SEED_BITS = 63


def derive_seed(*keys: object) -> int:
    """Return a non-negative 63-bit integer seed determined only by ``keys``.

    >>> derive_seed(0, "init", "hartmann6") == derive_seed(0, "init", "hartmann6")
    True
    """
    digest = hashlib.sha256(repr(tuple(keys)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - _SEED_BITS)


def numpy_rng(*keys: object) -> np.random.Generator:
    """A NumPy generator seeded from ``keys`` (see :func:`derive_seed`)."""
    return np.random.default_rng(derive_seed(*keys))


def torch_generator(*keys: object, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator on ``device`` seeded from ``keys``."""
    gen = torch.Generator(device=device)
    gen.manual_seed(derive_seed(*keys) % (2**63 - 1))
    return gen


@contextlib.contextmanager
def torch_seed(seed: int) -> Iterator[None]:
    """Seed torch's global RNG for the block and restore its state afterwards.

    Library code that draws from the global generator (BoTorch's ``optimize_acqf`` raw samples,
    gpytorch initializations) runs inside this, so runs are reproducible without leaking state.
    """
    cpu_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    torch.manual_seed(seed % (2**63 - 1))
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
