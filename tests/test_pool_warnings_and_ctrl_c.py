"""Worker processes of the process pool, of Dask and of a batch cell's evaluations: their
warnings are shown by the runner, as an inline cell's are (the CLI's one line, ``-q`` or not); a
Ctrl-C while a worker still imports is ignored there; and a Ctrl-C or a cell timeout with a batch
cell running leaves no semaphore of its evaluation pool to the resource tracker."""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

from orthobench.exceptions import NumericsWarning
from orthobench.execution import run_suite
from orthobench.executors import make_executor
from orthobench.executors._base import Warned, with_warnings
from orthobench.executors._evaluations import ProcessEvaluations
from orthobench.loop import run_cell
from orthobench.results import ResultStore
from orthobench.suite import load_suite
from tests.helpers import install_plugin, process_running
from tests.test_loop import cell

# A sphere whose evaluations append their process id to `log`, warn `warn` and wait `hang`
# seconds.
PLUGIN_SOURCE = """
import os
import time
import warnings

import numpy as np

from orthobench import Evaluation, SearchSpace, Task
from orthobench.exceptions import NumericsWarning


class Plugin(Task):
    optimal_value = 0.0

    def __init__(self, warn="", log="", hang=0.0):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.warn, self.log, self.hang = warn, log, hang

    def evaluate(self, x, *, seed, device):
        if self.log:
            with open(self.log, "a") as fh:
                fh.write(f"{os.getpid()}\\n")
        if self.warn:
            warnings.warn(self.warn, NumericsWarning, stacklevel=1)
        time.sleep(self.hang)
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))
"""
WARNING = "the task fell back on something"


@pytest.fixture
def plugin(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Make ``poolplugin`` importable (here, in spawned workers and in a CLI subprocess) and
    return a writer of a suite of its task: ``write(seeds, q, **params)`` gives its path."""
    install_plugin(tmp_path / "plugin", "poolplugin", PLUGIN_SOURCE, monkeypatch)

    def write(seeds: int = 1, q: int = 1, **params) -> Path:
        path = tmp_path / "suite.yaml"
        path.write_text(
            f"name: pool\nseeds: {seeds}\nn_init: 2\nbudget: 1\nq: {q}\n"
            f"tasks: [{{name: 'poolplugin:Plugin', params: {params!r}, label: plugin}}]\n"
            "optimizers: [sobol]\n"
        )
        return path

    return write


def _start_cli(
    suite: Path, out: Path, *options: str, sigint: signal.Handlers = signal.SIG_DFL
) -> subprocess.Popen:
    """``orthobench run SUITE -o OUT -q OPTIONS`` in a session of its own (a Ctrl-C reaches its
    process group, as a terminal's does), SIGINT's disposition ``sigint`` whatever this process
    has (default: not ignored)."""
    command = [sys.executable, "-m", "orthobench", "run", str(suite), "-o", str(out), "-q"]
    return subprocess.Popen(
        [*command, *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )


# ----------------------------------------------------------------------------------------------
# Warnings


def test_a_forwarded_warning_keeps_its_category_else_names_it_in_a_builtin_one() -> None:
    class Local(NumericsWarning):  # not importable by name: the runner cannot have it
        pass

    ours = pickle.loads(pickle.dumps(Warned.of(NumericsWarning("m"), NumericsWarning, "f.py", 3)))
    assert (type(ours.warning()), str(ours.warning())) == (NumericsWarning, "m")
    local = pickle.loads(pickle.dumps(Warned.of(Local("m"), Local, "f.py", 3)))
    assert (type(local.warning()), str(local.warning())) == (UserWarning, "Local: m")


def test_a_forwarded_warning_is_shown_once_per_place_under_the_default_action() -> None:
    registries: dict[str, dict] = {}
    same = Warned.of("m", NumericsWarning, "f.py", 3)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        for warned in (same, same, same._replace(filename="g.py"), same._replace(lineno=4)):
            warned.show(registries)
    assert [(w.category, str(w.message), w.filename, w.lineno) for w in shown] == [
        (NumericsWarning, "m", "f.py", 3),
        (NumericsWarning, "m", "g.py", 3),
        (NumericsWarning, "m", "f.py", 4),
    ]


def test_with_warnings_collects_each_threads_own_and_shows_the_rest() -> None:
    """As a Dask worker runs tasks in threads: each call gets the warnings of its own thread,
    shown while the other's ran; a warning of a thread outside any is shown as before."""
    both = threading.Barrier(2)

    def task(text: str) -> str:
        both.wait()
        warnings.warn(text, NumericsWarning, stacklevel=1)
        both.wait()  # each has warned before either returns
        return text

    found = {}
    threads = [
        threading.Thread(target=lambda t=t: found.update({t: with_warnings(task, t)}))
        for t in ("first", "second")
    ]
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        warnings.warn("outside", NumericsWarning, stacklevel=1)
    for text in ("first", "second"):
        result, warned = found[text]
        assert (result, [(w.message, w.category) for w in warned]) == (
            text,
            [(text, "orthobench.exceptions:NumericsWarning")],
        )
    assert [str(w.message) for w in shown] == ["outside"]


# Each test below starts worker processes, which import torch: slow.


@pytest.mark.slow
@pytest.mark.parametrize(
    ("executor", "q"),
    [("process", 1), ("dask", 1), ("dask", 2)],
    ids=["pool-cells", "dask-cells", "dask-evaluations"],
)
def test_a_workers_warning_is_shown_by_the_runner(plugin, tmp_path, executor: str, q: int) -> None:
    """Before, a pool worker or a Dask worker printed it itself, in Python's format, to its own
    stderr (an external Dask cluster's worker to its log): the runner's filters and format (and
    ``pytest.warns`` here) never saw it. On Dask at ``q = 2`` the warnings are the evaluations',
    which run as Dask tasks of their own."""
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    suite = load_suite(plugin(seeds=2, q=q, warn=WARNING))
    with pytest.warns(NumericsWarning, match=WARNING) as shown:
        summary = run_suite(
            suite,
            ResultStore(tmp_path / "out"),
            device=torch.device("cpu"),
            executor=make_executor(executor, workers=2),
            show_progress=False,
        )
    assert summary.count("ok") == 2, summary.failed
    ours = [w for w in shown if issubclass(w.category, NumericsWarning)]
    assert {(w.category, str(w.message), Path(w.filename).name) for w in ours} == {
        (NumericsWarning, WARNING, "poolplugin.py")
    }
    (line,) = [i for i, text in enumerate(PLUGIN_SOURCE.split("\n"), 1) if "warnings.warn(" in text]
    assert {w.lineno for w in ours} == {line}


@pytest.mark.slow
def test_an_evaluation_processs_warning_is_shown_by_its_cells_process(plugin) -> None:
    spec = cell(task="poolplugin:Plugin", n_init=2, budget=1, task_params={"warn": WARNING})
    spec = dataclasses.replace(spec, q=2)
    with pytest.warns(NumericsWarning, match=WARNING):
        records = run_cell(spec, evaluations=ProcessEvaluations(2, threads=1))
    assert len(records) == 4


@pytest.mark.slow
def test_the_cli_prints_a_pool_cells_warning_as_one_line_under_quiet(plugin, tmp_path) -> None:
    """As inline: ``orthobench: warning: ...``, without the source location and line; ``-q``
    hides the progress only."""
    runner = _start_cli(plugin(seeds=2, q=2, warn=WARNING), tmp_path / "out", "--workers", "2")
    _, stderr = runner.communicate(timeout=300)
    assert runner.returncode == 0, stderr
    assert f"orthobench: warning: {WARNING}" in stderr.splitlines(), stderr
    assert "NumericsWarning" not in stderr, stderr
    assert "poolplugin.py" not in stderr, stderr


# ----------------------------------------------------------------------------------------------
# Ctrl-C


def _children(pid: int) -> list[int]:
    try:
        return [
            int(child)
            for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()
        ]
    except FileNotFoundError:  # it ended
        return []


def _importing_torch(pid: int) -> bool:
    """Whether process ``pid`` is a spawned worker that has begun loading torch's library."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        return b"spawn_main" in command and b"libtorch" in Path(f"/proc/{pid}/maps").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc")
def test_a_ctrl_c_while_a_pool_worker_imports_is_ignored_there(plugin, tmp_path) -> None:
    """SIGINT reaches the worker alone while it imports torch, before it could ignore SIGINT:
    before, a ``KeyboardInterrupt`` traceback of the worker, which died and failed its cell."""
    runner = _start_cli(plugin(), tmp_path / "out", "--workers", "2")
    deadline = time.monotonic() + 120
    worker = None
    while worker is None and runner.poll() is None and time.monotonic() < deadline:
        worker = next(filter(_importing_torch, _children(runner.pid)), None)
        time.sleep(0.005)
    assert worker is not None, "no worker was seen importing torch"
    os.kill(worker, signal.SIGINT)
    _, stderr = runner.communicate(timeout=300)
    assert "Traceback" not in stderr, stderr
    assert runner.returncode == 0, stderr


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_ctrl_c_with_a_batch_cell_on_the_pool_leaves_no_leaked_semaphores(
    plugin, tmp_path
) -> None:
    """The cell's process holds the queues of its evaluation pool; killed outright, it left
    their semaphores to the resource tracker, which warned of them as the run ended."""
    log = tmp_path / "evaluations.log"
    runner = _start_cli(plugin(q=2, log=str(log), hang=3600.0), tmp_path / "out", "--workers", "2")
    deadline = time.monotonic() + 300
    # The initial design's 2 points, evaluated at once in the cell's evaluation processes.
    while runner.poll() is None and time.monotonic() < deadline:
        if log.exists() and len(log.read_text().split()) == 2:
            break
        time.sleep(0.1)
    evaluators = {int(pid) for pid in log.read_text().split()}
    assert len(evaluators) == 2, evaluators
    os.killpg(runner.pid, signal.SIGINT)
    _, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 130, stderr
    assert stderr.splitlines()[1:] == [
        "orthobench: interrupted: 0 of 1 cells stored (0 by this run); rerun the same command "
        "to resume."
    ], stderr
    deadline = time.monotonic() + 10
    while any(map(process_running, evaluators)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(process_running, evaluators))


@pytest.mark.slow
def test_a_batch_cell_stopped_at_the_timeout_leaves_no_leaked_semaphores(plugin, tmp_path) -> None:
    """As at a Ctrl-C: the cell's process, stopped at the timeout, closes its evaluation pool."""
    suite = plugin(q=2, hang=3600.0)
    runner = _start_cli(suite, tmp_path / "out", "--workers", "2", "--cell-timeout", "10")
    _, stderr = runner.communicate(timeout=300)
    assert runner.returncode == 1, stderr
    (cell_id,) = [c.id for c in load_suite(suite).cells()]
    assert stderr.splitlines()[1:] == [
        f"failed: {cell_id}: timed out: still running after the cell timeout of 10 s; its "
        "process was stopped",
        f"tracebacks are stored in {tmp_path / 'out' / 'runs.jsonl'}",
    ], stderr
