"""Writers of small dataset files in the real on-disk formats (IDX, CIFAR-10 python batches)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np

from orthobench.tasks.datasets.store import (
    CATALOGUE,
    CIFAR10_BATCHES,
    CIFAR10_DIR,
    MNIST_MEMBERS,
    DataFile,
    Dataset,
)

_IDX_CODES = {
    np.dtype("u1"): 0x08,
    np.dtype("i1"): 0x09,
    np.dtype("i2"): 0x0B,
    np.dtype("i4"): 0x0C,
    np.dtype("f4"): 0x0D,
    np.dtype("f8"): 0x0E,
}


def idx_bytes(array: np.ndarray) -> bytes:
    """``array`` as an IDX file: magic (0, 0, type, ndim), big-endian uint32 sizes, big-endian data."""
    code = _IDX_CODES[array.dtype.newbyteorder("=")]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_idx(path: Path, array: np.ndarray, *, gz: bool) -> Path:
    raw = idx_bytes(array)
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def fake_mnist(n_train: int = 40, n_test: int = 20, seed: int = 0) -> dict[str, np.ndarray]:
    """Random 28x28 uint8 images and labels 0..9 under the four MNIST member names."""
    rng = np.random.default_rng(seed)
    return {
        MNIST_MEMBERS[0]: rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        MNIST_MEMBERS[1]: (np.arange(n_train) % 10).astype(np.uint8),
        MNIST_MEMBERS[2]: rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        MNIST_MEMBERS[3]: (np.arange(n_test) % 10).astype(np.uint8),
    }


def write_mnist(directory: Path, *, gz: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    """The four MNIST IDX files in ``directory`` (``.gz`` names when ``gz``); returns the arrays."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = fake_mnist(seed=seed)
    for member, array in arrays.items():
        write_idx(directory / (f"{member}.gz" if gz else member), array, gz=gz)
    return arrays


def cifar_batch_bytes(data: np.ndarray, labels: list[int], name: str) -> bytes:
    """A batch as the python version stores it: a dict with bytes keys, pickled at protocol 2."""
    batch = {
        b"batch_label": name.encode(),
        b"labels": labels,
        b"data": data,
        b"filenames": [f"img_{i}.png".encode() for i in range(len(labels))],
    }
    return pickle.dumps(batch, protocol=2)


def write_cifar10(root: Path, *, per_batch: int = 4, archive: bool, seed: int = 0) -> Path:
    """``root/cifar-10-batches-py/`` with the six batches, or (``archive``) that directory packed
    as ``root/cifar-10-python.tar.gz``. Returns the directory or the archive."""
    rng = np.random.default_rng(seed)
    directory = root / CIFAR10_DIR
    directory.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(CIFAR10_BATCHES):
        data = rng.integers(0, 256, (per_batch, 3 * 32 * 32), dtype=np.uint8)
        labels = [(i + j) % 10 for j in range(per_batch)]
        (directory / name).write_bytes(cifar_batch_bytes(data, labels, name))
    if not archive:
        return directory
    path = root / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(directory, arcname=CIFAR10_DIR)
    for name in CIFAR10_BATCHES:
        (directory / name).unlink()
    directory.rmdir()
    return path


def served_mnist(directory: Path, *, absent_mirror_first: bool = False) -> Dataset:
    """MNIST's catalogue entry with its four files (:func:`fake_mnist`, gzipped) served from
    ``directory`` by ``file://`` URLs, optionally behind a first mirror that does not exist."""
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for member, array in fake_mnist().items():
        raw = gzip.compress(idx_bytes(array), mtime=0)
        served = directory / f"{member}.gz"
        served.write_bytes(raw)
        mirrors = ((directory / "absent").as_uri(),) if absent_mirror_first else ()
        files.append(
            DataFile(
                name=served.name,
                sha256=hashlib.sha256(raw).hexdigest(),
                size=len(raw),
                urls=(*mirrors, served.as_uri()),
            )
        )
    return dataclasses.replace(CATALOGUE["mnist"], files=tuple(files))
