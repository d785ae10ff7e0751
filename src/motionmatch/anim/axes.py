"""Changing a clip's up axis (the library works Y up)."""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
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


#: A humanoid is read as Z up when its head-over-ankles direction has a mean Z component
#: above this (a person standing or walking: about 0.99; crawling takes: under 0.35).
Z_UP_EVIDENCE = 0.7


def detect_up_axis(motion: Motion) -> str:
    """``"z"`` when the clip is a humanoid standing along +Z, else ``"y"``.

    The humanoid's head (or neck, or chest) over the middle of its ankles, as a unit
    vector per frame, averaged over the clip: Z up when its Z component is above
    :data:`Z_UP_EVIDENCE` and its Y component below 0.3. Anything else (Y up, a
    quadruped, a take crawling most of the time, a skeleton with no humanoid) stays Y up.
    """
    try:
        roles = find_humanoid(motion.skeleton)
    except HumanoidError:
        return "y"
    top = next((roles.get(r) for r in ("head", "neck", "chest") if roles.get(r) is not None), None)
    if top is None or motion.num_frames == 0:
        return "y"
    wp = motion.world_positions
    v = wp[:, top] - 0.5 * (wp[:, roles["left_ankle"]] + wp[:, roles["right_ankle"]])
    n = np.linalg.norm(v, axis=1, keepdims=True)
    mean = (v / np.maximum(n, 1e-9)).mean(axis=0)
    return "z" if mean[2] > Z_UP_EVIDENCE and mean[1] < 0.3 else "y"


def to_y_up(motion: Motion, up_axis: str) -> Motion:
    """The clip converted from a ``"y"`` (unchanged) or ``"z"`` up world to Y up;
    ``"auto"``: the axis :func:`detect_up_axis` finds."""
    axis = up_axis.lower()
    if axis == "auto":
        axis = detect_up_axis(motion)
    if axis == "y":
        return motion
    if axis == "z":
        return rotate_world(motion, Z_UP_TO_Y_UP)
    raise ValueError(f"up_axis must be 'y', 'z' or 'auto', got {up_axis!r}")
