"""Golden values: BO steps, probe ratios, a fast fit and a Laplace posterior, pinned to numbers.

Each case of :mod:`tests.golden_cases` is recomputed and compared with ``tests/golden_values.json``
within the case's tolerance (the module says why each is what it is). They fail when any seed
derivation or numerical step changes, as commit 51be5db (canonical eigenvector signs) moved every
theta draw without a test noticing. For a change made on purpose, ``make goldens`` rewrites the
file and prints old -> new; the figures of docs/ are then regenerated in the same change. A case
passes too within tolerance of the values another machine gives for the same code
(:func:`tests.golden_cases.moved`).
"""

from __future__ import annotations

import copy

import pytest
import torch

from orthobench.executors import thread_limits
from tests import golden_cases
from tests.golden_cases import (
    CASES,
    changes,
    compute,
    format_changes,
    load_goldens,
    machine,
    moved,
)


@pytest.fixture(scope="module")
def pinned() -> dict[str, dict[str, object]]:
    return load_goldens()


@pytest.mark.parametrize("case", list(CASES))
def test_golden_values(case: str, pinned) -> None:
    entry = pinned.get(case, {"values": {}})
    found = moved(case, entry, compute(case))
    others = [other["machine"] for other in entry.get("also", [])]
    assert not found, (
        f"golden values of {case!r} moved beyond atol={CASES[case].atol:g} + "
        f"rtol={CASES[case].rtol:g} * |old|"
        + (f" (nor are they those of {'; '.join(others)})" if others else "")
        + f":\n{format_changes(found)}\nIf the change of numerics or seeding is intended, run "
        "`make goldens` and regenerate the figures of docs/ in the same change; if the code's "
        "values are unchanged where the file was written and only this machine differs, record "
        f"its values with `python -m tests.update_goldens --add-machine` ({machine()})."
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


def test_a_case_passes_within_tolerance_of_any_machines_values() -> None:
    """Another machine's values (``also``) pass as the file's own do; values of neither fail,
    reported against the file's own."""
    entry = {"values": {"a": 1.0}, "also": [{"machine": "other CPU", "values": {"a": 1.5}}]}
    assert moved("probe-seed0", entry, {"a": 1.0}) == []
    assert moved("probe-seed0", entry, {"a": 1.5}) == []
    assert moved("probe-seed0", {"values": {"a": 1.0}}, {"a": 1.5}) != []
    (change,) = moved("probe-seed0", entry, {"a": 2.0})
    assert (change.old, change.new, change.beyond) == (1.0, 2.0, True)


def test_add_machine_keeps_values_of_moved_cases_only_and_write_drops_them(monkeypatch) -> None:
    from tests import update_goldens

    files = [
        {
            "laplace": {"note": "n", "values": {"a": 1.0}},
            "fast-fit": {"note": "m", "values": {"b": 2.0}},
        }
    ]
    monkeypatch.setattr(update_goldens, "load_goldens", lambda: copy.deepcopy(files[-1]))
    monkeypatch.setattr(update_goldens, "dump_goldens", lambda goldens: files.append(goldens))
    recomputed = {"laplace": {"a": 1.5}, "fast-fit": {"b": 2.0}}
    monkeypatch.setattr(update_goldens, "compute", recomputed.get)
    monkeypatch.setattr(update_goldens, "machine", lambda: "cpu X")
    assert update_goldens.main(["--add-machine", "laplace", "fast-fit"]) == 0
    added = files[-1]
    assert added["laplace"] == {
        "note": "n",
        "values": {"a": 1.0},
        "also": [{"machine": "cpu X", "values": {"a": 1.5}}],
    }
    assert added["fast-fit"] == files[0]["fast-fit"]
    assert update_goldens.main(["laplace", "fast-fit"]) == 0  # this machine's values pass
    assert update_goldens.main(["--write", "laplace"]) == 0
    assert files[-1]["laplace"] == {"note": CASES["laplace"].note, "values": {"a": 1.5}}
