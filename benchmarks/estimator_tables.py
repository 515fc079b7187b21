"""The tables of docs/estimators.md, from the probe of suites/probe-estimators.yaml.

Two steps, so that the page is a function of a committed file::

    orthobench probe suites/probe-estimators.yaml -o results/probe-estimators
    python benchmarks/estimator_tables.py results/probe-estimators

1. ``RESULTS`` (a probe results directory) -> ``--csv`` (default
   ``docs/estimators/states.csv``): one row per (task, kernel, seed, S, estimator) with the scalar
   columns of :class:`orthobench.results.ProbeRecord`, floats rounded to 4 significant digits.
   Every column but ``seconds_per_call`` (a wall time) is a deterministic function of the code at
   one torch thread; ``tests/test_estimator_tables.py`` recomputes a state (slow tier).
2. ``--csv`` -> the generated blocks of ``--doc`` (default ``docs/estimators.md``): the text
   between ``<!-- estimator_tables:NAME -->`` and ``<!-- /estimator_tables -->`` is replaced by
   the table ``NAME`` of :func:`blocks`, computed from the CSV alone by the functions of
   :mod:`orthobench.probe.tables`. Without ``RESULTS`` only this step runs; with ``--check`` the
   page is compared, not written (exit 1 and the names of the stale blocks when they differ).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from orthobench.probe.tables import (
    TIME_BASELINE,
    default_rule_table,
    ranking_table,
    summary_table,
)
from orthobench.results import load_probe

ROOT = Path(__file__).resolve().parent.parent
DIGITS = 4
#: The estimator whose spread over states the last tables show: orthobo's default.
DEFAULT = TIME_BASELINE
KERNELS = {"matern52-ard": "Matérn-5/2 ARD", "rbf-iso": "isotropic RBF"}
BLOCK = re.compile(
    r"(<!-- estimator_tables:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /estimator_tables -->)",
    re.DOTALL,
)


def states_frame(results: Path) -> pd.DataFrame:
    """The scalar columns of the stored probe rows, one row per state, S and estimator.

    The estimator probe's states are of single points: its ``q`` column (all 1) is left out.

    Raises:
        ValueError: for rows of batch states (``q > 1``), which the tables do not cover.
    """
    probe = load_probe([results])
    if "q" in probe and (probe["q"].fillna(1) != 1).any():
        raise ValueError(f"{results} holds batch probe states (q > 1): the tables are of q = 1.")
    scalar = [c for c in probe.columns if probe[c].dtype != object or c in ("baseline", "suite")]
    scalar = [c for c in scalar if c not in ("info", "q")]
    frame = probe[scalar].sort_values(["task", "kernel", "seed", "state_iteration", "mc_samples"])
    floats = frame.select_dtypes("float").columns
    frame = frame.copy()
    frame[floats] = frame[floats].map(lambda v: float(f"{v:.{DIGITS}g}") if np.isfinite(v) else v)
    return frame.reset_index(drop=True)


def _g(value: float) -> str:
    return f"{value:.3g}" if np.isfinite(value) else "undefined"


def _markdown(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _default_rule(states: pd.DataFrame) -> str:
    table = default_rule_table(states)
    header = [
        "estimator",
        "state-budgets",
        "worst state MSE ratio",
        "where",
        "smallest upper CI bound",
        "where",
        "excess bias/MSE median, max",
        "eligible",
    ]
    rows = [
        [
            f"`{r.estimator}`",
            str(r.states),
            _g(r.worst_state_mse_ratio),
            r.worst_state,
            _g(r.min_upper_bound),
            r.min_upper_state,
            f"{_g(r.median_excess_bias_share)}, {_g(r.max_excess_bias_share)}",
            "yes" if r.eligible else "no",
        ]
        for r in table.itertuples()
    ]
    return _markdown(header, rows, right={1, 2, 4})


def _ranking(states: pd.DataFrame, s: int) -> str:
    table = ranking_table(states)
    table = table[table["mc_samples"] == s]
    header = [
        "estimator",
        "EI evals",
        "worst state (upper rebuild CI)",
        "where",
        "median of cell medians",
        "worst cell median",
        "max excess bias/MSE",
        "ms/call",
        "cost / mc",
        f"equal time vs {DEFAULT}: median, worst",
    ]
    rows = [
        [
            f"`{r.estimator}`",
            r.n_evaluations,
            f"{_g(r.worst_state_mse_ratio)} ({_g(r.worst_state_high)})",
            r.worst_state,
            _g(r.median_mse_ratio),
            f"{_g(r.worst_median_mse_ratio)} ({r.worst_cell})",
            _g(r.max_excess_bias_share),
            _g(1000 * r.seconds_per_call),
            f"{r.cost_vs_mc:.2f}",
            f"{_g(r.time_mse_ratio_median)}, {_g(r.time_mse_ratio_worst)}",
        ]
        for r in table.itertuples()
    ]
    return _markdown(header, rows, right={1, 4, 6, 7, 8})


def _cells(states: pd.DataFrame, s: int, kernel: str) -> str:
    table = summary_table(states[(states["mc_samples"] == s) & (states["kernel"] == kernel)])
    tasks = sorted(table["task"].unique())
    rows = []
    for name, group in table.groupby("estimator", sort=False):
        by_task = group.set_index("task")
        row = [f"`{name}`"]
        for task in tasks:
            r = by_task.loc[task]
            undefined = f", {r.mse_ratio_undefined} undefined" if r.mse_ratio_undefined else ""
            row.append(
                f"{_g(r.mse_ratio_median)} [{_g(r.mse_ratio_median_low)}, "
                f"{_g(r.mse_ratio_median_high)}] / {_g(r.mse_ratio_worst)} "
                f"({r.mse_ratio_worst_state.replace('seed ', 's')}) / "
                f"{_g(r.excess_bias_share_max)}{undefined}"
            )
        rows.append(row)
    return _markdown(["estimator", *tasks], rows)


def _default_over_states(states: pd.DataFrame, kernel: str) -> str:
    mine = states[(states["estimator"] == DEFAULT) & (states["kernel"] == kernel)]
    tasks = sorted(mine["task"].unique())
    rows = []
    for s, group in mine.groupby("mc_samples"):
        ratios = group.groupby("task")["mse_ratio"]
        row = [str(s)]
        for task in tasks:
            values = ratios.get_group(task)
            row.append(
                f"{_g(values.min())} / {_g(np.exp(np.log(values).median()))} / {_g(values.max())}"
            )
        rows.append(row)
    return _markdown(["S", *tasks], rows)


def blocks(states: pd.DataFrame) -> dict[str, str]:
    """Every generated table of docs/estimators.md by block name, from the states CSV."""
    out = {"default-rule": _default_rule(states)}
    budgets = sorted(states["mc_samples"].unique())
    for s in budgets:
        out[f"ranking-{s}"] = _ranking(states, s)
    for kernel in KERNELS:
        for s in budgets:
            out[f"cells-{s}-{kernel}"] = _cells(states, s, kernel)
        out[f"default-{kernel}"] = _default_over_states(states, kernel)
    return out


def render(page: str, tables: dict[str, str]) -> tuple[str, list[str]]:
    """``page`` with each generated block replaced; the names of blocks that changed or that
    the page names but ``tables`` lacks (an error: a stale block must not survive)."""
    changed = []

    def replace(match: re.Match) -> str:
        name = match["name"]
        if name not in tables:
            changed.append(f"{name} (no such table)")
            return match[0]
        if match["body"] != tables[name]:
            changed.append(name)
        return match[1] + tables[name] + match[4]

    return BLOCK.sub(replace, page), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", type=Path, help="probe results directory")
    parser.add_argument("--csv", default=ROOT / "docs" / "estimators" / "states.csv", type=Path)
    parser.add_argument("--doc", default=ROOT / "docs" / "estimators.md", type=Path)
    parser.add_argument("--check", action="store_true", help="compare the page, do not write it")
    args = parser.parse_args(argv)
    if args.results is not None:
        frame = states_frame(args.results)
        if frame.empty:  # else the CSV and the page's tables would be written empty
            sys.exit(f"estimator_tables: {args.results} holds no probe results")
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.csv, index=False)
        print(f"wrote {args.csv} ({len(frame)} rows)")
    tables = blocks(pd.read_csv(args.csv))
    page, changed = render(args.doc.read_text(), tables)
    if args.check:
        if changed:
            print(f"{args.doc}: stale blocks: {', '.join(changed)}", file=sys.stderr)
            return 1
        return 0
    args.doc.write_text(page)
    print(f"wrote {args.doc} ({len(changed)} blocks changed: {', '.join(changed) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
