"""Two-bone inverse kinematics (hip-knee-ankle) for foot locking."""

from __future__ import annotations

import numpy as np

from motionmatch.runtime import _kernels


def two_bone_ik(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, target: np.ndarray,
    a_rot: np.ndarray, b_rot: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """New world rotations ``[4]`` of ``a`` (hip) and ``b`` (knee) so that the chain's end
    ``c`` (ankle) reaches ``target``, keeping bone lengths and the knee's bending plane.

    The knee is placed by the law of cosines in the plane through ``a``, ``target`` and
    the current knee; ``a`` then turns its bone onto the new knee and ``b`` its bone onto
    the target, each by the smallest rotation (no added twist). An unreachable target is
    approached with the leg straight, along the line to it. A degenerate chain (zero-length
    bone, knee on the line to the target) is returned unchanged.

    Args:
        a, b, c, target: world positions ``[3]``.
        a_rot, b_rot: current world rotations ``[4]`` of ``a`` and ``b``.
    """
    f = lambda x: np.ascontiguousarray(x, dtype=np.float64)  # noqa: E731
    new_a, new_b = np.empty(4), np.empty(4)
    _kernels.two_bone_ik(f(a), f(b), f(c), f(target), f(a_rot), f(b_rot), new_a, new_b)
    return new_a, new_b
