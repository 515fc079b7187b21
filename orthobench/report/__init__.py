"""Reports: figures and tables from stored Parquet results, rendered to self-contained HTML."""

from orthobench.report.html import build_report

__all__ = ["build_report"]
