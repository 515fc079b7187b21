"""Numbers as text: an estimate with its interval, as the probe's tables and the report print it.

A foundation module (docs/design.md, "Layers and data flow"), so that :mod:`orthobench.probe` and
:mod:`orthobench.report` share one formatter without the probe importing the report.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["ci"]


def _three_digits(value: float) -> str:
    return f"{value:.3g}"


def ci(value: float, low: float, high: float, show: Callable[[float], str] = _three_digits) -> str:
    """``value [low, high]``, each through ``show``; ``value`` alone when ``low`` is not finite.

    Args:
        value: The estimate.
        low, high: Its interval's bounds (a NaN ``low``: no interval).
        show: Formats one number; default 3 significant digits (``f"{x:.3g}"``, so NaN prints
            ``nan``; the report passes :func:`orthobench.report.stats.sig`, which prints ``-``).

    Example:
        >>> ci(2.0, 0.5, 8.0), ci(0.0123456, float("nan"), float("nan"))
        ('2 [0.5, 8]', '0.0123')
    """
    if not np.isfinite(low):
        return show(value)
    return f"{show(value)} [{show(low)}, {show(high)}]"
