"""The blocks of a report section: :class:`Figure`, :class:`Table` and the :class:`Section` that
holds them, the name of every table a report can write (:data:`TABLE_NAMES`), and the legend
label of a run's series."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from orthobench.report.glossary import GLOSSARY

#: The name of every :class:`Table` a report can write (``<report stem>.<name>.csv``; each
#: column in docs/report-tables.md): a report removes the CSVs of those it did not write this time,
#: an earlier report's of the same name, and never another file.
TABLE_NAMES = frozenset({
    "summary", "git-shas", "failed-cells", "comparison", "comparison-cells", "curves",
    "step-curves", "wall-curves", "final-values", "feasibility", "normalized-scores",
    "mean-ranks", "ecdf", "runtime", "step-time", "orthobo-diagnostics", "probe-summary",
    "probe-ranking",
})  # fmt: skip


@dataclass(frozen=True)
class Figure:
    svg: str
    caption: str = ""


@dataclass(frozen=True)
class Table:
    """A rendered table and the frame behind it (its CSV).

    Args:
        name: File-name-safe id, one of :data:`TABLE_NAMES`: the CSV is
            ``<report stem>.<name>.csv``.
        header: Column titles.
        rows: Cells as text; ``bold`` holds (row, column) pairs shown in bold.
        data: The numbers behind the table, written as CSV unformatted.
    """

    name: str
    header: list[str]
    rows: list[list[str]]
    data: pd.DataFrame
    bold: frozenset[tuple[int, int]] = frozenset()
    caption: str = ""

    def __post_init__(self) -> None:
        # A name missing there would leave an earlier report's CSV of it beside a new report.
        if self.name not in TABLE_NAMES:
            raise ValueError(f"Table name {self.name!r} is not in blocks.TABLE_NAMES.")


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    intro: str = ""
    blocks: list[Figure | Table | str] = field(default_factory=list)
    terms: tuple[str, ...] = ()  # glossary entries the section uses

    def __post_init__(self) -> None:
        # A term the glossary lacks would leave the reader without its definition.
        missing = [t for t in self.terms if t not in GLOSSARY]
        if missing:
            raise ValueError(f"Section {self.id!r} names terms the glossary lacks: {missing}.")

    @property
    def tables(self) -> list[Table]:
        return [b for b in self.blocks if isinstance(b, Table)]


def mean_interval_text(trace: pd.DataFrame) -> str:
    """What a figure of mean best-so-far curves shows, by the seeds of each ``series`` in
    ``trace``: a mean with its 95% t interval, naming the series of one seed, which have none.

    Example:
        >>> mean_interval_text(pd.DataFrame({"series": ["a", "a", "b"], "seed": [0, 1, 0]}))
        'mean over seeds with its 95% t interval (none for b: one seed)'
    """
    seeds = trace.groupby("series", sort=True)["seed"].nunique()
    single = list(seeds[seeds < 2].index)
    if len(single) == len(seeds):
        return "one seed (no interval)"
    text = "mean over seeds with its 95% t interval"
    return f"{text} (none for {', '.join(single)}: one seed)" if single else text


def series(runs: pd.DataFrame, prefixed: bool | None = None) -> pd.Series:
    """The legend label: the optimizer, prefixed by its run set when there are several.

    ``prefixed`` says whether the report has several run sets; None: whether ``runs`` has. Pass
    it for a frame that may hold only some of the run sets (the rows with wall seconds), so its
    labels stay those of the palette.
    """
    if not (runs["run_set"].nunique() > 1 if prefixed is None else prefixed):
        return runs["optimizer"]
    return runs["run_set"] + ": " + runs["optimizer"]
