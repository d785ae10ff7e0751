"""The ground stage: characters on a terrain that is not the flat floor.

A :class:`GroundStage` belongs to a :class:`~motionmatch.runtime.batch.ControllerBatch`
whose world stands on a non-flat :class:`~motionmatch.environment.terrain.Terrain`
(:meth:`ControllerBatch.set_terrain <motionmatch.runtime.batch.ControllerBatch.set_terrain>`;
a flat terrain, or none, has no stage at all: the pipeline is exactly the flat one). It
keeps each row's ground state as columns (:class:`GroundColumns`, at the batch's rows) and
runs, after the poses stage, over the rows stepped (:meth:`GroundStage.apply`):

* the character root follows the ground under it (damped; a ramp without lag) and leans
  by a part of the ground's damped slope;
* the root (so the hips) is lowered so that the lower planted foot reaches its ground;
* each foot's contact joint is put on the surface at its height above the floor in the
  flat pose, by the leg's two-bone IK, the foot turned toward the surface's normal
  (at most :attr:`GroundSettings.max_foot_tilt_deg`), both weighted by a smoothed contact
  weight so feet go in and out of contact without a pop; a swinging foot rises ahead of a
  step (its ground looked up where it will be a moment later), and no toe goes below
  the surface. Foot locks hold their feet in x, z where the
  poses stage locked them (on the floor); the ground stage lifts them onto the surface.

Before the playback, :meth:`GroundStage.adapt_intents` slows plain intents on slopes
(uphill more than downhill: shorter strides on steep ground come with the slower speed)
and stops them in front of a rise higher than :attr:`GroundSettings.step_limit_m` (a
wall, not ground). Jumps and other intents with actions are left as they are.

The numeric work is two compiled calls over the rows (:mod:`motionmatch.runtime._ground_kernels`)
with the terrain's compiled query between them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from motionmatch.control.intent import IntentRows
from motionmatch.runtime._batch_kernels import DatabaseArrays
from motionmatch.runtime._ground_kernels import ground_apply, ground_points
from motionmatch.runtime.rows import RowArrays

__all__ = ["GroundColumns", "GroundSettings", "GroundStage", "needs_ground"]


def needs_ground(terrain) -> bool:
    """Whether ``terrain`` (a :class:`~motionmatch.environment.terrain.Terrain` or ``None``)
    needs the ground stage: not ``None`` and not flat."""
    return terrain is not None and not terrain.is_flat


@dataclass(frozen=True)
class GroundSettings:
    """Knobs of the ground stage (seconds, metres, degrees, m/s)."""

    lift_halflife: float = 0.12        # the root's lift toward the ground under it
    foot_halflife: float = 0.05        # a swinging foot's ground height
    weight_halflife: float = 0.05      # contact weights in and out of contact
    normal_halflife: float = 0.3       # the ground's slope under the root
    lean: float = 0.3                  # the part of the damped slope the root leans by
    max_lean_deg: float = 8.0
    max_foot_tilt_deg: float = 30.0    # a planted foot turns toward the normal at most this much
    max_goal_speed: float = 1.5        # m/s of a ground height change followed without lag (a ramp)
    reach_slack: float = 0.01          # a planted foot may sit this far below the root's lift
    lookahead: float = 0.12            # s: where a swinging foot will be, for its ground height
    uphill_slowdown: float = 1.0       # speed factor 1 - this * grade uphill ...
    downhill_slowdown: float = 0.4     # ... and 1 - this * grade downhill
    min_speed_factor: float = 0.5
    step_limit_m: float = 0.35         # a rise higher than this ahead is a wall: the character stops
    wall_lookahead_m: float = 0.6      # how far ahead (m) such a rise stops it

    def kernel_tuple(self) -> tuple:
        """The settings :func:`~motionmatch.runtime._ground_kernels.ground_apply` takes."""
        return (self.lift_halflife, self.foot_halflife, self.weight_halflife, self.normal_halflife, self.lean,
                math.radians(self.max_lean_deg), math.radians(self.max_foot_tilt_deg), self.max_goal_speed,
                self.reach_slack)


class GroundColumns(NamedTuple):
    """A batch's ground state, one row per controller row (``K`` feet); metres, seconds."""

    ready: np.ndarray      #: ``[C]`` bool: the row was put on the ground before (else the next frame snaps)
    lift: np.ndarray       #: ``[C]`` the root's height above the floor (m)
    lift_vel: np.ndarray   #: ``[C]`` its rate (m/s)
    lift_goal: np.ndarray  #: ``[C]`` what it followed last frame (m)
    normal: np.ndarray     #: ``[C, 3]`` the ground's damped unit normal under the root
    weight: np.ndarray     #: ``[C, K]`` contact weights (0 swinging .. 1 planted)
    foot_y: np.ndarray     #: ``[C, K]`` each foot's ground height, damped (m)
    foot_vel: np.ndarray   #: ``[C, K]`` its rate (m/s)
    foot_goal: np.ndarray  #: ``[C, K]`` what it followed last frame (m)
    toe_prev: np.ndarray   #: ``[C, K, 3]`` the flat pose's toes last frame (world, m)


def _ground_rows(K: int, capacity: int) -> RowArrays:
    f8 = np.float64
    shapes = {"ready": ((), np.bool_), "lift": ((), f8), "lift_vel": ((), f8), "lift_goal": ((), f8),
              "normal": ((3,), f8), "weight": ((K,), f8), "foot_y": ((K,), f8), "foot_vel": ((K,), f8),
              "foot_goal": ((K,), f8), "toe_prev": ((K, 3), f8)}
    return RowArrays({name: shapes[name] for name in GroundColumns._fields}, capacity)


class GroundStage:
    """The ground stage of one batch (see the module docstring).

    Args:
        terrain: the ground (a non-flat :class:`~motionmatch.environment.terrain.Terrain`).
        arrays: the batch's database arrays (its legs, parents and foot contacts).
        settings: :class:`GroundSettings`.
    """

    def __init__(self, terrain, arrays: DatabaseArrays, settings: GroundSettings | None = None):
        self.terrain = terrain
        self.arrays = arrays
        self.settings = settings or GroundSettings()
        self._kernel_settings = self.settings.kernel_tuple()
        self.legs = np.ascontiguousarray(arrays.legs, dtype=np.int64)
        self.cols = _ground_rows(len(self.legs), 1)
        self._scratch: tuple | None = None

    def reset(self, row: int) -> None:
        """Row ``row`` has a new controller (or state copied in): its next frame snaps
        onto the ground."""
        self.cols.grow_to(row + 1)
        self.cols.ready[row] = False

    def _scratch_for(self, R: int) -> tuple:
        s = self._scratch
        if s is None or s[0].shape[0] < R:
            K = len(self.legs)
            P = 1 + 2 * K
            R2 = max(R, 1 if s is None else 2 * s[0].shape[0])
            s = self._scratch = (np.empty((R2, P, 2)), np.empty(R2 * P), np.empty((R2 * P, 3)),
                                 np.empty((R2, K, 3)), np.empty((R2, K, 3)), np.empty((R2, K, 4)))
        return s

    def apply(self, rows: np.ndarray, dt: np.ndarray, state) -> None:
        """Put the output poses of ``rows [R]`` (int64; their time steps ``dt [R]``, s) of a
        batch's ``state`` (its ``out_rot``, ``out_pos``, ``frame`` columns) on the ground."""
        R = len(rows)
        if R == 0:
            return
        cols = self.cols
        cols.grow_to(state.capacity)
        K = len(self.legs)
        P = 1 + 2 * K
        pts_all, h_all, n_all, toe0, ankle0, arot0 = self._scratch_for(R)
        pts = pts_all[:R]
        ground_points(rows, dt, state.out_rot, state.out_pos, self.arrays.parents, self.legs, cols.toe_prev,
                      cols.ready, self.settings.lookahead, pts, toe0, ankle0, arot0)
        h, n = h_all[: R * P], n_all[: R * P]
        self.terrain.query_into(pts.reshape(R * P, 2), h, n)
        ground_apply(rows, dt, state.frame, self.arrays.contacts, state.out_rot, state.out_pos, self.arrays.parents,
                     self.legs, h.reshape(R, P), n.reshape(R, P, 3), toe0, ankle0, arot0,
                     tuple(cols.view(GroundColumns)), self._kernel_settings)

    # ------------------------------------------------------------------ intents
    def adapt_intents(self, rows: np.ndarray, intents: IntentRows, root_pos: np.ndarray) -> IntentRows:
        """``intents`` of ``rows [R]`` (their characters' roots ``root_pos [C, 3]``) with
        the plain ones slowed on slopes and stopped before a wall (a rise above
        :attr:`GroundSettings.step_limit_m` within :attr:`GroundSettings.wall_lookahead_m`
        ahead); the same object when nothing changes."""
        goals = intents.goals
        v = goals[:, :2]
        speed = np.hypot(v[:, 0], v[:, 1])
        moving = intents.plain & (speed > 1e-6)
        if not moving.any():
            return intents
        s = self.settings
        rows = np.asarray(rows, dtype=np.int64)
        here = root_pos[rows][:, [0, 2]]
        u = np.zeros_like(v)
        u[moving] = v[moving] / speed[moving, None]
        # the grade along the way: the damped normal where the row was put on the ground, else the terrain's
        cols = self.cols
        cols.grow_to(int(rows.max()) + 1)
        nrm = np.where(cols.ready[rows][:, None], cols.normal[rows], 0.0)
        fresh = ~cols.ready[rows]
        dist = s.wall_lookahead_m
        pts = np.concatenate([here, here + u * (0.5 * dist), here + u * dist])
        hh, nn = self.terrain.query(pts)
        R = len(rows)
        nrm[fresh] = nn[:R][fresh]
        grade = -(nrm[:, 0] * u[:, 0] + nrm[:, 2] * u[:, 1]) / np.maximum(nrm[:, 1], 1e-3)
        factor = 1.0 - s.uphill_slowdown * np.maximum(grade, 0.0) - s.downhill_slowdown * np.maximum(-grade, 0.0)
        factor = np.maximum(factor, s.min_speed_factor)
        rise = np.stack([hh[R:2 * R], hh[2 * R:]], axis=1) - hh[:R, None]
        factor = np.where(rise[:, 0] > s.step_limit_m, 0.0, np.where(rise[:, 1] > s.step_limit_m,
                                                                       np.minimum(factor, 0.5), factor))
        change = moving & (np.abs(factor - 1.0) > 1e-12)
        if not change.any():
            return intents
        new = goals.copy()
        new[change, :2] *= factor[change, None]
        return intents.with_goals(new, change)
