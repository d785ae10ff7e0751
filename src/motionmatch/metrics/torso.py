"""Torso rotation of played motion: how far the shoulders turn away from square to the
direction of travel (the environment-aware paper's corridors, Fig. 16: the narrower the
corridor, the more two characters passing each other turn their bodies).

The measure, per frame: the angle between the shoulders' line (the left and right
shoulder joints, projected on the ground) and the direction of travel (the root's ground
velocity), as its complement, folded into 0..90 degrees: 0 when the shoulders are square
to the travel (walking normally), 90 when they lie along it (side-stepping), whichever
side the body turns to. Frames slower than ``min_speed`` have no direction of travel and
are ``NaN``.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim.root import lateral_pairs
from motionmatch.anim.skeleton import Skeleton

__all__ = ["shoulder_pair", "torso_rotation", "torso_summary"]

#: below this ground speed (m/s) a frame has no direction of travel
MIN_SPEED = 0.3
#: the root velocity is averaged over this window (s): the sway of a step is not travel
TRAVEL_WINDOW_S = 0.25


def shoulder_pair(skeleton: Skeleton, rest_positions: np.ndarray) -> tuple[int, int]:
    """``(left, right)`` joints of the shoulders: of the skeleton's lateral pairs (hips and
    shoulders, :func:`motionmatch.anim.root.lateral_pairs`) the highest at rest
    (``rest_positions`` ``[J, 3]``, metres, Y up)."""
    pairs = lateral_pairs(skeleton, rest_positions)
    return max(pairs, key=lambda p: float(rest_positions[p[0], 1] + rest_positions[p[1], 1]))


def torso_rotation(world_positions: np.ndarray, skeleton: Skeleton, fps: float,
                   min_speed: float = MIN_SPEED) -> np.ndarray:
    """``[F]`` torso rotation in degrees (0..90, ``NaN`` where slower than ``min_speed`` m/s).

    ``world_positions``: ``[F, J, 3]`` joint positions in metres (Y up); joint 0 is the root
    whose ground velocity, averaged over :data:`TRAVEL_WINDOW_S`, is the direction of travel.
    """
    F = world_positions.shape[0]
    if F < 2:
        return np.full(F, np.nan)
    left, right = shoulder_pair(skeleton, world_positions[0])
    line = world_positions[:, left, [0, 2]] - world_positions[:, right, [0, 2]]
    ground = world_positions[:, 0, [0, 2]]
    half = max(1, round(TRAVEL_WINDOW_S * fps / 2))
    ahead = ground[np.minimum(np.arange(F) + half, F - 1)]
    behind = ground[np.maximum(np.arange(F) - half, 0)]
    span = (np.minimum(np.arange(F) + half, F - 1) - np.maximum(np.arange(F) - half, 0)) / fps
    velocity = (ahead - behind) / span[:, None]
    speed = np.linalg.norm(velocity, axis=1)
    width = np.linalg.norm(line, axis=1)
    cos = np.abs(np.sum(line * velocity, axis=1)) / np.maximum(width * speed, 1e-9)
    # the angle between the shoulders' line and the travel is acos(cos); its complement is
    # the rotation away from square (asin of the same cosine)
    out = np.degrees(np.arcsin(np.clip(cos, 0.0, 1.0)))
    out[(speed < min_speed) | (width < 1e-6)] = np.nan
    return out


def torso_summary(rotation: np.ndarray) -> dict:
    """Mean, 90th percentile and maximum (degrees) of a torso-rotation track over the frames
    that move; ``None`` values when none moves."""
    moving = rotation[np.isfinite(rotation)]
    if not moving.size:
        return {"mean": None, "p90": None, "max": None, "moving_frames": 0}
    return {"mean": float(moving.mean()), "p90": float(np.percentile(moving, 90)),
            "max": float(moving.max()), "moving_frames": int(moving.size)}
