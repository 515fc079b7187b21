"""The CSV files beside a report are this report's: those an earlier report of the same name wrote
for tables this one does not have are removed, and nothing else beside it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from orthobench.report import build_report

from .conftest import cell, write_cell


def _store(root: Path, seeds: range) -> None:
    for seed in seeds:
        write_cell(root, cell("s", "t", "sobol", seed, 2, 2), [3.0 + seed, 2.0, 1.0, 0.5])


@pytest.fixture
def dirs(tmp_path) -> tuple[Path, Path]:
    base, new = tmp_path / "base", tmp_path / "new"
    _store(base, range(2))
    _store(new, range(1))
    return base, new


def _csvs(out: Path) -> set[str]:
    return {p.name for p in out.parent.glob(f"{out.stem}.*.csv")}


def test_a_report_removes_the_csvs_of_tables_it_no_longer_has(dirs, tmp_path):
    """Reported: `report A B --baseline A -o base.html`, then `report A B -o base.html`, left
    base.comparison*.csv with the first report's verdicts beside the second. A user's
    base.notes.csv and another report's CSVs stay."""
    out = tmp_path / "out" / "base.html"
    build_report(dirs, out, baseline=dirs[0])
    assert {"base.comparison.csv", "base.comparison-cells.csv"} <= _csvs(out)
    for kept in ("base.notes.csv", "other.comparison.csv"):
        (out.parent / kept).write_text("mine\n")
    build_report(dirs, out)
    assert not {"base.comparison.csv", "base.comparison-cells.csv"} & _csvs(out)
    assert "base.final-values.csv" in _csvs(out)
    for kept in ("base.notes.csv", "other.comparison.csv"):
        assert (out.parent / kept).read_text() == "mine\n"


def test_a_stale_csv_that_is_a_link_goes_but_not_its_target(dirs, tmp_path):
    """In a results folder (the default report path) too: the link is removed, the file it
    points to outside the folder is left as it was; a folder of a CSV's name is not a CSV."""
    base, _ = dirs
    outside = tmp_path / "outside.csv"
    outside.write_text("keep\n")
    (base / "report.comparison.csv").symlink_to(outside)
    (base / "report.ecdf.csv").mkdir()
    build_report([base], base / "report.html")
    assert not (base / "report.comparison.csv").is_symlink()
    assert outside.read_text() == "keep\n"
    assert (base / "report.ecdf.csv").is_dir()


def test_a_report_under_a_file_and_a_folder_at_a_csv_path_name_the_obstacle(dirs, tmp_path):
    """`-o afile/x.html` said only "afile: File exists"; a folder where a CSV goes was answered
    with "give the path of an HTML file with -o", though -o named one."""
    from orthobench.exceptions import OrthobenchError

    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(OrthobenchError, match=f"{afile} is a file, not a folder"):
        build_report(dirs, afile / "x.html")
    out = tmp_path / "rep" / "rep.html"
    (out.parent / "rep.curves.csv").mkdir(parents=True)
    with pytest.raises(OrthobenchError) as refused:
        build_report(dirs, out)
    assert str(refused.value) == (
        f"cannot write the report's table to {out.parent / 'rep.curves.csv'}: it exists and is "
        "not a regular file; remove it or give -o another name."
    )
    assert not out.exists()
