"""Device resolution: ``auto | cpu | cuda | cuda:N``."""

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
