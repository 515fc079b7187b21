r"""Fine-tuning a frozen ViT's head on WM811K wafer maps: the OrthoBO paper's case study.

One evaluation trains a linear classification head on the cached features of a frozen ViT-B/16
[Dosovitskiy2021vit]_ and returns ``1 - macro F1`` on the held-out 20% of the labelled WM811K
maps [Wu2015wafer]_ (:class:`WaferViTTask`, search space :data:`WAFER_VIT_SPACE`).

References:

.. [Dosovitskiy2021vit] A. Dosovitskiy et al. An Image is Worth 16x16 Words: Transformers for
   Image Recognition at Scale. ICLR 2021 (arXiv:2010.11929).
.. [Wu2015wafer] M.-J. Wu, J.-S. R. Jang and J.-L. Chen. Wafer Map Failure Pattern Recognition
   and Similarity Ranking for Large-Scale Data Sets. IEEE Transactions on Semiconductor
   Manufacturing 28(1), 1-12, 2015.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.util
import math
import operator
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from orthobench.exceptions import ConfigError, one_line, show_value
from orthobench.seeding import derive_seed, torch_generator, torch_seed
from orthobench.space import Parameter, SearchSpace
from orthobench.tasks.base import Evaluation, Task
from orthobench.tasks.datasets.features import (
    CachedFeatures,
    FeatureKey,
    extract_features,
    load_or_extract,
)
from orthobench.tasks.datasets.wm811k import WM811K, check_wm811k, load_wm811k

if TYPE_CHECKING:
    from transformers import ViTConfig, ViTModel

#: The paper's five fine-tuning parameters (appendix, "Case study experiment").
WAFER_VIT_SPACE = SearchSpace(
    (
        Parameter(name="lr", low=1e-4, high=1e-1, kind="log"),
        Parameter(name="momentum", low=0.0, high=1.0),
        Parameter(name="weight_decay", low=0.0, high=1.0),
        Parameter(name="step_size", low=1, high=100, kind="int"),
        Parameter(name="gamma", low=0.0, high=1.0),
    )
)

#: The default backbone: ViT-B/16 pretrained on ImageNet-21k.
DEFAULT_MODEL = "google/vit-base-patch16-224-in21k"
#: The ``model`` value that builds the small random-weight ViT of :func:`tiny_vit_config`.
TINY_RANDOM = "tiny-random"
BACKBONE_DTYPES = ("float32", "bfloat16", "float16")

_TINY_SEED = 0
_PREDICT_CHUNK = 4096  # feature rows per head forward pass at prediction
_HUB_TIMEOUT_S = 5  # for the hub to answer the constructor's check of an uncached hub id


def tiny_vit_config() -> ViTConfig:
    """A ViT small enough for CPU tests: 48 x 48 inputs, 16 x 16 patches (9 tokens + CLS),
    hidden size 32, 2 layers, 2 heads, MLP width 64."""
    from transformers import ViTConfig

    return ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=48,
        patch_size=16,
        num_channels=3,
    )


def _patch_size(model: str) -> int | None:
    """The patch side of ``model``'s ViT (16 for ViT-B/16 and ``tiny-random``), or None where its
    config cannot be read without the network or ``transformers`` (the first evaluation's
    :func:`load_backbone` then names the cause)."""
    if model == TINY_RANDOM:
        return tiny_vit_config().patch_size
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(
            str(Path(model).expanduser()) if _is_path(model) else model, local_files_only=True
        )
    except (ImportError, OSError, ValueError):
        return None
    patch = getattr(config, "patch_size", None)
    return patch if isinstance(patch, int) else None


def _is_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or os.path.isdir(model)


def _hf_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _hub_reachable(endpoint: str) -> bool:
    """Whether ``endpoint`` answers an HTTP ``HEAD`` within ``_HUB_TIMEOUT_S`` seconds (an error
    status is an answer)."""
    try:
        request = urllib.request.Request(endpoint, method="HEAD")
        with urllib.request.urlopen(request, timeout=_HUB_TIMEOUT_S):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError, http.client.HTTPException):  # URLError is an OSError
        return False


def model_identity(model: str) -> str:
    """What the features of ``model`` depend on, as a string for :class:`FeatureKey`.

    A hub id as given (its published weights are taken as fixed: to pin other weights, save
    them to a directory); ``tiny-random`` with the ``transformers`` version (its initialization
    code draws the weights); a local directory as its absolute path and a fingerprint of its
    files' names, sizes and modification times, so changed weights are not served stale
    features.
    """
    if model == TINY_RANDOM:
        import transformers

        return f"{TINY_RANDOM}@transformers-{transformers.__version__}"
    if not _is_path(model):
        return model
    root = Path(model).expanduser().resolve()
    digest = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        stat = f.stat()
        digest.update(f"{f.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"{root}@{digest.hexdigest()[:16]}"


#: What to do when a model cannot be read: the end of its error line.
_HUB_HINT = (
    " (a hub id needs the network once, or HF_HUB_OFFLINE=1 with it in the local cache; or pass "
    "a save_pretrained directory)."
)


def load_backbone(model: str) -> ViTModel:
    """The frozen ViT (``eval`` mode, no gradients, on the CPU) named by ``model``.

    Raises:
        ConfigError: (field ``model``) when ``transformers`` cannot load it (not downloaded,
            offline, not a ViT directory).
    """
    try:
        from transformers import ViTModel
    except ImportError as err:
        # Installed but failing (an import stopped half-way): not a missing package.
        missing = importlib.util.find_spec("transformers") is None
        fix = "pip install 'orthobench[vision]'" if missing else "its import failed"
        raise ConfigError(
            "model", f"the wafer ViT task needs transformers: {fix} ({one_line(str(err))})."
        ) from err
    if model == TINY_RANDOM:
        with torch_seed(_TINY_SEED):
            backbone = ViTModel(tiny_vit_config(), add_pooling_layer=False)
    else:
        try:
            backbone = ViTModel.from_pretrained(
                str(Path(model).expanduser()) if _is_path(model) else model,
                add_pooling_layer=False,
            )
        except (OSError, ValueError) as err:
            raise ConfigError(
                "model", f"cannot load a ViT from {model!r}: {one_line(str(err))}{_HUB_HINT}"
            ) from err
    return backbone.requires_grad_(False).eval()


def vit_features(backbone: ViTModel, pixels: torch.Tensor, image_size: int) -> torch.Tensor:
    """The ``[CLS]`` token of the frozen backbone's last hidden state.

    Args:
        backbone: A ``ViTModel`` (its device and dtype are used).
        pixels: ``n x 3 x s x s`` normalized maps (any device).
        image_size: Side the maps are resized to (nearest-neighbour) before the forward pass;
            position embeddings are interpolated when it differs from the model's.

    Returns:
        ``n x h`` features on the backbone's device, in its dtype.
    """
    param = next(backbone.parameters())
    pixels = pixels.to(device=param.device, dtype=param.dtype)
    if pixels.shape[-1] != image_size or pixels.shape[-2] != image_size:
        pixels = F.interpolate(pixels, size=(image_size, image_size), mode="nearest-exact")
    out = backbone(
        pixel_values=pixels,
        interpolate_pos_encoding=image_size != backbone.config.image_size,
    )
    return out.last_hidden_state[:, 0]


def class_weights(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Inverse-frequency weights ``w_c = n / (num_classes * n_c)``; 0 for an absent class.

    Args:
        labels: ``n`` integer labels.
        num_classes: Number of classes ``K``.

    Returns:
        ``K`` ``float32`` weights on ``labels``' device.
    """
    counts = torch.bincount(labels, minlength=num_classes).to(torch.float32)
    weights = labels.numel() / (num_classes * counts)
    return torch.where(counts > 0, weights, torch.zeros_like(weights))


@dataclass(frozen=True, eq=False)
class HeadFit:
    """A trained head and its training losses.

    Attributes:
        head: The ``Linear(h, K)`` head, on the training device.
        losses: The weighted cross-entropy of every batch, in order (``epochs * ceil(n / b)``).
        final_lr: The learning rate after the last scheduler step.
    """

    head: nn.Linear
    losses: list[float]
    final_lr: float


def train_head(
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    encode: Callable[[torch.Tensor], torch.Tensor],
    in_features: int,
    num_classes: int,
    params: Mapping[str, float],
    epochs: int,
    batch_size: int,
    seed: int,
) -> HeadFit:
    """Train a linear head on ``encode(inputs)`` by SGD with a per-batch StepLR schedule.

    ``encode`` is the identity on cached features, or the frozen backbone on pixels: both give
    the same head, since they see the same features in the same order.

    Args:
        inputs: ``n x ...`` inputs of ``encode`` (features, or pixels).
        labels: ``n`` integer labels; their device is the training device.
        encode: Maps a batch of inputs to its ``b x h`` features on that device.
        in_features: ``h``.
        num_classes: ``K``.
        params: ``lr``, ``momentum``, ``weight_decay``, ``step_size`` and ``gamma``.
        epochs: Passes over the data.
        batch_size: Inputs per optimizer step.
        seed: Keys the head's initialization ``(seed, "init")`` and the batch order
            ``(seed, "order")``.

    Returns:
        The :class:`HeadFit`.
    """
    device = labels.device
    seed = operator.index(seed)  # seeds are hashed by repr: np.int64(3) is not 3 there
    with torch_seed(derive_seed(seed, "init")):
        head = nn.Linear(in_features, num_classes)  # PyTorch's default init, drawn on the CPU
    head.to(device)
    optimizer = torch.optim.SGD(
        head.parameters(),
        lr=params["lr"],
        momentum=params["momentum"],
        weight_decay=params["weight_decay"],
    )
    scheduler = torch.optim.lr_scheduler.StepLR(
        optimizer, step_size=int(params["step_size"]), gamma=params["gamma"]
    )
    loss_fn = nn.CrossEntropyLoss(weight=class_weights(labels, num_classes))
    order = torch_generator(seed, "order")
    losses: list[torch.Tensor] = []
    for _ in range(epochs):
        for batch in torch.randperm(labels.numel(), generator=order).split(batch_size):
            features = encode(inputs[batch.to(inputs.device)]).to(torch.float32)
            loss = loss_fn(head(features), labels[batch.to(device)])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.detach())
    return HeadFit(
        head=head,
        losses=torch.stack(losses).cpu().tolist() if losses else [],
        final_lr=float(scheduler.get_last_lr()[0]),
    )


def predict(
    head: nn.Linear,
    inputs: torch.Tensor,
    *,
    encode: Callable[[torch.Tensor], torch.Tensor],
    chunk: int = _PREDICT_CHUNK,
) -> torch.Tensor:
    """Predicted classes ``argmax head(encode(inputs))``: ``n`` ``int64`` on the CPU."""
    out = []
    with torch.no_grad():
        for part in inputs.split(chunk):
            out.append(head(encode(part).to(torch.float32)).argmax(dim=1).cpu())
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64)


def macro_f1(labels: np.ndarray, predicted: np.ndarray) -> float:
    """scikit-learn's macro F1 over the classes present in either array (0 where undefined)."""
    from sklearn.metrics import f1_score

    return float(f1_score(labels, predicted, average="macro", zero_division=0))


class WaferViTTask(Task):
    """1 - macro F1 of a linear head on a frozen ViT-B/16, on WM811K wafer maps (the OrthoBO paper's case study).

    One evaluation trains a linear classification head on top of a frozen ViT-B/16
    [Dosovitskiy2021vit]_ and returns ``y = 1 - macro F1`` of its predictions on the held-out 20%
    of the labelled WM811K maps (scikit-learn's ``f1_score(average="macro")``: the unweighted mean
    of the per-class F1 scores, so the rare failure types count as much as ``none``). No known
    optimum: :attr:`optimal_value` is None and reports show the best-so-far ``y``.

    Search space (the paper's appendix, "Case study experiment"; it builds on the CNN task of
    :mod:`orthobench.tasks.cnn`):

    ================  ================  ======  ===============================================
    parameter         bounds            scale   meaning
    ================  ================  ======  ===============================================
    ``lr``            [1e-4, 1e-1]      log     SGD learning rate
    ``momentum``      [0, 1]            linear  SGD momentum
    ``weight_decay``  [0, 1]            linear  SGD weight decay (L2)
    ``step_size``     {1, ..., 100}     int     StepLR period, in optimizer steps (batches)
    ``gamma``         [0, 1]            linear  StepLR factor
    ================  ================  ======  ===============================================

    Data (:mod:`orthobench.tasks.datasets.wm811k`): the labelled maps of the public
    ``LSWMD.pkl``, converted once by ``orthobench data convert-wm811k PATH/LSWMD.pkl`` into
    ``48 x 48`` maps with a stratified 80/20 split; pixels ``v / 2`` then ImageNet-normalized, the
    one channel repeated three times. The ViT sees them at ``image_size`` (default: the model's
    own, 224 for ViT-B/16): the maps are upsampled by nearest-neighbour sampling
    (``"nearest-exact"``, which keeps each die a uniform block), or the ViT's position embeddings
    are interpolated when ``image_size`` differs from the model's (``image_size: 48`` gives a
    ViT-B/16 9 patches instead of 196: a far cheaper extraction, further from the pretraining
    resolution). The constructor checks the file's format from its array headers
    (:func:`~orthobench.tasks.datasets.wm811k.check_wm811k`), so a ``path`` that is not a
    converted file fails before any cell runs, with one line; the first evaluation reads the
    arrays and verifies their checksum.

    Model: ``ViTModel`` of Hugging Face ``transformers`` (the ``vision`` extra), loaded from
    ``model``: a hub id (default :data:`DEFAULT_MODEL`, ImageNet-21k pretrained), or a local
    directory written by ``save_pretrained``. Offline: download once
    (``hf download google/vit-base-patch16-224-in21k``, ``huggingface_hub``'s CLI) and set
    ``HF_HUB_OFFLINE=1``, or pass the directory; the constructor refuses a hub id that is not in
    the local cache when ``HF_HUB_OFFLINE`` is set or the hub does not answer a request within
    5 s (a cached id costs no network call). ``model: tiny-random`` builds a 2-layer,
    32-wide ViT for 48 x 48 inputs with weights drawn from a fixed seed (:func:`tiny_vit_config`):
    no download, for tests. The features are the ``[CLS]`` token of the last hidden state (after
    the final layer norm): ``h`` numbers per map (768 for ViT-B).

    Frozen backbone, cached features: the backbone is frozen and the maps are not augmented, so
    its features are a pure function of the map. They are computed once per (model, dataset
    checksum, image size, device type, dtype), stored in ``<data directory>/cache/``
    (:mod:`orthobench.tasks.datasets.features`), and every evaluation trains the head on them:
    the same head and losses as training through the backbone (the tests check it), without a
    ViT forward pass over every map in every evaluation (ViT-B/16 at 224 px: about 17.6 G
    multiply-adds per map, 3 P for the 172,950 labelled maps). ``info`` reports both costs:
    ``feature_seconds`` (the one-off extraction, as measured when the features were computed) and
    ``head_seconds`` (this evaluation's training and prediction).

    Training (as the CNN task): a ``Linear(h, 9)`` head, ``SGD(lr, momentum, weight_decay)`` and
    ``StepLR(step_size, gamma)`` stepped after every batch, ``epochs`` passes over the training
    part in batches of ``batch_size`` (the paper gives neither; defaults 1 and 64), and a
    cross-entropy loss weighted by inverse class frequency on the training part,
    ``w_c = n / (9 n_c)`` (the paper's "class-weighted cross-entropy"; scikit-learn's "balanced"
    weights, :func:`class_weights`).

    Randomness: from the evaluation's ``seed`` through :func:`orthobench.seeding.derive_seed`:
    ``(seed, "init")`` the head's initialization (drawn on the CPU, the same on every device) and
    ``(seed, "order")`` the batch order. The same seed and point give the same ``y`` on the same
    device (docs/design.md, "Seeds and determinism").

    Args:
        model: Hugging Face hub id, a local ``save_pretrained`` directory, or ``tiny-random``
            (a small random-weight ViT for tests; no download).
        path: The converted WM811K ``.npz``; default ``<data directory>/wm811k/wm811k.npz``.
        image_size: Side length the ViT sees; default (None) the model's own (224 for ViT-B/16).
            At least the model's patch size (checked where its config is readable offline).
        epochs: Passes of head training over the training part.
        batch_size: Head training batch size.
        feature_batch_size: Maps per backbone forward pass during the one-off extraction.
        backbone_dtype: Dtype of that forward pass: ``float32``, ``bfloat16`` or ``float16``
            (the features are stored as float32; the dtype is part of the cache key).

    Raises:
        DatasetMissingError: when the converted dataset is not there, or ``path`` is not a
            converted file (not an ``.npz``, an array missing or of another kind or shape, an
            array of Python objects: :func:`~orthobench.tasks.datasets.wm811k.check_wm811k`),
            naming the file and ``orthobench data convert-wm811k PATH/LSWMD.pkl``.
        ConfigError: for a bad setting, or a hub id missing from the cache when
            ``HF_HUB_OFFLINE`` is set or the hub cannot be reached.
    """

    optimal_value = None

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        path: str | None = None,
        image_size: int | None = None,
        epochs: int = 1,
        batch_size: int = 64,
        feature_batch_size: int = 256,
        backbone_dtype: str = "float32",
    ) -> None:
        for name, value in (
            ("epochs", epochs),
            ("batch_size", batch_size),
            ("feature_batch_size", feature_batch_size),
            ("image_size", 1 if image_size is None else image_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(name, f"must be an integer >= 1, but got {value!r}.")
        if backbone_dtype not in BACKBONE_DTYPES:
            raise ConfigError(
                "backbone_dtype", f"must be one of {BACKBONE_DTYPES}, but got {backbone_dtype!r}."
            )
        if not isinstance(model, str) or not model:
            raise ConfigError("model", f"must be a hub id or a directory, but got {model!r}.")
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ConfigError("path", f"must be a path or None, but got {show_value(path)}.")
        self.path = check_wm811k(path)  # its array headers; the first evaluation reads it
        if model != TINY_RANDOM:
            self._check_model_available(model)
        # A side below one patch fails in the patch embedding at every evaluation.
        patch = None if image_size is None else _patch_size(model)
        if patch is not None and image_size < patch:
            raise ConfigError(
                "image_size",
                f"must be at least the model's patch size {patch}, but got {image_size}.",
            )
        super().__init__(WAFER_VIT_SPACE)
        self.model = model
        self.image_size = image_size
        self.epochs = epochs
        self.batch_size = batch_size
        self.feature_batch_size = feature_batch_size
        self.backbone_dtype = backbone_dtype
        self._data: WM811K | None = None
        self._features: dict[str, tuple[torch.Tensor, CachedFeatures]] = {}

    @staticmethod
    def _check_model_available(model: str) -> None:
        if _is_path(model):
            if not Path(model).expanduser().is_dir():
                raise ConfigError("model", f"{model!r} is not a directory.")
            return
        try:
            from huggingface_hub import constants, try_to_load_from_cache
        except ImportError:
            return  # without the vision extra, the first evaluation names what to install
        try:
            if isinstance(try_to_load_from_cache(model, "config.json"), str):
                return  # cached: no network call
        except ValueError as err:  # not a hub id's form
            raise ConfigError(
                "model", f"{model!r} is not a directory, nor a hub id: {one_line(str(err))}"
            ) from None
        fix = (
            f"run `hf download {model}` where the network is reachable, or pass a "
            "save_pretrained directory."
        )
        if _hf_offline():
            raise ConfigError(
                "model",
                f"{model!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: {fix}",
            )
        # Without the hub, every cell retried its downloads for ~25 s, then failed.
        if not _hub_reachable(constants.ENDPOINT):
            raise ConfigError(
                "model",
                f"{model!r} is not in the Hugging Face cache and the hub {constants.ENDPOINT} "
                f"cannot be reached: {fix}",
            )

    def data(self) -> WM811K:
        """The converted dataset (read and checksum-verified on first use, then kept)."""
        if self._data is None:
            self._data = load_wm811k(self.path)
        return self._data

    def features(self, device: torch.device) -> tuple[torch.Tensor, CachedFeatures, str]:
        """The ``N x h`` features of every map on ``device``, and where they came from.

        Returns:
            ``(features, cached, source)``: the tensor, the cache entry, and ``"extracted"``
            (computed by this call), ``"cache"`` (read from the cache file) or ``"memory"``
            (already loaded by this task).
        """
        device = torch.device(device)
        if str(device) in self._features:
            tensor, cached = self._features[str(device)]
            return tensor, cached, "memory"
        data = self.data()
        image_size = self.image_size or self._model_image_size()
        backbone: list[ViTModel] = []  # loaded only when the features must be computed

        def encode(pixels: torch.Tensor) -> torch.Tensor:
            return vit_features(backbone[0], pixels, image_size)

        def extract() -> np.ndarray:
            backbone.append(
                load_backbone(self.model).to(
                    device=device, dtype=getattr(torch, self.backbone_dtype)
                )
            )
            return extract_features(encode, data.pixels, len(data.labels), self.feature_batch_size)

        key = FeatureKey(
            model=model_identity(self.model),
            dataset_sha256=data.sha256,
            image_size=image_size,
            device=device.type,
            dtype=self.backbone_dtype,
        )
        cached = load_or_extract(key, extract, n=len(data.labels))
        tensor = torch.from_numpy(cached.features).to(device)
        self._features[str(device)] = (tensor, cached)
        return tensor, cached, "extracted" if cached.extracted else "cache"

    def _model_image_size(self) -> int:
        if self.model == TINY_RANDOM:
            return tiny_vit_config().image_size
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(
                str(Path(self.model).expanduser()) if _is_path(self.model) else self.model
            )
        except (OSError, ValueError) as err:
            raise ConfigError(
                "model",
                f"cannot read the config of {self.model!r}: {one_line(str(err))}{_HUB_HINT}",
            ) from err
        return int(config.image_size)

    def prepare(self, device: torch.device) -> None:
        """The features on ``device`` (reading the dataset, importing transformers, extracting or
        reading the cache: minutes of a GPU on the real data) and the first imports of training
        and scoring: under an evaluation's time limit they timed out every evaluation, and a
        stopped import of ``ViTModel`` read as transformers not installed."""
        self.features(device)
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # imports torch._dynamo
        macro_f1(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))  # imports sklearn

    def evaluate(self, x: np.ndarray, *, seed: int, device: torch.device) -> Evaluation:
        params = self.space.as_dict(x)
        device = torch.device(device)
        t0 = time.perf_counter()
        features, cached, source = self.features(device)
        feature_load_seconds = time.perf_counter() - t0
        data = self.data()
        labels = torch.from_numpy(data.labels).to(device)
        train = torch.from_numpy(data.train_index).to(device)
        test = torch.from_numpy(data.test_index).to(device)

        t0 = time.perf_counter()
        fit = train_head(
            features[train],
            labels[train],
            encode=lambda f: f,
            in_features=features.shape[1],
            num_classes=data.num_classes,
            params=params,
            epochs=self.epochs,
            batch_size=self.batch_size,
            seed=seed,
        )
        predicted = predict(fit.head, features[test], encode=lambda f: f).numpy()
        head_seconds = time.perf_counter() - t0  # predict() synchronized by copying to the CPU

        truth = data.labels[data.test_index]
        f1 = macro_f1(truth, predicted)
        per_batch = len(fit.losses) // self.epochs if fit.losses else 0
        last_epoch = np.asarray(fit.losses[-per_batch:]) if per_batch else np.array([])
        mean_loss = float(last_epoch.mean()) if last_epoch.size else math.nan
        return Evaluation(
            y=1.0 - f1,
            info={
                "macro_f1": f1,
                "accuracy": float((predicted == truth).mean()),
                "last_epoch_loss": mean_loss if math.isfinite(mean_loss) else None,
                "final_lr": fit.final_lr,
                "features": source,
                "feature_seconds": cached.extraction_seconds,
                "feature_load_seconds": feature_load_seconds,
                "feature_device": cached.key.device,
                # What the features are of: the results store cannot tell a dataset converted
                # again, or a model directory saved again, from the one a stored cell used.
                "dataset_sha256": cached.key.dataset_sha256,
                "model": cached.key.model,
                "head_seconds": head_seconds,
                "n_train": int(train.numel()),
                "n_test": int(test.numel()),
            },
        )
