"""The probe at q > 1: batches of probe points, nested qEI values on fixed base samples, a q column.

CI-sized: one 2-d state probed at q = 1 and q = 4 (n_init 8, R = 4 rebuilds, 6 probes, S = 8).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from orthobench.acquisition import MarginalLogQEI
from orthobench.check import Threshold, evaluate
from orthobench.config.names import parse_estimator
from orthobench.probe.gp_probe import inner_base_samples
from orthobench.probe.runner import probe_states, probe_units, run_probe
from orthobench.probe.states import ProbeUnit, build_history, probe_points
from orthobench.probe.tables import format_summary, summary_table
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import ComponentSpec, ProbeSpec, load_suite
from orthobench.surrogates.batch_ei import log_qei
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.laplace import laplace_posterior
from orthobench.theta_estimators import draw_thetas

BRANIN = ComponentSpec(name="tests.probe.tasks:branin2", label="branin2")
SPEC = ProbeSpec(
    tasks=(BRANIN,),
    n_init=8,
    mc_samples=(8,),
    rebuilds=4,
    n_probes=6,
    estimators=("mc", "orth", "qmc-owen+rb", "qlogei"),
    reference_samples=64,
    q=(1, 4),
)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe-batch")
    return run_probe("t", SPEC, out, device=torch.device("cpu")).rows


def test_a_state_per_batch_size_and_rows_carry_their_q(probed):
    states = probe_states("t", SPEC)
    assert [s.q for s in states] == [1, 4]
    assert [s.id for s in states] == [
        "branin2__matern52-ard__seed0__it0",
        "branin2__matern52-ard__q4__seed0__it0",
    ]
    assert sorted(probed["q"].unique()) == [1, 4]
    for q, rows in probed.groupby("q"):
        assert set(rows["estimator"]) == {"mc", "orth", "qmc-owen+rb", "qlogei"}
        for row in rows.itertuples():
            values = np.asarray(row.values_ei).reshape(SPEC.rebuilds, SPEC.n_probes)
            assert np.isfinite(values).all(), q
            if row.estimator == "mc":  # a control-variate estimate may be negative
                assert (values > 0).all(), q
            assert len(row.reference) == SPEC.n_probes


def test_q1_states_keep_their_id_config_and_points():
    """A q = 1 state of a section with ``q: [1, 4]`` is the state of a section without q."""
    plain = dataclasses.replace(SPEC, q=(1,))
    (one, _), (alone,) = probe_units("t", SPEC), probe_units("t", plain)
    assert one.id == alone.id and one.config_hash == alone.config_hash
    assert "q" not in one.resolved_config()["probe"]
    batch = probe_units("t", SPEC)[1]
    assert batch.resolved_config()["probe"]["q"] == 4 and batch.config_hash != one.config_hash
    points = probe_points(one.state, SPEC, 2, torch.float64, torch.device("cpu"))
    assert points.shape == (SPEC.n_probes, 2)
    batches = probe_points(batch.state, SPEC, 2, torch.float64, torch.device("cpu"))
    assert batches.shape == (SPEC.n_probes, 4, 2)
    assert ((batches >= 0) & (batches <= 1)).all()


@pytest.mark.parametrize("name", ["mc", "orth"])
def test_q4_values_are_marginal_log_qei_on_the_rebuild_draws(probed, name):
    """Rebuild 0 of the q = 4 state, recomputed with OrthoBO's batch acquisition."""
    unit: ProbeUnit = probe_units("t", SPEC)[1]
    state, s = unit.state, SPEC.mc_samples[0]
    cpu = torch.device("cpu")
    x, y, *_ = build_history(state, SPEC, cpu, torch.float64)
    with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
        model, _ = fit_model(x, -y, state.surrogate)
    laplace = laplace_posterior(model)
    estimator = parse_estimator(name)
    draws = draw_thetas(
        laplace,
        estimator,
        s,
        seed=derive_seed(state.seed, "probe-rebuild", state.id, s, 0, estimator.sampling),
    )
    base = inner_base_samples(state, s, torch.float64, cpu, s, 0)
    assert base is not None and base.shape == (s, 64, 4)
    assert not torch.equal(base[0], base[1])  # each draw its own
    other = inner_base_samples(state, s, torch.float64, cpu, s, 1)
    assert not torch.equal(base, other)  # each rebuild draws its own
    X = probe_points(state, SPEC, 2, torch.float64, cpu)
    gp = draws.gp(model)
    acqf = MarginalLogQEI(
        model, [gp], [draws.z], [1.0], base_samples=base, estimator=name,
        point_weights=[draws.weights],
    )  # fmt: skip
    with torch.no_grad():
        expected_log = acqf(X).numpy()
        expected_mc = log_qei(gp, X, base).exp().mean(dim=0).numpy()
    row = probed[(probed["q"] == 4) & (probed["estimator"] == name)].iloc[0]
    values_log = np.asarray(row.values_log).reshape(SPEC.rebuilds, SPEC.n_probes)
    np.testing.assert_allclose(values_log[0], expected_log, rtol=1e-10, atol=1e-12)
    if name == "mc":
        values_ei = np.asarray(row.values_ei).reshape(SPEC.rebuilds, SPEC.n_probes)
        np.testing.assert_allclose(values_ei[0], expected_mc, rtol=1e-10)


def test_the_variance_ratio_of_the_default_vs_mc_is_computed_at_q4(probed):
    rows = probed[probed["q"] == 4].set_index("estimator")
    assert rows.loc["mc", "var_ratio"] == 1.0
    for name in ("orth", "qmc-owen+rb"):
        assert np.isfinite(rows.loc[name, ["var_ratio", "mse_ratio"]].astype(float)).all()
        assert rows.loc[name, "var_ratio"] > 0


def test_qlogei_at_q4_is_botorch_qlogei_against_its_own_many_sample_reference(probed):
    rows = probed[probed["q"] == 4].set_index("estimator")
    qlogei, theta = (
        np.asarray(rows.loc["qlogei", "reference"]),
        np.asarray(rows.loc["mc", "reference"]),
    )
    assert np.isfinite(qlogei).all() and (qlogei > 0).all()
    assert not np.allclose(qlogei, theta)  # qEI at the MAP fit, not the theta-marginal
    assert np.isfinite(float(rows.loc["qlogei", "mse_ratio"]))
    assert rows.loc["qlogei", "seconds_per_call"] is None or np.isnan(
        rows.loc["qlogei", "seconds_per_call"]
    )


def test_tables_and_the_check_gate_group_by_q(probed):
    table = summary_table(probed)
    assert list(table.columns[:4]) == ["suite", "task", "kernel", "q"]
    assert len(table) == 8 and set(table["q"]) == {1, 4}
    text = format_summary(probed)
    assert "  q " in text.splitlines()[0] or " q " in text.splitlines()[0]
    # The gate compares each row with the baseline of its own q.
    rule = Threshold(estimator="orth", metric="var_ratio", min=0.0, relative_to_baseline=True)
    results = evaluate(probed, [rule])
    assert len(results) == 2
    for result in results:
        q = 4 if "q 4" in result.state else 1
        own = probed[(probed["q"] == q)].set_index("estimator")["var_ratio"]
        assert result.value == pytest.approx(own["orth"] - own["mc"])


def test_rows_stored_without_q_read_as_q1(probed):
    legacy = probed[probed["q"] == 1].drop(columns="q")
    assert "q" not in summary_table(legacy)
    table = summary_table(probed.assign(q=probed["q"].where(probed["q"] != 1)))
    assert set(table["q"]) == {1, 4}


def test_the_batch_probe_suite_loads():
    suite = load_suite("suites/probe-batch.yaml")
    assert suite.probe is not None and suite.probe.q == (1, 4)
    assert suite.probe.rebuilds >= 2


@pytest.mark.parametrize("estimators", [("orthobo-tpe",), ("orth", "mc-tpe")])
def test_tpe_estimators_without_q1_are_refused_not_dropped(tmp_path, estimators):
    """TPE states are probed at q = 1 only: a section whose q lacks 1 would probe none of its
    TPE estimators (or no state at all) and say nothing; it is one line at ``probe.q``."""
    from orthobench.exceptions import ConfigError

    spec = dataclasses.replace(SPEC, q=(4,), estimators=estimators)
    with pytest.raises(ConfigError, match="q = 1 only") as raised:
        run_probe("t", spec, tmp_path, device=torch.device("cpu"))
    assert raised.value.field == "probe.q" and "\n" not in str(raised.value)
    assert not list(tmp_path.glob("probe/*.parquet"))
    with_q1 = probe_states("t", dataclasses.replace(spec, q=(1, 4)))
    expected = (
        [("tpe", 1)]
        if len(estimators) == 1
        else [("matern52-ard", 1), ("matern52-ard", 4), ("tpe", 1)]
    )
    assert [(s.surrogate, s.q) for s in with_q1] == expected
