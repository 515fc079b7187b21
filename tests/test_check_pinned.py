"""The regression gate's relative rules on hand-built probe rows: the baseline row they compare
with, and the rounding slack on both of their bounds (:mod:`orthobench.check`)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from orthobench.check import Threshold, evaluate


def _row(estimator: str, value: float, **state: object) -> dict[str, object]:
    """One probe row of ``top1_agreement``: state seed 0, iteration 0 of task ``t``, kernel ``k``,
    S = 32, q = 1, unless ``state`` says otherwise."""
    row = {"estimator": estimator, "seed": 0, "state_iteration": 0, "task": "t", "kernel": "k",
           "mc_samples": 32, "q": 1, "baseline": "mc", "top1_agreement": value}  # fmt: skip
    return {**row, **state}


def _relative(**bounds: float) -> Threshold:
    return Threshold(estimator="e", metric="top1_agreement", relative_to_baseline=True, **bounds)


@pytest.mark.parametrize(
    "other", [{"mc_samples": 16}, {"q": 2}, {"kernel": "rbf"}], ids=["S", "q", "kernel"]
)
def test_a_relative_rule_compares_with_the_baseline_of_the_same_s_q_and_kernel(other):
    """The baseline row of the same state, S, batch size q and kernel (the module docstring),
    whichever order the rows come in: a baseline row of another S, q or kernel listed first
    (0.2) is not the one the estimator's row (0.85) is compared with (0.9)."""
    frame = pd.DataFrame([_row("mc", 0.2, **other), _row("mc", 0.9), _row("e", 0.85)])
    (result,) = evaluate(frame, [_relative(min=-0.1, max=0.1)])
    assert result.value == pytest.approx(-0.05)
    assert result.passed


def test_a_relative_rule_passes_a_difference_of_shares_on_its_max():
    """The slack of a difference of shares applies to ``max`` as to ``min`` (the module
    docstring): 18/20 - 17/20 is 0.05000000000000004 in floats, and passes ``max: 0.05``."""
    frame = pd.DataFrame([_row("mc", 17 / 20), _row("e", 18 / 20)])
    (result,) = evaluate(frame, [_relative(max=0.05)])
    assert result.value > 0.05
    assert result.passed


def test_an_infinite_difference_fails_a_relative_max():
    """An infinite value minus a finite baseline is infinite: no slack widens ``max: 0.5`` to
    pass it (an infinite slack would pass anything)."""
    frame = pd.DataFrame([_row("mc", 0.5), _row("e", math.inf)])
    (result,) = evaluate(frame, [_relative(max=0.5)])
    assert result.value == math.inf
    assert not result.passed
