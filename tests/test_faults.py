"""Faults of plugin code while cells run: errors that cannot be printed, evaluations of the wrong
type, signal handlers changed by a task or an optimizer, constructors that fail, hang or exit,
processes that end the run inline, and child processes that outlive a timeout (on every executor,
those that left their process group included)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from orthobench import execution
from orthobench.exceptions import ConfigError, OrthobenchError, OrthobenchWarning, describe_error
from orthobench.executors import make_executor
from orthobench.executors._pool import _kill_tree
from orthobench.loop import check_buildable, run_cell
from orthobench.optimizers.sobol import SobolSearch
from orthobench.registry import task_factory
from orthobench.results import ResultStore, load_runs
from orthobench.space import SearchSpace
from orthobench.suite import Cell, ComponentSpec, load_suite
from orthobench.tasks.base import Evaluation, Task
from tests.helpers import forget_module

# ---------------------------------------------------------------------------------------------
# Tasks named by import path from this module (inline runs only: pool workers would import it).


class Unprintable(RuntimeError):
    """An error whose ``__str__`` raises, as a plugin's broken exception class might."""

    def __str__(self) -> str:
        raise ValueError("__str__ is broken")


class UnreprUnprintable(Unprintable):
    def __repr__(self) -> str:
        raise ValueError("__repr__ is broken")


class Sphere(Task):
    """A sphere on [-1, 1]^2 that misbehaves as ``fault`` says."""

    optimal_value = 0.0

    def __init__(self, fault: str = "none", log: str = "") -> None:
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.fault, self.log = fault, log
        self.calls = 0

    def evaluate(self, x, *, seed, device):
        self.calls += 1
        y = float(np.sum(np.asarray(x) ** 2))
        if self.fault == "unprintable":
            raise Unprintable("secret")
        if self.fault == "returns-none":
            return None
        if self.fault == "outlier-as-text":
            return Evaluation(y=y, is_outlier="no")
        if self.fault == "bool-y":
            return Evaluation(y=True)
        if self.fault == "nan-info":
            return Evaluation(y=y, info={"loss": math.nan, "curve": [1.0, -math.inf]})
        if self.fault == "float32-overflow":
            return Evaluation(y=1e39 if self.calls == 2 else y)
        if self.fault == "huge-y":
            return Evaluation(y=10**400 if self.calls == 2 else y, constraints=())
        if self.fault == "numpy-info":
            return Evaluation(
                y=y,
                info={
                    "f32": np.float32(0.25),
                    "f32nan": np.float32("nan"),
                    "i64": np.int64(7),
                    "flag": np.bool_(True),
                    "t": torch.tensor(0.5),
                    "curve": np.array([1.0, np.inf]),
                },
            )
        if self.fault == "sigint-self" and self.calls == 2:
            os.kill(os.getpid(), signal.SIGINT)  # as the user's Ctrl-C would arrive
        if self.fault == "spawn-and-hang" and self.calls == 2:
            child = subprocess.Popen(["sleep", "60"])
            Path(self.log).write_text(str(child.pid))
            time.sleep(60)
        return Evaluation(y=y)


class IgnoresSignals(Sphere):
    """Ignores SIGINT and SIGTERM when built and at every evaluation (as some training libraries
    do); logs the SIGINT handler each evaluation finds."""

    handlers: list = []

    def __init__(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        super().__init__()

    def evaluate(self, x, *, seed, device):
        IgnoresSignals.handlers.append(signal.getsignal(signal.SIGINT))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return super().evaluate(x, seed=seed, device=device)


class IgnoresSignalsWhenAsked(SobolSearch):
    """Ignores SIGINT and SIGTERM whenever it asks or is told; logs the SIGINT handler each of
    these calls finds."""

    handlers: list = []

    def _ignore_signals(self) -> None:
        IgnoresSignalsWhenAsked.handlers.append(signal.getsignal(signal.SIGINT))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def ask(self, n: int = 1):
        self._ignore_signals()
        return super().ask(n)

    def tell(self, x, y) -> None:
        self._ignore_signals()
        super().tell(x, y)


class NoParameters(Sphere):
    """A task whose search space is empty."""

    def __init__(self) -> None:
        Task.__init__(self, SearchSpace(()))


class SlowToPrepare(Sphere):
    """Its first use costs 1.5 s (data, imports); an evaluation is instant."""

    prepared: list[str] = []

    def prepare(self, device):
        time.sleep(1.5)
        SlowToPrepare.prepared.append(str(device))


class SetsThreads(Sphere):
    """Sets torch's thread count at every evaluation, as a training library may."""

    def evaluate(self, x, *, seed, device):
        torch.set_num_threads(torch.get_num_threads() + 1)
        return super().evaluate(x, seed=seed, device=device)


class CountsThreads(SobolSearch):
    """Logs the torch thread count each ask finds."""

    threads: list[int] = []

    def ask(self, n: int = 1):
        CountsThreads.threads.append(torch.get_num_threads())
        return super().ask(n)


class RaisesInInit(Sphere):
    def __init__(self, error: str = "runtime") -> None:
        if error == "runtime":
            raise RuntimeError("no GPU here")
        if error == "exit":
            sys.exit(5)
        if error == "unprintable":
            raise Unprintable("secret")
        if error == "sleep":
            time.sleep(60)
        if error == "config":  # a parameter the task checks itself, by its own name
            raise ConfigError("batch_size", "must be an integer >= 1, but got 0.")
        super().__init__()


@task_factory
def returns_a_number() -> int:
    """A factory that builds no task."""
    return 42


def cell(
    task: str,
    params: dict | None = None,
    n_init: int = 3,
    budget: int = 2,
    optimizer: str = "sobol",
) -> Cell:
    """A cell of this module's ``task``; ``optimizer`` a built-in name or an import path."""
    return Cell(
        suite="faults",
        task=ComponentSpec(name=f"{__name__}:{task}", params=params or {}, label="t"),
        optimizer=ComponentSpec(name=optimizer, params={}, label="opt"),
        seed=0,
        n_init=n_init,
        budget=budget,
    )


def write_suite(tmp_path: Path, *tasks: str) -> Path:
    """A suite of ``Sphere`` cells, one per fault in ``tasks``, labelled by it."""
    entries = "".join(
        f'\n  - {{name: "{__name__}:Sphere", params: {{fault: {t}}}, label: {t}}}' for t in tasks
    )
    path = tmp_path / "faults.yaml"
    path.write_text(
        f"name: faults\nseeds: 1\nn_init: 3\nbudget: 2\ntasks:{entries}\noptimizers: [sobol]\n"
    )
    return path


def run_inline(suite: Path, root: Path, **kwargs) -> execution.RunSummary:
    return execution.run_suite(
        load_suite(suite),
        ResultStore(root),
        device=torch.device("cpu"),
        show_progress=False,
        **kwargs,
    )


def outcomes(summary: execution.RunSummary) -> dict[str, tuple[str, str | None]]:
    return {o.unit.task.label: (o.status, o.error) for o in summary.outcomes}


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def all_dead(pids: list[int], within: float = 5.0) -> bool:
    """Whether every process of ``pids`` is dead within ``within`` seconds (a kill is not
    instant)."""
    deadline = time.monotonic() + within
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(map(alive, pids))


# ---------------------------------------------------------------------------------------------
# Errors that cannot be printed


def test_an_error_is_described_even_when_its_str_and_repr_raise() -> None:
    assert describe_error(Unprintable("secret")) == "Unprintable('secret')"
    assert describe_error(UnreprUnprintable("secret")) == "<unprintable UnreprUnprintable>"
    assert describe_error(RuntimeError("two\nlines")) == "RuntimeError: two\\nlines"


def test_an_error_whose_str_raises_fails_its_cell_and_the_queued_cells_run(tmp_path) -> None:
    summary = run_inline(write_suite(tmp_path, "unprintable", "none"), tmp_path / "out")
    assert outcomes(summary) == {
        "unprintable": ("failed", "Unprintable('secret')"),
        "none": ("ok", None),
    }
    (entry,) = [e for e in ResultStore(tmp_path / "out").runs_journal.entries() if "error" in e]
    assert entry["error"] == "Unprintable('secret')" and "Traceback" in entry["traceback"]


# ---------------------------------------------------------------------------------------------
# Evaluations of the wrong type


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            "returns-none",
            "`evaluate` of task 't' must return an Evaluation, but returned NoneType None "
            "(at iteration 0).",
        ),
        ("outlier-as-text", "`Evaluation.is_outlier` must be a bool, but got str 'no'."),
        ("bool-y", "`Evaluation.y` must be a real number, but got bool True."),
    ],
)
def test_an_evaluation_of_the_wrong_type_fails_the_cell_naming_field_and_value(
    fault: str, message: str
) -> None:
    with pytest.raises(TypeError) as err:
        run_cell(cell("Sphere", {"fault": fault}))
    assert str(err.value) == message


def test_a_task_returning_none_fails_its_cell_without_a_timeout(tmp_path) -> None:
    """It was stored as ``status: timeout`` (no timeout set) and the run succeeded."""
    summary = run_inline(write_suite(tmp_path, "returns-none", "none"), tmp_path / "out")
    status, error = outcomes(summary)["returns-none"]
    assert status == "failed" and error.startswith("TypeError: `evaluate` of task 'returns-none'")
    assert set(load_runs([tmp_path / "out"])["task"]) == {"none"}


def test_non_finite_floats_in_info_are_stored_as_null_in_standard_json() -> None:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    records = run_cell(cell("Sphere", {"fault": "nan-info"}))
    infos = [json.loads(r.info, parse_constant=refuse) for r in records]
    assert all(i["loss"] is None and i["curve"] == [1.0, None] for i in infos)
    assert all(r.status == "ok" for r in records)


def test_an_int_beyond_floats_range_is_an_invalid_infinite_y_not_a_failed_cell() -> None:
    """``float(10**400)`` raised OverflowError, which failed the cell."""
    records = run_cell(cell("Sphere", {"fault": "huge-y"}))
    assert [r.status for r in records] == ["ok", "invalid", "ok", "ok", "ok"]
    assert records[1].y == math.inf


def test_a_y_beyond_float32s_range_is_invalid_in_a_float32_cell_not_a_failed_cell() -> None:
    """A finite 1e39 became inf in the optimizer's float32 ``tell``, which failed the cell after
    its journaled evaluations, and again on every resume."""
    spec = dataclasses.replace(cell("Sphere", {"fault": "float32-overflow"}), dtype="float32")
    records = run_cell(spec)
    assert [r.status for r in records] == ["ok", "invalid", "ok", "ok", "ok"]
    assert records[1].y == 1e39
    plain = run_cell(cell("Sphere", {"fault": "float32-overflow"}))
    assert [r.status for r in plain] == ["ok"] * 5  # float64 holds it


def test_an_info_key_that_is_not_a_string_is_refused_naming_info() -> None:
    """A tuple key raised json's "keys must be str, int, ..." from the runner, naming nothing."""
    with pytest.raises(TypeError, match=r"`Evaluation.info` keys must be strings, but got tuple"):
        Evaluation(y=1.0, info={(1, 2): 3.0})


def test_numpy_and_torch_values_in_info_are_stored_as_json_numbers() -> None:
    """``json.dumps(default=str)`` stored ``np.float32(0.25)`` as "0.25" and its NaN as "nan"."""
    records = run_cell(cell("Sphere", {"fault": "numpy-info"}))
    expected = {"f32": 0.25, "f32nan": None, "i64": 7, "flag": True, "t": 0.5, "curve": [1.0, None]}
    assert all(json.loads(r.info).items() >= expected.items() for r in records)


# ---------------------------------------------------------------------------------------------
# Signal handlers


@pytest.fixture
def runner_handler():
    """A SIGINT handler of the runner's, installed for the test; SIGINT's and SIGTERM's handlers
    are put back after it."""

    def handler(signum, frame) -> None:  # noqa: ANN001 -- signal handler signature
        raise KeyboardInterrupt

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, handler)
    try:
        yield handler
    finally:
        for signum, previous in before.items():
            signal.signal(signum, previous)


def test_the_runners_signal_handlers_are_put_back_after_a_task_changes_them(
    runner_handler,
) -> None:
    sigterm = signal.getsignal(signal.SIGTERM)
    IgnoresSignals.handlers.clear()
    check_buildable([cell("IgnoresSignals")])
    assert signal.getsignal(signal.SIGINT) is runner_handler
    run_cell(cell("IgnoresSignals"))
    # Each evaluation found the runner's handler, though the constructor and every evaluation
    # before it set SIG_IGN.
    assert IgnoresSignals.handlers == [runner_handler] * 5
    assert signal.getsignal(signal.SIGINT) is runner_handler
    assert signal.getsignal(signal.SIGTERM) is sigterm


def test_the_runners_signal_handlers_are_put_back_after_an_optimizer_changes_them(
    runner_handler,
) -> None:
    sigterm = signal.getsignal(signal.SIGTERM)
    IgnoresSignalsWhenAsked.handlers.clear()
    run_cell(cell("Sphere", optimizer=f"{__name__}:IgnoresSignalsWhenAsked"))
    # The tell of the initial design, then ask and tell at each of the two BO steps: each found
    # the runner's handler, though every call before it set SIG_IGN.
    assert IgnoresSignalsWhenAsked.handlers == [runner_handler] * 5
    assert signal.getsignal(signal.SIGINT) is runner_handler
    assert signal.getsignal(signal.SIGTERM) is sigterm


def test_a_task_without_parameters_is_refused_naming_the_task_not_the_optimizer() -> None:
    """``optimizers.sobol: cannot be built ...: `dim` must be positive``."""
    with pytest.raises(ConfigError, match=r"search space has no parameter") as info:
        check_buildable([cell("NoParameters")])
    assert info.value.field == "tasks.t.space"


def test_a_tasks_one_time_preparation_runs_once_outside_the_evaluation_time_limit() -> None:
    """The cnn task's first evaluation read its data and imported torch._dynamo under the
    limit: a timer that stopped the import failed every later evaluation of the process."""
    SlowToPrepare.prepared.clear()
    # A limit far above an evaluation (microseconds), even on a loaded machine, and below the
    # preparation.
    records = run_cell(cell("SlowToPrepare"), evaluation_timeout=1.0)
    assert [r.status for r in records] == ["ok"] * 5 and SlowToPrepare.prepared == ["cpu"]
    assert all(r.eval_seconds < 1.0 for r in records)


def test_the_cells_thread_count_is_put_back_after_a_task_changes_it() -> None:
    """The optimizer ran the rest of the cell at the task's count, though the cell's metadata
    records the runner's (and the values depend on it)."""
    threads = torch.get_num_threads()
    CountsThreads.threads.clear()
    try:
        run_cell(cell("SetsThreads", optimizer=f"{__name__}:CountsThreads"))
        assert CountsThreads.threads == [threads] * 2 and torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(threads)


def test_ctrl_c_still_ends_an_inline_run_after_a_task_ignored_sigint(tmp_path) -> None:
    """``IgnoresSignals`` runs first; the next cell receives SIGINT at its second evaluation."""
    suite = write_suite(tmp_path, "sigint-self")
    text = suite.read_text().replace("tasks:", f'tasks:\n  - {{name: "{__name__}:IgnoresSignals"}}')
    suite.write_text(text)
    with pytest.raises(execution.RunInterrupted) as stop:
        run_inline(suite, tmp_path / "out")
    assert stop.value.summary.count("ok") == 1


def test_an_inline_run_leaves_a_sigint_handler_that_python_did_not_install_alone(
    tmp_path, monkeypatch
) -> None:
    """Where the process's SIGINT handler was not installed from Python (an embedding program's
    own, for which ``signal.getsignal`` gives None), the inline run stored its cells, then
    raised ``TypeError`` putting None back as the handler."""
    installed = []
    getsignal, setsignal = signal.getsignal, signal.signal

    def foreign(signum):  # noqa: ANN001, ANN202
        return None if signum == signal.SIGINT else getsignal(signum)

    def recording(signum, handler):  # noqa: ANN001, ANN202
        if signum == signal.SIGINT:
            installed.append(handler)
        return setsignal(signum, handler)

    monkeypatch.setattr(signal, "getsignal", foreign)
    monkeypatch.setattr(signal, "signal", recording)
    summary = run_inline(write_suite(tmp_path, "none"), tmp_path / "out")
    assert summary.count("ok") == 1
    assert installed == []  # it cannot be chained to nor put back: it is not replaced


# ---------------------------------------------------------------------------------------------
# Constructors, run before any cell


@pytest.mark.parametrize(
    ("task", "params", "reason"),
    [
        ("RaisesInInit", {"error": "runtime"}, "cannot be built: RuntimeError: no GPU here"),
        ("RaisesInInit", {"error": "exit"}, "cannot be built: SystemExit: 5"),
        ("RaisesInInit", {"error": "unprintable"}, "cannot be built: Unprintable('secret')"),
        ("returns_a_number", {}, "must build a Task, but returned int 42."),
        # Its field was "batch_size" alone: which of a suite's tasks has it?
        ("RaisesInInit", {"error": "config"}, "tasks.t.batch_size: must be an integer >= 1"),
    ],
)
def test_a_task_that_cannot_be_built_stops_the_run_with_one_line_naming_it(
    task: str, params: dict, reason: str
) -> None:
    with pytest.raises(OrthobenchError) as err:
        check_buildable([cell(task, params)])
    prefix = "" if reason.startswith("tasks.") else "tasks.t: "
    assert str(err.value).startswith(prefix) and reason in str(err.value)
    assert "\n" not in str(err.value)


def test_a_constructor_past_the_cell_timeout_is_stopped() -> None:
    start = time.monotonic()
    with pytest.raises(OrthobenchError) as err:
        check_buildable([cell("RaisesInInit", {"error": "sleep"})], timeout=0.5)
    assert time.monotonic() - start < 10
    assert str(err.value) == (
        "tasks.t: still being built after 0.5 s (the cell timeout, else 300 s); its "
        "construction was stopped."
    )


def test_a_constructor_calling_sys_exit_is_a_usage_error_of_one_line(tmp_path) -> None:
    """``sys.exit(5)`` in a task's ``__init__`` exited 5 with no message."""
    from click.testing import CliRunner

    from orthobench.cli import cli

    suite = tmp_path / "exits.yaml"
    suite.write_text(
        "name: exits\nseeds: 1\nn_init: 3\nbudget: 2\ntasks:\n"
        f'  - {{name: "{__name__}:RaisesInInit", params: {{error: exit}}, label: exits}}\n'
        "optimizers: [sobol]\n"
    )
    result = CliRunner().invoke(cli, ["run", str(suite), "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        "orthobench: error: tasks.exits: cannot be built: SystemExit: 5"
    )


# ---------------------------------------------------------------------------------------------
# A process that ends inside an inline cell


def test_a_cell_left_running_by_a_dead_inline_run_is_journaled_as_failed_and_rerun(
    tmp_path,
) -> None:
    """The marker a dead run leaves (``os._exit`` skips the ``finally`` that removes it)."""
    suite = write_suite(tmp_path, "none")
    (spec,) = load_suite(suite).cells()
    out = tmp_path / "out"
    out.mkdir()
    marker = out / execution.RUNNING_MARKER
    marker.write_text(
        json.dumps({"cell_id": spec.id, "config_hash": spec.config_hash, "pid": 4242})
    )
    with pytest.warns(
        OrthobenchWarning, match=rf"cell {re.escape(spec.id)} never finished: .*PID 4242"
    ):
        summary = run_inline(suite, out)
    assert summary.count("ok") == 1 and not marker.exists()
    entries = [e["status"] for e in ResultStore(out).runs_journal.entries()]
    assert entries == ["failed", "ok"]
    # A finished run leaves no marker behind, so the next run has nothing to report.
    marker.write_text(
        json.dumps({"cell_id": spec.id, "config_hash": spec.config_hash, "pid": 4242})
    )
    summary = run_inline(suite, out)  # stored after all: nothing is journaled
    assert summary.count("skipped") == 1 and not marker.exists()
    assert len(ResultStore(out).runs_journal.entries()) == 2


EXITER_SOURCE = """
import os

import numpy as np

from orthobench import Evaluation, SearchSpace, Task


class ExitsOnce(Task):
    '''Ends its process with `os._exit(code)` at its first evaluation while `marker` exists.'''

    optimal_value = 0.0

    def __init__(self, code: int = 0, marker: str = ""):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.code, self.marker = code, marker

    def evaluate(self, x, *, seed, device):
        if os.path.exists(self.marker):
            os.remove(self.marker)
            os._exit(self.code)
        return Evaluation(y=float(np.sum(np.asarray(x) ** 2)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 1])
def test_a_task_calling_os_exit_inline_is_reported_as_never_finished_by_the_next_run(
    code: int, tmp_path, monkeypatch
) -> None:
    (tmp_path / "exiter.py").write_text(EXITER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_module("exiter", monkeypatch)
    marker = tmp_path / "exit-now"
    marker.touch()
    suite = tmp_path / "exits.yaml"
    suite.write_text(
        "name: exits\nseeds: 1\nn_init: 3\nbudget: 2\ntasks:\n"
        f'  - {{name: "exiter:ExitsOnce", params: {{code: {code}, marker: "{marker}"}}, '
        "label: exits}\noptimizers: [sobol]\n"
    )
    (spec,) = load_suite(suite).cells()
    out = tmp_path / "out"
    command = [sys.executable, "-m", "orthobench", "run", str(suite), "-o", str(out), "-q"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    # Inline, the task's exit status is the run's (README, exit codes): the marker remains.
    assert first.returncode == code, first.stderr
    assert json.loads((out / execution.RUNNING_MARKER).read_text())["cell_id"] == spec.id

    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stderr
    assert f"cell {spec.id} never finished" in second.stderr
    entries = ResultStore(out).runs_journal.entries()
    assert [e["status"] for e in entries] == ["failed", "ok"]
    assert entries[0]["error"].startswith("never finished: the process that ran it inline")
    assert not (out / execution.RUNNING_MARKER).exists()


# ---------------------------------------------------------------------------------------------
# Child processes of a task


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_the_children_of_a_timed_out_evaluation_are_killed(tmp_path) -> None:
    log = tmp_path / "child.pid"
    records = run_cell(
        cell("Sphere", {"fault": "spawn-and-hang", "log": str(log)}), evaluation_timeout=1.0
    )
    assert [r.status for r in records] == ["ok", "timeout", "ok", "ok", "ok"]
    assert all_dead([int(log.read_text())])


SETSID_PARENT = """
import subprocess
import time

print(subprocess.Popen(["sleep", "60"], start_new_session=True).pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_killing_a_pool_workers_group_also_kills_its_children_that_left_the_group() -> None:
    """What :meth:`orthobench.executors._pool._Worker.kill_group` does to a worker stopped at the cell timeout: a
    child that called ``setsid`` (out of reach of the group kill) dies too."""
    leader = subprocess.Popen(
        [sys.executable, "-c", SETSID_PARENT],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    escaped = int(leader.stdout.readline())
    try:
        _kill_tree(leader.pid)
        assert leader.wait(timeout=10) == -signal.SIGKILL
        assert all_dead([escaped])
    finally:
        leader.kill()
        leader.stdout.close()
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)


SPAWNER_SOURCE = """
import os
import resource
import subprocess
import time

import numpy as np

from orthobench import Evaluation, SearchSpace, Task


class Spawner(Task):
    '''Starts `sleep 60` (in a session of its own when `then` is "setsid"), writes its PID to
    `log`, then hangs or aborts its process.'''

    optimal_value = 0.0

    def __init__(self, then: str = "hang", log: str = ""):
        super().__init__(SearchSpace.box([(-1.0, 1.0)] * 2))
        self.then, self.log = then, log

    def evaluate(self, x, *, seed, device):
        child = subprocess.Popen(["sleep", "60"], start_new_session=self.then == "setsid")
        with open(self.log, "a") as fh:
            fh.write(f"{child.pid}\\n")
        if self.then == "abort":
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
            os.abort()
        time.sleep(3600)
"""


def run_spawners(
    tmp_path: Path, monkeypatch, executor: str, cell_timeout: float, *thens: str
) -> tuple[execution.RunSummary, list[int]]:
    """Run one ``Spawner`` cell per entry of ``thens``, each on a worker of its own; return the
    summary and the PIDs of the ``sleep``s they started."""
    (tmp_path / "spawner.py").write_text(SPAWNER_SOURCE)
    forget_module("spawner", monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    log = tmp_path / "children.log"
    suite = tmp_path / "spawn.yaml"
    suite.write_text(
        "name: spawn\nseeds: 1\nn_init: 3\nbudget: 2\ntasks:\n"
        + "".join(
            f'  - {{name: "spawner:Spawner", params: {{then: {t}, log: "{log}"}}, label: {t}}}\n'
            for t in thens
        )
        + "optimizers: [sobol]\n"
    )
    summary = execution.run_suite(
        load_suite(suite),
        ResultStore(tmp_path / "out"),
        device=torch.device("cpu"),
        executor=make_executor(executor, workers=len(thens), timeout=cell_timeout),
        show_progress=False,
    )
    return summary, [int(pid) for pid in log.read_text().split()]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_the_children_of_a_pool_worker_die_with_it(tmp_path, monkeypatch) -> None:
    """Two workers are stopped at the cell timeout, the third aborts: their `sleep`s go too, the
    one in a session of its own included."""
    summary, children = run_spawners(
        tmp_path, monkeypatch, "process", 5.0, "hang", "abort", "setsid"
    )
    assert {status for status, _ in outcomes(summary).values()} == {"failed"}
    assert len(children) == 3
    assert all_dead(children)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_the_children_of_a_dask_cell_die_at_the_cell_timeout(tmp_path, monkeypatch) -> None:
    """Its worker is restarted, which ends the worker process only: the `sleep`s outlived it."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.distributed")
    # A cell's clock starts when the scheduler gives it to a worker, which imports orthobench
    # then (seconds on a busy machine): imported as the workers start, the cells reach their
    # `sleep`s within the timeout.
    with dask.config.set({"distributed.worker.preload": ["orthobench.execution"]}):
        summary, children = run_spawners(tmp_path, monkeypatch, "dask", 5.0, "hang", "setsid")
    for status, error in outcomes(summary).values():
        assert status == "failed" and error.startswith("timed out: still running after the cell")
    assert len(children) == 2
    assert all_dead(children)
