"""Checks of the converted WM811K file: where it is, its format from the array headers alone, its
labels once read, and where a conversion may write it.

Each refusal is one line naming the file and what to do; :mod:`orthobench.tasks.datasets.wm811k`
converts and reads the file and re-exports these names.
"""

from __future__ import annotations

import math
import os
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

from orthobench.exceptions import DatasetMissingError, OrthobenchError
from orthobench.results import file_in_the_way
from orthobench.tasks.datasets.store import dataset_dir
from orthobench.tasks.datasets.synthetic_wafers import WAFER_CLASSES

__all__ = [
    "CONVERTED_NAME",
    "CONVERT_COMMAND",
    "MAP_SIZE",
    "check_labels",
    "check_output",
    "check_wm811k",
    "require_wm811k",
    "wm811k_path",
]

#: Side length of the converted maps (the paper's appendix).
MAP_SIZE = 48
#: The command that creates the converted file (named by every missing-dataset error).
CONVERT_COMMAND = "orthobench data convert-wm811k PATH/LSWMD.pkl"
#: Path of the converted file relative to the data directory.
CONVERTED_NAME = Path("wm811k") / "wm811k.npz"
_DOWNLOAD = "download LSWMD.pkl (http://mirlab.org/dataset/public/)"
#: The arrays the reader reads: name -> (dtype kinds, shape; None for any length).
_ARRAYS: dict[str, tuple[str, tuple[int | None, ...]]] = {
    "maps": ("u", (None, MAP_SIZE, MAP_SIZE)),
    "labels": ("iu", (None,)),
    "classes": ("U", (None,)),
    "train_index": ("iu", (None,)),
    "test_index": ("iu", (None,)),
    "seed": ("iu", ()),
    "sha256": ("U", ()),
    "source_sha256": ("U", ()),
    "source_rows": ("iu", ()),
    "imagenet_mean": ("f", (3,)),
    "imagenet_std": ("f", (3,)),
    "format_version": ("iu", ()),
}
#: Labelled maps of the public ``LSWMD.pkl``: the maps a conversion keeps.
_PUBLIC_MAPS = 172_950
#: The most bytes the arrays read may announce together: twice what the public file's maps take
#: with a label and a split index each (8 bytes apiece). The reader allocates what the headers
#: announce, and a zip of zeros announcing gigabytes takes megabytes.
_MAX_BYTES = 2 * _PUBLIC_MAPS * (MAP_SIZE * MAP_SIZE + 16)
_KIND_NAMES = {"u": "unsigned integer", "i": "integer", "U": "string", "f": "float"}
_NPY_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def wm811k_path(directory: str | Path | None = None) -> Path:
    """Where the converted file lives: ``<data directory>/wm811k/wm811k.npz``.

    Args:
        directory: The data directory; default :func:`orthobench.tasks.datasets.store.data_dir`
            (``ORTHOBENCH_DATA_DIR``, else ``data/``).

    Raises:
        OrthobenchError: when the data directory is a file
            (:func:`~orthobench.tasks.datasets.store.dataset_dir`).
    """
    return dataset_dir(CONVERTED_NAME.parent.name, directory) / CONVERTED_NAME.name


def require_wm811k(path: str | Path | None = None) -> Path:
    """The converted file's path, after a cheap presence check (no read).

    Args:
        path: An explicit ``.npz`` path (``~`` expanded); default :func:`wm811k_path`.

    Raises:
        DatasetMissingError: when the file is not there, or ``path`` is a directory (naming the
            converted file inside it, if it holds one); the message names the command that
            creates it.
    """
    resolved = Path(path).expanduser() if path is not None else wm811k_path()
    if resolved.is_dir():
        inside = (resolved / CONVERTED_NAME.name, resolved / CONVERTED_NAME)
        found = next((f for f in inside if f.is_file()), None)
        fix = (
            f"use {found}"
            if found is not None
            else f"{_DOWNLOAD} and run `{CONVERT_COMMAND} --out {inside[0]}`"
        )
        raise DatasetMissingError(
            f"{resolved} is a directory, not the converted WM811K .npz: {fix}."
        )
    if not resolved.is_file():
        # An explicit path is where the conversion must write: the command's default is not it.
        out = "" if path is None else f" --out {resolved}"
        raise DatasetMissingError(
            f"WM811K is not converted: {resolved} does not exist; {_DOWNLOAD} and run "
            f"`{CONVERT_COMMAND}{out}`."
        )
    return resolved


def _not_converted(path: Path, problem: str) -> DatasetMissingError:
    return DatasetMissingError(
        f"{path} is not a converted WM811K file: {problem}; run `{CONVERT_COMMAND}` and use its "
        "output."
    )


def _members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The member that ``np.load`` reads as each array of :data:`_ARRAYS` the zip holds: the one
    named as the array, else ``<name>.npy`` (the last one of a repeated name)."""
    names = set(archive.namelist())
    found = {name: name if name in names else f"{name}.npy" for name in _ARRAYS}
    return {name: archive.getinfo(member) for name, member in found.items() if member in names}


def _npy_header(
    archive: zipfile.ZipFile, member: zipfile.ZipInfo
) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape of an ``.npy`` member of a zip, from its header alone."""
    with archive.open(member) as fh:
        version = np.lib.format.read_magic(fh)
        if version not in _NPY_HEADER_READERS:
            raise ValueError(f"{member.filename} has .npy format version {version}")
        shape, _, dtype = _NPY_HEADER_READERS[version](fh)
    return dtype, shape


def check_wm811k(path: str | Path | None = None) -> Path:
    """The converted file's path, after checking its format from the array headers alone.

    Cheap (no array is read), so a task can refuse a bad file before any evaluation: it must be
    an ``.npz`` (a zip of ``.npy`` files) holding every array the reader reads, each of the kind
    and shape the converter writes, none holding Python objects (which only pickle reads, and
    unpickling runs code from the file), none announcing more bytes than its zip member holds,
    and all together announcing at most twice what the public dataset takes (the reader
    allocates what the headers announce before it reads a byte). The contents are verified
    against the stored checksum, and the labels by :func:`check_labels`, when
    :func:`~orthobench.tasks.datasets.wm811k.load_wm811k` reads them.

    Args:
        path: An explicit ``.npz`` path; default :func:`wm811k_path`.

    Raises:
        DatasetMissingError: naming the file and what is wrong with it (or that it is missing),
            and the command that creates it.
    """
    resolved = require_wm811k(path)
    try:
        with zipfile.ZipFile(resolved) as archive:
            members = _members(archive)
            headers = {name: _npy_header(archive, member) for name, member in members.items()}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise _not_converted(resolved, f"not a readable .npz ({err})") from None
    missing = [name for name in _ARRAYS if name not in headers]
    if missing:
        raise _not_converted(resolved, f"it lacks the array(s) {', '.join(missing)}")
    for name, (kinds, shape) in _ARRAYS.items():
        dtype, actual = headers[name]
        if dtype.hasobject:
            raise _not_converted(
                resolved, f"array {name!r} holds Python objects, which only pickle can read"
            )
        fits = len(actual) == len(shape) and all(
            want is None or want == got for want, got in zip(shape, actual, strict=True)
        )
        if dtype.kind not in kinds or not fits:
            wanted = " x ".join("N" if n is None else str(n) for n in shape) or "scalar"
            raise _not_converted(
                resolved,
                f"array {name!r} must be {_KIND_NAMES[kinds[0]]} of shape ({wanted}), but got "
                f"{dtype} of shape {actual}",
            )
    n_maps, n_labels = headers["maps"][1][0], headers["labels"][1][0]
    if n_maps != n_labels:
        raise _not_converted(resolved, f"it holds {n_maps} maps but {n_labels} labels")
    announced = {
        name: dtype.itemsize * math.prod(shape) for name, (dtype, shape) in headers.items()
    }
    for name, size in announced.items():
        if size > members[name].file_size:
            raise _not_converted(
                resolved,
                f"array {name!r} announces {size:,} bytes, but its member holds "
                f"{members[name].file_size:,}",
            )
    total = sum(announced.values())
    if total > _MAX_BYTES:
        raise _not_converted(
            resolved,
            f"its arrays announce {total:,} bytes ({n_maps:,} maps), more than the {_MAX_BYTES:,} "
            f"of twice the {_PUBLIC_MAPS:,} labelled maps of the public file",
        )
    return resolved


def check_labels(path: Path, classes: tuple[str, ...], labels: np.ndarray) -> None:
    """Refuse a file whose ``classes`` are not :data:`WAFER_CLASSES` or whose ``labels`` are not
    indices into them: the stored checksum covers neither the class names nor the label range,
    and either one miscounts macro F1 or fails every evaluation in torch.

    Raises:
        DatasetMissingError: naming ``path``, the bad classes or label range, and the command
            that converts the file again.
    """
    if classes != WAFER_CLASSES:
        raise _not_converted(path, f"its classes {list(classes)} are not {list(WAFER_CLASSES)}")
    if labels.size and not 0 <= labels.min() <= labels.max() < len(WAFER_CLASSES):
        raise _not_converted(
            path,
            f"its labels span [{labels.min()}, {labels.max()}], but its {len(classes)} classes "
            f"take indices 0 to {len(classes) - 1}",
        )


def check_output(out: Path) -> None:
    """Refuse, before the minutes of unpickling, an output path that
    :func:`~orthobench.results.write_atomic` would refuse after them: one under a file (creating
    its folders would fail with only ``File exists``), one that exists and is not a regular file
    (a folder, ``/dev/full``), or one whose nearest existing folder (where its missing folders and
    temporary file go) cannot hold a new file, as tried by creating and removing one there.

    Raises:
        OrthobenchError: naming ``out`` and what is in its way.
    """
    blocker = file_in_the_way(out)
    if blocker is not None:
        raise OrthobenchError(f"cannot write {out}: {blocker} is a file, not a directory.")
    if out.exists() and not out.is_file():
        raise OrthobenchError(f"cannot write --out {out}: it exists and is not a regular file.")
    target = Path(os.path.realpath(out))  # write_atomic writes beside a link's target
    folder = next(p for p in target.parents if p.exists())
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".orthobench-"):
            pass
    except OSError as err:
        raise OrthobenchError(
            f"cannot write --out {out}: {folder} is not writable ({err.strerror or err})."
        ) from None
