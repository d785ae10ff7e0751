"""Body ellipses: of every database frame (the environment features) and of played motion.

The database's environment features (``ellipse`` schema term, see
:mod:`motionmatch.database.schema`) are read from ``raw_features``; a database built
without them gets them computed from its stored poses on the fly (same definition, a
second or so for 100k frames), so any database can drive environment-aware matching.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.database import MotionDatabase
from motionmatch.database.features import body_ellipses, ellipse_features

__all__ = ["body_obstacle_rows", "corridor_widths", "database_ellipses", "ellipse_slots", "frame_ellipses",
           "motion_ellipses",
           "world_ellipses"]


def ellipse_slots(db: MotionDatabase) -> tuple[float, ...]:
    """Future offsets (s) of the database's ellipses (its ellipse term's, else its trajectory offsets)."""
    for t in db.schema.terms:
        if t.is_environment:
            return tuple(t.offsets)
    return db.schema.trajectory_offsets


def database_ellipses(db: MotionDatabase, heights: bool | None = None) -> np.ndarray:
    """``[N, K, 5]`` (or ``[N, K, 7]`` with heights) raw body ellipses of every frame at the
    K future offsets, in the frame's character frame.

    ``heights``: ``None`` uses what the database stores (computing ellipses without heights
    when it stores none); ``True`` forces heights (computed if not stored).
    """
    term = next((t for t in db.schema.terms if t.is_environment), None)
    if term is not None and (heights is None or heights == term.vertical or (not heights and term.vertical)):
        per = 7 if term.vertical else 5
        e = db.raw_features[:, db.schema.slice(term.name)].astype(np.float64).reshape(db.num_frames, -1, per)
        return e if (heights is None or heights == term.vertical) else e[..., :5]
    offsets = ellipse_slots(db)
    want_h = bool(heights)
    out = []
    for c in range(len(db.clip_names)):
        m = db.clip_motion(c)
        wp = m.world_positions
        root_pos = wp[:, 0]
        root_rot = m.world_rotations[:, 0]
        facing = quat.rotate(root_rot, np.array([0.0, 0.0, 1.0]))
        track = body_ellipses(wp, root_pos, facing, db.fps)
        F = m.num_frames
        offs = [max(1, round(o * db.fps)) for o in offsets]  # as offset_frames
        future = np.stack([np.minimum(np.arange(F) + k, F - 1) for k in offs], axis=1)
        out.append(ellipse_features(track, root_pos, root_rot, future, want_h))
    per = 7 if want_h else 5
    return np.concatenate(out).reshape(db.num_frames, len(offsets), per)


def motion_ellipses(world_positions: np.ndarray, root_rotations: np.ndarray, fps: float) -> np.ndarray:
    """``[F, 8]`` world body ellipse of each frame of played motion (joint 0 is the ground
    root, ``root_rotations [F, 4]`` its heading): centre x, z, unit axis x, z, semi-axis
    along it, semi-axis across, lowest and highest joint height (see
    :func:`motionmatch.database.features.body_ellipses`)."""
    wp = np.asarray(world_positions, dtype=np.float64)
    facing = quat.rotate(np.asarray(root_rotations, dtype=np.float64), np.array([0.0, 0.0, 1.0]))
    return body_ellipses(wp, wp[:, 0], facing, fps)


def world_ellipses(local: np.ndarray, root_xz, yaw: float) -> np.ndarray:
    """Ellipse features ``[K, 5 or 7]`` of one frame (character frame) placed at a character
    at ``root_xz`` with heading ``yaw``: ``[K, 8]`` world ellipses (centre x, z, unit axis
    x, z, semi-axis along, across, lowest, highest height; heights 0..2 m if absent)."""
    e = np.asarray(local, dtype=np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.empty((e.shape[0], 8))
    out[:, 0] = root_xz[0] + c * e[:, 0] + s * e[:, 1]
    out[:, 1] = root_xz[1] - s * e[:, 0] + c * e[:, 1]
    a = np.hypot(e[:, 2], e[:, 3])
    ux = np.where(a > 1e-9, e[:, 2] / np.maximum(a, 1e-9), 1.0)
    uz = np.where(a > 1e-9, e[:, 3] / np.maximum(a, 1e-9), 0.0)
    out[:, 2] = c * ux + s * uz
    out[:, 3] = -s * ux + c * uz
    out[:, 4] = a
    out[:, 5] = e[:, 4]
    if e.shape[1] >= 7:
        out[:, 6], out[:, 7] = e[:, 5], e[:, 6]
    else:
        out[:, 6], out[:, 7] = 0.0, 2.0
    return out


def frame_ellipses(db: MotionDatabase) -> np.ndarray:
    """``[N, 8]`` the body ellipse of every database frame itself (not a future one), in
    the frame's character frame: centre x, z, unit axis x, z, semi-axis along it, semi-axis
    across, lowest and highest joint height (m; :func:`body_ellipses`)."""
    out = np.zeros((db.num_frames, 8))
    for c in range(len(db.clip_names)):
        m = db.clip_motion(c)
        wp = m.world_positions
        rr = m.world_rotations[:, 0]
        e = body_ellipses(wp, wp[:, 0], quat.rotate(rr, np.array([0.0, 0.0, 1.0])), db.fps)
        yaw = quat.yaw_angle(rr)
        cc, ss = np.cos(yaw), np.sin(yaw)
        dx, dz = e[:, 0] - wp[:, 0, 0], e[:, 1] - wp[:, 0, 2]
        a, b = db.clip_starts[c], db.clip_stops[c]
        out[a:b, 0] = cc * dx - ss * dz
        out[a:b, 1] = ss * dx + cc * dz
        out[a:b, 2] = cc * e[:, 2] - ss * e[:, 3]
        out[a:b, 3] = ss * e[:, 2] + cc * e[:, 3]
        out[a:b, 4:8] = e[:, 4:8]
    return out


def corridor_widths(db: MotionDatabase) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How narrow a straight corridor each database frame fits through, as the penalised
    search sees it: its present body ellipse and its K future ellipses.

    The corridor runs from the character (the frame's root) toward its last future
    ellipse's centre and may be shifted sideways; its width is the extent of the K + 1
    ellipses across that line (each ellipse's support along the normal).

    Returns:
        ``(width [N], travel [N], sideways [N])``: the width (m), the distance to the last
        ellipse's centre (m; a standing frame's width says little), and the angle (degrees,
        0-90) between that travel direction and the character's facing (about 90:
        side-stepping).
    """
    fut = database_ellipses(db, heights=False)  # [N, K, 5]
    now = frame_ellipses(db)
    cx = np.concatenate([now[:, None, 0], fut[:, :, 0]], axis=1)
    cz = np.concatenate([now[:, None, 1], fut[:, :, 1]], axis=1)
    a_fut = np.hypot(fut[:, :, 2], fut[:, :, 3])
    safe = np.maximum(a_fut, 1e-9)
    ux = np.concatenate([now[:, None, 2], fut[:, :, 2] / safe], axis=1)
    uz = np.concatenate([now[:, None, 3], fut[:, :, 3] / safe], axis=1)
    a = np.concatenate([now[:, None, 4], a_fut], axis=1)
    b = np.concatenate([now[:, None, 5], fut[:, :, 4]], axis=1)
    tx, tz = fut[:, -1, 0], fut[:, -1, 1]
    travel = np.hypot(tx, tz)
    t_safe = np.maximum(travel, 1e-9)
    nx, nz = (-tz / t_safe)[:, None], (tx / t_safe)[:, None]  # normal of the travel direction
    lat = cx * nx + cz * nz
    half = np.sqrt((a * (ux * nx + uz * nz)) ** 2 + (b * (-uz * nx + ux * nz)) ** 2)
    width = (lat + half).max(axis=1) - (lat - half).min(axis=1)
    sideways = np.degrees(np.arccos(np.clip(np.abs(tz) / t_safe, 0.0, 1.0)))  # facing is +Z
    return width, travel, sideways


def body_obstacle_rows(local: np.ndarray, positions: np.ndarray, yaws: np.ndarray, idents: np.ndarray,
                       head_top: float) -> np.ndarray:
    """Characters' future body ellipses as packed obstacle rows (for the others' searches).

    Args:
        local: ``[A, K, 5 | 7]`` each character's ellipse features in its own character
            frame (centre x, z, semi-major vector x, z, semi-minor[, lowest, highest height]).
        positions: ``[A, 2]`` ground positions (x, z, m); yaws: ``[A]`` headings (rad).
        idents: ``[A]`` the rows' obstacle ids (agents: ``-1 - number``).
        head_top: metres added above the highest joint (without heights: a body from the
            ground to 2 m).

    Returns:
        ``[A * K, ROW]`` rows (ellipses, weight 1), character by character.
    """
    from motionmatch.geometry.shapes import ROW, T_ELLIPSE

    e = np.asarray(local, dtype=np.float64)
    A, K = e.shape[:2]
    cs, sn = np.cos(yaws)[:, None], np.sin(yaws)[:, None]
    rows = np.zeros((A, K, ROW))
    rows[..., 0] = T_ELLIPSE
    rows[..., 1] = positions[:, 0:1] + cs * e[..., 0] + sn * e[..., 1]
    rows[..., 2] = positions[:, 1:2] - sn * e[..., 0] + cs * e[..., 1]
    a = np.hypot(e[..., 2], e[..., 3])
    ux = np.where(a > 1e-9, e[..., 2] / np.maximum(a, 1e-9), 1.0)
    uz = np.where(a > 1e-9, e[..., 3] / np.maximum(a, 1e-9), 0.0)
    rows[..., 3] = cs * ux + sn * uz
    rows[..., 4] = -sn * ux + cs * uz
    rows[..., 5] = a
    rows[..., 6] = e[..., 4]
    rows[..., 7] = np.maximum(a, e[..., 4])
    if e.shape[-1] >= 7:
        rows[..., 8] = e[..., 5]
        rows[..., 9] = e[..., 6] + head_top
    else:
        rows[..., 9] = 2.0 + head_top
    rows[..., 10] = np.asarray(idents, dtype=np.float64)[:, None]
    rows[..., 11] = 1.0
    return rows.reshape(A * K, ROW)
