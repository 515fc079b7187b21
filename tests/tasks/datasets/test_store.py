"""The data directory, presence checks by layout, verified fetch (local file:// mirrors) and status."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orthobench.exceptions import (
    ConfigError,
    DatasetMissingError,
    OrthobenchError,
    UnknownNameError,
)
from orthobench.tasks.datasets import store
from tests.tasks.datasets.formats import served_mnist, write_cifar10, write_mnist


def test_data_dir_is_root_then_environment_then_data(monkeypatch, tmp_path):
    monkeypatch.delenv(store.DATA_DIR_ENV, raising=False)
    assert store.data_dir() == Path("data")
    monkeypatch.setenv(store.DATA_DIR_ENV, str(tmp_path))
    assert store.data_dir() == tmp_path
    assert store.data_dir(tmp_path / "x") == tmp_path / "x"


def test_catalogue_checksums_are_the_published_ones():
    files = {f.name: f for d in store.CATALOGUE.values() for f in d.files}
    # tensorflow/datasets url_checksums/mnist.txt; keras datasets/cifar10.py file_hash
    assert files["train-images-idx3-ubyte.gz"].sha256.startswith("440fcabf73cc546f")
    assert files["t10k-labels-idx1-ubyte.gz"].size == 4542
    assert files["cifar-10-python.tar.gz"].sha256.startswith("6d958be074577803")
    assert all(url.startswith("https://") for f in files.values() for url in f.urls)


def test_a_missing_dataset_names_the_fetch_command(tmp_path):
    with pytest.raises(DatasetMissingError) as err:
        store.locate("mnist", root=tmp_path)
    message = str(err.value)
    assert "orthobench data fetch mnist" in message and str(tmp_path / "mnist") in message
    assert "\n" not in message


def test_a_path_without_a_copy_names_the_param(tmp_path):
    with pytest.raises(
        DatasetMissingError, match=r"task param path=.*orthobench data fetch cifar10"
    ):
        store.locate("cifar10", tmp_path / "nowhere")


def test_unknown_names_and_paths_of_bundled_datasets_are_config_errors(tmp_path):
    with pytest.raises(UnknownNameError) as err:
        store.locate("imagenet")
    assert err.value.field == "dataset" and "mnist-5k" in str(err.value)
    with pytest.raises(ConfigError, match="takes no path"):
        store.locate("digits", tmp_path)


def test_bundled_datasets_are_found_in_their_packages():
    assert store.locate("digits").name == "digits.csv.gz"
    assert store.locate("mnist-5k").name == "mnist_5k.csv.gz"


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "raw"])
def test_mnist_is_found_with_or_without_gzip(tmp_path, gz):
    write_mnist(tmp_path / "mnist", gz=gz)
    assert store.locate("mnist", root=tmp_path) == tmp_path / "mnist"
    (tmp_path / "mnist" / ("t10k-labels-idx1-ubyte" + (".gz" if gz else ""))).unlink()
    with pytest.raises(DatasetMissingError):
        store.locate("mnist", root=tmp_path)


def test_cifar10_is_found_in_each_layout(tmp_path):
    archive = write_cifar10(tmp_path / "a", archive=True)
    assert store.locate("cifar10", archive) == archive  # the archive itself
    assert store.locate("cifar10", archive.parent) == archive  # its directory
    extracted = write_cifar10(tmp_path / "b", archive=False)
    assert store.locate("cifar10", extracted) == extracted
    assert store.locate("cifar10", extracted.parent) == extracted  # torchvision's root


def test_fetch_verifies_keeps_and_repairs(tmp_path, monkeypatch):
    monkeypatch.setitem(
        store.CATALOGUE, "mnist", served_mnist(tmp_path / "served", absent_mirror_first=True)
    )
    root = tmp_path / "data"
    lines = []
    assert store.fetch("mnist", root=root, log=lines.append) == root / "mnist"
    assert sum("sha256 ok" in line for line in lines) == 4  # the first mirror is absent
    (row,) = [r for r in store.status(root) if r.name == "mnist"]
    assert (
        row.present
        and row.checksum == "ok"
        and row.size == sum(f.size for f in store.CATALOGUE["mnist"].files)
    )

    lines.clear()
    store.fetch("mnist", root=root, log=lines.append)
    assert sum("present, sha256 ok" in line for line in lines) == 4 and not any(
        "downloading" in line for line in lines
    )

    damaged = root / "mnist" / "train-labels-idx1-ubyte.gz"
    damaged.write_bytes(b"\x1f\x8b not the file")
    (row,) = [r for r in store.status(root) if r.name == "mnist"]
    assert row.checksum == "mismatch: train-labels-idx1-ubyte.gz"
    lines.clear()
    store.fetch("mnist", root=root, log=lines.append)
    assert sum("downloading" in line for line in lines) == 2  # absent mirror, then the good one
    (row,) = [r for r in store.status(root) if r.name == "mnist"]
    assert row.checksum == "ok"


def test_a_checksum_mismatch_keeps_nothing(tmp_path, monkeypatch):
    dataset = served_mnist(tmp_path / "served")
    wrong = store.DataFile(
        name=dataset.files[0].name, sha256="0" * 64, size=1, urls=dataset.files[0].urls
    )
    monkeypatch.setitem(
        store.CATALOGUE,
        "mnist",
        store.Dataset(name="mnist", description="", obtain="", files=(wrong,)),
    )
    with pytest.raises(OrthobenchError, match=r"does not match the published 0{64}") as err:
        store.fetch("mnist", root=tmp_path / "data")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "data").exists()  # neither the file, a .part nor the folders


def _unreachable_mnist(tmp_path) -> store.Dataset:
    dataset = served_mnist(tmp_path / "served")
    absent = (tmp_path / "absent").as_uri()
    return dataclasses.replace(
        dataset, files=tuple(dataclasses.replace(f, urls=(absent,)) for f in dataset.files)
    )


def test_a_failed_fetch_removes_only_the_folders_it_created(tmp_path, monkeypatch):
    monkeypatch.setitem(store.CATALOGUE, "mnist", _unreachable_mnist(tmp_path))
    with pytest.raises(OrthobenchError, match="nothing was kept"):
        store.fetch("mnist", root=tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()
    existing = tmp_path / "existing"
    (existing / "mnist").mkdir(parents=True)
    with pytest.raises(OrthobenchError, match="nothing was kept"):
        store.fetch("mnist", root=existing)
    assert (existing / "mnist").is_dir()  # it was there before
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setattr(store, "data_dir", lambda root=None: other)
    with pytest.raises(OrthobenchError):
        store.fetch("mnist")
    assert other.is_dir()


def test_an_interrupted_fetch_keeps_no_part_file_nor_folder(tmp_path, monkeypatch):
    monkeypatch.setitem(store.CATALOGUE, "mnist", served_mnist(tmp_path / "served"))

    def interrupted(url, target):
        target.write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "_download", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.fetch("mnist", root=tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_status_lists_every_dataset(tmp_path):
    rows = {r.name: r for r in store.status(tmp_path)}
    assert set(rows) == set(store.CATALOGUE)
    assert rows["digits"].present and rows["digits"].checksum == "bundled"
    assert rows["digits"].size > 0
    assert not rows["cifar10"].present and rows["cifar10"].size is None
    assert rows["cifar10"].path == tmp_path / "cifar10"
    write_mnist(tmp_path / "mnist", gz=False)  # present, but not as the catalogued .gz files
    assert {r.name: r for r in store.status(tmp_path)}["mnist"].checksum == "unverified"


def test_a_path_with_a_tilde_is_expanded(tmp_path, monkeypatch):
    """``~`` in a task's ``path`` was taken literally: the copy was "missing"."""
    monkeypatch.setenv("HOME", str(tmp_path))
    write_mnist(tmp_path / "copy")
    assert store.locate("mnist", "~/copy") == tmp_path / "copy"


def test_a_data_directory_that_is_a_file_is_one_line(tmp_path, monkeypatch):
    """It listed every dataset as missing, and `fetch` then failed with only "Not a directory"."""
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv(store.DATA_DIR_ENV, str(afile))
    for call in (store.status, lambda: store.fetch("mnist"), lambda: store.locate("mnist")):
        with pytest.raises(OrthobenchError, match=f"data directory {afile} is a file") as err:
            call()
        assert "\n" not in str(err.value) and store.DATA_DIR_ENV in str(err.value)
