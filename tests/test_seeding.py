"""Seeding helpers: seeds derived from keys, and a seeded block that leaves no trace."""

from __future__ import annotations

import torch

from orthobench.seeding import torch_seed


def test_torch_seed_restores_the_global_rng_state_after_the_block():
    """:func:`torch_seed` seeds torch's global generator for the block and restores its state
    afterwards: the state and the next draw after the block are those without the block, and the
    block's own draws depend on its seed alone."""
    outer = torch.get_rng_state()  # this test's own seeding leaves no trace either
    try:
        _check_the_block_leaves_no_trace()
    finally:
        torch.set_rng_state(outer)


def _check_the_block_leaves_no_trace() -> None:
    torch.manual_seed(1)
    before = torch.get_rng_state()
    expected = torch.rand(4)
    torch.set_rng_state(before)
    with torch_seed(5):
        inside = torch.rand(3)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(torch.rand(4), expected)
    torch.manual_seed(2)  # another global state: the block draws the same
    with torch_seed(5):
        assert torch.equal(torch.rand(3), inside)
