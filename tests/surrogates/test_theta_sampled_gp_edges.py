"""The hand-written backward passes where the geometry is extreme: candidates at training points
(posterior variance near the noise), on the box's faces and corners, with the constant mean
integrated out, and the batch (q > 1) moments there with pending points."""

from __future__ import annotations

import pytest
import torch

from orthobench.acquisition import MarginalLogEI, MarginalLogQEI, draw_inner_base_samples
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from tests.surrogates.fitted import DTYPE, fitted

KERNELS = ["matern52-ard", "matern52-iso", "rbf-ard", "rbf-iso", "linear"]


def _gp(kernel: str, rb: float, n_draws: int = 5):
    model, lap = fitted(kernel)
    z = lap.sample_whitened(n_draws, "iid", seed=0)
    gp = ThetaSampledGP.from_model(model, lap.theta(z), constant_mean_variance=rb)
    return model, gp, z[:, 1:] if rb else z


def _edge_points(model) -> dict[str, torch.Tensor]:
    train_x = model.train_inputs[0]
    corner = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.5]], dtype=DTYPE)
    return {"training": train_x[:3].clone(), "box": corner}


@pytest.mark.parametrize("rb", [0.0, 0.3])
@pytest.mark.parametrize("kernel", KERNELS)
def test_marginal_gradients_pass_gradcheck_at_training_points_and_the_box(
    kernel: str, rb: float
) -> None:
    model, gp, z = _gp(kernel, rb)
    acqf = MarginalLogEI(model, [gp], [z], [1.0], estimator="orth")
    for where, x in _edge_points(model).items():
        X = x.unsqueeze(-2).requires_grad_(True)
        assert torch.autograd.gradcheck(gp.mean_and_variance, (X,)), where
        assert torch.autograd.gradcheck(gp.log_ei, (X,)), where
        assert torch.autograd.gradcheck(acqf, (X,)), where


@pytest.mark.parametrize("rb", [0.0, 0.3])
@pytest.mark.parametrize("kernel", ["matern52-ard", "rbf-iso"])
def test_batch_gradients_pass_gradcheck_with_pending_points_at_the_edges(
    kernel: str, rb: float
) -> None:
    """q = 3 batches at training points and on the box, a training point pending. In the given
    order: two of the box's points tie in their first coordinate, where the canonical sort is a
    jump by design."""
    model, gp, z = _gp(kernel, rb)
    pending = torch.cat([model.train_inputs[0][5:6], torch.full((1, 3), 0.5, dtype=DTYPE)])
    acqf = MarginalLogQEI(
        model,
        [gp],
        [z],
        [1.0],
        base_samples=draw_inner_base_samples(5, 5, seed=0, inner=8),
        estimator="orth",
        X_pending=pending,
    )
    for where, x in _edge_points(model).items():
        X = x.unsqueeze(0).requires_grad_(True)
        with acqf.in_given_order():
            assert torch.autograd.gradcheck(acqf, (X,), eps=1e-6, atol=1e-5), where
