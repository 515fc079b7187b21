"""The probe on a constrained task: marginal constrained EI over joint theta draws.

CI-sized: one Gramacy state (2-d, 2 constraints; n_init 10, R = 4 rebuilds, 8 probes, S = 8).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from orthobench.acquisition import MarginalLogCEI, constrained_incumbent
from orthobench.config.names import parse_estimator
from orthobench.exceptions import ConfigError
from orthobench.probe.gp_probe import _draw, _Outcomes
from orthobench.probe.runner import probe_units, run_probe
from orthobench.probe.states import build_history, probe_points
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import ComponentSpec, ProbeSpec
from orthobench.surrogates.fit import constraint_fit, fit_model
from orthobench.surrogates.laplace import laplace_posterior

GRAMACY = ComponentSpec(name="gramacy", label="gramacy")
SPEC = ProbeSpec(
    tasks=(GRAMACY,),
    n_init=10,
    mc_samples=(8,),
    rebuilds=4,
    n_probes=8,
    estimators=("mc", "orth", "qmc-owen+rb"),
    reference_samples=64,
)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe-constrained")
    return run_probe("t", SPEC, out, device=CPU).rows


@pytest.fixture(scope="module")
def state():
    """The state, its history's points and the state's GPs, fitted as the probe fits them."""
    (unit,) = probe_units("t", SPEC)
    x, y, _, c = build_history(unit.state, SPEC, CPU, torch.float64)
    return unit.state, _outcomes(unit.state, x, y, c)


def _outcomes(state, x, y, c) -> _Outcomes:
    with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
        model, _ = fit_model(x, -y, state.surrogate)
    fits = []
    for i, values in enumerate(c.T):
        with torch_seed(derive_seed(state.seed, "probe-fit", state.id, "constraint", i)):
            fits.append(constraint_fit(x, values, state.surrogate, "botorch"))
    best_f = constrained_incumbent(model.train_targets, (c <= 0).all(-1))
    return _Outcomes(model, laplace_posterior(model), tuple(fits), best_f)


def test_the_history_carries_the_constraint_values():
    (unit,) = probe_units("t", SPEC)
    history = build_history(unit.state, SPEC, CPU, torch.float64)
    assert history.constraints is not None
    assert history.constraints.shape == (SPEC.n_init, 2)
    plain = dataclasses.replace(
        SPEC, tasks=(ComponentSpec(name="tests.probe.tasks:branin2", label="branin2"),)
    )
    (other,) = probe_units("t", plain)
    assert build_history(other.state, plain, CPU, torch.float64).constraints is None


@pytest.mark.parametrize("name", ["mc", "orth"])
def test_values_are_marginal_log_cei_on_the_rebuild_draws(probed, state, name):
    """Rebuild 0, recomputed with OrthoBO's constrained acquisition on the same joint draws."""
    state, outcomes = state
    s = SPEC.mc_samples[0]
    estimator = parse_estimator(name)
    seed = derive_seed(state.seed, "probe-rebuild", state.id, s, 0, estimator.sampling)
    draws = _draw(outcomes, estimator, s, seed)
    assert len(draws.constraints) == 2
    acqf = MarginalLogCEI(
        outcomes.model,
        [draws.objective.gp(outcomes.model, outcomes.best_f)],
        [draws.objective.z],
        [1.0],
        constraints=[
            d.gp(fit.model) for d, fit in zip(draws.constraints, outcomes.constraints, strict=True)
        ],
        constraint_controls=[d.z for d in draws.constraints],
        estimator=name,
    )
    X = probe_points(state, SPEC, 2, torch.float64, CPU).unsqueeze(-2)
    with torch.no_grad():
        expected_log = acqf(X).numpy()
        log_scale, _, mc_value = acqf.scaled_estimates(X)
    row = probed[probed["estimator"] == name].iloc[0]
    values_log = np.asarray(row.values_log).reshape(SPEC.rebuilds, SPEC.n_probes)
    np.testing.assert_allclose(values_log[0], expected_log, rtol=1e-10, atol=1e-12)
    if name == "mc":
        values_ei = np.asarray(row.values_ei).reshape(SPEC.rebuilds, SPEC.n_probes)
        np.testing.assert_allclose(values_ei[0], (log_scale.exp() * mc_value).numpy(), rtol=1e-10)


def test_every_estimator_has_finite_rows_and_ratios(probed):
    assert set(probed["estimator"]) == {"mc", "orth", "qmc-owen+rb"}
    rows = probed.set_index("estimator")
    assert rows.loc["mc", "var_ratio"] == 1.0
    for name in ("orth", "qmc-owen+rb"):
        assert np.isfinite(float(rows.loc[name, "mse_ratio"])) and rows.loc[name, "var_ratio"] > 0


@pytest.mark.parametrize(
    ("changes", "field", "match"),
    [
        ({"estimators": ("mc", "qlogei")}, "probe.estimators", "not qlogei"),
        ({"estimators": ("mc", "mc-tpe")}, "probe.estimators", "not mc-tpe"),
        ({"q": (1, 2)}, "probe.q", "q = 1 only"),
        # Refused by each state after its fit.
        ({"estimators": ("mc", "sr3")}, "probe.estimators", "constraints: estimator 'sr3' weights"),
    ],
)
def test_what_the_constrained_probe_does_not_measure_is_refused_before_any_state(
    tmp_path, changes, field, match
):
    spec = dataclasses.replace(SPEC, **changes)
    with pytest.raises(ConfigError, match=match) as raised:
        run_probe("t", spec, tmp_path, device=CPU)
    assert raised.value.field == field
    assert not list((tmp_path / "probe").glob("*.parquet"))


def test_a_point_set_with_unequal_weights_is_refused_on_a_constrained_state(state):
    _, outcomes = state
    draws = _draw(outcomes, "sr3", 16, 0)
    assert draws.objective.weights is not None
    with pytest.raises(ValueError, match="weights its points unequally"):
        draws.joint  # noqa: B018 -- the property raises
