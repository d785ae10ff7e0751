"""Drawn-trajectory control as the responsive motion-matching (ETH) paper has it (Sec. 3.4.2).

The user paints a line on the ground; the character walks *straight to the nearest point
of the drawing* (not its start), then *follows the drawing at a constant walking speed*
(Shift: the running speed), and at the end of the drawing either stops or, when the
drawing is closed (its end near its start) or looping is asked for, *goes straight back
to the start and does another round*. The drawing's timing plays no part (unlike the
timed paths of :mod:`motionmatch.control.path`, followed with long-horizon matching).

This module is the steering along the drawing; the runtime's input
(:class:`motionmatch.runtime.drawn.DrawnPathInput`) turns it into wants.

* :class:`Drawing`: the painted polyline resampled every :data:`SPACING` metres, whether
  it is closed, and its *lap*: the polyline one round follows (the drawing, plus the
  straight segment from its end back to its start when it loops open), stored twice so
  that a window crossing the end of a lap needs no special case. Arc lengths in metres.
* :func:`nearest_on_polyline` (compiled): the nearest point of a polyline to a position,
  among the segments within an arc window: the approach's target (the whole drawing)
  and the progress along it (a window ahead of the last progress: never back, never
  skipping to a later part of a self-crossing drawing).
* :class:`DrawnSteering`: the state of one character (phase, arc progress, laps) and
  :meth:`DrawnSteering.steer`: from the character's ground position, the desired velocity
  (pure pursuit of the point ``lookahead`` metres ahead along the route) and the desired
  future route at the query's time offsets (positions and directions at ``speed * t``
  metres along the route: the straight approach, then the drawing).

Files (:func:`load_drawing`): a path file with ``"control": "drawn"`` (the timed paths'
files have ``"timed"``, the default)::

    {"control": "drawn", "points": [[x, z], ...],  # or [[t, x, z], ...]: the times unread
     "loop": null, "run": false, "speed": null, "run_speed": null, "duration": null}

``loop`` as :class:`SteerSettings` (null: loop when closed), ``run``: run along it (Shift),
``speed`` / ``run_speed`` in m/s (null: the database's walk / run speeds), ``duration``:
seconds to simulate (null: the approach and the drawing walked once, or two rounds when
it loops). Every field is checked; a bad one is one :class:`~motionmatch.control.path.
PathError` line naming it and the fix.

Units: metres and seconds on the ground plane, points as ``(x, z)``; Y up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike

from motionmatch._limits import MAX_JSON_BYTES, loads_json, read_bytes
from motionmatch.control.path import PathError
from motionmatch.validation import SECONDS, WORLD

__all__ = ["CONTROLS", "PHASES", "SPACING", "Drawing", "DrawingFile", "DrawnSteering", "Steer", "SteerSettings",
           "file_control", "load_drawing", "nearest_on_polyline", "parse_drawing"]

#: What a path file's ``"control"`` may say: timed following (LHMM) or drawn-trajectory control.
CONTROLS = ("timed", "drawn")

#: Metres between the resampled points of a drawing.
SPACING = 0.05
#: What a character does: walk to the drawing, follow it, or stand at the end of an open one.
PHASES = ("approach", "follow", "done")
#: Most points a drawing may have as given (a path file's, a page's).
MAX_DRAWING_POINTS = 200_000
#: Longest drawing (m), so that its resampled points stay bounded.
MAX_DRAWING_LENGTH = 20_000.0


@numba.njit(cache=True, nogil=True)
def nearest_on_polyline(points: np.ndarray, arc: np.ndarray, x: float, z: float, lo: float,
                        hi: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """The nearest point to ``(x, z)`` of the polyline ``points [P, 2]`` (arc lengths
    ``arc [P]``, non-decreasing) among its segments that meet the arc window ``[lo, hi]``
    (metres), clamped to the window: ``(its arc length, its distance)`` in metres. The
    first of equally near points wins (the earliest along the line)."""
    n = points.shape[0]
    best_s, best_d2 = lo, np.inf
    # the first segment that reaches lo (arc is sorted)
    k0 = np.searchsorted(arc, lo, side="right") - 1
    if k0 < 0:
        k0 = 0
    for k in range(k0, n - 1):
        a0, a1 = arc[k], arc[k + 1]
        if a0 > hi:
            break
        ax, az = points[k, 0], points[k, 1]
        dx, dz = points[k + 1, 0] - ax, points[k + 1, 1] - az
        seg = a1 - a0
        # the segment's part inside the window, as fractions
        t_lo = 0.0 if a0 >= lo or seg <= 0.0 else (lo - a0) / seg
        t_hi = 1.0 if a1 <= hi or seg <= 0.0 else (hi - a0) / seg
        L2 = dx * dx + dz * dz
        t = 0.0 if L2 <= 1e-18 else ((x - ax) * dx + (z - az) * dz) / L2
        t = min(max(t, t_lo), t_hi)
        px, pz = ax + t * dx - x, az + t * dz - z
        d2 = px * px + pz * pz
        if d2 < best_d2 - 1e-12:
            best_d2 = d2
            best_s = a0 + t * seg
    return best_s, math.sqrt(best_d2)


def _resample(points: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """``points [P, 2]`` at about ``spacing`` metres apart along the line (the ends kept),
    and their arc lengths ``[Q]``."""
    step = np.linalg.norm(np.diff(points, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(step)])
    n = max(math.ceil(arc[-1] / spacing), 1)
    s = np.linspace(0.0, arc[-1], n + 1)
    out = np.stack([np.interp(s, arc, points[:, 0]), np.interp(s, arc, points[:, 1])], axis=1)
    return out, s


@dataclass(frozen=True)
class SteerSettings:
    """How a character follows a drawing (immutable; metres and seconds).

    Attributes:
        speed: walking speed along the drawing (m/s); ``None``: the database's walk speed.
        run_speed: the speed with Shift held (or ``run``); ``None``: the database's run speed.
        loop: go round again at the end: ``True`` (an open drawing: straight back to its
            start), ``False`` (stop at the end; a closed drawing too), ``None`` (loop when
            the drawing is closed).
        close_radius: a drawing whose end lies within this of its start is closed.
        capture: the approach ends (the following starts) within this of the nearest point.
        lookahead: the pursued point lies this far ahead along the route (m).
        window: how far ahead of its progress (m) the character may be found on the
            drawing (a self-crossing drawing is followed in order).
        end_radius: an open drawing is finished this close (m of arc) to its end.
    """

    speed: float | None = None
    run_speed: float | None = None
    loop: bool | None = None
    close_radius: float = 0.6
    capture: float = 0.6
    lookahead: float = 0.6
    window: float = 1.5
    end_radius: float = 0.25

    def __post_init__(self) -> None:
        for name in ("speed", "run_speed"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and 0.1 <= v <= 12.0):
                raise ValueError(f"{name} must be within 0.1 and 12 m/s, got {v!r}")
        for name in ("close_radius", "capture", "lookahead", "window", "end_radius"):
            v = getattr(self, name)
            if not (math.isfinite(v) and 0.0 < v <= 10.0):
                raise ValueError(f"{name} must be within 0 and 10 m, got {v!r}")
        if self.loop not in (None, True, False):
            raise ValueError(f"loop must be true, false or null (loop when closed), got {self.loop!r}")


class Drawing:
    """A painted line on the ground (see the module docstring).

    Args:
        points: ``[P, 2]`` (x, z) metres in drawing order (``[P, 3]``: y is dropped).
        settings: ``close_radius`` and ``loop`` decide whether it is closed and loops.

    Attributes:
        points, arc: the drawing resampled (``[Q, 2]``, ``[Q]`` m from its start).
        length: its length (m); closed: whether its end met its start (then it ends at it).
        loops: whether a round follows the last; lap: one round's length (m).
        route, route_arc: the lap's polyline twice over (``[R, 2]``, ``[R]``).
    """

    def __init__(self, points: ArrayLike, settings: SteerSettings | None = None):
        st = settings or SteerSettings()
        try:
            p = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError):
            raise PathError("a drawing's points must be numbers [[x, z], ...]") from None
        if p.ndim != 2 or p.shape[1] not in (2, 3):
            raise PathError(f"a drawing's points must be [n, 2] (x, z), got shape {list(p.shape)}")
        if p.shape[1] == 3:
            p = p[:, [0, 2]]
        if len(p) > MAX_DRAWING_POINTS:
            raise PathError(f"a drawing of {len(p):,} points, more than {MAX_DRAWING_POINTS:,}: thin it out")
        if not np.isfinite(p).all():
            raise PathError(f"drawing point {int(np.flatnonzero(~np.isfinite(p).all(axis=1))[0])} is not finite")
        if np.abs(p).max(initial=0.0) > WORLD[1]:
            raise PathError(f"a drawing's x and z must be within {WORLD[0]:g} and {WORLD[1]:g} m")
        keep = np.concatenate([[True], np.linalg.norm(np.diff(p, axis=0), axis=1) > 1e-6])
        p = p[keep]
        if len(p) < 2:
            raise PathError("a drawing needs at least two distinct points")
        length = float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum())
        if length < 0.3:
            raise PathError(f"the drawing is {length:.2f} m long; draw at least 0.3 m")
        if length > MAX_DRAWING_LENGTH:
            raise PathError(f"the drawing is {length:,.0f} m long, more than {MAX_DRAWING_LENGTH:,.0f} m")
        gap = float(np.linalg.norm(p[-1] - p[0]))
        self.closed = bool(gap <= st.close_radius and length > 4.0 * st.close_radius)
        if self.closed and gap > 1e-6:
            p = np.vstack([p, p[:1]])  # ends where it started
        self.points, self.arc = _resample(p, SPACING)
        self.length = float(self.arc[-1])
        self.loops = self.closed if st.loop is None else bool(st.loop)
        if self.loops:
            lap = self.points if self.closed else np.vstack([self.points, self.points[:1]])  # straight back
            lap, _ = (lap, None) if self.closed else _resample(lap, SPACING)
            twice = np.vstack([lap, lap[1:]])
            step = np.linalg.norm(np.diff(twice, axis=0), axis=1)
            self.route = twice
            self.route_arc = np.concatenate([[0.0], np.cumsum(step)])
            self.lap = float(self.route_arc[len(lap) - 1])
        else:
            self.route, self.route_arc, self.lap = self.points, self.arc, self.length
        self.route.setflags(write=False)
        self.route_arc.setflags(write=False)

    def nearest(self, xz: ArrayLike, lo: float = 0.0, hi: float | None = None) -> tuple[float, float]:
        """``(arc length, distance)`` (m) of the nearest point of the drawing itself (not
        the way back of an open loop) to ``xz`` within the arc window ``[lo, hi]``."""
        x, z = float(xz[0]), float(xz[1])
        return nearest_on_polyline(self.points, self.arc, x, z, float(lo), self.length if hi is None else float(hi))

    def point_at(self, s: ArrayLike) -> np.ndarray:
        """``[..., 2]`` points of the route at arc lengths ``s`` (m, clamped to it)."""
        a, r = self.route_arc, self.route
        if np.ndim(s) == 0:  # (one point, every step: plain floats)
            sv = min(max(float(s), 0.0), float(a[-1]))
            k = min(max(int(np.searchsorted(a, sv, side="right")) - 1, 0), len(a) - 2)
            a0, a1 = float(a[k]), float(a[k + 1])
            return r[k] + (r[k + 1] - r[k]) * ((sv - a0) / (a1 - a0) if a1 > a0 else 0.0)
        s = np.clip(np.asarray(s, dtype=np.float64), 0.0, a[-1])
        # (a binary search per point: np.interp reads the whole route on every call)
        k = np.clip(np.searchsorted(a, s, side="right") - 1, 0, len(a) - 2)
        seg = a[k + 1] - a[k]
        t = np.where(seg > 0.0, (s - a[k]) / np.maximum(seg, 1e-12), 0.0)
        return r[k] + (r[k + 1] - r[k]) * t[..., None]


class Steer(NamedTuple):
    """One step of :meth:`DrawnSteering.steer`.

    Attributes:
        velocity: ``[2]`` desired ground velocity (m/s, x and z).
        positions: ``[K, 2]`` the desired route at the offsets (world x, z).
        directions: ``[K, 2]`` unit directions of travel there.
        speeds: ``[K]`` m/s there (0 beyond the end of an open drawing).
        phase: one of :data:`PHASES`.
    """

    velocity: np.ndarray
    positions: np.ndarray
    directions: np.ndarray
    speeds: np.ndarray
    phase: str


class DrawnSteering:
    """One character following a :class:`Drawing` (see the module docstring).

    Attributes:
        phase: ``"approach"`` (straight to the nearest point of the drawing), ``"follow"``
            or ``"done"`` (at the end of a drawing that does not loop).
        progress: arc length (m) along the lap reached.
        laps: times it came back past the start of the drawing (looping ones).
        entry: ``[2]`` the nearest point of the drawing the approach heads for (``None``
            before the first step) and ``entry_arc`` its arc length on the drawing.
    """

    def __init__(self, drawing: Drawing, settings: SteerSettings | None = None):
        self.drawing = drawing
        self.settings = settings or SteerSettings()
        self.phase = "approach"
        self.progress = 0.0
        self.laps = 0
        self.entry: np.ndarray | None = None
        self.entry_arc = 0.0

    def _advance(self, xz: np.ndarray) -> None:
        """Move the progress along the lap to where the character is (within the window
        ahead; never back), counting laps and the end of an open drawing."""
        d, st = self.drawing, self.settings
        lo = max(self.progress - 0.1, 0.0)
        s, _ = nearest_on_polyline(d.route, d.route_arc, float(xz[0]), float(xz[1]), lo, self.progress + st.window)
        self.progress = max(self.progress, s)
        if d.loops and self.progress >= d.lap:
            self.progress -= d.lap
            self.laps += 1
        elif not d.loops and self.progress >= d.length - st.end_radius:
            self.phase = "done"

    def steer(self, xz: ArrayLike, speed: float, offsets: ArrayLike) -> Steer:
        """The desired velocity and future route for a character at ground position
        ``xz [2]`` moving at ``speed`` (m/s), at the query's time ``offsets [K]`` (s)."""
        d, st = self.drawing, self.settings
        p = np.asarray(xz, dtype=np.float64)[:2]
        offs = np.asarray(offsets, dtype=np.float64)
        if self.entry is None:
            self.entry_arc = d.nearest(p)[0]
            self.entry = d.point_at(self.entry_arc)
        if self.phase == "approach" and float(np.hypot(*(self.entry - p))) <= st.capture:
            self.phase = "follow"
            self.progress = self.entry_arc
        if self.phase == "follow":
            self._advance(p)
        if self.phase == "done":
            end = d.points[-1]
            k = len(offs)
            heading = d.points[-1] - d.points[-2]
            heading = heading / max(float(np.hypot(*heading)), 1e-12)
            return Steer(np.zeros(2), np.repeat(end[None], k, 0), np.repeat(heading[None], k, 0), np.zeros(k), "done")
        # the route from the character: straight to the entry (approach) or to the pursued
        # point (follow), then along the lap
        if self.phase == "approach":
            start = self.entry_arc
            head = self.entry
        else:
            start = self.progress + st.lookahead
            head = d.point_at(start)
        horizon = speed * float(offs.max(initial=0.0)) + st.lookahead + 2 * SPACING
        a = d.route_arc
        i0 = int(np.searchsorted(a, start, side="right"))
        i1 = int(np.searchsorted(a, start + horizon, side="right")) + 1
        poly = np.vstack([p[None], head[None], d.route[i0:i1]])
        seg = np.linalg.norm(np.diff(poly, axis=0), axis=1)
        arc = np.concatenate([[0.0], np.cumsum(seg)])
        u = np.minimum(speed * offs, arc[-1])
        pos = np.stack([np.interp(u, arc, poly[:, 0]), np.interp(u, arc, poly[:, 1])], axis=1)
        # each sample's direction: of the segment it lies on (the next moving one)
        moving = seg > 1e-9
        k = np.clip(np.searchsorted(arc, u, side="right") - 1, 0, len(seg) - 1)
        dirs = np.diff(poly, axis=0)
        dirs = dirs / np.maximum(seg, 1e-12)[:, None]
        if not moving.all() and moving.any():  # standing segments take the next moving one's
            nxt = np.where(moving, np.arange(len(seg)), len(seg))
            nxt = np.minimum.accumulate(nxt[::-1])[::-1]
            nxt = np.where(nxt >= len(seg), np.flatnonzero(moving)[-1], nxt)
            dirs = dirs[nxt]
        dirs = dirs[k]
        to = head - p
        dist = float(np.hypot(*to))
        v = to / dist * speed if dist > 1e-9 else dirs[0] * speed
        # an open drawing's route runs out at its end: the samples there stand
        speeds = np.where(~d.loops & (speed * offs >= arc[-1] - 1e-9), 0.0, speed)
        return Steer(v, pos, dirs, speeds, self.phase)


# ----------------------------------------------------------------------------- files
@dataclass(frozen=True, eq=False)
class DrawingFile:
    """A ``"control": "drawn"`` path file: the drawing, its settings, whether it is run
    along, and the seconds to simulate (``None``: :meth:`seconds` decides)."""

    drawing: Drawing
    settings: SteerSettings
    run: bool = False
    duration: float | None = None

    def seconds(self, start: ArrayLike, speed: float) -> float:
        """Seconds to simulate from ``start [2]`` at ``speed`` m/s: the file's, else the
        approach and the drawing once (two rounds when it loops), with a margin."""
        if self.duration is not None:
            return self.duration
        d = self.drawing
        approach = d.nearest(np.asarray(start, dtype=np.float64))[1]
        walk = approach + (2.0 * d.lap if d.loops else d.length)
        return float(min(1.25 * walk / max(speed, 0.1) + 3.0, SECONDS[1]))


def _flag(obj: dict, name: str, allow_null: bool) -> bool | None:
    v = obj.get(name)
    if v is None and allow_null:
        return None
    if not isinstance(v, bool):
        nul = ", or null" if allow_null else ""
        raise PathError(f'"{name}" must be true or false{nul}, got {v!r}')
    return v


def _speed(obj: dict, name: str) -> float | None:
    v = obj.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and 0.1 <= v <= 12.0):
        raise PathError(f'"{name}" must be a speed within 0.1 and 12 m/s (or null: the database\'s), got {v!r}')
    return float(v)


def file_control(obj: Any) -> str:
    """A parsed path file's ``"control"``: ``"timed"`` (the default) or ``"drawn"``; any
    other value is a :class:`PathError` naming the choices."""
    v = obj.get("control", "timed") if isinstance(obj, dict) else "timed"
    if v not in CONTROLS:
        raise PathError(f'"control" must be "timed" (follow the drawing\'s timing, LHMM) or "drawn" (walk to the '
                        f'nearest point and along it at a constant speed), got {v!r}')
    return v


_DRAWN_FIELDS = ("control", "points", "loop", "run", "speed", "run_speed", "duration", "name", "description")


def parse_drawing(obj: Any) -> DrawingFile:
    """A :class:`DrawingFile` from a parsed ``"control": "drawn"`` object (see the module docstring)."""
    if not isinstance(obj, dict) or file_control(obj) != "drawn":
        raise PathError('a drawing file is a JSON object with "control": "drawn" and "points": [[x, z], ...]')
    unknown = sorted(set(obj) - set(_DRAWN_FIELDS))
    if unknown:
        raise PathError(f"unknown field(s) {unknown}; a drawing file has {', '.join(_DRAWN_FIELDS)}")
    pts = obj.get("points")
    if not isinstance(pts, list) or not pts:
        raise PathError('"points" must be a list of [x, z] (or [t, x, z]) points in metres')
    width = len(pts[0]) if isinstance(pts[0], list) else 0
    if width not in (2, 3) or any(not isinstance(p, list) or len(p) != width for p in pts):
        raise PathError('"points" must all be [x, z] pairs (or all [t, x, z] triples), in metres')
    if any(isinstance(c, bool) or not isinstance(c, (int, float)) for p in pts for c in p):
        raise PathError('"points" must hold numbers only')
    xz = np.asarray(pts, dtype=np.float64)[:, -2:]
    duration = obj.get("duration")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))
                                 or not (math.isfinite(duration) and 0.0 < duration <= SECONDS[1])):
        raise PathError(f'"duration" must be a number of seconds within 0 and {SECONDS[1]:g} (or null), '
                        f"got {duration!r}")
    settings = SteerSettings(speed=_speed(obj, "speed"), run_speed=_speed(obj, "run_speed"),
                             loop=_flag(obj, "loop", True))
    run = bool(_flag(obj, "run", False)) if "run" in obj else False
    return DrawingFile(Drawing(xz, settings), settings, run, None if duration is None else float(duration))


def load_drawing(file: str | Path) -> DrawingFile:
    """Read a ``"control": "drawn"`` path file (errors name the file)."""
    file = Path(file)
    data = read_bytes(file, "path", MAX_JSON_BYTES, error=PathError)
    obj = loads_json(data, str(file), error=PathError)
    try:
        return parse_drawing(obj)
    except PathError as e:
        raise PathError(f"{file}: {e}") from None
