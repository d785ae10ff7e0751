"""The ground stage: characters on a terrain that is not the flat floor.

A :class:`GroundStage` belongs to a :class:`~motionmatch.runtime.batch.ControllerBatch`
whose world stands on a non-flat :class:`~motionmatch.environment.terrain.Terrain`
(:meth:`ControllerBatch.set_terrain <motionmatch.runtime.batch.ControllerBatch.set_terrain>`;
a flat terrain, or none, has no stage at all: the pipeline is exactly the flat one). It
keeps each row's ground state as columns (:attr:`GroundStage.state`, at the batch's rows) and
runs right after the poses stage, in its compiled call, over the rows stepped
(:meth:`GroundStage.pose`; :meth:`GroundStage.apply` alone on poses already made):

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
and stops them in front of a rise or a drop higher than :attr:`GroundSettings.step_limit_m`
(a wall or a ledge, not ground). Jumps and other intents with actions are left as they are.
A path follower's path ends before the first such ledge (:func:`first_ledge`).

The numeric work is compiled (:mod:`motionmatch.runtime._ground_kernels`), the terrain's
own query inside it (:func:`~motionmatch.environment.terrain.terrain_query`: any kind of
ground), without allocations or reference counts (its scratch made here, once). Its cost:
``benchmarks/bench_terrain.py --db`` and ``--stage`` (benchmarks/README.md).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from motionmatch._jit import readonly
from motionmatch.control.intent import IntentRows
from motionmatch.runtime._batch_kernels import DatabaseArrays
from motionmatch.runtime._ground_kernels import (
    GOAL_VELOCITY,
    SETTINGS,
    SPEED_FACTOR,
    ground_step,
    pack_ground,
    pose_ground_rows,
    scratch_size,
    sim_pose_ground_rows,
    state_width,
)

__all__ = ["GroundSettings", "GroundStage", "first_ledge", "needs_ground"]


def needs_ground(terrain) -> bool:
    """Whether ``terrain`` (a :class:`~motionmatch.environment.terrain.Terrain` or ``None``)
    needs the ground stage: not ``None`` and not flat."""
    return terrain is not None and not terrain.is_flat


def first_ledge(points: np.ndarray, arc: np.ndarray, terrain, settings: GroundSettings | None = None) -> int | None:
    """The first sample of a path (``points [P, 3]``, world, m; ``arc [P]`` its cumulative
    length) from whose ground the ground ``wall_lookahead_m / 2`` metres further along the
    path rises or drops by more than ``step_limit_m`` (:class:`GroundSettings`): where the
    stage stops a keyboard's plain intent before a ledge or a wall; ``None`` when there is
    none (or no terrain, or a flat one)."""
    if not needs_ground(terrain) or len(points) < 2:
        return None
    s = settings or GroundSettings()
    h = terrain.heights(np.ascontiguousarray(points[:, [0, 2]], dtype=np.float64))
    ahead = np.minimum(np.searchsorted(arc, arc + 0.5 * s.wall_lookahead_m), len(points) - 1)
    at = np.flatnonzero(np.abs(h[ahead] - h) > s.step_limit_m)
    return int(at[0]) if at.size else None


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
    step_limit_m: float = 0.35         # a rise (or drop) higher than this ahead is a wall (a ledge): it stops
    wall_lookahead_m: float = 0.6      # how far ahead (m) such a rise stops it
    ik_skip_m: float = 1e-6            # a leg whose IK target is this near (m) where it is keeps its pose (0: always IK)

    def kernel_array(self) -> np.ndarray:
        """The settings as :func:`~motionmatch.runtime._ground_kernels.ground_step` takes
        them (float64, in the order of :data:`~motionmatch.runtime._ground_kernels.SETTINGS`;
        angles in radians)."""
        a = np.array([self.lift_halflife, self.foot_halflife, self.weight_halflife, self.normal_halflife, self.lean,
                      math.radians(self.max_lean_deg), math.radians(self.max_foot_tilt_deg), self.max_goal_speed,
                      self.reach_slack, self.lookahead, self.uphill_slowdown, self.downhill_slowdown,
                      self.min_speed_factor, self.step_limit_m, self.wall_lookahead_m, self.ik_skip_m],
                     dtype=np.float64)
        assert len(a) == len(SETTINGS)
        return a


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


def _leg_chain(parents: np.ndarray, legs: np.ndarray) -> np.ndarray:
    """The joints from the root (0) to every leg's toe, each after its parent: the joints
    whose world transforms the ground stage needs."""
    need = {0}
    for toe in legs[:, 3].tolist():
        j = int(toe)
        while j > 0 and j not in need:
            need.add(j)
            j = int(parents[j])
    return np.array(sorted(need), dtype=np.int64)  # (a parent's index is below its child's)


class GroundStage:
    """The ground stage of one batch (see the module docstring).

    Args:
        terrain: the ground (a non-flat :class:`~motionmatch.environment.terrain.Terrain`).
        arrays: the batch's database arrays (its legs, parents and foot contacts).
        settings: :class:`GroundSettings`.
        rows: the rows to make room for now (a batch's capacity: its rows start afresh).

    Attributes:
        state: ``[C, W]`` float64, each batch row's ground state (the columns of
            :mod:`motionmatch.runtime._ground_kernels`: ``READY``, ``LIFT``, ``NORMAL``,
            ``SPEED_FACTOR``, ...), one array so that the compiled stage takes it as one
            argument; grown with the batch.
    """

    def __init__(self, terrain, arrays: DatabaseArrays, settings: GroundSettings | None = None, rows: int = 1):
        self.terrain = terrain
        self.arrays = arrays
        self.settings = settings or GroundSettings()
        self._kernel_settings = readonly(self.settings.kernel_array())
        self.legs = readonly(np.ascontiguousarray(arrays.legs, dtype=np.int64))
        self.chain = readonly(_leg_chain(arrays.parents, self.legs))
        self.state = np.zeros((max(rows, 1), state_width(len(self.legs))))
        self.state[:, SPEED_FACTOR] = 1.0
        self._data = pack_ground(arrays.parents, self.legs, self.chain, terrain.kernel_arrays(), self._kernel_settings)
        # the kernel's scratch, one for each thread that may run it at once (made here: no allocation a call)
        size = scratch_size(int(self.chain[-1]) + 1, len(self.legs))
        self._work, self._work2 = np.empty(size), np.empty(size)
        # (one row's last intent: (row, intent, plain, speed factor, adapted IntentRows); see adapt_intents)
        self._memo: tuple | None = None

    def _grow(self, rows: int) -> None:
        """At least ``rows`` rows of :attr:`state` (new ones not ready)."""
        old = self.state
        if len(old) >= rows:
            return
        self.state = np.zeros((max(rows, 2 * len(old)), old.shape[1]))
        self.state[: len(old)] = old
        self.state[len(old):, SPEED_FACTOR] = 1.0

    def reset(self, row: int) -> None:
        """Row ``row`` has a new controller (or state copied in): its next frame snaps
        onto the ground."""
        self._grow(row + 1)
        self.state[row] = 0.0
        self.state[row, SPEED_FACTOR] = 1.0
        self._memo = None

    def apply(self, rows: np.ndarray, dt: np.ndarray, state) -> None:
        """Put the output poses of ``rows [R]`` (int64; their time steps ``dt [R]``, s) of a
        batch's ``state`` (its ``out_rot``, ``out_pos``, ``frame`` columns) on the ground,
        and set their next intents' speed factors: one compiled call."""
        if len(self.state) < state.capacity:
            self._grow(state.capacity)
        a = self.arrays
        ground_step(rows, dt, state.frame, a.contacts, state.out_rot, state.out_pos, self._data,
                    self.state, self._work)

    def pose(self, rows: np.ndarray, dt: np.ndarray, pose: tuple, pool=None) -> None:
        """The batch's poses stage of ``rows [R]`` (``pose``: its plain tuple) and this stage
        after it: one compiled call; on ``pool``'s thread too for many rows (each half of the
        rows posed and put on the ground on a thread of its own: a row reads and writes its
        own state). Every row was :meth:`reset` (the batch does it as it adds one): this
        stage's state has its row."""
        if pool is None or len(rows) < 2:
            pose_ground_rows(rows, dt, pose, self._data, self.state, self._work)
            return
        half = len(rows) // 2
        other = pool.submit(pose_ground_rows, rows[half:], dt[half:], pose, self._data, self.state, self._work2)
        pose_ground_rows(rows[:half], dt[:half], pose, self._data, self.state, self._work)
        other.result()

    def sim_pose(self, rows: np.ndarray, dt: np.ndarray, goals: np.ndarray, sim: tuple, pose: tuple) -> None:
        """The batch's simulated roots of ``rows [R]`` toward ``goals [R, 5]`` (``sim``: its
        plain tuple), its poses stage and this stage after them: one compiled call (rows
        :meth:`reset` before, as for :meth:`pose`)."""
        sim_pose_ground_rows(rows, dt, goals, sim, pose, self._data, self.state, self._work)

    def speed_factors(self, rows: np.ndarray) -> np.ndarray:
        """``[R]``: the speed factors the stage set for ``rows`` on their last frame."""
        self._grow(int(rows.max()) + 1 if len(rows) else 0)
        return self.state[rows, SPEED_FACTOR]

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
        when nothing changes. One character's factor is rounded to 2 %, so that an input
        holding one intent gets one adapted intent while the factor stays (its caches hold);
        its velocity is written into its state when its intent changes (intents are
        immutable: the same object, the same velocity)."""
        st = self.state
        if len(rows) == 1:
            r = rows.item(0)
            if r >= len(st):
                return intents
            it = intents[0]
            memo = self._memo
            if memo is None or memo[1] is not it or memo[0] != r:
                g = intents.goals
                st[r, GOAL_VELOCITY] = g[0, 0]
                st[r, GOAL_VELOCITY + 1] = g[0, 1]
                memo = self._memo = (r, it, bool(intents.plain[0]), -1.0, intents)
            f = st.item(r, SPEED_FACTOR)
            if f == 1.0 or not memo[2]:
                return intents
            f = round(f * 50.0) / 50.0
            if memo[3] == f:
                return memo[4]
            goals = intents.goals.copy()
            goals[0, :2] *= f
            out = IntentRows(goals, intents.gaits, intents.plain, [None])
            self._memo = (r, it, True, f, out)
            return out
        self._memo = None  # (these rows' velocities written here)
        self._grow(int(rows.max()) + 1)
        st = self.state
        st[rows, GOAL_VELOCITY:GOAL_VELOCITY + 2] = intents.goals[:, :2]
        f = st[rows, SPEED_FACTOR]
        change = intents.plain & (f != 1.0)
        if not change.any():
            return intents
        goals = intents.goals.copy()
        goals[change, :2] *= f[change, None]
        return intents.with_goals(goals, change)
