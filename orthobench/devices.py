"""Device resolution (``auto | cpu | cuda | cuda:N``) and the rule for where GP fits run."""

from __future__ import annotations

import torch

from orthobench.config.names import check_device
from orthobench.exceptions import DeviceError


def resolve_device(spec: str) -> torch.device:
    """Turn a device spec into a ``torch.device``; ``auto`` picks CUDA when available.

    Raises:
        ConfigError: for a spec that is none of ``auto | cpu | cuda | cuda:N``.
        DeviceError: when CUDA (or the given index) is asked for but not available.
    """
    check_device(spec)
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device {spec!r} was asked for, but CUDA is not available here (torch {torch.__version__}); use --device cpu or auto."
        )
    device = torch.device(spec)
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(
            f"device {spec!r} was asked for, but only {torch.cuda.device_count()} CUDA device(s) exist."
        )
    return device


#: Where a GP's hyperparameters are MAP-fitted: ``auto`` (:func:`fit_device`'s rule), ``cpu``,
#: or ``device`` (the optimizer's own device).
FIT_DEVICES: tuple[str, ...] = ("auto", "cpu", "device")

#: ``fit_device: auto`` fits GPs on at most this many training points on the CPU. A fit is
#: L-BFGS-B in scipy, so every objective evaluation (a few dozen tensor operations on ``n x n``
#: matrices) ends in a host synchronization: on a GPU each operation costs a kernel launch
#: whatever ``n``, on one CPU core the Cholesky and inverse cost about ``n^3`` flops. The value
#: is where the two crossed on one machine (``benchmarks/fit_device_benchmark.py``;
#: docs/benchmarks.md, "CUDA: the CPU and the GPU of one machine"); the crossing moves with the
#: CPU and the GPU.
CPU_FIT_MAX_POINTS = 192


#: Where qLogEI's and qUCB's acquisition is maximized: ``auto`` (:func:`acq_device`'s rule),
#: ``cpu``, or ``device`` (the optimizer's own device).
ACQ_DEVICES: tuple[str, ...] = FIT_DEVICES

#: ``acq_device: auto`` maximizes qLogEI's and qUCB's acquisition on the CPU for GPs of at most
#: this many points. Their acquisition is one GP posterior per candidate batch (OrthoBO's is S of
#: them), maximized by ``optimize_acqf``'s L-BFGS-B, which waits on the host every iteration.
#: The GPU was slower at every size measured, 256 the largest (``benchmarks/step_benchmark.py``;
#: docs/benchmarks.md, "CUDA: the CPU and the GPU of one machine"); above it the rule takes the
#: device, unmeasured.
CPU_ACQ_MAX_POINTS = 256


def _placement(
    rule: str, name: str, device: torch.device, n: int, cpu_max_points: int
) -> torch.device:
    if rule not in FIT_DEVICES:
        raise ValueError(f"`{name}` must be one of {FIT_DEVICES}, but got {rule!r}.")
    if rule == "cpu" or (rule == "auto" and n <= cpu_max_points):
        return torch.device("cpu")
    return device


def fit_device(rule: str, device: torch.device, n: int) -> torch.device:
    """The device on which a GP on ``n`` training points is fitted, for an optimizer on ``device``.

    Args:
        rule: One of :data:`FIT_DEVICES`. ``auto``: the CPU for ``n <= CPU_FIT_MAX_POINTS``, else
            ``device``; ``cpu``: always the CPU; ``device``: always ``device``.
        device: The optimizer's device (where its acquisition runs).
        n: Training points of the GP.

    Returns:
        The fit's device. Callers move the fitted model (and its Laplace posterior) to where the
        acquisition runs afterwards.
    """
    return _placement(rule, "fit_device", device, n, CPU_FIT_MAX_POINTS)


def acq_device(rule: str, device: torch.device, n: int) -> torch.device:
    """The device on which qLogEI's or qUCB's acquisition on a GP of ``n`` points is maximized.

    Args:
        rule: One of :data:`ACQ_DEVICES`. ``auto``: the CPU for ``n <= CPU_ACQ_MAX_POINTS``, else
            ``device``; ``cpu``: always the CPU; ``device``: always ``device``.
        device: The optimizer's device.
        n: Training points of the GP.
    """
    return _placement(rule, "acq_device", device, n, CPU_ACQ_MAX_POINTS)
