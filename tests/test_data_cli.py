"""``orthobench data status | fetch`` through the top-level group's error handling."""

from __future__ import annotations

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
    assert mnist[1] == "missing" and mnist[-4:] == ["(orthobench", "data", "fetch", "mnist)"]


def test_fetch_then_status_reports_the_verified_copy(tmp_path, local_mnist):
    fetched = invoke("fetch", "mnist", "--data-dir", str(tmp_path / "d"))
    assert fetched.exit_code == 0, fetched.output
    assert f"mnist: {tmp_path / 'd' / 'mnist'}" in fetched.output
    assert fetched.output.count("sha256 ok") == 4
    row = _row(invoke("status", "--data-dir", str(tmp_path / "d")).output, "mnist")
    assert row[1] == "present" and row[4] == "ok"


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
