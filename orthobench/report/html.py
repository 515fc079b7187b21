"""Self-contained HTML report (inline SVG, inline CSS) rendered through jinja2."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import jinja2
import pandas as pd

from orthobench.probe.tables import summary_table
from orthobench.report.figures import ratio_svg, regret_curve_svg
from orthobench.report.tables import best_so_far_curves, final_table
from orthobench.results import load_probe, load_runs, read_metadata

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("orthobench.report", "templates"),
    autoescape=jinja2.select_autoescape(["html"]),
    undefined=jinja2.StrictUndefined,
)


def _fmt(value: float) -> str:
    if pd.isna(value):
        return "–"
    return f"{value:.4g}"


def _probe_rows(table: pd.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "task": r.task,
            "kernel": r.kernel,
            "S": str(r.mc_samples),
            "n_evaluations": str(r.n_evaluations),
            "estimator": r.estimator,
            "states": str(r.states),
            "probe_variance": _fmt(r.probe_variance),
            "probe_variance_log": _fmt(r.probe_variance_log),
            "bias_sq": _fmt(r.bias_sq),
            "var_ratio": f"{r.var_ratio:.2f} [{r.var_ratio_low:.2f}, {r.var_ratio_high:.2f}]",
            "mse_ratio": f"{r.mse_ratio:.2f} [{r.mse_ratio_low:.2f}, {r.mse_ratio_high:.2f}]",
            "median_point": _fmt(r.median_point_var_ratio),
            "top1": f"{r.top1_agreement:.3f}",
            "flip": f"{r.flip_rate:.3f}",
            "regret": _fmt(r.regret),
        }
        for r in table.itertuples()
    ]


def build_report(dirs: Iterable[str | Path], out: str | Path, title: str | None = None) -> Path:
    """Read ``DIR/runs`` and ``DIR/probe`` of each dir and write one HTML report to ``out``."""
    dirs = [Path(d) for d in dirs]
    frame = load_runs(dirs)
    probe_rows = load_probe(dirs)
    probe = summary_table(probe_rows)
    out = Path(out)
    tasks = sorted(frame["task"].unique()) if len(frame) else []
    curves = best_so_far_curves(frame) if len(frame) else pd.DataFrame()
    table = final_table(frame) if len(frame) else pd.DataFrame()
    files = sorted(
        p for d in dirs for sub in ("runs", "probe") for p in (d / sub).glob("*.parquet")
    )
    metadata = read_metadata(files[0]) if files else {}
    rows = [
        {
            "task": r.task,
            "optimizer": r.optimizer,
            "metric": r.metric,
            "final": f"{_fmt(r.final_mean)} ± {_fmt(r.final_ci95)}",
            "seeds": r.seeds,
            "evaluations": r.evaluations,
            "fit": _fmt(r.fit_s_per_step),
            "acq": _fmt(r.acq_s_per_step),
            "failed": r.failed_evals,
            "fallbacks": r.fallbacks,
        }
        for r in table.itertuples()
    ]
    if title is None:
        suites = set(frame["suite"]) | set(probe_rows["suite"])
        title = "orthobench report" + (": " + ", ".join(sorted(suites)) if suites else "")
    page = _ENV.get_template("report.html").render(
        title=title,
        sources=[str(d) for d in dirs],
        figures=[{"task": t, "svg": regret_curve_svg(curves, t)} for t in tasks],
        rows=rows,
        probe_rows=_probe_rows(probe),
        probe_figures=[
            {"task": t, "svg": ratio_svg(probe, t)} for t in sorted(probe["task"].unique())
        ],
        metadata=metadata,
        n_cells=int(frame["cell_id"].nunique()) if len(frame) else 0,
        n_rows=len(frame),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
