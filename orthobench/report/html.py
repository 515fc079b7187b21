"""Self-contained HTML report (inline SVG, inline CSS, no external requests) through jinja2,
with every table also written as CSV beside it, each file atomically, and the CSVs an earlier
report of the same name wrote for other tables removed."""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Collection, Iterable
from pathlib import Path

import jinja2

from orthobench.exceptions import OrthobenchError
from orthobench.report import figures
from orthobench.report.blocks import TABLE_NAMES
from orthobench.report.data import load_results
from orthobench.report.glossary import GLOSSARY
from orthobench.report.sections import Figure, Table, build_sections
from orthobench.results import file_in_the_way, os_error_text, unique_dirs, write_atomic
from orthobench.work import CELL

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("orthobench.report", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
)


def csv_path(out: Path, name: str) -> Path:
    """Where the CSV of table ``name`` goes: ``<report stem>.<name>.csv`` beside the report."""
    return out.with_name(f"{out.stem}.{name}.csv")


def _stale_csvs(out: Path, written: Collection[Path]) -> list[Path]:
    """The CSVs beside ``out`` of every table (:data:`~orthobench.report.blocks.TABLE_NAMES`)
    but those at ``written`` that exist as a regular file or a symbolic link: an earlier report's
    of the same name."""
    paths = (csv_path(out, name) for name in sorted(TABLE_NAMES))
    return [p for p in paths if p not in written and (p.is_symlink() or p.is_file())]


def build_report(
    dirs: Iterable[str | Path],
    out: str | Path,
    title: str | None = None,
    *,
    reference: str | None = None,
    baseline: str | Path | None = None,
    cell_ids: Collection[str] | None = None,
    probe_rows: Collection[tuple] | None = None,
) -> Path:
    """Read the results of each dir and write one HTML report to ``out``, tables as CSV beside it.

    Every file is written atomically (:func:`~orthobench.results.write_atomic`): a failure leaves
    each file whole or as it was, never cut short. The CSVs are written first, so the HTML never
    links a CSV that is not there. Then the CSVs of the tables this report does not have, left by
    an earlier report of the same name, are removed (:data:`~orthobench.report.blocks.TABLE_NAMES`;
    a symbolic link among them is removed itself, never its target): they would pass for this
    report's. No other file beside the report is touched.

    Args:
        dirs: Results directories (``DIR/runs``, ``DIR/probe``, ``DIR/runs.jsonl``); one given
            twice (``out/a ./out/a``) is read once, with a warning.
        out: The HTML file (made absolute at once); its folder is created if missing.
        title: Page title (default: the suites' names).
        reference: Optimizer label the final values are tested against (default: the first GP
            optimizer in the order the cells were stored).
        baseline: One of ``dirs``: compare every other directory with it, cell by cell.
        cell_ids: Report only these cells (:func:`~orthobench.report.data.load_results`);
            None reports every stored cell.
        probe_rows: Report only these probe rows (:func:`~orthobench.report.data.load_results`);
            None reports every stored row.

    Returns:
        The absolute path of the HTML file.

    Raises:
        OrthobenchError: when ``dirs`` hold no stored cell, probe row or failed cell, when
            ``reference`` names no stored optimizer, ``baseline`` is not one of ``dirs``, is
            the only one, or it or every other directory holds no run cell (probe rows are not
            compared), ``out`` or one of its CSV paths exists and is not a regular file (a
            device such as ``/dev/full``, a folder), a CSV path or an ``out`` in one of
            ``dirs`` is a symbolic link (an ``out`` elsewhere is written through one), or a file
            cannot be written (a full disk, a read-only folder, a path too long): one line naming
            the path and the reason.
    """
    dirs = unique_dirs(dirs)
    out = Path(os.path.abspath(out))
    results = load_results(dirs, cell_ids, probe_rows)
    # A folder of failed cells alone still has a report: the failures and their errors.
    if results.runs.empty and results.probe.empty and results.failures.empty:
        raise OrthobenchError(
            f"no stored results under {', '.join(f'{d}/runs or {d}/probe' for d in dirs)}; run "
            "or probe a suite first."
        )
    if baseline is not None:
        same = [d for d in dirs if Path(d).resolve() == Path(baseline).resolve()]
        if not same:
            raise OrthobenchError(
                f"--baseline must be one of the report's directories {dirs}, but got "
                f"{str(baseline)!r}."
            )
        baseline = same[0]
        if len(dirs) < 2:
            raise OrthobenchError(
                f"--baseline {baseline!r} needs another directory to compare with, but the "
                f"report reads only {dirs}."
            )
        failed, stored = results.failures, set(results.runs["source"])
        # A directory whose every cell failed holds run cells too (its failures), compared with
        # one that stored some; with none stored anywhere there is no final value to compare.
        with_runs = stored | set(failed.loc[failed["kind"] == CELL, "source"]) if stored else stored
        if baseline not in with_runs or len(with_runs) < 2:
            # The comparison is of run cells: probe rows have none, and a report that silently
            # left it out would read as "nothing to compare".
            missing = (
                "the baseline holds none"
                if baseline not in with_runs
                else "no other directory does"
            )
            raise OrthobenchError(
                f"--baseline compares BO run cells, but {missing} (directories with run cells: "
                f"{sorted(with_runs) or 'none'}); probe results are not compared."
            )
    labels = results.optimizers
    if reference is not None and reference not in labels:
        raise OrthobenchError(
            f"--reference must be a stored optimizer label ({', '.join(labels) or 'none'}), "
            f"but got {reference!r}."
        )
    reference = reference or results.default_reference()
    sections = build_sections(results, reference, None if baseline is None else str(baseline))
    placed: collections.Counter[str] = collections.Counter()
    for section in sections:
        section.blocks[:] = [
            dataclasses.replace(b, svg=figures.unique_in_page(b.svg, placed))
            if isinstance(b, Figure)
            else b
            for b in section.blocks
        ]
    if title is None:
        suites = sorted(set(results.runs["suite"]) | set(results.probe["suite"]))
        title = "orthobench report" + (": " + ", ".join(suites) if suites else "")
    page = _ENV.get_template("report.html").render(
        title=title,
        sources=dirs,
        sections=sections,
        glossary=GLOSSARY,
        csv_name=lambda table: csv_path(out, table.name).name,
        is_figure=lambda block: isinstance(block, Figure),
        is_table=lambda block: isinstance(block, Table),
    )
    files = [
        (csv_path(out, table.name), table.data.to_csv(index=False))
        for section in sections
        for table in section.tables
    ]
    files.append((out, page))
    # The HTML and the CSVs in one of `dirs` (the default path) are the folders' own files: a link
    # there (a crafted folder's) is refused, not written through; elsewhere (-o) written through.
    # (Checked here, not by write_atomic(own=True): a crafted folder does not change meanwhile.)
    folders = {Path(d).resolve() for d in dirs}
    own = {path for path, _ in files if path.parent.resolve() in folders}
    try:
        # Checked for every file before any is written: `-o /dev/full` must write no CSV.
        for path, _ in files:
            if path in own and path.is_symlink():
                raise OrthobenchError(
                    f"cannot write the report to {path}: it is a symbolic link, which a report "
                    "does not write through; remove it or give another HTML file with -o."
                )
            if os.path.lexists(path) and not path.is_file():
                what = "the report" if path == out else "the report's table"
                raise OrthobenchError(
                    f"cannot write {what} to {path}: it exists and is not a regular file; "
                    + ("give the path of an HTML file with -o." if path == out else
                       "remove it or give -o another name.")
                )  # fmt: skip
        blocker = file_in_the_way(out)
        if blocker is not None:
            raise OrthobenchError(
                f"cannot write the report to {out}: {blocker} is a file, not a folder."
            )
        stale = _stale_csvs(out, {path for path, _ in files})
        for path, text in files:
            write_atomic(path, lambda fh, text=text: fh.write(text.encode()))
        for path in stale:
            path.unlink(missing_ok=True)  # a link goes, never its target: nothing else changes
    except OSError as err:
        raise OrthobenchError(f"cannot write the report {out}: {os_error_text(err)}.") from err
    return out
