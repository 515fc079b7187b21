"""The HTML report end to end on a stored result set: sections, escaping, CSV, the CLI options."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import OrthobenchError
from orthobench.report import build_report
from orthobench.report.sections import Section

from .conftest import cell, write_cell

SECTIONS = ["summary", "failed", "curves", "final", "across", "runtime", "orthobo", "probe",
            "glossary"]  # fmt: skip


@pytest.fixture(scope="module")
def report(demo_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "r.html"
    return out, build_report([demo_dir], out).read_text()


def _section(html: str, section: str) -> str:
    start = html.index(f'<section id="{section}">')
    return html[start : html.index("</section>", start)]


def test_every_section_is_present_in_order(report):
    _, html = report
    found = re.findall(r'<section id="([a-z-]+)">', html)
    assert found == SECTIONS


def test_failed_cells_are_listed_with_the_first_line_of_their_error(report):
    _, html = report
    failed = _section(html, "failed")
    assert "known__qlogei__seed2" in failed and "RuntimeError: simulated crash" in failed
    assert "second line" not in failed


def test_tasks_without_optimum_show_the_objective_and_all_nan_tasks_do_not_crash(report):
    _, html = report
    curves = _section(html, "curves")
    assert "noopt: best-so-far objective (no known optimum)" in curves
    assert "known: best-so-far regret" in curves
    assert "broken: no evaluation returned a finite value" in curves
    # Outlier evaluations are marked on the curve of the task that has them.
    assert "outlier evaluation" in curves


def test_curves_have_a_line_at_the_end_of_the_initial_design(report):
    _, html = report
    assert "initial design (3)" in _section(html, "curves")


def test_final_values_bold_the_best_and_name_the_reference(report):
    out, html = report
    final = _section(html, "final")
    assert "vs orthobo (Holm p)" in final  # the first GP optimizer stored
    table = pd.read_csv(out.with_name("r.final-values.csv"))
    known = table[table["task"] == "known"].set_index("optimizer")
    # orthobo ends at 0.5 + 0.1 seed -> mean 0.6 over seeds 0-2: the best, in bold.
    assert known.loc["orthobo", "mean"] == pytest.approx(0.6)
    assert known.loc["orthobo", "best"]
    assert "<strong>0.6 [" in final
    assert known.loc["qlogei", "seeds"] == 2  # the failed cell is not a seed
    noopt = table[table["task"] == "noopt"].set_index("optimizer")
    assert (noopt["metric"] == "best_y").all() and (noopt["outliers"] == 3).all()


def test_three_seeds_are_too_few_for_a_test(report):
    """sobol is worse than orthobo on each of the 3 seeds, but 3 pairs cannot give p < 0.25:
    the HTML says so instead of printing a p-value, the CSV has NaN p and the minimum."""
    out, html = report
    final = _section(html, "final")
    assert "too few seeds for a test (3 pairs, min p 0.25)" in final
    assert "too few seeds for a test (2 pairs, min p 0.5)" in final  # qlogei lost seed 2
    assert "Wilcoxon signed-rank" in final and "Mann-Whitney" not in html
    table = pd.read_csv(out.with_name("r.final-values.csv"))
    sobol = table[(table["task"] == "known") & (table["optimizer"] == "sobol")].iloc[0]
    assert sobol["pairs"] == 3 and sobol["p_min"] == 0.25 and not sobol["testable"]
    assert pd.isna(sobol["p_value"]) and pd.isna(sobol["p_holm"])


def test_every_table_is_written_as_csv_and_linked(report):
    out, html = report
    links = re.findall(r'<a href="([^"]+\.csv)">', html)
    assert len(links) >= 10
    for link in links:
        assert (out.parent / link).exists()
    assert "r.probe-summary.csv" in links and "r.orthobo-diagnostics.csv" in links


def test_the_report_makes_no_external_requests(report):
    _, html = report
    assert 'src="http' not in html and 'href="http' not in html
    assert "<script" not in html


def test_the_probe_section_aggregates_over_states(report):
    out, html = report
    summary = pd.read_csv(out.with_name("r.probe-summary.csv"))
    row = summary[(summary["estimator"] == "qmc-owen+rb") & (summary["mc_samples"] == 8)].iloc[0]
    # States with ratios 2 and 8: geometric mean 4 (the arithmetic mean would be 5).
    assert row["mse_ratio"] == pytest.approx(4.0)
    assert row["ci_over"] == "states" and row["mse_ratio_worst"] == pytest.approx(2.0)
    assert "4 [2, 8]" in _section(html, "probe")


def test_a_section_naming_a_term_the_glossary_lacks_is_an_error():
    """Not dropped from the glossary: the reader would meet a term defined nowhere."""
    with pytest.raises(
        ValueError, match=r"'final' names terms the glossary lacks: \['final gap'\]"
    ):
        Section("final", "Final values", terms=("final value", "final gap"))


def test_labels_and_titles_are_escaped(tmp_path):
    spec = cell("s", "known", "sobol", 0, n_init=1, budget=1)
    write_cell(tmp_path, spec, [2.0, 1.0], label="<script>alert(1)</script>")
    html = build_report([tmp_path], tmp_path / "r.html", title="<script>t</script>").read_text()
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;script&gt;t" in html


def test_a_reference_that_is_not_stored_is_a_one_line_error(demo_dir, tmp_path):
    with pytest.raises(OrthobenchError, match=r"--reference must be a stored optimizer label"):
        build_report([demo_dir], tmp_path / "r.html", reference="nope")
    result = CliRunner().invoke(cli, ["report", str(demo_dir), "-o", str(tmp_path / "r.html"),
                                      "--reference", "nope"])  # fmt: skip
    assert result.exit_code == 2 and "--reference must be" in result.output


@pytest.mark.slow
def test_the_reference_option_changes_the_tested_optimizer(demo_dir, tmp_path):
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(demo_dir), "-o", str(out),
                                      "--reference", "sobol"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "vs sobol (Holm p)" in out.read_text()


@pytest.mark.slow
def test_baseline_comparison_of_a_suite_run_twice(demo_dir, tmp_path):
    """A copy is identical cell by cell; the two sets are side by side, not pooled."""
    base, new = tmp_path / "base", tmp_path / "new"
    shutil.copytree(demo_dir, base)
    shutil.copytree(demo_dir, new)
    out = tmp_path / "cmp.html"
    result = CliRunner().invoke(
        cli, ["report", str(base), str(new), "--baseline", f"{base}/", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    html = out.read_text()
    comparison = _section(html, "comparison")
    assert "identical: every y of the 3 common cells is the same" in comparison
    final = pd.read_csv(tmp_path / "cmp.final-values.csv")
    assert set(final["run_set"]) == {f"demo @ {base}", f"demo @ {new}"}
    assert (final[final["task"] == "known"]["seeds"] <= 3).all()  # never 6: not pooled


def test_a_baseline_that_is_not_a_report_directory_is_an_error(demo_dir, tmp_path):
    with pytest.raises(OrthobenchError, match=r"--baseline must be one of the report's"):
        build_report([demo_dir], tmp_path / "r.html", baseline=tmp_path)


def test_a_run_set_without_ecdf_targets_keeps_the_legend_prefixed(tmp_path):
    """Two run sets, the second's only task all NaN: the ECDF across tasks holds the first run
    set alone, and its legend keeps the ``run set: optimizer`` labels of the palette (bare ones
    made seaborn fail on the missing colour)."""
    for seed in range(2):
        for task in ("t1", "t2"):
            write_cell(tmp_path / "a", cell("A", task, "sobol", seed, 2, 2), [5, 4, 3, 2 + seed])
        write_cell(tmp_path / "b", cell("B", "t1", "sobol", seed, 2, 2), [float("nan")] * 4)
    html = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "r.html").read_text()
    start = html.index('<section id="across">')
    assert "A: sobol" in html[start : html.index("</section>", start)]
