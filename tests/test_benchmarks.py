"""The benchmark scripts measure the states ``orthobench run`` makes, and time alike.

Each script's state builder, imported from its file, starts from the initial design that the
package's loop evaluates for the cell's task and seed (whatever the optimizer: the design is
shared). The shared timing helper reports a median, its range and the thread count.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import orthobench
from orthobench.loop import make_task, run_cell
from orthobench.registry import TASKS
from orthobench.results._provenance import cpu_description
from orthobench.suite import Cell, ComponentSpec
from tests.helpers import load_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module", autouse=True)
def _scripts_importable():
    """The scripts import their shared modules (``_states``, ``_timing``) from their folder."""
    sys.path.insert(0, str(BENCHMARKS))
    yield
    sys.path.remove(str(BENCHMARKS))


def run_design(task: str, seed: int, n: int) -> np.ndarray:
    """The unit-cube initial design the loop tells the optimizer of a cell of ``task`` and
    ``seed``: here Sobol search's, an optimizer no script builds its states with."""
    cell = Cell(
        suite="reference",
        task=ComponentSpec(name=task, label=task),
        optimizer=ComponentSpec(name="sobol", label="sobol"),
        seed=seed,
        n_init=n,
        budget=0,
    )
    space = make_task(cell).space
    return space.to_unit(np.array([r.x for r in run_cell(cell)]))


# Per script: (task, seed, n, the unit-cube points of the script's state for them), the first n
# of which are its initial design.
BUILDERS = {
    "acquisition_overhead": (
        "levy16", 0, 32, lambda m: m.gp_state("levy16", 32).train_x.numpy()
    ),
    "fit_benchmark": ("ackley8", 3, 8, lambda m: m.states("ackley8", 3, 8)[0].numpy()),
    "fit_device_benchmark": (
        "hartmann6", 1, 16, lambda m: m._states.history("hartmann6", 1, 16)[0].numpy()
    ),
    "maximize_benchmark": (
        "michalewicz10", 2, 20,
        lambda m: m.bo_run("michalewicz10", 2, 20, 0)
        .optimizer(0, m.PROCEDURES["coarse 64"])
        .train_x.numpy(),
    ),
    "restart_costs": ("hartmann6", 4, 32, lambda m: m.gp_state("hartmann6", 4).train_x.numpy()),
    "step_benchmark": (
        "levy16", 5, 8,
        lambda m: TASKS.create("levy16").space.to_unit(
            np.array([r.x for r in m._states.run(
                m._states.cell("levy16", 5, 8, 0, "orthobo", **m.METHODS["orthobo fit=fast"][1])
            ).records])
        ),
    ),
}  # fmt: skip

#: Builders that take BO steps past the design (with BoTorch's first-call costs: over 5 s).
SLOW = {"fit_benchmark", "restart_costs"}


@pytest.mark.parametrize(
    "script",
    [pytest.param(name, marks=[pytest.mark.slow] if name in SLOW else []) for name in BUILDERS],
)
def test_states_start_from_the_run_design(script):
    task, seed, n, build = BUILDERS[script]
    x = build(importlib.import_module(script))
    np.testing.assert_array_equal(x[:n], run_design(task, seed, n))


def test_rebuilt_optimizer_continues_the_run():
    """A state's optimizer, rebuilt as the loop resumes a cell, asks what the run asked next."""
    states = importlib.import_module("_states")
    run = states.run(states.cell("hartmann6", 0, 4, 2, "sobol"))
    x = run.optimizer(1).ask(1).x
    assert TASKS.create("hartmann6").space.from_unit(x)[0].tolist() == run.records[5].x


def test_time_call_gives_median_range_and_threads():
    timing_module = importlib.import_module("_timing")
    calls = []
    timing = timing_module.time_call(lambda: calls.append(1), rounds=3, number=4, warmup=2)
    assert len(calls) == 2 + 3 * 4
    assert timing.rounds == 3 and timing.threads == torch.get_num_threads()
    assert 0 <= timing.low <= timing.median <= timing.high
    assert " ms [" in str(timing)


def test_timed_returns_the_result():
    result, seconds = importlib.import_module("_timing").timed(lambda: 42)
    assert result == 42 and seconds >= 0


def test_async_regret_compares_cells_of_equal_evaluations():
    """Sobol' search ignores pending points, so its asynchronous cell evaluates the synchronous
    one's 16 points (in another order) and ends at the same regret."""
    script = importlib.import_module("async_regret")
    regrets = {s: script.final_regret("hartmann6", "sobol", 0, s) for s in script.SCHEDULES}
    assert regrets["asynchronous"] == regrets["synchronous"]


def test_stored_machine_line_names_where_the_results_were_computed(tmp_path):
    """The table scripts' first line: each stored file's CPU, torch and threads, counted; a
    Parquet file orthobench did not write is not counted."""
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: machines\nseeds: [0, 1]\nn_init: 2\nbudget: 1\n"
        "tasks: [{name: hartmann6}]\noptimizers: [{name: sobol}]\n"
    )
    out = tmp_path / "out"
    orthobench.run_suite(suite, output=out, progress=False, report=False, threads_per_cell=2)
    pd.DataFrame({"a": [1]}).to_parquet(out / "runs" / "foreign.parquet")
    line = importlib.import_module("_timing").stored_machine_line(out)
    assert line == (
        f"computed on: {cpu_description()}; torch {torch.__version__}; 2 torch thread(s) (2 files)"
    )
    assert importlib.import_module("_timing").stored_machine_line(tmp_path / "none") == (
        "computed on: no results files"
    )


def _probe_rows(kernel: str, estimators: dict[str, float], seed: int = 0) -> list[dict]:
    """Rows of one probe state whose estimator ``e`` has MSE ``estimators[e]`` at S = 8 (its
    ratio against the state's first estimator, the baseline)."""
    base = next(iter(estimators.values()))
    return [
        {"task": "h", "kernel": kernel, "seed": seed, "state_iteration": 0, "q": 1,
         "estimator": e, "mc_samples": 8, "mse": mse, "mse_ratio": base / mse,
         "probe_variance_log": mse}
        for e, mse in estimators.items()
    ]  # fmt: skip


def test_probe_ratio_tables_keep_kernels_and_tpe_states_apart():
    """The reported bug: states were keyed without their kernel, so with two kernels one
    kernel's MSE was divided by the other's (``orth`` against itself: 217, not 1), and TPE's
    baseline ``mc-tpe`` was an estimator "vs mc"."""
    tables = load_script("probe_ratio_tables")
    rows = pd.DataFrame(
        _probe_rows("matern52-ard", {"mc": 4.0, "orth": 2.0})
        + _probe_rows("rbf-iso", {"mc": 400.0, "orth": 100.0})
        + _probe_rows("tpe", {"mc-tpe": 8.0, "orthobo-tpe": 4.0})
    )
    equal, largest = tables.equal_accuracy(rows)
    orth = equal.set_index("estimator").loc["orth"]
    assert largest == 8 and (orth["worst"], orth["states"]) == (1.0, 2)
    assert set(equal["estimator"]) == {"mc", "orth"}  # TPE states have no orth to compare with
    ratios = tables.against_mc(tables.with_log_variance_ratio(rows))
    by = ratios[ratios["task"] == "h"].set_index(["kernel", "estimator"])["median"]
    assert by.to_dict() == {
        ("matern52-ard", "orth"): 2.0, ("rbf-iso", "orth"): 4.0, ("tpe", "orthobo-tpe"): 2.0
    }  # fmt: skip


def test_stored_machine_line_reads_a_probe_states_thread_count(tmp_path):
    """A probe state records ``threads``, not ``threads_per_cell``: the line said "None"."""
    from tests.report.conftest import write_probe_state

    write_probe_state(tmp_path, "p", 0, {("orth", 8): 2.0})
    line = importlib.import_module("_timing").stored_machine_line(tmp_path)
    assert line.endswith("; 1 torch thread(s) (1 files)")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Results folders by what they hold: ``missing`` (no folder), ``empty``, ``run`` (a cell
    without constraints), ``constrained`` (a cell with one) and ``probe`` (a probe state)."""
    from tests.report.conftest import cell, write_cell, write_probe_state

    root = tmp_path_factory.mktemp("folders")
    out = {name: root / name for name in ("missing", "empty", "run", "constrained", "probe")}
    out["empty"].mkdir()
    write_cell(out["run"], cell("s", "h", "sobol", 0, 2, 1), [3.0, 2.0, 1.0])
    write_cell(
        out["constrained"], cell("s", "h", "sobol", 0, 2, 1), [3.0, 2.0, 1.0],
        constraints=[[1.0], [-1.0], [-2.0]],
    )  # fmt: skip
    write_probe_state(out["probe"], "p", 0, {("mc", 8): 1.0, ("orth", 8): 2.0})
    return out


@pytest.mark.parametrize("folder", ["missing", "empty", "run"])
def test_estimator_tables_refuse_a_folder_without_probe_results(folders, folder, tmp_path):
    """The reported bug: the CSV was written with 0 rows and the page's tables emptied."""
    doc = tmp_path / "estimators.md"
    doc.write_text("<!-- estimator_tables:default-rule -->\n| t |\n<!-- /estimator_tables -->\n")
    argv = [str(folders[folder]), "--csv", str(tmp_path / "states.csv"), "--doc", str(doc)]
    with pytest.raises(SystemExit, match="holds no probe results"):
        load_script("estimator_tables").main(argv)
    assert not (tmp_path / "states.csv").exists() and "| t |" in doc.read_text()


@pytest.mark.parametrize(
    ("script", "folder", "message"),
    [
        *((s, f, "holds no probe results") for s in ("probe_ratio_tables", "probe_paper_tables")
          for f in ("missing", "empty", "run")),
        *(("constrained_tables", f, "holds no constrained runs") for f in ("missing", "run")),
    ],
)  # fmt: skip
def test_table_scripts_refuse_a_folder_without_their_results(folders, script, folder, message):
    """They raised a KeyError, or printed tables of ``nan ± nan`` and exited 0."""
    expected = re.escape(f"{script}: {folders[folder]} {message}")
    with pytest.raises(SystemExit, match=f"^{expected}$"):
        load_script(script).main([str(folders[folder])])


def test_constrained_tables_name_the_optimizers_for_an_unknown_reference(folders, capsys):
    """An optimizer the run lacks printed an empty paired table."""
    with pytest.raises(
        SystemExit, match=r"no optimizer orthobo \(--reference\); the run has sobol"
    ):
        load_script("constrained_tables").main([str(folders["constrained"])])
    assert capsys.readouterr().out == ""


def test_constrained_tables_leave_out_unconstrained_tasks_and_count_in_integers(tmp_path, capsys):
    """A folder with an unconstrained task printed "0.0 of 2" never feasible on the constrained
    task and listed the other with "nan of 2 | nan | nan"."""
    from tests.report.conftest import cell, write_cell

    for seed in range(2):
        for optimizer in ("orthobo", "sobol"):
            write_cell(tmp_path, cell("s", "c", optimizer, seed, 2, 1), [3.0, 2.0, 1.0],
                       constraints=[[1.0], [-1.0], [-2.0]])  # fmt: skip
            write_cell(tmp_path, cell("s", "u", optimizer, seed, 2, 1), [3.0, 2.0, 1.0])
    load_script("constrained_tables").main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "Left out, without constraints: u." in out
    assert "| c | `sobol` | 1 [1, 1] | 0 of 2 | 2 | 0.67 |" in out
    assert "| u |" not in out and "nan" not in out


def test_paper_tables_refuse_results_without_any_suite(folders, tmp_path):
    script, out = load_script("paper_tables"), tmp_path / "out"
    for results in (folders["missing"], folders["empty"]):
        with pytest.raises(SystemExit, match=f"^paper_tables: .*{re.escape(str(results))}"):
            script.main([str(results), "-o", str(out)])
    assert not out.exists()


def test_paper_tables_read_probe_rows_of_the_probe_suite_alone(tmp_path, capsys):
    """An empty suite folder is skipped with a line; another suite's probe rows are ignored
    (they wrote probe-ratios.csv over the probe suite's)."""
    from tests.report.conftest import write_probe_state

    results = tmp_path / "results"
    write_probe_state(results / "paper-probe-reduced", "p", 0, {("mc", 8): 1.0, ("orth", 8): 2.0})
    write_probe_state(
        results / "paper-tpe-reduced", "t", 0, {("mc", 8): 1.0, ("orth", 8): 3.0}, task="levy16"
    )
    (results / "paper-regret-reduced").mkdir()
    assert load_script("paper_tables").main([str(results), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert f"skipped regret: no results in {results / 'paper-regret-reduced'}\n" in err
    assert f"ignored the probe rows of {results / 'paper-tpe-reduced'} " in err
    assert set(pd.read_csv(tmp_path / "out" / "probe-ratios.csv")["task"]) == {"hartmann6"}


def test_step_benchmark_needs_a_step_past_the_first(monkeypatch, capsys):
    """``--steps 1`` ran every cell, then found no step to summarize."""
    script = load_script("step_benchmark")
    monkeypatch.setattr(script, "run", lambda *a, **k: pytest.fail("ran a cell"))
    with pytest.raises(SystemExit):
        script.main(["--steps", "1"])
    assert "--steps must be at least 2" in capsys.readouterr().err


def test_acquisition_overhead_is_a_share_of_the_naive_means_call():
    """docs/benchmarks.md reads it as "more per call than the naive mean": 3 ms against 2 ms
    is +50%, not +33% (a share of the estimator's call)."""
    timing = importlib.import_module("_timing").Timing
    t, base = (timing(median, median, median, 5, 1) for median in (3e-3, 2e-3))
    assert load_script("acquisition_overhead").change_per_call(t, base) == pytest.approx(50.0)


def test_restart_costs_take_a_step_apart(monkeypatch):
    """The take-apart on a small state (4 points, 16 draws, 2 restarts, one timing round):
    it called ``OrthoBO._raw_chunk`` without the ``q`` it gained."""
    script, timing = load_script("restart_costs"), importlib.import_module("_timing")
    states = importlib.import_module("_states")
    small = {"theta_samples": 16, "screen_theta_samples": 8, "raw_samples": 16, "num_restarts": 2}

    def small_state(task, seed):
        return states.run(states.cell(task, seed, 4, 0, "orthobo", **small)).optimizer(0)

    monkeypatch.setattr(script, "gp_state", small_state)
    monkeypatch.setattr(
        script, "time_call", lambda f: timing.time_call(f, rounds=1, number=1, warmup=0)
    )
    parts = script.take_apart("hartmann6", 0)
    assert parts["evaluations"] > 0 and all(v >= 0 for v in parts.values())


@pytest.mark.parametrize("option", ["--k", "--rounds", "--samples", "--sequential", "--threads"])
def test_cnn_stack_throughput_refuses_a_count_of_zero_before_any_work(option, capsys):
    """``--k 0`` raised an IndexError, ``--rounds 0`` a StatisticsError, ``--samples 0`` a
    ZeroDivisionError, after the dataset was read."""
    with pytest.raises(SystemExit) as exit_:
        load_script("cnn_stack_throughput").main([option, "0"])
    assert exit_.value.code == 2
    assert f"argument {option}: must be >= 1, but got 0" in capsys.readouterr().err
