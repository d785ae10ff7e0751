"""Points and polylines on the ground: input checking, the horizontal plane, distances to a path."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["HORIZONTAL", "as_points", "distance_to_path", "horizontal", "mean_distance_to_path", "route_around"]

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


def route_around(rows: np.ndarray, xz: np.ndarray, clearance: float = 0.6) -> np.ndarray:
    """A ground path ``xz [R, 2]`` (m, densely sampled) routed around the obstacles it runs
    through: where the path enters an obstacle's bounding circle (``rows [M, ROW]``,
    :mod:`~motionmatch.geometry.shapes`), the samples within that circle grown by
    ``clearance`` metres are pushed out onto the grown circle, on the side the path passes
    (by the mean of those samples), giving an arc around it. A path that only passes
    beside an obstacle, or starts inside one, is left as drawn. Returns the new ``[R, 2]``."""
    from motionmatch.geometry.shapes import C_R, C_X, C_Z

    P = np.array(xz, dtype=np.float64)
    if not len(rows) or len(P) < 2:
        return P
    for m in np.argsort(np.hypot(rows[:, C_X] - P[0, 0], rows[:, C_Z] - P[0, 1])):
        c = rows[m, [C_X, C_Z]]
        r = float(rows[m, C_R])
        R = r + clearance
        dist = np.hypot(P[:, 0] - c[0], P[:, 1] - c[1])
        if dist[0] < r:
            continue  # starting inside it: nothing sensible to route
        idx = np.flatnonzero(dist < R)
        for run in np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1) if idx.size else []:
            if dist[run].min() >= r:
                continue  # beside it, not through it
            a, b = max(run[0] - 1, 0), min(run[-1] + 1, len(P) - 1)
            u = P[b] - P[a]
            nu = float(np.hypot(*u))
            if nu < 1e-9:
                continue
            u /= nu
            nrm = np.array([-u[1], u[0]])
            side = 1.0 if float(np.mean((P[run] - c) @ nrm)) >= 0 else -1.0
            rel = P[run] - c
            t = rel @ u
            lat = np.sqrt(np.maximum(R * R - t * t, 0.0))
            P[run] = c + np.outer(t, u) + np.outer(side * np.maximum((rel @ nrm) * side, lat), nrm)
    return P
