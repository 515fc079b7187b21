"""Plugin estimators: a user's acquisition named by import path, probed beside OrthoBO's.

CI-sized: one 2-d state (n_init 8, R = 4 rebuilds, 6 probes, S = 8 and 64, 64 reference samples);
the plugin is BoTorch's qLogNEI (``tests/probe/plugins.py``).
"""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest
import torch
from botorch.acquisition import qLogNoisyExpectedImprovement
from botorch.sampling import SobolQMCNormalSampler

import orthobench
from orthobench.config.names import parse_estimator
from orthobench.exceptions import ConfigError, SuiteError
from orthobench.executors._base import thread_limits
from orthobench.probe import ProbeAcquisition
from orthobench.probe.gp_probe import _plugin_log
from orthobench.probe.runner import probe_units, run_probe
from orthobench.probe.states import (
    ProbeState,
    build_history,
    check_constrained_states,
    probe_points,
    state_estimators,
)
from orthobench.seeding import derive_seed, torch_seed
from orthobench.suite import ComponentSpec, ProbeSpec, load_suite
from orthobench.surrogates.fit import fit_model

PLUGIN = "tests.probe.plugins:QLogNEI"
BRANIN = ComponentSpec(name="tests.probe.tasks:branin2", label="branin2")
SPEC = ProbeSpec(
    tasks=(BRANIN,),
    n_init=8,
    mc_samples=(8, 64),
    rebuilds=4,
    n_probes=6,
    estimators=("mc", "orth", PLUGIN),
    reference_samples=64,
)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe-plugin")
    return run_probe("t", SPEC, out, device=CPU).rows


def _values(row) -> np.ndarray:
    return np.asarray(row.values_ei).reshape(SPEC.rebuilds, SPEC.n_probes)


def test_the_plugin_is_public_and_parses_as_an_import_path():
    assert orthobench.ProbeAcquisition is ProbeAcquisition
    assert parse_estimator(PLUGIN) == (PLUGIN, "", False)
    assert parse_estimator(PLUGIN).plugin and not parse_estimator("qlogei").plugin
    assert parse_estimator(PLUGIN).name == PLUGIN


def test_plugin_rows_hold_finite_values_against_their_own_reference(probed):
    assert list(probed["estimator"]) == ["mc", "orth", PLUGIN] * 2
    assert list(probed["mc_samples"]) == [8, 8, 8, 64, 64, 64]
    for row in probed[probed["estimator"] == PLUGIN].itertuples():
        assert np.isfinite(_values(row)).all() and (_values(row) > 0).all()
        assert np.allclose(np.log(_values(row)).ravel(), row.values_log)
        reference = np.asarray(row.reference)
        assert reference.shape == (SPEC.n_probes,) and (reference > 0).all()
        theta = np.asarray(probed[probed["estimator"] == "mc"].iloc[0].reference)
        assert not np.allclose(reference, theta)  # noisy EI at the MAP fit, not theta-marginal
        assert np.isfinite([row.var_ratio, row.mse_ratio, row.top1_agreement]).all()
        assert row.seconds_per_call is None or np.isnan(row.seconds_per_call)
        assert row.n_evaluations == row.mc_samples and row.baseline == "mc"


def test_plugin_values_are_its_builds_on_the_states_gp_over_the_outcome_std(probed):
    """Rebuild r at S is qLogNEI with S Sobol samples seeded r, minus log sigma_y; the reference
    is the build with reference_samples and rebuild index R."""
    (unit,) = probe_units("t", SPEC)
    state = unit.state
    # At the probe's one torch thread: the fit's reductions depend on the thread count.
    with thread_limits(1):
        x, y, *_ = build_history(state, SPEC, CPU, torch.float64)
        with torch_seed(derive_seed(state.seed, "probe-fit", state.id)):
            model, _ = fit_model(x, -y, state.surrogate)
    X = probe_points(state, SPEC, 2, torch.float64, CPU).unsqueeze(-2)
    log_std = model.outcome_transform.stdvs.squeeze().log()

    def log_nei(samples, seed):
        # qLogNEI prunes its baseline on torch's global RNG: seeded as the probe seeds each build.
        global_seed = derive_seed(state.seed, "probe-plugin", state.id, PLUGIN, samples, seed)
        sampler = SobolQMCNormalSampler(torch.Size([samples]), seed=seed)
        with torch_seed(global_seed), torch.no_grad():
            return (qLogNoisyExpectedImprovement(model, x, sampler=sampler)(X) - log_std).numpy()

    rows = probed[probed["estimator"] == PLUGIN].set_index("mc_samples")
    for s in SPEC.mc_samples:
        values_log = np.asarray(rows.loc[s, "values_log"]).reshape(SPEC.rebuilds, SPEC.n_probes)
        for r in (0, SPEC.rebuilds - 1):
            np.testing.assert_allclose(values_log[r], log_nei(s, r), rtol=1e-8, atol=1e-10)
    reference = np.exp(log_nei(SPEC.reference_samples, SPEC.rebuilds))
    np.testing.assert_allclose(rows.loc[8, "reference"], reference, rtol=1e-8)


def test_the_plugins_variance_falls_with_its_budget(probed):
    rows = probed[probed["estimator"] == PLUGIN].set_index("mc_samples")
    assert rows.loc[64, "probe_variance"] < rows.loc[8, "probe_variance"]


def test_a_plugin_leaves_the_other_rows_bit_identical(probed, tmp_path):
    plain = dataclasses.replace(SPEC, estimators=("mc", "orth"), mc_samples=(8,))
    alone = run_probe("t", plain, tmp_path, device=CPU).rows
    assert list(alone["estimator"]) == ["mc", "orth"]
    for row in alone.itertuples():
        with_plugin = probed[(probed["estimator"] == row.estimator) & (probed["mc_samples"] == 8)]
        assert list(with_plugin.iloc[0].values_ei) == list(row.values_ei)
        assert list(with_plugin.iloc[0].reference) == list(row.reference)


def test_tpe_states_get_no_plugin_rows():
    spec = dataclasses.replace(SPEC, estimators=("mc", PLUGIN, "mc-tpe"))
    state = ProbeState("t", BRANIN, "tpe", 0, 0, 8)
    assert state_estimators(state, spec) == ["mc-tpe"]
    assert state_estimators(dataclasses.replace(state, surrogate="matern52-ard"), spec) == [
        "mc",
        PLUGIN,
    ]


@pytest.mark.parametrize(
    "convert",
    [lambda v: v, lambda v: v.numpy(), lambda v: v.tolist()],
    ids=["tensor", "numpy", "list"],
)
def test_a_plugins_values_may_be_any_array_like(convert):
    """``build`` may return any callable (its docstring); values that were not a tensor failed
    every state at its end."""
    values = torch.tensor([0.5, -1.25, 3.0], dtype=torch.float64)

    class Fixed(ProbeAcquisition):
        def build(self, model, *, best_f, samples, rebuild):
            return lambda X: convert(values)

    X = torch.zeros(3, 1, 2, dtype=torch.float64)
    assert torch.equal(_plugin_log(Fixed(), "fixed", None, X, 0.0, 8, 0, 1), values)


def test_a_plugins_values_that_are_not_numbers_are_refused_naming_it():
    class Words(ProbeAcquisition):
        def build(self, model, *, best_f, samples, rebuild):
            return lambda X: ["a", "b", "c"]

    X = torch.zeros(3, 1, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'words' .*shape \(3,\), but got list"):
        _plugin_log(Words(), "words", None, X, 0.0, 8, 0, 1)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("builtins:dict", "standard library"),
        ("tests.probe.plugins:not_a_plugin", "not a ProbeAcquisition subclass"),
        ("tests.probe.tasks:branin2", "not a ProbeAcquisition subclass"),
        ("tests.probe.plugins:Abstract", "abstract class Abstract: implement build"),
        # Refused only when each state's other rows were computed, failing every state.
        ("tests.probe.plugins:NeedsArguments", r"calls NeedsArguments\(\), but missing .*'k'"),
        ("tests.probe.plugins:PositionalBuild", r"calls build\(.*unexpected keyword .*best_f"),
        ("tests.probe.plugins:Nope", "has no attribute 'Nope'"),
        ("no_such_package.acq:QLogNEI", "No module named 'no_such_package'"),
        ("tests.probe.no_such_module:QLogNEI", "no such module"),
        ("tests.probe.plugins:QLogNEI@qmc", "import path of a ProbeAcquisition subclass"),
        ("tests.probe._private:X", "private module"),
    ],
)
def test_a_bad_plugin_fails_at_the_probe_section_with_one_line(name, match):
    with pytest.raises(ConfigError, match=match) as raised:
        ProbeSpec(tasks=(BRANIN,), estimators=("mc", "orth", name))
    assert raised.value.field == "estimators[2]"
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("name", ["StaticBuild", "ClassBuild"])
def test_a_static_or_class_method_build_is_accepted(name):
    """The load-time check of build's signature bound an instance to every build, so these were
    refused ("too many positional arguments"), though the probe calls them fine."""
    ProbeSpec(tasks=(BRANIN,), estimators=("mc", f"tests.probe.plugins:{name}"))


def test_a_plugin_is_refused_on_a_constrained_task():
    gramacy = ComponentSpec(name="gramacy", label="gramacy")
    spec = ProbeSpec(tasks=(gramacy,), estimators=("mc", PLUGIN))
    state = ProbeState("t", gramacy, "matern52-ard", 0, 0, spec.n_init)
    with pytest.raises(ConfigError, match=f"constraints.*not {PLUGIN}") as raised:
        check_constrained_states([state], spec, {"gramacy": 2})
    assert raised.value.field == "probe.estimators"


def test_a_suite_file_names_a_plugin(tmp_path):
    text = textwrap.dedent(
        f"""\
        name: plugin
        budget: 2
        tasks: [tests.probe.tasks:branin2]
        optimizers: [sobol]
        probe:
          tasks: [tests.probe.tasks:branin2]
          estimators: [mc, orth, "{PLUGIN}"]
        """
    )
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    suite = load_suite(path)
    assert suite.probe is not None and suite.probe.estimators == ("mc", "orth", PLUGIN)
    path.write_text(text.replace(PLUGIN, "builtins:dict"))
    with pytest.raises(SuiteError, match=r"probe\.estimators\[2\]: .*standard library"):
        load_suite(path)
