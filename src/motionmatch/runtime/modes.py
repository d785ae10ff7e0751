"""What the database says about its gaits and special actions (speeds, jump/creep targets)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motionmatch.control.intent import GaitSpeeds
from motionmatch.database import MotionDatabase


def _has_tag(db: MotionDatabase, tag: str) -> bool:
    return tag in db.tags


def gait_speeds_from_database(db: MotionDatabase) -> GaitSpeeds:
    """Typical gait speeds measured from the database: the median root speed of moving
    frames of clips tagged walk / run / sprint / creep (defaults where a tag is absent)."""
    speed = db.root_speeds()
    d = GaitSpeeds()

    def median(tag: str, default: float, q: float = 50) -> float:
        if not _has_tag(db, tag):
            return default
        m = db.mask(tag) & (speed > 0.5)
        return float(np.percentile(speed[m], q)) if m.sum() > 30 else default

    walk = median("walk", d.walk)
    run = max(median("run", d.run), walk + 0.5)
    sprint = max(median("sprint", d.sprint), median("run", d.sprint, 90), run)
    creep_mask = db.mask("creep") & (speed > 0.2) if _has_tag(db, "creep") else None
    creep = float(np.median(speed[creep_mask])) if creep_mask is not None and creep_mask.sum() > 30 else d.creep
    return GaitSpeeds(walk=walk, run=run, sprint=sprint, creep=creep)


def vertical_columns(db: MotionDatabase) -> np.ndarray:
    """Indices of the vertical (height / vertical velocity) feature dimensions."""
    cols = []
    for t in db.schema.terms:
        if t.is_trajectory and t.vertical:
            start = db.schema.slice(t.name).start
            cols.extend(start + 3 * i + 1 for i in range(len(t.offsets)))
    return np.asarray(cols, dtype=np.int64)


@dataclass
class VerticalTargets:
    """Raw vertical feature values to ask for when jumping and creeping (3D schemas)."""

    jump: np.ndarray | None
    creep: np.ndarray | None


def vertical_targets(db: MotionDatabase) -> VerticalTargets:
    """Typical vertical features of take-offs in ``jump`` clips and of ``creep`` clips.

    Jump: the 3% of valid jump-tagged frames whose future hips rise the most above their
    current height (take-offs). Creep: creep-tagged frames whose future hips are below 60% of the
    database's median future hips height. Each target is the mean of those frames'
    vertical features (heights in m, vertical velocities in m/s).
    """
    cols = vertical_columns(db)
    if cols.size == 0:
        return VerticalTargets(None, None)
    heights = [db.schema.slice(t.name).start + 3 * i + 1
               for t in db.schema.terms if t.kind == "trajectory_position" and t.vertical for i in range(len(t.offsets))]
    raw = db.raw_features
    h = raw[:, heights]
    jump = creep = None
    if _has_tag(db, "jump"):
        m = db.mask("jump")
        rise = h.max(axis=1) - db.translations[:, 1, 1]  # joint 1 (hips) height above the root
        if m.sum() > 30:
            thr = np.percentile(rise[m], 97)
            sel = m & (rise >= thr)
            jump = raw[sel][:, cols].mean(axis=0)
    if _has_tag(db, "creep"):
        m = db.mask("creep")
        low = m & (h.max(axis=1) < 0.6 * np.median(h[db.valid]))
        if low.sum() > 30:
            creep = raw[low][:, cols].mean(axis=0)
    return VerticalTargets(jump, creep)
