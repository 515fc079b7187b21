"""The WM811K ViT task on synthetic LSWMD data with the tiny random-weight ViT: training the head on
cached features equals training through the frozen backbone, the feature cache and its key,
seeded determinism, the objective, the local-directory and offline model paths, and the errors
(a ``path`` that is not a converted file is refused in the constructor, before any cell)."""

from __future__ import annotations

import functools
import http.server
import io
import multiprocessing
import os
import threading
import time
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import ConfigError, DatasetMissingError, OrthobenchWarning
from orthobench.tasks import wafer_vit
from orthobench.tasks.datasets.features import FeatureKey, cache_dir, load_or_extract
from orthobench.tasks.datasets.store import DATA_DIR_ENV
from orthobench.tasks.datasets.synthetic_wafers import write_lswmd_pickle
from orthobench.tasks.datasets.wm811k import CONVERT_COMMAND, convert_lswmd
from orthobench.tasks.wafer_vit import (
    TINY_RANDOM,
    WAFER_VIT_SPACE,
    WaferViTTask,
    class_weights,
    load_backbone,
    model_identity,
    predict,
    train_head,
    vit_features,
)

# lr, momentum, weight decay, step size, gamma
GOOD = np.array([0.1, 0.9, 0.0, 100, 1.0])  # trains: macro F1 well above chance
BAD = np.array([1e-4, 0.5, 0.5, 1, 0.1])  # the learning rate vanishes after one step


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """A data directory holding the converted synthetic LSWMD file (10 labelled maps per class)."""
    root = tmp_path_factory.mktemp("data")
    source = write_lswmd_pickle(root / "LSWMD.pkl", n_per_class=10, n_unlabelled=7, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OrthobenchWarning)
        convert_lswmd(source, root / "wm811k" / "wm811k.npz")
    return root


@pytest.fixture(scope="module")
def vit_module():
    """``transformers``' ViT, imported once per module (most of this file's run time)."""
    return pytest.importorskip("transformers.models.vit.modeling_vit")


@pytest.fixture
def in_data_root(data_root, vit_module, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_root))
    return data_root


def test_search_space_is_the_papers():
    assert [(p.name, p.low, p.high, p.kind) for p in WAFER_VIT_SPACE.parameters] == [
        ("lr", 1e-4, 1e-1, "log"),
        ("momentum", 0.0, 1.0, "float"),
        ("weight_decay", 0.0, 1.0, "float"),
        ("step_size", 1, 100, "int"),
        ("gamma", 0.0, 1.0, "float"),
    ]
    assert WaferViTTask.optimal_value is None


def test_cached_features_train_the_same_head_as_the_frozen_backbone(in_data_root, device):
    task = WaferViTTask(model=TINY_RANDOM)
    data = task.data()
    features, cached, _ = task.features(device)
    backbone = load_backbone(TINY_RANDOM).to(device)
    train = torch.from_numpy(data.train_index)
    test = torch.from_numpy(data.test_index)
    labels = torch.from_numpy(data.labels).to(device)
    pixels = data.pixels()  # n x 3 x 48 x 48 on the CPU

    # The cache holds what the backbone computes. On a GPU, float32 kernels are chosen by batch
    # shape (the cache was computed in other batches) and convolutions may use TF32: there the
    # two agree to about 1e-4 (seen on an H200: 7e-5), on the CPU to 1e-5.
    tol = 1e-5 if device.type == "cpu" else 1e-3
    with torch.no_grad():
        direct = vit_features(backbone, pixels[:20], 48)
    torch.testing.assert_close(features[:20], direct, rtol=tol, atol=tol)

    params = {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3, "step_size": 5, "gamma": 0.9}
    common = dict(in_features=32, num_classes=9, params=params, epochs=3, batch_size=16, seed=7)
    on_cache = train_head(
        features[train.to(device)], labels[train.to(device)], encode=lambda f: f, **common
    )

    def through_backbone(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return vit_features(backbone, batch, 48)

    through = train_head(pixels[train], labels[train.to(device)], encode=through_backbone, **common)
    assert len(on_cache.losses) == len(through.losses) == 3 * 5  # 72 training maps, batches of 16
    assert np.allclose(on_cache.losses, through.losses, rtol=10 * tol, atol=tol)
    # It learned something: the last epoch's mean batch loss is below the first's (single
    # batches are too noisy to compare: on an H200 the last batch's loss exceeded the first's).
    assert np.mean(on_cache.losses[-5:]) < np.mean(on_cache.losses[:5])
    assert torch.allclose(on_cache.head.weight, through.head.weight, atol=tol)
    predicted_cache = predict(on_cache.head, features[test.to(device)], encode=lambda f: f)
    predicted_backbone = predict(through.head, pixels[test], encode=through_backbone)
    assert torch.equal(predicted_cache, predicted_backbone)
    assert cached.key.device == device.type


def test_evaluation_is_seeded_and_reports_both_costs(in_data_root):
    cpu = torch.device("cpu")
    task = WaferViTTask(model=TINY_RANDOM, epochs=5, batch_size=16)
    first = task.evaluate(GOOD, seed=3, device=cpu)
    again = task.evaluate(GOOD, seed=3, device=cpu)
    other = task.evaluate(GOOD, seed=4, device=cpu)
    assert first.y == again.y and first.info["last_epoch_loss"] == again.info["last_epoch_loss"]
    assert other.info["last_epoch_loss"] != first.info["last_epoch_loss"]
    assert first.info["features"] in ("extracted", "cache") and again.info["features"] == "memory"
    assert first.info["feature_seconds"] > 0 and first.info["head_seconds"] > 0
    assert again.info["feature_load_seconds"] < first.info["feature_load_seconds"]
    assert first.y == pytest.approx(1 - first.info["macro_f1"])
    assert (first.info["n_train"], first.info["n_test"]) == (72, 18)
    assert first.y_true is None and not first.is_outlier

    # a new task reads the features from the cache file and gives the same result
    fresh = WaferViTTask(model=TINY_RANDOM, epochs=5, batch_size=16)
    from_file = fresh.evaluate(GOOD, seed=3, device=cpu)
    assert from_file.info["features"] == "cache" and from_file.y == first.y
    assert from_file.info["feature_seconds"] == first.info["feature_seconds"]
    assert len(list(cache_dir().glob("features-tiny-random-*-48px-cpu-float32-*.npz"))) == 1


def test_prepare_reads_the_features_before_any_evaluation_and_rows_name_their_data(
    in_data_root,
):
    """Without ``prepare`` the first evaluation read the data and extracted the features under
    the evaluation's time limit; the rows did not say which dataset and model they used."""
    cpu = torch.device("cpu")
    task = WaferViTTask(model=TINY_RANDOM, epochs=1, batch_size=16)
    task.prepare(cpu)
    first = task.evaluate(GOOD, seed=3, device=cpu)
    assert first.info["features"] == "memory"
    assert first.info["dataset_sha256"] == task.data().sha256
    assert first.info["model"] == model_identity(TINY_RANDOM)


def test_a_hub_model_whose_config_cannot_be_read_says_what_to_do(in_data_root, monkeypatch):
    """On the default image size's path the error lacked the hint (and held a line break)."""
    import transformers

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co'.\nCheck your connection")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", offline)
    monkeypatch.setattr(wafer_vit, "_hub_reachable", lambda endpoint: True)  # no network in tests
    task = WaferViTTask(model="google/vit-base-patch16-224-in21k", epochs=1)
    with pytest.raises(ConfigError, match=r"HF_HUB_OFFLINE=1 .*save_pretrained") as info:
        task.prepare(torch.device("cpu"))
    assert "\n" not in str(info.value)


def test_objective_responds_to_the_hyperparameters(in_data_root):
    task = WaferViTTask(model=TINY_RANDOM, epochs=20, batch_size=16)
    good = task.evaluate(GOOD, seed=0, device=torch.device("cpu"))
    bad = task.evaluate(BAD, seed=0, device=torch.device("cpu"))
    assert good.y < bad.y - 0.1
    assert bad.info["final_lr"] == pytest.approx(1e-4 * 0.1**100)


def test_class_weights_are_inverse_frequencies():
    labels = torch.tensor([0, 0, 0, 1, 2, 2])
    w = class_weights(labels, 4)
    assert torch.allclose(w, torch.tensor([6 / 12, 6 / 4, 6 / 8, 0.0]))
    # every present class carries the same total weight n / K
    totals = w * torch.bincount(labels, minlength=4)
    assert torch.allclose(totals[:3], torch.full((3,), 6 / 4))


def test_cache_key_and_reuse(tmp_path):
    key = FeatureKey(
        model="m", dataset_sha256="0" * 64, image_size=224, device="cpu", dtype="float32"
    )
    others = [
        FeatureKey(
            model="m2", dataset_sha256="0" * 64, image_size=224, device="cpu", dtype="float32"
        ),
        FeatureKey(
            model="m", dataset_sha256="1" * 64, image_size=224, device="cpu", dtype="float32"
        ),
        FeatureKey(
            model="m", dataset_sha256="0" * 64, image_size=48, device="cpu", dtype="float32"
        ),
        FeatureKey(
            model="m", dataset_sha256="0" * 64, image_size=224, device="cuda", dtype="float32"
        ),
        FeatureKey(
            model="m", dataset_sha256="0" * 64, image_size=224, device="cpu", dtype="bfloat16"
        ),
    ]
    assert len({k.filename() for k in [key, *others]}) == 6
    calls = []

    def extract(n=4):
        calls.append(n)
        return np.arange(n * 3, dtype=np.float32).reshape(n, 3)

    first = load_or_extract(key, extract, n=4, directory=tmp_path)
    second = load_or_extract(key, extract, n=4, directory=tmp_path)
    assert (first.extracted, second.extracted, len(calls)) == (True, False, 1)
    assert np.array_equal(first.features, second.features)
    assert second.extraction_seconds == first.extraction_seconds
    stale = load_or_extract(key, lambda: extract(5), n=5, directory=tmp_path)  # row count changed
    assert stale.extracted and stale.features.shape == (5, 3) and len(calls) == 2


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign"])
def test_a_damaged_cache_file_is_recomputed_and_replaced(tmp_path, damage):
    """A flipped bit raised BadZipFile out of every cell of the task, run after run, without
    naming the file: a cache that does not read is stale, as one of another key is."""
    key = FeatureKey(
        model="m", dataset_sha256="0" * 64, image_size=224, device="cpu", dtype="float32"
    )
    features = np.arange(12, dtype=np.float32).reshape(4, 3)
    path = load_or_extract(key, lambda: features, n=4, directory=tmp_path).path
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[len(raw) // 3] ^= 0xFF
    elif damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:
        raw = bytearray(b"not a numpy archive")
    path.write_bytes(bytes(raw))
    again = load_or_extract(key, lambda: features, n=4, directory=tmp_path)
    assert again.extracted and np.array_equal(again.features, features)
    assert not load_or_extract(key, lambda: features, n=4, directory=tmp_path).extracted


def test_a_failed_cache_write_leaves_no_file_and_no_temporary(tmp_path, monkeypatch):
    """A cache write that fails half-way leaves no ``.tmp`` beside the cache, the features it
    extracted are returned with a warning (a full or read-only data folder failed every cell),
    and the next call extracts again instead of reading a partial file."""
    key = FeatureKey(
        model="m", dataset_sha256="0" * 64, image_size=224, device="cpu", dtype="float32"
    )

    def write_half_then_fail(fh, **arrays):
        fh.write(b"\x93NUMPY half")
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(np, "savez", write_half_then_fail)
        with pytest.warns(OrthobenchWarning, match="not cached .*No space left"):
            kept = load_or_extract(
                key, lambda: np.ones((4, 3), np.float32), n=4, directory=tmp_path
            )
    assert kept.extracted and kept.features.shape == (4, 3)
    left = [p.name for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".lock"]
    assert left == []  # the extraction lock stays, as after a successful write
    again = load_or_extract(key, lambda: np.ones((4, 3), np.float32), n=4, directory=tmp_path)
    assert again.extracted


def test_a_stored_cache_is_read_without_its_lock(tmp_path, monkeypatch):
    """A read-only data folder holding valid features failed every cell: the lock file it could
    not create was opened before the cache was read."""
    key = FeatureKey(model="m", dataset_sha256="0" * 64, image_size=8, device="cpu", dtype="f")
    load_or_extract(key, lambda: np.ones((4, 3), np.float32), n=4, directory=tmp_path)

    def read_only(lock):
        raise OSError(30, "Read-only file system", str(lock))

    monkeypatch.setattr("orthobench.tasks.datasets.features._exclusive", read_only)
    cached = load_or_extract(key, lambda: pytest.fail("extracted"), n=4, directory=tmp_path)
    assert not cached.extracted


def _extract_slowly_and_log(log: str) -> np.ndarray:
    """An extraction that takes a while and leaves a line in ``log`` (a worker's)."""
    with open(log, "a") as fh:
        fh.write("extracted\n")
    time.sleep(0.5)
    return np.ones((4, 3), dtype=np.float32)


def _worker(directory: str, log: str) -> bool:
    key = FeatureKey(model="m", dataset_sha256="0" * 64, image_size=8, device="cpu", dtype="f")
    extract = functools.partial(_extract_slowly_and_log, log)
    return load_or_extract(key, extract, n=4, directory=directory).extracted


@pytest.mark.slow
def test_workers_that_start_together_extract_the_features_once(tmp_path):
    log = tmp_path / "log"
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        extracted = pool.starmap(_worker, [(str(tmp_path / "cache"), str(log))] * 4)
    assert sorted(extracted) == [False, False, False, True]
    assert log.read_text().splitlines() == ["extracted"]


def test_a_local_directory_model_loads_and_is_fingerprinted(in_data_root, tmp_path):
    saved = tmp_path / "vit"
    load_backbone(TINY_RANDOM).save_pretrained(saved)
    local = WaferViTTask(model=str(saved))
    tiny = WaferViTTask(model=TINY_RANDOM)
    cpu = torch.device("cpu")
    assert torch.allclose(local.features(cpu)[0], tiny.features(cpu)[0], atol=1e-6)
    before = model_identity(str(saved))
    assert before.startswith(str(saved.resolve()) + "@")
    weights = next(saved.glob("*.safetensors"))
    os.utime(weights, ns=(1, 1))
    assert model_identity(str(saved)) != before


def test_missing_dataset_fails_in_the_constructor_with_the_convert_command(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DatasetMissingError) as err:
        WaferViTTask(model=TINY_RANDOM)
    assert "orthobench data convert-wm811k PATH/LSWMD.pkl" in str(err.value)
    assert "\n" not in str(err.value)


def _converted_arrays(data_root) -> dict[str, np.ndarray]:
    with np.load(data_root / "wm811k" / "wm811k.npz", allow_pickle=False) as npz:
        return dict(npz)


def _write_npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# What a bad `path` holds -> what the one-line error must say about it.
BAD_FILES = {
    "text": (
        lambda path, arrays: path.write_text("maps,labels\n0,1\n"),
        "not a readable .npz",
    ),
    "npy": (
        lambda path, arrays: path.write_bytes(_npy_bytes(arrays["maps"])),
        "not a readable .npz",
    ),
    "object-maps": (
        lambda path, arrays: _write_npz(path, **{**arrays, "maps": arrays["maps"].astype(object)}),
        "array 'maps' holds Python objects, which only pickle can read",
    ),
    "missing-arrays": (
        lambda path, arrays: _write_npz(path, maps=arrays["maps"], labels=arrays["labels"]),
        "it lacks the array(s) classes, train_index, test_index, seed, sha256",
    ),
    "float-maps": (
        lambda path, arrays: _write_npz(path, **{**arrays, "maps": arrays["maps"] / 2.0}),
        "array 'maps' must be unsigned integer of shape (N x 48 x 48), but got float64 of "
        "shape (90, 48, 48)",
    ),
    "fewer-labels": (
        lambda path, arrays: _write_npz(path, **{**arrays, "labels": arrays["labels"][:-1]}),
        "it holds 90 maps but 89 labels",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_path_that_is_not_a_converted_file_is_one_line_in_the_constructor(
    data_root, tmp_path, kind
):
    write, fragment = BAD_FILES[kind]
    bad = tmp_path / "bad.npz"
    write(bad, _converted_arrays(data_root))
    with pytest.raises(DatasetMissingError) as err:
        WaferViTTask(model=TINY_RANDOM, path=str(bad))
    message = str(err.value)
    assert f"{bad} is not a converted WM811K file: " in message and fragment in message
    assert CONVERT_COMMAND in message and "\n" not in message


def test_a_suite_with_a_bad_path_fails_before_any_cell_with_one_line(data_root, tmp_path):
    bad = BAD_FILES["object-maps"][0](tmp_path / "objects.npz", _converted_arrays(data_root))
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: wafer\nseeds: 2\nn_init: 2\nbudget: 1\noptimizers: [sobol]\n"
        f"tasks: [{{name: wm811k-vit, params: {{model: {TINY_RANDOM}, path: '{bad}'}}}}]\n"
    )
    result = CliRunner().invoke(cli, ["run", str(suite), "-q", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    error = result.stderr.partition("orthobench: error: ")[2]  # after the run's header line
    assert error.count("\n") == 1 and "holds Python objects" in error, result.stderr
    assert not list((tmp_path / "out").rglob("*.parquet"))


def test_bad_settings_name_their_field(in_data_root, monkeypatch, tmp_path):
    for kwargs, field in (
        ({"epochs": 0}, "epochs"),
        ({"batch_size": 1.5}, "batch_size"),
        ({"image_size": 0}, "image_size"),
        ({"backbone_dtype": "int8"}, "backbone_dtype"),
        ({"model": str(tmp_path / "nowhere")}, "model"),
    ):
        with pytest.raises(ConfigError) as err:
            WaferViTTask(**{"model": TINY_RANDOM, **kwargs})
        assert err.value.field == field
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE") as err:
        WaferViTTask(model="orthobench-tests/no-such-vit")
    assert err.value.field == "model"


def test_a_non_path_path_names_its_field_and_value(in_data_root):
    """A ``path`` of another type was os.fspath's TypeError, without the field or the value."""
    with pytest.raises(ConfigError) as err:
        WaferViTTask(model=TINY_RANDOM, path=5)
    assert err.value.field == "path" and "int 5" in err.value.reason


@pytest.mark.parametrize("image_size", [8, 15])
def test_an_image_size_below_the_patch_size_is_refused_in_the_constructor(
    in_data_root, tmp_path, image_size
):
    """A side below the ViT's 16-pixel patch built, and then every evaluation of every cell failed
    in the patch embedding's convolution (kernel larger than the input)."""
    saved = tmp_path / "vit"
    load_backbone(TINY_RANDOM).save_pretrained(saved)
    for model in (TINY_RANDOM, str(saved)):
        with pytest.raises(ConfigError) as err:
            WaferViTTask(model=model, image_size=image_size)
        assert err.value.field == "image_size"
        assert f"patch size 16, but got {image_size}" in err.value.reason
    WaferViTTask(model=TINY_RANDOM, image_size=16)  # one patch: the smallest that runs


def test_a_numpy_integer_seed_is_the_same_seed(in_data_root):
    """Seeds are hashed by their ``repr`` (``derive_seed``), and ``np.int64(3)``'s is not ``3``'s:
    the same seed as a numpy integer drew another head initialization and batch order."""
    task = WaferViTTask(model=TINY_RANDOM, epochs=2, batch_size=16)
    cpu = torch.device("cpu")
    as_int = task.evaluate(GOOD, seed=3, device=cpu)
    as_numpy = task.evaluate(GOOD, seed=np.int64(3), device=cpu)
    assert as_numpy.y == as_int.y
    assert as_numpy.info["last_epoch_loss"] == as_int.info["last_epoch_loss"]


@pytest.mark.slow
def test_a_suite_cell_runs_end_to_end_and_repeats_exactly(in_data_root):
    from orthobench.loop import run_cell
    from orthobench.suite import Cell, ComponentSpec

    cell = Cell(
        suite="wafer",
        task=ComponentSpec(
            name="orthobench.tasks.wafer_vit:WaferViTTask",
            params={"model": TINY_RANDOM, "epochs": 5, "batch_size": 16},
            label="wm811k-vit",
        ),
        optimizer=ComponentSpec(name="orthobo", params={"theta_samples": 8}, label="orthobo"),
        seed=0,
        n_init=4,
        budget=2,
    )
    first, second = run_cell(cell), run_cell(cell)
    assert [r.y for r in first] == [r.y for r in second]
    assert [r.phase for r in first] == ["init"] * 4 + ["bo"] * 2
    assert all(r.status == "ok" and 0.0 <= r.y <= 1.0 and r.regret is None for r in first)
    assert all("head_seconds" in r.info and "feature_seconds" in r.info for r in first)


@pytest.fixture
def uncached_hub_id(in_data_root, monkeypatch):
    """A hub id missing from the cache, HF_HUB_OFFLINE unset; the hub check records its calls."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name: None)
    calls: list[str] = []

    def unreachable(endpoint):
        calls.append(endpoint)
        return False

    monkeypatch.setattr(wafer_vit, "_hub_reachable", unreachable, raising=False)
    return calls


def test_an_uncached_hub_id_without_the_hub_fails_in_the_constructor_in_one_line(
    uncached_hub_id, monkeypatch, tmp_path
):
    """Each cell retried the downloads for ~25 s, then failed with a message of escaped lines."""
    import huggingface_hub

    with pytest.raises(ConfigError) as err:
        WaferViTTask(model="orthobench-tests/no-such-vit")
    assert err.value.field == "model" and "\n" not in str(err.value)
    assert "'orthobench-tests/no-such-vit' is not in the Hugging Face cache and the hub " in str(
        err.value
    )
    assert "cannot be reached: run `hf download orthobench-tests/no-such-vit`" in str(err.value)
    assert len(uncached_hub_id) == 1
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: hub\nseeds: 4\nn_init: 2\nbudget: 1\noptimizers: [sobol]\n"
        "tasks: [{name: wm811k-vit, params: {model: orthobench-tests/no-such-vit}}]\n"
    )
    result = CliRunner().invoke(cli, ["run", str(suite), "-q", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    error = result.stderr.partition("orthobench: error: ")[2]  # before any cell ran
    assert error.count("\n") == 1 and "cannot be reached" in error, result.stderr
    assert not list((tmp_path / "out").rglob("*.parquet"))
    # A cached id costs no network call.
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name: "config.json")
    uncached_hub_id.clear()
    WaferViTTask(model="orthobench-tests/no-such-vit")
    assert uncached_hub_id == []


def test_a_malformed_hub_id_is_one_line_in_the_constructor(in_data_root, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(wafer_vit, "_hub_reachable", lambda endpoint: pytest.fail("network"))
    with pytest.raises(ConfigError) as err:
        WaferViTTask(model="no such vit")
    assert err.value.field == "model" and "\n" not in str(err.value)
    assert "'no such vit' is not a directory, nor a hub id: Repo id must" in str(err.value)


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(404)  # an error status is an answer
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_hub_check_takes_any_answer_and_refuses_none():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.handle_request, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert wafer_vit._hub_reachable(url)
    finally:
        server.server_close()
    assert not wafer_vit._hub_reachable(url)  # closed: connection refused
    assert not wafer_vit._hub_reachable("not a url")
