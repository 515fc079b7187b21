r"""Synthetic wafer maps with the WM811K failure-pattern shapes, and LSWMD-format pickles of them.

For tests: :func:`wafer_map` draws a map of one of the nine WM811K classes [Wu2015wafer]_, and
:func:`synthetic_lswmd` a DataFrame in the layout of the public ``LSWMD.pkl``, so the converter
(:mod:`orthobench.tasks.datasets.wm811k`) and the ``wafer_vit`` task are tested end to end
without the 2 GB file.

References:
    .. [Wu2015wafer] M.-J. Wu, J.-S. R. Jang and J.-L. Chen, "Wafer Map Failure Pattern
       Recognition and Similarity Ranking for Large-Scale Data Sets", IEEE Transactions on
       Semiconductor Manufacturing 28(1), 1-12, 2015. doi:10.1109/TSM.2014.2364237
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: The WM811K classes in the order of their integer labels: the 8 failure types, then ``none``.
WAFER_CLASSES: tuple[str, ...] = (
    "Center",
    "Donut",
    "Edge-Loc",
    "Edge-Ring",
    "Loc",
    "Near-full",
    "Random",
    "Scratch",
    "none",
)

_BACKGROUND = 0.02  # probability of an isolated failing die anywhere on the wafer
# Probability that a die inside the pattern's region fails (the region is the whole wafer for
# Near-full and Random).
_IN_PATTERN = {"Near-full": 0.9, "Random": 0.3}
_IN_PATTERN_DEFAULT = 0.85


def _pattern_mask(
    pattern: str, x: np.ndarray, y: np.ndarray, die: float, rng: np.random.Generator
) -> np.ndarray:
    """Dies (boolean, the shape of ``x``) in the region of ``pattern``.

    ``x``, ``y`` are die centres and ``die`` the die pitch, all in units of the wafer radius.
    """
    r = np.hypot(x, y)
    angle = np.arctan2(y, x)
    if pattern == "Center":
        return r < rng.uniform(0.2, 0.3)
    if pattern == "Donut":
        inner = rng.uniform(0.3, 0.4)
        return (r > inner) & (r < inner + rng.uniform(0.2, 0.3))
    if pattern == "Edge-Loc":
        centre = rng.uniform(-np.pi, np.pi)
        gap = np.abs(np.angle(np.exp(1j * (angle - centre))))
        return (r > 0.75) & (gap < np.deg2rad(rng.uniform(20, 30)))
    if pattern == "Edge-Ring":
        return r > rng.uniform(0.78, 0.85)
    if pattern == "Loc":
        rho, phi = rng.uniform(0.35, 0.55), rng.uniform(-np.pi, np.pi)
        return np.hypot(x - rho * np.cos(phi), y - rho * np.sin(phi)) < rng.uniform(0.15, 0.2)
    if pattern in ("Near-full", "Random"):
        return np.ones_like(r, dtype=bool)
    if pattern == "Scratch":
        # A segment through a random point, at a random angle: about one die wide, and within
        # half a random length of that point along it.
        px, py = rng.uniform(-0.4, 0.4, size=2)
        theta = rng.uniform(0, np.pi)
        along = (x - px) * np.cos(theta) + (y - py) * np.sin(theta)
        across = -(x - px) * np.sin(theta) + (y - py) * np.cos(theta)
        return (np.abs(across) < max(0.04, 0.6 * die)) & (np.abs(along) < rng.uniform(0.3, 0.6))
    if pattern == "none":
        return np.zeros_like(r, dtype=bool)
    raise ValueError(f"Unknown wafer pattern {pattern!r}; known: {', '.join(WAFER_CLASSES)}.")


def wafer_map(pattern: str, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """One synthetic wafer map of a WM811K class.

    A wafer map is a 2-D ``uint8`` array over a die grid: ``0`` off the wafer, ``1`` a passing
    die, ``2`` a failing die, as in WM811K. The failing dies of ``pattern`` are drawn on a disc of
    radius ``R`` (die coordinates relative to the wafer centre, ``r`` the distance to it):

    - ``Center``: a blob around the centre, ``r < 0.3 R``;
    - ``Donut``: a ring inside the wafer, ``0.35 R < r < 0.65 R``;
    - ``Edge-Loc``: a cluster on the rim, ``r > 0.75 R`` within an angular sector of about 50
      degrees;
    - ``Edge-Ring``: the whole rim, ``r > 0.8 R``;
    - ``Loc``: a blob of radius ``0.2 R`` away from the centre and the rim;
    - ``Near-full``: nearly every die fails (probability 0.9);
    - ``Random``: dies fail independently with probability 0.3 everywhere;
    - ``Scratch``: a line segment about one die wide across part of the wafer;
    - ``none``: no pattern.

    Every map also gets isolated failing dies (probability 0.02), as real maps have; inside a
    pattern a die fails with probability 0.85 (0.9 for Near-full, 0.3 for Random), so patterns
    have holes.

    Args:
        pattern: One of :data:`WAFER_CLASSES`.
        shape: ``(rows, cols)`` of the die grid; the wafer is the inscribed ellipse.
        rng: Source of every random draw.

    Returns:
        ``rows x cols`` ``uint8`` array: ``0`` off the wafer, ``1`` passing, ``2`` failing dies.

    Example:
        >>> m = wafer_map("Edge-Ring", (30, 30), np.random.default_rng(0))
        >>> m.shape, m.dtype, sorted(np.unique(m).tolist())
        ((30, 30), dtype('uint8'), [0, 1, 2])
    """
    rows, cols = shape
    if rows < 2 or cols < 2:
        raise ValueError(f"A wafer map needs at least 2 x 2 dies, but got {shape=}.")
    # Die centres in units of the wafer radius (an ellipse when the grid is not square).
    y = (np.arange(rows) + 0.5) / rows * 2 - 1
    x = (np.arange(cols) + 0.5) / cols * 2 - 1
    y, x = np.meshgrid(y, x, indexing="ij")
    on_wafer = np.hypot(x, y) <= 1.0
    mask = _pattern_mask(pattern, x, y, 2.0 / min(rows, cols), rng)
    u = rng.random(shape)
    failing = (mask & (u < _IN_PATTERN.get(pattern, _IN_PATTERN_DEFAULT))) | (u < _BACKGROUND)
    out = np.zeros(shape, dtype=np.uint8)
    out[on_wafer] = 1
    out[on_wafer & failing] = 2
    return out


def synthetic_lswmd(
    n_per_class: int = 4,
    *,
    n_unlabelled: int = 8,
    sizes: Sequence[tuple[int, int]] = ((26, 26), (32, 29), (45, 48), (53, 58), (64, 64)),
    seed: int = 0,
) -> pd.DataFrame:
    """A DataFrame in the layout of the public ``LSWMD.pkl``.

    Columns as in the public file: ``waferMap`` (2-D ``uint8`` arrays of varying sizes),
    ``dieSize`` (number of dies on the wafer, float), ``lotName`` (``"lot1"``, ...),
    ``waferIndex`` (1-25, float), ``trianTestLabel`` (sic: ``[['Training']]`` / ``[['Test']]``) and
    ``failureType`` (``[['Center']]`` ... ``[['none']]``); an unlabelled map has empty ``[]``
    arrays (shape ``0 x 0``) in both label columns, as most of the public file's maps do.

    Args:
        n_per_class: Labelled maps per class of :data:`WAFER_CLASSES`.
        n_unlabelled: Maps without a label (their pattern is drawn at random).
        sizes: Die-grid shapes, cycled through (the public file's maps vary from about
            ``6 x 21`` to ``300 x 202`` dies).
        seed: Seed of every draw.

    Returns:
        ``9 * n_per_class + n_unlabelled`` rows in a seeded random order.
    """
    import pandas as pd

    if n_per_class < 0 or n_unlabelled < 0:
        raise ValueError(f"Counts must be >= 0, but got {n_per_class=}, {n_unlabelled=}.")
    rng = np.random.default_rng(seed)
    patterns = [c for c in WAFER_CLASSES for _ in range(n_per_class)]
    patterns += [None] * n_unlabelled
    order = rng.permutation(len(patterns))
    rows = []
    for i, k in enumerate(order):
        label = patterns[k]
        shape = tuple(sizes[i % len(sizes)])
        drawn = label if label is not None else WAFER_CLASSES[rng.integers(len(WAFER_CLASSES))]
        m = wafer_map(drawn, shape, rng)
        empty = np.zeros((0, 0))
        rows.append(
            {
                "waferMap": m,
                "dieSize": float((m > 0).sum()),
                "lotName": f"lot{i // 25 + 1}",
                "waferIndex": float(i % 25 + 1),
                "trianTestLabel": empty
                if label is None
                else np.array([["Training" if rng.random() < 0.5 else "Test"]], dtype=object),
                "failureType": empty if label is None else np.array([[label]], dtype=object),
            }
        )
    return pd.DataFrame(rows)


def write_lswmd_pickle(path: str | Path, **kwargs) -> Path:
    """Write :func:`synthetic_lswmd` (``kwargs`` passed on) as a pandas pickle, like the public file.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    synthetic_lswmd(**kwargs).to_pickle(path)
    return path
