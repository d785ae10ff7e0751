"""Changing a clip's frame rate: slerp for rotations, linear for translations."""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionError


def sample_at(motion: Motion, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local rotations ``[T, J, 4]`` and translations ``[T, J, 3]`` at ``times`` (seconds).

    Frame ``i`` of the clip is at ``i / fps``; times outside the clip are clamped.
    """
    t = np.clip(np.asarray(times, dtype=np.float64) * motion.fps, 0.0, motion.num_frames - 1)
    i0 = np.floor(t).astype(np.int64)
    # Snap times that land (numerically) on a frame exactly, so resampling back is exact.
    near = np.abs(t - np.round(t)) < 1e-9
    i0 = np.where(near, np.round(t).astype(np.int64), i0)
    i0 = np.minimum(i0, motion.num_frames - 1)
    i1 = np.minimum(i0 + 1, motion.num_frames - 1)
    a = np.where(near, 0.0, t - i0)
    rot = quat.slerp(motion.rotations[i0], motion.rotations[i1], a[:, None])
    rot = np.where(near[:, None, None], motion.rotations[i0], rot)
    tr = motion.translations[i0] + a[:, None, None] * (motion.translations[i1] - motion.translations[i0])
    return rot, tr


def resample(motion: Motion, fps: float) -> Motion:
    """The clip at another frame rate, covering the same time span.

    The new clip has frames at ``k / fps`` for ``0 <= k / fps <= (F - 1) / old_fps``, so
    30 -> 60 -> 30 fps returns the original frames exactly. Rotations are slerped,
    translations linearly interpolated.
    """
    if not (np.isfinite(fps) and fps > 0):
        raise MotionError(f"target fps must be a positive number, got {fps}")
    if abs(fps - motion.fps) < 1e-9:
        return motion.copy()
    span = (motion.num_frames - 1) / motion.fps
    n = int(np.floor(span * fps + 1e-6)) + 1
    times = np.arange(n) / fps
    rot, tr = sample_at(motion, times)
    return motion.with_data(rot, tr, fps=float(fps))
