"""``thread_limits`` bounds every pool threadpoolctl finds in a fresh worker process, scipy's
OpenBLAS included, which loads only when the cell's code imports scipy (docs/design.md, "Thread
counts")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# A fresh interpreter, as a spawned pool worker is: scipy is not loaded when the limit is entered.
POOLS_UNDER_LIMIT = """
import json
from threadpoolctl import threadpool_info
from orthobench.executors import thread_limits
with thread_limits(1):
    import scipy.linalg  # as a cell's optimizer imports it
    print(json.dumps([[p["filepath"], p["num_threads"]] for p in threadpool_info()]))
"""


@pytest.mark.slow  # a fresh interpreter importing torch and scipy: about 3 s
def test_every_pool_of_a_fresh_process_runs_at_the_limit():
    # Two threads by default whatever the machine's cores, so a pool left unbounded shows.
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    out = subprocess.run(
        [sys.executable, "-c", POOLS_UNDER_LIMIT],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    pools = json.loads(out.stdout.strip().splitlines()[-1])
    assert any("scipy_openblas" in path for path, _ in pools)
    assert [(path, threads) for path, threads in pools if threads != 1] == []
