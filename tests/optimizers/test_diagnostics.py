"""Typed step diagnostics write the same JSON text as the untyped dicts before them: same keys,
order and values, so stored frames do not change."""

from __future__ import annotations

import json

from orthobench.diagnostics import EnsembleWeights, LaplaceDiagnostics, OrthoBOStep

# A stored OrthoBO step (results/paper/paper-ensemble-reduced, levy16, seed 0, evaluation 2),
# as the untyped code wrote it.
STORED = (
    '{"estimator": "orth", "theta_sampling": "iid", "rb": false, "theta_samples": 512, '
    '"n_evaluations": [512, 512, 512], "ensemble_kernels": ["linear", "rbf-iso", "matern52-ard"], '
    '"ensemble_weights": [0.02737792762766707, 0.5890768189820533, 0.38354525339027956], '
    '"ensemble_entropy": 0.7777954766366413, "ensemble_max_entropy": 1.0986122886681098, '
    '"eig_floored": [false, false, false], '
    '"min_eigenvalue": [1.284652288281016, 1.0635875608896237, 0.6825785955454687], '
    '"recenter_shift": [0.0, 0.0, 0.0], "jittered_draws": [0, 0, 0], "fit_device": "cpu", '
    '"fit_grad_norm": [1.075940909905276e-05, 0.0005187939740895082, 0.025715862552034736], '
    '"fit_stationary": [true, true, false], "screen_theta_samples": null, '
    '"coarse_theta_samples": null}'
)


def test_a_stored_step_is_written_back_to_the_same_text():
    step = OrthoBOStep.from_info(json.loads(STORED))
    assert step.ensemble.kernels == ("linear", "rbf-iso", "matern52-ard")
    assert step.fit_stationary == (True, True, False) and step.screen_theta_samples is None
    assert json.dumps(step.to_info()) == STORED


def test_a_step_built_from_its_fields_writes_the_stored_text():
    """As :meth:`OrthoBO._diagnostics` builds it, the ensemble nested and stored flat in place."""
    step = OrthoBOStep(
        estimator="orth",
        theta_sampling="iid",
        rb=False,
        theta_samples=512,
        n_evaluations=(512, 512, 512),
        ensemble=EnsembleWeights(
            kernels=("linear", "rbf-iso", "matern52-ard"),
            weights=(0.02737792762766707, 0.5890768189820533, 0.38354525339027956),
            entropy=0.7777954766366413,
            max_entropy=1.0986122886681098,
        ),
        eig_floored=(False, False, False),
        min_eigenvalue=(1.284652288281016, 1.0635875608896237, 0.6825785955454687),
        recenter_shift=(0.0, 0.0, 0.0),
        jittered_draws=(0, 0, 0),
        fit_device="cpu",
        fit_grad_norm=(1.075940909905276e-05, 0.0005187939740895082, 0.025715862552034736),
        fit_stationary=(True, True, False),
        screen_theta_samples=None,
        coarse_theta_samples=None,
    )
    assert json.dumps(step.to_info()) == STORED
    assert OrthoBOStep.from_info(step.to_info()) == step


def test_laplace_diagnostics_write_the_keys_laplace_posterior_info_wrote():
    """The probe stores them prefixed ``laplace_`` in its rows' info."""
    diagnostics = LaplaceDiagnostics(
        eig_floored=True,
        hessian_indefinite=False,
        min_eigenvalue=0.731572178551541,
        recenter_shift=0.0,
        newton_steps=0,
        fallback=None,
    )
    assert json.dumps(diagnostics.to_info()) == (
        '{"eig_floored": true, "hessian_indefinite": false, "min_eigenvalue": 0.731572178551541, '
        '"recenter_shift": 0.0, "newton_steps": 0, "fallback": null}'
    )
