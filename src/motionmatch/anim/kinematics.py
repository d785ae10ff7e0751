"""Forward kinematics and finite-difference velocities."""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from motionmatch.anim import quat

Array = NDArray[np.float64]


@numba.njit(cache=True, nogil=True)
def _fk_kernel(parents, rotations, translations, world_pos, world_rot):  # pragma: no cover - compiled
    F, J = rotations.shape[0], rotations.shape[1]
    for f in range(F):
        for c in range(3):
            world_pos[f, 0, c] = translations[f, 0, c]
        for c in range(4):
            world_rot[f, 0, c] = rotations[f, 0, c]
        for j in range(1, J):
            p = parents[j]
            pw, px, py, pz = world_rot[f, p, 0], world_rot[f, p, 1], world_rot[f, p, 2], world_rot[f, p, 3]
            vx, vy, vz = translations[f, j, 0], translations[f, j, 1], translations[f, j, 2]
            tx = 2.0 * (py * vz - pz * vy)
            ty = 2.0 * (pz * vx - px * vz)
            tz = 2.0 * (px * vy - py * vx)
            world_pos[f, j, 0] = world_pos[f, p, 0] + vx + pw * tx + (py * tz - pz * ty)
            world_pos[f, j, 1] = world_pos[f, p, 1] + vy + pw * ty + (pz * tx - px * tz)
            world_pos[f, j, 2] = world_pos[f, p, 2] + vz + pw * tz + (px * ty - py * tx)
            bw, bx, by, bz = rotations[f, j, 0], rotations[f, j, 1], rotations[f, j, 2], rotations[f, j, 3]
            world_rot[f, j, 0] = pw * bw - px * bx - py * by - pz * bz
            world_rot[f, j, 1] = pw * bx + px * bw + py * bz - pz * by
            world_rot[f, j, 2] = pw * by - px * bz + py * bw + pz * bx
            world_rot[f, j, 3] = pw * bz + px * by - py * bx + pz * bw


def forward_kinematics(
    parents: NDArray[np.int64], rotations: Array, translations: Array
) -> tuple[Array, Array]:
    """World positions ``[F, J, 3]`` and rotations ``[F, J, 4]`` from local transforms.

    Args:
        parents: ``[J]`` parent indices, ``-1`` for the root, parents before children.
        rotations: ``[F, J, 4]`` local joint rotations.
        translations: ``[F, J, 3]`` local joint translations (the offsets, or the
            animated positions of joints with position channels), metres.

    One compiled pass over frames and joints (numba).
    """
    rotations = np.ascontiguousarray(rotations, dtype=np.float64)
    translations = np.ascontiguousarray(translations, dtype=np.float64)
    F, J = rotations.shape[:2]
    world_pos = np.empty((F, J, 3))
    world_rot = np.empty((F, J, 4))
    _fk_kernel(np.ascontiguousarray(parents, dtype=np.int64), rotations, translations, world_pos, world_rot)
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
