"""The CNN task: search space, network shapes, seeded determinism, outlier injection, datasets
that are missing or damaged (refused in the constructor) or read from a ``path`` in the real formats."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from orthobench.exceptions import ConfigError, DatasetMissingError, UnknownNameError
from orthobench.tasks.cnn import CNN_SPACE, OUTLIER_SAMPLES, CNNTask, SmallCNN
from orthobench.tasks.datasets import checksums, store
from orthobench.tasks.datasets.store import DATA_DIR_ENV
from tests.tasks.datasets.formats import idx_bytes, served_mnist, write_cifar10, write_mnist

# lr, momentum, weight decay, step size, gamma: a point that trains (test error well below 0.9)
GOOD = np.array([0.05, 0.5, 1e-4, 50, 0.95])


pytestmark = pytest.mark.usefixtures("one_thread")


def test_search_space_is_axs_cnn_benchmark():
    assert [(p.name, p.low, p.high, p.kind) for p in CNN_SPACE.parameters] == [
        ("lr", 1e-6, 0.4, "log"),
        ("momentum", 0.0, 1.0, "float"),
        ("weight_decay", 0.0, 1.0, "float"),
        ("step_size", 1, 100, "int"),
        ("gamma", 0.0, 1.0, "float"),
    ]
    assert CNNTask.optimal_value is None


@pytest.mark.parametrize(
    ("shape", "pool", "hidden_in"),
    [((1, 8, 8), 2, 80), ((1, 28, 28), 3, 1280), ((3, 32, 32), 3, 1620)],
    ids=["digits", "mnist", "cifar10"],
)
def test_network_adapts_to_the_input_shape(shape, pool, hidden_in):
    net = SmallCNN(*shape, n_classes=10)
    assert net.pool == pool and net.hidden.in_features == hidden_in
    assert net.conv.in_channels == shape[0] and net.conv.out_channels == 20
    assert net.hidden.out_features == 64
    assert net(torch.zeros(5, *shape)).shape == (5, 10)


def test_same_seed_same_result_another_seed_differs(device):
    task = CNNTask("digits", batch_size=8, outlier_prob=0.0)
    first = task.evaluate(GOOD, seed=3, device=device)
    again = task.evaluate(GOOD, seed=3, device=device)
    other = task.evaluate(GOOD, seed=4, device=device)
    assert first == again
    assert first.y < 0.5 and not first.is_outlier and first.info["train_samples"] == 1437
    assert (other.y, other.info["last_batch_loss"]) != (first.y, first.info["last_batch_loss"])
    assert first.info["accuracy"] == pytest.approx(1 - first.y)


def test_outlier_rate_and_sample_counts_over_seeds():
    task = CNNTask("digits", outlier_prob=0.2)
    n = 4000
    stops = [task.outlier_samples(seed) for seed in range(n)]
    counts = np.array([s for s in stops if s is not None])
    # binomial(4000, 0.2): sd = sqrt(n p (1 - p)) = 25.3; allow 4 sd
    assert abs(len(counts) - 0.2 * n) < 4 * np.sqrt(n * 0.2 * 0.8)
    low, high = OUTLIER_SAMPLES
    assert counts.min() >= low and counts.max() <= high
    assert counts.min() < low + 20 and counts.max() > high - 20  # the whole range is drawn
    assert abs(counts.mean() - (low + high) / 2) < 4 * 260 / np.sqrt(len(counts))
    assert all(CNNTask("digits", outlier_prob=0.0).outlier_samples(s) is None for s in range(200))
    assert all(CNNTask("digits", outlier_prob=1.0).outlier_samples(s) for s in range(200))


def test_an_outlier_trains_on_its_drawn_number_of_samples(device):
    task = CNNTask("digits", batch_size=8, outlier_prob=0.2)
    seed = next(s for s in range(100) if task.outlier_samples(s) is not None)
    outlier = task.evaluate(GOOD, seed=seed, device=device)
    assert outlier.is_outlier
    assert outlier.info["train_samples"] == task.outlier_samples(seed)
    assert OUTLIER_SAMPLES[0] <= outlier.info["train_samples"] <= OUTLIER_SAMPLES[1]
    clean = CNNTask("digits", batch_size=8, outlier_prob=0.0).evaluate(
        GOOD, seed=seed, device=device
    )
    assert not clean.is_outlier and clean.info["train_samples"] == 1437
    assert outlier.y > clean.y  # stopped early, the same network is worse


def test_an_outlier_stop_past_a_small_training_split_is_not_flagged(tmp_path, device):
    """A ``path`` copy of fewer than 1000 training images trained all of them on an outlier draw,
    and the evaluation was still flagged ``is_outlier``."""
    write_mnist(tmp_path)  # 40 training images: every stop (100 to 1000) lies past the end
    task = CNNTask("mnist", batch_size=8, outlier_prob=1.0, path=str(tmp_path))
    single = task.evaluate(GOOD, seed=0, device=device)
    stacked = task.evaluate_batch(np.stack([GOOD, GOOD]), seeds=[0, 1], device=device)
    for evaluation in (single, *stacked):
        assert not evaluation.is_outlier and evaluation.info["train_samples"] == 40


def test_a_missing_dataset_fails_in_the_constructor(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DatasetMissingError, match="run `orthobench data fetch mnist`"):
        CNNTask("mnist")
    with pytest.raises(DatasetMissingError, match="task param path="):
        CNNTask("cifar10", path=str(tmp_path / "elsewhere"))


def test_a_damaged_copy_in_the_data_directory_fails_in_the_constructor(tmp_path, monkeypatch):
    monkeypatch.setitem(store.CATALOGUE, "mnist", served_mnist(tmp_path / "served"))
    monkeypatch.setattr(checksums, "_VERIFIED", set())
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    store.fetch("mnist")
    CNNTask("mnist")  # the fetched copy passes
    labels = tmp_path / "data" / "mnist" / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(idx_bytes(np.full(40, 3, np.uint8)), mtime=0))
    with pytest.raises(DatasetMissingError, match="is damaged or was replaced"):
        CNNTask("mnist")


def test_bad_parameters_name_their_field():
    with pytest.raises(ConfigError) as err:
        CNNTask("digits", batch_size=0)
    assert err.value.field == "batch_size" and "0" in err.value.reason
    with pytest.raises(ConfigError) as err:
        CNNTask("digits", outlier_prob=1.5)
    assert err.value.field == "outlier_prob"
    with pytest.raises(UnknownNameError, match="known: cifar10, digits, mnist, mnist-5k"):
        CNNTask("svhn")


@pytest.mark.parametrize(
    ("kwargs", "field", "shown"),
    [
        ({"dataset": "mnist", "path": 5}, "path", "int 5"),
        ({"outlier_prob": "0.5"}, "outlier_prob", "str '0.5'"),
        ({"outlier_prob": True}, "outlier_prob", "bool True"),
    ],
)
def test_a_parameter_of_the_wrong_type_names_its_field_and_value(kwargs, field, shown):
    """A non-path ``path`` was os.fspath's TypeError (no field, no value), a string
    ``outlier_prob`` a comparison's, and True passed as probability 1."""
    with pytest.raises(ConfigError) as err:
        CNNTask(**kwargs)
    assert err.value.field == field and shown in err.value.reason
    assert "\n" not in str(err.value)


def test_a_numpy_integer_seed_is_the_same_seed(device):
    """Seeds are hashed by their ``repr`` (``derive_seed``), and ``np.int64(3)``'s is not ``3``'s:
    the same seed as a numpy integer drew another outlier, image order and initialization."""
    task = CNNTask("digits", batch_size=32, outlier_prob=0.5)
    seeds = range(8)
    assert [task.outlier_samples(np.int64(s)) for s in seeds] == [
        task.outlier_samples(s) for s in seeds
    ]
    assert task.evaluate(GOOD, seed=np.int64(3), device=device) == task.evaluate(
        GOOD, seed=3, device=device
    )


@pytest.mark.parametrize("dataset", ["mnist", "cifar10"])
def test_trains_on_files_in_the_real_formats(tmp_path, dataset, device):
    if dataset == "mnist":
        write_mnist(tmp_path)
        location, n_train, n_test = tmp_path, 40, 20
    else:
        location, n_train, n_test = write_cifar10(tmp_path, per_batch=8, archive=True), 40, 8
    task = CNNTask(dataset, batch_size=4, outlier_prob=0.0, path=str(location))
    evaluation = task.evaluate(GOOD, seed=0, device=device)
    assert evaluation.info["train_samples"] == n_train
    assert evaluation.info["accuracy"] * n_test == pytest.approx(
        round(evaluation.info["accuracy"] * n_test)
    )
    assert 0.0 <= evaluation.y <= 1.0
    assert evaluation == task.evaluate(GOOD, seed=0, device=device)
