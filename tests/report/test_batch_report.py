"""Batch BO steps in the report: method labels per q, curves per BO step and against wall
seconds, wall time per BO step, and old rows without the batch columns.

Suite ``batch``, task ``known`` (optimum 0, so a row's regret is its best-so-far y), optimizer
``orthobo`` at q=1 (4 BO steps) and q=4 (2 BO steps), seeds 0 and 1, 2 initial points each.
Every expected number below is worked out by hand from :data:`YS` and :data:`WALL`.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from orthobench.report import build_report
from orthobench.report.data import load_results, with_batch_columns
from orthobench.report.sections import build_sections, final_section, sobol_baselines
from orthobench.report.tables import (
    curves,
    final_table,
    runtime_table,
    step_time_table,
    traces,
)
from orthobench.results import load_runs

from .conftest import cell, write_cell

#: Observed y per (q, seed): 2 initial points, then the BO steps' points in stored order.
YS = {
    (4, 0): [5.0, 4.0, 3.5, 6.0, 2.0, 7.0, 1.5, 3.0, 0.5, 9.0],
    (4, 1): [6.0, 3.0, 4.0, 2.5, 5.0, 5.0, 1.0, 2.0, 2.0, 2.0],
    (1, 0): [5.0, 4.0, 3.0, 2.5, 2.0, 1.0],
    (1, 1): [6.0, 3.0, 2.8, 2.6, 1.5, 1.2],
}
#: Wall seconds at which each evaluation finished; a q=4 step's points finish out of order.
WALL = {
    (4, 0): [1.0, 2.0, 5.0, 4.5, 5.5, 6.0, 9.0, 10.0, 9.5, 8.0],
    (4, 1): [1.0, 2.5, 6.0, 6.5, 7.0, 7.5, 12.0, 12.0, 12.5, 13.5],
    (1, 0): [1.0, 2.0, 5.0, 8.0, 11.0, 14.0],
    (1, 1): [1.0, 2.5, 4.5, 7.5, 10.5, 12.5],
}
Q4 = "orthobo (q=4)"


@pytest.fixture(scope="module")
def batch_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    for (q, seed), ys in YS.items():
        spec = cell("batch", "known", "orthobo", seed, n_init=2, budget=8 // q, q=q)
        write_cell(root, spec, ys, wall_seconds=WALL[q, seed])
    return root


@pytest.fixture(scope="module")
def runs(batch_dir) -> pd.DataFrame:
    return load_results([batch_dir]).runs


def test_cells_of_one_optimizer_with_different_q_are_separate_methods(batch_dir, runs):
    results = load_results([batch_dir])
    assert results.optimizers == [Q4, "orthobo"]  # in the order stored
    assert set(results.files["optimizer"]) == {"orthobo", Q4}
    final = final_table(runs, reference="orthobo").set_index("optimizer")
    # Final regrets: q=1 (1.0, 1.2), q=4 (0.5, 1.0); never pooled into 4 seeds.
    assert final["seeds"].to_dict() == {"orthobo": 2, Q4: 2}
    assert final.loc["orthobo", "mean"] == pytest.approx(1.1)
    assert final.loc[Q4, "mean"] == pytest.approx(0.75)


def test_the_per_batch_curve_is_the_best_so_far_at_the_end_of_each_batch(runs):
    """q=4 seed 0: best-so-far 4 after the design, min(4, 3.5, 6, 2, 7) = 2 after step 1 (its
    last point is 7), 0.5 after step 2; seed 1: 3, 2.5, 1."""
    trace = traces(runs, "batch")
    q4 = trace[trace["optimizer"] == Q4]
    assert [tuple(r) for r in q4[["seed", "batch", "value"]].itertuples(index=False)] == [
        (0, 0, 4.0), (0, 1, 2.0), (0, 2, 0.5), (1, 0, 3.0), (1, 1, 2.5), (1, 2, 1.0)
    ]  # fmt: skip
    table = curves(trace, "batch").set_index(["optimizer", "batch"])
    np.testing.assert_allclose(table.loc[Q4, "mean"], [3.5, 2.25, 0.75])
    # q=1: one point per step, so step k ends at evaluation 2 + k: seeds (4, 3), (3, 2.8),
    # (2.5, 2.6), (2, 1.5), (1, 1.2).
    np.testing.assert_allclose(table.loc["orthobo", "mean"], [3.5, 2.9, 2.55, 1.75, 1.1])
    assert table["n"].eq(2).all()


def test_the_wall_curve_reads_each_seed_at_every_seeds_times(runs):
    """q=4: an evaluation counts once it and all stored before it finished (running max of the
    wall seconds: seed 0 1, 2, 5, 5, 5.5, 6, 9, 10, 10, 10; seed 1 1, 2.5, 6, 6.5, 7, 7.5, 12,
    12, 12.5, 13.5). Seed 0 finishes first, at 10: the curve stops there."""
    trace = traces(runs, "wall_seconds")
    q4 = trace[trace["optimizer"] == Q4].set_index(["seed", "wall_seconds"])["value"]
    assert q4.index.get_level_values("wall_seconds").max() == 10.0
    # t = 2: seed 0's second point (4); seed 1 has only its first (6).
    assert (q4[0, 2.0], q4[1, 2.0]) == (4.0, 6.0)
    # t = 6: seed 0 through its sixth point (min 5, 4, 3.5, 6, 2, 7 -> 2); seed 1 through its
    # third (min 6, 3, 4 -> 3). t = 10: seed 0 all (0.5); seed 1 through its sixth (2.5).
    assert (q4[0, 6.0], q4[1, 6.0], q4[0, 10.0], q4[1, 10.0]) == (2.0, 3.0, 0.5, 2.5)
    mean = curves(trace, "wall_seconds").set_index(["optimizer", "wall_seconds"])["mean"]
    assert mean[Q4, 6.0] == pytest.approx(2.5)


def test_the_wall_time_per_step_by_hand(runs):
    """Step ends (largest wall seconds of each batch): q=4 seed 0 at 2, 6, 10 -> 4, 4 (mean 4);
    seed 1 at 2.5, 7.5, 13.5 -> 5, 6 (5.5). q=1 seed 0: 2, 5, 8, 11, 14 -> 3 each; seed 1: 2.5,
    4.5, 7.5, 10.5, 12.5 -> 2, 3, 3, 2 (2.5). Fit 0.5 and acquisition 0.25 s per row (conftest):
    a step fits once, so its fit is 0.5, not q * 0.5."""
    table = step_time_table(runs).set_index("optimizer")
    assert table["q"].to_dict() == {"orthobo": 1, Q4: 4}
    assert table["steps"].to_dict() == {"orthobo": 4, Q4: 2}
    assert table["seeds"].to_dict() == {"orthobo": 2, Q4: 2}
    np.testing.assert_allclose(table.loc[Q4, ["wall_median", "wall_min", "wall_max"]],
                               [4.75, 4.0, 5.5])  # fmt: skip
    np.testing.assert_allclose(table.loc["orthobo", ["wall_median", "wall_min", "wall_max"]],
                               [2.75, 2.5, 3.0])  # fmt: skip
    np.testing.assert_allclose(table["fit_median"], [0.5, 0.5])
    np.testing.assert_allclose(table["acq_median"], [0.25, 0.25])
    np.testing.assert_allclose(table["eval_median"], [0.01, 0.01])


def test_the_wall_time_per_step_of_asks_that_finish_out_of_order(runs):
    """An asynchronous cell's asks finish out of order: batch 1's last point after batch 2's.
    The per-batch end differences (8 and -6 here) gave a mean of 1 s per step; the span from
    the initial design's end to the cell's last evaluation is 8 s over the 2 asks."""
    seed0 = runs[(runs["optimizer"] == Q4) & (runs["seed"] == 0)].copy()
    seed0["batch"] = [0, 0, 1, 1, 1, 1, 2, 2, 2, 1]  # batch 1's last point ends at 10, last
    seed0["wall_seconds"] = [1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0, 10.0]
    table = step_time_table(seed0)
    assert table["steps"].tolist() == [2]
    np.testing.assert_allclose(table["wall_median"], [4.0])


def test_old_rows_without_the_batch_columns_load_as_one_point_per_step(batch_dir):
    old = load_runs([batch_dir]).drop(columns=["q", "batch", "wall_seconds"])
    old = old[old["cell_id"] == "known__orthobo__seed0"].assign(source="d")
    filled = with_batch_columns(old).sort_values("iteration")
    assert filled["q"].tolist() == [1] * 6
    assert filled["batch"].tolist() == [0, 0, 1, 2, 3, 4]  # iteration - n_init + 1 after init
    assert filled["wall_seconds"].isna().all()
    assert filled["optimizer"].tolist() == ["orthobo"] * 6
    # Stored columns are kept; only missing values are filled.
    partial = old.assign(q=4, batch=[0, 0, 1, 1, np.nan, np.nan])
    kept = with_batch_columns(partial).sort_values("iteration")
    assert kept["batch"].tolist() == [0, 0, 1, 1, 3, 4]
    assert set(kept["optimizer"]) == {Q4}


@pytest.mark.slow
def test_a_report_of_one_point_per_step_without_wall_seconds_has_no_batch_sections(demo_dir):
    ids = [s.id for s in build_sections(load_results([demo_dir]), "orthobo", None)]
    assert "curves" in ids and "runtime" in ids
    assert "step-curves" not in ids and "step-time" not in ids


def test_wall_seconds_alone_show_the_batch_sections(tmp_path):
    spec = cell("s", "known", "orthobo", 0, n_init=2, budget=4)
    write_cell(tmp_path, spec, YS[1, 0], wall_seconds=WALL[1, 0])
    ids = [s.id for s in build_sections(load_results([tmp_path]), "orthobo", None)]
    assert ids.index("curves") < ids.index("step-curves") < ids.index("final")
    assert ids.index("runtime") < ids.index("step-time")


def test_the_runtime_table_does_not_call_one_evaluation_a_steps_wall_time(tmp_path):
    """Its evaluation column is the mean of a step's q evaluations; it was captioned
    "Wall-clock seconds per BO step", half the measured step time of an inline q = 2 cell."""
    spec = cell("s", "known", "orthobo", 0, n_init=2, budget=4)
    write_cell(tmp_path, spec, YS[1, 0], wall_seconds=WALL[1, 0])
    sections = {s.id: s for s in build_sections(load_results([tmp_path]), "orthobo", None)}
    caption = sections["runtime"].intro
    assert "Wall-clock" not in caption and "'Wall time per BO step'" in caption


def test_the_html_report_shows_batch_steps(batch_dir, tmp_path):
    out = build_report([batch_dir], tmp_path / "r.html")
    html = out.read_text()
    found = re.findall(r'<section id="([a-z-]+)">', html)
    assert found == ["summary", "curves", "step-curves", "final", "runtime", "step-time",
                     "glossary"]  # fmt: skip
    start = html.index('<section id="step-time">')
    step_time = html[start : html.index("</section>", start)]
    assert "orthobo (q=4)" in step_time and "4.75 [4, 5.5]" in step_time
    assert "median and [min, max] over seeds" in step_time
    for term in ("q (points per BO step)", "BO step (batch)", "wall seconds",
                 "wall time per BO step"):  # fmt: skip
        assert f"<dt>{term}</dt>" in html
    csv = pd.read_csv(tmp_path / "r.step-time.csv").set_index("optimizer")
    assert csv.loc[Q4, "wall_median"] == pytest.approx(4.75)
    steps = pd.read_csv(tmp_path / "r.step-curves.csv")
    assert steps[steps["optimizer"] == Q4]["mean"].tolist() == pytest.approx([3.5, 2.25, 0.75])


def test_a_run_set_without_wall_seconds_keeps_the_wall_panel_legend_prefixed(tmp_path):
    """Two run sets, only one with wall seconds (an older folder): the wall panel holds only
    that run set's rows but keeps its ``run set: optimizer`` label (and colour), not the bare
    optimizer label, which the palette does not have."""
    for seed in (0, 1):
        spec = cell("new", "known", "orthobo", seed, n_init=2, budget=2, q=4)
        write_cell(tmp_path / "new", spec, YS[4, seed], wall_seconds=WALL[4, seed])
        spec = cell("old", "known", "orthobo", seed, n_init=2, budget=2, q=4)
        write_cell(tmp_path / "old", spec, YS[4, seed])
    out = build_report([tmp_path / "new", tmp_path / "old"], tmp_path / "r.html")
    html = out.read_text()
    start = html.index('<section id="step-curves">')
    section = html[start : html.index("</section>", start)]
    assert "against wall seconds" in section and f"new: {Q4}" in section


def test_an_asynchronous_cell_is_a_method_of_its_own(tmp_path):
    """The same suite's q=4 cells, synchronous in one folder and asynchronous in another, are
    two methods (never pooled), the asynchronous one labelled so."""
    for folder, asynchronous in (("sync", False), ("async", True)):
        spec = cell("batch", "known", "orthobo", 0, n_init=2, budget=2, q=4)
        spec = dataclasses.replace(spec, asynchronous=asynchronous)
        write_cell(tmp_path / folder, spec, YS[4, 0], wall_seconds=WALL[4, 0])
    results = load_results([tmp_path / "sync", tmp_path / "async"])
    assert sorted(results.optimizers) == [Q4, "orthobo (q=4, async)"]
    assert set(results.runs["run_set"]) == {"batch"}


def test_cumulative_seconds_count_a_steps_fit_and_acquisition_once(runs):
    """A step fits and acquires once for its q points, whose rows all carry its fit (0.5 s) and
    acquisition (0.25 s); evaluations take 0.01 s each. q=4, after the design (2 evaluations):
    0.02 s; after step 1: 0.02 + 0.75 + 4 * 0.01; after step 2: 0.02 + 2 * 0.75 + 8 * 0.01. q=1
    (one point per step) after its first step: 0.02 + 0.75 + 0.01."""
    trace = traces(runs).set_index(["optimizer", "seed", "evaluation"])["seconds"]
    assert [trace[Q4, 0, e] for e in (2, 6, 10)] == pytest.approx([0.02, 0.81, 1.60])
    assert trace["orthobo", 0, 3] == pytest.approx(0.78)
    table = runtime_table(runs).set_index("optimizer")
    # BO steps over both seeds: q=4 2 + 2, q=1 4 + 4 (not 16 and 8 evaluations).
    assert table["steps"].to_dict() == {"orthobo": 8, Q4: 4}
    np.testing.assert_allclose(table.loc[Q4, ["fit_mean", "acq_mean", "eval_mean"]],
                               [0.5, 0.25, 0.01])  # fmt: skip
    assert table.loc[Q4, "fit_sd"] == 0.0


def test_an_asynchronous_cells_step_curve_is_a_best_so_far(runs):
    """Asynchronous q=2 rows, stored as evaluations finished: step 1's second point (y 0.5,
    iteration 5) finished after the points of asks 2 and 3. A step counts an evaluation once it
    and every evaluation stored before it were asked by that step (the running maximum of
    ``batch``, as wall seconds count), so the curve never rises: 4, 3, 2, then 0.5 at step 3."""
    rows = runs[(runs["optimizer"] == "orthobo") & (runs["seed"] == 0)].sort_values("iteration")
    ys = [5.0, 4.0, 3.0, 2.0, 6.0, 0.5]
    rows = rows.assign(
        optimizer="orthobo (q=2, async)", q=2, batch=[0, 0, 1, 2, 3, 1],
        regret=np.minimum.accumulate(ys),
    )  # fmt: skip
    trace = traces(rows, "batch")
    assert trace["value"].tolist() == [4.0, 3.0, 2.0, 0.5]
    assert trace["batch"].tolist() == [0, 1, 2, 3]


def test_the_final_table_says_when_methods_made_different_numbers_of_evaluations(batch_dir):
    """q=4 cells make 2 + 4 * 2 = 10 evaluations, q=1 cells 2 + 4 = 6: their final values are at
    equal BO steps, not equal evaluations, and the section says so."""
    section = final_section(load_results([batch_dir]), "orthobo")
    notes = [b for b in section.blocks if isinstance(b, str)]
    assert any("different numbers of evaluations (orthobo: 6, orthobo (q=4): 10)" in n
               for n in notes), notes  # fmt: skip


def test_the_normalized_score_divides_by_sobol_at_one_point_per_step(tmp_path):
    """A q sweep of Sobol: the baseline is the q=1 Sobol method, whatever order the files
    sort in (``t__sobol__q4__seed0`` sorts before ``t__sobol__seed0``)."""
    for q in (4, 1):
        spec = cell("s", "t=hartmann6", "sobol", 0, n_init=2, budget=1, q=q)
        write_cell(tmp_path, spec, [5.0, 4.0, 3.0, 2.0, 1.0, 0.5][: 2 + q])
    assert sobol_baselines(load_results([tmp_path])) == {"s": "sobol"}
