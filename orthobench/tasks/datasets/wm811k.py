r"""WM811K wafer maps: convert the public ``LSWMD.pkl`` into a safe ``.npz``, and read it back.

The public WM811K file [Wu2015wafer]_ [MIRWM811K]_ is a pandas pickle, and unpickling runs code
from the file. It is therefore read only by the explicit command
``orthobench data convert-wm811k PATH/LSWMD.pkl`` (:func:`convert_lswmd`), with a warning, and
converted into a NumPy ``.npz`` that every later run reads with ``allow_pickle=False``
(:func:`load_wm811k`).

References:
    .. [Wu2015wafer] M.-J. Wu, J.-S. R. Jang and J.-L. Chen, "Wafer Map Failure Pattern
       Recognition and Similarity Ranking for Large-Scale Data Sets", IEEE Transactions on
       Semiconductor Manufacturing 28(1), 1-12, 2015. doi:10.1109/TSM.2014.2364237
    .. [MIRWM811K] MIR-WM811K: Dataset for wafer map failure pattern recognition, 2015,
       http://mirlab.org/dataset/public/ (redistribution and use must cite both references).
"""

from __future__ import annotations

import hashlib
import pickle
import warnings
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from orthobench.exceptions import DatasetMissingError, OrthobenchError, OrthobenchWarning
from orthobench.results import write_atomic
from orthobench.tasks.datasets.checksums import sha256_of
from orthobench.tasks.datasets.readers import HELD_OUT_FRACTION, SPLIT_SEED
from orthobench.tasks.datasets.synthetic_wafers import WAFER_CLASSES
from orthobench.tasks.datasets.wm811k_checks import (
    CONVERT_COMMAND,
    MAP_SIZE,
    check_labels,
    check_output,
    check_wm811k,
    require_wm811k,
    wm811k_path,
)

if TYPE_CHECKING:
    import pandas as pd
    import torch

__all__ = [
    "CONVERT_COMMAND",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MAP_SIZE",
    "WAFER_CLASSES",
    "WM811K",
    "ConversionSummary",
    "check_wm811k",
    "convert_lswmd",
    "convert_wm811k",
    "load_wm811k",
    "read_lswmd",
    "require_wm811k",
    "resize_nearest",
    "split_indices",
    "wafer_label",
    "wm811k_path",
]

#: Per-channel ImageNet statistics of ``[0, 1]`` RGB images.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_FORMAT_VERSION = 1
_REQUIRED_COLUMNS = ("waferMap", "failureType")


def resize_nearest(wafer: np.ndarray, size: int = MAP_SIZE) -> np.ndarray:
    """Resize a 2-D map to ``size x size`` by nearest-neighbour sampling.

    Output pixel ``(i, j)`` takes the input die under its centre: row
    ``floor((i + 1/2) H / size)``, column ``floor((j + 1/2) W / size)`` for an ``H x W`` input.
    No value is interpolated, so a ``{0, 1, 2}`` map stays one.

    Args:
        wafer: ``H x W`` array.
        size: Output side length.

    Returns:
        ``size x size`` array of ``wafer``'s dtype.

    Example:
        >>> resize_nearest(np.array([[0, 1], [2, 1]], dtype=np.uint8), 4)
        array([[0, 0, 1, 1],
               [0, 0, 1, 1],
               [2, 2, 1, 1],
               [2, 2, 1, 1]], dtype=uint8)
    """
    wafer = np.asarray(wafer)
    if wafer.ndim != 2 or min(wafer.shape) < 1:
        raise ValueError(f"Expected a non-empty 2-D wafer map, but got shape {wafer.shape}.")
    rows = ((np.arange(size) + 0.5) * wafer.shape[0] / size).astype(np.int64)
    cols = ((np.arange(size) + 0.5) * wafer.shape[1] / size).astype(np.int64)
    return wafer[np.ix_(rows, cols)]


def wafer_label(value: Any) -> str | None:
    """The class name in an LSWMD label cell, or None for an unlabelled map.

    The public file stores labels as nested arrays (``[['Center']]``) and leaves unlabelled maps
    with an empty array (``[]``); plain strings are accepted too.

    Example:
        >>> wafer_label(np.array([["Edge-Ring"]], dtype=object)), wafer_label(np.zeros((0, 0)))
        ('Edge-Ring', None)
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    flat = np.asarray(value, dtype=object).ravel()
    if flat.size == 0:
        return None
    if flat.size > 1:
        raise OrthobenchError(f"Expected one label per wafer map, but got {value!r}.")
    return str(flat[0])


#: scikit-learn's ``random_state`` is a NumPy seed: an integer in ``[0, 2**32 - 1]``.
_MAX_SEED = 2**32 - 1


def _check_split(test_fraction: float, seed: int) -> None:
    if not 0.0 < test_fraction < 1.0:
        raise OrthobenchError(f"`test_fraction` must be in (0, 1), but got {test_fraction=}.")
    if not 0 <= seed <= _MAX_SEED:
        raise OrthobenchError(f"`seed` must be in [0, 2**32 - 1], but got {seed=}.")


def split_indices(
    labels: np.ndarray, test_fraction: float = HELD_OUT_FRACTION, seed: int = SPLIT_SEED
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded train / test split that keeps every class's share in both parts.

    scikit-learn's stratified ``train_test_split`` (as the other image datasets use,
    :func:`orthobench.tasks.datasets.readers.stratified_split`), applied to the indices.

    Args:
        labels: ``N`` integer labels.
        test_fraction: Share of the maps in the test part, in ``(0, 1)``.
        seed: The split's ``random_state``.

    Returns:
        ``(train_index, test_index)``: sorted ``int64`` indices into ``labels``, disjoint, together
        ``0 .. N-1``.

    Raises:
        OrthobenchError: for a ``test_fraction`` outside ``(0, 1)`` or a ``seed`` outside
            ``[0, 2**32 - 1]``, or when a class has fewer than 2 maps or the test part cannot hold
            one map per class (scikit-learn's conditions for a stratified split).
    """
    from sklearn.model_selection import train_test_split

    _check_split(test_fraction, seed)
    labels = np.asarray(labels)
    try:
        train, test = train_test_split(
            np.arange(labels.size), test_size=test_fraction, stratify=labels, random_state=seed
        )
    except ValueError as err:
        values, n = np.unique(labels, return_counts=True)  # by name: scikit-learn's by index
        counts = {WAFER_CLASSES[v]: int(c) for v, c in zip(values.tolist(), n, strict=True)}
        raise OrthobenchError(
            f"cannot split {labels.size} maps with class counts {counts} stratified "
            f"({test_fraction=}): each class needs 2 maps, the test part one map per class."
        ) from err
    return np.sort(train).astype(np.int64), np.sort(test).astype(np.int64)


def _content_sha256(
    maps: np.ndarray, labels: np.ndarray, train: np.ndarray, test: np.ndarray
) -> str:
    """The dataset checksum: SHA-256 over the converted arrays (not the compressed file)."""
    digest = hashlib.sha256()
    for array in (
        maps.astype(np.uint8),
        labels.astype("<i8"),
        train.astype("<i8"),
        test.astype("<i8"),
    ):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


class _LegacyUnpickler(pickle.Unpickler):
    """An unpickler for pandas pickles written by old pandas versions.

    The public file predates pandas 0.20, which moved ``pandas.indexes`` to
    ``pandas.core.indexes``; this maps the old module names onto the new ones, on top of pandas'
    own table of moved classes.
    """

    def find_class(self, module: str, name: str) -> Any:
        if module == "pandas.indexes" or module.startswith("pandas.indexes."):
            module = "pandas.core.indexes" + module[len("pandas.indexes") :]
        from pandas.compat.pickle_compat import _class_locations_map

        module, name = _class_locations_map.get((module, name), (module, name))
        return super().find_class(module, name)


def _lswmd_source(path: Path) -> int:
    """The size of the file to unpickle; refuses a missing or empty one without reading it."""
    if not path.is_file():
        raise DatasetMissingError(
            f"{path} does not exist; download LSWMD.pkl (http://mirlab.org/dataset/public/) and "
            f"run `{CONVERT_COMMAND}` with its path."
        )
    size = path.stat().st_size
    if size == 0:
        raise OrthobenchError(
            f"{path} is empty (0 bytes), not LSWMD.pkl; download it again "
            "(http://mirlab.org/dataset/public/)."
        )
    return size


def _checked_inputs(source: Path, out: str | Path | None, seed: int, test_fraction: float) -> Path:
    """The output path, after refusing what needs no unpickling: a missing or empty source,
    split settings :func:`split_indices` refuses, an output that cannot be written
    (:func:`check_output`)."""
    _lswmd_source(source)
    _check_split(test_fraction, seed)
    if out is not None and not str(out).strip():
        raise OrthobenchError("--out is empty; name the output .npz or leave it out.")
    out = Path(out).expanduser() if out is not None else wm811k_path()
    check_output(out)
    return out


def _unpickle(path: Path) -> Any:
    import pandas as pd

    try:
        return pd.read_pickle(path)
    except (ImportError, AttributeError, TypeError, ValueError, UnicodeDecodeError):
        with open(path, "rb") as fh:
            return _LegacyUnpickler(fh, encoding="latin1").load()


def read_lswmd(path: str | Path) -> pd.DataFrame:
    """Unpickle an ``LSWMD.pkl`` DataFrame. This runs code from the file: use trusted files only.

    Tries ``pandas.read_pickle`` first, then an unpickler that maps the module names of old
    pandas versions (``pandas.indexes``) and decodes Python 2 strings as Latin-1.

    Raises:
        DatasetMissingError: when ``path`` is not a file.
        OrthobenchError: when the file is empty, cannot be unpickled (not a pickle, truncated, or
            naming a class that is not there: the message names the error), or is not a
            DataFrame with the LSWMD columns.
    """
    import pandas as pd

    path = Path(path)
    size = _lswmd_source(path)
    try:
        frame = _unpickle(path)
    except Exception as err:
        # Unpickling imports and calls what the file names, so a damaged file can raise any
        # error; each is the file's fault, and the user needs its name, not a traceback.
        raise OrthobenchError(
            f"{path} ({size} bytes) cannot be unpickled: {type(err).__name__}: {err}; is it a "
            "complete copy of LSWMD.pkl (http://mirlab.org/dataset/public/)?"
        ) from err
    if not isinstance(frame, pd.DataFrame):
        raise OrthobenchError(
            f"{path}: expected a pandas DataFrame (LSWMD.pkl), but got {type(frame).__name__}."
        )
    missing = [c for c in _REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise OrthobenchError(
            f"{path}: not an LSWMD file: missing column(s) {', '.join(missing)}; "
            f"found {', '.join(map(str, frame.columns))}."
        )
    return frame


@dataclass(frozen=True)
class ConversionSummary:
    """What :func:`convert_lswmd` wrote.

    Attributes:
        path: The converted ``.npz``.
        source_rows: Maps in the source file.
        labelled: Maps with a label (the ones kept).
        class_counts: Kept maps per class name, in :data:`WAFER_CLASSES` order.
        n_train, n_test: Sizes of the two parts of the split.
        sha256: The dataset checksum (SHA-256 of the converted arrays).
        source_sha256: SHA-256 of the source file.
    """

    path: Path
    source_rows: int
    labelled: int
    class_counts: dict[str, int]
    n_train: int
    n_test: int
    sha256: str
    source_sha256: str

    def lines(self) -> list[str]:
        """A human-readable account, one fact per line."""
        counts = ", ".join(f"{name} {n}" for name, n in self.class_counts.items())
        return [
            f"labelled maps: {self.labelled} of {self.source_rows} "
            f"({self.source_rows - self.labelled} unlabelled maps dropped)",
            f"classes: {counts}",
            f"split: {self.n_train} train / {self.n_test} test (stratified)",
            f"source sha256: {self.source_sha256}",
            f"dataset sha256: {self.sha256}",
            f"wrote {self.path}",
        ]


def convert_lswmd(
    source: str | Path,
    out: str | Path | None = None,
    *,
    seed: int = SPLIT_SEED,
    test_fraction: float = HELD_OUT_FRACTION,
) -> ConversionSummary:
    """Convert ``LSWMD.pkl`` into the safe ``.npz`` that :func:`load_wm811k` reads.

    Warns (:class:`~orthobench.exceptions.OrthobenchWarning`) that unpickling runs code from the
    file. What is kept:

    - only labelled maps (the public file labels 172,950 of its 811,457 maps: 25,519 with one of
      the 8 failure types, 147,431 ``none``; :meth:`ConversionSummary.lines` gives the counts
      found);
    - each map (2-D, values ``{0, 1, 2}``: off-wafer, passing die, failing die; sizes vary from
      file to file) resized to ``48 x 48`` by nearest-neighbour sampling, which keeps the three
      values (:func:`resize_nearest`), and stored as ``uint8`` (400 MB for the labelled public
      maps before compression);
    - labels as indices into :data:`WAFER_CLASSES` (the 8 failure types, then ``none``);
    - an 80/20 split stratified on the label, drawn from a stored seed (:func:`split_indices`);
    - the SHA-256 of the source file and of the converted arrays (the dataset checksum that keys
      the feature cache, :mod:`orthobench.tasks.datasets.features`).

    The ``.npz`` holds ``maps`` (``N x 48 x 48`` ``uint8``, values ``{0, 1, 2}``),
    ``labels`` (``N`` indices into ``classes``), ``train_index`` / ``test_index``,
    ``source_row`` (each map's row in the source), ``source_shape`` (``N x 2``, each map's
    original size), the split's ``seed`` and ``test_fraction``, the normalization constants,
    ``sha256`` (dataset checksum) and ``source_sha256``. It is written to a temporary file and
    renamed, so a crash leaves no half-written dataset.

    Args:
        source: Path of ``LSWMD.pkl``.
        out: Output path; default :func:`wm811k_path` (under the data directory).
        seed: Seed of the stratified split.
        test_fraction: Share of each class in the test part.

    Raises:
        DatasetMissingError: when ``source`` is not a file.
        OrthobenchError: for split settings :func:`split_indices` refuses, an empty file, an
            ``out`` that is empty, under a file, not a regular file or in a folder that cannot be
            written (these before the warning and any unpickling), a file that is not an LSWMD
            DataFrame, an unknown class name, a map that is not 2-D or has values outside
            ``{0, 1, 2}``, or no labelled map at all.
    """
    source = Path(source).expanduser()
    # Refuse what needs no unpickling first: the warning is for a file that will be unpickled.
    out = _checked_inputs(source, out, seed, test_fraction)
    warnings.warn(
        f"Unpickling {source} runs code from the file: convert only a copy of LSWMD.pkl from a "
        "source you trust (http://mirlab.org/dataset/public/).",
        OrthobenchWarning,
        stacklevel=2,
    )
    frame = read_lswmd(source)
    class_index = {name: k for k, name in enumerate(WAFER_CLASSES)}
    maps, labels, rows, shapes = [], [], [], []
    for row, (wafer, label_cell) in enumerate(
        zip(frame["waferMap"].to_numpy(), frame["failureType"].to_numpy(), strict=True)
    ):
        label = wafer_label(label_cell)
        if label is None:
            continue
        if label not in class_index:
            raise OrthobenchError(
                f"{source}: row {row}: unknown failure type {label!r}; "
                f"known: {', '.join(WAFER_CLASSES)}."
            )
        wafer = np.asarray(wafer)
        if wafer.ndim != 2 or min(wafer.shape) < 1:
            raise OrthobenchError(
                f"{source}: row {row}: expected a 2-D wafer map, but got shape {wafer.shape}."
            )
        values = np.unique(wafer)
        if not np.isin(values, (0, 1, 2)).all():
            raise OrthobenchError(
                f"{source}: row {row}: wafer map values must be in {{0, 1, 2}}, but got "
                f"{values.tolist()}."
            )
        maps.append(resize_nearest(wafer.astype(np.uint8)))
        labels.append(class_index[label])
        rows.append(row)
        shapes.append(wafer.shape)
    if not maps:
        raise OrthobenchError(f"{source}: none of its {len(frame)} wafer maps has a label.")
    maps_array = np.stack(maps)
    labels_array = np.asarray(labels, dtype=np.int64)
    train, test = split_indices(labels_array, test_fraction, seed)
    checksum = _content_sha256(maps_array, labels_array, train, test)
    source_sha256 = sha256_of(source)
    write_atomic(  # a failed or interrupted write leaves neither a partial file nor a .tmp
        out,
        lambda fh: np.savez_compressed(
            fh,
            maps=maps_array,
            labels=labels_array,
            classes=np.asarray(WAFER_CLASSES),
            train_index=train,
            test_index=test,
            source_row=np.asarray(rows, dtype=np.int64),
            source_shape=np.asarray(shapes, dtype=np.int64),
            source_rows=np.int64(len(frame)),
            seed=np.int64(seed),
            test_fraction=np.float64(test_fraction),
            imagenet_mean=np.asarray(IMAGENET_MEAN, dtype=np.float32),
            imagenet_std=np.asarray(IMAGENET_STD, dtype=np.float32),
            sha256=np.str_(checksum),
            source_sha256=np.str_(source_sha256),
            format_version=np.int64(_FORMAT_VERSION),
        ),
    )
    counts = np.bincount(labels_array, minlength=len(WAFER_CLASSES))
    return ConversionSummary(
        path=out,
        source_rows=len(frame),
        labelled=len(maps),
        class_counts={name: int(n) for name, n in zip(WAFER_CLASSES, counts, strict=True)},
        n_train=int(train.size),
        n_test=int(test.size),
        sha256=checksum,
        source_sha256=source_sha256,
    )


@dataclass(frozen=True, eq=False)
class WM811K:
    """The converted WM811K maps with their labels and split.

    :meth:`pixels` turns the maps into model inputs as in the paper's appendix: ``v / 2`` in
    ``[0, 1]``, the single channel repeated three times, then normalized with the ImageNet mean and
    standard deviation (:data:`IMAGENET_MEAN`, :data:`IMAGENET_STD`, both stored in the file).

    Attributes:
        maps: ``N x 48 x 48`` ``uint8`` maps, values ``{0, 1, 2}``.
        labels: ``N`` ``int64`` indices into :attr:`classes`.
        classes: Class names (:data:`WAFER_CLASSES`).
        train_index, test_index: Disjoint ``int64`` indices of the stratified split.
        seed: Seed the split was drawn with.
        sha256: Dataset checksum (SHA-256 of the converted arrays), verified on load.
        source_sha256: SHA-256 of the ``LSWMD.pkl`` it came from.
        source_rows: Maps in that file (labelled or not).
        mean, std: The 3 per-channel normalization constants.
    """

    maps: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    train_index: np.ndarray
    test_index: np.ndarray
    seed: int
    sha256: str
    source_sha256: str
    source_rows: int
    mean: np.ndarray
    std: np.ndarray

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def pixels(self, index: Sequence[int] | np.ndarray | slice = slice(None)) -> torch.Tensor:
        r"""Model inputs: ``(maps[index] / 2 - mean_c) / std_c`` for the 3 channels ``c``.

        Args:
            index: Which maps (indices or a slice).

        Returns:
            ``n x 3 x 48 x 48`` ``float32`` tensor on the CPU.
        """
        import torch

        scaled = torch.as_tensor(self.maps[index], dtype=torch.float32) / 2.0  # n x 48 x 48
        mean = torch.as_tensor(self.mean, dtype=torch.float32).view(1, 3, 1, 1)
        std = torch.as_tensor(self.std, dtype=torch.float32).view(1, 3, 1, 1)
        return (scaled.unsqueeze(1) - mean) / std


def load_wm811k(path: str | Path | None = None) -> WM811K:
    """Read the converted file (no pickle) and verify its checksum and labels.

    Args:
        path: The ``.npz``; default :func:`wm811k_path`.

    Raises:
        DatasetMissingError: when the file is missing, not a converted file
            (:func:`check_wm811k`), its arrays do not match the stored checksum (a damaged
            file: convert again), or its classes or labels are not :data:`WAFER_CLASSES` and
            indices into them (:func:`~orthobench.tasks.datasets.wm811k_checks.check_labels`).
    """
    resolved = check_wm811k(path)
    try:
        data = _read_wm811k(resolved)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise DatasetMissingError(
            f"{resolved} is damaged: {err}; run `{CONVERT_COMMAND}` again."
        ) from None
    actual = _content_sha256(data.maps, data.labels, data.train_index, data.test_index)
    if actual != data.sha256:
        raise DatasetMissingError(
            f"{resolved} is damaged: its arrays hash to {actual}, not the stored {data.sha256}; "
            f"run `{CONVERT_COMMAND}` again."
        )
    check_labels(resolved, data.classes, data.labels)
    return data


def _read_wm811k(resolved: Path) -> WM811K:
    with np.load(resolved, allow_pickle=False) as npz:
        version = int(npz["format_version"])
        if version != _FORMAT_VERSION:
            raise DatasetMissingError(
                f"{resolved} has format version {version}, this orthobench reads "
                f"{_FORMAT_VERSION}; run `{CONVERT_COMMAND}` again."
            )
        return WM811K(
            maps=npz["maps"],
            labels=npz["labels"],
            classes=tuple(str(c) for c in npz["classes"]),
            train_index=npz["train_index"],
            test_index=npz["test_index"],
            seed=int(npz["seed"]),
            sha256=str(npz["sha256"]),
            source_sha256=str(npz["source_sha256"]),
            source_rows=int(npz["source_rows"]),
            mean=npz["imagenet_mean"],
            std=npz["imagenet_std"],
        )


def _in_open_unit_interval(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # click.FloatRange lets NaN through (every comparison with it is false).
    if not 0.0 < value < 1.0:
        raise click.BadParameter(f"must be in (0, 1), but got {value}.")
    return value


@click.command("convert-wm811k")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),  # a str: click's Path("") would be ".", not empty
    default=None,
    help="Output .npz (default: <data dir>/wm811k/wm811k.npz; data dir: ORTHOBENCH_DATA_DIR, else data/).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, _MAX_SEED),
    default=SPLIT_SEED,
    show_default=True,
    help="Seed of the stratified train/test split.",
)
@click.option(
    "--test-fraction",
    type=float,
    callback=_in_open_unit_interval,
    default=HELD_OUT_FRACTION,
    show_default=True,
    help="Share of each class held out, in (0, 1).",
)
def convert_wm811k(source: Path, out: str | None, seed: int, test_fraction: float) -> None:
    """Convert the public WM811K LSWMD.pkl (a pandas pickle) into a safe .npz.

    Unpickling runs code from the file: convert only a copy from a source you trust. Keeps the
    labelled maps, resized to 48x48, with a stratified train/test split. An existing output file
    is replaced.
    """
    _checked_inputs(source, out, seed, test_fraction)  # before the warning: nothing unpickled
    click.echo(
        f"orthobench: warning: {source} is a pickle, and unpickling runs code from it; convert only a copy "
        "of LSWMD.pkl from a source you trust.",
        err=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrthobenchWarning)  # said above, once
        summary = convert_lswmd(source, out, seed=seed, test_fraction=test_fraction)
    for line in summary.lines():
        click.echo(line)
