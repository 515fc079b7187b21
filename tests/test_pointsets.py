"""Point sets for E[f(z)], z ~ N(0, I_p): exactness, unbiasedness, Haar rotations, budgets, seeds,
devices and dtypes."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy import stats
from scipy.stats import qmc

from orthobench.exceptions import OrthobenchWarning, RegistryError
from orthobench.pointsets import (
    POINT_SETS,
    PointSet,
    antithetic_points,
    cross_polytope,
    iid_points,
    owen_sobol_points,
    point_count,
    point_set,
    radial_points,
    random_rotation,
    regular_simplex,
    sobol_points,
    sr3_points,
    unscented_points,
)

SEEDS = (0, 1, 2, 3, 4)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _multi_indices(p: int, degrees: range | list[int]) -> torch.Tensor:
    """All exponent vectors alpha (M x p) with |alpha| in ``degrees``."""
    rows = []
    for d in degrees:
        for combo in itertools.combinations_with_replacement(range(p), d):
            alpha = [0] * p
            for i in combo:
                alpha[i] += 1
            rows.append(alpha)
    return torch.tensor(rows, dtype=torch.float64)


def _double_factorial(n: int) -> int:
    return math.prod(range(n, 0, -2)) if n > 0 else 1


def _gaussian_moments(alphas: torch.Tensor) -> torch.Tensor:
    """E[z^alpha] for z ~ N(0, I): prod_i (alpha_i - 1)!! if all alpha_i are even, else 0."""
    out = []
    for alpha in alphas.long().tolist():
        out.append(
            0.0
            if any(a % 2 for a in alpha)
            else float(math.prod(_double_factorial(a - 1) for a in alpha))
        )
    return torch.tensor(out, dtype=torch.float64)


def _moment_errors(ps: PointSet, alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """|estimate - exact| per monomial and a rounding tolerance (scaled by sum_s |w_s m(z_s)|),
    computed on the device of the points."""
    alphas = alphas.to(ps.z.device)
    values = (ps.z[:, None, :] ** alphas[None]).prod(-1)  # S x M
    estimate = ps.integrate(values)
    scale = ps.weights.abs() @ values.abs()
    exact = _gaussian_moments(alphas).to(estimate.device)
    return (estimate - exact).abs(), 1e-10 * (1.0 + scale)


def _assert_exact(ps: PointSet, alphas: torch.Tensor) -> None:
    err, tol = _moment_errors(ps, alphas)
    worst = int(torch.argmax(err - tol))
    assert bool((err <= tol).all()), (
        f"{ps.name}: monomial {alphas[worst].long().tolist()} off by {err[worst]:.3g} (tol {tol[worst]:.3g})"
    )


def _assert_not_exact(ps: PointSet, alphas: torch.Tensor) -> None:
    """Sensitivity control: some monomial of the given degree is visibly missed."""
    err, _ = _moment_errors(ps, alphas)
    assert float(err.max()) > 1e-3, (
        f"{ps.name}: unexpectedly exact, max error {float(err.max()):.3g}"
    )


# --- exactness ---------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 3, 8])
@pytest.mark.parametrize("directions", ["simplex", "cross"])
def test_sr3_exact_to_degree_3_for_every_draw(p: int, directions: str) -> None:
    alphas = _multi_indices(p, range(0, 4))  # 1, z_i, z_i z_j, z_i^2, z_i^3, z_i^2 z_j, z_i z_j z_k
    for seed in SEEDS:
        for n_rules in (1, 3):
            ps = sr3_points(p, n_rules, generator=_gen(seed), directions=directions)
            _assert_exact(ps, alphas)
    # A random polynomial of degree 3 (linear combination of all monomials).
    coef = torch.randn(alphas.shape[0], generator=_gen(99), dtype=torch.float64)
    ps = sr3_points(p, 2, generator=_gen(7), directions=directions)
    poly = (ps.z[:, None, :] ** alphas[None]).prod(-1) @ coef
    assert float(ps.integrate(poly)) == pytest.approx(
        float(_gaussian_moments(alphas) @ coef), abs=1e-9
    )
    if p > 1:
        _assert_not_exact(
            sr3_points(p, 1, generator=_gen(0), directions=directions), _multi_indices(p, [4])
        )


@pytest.mark.parametrize("p", [3, 8])
def test_radial_cross_exact_to_degree_3_and_all_odd(p: int) -> None:
    for seed in SEEDS:
        for n_radii in (1, 2, 5):
            ps = radial_points(p, n_radii, generator=_gen(seed), directions="cross")
            assert ps.exact_degree == 3
            _assert_exact(ps, _multi_indices(p, range(0, 4)))
            _assert_exact(ps, _multi_indices(p, [5]))  # odd: antipodal points
    _assert_not_exact(
        radial_points(p, 3, generator=_gen(0), directions="cross"), _multi_indices(p, [4])
    )


@pytest.mark.parametrize("p", [3, 8])
def test_radial_simplex_exact_to_degree_2(p: int) -> None:
    for seed in SEEDS:
        for n_radii in (1, 2, 5):
            ps = radial_points(p, n_radii, generator=_gen(seed), directions="simplex", n_rules=2)
            assert ps.exact_degree == 2
            _assert_exact(ps, _multi_indices(p, range(0, 3)))
    _assert_not_exact(radial_points(p, 3, generator=_gen(0)), _multi_indices(p, [3]))


@pytest.mark.parametrize("p", [3, 8])
def test_unscented_and_antithetic_exactness(p: int) -> None:
    for seed in SEEDS:
        ps = unscented_points(p, 2, generator=_gen(seed))
        _assert_exact(ps, _multi_indices(p, [0, 1, 2, 3, 5]))
        assert torch.allclose(
            ps.z.norm(dim=-1), torch.full((ps.n_points,), math.sqrt(p), dtype=torch.float64)
        )
        _assert_exact(antithetic_points(p, 4, generator=_gen(seed)), _multi_indices(p, [0, 1, 3]))
    # Biased: E[z_1^4] = 3 is not reproduced by a rotated sigma-point set.
    _assert_not_exact(unscented_points(p, 1, generator=_gen(0)), _multi_indices(p, [4]))


def test_spherical_designs() -> None:
    for p in (1, 2, 3, 8):
        v = regular_simplex(p)
        assert v.shape == (p + 1, p)
        assert torch.allclose(v.norm(dim=-1), torch.ones(p + 1, dtype=torch.float64))
        assert torch.allclose(v.sum(0), torch.zeros(p, dtype=torch.float64), atol=1e-12)
        gram = v @ v.T
        off = gram[~torch.eye(p + 1, dtype=torch.bool)]
        assert torch.allclose(off, torch.full_like(off, -1.0 / p))
        assert torch.allclose(v.T @ v / (p + 1), torch.eye(p, dtype=torch.float64) / p)
        c = cross_polytope(p)
        assert c.shape == (2 * p, p)
        assert torch.allclose(c.T @ c / (2 * p), torch.eye(p, dtype=torch.float64) / p)


# --- unbiasedness ------------------------------------------------------------------------------


def _exp_integrand(z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return torch.exp(z @ a)


@pytest.mark.parametrize("p", [3, 8])
@pytest.mark.parametrize("directions", ["simplex", "cross"])
def test_sr3_unbiased_for_exponential(p: int, directions: str) -> None:
    """E[exp(a'z)] = exp(|a|^2 / 2); the mean of K independent rules lies within 3 standard errors."""
    a = torch.linspace(-1.0, 1.0, p, dtype=torch.float64)
    a = 0.9 * a / a.norm()
    truth = math.exp(float(a @ a) / 2)
    n_rules = 4000
    ps = sr3_points(p, n_rules, generator=_gen(123), directions=directions)
    f = _exp_integrand(ps.z, a)
    # Split the shared centre back into per-rule estimates: rule k's outer weight is
    # K * sum(block weights) = p / rho_k^2, its centre weight 1 - p / rho_k^2.
    m = ps.points_per_rule
    block_w = ps.weights[1:].reshape(n_rules, m) * n_rules
    outer = block_w.sum(-1)
    rules = (1.0 - outer) * f[0] + (block_w * f[1:].reshape(n_rules, m)).sum(-1)
    assert float(rules.mean()) == pytest.approx(float(ps.integrate(f)), rel=1e-10)
    assert float(outer.mean()) == pytest.approx(
        1.0, abs=5 * float(outer.std()) / math.sqrt(n_rules)
    )
    se = float(rules.std()) / math.sqrt(n_rules)
    assert abs(float(rules.mean()) - truth) < 3 * se, (float(rules.mean()), truth, se)
    # Cubature beats plain MC per evaluation on this smooth integrand.
    mc_var_per_eval = math.exp(2 * float(a @ a)) - truth**2
    assert float(rules.var()) / (m + 1) < mc_var_per_eval


@pytest.mark.parametrize("name", ["iid", "antithetic", "qmc-sobol", "qmc-owen"])
def test_mc_and_qmc_unbiased_for_exponential(name: str) -> None:
    p, reps = 3, 300
    a = torch.tensor([0.6, -0.3, 0.5], dtype=torch.float64)
    truth = math.exp(float(a @ a) / 2)
    gen = _gen(5)
    estimates = []
    for _ in range(reps):
        ps = point_set(name, p, 16, gen)
        estimates.append(ps.integrate(_exp_integrand(ps.z, a)))
    est = torch.stack(estimates)
    se = float(est.std()) / math.sqrt(reps)
    assert abs(float(est.mean()) - truth) < 3 * se


# --- Haar rotations ----------------------------------------------------------------------------


@pytest.mark.parametrize("p", [3, 8])
def test_random_rotation_is_haar(p: int) -> None:
    n = 4000
    q = random_rotation(p, n, generator=_gen(2024))
    assert q.shape == (n, p, p)
    eye = torch.eye(p, dtype=torch.float64).expand(n, p, p)
    assert torch.allclose(q.transpose(-1, -2) @ q, eye, atol=1e-12)
    # Q e_1 (and Q e_p) is uniform on the sphere: its first coordinate u has (u + 1) / 2 ~
    # Beta((p-1)/2, (p-1)/2), and every coordinate has mean 0 and variance 1/p.
    beta = stats.beta((p - 1) / 2, (p - 1) / 2)
    for col in (0, p - 1):
        v = q[:, :, col]
        assert stats.kstest(((v[:, 0] + 1) / 2).numpy(), beta.cdf).pvalue > 1e-3
        assert float(v.mean(0).abs().max()) < 4 / math.sqrt(n * p)
        assert torch.allclose(
            v.pow(2).mean(0), torch.full((p,), 1.0 / p, dtype=torch.float64), atol=0.05 / p * 4
        )
    # Rows too (Haar is invariant on both sides): Q^T e_1.
    assert stats.kstest(((q[:, 0, 1] + 1) / 2).numpy(), beta.cdf).pvalue > 1e-3
    single = random_rotation(p, generator=_gen(0))
    assert single.shape == (p, p)


def test_sr3_radius_is_chi_p_plus_2() -> None:
    p, n_rules = 4, 3000
    ps = sr3_points(p, n_rules, generator=_gen(11))
    radii = ps.z[1:].norm(dim=-1).reshape(n_rules, ps.points_per_rule)
    assert torch.allclose(radii, radii[:, :1].expand_as(radii))
    assert stats.kstest(radii[:, 0].numpy(), stats.chi(p + 2).cdf).pvalue > 1e-3


# --- QMC ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", [sobol_points, owen_sobol_points])
def test_scrambled_sobol_keeps_net_structure(build) -> None:
    m, p = 6, 4
    n = 2**m
    u = torch.special.ndtr(build(p, n, generator=_gen(3)).z)
    for j in range(p):  # every coordinate: one point per interval [k/n, (k+1)/n)
        assert sorted(torch.floor(u[:, j] * n).long().tolist()) == list(range(n))
    for a in range(m + 1):  # Sobol' dims 1, 2 form a (0, m, 2)-net: one point per 2^a x 2^(m-a) box
        cells = (
            torch.floor(u[:, 0] * 2**a).long() * 2 ** (m - a)
            + torch.floor(u[:, 1] * 2 ** (m - a)).long()
        )
        assert cells.unique().numel() == n


def test_owen_scrambled_points_are_uniform() -> None:
    gen = _gen(8)
    first = torch.stack(
        [torch.special.ndtr(owen_sobol_points(2, 4, generator=gen).z[0]) for _ in range(400)]
    )
    for j in range(2):
        assert stats.kstest(first[:, j].numpy(), "uniform").pvalue > 1e-3


def _third_digit_parity(u: torch.Tensor) -> int:
    """XOR over the 4 points of digit 3 of u (binary expansion), first coordinate."""
    return int(torch.floor(u[:, 0] * 8).long().remainder(2).sum().item() % 2)


def test_owen_scramble_is_nested_not_linear() -> None:
    """The first 4 Sobol' points have 2-digit prefixes 00, 10, 11, 01 and digit 3 equal to 0.

    Nested scrambling flips digit 3 with an independent bit per prefix, so the XOR of the four
    scrambled digits is a fair coin. A linear matrix scramble + shift (torch, and scipy's
    ``scramble=True``) flips it by an affine function of the prefix, whose XOR over all four
    prefixes is always 0.
    """
    gen = _gen(21)
    owen = [
        _third_digit_parity(torch.special.ndtr(owen_sobol_points(1, 4, generator=gen).z))
        for _ in range(200)
    ]
    assert 0.35 < sum(owen) / len(owen) < 0.65
    lms = [
        _third_digit_parity(torch.special.ndtr(sobol_points(1, 4, generator=gen).z))
        for _ in range(50)
    ]
    assert sum(lms) == 0
    scipy_lms = [
        _third_digit_parity(torch.as_tensor(qmc.Sobol(1, scramble=True, rng=seed).random_base2(2)))
        for seed in range(50)
    ]
    assert sum(scipy_lms) == 0


# --- shapes, weights, budgets, seeds -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(POINT_SETS))
@pytest.mark.parametrize("p", [1, 3, 8])
def test_shapes_weights_and_flags(name: str, p: int) -> None:
    ps = point_set(name, p, 200, _gen(0))
    assert ps.name == name
    assert ps.z.shape == (ps.n_points, p) and ps.weights.shape == (ps.n_points,)
    assert ps.z.dtype == torch.float64 and torch.isfinite(ps.z).all()
    assert float(ps.weights.sum()) == pytest.approx(1.0, abs=1e-12)
    assert ps.n_points == ps.n_shared + ps.n_rules * ps.points_per_rule
    assert ps.unbiased == (name not in ("radial-simplex", "radial-cross", "unscented"))
    ps32 = point_set(name, p, 200, _gen(0), dtype=torch.float32)
    assert ps32.z.dtype == torch.float32 and ps32.weights.dtype == torch.float32
    assert torch.allclose(ps32.z.double(), ps.z, atol=1e-5, rtol=1e-5)
    values = torch.ones(ps.n_points, 2)
    assert ps.integrate(values).shape == (2,)


@pytest.mark.parametrize("name", sorted(POINT_SETS))
def test_points_on_the_device_and_dtype_are_the_cpu_points(
    name: str, device: torch.device, dtype: torch.dtype
) -> None:
    """A CPU generator draws the same points whatever the output device and dtype: the rule is
    built in double and cast at the end, so only that cast differs."""
    reference = point_set(name, 4, 40, _gen(17))
    ps = point_set(name, 4, 40, _gen(17), dtype=dtype, device=device)
    for tensor in (ps.z, ps.weights):
        assert tensor.device.type == device.type and tensor.dtype == dtype
    assert torch.equal(ps.z.cpu(), reference.z.to(dtype))
    assert torch.equal(ps.weights.cpu(), reference.weights.to(dtype))
    a = torch.tensor([0.6, -0.3, 0.5, 0.1], dtype=torch.float64)
    estimate = ps.integrate(_exp_integrand(ps.z, a.to(device=device, dtype=dtype)))
    expected = reference.integrate(_exp_integrand(reference.z, a))
    rtol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(estimate.cpu().double(), expected, rtol=rtol, atol=0)


@pytest.mark.parametrize("name", sorted(POINT_SETS))
def test_a_generator_on_the_device_draws_there_with_the_rule_exactness(
    name: str, device: torch.device
) -> None:
    """Drawn by a generator on ``device``: the points stay there, the weights sum to 1 and every
    monomial up to the rule's ``exact_degree`` is integrated exactly."""
    ps = point_set(name, 3, 40, torch.Generator(device=device).manual_seed(0))
    assert ps.z.device.type == device.type and ps.weights.device.type == device.type
    assert float(ps.weights.sum()) == pytest.approx(1.0, abs=1e-12)
    _assert_exact(ps, _multi_indices(3, range(0, ps.exact_degree + 1)))


def test_mc_and_qmc_weights_are_uniform() -> None:
    for name in ("iid", "antithetic", "qmc-sobol", "qmc-owen"):
        ps = point_set(name, 3, 32, _gen(0))
        assert ps.n_points == 32
        assert torch.allclose(ps.weights, torch.full((32,), 1 / 32, dtype=torch.float64))
    ps = point_set("antithetic", 3, 32, _gen(0))
    assert torch.equal(ps.z[1::2], -ps.z[::2])


@pytest.mark.parametrize("name", sorted(POINT_SETS))
@pytest.mark.parametrize("p", [2, 3, 8])
def test_budget_respects_cap_and_is_tight(name: str, p: int) -> None:
    one_rule = None
    for budget in range(1, 301):
        s = point_count(name, p, budget)
        if one_rule is None:
            one_rule = s
        if s > budget:  # below one rule: exactly one (the smallest) rule
            assert s == one_rule
            continue
        if name.startswith("radial"):
            m = p + 1 if name == "radial-simplex" else 2 * p
            assert s % m == 0
            if budget // m <= 16:  # a single rule: every design that fits is used
                assert s == m * (budget // m)
            else:
                assert s >= budget - 3 * m * (budget // m // 16 + 1)
        else:
            step = {
                "iid": 1,
                "qmc-sobol": 1,
                "qmc-owen": 1,
                "qmc-owen-line": 3,
                "antithetic": 2,
                "unscented": 2 * p,
                "sr3": 2 * (p + 1),
                "sr3-cross": 2 * p,
            }[name]
            assert s + step > budget
    for budget in (1, 32, 128, 257):
        ps = point_set(name, p, budget, _gen(0)) if point_count(name, p, budget) <= budget else None
        if ps is not None:
            assert ps.n_points == point_count(name, p, budget)


def test_below_one_rule_warns() -> None:
    with pytest.warns(OrthobenchWarning, match="n_evaluations=5"):
        ps = point_set("sr3", 3, 5, _gen(0))
    assert ps.n_points == 9 and ps.n_rules == 1


def test_radial_options() -> None:
    ps = point_set("radial-cross", 3, 100, _gen(0), n_radii=4)
    assert (ps.n_rules, ps.points_per_rule, ps.n_points) == (4, 24, 96)
    ps = point_set("radial-simplex", 3, 100, _gen(0), max_radii=5)
    assert ps.points_per_rule <= 5 * 4 and ps.n_points <= 100
    with pytest.raises(TypeError, match="n_radii"):
        point_set("sr3", 3, 100, _gen(0), n_radii=4)


def test_errors_name_the_bad_value() -> None:
    with pytest.raises(RegistryError, match="radial-cross"):
        point_set("sr5", 3, 10, _gen(0))
    with pytest.raises(ValueError, match="p=0"):
        point_set("iid", 0, 10, _gen(0))
    with pytest.raises(ValueError, match="n_evaluations=0"):
        point_set("iid", 3, 0, _gen(0))
    with pytest.raises(ValueError, match="directions='cube'"):
        radial_points(3, 2, generator=_gen(0), directions="cube")


@pytest.mark.parametrize("name", sorted(POINT_SETS))
def test_same_seed_same_points(name: str) -> None:
    a = point_set(name, 4, 40, _gen(17))
    b = point_set(name, 4, 40, _gen(17))
    c = point_set(name, 4, 40, _gen(18))
    assert torch.equal(a.z, b.z) and torch.equal(a.weights, b.weights)
    assert not torch.equal(a.z, c.z)


def test_constructors_use_only_the_generator() -> None:
    torch.manual_seed(0)
    a = iid_points(3, 5, generator=_gen(1))
    torch.manual_seed(1)
    b = iid_points(3, 5, generator=_gen(1))
    assert torch.equal(a.z, b.z)
