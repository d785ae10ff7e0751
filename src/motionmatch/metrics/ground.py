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

__all__ = ["ground_report", "ground_samples", "ground_under_feet", "reference_heights", "summarise"]


def reference_heights(db, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(feet [F, K], hips [F])``: the heights (m) above the floor of the database's foot
    joints (``db.foot_joints``) and of its hips (joint 1) in database ``frames [F]``."""
    frames = np.asarray(frames, dtype=np.int64)
    m = Motion(db.skeleton, np.asarray(db.rotations[frames], dtype=np.float64),
               np.asarray(db.translations[frames], dtype=np.float64), float(db.fps))
    wp = m.world_positions
    return wp[:, list(db.foot_joints), 1], wp[:, 1, 1]


def ground_under_feet(world_positions: np.ndarray, feet, terrain=None) -> np.ndarray | float:
    """The ground's height (m) under the ``feet`` joints of ``world_positions [F, J, 3]``:
    ``[F, K]``, or ``0.0`` on the floor (``terrain`` ``None`` or flat), as
    :func:`~motionmatch.anim.contacts.foot_contacts` takes its ``ground_height``."""
    if terrain is None or terrain.is_flat:
        return 0.0
    toe = np.asarray(world_positions, dtype=np.float64)[:, list(feet)]
    return terrain.heights(toe[..., [0, 2]].reshape(-1, 2)).reshape(toe.shape[:2])


def ground_samples(world_positions: np.ndarray, frames: np.ndarray, db, terrain=None) -> dict:
    """The per-sample numbers :func:`ground_report` summarises: ``error`` (m, the contact
    samples' ``|height above the ground - height above the floor in the played frame|``),
    ``depth`` and ``extra_depth`` (m, every foot sample's depth below the surface, and its
    depth beyond the played frame's own below the floor), ``hips`` (m, every frame's hips
    height above the ground minus the played frame's above the floor)."""
    wp = np.asarray(world_positions, dtype=np.float64)
    frames = np.asarray(frames, dtype=np.int64)
    if wp.ndim != 3 or wp.shape[0] != len(frames):
        raise ValueError(f"world_positions must be [F, J, 3] with F = len(frames) = {len(frames)}, got {wp.shape}")
    feet = list(db.foot_joints)
    if not len(wp):
        z = np.zeros(0)
        return {"error": z, "depth": z, "extra_depth": z, "hips": z}
    ref_feet, ref_hips = reference_heights(db, frames)
    toe = wp[:, feet]
    hips = wp[:, 1]
    g_toe = np.broadcast_to(ground_under_feet(wp, feet, terrain), toe.shape[:2])
    g_hips = np.zeros(len(hips)) if terrain is None or terrain.is_flat else terrain.heights(hips[:, [0, 2]])
    above = toe[..., 1] - g_toe
    contact = np.asarray(db.contacts[frames], dtype=bool)
    depth = np.maximum(-above, 0.0)
    return {"error": np.abs(above - ref_feet)[contact], "depth": depth.ravel(),
            "extra_depth": np.maximum(depth - np.maximum(-ref_feet, 0.0), 0.0).ravel(),
            "hips": (hips[:, 1] - g_hips) - ref_hips}


def summarise(samples: dict) -> dict:
    """The report keys (module docstring) of :func:`ground_samples`' numbers (of one run or
    of several concatenated); ``None`` where there is none."""
    def stat(a, f):
        return float(f(a)) if len(a) else None
    return {"foot_ground_error_m": stat(samples["error"], lambda a: np.percentile(a, 95)),
            "foot_penetration_m": stat(samples["depth"], np.max),
            "foot_penetration_extra_m": stat(samples["extra_depth"], np.max),
            "hips_height_change": stat(samples["hips"], np.mean)}


def ground_report(world_positions: np.ndarray, frames: np.ndarray, db, terrain=None) -> dict:
    """The ground metrics (module docstring) of an output whose joints are at
    ``world_positions [F, J, 3]`` (m) playing database ``frames [F]`` of ``db``, on
    ``terrain`` (a :class:`~motionmatch.environment.terrain.Terrain`; ``None``: the floor)."""
    return summarise(ground_samples(world_positions, frames, db, terrain))
