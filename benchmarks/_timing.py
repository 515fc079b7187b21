"""Wall-clock timing shared by the benchmark scripts: a median with its range, the threads and
the machine.

:func:`time_call` times a call that can be repeated (an acquisition evaluation); :func:`timed`
times one call whose result is needed (a fit, whose warm start makes a repeat another call).
"""

from __future__ import annotations

import collections
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch

from orthobench.exceptions import ResultsError
from orthobench.results import read_metadata, stored_threads
from orthobench.results._provenance import cpu_description

_T = TypeVar("_T")


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median and the range over ``rounds`` rounds, measured with
    ``threads`` torch threads."""

    median: float
    low: float
    high: float
    rounds: int
    threads: int

    def __str__(self) -> str:
        return f"{1e3 * self.median:.2f} ms [{1e3 * self.low:.2f}, {1e3 * self.high:.2f}]"


def machine_line(threads: int | None = None) -> str:
    """A benchmark's first line: what its figures depend on besides the code, the CPU (model and
    the instruction set torch dispatches to), torch's version and the torch threads (``threads``,
    else this process's count)."""
    threads = torch.get_num_threads() if threads is None else threads
    return f"machine: {cpu_description()}; torch {torch.__version__}; {threads} torch thread(s)"


def stored_machine_line(directory: str | Path) -> str:
    """A table script's first line: where the results files under ``directory`` were computed
    (each file's CPU, torch version and threads per unit, with how many files say so), since
    their values depend on these as on the code."""
    machines: collections.Counter[str] = collections.Counter()
    for path in sorted(Path(directory).rglob("*.parquet")):
        try:
            meta = read_metadata(path)
        except ResultsError:  # not an orthobench file: the loaders skip it too
            continue
        torch_version = (meta.get("versions") or {}).get("torch")
        machines[
            f"{meta.get('cpu') or 'CPU not recorded'}; torch {torch_version}; "
            f"{stored_threads(meta)} torch thread(s)"
        ] += 1
    found = ", ".join(f"{machine} ({n} files)" for machine, n in sorted(machines.items()))
    return f"computed on: {found or 'no results files'}"


def _synchronize(device: torch.device | str | None) -> None:
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(call: Callable[[], _T], device: torch.device | str | None = None) -> tuple[_T, float]:
    """``call()``'s result and its wall seconds. On a CUDA ``device`` the kernels queued before
    are waited for first and the call's own after, so the seconds are the call's."""
    _synchronize(device)
    start = time.perf_counter()
    result = call()
    _synchronize(device)
    return result, time.perf_counter() - start


def time_call(
    call: Callable[[], object], *, rounds: int = 5, number: int = 20, warmup: int = 3
) -> Timing:
    """Seconds per call of ``call``: ``warmup`` untimed calls (first-call overheads and caches
    are not what is measured), then ``rounds`` rounds of ``number`` calls, each round one sample.

    The median, not the best round: a benchmark on a shared machine reports the typical call,
    and the range shows how much the load moved it.
    """

    def repeat() -> None:
        for _ in range(number):
            call()

    for _ in range(warmup):
        call()
    samples = [timed(repeat)[1] / number for _ in range(rounds)]
    return Timing(
        statistics.median(samples), min(samples), max(samples), rounds, torch.get_num_threads()
    )
