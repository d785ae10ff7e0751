"""Collision measures of played motion: body ellipses against obstacles and each other.

A frame's body intersects an obstacle when its ellipse (:func:`motion_ellipses`, from the
skeleton's joints, no margin) overlaps the obstacle's footprint and, for an obstacle with a
height range, the body's vertical extent (lowest to highest joint, the highest plus
``head_top``) overlaps that range. An *intersection* is a maximal run of consecutive
frames in which the body intersects the same obstacle (or the same other agent).

Reported (:func:`collision_summary`): ``collision_fraction`` (share of frames in any
intersection), ``collision_time_s`` (mean duration of an intersection, the paper's
"collision time"), ``collisions`` (how many), ``penetration_m`` (mean depth over
intersecting frames) and ``min_clearance_m``.
"""

from __future__ import annotations

import numba
import numpy as np

from motionmatch.geometry.shapes import C_YMAX, C_YMIN, ROW, signed_distance

__all__ = ["body_distances", "collision_summary", "intersection_runs", "pair_distances"]


@numba.njit(cache=True, nogil=True)
def _body_distances(track, rows, per_frame, head_top, out):
    F = track.shape[0]
    M = out.shape[1]
    for f in range(F):
        fr = f if per_frame else 0
        for m in range(M):
            row = rows[fr, m]
            lo = track[f, 6]
            hi = track[f, 7] + head_top
            if hi <= row[C_YMIN] or lo >= row[C_YMAX]:
                out[f, m] = np.inf
                continue
            out[f, m] = signed_distance(track[f, 0], track[f, 1], track[f, 2], track[f, 3], track[f, 4], track[f, 5],
                                        row)


def body_distances(track: np.ndarray, rows: np.ndarray, head_top: float = 0.1) -> np.ndarray:
    """``[F, M]`` signed distances (m) of body ellipses ``track [F, 8]`` to obstacles
    ``rows [M, ROW]`` (static) or ``[F, M, ROW]`` (per frame); ``inf`` where the vertical
    extents do not overlap."""
    t = np.ascontiguousarray(track, dtype=np.float64)
    r = np.ascontiguousarray(rows, dtype=np.float64)
    per_frame = r.ndim == 3
    if not per_frame:
        r = r.reshape(1, -1, ROW)
    out = np.empty((t.shape[0], r.shape[1]))
    if out.size:
        _body_distances(t, r, per_frame, float(head_top), out)
    return out


def pair_distances(a: np.ndarray, b: np.ndarray, head_top: float = 0.1) -> np.ndarray:
    """``[F]`` signed distances between two bodies' ellipse tracks ``[F, 8]`` (``inf`` where
    their vertical extents do not overlap)."""
    from motionmatch.geometry.shapes import make_row

    b = np.asarray(b, dtype=np.float64)
    rows = np.stack([make_row(1, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7] + head_top) for e in b])
    return body_distances(a, rows[:, None, :], head_top)[:, 0]


def intersection_runs(inside: np.ndarray) -> list[tuple[int, int, int]]:
    """Runs of ``True`` per column of ``inside [F, M]``: ``(column, first frame, length)``."""
    ins = np.asarray(inside, dtype=bool)
    if ins.ndim == 1:
        ins = ins[:, None]
    runs = []
    pad = np.zeros((1, ins.shape[1]), dtype=bool)
    d = np.diff(np.concatenate([pad, ins, pad]).astype(np.int8), axis=0)
    for m in range(ins.shape[1]):
        starts = np.flatnonzero(d[:, m] == 1)
        stops = np.flatnonzero(d[:, m] == -1)
        runs.extend((m, int(a), int(b - a)) for a, b in zip(starts, stops))
    return runs


def collision_summary(distances: np.ndarray, fps: float, frames: slice | np.ndarray | None = None) -> dict:
    """Collision measures from signed distances ``[F, M]`` (columns: obstacles or other
    agents), optionally over a subset of ``frames``."""
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    if frames is not None:
        d = d[frames]
    F = d.shape[0]
    if F == 0:
        return {"collision_fraction": 0.0, "collision_time_s": 0.0, "collisions": 0, "penetration_m": 0.0,
                "min_clearance_m": float("inf")}
    inside = d < 0.0
    runs = intersection_runs(inside)
    any_in = inside.any(axis=1) if d.shape[1] else np.zeros(F, dtype=bool)
    depth = -d[inside]
    return {
        "collision_fraction": float(any_in.mean()),
        "collision_time_s": float(np.mean([n for _, _, n in runs]) / fps) if runs else 0.0,
        "collisions": len(runs),
        "penetration_m": float(depth.mean()) if depth.size else 0.0,
        "min_clearance_m": float(d.min()) if d.size else float("inf"),
    }
