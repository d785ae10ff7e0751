"""Path following: a character follows a drawn, timed path with LHMM and revised queries.

:class:`PathFollower` drives one :class:`~motionmatch.runtime.controller.Controller`:
every frame it finds the desired position on the path from the character's root, makes
the revised future query (:class:`~motionmatch.control.revision.QueryReviser`) into the
desired trajectory the controller matches, moves the controller's simulated root at the
path's (speed-limited) velocity, and asks for an immediate match when the character
passes a sharp corner. Matching happens every ``interval`` seconds (the paper: 1/6 s)
through a :class:`~motionmatch.runtime.lhmm.LongHorizonMatcher`, whose deeper levels ask
a :class:`PathPlanner` for the path query seen from where each candidate would take the
character.

Control modes (paper Section VII):
    ``"local"``: the path is moved to start at the character.
    ``"global"``: the path stays where it was drawn; a straight approach from the character
    to the path's start, at the path's initial speed, is joined to it first.

Several characters: :func:`run_followers` steps a list of followers together.

A run ends when the desired position has reached the path's end (the last ``end_radius``
metres of path) with the character within ``end_radius`` of the end point (then ``settle_time`` more seconds
are simulated), or at ``time_limit``. The character *completed* the path when it reached
the end so and its root passed within ``end_radius`` of at least ``min_coverage`` of the
path's samples on the way (a desired position that jumps to the end of a path which ends
where it starts, as the nearest-point ablation does, does not complete it).
``mean_distance_m`` is the paper's measure: for every frame up to the end (all frames if
the end was not reached), the distance from the character's root on the ground to the
nearest point of the input path (the polyline of the events as given, moved with the
path, including the approach in global mode), averaged.

The character's root follows its clips' root motion only (``adjust_halflife=0``), as in
the paper; pass ``FollowSettings(controller=ControllerSettings(adjust_halflife=0.2))`` to
let the controller pull it toward the simulated root, which tracks the path.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from motionmatch.anim import Motion, quat
from motionmatch.control.direction_net import FacingLog
from motionmatch.control.intent import Intent
from motionmatch.control.path import TimedPath
from motionmatch.control.revision import QueryReviser, RevisionSettings, RevisionState, fill_queries
from motionmatch.control.trajectory import PredictedTrajectory, yaw_rotation
from motionmatch.database import MotionDatabase
from motionmatch.environment.scene import Scene
from motionmatch.geometry.polyline import distance_to_path
from motionmatch.runtime.controller import ControllerSettings, FrameResult
from motionmatch.runtime.environment_matching import FOLLOW_CONTROLS, Controls, EnvironmentMatcher, EnvironmentSettings
from motionmatch.runtime.ground import first_ledge
from motionmatch.runtime.inputs import InputSource, Want
from motionmatch.runtime.lhmm import LongHorizonMatcher
from motionmatch.runtime.modes import vertical_columns
from motionmatch.runtime.node_search import PenalizedNodeSearch
from motionmatch.runtime.recent import RecentRows
from motionmatch.runtime.world import World

__all__ = [
    "FollowRecord",
    "FollowSettings",
    "PathFollower",
    "PathPlanner",
    "default_brake_accel",
    "default_turn_accel",
    "default_v_max",
    "follow_controller_settings",
    "follow_path",
    "run_followers",
]

MODES = ("local", "global")
#: what DirectionNet reads as its past facings (FollowSettings.net_feedback)
NET_FEEDBACK = ("character", "plan")

#: frames of a follower's run kept in full for its record (5 minutes at 60 Hz, at most 28 MB);
#: older frames count in the record's totals only (see :class:`FollowRecord`)
FOLLOW_KEEP_FRAMES = 18_000


#: a path is cut this much (m) before where the ground stage would stop a keyboard's
#: character at a ledge: a follower plays its clips' root motion and overshoots its stop
LEDGE_MARGIN_M = 0.5


def default_v_max(db: MotionDatabase, tags: str | None = "!dance & !creep & !jump", percentile: float = 95.0) -> float:
    """A speed limit (m/s) from the database: the ``percentile`` of the root's average
    speed over the trajectory horizon (distance to the furthest future position / its
    time) over the searchable frames that ``tags`` admits (all valid frames if none)."""
    try:
        m = db.mask(tags, strict=False)  # (a tag the data lacks: no clip has it)
    except Exception:
        m = db.valid.copy()
    if m.sum() < 30:
        m = db.valid.copy()
    term = next((t for t in db.schema.terms if t.kind == "trajectory_position"), None)
    if term is None:
        sp = db.root_speeds()[m]
    else:
        sl = db.schema.slice(term.name)
        step = 3 if term.vertical else 2
        last = sl.start + step * (len(term.offsets) - 1)
        x = db.raw_features[m, last].astype(np.float64)
        z = db.raw_features[m, last + step - 1].astype(np.float64)
        sp = np.hypot(x, z) / max(term.offsets)
    return float(np.percentile(sp, percentile))


def _root_accelerations(db: MotionDatabase, tags: str | None, window: float, min_speed: float):
    """The root's sideways ``|v x a| / |v|`` and forward ``v . a / |v|`` accelerations
    (m/s^2; velocity and acceleration by central differences over ``window`` seconds
    either side, within one clip) over the frames ``tags`` admits that move at
    ``min_speed`` m/s or more; ``None`` when fewer than 30 frames move so."""
    try:
        m = db.mask(tags, strict=False)  # (a tag the data lacks: no clip has it)
    except Exception:
        m = db.valid.copy()
    h = max(1, round(window * db.fps))
    p = db.translations[:, 0][:, [0, 2]].astype(np.float64)
    i = np.arange(h, len(p) - h)
    same = db.frame_clip[i - h] == db.frame_clip[i + h]
    v = (p[i + h] - p[i - h]) * (db.fps / (2 * h))
    a = (p[i + h] - 2 * p[i] + p[i - h]) * (db.fps / h) ** 2
    sp = np.maximum(np.hypot(v[:, 0], v[:, 1]), 1e-9)
    lat = np.abs(v[:, 0] * a[:, 1] - v[:, 1] * a[:, 0]) / sp
    lon = (v[:, 0] * a[:, 0] + v[:, 1] * a[:, 1]) / sp
    ok = same & m[i] & (sp >= min_speed)
    if ok.sum() < 30:
        ok = same & (sp >= min_speed)
    if ok.sum() < 30:
        return None
    return lat[ok], lon[ok]


#: m/s^2: below this, a database's turning (or braking) says nothing about a limit (its
#: moving frames go straight at constant speed): the defaults' fallbacks apply
MIN_TURN_ACCEL = 0.1


def default_turn_accel(db: MotionDatabase, tags: str | None = "!dance & !creep & !jump", percentile: float = 90.0,
                       window: float = 0.1, min_speed: float = 0.5) -> float:
    """A sideways-acceleration limit (m/s^2) from the database: the ``percentile`` of the
    root's lateral acceleration ``|v x a| / |v|`` (velocity and acceleration by central
    differences over ``window`` seconds either side) over the frames ``tags`` admits
    that move at ``min_speed`` m/s or more: how sharply the people in the data turn at
    speed, often enough for a search to find it (the 90th percentile: on LAFAN1 1.8
    m/s^2, i.e. a turn of radius 0.4 m at 0.86 m/s, a walk; the data's median speed on
    such turns is 0.63 m/s). The path follower's turn limit
    (:class:`~motionmatch.control.revision.RevisionSettings`)."""
    acc = _root_accelerations(db, tags, window, min_speed)
    value = float(np.percentile(acc[0], percentile)) if acc is not None else 0.0
    if not value >= MIN_TURN_ACCEL:
        return 3.0  # too little moving or turning data to say (e.g. only straight walks): a jogger's turn
    return value


def default_brake_accel(db: MotionDatabase, tags: str | None = "!dance & !creep & !jump", percentile: float = 90.0,
                        window: float = 0.1, min_speed: float = 0.5) -> float:
    """A braking limit (m/s^2) from the database: the ``percentile`` of the root's
    deceleration along its travel (``-v . a / |v|``, as :func:`default_turn_accel`
    measures) over the moving frames ``tags`` admits: how hard the people in the data
    slow down, often enough for a search to find it. The path follower slows down this
    gently before a turn tighter than its turn limit allows at speed."""
    acc = _root_accelerations(db, tags, window, min_speed)
    value = float(np.percentile(-acc[1], percentile)) if acc is not None else 0.0
    if not value >= MIN_TURN_ACCEL:
        return 2.0  # too little moving or slowing data to say
    return value


@dataclass(frozen=True)
class FollowSettings:
    """Knobs of :class:`PathFollower`.

    Attributes:
        mode: ``"local"`` or ``"global"``.
        k, levels: LHMM(k, l); ``levels=1`` (and any k) is plain motion matching.
        interval: seconds between matches (the paper: 1/6).
        revision: :class:`~motionmatch.control.revision.RevisionSettings` (its ``v_max``
            ``None``: :func:`default_v_max` of the database; its ``turn_accel`` ``None``:
            :func:`default_turn_accel` of the database; its ``brake_accel`` ``None``:
            :func:`default_brake_accel` of the database).
        revise_every_frame: revise the query (desired position, future points) on every
            frame instead of once per match. Off (the paper, Algorithm 2): the query is
            revised when a match is due, so ``alpha``, ``beta`` and ``c`` count per match;
            between matches only the corner check runs (a new match as soon as the
            character passes a sharp corner's vertex). ``benchmarks/bench_follow.py``
            compares the two.
        hysteresis: see :class:`~motionmatch.runtime.lhmm.LongHorizonMatcher`.
        approach_speed: global mode's approach speed (``None``: the path's initial speed).
        end_radius: the character completes the path within this distance (m) of its end.
        end_arc: the desired position has reached the end within this length (m) of path.
        min_coverage: fraction of the path's samples the root must pass within
            ``end_radius`` of for the path to count as completed.
        settle_time: seconds simulated after completion.
        time_limit: seconds before giving up (``None``: twice the path's duration plus its
            length at ``v_max``, plus 5 s).
        track_gain: 1/s; the simulated root's velocity also pulls it toward the desired
            position at this rate (0: the path velocity only).
        tags: tag query of the frames to match.
        controller: :class:`ControllerSettings` (``search_interval`` is set to ``interval``;
            default: the defaults with ``adjust_halflife=0``, i.e. pure root motion).
        route_clearance: among obstacles, a path that runs through one is first routed
            around it with this clearance (m) around its bounding circle
            (:meth:`~motionmatch.control.path.TimedPath.routed_around`; distances are then
            measured to the routed path); ``None``: followed as drawn.
        net_feedback: with DirectionNet facing (``revision.facing == "net"``), the past
            facings it reads (its window's past half, and its frame): ``"character"``, the
            facings the character had at the desired positions passed (the paper's past
            trajectory log), or ``"plan"``, its own earlier predictions there (a facing
            plan that runs along the path, undisturbed by how the character tracks it).
            Measured alike (``benchmarks/bench_facing.py``: 0.088 against 0.101 m on the
            five clean paths, 0.097 against 0.094 m on the hand drawings).
        keep_frames: the last frames kept in full for the :class:`FollowRecord` (the
            motion, the per-frame arrays); older frames of a longer run are folded into
            the record's totals (mean and largest distance, coverage, transitions), so a
            follower's memory stays bounded however long it runs.
    """

    mode: str = "local"
    k: int = 3
    levels: int = 3
    interval: float = 1 / 6
    revision: RevisionSettings = field(default_factory=RevisionSettings)
    hysteresis: bool = False
    revise_every_frame: bool = False
    approach_speed: float | None = None
    end_radius: float = 0.5
    end_arc: float = 0.2
    min_coverage: float = 0.9
    settle_time: float = 0.5
    time_limit: float | None = None
    track_gain: float = 2.0
    tags: str | None = None
    controller: ControllerSettings | None = None
    route_clearance: float | None = 0.6
    keep_frames: int = FOLLOW_KEEP_FRAMES
    net_feedback: str = "character"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.net_feedback not in NET_FEEDBACK:
            raise ValueError(f"net_feedback must be one of {NET_FEEDBACK}, got {self.net_feedback!r}")
        if int(self.keep_frames) != self.keep_frames or self.keep_frames < 1:
            raise ValueError(f"keep_frames must be an integer >= 1, got {self.keep_frames!r}")


class PathPlanner:
    """The path query for many character states at once, as database queries: the
    :class:`~motionmatch.runtime.lhmm.Planner` of a :class:`PathFollower` (and what it
    uses for its own top-level query). The revision and the query rows are one compiled
    call each (:mod:`motionmatch.control._revision_kernels`)."""

    def __init__(self, db: MotionDatabase, reviser: QueryReviser, joystick=None):
        self.db = db
        self.reviser = reviser
        self.state = RevisionState.start(1)  # the top-level context, set by the follower
        self.joystick = joystick
        times = db.schema.trajectory_offsets
        layout = []  # per column pair: (is a position, offset, column x, column z)
        for t in db.schema.terms:
            if not t.is_trajectory:
                continue
            sl = db.schema.slice(t.name)
            step = 3 if t.vertical else 2
            for n, o in enumerate(t.offsets):
                layout.append((t.kind == "trajectory_position", times.index(o), sl.start + step * n,
                               sl.start + step * n + step - 1))
        self.layout = np.array(layout, dtype=np.int64).reshape(-1, 4)
        self.vcols = vertical_columns(db)
        self._no_cols = np.zeros(0, dtype=np.int64)
        self._norm = (np.ascontiguousarray(db.mean, dtype=np.float64), np.ascontiguousarray(db.scale, dtype=np.float64),
                      np.ascontiguousarray(db.weights, dtype=np.float64))
        self.n_offsets = len(times)

    # ---------------------------------------------------------------- Planner API
    def start_state(self, controller) -> RevisionState:
        return self.state

    def take(self, state: RevisionState, rows: np.ndarray) -> RevisionState:
        return state.take(rows)

    def queries(self, controller, frames, positions, yaws, state: RevisionState, view: str, step: float):
        st = state.later(step)
        joy = self.joystick(float(st.elapsed[0])) if self.joystick is not None else None
        rev = self.reviser.revise(positions, st, joystick_deg=joy)
        q = np.empty((len(frames), self.db.schema.dims), dtype=np.float32)
        mean, scale, weights = self._norm
        fill_queries(self.db.raw_features, np.asarray(frames, dtype=np.int64), rev.positions, rev.directions,
                     np.ascontiguousarray(positions, dtype=np.float64), np.cos(yaws), np.sin(yaws), self.layout, mean,
                     scale, weights, self.vcols if view == "planar" else self._no_cols, q)
        return q, rev.state


@dataclass
class FollowRecord:
    """One character's path-following run: its last ``F`` frames at ``fps`` in full (the
    whole run unless it was longer than ``FollowSettings.keep_frames``), the
    ``dropped_frames`` before them in totals only.

    Attributes:
        motion: the animation (joint 0 is the character root).
        root: ``[F, 3]`` root positions (ground).
        desired: ``[F, K, 3]`` the revised future positions asked for each frame.
        desired_index: ``[F]`` path sample of the desired position.
        frames, searched, transitioned: ``[F]`` per-frame controller output.
        path: the path followed (moved for local mode, with the approach in global mode).
        completed: whether the character completed the path (see the module doc).
        completion_frame: the frame of the run it reached the end (``-1``: never); row
            ``completion_frame - dropped_frames`` of the arrays.
        coverage: fraction of the path's samples the root passed within ``end_radius`` of
            (over the whole run).
        match_seconds: ``[M]`` wall time of each of the last LHMM calls (at most the
            matcher's ``keep``; :attr:`matches` counts them all).
        knn_calls: total k-NN searches.
        update_seconds: ``[F]`` wall time of each frame (revision + controller update).
        dropped_frames: frames of the run before the arrays' first row.
        dropped_distance_sum, dropped_distance_max: sum and largest of the root's
            distance to the input path (m) over the dropped frames (up to completion).
        dropped_transitions: transitions in the dropped frames.
        matches: LHMM calls of the whole run (``-1``: unknown, ``len(match_seconds)``).
    """

    motion: Motion
    root: np.ndarray
    desired: np.ndarray
    desired_index: np.ndarray
    frames: np.ndarray
    searched: np.ndarray
    transitioned: np.ndarray
    path: TimedPath
    completed: bool
    completion_frame: int
    coverage: float
    match_seconds: np.ndarray
    knn_calls: int
    update_seconds: np.ndarray
    name: str = "follow"
    feet: tuple[int, ...] = ()
    dropped_frames: int = 0
    dropped_distance_sum: float = 0.0
    dropped_distance_max: float = 0.0
    dropped_transitions: int = 0
    matches: int = -1

    @property
    def fps(self) -> float:
        return self.motion.fps

    @property
    def total_frames(self) -> int:
        """Frames of the whole run (dropped and kept)."""
        return self.dropped_frames + len(self.root)

    def distances(self) -> np.ndarray:
        """``[F']`` per-frame distance (m) from the root to the input path, up to completion
        (the kept frames only: :attr:`mean_distance` and :attr:`max_distance` cover the run)."""
        end = self.completion_frame + 1 - self.dropped_frames if self.completion_frame >= 0 else len(self.root)
        return distance_to_path(self.root[:max(end, 0)], self.path.input_points)

    def _dropped_counted(self) -> int:
        """Dropped frames whose distance is in the totals (those up to completion)."""
        if self.completion_frame >= 0:
            return min(self.dropped_frames, self.completion_frame + 1)
        return self.dropped_frames

    @property
    def mean_distance(self) -> float:
        """Mean distance (m) from the root to the input path over the run, up to completion."""
        d = self.distances()
        n = self._dropped_counted() + len(d)
        return float((self.dropped_distance_sum + d.sum()) / n) if n else float("nan")

    @property
    def max_distance(self) -> float:
        """Largest distance (m) from the root to the input path over the run, up to completion."""
        d = self.distances()
        kept = float(d.max()) if len(d) else -np.inf
        return max(kept, self.dropped_distance_max if self._dropped_counted() else -np.inf)


class PathFollower(InputSource):
    """One character following one path with LHMM and revised future queries: the
    :class:`~motionmatch.runtime.inputs.InputSource` of an agent of a
    :class:`~motionmatch.runtime.world.World` (the only path follower: the CLI's, the
    viewer's drawn paths and scenario agents' timed paths).

    Args:
        db: the motion database.
        path: the processed path (:class:`~motionmatch.control.path.TimedPath`).
        settings: :class:`FollowSettings`.
        position, facing: where the character starts (default: the origin) and faces
            (default: along the path's first tangent: in global mode, toward the path).
        facing_net: a trained :class:`~motionmatch.control.direction_net.DirectionNet`
            for ``revision.facing == "net"``.
        name: name of the output motion and of the agent.
        scene: obstacles (static and moving, world coordinates) the character avoids while
            it follows the path: every LHMM node is searched with the obstacle penalties
            (:class:`~motionmatch.runtime.node_search.PenalizedNodeSearch`); ``None`` or an empty
            scene: the path alone. On its terrain the path ends before the first ledge or
            wall (a rise or drop higher than a step, :func:`~motionmatch.runtime.ground.first_ledge`):
            the character stops there (:attr:`ledge_m`).
        environment: the :class:`~motionmatch.runtime.environment_matching.EnvironmentMatcher` of ``db``
            (shared by several followers; built when ``None`` and a scene is given).
        environment_settings: penalty and search settings among obstacles.
        controls: the high-level controls of the search among obstacles (default
            :data:`~motionmatch.runtime.environment_matching.FOLLOW_CONTROLS`: the plain penalised score).
        world: the :class:`~motionmatch.runtime.world.World` to join (several followers
            stepped together, :func:`run_followers`); default a world of its own.
        agent: an agent of ``world`` already there to drive from where it stands (the
            viewer's drawn paths: no pose jump); it keeps its controller settings.

    :meth:`step` advances the follower's world (its only agent, or all of them); the
    agent is :attr:`agent`, its controller :attr:`ctrl`.
    """

    def __init__(self, db: MotionDatabase, path: TimedPath, settings: FollowSettings | None = None, *,
                 position=None, facing=None, facing_net=None, name: str = "follow", scene: Scene | None = None,
                 environment: EnvironmentMatcher | None = None,
                 environment_settings: EnvironmentSettings | None = None, world: World | None = None,
                 agent=None, controls: Controls | None = None):
        self.db = db
        self.s = s = settings or FollowSettings()
        rev = s.revision
        tags = s.tags or (s.controller or ControllerSettings()).locomotion_tags
        if rev.v_max is None:
            rev = replace(rev, v_max=default_v_max(db, tags))
        if rev.turn_accel is None:
            rev = replace(rev, turn_accel=default_turn_accel(db, tags))
        if rev.brake_accel is None:
            rev = replace(rev, brake_accel=default_brake_accel(db, tags))
        self.v_max = float(rev.v_max)
        self.revision = rev
        start = np.zeros(3) if position is None else np.asarray(position, dtype=np.float64)
        if s.mode == "local":
            path = path.starting_at(start)
        else:
            path = path.with_approach(start, s.approach_speed)
        avoid = scene is not None and len(scene) > 0
        if avoid and s.route_clearance is not None and len(scene.static_rows):
            path = path.routed_around(scene.static_rows, s.route_clearance)
        #: metres of path where it ends before a ledge or wall of the scene's terrain (the
        #: character stops there, as a keyboard's does: runtime/ground.py); ``None``: not cut
        self.ledge_m = None
        ledge = first_ledge(path.points, path.arc, scene.terrain) if scene is not None else None
        if ledge is not None:
            end = int(path.index_at_arc(max(float(path.arc[ledge]) - LEDGE_MARGIN_M, 0.0)))
            path = replace(path, points=path.points[:max(end, 1) + 1])
            self.ledge_m = float(path.length)
        if facing is None:
            facing = path.tangents[0]  # global mode: toward the path's start (or along it, when already there)
        self.path = path
        self.offsets = np.asarray(db.schema.trajectory_offsets, dtype=np.float64)
        self.net = facing_net
        # the facings had along the path's last seconds (DirectionNet's past half)
        past_s = facing_net.config.past_s if facing_net is not None else 2.0
        self._facings = FacingLog(keep=(past_s + 1.0) * path.fps)
        if rev.facing == "net" and facing_net is None:
            raise ValueError("facing='net' needs a trained DirectionNet (facing_net=...)")
        self.reviser = QueryReviser(path, self.offsets, rev)
        joy = path.joystick_deg if (rev.facing == "joystick" and path.joystick is not None) else None
        self.planner = PathPlanner(db, self.reviser, joystick=joy)
        if world is None:
            world = World(db, scene if avoid or (scene is not None and scene.terrain is not None) else None,
                          matcher=environment, environment=avoid,
                          agents_as_obstacles=False, stagger=False, record_poses=False)
        self.world = world
        self.node_search = None
        if avoid:
            self.node_search = PenalizedNodeSearch(environment or world.matcher, scene, environment_settings,
                                                   controls=controls or FOLLOW_CONTROLS, clock=lambda: world.time)
        self.matcher = LongHorizonMatcher(s.k, s.levels, s.interval, self.planner, hysteresis=s.hysteresis,
                                          node_search=self.node_search)
        self.state = RevisionState.start(1)
        self._corner = -1
        self.time = 0.0
        self.completion_time: float | None = None
        self.completion_index = -1
        self.done = False
        length_time = path.length / max(self.v_max, 0.1)
        # the time the limits let a character take (slower than drawn through tight turns)
        run_time = max(path.duration, self.reviser.time_to_run(path.last))
        self.time_limit = s.time_limit if s.time_limit is not None else 2 * run_time + length_time + 5.0
        self.name = name
        #: the last frames in full (``settings.keep_frames``); older ones folded into totals
        self._rows = RecentRows(s.keep_frames, block=max(s.keep_frames // 8, 1), on_drop=self._fold)
        self._near = np.zeros(len(self._coverage_samples()), dtype=bool)  # path samples passed (dropped frames)
        self._dropped_distance = [0.0, 0.0]  # sum, max of the dropped frames' distances (up to completion)
        self._dropped_transitions = 0
        self._last_dropped_root: np.ndarray | None = None
        self._last: tuple[PredictedTrajectory, int, float] | None = None
        self._want: Want | None = None  # the query held between matches
        self._i_d = 0
        if agent is None:
            agent = world.add_agent(name, (start[0], start[2]), (facing[0], facing[2]), self, environment=False,
                                    controller=follow_controller_settings(s))
        else:
            agent.source = self
        self.agent = agent
        self.ctrl = agent.ctrl

    # ------------------------------------------------------------------ the input contract
    def chooser(self, agent) -> LongHorizonMatcher:
        return self.matcher

    def intent(self, agent, t: float, dt: float) -> Want:
        """Revise the query at the character's root when a match is due (see
        :meth:`desired`; every frame with ``revise_every_frame``), else hold the last one;
        a new match is due at once on the first step and after a sharp corner."""
        t0 = time.perf_counter()
        first = self._rows.total == 0
        # due when the controller's periodic search runs this step (its interval: the
        # follower's own for the characters it makes; a viewer character keeps its own)
        due = first or self._want is None or self.ctrl.since_search + dt >= self.ctrl.s.search_interval - 1e-9
        if self.s.revise_every_frame or due or self._passed_corner():
            traj, intent, force, i_d = self.desired()
            # the paper's root motion only, unless the follower's settings name a controller of their own
            self._want = Want(intent, traj, force or first, root_motion_only=self.s.controller is None)
            self._i_d = i_d
        elif self._want.search_now:
            self._want = self._want._replace(search_now=False)
        self._last = (self._want.desired, self._i_d, t0)
        return self._want

    def _passed_corner(self) -> bool:
        """Between matches: whether the character has passed the vertex of the sharp corner
        the last query saw (the desired position, searched in the window after the last
        match's, is beyond it); the paper's new query "as soon as the character passes the
        vertex" (Appendix D)."""
        if self._corner < 0:
            return False
        i = int(self.reviser.desired_index(self.ctrl.root_pos[None], self.state)[0])
        return i > self._corner

    def stepped(self, agent, dt: float) -> None:
        """After the world step: the clock, the revision state, completion and the record."""
        if self.done or self._last is None:
            return
        traj, i_d, t0 = self._last
        self.time += dt
        self.state = self.state.later(dt)
        path = self.path
        if self.completion_time is None and self.near_end(i_d):
            if np.hypot(*(self.ctrl.root_pos - path.points[-1])[[0, 2]]) <= self.s.end_radius:
                self.completion_time = self.time
                self.completion_index = self._rows.total
        if self.completion_time is not None and self.time >= self.completion_time + self.s.settle_time:
            self.done = True
        if self.time >= self.time_limit:
            self.done = True
        r = agent.result
        self._rows.append(rotations=r.rotations, translations=r.translations, desired=traj.positions,
                          desired_index=np.int64(i_d), frame=np.int64(r.frame), searched=np.bool_(r.searched),
                          transitioned=np.bool_(r.transitioned), seconds=np.float64(time.perf_counter() - t0))

    # ------------------------------------------------------------------ bounded record
    def _coverage_samples(self) -> np.ndarray:
        """``[S, 3]`` the path samples that coverage counts (about 30 per second of path)."""
        step = max(1, round(self.path.fps / 30))
        return self.path.points[::step]

    def _fold(self, cols: dict) -> None:
        """Fold the oldest frames (``cols``: :class:`RecentRows` columns, ``[B, ...]``) into
        the totals before they are dropped: distances to the input path and path samples
        passed (frames up to completion), transitions."""
        start = self._rows.dropped  # the run's frame number of cols' first row
        roots = cols["translations"][:, 0].copy()
        roots[:, 1] = 0.0
        self._dropped_transitions += int(np.count_nonzero(cols["transitioned"]))
        if self.completion_index >= 0:
            roots = roots[: max(self.completion_index + 1 - start, 0)]
        if not len(roots):
            return
        d = distance_to_path(roots, self.path.input_points)
        self._dropped_distance[0] += float(d.sum())
        self._dropped_distance[1] = max(self._dropped_distance[1], float(d.max()))
        track = roots if self._last_dropped_root is None else np.vstack([self._last_dropped_root[None], roots])
        self._near |= distance_to_path(self._coverage_samples(), track) <= self.s.end_radius
        self._last_dropped_root = roots[-1].copy()

    # ------------------------------------------------------------------ per frame
    def desired(self) -> tuple[PredictedTrajectory, Intent, bool, int]:
        """Revise the query at the character's root now: the desired trajectory (world, at
        the schema's offsets), the intent for the simulated root, whether a new match is
        due (a sharp corner was passed), and the desired position's sample index."""
        ctrl = self.ctrl
        pos = ctrl.root_pos[None]
        if self.net is not None and self.revision.facing == "net":
            i_now = self.reviser.desired_index(pos, self.state)[0]
            yaw = float(ctrl.root_yaw)
            plan = self.reviser.facing_track
            if self.s.net_feedback == "plan" and plan is not None:
                d = plan(np.array([float(i_now)]))[0]  # the facing planned here by the last window
                yaw = math.atan2(d[0], d[2])
            self._facings.record(i_now, yaw)  # the past facings DirectionNet reads
            self.reviser.facing_track = self.net.facing_track(self.path, int(i_now), yaw, self._facings)
        joy = self.path.joystick_deg(self.time) if self.revision.facing == "joystick" else None
        rev = self.reviser.revise(pos, self.state, joystick_deg=joy)
        i_d = int(rev.i_d[0])
        force = False
        if self._corner >= 0 and i_d > self._corner:
            force = True
            self._corner = -1
        if rev.corner[0] >= 0:
            self._corner = int(rev.corner[0])
        self.state = rev.state
        self.planner.state = rev.state
        dirs = rev.directions[0]
        traj = PredictedTrajectory(self.offsets.copy(), rev.positions[0].copy(), rev.velocities[0].copy(), dirs,
                                   yaw_rotation(dirs))
        # the simulated root moves at the path's velocity (speed-limited, slowed for turns
        # as the query is), pulled toward p_d
        path = self.path
        v = path.tangent(float(i_d)) * float(self.reviser.speed_at(float(i_d)))
        limit = self.v_max if self.revision.speed_limit else np.inf
        at_end = self.at_end(i_d)
        if at_end:
            v = np.zeros(3)
        if self.s.track_gain > 0 and not at_end:
            sim = ctrl.predictor.state.position
            pull = (path.points[i_d] - sim) * self.s.track_gain
            pull[1] = 0.0
            v = v + pull
            sp2 = float(np.hypot(v[0], v[2]))
            if sp2 > limit:
                v = v * (limit / sp2)
        speed = float(np.hypot(v[0], v[2]))
        facing = None if self.revision.facing == "tangent" else dirs[0]
        intent = Intent(velocity=v, facing=facing, gait=ctrl.gaits.gait_for_speed(speed))
        return traj, intent, force, i_d

    def near_end(self, i_d: int) -> bool:
        """Whether the desired position is within ``end_radius`` metres of path of the end
        (with the root within ``end_radius`` of the end point, the character has arrived:
        a character standing a few centimetres short of the end, where the path is drawn
        slowing to a stop, need not shuffle the last steps to count)."""
        return bool(self.path.length - self.path.arc[i_d] <= max(self.s.end_arc, self.s.end_radius))

    def at_end(self, i_d: int) -> bool:
        """Whether the desired position has reached the path's end (within ``end_arc`` metres of path)."""
        return bool(self.path.length - self.path.arc[i_d] <= self.s.end_arc)

    def step(self, dt: float) -> FrameResult:
        """Advance the follower's world by ``dt`` seconds; returns this character's frame."""
        self.world.step(dt)
        return self.agent.result

    # ------------------------------------------------------------------ whole runs
    def run(self, fps: float = 60.0, progress: bool = False) -> FollowRecord:
        """Step until done at ``fps``; returns the :class:`FollowRecord`."""
        return run_followers([self], fps=fps, progress=progress)[0]

    def record(self, fps: float) -> FollowRecord:
        """The :class:`FollowRecord` of the frames stepped so far (the last
        ``settings.keep_frames`` in full, the run's totals over all of them)."""
        rows = self._rows
        F = len(rows)
        db = self.db
        J = db.skeleton.num_joints
        if F:
            rots = quat.unroll(rows.column("rotations").astype(np.float64), axis=0)
            trs = rows.column("translations").astype(np.float64)
        else:
            rots, trs = np.empty((0, J, 4)), np.empty((0, J, 3))
        root = trs[:, 0].copy()
        root[:, 1] = 0.0
        fixed = ~db.skeleton.has_position_channels
        trs[:, fixed] = db.skeleton.offsets[fixed]
        motion = Motion(db.skeleton, rots, trs, fps, name=self.name, file_scale=db.file_scale)
        comp = min(self.completion_index, rows.total - 1)
        coverage = self._coverage(root, comp)
        col = (lambda name: rows.column(name).copy()) if F else (lambda name: np.zeros(0))
        return FollowRecord(
            motion=motion, root=root,
            desired=rows.column("desired").copy() if F else np.zeros((0, len(self.offsets), 3)),
            desired_index=col("desired_index").astype(np.int64), frames=col("frame").astype(np.int64),
            searched=col("searched").astype(bool), transitioned=col("transitioned").astype(bool),
            path=self.path, completed=bool(comp >= 0 and coverage >= self.s.min_coverage), completion_frame=comp,
            coverage=coverage,
            match_seconds=np.asarray(self.matcher.seconds, dtype=np.float64), knn_calls=int(self.matcher.knn_calls),
            update_seconds=col("seconds").astype(np.float64), name=self.name, feet=tuple(db.foot_joints),
            dropped_frames=rows.dropped, dropped_distance_sum=self._dropped_distance[0],
            dropped_distance_max=self._dropped_distance[1], dropped_transitions=self._dropped_transitions,
            matches=int(self.matcher.matches),
        )

    def _coverage(self, root: np.ndarray, comp: int) -> float:
        """Fraction of the path's samples the root passed within ``end_radius`` of, up to
        the completion frame ``comp`` (the run's frame number; ``-1``: all frames):
        ``root [F, 3]`` the kept frames, the dropped ones through :meth:`_fold`'s mask."""
        start = self._rows.dropped
        upto = root[: comp + 1 - start] if comp >= 0 else root
        if self._last_dropped_root is not None and (comp < 0 or comp >= start):
            upto = np.vstack([self._last_dropped_root[None], upto])  # the segment across the drop
        near = self._near.copy()
        if len(upto):
            near |= distance_to_path(self._coverage_samples(), upto) <= self.s.end_radius
        return float(near.mean())


def follow_controller_settings(settings: FollowSettings) -> ControllerSettings:
    """The controller settings of a path follower: ``settings.controller`` (default: root
    motion only, ``adjust_halflife=0``) searching every ``interval``, on ``tags``."""
    cs = replace(settings.controller or ControllerSettings(adjust_halflife=0.0), search_interval=settings.interval)
    return replace(cs, locomotion_tags=settings.tags) if settings.tags is not None else cs


def run_followers(followers: Sequence[PathFollower], fps: float = 60.0, progress: bool = False) -> list[FollowRecord]:
    """Step the worlds of several followers (one shared world, or one each) until every
    follower is done; a done follower's character stands and is no longer recorded. The
    first frame is at ``dt = 0``."""
    from tqdm.auto import tqdm

    dt = 1.0 / fps
    worlds = list({id(f.world): f.world for f in followers}.values())
    limit = max(f.time_limit for f in followers) + 1.0
    with tqdm(total=round(limit * fps), desc="following", unit="frame", disable=not progress) as bar:
        while not all(f.done for f in followers):
            for w in worlds:
                if all(f.done for f in followers if f.world is w):
                    continue
                w.step(0.0 if w.frame == 0 else dt)
            bar.update()
    return [f.record(fps) for f in followers]


def follow_path(db: MotionDatabase, path: TimedPath, settings: FollowSettings | None = None, *, fps: float = 60.0,
                **kwargs) -> FollowRecord:
    """Convenience: one :class:`PathFollower` run to the end."""
    return PathFollower(db, path, settings, **kwargs).run(fps=fps)
