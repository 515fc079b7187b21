"""The executor ``--executor`` names, built from the command line's settings."""

from __future__ import annotations

from orthobench.exceptions import OrthobenchError
from orthobench.executors._base import Executor
from orthobench.executors._dask import DaskExecutor
from orthobench.executors._inline import InlineExecutor
from orthobench.executors._pool import ProcessExecutor

#: The executors by name.
EXECUTORS = ("inline", "process", "dask")


def make_executor(
    name: str,
    *,
    workers: int = 1,
    timeout: float | None = None,
    scheduler: str | None = None,
    scheduler_timeout: float | None = None,
    jobs_per_gpu: int = 1,
) -> Executor:
    """The executor ``name`` of :data:`EXECUTORS` (``inline`` runs in this process: ``workers``
    does not apply).

    Raises:
        OrthobenchError: for a ``scheduler``, or ``jobs_per_gpu`` above 1, given to another
            executor than ``dask``.
        ValueError: for an unknown name, or a bad ``workers``, ``timeout`` or ``jobs_per_gpu``.
    """
    if scheduler is not None and name != "dask":
        raise OrthobenchError(f"--scheduler needs --executor dask, but got --executor {name}.")
    if jobs_per_gpu != 1 and name != "dask":
        raise OrthobenchError(f"--jobs-per-gpu needs --executor dask, but got --executor {name}.")
    if name == "inline":
        return InlineExecutor(timeout=timeout)
    if name == "process":
        return ProcessExecutor(workers=workers, timeout=timeout)
    if name == "dask":
        return DaskExecutor(
            workers=workers,
            timeout=timeout,
            scheduler=scheduler,
            scheduler_timeout=scheduler_timeout,
            jobs_per_gpu=jobs_per_gpu,
        )
    raise ValueError(f"Unknown executor {name!r}; choose one of {EXECUTORS}.")
