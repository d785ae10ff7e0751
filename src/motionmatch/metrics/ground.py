"""How well characters stand on a terrain (issue 31's ground reports).

The reference is the flat floor the database was captured on: the played database frame
(``frames [F]``) gives, for every output frame, each foot's height above the floor and the
hips' height as the motion had them; on a terrain the same heights should be found above
the ground under the foot and under the hips.

* ``foot_ground_error_m``: the 95th percentile, over the frames where the played frame
  has the foot in contact, of ``|foot height above the ground - the same foot's height
  above the floor in the played frame|`` (m);
* ``foot_penetration_m``: the deepest any foot goes below the surface (m, 0 when none
  does), and ``foot_penetration_extra_m``: the deepest beyond what the played frame itself
  had below the floor (captures' toes dip a few centimetres under it);
* ``hips_height_change``: the mean of the hips' height above the ground under them minus
  their height above the floor in the played frame (m; negative: lowered).

On no terrain (or a flat one) the ground is ``y = 0``: the same numbers measure the flat
run, for comparison.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim import Motion

__all__ = ["ground_report", "reference_heights"]


def reference_heights(db, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(feet [F, K], hips [F])``: the heights (m) above the floor of the database's foot
    joints (``db.foot_joints``) and of its hips (joint 1) in database ``frames [F]``."""
    frames = np.asarray(frames, dtype=np.int64)
    m = Motion(db.skeleton, np.asarray(db.rotations[frames], dtype=np.float64),
               np.asarray(db.translations[frames], dtype=np.float64), float(db.fps))
    wp = m.world_positions
    return wp[:, list(db.foot_joints), 1], wp[:, 1, 1]


def ground_report(world_positions: np.ndarray, frames: np.ndarray, db, terrain=None) -> dict:
    """The ground metrics (module docstring) of an output whose joints are at
    ``world_positions [F, J, 3]`` (m) playing database ``frames [F]`` of ``db``, on
    ``terrain`` (a :class:`~motionmatch.environment.terrain.Terrain`; ``None``: the floor)."""
    wp = np.asarray(world_positions, dtype=np.float64)
    frames = np.asarray(frames, dtype=np.int64)
    if wp.ndim != 3 or wp.shape[0] != len(frames):
        raise ValueError(f"world_positions must be [F, J, 3] with F = len(frames) = {len(frames)}, got {wp.shape}")
    feet = list(db.foot_joints)
    if not len(wp):
        return {"foot_ground_error_m": None, "foot_penetration_m": None, "foot_penetration_extra_m": None,
                "hips_height_change": None}
    ref_feet, ref_hips = reference_heights(db, frames)
    toe = wp[:, feet]
    hips = wp[:, 1]
    if terrain is None:
        g_toe = np.zeros(toe.shape[:2])
        g_hips = np.zeros(len(hips))
    else:
        g_toe = terrain.heights(toe[..., [0, 2]].reshape(-1, 2)).reshape(toe.shape[:2])
        g_hips = terrain.heights(hips[:, [0, 2]])
    above = toe[..., 1] - g_toe
    contact = np.asarray(db.contacts[frames], dtype=bool)
    err = np.abs(above - ref_feet)[contact]
    depth = np.maximum(-above, 0.0)
    extra = np.maximum(depth - np.maximum(-ref_feet, 0.0), 0.0)
    return {
        "foot_ground_error_m": float(np.percentile(err, 95)) if err.size else None,
        "foot_penetration_m": float(depth.max()),
        "foot_penetration_extra_m": float(extra.max()),
        "hips_height_change": float(np.mean((hips[:, 1] - g_hips) - ref_hips)),
    }
