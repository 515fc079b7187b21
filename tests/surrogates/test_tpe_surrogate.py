"""The TPE surrogate's numerics on degenerate histories (:mod:`orthobench.surrogates.tpe`)."""

from __future__ import annotations

import pytest
import torch

from orthobench.surrogates.tpe import bootstrap_indices, fit_tpe

SETTINGS = dict(gamma=0.2, magic_clip=False, prior_weight=1.0)


@pytest.mark.parametrize("min_bandwidth", [0.0, -0.1, 1.5])
def test_a_bandwidth_floor_outside_0_1_is_refused_with_its_value(min_bandwidth: float) -> None:
    """With a floor of 0, a resample of one repeated point has bandwidth 0 and every log ratio
    was NaN; a floor above 1 was silently lowered to 1 by the clamp."""
    x = torch.full((6, 2), 0.3, dtype=torch.float64)
    y = torch.arange(6, dtype=torch.float64)
    with pytest.raises(ValueError, match=f"min_bandwidth={min_bandwidth}"):
        fit_tpe(x, y, torch.arange(6)[None], min_bandwidth=min_bandwidth, **SETTINGS)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    ("n", "d", "kind"),
    [
        (2, 1, "random"),
        (2, 3, "duplicates"),
        (10, 50, "random"),
        (20, 2, "corners"),
        (20, 2, "ties"),
    ],
)
def test_degenerate_histories_give_finite_ratios_and_samples_in_the_cube(
    n: int, d: int, kind: str, dtype: torch.dtype
) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(n, d, generator=gen, dtype=torch.float64)
    y = torch.rand(n, generator=gen, dtype=torch.float64)
    if kind == "duplicates":
        x[:] = x[0]
    elif kind == "corners":
        x[:] = 0.0
        x[::2] = 1.0
    elif kind == "ties":
        y[:] = 1.0
    x, y = x.to(dtype), y.to(dtype)
    fits = fit_tpe(
        x,
        y,
        bootstrap_indices(n, 8, torch.Generator().manual_seed(1)),
        min_bandwidth=1e-3,
        **SETTINGS,
    )
    candidates = torch.cat([torch.rand(32, d, generator=gen, dtype=torch.float64).to(dtype), x])
    assert torch.isfinite(fits.log_ratio(candidates)).all()
    assert torch.isfinite(fits.summary_statistics()).all()
    draws = fits.good.sample(torch.arange(8).repeat(4), torch.Generator().manual_seed(2))
    assert draws.dtype == dtype and ((draws >= 0) & (draws <= 1)).all()
