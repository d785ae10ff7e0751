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
import weakref
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from motionmatch.control.intent import IntentRows
from motionmatch.runtime._batch_kernels import DatabaseArrays
from motionmatch.runtime._ground_kernels import ground_step
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
                self.reach_slack, self.lookahead, self.uphill_slowdown, self.downhill_slowdown,
                self.min_speed_factor, self.step_limit_m, self.wall_lookahead_m)


_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ground_layout(db) -> tuple | None:
    """``(cols [G], ks [G], mean [G], scale [G], weights [G])`` of ``db``'s ground heights:
    their feature columns, their trajectory samples (indices of the schema's trajectory
    offsets) and the columns' normalisation; ``None`` when its schema has none."""
    if db in _LAYOUTS:
        return _LAYOUTS[db]
    schema = db.schema
    times = list(schema.trajectory_offsets)
    cols, ks = [], []
    for t in schema.terms:
        if t.kind == "ground_height":
            sl = schema.slice(t.name)
            cols.extend(range(sl.start, sl.stop))
            ks.extend(times.index(o) for o in t.offsets)
    out = None
    if cols:
        c = np.asarray(cols, dtype=np.int64)
        out = (c, np.asarray(ks, dtype=np.int64), np.asarray(db.mean)[c], np.asarray(db.scale)[c],
               np.asarray(db.weights)[c])
    _LAYOUTS[db] = out
    return out


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
    speed_factor: np.ndarray  #: ``[C]`` what the row's next plain intents' speed is multiplied by (slope, wall)
    goal_velocity: np.ndarray  #: ``[C, 2]`` the row's last intent's velocity (x, z, m/s) as its input asked


def _ground_rows(K: int, capacity: int) -> RowArrays:
    f8 = np.float64
    shapes = {"ready": ((), np.bool_), "lift": ((), f8), "lift_vel": ((), f8), "lift_goal": ((), f8),
              "normal": ((3,), f8), "weight": ((K,), f8), "foot_y": ((K,), f8), "foot_vel": ((K,), f8),
              "foot_goal": ((K,), f8), "toe_prev": ((K, 3), f8), "speed_factor": ((), f8),
              "goal_velocity": ((2,), f8)}
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
        self._cols: tuple | None = None  # (the columns as the kernel takes them, until they grow)
        self._terrain_arrays = terrain.kernel_arrays()

    def reset(self, row: int) -> None:
        """Row ``row`` has a new controller (or state copied in): its next frame snaps
        onto the ground."""
        if self.cols.capacity <= row:
            self.cols.grow_to(max(row + 1, 2 * self.cols.capacity))
            self._cols = None
        self.cols.ready[row] = False
        self.cols.speed_factor[row] = 1.0

    def apply(self, rows: np.ndarray, dt: np.ndarray, state) -> None:
        """Put the output poses of ``rows [R]`` (int64; their time steps ``dt [R]``, s) of a
        batch's ``state`` (its ``out_rot``, ``out_pos``, ``frame`` columns)
        on the ground, and set their next intents' speed factors: one compiled call."""
        cols = self.cols
        if cols.capacity < state.capacity:
            cols.grow_to(state.capacity)
            self._cols = None
        if self._cols is None:
            self._cols = tuple(cols.view(GroundColumns))
        ground_step(rows, dt, state.frame, self.arrays.contacts, state.out_rot, state.out_pos,
                    self.arrays.parents, self.legs, self._terrain_arrays, self._cols, self._kernel_settings)

    # ------------------------------------------------------------------ queries
    def fill_query_heights(self, db, queries: np.ndarray, positions: np.ndarray, roots: np.ndarray) -> None:
        """Where ``db``'s schema has ground heights (a ``ground_height`` term, the ``+ground``
        schemas), write into the normalised ``queries [n, D]`` (float32, in place) the
        terrain's rise along each desired trajectory: at each of the term's offsets, the
        ground's height under the desired position (``positions [n, T, 3]``, world, at the
        schema's trajectory offsets) minus its height under the character root ``roots
        [n, 3]``. Nothing to do without such a term."""
        layout = _ground_layout(db)
        if layout is None or not len(queries):
            return
        cols, ks, mean, scale, weights = layout
        n, G = len(queries), len(cols)
        pts = np.empty((n, G + 1, 2))
        pts[:, :G] = positions[:, ks][:, :, [0, 2]]
        pts[:, G] = roots[:, [0, 2]]
        h = self.terrain.heights(pts.reshape(-1, 2)).reshape(n, G + 1)
        rise = h[:, :G] - h[:, G:]
        queries[:, cols] = ((rise - mean) / scale * weights).astype(np.float32)

    # ------------------------------------------------------------------ intents
    def adapt_intents(self, rows: np.ndarray, intents: IntentRows) -> IntentRows:
        """``intents`` of ``rows [R]`` with the plain ones' speeds multiplied by the rows'
        speed factors (slower on slopes, stopped before a wall: set by the last
        :meth:`apply` along the velocity they asked for then, kept here); the same object
        when nothing changes."""
        cols = self.cols
        if len(rows) == 1:
            r = int(rows[0])
            if r >= cols.capacity:
                return intents
            cols.goal_velocity[r] = intents.goals[0, :2]
            f = float(cols.speed_factor[r])
            if f == 1.0 or not intents.plain[0]:
                return intents
            goals = intents.goals.copy()
            goals[0, :2] *= f
            return intents.with_goals(goals, intents.plain.copy())
        if cols.capacity <= int(rows.max()):
            cols.grow_to(int(rows.max()) + 1)
            self._cols = None
        cols.goal_velocity[rows] = intents.goals[:, :2]
        f = cols.speed_factor[rows]
        change = intents.plain & (f != 1.0)
        if not change.any():
            return intents
        goals = intents.goals.copy()
        goals[change, :2] *= f[change, None]
        return intents.with_goals(goals, change)
