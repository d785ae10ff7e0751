"""What a database lets a viewer character do: each mode (walk, jump, dance, creep, punch, idle)
playable or not, and why not (:func:`database_modes`, computed once per database), and
the keys that ask for a mode."""

from __future__ import annotations

import weakref

import numpy as np

__all__ = ["MODE_KEYS", "MODE_MIN_SECONDS", "database_modes"]

#: The keys that ask for a mode (canonical key name -> mode), as the controller reads them.
MODE_KEYS = {"j": "jump", "p": "dance", "c": "creep", "f": "punch"}

#: Seconds of matching frames a database needs for a mode to count as playable.
MODE_MIN_SECONDS = 0.5

_MODES_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _seconds(db, mask: np.ndarray) -> float:
    """Seconds of the database's valid frames in ``mask``."""
    return float(np.count_nonzero(mask & db.valid)) / float(db.fps)


def _tag_frames(db, tag: str) -> np.ndarray:
    """``[N]`` frames of clips tagged ``tag`` (none if no clip has the tag)."""
    if tag not in db.tags:
        return np.zeros(db.num_frames, dtype=bool)
    return db.mask(tag)


def _mode(available: bool, reason: str, frames: np.ndarray, db) -> dict:
    """One entry of :func:`database_modes`."""
    return {"available": bool(available), "reason": None if available else reason,
            "seconds": round(_seconds(db, frames), 2)}


def database_modes(db) -> dict[str, dict]:
    """Which modes the database can play, as the page shows them: ``{mode: {"available",
    "reason" (one line, None when available), "seconds" (of frames for it)}}``.

    The controller enters ``jump``, ``dance``, ``punch`` and ``creep`` only with frames for
    them (the take-offs it finds or ``jump`` clips; ``dance`` clips; ``punch`` clips; ``creep`` clips, see
    :mod:`motionmatch.runtime.controller`); a ``creep`` clip counts only where the hips
    are low (below 60% of their median height: crawling, not walking upright, as
    :func:`motionmatch.runtime.modes.vertical_targets` asks for), else C would show
    "creep" while the figure walks. ``idle`` needs standing frames (root below 0.2 m/s),
    ``locomotion`` moving ones. Computed once per database."""
    cached = _MODES_CACHE.get(db)
    if cached is not None:
        return cached
    from motionmatch.runtime.modes import takeoff_mask

    need = MODE_MIN_SECONDS
    speed = db.root_speeds()
    hips = db.translations[:, 1, 1].astype(np.float64)  # joint 1's height above the ground root
    low = hips < 0.6 * float(np.median(hips[db.valid])) if db.valid.any() else np.zeros(db.num_frames, bool)
    creep_tagged = _tag_frames(db, "creep")
    crawling = creep_tagged & low
    jumps = takeoff_mask(db)
    if jumps.sum() <= 10:  # no flight phases found: the controller searches jump clips
        jumps = _tag_frames(db, "jump")
    dance = _tag_frames(db, "dance")
    punch = _tag_frames(db, "punch")
    standing = speed < 0.2
    moving = speed > 0.5
    if not creep_tagged.any():
        creep_reason = "this database has no crawling clip (none is tagged creep)"
    else:
        creep_reason = (f"this database has no crawling clip (its creep clips, {_seconds(db, creep_tagged):.1f} s, "
                        "are upright)")
    modes = {
        "idle": _mode(_seconds(db, standing) >= need, "this database has no standing clip", standing, db),
        "locomotion": _mode(_seconds(db, moving) >= need, "this database has no walking clip", moving, db),
        "jump": _mode(jumps.any(), "this database has no jump (no flight phase, no jump clip)", jumps, db),
        "dance": _mode(_seconds(db, dance) >= need, "this database has no dance clip", dance, db),
        "creep": _mode(_seconds(db, crawling) >= need, creep_reason, crawling, db),
        "punch": _mode(_seconds(db, punch) >= need, "this database has no punch (no clip tagged punch)", punch, db),
    }
    _MODES_CACHE[db] = modes
    return modes
