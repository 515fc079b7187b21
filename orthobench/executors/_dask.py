"""The Dask executor: jobs on a Dask cluster, a private ``LocalCluster`` unless given a scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.util
import logging
import socket
import time
import traceback
import uuid
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from orthobench.config.names import PLUGIN_SEPARATOR
from orthobench.deadlines import kill_descendants
from orthobench.exceptions import OrthobenchError, OrthobenchWarning, describe_error
from orthobench.executors._base import (
    Executor,
    Job,
    JobResult,
    Session,
    execute,
    failed,
    progressed,
    show_warnings,
    with_warnings,
)

#: Address schemes of a Dask scheduler in another process: ``SCHEME://HOST:PORT``.
_SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
#: A job's share of a ``GPU`` worker resource is a whole number of these (:func:`_gpu_resources`).
_GPU_SHARE_UNITS = 2**30
#: Seconds between an external cluster's job's checks that its run was interrupted (each asks the
#: scheduler): :func:`_execute_until_stopped`.
_STOP_POLL_S = 1.0
#: How long the private ``LocalCluster`` waits for a worker that left to come back before it
#: closes the worker's nanny for good: longer than any run (:meth:`DaskExecutor.run`).
_LOST_WORKER_TIMEOUT = "365d"
#: The private ``LocalCluster``'s workers that the job running in this thread owns, its own
#: first, where a batch cell's evaluations run (:func:`_execute_on`); None outside one.
CELL_WORKERS: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar(
    "orthobench_cell_workers", default=None
)


def _gpu_resources(device: object, jobs_per_gpu: int) -> dict[str, float] | None:
    """The Dask worker resources that a job or an evaluation on ``device`` asks for: a
    ``1/jobs_per_gpu`` share of a ``GPU`` on CUDA, so a worker started with ``--resources GPU=1
    --nthreads N`` runs ``jobs_per_gpu`` of them at once (``N >= jobs_per_gpu``); none on the CPU.

    The share is ``1/jobs_per_gpu`` rounded down to a multiple of ``2**-30``: Dask subtracts the
    share of each task it starts from the worker's 1 and adds it back when the task ends, and
    with ``1/9`` as a float the ninth task would find less than a share left; multiples of
    ``2**-30`` add and subtract exactly, so ``jobs_per_gpu`` shares always fit.
    """
    if not str(device).startswith("cuda"):
        return None
    return {"GPU": (_GPU_SHARE_UNITS // jobs_per_gpu) / _GPU_SHARE_UNITS}


def _scheduler_host_port(address: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a Dask scheduler address (``tcp://`` when it has no scheme).

    Raises:
        OrthobenchError: naming the address when it is not ``SCHEME://HOST:PORT``.
    """
    scheme, _, location = address.rpartition("://")
    scheme = scheme or "tcp"
    host, _, port = location.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [IPv6]
    expected = f"SCHEME://HOST:PORT with SCHEME one of {', '.join(_SCHEDULER_SCHEMES)}"
    if scheme not in _SCHEDULER_SCHEMES:
        raise OrthobenchError(
            f"a Dask scheduler address must be {expected}, but got {address!r} (scheme {scheme!r})."
        )
    if not host or any(c.isspace() or c in "/[]" for c in host):
        raise OrthobenchError(
            f"a Dask scheduler address must be {expected}, but got {address!r} (no valid host)."
        )
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        raise OrthobenchError(
            f"a Dask scheduler address must be {expected}, but got {address!r} (port must be "
            f"1-65535, but got {port!r})."
        )
    return scheme, host, int(port)


def _unanswered(address: str, timeout: float, err: BaseException) -> OrthobenchError:
    """The one line for a Dask scheduler that did not answer at ``address`` within ``timeout``
    seconds, ``err`` saying how."""
    reason = describe_error(err) if str(err) else "no answer"  # asyncio's timeout has no text
    return OrthobenchError(
        f"no Dask scheduler answered at {address} within {timeout:g} s ({reason}); start it, or "
        "check --scheduler."
    )


def _connect(scheduler: str, timeout: float | None):  # noqa: ANN202 -- a distributed.Client
    """A Dask client of the scheduler at ``scheduler`` (checked by :func:`check_scheduler`), or
    one line saying why there is none after ``timeout`` seconds (None: Dask's connect timeout).

    The timeout the check was given, so a scheduler gone since the check fails as fast, with the
    same line, as one the check found missing: not after Dask's 30 s.
    """
    import dask
    from dask.distributed import Client
    from dask.utils import parse_timedelta

    if timeout is None:
        timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    try:
        return Client(scheduler, timeout=timeout)
    except (OSError, TimeoutError) as err:
        raise _unanswered(scheduler, timeout, err) from None


async def _server_type(address: str, timeout: float) -> str:
    """What the Dask server at ``address`` says it is (``Scheduler``, ``Worker``, ...)."""
    from distributed.comm import connect
    from distributed.security import Security

    # The client's connection arguments, as `Client(address)` would use (TLS from the config).
    comm = await connect(address, timeout=timeout, **Security().get_connection_args("client"))
    try:
        await comm.write({"op": "identity"})
        return str((await comm.read()).get("type"))
    finally:
        await comm.close()


def check_scheduler(address: str, timeout: float) -> None:
    """Check that a Dask scheduler answers at ``address`` within ``timeout`` seconds.

    The address must be ``SCHEME://HOST:PORT`` (``HOST:PORT`` means ``tcp://``). Where nothing
    listens on the port (a refused TCP connection), this says so at once, without waiting out
    the ``timeout`` as Dask's connection retries would; a server that accepts the connection but
    does not answer as a Dask scheduler is given up after ``timeout`` (Dask's own handshake would
    wait for ever). Nothing is written: the CLI calls it before it creates the results directory.

    Raises:
        OrthobenchError: one line naming the address, for a malformed one, one where nothing
            listens, one that does not answer within ``timeout``, or one where a Dask worker
            (not the scheduler) answers; also when the ``dask`` extra is not installed.
    """
    if not timeout > 0:
        raise ValueError(f"`timeout` must be > 0 seconds, but got {timeout=}.")
    scheme, host, port = _scheduler_host_port(address)
    try:
        import dask.distributed  # noqa: F401 -- only whether it is installed
    except ImportError as err:
        raise OrthobenchError(
            "--executor dask needs the dask extra: pip install 'orthobench[dask]'."
        ) from err
    fix = "start it, or check --scheduler."
    if scheme != "ucx":  # every other scheme runs over TCP: a refused connection is final
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as err:
            reason = err.strerror or describe_error(err)  # socket.timeout has no strerror
            raise OrthobenchError(
                f"no Dask scheduler answers at {address} ({host}:{port}: {reason}); {fix}"
            ) from None
    try:
        found = asyncio.run(asyncio.wait_for(_server_type(address, timeout), timeout))
    except (OSError, asyncio.TimeoutError) as err:
        raise _unanswered(address, timeout, err) from None
    except Exception as err:  # noqa: BLE001 -- another protocol's answer, read as Dask frames
        # An HTTP server's "HTTP/1.1" read as a frame length asked for 3 EiB (a MemoryError).
        raise OrthobenchError(
            f"the server at {address} does not speak Dask's protocol ({describe_error(err)[:80]}); "
            "give a Dask scheduler's address to --scheduler."
        ) from None
    if found != "Scheduler":
        raise OrthobenchError(
            f"a Dask {found} answers at {address}, not a scheduler; give the scheduler's address "
            "to --scheduler."
        )


def _execute_on(job: Job, workers: tuple[str, ...]) -> JobResult:
    """:func:`execute` the job in a worker of the private ``LocalCluster``, owning ``workers``
    (:data:`CELL_WORKERS`)."""
    token = CELL_WORKERS.set(workers)
    try:
        return execute(job)
    finally:
        CELL_WORKERS.reset(token)


def _stop_event(run_token: str) -> str:
    """The name of the Dask event that the run ``run_token`` sets when it is interrupted."""
    return f"orthobench-stop-{run_token}"


def _execute_until_stopped(job: Job, run_token: str) -> JobResult:
    """:func:`execute` the job on an external cluster's worker, which stops it at the next part
    it reports done (a cell's next evaluation) once its run was interrupted: Ctrl-C closes the
    client, not the cluster, which would run it to its end for nothing (:meth:`DaskExecutor.run`).
    Best effort: asked of the scheduler at most each :data:`_STOP_POLL_S` seconds, and a check
    that fails lets the job go on."""
    from distributed import Event

    stop = Event(_stop_event(run_token))
    checked = time.monotonic()

    def check(n: int) -> None:
        nonlocal checked
        if time.monotonic() - checked < _STOP_POLL_S:
            return
        checked = time.monotonic()
        try:
            interrupted = stop.is_set()
        except Exception:  # noqa: BLE001 -- the scheduler did not answer: the run may be on
            return
        if interrupted:
            raise OrthobenchError("stopped: the run that submitted it was interrupted.")

    return execute(job, check)


def _stop_jobs(client, run_token: str, scheduler: str) -> None:  # noqa: ANN001 -- a distributed.Client
    """Ask the jobs of the interrupted run ``run_token`` still running on the external cluster
    at ``scheduler`` to stop (:func:`_execute_until_stopped`), and warn what runs on there."""
    from distributed import Event

    try:
        Event(_stop_event(run_token), client=client).set()
    except Exception:  # noqa: BLE001 -- the scheduler is gone: nothing more to ask of it
        return
    warnings.warn(
        f"the cells running on the Dask cluster at {scheduler} stop at their next evaluation; "
        "an evaluation already running there finishes first.",
        OrthobenchWarning,
        stacklevel=3,
    )


def _modules(jobs: Sequence[Job]) -> list[str]:
    """The modules a worker imports to run ``jobs``: each job's own, and those of the import
    paths (``module:attr``) that name its unit's task and optimizer."""
    names = [
        getattr(getattr(j.unit, part, None), "name", "")
        for j in jobs
        for part in ("task", "optimizer")
    ]
    return sorted(
        {type(j).__module__ for j in jobs}
        | {n.partition(PLUGIN_SEPARATOR)[0] for n in names if PLUGIN_SEPARATOR in n}
    )


def _findable(module: str) -> bool:
    """Run on a Dask worker: whether it finds ``module``'s spec (the module's own code does not
    run; a parent package that fails to import raises)."""
    return importlib.util.find_spec(module) is not None


def _check_importable(client, jobs: Sequence[Job], scheduler: str) -> None:  # noqa: ANN001 -- a distributed.Client
    """Check that every worker of the external cluster at ``scheduler`` finds the modules that
    ``jobs`` need (:func:`_modules`): its workers have their own ``sys.path``, without the
    folder of the suite file that this process added, and each cell would fail there instead.

    Raises:
        OrthobenchError: naming the first module a worker lacks, the worker and what to do.
    """
    for module in _modules(jobs):
        found = client.run(_findable, module, on_error="return")
        for worker, answer in sorted(found.items()):
            if answer is True:
                continue
            why = "no such module" if answer is False else describe_error(answer)
            here = importlib.util.find_spec(module)
            where = f" (here: {here.origin})" if here is not None and here.origin else ""
            raise OrthobenchError(
                f"the Dask worker {worker} of {scheduler} cannot import the module {module!r} "
                f"that the cells need ({why}){where}: install it there, or put its folder on the "
                "workers' PYTHONPATH."
            )


@contextlib.contextmanager
def _silenced(name: str) -> Iterator[None]:
    """Silence the logger ``name`` (any thread's records) while the block runs."""
    logger = logging.getLogger(name)
    disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = disabled


def _dask_result(
    future,  # noqa: ANN001 -- a distributed.Future
    registries: dict[str, dict],
    since: float,
) -> JobResult:
    """The future's :class:`JobResult`, the warnings its job showed shown here
    (:func:`~orthobench.executors._base.show_warnings`); a lost worker or a task Dask could not
    run fails the job, after the seconds since ``since`` (a :func:`time.monotonic` time: when
    the job was seen processing, or was submitted)."""
    from distributed.scheduler import KilledWorker

    try:
        result, warned = future.result()
    except KilledWorker as err:
        failure = ("worker process died (Dask KilledWorker)", str(err) + "\n")
    except Exception as err:  # noqa: BLE001 -- e.g. the worker cannot import the task: the job fails
        failure = (describe_error(err), traceback.format_exc())
    else:
        show_warnings(warned, registries)
        return result
    return JobResult(None, *failure, time.monotonic() - since)


class DaskExecutor(Executor):
    """Submits every job to Dask; this process (the client) hands each result to the session.

    At most as many jobs are in flight as the cluster has worker threads. A batch cell counts as
    many as it evaluates at once (:attr:`Job.slots`): it submits its step's evaluations as Dask
    tasks of their own from its task
    (:class:`~orthobench.executors._evaluations.DaskEvaluations`), which waits for them outside
    its worker's thread pool, so Dask counts that worker idle.
    The warnings a job or an evaluation shows on a worker are shown by this process, as an
    inline job's are (:func:`~orthobench.executors._base.with_warnings`).
    A killed client loses the jobs in flight and nothing stored (on a ``LocalCluster``, the
    evaluations of the cells in flight are journaled too: an external cluster's workers may not
    see the results directory, so there resume is per unit). Dask runs jobs in worker threads,
    where no evaluation time limit can be set.

    The private ``LocalCluster`` has ``workers`` processes of one thread each; they import the
    jobs' modules as they start. Each job in flight owns :attr:`Job.slots` of its workers, and
    they run nothing of another job. Its task runs on the first, a batch cell's evaluations on
    all of them (those of a CUDA cell with ``jobs_per_gpu`` 1 on the others: it holds the first
    one's ``GPU``). Both are bound to their workers strictly: Dask's work stealing would move
    them to an idle worker, such as one whose cell waits. A timeout's restart thus ends nothing of
    another job. A worker that dies fails its job at once (``allowed-failures: 0``); a job bound
    to a worker that left just before fails after a minute without one.

    On an external cluster (``scheduler``), its scheduler places the jobs and evaluations: binding
    them would keep jobs from sharing a worker of several threads or GPU shares. A worker whose
    batch cell waits may then start another job, or evaluations of other cells, and when that
    cell times out, its worker's restart ends them too: each fails (``KilledWorker``, after the
    cluster's allowed retries) or runs again from the start. Its workers must find the modules
    the jobs need before any runs (:func:`_check_importable`), and on Ctrl-C the jobs running
    there stop at their next evaluation (:func:`_execute_until_stopped`).

    A CUDA job, and each CUDA evaluation of a batch cell, asks for a ``1/jobs_per_gpu`` share of
    a ``GPU`` worker resource (:func:`_gpu_resources`). On an external cluster, start one worker
    per GPU with ``dask worker SCHEDULER --resources GPU=1 --nthreads N`` (``N >=
    jobs_per_gpu``): it runs ``jobs_per_gpu`` of them on its GPU at once, which keeps a GPU busy
    that one small training job leaves mostly idle; where no worker has it, the CUDA jobs wait
    for one, with a warning. The private ``LocalCluster`` gives each of its workers one ``GPU``,
    which any share fits.

    With a ``timeout``, a job's clock starts when the scheduler first reports it processing on a
    worker (polled each second), and again when Dask runs it again (its worker was lost or
    restarted); an expired job is cancelled, the processes its worker started are killed and the
    worker is restarted, on the private cluster with every worker the job owns (:func:`_expired`;
    this needs a nanny: a worker started with ``--no-nanny`` keeps running the job and its
    processes, with a warning).

    Args:
        scheduler: Address of an existing Dask scheduler (None: a ``LocalCluster``).
        scheduler_timeout: Seconds to wait for ``scheduler`` to answer (None: Dask's connect
            timeout); give the one :func:`check_scheduler` was given.
        jobs_per_gpu: CUDA jobs (and CUDA evaluations) that share one ``GPU`` worker resource.

    Raises:
        ValueError: for a ``jobs_per_gpu`` that is not an integer >= 1.
    """

    name = "dask"
    enforces_evaluation_timeout = False
    evaluation_kind = "dask"

    def __init__(
        self,
        *,
        workers: int = 1,
        timeout: float | None = None,
        scheduler: str | None = None,
        scheduler_timeout: float | None = None,
        jobs_per_gpu: int = 1,
    ) -> None:
        super().__init__(workers=workers, timeout=timeout)
        if isinstance(jobs_per_gpu, bool) or not isinstance(jobs_per_gpu, int) or jobs_per_gpu < 1:
            raise ValueError(f"`jobs_per_gpu` must be an integer >= 1, but got {jobs_per_gpu=}.")
        self.scheduler = scheduler
        self.scheduler_timeout = scheduler_timeout
        self.jobs_per_gpu = jobs_per_gpu

    @property
    def shares_files(self) -> bool:
        return self.scheduler is None

    def processes(self, jobs: int) -> int:
        # An external cluster's workers run elsewhere: only the client runs here.
        return super().processes(jobs) if self.scheduler is None else 1

    def evaluation_workers(self, q: int) -> int:
        # An external cluster's size is its own: it schedules all q evaluations of a step.
        return super().evaluation_workers(q) if self.scheduler is None else q

    def run(self, jobs: Sequence[Job], session: Session) -> None:
        try:
            import dask
            from dask.distributed import Client, LocalCluster
        except ImportError as err:
            raise OrthobenchError(
                "--executor dask needs the dask extra: pip install 'orthobench[dask]'."
            ) from err
        private = self.scheduler is None
        settings = {
            # A job bound to a worker that left just before (it crashed) fails after a minute
            # of no valid worker, instead of waiting for ever (:meth:`_run`).
            "distributed.scheduler.allowed-failures": 0,
            "distributed.scheduler.no-workers-timeout": "60s",
            # Read on the cluster's loop thread each time a worker leaves, so in force for the
            # cluster's whole life: Dask closes the nanny of a worker not back that long after
            # it left. A timeout's restart (:func:`_expired`) twice within the default 15 s lost
            # the worker for good (still importing its preload), and the run its later cells.
            "distributed.deploy.lost-worker-timeout": _LOST_WORKER_TIMEOUT,
        }
        with dask.config.set(settings if private else {}):
            cluster = None
            if private:
                # One GPU per worker, which the share of every job and evaluation fits.
                gpu = any(j.device.startswith("cuda") for j in jobs)
                cluster = LocalCluster(
                    n_workers=self.processes(sum(job.slots for job in jobs)),
                    threads_per_worker=1,
                    processes=True,
                    resources={"GPU": 1} if gpu else None,
                    # A free port: None still takes 8787, and a second run on the machine (or any
                    # Dask scheduler there) made Dask warn that it was in use.
                    dashboard_address=":0",
                    # A job's timeout clock starts at submission: workers import its module
                    # (torch, BoTorch: seconds) when they start, not inside the first job's time.
                    preload=sorted({type(job).__module__ for job in jobs}),
                )
            client = (
                Client(cluster) if private else _connect(self.scheduler, self.scheduler_timeout)
            )
            # A Dask key names one result on the scheduler: a task submitted with the key of a
            # task it holds gets that task's result. Another run of the same cells on a shared
            # scheduler (another results folder, thread count or device), or this one's rerun
            # while tasks of a stopped run still finish, must not share them: the run's own
            # token is in every key.
            run_token = uuid.uuid4().hex
            try:
                self._run(client, jobs, session, run_token, own_workers=private)
            except KeyboardInterrupt:
                if not private:  # the private cluster's workers end with it
                    _stop_jobs(client, run_token, self.scheduler)
                raise
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()

    def _warn_unrunnable(
        self,
        client,  # noqa: ANN001 -- a distributed.Client
        jobs: Sequence[Job],
    ) -> None:
        """Warn where no worker of the external cluster can run some of ``jobs``: none at all, or
        none with the ``GPU`` share its CUDA jobs ask for (:func:`_gpu_resources`). They wait
        until one connects, which Dask shows nowhere. A warning, not an error: workers may join
        at any time, and one started now runs the waiting jobs without a rerun."""
        workers = client.scheduler_info()["workers"].values()
        shares = [r["GPU"] for j in jobs if (r := _gpu_resources(j.device, self.jobs_per_gpu))]
        start = f"dask worker {self.scheduler}" + (" --resources GPU=1" if shares else "")
        if not workers:
            message = (
                f"the Dask scheduler at {self.scheduler} has no workers: the {len(jobs)} jobs "
                f"wait until one connects (start one with `{start}`)."
            )
        elif shares and not any(w.get("resources", {}).get("GPU", 0) >= shares[0] for w in workers):
            message = (
                f"no worker of the Dask scheduler at {self.scheduler} has the `GPU` resource that "
                f"its {len(shares)} CUDA jobs ask for: they wait until one connects (start one "
                f"per GPU with `{start}`)."
            )
        else:
            return
        warnings.warn(message, OrthobenchWarning, stacklevel=5)

    def _run(
        self,
        client,  # noqa: ANN001 -- a distributed.Client
        jobs: Sequence[Job],
        session: Session,
        run_token: str,
        own_workers: bool = False,
    ) -> None:
        """Run ``jobs`` on ``client``'s cluster, ``run_token`` in their keys; with ``own_workers``
        (the private ``LocalCluster``: one thread per worker), each job in flight on workers of
        its own.

        A job's future is released as soon as its result is taken: a future held makes Dask keep
        its result, and compute it again elsewhere when the worker holding it dies.
        """
        from dask.distributed import wait
        from distributed.client import FuturesCancelledError

        if not own_workers:
            self._warn_unrunnable(client, jobs)
            _check_importable(client, jobs, self.scheduler)
        queue = deque(jobs)
        futures: dict[Any, Job] = {}  # distributed.Future -> its job
        submitted: dict[Any, float] = {}  # distributed.Future -> when (time.monotonic)
        owned: dict[Any, tuple[str, ...]] = {}  # distributed.Future -> its workers (own_workers)
        pending: set[Any] = set()
        started: dict[str, tuple[str, float]] = {}
        registries: dict[str, dict] = {}  # which of the workers' warnings were shown, by file
        while queue or pending:
            # No more jobs in flight than worker threads (a batch cell counts its evaluations at
            # once, :attr:`Job.slots`): a worker that dies takes its own job only, and a job's
            # timeout clock starts when it does.
            nthreads = client.nthreads()
            threads = max(1, sum(nthreads.values()))
            # With `own_workers`, a job owns `slots` workers that run nothing of another job: the
            # scheduler counts a worker whose batch cell waits seceded as idle, and would start
            # another cell there, which the restart of the worker for the first cell's timeout
            # would end as well.
            free = sorted(set(nthreads) - {a for f in pending for a in owned[f]})
            while queue and (
                not pending
                or (len(free) if own_workers else threads - sum(futures[f].slots for f in pending))
                >= queue[0].slots
            ):
                job = queue.popleft()
                key = f"orthobench-{job.unit.id}-{job.unit.config_hash}-{run_token}"
                resources = _gpu_resources(job.device, self.jobs_per_gpu)
                if own_workers and free:
                    workers, free = tuple(free[: job.slots]), free[job.slots :]
                    # Strictly: Dask's work stealing moves a task allowed on other workers to an
                    # idle one, which may be the worker of a cell that waits seceded.
                    future = client.submit(
                        with_warnings,
                        _execute_on,
                        job,
                        workers,
                        key=key,
                        pure=False,
                        resources=resources,
                        workers=workers[0],
                    )
                    owned[future] = workers
                else:
                    future = client.submit(
                        with_warnings,
                        _execute_until_stopped,
                        job,
                        run_token,
                        key=key,
                        pure=False,
                        resources=resources,
                    )
                    owned[future] = ()
                futures[future] = job
                submitted[future] = time.monotonic()
                pending.add(future)
            try:
                done, pending = wait(pending, timeout=1.0, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            except FuturesCancelledError as err:
                # The scheduler went away (its process ended, the network dropped): the jobs
                # in flight are lost with it, what was stored stays, and a rerun resumes.
                where = self.scheduler or "of the private cluster"
                reason = err.error_groups[0].reason if err.error_groups else type(err).__name__
                # Closed here, quietly: Dask logs the reconnection that the close cancels as an
                # error with a long traceback, before this one line.
                with _silenced("distributed.client"):
                    client.close()
                raise OrthobenchError(
                    f"lost the Dask scheduler {where} ({reason}); the units stored so far are "
                    "kept: rerun the same command to resume the others."
                ) from None
            ended = []
            for future in done:
                # Since it was seen processing (polled for a timeout only), else submitted.
                since = started.get(future.key, ("", submitted[future]))[1]
                ended.append((future, _dask_result(future, registries, since)))
            if self.timeout is not None:
                for future in _expired(client, pending, started, self.timeout, owned):
                    pending.discard(future)
                    reason = (
                        f"timed out: still running after the {futures[future].unit.kind} "
                        f"timeout of {self.timeout:g} s"
                    )
                    ended.append((future, failed(reason, self.timeout)))
            for future, result in ended:
                future.release()
                job = futures.pop(future)
                del submitted[future], owned[future]
                started.pop(future.key, None)
                session.progress.advance(progressed(job, result))
                session.finish(job, result)


def _expired(
    client,  # noqa: ANN001 -- a distributed.Client
    pending: set,
    started: dict[str, tuple[str, float]],
    timeout: float,
    owned: dict[Any, tuple[str, ...]] | None = None,
) -> list:
    """The pending futures processing for longer than ``timeout``: cancelled, workers restarted.

    ``started`` holds, by key, the worker a job was first seen processing on and when. A job
    seen on another worker runs there from the start (its worker was lost, or restarted for
    another job that timed out beside it, and Dask runs it again): its clock starts again. So
    does the clock of every job on a worker that is restarted here. ``owned`` holds, by future,
    the workers a job owns (:meth:`DaskExecutor._run`): they are restarted with its own, which
    ends the evaluations it left running there.
    """
    owned = owned or {}
    now = time.monotonic()
    by_key = {future.key: future for future in pending}
    processing = client.processing()
    where = {}
    for address, keys in processing.items():
        for key in keys:
            if key in by_key:
                if key not in started or started[key][0] != address:
                    started[key] = (address, now)
                where[key] = address
    expired = [
        by_key[k] for k, (_, since) in started.items() if k in where and now - since >= timeout
    ]
    for future in expired:
        future.cancel()
        address = where[future.key]
        addresses = [address]
        addresses += [a for a in owned.get(future, ()) if a != address and a in processing]
        named = ", ".join(addresses)
        try:
            # The restart ends the worker process only: its children would outlive it, out of
            # reach once reparented. So they are killed first, from here and in this order, not
            # by a timer in the task: the task's clock starts later (its worker may still be
            # importing orthobench) and the restart could beat it. The nanny kills them: it
            # answers while the job holds the worker's interpreter. A worker without a nanny
            # cannot be restarted either, which the restart's error says.
            found = client.run(_kill_worker_descendants, workers=addresses, nanny=True)
            restarted = client.restart_workers(addresses, raise_for_error=False)
        except Exception as err:  # noqa: BLE001 -- the job is failed either way; say what still runs
            warnings.warn(
                f"job {future.key} timed out, but its Dask worker(s) {named} could not be "
                f"restarted ({describe_error(err)}); they keep running the job and the processes "
                "it started.",
                OrthobenchWarning,
                stacklevel=2,
            )
            continue
        # Dask stopped these (or, hung, dropped them) but gave up waiting for them to come back.
        lost = [a for a in addresses if restarted.get(a) != "OK"]
        if lost:
            warnings.warn(
                f"job {future.key} timed out and its Dask worker(s) {', '.join(lost)} were "
                "stopped to restart them, but have not come back: the run goes on without them.",
                OrthobenchWarning,
                stacklevel=2,
            )
        # The jobs beside it on those workers died with them; if Dask runs them again, from the
        # start.
        for key in [k for k, (on, _) in started.items() if on in addresses]:
            del started[key]
        if any(found.get(a) is False for a in addresses):
            warnings.warn(
                f"job {future.key} timed out and its Dask worker(s) {named} were restarted, but "
                "the processes the job started are not stopped: there is no /proc on its host "
                "to find them in.",
                OrthobenchWarning,
                stacklevel=2,
            )
    return expired


def _kill_worker_descendants(dask_worker) -> bool:  # noqa: ANN001 -- a distributed.Nanny
    """Run on a Dask worker's nanny (``Client.run(nanny=True)``): SIGKILL the descendants of its
    worker process, what the worker's jobs started (:func:`orthobench.loop.kill_descendants`).
    False where there is no ``/proc`` to find them in."""
    pid = dask_worker.pid  # None while no worker process runs: then nothing to kill, not our own
    return pid is None or kill_descendants(pid)
