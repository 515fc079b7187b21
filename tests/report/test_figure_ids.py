"""Figures inlined in one page: their SVG ids are unique in the page and their references
resolve within the figure (matplotlib numbers ids per figure: ``axes_1``, ``line2d_1``)."""

from __future__ import annotations

import collections
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.probe.tables import summary_table
from orthobench.report import build_report, figures

from .test_figures import _probe_rows
from .test_runtime_figure import _two_panel_runs

SVG = "http://www.w3.org/2000/svg"
_ID = re.compile(r'<[^<>]*?\sid="([^"]+)"')
_REF = re.compile(r'url\(#([^)]+)\)|href="#([^"]+)"')


def _ids(text: str) -> list[str]:
    return _ID.findall(text)


def _refs(text: str) -> set[str]:
    return {a or b for a, b in _REF.findall(text)}


def _duplicates(ids: list[str]) -> dict[str, int]:
    return {i: n for i, n in collections.Counter(ids).items() if n > 1}


def _svgs() -> list[str]:
    """Figures of several kinds, as one report would inline them."""
    probe = summary_table(_probe_rows())
    runs = _two_panel_runs()
    colors = figures.palette(sorted(runs["series"].unique()))
    return [
        figures.runtime_svg(runs, colors),
        figures.runtime_svg(runs[runs["task"] == "a"], colors),
        figures.probe_ratio_svg(probe, "mse_ratio"),
        figures.ratio_vs_s_svg(probe, "var_ratio"),
    ]


def test_ids_are_unique_across_figures_and_references_resolve_within_each() -> None:
    """Before: every figure had ``figure_1``, ``axes_1``, ``patch_1`` (79 ids repeated over
    these four). Each SVG still parses as XML and each ``url(#..)``/``href="#.."`` names one of its
    own ids."""
    svgs = _svgs()
    assert _duplicates([i for svg in svgs for i in _ids(svg)]) == {}
    for svg in svgs:
        root = ET.fromstring(svg)
        parsed = [e.get("id") for e in root.iter() if e.get("id") is not None]
        assert sorted(parsed) == sorted(_ids(svg))  # the regex sees every id the parser sees
        assert _refs(svg) and _refs(svg) <= set(parsed)


def test_the_same_figure_is_drawn_the_same() -> None:
    """The ids depend on the figure only: the same results give the same SVG."""
    assert _svgs() == _svgs()


def test_a_label_that_reads_like_an_id_is_left_as_written() -> None:
    """Only tags are rewritten: a legend label naming an id stays as the user wrote it."""
    runs = _two_panel_runs()
    label = 'y id="axes_1" url(#axes_1) href="#axes_1"'
    runs.loc[runs["series"] == "y: ucb", "series"] = label
    svg = figures.runtime_svg(runs, figures.palette(sorted(runs["series"].unique())))
    texts = ["".join(e.itertext()) for e in ET.fromstring(svg).iter(f"{{{SVG}}}text")]
    assert label in texts


def _assert_page_ids_unique(html: str) -> None:
    ids = _ids(html)
    assert len(ids) > 100  # the figures' ids are there
    assert _duplicates(ids) == {}
    assert _refs(html) <= set(ids)


@pytest.mark.slow  # a whole report (2.3 s); the default tier builds others
def test_a_report_has_no_duplicate_id(demo_dir: Path, tmp_path: Path) -> None:
    html = build_report([demo_dir], tmp_path / "r.html").read_text()
    _assert_page_ids_unique(html)


_SUITE = """\
name: {name}
seeds: 2
n_init: 3
budget: 2
device: cpu
tasks: [hartmann6, ackley8]
optimizers:
  - sobol
  - {{name: qlogei, params: {{function_samples: 16, raw_samples: 16, num_restarts: 1}}}}
"""


@pytest.mark.slow
def test_a_report_of_two_real_runs_has_no_duplicate_id(tmp_path: Path) -> None:
    """Two suites run for real (a few seconds each), reported together."""
    dirs = []
    for name in ("ids-a", "ids-b"):
        suite = tmp_path / f"{name}.yaml"
        suite.write_text(_SUITE.format(name=name))
        out = tmp_path / name
        result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(out)])
        assert result.exit_code == 0, result.output
        dirs.append(str(out))
    result = CliRunner().invoke(cli, ["report", *dirs, "-o", str(tmp_path / "both.html")])
    assert result.exit_code == 0, result.output
    _assert_page_ids_unique((tmp_path / "both.html").read_text())


def test_two_identical_figures_in_one_page_get_ids_of_their_own(tmp_path: Path) -> None:
    """Two directories of the same deterministic probe draw identical figures: their hashed id
    prefixes were equal, 170 duplicate ids in the page (clip paths of the second figure
    pointing at the first's)."""
    from tests.report.conftest import write_probe_state

    for root in (tmp_path / "a", tmp_path / "b"):
        for seed in range(2):
            write_probe_state(root, "p", seed, {("orth", 8): 2.0 + seed, ("orth", 32): 3.0})
    html = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "r.html").read_text()
    ids = _ids(html)
    assert _duplicates(ids) == {} and _refs(html) <= set(ids)
