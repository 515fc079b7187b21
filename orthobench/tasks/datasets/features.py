r"""A disk cache of frozen-backbone features.

When a pretrained backbone is frozen and the inputs are not augmented, its output for an image
is a pure function of the image, the weights and the arithmetic (device, dtype). A task that
trains only a head on top can therefore compute the features of every image once, store them,
and train the head on the stored features in every evaluation: the same head, the same losses,
at the cost of a linear layer instead of a ViT forward pass per sample and epoch.

The cache key (:class:`FeatureKey`) holds what the features depend on: the model (its id, plus
a fingerprint of the weight files for a local directory), the dataset checksum, the input
size, and the device type and dtype of the forward pass. Files live in
``<data directory>/cache/`` (:func:`cache_dir`), named after the key, and hold the features,
the key and the time the extraction took, so a run can report that one-off cost next to the
per-evaluation cost of training the head. Files are written to a temporary name and renamed,
so concurrent workers at worst compute the same features twice.

Example:
    >>> key = FeatureKey(model="tiny-random", dataset_sha256="ab" * 32, image_size=48,
    ...                  device="cpu", dtype="float32")
    >>> key.filename().rsplit("-", 1)[0]  # then the key digest and ".npz"
    'features-tiny-random-abababababab-48px-cpu-float32'
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from orthobench.exceptions import OrthobenchWarning
from orthobench.results import os_error_text, write_atomic
from orthobench.tasks.datasets.store import data_dir

if TYPE_CHECKING:
    import torch

__all__ = ["CachedFeatures", "FeatureKey", "cache_dir", "extract_features", "load_or_extract"]

_CACHE_SUBDIR = "cache"
_FORMAT_VERSION = 1


def cache_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """``<data directory>/cache`` (data directory as :func:`~.store.data_dir`)."""
    return data_dir(root) / _CACHE_SUBDIR


@dataclass(frozen=True, kw_only=True)
class FeatureKey:
    """Everything the features depend on.

    Args:
        model: Model identity: a hub id, ``"tiny-random"``, or a local directory followed by a
            fingerprint of its files (see ``orthobench.tasks.wafer_vit``).
        dataset_sha256: Checksum of the dataset's arrays.
        image_size: Side length the images are resized to before the forward pass.
        device: Device type of the forward pass (``"cpu"``, ``"cuda"``).
        dtype: Dtype of the forward pass (``"float32"``, ``"bfloat16"``, ...).
    """

    model: str
    dataset_sha256: str
    image_size: int
    device: str
    dtype: str

    def digest(self) -> str:
        """SHA-256 of the key's fields (hex)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    def filename(self) -> str:
        """``features-<model>-<dataset>-<size>px-<device>-<dtype>-<digest>.npz``: readable parts
        (the model id made file-name safe, the dataset checksum's first 12 digits) and the first
        16 digits of :meth:`digest`, which tells apart keys whose readable parts coincide."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model).strip("-")[-60:] or "model"
        return (
            f"features-{slug}-{self.dataset_sha256[:12]}-{self.image_size}px-"
            f"{self.device}-{self.dtype}-{self.digest()[:16]}.npz"
        )


@dataclass(frozen=True, eq=False)
class CachedFeatures:
    """Features of every image of a dataset and where they came from.

    Attributes:
        features: ``N x h`` ``float32`` features, row ``i`` for image ``i``.
        key: The :class:`FeatureKey`.
        path: The cache file.
        extraction_seconds: What computing them took (when they were computed).
        extracted: True when this call computed them, False when it read the cache file.
    """

    features: np.ndarray
    key: FeatureKey
    path: Path
    extraction_seconds: float
    extracted: bool


def extract_features(
    encode: Callable[[torch.Tensor], torch.Tensor],
    inputs: Callable[[slice], torch.Tensor],
    n: int,
    batch_size: int,
) -> np.ndarray:
    """Run ``encode`` over ``n`` inputs in batches and stack the outputs.

    Args:
        encode: Maps a batch of inputs to a ``b x h`` tensor (a frozen backbone's features).
        inputs: Returns the batch of inputs ``slice(start, stop)`` (built lazily, so the whole
            dataset never has to be in model-input form at once).
        n: Number of inputs.
        batch_size: Inputs per forward pass.

    Returns:
        ``n x h`` ``float32`` array.
    """
    import torch

    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, but got {batch_size=}.")
    out = []
    with torch.no_grad():
        for start in range(0, n, batch_size):
            batch = encode(inputs(slice(start, min(start + batch_size, n))))
            out.append(batch.detach().to(device="cpu", dtype=torch.float32).numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)


def load_or_extract(
    key: FeatureKey,
    extract: Callable[[], np.ndarray],
    *,
    n: int,
    directory: str | os.PathLike[str] | None = None,
) -> CachedFeatures:
    """The features of ``key``: read from the cache, else computed by ``extract`` and stored.

    A cache file whose stored key, version or row count does not match, or that does not read
    (damaged), is recomputed and replaced. Processes that ask for the same key at once (several workers starting together)
    extract it once: an exclusive ``flock`` on ``<file>.lock`` makes the others wait, then read
    what the first stored (where the file system has no ``flock``, each extracts its own).

    Args:
        key: What the features depend on.
        extract: Computes the ``n x h`` features (e.g. :func:`extract_features`); timed.
        n: Number of images (a cached file with another count is stale).
        directory: Cache directory; default :func:`cache_dir`.

    Returns:
        The :class:`CachedFeatures`.
    """
    folder = Path(directory) if directory is not None else cache_dir()
    path = folder / key.filename()
    # A cache file is written atomically, so it reads whole without the lock: a data folder
    # that cannot be written (a shared, read-only one) serves the features it holds.
    if path.is_file() and (cached := _read_cache(key, n, path)) is not None:
        return cached
    with contextlib.suppress(OSError):  # a read-only folder: extracted, then not stored
        folder.mkdir(parents=True, exist_ok=True)
    with _exclusive(path.with_name(f"{path.name}.lock")):
        return _load_or_extract(key, extract, n, path)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock`` (created if missing) for the block; without
    ``flock`` (some network file systems), or where ``lock`` cannot be created (a read-only
    folder), the block runs unlocked."""
    try:
        fh = open(lock, "a")  # noqa: SIM115 -- closed below, after the block
    except OSError:
        yield
        return
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except OSError:
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _read_cache(key: FeatureKey, n: int, path: Path) -> CachedFeatures | None:
    """The features stored at ``path`` for ``key``, or None where the file is stale (another
    key, version or row count) or damaged (a truncated write of another tool, a flipped bit):
    either way it is recomputed and replaced, as a cache should be, rather than failing every
    cell until someone deletes it."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(str(npz["meta"]))
            features = npz["features"]
            seconds = float(meta["extraction_seconds"])
    # What np.load and the zip reader raise for a damaged file, and a meta that is no longer ours
    # (JSON nested too deeply for the decoder raises RecursionError).
    except (OSError, ValueError, KeyError, TypeError, EOFError, RecursionError, zipfile.BadZipFile):
        return None
    if (
        not isinstance(meta, dict)
        or meta.get("format_version") != _FORMAT_VERSION
        or meta.get("key") != asdict(key)
        or features.shape[0] != n
    ):
        return None
    return CachedFeatures(
        features=features, key=key, path=path, extraction_seconds=seconds, extracted=False
    )


def _load_or_extract(
    key: FeatureKey, extract: Callable[[], np.ndarray], n: int, path: Path
) -> CachedFeatures:
    """:func:`load_or_extract` at ``path``, under its lock."""
    if path.is_file() and (cached := _read_cache(key, n, path)) is not None:
        return cached
    t0 = time.perf_counter()
    features = np.ascontiguousarray(extract(), dtype=np.float32)
    seconds = time.perf_counter() - t0
    if features.ndim != 2 or features.shape[0] != n:
        raise ValueError(f"`extract` must return {n} x h features, but got {features.shape}.")
    meta = {"format_version": _FORMAT_VERSION, "key": asdict(key), "extraction_seconds": seconds}
    try:
        write_atomic(
            path, lambda fh: np.savez(fh, features=features, meta=np.str_(json.dumps(meta)))
        )
    except OSError as err:  # the features are computed: a cache that cannot keep them is no error
        warnings.warn(
            f"the extracted features are not cached ({os_error_text(err)}): each process "
            "extracts them again.",
            OrthobenchWarning,
            stacklevel=3,
        )
    return CachedFeatures(
        features=features, key=key, path=path, extraction_seconds=seconds, extracted=True
    )
