"""Rules over several optimizer parameters: each is written once, in the optimizer's
``check_params``, and refuses a suite when it is loaded (one line naming the parameters and their
values, nothing run or written) and the same combination given to the constructor in code."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import ConfigError, RegistryError, SuiteError
from orthobench.optimizers.botorch_baselines import QUCB, QLogEI
from orthobench.optimizers.orthobo import MCEI, OrthoBO
from orthobench.optimizers.rpr import RPR
from orthobench.optimizers.tpe import MCTPE, OrthoBOTPE
from orthobench.optimizers.turbo import TuRBO
from orthobench.registry import OPTIMIZERS
from orthobench.suite import load_suite

# (registry name, class, params, YAML field below the optimizer entry, the registry's reason).
# The defaults of the parameters a case leaves out take part in its rule (length_init 0.8 below).
RULES = [
    pytest.param(
        "turbo",
        TuRBO,
        {"length_min": 0.9},
        "params",
        "optimizer 'turbo': `0 < length_min < length_init <= length_max` must hold, but got "
        "(length_min=0.9, length_init=0.8, length_max=1.6).",
        id="turbo-length-min-above-init",
    ),
    pytest.param(
        "turbo",
        TuRBO,
        {"length_init": 1.0, "length_max": 0.5},
        "params",
        "optimizer 'turbo': `0 < length_min < length_init <= length_max` must hold, but got "
        "(length_min=0.0078125, length_init=1.0, length_max=0.5).",
        id="turbo-length-init-above-max",
    ),
    pytest.param(
        "orthobo",
        OrthoBO,
        {"kernel": ["linear", "rbf-iso"], "delta": 0.5},
        "params",
        "optimizer 'orthobo': `0 <= delta < 1/M` must hold for the M ensemble members, but got "
        "(delta=0.5, M=2).",
        id="orthobo-weight-floor",
    ),
    pytest.param(
        "mc-ei",
        MCEI,
        {"kernel": ["linear", "rbf-iso", "matern52-ard"], "delta": 0.4},
        "params",
        "optimizer 'mc-ei': `0 <= delta < 1/M` must hold for the M ensemble members, but got "
        "(delta=0.4, M=3).",
        id="mc-ei-weight-floor",
    ),
    pytest.param(
        "orthobo",
        OrthoBO,
        {"estimator": "orth", "theta_sampling": "antithetic", "theta_samples": 15},
        "params.theta_samples",
        "optimizer 'orthobo' parameter 'theta_samples': must be even: estimator "
        "'orth@antithetic' draws antithetic pairs, but got 15.",
        id="orthobo-antithetic-odd-theta-samples",
    ),
    pytest.param(
        "orthobo",
        OrthoBO,
        {"estimator": "orth-shrink+rb@antithetic", "coarse_theta_samples": 33},
        "params.coarse_theta_samples",
        "optimizer 'orthobo' parameter 'coarse_theta_samples': must be even: estimator "
        "'orth-shrink+rb@antithetic' draws antithetic pairs, but got 33.",
        id="orthobo-antithetic-odd-coarse-budget",
    ),
    pytest.param(
        "mc-ei",
        MCEI,
        {"theta_sampling": "antithetic", "screen_theta_samples": 33},
        "params.screen_theta_samples",
        "optimizer 'mc-ei' parameter 'screen_theta_samples': must be even: estimator "
        "'mc@antithetic' draws antithetic pairs, but got 33.",
        id="mc-ei-antithetic-odd-screen-budget",
    ),
    pytest.param(
        "orthobo",
        OrthoBO,
        {"theta_sampling": "qmc"},
        "params",
        "optimizer 'orthobo': Point set 'qmc-owen' fixes its own points; `theta_sampling` must "
        "stay 'iid', but got 'qmc'. Name a control-variate estimator (e.g. `estimator: "
        "orth-shrink`) to choose the sampling.",
        id="orthobo-point-set-with-sampling",
    ),
    pytest.param(
        "orthobo",
        OrthoBO,
        {"estimator": "orth@qmc", "theta_sampling": "antithetic"},
        "params",
        "optimizer 'orthobo': `estimator` 'orth@qmc' and `theta_sampling` 'antithetic' name "
        "different samplings.",
        id="orthobo-two-samplings",
    ),
    pytest.param(
        "mc-tpe",
        MCTPE,
        {"n_good_candidates": 0, "n_sobol_candidates": 0},
        "params",
        "optimizer 'mc-tpe': `n_good_candidates + n_sobol_candidates >= 1` must hold, but got "
        "(n_good_candidates=0, n_sobol_candidates=0).",
        id="mc-tpe-no-candidates",
    ),
    pytest.param(
        "orthobo-tpe",
        OrthoBOTPE,
        {"n_good_candidates": 0, "n_sobol_candidates": 0},
        "params",
        "optimizer 'orthobo-tpe': `n_good_candidates + n_sobol_candidates >= 1` must hold, but "
        "got (n_good_candidates=0, n_sobol_candidates=0).",
        id="orthobo-tpe-no-candidates",
    ),
    # Refused at the first step, after the initial design (a training task's hours).
    pytest.param(
        "orthobo-tpe",
        OrthoBOTPE,
        {"estimator": "orth-crossfit", "bootstrap_fits": 3},
        "params",
        "optimizer 'orthobo-tpe': `bootstrap_fits` must be >= 4 for estimator='orth-crossfit', "
        "but got bootstrap_fits=3.",
        id="orthobo-tpe-too-few-fits-to-cross-fit",
    ),
    # GPOptimizer's multistart rule, which qLogEI, qUCB, RPR inherit and TuRBO's includes.
    *(
        pytest.param(
            name,
            cls,
            {"raw_samples": 4, "num_restarts": 8},
            "params",
            f"optimizer '{name}': `raw_samples >= num_restarts` must hold, but got "
            "(raw_samples=4, num_restarts=8).",
            id=f"{name}-fewer-raw-samples-than-restarts",
        )
        for name, cls in [
            ("qlogei", QLogEI),
            ("ucb", QUCB),
            ("turbo", TuRBO),
            ("rpr", RPR),
            ("orthobo", OrthoBO),
            ("mc-ei", MCEI),
        ]
    ),
]

# A user's optimizer with a rule over two parameters and one that blames one of them.
RULED_PLUGIN = """
from orthobench import Optimizer
from orthobench.exceptions import ConfigError


class Ruled(Optimizer):
    def __init__(self, dim, *, low: int = 0, high: int = 2, **kwargs):
        super().__init__(dim, **kwargs)
        Ruled.check_params(low=low, high=high)

    @staticmethod
    def check_params(*, low, high, **_):
        if not low < high:
            raise ValueError(f"`low < high` must hold, but got ({low=}, {high=}).")
        if high % 2:
            raise ConfigError("high", f"must be even, but got {high}.")

    def _ask(self, n):
        raise NotImplementedError
"""


def _suite_text(name: str, params: dict) -> str:
    return (
        f"name: rules\nbudget: 1\ntasks: [hartmann6]\n"
        f"optimizers: [sobol, {{name: {name}, params: {params}}}]\n"
    )


@pytest.mark.parametrize(("name", "cls", "params", "field", "reason"), RULES)
def test_a_suite_breaking_a_rule_is_one_line_at_load(write_suite, name, cls, params, field, reason):
    path = write_suite(_suite_text(name, params))
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(info.value) == f"{path}: optimizers[1].{field}: {reason}"


@pytest.mark.parametrize(("name", "cls", "params", "field", "reason"), RULES)
def test_the_run_command_stops_at_load_and_writes_nothing(
    write_suite, tmp_path, name, cls, params, field, reason
):
    path = write_suite(_suite_text(name, params))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(path), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output == f"orthobench: error: {path}: optimizers[1].{field}: {reason}\n"
    assert not out.exists()


@pytest.mark.parametrize(("name", "cls", "params", "field", "reason"), RULES)
def test_the_constructor_refuses_the_same_combination_by_the_same_rule(
    name, cls, params, field, reason
):
    with pytest.raises(ValueError) as info:
        cls(2, seed=0, **params)
    rule = reason.split(": ", 1)[1]  # without the registry's "optimizer 'name' ...: "
    assert str(info.value) == (
        f"{field.removeprefix('params.')}: {rule}" if isinstance(info.value, ConfigError) else rule
    )


@pytest.mark.parametrize(
    ("name", "params"),
    [
        # The antithetic point set takes the largest even count within an odd budget.
        ("orthobo", {"estimator": "antithetic", "theta_samples": 15}),
        ("mc-ei", {"kernel": ["linear", "rbf-iso"], "delta": 0.499}),
        ("turbo", {"length_min": 0.5, "length_init": 1.6}),
        ("mc-tpe", {"n_good_candidates": 0, "n_sobol_candidates": 1}),
        ("qlogei", {"raw_samples": 8, "num_restarts": 8}),
    ],
)
def test_combinations_on_the_edge_of_a_rule_load_and_build(name, params):
    OPTIMIZERS.check_params(name, params)
    OPTIMIZERS.create(name, 2, seed=0, **params)


def test_a_plugin_rule_gets_the_defaults_and_may_blame_one_parameter(tmp_path, monkeypatch):
    (tmp_path / "ruledplugin.py").write_text(RULED_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    OPTIMIZERS.check_params("ruledplugin:Ruled", {"low": 1})
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params("ruledplugin:Ruled", {"low": 3})
    assert (info.value.field, info.value.reason) == (
        "params",
        "optimizer 'ruledplugin:Ruled': `low < high` must hold, but got (low=3, high=2).",
    )
    with pytest.raises(RegistryError) as info:
        OPTIMIZERS.check_params("ruledplugin:Ruled", {"low": 1, "high": 7})
    assert (info.value.field, info.value.reason) == (
        "params.high",
        "optimizer 'ruledplugin:Ruled' parameter 'high': must be even, but got 7.",
    )
