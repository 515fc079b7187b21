"""Executors: where units of work run (inline, a local process pool, Dask), as classes.

Re-exports only. An executor runs :class:`Job` objects and hands each result to the run that
asked (:class:`Session`, :class:`orthobench.execution.Run`), which stores it; it never knows what
a job computes, and a job never knows where it runs.
"""

from orthobench.executors._base import (
    Executor,
    Job,
    JobResult,
    Session,
    execute,
    thread_limits,
)
from orthobench.executors._choose import EXECUTORS, make_executor
from orthobench.executors._dask import DaskExecutor, check_scheduler
from orthobench.executors._inline import InlineExecutor
from orthobench.executors._pool import ProcessExecutor

__all__ = [
    "EXECUTORS",
    "DaskExecutor",
    "Executor",
    "InlineExecutor",
    "Job",
    "JobResult",
    "ProcessExecutor",
    "Session",
    "check_scheduler",
    "execute",
    "make_executor",
    "thread_limits",
]
