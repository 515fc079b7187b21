"""Golden values: BO steps, probe ratios, a fast fit and a Laplace posterior, pinned to numbers.

Each case of :mod:`tests.golden_cases` is recomputed and compared with ``tests/golden_values.json``
within the case's tolerance (the module says why each is what it is). They fail when any seed
derivation or numerical step changes, as commit 51be5db (canonical eigenvector signs) moved every
theta draw without a test noticing. For a change made on purpose, ``make goldens`` rewrites the
file and prints old -> new; the figures of docs/ are then regenerated in the same change.
"""

from __future__ import annotations

import pytest
import torch

from orthobench.executors import thread_limits
from tests import golden_cases
from tests.golden_cases import CASES, changes, compute, format_changes, load_goldens


@pytest.fixture(scope="module")
def pinned() -> dict[str, dict[str, object]]:
    return load_goldens()


@pytest.mark.parametrize("case", list(CASES))
def test_golden_values(case: str, pinned) -> None:
    old = pinned[case]["values"] if case in pinned else {}
    moved = [c for c in changes(case, old, compute(case)) if c.beyond]
    assert not moved, (
        f"golden values of {case!r} moved beyond atol={CASES[case].atol:g} + "
        f"rtol={CASES[case].rtol:g} * |old|:\n"
        f"{format_changes(moved)}\nIf the change of numerics or seeding is intended, run "
        "`make goldens` and regenerate the figures of docs/ in the same change."
    )


def test_golden_file_holds_every_case_with_its_note(pinned) -> None:
    assert list(pinned) == list(CASES)
    assert {case: entry["note"] for case, entry in pinned.items()} == {
        case: c.note for case, c in CASES.items()
    }


def test_golden_cases_run_in_float64() -> None:
    """The tolerances assume float64, the default dtype of cells and of the fit and Laplace data
    (in float32, rounding alone would exceed the closed-form tolerance)."""
    assert all(golden_cases.bo_cell(name).dtype == "float64" for name in golden_cases.BO_PARAMS)
    x, y = golden_cases.fixed_data()
    assert x.dtype == y.dtype == torch.float64
    with thread_limits(1):
        laplace = golden_cases.laplace_at_fixed_theta()
    assert laplace.hessian.dtype == laplace.theta_hat.dtype == torch.float64
    assert not laplace.floored  # the draws depend on no rotation within a floored eigenspace


def test_golden_comparison_flags_a_move_beyond_tolerance_only() -> None:
    """What the tests above rely on: a move within ``atol + rtol * |old|`` passes; a larger one,
    a missing or an extra value fails, also for a value near zero or with no absolute floor."""
    laplace, probe = CASES["laplace"], CASES["probe-seed0"]
    old = {"a": 2.0, "b": 1e-3}

    def beyond(case: str, new: dict[str, float]) -> list[bool]:
        return [c.beyond for c in changes(case, old, new)]

    assert beyond("laplace", old) == []
    within = {"a": 2.0 * (1 + laplace.rtol / 2), "b": 1e-3 + laplace.atol}
    assert beyond("laplace", within) == [False, False]
    assert beyond("laplace", {"a": 2.0 * (1 + 2 * laplace.rtol), "b": 1e-3}) == [True]
    assert beyond("laplace", {"a": 2.0, "b": 1e-3 + 3 * laplace.atol}) == [True]
    assert beyond("probe-seed0", {"a": 2.0, "b": 1e-3 * (1 + 2 * probe.rtol)}) == [True]
    assert beyond("laplace", {"a": 2.0}) == [True]
    assert beyond("laplace", {**old, "c": 0.0}) == [True]
