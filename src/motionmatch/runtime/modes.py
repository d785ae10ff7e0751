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


def foot_heights(db: MotionDatabase) -> np.ndarray | None:
    """``[N, 2]`` heights (m) of the contact feet above the ground, from the schema's
    ``bone_position`` features of the feet (the root is on the ground), if it has them."""
    for t in db.schema.terms:
        if t.kind == "bone_position" and tuple(t.joints[:2]) == ("left_foot", "right_foot"):
            start = db.schema.slice(t.name).start
            return db.raw_features[:, [start + 1, start + 4]].astype(np.float64)
    return None


def flight_starts(db: MotionDatabase, min_flight_s: float = 0.11, clearance: float = 0.12) -> np.ndarray:
    """Frames where a flight phase starts: both feet out of contact and higher than
    ``clearance`` (m), with the hips above 70% of their median height (upright, not
    crawling), for at least ``min_flight_s`` (longer than a running stride's ~0.07 s
    airborne time)."""
    if db.contacts.shape[1] < 2:
        return np.zeros(0, dtype=np.int64)
    air = ~db.contacts.any(axis=1)
    h = foot_heights(db)
    if h is not None:
        air &= h.min(axis=1) > clearance
    hips = db.translations[:, 1, 1].astype(np.float64)  # joint 1's height above the ground root
    air &= hips > 0.7 * np.median(hips[db.valid])
    same = np.r_[False, db.frame_clip[1:] == db.frame_clip[:-1]]
    start = air & ~(np.r_[False, air[:-1]] & same)
    n = max(1, round(min_flight_s * db.fps))
    # airborne frames in the n frames from each start, within its clip
    csum = np.r_[0, np.cumsum(air)]
    idx = np.arange(len(air))
    end = np.minimum(idx + n, db.clip_stops[db.frame_clip])
    long_enough = (csum[end] - csum[idx]) >= n
    return np.flatnonzero(start & long_enough)


def takeoff_mask(db: MotionDatabase, lead_s: tuple[float, float] = (0.1, 0.45)) -> np.ndarray:
    """``[N]`` valid frames from which a jump (a flight phase, see :func:`flight_starts`)
    begins ``lead_s`` seconds later, in the same clip: where a jump search should land."""
    out = np.zeros(db.num_frames, dtype=bool)
    lo, hi = (round(x * db.fps) for x in lead_s)
    for f in flight_starts(db):
        a = max(int(db.clip_starts[db.frame_clip[f]]), f - hi)
        out[a: max(a, f - lo + 1)] = True
    return out & db.valid


@dataclass
class VerticalTargets:
    """Raw vertical feature values to ask for when jumping and creeping (3D schemas)."""

    jump: np.ndarray | None
    creep: np.ndarray | None


def vertical_targets(db: MotionDatabase) -> VerticalTargets:
    """Typical vertical features of take-offs in ``jump`` clips and of ``creep`` clips.

    Jump: take-off frames (:func:`takeoff_mask`), or if the data has no flight phases,
    the 3% of jump-tagged frames whose future hips rise the most. Creep: creep-tagged frames whose future hips are below 60% of the
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
    takeoff = takeoff_mask(db)
    if takeoff.sum() > 10:
        jump = raw[takeoff][:, cols].mean(axis=0)
    elif _has_tag(db, "jump"):
        m = db.mask("jump")
        rise = h.max(axis=1) - db.translations[:, 1, 1]  # joint 1 (hips) height above the root
        if m.sum() > 30:
            sel = m & (rise >= np.percentile(rise[m], 97))
            jump = raw[sel][:, cols].mean(axis=0)
    if _has_tag(db, "creep"):
        m = db.mask("creep")
        low = m & (h.max(axis=1) < 0.6 * np.median(h[db.valid]))
        if low.sum() > 30:
            creep = raw[low][:, cols].mean(axis=0)
    return VerticalTargets(jump, creep)
