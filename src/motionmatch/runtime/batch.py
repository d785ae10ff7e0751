"""The per-frame state of many controllers of one database as arrays, and their compiled
per-frame stages over any set of them.

A :class:`ControllerBatch` holds one row per controller: its playback (fractional frame,
character root, the database root played last), its simulated root (:class:`RowPredictor`),
its inertialization offsets (:func:`~motionmatch.runtime.inertialize.inertial_rows`), its
foot locks, the last two poses it showed (a transition's source and its velocity) and
the pose it outputs. Every :class:`~motionmatch.runtime.controller.Controller` owns a row:
of a batch of its own, or of its :class:`~motionmatch.runtime.world.World`'s. The numeric
work of a frame is four compiled calls over rows (:mod:`motionmatch.runtime._batch_kernels`):

1. :meth:`ControllerBatch.playback`: advance the clips by time and move the character
   roots by their root motion;
2. :meth:`ControllerBatch.decide`: the clocks, and which rows only coast (no search, no
   mode change: most frames of a walking character); the others decide in Python;
3. :meth:`ControllerBatch.advance_sim`: the simulated roots' velocity and heading springs;
4. :meth:`ControllerBatch.pose`: sample the database, add the inertialization offsets,
   forward kinematics and foot-locking IK.

A controller's own update calls them for its one row; a world calls each once per frame
for all its agents, with the decisions that are not coasting and the searches between the
second and the third: the same code on the same numbers, one row or a thousand.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.control.intent import Intent, intent_goal_tuple, intent_goals
from motionmatch.control.trajectory import RootState, TrajectoryPredictor
from motionmatch.database import MotionDatabase
from motionmatch.runtime import _batch_kernels as BK
from motionmatch.runtime._batch_kernels import (
    ControllerRows,
    DatabaseArrays,
    DecisionArrays,
    PlaybackArrays,
    PoseArrays,
    SimArrays,
    stage_arrays,
)
from motionmatch.runtime.ground import GroundStage, needs_ground
from motionmatch.runtime.inertialize import inertial_rows
from motionmatch.runtime.rows import RowArrays

__all__ = ["ControllerBatch", "ControllerRows", "DatabaseArrays", "RowPredictor", "database_arrays", "intent_goal",
           "intent_goal_tuple", "intent_goals", "leg_chains"]

#: ``ControllerSettings.inertialization`` -> ``ControllerRows.inert_kind``
INERT_KINDS = {"none": BK.NO_OFFSETS, "quintic": BK.QUINTIC, "spring": BK.SPRING}


def leg_chains(db: MotionDatabase) -> list[tuple[int, int, int, int]]:
    """``(upleg, knee, ankle, toe)`` joints of every contact joint (``db.foot_joints``), or
    ``[]`` when one of them is not at the end of a three-bone leg (no foot locking).

    The legs are the humanoid roles of the database's skeleton with its schema's roles map
    (:func:`~motionmatch.anim.humanoid.find_humanoid`): upper leg, lower leg and ankle
    joined parent to child, the contact joint the ankle or below it. Other skeletons: the
    three parents of each contact joint."""
    p = db.skeleton.parents
    try:
        roles = find_humanoid(db.skeleton, db.schema.roles_map)
        legs = [roles.leg_chain(side) for side in ("left", "right")]
    except HumanoidError:
        legs = []
    if legs and tuple(leg[3] for leg in legs) == tuple(db.foot_joints):
        ok = all(p[knee] == hip and p[ankle] == knee and hip > 0 and db.skeleton.descends_from(toe, ankle)
                 for hip, knee, ankle, toe in legs)
        return [tuple(int(j) for j in leg) for leg in legs] if ok else []
    out = []
    for toe in db.foot_joints:
        ankle = p[toe]
        knee = p[ankle] if ankle > 0 else -1
        hip = p[knee] if knee > 0 else -1
        if min(ankle, knee, hip) <= 0:
            return []
        out.append((int(hip), int(knee), int(ankle), int(toe)))
    return out


_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def database_arrays(db: MotionDatabase) -> DatabaseArrays:
    """The :class:`DatabaseArrays` of ``db`` (computed once per database, read-only)."""
    a = _ARRAYS.get(db)
    if a is not None:
        return a
    track_pos = db.translations[:, 0].astype(np.float64)
    track_yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
    legs = np.asarray(leg_chains(db), dtype=np.int64).reshape(-1, 4)
    clip_last = (db.clip_stops[db.frame_clip] - 1).astype(np.int64)
    clip_first = db.clip_starts[db.frame_clip].astype(np.int64)
    parents = np.ascontiguousarray(db.skeleton.parents, dtype=np.int64)
    for x in (track_pos, track_yaw, legs, clip_last, clip_first, parents):
        x.setflags(write=False)
    a = DatabaseArrays(db.rotations, db.translations, db.contacts, parents, legs, np.zeros((0, 4), dtype=np.int64),
                       clip_last, clip_first, track_pos, track_yaw, float(db.fps))
    _ARRAYS[db] = a
    return a


def _controller_rows(J: int, K: int, capacity: int) -> RowArrays:
    f8, i8, b = np.float64, np.int64, np.bool_
    J1 = J - 1
    shapes = {"frame_pos": ((), f8), "play_rate": ((), f8), "frame": ((), i8), "root_pos": ((3,), f8), "root_yaw": ((), f8),
              "db_root_pos": ((3,), f8), "db_root_yaw": ((), f8), "shown_rot": ((2, J1, 4), f8),
              "shown_pos": ((2, J1, 3), f8), "shown_slot": ((), i8), "last_dt": ((), f8), "locked": ((K,), b),
              "lock_pos": ((K, 3), f8), "release": ((K, 3), f8), "release_t": ((K,), f8), "lock_t": ((K,), f8),
              "out_rot": ((J, 4), f8), "out_pos": ((J, 3), f8), "out_contacts": ((K,), b), "inert_kind": ((), i8),
              "foot_locking": ((), b), "unlock_distance": ((), f8), "foot_blend_time": ((), f8),
              "foot_lock_in_time": ((), f8), "sim_pos": ((3,), f8), "sim_vel": ((3,), f8), "sim_acc": ((3,), f8),
              "sim_heading": ((), f8), "sim_angle": ((), f8), "sim_rate": ((), f8), "sim_version": ((), i8),
              "velocity_halflife": ((), f8), "facing_halflife": ((), f8), "clock": ((), f8), "since_search": ((), f8),
              "mode": ((), i8), "last_kind": ((), i8), "last_goal": ((5,), f8), "last_gait": ((), i8),
              "search_interval": ((), f8), "adjust_halflife": ((), f8), "sharp_turn_deg": ((), f8),
              "sim_compiled": ((), b), "adjust_max_ratio": ((), f8), "adjust_min_speed": ((), f8),
              "sim_max_distance": ((), f8)}
    return RowArrays({name: shapes[name] for name in ControllerRows._fields}, capacity)


POSE_SPLIT_ROWS = 64
"""Fewer rows than this are posed on the calling thread alone (:meth:`ControllerBatch.pose`)."""


class _StageArgs(NamedTuple):
    """A batch's stage arguments, as the kernels take them (plain tuples), for the arrays
    of one size of the batch (``frame_pos``: its state's array then)."""

    frame_pos: np.ndarray
    playback: tuple
    decision: tuple
    sim: tuple
    pose: tuple


class ControllerBatch:
    """The per-frame state of the controllers of ``db``, one row each (see the module docstring).

    Attributes:
        db: the database; arrays: its :class:`DatabaseArrays`.
        state: the controllers' rows (:class:`ControllerRows` fields), inert: their
            inertialization rows (:class:`~motionmatch.runtime.inertialize.InertialArrays`
            fields), both :class:`~motionmatch.runtime.rows.RowArrays` with the same row
            numbers.
    """

    def __init__(self, db: MotionDatabase, capacity: int = 1):
        self.db = db
        self.arrays = database_arrays(db)
        J = db.skeleton.num_joints
        self.state = _controller_rows(J, len(self.arrays.legs), capacity)
        self.inert = inertial_rows(J - 1, capacity)
        #: the desired trajectories given to rows for their current frame (``{row: PredictedTrajectory}``)
        self.desired: dict[int, object] = {}
        #: whether a row was ever given spring inertialization (whose offsets advance in Python)
        self.has_spring = False
        self._views: _StageArgs | None = None
        #: the ground stage run after the poses (:mod:`motionmatch.runtime.ground`); ``None``: the flat floor
        self.ground: GroundStage | None = None

    def set_terrain(self, terrain, settings=None) -> None:
        """Stand the rows on ``terrain`` (a :class:`~motionmatch.environment.terrain.Terrain`;
        ``None`` or a flat one: the floor, no ground stage at all). ``settings``: a
        :class:`~motionmatch.runtime.ground.GroundSettings`."""
        if self.ground is not None and self.ground.terrain is terrain and settings is None:
            return  # (the same ground: its rows keep their state)
        self.ground = (GroundStage(terrain, self.arrays, settings, self.state.capacity) if needs_ground(terrain)
                       else None)

    def add(self, settings) -> int:
        """A row for a controller with ``settings`` (a
        :class:`~motionmatch.runtime.controller.ControllerSettings`); the controller sets
        the rest of its state."""
        st = self.state
        row = st.take()
        self.inert.grow_to(st.capacity)
        st.play_rate[row] = 1.0
        st.inert_kind[row] = INERT_KINDS[settings.inertialization]
        st.foot_locking[row] = bool(settings.foot_locking) and len(self.arrays.legs) > 0
        st.unlock_distance[row] = settings.foot_unlock_distance
        st.foot_blend_time[row] = settings.foot_blend_time
        st.foot_lock_in_time[row] = settings.foot_lock_in_time
        st.search_interval[row] = settings.search_interval
        st.adjust_halflife[row] = settings.adjust_halflife
        st.sharp_turn_deg[row] = settings.sharp_turn_deg
        st.adjust_max_ratio[row] = settings.adjust_max_ratio
        st.adjust_min_speed[row] = settings.adjust_min_speed
        st.sim_max_distance[row] = settings.sim_max_distance
        if st.inert_kind[row] == BK.SPRING:
            self.has_spring = True
        self.desired.pop(row, None)
        if self.ground is not None:
            self.ground.reset(row)
        return row

    def remove(self, row: int) -> None:
        """Row ``row`` is free again."""
        self.desired.pop(row, None)
        self.state.give_back(row)

    def copy_row(self, src: ControllerBatch, i: int, j: int) -> None:
        """Row ``j`` := row ``i`` of ``src`` (a batch of the same database)."""
        self.state.copy_row(src.state, i, j)
        self.inert.copy_row(src.inert, i, j)
        if self.ground is not None:
            self.ground.reset(j)
        if i in src.desired:
            self.desired[j] = src.desired[i]
        else:
            self.desired.pop(j, None)

    def _packed(self) -> _StageArgs:
        """The stages' arguments (:class:`PlaybackArrays`, :class:`SimArrays`,
        :class:`PoseArrays` as the kernels take them), built once per size of the batch."""
        v = self._views
        if v is None or v.frame_pos is not self.state.frame_pos:
            src = (self.arrays, self.state, self.inert)
            v = self._views = _StageArgs(self.state.frame_pos, stage_arrays(PlaybackArrays, *src),
                                         stage_arrays(DecisionArrays, *src), stage_arrays(SimArrays, *src),
                                         stage_arrays(PoseArrays, *src))
        return v

    # ------------------------------------------------------------------ stages
    def playback(self, rows: np.ndarray, dt: np.ndarray, at_end: np.ndarray, speed: np.ndarray,
                 turn_rate: np.ndarray) -> None:
        """Advance the clips of ``rows [R]`` (int64) by ``dt [R]`` seconds and move their
        roots by the root motion; writes ``at_end [R]`` (bool: clip end reached),
        ``speed [R]`` (m/s) and ``turn_rate [R]`` (rad/s) of that root motion."""
        BK.playback_rows(rows, dt, at_end, speed, turn_rate, self._packed().playback)

    def decide(self, rows: np.ndarray, dt: np.ndarray, at_end: np.ndarray, speed: np.ndarray, turn_rate: np.ndarray,
               force: np.ndarray, root_motion_only: np.ndarray, plain: np.ndarray,
               goals: np.ndarray, gaits: np.ndarray, adjust_here: bool, coast: np.ndarray, sharp: np.ndarray) -> None:
        """Advance the clocks of ``rows [R]`` by ``dt [R]`` seconds and write ``coast [R]``
        (which of them only coast this frame: no search, no mode change; their roots
        adjusted) and ``sharp [R]`` (whether each intent changed sharply; -1: not known
        here) (:func:`~motionmatch.runtime._batch_kernels.decide_rows`, where the other
        arguments are described)."""
        BK.decide_rows(rows, dt, at_end, speed, turn_rate, force, root_motion_only, plain, goals, gaits,
                       adjust_here, coast, sharp, self._packed().decision)

    def playback_decide(self, rows: np.ndarray, dt: np.ndarray, at_end: np.ndarray, speed: np.ndarray,
                        turn_rate: np.ndarray, force: np.ndarray, root_motion_only: np.ndarray, plain: np.ndarray,
                        goals: np.ndarray, gaits: np.ndarray, coast: np.ndarray, sharp: np.ndarray) -> None:
        """:meth:`playback`, then :meth:`decide` (the roots adjusted there), in one compiled call."""
        v = self._packed()
        BK.playback_decide_rows(rows, dt, at_end, speed, turn_rate, force, root_motion_only, plain, goals, gaits,
                                coast, sharp, v.playback, v.decision)

    def advance_sim(self, rows: np.ndarray, dt: np.ndarray, goals: np.ndarray) -> None:
        """Advance the simulated roots of ``rows [R]`` by ``dt [R]`` seconds toward
        ``goals [R, 5]`` (see :func:`~motionmatch.runtime._batch_kernels.advance_sim_rows`;
        :func:`intent_goal` packs one)."""
        BK.advance_sim_rows(rows, dt, goals, self._packed().sim)

    def advance_sim_pose(self, rows: np.ndarray, dt: np.ndarray, goals: np.ndarray, pool=None) -> None:
        """:meth:`advance_sim`, then :meth:`pose` (one compiled call for the two when the
        poses are not shared with ``pool``'s thread)."""
        if pool is None or len(rows) < POSE_SPLIT_ROWS:
            v = self._packed()
            if self.ground is not None:  # (then the ground stage, in the same compiled call)
                self.ground.sim_pose(rows, dt, goals, v.sim, v.pose)
                return
            BK.sim_pose_rows(rows, dt, goals, v.sim, v.pose)
            return
        self.advance_sim(rows, dt, goals)
        self.pose(rows, dt, pool)

    def pose(self, rows: np.ndarray, dt: np.ndarray, pool=None) -> None:
        """The poses of ``rows [R]`` (distinct) after ``dt [R]`` seconds into
        ``state.out_rot``, ``state.out_pos`` and ``state.out_contacts`` (spring
        inertialization offsets must have been advanced by their inertializers first).
        ``pool``: a :class:`concurrent.futures.Executor` whose thread poses the second half
        of many rows meanwhile."""
        arrays = self._packed().pose
        if self.ground is not None:  # (then the ground stage, in the same compiled calls)
            self.ground.pose(rows, dt, arrays, None if len(rows) < POSE_SPLIT_ROWS else pool)
            return
        if pool is None or len(rows) < POSE_SPLIT_ROWS:
            BK.pose_rows(rows, dt, arrays)
            return
        half = len(rows) // 2
        other = pool.submit(BK.pose_rows, rows[half:], dt[half:], arrays)
        BK.pose_rows(rows[:half], dt[:half], arrays)
        other.result()


def intent_goal(intent: Intent, out: np.ndarray) -> None:
    """The goal of a simulated root heading for ``intent`` into ``out [5]``: its velocity
    ``x, z`` (m/s), its facing ``x, z`` and 1 if it has one (else zeros)."""
    out[:] = intent_goal_tuple(intent)


class RowPredictor(TrajectoryPredictor):
    """A controller's simulated root kept in its batch row (``sim_*`` of
    :class:`ControllerRows`): :attr:`state` is built from the row when read (the same
    :class:`~motionmatch.control.trajectory.RootState` the plain predictor would hold), and
    the common advance (spring mode, 2D, an :class:`~motionmatch.control.intent.Intent`) is
    the batch's compiled stage on the row, which a world runs for all its agents at once."""

    def __init__(self, batch: ControllerBatch, row: int, *args, **kw):
        self.batch, self.row = batch, row
        self._cache: tuple[int, RootState] | None = None
        self._goal, self._row1, self._dt1 = np.zeros((1, 5)), np.zeros(1, dtype=np.int64), np.zeros(1)
        super().__init__(*args, **kw)
        batch.state.velocity_halflife[row] = self.velocity_halflife
        batch.state.facing_halflife[row] = self.facing_halflife
        batch.state.sim_compiled[row] = self.mode == "spring" and not self.vertical

    def batched(self, desired) -> bool:
        """Whether :meth:`advance` toward ``desired`` is the batch's compiled stage."""
        return self.mode == "spring" and not self.vertical and isinstance(desired, Intent)

    @property
    def state(self) -> RootState:
        st, r = self.batch.state, self.row
        version = int(st.sim_version[r])
        if self._cache is None or self._cache[0] != version:
            s = RootState._trusted(st.sim_pos[r].copy(), st.sim_vel[r].copy(), st.sim_acc[r].copy(),
                                   float(st.sim_angle[r]), float(st.sim_rate[r]))
            self._cache = (version, s)
        return self._cache[1]

    @state.setter
    def state(self, s: RootState) -> None:
        st, r = self.batch.state, self.row
        st.sim_pos[r], st.sim_vel[r], st.sim_acc[r] = s.position, s.velocity, s.acceleration
        st.sim_heading[r] = s.yaw
        st.sim_rate[r] = s.angular_velocity[1]
        self._cache = (int(st.sim_version[r]), s)

    def _advance_planar(self, dt: float, desired: Intent) -> RootState:
        self.advance_row(dt, desired)
        return self.state

    def advance_row(self, dt: float, desired: Intent) -> None:
        """:meth:`advance` toward an intent for which :meth:`batched` is true, the state
        left in the row (built only when read)."""
        self._row1[0], self._dt1[0] = self.row, dt
        intent_goal(desired, self._goal[0])
        self.batch.advance_sim(self._row1, self._dt1, self._goal)
