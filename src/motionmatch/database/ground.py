"""The ground a captured motion walks on, estimated from its planted feet.

Motion capture has no ground but the floor; a take that steps onto a platform or a box
(LAFAN1's ``obstacles1``) shows it in its feet: a planted foot rests on whatever is under
it. :func:`support_heights` gives, per frame, the height (m) of the ground under the
character relative to the take's floor: the height of its lowest planted foot above that
foot's height when planted on the floor, held through steps (linear between stances).
A ``ground_height`` feature term (:mod:`motionmatch.database.schema`) stores how that
ground rises or falls along the future trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.ndimage import binary_opening

from motionmatch.anim.contacts import find_feet
from motionmatch.anim.motion import Motion

__all__ = ["FLOOR_DEADBAND", "PLANTED_SPEED", "STANCE_S", "support_heights"]

#: a foot moving slower than this (m/s) is planted
PLANTED_SPEED = 0.5
#: ... for at least this long (s): a foot at the top of its swing is not a stance
STANCE_S = 0.1
#: ground heights within this (m) of the floor are the floor (noise of the capture and of
#: the feet's rest heights): a take on flat ground gives exactly 0 everywhere
FLOOR_DEADBAND = 0.04


def support_heights(motion: Motion, feet: Sequence[int | str] | None = None) -> np.ndarray:
    """``[F]``: the ground's height (m) under the character in each frame, relative to the
    take's floor (see the module docstring).

    A foot's floor height is its 5th percentile height over the take; in a frame its
    support is its height above that while planted (:data:`PLANTED_SPEED`, for at least
    :data:`STANCE_S`); the ground is the lowest support of the frame's planted feet, linear
    between frames with none (held before the first and after the last); values within
    :data:`FLOOR_DEADBAND` of the floor are 0. A take with no stance at all gives 0."""
    skel = motion.skeleton
    idx = find_feet(skel) if feet is None else skel.indices(feet)
    F = motion.num_frames
    wp = motion.world_positions[:, idx]  # [F, K, 3]
    height = wp[..., 1]
    rest = np.percentile(height, 5, axis=0)
    if F < 2:
        return np.zeros(F)
    speed = np.linalg.norm(np.gradient(wp, 1.0 / motion.fps, axis=0), axis=-1)
    planted = speed < PLANTED_SPEED
    n = max(1, round(STANCE_S * motion.fps))
    if n > 1 and F >= n:
        planted = binary_opening(planted, structure=np.ones((n, 1), dtype=bool))
    support = np.where(planted, height - rest, np.inf).min(axis=1)
    have = np.isfinite(support)
    if not have.any():
        return np.zeros(F)
    frames = np.arange(F)
    g = np.interp(frames, frames[have], support[have])
    return np.where(np.abs(g) < FLOOR_DEADBAND, 0.0, g)
