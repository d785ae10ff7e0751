"""Smoothness: jerk (the third time derivative of position)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from motionmatch.geometry.polyline import as_points
from motionmatch.metrics._common import check_fps

if TYPE_CHECKING:
    from motionmatch.anim.motion import Motion


def jerk(positions: ArrayLike, fps: float) -> float:
    """Mean magnitude of the third derivative of position (m/s^3).

    The derivative is the third forward difference ``p[f+3] - 3 p[f+2] + 3 p[f+1] - p[f]``
    times ``fps**3`` (exact for cubic motion), its Euclidean norm is taken over the last
    axis, and the mean is over all ``F - 3`` frames and all points.

    Args:
        positions: ``[F, ..., 3]`` positions (m), e.g. ``[F, 3]`` for one point or
            ``[F, J, 3]`` for a skeleton.
        fps: frames per second.

    Returns:
        Mean jerk magnitude in m/s^3.

    Raises:
        ValueError: with fewer than 4 frames (jerk is not defined).
    """
    p = as_points(positions, "positions", min_frames=4)
    if p.ndim < 2:
        raise ValueError(f"positions must be [F, ..., 3], got shape {list(p.shape)}")
    fps = check_fps(fps)
    d3 = np.diff(p, n=3, axis=0) * fps**3
    return float(np.linalg.norm(d3, axis=-1).mean())


def jerk_motion(motion: Motion, joints: Sequence[int | str] | None = None) -> float:
    """:func:`jerk` of a clip's world joint positions, in m/s^3.

    Args:
        motion: the clip.
        joints: joint names or indices; by default **all joints**, so the number is the
            mean over every joint and frame.
    """
    wp = motion.world_positions
    if joints is not None:
        wp = wp[:, motion.skeleton.indices(joints)]
    return jerk(wp, motion.fps)
