"""Putting a take on the ground: its feet at the floor (y = 0) where they touch it.

Files from other tools often have their origin at the hips (the feet about 0.94 m under
the floor) or a floor that is not at zero. :func:`floor_height` finds where the take's
floor is: the lowest point of the body (joints and end sites) in the frames where a
foot is planted (median over those frames); :func:`ground` moves the take so that this
height is 0 when it is further than :data:`GROUND_TOLERANCE` from it.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim.contacts import find_feet, foot_contacts
from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionMatchError

__all__ = ["GROUND_TOLERANCE", "floor_height", "ground"]

#: A floor closer to y = 0 than this (m) is left where it is (LAFAN1: within 2 cm; other shared data: 6 cm).
GROUND_TOLERANCE = 0.10


def floor_height(motion: Motion) -> float | None:
    """The height (m) of the floor the take stands on: the median, over the frames with a
    planted foot, of the body's lowest point (joints and end sites). Contacts are found
    against the feet's own lowest heights, so a floor far from zero does not hide them.
    ``None`` when the skeleton has no feet or no foot is ever planted."""
    try:
        feet = find_feet(motion.skeleton)
    except MotionMatchError:
        return None
    if motion.num_frames == 0:
        return None
    wp = motion.world_positions
    first_guess = float(np.percentile(wp[:, feet, 1], 5))
    planted = foot_contacts(motion, feet=feet, ground_height=first_guess).contacts.any(axis=1)
    if not planted.any():
        return None
    lowest = wp[..., 1].min(axis=1)
    es = motion.end_site_positions()
    if es.shape[1]:
        lowest = np.minimum(lowest, es[..., 1].min(axis=1))
    return float(np.median(lowest[planted]))


def ground(motion: Motion, tolerance: float = GROUND_TOLERANCE) -> tuple[Motion, float]:
    """The take moved up or down so that its floor (:func:`floor_height`) is at y = 0, and
    the distance it was moved (m, positive: up; 0 when the floor was within ``tolerance``
    or not found). Only the root's translation changes."""
    h = floor_height(motion)
    if h is None or abs(h) <= tolerance:
        return motion, 0.0
    tr = motion.translations.copy()
    tr[:, 0, 1] -= h
    out = motion.with_data(motion.rotations, tr)
    return out, -h
