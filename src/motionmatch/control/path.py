"""Drawn, time-stamped paths and the revised future queries that follow them.

A user draws a path on the ground; every input event gives a time and a point. This
module turns those events into what a motion-matching query needs (the paper's
Sections V and VI):

1. **Resampling** (:func:`resample_path`): the events come at irregular times; they are
   linearly interpolated at a fixed rate (the paper: 150 Hz) and the drawing time is
   scaled to world time by a *drawing-speed factor* (the paper: 0.2 for a path drawn with
   a mouse on screen, i.e. 150 Hz samples used as 30 Hz ones; 1.0, the default for
   files, for paths given in world seconds). World time is drawing time / ``scale``.
2. **Smoothing** (:func:`smooth_path`): a Gaussian filter (sigma 3, width 19 path
   frames) over the samples, with both ends extended by linear extrapolation from the
   first two and the last two points so that the path keeps its length and end speeds.
3. **Query revision** (:class:`motionmatch.control.revision.QueryReviser`): at the character's current root position,
   the *desired position* ``p_d = p(i_d)`` is the nearest path point in a window
   ``[i_prev - alpha, i_prev + beta]`` of the previous one (alpha = 0, beta = 10: never
   back, never far ahead, so self-crossing paths are followed in order; where the path
   stands still, i.e. points within :data:`TIE` of the nearest, the drawn time picks
   among them, so a pause in the drawing makes the character wait that long); the future
   points at the schema's offsets after ``i_d`` are limited to what a character moving
   at ``v_max`` reaches along the path; a sharp corner (tangents more than 80 degrees
   apart) between two future points moves the point after it onto the line toward the
   corner (and advances ``i_d`` by ``c = 2`` frames when it is stuck); facing directions
   are the path's tangents, tangents turned by a joystick angle, or DirectionNet's.
   Beyond the paper (issue 17, for turns tighter than the data runs at the drawn speed):
   the limits include a turn limit reached by braking ahead of the turn, ``i_d`` keeps
   pace with the limited timeline (``min_pace``, ``max_pace``), and tangent facings
   follow the query's own polyline from the root (``steer``): see
   :class:`RevisionSettings`.

Units. Metres and seconds on the ground plane (x, z), Y up. Parameters that the paper
counts in *path frames* (smoothing sigma and width, alpha, beta, c) keep its meaning of
one path frame = 1/30 s of world time (:data:`PATH_FRAME_RATE`: 150 Hz x 0.2) and are
converted to this path's samples, so a path resampled at another rate behaves the same.

Files (:func:`load_path`): JSON ``{"points": [[t, x, z], ...]}`` (seconds, metres; other
optional keys: ``"scale"``, ``"rate"``, ``"joystick": [[t, degrees], ...]``), or CSV with
columns ``t, x, z`` (an optional header line).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from motionmatch._limits import MAX_JSON_BYTES, loads_json, read_bytes
from motionmatch.errors import MotionMatchError
from motionmatch.geometry.polyline import route_around
from motionmatch.validation import PATH_SCALE, SECONDS, WORLD

__all__ = [
    "CHORD",
    "DESIRED_MODES",
    "FACING_MODES",
    "MAX_BLUR",
    "PATH_FRAME_RATE",
    "SLOW",
    "TIE",
    "PathError",
    "TimedPath",
    "braking_profile",
    "gaussian_kernel",
    "load_path",
    "parse_path",
    "resample_path",
    "smooth_path",
    "smooth_path_capped",
]

#: World rate (Hz) of the paper's path frames: 150 Hz samples used as 30 Hz (factor 0.2).
PATH_FRAME_RATE = 30.0
DESIRED_MODES = ("window", "current", "nearest")
#: Path points closer than this (m) to the nearest one count as the same place in the desired-position search.
TIE = 1e-3
#: Metres of path either side of a sample over which its heading and bend are measured
#: (:class:`TimedPath`): longer than a hand's jitter, shorter than any turn a person runs.
CHORD = 0.1
#: Path speed (m/s) below which its steps are taken for jitter by the corner detector.
SLOW = 0.2
#: Smoothing blurs the path by at most about this many metres (:func:`smooth_path_capped`).
MAX_BLUR = 0.15
FACING_MODES = ("tangent", "joystick", "net")
MAX_PATH_EVENTS = 200_000
"""Points of one path (a file's events): an hour drawn at 55 Hz; coordinates lie within
:data:`motionmatch.validation.WORLD` (m)."""
MAX_PATH_SAMPLES = 1_080_000
"""Samples of a resampled path: two hours at 150 Hz; a path's world duration is at most
:data:`motionmatch.validation.SECONDS` (an hour) and its drawing-speed scale within
:data:`motionmatch.validation.PATH_SCALE`."""


class PathError(MotionMatchError, ValueError):
    """A path cannot be used: too few points, NaNs, times not increasing, zero length, a bad file."""


# ----------------------------------------------------------------------------- input
@dataclass(frozen=True)
class RawPath:
    """Path events as drawn: ``times [R]`` (s, drawing time) and ``points [R, 2]`` (x, z in m),
    plus what the file said about them (``scale``, ``rate``, ``joystick [[t, deg], ...]``)."""

    times: np.ndarray
    points: np.ndarray
    scale: float | None = None
    rate: float | None = None
    joystick: np.ndarray | None = None


def _check_events(times: ArrayLike, xz: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    try:
        t = np.asarray(times, dtype=np.float64).reshape(-1)
        p = np.asarray(xz, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise PathError(f"path points must be numbers: {e}") from None
    if p.ndim != 2 or p.shape[1] not in (2, 3):
        raise PathError(f"path points must be [n, 2] (x, z) or [n, 3] (x, y, z), got shape {list(p.shape)}")
    if p.shape[1] == 3:
        p = p[:, [0, 2]]
    if len(t) != len(p):
        raise PathError(f"path has {len(t)} times but {len(p)} points")
    if len(t) < 2:
        raise PathError(f"a path needs at least two points, got {len(t)}")
    if len(t) > MAX_PATH_EVENTS:
        raise PathError(f"points: {len(t):,} points, more than {MAX_PATH_EVENTS:,}; thin the path out")
    bad = ~(np.isfinite(t) & np.isfinite(p).all(axis=1))
    if bad.any():
        raise PathError(f"path point {int(np.flatnonzero(bad)[0])} is not finite (NaN or infinity)")
    far = np.abs(p).max(axis=1) > WORLD[1]
    if far.any():
        i = int(np.flatnonzero(far)[0])
        raise PathError(f"points[{i}]: x and z must be within {WORLD[0]:g} and {WORLD[1]:g} m, got "
                        f"[{p[i, 0]:g}, {p[i, 1]:g}]")
    dt = np.diff(t)
    if np.any(dt <= 0):
        i = int(np.flatnonzero(dt <= 0)[0]) + 1
        raise PathError(f"path times must increase strictly: point {i} has t = {t[i]:g} after t = {t[i - 1]:g}")
    if float(np.linalg.norm(np.diff(p, axis=0), axis=1).sum()) < 1e-6:
        raise PathError("the path has zero length (all points are the same)")
    return t, p


def parse_path(obj) -> RawPath:
    """A :class:`RawPath` from a parsed JSON object ``{"points": [[t, x, z], ...], ...}``
    (also accepted: ``{"t": [...], "x": [...], "z": [...]}`` or a bare list of points)."""
    if isinstance(obj, list):
        obj = {"points": obj}
    if not isinstance(obj, dict):
        raise PathError('a path must be a JSON object {"points": [[t, x, z], ...]}')
    if obj.get("control", "timed") != "timed":  # (drawn-trajectory files: control.path_steering.load_drawing)
        raise PathError(f'"control" is {obj["control"]!r}: this reads timed paths ("control": "timed"); '
                        '"drawn" files are read by motionmatch.control.path_steering.load_drawing')
    if "points" in obj:
        try:
            a = np.asarray(obj["points"], dtype=np.float64)
        except (TypeError, ValueError):
            raise PathError('"points" must be a list of [t, x, z] numbers') from None
        if a.ndim != 2 or a.shape[1] != 3:
            raise PathError(f'"points" must be a list of [t, x, z] triples, got shape {list(a.shape)}')
        t, p = a[:, 0], a[:, 1:]
    elif all(k in obj for k in ("t", "x", "z")):
        t, p = obj["t"], np.stack([np.asarray(obj["x"], float), np.asarray(obj["z"], float)], axis=1)
    else:
        raise PathError('a path needs "points": [[t, x, z], ...] (seconds, metres on the ground plane)')
    t, p = _check_events(t, p)
    scale = obj.get("scale")
    rate = obj.get("rate")
    joy = obj.get("joystick")
    if joy is not None:
        try:
            joy = np.asarray(joy, dtype=np.float64).reshape(-1, 2)
        except (TypeError, ValueError):
            raise PathError('"joystick" must be a list of [t, degrees] pairs') from None
    for name, v in (("scale", scale), ("rate", rate)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise PathError(f'"{name}" must be a positive number, got {v!r}')
    return RawPath(t, p, None if scale is None else float(scale), None if rate is None else float(rate), joy)


def _parse_csv(text: str) -> RawPath:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if rows and not _is_number(rows[0][0]):
        head = [c.strip().lower() for c in rows[0]]
        rows = rows[1:]
        try:
            cols = [head.index(n) for n in ("t", "x", "z")]
        except ValueError:
            raise PathError(f"a CSV path needs columns t, x, z; the header has {head}") from None
    else:
        cols = [0, 1, 2]
    if len(rows) > MAX_PATH_EVENTS:
        raise PathError(f"{len(rows):,} points, more than {MAX_PATH_EVENTS:,}; thin the path out")
    try:
        a = np.asarray([[float(r[c]) for c in cols] for r in rows], dtype=np.float64)
    except (ValueError, IndexError):
        raise PathError("a CSV path needs three numbers (t, x, z) on every line") from None
    if a.size == 0:
        raise PathError("a path needs at least two points, got 0")
    t, p = _check_events(a[:, 0], a[:, 1:])
    return RawPath(t, p)


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def load_path(file: str | Path, *, rate: float | None = None, scale: float | None = None, smooth: bool = True,
              **kwargs) -> TimedPath:
    """Read a path file (``.json`` or ``.csv``) and process it into a :class:`TimedPath`.

    ``rate`` and ``scale`` override the file's (defaults 150 Hz and 1.0: world seconds).
    Other keyword arguments go to :meth:`TimedPath.from_samples`.
    """
    file = Path(file)
    data = read_bytes(file, "path", MAX_JSON_BYTES, error=PathError)
    csv_file = file.suffix.lower() == ".csv"
    obj = None if csv_file else loads_json(data, str(file), error=PathError)
    try:
        if csv_file:
            try:
                raw = _parse_csv(data.decode("utf-8"))
            except UnicodeDecodeError:
                raise PathError("not a text file; a path is JSON or CSV") from None
        else:
            raw = parse_path(obj)
    except PathError as e:
        raise PathError(f"{file}: {e}") from None
    rate = rate if rate is not None else (raw.rate or 150.0)
    scale = scale if scale is not None else (raw.scale or 1.0)
    try:
        path = TimedPath.from_samples(raw.times, raw.points, rate=rate, scale=scale, smooth=smooth, **kwargs)
    except PathError as e:
        raise PathError(f"{file}: {e}") from None
    if raw.joystick is not None and len(raw.joystick):
        j = raw.joystick.copy()
        j[:, 0] = (j[:, 0] - raw.times[0]) / scale
        path = replace(path, joystick=j)
    return path


# ------------------------------------------------------------------------ processing
def resample_path(times: ArrayLike, xz: ArrayLike, rate: float = 150.0, scale: float = 1.0) -> tuple[np.ndarray, float]:
    """Points ``[P, 2]`` at a fixed rate, and their world rate (Hz).

    The events ``(times [R], xz [R, 2])`` are interpolated linearly at ``rate`` Hz of
    drawing time; drawing time / ``scale`` is world time, so the samples are
    ``1 / (rate * scale)`` world seconds apart. The last sample is the last event (the
    final step may be shorter, i.e. slower).
    """
    if not (math.isfinite(rate) and rate > 0 and math.isfinite(scale) and scale > 0):
        raise PathError(f"rate and scale must be positive numbers, got rate={rate!r}, scale={scale!r}")
    if not PATH_SCALE[0] <= scale <= PATH_SCALE[1]:
        raise PathError(f"scale: drawing seconds per world second must be within {PATH_SCALE[0]:g} and "
                        f"{PATH_SCALE[1]:g}, got {scale:g}")
    t, p = _check_events(times, xz)
    fps = rate * scale
    T = (t[-1] - t[0]) / scale
    if T > SECONDS[1]:
        raise PathError(f"points: the path lasts {T:.6g} world seconds (times {t[0]:g} to {t[-1]:g} at scale "
                        f"{scale:g}), more than {SECONDS[1]:g}; shorten it")
    n = max(2, math.ceil(T * fps - 1e-9) + 1)
    if n > MAX_PATH_SAMPLES:
        raise PathError(f"rate: {rate:g} Hz over {T:g} s gives {n:,} samples, more than {MAX_PATH_SAMPLES:,}; "
                        "give a lower rate")
    ts = np.minimum(np.arange(n) / fps, T)
    tw = (t - t[0]) / scale
    out = np.stack([np.interp(ts, tw, p[:, 0]), np.interp(ts, tw, p[:, 1])], axis=1)
    return out, fps


def gaussian_kernel(sigma: float, width: int) -> np.ndarray:
    """Normalised Gaussian weights ``[width]`` (odd width, centred)."""
    if width < 1 or width % 2 == 0:
        raise PathError(f"the smoothing width must be a positive odd number of samples, got {width}")
    if not sigma > 0:
        raise PathError(f"the smoothing sigma must be > 0, got {sigma}")
    x = np.arange(width) - width // 2
    w = np.exp(-0.5 * (x / sigma) ** 2)
    return w / w.sum()


def smooth_path(points: ArrayLike, sigma: float = 3.0, width: int = 19) -> np.ndarray:
    """Gaussian-filtered path ``[P, C]`` (``sigma`` and odd ``width`` in samples).

    Both ends are extended by ``width // 2`` samples extrapolated linearly from the first
    two and the last two points, so the filter sees the end velocities, and the path is
    neither shortened nor slowed at its ends. A symmetric normalised filter reproduces
    a straight line at constant speed exactly (to rounding).
    """
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or len(p) < 2:
        raise PathError(f"smoothing needs at least two points [P, C], got shape {list(p.shape)}")
    w = gaussian_kernel(sigma, width)
    h = width // 2
    k = np.arange(h, 0, -1)[:, None]
    head = p[0] - k * (p[1] - p[0])
    tail = p[-1] + k[::-1] * (p[-1] - p[-2])
    ext = np.concatenate([head, p, tail])
    out = np.empty_like(p)
    for c in range(p.shape[1]):
        out[:, c] = np.convolve(ext[:, c], w, mode="valid")
    return out


def _in_samples(frames: float, fps: float) -> float:
    """Paper path frames (1/30 s) -> samples of a path at ``fps``."""
    return frames * fps / PATH_FRAME_RATE


def _unit(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.linalg.norm(v, axis=-1)
    return np.divide(v, n[..., None], out=np.zeros_like(v), where=n[..., None] > 1e-12), n


@dataclass(frozen=True, eq=False)
class TimedPath:
    """A path sampled at a fixed world rate: ``p(i)`` for samples ``i = 0 .. P-1``.

    Attributes:
        points: ``[P, 3]`` world positions (y = 0), ``1 / fps`` s apart.
        fps: samples per world second.
        input_times, input_points: the events as given (world seconds from 0, ``[R]``
            and ``[R, 3]``), moved with the path: the "input path" distances are measured to.
        smoothed: whether :func:`smooth_path` was applied.
        sigma, width: smoothing parameters in paper path frames (1/30 s).
        joystick: optional ``[[t, deg], ...]`` (world s) joystick facing offsets.

    Derived arrays (computed once): ``tangents [P, 3]`` (unit ``p(i+1) - p(i)``;
    standing samples take the nearest moving one's), ``speeds [P]`` (m/s of the step
    from ``i``), ``arc [P]`` (cumulative length, m) and ``turn [P]`` (the angle in
    radians between ``tangent(i)`` and ``tangent(i + 1)``). For the corner detector,
    ``heading [P, 3]`` and ``bend [P]``: the step tangent and ``turn``, except where the
    path crawls (slower than :data:`SLOW`, where its steps are jitter) or lies within
    :data:`CHORD` metres of either end (a slowing, wobbling hand): there the chord from
    ``CHORD`` m before to ``CHORD`` m after, and no bend. ``curvature [P]`` (1/m): the
    angle between the chords arriving at and leaving ``p(i)`` over ``CHORD`` m each (they
    point along the path ``CHORD / 2`` before and after it) over ``CHORD`` (0 within
    ``CHORD`` of the ends).
    """

    points: np.ndarray
    fps: float
    input_times: np.ndarray
    input_points: np.ndarray
    smoothed: bool = True
    sigma: float = 3.0
    width: float = 19.0
    max_blur: float | None = None
    joystick: np.ndarray | None = None
    tangents: np.ndarray = field(init=False, repr=False)
    speeds: np.ndarray = field(init=False, repr=False)
    arc: np.ndarray = field(init=False, repr=False)
    turn: np.ndarray = field(init=False, repr=False)
    heading: np.ndarray = field(init=False, repr=False)
    bend: np.ndarray = field(init=False, repr=False)
    curvature: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        p = np.asarray(self.points, dtype=np.float64)
        if p.ndim != 2 or p.shape[1] != 3 or len(p) < 2:
            raise PathError(f"points must be [P >= 2, 3], got shape {list(p.shape)}")
        if not np.isfinite(p).all():
            raise PathError("path points must be finite")
        object.__setattr__(self, "points", p)
        step = np.diff(p, axis=0)
        step[:, 1] = 0.0
        u, n = _unit(step)
        moving = n > 1e-9
        if not moving.any():
            raise PathError("the path has zero length (all points are the same)")
        # standing samples take the direction of the nearest moving step (forward, then backward fill)
        idx = np.where(moving, np.arange(len(n)), -1)
        idx = np.maximum.accumulate(idx)
        first = int(np.flatnonzero(moving)[0])
        idx[idx < 0] = first
        tan = np.concatenate([u[idx], u[idx[-1:]]])
        object.__setattr__(self, "tangents", tan)
        object.__setattr__(self, "speeds", np.concatenate([n, [0.0]]) * self.fps)
        object.__setattr__(self, "arc", np.concatenate([[0.0], np.cumsum(n)]))
        cosang = np.clip(np.einsum("ij,ij->i", tan[:-1], tan[1:]), -1.0, 1.0)
        object.__setattr__(self, "turn", np.concatenate([np.arccos(cosang), [0.0]]))
        self._chords()
        object.__setattr__(self, "input_times", np.asarray(self.input_times, dtype=np.float64))
        object.__setattr__(self, "input_points", np.asarray(self.input_points, dtype=np.float64))

    def _chords(self) -> None:
        """``heading``, ``bend`` and ``curvature`` (see the class docstring)."""
        arc, p = self.arc, self.points
        n = len(p)
        if self.length <= 2 * CHORD:
            # too short to measure over the chord: the step tangents, no bends
            object.__setattr__(self, "heading", self.tangents.copy())
            object.__setattr__(self, "bend", np.zeros(n))
            object.__setattr__(self, "curvature", np.zeros(n))
            return
        before = _lerp(p, self.index_at_arc(arc - CHORD))
        after = _lerp(p, self.index_at_arc(arc + CHORD))
        u_in, n_in = _unit(p - before)
        u_out, n_out = _unit(after - p)
        chord, cn = _unit(after - before)
        chord[cn <= 1e-9] = self.tangents[cn <= 1e-9]
        inner = (arc >= CHORD - 1e-9) & (arc <= arc[-1] - CHORD + 1e-9) & (n_in > 1e-9) & (n_out > 1e-9)
        cross = u_in[:, 2] * u_out[:, 0] - u_in[:, 0] * u_out[:, 2]
        dot = np.einsum("ij,ij->i", u_in, u_out)
        chord_bend = np.where(inner, np.abs(np.arctan2(cross, dot)), 0.0)
        # the paper's step tangents where they mean something; the chord where the path
        # crawls (its steps are jitter) or ends (the last steps of a slowing hand)
        rough = (self.speeds < SLOW) | ~inner
        heading = np.where(rough[:, None], chord, self.tangents)
        bend = np.where(rough | np.concatenate([rough[1:], [True]]), 0.0, self.turn)
        object.__setattr__(self, "heading", heading)
        object.__setattr__(self, "bend", bend)
        object.__setattr__(self, "curvature", chord_bend / CHORD)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_samples(cls, times: ArrayLike, xz: ArrayLike, *, rate: float = 150.0, scale: float = 1.0,
                     smooth: bool = True, sigma: float = 3.0, width: float = 19.0,
                     max_blur: float | None = MAX_BLUR) -> TimedPath:
        """Resample events (times in drawing seconds, ``xz [R, 2]`` or ``[R, 3]``) and smooth them.

        ``rate`` (Hz of drawing time) and ``scale`` (world time = drawing time / scale) as
        in :func:`resample_path`; ``sigma`` and ``width`` in paper path frames (1/30 s).
        """
        t, p = _check_events(times, xz)
        pts, fps = resample_path(t, p, rate, scale)
        if smooth:
            pts = _smooth_frames(pts, fps, sigma, width, max_blur)
        in3 = np.stack([p[:, 0], np.zeros(len(p)), p[:, 1]], axis=1)
        return cls(_xz3(pts), fps, (t - t[0]) / scale, in3, bool(smooth), float(sigma), float(width),
                   None if max_blur is None else float(max_blur))

    def _reprocess(self, times: np.ndarray, pts3: np.ndarray) -> TimedPath:
        """The same processing (rate, smoothing) on new world-time events."""
        pts, fps = resample_path(times, pts3[:, [0, 2]], self.fps, 1.0)
        if self.smoothed:
            pts = _smooth_frames(pts, fps, self.sigma, self.width, self.max_blur)
        return replace(self, points=_xz3(pts), fps=fps, input_times=times - times[0], input_points=pts3)

    def translated(self, offset: ArrayLike) -> TimedPath:
        """The path moved by ``offset [3]`` (its y is ignored)."""
        o = np.asarray(offset, dtype=np.float64).reshape(3).copy()
        o[1] = 0.0
        return replace(self, points=self.points + o, input_points=self.input_points + o)

    def starting_at(self, position: ArrayLike) -> TimedPath:
        """The path moved so that it starts at ``position`` (local control)."""
        return self.translated(np.asarray(position, dtype=np.float64) - self.points[0])

    def routed_around(self, rows: np.ndarray, clearance: float = 0.6) -> TimedPath:
        """The path routed around the static obstacles (``rows [M, ROW]``) it runs through
        (:func:`motionmatch.geometry.polyline.route_around` on its samples, then processed
        again at the same times); itself when it runs through none."""
        xz = self.points[:, [0, 2]]
        routed = route_around(rows, xz, clearance)
        if np.allclose(routed, xz):
            return self
        times = np.arange(len(routed)) / self.fps
        return self._reprocess(times, np.stack([routed[:, 0], np.zeros(len(routed)), routed[:, 1]], axis=1))

    def initial_speed(self, seconds: float = 1.0) -> float:
        """Average speed (m/s) over the first ``seconds`` of the input path."""
        t, p = self.input_times, self.input_points
        T = min(seconds, float(t[-1]))
        ts = np.linspace(0.0, T, 64)
        q = np.stack([np.interp(ts, t, p[:, 0]), np.interp(ts, t, p[:, 2])], axis=1)
        return float(np.linalg.norm(np.diff(q, axis=0), axis=1).sum() / max(T, 1e-9))

    def with_approach(self, start: ArrayLike, speed: float | None = None, min_speed: float = 0.5) -> TimedPath:
        """Global control: a straight segment from ``start`` to the path's first input
        point, walked at ``speed`` (default: the average speed over the path's first
        second, at least ``min_speed``), joined to the path, then processed again (the
        join is smoothed like the rest). A start already on the path's start returns the path."""
        s = np.asarray(start, dtype=np.float64).reshape(3).copy()
        s[1] = 0.0
        p0 = self.input_points[0]
        d = float(np.linalg.norm(p0 - s))
        if d < 1e-3:
            return self
        v = max(self.initial_speed() if speed is None else float(speed), min_speed)
        lead = d / v
        times = np.concatenate([[0.0], self.input_times + lead])
        pts = np.concatenate([s[None], self.input_points])
        return self._reprocess(times, pts)

    # ------------------------------------------------------------------ sampling
    @property
    def num_samples(self) -> int:
        return len(self.points)

    @property
    def last(self) -> int:
        return len(self.points) - 1

    @property
    def duration(self) -> float:
        """World seconds from the first to the last sample."""
        return self.last / self.fps

    @property
    def length(self) -> float:
        return float(self.arc[-1])

    def samples(self, frames: float) -> float:
        """A count of paper path frames (1/30 s) in this path's samples."""
        return _in_samples(frames, self.fps)

    def point(self, i: ArrayLike) -> np.ndarray:
        """``p(i)`` ``[..., 3]`` at fractional sample indices (clamped to the path)."""
        return _lerp(self.points, i)

    def tangent(self, i: ArrayLike) -> np.ndarray:
        """Unit tangent ``v(i)`` ``[..., 3]`` at fractional indices (interpolated, renormalised)."""
        return _unit(_lerp(self.tangents, i))[0]

    def chord_heading(self, i: ArrayLike) -> np.ndarray:
        """Unit chord heading ``[..., 3]`` at fractional indices (:attr:`heading`, interpolated)."""
        return _unit(_lerp(self.heading, i))[0]

    def velocity(self, i: ArrayLike) -> np.ndarray:
        """Path velocity (m/s) ``[..., 3]`` at fractional indices."""
        return self.tangent(i) * _lerp(self.speeds[:, None], i)

    def index_at_arc(self, s: ArrayLike) -> np.ndarray:
        """Fractional sample index where the cumulative length reaches ``s`` (clamped)."""
        a = self.arc
        # ``arc`` is non-decreasing; flat parts (standing) resolve to their first index
        return np.interp(s, a, np.arange(len(a), dtype=np.float64), left=0.0, right=float(self.last))

    def joystick_deg(self, t: float) -> float:
        """Joystick facing offset (degrees) at world time ``t`` from the path's own timeline (0 if none)."""
        j = self.joystick
        if j is None or len(j) == 0:
            return 0.0
        k = int(np.searchsorted(j[:, 0], t, side="right")) - 1
        return float(j[max(k, 0), 1]) if k >= 0 else 0.0


def _smooth_frames(pts: np.ndarray, fps: float, sigma: float, width: float,
                   max_blur: float | None = None) -> np.ndarray:
    s = _in_samples(sigma, fps)
    w = round(_in_samples(width, fps))
    w += 1 - w % 2  # odd
    if w < 3 or len(pts) < 2:
        return pts
    if max_blur is None:
        return smooth_path(pts, s, w)
    return smooth_path_capped(pts, s, w, fps, max_blur)


def smooth_path_capped(points: ArrayLike, sigma: float, width: int, fps: float, max_blur: float) -> np.ndarray:
    """:func:`smooth_path` with the blur capped in space: at each sample the Gaussian's
    sigma is ``sigma`` samples or the time the path takes to run ``max_blur`` metres
    there, whichever is shorter (speed taken from the path smoothed with the full
    filter). Where the path is drawn slowly this is the paper's filter; where it is drawn
    fast, a time filter of fixed width would round its turns by ``sigma x speed`` metres
    (30 cm at 3 m/s) and move them away from where they were drawn. Symmetric kernels:
    a straight line at constant speed is kept exactly."""
    p = np.asarray(points, dtype=np.float64)
    full = smooth_path(p, sigma, width)
    step = np.linalg.norm(np.diff(full, axis=0), axis=1) * fps
    speed = np.concatenate([step, step[-1:]])
    sig = np.clip(max_blur * fps / np.maximum(speed, 1e-9), 0.25, sigma)
    h = width // 2
    k = np.arange(h, 0, -1)[:, None]
    ext = np.concatenate([p[0] - k * (p[1] - p[0]), p, p[-1] + k[::-1] * (p[-1] - p[-2])])
    win = np.lib.stride_tricks.sliding_window_view(ext, width, axis=0)  # [P, C, width]
    x = np.arange(width) - h
    wts = np.exp(-0.5 * (x[None, :] / sig[:, None]) ** 2)
    wts /= wts.sum(axis=1, keepdims=True)
    return np.einsum("pcw,pw->pc", win, wts)


def braking_profile(limits: ArrayLike, arc: ArrayLike, accel: float) -> np.ndarray:
    """Speed limits ``[P]`` (m/s, ``inf`` allowed) at path lengths ``arc [P]`` (m,
    non-decreasing) made reachable by a body that changes speed by at most ``accel``
    m/s^2: ``v(s) <= sqrt(v(s')^2 + 2 accel |s - s'|)`` for every other sample ``s'``
    (a backward pass brakes ahead of each slow stretch, a forward pass speeds up after
    it). Never above ``limits``. One pass each way over the samples, once per path."""
    v = np.array(limits, dtype=np.float64)
    ds2 = 2.0 * accel * np.diff(np.asarray(arc, dtype=np.float64))
    for i in range(len(v) - 2, -1, -1):
        reach = math.sqrt(v[i + 1] * v[i + 1] + ds2[i]) if math.isfinite(v[i + 1]) else math.inf
        if reach < v[i]:
            v[i] = reach
    for i in range(1, len(v)):
        reach = math.sqrt(v[i - 1] * v[i - 1] + ds2[i - 1]) if math.isfinite(v[i - 1]) else math.inf
        if reach < v[i]:
            v[i] = reach
    return v


def _xz3(pts: np.ndarray) -> np.ndarray:
    return np.stack([pts[:, 0], np.zeros(len(pts)), pts[:, 1]], axis=1)


def _lerp(a: np.ndarray, i: ArrayLike) -> np.ndarray:
    i = np.clip(np.asarray(i, dtype=np.float64), 0.0, len(a) - 1.0)
    lo = np.floor(i).astype(np.int64)
    hi = np.minimum(lo + 1, len(a) - 1)
    f = (i - lo)[..., None]
    return a[lo] * (1.0 - f) + a[hi] * f
