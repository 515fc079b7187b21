"""What a report says where its data is thin or odd: a directory given twice, a baseline with
nothing to compare, failed cells only, one seed, tied seeds, a subset of seeds compared with a
baseline, many series in one figure, and the intervals the glossary names."""

from __future__ import annotations

import itertools
import re
import warnings
from html import unescape

import numpy as np
import pandas as pd
import pytest

from orthobench.exceptions import OrthobenchError, OrthobenchWarning
from orthobench.report import build_report
from orthobench.report.compare import compare_pairs
from orthobench.report.data import load_results
from orthobench.report.glossary import GLOSSARY
from orthobench.report.sections import build_sections
from orthobench.results import ResultStore

from .conftest import cell, write_cell, write_probe_state


def _section(html: str, section: str) -> str:
    start = html.index(f'<section id="{section}">')
    return html[start : html.index("</section>", start)]


def _rows(html: str, section: str) -> list[list[str]]:
    """The body rows of every table of ``section``, as lists of cell texts."""
    body = _section(html, section)
    return [
        re.findall(r"<td[^>]*>(?:<strong>)?(.*?)(?:</strong>)?</td>", row)
        for row in re.findall(r"<tr>(<td.*?)</tr>", body, re.S)
    ]


def _store_seeds(root, seeds, finals, optimizer="sobol", suite="s", task="t") -> None:
    """Cells of 2 initial points and 2 BO steps whose last value (the best so far) is
    ``finals[seed]``."""
    for seed in seeds:
        final = finals[seed]
        write_cell(
            root, cell(suite, task, optimizer, seed, 2, 2), [final + 3, final + 2, final + 1, final]
        )


def test_a_directory_given_twice_is_read_once(tmp_path):
    """``report out/a ./out/a``: the rows were read twice, so every cell counted its
    evaluations twice (14 for 7) and the summary listed twice the cells stored."""
    root = tmp_path / "a"
    _store_seeds(root, range(3), [1.0, 2.0, 3.0])
    same = tmp_path / "a" / ".." / "a"
    with pytest.warns(OrthobenchWarning, match=r"read once"):
        results = load_results([root, same])
    assert len(results.runs) == 12 and len(results.files) == 3
    with pytest.warns(OrthobenchWarning, match=r"read once"):
        out = build_report([root, same], tmp_path / "r.html")
    final = pd.read_csv(tmp_path / "r.final-values.csv")
    assert final["evaluations"].tolist() == [4]
    assert "3 cells" in _section(out.read_text(), "summary")


def test_a_baseline_without_another_directory_is_refused(tmp_path):
    """``--baseline DIR`` with DIR alone (or DIR twice) compared nothing and said nothing."""
    root = tmp_path / "a"
    _store_seeds(root, range(2), [1.0, 2.0])
    with pytest.raises(OrthobenchError, match=r"--baseline .* another directory"):
        build_report([root], tmp_path / "r.html", baseline=root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(OrthobenchError, match=r"--baseline .* another directory"):
            build_report([root, tmp_path / "a" / ".." / "a"], tmp_path / "r.html", baseline=root)


def test_a_baseline_or_compared_set_without_run_cells_is_refused(tmp_path):
    """Probe directories compared with ``--baseline`` gave a report without a comparison and
    without a word: the comparison is of run cells."""
    runs, probe, other = tmp_path / "runs", tmp_path / "probe", tmp_path / "other"
    _store_seeds(runs, range(2), [1.0, 2.0])
    for root in (probe, other):
        write_probe_state(root, "p", 0, {("orth", 8): 2.0})
    for dirs, baseline, side in (
        ([probe, other], probe, "the baseline holds none"),
        ([runs, probe], probe, "the baseline holds none"),
        ([runs, probe], runs, "no other directory does"),
    ):
        with pytest.raises(OrthobenchError, match=rf"--baseline compares BO run cells, but {side}"):
            build_report(dirs, tmp_path / "r.html", baseline=baseline)


def test_a_compared_set_that_shares_no_cell_with_the_baseline_says_whose_suites_differ(tmp_path):
    """Another suite's name: every row read 'only in the baseline' or 'new', with nothing to say
    that cells are matched by suite."""
    base, new = tmp_path / "base", tmp_path / "new"
    _store_seeds(base, range(2), [1.0, 2.0], suite="r1")
    _store_seeds(new, range(2), [1.0, 2.0], suite="r2")
    html = build_report([base, new], tmp_path / "r.html", baseline=base).read_text()
    assert f"{new} shares no cell with the baseline (its suites: r2; the baseline's: r1)." in (
        unescape(_section(html, "comparison"))
    )


def test_the_glossary_names_the_intervals_over_probe_states_that_are_computed():
    """The probe tables give the geometric mean over states a Student-t interval of the log
    ratios and the median an order-statistic interval (orthobench.probe.tables); the glossary
    said both were a percentile bootstrap over states (docs/design.md: rejected, it covered 75%
    with 3 states)."""
    text = GLOSSARY["CI over states"]
    assert "Student-t" in text and "log" in text and "order-statistic" in text
    assert "bootstrap interval of the geometric mean over states" not in text
    assert "rebuild" in text  # one state: that state's bootstrap over rebuilds


def test_the_glossary_defines_the_probe_tables_columns(tmp_path):
    """The ranking table's 'upper rebuild CI', 'worst median', 'worst cell' and 'max excess
    bias²/MSE', and the summary's 'undefined states', were defined nowhere in the report."""
    root = tmp_path / "p"
    for seed in range(2):
        write_probe_state(root, "p", seed, {("orth", 8): 2.0 + seed})
    html = unescape(build_report([root], tmp_path / "r.html").read_text())
    glossary = html[html.index('id="glossary"') :]
    terms = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", glossary, re.S)
    assert {"undefined states", "probe ranking"} <= {term for term, _ in terms}
    ranking = dict(terms)["probe ranking"]
    for column in ("upper rebuild CI", "worst median", "worst cell", "max excess bias²/MSE"):
        assert f"'{column}'" in ranking, column


def test_a_report_of_failed_cells_only_writes_no_empty_table_and_readable_csvs(tmp_path):
    """Only failures: the summary was an empty table and its CSV a bare newline (pandas:
    EmptyDataError), and the glossary an empty section."""
    store = ResultStore(tmp_path / "f")
    for seed in range(2):
        store.record_failure(cell("s", "t", "sobol", seed, 2, 2), "RuntimeError: x", "tb", 0.1)
    html = build_report([tmp_path / "f"], tmp_path / "r.html").read_text()
    assert not re.search(r"<tbody>\s*</tbody>", html)
    assert 'id="glossary"' not in html
    assert "no stored cell" in _section(html, "summary")
    for path in tmp_path.glob("r.*.csv"):
        assert not pd.read_csv(path).columns.empty, path


def test_the_summary_dates_the_files_by_their_stamp_and_claims_no_write_span(tmp_path):
    """Every file of a run carries the run's start as ``written_at``, so the "span between the
    first and last file written" was 0 s for any single run, however long it took."""
    stamp = {"written_at": "2026-01-02T03:04:05+0000"}
    for seed in range(2):
        write_cell(tmp_path, cell("s", "t", "sobol", seed, 2, 2), [4, 3, 2, 1], metadata=stamp)
    out = build_report([tmp_path], tmp_path / "r.html")
    summary = _section(out.read_text(), "summary")
    assert "written over" not in summary
    assert "2026-01-02 03:04 UTC" in summary
    frame = pd.read_csv(tmp_path / "r.summary.csv")
    assert "written_span_seconds" not in frame
    assert frame["first_stamp"].tolist() == ["2026-01-02T03:04:05+0000"]


def test_the_summary_names_the_cpus_and_says_when_run_sets_were_computed_on_several(tmp_path):
    """A cell's values hold for a thread count and a CPU type: a comparison of run sets
    computed on different CPUs compares the CPUs too, and nothing in the report said so."""
    one, other = "AMD EPYC 7B13; AVX2", "Intel(R) Xeon(R) Processor; AVX512"
    for seed in range(2):
        write_cell(
            tmp_path / "a", cell("a", "t", "sobol", seed, 2, 2), [4, 3, 2, 1], metadata={"cpu": one}
        )
    alone = _section(build_report([tmp_path / "a"], tmp_path / "a.html").read_text(), "summary")
    assert one in alone and "CPU types" not in alone
    write_cell(
        tmp_path / "b", cell("b", "t", "sobol", 0, 2, 2), [4, 3, 2, 1], metadata={"cpu": other}
    )
    html = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "r.html").read_text()
    assert f"computed on 2 CPU types ({one}, {other})" in unescape(_section(html, "summary"))
    frame = pd.read_csv(tmp_path / "r.summary.csv")
    assert frame.set_index("run_set")["cpus"].to_dict() == {"a": one, "b": other}


def test_the_summary_names_the_thread_count_of_probe_states(tmp_path):
    """A probe state records its count as ``threads``; the summary read ``threads_per_cell``
    alone and said "not recorded"."""
    write_probe_state(tmp_path, "p", 0, {("orth", 8): 2.0})
    build_report([tmp_path], tmp_path / "r.html")
    frame = pd.read_csv(tmp_path / "r.summary.csv")
    assert frame["threads"].astype(str).tolist() == ["1"]


def test_the_summary_names_the_gpu_of_a_cuda_run(tmp_path):
    gpu = {"device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3"}
    write_cell(tmp_path, cell("s", "t", "sobol", 0, 2, 2), [4, 3, 2, 1], metadata=gpu)
    build_report([tmp_path], tmp_path / "r.html")
    frame = pd.read_csv(tmp_path / "r.summary.csv")
    assert frame["devices"].tolist() == ["cuda:0 (NVIDIA H100 80GB HBM3)"]


def test_the_git_sha_table_keeps_the_mark_of_edited_code(tmp_path):
    """A cell computed by edited code (``-dirty``) must not read as the clean commit's."""
    sha = "0123456789" + "a" * 30
    for seed, git_sha in enumerate((sha, f"{sha}-dirty")):
        write_cell(
            tmp_path, cell("s", "t", "sobol", seed, 2, 2), [4, 3], metadata={"git_sha": git_sha}
        )
    build_report([tmp_path], tmp_path / "r.html")
    frame = pd.read_csv(tmp_path / "r.git-shas.csv")
    assert sorted(frame["git_sha"].iloc[0].split(", ")) == [
        "0123456789 (1)",
        "0123456789-dirty (1)",
    ]


def test_one_seed_says_it_has_no_interval(tmp_path):
    """One seed: the final table showed a bare mean under "final mean [95% CI]" and the curve
    caption promised a 95% t interval."""
    _store_seeds(tmp_path, [0], [1.0])
    _store_seeds(tmp_path, [0], [2.0], optimizer="qlogei")
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    curves = _section(html, "curves")
    assert "t: best-so-far regret, one seed (no interval)." in curves
    finals = {row[1]: row[4] for row in _rows(html, "final")}
    assert finals == {"qlogei": "2 (one seed: no interval)", "sobol": "1 (one seed: no interval)"}


def test_a_curve_caption_names_the_optimizers_with_one_seed(tmp_path):
    _store_seeds(tmp_path, range(3), [1.0, 2.0, 3.0])
    _store_seeds(tmp_path, [0], [2.0], optimizer="qlogei")
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    assert (
        "t: best-so-far regret, mean over seeds with its 95% t interval (none for qlogei: one "
        "seed)." in _section(html, "curves")
    )


def test_the_step_curve_caption_names_the_optimizers_with_one_seed(tmp_path):
    wall = [0.1, 0.2, 0.3, 0.4]
    for seed in range(3):
        write_cell(tmp_path, cell("s", "t", "sobol", seed, 2, 2), [4, 3, 2, 1], wall_seconds=wall)
    write_cell(tmp_path, cell("s", "t", "qlogei", 0, 2, 2), [4, 3, 2, 1], wall_seconds=wall)
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    assert "95% t interval (none for qlogei: one seed)." in _section(html, "step-curves")


def test_tied_seeds_are_why_six_pairs_can_be_too_few(tmp_path):
    """6 paired seeds, 2 of them equal to the reference's: 4 differences carry a sign, so the
    smallest p is 0.125 and the table says too few seeds; the text said fewer than 6 pairs
    were too few, as if 6 were enough."""
    ref = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    _store_seeds(tmp_path, range(6), ref, optimizer="qlogei")
    _store_seeds(tmp_path, range(6), [1.0, 2.0, 3.5, 4.5, 5.5, 6.5])
    html = build_report([tmp_path], tmp_path / "r.html", reference="qlogei").read_text()
    final = _section(html, "final")
    assert "too few seeds for a test (6 pairs, 4 differ, min p 0.125)" in final
    assert "equal final values carry no sign" in final
    assert "fewer than 6 are too few" not in final


def _base_and_new(tmp_path, new_seeds, new_finals):
    base, new = tmp_path / "base", tmp_path / "new"
    finals = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    _store_seeds(base, range(6), finals)
    _store_seeds(new, new_seeds, new_finals)
    return base, new


def test_identical_common_cells_of_a_seed_subset_are_not_called_different(tmp_path):
    """A new set with seeds 0-2 of a 6-seed baseline, every common y equal: the verdict said
    "trajectories differ (max |dy| 0)"."""
    base, new = _base_and_new(tmp_path, range(3), [1.0, 2.0, 3.0])
    results = load_results([base, new])
    row = compare_pairs(results.runs, str(base)).iloc[0]
    assert "differ" not in row.verdict, row.verdict
    assert row.verdict.startswith("identical on the 3 common cells"), row.verdict
    assert "3 cells only in the baseline" in row.verdict


def test_all_equal_pairs_are_no_difference_not_too_few_seeds(tmp_path):
    """6 paired seeds, every final value equal: the Holm p column said "too few seeds for a
    test" though 6 pairs were there; nothing differs, so nothing is tested."""
    base, new = _base_and_new(tmp_path, range(6), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    html = build_report([base, new], tmp_path / "r.html", baseline=base).read_text()
    verdicts = _rows(html, "comparison")[0]
    assert verdicts[8] == "no difference (6 pairs equal)", verdicts


@pytest.mark.slow  # 12 series, every figure drawn (2.4 s)
def test_the_series_of_one_figure_get_distinct_colours(tmp_path):
    """With more than 10 series the palette is husl, whose neighbouring hues (22.5 degrees
    apart for 16) look alike: sorted labels put one run set's series side by side, so two
    optimizers of one figure were drawn in nearly the same colour."""
    from orthobench.report.sections import series_palette

    for suite in ("a", "b", "c", "d", "e", "f"):
        for optimizer in ("qlogei", "sobol"):
            _store_seeds(tmp_path / suite, range(2), [1.0, 2.0], optimizer, suite, f"t{suite}")
    results = load_results([tmp_path / s for s in "abcdef"])
    colors = series_palette(results)
    assert len(colors) == 12
    labels = results.runs.assign(label=results.runs["run_set"] + ": " + results.runs["optimizer"])
    for _, group in labels.groupby("task"):
        shown = [np.array(colors[label]) for label in group["label"].unique()]
        for a, b in itertools.combinations(shown, 2):
            assert np.abs(a - b).max() > 0.3, (group["task"].iloc[0], a, b)
    build_sections(results, None, None)  # the reordered palette draws every figure


def test_scores_at_other_evaluation_counts_than_sobols_are_noted(tmp_path):
    """A q sweep: Sobol at q = 1 made 4 evaluations, qlogei at q = 2 made 6, and its normalized
    score divided its regret after 6 by Sobol's after 4 without a word."""
    for task in ("t1", "t2"):
        for seed in range(2):
            write_cell(tmp_path, cell("s", task, "sobol", seed, 2, 2), [5, 4, 3, 2])
            write_cell(tmp_path, cell("s", task, "qlogei", seed, 2, 2, q=2), [5, 4, 3, 2, 1, 1])
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    across = unescape(_section(html, "across"))
    assert (
        "normalized scores at other evaluation counts than the Sobol baseline's: qlogei (q=2) "
        "after 6 evaluations, each against sobol's final regret after 4" in across
    )


def test_a_run_set_without_the_reference_says_so(tmp_path):
    """The reference optimizer exists in one run set only: the other's test column was a bare
    "-", as for an optimizer that shares no seed with it."""
    _store_seeds(tmp_path / "a", range(2), [1.0, 2.0], optimizer="qlogei", suite="A")
    _store_seeds(tmp_path / "a", range(2), [1.5, 2.5], suite="A")
    _store_seeds(tmp_path / "b", range(2), [1.0, 2.0], suite="B")
    html = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "r.html").read_text()
    tests = {(row[0], row[2]): row[8] for row in _rows(html, "final")}
    assert tests[("B", "sobol")] == "- (qlogei not run here)"
    assert tests[("A", "qlogei")] == "reference"


def test_the_normalized_score_divides_by_sobol_where_another_label_also_runs_sobol(tmp_path):
    """The reported bug: ``sobol-b`` (another Sobol run of the suite) sorts before ``sobol`` in
    the stored files ('-' < '_'), and the score was taken against it, the caption saying Sobol."""
    from orthobench.report.sections import sobol_baselines

    for task in ("t1", "t2"):
        for label in ("sobol-b=sobol", "sobol"):
            for seed in range(2):
                write_cell(tmp_path, cell("s", task, label, seed, 2, 2), [4, 3, 2, 1 + seed])
    results = load_results([tmp_path])
    assert sobol_baselines(results) == {"s": "sobol"}
    html = build_report([tmp_path], tmp_path / "r.html").read_text()
    assert "0 is the final regret of sobol on the same seed" in unescape(_section(html, "across"))


def test_a_dollar_sign_in_a_directory_name_is_text_in_the_figures(tmp_path):
    """Run sets are labelled ``suite @ DIR``: a directory named ``a$\\frac$`` failed the report
    with matplotlib's mathtext parse error, and ``r$x^2$`` lost its dollar signs."""
    dirs = [tmp_path / "a$\\frac$", tmp_path / "b"]
    for root in dirs:
        _store_seeds(root, range(2), [1.0, 2.0])
    html = build_report(dirs, tmp_path / "r.html").read_text()
    assert "a$\\frac$" in unescape(_section(html, "curves"))
