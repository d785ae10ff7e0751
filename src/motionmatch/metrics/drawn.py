"""The report of a drawn-trajectory run (:func:`motionmatch.runtime.drawn.run_drawing`):
where the character met the drawing against its nearest point, how closely and how fast
it followed it, the rounds it made."""

from __future__ import annotations

import numpy as np

from motionmatch.geometry.polyline import distance_to_path
from motionmatch.runtime.drawn import PHASE_CODES, DrawnPathInput

__all__ = ["REACHED", "drawn_report"]

#: A root this close (m) to the drawing has reached it.
REACHED = 0.35


def _xz3(xz: np.ndarray) -> np.ndarray:
    return np.stack([xz[:, 0], np.zeros(len(xz)), xz[:, 1]], axis=1)


def drawn_report(record, source: DrawnPathInput, fps: float, settle: float = 1.0) -> dict:
    """Numbers of a run (``record``: a :class:`~motionmatch.runtime.offline.RunRecord` at
    ``fps``; ``source``: its input, phases recorded): ``entry`` (the nearest point of the
    drawing to the start, [x, z] m), ``first_reached`` (the point of the drawing nearest to
    the root when it first came within :data:`REACHED` m of it) and
    ``first_reached_to_entry_m``, ``start_to_entry_m``,
    ``mean_distance_m`` / ``max_distance_m`` (the root to the drawing while following),
    ``speed_mps`` (mean ground speed while following, after ``settle`` s of it) and
    ``speed_cv`` (its standard deviation over the mean, per 0.5 s window), ``laps`` (times
    it came back past the drawing's start), ``closed``, ``loops``,
    ``phase`` (at the end), ``seconds``."""
    root = record.motion.world_positions[:, 0][:, [0, 2]].astype(np.float64)
    drawing = source.drawing
    phases = np.asarray(source.phases or [], dtype=np.int64)[: len(root)]
    d = distance_to_path(_xz3(root), _xz3(drawing.points))
    hit = np.flatnonzero(d <= REACHED)
    first = None
    if len(hit):
        s, _ = drawing.nearest(root[hit[0]])
        first = drawing.point_at(s)
    entry = source.steering.entry
    follow = phases == PHASE_CODES.index("follow")
    fi = np.flatnonzero(follow)
    speed = cv = None
    if len(fi):
        after = fi[fi >= fi[0] + round(settle * fps)]
        window = max(1, round(0.5 * fps))
        if len(after) > window:
            # mean speed over 0.5 s windows of consecutive following frames
            step = np.linalg.norm(np.diff(root, axis=0), axis=1) * fps
            sp = step[after[:-1]]
            k = len(sp) // window
            chunks = sp[: k * window].reshape(k, window).mean(axis=1) if k else sp[None]
            speed = float(sp.mean())
            cv = float(chunks.std() / max(chunks.mean(), 1e-9))
    return {
        "entry": None if entry is None else np.round(entry, 3).tolist(),
        "start_to_entry_m": None if entry is None else round(float(np.hypot(*(entry - root[0]))), 3),
        "first_reached": None if first is None else np.round(first, 3).tolist(),
        "first_reached_to_entry_m": None if first is None or entry is None
        else round(float(np.hypot(*(first - entry))), 3),
        "mean_distance_m": round(float(d[follow].mean()), 3) if follow.any() else None,
        "max_distance_m": round(float(d[follow].max()), 3) if follow.any() else None,
        "speed_mps": None if speed is None else round(speed, 3),
        "speed_cv": None if cv is None else round(cv, 3),
        "laps": int(source.steering.laps),
        "closed": bool(drawing.closed), "loops": bool(drawing.loops),
        "phase": source.phase,
        "seconds": round(len(root) / fps, 2),
    }
