"""WM811K conversion: the synthetic LSWMD generator, nearest-neighbour resizing, label cells, the
converter end to end (labelled maps only, stratified seeded split, checksums), the safe reader,
old-pandas pickles, and the one-line errors for a missing or damaged dataset."""

from __future__ import annotations

import hashlib
import io
import math
import pickle
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from orthobench.exceptions import DatasetMissingError, OrthobenchError, OrthobenchWarning
from orthobench.tasks.datasets.store import DATA_DIR_ENV
from orthobench.tasks.datasets.synthetic_wafers import (
    WAFER_CLASSES,
    synthetic_lswmd,
    wafer_map,
    write_lswmd_pickle,
)
from orthobench.tasks.datasets.wm811k import (
    CONVERT_COMMAND,
    IMAGENET_MEAN,
    IMAGENET_STD,
    _content_sha256,
    check_wm811k,
    convert_lswmd,
    convert_wm811k,
    load_wm811k,
    read_lswmd,
    require_wm811k,
    resize_nearest,
    split_indices,
    wafer_label,
    wm811k_path,
)

N_PER_CLASS = 5
N_UNLABELLED = 7


def _convert(source, out, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrthobenchWarning)
        return convert_lswmd(source, out, **kwargs)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("wm811k")
    source = write_lswmd_pickle(
        root / "LSWMD.pkl", n_per_class=N_PER_CLASS, n_unlabelled=N_UNLABELLED, seed=1
    )
    summary = _convert(source, root / "wm811k.npz")
    return source, summary


def _ring_fraction(m: np.ndarray, inner: float, outer: float) -> float:
    rows, cols = m.shape
    y = (np.arange(rows) + 0.5) / rows * 2 - 1
    x = (np.arange(cols) + 0.5) / cols * 2 - 1
    r = np.hypot(*np.meshgrid(y, x, indexing="ij"))
    ring = (m > 0) & (r >= inner) & (r < outer)
    return float((m[ring] == 2).mean())


def test_synthetic_maps_have_the_failure_patterns_shapes():
    rng = np.random.default_rng(0)
    maps = {c: [wafer_map(c, (40, 40), rng) for _ in range(10)] for c in WAFER_CLASSES}

    def mean(c, f):
        return float(np.mean([f(m) for m in maps[c]]))

    def failing(m):
        return float((m[m > 0] == 2).mean())

    for c, ms in maps.items():
        assert all(set(np.unique(m)) <= {0, 1, 2} and m.dtype == np.uint8 for m in ms), c
    # centre vs rim, inner ring vs centre, overall density: the shapes that name the classes
    assert mean("Center", lambda m: _ring_fraction(m, 0, 0.2)) > 0.7
    assert mean("Center", lambda m: _ring_fraction(m, 0.5, 1.0)) < 0.05
    assert mean("Donut", lambda m: _ring_fraction(m, 0.45, 0.6)) > 0.6
    assert mean("Donut", lambda m: _ring_fraction(m, 0, 0.2)) < 0.05
    assert mean("Edge-Ring", lambda m: _ring_fraction(m, 0.9, 1.0)) > 0.7
    assert mean("Edge-Ring", lambda m: _ring_fraction(m, 0, 0.6)) < 0.05
    assert mean("Edge-Loc", lambda m: _ring_fraction(m, 0.85, 1.0)) > 0.1
    assert mean("Edge-Loc", lambda m: _ring_fraction(m, 0, 0.6)) < 0.05
    assert mean("Near-full", failing) > 0.85
    assert 0.25 < mean("Random", failing) < 0.35
    assert mean("none", failing) < 0.03
    for c in ("Loc", "Scratch"):
        assert 0.03 < mean(c, failing) < 0.2, c


def test_synthetic_frame_has_the_lswmd_layout():
    frame = synthetic_lswmd(n_per_class=2, n_unlabelled=3, seed=0)
    assert list(frame.columns) == [
        "waferMap",
        "dieSize",
        "lotName",
        "waferIndex",
        "trianTestLabel",
        "failureType",
    ]
    labels = [wafer_label(v) for v in frame["failureType"]]
    assert sorted(label for label in labels if label) == sorted(WAFER_CLASSES * 2)
    assert labels.count(None) == 3
    empty = [v for v in frame["failureType"] if v.size == 0]
    assert all(v.shape == (0, 0) for v in empty)
    assert len({m.shape for m in frame["waferMap"]}) > 1
    assert all(d == (m > 0).sum() for d, m in zip(frame["dieSize"], frame["waferMap"], strict=True))


def test_resize_nearest_keeps_values_upsamples_to_blocks_downsamples_to_centres():
    rng = np.random.default_rng(0)
    small = rng.integers(0, 3, size=(24, 24)).astype(np.uint8)
    assert np.array_equal(resize_nearest(small), np.kron(small, np.ones((2, 2), np.uint8)))
    big = rng.integers(0, 3, size=(96, 144)).astype(np.uint8)
    assert np.array_equal(resize_nearest(big), big[1::2, 1::3])
    odd = rng.integers(0, 3, size=(25, 37)).astype(np.uint8)
    out = resize_nearest(odd)
    assert out.shape == (48, 48) and out.dtype == np.uint8
    assert set(np.unique(out)) <= set(np.unique(odd))
    with pytest.raises(ValueError, match="2-D"):
        resize_nearest(np.zeros(5))


def test_label_cells_of_the_public_file():
    assert wafer_label(np.array([["Center"]], dtype=object)) == "Center"
    assert wafer_label(np.array([["none"]])) == "none"
    assert wafer_label(np.zeros((0, 0))) is None
    assert wafer_label([]) is None
    assert wafer_label("Scratch") == "Scratch"
    with pytest.raises(OrthobenchError, match="one label"):
        wafer_label(np.array([["Loc", "Random"]], dtype=object))


def test_converter_keeps_labelled_maps_resized_with_their_labels(converted):
    source, summary = converted
    frame = pd.read_pickle(source)
    assert summary.source_rows == len(frame) == 9 * N_PER_CLASS + N_UNLABELLED
    assert summary.labelled == 9 * N_PER_CLASS
    assert summary.class_counts == {c: N_PER_CLASS for c in WAFER_CLASSES}
    assert summary.source_sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert any(f"labelled maps: {9 * N_PER_CLASS} of" in line for line in summary.lines())

    with np.load(summary.path, allow_pickle=False) as npz:  # no pickle needed to read it
        maps, labels, rows = npz["maps"], npz["labels"], npz["source_row"]
        shapes = npz["source_shape"]
    assert maps.shape == (9 * N_PER_CLASS, 48, 48) and maps.dtype == np.uint8
    for m, label, row, shape in zip(maps, labels, rows, shapes, strict=True):
        original = frame["waferMap"].iloc[row]
        assert np.array_equal(m, resize_nearest(original))
        assert tuple(shape) == original.shape
        assert WAFER_CLASSES[label] == wafer_label(frame["failureType"].iloc[row])


def test_split_is_stratified_disjoint_and_seeded(converted):
    _, summary = converted
    data = load_wm811k(summary.path)
    train, test = data.train_index, data.test_index
    assert np.intersect1d(train, test).size == 0
    assert np.array_equal(np.union1d(train, test), np.arange(len(data.labels)))
    assert summary.n_test == test.size == round(0.2 * len(data.labels))
    # every class keeps its share: 1 of 5 maps per class in the test part
    assert np.array_equal(np.bincount(data.labels[test], minlength=9), np.ones(9, dtype=int))
    assert data.seed == 0
    again = split_indices(data.labels, 0.2, 0)
    other = split_indices(data.labels, 0.2, 1)
    assert np.array_equal(again[1], test) and not np.array_equal(other[1], test)
    with pytest.raises(OrthobenchError, match="class counts"):
        split_indices(np.array([0, 0, 0, 1]), 0.5, 0)


def test_pixels_are_halved_then_imagenet_normalized(converted):
    data = load_wm811k(converted[1].path)
    pixels = data.pixels([0, 1])
    assert pixels.shape == (2, 3, 48, 48) and pixels.dtype.is_floating_point
    for v in (0, 1, 2):
        where = data.maps[0] == v
        for c in range(3):
            expected = (v / 2 - IMAGENET_MEAN[c]) / IMAGENET_STD[c]
            assert np.allclose(pixels[0, c].numpy()[where], expected, atol=1e-6)


def test_converting_twice_gives_the_same_dataset_checksum(converted, tmp_path):
    source, summary = converted
    again = _convert(source, tmp_path / "again.npz")
    other_split = _convert(source, tmp_path / "other.npz", seed=3)
    assert again.sha256 == summary.sha256 == load_wm811k(summary.path).sha256
    assert other_split.sha256 != summary.sha256


def test_a_failed_write_leaves_no_file_and_no_temporary(converted, tmp_path, monkeypatch):
    """A write that fails half-way (a full disk, Ctrl-C) leaves neither ``out`` nor its ``.tmp``."""

    def write_half_then_fail(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", write_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        _convert(converted[0], tmp_path / "w.npz")
    assert list(tmp_path.iterdir()) == []


def test_converter_warns_that_unpickling_runs_code(converted, tmp_path):
    with pytest.warns(OrthobenchWarning, match="runs code"):
        convert_lswmd(converted[0], tmp_path / "w.npz")


def test_a_damaged_file_is_refused_with_the_convert_command(converted, tmp_path):
    with np.load(converted[1].path, allow_pickle=False) as npz:
        arrays = dict(npz)
    arrays["maps"] = arrays["maps"].copy()
    arrays["maps"][0, 0, 0] = 2 - arrays["maps"][0, 0, 0]
    damaged = tmp_path / "damaged.npz"
    np.savez(damaged, **arrays)
    with pytest.raises(DatasetMissingError, match="damaged") as err:
        load_wm811k(damaged)
    assert CONVERT_COMMAND in str(err.value)


def test_a_corrupted_archive_member_is_refused_as_damaged_in_one_line(converted, tmp_path):
    # The array headers at the start of each member still read (check_wm811k passes); the
    # compressed maps past them do not.
    raw = bytearray(converted[1].path.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(64)
    corrupted = tmp_path / "corrupted.npz"
    corrupted.write_bytes(bytes(raw))
    with pytest.raises(DatasetMissingError, match="is damaged") as err:
        load_wm811k(corrupted)
    assert str(corrupted) in str(err.value) and CONVERT_COMMAND in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_dataset_is_one_line_naming_the_convert_command(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert wm811k_path() == tmp_path / "wm811k" / "wm811k.npz"
    with pytest.raises(DatasetMissingError) as err:
        require_wm811k()
    assert "orthobench data convert-wm811k PATH/LSWMD.pkl`" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(DatasetMissingError, match="does not exist"):
        read_lswmd(tmp_path / "LSWMD.pkl")
    # A task's own `path:`: the command's default output would not be read, so it names --out.
    own = tmp_path / "mine" / "wm.npz"
    with pytest.raises(DatasetMissingError) as err:
        require_wm811k(own)
    assert f"orthobench data convert-wm811k PATH/LSWMD.pkl --out {own}`" in str(err.value)


def test_bad_files_name_the_row_or_the_columns(tmp_path):
    frame = synthetic_lswmd(n_per_class=1, n_unlabelled=0)
    frame.at[2, "waferMap"] = np.full((5, 5), 3, dtype=np.uint8)
    frame.to_pickle(tmp_path / "values.pkl")
    with pytest.raises(OrthobenchError, match=r"row 2: wafer map values"):
        _convert(tmp_path / "values.pkl", tmp_path / "out.npz")
    frame = synthetic_lswmd(n_per_class=1, n_unlabelled=0)
    frame.at[4, "failureType"] = np.array([["Crack"]], dtype=object)
    frame.to_pickle(tmp_path / "label.pkl")
    with pytest.raises(OrthobenchError, match=r"row 4: unknown failure type 'Crack'"):
        _convert(tmp_path / "label.pkl", tmp_path / "out.npz")
    frame.drop(columns="waferMap").to_pickle(tmp_path / "columns.pkl")
    with pytest.raises(OrthobenchError, match="missing column"):
        _convert(tmp_path / "columns.pkl", tmp_path / "out.npz")
    synthetic_lswmd(n_per_class=0, n_unlabelled=3).to_pickle(tmp_path / "unlabelled.pkl")
    with pytest.raises(OrthobenchError, match="none of its 3 wafer maps has a label"):
        _convert(tmp_path / "unlabelled.pkl", tmp_path / "out.npz")
    assert not (tmp_path / "out.npz").exists()


def test_reads_pickles_that_name_old_pandas_modules(tmp_path):
    # The public file predates pandas 0.20, which moved pandas.indexes to pandas.core.indexes.
    frame = synthetic_lswmd(n_per_class=1, n_unlabelled=1)
    raw = pickle.dumps(frame, protocol=2)  # protocol 2 names classes as "module\nname" text
    assert b"pandas.core.indexes" in raw
    (tmp_path / "old.pkl").write_bytes(raw.replace(b"pandas.core.indexes", b"pandas.indexes"))
    with pytest.raises(ImportError):
        pd.read_pickle(tmp_path / "old.pkl")
    back = read_lswmd(tmp_path / "old.pkl")
    assert list(back.columns) == list(frame.columns) and len(back) == len(frame)
    assert all(
        np.array_equal(a, b) for a, b in zip(back["waferMap"], frame["waferMap"], strict=True)
    )


def test_convert_command_prints_the_warning_and_the_counts(converted, tmp_path):
    result = CliRunner().invoke(
        convert_wm811k, [str(converted[0]), "--out", str(tmp_path / "c.npz"), "--seed", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "unpickling runs code" in result.output
    assert f"labelled maps: {9 * N_PER_CLASS} of {9 * N_PER_CLASS + N_UNLABELLED}" in result.output
    assert load_wm811k(tmp_path / "c.npz").seed == 2


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(b"hello\n", "UnpicklingError", id="text"),
        pytest.param(pickle.dumps(list(range(50)))[:40], "truncated", id="truncated"),
        pytest.param(b"", "is empty", id="empty"),
        # Unpickling imports what the file names and calls what it says: any error can come out.
        pytest.param(b"cno_such_module_xyz\nThing\n.", "no_such_module_xyz", id="no-module"),
        pytest.param(b"cbuiltins\ndivmod\n(I1\nI0\ntR.", "ZeroDivisionError", id="call-fails"),
    ],
)
def test_a_damaged_pickle_is_one_line_naming_the_file(raw, reason, tmp_path):
    source = tmp_path / "LSWMD.pkl"
    source.write_bytes(raw)
    with pytest.raises(OrthobenchError, match=reason) as err:
        read_lswmd(source)
    assert str(source) in str(err.value) and "\n" not in str(err.value)


def test_the_source_and_split_are_checked_before_the_unpickling_warning(converted, tmp_path):
    calls = [
        (tmp_path / "absent.pkl", {}, "does not exist"),
        (converted[0], {"seed": -1}, r"seed=-1"),
        (converted[0], {"seed": 2**32}, r"seed=4294967296"),
        (converted[0], {"test_fraction": 1.0}, r"test_fraction=1.0"),
    ]
    for source, kwargs, message in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(OrthobenchError, match=message):
                convert_lswmd(source, tmp_path / "out.npz", **kwargs)
        assert not [w for w in caught if issubclass(w.category, OrthobenchWarning)], message


def test_split_errors_show_plain_class_counts_by_name():
    """scikit-learn named the class with too few maps by its index ("[7]" for Scratch)."""
    with pytest.raises(OrthobenchError, match=r"class counts \{'Center': 1, 'Donut': 3\}"):
        split_indices(np.array([0, 1, 1, 1]), 0.5)


def test_a_directory_path_is_named_as_a_directory(converted, tmp_path):
    """A directory was "does not exist", and the suggested `--out DIR` failed as a directory."""
    with pytest.raises(DatasetMissingError) as err:
        require_wm811k(converted[1].path.parent)
    assert str(err.value) == (
        f"{converted[1].path.parent} is a directory, not the converted WM811K .npz: use "
        f"{converted[1].path}."
    )
    with pytest.raises(DatasetMissingError) as err:
        require_wm811k(tmp_path)
    assert "is a directory" in str(err.value)
    assert f"{CONVERT_COMMAND} --out {tmp_path / 'wm811k.npz'}`" in str(err.value)


def test_a_path_with_a_tilde_is_expanded(converted, monkeypatch):
    monkeypatch.setenv("HOME", str(converted[1].path.parent))
    assert check_wm811k(f"~/{converted[1].path.name}") == converted[1].path


def test_the_converters_paths_expand_a_tilde_as_the_tasks_do(converted, tmp_path, monkeypatch):
    """``convert-wm811k --out=~/w.npz`` (no shell expands ``~`` after ``=``) wrote ``./~/w.npz``,
    which a task's ``path: ~/w.npz`` then did not find."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    source = converted[0]
    (tmp_path / source.name).symlink_to(source)
    summary = _convert(f"~/{source.name}", "~/w.npz")
    assert summary.path == tmp_path / "w.npz" == require_wm811k("~/w.npz")
    assert not (tmp_path / "~").exists()


def test_a_data_directory_that_is_a_file_is_named_for_the_default_path(tmp_path, monkeypatch):
    """The converted file's default path read as missing under it, and the convert command it
    advised failed: 'afile is a file'."""
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "afile"))
    with pytest.raises(OrthobenchError, match=r"data directory .*afile is a file"):
        require_wm811k()


def _rewritten(converted, out, **changes):
    with np.load(converted[1].path, allow_pickle=False) as npz:
        arrays = {**dict(npz), **changes}
    np.savez(out, **arrays)
    return out


def test_classes_and_labels_out_of_range_are_refused_in_one_line(converted, tmp_path):
    """The checksum covers neither: such files loaded, then miscounted macro F1 or failed every
    evaluation with a torch error."""
    few = _rewritten(converted, tmp_path / "few.npz", classes=np.asarray(WAFER_CLASSES[:5]))
    with pytest.raises(DatasetMissingError, match=r"few\.npz is not a converted .*its classes"):
        load_wm811k(few)
    data = load_wm811k(converted[1].path)
    labels = data.labels.copy()
    labels[0] = len(WAFER_CLASSES)
    checksum = _content_sha256(data.maps, labels, data.train_index, data.test_index)
    high = _rewritten(converted, tmp_path / "high.npz", labels=labels, sha256=np.str_(checksum))
    with pytest.raises(DatasetMissingError) as err:
        load_wm811k(high)
    assert f"{high} is not a converted" in str(err.value) and "span [0, 9]" in str(err.value)
    assert CONVERT_COMMAND in str(err.value) and "\n" not in str(err.value)


def test_an_output_under_a_file_is_refused_before_the_warning(converted, tmp_path):
    """Creating its folder failed after the unpickling with only "afile: File exists"."""
    afile = tmp_path / "afile"
    afile.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrthobenchWarning)
        with pytest.raises(OrthobenchError, match=f"{afile} is a file, not a directory"):
            convert_lswmd(converted[0], afile / "x.npz")
    result = CliRunner().invoke(convert_wm811k, [str(converted[0]), "--out", str(afile / "x")])
    assert "is a file, not a directory" in str(result.exception)
    assert "unpickling runs code" not in result.output


def _npy(array: np.ndarray, shape: tuple[int, ...]) -> bytes:
    """``array``'s bytes behind an ``.npy`` header announcing ``shape``."""
    header = {**np.lib.format.header_data_from_array_1_0(array), "shape": shape}
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + array.tobytes()


@pytest.mark.parametrize(
    ("rows", "crafted_directory", "fragment"),
    [
        (1000, False, "array 'maps' announces 2,304,000 bytes, but its member holds 103,808"),
        (10**6, True, "bytes (1,000,000 maps), more than the 802,488,000 of twice"),
    ],
)
def test_a_file_announcing_more_than_it_holds_or_the_dataset_has_is_refused_from_its_headers(
    converted, tmp_path, rows, crafted_directory, fragment
):
    """A 2 MB file whose maps announced a million rows passed the check, and the reader
    allocated the 2.1 GiB its headers announced before reading them."""
    with np.load(converted[1].path, allow_pickle=False) as npz:
        arrays = dict(npz)
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w") as archive:
        for name, array in arrays.items():
            grown = name in ("maps", "labels")
            shape = (rows, *array.shape[1:]) if grown else array.shape
            archive.writestr(f"{name}.npy", _npy(array, shape))
            if grown and crafted_directory:  # it says each member holds what its header announces
                archive.getinfo(f"{name}.npy").file_size = 128 + array.itemsize * math.prod(shape)
    with pytest.raises(DatasetMissingError) as err:
        load_wm811k(bomb)
    assert f"{bomb} is not a converted WM811K file: " in str(err.value)
    assert fragment in str(err.value) and "\n" not in str(err.value)
