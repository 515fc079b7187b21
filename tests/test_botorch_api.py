"""orthobench.botorch.marginal_log_ei: OrthoBO's marginal log-EI of a user's fitted SingleTaskGP."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from botorch.acquisition import LogExpectedImprovement
from botorch.exceptions.errors import UnsupportedError
from botorch.exceptions.warnings import InputDataWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.models.transforms.outcome import ChainedOutcomeTransform, Log, Standardize
from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior
from botorch.optim import optimize_acqf
from gpytorch.kernels import MaternKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from orthobench.acquisition import MarginalLogEI, MarginalLogQEI
from orthobench.botorch import marginal_log_ei
from orthobench.surrogates.laplace import laplace_posterior

DTYPE = torch.float64
BOUNDS = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=DTYPE)

# Tight-posterior check (test_approaches_log_ei_at_the_map): with 80 points of a smooth 2-d
# function, q(theta) is narrow and E_q[EI] is close to EI at the MAP where EI is not tiny. With
# best_f the median target and the candidates where BoTorch's LogEI > 0 (EI above one outcome
# unit; 19-30 of 64 random candidates), the largest |marginal - LogEI| over 5 data seeds was
# 0.0017-0.0125 at S = 512 and the same to 1e-3 at S = 64 (the tests' budget: the gap is the
# Laplace width, not MC noise); with 10 points it was 0.03-0.21. 0.03 is 2.4 times the largest
# gap at 80 points.
TIGHT_TOL = 0.03


def _objective(X: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1]) + 0.5 * X[:, 0]


def _fit(n: int, seed: int, **kwargs) -> tuple[SingleTaskGP, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen, dtype=DTYPE)
    Y = 10 * _objective(X) + 3 + 0.1 * torch.randn(n, generator=gen, dtype=DTYPE)
    model = SingleTaskGP(X, Y.unsqueeze(-1), **kwargs)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model, X, Y.unsqueeze(-1)


@pytest.fixture(scope="module")
def small():
    return _fit(12, 0)


def _candidates(seed: int, n: int = 64) -> torch.Tensor:
    return torch.rand(n, 1, 2, generator=torch.Generator().manual_seed(100 + seed), dtype=DTYPE)


def test_importing_it_leaves_botorch_itself():
    import botorch

    import orthobench.botorch as api

    assert api.__name__ == "orthobench.botorch"
    assert Path(botorch.__file__).parent.name == "botorch"
    assert Path(botorch.__file__).parent.parent != Path(api.__file__).parent.parent
    assert sys.modules["botorch"] is botorch


def test_shapes(small):
    model, X, _ = small
    acqf = marginal_log_ei(model, theta_samples=32, seed=0)
    assert isinstance(acqf, MarginalLogEI)
    assert acqf(X[:5].unsqueeze(-2)).shape == (5,)
    assert acqf(X[:6].reshape(2, 3, 1, 2)).shape == (2, 3)
    assert acqf(X[:1]).shape == (1,)  # 1 x d read as one batch of q = 1
    qacqf = marginal_log_ei(model, theta_samples=16, q=2, seed=0)
    assert isinstance(qacqf, MarginalLogQEI)
    assert qacqf(X[:6].reshape(3, 2, 2)).shape == (3,)
    assert qacqf(X[:3].unsqueeze(-2)).shape == (3,)  # q' = 1 <= q
    pending = marginal_log_ei(model, theta_samples=16, q=2, seed=0, X_pending=X[:1])
    assert pending.base_samples.shape[-1] == 3
    assert pending(X[:4].reshape(2, 2, 2)).shape == (2,)


def _gap_to_log_ei(model, Y, X) -> tuple[float, int]:
    """Largest |marginal log-EI - BoTorch's LogEI at the MAP| over the candidates where LogEI
    is positive, and how many those are (incumbent: the median target)."""
    best_f = float(Y.median())
    with torch.no_grad():
        ref = LogExpectedImprovement(model, best_f=best_f)(X)
        value = marginal_log_ei(model, theta_samples=64, best_f=best_f, seed=0)(X)
    where = ref > 0
    return float((value - ref)[where].abs().max()), int(where.sum())


@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]
)
def test_approaches_log_ei_at_the_map(seed):
    model, _, Y = _fit(80, seed)
    gap, where = _gap_to_log_ei(model, Y, _candidates(seed))
    assert where >= 10
    assert gap < TIGHT_TOL, f"{gap=}"
    if seed == 0:
        # With little data the Laplace posterior is wide and the marginal differs (0.107).
        model, _, Y = _fit(10, seed)
        assert _gap_to_log_ei(model, Y, _candidates(seed))[0] > TIGHT_TOL


def test_best_f_is_in_original_units(small):
    model, X, Y = small
    Xc = X.unsqueeze(-2)
    with torch.no_grad():
        default = marginal_log_ei(model, theta_samples=32, seed=3)(Xc)
        given = marginal_log_ei(model, theta_samples=32, seed=3, best_f=Y.max())(Xc)
    # None is the best training target: the conversion to the standardized scale is exact.
    torch.testing.assert_close(given, default, rtol=0, atol=1e-9)
    # A lower incumbent raises every value.
    with torch.no_grad():
        lower = marginal_log_ei(model, theta_samples=32, seed=3, best_f=float(Y.median()))(Xc)
    assert bool((lower > default).all())
    with pytest.raises(ValueError, match="scalar"):
        marginal_log_ei(model, theta_samples=32, seed=3, best_f=Y[:2])


def test_model_without_outcome_transform():
    # Values in original units either way: without Standardize the draws work on raw targets.
    model, _, Y = _fit(80, 0, outcome_transform=None)
    gap, where = _gap_to_log_ei(model, Y, _candidates(0))
    assert where >= 10
    assert gap < TIGHT_TOL


@pytest.mark.parametrize("q", [1, 2])
def test_optimize_acqf(small, q):
    model, _, _ = small
    acqf = marginal_log_ei(model, theta_samples=32, q=q, seed=0)
    candidate, value = optimize_acqf(acqf, BOUNDS, q=q, num_restarts=2, raw_samples=32)
    assert candidate.shape == (q, 2)
    assert bool(((candidate >= 0) & (candidate <= 1)).all())
    assert torch.isfinite(value).all()
    if q == 2:
        assert float((candidate[0] - candidate[1]).norm()) > 1e-3


def test_seeds_reproduce(small):
    model, X, _ = small
    Xc = X.unsqueeze(-2)
    lap = laplace_posterior(model)
    for q, Xq in ((1, Xc), (2, X[:8].reshape(4, 2, 2))):
        with torch.no_grad():
            a = marginal_log_ei(model, theta_samples=16, q=q, seed=5)(Xq)
            b = marginal_log_ei(model, theta_samples=16, q=q, seed=5, laplace=lap)(Xq)
            c = marginal_log_ei(model, theta_samples=16, q=q, seed=6)(Xq)
        assert torch.equal(a, b)
        assert not torch.equal(a, c)
    torch.manual_seed(0)
    with torch.no_grad():
        a = marginal_log_ei(model, theta_samples=16)(Xc)
    torch.manual_seed(0)
    with torch.no_grad():
        b = marginal_log_ei(model, theta_samples=16)(Xc)
    assert torch.equal(a, b)  # seed=None draws its seed from torch's global generator


@pytest.mark.parametrize("estimator", ["qmc-owen+rb", "sr3"])
def test_numpy_integers_give_the_values_of_python_ints(small, estimator):
    """The argument check accepts numpy integers, but a numpy ``seed`` raised ``TypeError: an
    integer is required`` in torch's generator, and a numpy ``theta_samples`` was refused by a
    point set as ``n_evaluations``; a numpy seed would also hash to other base samples
    (``derive_seed`` reads its repr). They are read as the ints they hold."""
    model, X, _ = small
    for q, Xq in ((1, X.unsqueeze(-2)), (2, X[:8].reshape(4, 2, 2))):
        with torch.no_grad():
            expected = marginal_log_ei(model, theta_samples=16, q=q, seed=3, estimator=estimator)
            given = marginal_log_ei(
                model,
                theta_samples=np.int64(16),
                q=np.int64(q),
                seed=np.int64(3),
                estimator=estimator,
            )
            assert torch.equal(given(Xq), expected(Xq))


def test_no_pending_rows_are_no_pending_points(small):
    """A ``0 x d`` ``X_pending`` is no pending points, as ``Optimizer.ask`` reads an empty array:
    it raised a reshape error at the first evaluation (and was refused at ``q = 1``)."""
    model, X, _ = small
    none = torch.zeros(0, 2, dtype=DTYPE)
    for q, Xq in ((1, X.unsqueeze(-2)), (2, X[:8].reshape(4, 2, 2))):
        with torch.no_grad():
            expected = marginal_log_ei(model, theta_samples=16, q=q, seed=0)(Xq)
            acqf = marginal_log_ei(model, theta_samples=16, q=q, seed=0, X_pending=none)
            assert acqf.X_pending is None
            assert torch.equal(acqf(Xq), expected)
    q2 = marginal_log_ei(model, theta_samples=16, q=2, seed=0)
    q2.set_X_pending(none)  # set after construction too (BoTorch's hook)
    with torch.no_grad():
        assert q2.X_pending is None and torch.equal(q2(X[:8].reshape(4, 2, 2)), expected)
    q1 = marginal_log_ei(model, theta_samples=16, seed=0)
    q1.set_X_pending(none)  # none, as at construction; a point is still refused
    with pytest.raises(UnsupportedError, match="X_pending"):
        q1.set_X_pending(X[:1])
    message = _one_line_error(
        lambda: marginal_log_ei(model, q=2, X_pending=torch.zeros(0, 3, dtype=DTYPE))
    )
    assert "(0, 3)" in message


def test_too_few_base_sample_columns_name_the_q_to_build_with(small):
    """``q`` must cover the largest batch, pending points included, beyond the ``X_pending``
    given to ``marginal_log_ei``; the error said how many columns were missing, not the ``q``
    that has them."""
    model, X, _ = small
    acqf = marginal_log_ei(model, theta_samples=16, q=2, seed=0)
    with pytest.raises(ValueError, match=r"3 base-sample columns.*marginal_log_ei\(\.\.\., q=3\)"):
        optimize_acqf(acqf, BOUNDS, q=3, num_restarts=2, raw_samples=16, sequential=True)
    acqf.set_X_pending(X[:2])  # two pending points beyond none given: a pair needs q = 4
    assert "q=4" in _one_line_error(lambda: acqf(X[2:4].unsqueeze(0)))
    pending = marginal_log_ei(model, theta_samples=16, q=2, seed=0, X_pending=X[:1])
    assert "q=3" in _one_line_error(lambda: pending(X[1:4].unsqueeze(0)))
    # q = 3 with the same X_pending has the columns for optimize_acqf's q = 3.
    pending = marginal_log_ei(model, theta_samples=16, q=3, seed=0, X_pending=X[:1])
    candidate, _ = optimize_acqf(
        pending, BOUNDS, q=3, num_restarts=2, raw_samples=16, sequential=True
    )
    assert candidate.shape == (3, 2)


def _one_line_error(build) -> str:
    with pytest.raises(ValueError) as info:
        build()
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_unsupported_models_raise_one_line(small):
    model, X, Y = small
    assert "train_Yvar" in _one_line_error(
        lambda: marginal_log_ei(SingleTaskGP(X, Y, train_Yvar=torch.full_like(Y, 0.01)))
    )
    assert "Normalize" in _one_line_error(
        lambda: marginal_log_ei(SingleTaskGP(X, Y, input_transform=Normalize(d=2)))
    )
    assert "Log" in _one_line_error(
        lambda: marginal_log_ei(SingleTaskGP(X, Y, outcome_transform=Log()))
    )
    chained = ChainedOutcomeTransform(log=Log(), standardize=Standardize(m=1))  # a nested repr
    assert "ChainedOutcomeTransform" in _one_line_error(
        lambda: marginal_log_ei(SingleTaskGP(X, Y, outcome_transform=chained))
    )
    assert "Matern-5/2" in _one_line_error(
        lambda: marginal_log_ei(SingleTaskGP(X, Y, covar_module=MaternKernel(nu=1.5)))
    )
    assert "SingleTaskGP" in _one_line_error(lambda: marginal_log_ei(object()))
    other = SingleTaskGP(X[:6], Y[:6])  # another model (unfitted: its Laplace is another)
    assert "laplace" in _one_line_error(
        lambda: marginal_log_ei(model, laplace=laplace_posterior(other))
    )
    assert "q" in _one_line_error(lambda: marginal_log_ei(model, q=0))


def test_a_laplace_posterior_of_other_data_is_refused(small):
    """A model that kept its hyperparameters over new data (a BO loop without a refit) has
    another posterior: reusing the old one gave other values without an error."""
    model, X, Y = small
    laplace = laplace_posterior(model)
    more_x = torch.cat([X, X[:3] * 0.5])
    more = SingleTaskGP(more_x, torch.cat([Y, Y[:3]]))
    more.load_state_dict(
        {k: v for k, v in model.state_dict().items() if not k.startswith("outcome_transform")},
        strict=False,
    )
    more.eval()
    assert laplace.is_of(model) and not laplace.is_of(more)
    assert "training data" in _one_line_error(lambda: marginal_log_ei(more, laplace=laplace))


def test_a_kernel_on_some_input_dimensions_is_refused(small):
    """The closed-form kernels act on every input column: a kernel on a subset (``active_dims``)
    was read as one on all of them, giving other values than the model's (off by up to 7.8 in
    log-EI at 80 points, where supported models are within 0.004), so it is refused."""
    model, X, Y = small
    subset = get_covar_module_with_dim_scaled_prior(ard_num_dims=1, active_dims=[1])
    message = _one_line_error(lambda: marginal_log_ei(SingleTaskGP(X, Y, covar_module=subset)))
    assert "active_dims" in message and "[1]" in message
    # Every dimension in order is the kernel without active_dims: as the fitted default model.
    every = get_covar_module_with_dim_scaled_prior(ard_num_dims=2, active_dims=[0, 1])
    same = SingleTaskGP(X, Y, covar_module=every)
    same.load_state_dict(model.state_dict(), strict=False)  # all but its active_dims buffer
    Xc = X.unsqueeze(-2)
    with torch.no_grad():
        expected = marginal_log_ei(model, theta_samples=16, seed=0)(Xc)
        torch.testing.assert_close(marginal_log_ei(same, theta_samples=16, seed=0)(Xc), expected)


def test_q1_acquisition_refuses_pending_points(small):
    """The ``q = 1`` acquisition has no pending points: it refuses them as BoTorch's analytic
    acquisitions do. It used to store and ignore them, so a sequential-greedy ``optimize_acqf``
    (which reads ``acqf.X_pending``) failed with an AttributeError, and a caller's
    ``set_X_pending`` was silently dropped."""
    model, X, _ = small
    acqf = marginal_log_ei(model, theta_samples=16, seed=0)
    with pytest.raises(UnsupportedError, match=r"q = 1.*q=2"):
        acqf.set_X_pending(X[:1])
    assert acqf.X_pending is None
    acqf.set_X_pending(None)  # optimize_acqf resets it to the base value
    with pytest.raises(UnsupportedError, match="X_pending"):
        optimize_acqf(acqf, BOUNDS, q=2, num_restarts=2, raw_samples=16, sequential=True)


def test_sequential_optimize_acqf_at_q_above_1(small):
    model, X, _ = small
    acqf = marginal_log_ei(model, theta_samples=16, q=3, seed=0, X_pending=X[:1])
    candidate, _ = optimize_acqf(acqf, BOUNDS, q=3, num_restarts=2, raw_samples=16, sequential=True)
    assert candidate.shape == (3, 2)
    assert torch.equal(acqf.X_pending, X[:1])  # the base pending points are restored


@pytest.mark.parametrize("q", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_candidates_of_another_dtype_than_the_models(small, dtype, q):
    """A float32 model (fitted on ``torch.rand`` data) on float64 candidates (the bounds of
    BoTorch's tutorials), and the reverse, are cast as BoTorch's LogEI casts them: the q = 1
    acquisition raised a dtype mismatch on a float32 model, the batch one on a float64 model."""
    model, X, Y = small
    if dtype == torch.float32:
        with pytest.warns(InputDataWarning, match="float32"):
            model = SingleTaskGP(X.float(), Y.float())
        model.load_state_dict(small[0].state_dict())
    other = torch.float64 if dtype == torch.float32 else torch.float32
    acqf = marginal_log_ei(model, theta_samples=16, q=q, seed=0)
    Xq = X[:6].reshape(-1, q, 2).to(other)
    with torch.no_grad():
        torch.testing.assert_close(acqf(Xq), acqf(Xq.to(dtype)), rtol=0, atol=0)
    candidate, value = optimize_acqf(acqf, BOUNDS.to(other), q=q, num_restarts=2, raw_samples=16)
    assert candidate.shape == (q, 2) and torch.isfinite(value).all()


@pytest.mark.parametrize("q", [1, 2])
def test_a_conversion_is_refused_before_it_converts_the_model(small, q):
    """``.to``, ``.half()``, ... convert a module's parameters and buffers, not the draws the
    acquisition holds: the q = 1 one kept its float64 draws and values and converted the user's
    model to float32 in place, the batch one then raised a dtype mismatch. A conversion that
    changes nothing is allowed."""
    model = copy.deepcopy(small[0])
    state = {k: v.clone() for k, v in model.state_dict().items()}
    acqf = marginal_log_ei(model, theta_samples=16, q=q, seed=0)
    Xq = small[1][:4].reshape(-1, q, 2)
    with torch.no_grad():
        before = acqf(Xq)
    for convert in (lambda a: a.to(torch.float32), lambda a: a.half(), lambda a: a.to("meta")):
        with pytest.raises(UnsupportedError, match="build it on a model of that dtype and device"):
            convert(acqf)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, state[key], rtol=0, atol=0)
    assert acqf.double() is acqf and acqf.to(DTYPE).cpu() is acqf
    with torch.no_grad():
        torch.testing.assert_close(acqf(Xq), before, rtol=0, atol=0)


@pytest.mark.parametrize("q", [1, 2])
def test_gradient_matches_finite_differences(small, q):
    model, _, _ = small
    acqf = marginal_log_ei(model, theta_samples=16, q=q, seed=0)
    Xq = torch.rand(3, q, 2, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    assert torch.autograd.gradcheck(acqf, (Xq.requires_grad_(),), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"theta_samples": 0}, "theta_samples=0"),
        ({"theta_samples": 2.5}, "theta_samples=2.5"),
        ({"alpha": 0.0}, "alpha=0.0"),
        ({"q": 1.5}, "q=1.5"),
        ({"best_f": float("nan")}, "best_f=nan"),
        ({"best_f": float("inf")}, "best_f=inf"),
        ({"q": 2, "X_pending": torch.zeros(2, dtype=DTYPE)}, "(2,)"),
        ({"q": 2, "X_pending": torch.zeros(1, 3, dtype=DTYPE)}, "(1, 3)"),
        ({"X_pending": torch.zeros(1, 2, dtype=DTYPE)}, "(1, 2)"),
        ({"seed": 1.5}, "seed=1.5"),
        # OrthoBOSampler's bound and words (10**7 draws ran out of memory).
        ({"theta_samples": 10**7}, "must be less than or equal to 65536, but got int 10000000."),
        # Refused after the Laplace posterior, or at the first evaluation, as S or n.
        ({"theta_samples": 1, "estimator": "orth"}, "theta_samples=1"),
        ({"theta_samples": 3, "estimator": "orth-crossfit"}, "theta_samples=3"),
        ({"theta_samples": 3, "estimator": "mc@antithetic"}, "must be even"),
        ({"estimator": "orthh"}, "unknown estimator 'orthh'"),
    ],
)
def test_bad_arguments_raise_one_line_before_any_work(small, monkeypatch, kwargs, shown):
    """Each bad argument is named with its value before the Laplace posterior (a Hessian) is
    computed; ``theta_samples`` used to be reported as ``n_evaluations`` after it, a wrong-width
    ``X_pending`` only at the first evaluation and a NaN ``best_f`` not at all (NaN values)."""
    model, _, _ = small

    def no_work(*args, **kw):
        raise AssertionError("the Laplace posterior was computed before the arguments were checked")

    monkeypatch.setattr("orthobench.botorch.laplace_posterior", no_work)
    message = _one_line_error(lambda: marginal_log_ei(model, **{"seed": 0, **kwargs}))
    assert shown in message, message
    assert next(iter(kwargs)) in message or "X_pending" in message


def test_a_point_set_keeps_its_whole_rule_under_a_small_budget(small):
    """As documented: a point-set estimator uses at least one whole rule, so under a budget
    smaller than the rule it evaluates more draws than ``theta_samples``."""
    from orthobench.pointsets import point_count

    model, _, _ = small
    acqf = marginal_log_ei(model, theta_samples=2, estimator="sr3", seed=0)
    p = laplace_posterior(model).p
    assert acqf.members[0].num_samples == point_count("sr3", p, 2) > 2


def test_laplace_posterior_is_public_beside_marginal_log_ei():
    """``marginal_log_ei(laplace=laplace_posterior(model))`` named an internal module's function
    (the tutorial imported it from orthobench.surrogates.laplace)."""
    import orthobench.botorch as public

    assert set(public.__all__) == {"laplace_posterior", "marginal_log_ei"}
    assert public.laplace_posterior is laplace_posterior
