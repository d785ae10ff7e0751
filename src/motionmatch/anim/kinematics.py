"""Forward kinematics and finite-difference velocities."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from motionmatch.anim import quat

Array = NDArray[np.float64]


def forward_kinematics(
    parents: NDArray[np.int64], rotations: Array, translations: Array
) -> tuple[Array, Array]:
    """World positions ``[F, J, 3]`` and rotations ``[F, J, 4]`` from local transforms.

    Args:
        parents: ``[J]`` parent indices, ``-1`` for the root, parents before children.
        rotations: ``[F, J, 4]`` local joint rotations.
        translations: ``[F, J, 3]`` local joint translations (the offsets, or the
            animated positions of joints with position channels), metres.
    """
    F, J = rotations.shape[:2]
    world_pos = np.empty((F, J, 3))
    world_rot = np.empty((F, J, 4))
    world_pos[:, 0] = translations[:, 0]
    world_rot[:, 0] = rotations[:, 0]
    for j in range(1, J):
        p = parents[j]
        world_pos[:, j] = world_pos[:, p] + quat.rotate(world_rot[:, p], translations[:, j])
        world_rot[:, j] = quat.mul(world_rot[:, p], rotations[:, j])
    return world_pos, world_rot


def end_site_positions(
    world_pos: Array, world_rot: Array, end_site_parents: NDArray[np.int64], end_site_offsets: Array
) -> Array:
    """World positions ``[F, E, 3]`` of the skeleton's end sites."""
    if len(end_site_parents) == 0:
        return np.zeros(world_pos.shape[:1] + (0, 3))
    return world_pos[:, end_site_parents] + quat.rotate(world_rot[:, end_site_parents], end_site_offsets)


def finite_difference_velocity(positions: Array, fps: float) -> Array:
    """Velocities (units/s) of a time series ``[F, ...]`` by second-order central differences.

    Uses one-sided differences at both ends; a single frame has zero velocity.
    """
    positions = np.asarray(positions, dtype=np.float64)
    if positions.shape[0] < 2:
        return np.zeros_like(positions)
    return np.gradient(positions, 1.0 / fps, axis=0)
