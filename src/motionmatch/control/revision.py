"""Revised future queries along a drawn path (the path paper's Section VI and Algorithm 2),
for one or many character states at once.

At the character's root, the *desired position* ``p_d = p(i_d)`` is the nearest path point
in a window ``[i_prev - alpha, i_prev + beta]`` of the previous one; the future points at
the schema's offsets after ``i_d`` are no further along the path than a character moving
at the limits (``v_max``, the turn limit) reaches; a sharp corner between two future
points moves the point after it onto the line toward the corner; facings are the path's
tangents (along the query's own polyline with ``steer``), tangents turned by a joystick
angle, or DirectionNet's (see :mod:`motionmatch.control.path` for the path itself and
:class:`RevisionSettings` for every rule).

The arithmetic runs compiled over all the states of a call
(:mod:`motionmatch.control._revision_kernels`): long-horizon matching revises the queries
of every node of its search tree, a dozen states per match.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from motionmatch.control import _revision_kernels as RK
from motionmatch.control._revision_kernels import fill_queries
from motionmatch.control.path import (
    DESIRED_MODES,
    FACING_MODES,
    TIE,
    TimedPath,
    _in_samples,
    _lerp,
    _unit,
    braking_profile,
)

__all__ = ["QueryReviser", "Revision", "RevisionSettings", "RevisionState", "fill_queries"]


@dataclass(frozen=True)
class RevisionSettings:
    """How the future part of a query is taken from the path (paper Section VI).

    Attributes:
        desired: ``"window"`` (Eq. 1: nearest point in ``[i_prev - alpha, i_prev + beta]``),
            ``"current"`` (the path point of the current time: the raw query's) or
            ``"nearest"`` (the nearest point of the whole path).
        alpha, beta: the window, in path frames (1/30 s).
        speed_limit: limit the future points to what ``v_max`` reaches.
        v_max: m/s (``None``: chosen by the user of the reviser, e.g. from the database).
        turn_limit: also slow down for tight turns: along the path, no faster than
            ``sqrt(turn_accel / curvature)`` (the speed at which the turn's sideways
            acceleration is ``turn_accel``), so the future points bunch up before a turn
            tighter than the data can run at the drawn speed (see :meth:`QueryReviser.future_indices`).
        turn_accel: m/s^2 (``None``: no turn limit, unless the user of the reviser sets
            it, as the path follower does from the database).
        brake_accel: m/s^2 along the path: the limits above are reached by slowing down
            (and left by speeding up) no harder than this, ahead of time, as a runner
            brakes before a hairpin instead of at its apex (``None``: the limits apply
            only where they are, unless the user of the reviser sets it, as the path
            follower does from the database).
        min_pace, max_pace: between two queries the desired position moves along the
            limited timeline (the time a character needs at the limited speeds) by at
            least ``min_pace`` and at most ``max_pace`` times the time between them, within
            the window (``None``: no bound; only with a speed limit). The nearest point
            alone lets a character that cut inside a turn skip its apex (the nearest
            point is past it: every turn is cut, ever more) and leaves one that cut into
            a loop tighter than it can run at its centre, where every loop point is
            equally near; the pace bounds lead it round.
        steer: facings along the query's own polyline (root, then the future points:
            :meth:`QueryReviser.revise`) instead of the path's tangents there, so a
            character beside the path is asked to turn back toward it, as someone
            rejoining a line does, instead of running parallel to it (on the path the
            two agree). Tangent facing, and network facing (``"net"``): its facings are
            turned by the angle between the steered direction and the path's tangent
            there; not the joystick's.
        sharp_corners: the corner modification (Appendix D). Off by default (issue 33):
            measured on 15 paths drawn by hand in the page (``paths/drawn_by_hand/``), the 5
            clean and the 5 tight paths, from 3 starts each (``benchmarks/bench_follow_drawn.py``),
            the modification made no path closer and 4 hand drawings farther (by 10-35%): the
            turn limit, the braking ahead of turns and the pace bounds already keep a
            character on a corner drawn too fast, while a hand's overshoot at a corner (a
            hook: past the corner and back) reads as a sharp reversal, and moving the query's
            later points onto the line toward it pulls the character off the drawing.
        corner_deg: tangents further apart than this make a sharp corner.
        corner_advance: ``c``, path frames added to a stuck ``i_d`` before a corner.
        facing: ``"tangent"``, ``"joystick"`` (tangent turned by ``joystick_deg``,
            positive to the right, i.e. clockwise seen from above) or ``"net"``
            (a facing track set on the reviser, e.g. from DirectionNet).
        joystick_deg: constant joystick offset (the path's own joystick timeline is added).
    """

    desired: str = "window"
    alpha: float = 0.0
    beta: float = 10.0
    speed_limit: bool = True
    v_max: float | None = None
    turn_limit: bool = True
    turn_accel: float | None = None
    brake_accel: float | None = None
    min_pace: float | None = 0.5
    max_pace: float | None = 1.25
    steer: bool = True
    sharp_corners: bool = False
    corner_deg: float = 80.0
    corner_advance: float = 2.0
    facing: str = "tangent"
    joystick_deg: float = 0.0

    def __post_init__(self) -> None:
        if self.desired not in DESIRED_MODES:
            raise ValueError(f"desired must be one of {DESIRED_MODES}, got {self.desired!r}")
        if self.facing not in FACING_MODES:
            raise ValueError(f"facing must be one of {FACING_MODES}, got {self.facing!r}")
        if self.alpha < 0 or self.beta < 0:
            raise ValueError("alpha and beta must be >= 0 path frames")
        if self.v_max is not None and not self.v_max > 0:
            raise ValueError(f"v_max must be > 0 m/s, got {self.v_max!r}")
        if self.turn_accel is not None and not self.turn_accel > 0:
            raise ValueError(f"turn_accel must be > 0 m/s^2, got {self.turn_accel!r}")
        if self.brake_accel is not None and not self.brake_accel > 0:
            raise ValueError(f"brake_accel must be > 0 m/s^2, got {self.brake_accel!r}")
        lo, hi = self.min_pace, self.max_pace
        if (lo is not None and not lo >= 0) or (hi is not None and not hi > 0) or (
                lo is not None and hi is not None and lo > hi):
            raise ValueError(f"need 0 <= min_pace <= max_pace, max_pace > 0; got {lo!r}, {hi!r}")

    @classmethod
    def raw(cls, **kw) -> RevisionSettings:
        """The raw future query: the path points at the current time + offsets, no speed
        or turn limit, no corner modification, the path's tangents as facings (build the
        path without smoothing as well)."""
        return cls(desired="current", speed_limit=False, turn_limit=False, sharp_corners=False, steer=False, **kw)


@dataclass
class RevisionState:
    """What the reviser remembers between queries of one character, per state ``[M]``.

    Attributes:
        i_prev: ``[M]`` sample index of the previous desired position (``i_d^prev``).
        elapsed: ``[M]`` world seconds since the path started (now).
        t_prev: ``[M]`` ``elapsed`` at the previous query (default: ``elapsed``).
        carry: ``[M]`` fraction of a sample the desired position owes the drawn time in a
            pause of the path (default 0).
    """

    i_prev: np.ndarray
    elapsed: np.ndarray
    t_prev: np.ndarray | None = None
    carry: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.i_prev = np.asarray(self.i_prev, dtype=np.int64).reshape(-1)
        self.elapsed = np.asarray(self.elapsed, dtype=np.float64).reshape(-1)
        self.t_prev = self.elapsed.copy() if self.t_prev is None else np.asarray(self.t_prev, np.float64).reshape(-1)
        self.carry = np.zeros(len(self.i_prev)) if self.carry is None else np.asarray(self.carry, np.float64).reshape(-1)

    @classmethod
    def start(cls, m: int = 1) -> RevisionState:
        return cls(np.zeros(m, dtype=np.int64), np.zeros(m))

    def take(self, idx: ArrayLike) -> RevisionState:
        idx = np.asarray(idx, dtype=np.int64)
        return RevisionState(self.i_prev[idx], self.elapsed[idx], self.t_prev[idx], self.carry[idx])

    def later(self, dt: float) -> RevisionState:
        """The same states ``dt`` seconds later (before their next query)."""
        return RevisionState(self.i_prev, self.elapsed + dt, self.t_prev, self.carry)


@dataclass
class Revision:
    """A revised future query for ``M`` character states (world frame).

    Attributes:
        i_d: ``[M]`` sample index of the desired position.
        indices: ``[M, K]`` fractional sample indices of the future points (before the
            corner modification moved some of them off the path).
        positions: ``[M, K, 3]`` future positions.
        directions: ``[M, K, 3]`` unit future facings.
        velocities: ``[M, K, 3]`` path velocities at the future points (speed-limited).
        corner: ``[M]`` index of the sharp corner between ``p_d`` and the first future
            point (``-1``: none); passing it calls for a new query.
        state: the :class:`RevisionState` after this query.
    """

    i_d: np.ndarray
    indices: np.ndarray
    positions: np.ndarray
    directions: np.ndarray
    velocities: np.ndarray
    corner: np.ndarray
    state: RevisionState


class QueryReviser:
    """Revised future queries from a :class:`TimedPath` (Algorithm 2 of the paper), for
    one or many character states at once.

    Args:
        path: the path (already moved where the character should follow it).
        offsets: the future times (s) of the query, the feature schema's (e.g. 1/3, 2/3, 1).
        settings: :class:`RevisionSettings`; ``settings.v_max`` must be set when
            ``speed_limit`` is on.
        facing_track: for ``facing="net"``: a callable ``indices [...] -> directions [..., 3]``
            (world) giving the facing at fractional path indices; set or replaced any time
            (:attr:`facing_track`).
    """

    def __init__(self, path: TimedPath, offsets: Sequence[float], settings: RevisionSettings | None = None,
                 facing_track: Callable[[np.ndarray], np.ndarray] | None = None):
        self.path = path
        self.s = settings or RevisionSettings()
        self.offsets = np.asarray(offsets, dtype=np.float64).reshape(-1)
        if self.offsets.size == 0 or np.any(self.offsets <= 0) or np.any(np.diff(self.offsets) <= 0):
            raise ValueError(f"offsets must be increasing positive seconds, got {offsets!r}")
        if self.s.speed_limit and self.s.v_max is None:
            raise ValueError("the speed limit needs v_max (m/s); set RevisionSettings(v_max=...)")
        self.facing_track = facing_track
        fps = path.fps
        alpha = round(_in_samples(self.s.alpha, fps))
        beta = max(1, round(_in_samples(self.s.beta, fps)))
        self.limits = self._speed_limits()
        limited = bool(np.isfinite(self.limits).any())
        # the time a character needs to reach each sample, never faster than drawn nor
        # than the limits allow: a standing or slow stretch takes its drawn time
        step = np.diff(path.arc) / np.maximum(self.limits[:-1], 1e-9)
        self._tau = np.concatenate([[0.0], np.cumsum(np.maximum(step, 1.0 / fps))])
        f64 = np.ascontiguousarray
        self._cap = np.minimum(self.limits, 1e6)  # the limits made finite, so interpolation stays finite
        self._arrays = tuple(RK.PathArrays(
            points=f64(path.points, np.float64), tangents=f64(path.tangents, np.float64),
            heading=f64(path.heading, np.float64), bend=f64(path.bend, np.float64),
            speeds=f64(path.speeds, np.float64), cap=self._cap, tau=self._tau,
            offsets=self.offsets, off_samples=self.offsets * fps))
        nan = math.nan
        self._rules = tuple(RK.Rules(
            desired=RK.DESIRED_CODES[self.s.desired], alpha=alpha, beta=beta, fps=float(fps), limited=limited,
            beta_time=beta / fps, max_pace=nan if self.s.max_pace is None else float(self.s.max_pace),
            min_pace=nan if self.s.min_pace is None else float(self.s.min_pace), tie2=TIE**2,
            sharp=bool(self.s.sharp_corners), cos_corner=math.cos(math.radians(self.s.corner_deg)),
            advance=max(1, round(_in_samples(self.s.corner_advance, fps))), steer=bool(self.s.steer)))
        self._tmp = np.zeros((3, 3))

    def _speed_limits(self) -> np.ndarray:
        """``[P]`` m/s the character may move at each sample: ``v_max`` and the turn limit
        ``sqrt(turn_accel / curvature)`` (``inf`` where neither applies), reached by
        braking at ``brake_accel`` before and left by speeding up at ``brake_accel`` after
        (:func:`braking_profile`)."""
        lim = np.full(self.path.num_samples, np.inf)
        if self.s.speed_limit:
            lim[:] = self.s.v_max
        if self.s.turn_limit and self.s.turn_accel is not None:
            lim = np.minimum(lim, np.sqrt(self.s.turn_accel / np.maximum(self.path.curvature, 1e-9)))
            if self.s.brake_accel is not None:
                lim = braking_profile(lim, self.path.arc, self.s.brake_accel)
        return lim

    def time_to_run(self, i: ArrayLike) -> np.ndarray:
        """Seconds ``[...]`` a character needs from the path's start to fractional indices
        ``i``: the drawn time, or longer where the limits slow it down."""
        return np.interp(np.asarray(i, dtype=np.float64), np.arange(len(self._tau), dtype=np.float64), self._tau)

    def speed_at(self, i: ArrayLike) -> np.ndarray:
        """Speed (m/s) ``[...]`` the query asks for at fractional indices: the drawn speed, limited."""
        cap = self._cap[:, None]
        return np.minimum(_lerp(self.path.speeds[:, None], i)[..., 0], _lerp(cap, i)[..., 0])

    # -------------------------------------------------------------- desired position
    def desired_index(self, position: np.ndarray, state: RevisionState) -> np.ndarray:
        """``i_d [M]`` for character root positions ``[M, 3]`` (Eq. 1, or the ablations)."""
        pos = np.ascontiguousarray(position, dtype=np.float64).reshape(-1, 3)
        out_i = np.empty(len(pos), dtype=np.int64)
        RK.desired_rows(self._arrays, self._rules, pos, state.i_prev, state.elapsed, state.t_prev, state.carry,
                        out_i, np.empty(len(pos)))
        return out_i

    # -------------------------------------------------------------------- revision
    def revise(self, position: ArrayLike, state: RevisionState, *, joystick_deg: float | None = None) -> Revision:
        """The revised query for root positions ``[M, 3]`` (or one ``[3]``) and their state."""
        pos = np.ascontiguousarray(position, dtype=np.float64).reshape(-1, 3)
        M, K = len(pos), len(self.offsets)
        mode = self.s.facing
        facing, c, s = RK.FACING_TANGENT, 1.0, 0.0
        if mode == "net":
            if self.facing_track is None:
                raise ValueError("facing='net' needs a facing track (DirectionNet predictions) on the reviser")
            facing = RK.FACING_TANGENT if self.s.steer else RK.FACING_NONE  # steered: the correction's angle
        elif mode == "joystick":
            facing = RK.FACING_TURNED
            deg = self.s.joystick_deg + (joystick_deg or 0.0)
            if deg:
                a = -math.radians(deg)  # positive degrees turn right: clockwise seen from above
                c, s = math.cos(a), math.sin(a)
        i_d = np.empty(M, dtype=np.int64)
        carry = np.empty(M)
        idx = np.empty((M, K))
        fut = np.empty((M, K, 3))
        dirs = np.empty((M, K, 3))
        vel = np.empty((M, K, 3))
        corner = np.empty(M, dtype=np.int64)
        RK.revise_rows(self._arrays, self._rules, facing, c, s, pos, state.i_prev, state.elapsed, state.t_prev,
                       state.carry, i_d, carry, idx, fut, dirs, vel, corner, self._tmp)
        if mode == "net":
            d = np.asarray(self.facing_track(idx), dtype=np.float64)
            d[..., 1] = 0.0
            d = _unit(d)[0]
            if self.s.steer:  # turned as steering turns the tangent there (toward the path)
                tan = self.path.tangent(idx)
                a = np.arctan2(dirs[..., 0], dirs[..., 2]) - np.arctan2(tan[..., 0], tan[..., 2])
                c, s_ = np.cos(a), np.sin(a)
                d = np.stack([c * d[..., 0] + s_ * d[..., 2], np.zeros_like(c), -s_ * d[..., 0] + c * d[..., 2]], axis=-1)
            dirs = d
        new = RevisionState(i_d.copy(), state.elapsed.copy(), state.elapsed.copy(), carry)
        return Revision(i_d, idx, fut, dirs, vel, corner, new)
