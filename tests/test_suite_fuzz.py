"""Malformed suites, generated: each is refused by ``orthobench run`` before anything runs, with
exit code 2 and one line on stderr naming the file and the field, no traceback, within 5 s.

Each kind below is one way a suite was found to break the runner (a traceback, a hang, a
``MemoryError``, a value accepted and failing in every cell). A kind draws a suite from a
hypothesis strategy and knows the field the error must name: a YAML path (``seeds``,
``optimizers[0].params.theta_samples``) or, for a file that does not parse into a suite, its
place (``line ...`` or ``(file)``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orthobench.cli import cli
from orthobench.config import names
from orthobench.config.params import MAX_COUNT
from orthobench.config.strict_yaml import MAX_DEPTH, MAX_NODES
from orthobench.exceptions import MESSAGE_LIMIT, ConfigError
from orthobench.suite import (
    _LABEL_RE,
    MAX_CELLS,
    MAX_EVALUATIONS,
    MAX_FILE_BYTES,
    MAX_LABEL,
    MAX_SEED,
)

SECONDS_PER_SUITE = 5.0


@dataclass(frozen=True)
class Case:
    """A malformed suite file and the field its error must name (a prefix of it)."""

    kind: str
    content: bytes
    field: str


def _suite(**changes) -> dict:
    return {
        "name": "fuzz",
        "seeds": 1,
        "n_init": 2,
        "budget": 1,
        "tasks": ["hartmann6"],
        "optimizers": ["sobol"],
        **changes,
    }


def _case(kind: str, field: str, **changes) -> Case:
    return Case(kind, yaml.safe_dump(_suite(**changes), allow_unicode=True).encode(), field)


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=80)
_BAD_LABELS = st.one_of(
    st.sampled_from([".", "..", "-rf", ".hidden", "a/b", "..\\x", "", " x", "x\n", "x\r\n"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True).map(lambda s: s + "\n"),
    st.text(st.sampled_from("abc123._-"), min_size=MAX_LABEL + 1, max_size=5000),
    _TEXT.filter(lambda t: not _LABEL_RE.fullmatch(t)),
)


def _bad_label_cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        _BAD_LABELS.map(lambda v: _case("name", "name", name=v)),
        _BAD_LABELS.map(
            lambda v: _case("label", "tasks[0].label", tasks=[{"name": "hartmann6", "label": v}])
        ),
    )


def _import_path_cases() -> st.SearchStrategy[Case]:
    relative = st.from_regex(r"\.{1,4}[a-z]{0,6}:[a-z]{1,6}", fullmatch=True)
    callables = st.sampled_from(["os:system", "builtins:print", "shutil:rmtree", "subprocess:run"])
    return st.one_of(relative, callables).map(
        lambda v: _case(
            "import_path", "tasks[0].name", tasks=[{"name": v, "params": {"command": "true"}}]
        )
    )


def _seed_cases() -> st.SearchStrategy[Case]:
    too_many = st.one_of(st.integers(MAX_CELLS + 1, 10**30), st.integers(-(10**6), 0))
    bad_seed = st.one_of(st.integers(MAX_SEED + 1, 2**80), st.integers(-(2**70), -1))
    listed = st.tuples(st.lists(st.integers(0, 99), max_size=4, unique=True), bad_seed).flatmap(
        lambda t: st.integers(0, len(t[0])).map(
            lambda i: _case("seeds", f"seeds[{i}]", seeds=[*t[0][:i], t[1], *t[0][i:]])
        )
    )
    cells = st.integers(MAX_CELLS // 4 + 1, MAX_CELLS).map(
        lambda n: _case(
            "cells",
            "seeds",
            seeds=n,
            tasks=["hartmann6", "levy16"],
            optimizers=["sobol", {"name": "sobol", "label": "sobol-2"}],
        )
    )
    return st.one_of(too_many.map(lambda n: _case("seeds", "seeds", seeds=n)), listed, cells)


def _size_cases() -> st.SearchStrategy[Case]:
    huge = st.one_of(st.integers(MAX_EVALUATIONS + 1, 10**40), st.integers(-(10**9), -1))
    needs_two = st.sampled_from(["orthobo", "mc-ei", "rpr", "mc-tpe", "orthobo-tpe"])
    return st.one_of(
        st.builds(
            lambda v, key: _case("evaluations", key, **{key: v}),
            huge,
            st.sampled_from(["budget", "n_init"]),
        ),
        needs_two.map(lambda o: _case("min_observations", "n_init", n_init=1, optimizers=[o])),
    )


_COUNT_PARAMS = [
    ("orthobo", "theta_samples", 4),
    ("mc-ei", "theta_samples", 4),
    ("qlogei", "function_samples", 1),
    ("ucb", "function_samples", 1),
    ("turbo", "function_samples", 1),
    ("rpr", "function_samples", 1),
    ("mc-tpe", "bootstrap_fits", 2),
    ("orthobo-tpe", "bootstrap_fits", 2),
    ("qlogei", "raw_samples", 1),
    ("orthobo", "num_restarts", 1),
    ("tpe-optuna", "n_ei_candidates", 1),
]


def _optimizer_case(kind: str, optimizer: str, param: str, value, suffix: str = "") -> Case:
    return _case(
        kind,
        f"optimizers[0].params.{param}{suffix}",
        optimizers=[{"name": optimizer, "params": {param: value}}],
    )


def _parameter_cases() -> st.SearchStrategy[Case]:
    counts = st.sampled_from(_COUNT_PARAMS).flatmap(
        lambda c: st.one_of(
            st.integers(-(10**6), c[2] - 1), st.integers(MAX_COUNT + 1, 10**20)
        ).map(lambda v: _optimizer_case("count", c[0], c[1], v))
    )
    bad_noise = st.one_of(
        st.floats(max_value=-1e-300, allow_infinity=True), st.just(math.nan), st.just(math.inf)
    )
    noise = st.tuples(
        st.sampled_from(["hartmann6", "ackley8", "michalewicz10", "levy16"]), bad_noise
    ).map(
        lambda t: _case(
            "noise_std",
            "tasks[0].params.noise_std",
            tasks=[{"name": t[0], "params": {"noise_std": t[1]}}],
        )
    )

    def unparsable(text: str) -> bool:
        try:
            names.parse_theta_estimator(text)
        except ConfigError:
            return True
        return False

    estimators = st.one_of(
        st.sampled_from(["bogus", "orth@sobol", "sr3@qmc", "mc+rb+rb", "", "orth-quadratic@"]),
        _TEXT.filter(unparsable),
    ).map(lambda v: _optimizer_case("estimator", "orthobo", "estimator", v))
    bad_kernel = st.one_of(st.sampled_from(["nope", "RBF-iso", "matern52", ""]), _TEXT).filter(
        lambda k: k not in names.KERNELS
    )
    kernels = st.one_of(
        st.tuples(
            st.sampled_from(["qlogei", "ucb", "orthobo", "mc-ei", "rpr", "turbo"]), bad_kernel
        ).map(lambda t: _optimizer_case("kernel", t[0], "kernel", t[1])),
        bad_kernel.map(
            lambda k: _optimizer_case("kernel", "orthobo", "kernel", ["rbf-iso", k], "[1]")
        ),
    )
    params = st.sampled_from([[], [1], "noise_std", 3, True]).map(
        lambda p: _case("params", "tasks[0].params", tasks=[{"name": "hartmann6", "params": p}])
    )
    return st.one_of(counts, noise, estimators, kernels, params)


def _device_cases() -> st.SearchStrategy[Case]:
    index = st.one_of(
        st.integers(0, 10**6).map(lambda i: f"0{i}"),
        st.integers(names.MAX_CUDA_INDEX + 1, 10**25).map(str),
        st.sampled_from(["", "-1", "1\n", "x", "\u0663", "1 "]),
    )
    other = st.sampled_from(["gpu", "CUDA", "cuda0", "mps", "cuda:0:1", "cpu\n"])
    return st.one_of(index.map(lambda i: f"cuda:{i}"), other).map(
        lambda d: _case("device", "device", device=d)
    )


_GOOD_TEXT = yaml.safe_dump(_suite())


def _text_cases() -> st.SearchStrategy[Case]:
    """Files that do not parse into a suite: the error names a line (or the file)."""
    bad_bytes = st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xe9", b"\x80abc"])
    encoding = bad_bytes.map(
        lambda b: Case("encoding", _GOOD_TEXT.encode() + b"description: caf" + b + b"\n", "line ")
    )
    nesting = st.tuples(st.integers(MAX_DEPTH + 1, 3000), st.sampled_from(["[", "{a: "])).map(
        lambda t: Case(
            "nesting",
            (
                _GOOD_TEXT + "description: " + t[1] * t[0] + ("]" if t[1] == "[" else "}") * t[0]
            ).encode(),
            "line ",
        )
    )

    def bomb(width: int) -> Case:
        depth = math.ceil(math.log(MAX_NODES, width)) + 1
        layers = [f"&l0 [{', '.join(['x'] * width)}]"] + [
            f"&l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth + 1)
        ]
        text = f"description: [{', '.join(layers)}]\nname: *l{depth}\n"
        return Case(
            "alias_bomb",
            (text + "budget: 1\ntasks: [hartmann6]\noptimizers: [sobol]\n").encode(),
            "line ",
        )

    duplicate = st.tuples(
        st.sampled_from(["name", "budget", "n_init", "seeds", "tasks"]),
        st.sampled_from(["x", "3", "[1]"]),
    ).map(lambda t: Case("duplicate_key", (_GOOD_TEXT + f"{t[0]}: {t[1]}\n").encode(), "line "))
    values = st.sampled_from(
        [
            "2001-02-30",
            "!!int abc",
            "!!float x",
            "!!binary 'a'",
            "!!python/object:os.system {}",
            "&a [*a]",
        ]
    ).map(lambda v: Case("yaml_value", (_GOOD_TEXT + f"description: {v}\n").encode(), "line "))
    large = st.just(
        Case("file_size", _GOOD_TEXT.encode() + b"#" * MAX_FILE_BYTES + b"\n", "(file)")
    )
    return st.one_of(encoding, nesting, st.integers(3, 12).map(bomb), duplicate, values, large)


def malformed_suites() -> st.SearchStrategy[Case]:
    return st.one_of(
        _bad_label_cases(),
        _import_path_cases(),
        _seed_cases(),
        _size_cases(),
        _parameter_cases(),
        _device_cases(),
        _text_cases(),
    )


KINDS = {
    "name", "label", "import_path", "seeds", "cells", "evaluations", "min_observations", "count",
    "noise_std", "estimator", "kernel", "params", "device", "encoding", "nesting", "alias_bomb",
    "duplicate_key", "yaml_value", "file_size",
}  # fmt: skip


@pytest.fixture(scope="module")
def refuse(tmp_path_factory):
    """Run ``orthobench run`` on a case; assert the one-line refusal; return the seconds."""
    root = tmp_path_factory.mktemp("fuzz")
    numbers = itertools.count()
    runner = CliRunner()
    # Import what `run` and a suite check import (BoTorch, through the registry) outside the
    # timing, with a suite that names every built-in optimizer and is refused.
    warm = root / "warm.yaml"
    optimizers = ["sobol", "qlogei", "ucb", "turbo", "rpr", "mc-tpe", "orthobo-tpe", "tpe-optuna"]
    warm.write_text(
        yaml.safe_dump(_suite(optimizers=[*optimizers, {"name": "orthobo", "params": {"rb": 1}}]))
    )
    assert runner.invoke(cli, ["run", str(warm), "-o", str(root / "out"), "-q"]).exit_code == 2

    def check(case: Case) -> float:
        path = root / f"{case.kind}-{next(numbers)}.yaml"
        path.write_bytes(case.content)
        start = time.perf_counter()
        result = runner.invoke(cli, ["run", str(path), "-o", str(root / "out"), "-q"])
        seconds = time.perf_counter() - start
        assert result.exit_code == 2, (case, result.output, result.exception)
        assert isinstance(result.exception, SystemExit), result.exception
        assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
        assert result.stderr.startswith(f"orthobench: error: {path}: {case.field}"), (
            case,
            result.stderr,
        )
        assert "Traceback" not in result.output
        assert len(result.stderr) <= len("orthobench: error: \n") + 2 * MESSAGE_LIMIT
        assert seconds < SECONDS_PER_SUITE, (case.kind, seconds)
        assert not (root / "out").exists()  # refused before anything ran
        return seconds

    return check


def _fuzz(refuse, examples: int) -> Counter:
    kinds: Counter = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(malformed_suites())
    def check(case: Case) -> None:
        refuse(case)
        kinds[case.kind] += 1

    check()
    return kinds


def test_a_few_malformed_suites_of_each_kind_are_refused_in_one_line(refuse):
    kinds = _fuzz(refuse, examples=60)
    assert sum(kinds.values()) >= 60 and len(kinds) >= 12, kinds


@pytest.mark.slow
def test_300_malformed_suites_are_refused_in_one_line_before_anything_runs(refuse):
    kinds = _fuzz(refuse, examples=400)
    assert sum(kinds.values()) >= 300, kinds
    assert set(kinds) == KINDS, KINDS - set(kinds)


@pytest.mark.parametrize(
    "device", ["cuda:01", "cuda:128", "gpu", "cuda:1\n"], ids=["zero", "int8", "gpu", "newline"]
)
def test_an_unparsable_device_flag_is_refused_in_one_line(tmp_path, device):
    path = tmp_path / "suite.yaml"
    path.write_text(_GOOD_TEXT)
    result = CliRunner().invoke(cli, ["run", str(path), "--device", device, "-o", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("orthobench: error: device: must be auto, cpu, cuda or cuda:N")


BAD_TASK = """
from orthobench import Task
from orthobench.exceptions import ConfigError


class Unbuildable(Task):
    def __init__(self):
        raise ConfigError("path", "no dataset here:\\n  tried /a\\n  tried /b" + " and more" * 500)

    def evaluate(self, x, *, seed, device):
        raise NotImplementedError
"""


def test_any_orthobench_error_prints_one_capped_line(tmp_path, monkeypatch):
    # The task passes the suite check (a Task subclass) and fails when the run builds it.
    (tmp_path / "badtask.py").write_text(BAD_TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "suite.yaml"
    path.write_text(_GOOD_TEXT.replace("- hartmann6", "- badtask:Unbuildable"))
    result = CliRunner().invoke(cli, ["run", str(path), "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2, result.output
    error = result.stderr.partition("orthobench: error: ")[2]  # after the run's header line
    assert error.count("\n") == 1 and error.endswith("\n"), result.stderr
    # The task's own field, under the task that raised it.
    assert error.startswith("tasks.Unbuildable.path: no dataset here:\\n  tried /a\\n")
    assert len(error) <= 2 * MESSAGE_LIMIT + 1
