"""Changing a clip's up axis (the library works Y up)."""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton

#: Rotation taking a Z-up world to Y up: -90 degrees about X (z -> y, y -> -z).
Z_UP_TO_Y_UP = quat.from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2)


def rotate_world(motion: Motion, rotation: np.ndarray) -> Motion:
    """The clip with its whole world rotated by ``rotation`` ``[4]``.

    Only the root changes: its rotation is pre-multiplied and its translation (and rest
    offset, a world position for a root) rotated; every other joint is in its parent's
    frame and stays as it is.
    """
    rotations = motion.rotations.copy()
    translations = motion.translations.copy()
    rotations[:, 0] = quat.mul(rotation, motion.rotations[:, 0])
    translations[:, 0] = quat.rotate(rotation, motion.translations[:, 0])
    s = motion.skeleton
    offsets = s.offsets.copy()
    offsets[0] = quat.rotate(rotation, s.offsets[0])
    skel = Skeleton(s.names, s.parents, offsets, s.end_site_parents, s.end_site_offsets, s.channels)
    return motion.with_data(rotations, translations, skeleton=skel)


def to_y_up(motion: Motion, up_axis: str) -> Motion:
    """The clip converted from a ``"y"`` (unchanged) or ``"z"`` up world to Y up."""
    axis = up_axis.lower()
    if axis == "y":
        return motion
    if axis == "z":
        return rotate_world(motion, Z_UP_TO_Y_UP)
    raise ValueError(f"up_axis must be 'y' or 'z', got {up_axis!r}")
