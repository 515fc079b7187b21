"""Properties of probe states and units that a user relies on: ids and configuration hashes that
tell states apart, probe points of their own per batch size, the rows a section asks for (naive
MC once, in the documented order), ``--force`` and independent bootstrap intervals per row."""

from __future__ import annotations

import numpy as np
import torch

from orthobench.probe import runner
from orthobench.probe.runner import probe_states, probe_units, run_probe
from orthobench.probe.states import probe_points
from orthobench.suite import ComponentSpec, ProbeSpec

HARTMANN = ComponentSpec(name="hartmann6", label="hartmann6")
CPU = torch.device("cpu")


def test_changing_laplace_changes_a_probe_units_config_hash():
    """Every row of a state depends on its Laplace posterior: a state stored with ``laplace:
    floored`` must be stale for ``laplace: unfloored``, not reused as if it were the same."""
    floored, unfloored = (
        probe_units("s", ProbeSpec(tasks=(HARTMANN,), laplace=mode))[0]
        for mode in ("floored", "unfloored")
    )
    assert floored.id == unfloored.id
    assert floored.config_hash != unfloored.config_hash


def test_probe_state_ids_are_distinct_for_every_q_2_included():
    """A state is one output file named by its id: the states of q = 1, 2 and 3 must not share
    one."""
    ids = [state.id for state in probe_states("s", ProbeSpec(tasks=(HARTMANN,), q=(1, 2, 3)))]
    assert len(ids) == 3 and len(set(ids)) == 3


def test_batch_probe_points_are_not_the_q_1_probe_points():
    """Probe points at ``q > 1`` are seeded with ``q`` too: no point of a q = 2 batch is one of
    the q = 1 state's probe points (the batch sequence is not the q = 1 one with more
    coordinates)."""
    spec = ProbeSpec(tasks=(HARTMANN,), q=(1, 2), n_probes=8)
    one, two = probe_states("s", spec)
    single = probe_points(one, spec, 6, torch.float64, CPU)  # 8 x 6
    batches = probe_points(two, spec, 6, torch.float64, CPU)  # 8 x 2 x 6
    assert single.shape == (8, 6) and batches.shape == (8, 2, 6)
    distance = torch.cdist(batches.reshape(-1, 6), single)
    assert distance.min() > 1e-6


def test_naive_mc_spelled_mc_at_iid_is_computed_once():
    """``mc@iid`` is ``mc``, naive iid MC, which every state computes as the baseline: a section
    that names it gets one naive-MC row per budget, not a ``mc`` and a ``mc@iid`` row of the
    same numbers."""
    spec = ProbeSpec(tasks=(HARTMANN,), estimators=("mc@iid", "orth"), mc_samples=(8,))
    (unit,) = probe_units("s", spec)
    assert unit.rows() == [("mc", 8), ("orth", 8)]


def test_a_probe_units_rows_are_in_the_documented_order():
    """``ProbeUnit.rows`` lists the rows in the order they are computed: budget by budget (each
    budget's draws are made once for its estimators), and at each budget naive MC first, the
    baseline of every ratio, then the section's estimators in its order."""
    spec = ProbeSpec(
        tasks=(HARTMANN,), estimators=("mc", "orth", "orth-shrink"), mc_samples=(8, 32)
    )
    (unit,) = probe_units("s", spec)
    assert unit.rows() == [(e, s) for s in (8, 32) for e in ("mc", "orth", "orth-shrink")]


TINY = ProbeSpec(
    tasks=(ComponentSpec(name="tests.probe.tasks:branin2", label="branin2"),),
    n_init=4,
    mc_samples=(2,),
    rebuilds=2,
    n_probes=2,
    top_k=2,
    reference_samples=2,
    estimators=("mc",),
)


def test_force_recomputes_a_stored_state(tmp_path, monkeypatch):
    """``run_probe(force=True)`` (``orthobench probe --force``) recomputes every state the
    section asks for, although it is stored with the same configuration; without it the stored
    state is reused."""
    first = run_probe("t", TINY, tmp_path, device=CPU)
    assert [o.status for o in first.summary.outcomes] == ["ok"]
    calls = []
    probe_state = runner.probe_state

    def recording(state, spec, device, dtype=torch.float64):
        calls.append(state.id)
        return probe_state(state, spec, device, dtype)

    monkeypatch.setattr(runner, "probe_state", recording)
    reused = run_probe("t", TINY, tmp_path, device=CPU)
    assert [o.status for o in reused.summary.outcomes] == ["skipped"] and calls == []
    forced = run_probe("t", TINY, tmp_path, device=CPU, force=True)
    assert [o.status for o in forced.summary.outcomes] == ["ok"]
    assert calls == [probe_units("t", TINY)[0].id]


def test_the_ratio_intervals_of_two_budgets_resample_independently():
    """Each stored row's bootstrap interval resamples with a seed of its own state, estimator and
    budget ``S``: two budgets of one estimator whose values happen to be identical still get
    independent resamples, so their intervals differ (one seed for both would make every
    budget's intervals share their resampling error)."""
    spec = ProbeSpec(tasks=(HARTMANN,), estimators=("mc", "orth"), mc_samples=(8, 32))
    (state,) = probe_states("s", spec)
    rng = np.random.default_rng(0)
    rebuilds, n = 6, 5
    ref = rng.random(n)
    base = ref + 0.3 * rng.standard_normal((rebuilds, n))
    orth = ref + 0.1 * rng.standard_normal((rebuilds, n))
    values = {
        (name, s): {"ei": v, "log": np.log(np.abs(v) + 1e-3)}
        for s in (8, 32)
        for name, v in (("mc", base), ("orth", orth))
    }
    refs = {"theta": ref}
    records = runner._summaries(state, spec, values, refs, refs, "mc", None, {})
    by_row = {(r.estimator, r.mc_samples): r for r in records}
    at8, at32 = by_row[("orth", 8)], by_row[("orth", 32)]
    assert at8.var_ratio == at32.var_ratio and at8.mse_ratio == at32.mse_ratio  # same data
    assert (at8.var_ratio_low, at8.var_ratio_high) != (at32.var_ratio_low, at32.var_ratio_high)
    assert (at8.mse_ratio_low, at8.mse_ratio_high) != (at32.mse_ratio_low, at32.mse_ratio_high)
