"""orthobench.noise.acquisition_noise: an acquisition's values across rebuilds, as the probe measures them."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from botorch.acquisition import LogExpectedImprovement, qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

from orthobench.noise import AcquisitionNoise, acquisition_noise
from orthobench.probe.metrics import flip_rate, probe_variance, top1_agreement

DTYPE = torch.float64

# qLogNEI with 16 vs 256 scrambled-Sobol function samples (sampler seeded by the rebuild), 16
# rebuilds, at the 32 of 512 random candidates with the highest LogEI of a GP fitted on 12 noisy
# points of a 2-d function: the ratio of mean across-rebuild variances (log scale) was 158, 265,
# 366, 169 and 6858 for data seeds 4, 0, 2, 3 and 1 (QMC beats 1/m; 16 if it were MC's 1/m).
# 12 rebuilds here; 40 is a quarter of the smallest ratio measured.
MIN_VARIANCE_RATIO = 40.0


def _objective(X: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1]) + 0.5 * X[:, 0]


@functools.cache
def _state(seed: int) -> tuple[SingleTaskGP, torch.Tensor, torch.Tensor]:
    """A fitted GP, its inputs and 32 candidates where EI is not tiny (``32 x 1 x 2``)."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(12, 2, generator=gen, dtype=DTYPE)
    Y = (_objective(X) + 0.05 * torch.randn(12, generator=gen, dtype=DTYPE)).unsqueeze(-1)
    model = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    candidates = torch.rand(512, 1, 2, generator=gen, dtype=DTYPE)
    with torch.no_grad():
        log_ei = LogExpectedImprovement(model, best_f=Y.max())(candidates)
    return model, X, candidates[log_ei.argsort(descending=True)[:32]]


def _toy(scale: float = 0.01):
    """``make_acqf`` of a smooth function plus rebuild noise of size ``scale``, q = 1."""

    def make_acqf(r: int):
        noise = torch.randn(8, generator=torch.Generator().manual_seed(r), dtype=DTYPE)
        return lambda X: -(X[..., 0, 0] - 0.3).square() + scale * noise[: X.shape[0]]

    return make_acqf


X_TOY = torch.linspace(0, 1, 8, dtype=DTYPE).reshape(8, 1)


@pytest.mark.parametrize(
    "seed", [0, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)]
)
def test_qlognei_variance_falls_with_mc_samples(seed):
    model, X, candidates = _state(seed)

    def qlognei(samples: int):
        return lambda r: qLogNoisyExpectedImprovement(
            model, X, sampler=SobolQMCNormalSampler(torch.Size([samples]), seed=r), cache_root=False
        )

    few = acquisition_noise(qlognei(16), candidates, rebuilds=12)
    many = acquisition_noise(qlognei(256), candidates, rebuilds=12)
    ratio = few.mean_variance / many.mean_variance
    assert ratio > MIN_VARIANCE_RATIO, f"{ratio=}"
    assert few.values.shape == (12, 32) and few.variance.shape == (32,)


def test_deterministic_acquisition_has_no_noise():
    model, _, candidates = _state(0)
    acqf = LogExpectedImprovement(model, best_f=model.train_targets.max())
    result = acquisition_noise(lambda r: acqf, candidates, rebuilds=4)
    assert result.mean_variance == 0.0
    assert bool((result.variance == 0).all())
    assert result.top1_agreement == 1.0 and result.flip_rate == 0.0
    assert result.top1_interval[0] <= 1.0 == result.top1_interval[1]
    assert result.flip_interval == (0.0, 0.0)


def test_metrics_are_the_probes():
    result = acquisition_noise(_toy(), X_TOY, rebuilds=16, top_k=4, seed=1)
    assert isinstance(result, AcquisitionNoise)
    assert result.values.shape == (16, 8) and result.variance.shape == (8,)
    assert result.mean_variance == probe_variance(result.values)
    np.testing.assert_array_equal(result.variance, result.values.var(axis=0, ddof=1))
    ref = result.values.mean(axis=0)
    np.testing.assert_array_equal(result.reference, ref)
    assert result.reference_is_mean
    assert result.top1_agreement == top1_agreement(result.values, ref)
    assert result.flip_rate == flip_rate(result.values, ref, 4)
    assert "stability, not correctness" in str(result) == result.summary()
    # n x d is n x 1 x d.
    same = acquisition_noise(_toy(), X_TOY.unsqueeze(-2), rebuilds=16, top_k=4, seed=1)
    np.testing.assert_array_equal(same.values, result.values)
    with pytest.raises(AttributeError):
        result.mean_variance = 0.0  # frozen


def test_intervals_contain_the_estimates():
    for scale, reference in ((0.01, None), (0.05, None), (0.01, -np.arange(8.0))):
        result = acquisition_noise(
            _toy(scale), X_TOY, rebuilds=20, top_k=5, reference=reference, confidence=0.9
        )
        low, high = result.top1_interval
        assert 0 <= low <= result.top1_agreement <= high <= 1
        low, high = result.flip_interval
        assert 0 <= low <= result.flip_rate <= high <= 1
        assert result.reference_is_mean == (reference is None)
    assert 0 < result.flip_rate  # the given reference (ascending order) disagrees with the toy
    assert low < high


def test_given_reference_is_used():
    reference = torch.tensor([0.0, 0, 0, 0, 0, 0, 0, 1.0], dtype=DTYPE)
    result = acquisition_noise(_toy(), X_TOY, rebuilds=8, reference=reference)
    assert result.top1_agreement == 0.0  # every rebuild picks x = 0.3, the reference x = 1
    assert result.top1_interval[0] == 0.0 < result.top1_interval[1]
    assert "given reference" in result.summary()


def _one_line_error(call, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_bad_inputs_raise_one_line():
    _one_line_error(lambda: acquisition_noise(_toy(), X_TOY[:, 0]), "n x q x d")
    _one_line_error(lambda: acquisition_noise(_toy(), X_TOY[None, :, None]), "n x q x d")
    _one_line_error(lambda: acquisition_noise(_toy(), X_TOY, rebuilds=1), "rebuilds")
    _one_line_error(lambda: acquisition_noise(_toy(), X_TOY, top_k=1), "top_k")
    _one_line_error(lambda: acquisition_noise(_toy(), X_TOY, confidence=1.0), "confidence")
    _one_line_error(
        lambda: acquisition_noise(lambda r: lambda X: X.sum(-1), X_TOY), r"make_acqf\(0\)"
    )
    _one_line_error(lambda: acquisition_noise(_toy(), X_TOY, reference=np.zeros(3)), "reference")


def test_a_reference_that_ties_orders_only_the_pairs_it_tells_apart():
    """Of the reference ``[0, ..., 0, 1]`` only x = 1 is ranked: its one ordered pair (x = 1
    above x = 0) is reversed in every rebuild (the toy peaks at x = 0.3); the tied pairs of the
    zeros are no flips nor holds. A reference that ranks nothing leaves the rate undefined."""
    reference = torch.tensor([0.0, 0, 0, 0, 0, 0, 0, 1.0], dtype=DTYPE)
    result = acquisition_noise(_toy(), X_TOY, rebuilds=8, reference=reference)
    assert result.flip_rate == 1.0 and result.flip_interval == (1.0, 1.0)
    flat = acquisition_noise(_toy(), X_TOY, rebuilds=8, reference=np.ones(8))
    assert np.isnan(flat.flip_rate) and np.isnan(flat.flip_interval).all()
    assert flat.top1_agreement == 1.0  # every candidate is a best one of the reference


def _counting(make_acqf):
    """``make_acqf`` and the list of the rebuilds it made."""
    made: list[int] = []

    def counted(r: int):
        made.append(r)
        return make_acqf(r)

    return counted, made


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"reference": np.zeros(3)}, "(3,)"),
        ({"reference": np.r_[np.zeros(7), np.nan]}, "nan"),
        ({"top_k": 2.5}, "top_k=2.5"),
        ({"rebuilds": 2.5}, "rebuilds=2.5"),
        ({"seed": -1}, "seed=-1"),
        ({"seed": None}, "seed=None"),
        ({"X": X_TOY[:0]}, "(0, 1, 1)"),
        ({"X": X_TOY.numpy()}, "ndarray"),
    ],
)
def test_bad_arguments_raise_before_any_rebuild(kwargs, shown):
    """Each bad argument is named with its value before the first rebuild (rebuilds can take
    minutes); the reference's shape, a float ``top_k`` and a negative ``seed`` used to fail only
    after all of them, a NaN reference and ``seed=None`` (an unseeded bootstrap) not at all."""
    make_acqf, made = _counting(_toy())
    kwargs = {"X": X_TOY, **kwargs}
    with pytest.raises((ValueError, TypeError)) as info:
        acquisition_noise(make_acqf, **kwargs)
    message = str(info.value)
    assert "\n" not in message and shown in message, message
    assert made == []


@pytest.mark.parametrize("bad", [float("nan"), float("-inf")])
def test_non_finite_values_raise(bad):
    """A NaN or infinite acquisition value has no across-rebuild variance; the metrics came out
    NaN (NaN picked as the argmax) without a word."""

    def make_acqf(r: int):
        acqf = _toy()(r)

        def with_bad(X: torch.Tensor) -> torch.Tensor:
            value = acqf(X).clone()
            value[[2, 5]] = bad
            return value

        return with_bad

    _one_line_error(
        lambda: acquisition_noise(make_acqf, X_TOY), r"make_acqf\(0\).*2 non-finite.*\[2, 5\]"
    )


def test_seed_reproduces_and_leaves_the_global_generators_alone():
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()[1].copy()
    a = acquisition_noise(_toy(0.05), X_TOY, rebuilds=12, top_k=5, seed=7)
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_state)
    b = acquisition_noise(_toy(0.05), X_TOY, rebuilds=12, top_k=5, seed=7)
    assert a.flip_interval == b.flip_interval


def test_array_like_values_are_read_as_tensors():
    """``make_acqf``'s callable may give a NumPy array or a list, as documented ("any callable
    mapping candidates to n values"): those raised an AttributeError (no ``.detach``). They are
    read in float64, so the result is the tensor one's to the bit."""
    expected = acquisition_noise(_toy(), X_TOY, rebuilds=4)

    def as_numpy(r: int):
        return lambda X: _toy()(r)(X).numpy()

    def as_list(r: int):
        return lambda X: _toy()(r)(X).tolist()

    for make_acqf in (as_numpy, as_list):
        result = acquisition_noise(make_acqf, X_TOY, rebuilds=4)
        np.testing.assert_array_equal(result.values, expected.values)
    # Not in X's dtype: float32 candidates would round float64 values (1e-9 apart here).
    rows = 0.1 + 1e-9 * np.arange(32.0).reshape(4, 8)
    result = acquisition_noise(lambda r: lambda X: rows[r], X_TOY.float(), rebuilds=4)
    np.testing.assert_array_equal(result.values, rows)


def test_values_of_the_wrong_shape_or_kind_raise_one_line():
    """A float for several candidates gets the shape error (it was an AttributeError), and
    values that are no numbers name their type."""
    _one_line_error(
        lambda: acquisition_noise(lambda r: lambda X: 0.5, X_TOY), r"make_acqf\(0\).*\(8,\).*\(\)"
    )
    _one_line_error(
        lambda: acquisition_noise(lambda r: lambda X: np.zeros((8, 1)), X_TOY), r"\(8, 1\)"
    )
    with pytest.raises(TypeError, match=r"make_acqf\(0\).*NoneType") as info:
        acquisition_noise(lambda r: lambda X: None, X_TOY)
    assert "\n" not in str(info.value)
