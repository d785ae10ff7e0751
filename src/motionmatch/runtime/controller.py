"""The per-character motion-matching controller.

Every frame, :meth:`Controller.update` takes the time step and an
:class:`~motionmatch.control.intent.Intent` and:

1. advances playback of the current database clip by time (any ``dt``: poses are
   interpolated between database frames), moving the character by the clip's root
   motion;
2. predicts the desired future trajectory from the character's root with springs;
3. searches the database every ``search_interval`` seconds, immediately when the intent
   changes sharply, and when the clip ends; it keeps playing the current clip unless a
   frame is clearly better (``transition_ratio``);
4. blends transitions by inertialization and keeps planted feet in place with two-bone IK.

Modes (paper Section 3.3): ``locomotion``; ``idle`` (no input and low predicted speed:
the paper's fixed stand-still animation, the stillest standing stretch of the data
(:func:`~motionmatch.runtime.modes.idle_clip`), entered at the frame of its first second
that best matches the pose shown, then played forward and back with no searches, except
that an environment-aware chooser keeps searching to see obstacles and the character
steps aside when one is near; with a desired trajectory given, matching continues with a
standing query; without such a stretch the character holds its pose: the stillest match
on entering idle, not played on, said once as a :class:`~motionmatch.errors.ModeWarning`);
a mode the database cannot play (no jump, dance, punch or crawl in it) is said once the
same way (:attr:`Controller.refused`), whatever input asked for it; ``dance`` (a frame of a
``dance`` clip is matched, the clip plays to its end, then matching again); ``punch`` (on
each press, a frame of a ``punch`` clip shortly before one of its strikes is matched,
:func:`~motionmatch.runtime.modes.punch_strikes`, and played through the strike and
``punch_recoil`` seconds after it, then locomotion again);
``jump`` (a search over the take-offs of the jumps found in the data, i.e. frames
shortly before both feet leave the ground for > 0.11 s, or over ``jump``-tagged clips if
there are none, with 3D trajectory features; where the data's jumps allow it, the query's
heights and vertical velocities are the paper's vertical spring's
(:func:`~motionmatch.runtime.modes.jump_spring`: upward speed ``v_up`` sprung toward
``-v_up``) and the jump plays until the spring lands, its clock started at the crouch of
the take-off matched; else for ``jump_duration``. Matching again in mid-air, as the paper
does, only switched between the data's three jumps and followed the spring less closely,
0.048 against 0.023 m); ``creep`` (searches restricted to ``creep`` clips with 3D
features). Jump and creep need a database built with a vertical (3D) schema and the
tags; without them those actions fall back to locomotion.

Cost: the per-frame numeric work runs on Python floats and in three compiled stages over
the controller's row of a :class:`~motionmatch.runtime.batch.ControllerBatch` (playback
with root motion; the simulated root's springs; pose sampling, inertialization, forward
kinematics and foot-locking IK, :func:`motionmatch.runtime._kernels.controller_pose` per
row), so a frame without a search costs tens of microseconds, and a
:class:`~motionmatch.runtime.world.World` runs the same stages for all its agents in one
call each; ``ReferenceController`` in the tests (``tests/oracles``) keeps the plain numpy
formulation they compare it with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from motionmatch.control.intent import GAIT_INDEX, GAITS, Intent, IntentRows, intent_goal_tuple
from motionmatch.control.trajectory import PredictedTrajectory
from motionmatch.database import MotionDatabase
from motionmatch.database.tags import TagQueryError
from motionmatch.runtime import _batch_kernels as BK
from motionmatch.runtime._batch_kernels import LAST_NONE, LAST_OBJECT, LAST_PLAIN, MODES
from motionmatch.runtime.batch import ControllerBatch, RowPredictor, leg_chains
from motionmatch.runtime.controller_settings import ControllerSettings
from motionmatch.runtime.frame_result import FrameResult, GroupCosts
from motionmatch.runtime.inertialize import Inertializer
from motionmatch.runtime.modes import IdleClip, idle_clip, jump_query, refuse_mode
from motionmatch.runtime.query_building import QueryBuilding
from motionmatch.runtime.rows import row_field
from motionmatch.runtime.sampling import DatabaseSampling
from motionmatch.runtime.searching import Searching
from motionmatch.runtime.shared import database_shared
from motionmatch.search import build_searcher

__all__ = ["Controller", "ControllerSettings", "FrameResult", "GroupCosts"]

_MODE_CODE = {m: k for k, m in enumerate(MODES)}


def _shown_pose(which: int) -> property:
    """A property for one of the two local poses a controller's batch row keeps: ``0`` the
    pose shown last, ``1`` the one before (views of the row; assigning copies in)."""
    def get(ctrl) -> tuple[np.ndarray, np.ndarray]:
        st, r = ctrl._batch.state, ctrl._row
        k = st.shown_slot[r] ^ which
        return st.shown_rot[r, k], st.shown_pos[r, k]

    def put(ctrl, pose) -> None:
        rot, pos = get(ctrl)
        rot[...], pos[...] = pose

    return property(get, put)

class Controller(QueryBuilding, Searching, DatabaseSampling):
    """Plays one character from a :class:`MotionDatabase` under changing intents.

    Its per-frame state lives in a row of a :class:`~motionmatch.runtime.batch.ControllerBatch`
    (``batch``: a world's, shared with its other characters; default one of its own).
    :meth:`update` runs the one stepping pipeline, :meth:`step_many`, over its row; a
    :class:`~motionmatch.runtime.world.World` runs it over every agent's row at once, the
    numeric stages in one compiled call each: ``batch.playback`` (:meth:`_playback`: clip
    time, root motion), ``batch.decide`` (the clocks; which rows only coast), :meth:`_decide`
    for the others (root adjustment, mode, search), ``batch.advance_sim``
    (:meth:`_advance_sim`: the simulated root's springs), ``batch.pose`` (:meth:`_pose`),
    then :meth:`_result`. A subclass that redefines one of those three numeric stages is
    stepped one by one (:attr:`batched` is false).
    """

    #: whether a World may run this class's numeric stages for many controllers at once
    #: (false for a subclass that redefines one, e.g. the tests' numpy reference)
    batched = True

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.batched = all(getattr(cls, m) is getattr(Controller, m)
                          for m in ("_playback", "_advance_sim", "_pose", "_adjust_root"))

    def __init__(self, db: MotionDatabase, settings: ControllerSettings | None = None, *,
                 position=(0.0, 0.0, 0.0), facing=(0.0, 0.0, 1.0), start_frame: int | None = None,
                 batch: ControllerBatch | None = None):
        self.db = db
        self.s = settings or ControllerSettings()
        self._reselect_frames = round(self.s.reselect_history * db.fps)  # (see Searching._searched)
        if batch is not None and batch.db is not db:
            raise ValueError("the batch holds the controllers of another database")
        self._batch = batch if batch is not None else ControllerBatch(db)
        self._row = self._batch.add(self.s)
        self._rows1 = np.array([self._row], dtype=np.int64)  # the stages' arguments for this row alone
        self._dt1 = np.zeros(1)
        self._end1, self._speed1, self._turn1 = np.zeros(1, dtype=bool), np.zeros(1), np.zeros(1)
        self._coast1, self._sharp1 = np.zeros(1, dtype=bool), np.zeros(1, dtype=np.int64)
        sh = database_shared(db)  # what every controller of this database can share
        self._shared = sh
        #: ``{mode: reason}`` of the modes asked of this character that the database cannot
        #: play (each said once per database, as a :class:`~motionmatch.errors.ModeWarning`)
        self.refused: dict[str, str] = {}
        self.gaits = sh["gaits"]
        self.vcols = sh["vcols"]
        self.vtargets = sh["vtargets"]
        self._view_weights = sh["view_weights"]
        self._masks: dict[str, np.ndarray] = sh["masks"]
        times = db.schema.trajectory_offsets
        self.predictor = RowPredictor(self._batch, self._row, times, self.s.velocity_halflife,
                                      self.s.facing_halflife, mode=self.s.trajectory_mode)
        # one array of sample times for the database's controllers (a world's batched
        # queries check that they are the same object)
        self.predictor.times = sh.setdefault("times", self.predictor.times)
        self._term_layout = [(t, db.schema.slice(t.name), [times.index(o) for o in t.offsets])
                             for t in db.schema.terms if t.is_trajectory]
        self._query_pos, self._query_dir = self._query_layout()
        self._db_root_pos, self._db_root_yaw = sh["root_pos"], sh["root_yaw"]
        J = db.skeleton.num_joints
        self.inert = Inertializer(J - 1, self.s.inertialization, self.s.blend_time, self.s.spring_halflife,
                                  rows=self._batch.inert, row=self._row)
        self._legs = leg_chains(db)
        #: whether the search in progress transitions whatever the cost of continuing
        #: (mode change, clip end, ``force_search``); a chooser may read it
        self.search_forced = False
        #: ``(query [D], mask [N], view)`` of the last search (``None`` before the first)
        self.last_query: tuple[np.ndarray, np.ndarray, str] | None = None
        self.searches = 0
        self.transitions = 0
        self.time = 0.0
        self._last_obj = None  # the last intent when it is not plain (see _last_intent)
        self.chooser = None  # optional (controller, query [D], mask [N], view) -> (indices [1], costs [1])
        self.reset(position, facing, start_frame)

    @property
    def batch(self) -> ControllerBatch:
        """The :class:`~motionmatch.runtime.batch.ControllerBatch` holding this controller's state."""
        return self._batch

    @property
    def feet(self) -> int:
        """How many feet its foot locks hold (the database's leg chains)."""
        return len(self._legs)

    @property
    def row(self) -> int:
        """This controller's row of :attr:`batch`."""
        return self._row

    # ----------------------------------------------------------------- state
    # The per-frame state, in the batch row (copies or views out, values in).
    def _in_batch(self) -> tuple:
        return self._batch.state, self._row

    frame_pos = row_field(_in_batch, "frame_pos", float, "The database frame playing, fractional.")
    frame = row_field(_in_batch, "frame", int, "The database frame playing (``int(frame_pos)``).")
    play_rate = row_field(_in_batch, "play_rate", float, "Playback direction: 1 forward, -1 backward (idle).")
    root_pos = row_field(_in_batch, "root_pos", np.copy, "The character root ``[3]`` (world, m; a copy).")
    root_yaw = row_field(_in_batch, "root_yaw", float, "The character root's heading (rad about +Y, 0: +Z).")
    _last_dt = row_field(_in_batch, "last_dt", float, "Seconds between the two poses shown last.")
    # the foot locks (views): locked [K], where [K, 3], a released lock's offset [K, 3], times [K]
    _locked = row_field(_in_batch, "locked")
    _lock_pos = row_field(_in_batch, "lock_pos")
    _release = row_field(_in_batch, "release")
    _release_t = row_field(_in_batch, "release_t")
    _lock_t = row_field(_in_batch, "lock_t")
    time = row_field(_in_batch, "clock", float, "Seconds of updates since the controller was made.")
    _since_search = row_field(_in_batch, "since_search", float, "Seconds since the last search (see since_search).")

    @property
    def mode(self) -> str:
        """The controller's mode: ``"locomotion"``, ``"idle"``, ``"dance"``, ``"jump"``, ``"creep"`` or ``"punch"``."""
        return MODES[self._batch.state.mode[self._row]]

    @mode.setter
    def mode(self, value: str) -> None:
        self._batch.state.mode[self._row] = _MODE_CODE[value]

    @property
    def _last_intent(self) -> Intent | None:
        """The intent of the last update (``None`` before the first). A plain one (an
        :class:`Intent` with no actions) is kept in the batch row (its goal and gait, as the
        compiled decision reads and writes it) and made again when read: equal to it in
        every number that :meth:`_changed_sharply` compares; another is kept as it is."""
        st, r = self._batch.state, self._row
        kind = st.last_kind[r]
        if kind == LAST_NONE:
            return None
        if kind == LAST_OBJECT:
            return self._last_obj
        vx, vz, fx, fz, has_facing = st.last_goal[r].tolist()
        return Intent.planar(vx, vz, GAITS[st.last_gait[r]], facing=(fx, fz) if has_facing else None)

    @_last_intent.setter
    def _last_intent(self, intent: Intent | None) -> None:
        st, r = self._batch.state, self._row
        self._last_obj = None
        if intent is None:
            st.last_kind[r] = LAST_NONE
        elif type(intent) is Intent and not intent.actions:
            st.last_kind[r] = LAST_PLAIN
            st.last_goal[r] = intent_goal_tuple(intent)
            st.last_gait[r] = GAIT_INDEX[intent.gait]
        else:
            st.last_kind[r] = LAST_OBJECT
            self._last_obj = intent

    @property
    def _desired_override(self) -> PredictedTrajectory | None:
        """The desired trajectory given to this frame's update (``None``: the spring prediction)."""
        return self._batch.desired.get(self._row)

    @property
    def _db_root(self) -> tuple[tuple[float, float, float], float]:
        """The database root ``((x, y, z), yaw)`` at :attr:`frame_pos` (where root motion counts from)."""
        st = self._batch.state
        return tuple(st.db_root_pos[self._row].tolist()), float(st.db_root_yaw[self._row])

    @_db_root.setter
    def _db_root(self, value) -> None:
        st = self._batch.state
        st.db_root_pos[self._row], st.db_root_yaw[self._row] = value

    # the local poses ([J-1, 4], [J-1, 3]) shown last and before it (views of the row)
    _shown = _shown_pose(0)
    _prev_shown = _shown_pose(1)

    def move_to(self, batch: ControllerBatch) -> None:
        """Carry this controller's state into a row of ``batch`` (its old row is freed)."""
        if batch is self._batch:
            return
        if batch.db is not self.db:
            raise ValueError("the batch holds the controllers of another database")
        row = batch.add(self.s)
        batch.copy_row(self._batch, self._row, row)
        self._batch.remove(self._row)
        self._batch, self._row = batch, row
        self._rows1[0] = row
        self.inert.rows, self.inert.row = batch.inert, row
        self.predictor.batch, self.predictor.row = batch, row

    # ----------------------------------------------------------------- setup
    def mask(self, tags: str | None) -> np.ndarray:
        """Valid frames matching a tag query (cached; a tag the data lacks is a tag no clip
        has; a query that cannot be read, or that no frame matches, gives all valid frames)."""
        key = tags or "*"
        if key not in self._masks:
            try:
                m = self.db.mask(tags, strict=False)
            except TagQueryError:
                m = self.db.valid.copy()
            if not m.any():
                m = self.db.valid.copy()
            m.setflags(write=False)  # shared by the controllers of this database
            self._masks[key] = m
        return self._masks[key]

    def _clip_allowed(self, tags: str) -> np.ndarray:
        """``[C]`` clips whose frames the tag query admits (validity aside)."""
        key = "clips:" + tags
        if key not in self._masks:
            m = self.mask(tags)
            c = np.bincount(self.db.frame_clip[m], minlength=len(self.db.clip_names)) > 0
            c.setflags(write=False)
            self._masks[key] = c
        return self._masks[key]

    def _has(self, tag: str) -> bool:
        if tag == "jump" and "@takeoff" in self._masks:
            return True
        return tag in self.db.tags

    def idle_clip(self) -> IdleClip | None:
        """The standing stretch idle plays (:func:`~motionmatch.runtime.modes.idle_clip` of
        the locomotion clips, ``settings.idle_seconds`` long; shared by the database's
        controllers), or ``None`` when the data has none: idle then holds a pose."""
        key = (self.s.locomotion_tags, self.s.idle_seconds)
        cache = self._shared["idle"]
        if key not in cache:
            clip = idle_clip(self.db, self.s.locomotion_tags, self.s.idle_seconds)
            cache[key] = clip
            if clip is not None:
                clip.entries.setflags(write=False)
                self._masks[self._idle_tags] = clip.entries
        return cache[key]

    @property
    def _idle_tags(self) -> str:
        """The name of the idle clip's entry frames among the searches' masks."""
        return f"@idle:{self.s.locomotion_tags}:{self.s.idle_seconds:g}"

    def searcher(self):
        """The nearest-frame searcher of the database's features, built once per database
        and search method and shared by every controller of that database. A feature view
        is a weight vector passed with each query (:meth:`view_weights`)."""
        key = self.s.search_method
        searchers = self._shared["searchers"]
        if key not in searchers:
            searchers[key] = build_searcher(self.db.features, self.db.valid, method=key)
        return searchers[key]

    def view_weights(self, view: str) -> np.ndarray | None:
        """Per-dimension weights ``[D]`` of a feature view, for the searcher's ``weights``:
        ``"planar"`` weights the vertical columns (root heights, jumps) 0, ``"full"`` is
        every column (``None``: all 1)."""
        return self._view_weights[view]

    def view_cost(self, query: np.ndarray, frame: int, view: str) -> float:
        """Squared feature distance of database ``frame`` to ``query [D]`` in ``view``, as the
        searcher measures it (float64)."""
        d = query.astype(np.float64) - self.db.features[frame]
        w = self._view_weights[view]
        return float(np.dot(d * d, w) if w is not None else np.dot(d, d))

    def reset(self, position=(0.0, 0.0, 0.0), facing=(0.0, 0.0, 1.0), start_frame: int | None = None) -> None:
        """Put the character at ``position`` facing ``facing``, playing ``start_frame``
        (default: the slowest valid locomotion frame, i.e. standing; with no input the first
        update enters idle and its clip). Starting in the idle clip instead changes every
        run from its first search on (the shipped paths' follow runs among them)."""
        db = self.db
        if start_frame is None:
            starts = self._shared["start_frames"]
            tags = self.s.locomotion_tags
            if tags not in starts:
                m = self.mask(tags)
                speed = db.root_speeds()
                starts[tags] = int(np.flatnonzero(m)[np.argmin(speed[m])])
            start_frame = starts[tags]
        self.frame_pos = float(start_frame)
        self.frame = int(start_frame)
        self.play_rate = 1.0
        f = np.asarray(facing, dtype=np.float64)
        self.root_pos = np.asarray(position, dtype=np.float64).copy()
        self.root_pos[1] = 0.0
        self.root_yaw = float(np.arctan2(f[0], f[2]))
        self.predictor.reset(self.root_pos, facing=f)
        self._db_root = self._db_root_at(self.frame_pos)
        self.mode = "locomotion"
        self._mode_until = np.inf
        self._jump_start = 0.0  # when the jump's vertical spring began (s)
        self._idle_evading = False  # idle: the last periodic search stepped aside from an obstacle
        self._since_search = np.inf
        self._last_intent = None
        self.inert.reset()
        rot, pos = self._db_pose_at(self.frame_pos)
        self._shown = (rot, pos)
        self._prev_shown = (rot.copy(), pos.copy())  # distinct buffers: the fast path writes into them
        self._last_dt = 0.0
        self._locked[:] = False
        self._lock_pos[:] = 0.0
        self._release[:] = 0.0     # foot offset being blended out after an unlock
        self._release_t[:] = np.inf
        self._lock_t[:] = 0.0
        self.last_desired: PredictedTrajectory | None = None
        #: the last search's group costs (:class:`GroupCosts`, computed when read; ``{}``
        #: before a search and after one that admitted no frame)
        self.last_costs: Mapping[str, float] = {}

    # ------------------------------------------------------------ search phase
    @property
    def since_search(self) -> float:
        """Seconds since the last search (``inf`` before the first one).

        The periodic search runs once this reaches ``settings.search_interval``. Setting
        it staggers characters: e.g. ``-(i % n) / 60`` delays character ``i``'s first
        search by ``i % n`` frames at 60 Hz so that ``n`` characters spread their searches
        over ``n`` frames (a negative value delays, ``inf`` searches on the next update).
        """
        return self._since_search

    @since_search.setter
    def since_search(self, seconds: float) -> None:
        seconds = float(seconds)
        if math.isnan(seconds) or seconds == -math.inf:
            raise ValueError(f"since_search must be a number of seconds (or +inf), got {seconds!r}")
        self._since_search = seconds

    # -------------------------------------------------------------- searching

    # ------------------------------------------------------------------ update
    def _last_actions(self) -> frozenset[str]:
        """The actions of the last frame's intent (none before the first; a plain one has none)."""
        return self._last_obj.actions if self._batch.state.last_kind[self._row] == LAST_OBJECT else frozenset()

    def _choose_mode(self, intent: Intent, last_actions: frozenset[str]) -> tuple[str, bool]:
        """The mode for this frame (``last_actions``: the last frame's intent's) and whether
        entering it forces a search."""
        acts = intent.actions
        new = acts - last_actions
        if self.mode in ("jump", "punch") and self.time < self._mode_until:
            return self.mode, False
        for mode, asked in (("jump", "jump" in new), ("punch", "punch" in new), ("dance", "dance" in acts),
                            ("creep", "creep" in acts)):
            if asked:
                if self._has(mode):
                    return mode, mode in ("jump", "punch") or self.mode != mode
                refuse_mode(self.refused, mode, self._shared["modes_said"])  # said once, whichever input asked
        if intent.speed > 1e-3:
            moving = True
        else:
            v = self.predictor.state.velocity
            moving = math.hypot(float(v[0]), float(v[2])) > self.s.idle_speed
        if not moving:
            if self.idle_clip() is None and self._desired_override is None:
                refuse_mode(self.refused, "idle", self._shared["modes_said"])
            return "idle", self.mode not in ("idle",)
        # leaving idle (its clip, or a held pose) searches at once (as leaving dance, jump or creep does)
        return "locomotion", self.mode in ("dance", "jump", "creep", "idle", "punch")

    def update(self, dt: float, intent: Intent, desired: PredictedTrajectory | None = None,
               force_search: bool = False, root_motion_only: bool = False) -> FrameResult:
        """Advance the character by ``dt`` seconds under ``intent``.

        Args:
            desired: a desired future trajectory (world positions and facings at the
                schema's offsets, :attr:`PredictedTrajectory.times` equal to
                ``db.schema.trajectory_offsets``) to match instead of the spring
                prediction, e.g. from a drawn path; ``intent`` still drives the simulated
                root and the modes.
            force_search: search on this update whatever the search timer says.
            root_motion_only: no pull toward the simulated root on this update (as with
                ``adjust_halflife=0``; e.g. near obstacles, where the frames were chosen
                for where the clips' own root motion takes the body).
        """
        (searched, transitioned), = Controller.step_many([self], [dt], [intent], [desired], [force_search],
                                                         [root_motion_only])
        return self._result(searched, transitioned, self._output())

    @staticmethod
    def step_many(ctrls: list[Controller], dts: list[float], intents: list[Intent], desireds: list,
                  search_now: list[bool], root_motion_only: list[bool], *, defer: list | None = None,
                  threads=None, rows: np.ndarray | None = None) -> list[tuple[bool, bool]]:
        """The update pipeline: :meth:`update` for every controller of ``ctrls`` (one item of
        each list per controller; see :meth:`update` for their meaning), stage by stage over
        their rows: the checks (:meth:`_check_steps`), the playback with root motion, the
        clocks and the rows that only coast (compiled), the decision of the others (mode,
        search: :meth:`_decide`), the searches deferred to
        ``defer`` (a world's: run together, then ended in order, their quintic transitions in
        one call), the spring inertialization's offsets, the simulated roots, the poses.
        The numeric stages are one compiled call each over all the rows (the poses on
        ``threads``, a world's pool, when given). Controllers of more than one must share a
        batch and run the compiled stages (:attr:`batched`); a subclass that redefines one
        (:attr:`batched` false) is stepped alone, through its own stages. This is the only
        stepping code: :meth:`update` is this over one controller, a
        :class:`~motionmatch.runtime.world.World` runs it over all its agents. ``rows``:
        the controllers' rows ``[n]`` when the caller knows them (a world's: then they are
        rows of one batch that run the compiled stages).

        Returns ``(searched, transitioned)`` per controller; each one's pose is its batch's
        output row (:meth:`_output`)."""
        n = len(ctrls)
        c0 = ctrls[0]
        b = c0._batch
        compiled = c0.batched
        if n > 1 and rows is None and not all(c._batch is b and c.batched for c in ctrls):
            raise ValueError("step_many: controllers of one batch whose classes run the compiled stages")
        if n == 1:  # (one controller: its own argument arrays, kept between updates)
            rows, h_arr, at_end, speed, turn = c0._rows1, c0._dt1, c0._end1, c0._speed1, c0._turn1
            coast, sharp = c0._coast1, c0._sharp1
            h_arr[0] = dts[0]
            given = [] if desireds[0] is None else [0]
        else:
            if rows is None:
                rows = np.fromiter((c._row for c in ctrls), dtype=np.int64, count=n)
            h_arr = np.array(dts, dtype=np.float64)
            at_end, speed, turn = np.empty(n, dtype=bool), np.empty(n), np.empty(n)
            coast, sharp = np.empty(n, dtype=bool), np.empty(n, dtype=np.int64)
            given = [k for k, d in enumerate(desireds) if d is not None]
        hs = h_arr.tolist()
        if given or n > 1 or not 0.0 <= hs[0] < math.inf:
            Controller._check_steps([ctrls[k] for k in given], hs if n < 16 else h_arr, [desireds[k] for k in given])
        desired = b.desired  # (this step's desired trajectories, by row)
        if desired:
            if n == 1:
                desired.pop(int(rows[0]), None)
            else:
                keys = np.fromiter(desired, dtype=np.int64, count=len(desired))
                for r in keys[np.isin(keys, rows)].tolist():
                    del desired[r]
        for k in given:
            desired[ctrls[k]._row] = desireds[k]
        # the playback, the clocks and which rows only coast (compiled); the others decide here
        intents = IntentRows.of(intents)
        if b.ground is not None:  # (slopes and walls: the ground stage's speed, runtime/ground.py)
            intents = b.ground.adapt_intents(rows, intents)
        goals = intents.goals
        force, rmo = np.asarray(search_now, dtype=bool), np.asarray(root_motion_only, dtype=bool)
        if compiled:
            b.playback_decide(rows, h_arr, at_end, speed, turn, force, rmo, intents.plain, goals, intents.gaits, coast,
                              sharp)
        else:
            at_end[0], speed[0], turn[0] = c0._playback(hs[0])
            b.decide(rows, h_arr, at_end, speed, turn, force, rmo, intents.plain, goals, intents.gaits, False, coast,
                     sharp)
        decided = [(False, False)] * n
        late = []  # the controllers (their k) whose search is deferred
        todo = ([] if coast[0] else [0]) if n == 1 else (~coast).nonzero()[0].tolist()
        if todo:
            ends, speeds, turns, sharps = at_end.tolist(), speed.tolist(), turn.tolist(), sharp.tolist()
        for k in todo:
            d = ctrls[k]._decide(hs[k], intents[k], ends[k], speeds[k], turns[k], search_now[k], root_motion_only[k],
                                 defer, sharps[k])
            decided[k] = d
            if d[1] is None:  # (its search's kernel runs below with the others; what follows, after it)
                late.append(k)
        if late:
            # the deferred searches' ends, in the controllers' order (each touches its own
            # controller only), then the quintic transitions they started, together
            defer.run()
            moves = []
            for k, (c, job, rest) in zip(late, defer):
                decided[k] = (True, c._search_end(job, rest, moves))
            defer.clear()
            if moves:
                Controller._transition_rows(moves)
        if not compiled:  # (a subclass's own stages: its pose into the batch's output row)
            c0._advance_sim(hs[0], intents[0])
            rot, pos, contacts = c0._pose(hs[0])
            st, r = b.state, c0._row
            st.out_rot[r], st.out_pos[r], st.out_contacts[r] = rot, pos, contacts
            return decided
        # the simulated roots the compiled stage advances (the others advance their own),
        # and the spring inertializations (their offsets advanced before the poses)
        st = b.state
        own_sim = ([] if st.sim_compiled[rows[0]] else [0]) if n == 1 else (~st.sim_compiled[rows]).nonzero()[0].tolist()
        for k in own_sim:
            ctrls[k]._advance_sim(hs[k], intents[k])
        if b.has_spring:
            for k in (st.inert_kind[rows] == BK.SPRING).nonzero()[0].tolist():
                ctrls[k]._advance_offsets(hs[k])
        if not own_sim:
            b.advance_sim_pose(rows, h_arr, goals, threads)
            return decided
        if len(own_sim) < n:
            sim = st.sim_compiled[rows]
            b.advance_sim(rows[sim], h_arr[sim], goals[sim])
        b.pose(rows, h_arr, threads)
        return decided

    @staticmethod
    def _check_steps(ctrls: list[Controller], dts: np.ndarray | list[float], desireds: list) -> None:
        """The checks of :meth:`update`'s arguments for many controllers: every step ``dts``
        a finite number of seconds >= 0, and each desired trajectory of ``desireds`` (given
        to ``ctrls``, one each) with the schema's samples (one line naming the fix, else a
        ``ValueError``)."""
        ok = all(0.0 <= h < math.inf for h in dts) if isinstance(dts, list) else bool(np.all((dts >= 0) & (dts < np.inf)))
        if not ok:
            bad = next(h for h in np.asarray(dts, dtype=np.float64).tolist() if not 0.0 <= h < math.inf)
            raise ValueError(f"dt must be a finite number of seconds >= 0, got {bad!r}")
        for c, desired in zip(ctrls, desireds):
            if desired is not None and len(desired.positions) != len(c.db.schema.trajectory_offsets):
                offsets = c.db.schema.trajectory_offsets
                raise ValueError(f"desired trajectory has {len(desired.positions)} samples; the database's schema "
                                 f"needs {len(offsets)} (at {offsets} s)")

    def _decide(self, dt: float, intent: Intent, at_end: bool, speed: float, turn_rate: float, force_search: bool,
                root_motion_only: bool, defer: list | None = None, sharp: int = -1) -> tuple[bool, bool | None]:
        """After playback (``at_end``, the root motion's ``speed`` and ``turn_rate``): the
        root adjustment, the mode, the search if one is due (and the transition it may
        start). Returns whether it searched and transitioned (``None``: a locomotion search
        deferred to ``defer``, see :meth:`_search`).

        The frames that only coast (most frames of a walking character: locomotion goes
        on, no search is due) are not decided here: the compiled stage before it
        (:meth:`ControllerBatch.decide <motionmatch.runtime.batch.ControllerBatch.decide>`)
        found them and adjusted their roots. ``sharp``: whether the intent changed sharply
        from the last, as that stage found it (-1: not known there)."""
        s = self.s
        adjust = s.adjust_halflife > 0 and dt > 0 and not root_motion_only
        if adjust:
            self._adjust_root(dt, speed, turn_rate)
        mode, force = self._choose_mode(intent, self._last_actions())
        if self.mode in ("jump", "punch") and mode != self.mode:
            force = True  # jump or punch finished: back to locomotion now
        self.mode = mode
        if sharp < 0:  # (not known from the compiled stage)
            last = self._last_intent
            sharp = last is not None and last is not intent and self._changed_sharply(intent, last)
        sharp = force_search or bool(sharp)
        searched = transitioned = False
        if mode != "idle" and self.play_rate != 1.0:
            self.play_rate = 1.0  # idle left while its clip played backward (or a pose was held): forward
        if mode == "jump":
            spring = self._shared["jump_spring"] if self.s.vertical_spring else None
            if force:
                searched = True
                tags = "@takeoff" if "@takeoff" in self._masks else "jump"
                if spring is None:
                    transitioned = self._search(intent, tags, self.vtargets.jump, force=True)
                    self._mode_until = self.time + self.s.jump_duration
                else:  # the paper's vertical spring
                    transitioned = self._search(intent, tags, jump_query(self.db, spring, 0.0), force=True)
                    # the spring's clock starts at the crouch of the jump matched (the wind-up
                    # before it is the clip's own)
                    crouch = int(self._shared["crouch"][self.frame])
                    lead = (crouch - self.frame) / self.db.fps if crouch >= 0 else 0.0
                    self._jump_start = self.time + lead
                    self._mode_until = self._jump_start + spring.landing_time + self.s.jump_settle
        elif mode == "punch":
            if force:  # a frame shortly before a strike; played through the strike and the recoil
                searched = True
                tags = "@punch" if "@punch" in self._masks else "punch"
                transitioned = self._search(Intent.idle(), tags, None, force=True)
                strike = int(self._shared["strike"][self.frame])
                end = strike + round(self.s.punch_recoil * self.db.fps) if strike >= 0 else self.db.clip_end(self.frame)
                self._mode_until = self.time + (min(end, self.db.clip_end(self.frame)) - self.frame_pos) / self.db.fps
        elif mode == "dance":
            if force or at_end:
                searched = True
                transitioned = self._search(Intent.idle(), "dance", None, force=True)
        elif mode == "idle" and self._desired_override is None and (idle := self.idle_clip()) is not None:
            # the paper's fixed stand-still animation: one search on entering idle, among the
            # idle clip's first frames (matched to the pose shown, blended by
            # inertialization), then no searches: the clip plays forward to its end, back
            # to its start, and so on (its joints move a few cm/s, so a turn is not seen).
            # A desired trajectory given (a path's end still ahead) keeps matching instead.
            # With an environment-aware chooser the periodic search goes on, to see the
            # obstacles: near one, its answer is played (the character steps aside) until
            # a periodic search finds nothing near; then the idle clip again.
            if force:
                self._idle_evading = False
            elif self.chooser is not None and self._since_search >= self.s.search_interval - 1e-9:
                searched = True
                transitioned = self._search(Intent.idle(), self.s.locomotion_tags, None, force=False,
                                            only_near_obstacles=True)
                self._idle_evading = bool(getattr(self.chooser, "near", False))
            slack = dt * self.db.fps + 1.0  # a step may overshoot the clip's ends before it turns
            fp = self.frame_pos
            in_clip = idle.start - slack <= fp <= idle.stop - 1 + slack
            # (off the clip while stepping aside, the evasion plays on)
            if force or not (in_clip or self._idle_evading):
                searched = True
                transitioned = self._search(Intent.idle(), self._idle_tags, None, force=True)
            elif in_clip and self.play_rate > 0 and fp >= idle.stop - 1:
                self.play_rate = -1.0
            elif in_clip and self.play_rate < 0 and fp <= idle.start:
                self.play_rate = 1.0
        elif mode == "idle" and self._desired_override is None:
            # no standing stretch in the data: hold a pose (the stillest match on entering
            # idle, not played on: a walking frame played on would walk away at its speed)
            if force:
                searched = True
                transitioned = self._search(Intent.idle(), self.s.locomotion_tags, None, force=True)
            self.play_rate = 0.0
        else:
            # tolerance: six steps of 1/60 s sum to 0.09999... < 0.1, which would search every 7th frame
            due = self._since_search >= self.s.search_interval - 1e-9
            if force or due or sharp or at_end:
                tags = "creep" if mode == "creep" else self.s.locomotion_tags
                vert = self.vtargets.creep if mode == "creep" else None
                searched = True
                transitioned = self._search(intent, tags, vert, force=force or at_end, defer=defer)
        self._last_intent = intent
        return searched, transitioned

    def _result(self, searched: bool, transitioned: bool, pose: tuple) -> FrameResult:
        """The :class:`FrameResult` of this frame, ``pose`` as :meth:`_pose` returns it (copied)."""
        rot, pos, contacts = pose
        return FrameResult(rot.copy(), pos.copy(), self.frame, self.mode, searched, transitioned, self.last_desired,
                           contacts.copy(), self.last_costs if searched else {})

    def _changed_sharply(self, intent: Intent, last: Intent) -> bool:
        """``intent.changed_sharply(last, settings.sharp_turn_deg)``; for two plain intents
        with no actions, the compiled stage's test (:func:`~motionmatch.runtime._batch_kernels.
        changed_sharply`: the same numbers, on their goals)."""
        if type(intent) is not Intent or type(last) is not Intent or intent.actions or last.actions:
            return intent.changed_sharply(last, self.s.sharp_turn_deg)
        return bool(BK.changed_sharply(np.array(intent_goal_tuple(intent)), GAIT_INDEX[intent.gait],
                                       np.array(intent_goal_tuple(last)), GAIT_INDEX[last.gait], self.s.sharp_turn_deg))

    # ------------------------------------------------------- per-frame stages
    def _playback(self, dt: float) -> tuple[bool, float, float]:
        """Advance playback by ``dt`` seconds and move the character by the clip's root
        motion (the batch's compiled stage on this row). Returns whether the clip's end was
        reached, and the root motion's planar speed (m/s) and turning rate (rad/s) over
        this step (0 when ``dt == 0``)."""
        self._dt1[0] = dt
        self._batch.playback(self._rows1, self._dt1, self._end1, self._speed1, self._turn1)
        return bool(self._end1[0]), float(self._speed1[0]), float(self._turn1[0])

    def _adjust_root(self, dt: float, speed: float, turn_rate: float) -> None:
        """Pull the character root toward the simulated root (and keep the simulated root
        near the character), so the character follows the input a little faster than its
        clips turn and accelerate. The pull is limited to ``adjust_max_ratio`` times the
        clip's own speed and turn rate plus a small floor, so root motion stays dominant;
        foot locking absorbs the difference at the feet."""
        sim = self.predictor.state
        s = self.s
        sx, _, sz = sim.position.tolist()
        x, y, z = self.root_pos.tolist()
        x, z, self.root_yaw = BK.adjust_root(x, z, self.root_yaw, sx, sz, sim.yaw, dt, speed, turn_rate,
                                             s.adjust_halflife, s.adjust_max_ratio, s.adjust_min_speed)
        self.root_pos = np.array([x, y + 0.0, z])
        # Keep the simulation from running away from the character.
        ox, oz = sx - x, sz - z
        dist = math.hypot(ox, oz)
        if dist > s.sim_max_distance:
            f = s.sim_max_distance / dist
            self.predictor.state = sim.moved_to(np.array([x + ox * f, y + 0.0, z + oz * f]))

    def _advance_sim(self, dt: float, intent: Intent) -> None:
        """Step the simulated root (the desired trajectory's origin) toward ``intent``."""
        p = self.predictor
        if p.batched(intent):
            p.advance_row(dt, intent)  # the batch's compiled stage; the RootState is built when read
        else:
            p.advance(dt, intent)

    def _pose(self, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This frame's pose: the database pose at :attr:`frame_pos` plus the
        inertialization offsets, feet locked (the batch's compiled stage on this row).

        Returns rotations ``[J, 4]`` and translations ``[J, 3]`` (joint 0 the character
        root in the world, the others local) and the feet locked ``[K]``: views of the
        batch's output row, valid until its next frame."""
        self._advance_offsets(dt)
        self._dt1[0] = dt
        self._batch.pose(self._rows1, self._dt1)
        return self._output()

    def _output(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch's output row: pose ``[J, 4]``, ``[J, 3]`` and locked feet ``[K]`` (views)."""
        st, r = self._batch.state, self._row
        return st.out_rot[r], st.out_pos[r], st.out_contacts[r]

    def _advance_offsets(self, dt: float) -> None:
        """Spring inertialization: its offsets advanced by ``dt`` (in numpy, before the pose
        stage; quintic offsets are evaluated in the pose stage itself)."""
        if self.inert.method == "spring":
            self.inert.update(dt)
