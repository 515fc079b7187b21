"""The paper-reproduction suites (``suites/paper/``): every file validates, every experiment has a
full and a reduced size (WM811K full only), the main claims a medium one between them, and
results directories cannot collide.

Results are keyed by suite name (a cell's id and configuration hash carry it, and a report's run
sets are suite names), so two files with one name would mix their cells in one directory: each
suite is named after its file, which makes the names unique.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from orthobench.suite import Suite, load_suite
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
PAPER_DIR = ROOT / "suites" / "paper"
SIZES = ("full", "medium", "reduced")
#: Experiments with a full size only: the ViT's feature extraction is a GPU job.
FULL_ONLY = frozenset({"wm811k-vit"})
#: Experiments of the main claims with a medium size: enough seeds or states for a paired test.
WITH_MEDIUM = frozenset({"regret", "tpe", "probe"})


def _split(path: Path) -> tuple[str, str]:
    """``probe-reduced.yaml`` -> ``("probe", "reduced")``."""
    experiment, _, size = path.stem.rpartition("-")
    return experiment, size


@pytest.fixture(scope="module")
def suites() -> dict[Path, Suite]:
    files = sorted(PAPER_DIR.glob("*.yaml"))
    assert files, f"no suites in {PAPER_DIR}"
    return {path: load_suite(path) for path in files}


def test_every_file_is_a_full_or_reduced_suite_named_after_it(suites):
    for path, suite in suites.items():
        experiment, size = _split(path)
        assert size in SIZES, f"{path.name}: the name must end in -full, -medium or -reduced"
        assert suite.name == f"paper-{experiment}-{size}", path.name


def test_every_experiment_has_both_sizes_except_the_full_only_ones(suites):
    sizes: dict[str, set[str]] = {}
    for path in suites:
        experiment, size = _split(path)
        sizes.setdefault(experiment, set()).add(size)
    for experiment, found in sizes.items():
        expected = {"full", "reduced"} | ({"medium"} if experiment in WITH_MEDIUM else set())
        if experiment in FULL_ONLY:
            expected = {"full"}
        assert found == expected, f"{experiment}: {sorted(found)}, expected {sorted(expected)}"
    assert FULL_ONLY | WITH_MEDIUM <= sizes.keys()


@pytest.mark.parametrize(("smaller", "larger"), [("reduced", "full"), ("medium", "full")])
def test_smaller_suites_are_no_larger_than_their_full_suite(suites, smaller, larger):
    by_name = {suite.name: suite for suite in suites.values()}
    for name, reduced in by_name.items():
        if not name.endswith(f"-{smaller}"):
            continue
        full = by_name[name.removesuffix(f"-{smaller}") + f"-{larger}"]
        if reduced.probe is not None:
            assert full.probe is not None, name
            assert len(reduced.probe.seeds) <= len(full.probe.seeds), name
            assert reduced.probe.n_init == full.probe.n_init, name
            assert reduced.probe.mc_samples == full.probe.mc_samples, name
            continue
        assert len(reduced.seeds) <= len(full.seeds), name
        assert reduced.budget <= full.budget, name
        assert len(reduced.cells()) < len(full.cells()), name
        assert reduced.n_init == full.n_init, f"{name}: n0 is a paper setting, kept when reducing"


def test_probe_suites_follow_the_paper_protocol(suites):
    probes = [s.probe for s in suites.values() if s.probe is not None]
    assert len(probes) == len(SIZES)
    for probe in probes:
        assert probe.n_init == 32
        assert probe.mc_samples == (8, 32)
        assert probe.rebuilds == 16 and probe.n_probes == 64
        assert set(probe.kernels) == {"matern52-ard", "rbf-iso"}
        assert {"orth", "mc-tpe", "orthobo-tpe"} <= set(probe.estimators)
        # Claims pool the four functions: at least 12 states per kernel and S.
        assert len(probe.seeds) * len(probe.tasks) >= 12


def test_gp_optimizers_run_the_papers_procedure_whatever_the_defaults(suites):
    """The paper fits with BoTorch's ``fit_gpytorch_mll`` and maximizes OrthoBO's acquisition on
    all its draws (the raw-sample screen included); the project's defaults differ (the fast fit,
    the screen on 64 draws), so every suite pins all three."""
    pinned = 0
    for path, suite in suites.items():
        for spec in suite.optimizers:
            if spec.name in ("orthobo", "mc-ei", "qlogei", "ucb", "turbo"):
                assert spec.params.get("fit") == "botorch", f"{path.name}: {spec}"
            if spec.name in ("orthobo", "mc-ei"):
                for name in ("coarse_theta_samples", "screen_theta_samples"):
                    assert spec.params.get(name, 64) is None, f"{path.name}: {name} in {spec}"
                pinned += 1
    assert pinned > 0


@pytest.fixture(scope="module")
def paper_tables():
    """``benchmarks/paper_tables.py``, a script, imported from its file."""
    return load_script("paper_tables")


def _runs(finals: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """One evaluation per cell of suite ``s`` whose regret is ``finals[task, optimizer][seed]``."""
    rows = [
        {"run_set": "s", "task": task, "optimizer": optimizer, "seed": seed, "iteration": 0,
         "phase": "init", "regret": value, "best_y": value, "status": "ok", "is_outlier": False,
         "fallback": None}
        for (task, optimizer), values in finals.items()
        for seed, value in enumerate(values)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_paired_table_tests_each_comparison_and_holm_corrects_per_task(paper_tables):
    """On ``t``, OrthoBO is 0.5 below qLogEI on each of 7 seeds (p = 2 / 2^7) and mixed against
    Sobol; Holm over the task's two comparisons. On ``u``, 3 seeds are too few for a test."""
    qlogei = [13.0, 1.0, 11.0, 3.0, 9.0, 5.0, 7.0]
    runs = _runs(
        {
            ("t", "orthobo-paper"): [v - 0.5 for v in qlogei],
            ("t", "qlogei"): qlogei,
            ("t", "sobol"): [
                v + d for v, d in zip(qlogei, [0.5, -2, 3, -4, 5, -6, 7], strict=True)
            ],
            ("u", "orthobo-paper"): [1.0, 2.0, 3.0],
            ("u", "qlogei"): [2.0, 3.0, 4.0],
        }
    )
    pairs = [("orthobo-paper", "qlogei"), ("orthobo-paper", "sobol")]
    table = paper_tables.paired_differences(runs, pairs).set_index(["task", "versus"])
    assert table.loc[("t", "qlogei"), "orthobo_lower"] == 7
    assert table.loc[("t", "qlogei"), "p_min"] == table.loc[("t", "qlogei"), "p_value"] == 2 / 2**7
    p_sobol = table.loc[("t", "sobol"), "p_value"]
    assert 0.05 < p_sobol < 1.0
    assert table.loc[("t", "qlogei"), "p_holm"] == pytest.approx(2 * 2 / 2**7)
    assert table.loc[("t", "sobol"), "p_holm"] == pytest.approx(p_sobol)
    u = table.loc[("u", "qlogei")]
    assert u["seeds"] == 3 and u["orthobo_lower"] == 3 and u["p_min"] == 0.25
    assert pd.isna(u["p_value"]) and pd.isna(u["p_holm"])


def test_final_table_counts_the_seeds_each_optimizer_is_best_on(paper_tables):
    """qLogEI lowest on seeds 0 and 1, tied with OrthoBO on seed 2 (both count); Sobol never."""
    runs = _runs(
        {
            ("t", "orthobo-paper"): [2.0, 3.0, 1.0],
            ("t", "qlogei"): [1.0, 2.0, 1.0],
            ("t", "sobol"): [5.0, 5.0, 5.0],
        }
    )
    table = paper_tables.final_summary(runs).set_index("optimizer")
    assert table["seeds_best"].to_dict() == {"orthobo-paper": 1, "qlogei": 3, "sobol": 0}
    assert not {"p_value", "pairs", "testable"} & set(table.columns)


def test_probe_state_tests_against_no_change_and_the_papers_ratio(paper_tables):
    """Task ``a``: 8 states all near 2x (paper: 2x) reject "no change" only; task ``b``: near 0.5x
    (paper: 10x) reject both; Holm over the two tasks of the (kernel, S, estimator) family. An
    undefined ratio (1e30) is left out of the tests."""
    ratios = {
        "a": [1.8, 1.9, 2.0, 2.05, 2.1, 2.2, 2.3, 1.95],
        "b": [0.4, 0.45, 0.5, 0.55, 0.6, 0.42, 0.48, 1e30],
    }
    probe = pd.DataFrame(
        [
            {"run_set": "s", "task": t, "kernel": "k", "mc_samples": 32, "estimator": "orth",
             "var_ratio": v}
            for t, values in ratios.items()
            for v in values
        ]
    )  # fmt: skip
    rows = pd.DataFrame(
        {
            "suite": "s",
            "task": ["a", "b"],
            "kernel": "k",
            "mc_samples": 32,
            "estimator": "orth",
            "paper_ratio": [2.0, 10.0],
        }  # fmt: skip
    )
    out = paper_tables.state_tests(rows, probe).set_index("task")
    assert out.loc["a", "p_min"] == 2 / 2**8 and out.loc["b", "p_min"] == 2 / 2**7
    assert out.loc["a", "p_vs_1"] == 2 / 2**8 and out.loc["b", "p_vs_1"] == 2 / 2**7
    assert out.loc["a", "p_vs_paper"] > 0.5
    assert out.loc["b", "p_vs_paper"] == 2 / 2**7
    # Holm: the smaller p doubled (2 / 2^8 * 2), the larger one at least that and times 1.
    assert out.loc["a", "p_vs_1_holm"] == pytest.approx(2 * 2 / 2**8)
    assert out.loc["b", "p_vs_1_holm"] == pytest.approx(2 / 2**7)
