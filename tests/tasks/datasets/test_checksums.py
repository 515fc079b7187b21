"""Loading checks the published SHA-256 of the data directory's copy, once per file version: a
copy damaged or replaced after ``fetch`` (or placed there by hand) is refused in one line, a
verified file costs a stat on later loads (verdict in the process and in a sidecar), and files
without a published checksum (a user's ``path``, uncompressed IDX files) still load."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import re
import shlex
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import DatasetMissingError, OrthobenchWarning
from orthobench.tasks.datasets import checksums, load, locate, read_dataset, store
from tests.tasks.datasets.formats import (
    fake_mnist,
    idx_bytes,
    served_mnist,
    write_cifar10,
    write_mnist,
)

LABELS = "train-labels-idx1-ubyte.gz"


@pytest.fixture
def hashes(monkeypatch):
    """Counts full hashes; starts each test as a fresh process (no verdict in memory)."""
    calls, original = [], checksums.sha256_of

    def counting(path):
        calls.append(path.name)
        return original(path)

    monkeypatch.setattr(checksums, "sha256_of", counting)
    monkeypatch.setattr(checksums, "_VERIFIED", set())
    return calls


@pytest.fixture
def fetched(tmp_path, monkeypatch):
    """MNIST fetched into ``tmp_path/data`` from file:// URLs (the served files are the catalogue's)."""
    monkeypatch.setitem(store.CATALOGUE, "mnist", served_mnist(tmp_path / "served"))
    root = tmp_path / "data"
    store.fetch("mnist", root=root)
    return root


def _replace_keeping_size_and_mtime(path, raw):
    """Overwrite ``path`` with ``raw`` (same length) and set its modification time back."""
    st = path.stat()
    assert len(raw) == st.st_size
    path.write_bytes(raw)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_copy_damaged_after_fetch_is_refused_naming_file_digests_and_fix(fetched, hashes):
    np.testing.assert_array_equal(
        load("mnist", root=fetched).y_train, fake_mnist()["train-labels-idx1-ubyte"]
    )
    target = fetched / "mnist" / LABELS
    published = {f.name: f.sha256 for f in store.CATALOGUE["mnist"].files}[LABELS]
    # a valid IDX file of the same shape with other labels: reads fine, but it is not the data
    other = gzip.compress(idx_bytes(np.full(40, 3, np.uint8)), mtime=0)
    target.write_bytes(other)
    with pytest.raises(DatasetMissingError) as err:
        load("mnist", root=fetched)
    message = str(err.value)
    assert "\n" not in message and str(target.absolute()) in message
    assert published in message and hashlib.sha256(other).hexdigest() in message
    assert f"orthobench data fetch mnist --data-dir {fetched.resolve()}" in message
    # the command it names repairs the copy, which then loads at once (no mismatch is remembered)
    (command,) = re.findall(r"`(orthobench [^`]+)`", message)
    result = CliRunner().invoke(cli, shlex.split(command)[1:], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert load("mnist", root=fetched).y_train[:3].tolist() == [0, 1, 2]


def test_an_archive_placed_by_hand_in_the_data_directory_is_checked(tmp_path):
    write_cifar10(tmp_path / "cifar10", archive=True)  # not the published archive
    with pytest.raises(DatasetMissingError, match=r"6d958be074577803d12ecdef.*data fetch cifar10"):
        load("cifar10", root=tmp_path)


def test_the_task_path_verifies_too(tmp_path, monkeypatch):
    """The CNN task locates with the default data directory and calls ``read_dataset``."""
    monkeypatch.setenv(store.DATA_DIR_ENV, str(tmp_path))
    write_cifar10(tmp_path / "cifar10", archive=True)
    with pytest.raises(DatasetMissingError, match="published"):
        read_dataset("cifar10", locate("cifar10"))
    # a path that leads into the data directory is the data directory's copy
    with pytest.raises(DatasetMissingError, match="published"):
        load("cifar10", tmp_path / "cifar10")


def test_a_verified_file_costs_a_stat_in_this_process_and_in_the_next(fetched, hashes):
    assert hashes == []  # fetch recorded what it verified
    load("mnist", root=fetched)
    assert hashes == []
    sidecar = fetched / "mnist" / checksums.SIDECAR_NAME
    assert sidecar.is_file()
    # status hashes in full (it is the explicit check), and does not count the sidecar's size
    (row,) = [r for r in store.status(fetched) if r.name == "mnist"]
    assert row.checksum == "ok" and len(hashes) == 4
    assert row.size == sum(f.size for f in store.CATALOGUE["mnist"].files)


def test_a_first_load_hashes_once_and_records_the_verdict(tmp_path, monkeypatch, hashes):
    monkeypatch.setitem(store.CATALOGUE, "mnist", served_mnist(tmp_path / "served"))
    served = tmp_path / "served"
    (tmp_path / "data").mkdir()
    served.rename(tmp_path / "data" / "mnist")  # placed by hand: the published files
    load("mnist", root=tmp_path / "data")
    assert sorted(hashes) == sorted(f.name for f in store.CATALOGUE["mnist"].files)
    hashes.clear()
    load("mnist", root=tmp_path / "data")
    assert hashes == []
    monkeypatch.setattr(checksums, "_VERIFIED", set())  # another process: reads the sidecar
    load("mnist", root=tmp_path / "data")
    assert hashes == []


def test_a_replacement_with_the_same_size_and_mtime_is_caught(fetched, hashes):
    load("mnist", root=fetched)
    target = fetched / "mnist" / LABELS
    raw = bytearray(target.read_bytes())
    raw[-9] ^= 0x01  # inside the deflate data or the CRC: same length, other bytes
    _replace_keeping_size_and_mtime(target, bytes(raw))
    with pytest.raises(DatasetMissingError, match=LABELS):
        load("mnist", root=fetched)


def test_a_damaged_sidecar_costs_a_hash_and_a_stale_one_passes_no_wrong_file(
    fetched, hashes, monkeypatch
):
    target = fetched / "mnist" / LABELS
    sidecar = fetched / "mnist" / checksums.SIDECAR_NAME
    sidecar.write_text("{not json")
    load("mnist", root=fetched)
    assert sorted(hashes) == sorted(f.name for f in store.CATALOGUE["mnist"].files)
    assert LABELS in json.loads(sidecar.read_text())["files"]  # recorded again
    target.write_bytes(gzip.compress(idx_bytes(np.full(40, 3, np.uint8)), mtime=0))
    monkeypatch.setattr(checksums, "_VERIFIED", set())  # another process, same sidecar
    with pytest.raises(DatasetMissingError, match=LABELS):
        load("mnist", root=fetched)


def test_an_unwritable_sidecar_warns_and_still_verifies(tmp_path, monkeypatch, hashes):
    monkeypatch.setitem(store.CATALOGUE, "mnist", served_mnist(tmp_path / "served"))
    (tmp_path / "data").mkdir()
    (tmp_path / "served").rename(tmp_path / "data" / "mnist")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(checksums.os, "replace", refuse)
    with pytest.warns(OrthobenchWarning, match="later processes hash the file again"):
        load("mnist", root=tmp_path / "data")
    assert not list((tmp_path / "data" / "mnist").glob(f"{checksums.SIDECAR_NAME}*"))
    hashes.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load("mnist", root=tmp_path / "data")  # the process remembers
    assert hashes == []


def test_files_without_a_published_checksum_still_load(tmp_path, hashes):
    # a user's copy elsewhere, under MNIST's names (as Fashion-MNIST's files are named)
    arrays = write_mnist(tmp_path / "elsewhere", gz=True)
    split = load("mnist", tmp_path / "elsewhere", root=tmp_path / "data")
    np.testing.assert_array_equal(split.y_test, arrays["t10k-labels-idx1-ubyte"])
    # uncompressed IDX files in the data directory: no published checksum (status: unverified)
    write_mnist(tmp_path / "data" / "mnist", gz=False)
    assert len(load("mnist", root=tmp_path / "data").y_train) == 40
    assert store.verify("mnist", tmp_path / "data" / "mnist", root=tmp_path / "data") == []
    # extracted CIFAR-10 batches in the data directory, and bundled datasets
    write_cifar10(tmp_path / "data" / "cifar10", archive=False)
    assert len(load("cifar10", root=tmp_path / "data").y_test) == 4
    assert store.verify("digits", store.locate("digits")) == []
    assert hashes == []


def test_a_link_in_the_data_directory_is_the_data_directorys_copy(tmp_path):
    archive = write_cifar10(tmp_path / "elsewhere", archive=True)
    (tmp_path / "data" / "cifar10").mkdir(parents=True)
    (tmp_path / "data" / "cifar10" / archive.name).symlink_to(archive)
    with pytest.raises(DatasetMissingError, match="published"):
        load("cifar10", root=tmp_path / "data")
    assert len(load("cifar10", archive, root=tmp_path / "data").y_test) == 4  # unverified


def test_status_says_ok_only_when_what_a_task_reads_is_verified(tmp_path, monkeypatch):
    """With the archive and its extracted batches side by side, the reader reads the batches
    (no published checksum), so a verified archive does not make the copy ``ok``."""
    root = tmp_path / "data"
    archive = write_cifar10(root / "cifar10", archive=True)
    entry = store.CATALOGUE["cifar10"]
    (published,) = entry.files
    monkeypatch.setitem(
        store.CATALOGUE,
        "cifar10",
        dataclasses.replace(
            entry,
            files=(
                dataclasses.replace(
                    published,
                    sha256=hashlib.sha256(archive.read_bytes()).hexdigest(),
                    size=archive.stat().st_size,
                ),
            ),
        ),
    )
    assert {r.name: r for r in store.status(root)}["cifar10"].checksum == "ok"
    write_cifar10(root / "cifar10", archive=False)  # extracted next to it: what a task reads
    assert store.verify("cifar10", store.locate("cifar10", root=root), root=root) == []
    assert {r.name: r for r in store.status(root)}["cifar10"].checksum == "unverified"
