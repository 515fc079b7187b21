"""Self-contained HTML report (inline SVG, inline CSS, no external requests) through jinja2,
with every table also written as CSV beside it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import jinja2

from orthobench.exceptions import OrthobenchError
from orthobench.report.data import load_results
from orthobench.report.glossary import GLOSSARY
from orthobench.report.sections import Figure, Table, build_sections

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("orthobench.report", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
)


def csv_path(out: Path, table: Table) -> Path:
    """Where a table's CSV goes: ``<report stem>.<table name>.csv`` beside the report."""
    return out.with_name(f"{out.stem}.{table.name}.csv")


def build_report(
    dirs: Iterable[str | Path],
    out: str | Path,
    title: str | None = None,
    *,
    reference: str | None = None,
    baseline: str | Path | None = None,
) -> Path:
    """Read the results of each dir and write one HTML report to ``out``, tables as CSV beside it.

    Args:
        dirs: Results directories (``DIR/runs``, ``DIR/probe``, ``DIR/runs.jsonl``).
        out: The HTML file.
        title: Page title (default: the suites' names).
        reference: Optimizer label the final values are tested against (default: the first GP
            optimizer in the order the cells were stored).
        baseline: One of ``dirs``: compare every other directory with it, cell by cell.

    Raises:
        OrthobenchError: when ``reference`` names no stored optimizer or ``baseline`` is not
            one of ``dirs``.
    """
    dirs = [str(d) for d in dirs]
    results = load_results(dirs)
    if baseline is not None:
        same = [d for d in dirs if Path(d).resolve() == Path(baseline).resolve()]
        if not same:
            raise OrthobenchError(
                f"--baseline must be one of the report's directories {dirs}, but got "
                f"{str(baseline)!r}."
            )
        baseline = same[0]
    labels = results.optimizers
    if reference is not None and reference not in labels:
        raise OrthobenchError(
            f"--reference must be a stored optimizer label ({', '.join(labels) or 'none'}), "
            f"but got {reference!r}."
        )
    reference = reference or results.default_reference()
    sections = build_sections(results, reference, None if baseline is None else str(baseline))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for section in sections:
        for table in section.tables:
            table.data.to_csv(csv_path(out, table), index=False)
    if title is None:
        suites = sorted(set(results.runs["suite"]) | set(results.probe["suite"]))
        title = "orthobench report" + (": " + ", ".join(suites) if suites else "")
    page = _ENV.get_template("report.html").render(
        title=title,
        sources=dirs,
        sections=sections,
        glossary=GLOSSARY,
        csv_name=lambda table: csv_path(out, table).name,
        is_figure=lambda block: isinstance(block, Figure),
        is_table=lambda block: isinstance(block, Table),
    )
    out.write_text(page)
    return out
