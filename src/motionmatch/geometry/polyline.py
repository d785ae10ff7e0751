"""Points and polylines on the ground: input checking, the horizontal plane, distances to a path."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["HORIZONTAL", "as_points", "distance_to_path", "horizontal", "mean_distance_to_path"]

#: Indices of the horizontal axes (x, z); y is up.
HORIZONTAL = (0, 2)

#: Upper bound on ``points x segments`` handled at once by :func:`distance_to_path`.
_CHUNK_ELEMENTS = 1 << 20


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


def horizontal(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """The (x, z) components of ``[..., 3]`` points, as ``[..., 2]``."""
    return a[..., HORIZONTAL]


def distance_to_path(points: ArrayLike, path: ArrayLike, *, horizontal_only: bool = True) -> NDArray[np.float64]:
    """Distance (m) from each point to the nearest point of a polyline.

    Every segment ``path[i] -> path[i + 1]`` is considered (a closest point may lie
    between vertices). Work is split into chunks of points so that memory stays bounded
    (about ``2**20`` point-segment pairs at a time) for long inputs.

    Args:
        points: ``[N, 3]`` positions (m).
        path: ``[P, 3]`` polyline vertices (m), ``P >= 1``.
        horizontal_only: measure on the ground plane (x, z), ignoring heights (default);
            ``False`` for 3D distances.

    Returns:
        ``[N]`` distances in metres.
    """
    pts = as_points(points, "points", ndim=2)
    poly = as_points(path, "path", ndim=2, min_frames=1)
    if horizontal_only:
        pts, poly = horizontal(pts), horizontal(poly)
    a = poly[:-1] if len(poly) > 1 else poly
    ab = poly[1:] - poly[:-1] if len(poly) > 1 else np.zeros_like(poly)
    len2 = np.einsum("sd,sd->s", ab, ab)
    inv = np.divide(1.0, len2, out=np.zeros_like(len2), where=len2 > 0)
    out = np.empty(len(pts))
    chunk = max(1, _CHUNK_ELEMENTS // len(a))
    for s in range(0, len(pts), chunk):
        p = pts[s : s + chunk]
        ap = p[:, None, :] - a[None, :, :]  # [n, S, D]
        t = np.clip(np.einsum("nsd,sd->ns", ap, ab) * inv, 0.0, 1.0)
        r = ap - t[..., None] * ab  # from the closest point to p
        out[s : s + chunk] = np.sqrt(np.einsum("nsd,nsd->ns", r, r).min(axis=1))
    return out


def mean_distance_to_path(points: ArrayLike, path: ArrayLike, *, horizontal_only: bool = True) -> float:
    """Mean of :func:`distance_to_path` (m): how far, on average, points stay from a path."""
    d = distance_to_path(points, path, horizontal_only=horizontal_only)
    if d.size == 0:
        raise ValueError("mean_distance_to_path needs at least one point")
    return float(d.mean())
