"""The configuration layer is light: reading and checking names needs neither torch nor BoTorch.

Each test runs a fresh interpreter (the test session itself has torch loaded) and reads
``sys.modules`` afterwards (docs/design.md, "Layers and data flow"). What is asserted, precisely:

* Importing ``orthobench``, ``orthobench.suite``, ``orthobench.registry`` or
  ``orthobench.config.names`` imports no torch (so neither ``torch.distributions`` nor BoTorch),
  and no probe module (the suite layer does not depend on the probe).
* Validating a suite checks each task and optimizer against its registry, which imports the
  factory's module to read its signature: ``suites/smoke.yaml`` names built-in tasks, whose module
  imports BoTorch. What is asserted for validation is that the suite layer adds nothing: a suite
  whose tasks and optimizers live in a module without torch, with a probe section naming every
  kernel and kinds of estimator, validates without importing torch or any probe module.
* The package's public names still import on access (PEP 562).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEAVY = ("torch", "torch.distributions", "botorch", "gpytorch")

LIGHT_PLUGIN = '''
"""A task and an optimizer factory whose module imports nothing heavy."""
from orthobench import optimizer_factory, task_factory


@task_factory
def make_task(dim: int = 2):
    raise NotImplementedError


@optimizer_factory
def make_optimizer(dim, *, seed, device, dtype, kernel: str = "rbf-iso", step: float = 0.1):
    raise NotImplementedError
'''


def _loaded_after(code: str, pythonpath: Path | None = None) -> dict[str, list[str]]:
    """Run ``code`` in a fresh interpreter; the heavy and the probe modules it left loaded."""
    probe = (
        "import json, sys\n"
        f"{code}\n"
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules], "
        "'probe': sorted(m for m in sys.modules if m.startswith('orthobench.probe'))}))\n"
    )
    env = None if pythonpath is None else {**os.environ, "PYTHONPATH": str(pythonpath)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module", ["orthobench", "orthobench.suite", "orthobench.registry", "orthobench.config.names"]
)
def test_importing_the_config_layer_imports_no_torch_and_no_probe(module):
    assert _loaded_after(f"import {module}") == {"heavy": [], "probe": []}


@pytest.mark.slow
def test_loading_a_suite_file_imports_only_what_its_registries_need():
    """``suites/smoke.yaml`` names built-in tasks (BoTorch test functions), so validating it does
    import BoTorch, through the registry; it still imports no probe module."""
    smoke = Path(__file__).resolve().parents[1] / "suites" / "smoke.yaml"
    loaded = _loaded_after(f"from orthobench.suite import load_suite; load_suite({str(smoke)!r})")
    assert loaded["probe"] == []


@pytest.mark.parametrize("state_optimizer", ["", "  state_optimizer: lightplugin:make_optimizer\n"])
def test_a_suite_of_light_plugins_validates_without_torch(tmp_path, state_optimizer):
    (tmp_path / "lightplugin.py").write_text(LIGHT_PLUGIN)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        textwrap.dedent(
            """\
            name: light
            budget: 2
            tasks: [lightplugin:make_task]
            optimizers: [{name: "lightplugin:make_optimizer", params: {step: 0.2}}]
            probe:
              tasks: [lightplugin:make_task]
              kernels: [rbf-iso, rbf-ard, matern52-iso, matern52-ard, linear]
              estimators: [mc, orth-shrink@qmc, qmc-owen+rb, sr3, radial-cross+rb, qlogei, mc-tpe]
            """
        )
        + state_optimizer
    )
    code = (
        "from orthobench.suite import load_suite\n"
        f"probe = load_suite({str(suite)!r}).probe\n"
        "assert len(probe.kernels) == 5 and len(probe.estimators) == 7"
    )
    assert _loaded_after(code, pythonpath=tmp_path) == {"heavy": [], "probe": []}


def test_public_names_resolve_lazily_to_their_definitions():
    import importlib

    import orthobench

    for name in orthobench.__all__:
        obj = getattr(orthobench, name)
        home = importlib.import_module(orthobench._EXPORTS[name])
        assert obj is getattr(home, name)
    assert sorted(orthobench.__all__) == sorted(orthobench._EXPORTS)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        orthobench.nope  # noqa: B018
