"""Results store: typed records, one Parquet file per unit written atomically, and journals.

Re-exports only; the layout of a results directory is documented on :class:`ResultStore`.
"""

from orthobench.results._base import BaseStore
from orthobench.results._io import file_in_the_way, open_own, os_error_text, write_atomic
from orthobench.results._journal import EvaluationJournal
from orthobench.results._parquet import (
    load_probe,
    load_runs,
    read_metadata,
    stored_threads,
    unique_dirs,
)
from orthobench.results._provenance import code_version, run_metadata, short_sha, where_run
from orthobench.results._records import (
    METADATA_KEY,
    PROBE_SCHEMA,
    SCHEMA_VERSION,
    ProbeRecord,
    RunRecord,
    arrow_schema,
)
from orthobench.results._store import ResultStore

__all__ = [
    "METADATA_KEY",
    "PROBE_SCHEMA",
    "SCHEMA_VERSION",
    "BaseStore",
    "EvaluationJournal",
    "ProbeRecord",
    "ResultStore",
    "RunRecord",
    "arrow_schema",
    "code_version",
    "file_in_the_way",
    "load_probe",
    "load_runs",
    "open_own",
    "os_error_text",
    "read_metadata",
    "run_metadata",
    "short_sha",
    "stored_threads",
    "unique_dirs",
    "where_run",
    "write_atomic",
]
