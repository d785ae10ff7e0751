"""Small shared helpers for the metrics: input checking and the horizontal plane."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: Indices of the horizontal axes (x, z); y is up.
HORIZONTAL = (0, 2)


def as_points(x: ArrayLike, name: str, *, ndim: int | None = None, min_frames: int = 0) -> NDArray[np.float64]:
    """``x`` as a float64 array whose last axis has length 3, with a clear error otherwise."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim < 1 or a.shape[-1] != 3:
        raise ValueError(f"{name} must have a last axis of length 3 (x, y, z), got shape {list(a.shape)}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {list(a.shape)}")
    if a.ndim >= 2 and a.shape[0] < min_frames:
        raise ValueError(f"{name} needs at least {min_frames} frames, got {a.shape[0]}")
    return a


def check_fps(fps: float) -> float:
    fps = float(fps)
    if not (np.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps}")
    return fps


def horizontal(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """The (x, z) components of ``[..., 3]`` points, as ``[..., 2]``."""
    return a[..., HORIZONTAL]
