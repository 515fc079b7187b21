"""The closed-form GP algebra in theta against gpytorch's own path."""

from __future__ import annotations

import pytest

from orthobench.surrogates.theta_algebra import get_theta, log_posterior, theta_layout
from tests.surrogates.fitted import CASES, fitted, gpytorch_neg_log_posterior


@pytest.mark.parametrize(("kernel", "outputscale"), CASES)
def test_closed_form_log_posterior_is_n_times_gpytorch_mll_plus_jacobian(
    kernel: str, outputscale: bool
) -> None:
    """gpytorch divides by n. Up to its jitter the closed form is n * mll.

    (docs/design.md, "Unnormalized log posterior")
    """
    model, _ = fitted(kernel, outputscale)
    theta = get_theta(model)
    layout = theta_layout(model)
    ours = float(log_posterior(theta[None], layout, model.train_inputs[0], model.train_targets))
    theirs = -gpytorch_neg_log_posterior(model, theta)
    assert abs(ours - theirs) < 1e-6 * abs(theirs)
