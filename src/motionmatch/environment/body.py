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

__all__ = ["database_ellipses", "ellipse_slots", "motion_ellipses", "world_ellipses"]


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
