"""What every controller of one database shares: arrays, tag masks, searchers and gait
speeds derived from the database alone (read-only), made once per database."""

from __future__ import annotations

import weakref

import numpy as np

from motionmatch.database import MotionDatabase
from motionmatch.runtime.batch import database_arrays
from motionmatch.runtime.modes import (
    gait_speeds_from_database,
    jump_spring,
    punch_strikes,
    takeoff_crouch,
    takeoff_mask,
    vertical_columns,
    vertical_targets,
)

__all__ = ["database_shared"]

_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def database_shared(db: MotionDatabase) -> dict:
    """Data derived from ``db`` alone that all its controllers share (read-only arrays,
    tag masks, searchers, gait speeds): a new controller of a database already in use
    costs little time and memory. Rebuilt when ``db.features`` is replaced."""
    sh = _SHARED.get(db)
    if sh is not None and sh["features"] is db.features:
        return sh
    vcols = vertical_columns(db)
    planar = None  # the planar view: the vertical columns weighted 0 (None: there are none)
    if vcols.size:
        planar = np.ones(db.features.shape[1])
        planar[vcols] = 0.0
        planar.setflags(write=False)
    arrays = database_arrays(db)  # the root tracks as plain arrays (the root rotates about +Y only)
    masks: dict[str, np.ndarray] = {}
    takeoff = takeoff_mask(db)
    if takeoff.sum() > 10:  # jumps found in the data (flight phases): search their take-offs
        takeoff.setflags(write=False)
        masks["@takeoff"] = takeoff
    punch, strike = punch_strikes(db)
    if punch.any():  # punches found in the data: search shortly before their strikes
        punch.setflags(write=False)
        masks["@punch"] = punch
    sh = {"features": db.features, "strike": strike, "gaits": gait_speeds_from_database(db), "vcols": vcols,
          "vtargets": vertical_targets(db), "view_weights": {"planar": planar, "full": None}, "masks": masks,
          "searchers": {}, "root_pos": arrays.track_pos, "root_yaw": arrays.track_yaw, "start_frames": {},
          "idle": {}, "modes_said": set(), "jump_spring": jump_spring(db) if "@takeoff" in masks else None,
          "crouch": takeoff_crouch(db) if "@takeoff" in masks else None}
    _SHARED[db] = sh
    return sh
