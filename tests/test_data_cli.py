"""``orthobench data status | fetch | convert-wm811k`` through the top-level group's error handling."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from orthobench.cli import _Group
from orthobench.data_cli import data
from orthobench.tasks.datasets import store
from tests.tasks.datasets.formats import served_mnist

# The data group under a root with the CLI's one-line error handling (exit code 2).
ROOT = _Group(name="orthobench", commands={"data": data})


def invoke(*args: str):
    return CliRunner().invoke(ROOT, ["data", *args], catch_exceptions=False)


@pytest.fixture
def local_mnist(tmp_path, monkeypatch):
    """MNIST's catalogue entry served from file:// URLs; returns the served directory."""
    monkeypatch.setitem(store.CATALOGUE, "mnist", served_mnist(tmp_path / "served"))
    return tmp_path / "served"


def _row(output: str, name: str) -> list[str]:
    (line,) = [line for line in output.splitlines() if line.split()[:1] == [name]]
    return line.split()


def test_status_lists_present_and_missing_datasets(tmp_path):
    result = invoke("status", "--data-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert f"data directory: {tmp_path}" in result.output
    assert _row(result.output, "digits")[1:2] == ["present"]
    mnist = _row(result.output, "mnist")
    assert mnist[1] == "missing" and mnist[-6:-2] == ["(orthobench", "data", "fetch", "mnist"]


def test_fetch_then_status_reports_the_verified_copy(tmp_path, local_mnist):
    fetched = invoke("fetch", "mnist", "--data-dir", str(tmp_path / "d"))
    assert fetched.exit_code == 0, fetched.output
    assert f"mnist: {tmp_path / 'd' / 'mnist'}" in fetched.output
    assert fetched.output.count("sha256 ok") == 4
    row = _row(invoke("status", "--data-dir", str(tmp_path / "d")).output, "mnist")
    assert row[1] == "present" and row[4] == "ok" and not row[-1].endswith(")")
    (tmp_path / "d" / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b damaged")
    row = _row(invoke("status", "--data-dir", str(tmp_path / "d")).output, "mnist")
    assert row[4:6] == ["mismatch:", "t10k-labels-idx1-ubyte.gz"]
    assert " ".join(row[-6:]) == f"(orthobench data fetch mnist --data-dir {tmp_path / 'd'})"


def test_a_checksum_mismatch_is_a_one_line_error(tmp_path, local_mnist):
    (local_mnist / "t10k-images-idx3-ubyte.gz").write_bytes(b"tampered")
    result = invoke("fetch", "mnist", "--data-dir", str(tmp_path / "d"))
    assert result.exit_code == 2
    (error,) = [
        line for line in result.output.splitlines() if line.startswith("orthobench: error:")
    ]
    assert "t10k-images-idx3-ubyte.gz" in error and "does not match the published" in error
    assert not (tmp_path / "d" / "mnist" / "t10k-images-idx3-ubyte.gz").exists()


def test_bundled_datasets_have_nothing_to_fetch_and_unknown_names_are_usage_errors(tmp_path):
    result = invoke("fetch", "digits", "--data-dir", str(tmp_path))
    assert result.exit_code == 0 and "nothing to fetch" in result.output
    unknown = invoke("fetch", "imagenet")
    assert unknown.exit_code == 2 and "cifar10" in unknown.output


@pytest.mark.parametrize(
    ("suite", "fix"),
    [
        ("suites/cnn-mnist.yaml", "orthobench data fetch mnist"),
        ("suites/wm811k-vit.yaml", "convert-wm811k"),
    ],
)
def test_run_with_missing_data_is_one_line_before_any_cell(suite, fix, tmp_path, monkeypatch):
    from orthobench.cli import cli

    monkeypatch.setenv(store.DATA_DIR_ENV, str(tmp_path / "empty"))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", suite, "-o", str(out), "-q"])
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("orthobench: error")]
    assert len(errors) == 1 and fix in errors[0]
    assert not (out / "runs.jsonl").exists()


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("orthobench: error:")]


@pytest.fixture(scope="module")
def lswmd(tmp_path_factory):
    """A small valid LSWMD.pkl (5 labelled maps per class)."""
    from orthobench.tasks.datasets.synthetic_wafers import write_lswmd_pickle

    return write_lswmd_pickle(
        tmp_path_factory.mktemp("lswmd") / "LSWMD.pkl", n_per_class=5, n_unlabelled=2, seed=1
    )


def _damaged(kind: str, lswmd) -> bytes:
    raw = lswmd.read_bytes()
    return {
        "text": b"hello\n",
        "truncated": raw[: len(raw) // 2],
        "empty": b"",
        "no-module": b"cno_such_module_xyz\nThing\n.",  # GLOBAL of a module that is not there
    }[kind]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("text", "UnpicklingError"),
        ("truncated", "truncated"),
        ("empty", "is empty"),
        ("no-module", "no_such_module_xyz"),
    ],
)
def test_convert_refuses_a_damaged_pickle_in_one_line(kind, reason, lswmd, tmp_path):
    source = tmp_path / f"{kind}.pkl"
    source.write_bytes(_damaged(kind, lswmd))
    result = invoke("convert-wm811k", str(source), "--out", str(tmp_path / "c.npz"))
    assert result.exit_code == 2, result.output
    (error,) = _error_lines(result.output)
    assert str(source) in error and reason in error
    assert "Traceback" not in result.output and "Aborted" not in result.output
    assert not (tmp_path / "c.npz").exists()


def test_convert_checks_the_source_before_warning_about_unpickling(tmp_path, lswmd):
    missing = invoke("convert-wm811k", str(tmp_path / "LSWMD.pkl"), "--out", str(tmp_path / "c"))
    assert missing.exit_code == 2
    assert "unpickling" not in missing.output and "warning" not in missing.output
    (error,) = _error_lines(missing.output)
    assert f"{tmp_path / 'LSWMD.pkl'} does not exist" in error
    # Split settings no split can use are refused before the (slow) unpickling, too.
    for option, value in [("--seed", "-1"), ("--test-fraction", "1.5"), ("--test-fraction", "nan")]:
        bad = invoke("convert-wm811k", str(lswmd), "--out", str(tmp_path / "c"), option, value)
        assert bad.exit_code == 2 and "unpickling" not in bad.output, (option, bad.output)
        assert value in bad.output and option in bad.output  # the option, not a Python name


def test_fetch_that_fails_leaves_no_folder_it_created(tmp_path, monkeypatch):
    dataset = served_mnist(tmp_path / "served")
    gone = [dataclasses.replace(f, urls=((tmp_path / "absent").as_uri(),)) for f in dataset.files]
    monkeypatch.setitem(store.CATALOGUE, "mnist", dataclasses.replace(dataset, files=tuple(gone)))
    result = invoke("fetch", "mnist", "--data-dir", str(tmp_path / "d"))
    assert result.exit_code == 2 and "nothing was kept" in result.output
    assert not (tmp_path / "d").exists()


def test_status_hints_name_the_data_directory_they_were_given(tmp_path, monkeypatch):
    # The hint must make the dataset present where status looked, not in the default directory.
    monkeypatch.delenv(store.DATA_DIR_ENV, raising=False)
    mnist = _row(invoke("status", "--data-dir", str(tmp_path)).output, "mnist")
    assert " ".join(mnist[-6:]) == f"(orthobench data fetch mnist --data-dir {tmp_path})"
    default = invoke("status").output
    assert "(orthobench data fetch mnist)" in default or "mnist      present" in default


def test_status_hints_quote_a_data_directory_with_a_space(tmp_path, monkeypatch):
    """``--data-dir "my data"`` printed ``--data-dir my data``, which breaks when pasted."""
    monkeypatch.delenv(store.DATA_DIR_ENV, raising=False)
    spaced = tmp_path / "my data"
    output = invoke("status", "--data-dir", str(spaced)).output
    assert f"(orthobench data fetch mnist --data-dir '{spaced}')" in output
    assert f"--out '{spaced}/wm811k/wm811k.npz')" in output


def test_data_help_names_every_command():
    assert "convert-wm811k" in invoke("--help").output.split("Commands:")[0]


def test_status_lists_wm811k_missing_converted_and_damaged(tmp_path, lswmd):
    out = tmp_path / "wm811k" / "wm811k.npz"
    missing = _row(invoke("status", "--data-dir", str(tmp_path)).output, "wm811k")
    assert missing[1] == "missing"
    assert " ".join(missing[-6:]) == f"(orthobench data convert-wm811k PATH/LSWMD.pkl --out {out})"
    converted = invoke("convert-wm811k", str(lswmd), "--out", str(out))
    assert converted.exit_code == 0
    # Every orthobench warning on the command line starts as README's "Command line" says.
    assert f"orthobench: warning: {lswmd} is a pickle" in converted.output
    present = _row(invoke("status", "--data-dir", str(tmp_path)).output, "wm811k")
    assert present[1] == "present" and present[4:6] == ["ok", str(out)]
    raw = bytearray(out.read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 64] = bytes(64)
    out.write_bytes(bytes(raw))
    damaged = _row(invoke("status", "--data-dir", str(tmp_path)).output, "wm811k")
    assert damaged[1] == "present" and damaged[4:6] == ["damaged", str(out)]
