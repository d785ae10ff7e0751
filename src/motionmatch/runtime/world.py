"""Environment-aware characters: the penalised search plugged into the controller, and a
world that steps many of them among obstacles (Environment-aware Motion Matching, Sec. 5-6).

* :class:`EnvironmentMatcher` (one per database): the query columns, the body ellipses of
  every frame and the :class:`~motionmatch.search.penalized.PenalizedSearch` over them.
* :class:`EnvironmentChooser`: a :attr:`Controller.chooser <motionmatch.runtime.controller.Controller.chooser>`
  that gathers the obstacles near the character's query trajectory (static, moving ones
  at their predicted positions, other agents' future ellipses, each time-aligned with the
  ellipse slot it is compared with), applies the high-level controls and runs the
  penalised search.
* :class:`Agent` and :class:`World`: characters with their inputs (a timeline script, a
  path to follow, a crowd-steering goal, or nothing), stepped together; searches are
  spread over frames (agent ``i`` searches on frames ``i mod n``).
* :func:`run_scenario`: a :class:`~motionmatch.environment.scenario.Scenario` from start to
  end (its numbers: :func:`motionmatch.metrics.scenario.scenario_report`).

High-level controls (paper Sec. 5.3; the formulas of its Eq. 3-6 are missing from our copy
of the text, so they are read from its prose and checked against the authors' released
implementation; where the two leave room, the choice is said):
Responsiveness ``R`` multiplies the squared-distance weights of the trajectory features
(positions and directions), Continuity ``C`` those of the pose features (Eq. 3, 4).
Evasion ``E`` (Eq. 5) is the smallest factor on the direction weight near obstacles: the
factor moves toward ``max(E, 1 + log10(c / threshold))`` (clamped to 1), ``c`` the clearance
between the character and its nearest obstacle, linearly interpolated in time (rate
``EnvironmentSettings.evasion_rate`` per second, as the paper "linearly interpolates the
direction weight towards a target weight"), and back to 1 at once when no obstacle is near.
The paper measures from "the current position of the character"; a root touching an
obstacle would be a body half inside it, so ``c`` is the distance from the root minus
``EnvironmentSettings.body_radius`` (the authors' code measures from the body ellipse).
Anticipation ``A`` (Eq. 6) scales the environment weight with the target speed ``v``
(m/s): ``W_env = W_env0 * max(A v, floor)``, ``floor = EnvironmentSettings.anticipation_floor``.
The text keeps "a minimum base weight" so that a standing character still evades and gives
no value; we read the base weight as ``W_env0`` itself (floor 1). The authors' code uses
half of it: with 1/2 the standing character of ``scenarios/cubes-approach.json`` is hit
more than 2% of the time (4.5% measured) and the walker of ``scenarios/car.json`` touches
the car more than half as often as plain motion matching.
``A = 0`` leaves ``W_env0 * floor`` at every speed.

Moving obstacles are proxies where they are now (compared with every ellipse) plus, per
ellipse, "additional proxies" where they are predicted at that ellipse's time
(:meth:`motionmatch.environment.scene.Scene.query`, paper Sec. 6.1.2).

The controller is run with root motion only (``adjust_halflife = 0``): the trajectory
comes from the database, so body and root motion stay consistent (paper Sec. 5.1).
"""

from __future__ import annotations

import functools
import gc
import math
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.control.trajectory import PredictedTrajectory
from motionmatch.database import MotionDatabase
from motionmatch.environment.body import (
    body_obstacle_rows,
    database_ellipses,
    ellipse_slots,
    frame_ellipses,
    world_ellipses,
)
from motionmatch.environment.scene import Scene
from motionmatch.geometry.grid import build_grid, grid_query
from motionmatch.geometry.shapes import ROW
from motionmatch.runtime.batch import ControllerBatch, intent_goals
from motionmatch.runtime.controller import Controller, ControllerSettings, FrameResult
from motionmatch.runtime.inputs import IDLE, IdleInput, InputSource, ScriptInput, Want
from motionmatch.runtime.modes import vertical_columns
from motionmatch.runtime.recent import RecentRows
from motionmatch.search.penalized import (
    ChoiceJob,
    PenalizedSearch,
    PenaltyParams,
    SearchBuffers,
    SearchOptions,
    SearchResult,
    chooser_view,
    control_weights,
    gather_static,
    gather_with_agents,
    prepare_obstacles,
    prepare_obstacles_into,
    prepare_static,
    trajectory_points,
)

__all__ = ["Agent", "Controls", "EnvironmentChooser", "EnvironmentMatcher", "EnvironmentSettings",
           "PenalizedNodeSearch", "World", "WorldRecord", "anticipation_weight", "environment_controller_settings",
           "evasion_factor", "run_scenario"]


#: cell size (m) of the grid over the agents' future body ellipses that searches query
AGENT_CELL = 2.0


@dataclass(frozen=True)
class Controls:
    """High-level controls of one character (see the module docstring; the paper's
    Sec. 5.3). What a user sets per character or per scene.

    Attributes:
        responsiveness: R, multiplies the trajectory features' weights. Default 2 (ours:
            trajectory twice as important as the database's own group weights).
        continuity: C, multiplies the pose features' weights. Default 0.5 (ours: with
            ``R = C = 1`` a character tends to stand still in front of an obstacle rather
            than change gait; measured on ``scenarios/dense-obstacles.json``).
        evasion: E in [0, 1], the smallest factor on the direction weights near obstacles
            (1: off). Default 0.1 (the paper's value is missing from our copy; the
            authors' released scenes use 0.01 and 0.2; with 0.01 the walker of
            ``scenarios/car.json`` touches the car more than half as often as plain
            motion matching).
        anticipation: A (s/m), the environment weight's growth with the target speed:
            ``W_env = W_env0 * max(A v, 1)``. Default 1 (ours: the forward key's 0.85 m/s
            keeps the base weight, a sprint at 3 m/s triples it); with 2 (the authors'
            released value, on their own weight scale) the walker among the cones of
            ``scenarios/zigzag-cones.json`` slows down more (it did not get through them
            in 20 s).
    """

    responsiveness: float = 2.0
    continuity: float = 0.5
    evasion: float = 0.1
    anticipation: float = 1.0

    def with_(self, **changes) -> Controls:
        return replace(self, **changes)


@dataclass(frozen=True)
class EnvironmentSettings:
    """Environment-aware search settings shared by a world's characters.

    Attributes:
        penalty: obstacle penalties (threshold, exponent, weights, margins).
        search: search method and optimisations.
        controls: default high-level controls.
        reach: pre-selection slack (m) beyond the threshold: about half an arm span. An
            obstacle is considered when its shape comes within ``threshold + reach`` of the
            character or one of its query trajectory points.
        body_radius: subtracted from the root's distance to the nearest obstacle to give
            the clearance used by Evasion (m).
        evasion_rate: how fast (1/s) Evasion's factor moves toward its target near
            obstacles: each search it closes ``1 - exp(-rate * dt)`` of the gap, ``dt`` the
            time since the character's previous search (the authors' per-frame lerp by
            ``10 dt``).
        anticipation_floor: the smallest multiple of ``penalty.env_weight`` Anticipation
            leaves (the paper's "minimum base weight": a standing character still evades).
        enabled: ``False``: plain motion matching (the environment is ignored).
    """

    penalty: PenaltyParams = field(default_factory=PenaltyParams)
    search: SearchOptions = field(default_factory=SearchOptions)
    controls: Controls = field(default_factory=Controls)
    reach: float = 0.9
    body_radius: float = 0.25
    evasion_rate: float = 10.0
    anticipation_floor: float = 1.0
    enabled: bool = True

    @classmethod
    def from_dicts(cls, penalty: dict | None = None, search: dict | None = None, controls: dict | None = None,
                   **kw) -> EnvironmentSettings:
        """From plain dicts (scenario files): unknown keys raise ``ValueError``."""
        def build(kind, d):
            d = dict(d or {})
            names = {f.name for f in fields(kind)}
            bad = sorted(set(d) - names)
            if bad:
                raise ValueError(f"unknown {kind.__name__} field(s) {bad}; known: {sorted(names)}")
            if "slot_weights" in d:
                d["slot_weights"] = tuple(d["slot_weights"])
            return kind(**d)

        return cls(penalty=build(PenaltyParams, penalty), search=build(SearchOptions, search),
                   controls=build(Controls, controls), **kw)


def evasion_factor(controls: Controls, settings: EnvironmentSettings, nearest: float) -> float:
    """Evasion's target factor on the direction weights (Eq. 5, see the module docstring)
    for a character whose root is ``nearest`` metres from its nearest obstacle (``inf``:
    none near): ``max(E, 1 + log10(c / threshold))`` clamped to ``[E, 1]``, ``c`` the
    clearance ``nearest - body_radius``; 1 with nothing near or ``E >= 1``."""
    if nearest == math.inf or controls.evasion >= 1.0:
        return 1.0
    c = nearest - settings.body_radius
    t = settings.penalty.threshold
    if c >= t:
        return 1.0
    if c <= t * 1e-6:
        return float(controls.evasion)
    return min(1.0, max(float(controls.evasion), 1.0 + math.log10(c / t)))


def anticipation_weight(controls: Controls, settings: EnvironmentSettings, target_speed: float) -> float:
    """The environment weight W_env for a character whose input asks for ``target_speed``
    (m/s): ``W_env0 * max(A v, anticipation_floor)`` (Eq. 6, see the module docstring)."""
    scale = max(float(controls.anticipation) * float(target_speed), settings.anticipation_floor)
    return float(settings.penalty.env_weight) * scale


def environment_controller_settings(**changes) -> ControllerSettings:
    """Controller settings for environment-aware characters: searches every 10 frames at
    60 Hz (the paper's), root motion only (no pull toward the simulated root)."""
    base = {"search_interval": 10 / 60, "adjust_halflife": 0.0}
    base.update(changes)
    return ControllerSettings(**base)


class EnvironmentMatcher:
    """Everything the penalised search needs from a database (build once, share).

    Args:
        db: the database (with an ``ellipse`` environment term, or any: ellipses are then
            computed from its poses).
        heights: use height features (``None``: if the database stores them).
    """

    def __init__(self, db: MotionDatabase, heights: bool | None = None):
        self.db = db
        schema = db.schema
        self.cols = schema.query_columns()
        feats = db.features[:, self.cols]
        vcols = vertical_columns(db)
        self.vcols = vcols
        self.ellipses = database_ellipses(db, heights)
        self.slots = ellipse_slots(db)
        self.search = PenalizedSearch(feats, db.valid, self.ellipses, clip_starts=db.clip_starts,
                                      clip_stops=db.clip_stops)
        pos = np.zeros(len(self.cols), dtype=bool)
        direc = np.zeros(len(self.cols), dtype=bool)
        for t in schema.terms:
            if t.is_environment:
                continue
            sl = schema.slice(t.name)
            idx = np.searchsorted(self.cols, np.arange(sl.start, sl.stop))
            if t.kind == "trajectory_position":
                pos[idx] = True
            elif t.kind == "trajectory_direction":
                direc[idx] = True
        pose = ~(pos | direc)
        vertical = np.zeros(len(self.cols), dtype=bool)  # the planar view leaves these out
        vertical[np.searchsorted(self.cols, vcols)] = True
        #: per feature view, the masks of the search columns' weights (:meth:`weights`):
        #: left out by the view, pose, trajectory position, trajectory direction
        self.view_masks = {"planar": (vertical, pose, pos, direc), "full": (np.zeros_like(vertical), pose, pos, direc)}
        self._leaves_out = {view: bool(masks[0].any()) for view, masks in self.view_masks.items()}
        K = self.ellipses.shape[1]
        if len(self.slots) != K:
            raise ValueError(f"{K} ellipse slots but offsets {self.slots}")
        self.planar_zero = np.zeros(db.features.shape[1], dtype=bool)  # the planar view's zeroed columns
        self.planar_zero[vcols] = True
        self.no_zero = np.zeros(db.features.shape[1], dtype=bool)
        self._views: tuple = (None, {})  # (db.features, chooser views built for it): see search_view

    def search_view(self, view: str) -> tuple:
        """The :func:`~motionmatch.search.penalized.chooser_view` of a controller's feature
        view (``"planar"``: vertical columns taken as 0, else all), built once per
        ``db.features`` array."""
        feats, views = self._views
        if feats is not self.db.features:
            feats = self.db.features
            views = {"planar": chooser_view(self.cols, self.view_masks["planar"], self.planar_zero, feats),
                     "full": chooser_view(self.cols, self.view_masks["full"], self.no_zero, feats)}
            self._views = (feats, views)
        return views["planar" if view == "planar" else "full"]

    def weights(self, controls: Controls, evasion_factor: float = 1.0, view: str = "planar") -> np.ndarray | None:
        """Per-dimension squared-distance multipliers ``[len(cols)]`` of the search columns
        for a feature ``view`` (``"planar"``: vertical columns weighted 0) and ``controls``
        (``None``: all 1)."""
        c = controls
        if c.responsiveness == 1.0 and c.continuity == 1.0 and evasion_factor == 1.0 and not self._leaves_out[view]:
            return None
        return control_weights(*self.view_masks[view], float(c.continuity), float(c.responsiveness),
                               float(evasion_factor))

    def view_row(self, frame: int, view: str) -> np.ndarray:
        """Row ``frame`` of the controller's feature view (``"planar"``: vertical columns
        zeroed), as the controller measures the frame playing now."""
        row = self.db.features[frame].astype(np.float64)
        if view == "planar" and self.vcols.size:
            row[self.vcols] = 0.0
        return row

    @functools.cached_property
    def played_ellipses(self) -> np.ndarray:
        """``[N, 8]`` body ellipse of every database frame in its own character frame, as
        played (:func:`~motionmatch.environment.body.frame_ellipses`; computed on first use)."""
        return frame_ellipses(self.db)

    def world_ellipses(self, frame: int, root_xz, yaw: float) -> np.ndarray:
        """``[K, 8]`` world ellipses of database ``frame`` played by a character at ``root_xz``, ``yaw``."""
        return world_ellipses(self.ellipses[frame], root_xz, yaw)


#: Controls of a path follower among obstacles: the paper's plain penalised score (feature
#: distance + obstacle penalty), with no re-weighting, so that it differs from following
#: the path blind only by the obstacles.
FOLLOW_CONTROLS = Controls(responsiveness=1.0, continuity=1.0, evasion=1.0, anticipation=0.0)


class PenalizedNodeSearch:
    """Long-horizon matching's nodes searched with obstacle penalties (a
    :class:`~motionmatch.runtime.lhmm.NodeSearch`): LHMM(k, l) plans ahead *and* avoids.

    A node's character stands at its own root, ``ahead`` seconds after now: the obstacles
    that could touch one of its frames' future body ellipses (static ones near its root,
    moving ones at their positions predicted for that time plus each ellipse's offset) are
    moved into its frame, and its ``k`` best frames by penalised score (weighted feature
    distance + obstacle penalty) are found by ``k`` penalised searches, each excluding the
    frames found before (the method of ``settings.search``; ``"linear"`` is exact). A node
    with no obstacle within reach is searched by plain exact k-NN on the same features, so
    its costs compare with the penalised ones.

    Args:
        matcher: the database's :class:`EnvironmentMatcher`.
        scene: the obstacles; clock: ``() -> t`` the world time now (moving obstacles).
        settings: penalty and search settings; controls: the weights of the score
            (default :data:`FOLLOW_CONTROLS`; Evasion as :class:`EnvironmentChooser`
            applies it, from each node's nearest obstacle; no target speed here, so no
            Anticipation).
    """

    def __init__(self, matcher: EnvironmentMatcher, scene: Scene, settings: EnvironmentSettings | None = None, *,
                 controls: Controls = FOLLOW_CONTROLS, clock: Callable[[], float] | None = None):
        self.matcher = matcher
        self.scene = scene
        self.settings = settings or EnvironmentSettings()
        self.controls = controls
        self.clock = clock or (lambda: 0.0)
        s = self.settings
        e = matcher.search.ellipses  # [N, K, 8]: centre, unit axis, semi-axes (character frame)
        extent = float(np.max(np.hypot(e[..., 0], e[..., 1]) + np.maximum(e[..., 4], e[..., 5])))
        #: obstacles farther than this from a node's root cannot touch any of its frames' ellipses
        self.radius = extent + s.penalty.threshold + s.penalty.margin + s.reach
        self.env_weight = s.penalty.env_weight  # no target speed here: Anticipation does not apply
        self.options = s.search if s.enabled else s.search.with_(method="plain")
        self._origin = np.zeros((1, 2))
        self.penalised_nodes = 0
        self.plain_nodes = 0

    def _query(self, queries: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(queries[:, self.matcher.cols], dtype=np.float64)

    def _obstacles(self, position: np.ndarray, yaw: float, t: float) -> tuple[np.ndarray, np.ndarray, float]:
        """``(obstacles [K, M, ROW], counts [K], nearest)`` of a node's character at
        ``position`` facing ``yaw`` at time ``t`` (``nearest``: a lower bound of the
        distance to the nearest, m; inf: none within reach)."""
        m = self.matcher
        xz = np.array([[position[0], position[2]]])
        rows, slot_of = self.scene.query(t, xz, self.radius, m.slots)
        K = len(m.slots)
        if not len(rows):
            return np.zeros((K, 1, ROW)), np.zeros(K, dtype=np.int64), math.inf
        return prepare_obstacles(rows, slot_of, xz[0], yaw, self._origin, self.radius, K)

    def _weights(self, nearest: float) -> np.ndarray | None:
        """The controls' weights for a node whose nearest obstacle is ``nearest`` metres
        away (Evasion as :class:`EnvironmentChooser` applies it)."""
        return self.matcher.weights(self.controls, evasion_factor(self.controls, self.settings, nearest))

    def nearest(self, controller, queries, mask, k, seeds, positions, yaws, ahead):
        ps = self.matcher.search
        q = self._query(np.atleast_2d(queries))
        M = len(q)
        idx = np.full((M, k), -1, dtype=np.int64)
        cost = np.full((M, k), np.inf)
        t = self.clock() + float(ahead)
        mask = np.ascontiguousarray(mask, dtype=bool)
        for m in range(M):
            obs, cnt, nearest = self._obstacles(positions[m], float(yaws[m]), t)
            weights = self._weights(nearest)
            seed = int(seeds[m])
            init = seed if (0 <= seed < ps.n_frames and ps.valid[seed] and mask[seed]) else None
            if not cnt.any():
                self.plain_nodes += 1
                i, d = ps.plain.nearest(q[m], mask=mask, k=k, init_index=init, weights=weights)
                idx[m, :len(i)], cost[m, :len(d)] = i, d
                continue
            self.penalised_nodes += 1
            allowed = mask.copy()
            for j in range(k):
                r = ps.search(q[m], obs, cnt, mask=allowed, init_index=init if j == 0 else None,
                              weights=weights, penalty=self.settings.penalty, env_weight=self.env_weight,
                              options=self.options)
                if r.index < 0 or not allowed[r.index]:
                    break
                idx[m, j], cost[m, j] = r.index, r.score
                allowed[r.index] = False
        return idx, cost

    def cost(self, controller, query, frame):
        q = self._query(np.asarray(query)[None])[0]
        obs, cnt, nearest = self._obstacles(np.asarray(controller.root_pos, dtype=np.float64),
                                            float(controller.root_yaw), self.clock())
        return float(self.matcher.search.score(np.array([frame]), q, obs, cnt, weights=self._weights(nearest),
                                               penalty=self.settings.penalty, env_weight=self.env_weight)[0])


#: searches a :class:`SearchLog` keeps in full (about three minutes of a character searching
#: six times a second); older ones count in its totals only
SEARCH_LOG_KEEP = 1024


class SearchLog:
    """What the searches of one character did, in bounded memory: totals over every search
    and the last ``keep`` (to ``keep + keep // 8``) searches in full.

    Totals: :attr:`count` (searches), :attr:`time_total`, :attr:`cpu_total`,
    :attr:`search_cpu_total` (seconds), :attr:`collisions` (searches whose choice
    collides), :attr:`method_counts` (``{method: searches}``).

    Recent searches, oldest first, as lists (one item per search): :attr:`times` (the
    chooser's wall time, s), :attr:`starts` (when each began: ``time.perf_counter``, s),
    :attr:`cpu_times` (its thread CPU time, s: robust to a busy
    machine), :attr:`search_cpu_times` (thread CPU time of the search call alone: query
    columns, control weights, penalised search, collision fallback, summary; without
    obstacle gathering and Python bookkeeping), :attr:`methods`, :attr:`collides`,
    :attr:`obstacles` (obstacle rows considered), :attr:`frames` (the frame chosen).
    """

    def __init__(self, keep: int | None = None):
        self._recent = RecentRows(SEARCH_LOG_KEEP if keep is None else keep, initial=None,
                                  packed=True)  # fixed memory, allocated at the first search; a search's row in one record
        self._method_code: dict[str, int] = {}  # method name -> its code in the recent rows
        self._method_totals: list[int] = []     # searches per method code
        self.count = 0
        self.time_total = 0.0
        self.cpu_total = 0.0
        self.search_cpu_total = 0.0
        self.collisions = 0

    @property
    def method_counts(self) -> dict[str, int]:
        """``{method: searches}`` over the whole run."""
        return {m: self._method_totals[c] for m, c in self._method_code.items()}

    def add(self, seconds: float, cpu: float, search_cpu: float, method: str, collides: bool, obstacles: int,
            frame: int, start: float = float("nan")) -> None:
        """Log one search (times in seconds; ``start``: when it began, ``time.perf_counter``)."""
        code = self._method_code.get(method)
        if code is None:
            code = self._method_code[method] = len(self._method_totals)
            self._method_totals.append(0)
        self._method_totals[code] += 1
        self.count += 1
        self.time_total += seconds
        self.cpu_total += cpu
        self.search_cpu_total += search_cpu
        self.collisions += bool(collides)
        if self.count > 1:  # (the columns exist: values in their order)
            self._recent.append_values(seconds, start, cpu, search_cpu, code, collides, obstacles, frame)
            return
        self._recent.append(time=np.float64(seconds), start=np.float64(start), cpu=np.float64(cpu),
                            search_cpu=np.float64(search_cpu), method=np.int16(code),
                            collides=np.bool_(collides), obstacles=np.int32(obstacles), frame=np.int32(frame))

    def _recent_list(self, name: str) -> list:
        return self._recent.column(name).tolist() if len(self._recent) else []

    times = property(lambda self: self._recent_list("time"), doc="wall times of the recent searches (s)")
    starts = property(lambda self: self._recent_list("start"), doc="when each began (time.perf_counter, s)")
    cpu_times = property(lambda self: self._recent_list("cpu"), doc="their thread CPU times (s)")
    search_cpu_times = property(lambda self: self._recent_list("search_cpu"),
                                doc="thread CPU times of the search calls alone (s)")
    collides = property(lambda self: self._recent_list("collides"), doc="whether each choice collides")
    obstacles = property(lambda self: self._recent_list("obstacles"), doc="obstacle rows each considered")
    frames = property(lambda self: self._recent_list("frame"), doc="the frame each chose")

    @property
    def methods(self) -> list[str]:
        names = list(self._method_code)  # (codes are given in order of first use)
        return [names[i] for i in self._recent_list("method")]

    @property
    def kept(self) -> int:
        """Searches held in full now."""
        return len(self._recent)


class _ChoiceContext(NamedTuple):
    """What :meth:`EnvironmentChooser.begin` leaves on its job for :meth:`~EnvironmentChooser.end`."""

    ctrl: Controller
    start: float  # time.perf_counter() when the choice began (s)
    wall: float  # wall and thread CPU seconds of begin
    cpu: float
    obstacles: np.ndarray  # [K, M, ROW], the chooser's buffer
    counts: np.ndarray  # [K]
    mask: np.ndarray  # [N] bool
    current: int  # the frame playing
    previous: int | None  # the chooser's previous choice
    env_weight: float
    options: SearchOptions


class EnvironmentChooser:
    """The controller's frame chooser for one environment-aware character.

    Args:
        matcher: the shared :class:`EnvironmentMatcher`.
        settings: :class:`EnvironmentSettings`.
        controls: this character's controls (default: ``settings.controls``).
        scene: the obstacles; ``obstacles_fn(chooser, points, radius) -> (rows, slot_of)``,
            extra world rows (other agents) for the current search: at least those within
            ``radius`` of one of ``points [P, 2]`` (world x, z; the root and the query
            trajectory), in a fixed order (more are filtered out).
        clock: ``() -> t`` the world time (for moving obstacles).

    The per-search glue is kept small (the benchmark times the whole call, and the linear
    and optimised searches share it): buffers are allocated once, the settings are packed
    once (:class:`~motionmatch.search.penalized.SearchBuffers`), and a choice is two
    compiled calls: the obstacles (for a scene of static obstacles, trajectory points, grid
    query and pre-selection in one call: :func:`gather_static`) and the rest
    (:meth:`~motionmatch.search.penalized.PenalizedSearch.choose_into`: query columns,
    control weights, plain distance to the frame playing now, search, collision fallback,
    summary and the score of the frame playing now). The :class:`SearchResult` is built
    only when :attr:`last` is read; :attr:`record` lets a benchmark or a test see every
    search with its arguments.
    """

    #: ``record(q, obs, cnt, kwargs, result)``, when set, is called after every search of
    #: every chooser with the arguments of an equivalent :meth:`PenalizedSearch.search` call
    #: and its result (benchmarks and tests record the searches of a run with it)
    record: Callable | None = None

    def __init__(self, matcher: EnvironmentMatcher, settings: EnvironmentSettings | None = None, *,
                 controls: Controls | None = None, scene: Scene | None = None,
                 obstacles_fn: Callable | None = None, clock: Callable[[], float] | None = None):
        self.matcher = matcher
        self.settings = settings or EnvironmentSettings()
        self.controls = controls or self.settings.controls
        self.scene = scene or Scene()
        self.obstacles_fn = obstacles_fn
        self.clock = clock or (lambda: 0.0)
        #: the speed (m/s) its agent's input asks for, set by the world before the agent decides
        #: (the anticipation weight of its next search)
        self.target_speed = 0.0
        self.previous: int | None = None
        self.log = SearchLog()
        self.last_obstacles: tuple[np.ndarray, np.ndarray] | None = None
        K = len(matcher.slots)
        ps = matcher.search
        self._K = K
        self._buf = np.empty((K, 1, ROW))
        self._key = np.empty(1)
        self._empty_obs = (np.zeros((K, 1, ROW)), np.zeros(K, dtype=np.int64))
        self._cnt = np.zeros(K, dtype=np.int64)
        self._pts_world = np.empty((K + 1, 2))
        self._pts_local = np.empty((K + 1, 2))
        self._buffers = SearchBuffers(ps)
        self._q = np.empty(len(matcher.cols))  # the query's search columns (float64)
        self._w = np.empty(len(matcher.cols))  # the controls' weights
        self._grid: tuple | None = None  # (scene, its Scene.grid_arrays()), on first use
        self._last: tuple[int, str] | None = None
        self._packed_for: tuple | None = None
        #: whether the last search found obstacles within reach
        self.near = False
        #: Evasion's factor on the direction weights at the last search (1: none)
        self.direction_factor = 1.0
        self._evasion_at: float | None = None
        #: (the world's obstacle pool, batch row, its two views) of planned searches (_gather_planned)
        self._pooled: tuple | None = None

    def _packed(self) -> tuple[float, SearchOptions]:
        """Pre-selection radius and search options of the current settings (recomputed only
        when the settings object changes)."""
        s = self.settings
        if self._packed_for is None or self._packed_for[0] is not s:
            opts = s.search if s.enabled else s.search.with_(method="plain")
            self._packed_for = (s, s.penalty.threshold + s.reach + s.penalty.margin, opts)
        return self._packed_for[1:]

    def _evasion(self, ctrl: Controller, target: float) -> float:
        """Evasion's factor now: toward ``target`` at ``settings.evasion_rate`` (closing
        ``1 - exp(-rate dt)`` of the gap since this character's previous search), at once
        back to 1 when nothing is near (the paper's interpolation of the direction weight)."""
        now = float(ctrl.time)
        last, self._evasion_at = self._evasion_at, now
        if target >= 1.0 or last is None:
            self.direction_factor = target
        else:
            keep = math.exp(-self.settings.evasion_rate * max(now - last, 0.0))
            self.direction_factor = target + (self.direction_factor - target) * keep
        return self.direction_factor

    def _empty(self, K: int) -> tuple[np.ndarray, np.ndarray, float]:
        obs, cnt = self._empty_obs
        return obs, cnt, np.inf

    def gather(self, ctrl: Controller) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None]:
        """Obstacles for a search now: ``(obstacles [K, M, ROW], counts [K], nearest, points)``
        (``points [P, 2]``: the pre-selection points in the character frame, ``None`` when
        nothing is near). The arrays are the chooser's buffers, valid until the next search."""
        K = self._K
        radius = self._packed()[0]
        root = ctrl.root_pos
        yaw = float(ctrl.root_yaw)
        traj = ctrl.last_desired
        sc = self.scene
        if traj is not None:
            pos = traj.positions
            P = pos.shape[0] + 1
            if self._pts_world.shape[0] != P:
                self._pts_world = np.empty((P, 2))
                self._pts_local = np.empty((P, 2))
            pts_w, local = self._pts_world, self._pts_local
            if not sc.moving_ids.size:
                if self.obstacles_fn is None:
                    return self._gather_static(root, yaw, pos, radius, pts_w, local)
                if isinstance(self.obstacles_fn, _OtherAgents):
                    return self._gather_with_agents(self.obstacles_fn, root, yaw, pos, radius, pts_w, local)
            trajectory_points(float(root[0]), float(root[2]), yaw, pos, pts_w, local)
        else:
            pts_w = np.array([[root[0], root[2]]], dtype=np.float64)
            local = np.zeros((1, 2))
        extra = None
        if self.obstacles_fn is not None:
            extra, extra_slots = self.obstacles_fn(self, pts_w, radius)
            if not len(extra):
                extra = None
        if traj is not None and extra is None and not sc.moving_ids.size:
            return self._gather_static(root, yaw, pos, radius, pts_w, local)
        if not sc.moving_ids.size and extra is None:  # static obstacles only: one compiled call
            ids = sc.static_near(pts_w, radius)
            M = len(ids)
            if M == 0:  # nothing anywhere near: the plain accelerated search will run
                return self._empty(K) + (None,)
            self._fit(M)
            nearest = prepare_static(sc.static_rows, ids, float(root[0]), float(root[2]), yaw, local, radius,
                                        self._buf, self._cnt, self._key)
            return self._buf, self._cnt, float(nearest), local
        rows, slot_of = sc.query(self.clock(), pts_w, radius, self.matcher.slots)
        if extra is not None:
            rows = np.concatenate([rows, extra])
            slot_of = np.concatenate([slot_of, extra_slots])
        M = len(rows)
        if M == 0:
            return self._empty(K) + (None,)
        self._fit(M)
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        nearest = prepare_obstacles_into(rows, np.ascontiguousarray(slot_of, dtype=np.int64), float(root[0]),
                                       float(root[2]), yaw, local, radius, self._buf, self._cnt, self._key)
        return self._buf, self._cnt, float(nearest), local

    def _gather_static(self, root, yaw: float, positions, radius: float, pts_w, local) -> tuple:
        """:meth:`gather` among static obstacles only: the trajectory points, the scene's
        grid query and the pre-selection in one compiled call."""
        sc = self.scene
        if self._grid is None or self._grid[0] is not sc:
            self._grid = (sc, sc.grid_arrays())
            self._fit(max(len(sc.static_rows), 1))
        grid = self._grid[1]
        if grid is None:  # no static obstacle
            return self._empty(self._K) + (None,)
        M, nearest = gather_static(*grid, sc.next_tick(), float(root[0]), float(root[2]), yaw, positions, radius,
                                   pts_w, local, self._buf, self._cnt, self._key)
        if M == 0:
            return self._empty(self._K) + (None,)
        return self._buf, self._cnt, nearest, local

    def _gather_with_agents(self, others: _OtherAgents, root, yaw: float, positions, radius: float, pts_w,
                            local) -> tuple:
        """:meth:`gather` among static obstacles and a world's other agents (``others``):
        the trajectory points, both grid queries and the pre-selection in one compiled call
        (:func:`~motionmatch.search.penalized.gather_with_agents`: the rows and their order
        of the general path)."""
        sc = self.scene
        if self._grid is None or self._grid[0] is not sc:
            self._grid = (sc, sc.grid_arrays())
            self._fit(max(len(sc.static_rows), 1))
        grid = self._grid[1] if self._grid[1] is not None else _NO_GRID
        while True:  # (again with larger buffers when they were too small; new visit marks)
            tick = sc.next_tick() if grid is not _NO_GRID else 0
            M, nearest = gather_with_agents(grid, tick, *others.grid(), others.uid, float(root[0]), float(root[2]), yaw,
                                            positions, radius, pts_w, local, self._buf, self._cnt, self._key)
            if M >= 0:
                break
            self._fit(-M)
        if M == 0:
            return self._empty(self._K) + (None,)
        return self._buf, self._cnt, nearest, local

    def _fit(self, M: int) -> None:
        """Grow the obstacle buffers to hold ``M`` rows per slot."""
        if self._buf.shape[1] < M:
            self._buf = np.empty((self._K, 2 * M, ROW))
            self._key = np.empty(2 * M)

    def __call__(self, ctrl: Controller, query: np.ndarray, mask: np.ndarray, view: str):
        job = self.begin(ctrl, query, mask, view)
        job.run()
        return self.end(job)

    def begin(self, ctrl: Controller, query: np.ndarray, mask: np.ndarray, view: str) -> ChoiceJob:
        """A choice made ready (the obstacles gathered, the controls' weights, the kernel's
        arguments): a :class:`~motionmatch.search.penalized.ChoiceJob` to :meth:`~motionmatch.
        search.penalized.ChoiceJob.run` (on any thread), then to give to :meth:`end`. A
        chooser has one choice under way at a time (the job owns its buffers)."""
        t0 = time.perf_counter()
        c0 = time.thread_time()
        if self.settings.enabled:
            obs, cnt, nearest, _ = self.gather(ctrl)
        else:
            obs, cnt, nearest = self._empty(self._K)
        return self._job(ctrl, query, mask, view, obs, cnt, nearest, t0, 0.0, 0.0, c0)

    def _job(self, ctrl: Controller, query: np.ndarray, mask: np.ndarray, view: str, obs: np.ndarray,
             cnt: np.ndarray, nearest: float, t0: float, wall: float, cpu: float, c0: float) -> ChoiceJob:
        """:meth:`begin` once the obstacles are gathered (``obs``, ``cnt``, ``nearest`` as
        :meth:`gather` returns them); ``t0`` when the choice began, ``wall`` and ``cpu``
        seconds spent on it elsewhere before ``c0`` (this thread's CPU clock then)."""
        s = self.settings
        m = self.matcher
        _radius, opts = self._packed()
        self.near = nearest < math.inf
        c = self.controls
        ev = self._evasion(ctrl, evasion_factor(c, s, nearest))
        cur = int(ctrl.frame)
        envw = anticipation_weight(c, s, self.target_speed)
        if mask.dtype != np.bool_ or not mask.flags.c_contiguous:
            mask = np.ascontiguousarray(mask, dtype=bool)
        ps = m.search
        if mask.shape[0] != ps.n_frames:
            raise ValueError(f"mask: expected {ps.n_frames} frames, got {mask.shape}")
        b = self._buffers
        # one compiled call (the job's): the query's search columns and the controls' weights
        # (into the chooser's buffers), the plain distance to the frame playing now, and the
        # search (PenalizedSearch.search_into without its checks: every array is built here,
        # contiguous and of the right type), without building a SearchResult (see last)
        pen = b.penalty(s.penalty)
        prev = self.previous
        job = ps.choice_job(m.search_view(view), query, cur, (float(c.continuity), float(c.responsiveness), float(ev)),
                            self._q, self._w, obs, cnt, mask, prev, pen, envw, opts, b)
        job.context = _ChoiceContext(ctrl, t0, wall + time.perf_counter() - t0, cpu + time.thread_time() - c0, obs, cnt,
                                     mask, cur, prev, envw, opts)
        return job

    def _gathers_with_agents(self) -> bool:
        """Whether :meth:`gather` would take :meth:`_gather_with_agents` for a search with
        a desired trajectory (what :func:`begin_planned` does for many choosers at once)."""
        return self.settings.enabled and not self.scene.moving_ids.size and isinstance(self.obstacles_fn, _OtherAgents)

    def end(self, job: ChoiceJob) -> tuple[np.ndarray, np.ndarray]:
        """The choice of a job from :meth:`begin` that has run: ``([index], [cost])``, as a
        frame chooser returns them (logged)."""
        t1, c1 = time.perf_counter(), time.thread_time()
        ctrl, t0, wall0, cpu0, obs, cnt, mask, cur, prev, envw, opts = job.context  # (a _ChoiceContext)
        job.context = None
        idx, method, cur_plain = self.matcher.search.choice_end(job)
        search_cpu = job.cpu_s + (time.thread_time() - c1)  # (with the plain search, when it ran here)
        self._last = (idx, method)
        self.previous = idx
        self.last_obstacles = (obs, cnt)
        b = self._buffers
        out = b.out
        if EnvironmentChooser.record is not None:
            EnvironmentChooser.record(self._q.copy(), obs, cnt, {"mask": mask, "init_index": cur, "previous": prev,
                                                                 "weights": self._w.copy(),
                                                                 "penalty": self.settings.penalty, "env_weight": envw,
                                                                 "options": opts}, b.result(idx, method))
        # The controller compares the returned cost with ratio * (its plain distance to the
        # frame playing now); shift the cost so that this compares penalised scores:
        # cost' < ratio * plain(cur)  <=>  score(best) < ratio * score(cur).
        ratio = ctrl.s.transition_ratio
        cost = out[0] - ratio * out[2] + ratio * cur_plain
        # times: this thread's before and after the job, and the job's own (wherever it ran)
        wall = wall0 + job.wall_s + (time.perf_counter() - t1)
        cpu = cpu0 + job.cpu_s + (time.thread_time() - c1)
        self.log.add(wall, cpu, search_cpu, method, bool(out[3] > 0.0), sum(cnt.tolist()), idx, t0)
        return np.array([idx], dtype=np.int64), np.array([cost])

    @property
    def last(self) -> SearchResult | None:
        """The last search's :class:`~motionmatch.search.penalized.SearchResult` (built on
        demand from the search buffers; ``None`` before the first search)."""
        if self._last is None:
            return None
        return self._buffers.result(*self._last)


# ---------------------------------------------------------------------------- agents
#: a grid over no rows (the ten arrays of ``gather_with_agents``), and no row indices
_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_GRID = (np.zeros(2, dtype=np.int64), _NO_IDS, 1, 1, 0.0, 0.0, 1.0, np.zeros((0, ROW)), _NO_IDS, _NO_IDS)


@dataclass
class _Peers:
    """A split world's peers (:meth:`World.split`): the places (among everyone the world
    sees, in the order of the world it was split from) of its own agents, ``own_at [A]``,
    and of its peers, ``peer_at [P]``; everyone's uids ``[G]``; the peers' state at the
    start of the next step (:meth:`World.set_peer_state`)."""

    own_at: np.ndarray
    peer_at: np.ndarray
    uids: np.ndarray
    frame: np.ndarray
    root_pos: np.ndarray
    root_yaw: np.ndarray


class _OtherAgents:
    """An :class:`EnvironmentChooser`'s ``obstacles_fn`` for agent ``uid`` of ``world``: the
    other agents' future ellipse rows near the search's points, its own left out (the
    chooser gathers them with the scene's in one compiled call; called, as any
    ``obstacles_fn``, it returns them)."""

    def __init__(self, world: World, uid: int):
        self._world = world
        self.uid = uid

    def grid(self) -> tuple:
        """The world's agent grid for one query (:meth:`World._agent_grid_query`)."""
        return self._world._agent_grid_query()

    def __call__(self, chooser: EnvironmentChooser, points: np.ndarray, radius: float):
        w = self._world
        if w.seen() < 2:
            return np.zeros((0, ROW)), np.zeros(0, dtype=np.int64)
        rows, slots, owner = w.agent_rows()
        ids = w.agents_near(points, radius)
        ids = ids[owner[ids] != self.uid]
        return rows[ids], slots[ids]


YOUNG_OBJECTS_PER_AGENT = 25
"""The youngest generation's collection threshold per agent of a world (:func:`_collect_as_due`):
a step of a 1000-agent door crowd makes about 5 more objects per agent that the collector
tracks than it frees, so the youngest generation of such a world is collected about every
fifth step."""


def _collect_as_due(young: int = 0) -> None:
    """Run the cyclic garbage collector once if the automatic collector would run now: the
    oldest generation whose count passed its threshold (:func:`gc.get_threshold`), as
    CPython picks it (without its extra condition on a full collection: so a full one
    comes every ``threshold1 * threshold2`` collections of the youngest, about every
    hundred steps of a large world). Nothing when automatic collection is off
    (``threshold0 == 0``) or not due.

    ``young``: the youngest generation's threshold is at least this many objects. A world
    passes about what a step of its agents leaves alive (their intents, wants, results),
    so that the youngest generation is collected every few steps, not every step: each
    collection costs about the objects still alive, and most of a step's are gone a step
    later (replaced by the next step's), so this divides the collector's time by about
    the steps between collections."""
    t0, t1, t2 = gc.get_threshold()
    c0, c1, c2 = gc.get_count()
    if t0 <= 0 or c0 <= max(t0, young):
        return
    gc.collect(2 if c2 > t2 else 1 if c1 > t1 else 0)


class Agent:
    """One character of a :class:`World`: a controller, its environment-aware chooser and
    its input (an :class:`~motionmatch.runtime.inputs.InputSource`, replaceable at any step).

    Attributes:
        intent, desired: what the input wanted at the last step.
        result: the controller's last :class:`~motionmatch.runtime.controller.FrameResult`.
        searched: whether the last step searched.
    """

    def __init__(self, name: str, controller: Controller, chooser: EnvironmentChooser | None,
                 source: InputSource, *, start_time: float = 0.0, path: np.ndarray | None = None,
                 goal: np.ndarray | None = None):
        self.name = name
        self.ctrl = controller
        self.chooser = chooser
        self.source = source
        self.start_time = float(start_time)
        self.path = path
        self.goal = goal
        controller.chooser = chooser
        self.uid = -1  # its number in its world (obstacle rows of its body: id -1 - uid)
        self.owed = 0.0  # seconds not yet stepped (a world's level of detail)
        self.started = False
        self.local_time = 0.0  # seconds of input since the agent started (the sum of its steps)
        self.intent = Intent.idle()
        self.desired: PredictedTrajectory | None = None
        self._result: FrameResult | tuple | None = None  # (a batched step's: its fields, built when read)
        self.searched = False

    @property
    def result(self) -> FrameResult | None:
        """The controller's last :class:`~motionmatch.runtime.controller.FrameResult`
        (``None`` before the first step)."""
        r = self._result
        if type(r) is tuple:
            (rot, pos, frames, contacts), k, mode, searched, transitioned, desired, costs = r
            r = self._result = FrameResult(rot[k], pos[k], frames[k], mode, searched, transitioned, desired,
                                           contacts[k], {} if costs is None else costs)
        return r

    @result.setter
    def result(self, r: FrameResult | None) -> None:
        self._result = r

    @property
    def root_xz(self) -> np.ndarray:
        return np.array([self.ctrl.root_pos[0], self.ctrl.root_pos[2]])

    @property
    def yaw(self) -> float:
        return float(self.ctrl.root_yaw)

    def set_controls(self, controls: Controls) -> None:
        """This agent's high-level controls from now on (its environment-aware search)."""
        if self.chooser is not None:
            self.chooser.controls = controls


@dataclass
class WorldRecord:
    """What a world run produced (``A`` agents, ``F`` frames at ``fps``).

    Attributes:
        names: agent names; fps.
        root_positions: ``[A, F, 3]``; root_yaws: ``[A, F]``; frames: ``[A, F]`` database frames.
        searched: ``[A, F]`` bool; desired: ``[A, F, K, 3]`` desired future positions (nan: none).
        rotations / translations: ``[A, F, J, 4]`` / ``[A, F, J, 3]`` local poses (float32) or
            ``None`` when poses were not recorded.
        step_seconds: ``[F]`` wall time of each world step.
        logs: per agent :class:`SearchLog` (``None`` for plain characters without a chooser).
    """

    names: list
    fps: float
    root_positions: np.ndarray
    root_yaws: np.ndarray
    frames: np.ndarray
    searched: np.ndarray
    desired: np.ndarray
    rotations: np.ndarray | None
    translations: np.ndarray | None
    step_seconds: np.ndarray
    logs: list

    def motion(self, agent: int, skeleton, file_scale: float = 1.0):
        """The recorded animation of one agent as a :class:`~motionmatch.anim.Motion`."""
        from motionmatch.anim import Motion, quat

        if self.rotations is None:
            raise ValueError("poses were not recorded (World(record_poses=True))")
        rots = quat.unroll(self.rotations[agent].astype(np.float64), axis=0)
        trs = self.translations[agent].astype(np.float64)
        fixed = ~skeleton.has_position_channels
        trs[:, fixed] = skeleton.offsets[fixed]
        return Motion(skeleton, rots, trs, self.fps, name=self.names[agent], file_scale=file_scale)


class World:
    """Steps many environment-aware characters among obstacles.

    Args:
        db: the database; scene: the obstacles.
        settings: :class:`EnvironmentSettings` (shared); controller: controller settings
            (default :func:`environment_controller_settings`).
        matcher: a shared :class:`EnvironmentMatcher` (built if not given).
        agents_as_obstacles: each character treats the others' future ellipses as obstacles.
        stagger: spread searches over frames (agent ``i`` starts its search timer ``i``
            frames late, modulo the search interval).
        record_poses: keep every agent's local pose each frame (memory: ``A * F * J * 28`` bytes).
        environment: ``False``: no agent searches with obstacle penalties by default (plain
            motion matching, or its input's own chooser) and the matcher is never built.
        batched: step the agents' controllers together (see :meth:`step`); ``False``: one
            by one, each with its own ``update`` (the same numbers; for comparisons).
        threads: threads for a batched step (default: two, or one on a one-core machine):
            with two, the poses are computed in two halves at once, and so are the
            searches' compiled kernels (made ready agent by agent, then run together); see
            :meth:`step`.
    """

    def __init__(self, db: MotionDatabase, scene: Scene | None = None, *,
                 settings: EnvironmentSettings | None = None, controller: ControllerSettings | None = None,
                 matcher: EnvironmentMatcher | None = None, agents_as_obstacles: bool = True,
                 stagger: bool = True, record_poses: bool = True, fps: float = 60.0, environment: bool = True,
                 batched: bool = True, threads: int | None = None):
        self.db = db
        self.batched = bool(batched)
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads or min(2, os.cpu_count() or 1)
        self._pool = None  # a thread pool for the poses (made when first needed)
        #: the steering of its :class:`~motionmatch.runtime.crowd.SteeringInput` agents, all
        #: at once each step (made by the first of them to steer)
        self.steering = None
        self._batch = ControllerBatch(db)  # every agent's controller state, one row each
        self.scene = scene or Scene()
        self.settings = settings or EnvironmentSettings()
        self.controller_settings = controller or environment_controller_settings()
        self._matcher = matcher
        self.environment = bool(environment)
        self.agents: list[Agent] = []
        self.agents_as_obstacles = agents_as_obstacles
        self.stagger = stagger
        self.record_poses = record_poses
        self.fps = float(fps)
        self.time = 0.0
        self.frame = 0
        self._agent_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._agent_grid: tuple | None = None  # over the agent rows: build_grid's arrays, visit marks, ids
        self._grid_tick = 0
        self._gather_capacity = 32  # obstacle rows per slot of a step's planned searches (grown on demand)
        self._obstacles: tuple | None = None  # (see _obstacle_pool)
        self._rows_frame = -1
        self._next_uid = 0
        self._positions: tuple[int, np.ndarray, np.ndarray] | None = None
        self._agent_batch_rows: np.ndarray | None = None  # (see _rows; None when the agents changed)
        self._agent_uids = np.zeros(0, dtype=np.int64)  # (see _uids)
        self._peers: _Peers | None = None  # (agents stepped by other worlds: split)

    @property
    def matcher(self) -> EnvironmentMatcher:
        """The database's :class:`EnvironmentMatcher` (built on first use)."""
        if self._matcher is None:
            self._matcher = EnvironmentMatcher(self.db)
        return self._matcher

    # ------------------------------------------------------------------ agents
    def add_agent(self, name: str, start, facing=(0.0, 1.0), source: InputSource | None = None, *,
                  controls: Controls | None = None, environment: bool = True, start_time: float = 0.0,
                  path: np.ndarray | None = None, goal=None, controller: ControllerSettings | None = None) -> Agent:
        """A new agent at ``start [x, z]`` (m) facing ``facing [x, z]``, driven by ``source``
        (default: standing) from ``start_time`` (world seconds) on. ``environment=False``: it
        ignores the obstacles (plain matching) but is still one for the others; ``path`` /
        ``goal``: what reports measure it against."""
        cs = controller or self.controller_settings
        f = np.array([facing[0], 0.0, facing[1]], dtype=np.float64)
        f = f / np.linalg.norm(f) if np.hypot(f[0], f[2]) > 1e-9 else np.array([0.0, 0.0, 1.0])
        ctrl = Controller(self.db, cs, position=(start[0], 0.0, start[1]), facing=f, batch=self._batch)
        uid = self._next_uid
        self._next_uid += 1
        chooser = None
        if self.environment:
            settings = self.settings if environment else replace(self.settings, enabled=False)
            chooser = EnvironmentChooser(self.matcher, settings, controls=controls or self.settings.controls,
                                         scene=self.scene, clock=lambda: self.time,
                                         obstacles_fn=self._others_fn(uid) if self.agents_as_obstacles else None)
        agent = Agent(name, ctrl, chooser, source if source is not None else IdleInput(), start_time=start_time,
                      path=None if path is None else np.asarray(path), goal=None if goal is None else np.asarray(goal))
        agent.uid = uid
        self.agents.append(agent)
        self._agent_rows = self._positions = self._agent_batch_rows = None
        return agent

    def remove_agent(self, agent: Agent) -> None:
        """Take ``agent`` out of the world (it is no longer stepped nor an obstacle; its
        controller keeps its state, in a batch of its own)."""
        self.agents.remove(agent)
        agent.ctrl.move_to(ControllerBatch(self.db))
        self._agent_rows = self._positions = self._agent_batch_rows = None

    def set_scene(self, scene: Scene) -> None:
        """Replace the obstacles (every agent's search sees the new scene from now on)."""
        self.scene = scene
        for a in self.agents:
            if a.chooser is not None:
                a.chooser.scene = scene

    def _others_fn(self, uid: int) -> _OtherAgents:
        """The obstacles of agent ``uid``'s searches among the others: their rows near the
        search's points (:meth:`agents_near`), its own left out."""
        return _OtherAgents(self, uid)

    def _agent_grid_query(self) -> tuple:
        """``(grid, tick, owner, slots)``: the grid over :meth:`agent_rows` as the ten
        arrays of :func:`~motionmatch.search.penalized.gather_with_agents` (an empty one
        with fewer than two agents), a new visit mark, and the rows' owners and slots."""
        if self.seen() < 2:
            return _NO_GRID, 0, _NO_IDS, _NO_IDS
        rows, slots, owner = self.agent_rows()
        grid = self._agent_grid
        if grid is None:
            return _NO_GRID, 0, _NO_IDS, _NO_IDS
        self._grid_tick += 1
        start, items, nx, nz, x0, z0, stamp, out = grid
        return (start, items, nx, nz, float(x0), float(z0), AGENT_CELL, rows, stamp, out), self._grid_tick, owner, slots

    def agents_near(self, points: np.ndarray, radius: float) -> np.ndarray:
        """Indices (ascending) into :meth:`agent_rows` of the rows whose shapes come within
        ``radius`` (m, plus 1 um) of one of ``points [P, 2]`` (world x, z), found through a
        uniform grid over the rows (built with them, once per step): a search among many
        agents looks at its neighbours only."""
        rows = self.agent_rows()[0]
        grid = self._agent_grid
        if grid is None:
            return np.zeros(0, dtype=np.int64)
        self._grid_tick += 1
        start, items, nx, nz, x0, z0, stamp, out = grid
        n = grid_query(start, items, nx, nz, x0, z0, AGENT_CELL, np.ascontiguousarray(points, dtype=np.float64),
                       float(radius) + 1e-6, rows, stamp, self._grid_tick, out)
        return np.sort(out[:n])

    def ground_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(positions [G, 2], uids [G])``: the root on the ground (x, z, m) of every agent its
        agents see (its own and its peers, :meth:`split`, in the order of the world they were
        split from) at the start of the current step (computed once per step: what inputs
        see of each other)."""
        if self._positions is None or self._positions[0] != self.frame or len(self._positions[2]) != self.seen():
            _, pos, _, uids = self._everyone()
            self._positions = (self.frame, pos[:, [0, 2]], uids)
        return self._positions[1], self._positions[2]

    def seen(self) -> int:
        """How many agents its agents see: its own and its peers (:meth:`split`)."""
        return len(self.agents) + (0 if self._peers is None else len(self._peers.peer_at))

    def split(self, keep) -> None:
        """Step only the agents at indices ``keep`` of :attr:`agents` from now on; the others
        become its *peers*: agents stepped by another world (in another process, see
        :class:`~motionmatch.runtime.shards.ShardedWorld`) that its agents still see, where
        :meth:`set_peer_state` puts them before each step: in crowd steering, as obstacles,
        and in the searches' stagger (an agent keeps its place in the order of the world it
        was split from). Worlds built alike, split into parts that together hold every
        agent once and given each other's states before every step, step each agent as the
        whole world would, to the last bit."""
        keep = np.unique(np.asarray(keep, dtype=np.int64))
        A = len(self.agents)
        if self._peers is not None:
            raise ValueError("a world is split once")
        if len(keep) and (keep[0] < 0 or keep[-1] >= A):
            raise ValueError(f"split: agent indices 0..{A - 1}, got {keep.tolist()}")
        mine = np.zeros(A, dtype=bool)
        mine[keep] = True
        peers = [a for a, m in zip(self.agents, mine) if not m]
        self._peers = _Peers(np.flatnonzero(mine), np.flatnonzero(~mine),
                             np.array([a.uid for a in self.agents], dtype=np.int64),
                             np.array([a.ctrl.frame for a in peers], dtype=np.int64),
                             np.array([a.ctrl.root_pos for a in peers], dtype=np.float64).reshape(-1, 3),
                             np.array([a.ctrl.root_yaw for a in peers], dtype=np.float64))
        self.agents = [a for a, m in zip(self.agents, mine) if m]
        self._agent_rows = self._positions = self._agent_batch_rows = None

    @property
    def peer_uids(self) -> np.ndarray:
        """``[P]`` the uids of its peers (:meth:`split`), in the order :meth:`set_peer_state` takes them."""
        p = self._peers
        return np.zeros(0, dtype=np.int64) if p is None else p.uids[p.peer_at]

    def set_peer_state(self, frames: np.ndarray, root_pos: np.ndarray, root_yaw: np.ndarray) -> None:
        """Where its peers (:meth:`split`) stand at the start of the next step: their database
        ``frames [P]``, roots ``root_pos [P, 3]`` (m) and yaws ``root_yaw [P]`` (rad), in the
        order of :attr:`peer_uids`."""
        p = self._peers
        if p is None:
            raise ValueError("set_peer_state: the world has no peers (see World.split)")
        P = len(p.peer_at)
        p.frame[:] = np.asarray(frames).reshape(P)
        p.root_pos[:] = np.asarray(root_pos).reshape(P, 3)
        p.root_yaw[:] = np.asarray(root_yaw).reshape(P)
        self._agent_rows = self._positions = None
        self._rows_frame = -1

    def _global_rows(self) -> np.ndarray:
        """``[A]`` each of its agents' place among all it sees (:meth:`split`; ``0..A-1`` without peers)."""
        return np.arange(len(self.agents)) if self._peers is None else self._peers.own_at

    def _everyone(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(frames [G], root_pos [G, 3], root_yaw [G], uids [G])`` of its agents and its
        peers, in the order of the world they were split from (:meth:`split`)."""
        st, rows = self._batch.state, self._rows()
        if self._peers is None:
            return st.frame[rows], st.root_pos[rows], st.root_yaw[rows], self._uids()
        p = self._peers
        G = len(p.uids)
        frames, pos, yaw = np.empty(G, dtype=np.int64), np.empty((G, 3)), np.empty(G)
        frames[p.own_at], pos[p.own_at], yaw[p.own_at] = st.frame[rows], st.root_pos[rows], st.root_yaw[rows]
        frames[p.peer_at], pos[p.peer_at], yaw[p.peer_at] = p.frame, p.root_pos, p.root_yaw
        return frames, pos, yaw, p.uids

    def _rows(self) -> np.ndarray:
        """``[A]`` every agent's row of the world's controller batch (kept until an agent is
        added or removed: a controller keeps its row while it is in the world)."""
        r = self._agent_batch_rows
        if r is None or len(r) != len(self.agents):
            r = self._agent_batch_rows = np.fromiter((a.ctrl._row for a in self.agents), dtype=np.int64,
                                                     count=len(self.agents))
            self._agent_uids = np.fromiter((a.uid for a in self.agents), dtype=np.int64, count=len(self.agents))
            self._agent_uids.flags.writeable = False  # (handed out as is: ground_positions)
        return r

    def _uids(self) -> np.ndarray:
        """``[A]`` every agent's uid, in the world's order (kept with :meth:`_rows`)."""
        self._rows()
        return self._agent_uids

    def agent_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The future ellipses of every agent it sees (its own and its peers, :meth:`split`) as
        obstacle rows, id ``-1 - agent.uid`` (computed once per step, at its start):
        ``(rows [G*K, ROW], slot_of [G*K], owner uid [G*K])``."""
        if self._rows_frame == self.frame and self._agent_rows is not None:
            return self._agent_rows
        G = self.seen()
        K = len(self.matcher.slots)
        self._agent_grid = None
        if G == 0:
            self._agent_rows = (np.zeros((0, ROW)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
            self._rows_frame = self.frame
            return self._agent_rows
        frames, pos, yaw, uids = self._everyone()
        rows = body_obstacle_rows(self.matcher.ellipses[frames], pos[:, [0, 2]], yaw, -1 - uids,
                                  self.settings.penalty.height_top)
        self._agent_rows = (rows, np.tile(np.arange(K), G), np.repeat(uids, K))
        self._agent_grid = (*build_grid(rows, AGENT_CELL), np.zeros(len(rows), dtype=np.int64),
                            np.empty(len(rows), dtype=np.int64))
        self._grid_tick = 0
        self._rows_frame = self.frame
        return self._agent_rows

    # ------------------------------------------------------------------ stepping
    def step(self, dt: float, skip: frozenset = frozenset()) -> None:
        """Advance every agent by ``dt`` (inputs are read from the state at the step's start).

        ``skip``: uids of agents not updated this step (a level of detail for many
        agents): each is owed the time and gets it all at its next update. Near obstacles
        (its last penalised search found some) an agent moves by its clips' root motion
        only, as the frames were chosen for (``root_motion_only``).

        The agents' controllers are stepped together (:attr:`batched`): their playback,
        their simulated roots and their poses in one compiled call each over the world's
        :class:`~motionmatch.runtime.batch.ControllerBatch` (the poses of many agents in
        two halves on two threads, :attr:`threads`), their decisions one by one in
        between (each agent's search phase spreads its searches over frames). An
        environment-aware locomotion search is planned in its agent's turn and made ready
        with the step's others after the loop (their queries in one compiled call, their
        obstacles in another, then each one's kernel arguments); the step's kernels then
        run together, on both threads with two (they hold no lock), each search ends (the
        choice, the cost comparison) in the agents' order, and the quintic transitions
        they start are made in one more compiled call. The numbers are those of each
        controller's own :meth:`~motionmatch.runtime.controller.Controller.update`,
        whatever the threads. (Whole searches shared among threads were measured and
        dropped: half of a search's time is Python, which holds the interpreter's lock; a
        kernel run on a second thread while the first went on with other agents waited
        for that lock about as long as it ran; ``benchmarks/README.md``.)

        Python's cyclic garbage collector runs once at the end of a step (the generation it
        would collect then: :func:`_collect_as_due`), not every few hundred allocations
        within it: a step of many agents allocates tens of thousands of small objects,
        which otherwise cost a dozen collections a step, a full one every few steps (when
        the collector was disabled on entry, it stays so)."""
        if not gc.isenabled():
            self._step(dt, skip)
            return
        gc.disable()
        try:
            self._step(dt, skip)
        finally:
            _collect_as_due(YOUNG_OBJECTS_PER_AGENT * len(self.agents))
            gc.enable()

    def _step(self, dt: float, skip: frozenset) -> None:
        """:meth:`step` (the collector aside)."""
        agents, wants, dts = self._ask_inputs(dt, skip)
        if self.agents_as_obstacles and self.seen() > 1:
            self.agent_rows()  # snapshot before anyone moves
        alone = range(len(agents))
        if self.batched:
            b = self._batch
            ours = [a.ctrl._batch is b and a.ctrl.batched for a in agents]
            if all(ours):
                self._step_together(agents, wants, dts)
                alone = ()
            else:
                k = [i for i, yes in enumerate(ours) if yes]
                if k:
                    self._step_together([agents[i] for i in k], [wants[i] for i in k], [dts[i] for i in k])
                alone = [i for i, yes in enumerate(ours) if not yes]
        for i in alone:
            a, want = agents[i], wants[i]
            n, root_motion_only = self._before_update(a, want)
            a.result = a.ctrl.update(dts[i], a.intent, desired=a.desired, force_search=want.search_now,
                                     root_motion_only=root_motion_only)
            self._after_update(a, n)
        for a, step_dt in zip(agents, dts):
            if a.started and _reports_steps(type(a.source)):
                a.source.stepped(a, step_dt)
        if self.frame == 0 and self.stagger and self.seen() > 1:
            # spread searches: agent i searches i frames later (mod the search interval)
            n = max(1, round(self.controller_settings.search_interval * self.fps))
            for i, a in zip(self._global_rows().tolist(), self.agents):
                a.ctrl.since_search = -(i % n) / self.fps
        self.time += dt
        self.frame += 1

    def _ask_inputs(self, dt: float, skip: frozenset) -> tuple[list[Agent], list[Want], list[float]]:
        """Every input's want for this step, from the state at its start: the agents to
        update (the others owe the time), their wants and their steps in seconds."""
        agents, wants, dts = [], [], []
        now = self.time + 1e-9
        for a in self.agents:
            if skip and a.uid in skip:
                a.owed += dt
                continue
            step_dt = dt + a.owed
            a.owed = 0.0
            if now >= a.start_time:
                step = step_dt if a.started else 0.0  # the first step of an agent is at its start time
                a.local_time += step
                a.started = True
                want = a.source.intent(a, a.local_time, step)
            else:
                want = IDLE
            a.intent = want.intent
            a.desired = want.desired
            agents.append(a)
            wants.append(want)
            dts.append(step_dt)
        return agents, wants, dts

    def _before_update(self, a: Agent, want: Want) -> tuple[int, bool]:
        """The agent's frame chooser for this step (its input's, else its own); returns
        how many searches its chooser logged so far and whether it moves by root motion only."""
        own = a.source.chooser(a)
        a.ctrl.chooser = own if own is not None else a.chooser
        if a.chooser is not None:  # (read by its searches only)
            a.chooser.target_speed = want.intent.speed
        n = a.chooser.log.count if a.chooser is not None else 0
        near = a.chooser is not None and a.chooser.near
        return n, near or want.root_motion_only

    def _after_update(self, a: Agent, n: int) -> None:
        a.searched = a.result.searched or (a.chooser is not None and a.chooser.log.count > n)

    def _step_together(self, agents: list[Agent], wants: list[Want], hs: list[float]) -> None:
        """Step the controllers of ``agents`` (rows of the world's batch; their ``wants`` and
        steps ``hs`` in seconds, one each) through the stages of
        :meth:`Controller.update <motionmatch.runtime.controller.Controller.update>`: the
        playback, the simulated roots and the poses of all of them in one compiled call
        each, the rest (mode, search) agent by agent in between. An agent that only walks
        on this frame (no search due, locomotion, :meth:`Controller._coasts`) takes a short
        lane; the results' poses are copied out of the batch at once."""
        n = len(agents)
        ctrls = [a.ctrl for a in agents]
        intents = [a.intent for a in agents]
        rows = np.fromiter((c._row for c in ctrls), dtype=np.int64, count=n)
        dts = np.array(hs, dtype=np.float64)
        at_end, speed, turn = np.empty(n, dtype=bool), np.empty(n), np.empty(n)
        Controller._begin_rows(ctrls, hs, [a.desired for a in agents])
        self._batch.playback(rows, dts, at_end, speed, turn)
        # one pass over the agents: the frame chooser of each this step (World._before_update),
        # whether it moves by root motion only, whose simulated root the compiled stage
        # advances (the others advance their own), whose inertialization is a spring, and
        # whether its decision is only bookkeeping (Controller._coasts: then done at once)
        choosers = [a.chooser for a in agents]
        ends, rates = at_end.tolist(), self._batch.state.play_rate[rows].tolist()
        near, compiled_sim, coasted, sprung, springs = [], [], [], [], []
        for k, (a, c, ch, w, it, h, end, rate) in enumerate(zip(agents, ctrls, choosers, wants, intents, hs, ends,
                                                               rates)):
            if _has_own_chooser(type(a.source)):
                own = a.source.chooser(a)
                c.chooser = own if own is not None else ch
            else:
                c.chooser = ch
            rmo = (ch is not None and ch.near) or w.root_motion_only
            near.append(rmo)
            sim = c.predictor.batched(it)
            compiled_sim.append(sim)
            if sim:
                sprung.append(k)
            if c.inert.method == "spring":
                springs.append(k)
            coasts = c._coasts(h, it, end, w.search_now, rmo)
            if coasts:
                c._coast(it, rate)
            coasted.append(coasts)
        decided = [_COASTED] * n  # (searched, transitioned, the chooser's log count before; -1: not asked)
        defer = self._deferred_searches()
        late = []  # the agents (their k) whose search is deferred
        speeds = turns = None  # (lists, when an agent needs its full decision)
        for k in [k for k, done in enumerate(coasted) if not done]:
            c, ch, intent, h = ctrls[k], choosers[k], intents[k], hs[k]
            if speeds is None:
                speeds, turns = speed.tolist(), turn.tolist()
            before = 0
            if ch is not None:
                before = ch.log.count
                ch.target_speed = intent.speed  # (read by its searches only: not set for the agents that coast)
            decided[k] = c._decide(h, intent, ends[k], speeds[k], turns[k], wants[k].search_now, near[k], defer) \
                + (before,)
            if decided[k][1] is None:  # (its search's kernel runs below with the others; what follows, after it)
                late.append(k)
            elif not compiled_sim[k]:
                c._advance_sim(h, intent)
        if late:
            # the deferred searches' ends, in the agents' order (each touches its own agent
            # only), then what followed each one's decision
            defer.run()
            moves = []  # (the quintic transitions, made together after the ends)
            for k, (c, job, rest) in zip(late, defer):
                decided[k] = (True, c._search_end(job, rest, moves), decided[k][2])
                if not compiled_sim[k]:
                    c._advance_sim(hs[k], intents[k])
            defer.clear()
            if moves:
                Controller._transition_rows(moves)
        for k in springs:
            ctrls[k]._advance_offsets(hs[k])
        if sprung:
            self._batch.advance_sim(rows[sprung], dts[sprung], intent_goals([intents[k] for k in sprung]))
        self._batch.pose(rows, dts, self._threads())
        st = self._batch.state
        out_rot, out_pos, out_contacts = st.out_rot[rows], st.out_pos[rows], st.out_contacts[rows]  # (copies)
        out = (out_rot, out_pos, st.frame[rows].tolist(), out_contacts)
        for k, (c, a, ch, (searched, transitioned, before)) in enumerate(zip(ctrls, agents, choosers, decided)):
            # the FrameResult's fields, built into one when read (Agent.result)
            a._result = (out, k, c.mode, searched, transitioned, c.last_desired, c.last_costs if searched else None)
            a.searched = searched or (before >= 0 and ch is not None and ch.log.count > before)

    def _obstacle_pool(self, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(obstacles [R, K, M, ROW], counts [R, K], scratch [M])``: the obstacle buffers of
        planned searches (:func:`_gather_planned`), one per batch row (a chooser's search
        reads its row's until its next search, as its own buffers), ``M`` rows per slot (the
        world's ``_gather_capacity``); made anew when the batch or the capacity grew."""
        R, cap = len(self._batch.state.frame), self._gather_capacity
        p = self._obstacles
        if p is None or p[0].shape[0] < R or p[0].shape[1] != K or p[0].shape[2] < cap:
            p = self._obstacles = (np.empty((R, K, cap, ROW)), np.zeros((R, K), dtype=np.int64), np.empty(cap))
        return p

    def _deferred_searches(self) -> _DeferredSearches:
        """A list that takes the step's deferred searches: made ready together, their jobs
        run at once (on two threads with two or more, :meth:`_DeferredSearches.run`)."""
        return _DeferredSearches(self._threads(), self)

    def _threads(self):
        """The world's pool of ``threads - 1`` threads (made on first use; its threads end
        with the world), or ``None`` with one thread."""
        if self.threads < 2:
            return None
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="motionmatch-world")
            weakref.finalize(self, self._pool.shutdown, wait=False)
        return self._pool

    def run(self, n_frames: int, *, progress: bool = False) -> WorldRecord:
        """Step ``n_frames`` frames at the world's fps and record them."""
        from tqdm import tqdm

        A = len(self.agents)
        J = self.db.skeleton.num_joints
        K = len(self.db.schema.trajectory_offsets)
        dt = 1.0 / self.fps
        pos = np.zeros((A, n_frames, 3))
        yaw = np.zeros((A, n_frames))
        frames = np.zeros((A, n_frames), dtype=np.int64)
        searched = np.zeros((A, n_frames), dtype=bool)
        desired = np.full((A, n_frames, K, 3), np.nan, dtype=np.float32)
        rots = np.zeros((A, n_frames, J, 4), dtype=np.float32) if self.record_poses else None
        trs = np.zeros((A, n_frames, J, 3), dtype=np.float32) if self.record_poses else None
        secs = np.zeros(n_frames)
        for f in tqdm(range(n_frames), desc="simulating", unit="frame", disable=not progress):
            t0 = time.perf_counter()
            self.step(0.0 if f == 0 and self.frame == 0 else dt)
            secs[f] = time.perf_counter() - t0
            for i, a in enumerate(self.agents):
                c = a.ctrl
                pos[i, f] = c.root_pos
                yaw[i, f] = c.root_yaw
                frames[i, f] = c.frame
                searched[i, f] = a.searched
                if c.last_desired is not None:
                    desired[i, f] = c.last_desired.positions
                if self.record_poses:
                    rots[i, f], trs[i, f] = a.result.rotations, a.result.translations
        logs = [a.chooser.log if a.chooser is not None else None for a in self.agents]
        return WorldRecord([a.name for a in self.agents], self.fps, pos, yaw, frames, searched, desired, rots, trs,
                           secs, logs)


class _DeferredSearches(list):
    """A step's deferred searches, ``[controller, job, rest]`` each (see :meth:`Controller.
    _search <motionmatch.runtime.controller.Controller._search>`), whose jobs :meth:`run`
    runs at once, on two threads with a pool (a job's kernel holds no lock and releases
    the interpreter's).

    A planned search (:meth:`plan`: the common case, a planar query and an environment
    chooser) is made ready with the step's other planned searches by :meth:`prepare`:
    their queries in one compiled call, their obstacles in another, then each one's
    kernel arguments (:meth:`EnvironmentChooser.begin`'s, as if each had begun alone)."""

    def __init__(self, pool, world: World):
        super().__init__()
        self._pool = pool
        self._world = world
        self._planned: list[tuple] = []  # (index into the list, intent, mask)

    def plan(self, ctrl: Controller, intent: Intent, mask: np.ndarray, tail: tuple) -> None:
        """Take a search of ``ctrl`` whose query and job :meth:`prepare` makes (``tail``:
        its ``rest`` after the query, see :meth:`Controller._search`)."""
        self._planned.append((len(self), intent, mask))
        self.append([ctrl, None, tail])

    def prepare(self) -> None:
        """Make the planned searches ready: their queries (:meth:`Controller._planned_queries`),
        their obstacles (:func:`begin_planned`) and their jobs."""
        if not self._planned:
            return
        entries = [self[i] for i, _, _ in self._planned]
        ctrls = [e[0] for e in entries]
        masks = [m for _, _, m in self._planned]
        queries = Controller._planned_queries(ctrls, [it for _, it, _ in self._planned], masks)
        jobs = begin_planned(self._world, ctrls, queries, masks)
        for e, q, job in zip(entries, queries, jobs):
            e[1] = job
            e[2] = (q, *e[2])
        self._planned.clear()

    def run(self) -> None:
        """Run every job: with a pool, its thread and this one each take the next job not
        taken yet from one iterator (a list's iterator hands each item out once, under the
        interpreter's lock), so that the two finish together however the jobs' costs vary
        (they vary threefold in a dense crowd: every other job to each thread left one
        waiting about a tenth of the time)."""
        self.prepare()
        jobs = [job for _, job, _ in self if job.args is not None]
        if len(jobs) < 2 or self._pool is None:
            _run_jobs(jobs)
            return
        shared = iter(jobs)
        there = self._pool.submit(_run_jobs, shared)
        _run_jobs(shared)
        there.result()


def _run_jobs(jobs) -> None:
    for job in jobs:
        job.run()


def begin_planned(world: World, ctrls: list[Controller], queries: list[np.ndarray], masks: list[np.ndarray]) -> list:
    """:meth:`EnvironmentChooser.begin` of each controller's chooser for its query and mask,
    the obstacles of those that gather among the world's agents (:meth:`EnvironmentChooser.
    _gathers_with_agents`) all in one compiled call (:func:`~motionmatch.runtime._batch_kernels.
    gather_many`: each search's rows, order and numbers as alone); the others begin alone.
    Each search's log gets an equal share of the batched call's time."""
    t0, c0 = time.perf_counter(), time.thread_time()
    choosers = [c.chooser for c in ctrls]
    together = [k for k, ch in enumerate(choosers) if type(ch) is EnvironmentChooser and ch._gathers_with_agents()]
    gathered: dict[int, tuple] = {}
    if together:
        gathered = _gather_planned(world, [ctrls[k] for k in together], [choosers[k] for k in together], together)
    n = len(ctrls)
    wall, cpu = (time.perf_counter() - t0) / n, (time.thread_time() - c0) / n
    jobs = []
    for k, (c, ch, q, m) in enumerate(zip(ctrls, choosers, queries, masks)):
        g = gathered.get(k)
        if g is None:
            jobs.append(ch.begin(c, q, m, "planar"))
        else:
            jobs.append(ch._job(c, q, m, "planar", *g, time.perf_counter(), wall, cpu, time.thread_time()))
    return jobs


def _gather_planned(world: World, ctrls: list[Controller], choosers: list[EnvironmentChooser], keys: list[int]) -> dict:
    """The obstacles of each chooser's search (``{key: (obstacles, counts, nearest)}``, as
    :meth:`EnvironmentChooser.gather` returns them) among the static obstacles of one scene
    and the world's agents, in one compiled call; choosers of other scenes, or searches
    whose rows did not fit the buffers (then grown for the next step), gather alone."""
    from motionmatch.runtime import _batch_kernels as BK

    out: dict[int, tuple] = {}

    def alone(i: int) -> None:  # (search i gathers its obstacles by itself)
        obs, cnt, nearest, _ = choosers[i].gather(ctrls[i])
        out[keys[i]] = (obs, cnt, nearest)

    sc = choosers[0].scene
    same = [i for i, ch in enumerate(choosers) if ch.scene is sc]
    for i in (i for i, ch in enumerate(choosers) if ch.scene is not sc):
        alone(i)
    ch0 = choosers[same[0]]
    if ch0._grid is None or ch0._grid[0] is not sc:
        ch0._grid = (sc, sc.grid_arrays())
    grid = ch0._grid[1] if ch0._grid[1] is not None else _NO_GRID
    agent_grid, agent_tick, owner, slots = world._agent_grid_query()
    n = len(same)
    traj = [ctrls[i].last_desired.positions for i in same]
    T = traj[0].shape[0]
    if any(p.shape[0] != T for p in traj):
        for i in same:
            alone(i)
        return out
    K = ch0._K
    rows = np.fromiter((ctrls[i]._row for i in same), dtype=np.int64, count=n)
    pool, counts, key = world._obstacle_pool(K)
    found, nearest = np.empty(n, dtype=np.int64), np.empty(n)
    uids = np.fromiter((choosers[i].obstacles_fn.uid for i in same), dtype=np.int64, count=n)
    radii = np.fromiter((choosers[i]._packed()[0] for i in same), dtype=np.float64, count=n)
    st = ctrls[same[0]]._batch.state
    tick = sc.next_tick() if grid is not _NO_GRID else 0
    last_static, last_agent = BK.gather_many(grid, tick, agent_grid, agent_tick, owner, slots, uids, rows, st.root_pos,
                                             st.root_yaw, np.stack(traj), radii, np.empty((n, T + 1, 2)),
                                             np.empty((n, T + 1, 2)), pool, counts, key, found, nearest)
    if last_static:
        sc._tick = last_static
    world._grid_tick = max(world._grid_tick, last_agent)
    for i, r, m, near in zip(same, rows.tolist(), found.tolist(), nearest.tolist()):
        ch = choosers[i]
        if m == 0:
            out[keys[i]] = ch._empty(K)
        elif m > 0:
            views = ch._pooled
            if views is None or views[0] is not pool or views[1] != r:
                views = ch._pooled = (pool, r, pool[r], counts[r])  # (the same objects step after step)
            out[keys[i]] = (views[2], views[3], near)
        else:  # (too many rows for the pool: this one alone, and a larger pool from now on)
            world._gather_capacity = max(world._gather_capacity, 2 * -m)
            alone(i)
    return out


@functools.cache
def _has_own_chooser(kind: type) -> bool:
    """Whether inputs of class ``kind`` may name a frame chooser (:meth:`InputSource.chooser`;
    the contract's default names none: a world of many agents skips calling it)."""
    return getattr(kind, "chooser", None) is not InputSource.chooser


@functools.cache
def _reports_steps(kind: type) -> bool:
    """Whether inputs of class ``kind`` do something in :meth:`InputSource.stepped` (the
    contract's default does nothing: a world of many agents skips calling it)."""
    return getattr(kind, "stepped", None) is not InputSource.stepped


#: a decision of :meth:`World._step_together` for an agent that coasted: no search, no
#: transition, no chooser asked
_COASTED = (False, False, -1)


# ---------------------------------------------------------------------------- scenarios
def world_from_scenario(db: MotionDatabase, scenario, *, settings: EnvironmentSettings | None = None,
                        matcher: EnvironmentMatcher | None = None, record_poses: bool | None = None,
                        controller_overrides: dict | None = None) -> World:
    """A :class:`World` set up from a :class:`~motionmatch.environment.scenario.Scenario`."""
    from motionmatch.runtime.crowd import SteeringInput, SteeringSettings

    sc = scenario
    if settings is None:
        settings = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"))
    cdict = {k: v for k, v in sc.controller.items() if k != "controls"}
    if "locomotion_tags" in sc.database:
        cdict["locomotion_tags"] = sc.database["locomotion_tags"]
    cdict.update(controller_overrides or {})
    _check_controller_fields(cdict)
    csettings = environment_controller_settings(**cdict)
    if record_poses is None:
        record_poses = len(sc.agents) <= 16
    world = World(db, sc.scene(), settings=settings, controller=csettings, matcher=matcher,
                  record_poses=record_poses, fps=sc.fps)
    steer = SteeringSettings.from_dict(sc.steering)
    keep_to_line = replace(steer, lateral_gain=0.0)  # path agents: one settings object, steered as one group
    from motionmatch.runtime.modes import gait_speeds_from_database

    gaits = gait_speeds_from_database(db)
    for spec in sc.agents:
        kind = spec.input_kind
        if kind == "timed_path":
            continue  # below: a path follower drives an agent of its own
        if kind == "script":
            src = ScriptInput(spec.script, sc.duration, gaits)
        elif kind == "path":  # steered through the polyline's points (round and round when it loops)
            pts = spec.route(sc.duration, f"agent {spec.name!r}: path")
            src = SteeringInput(world, pts[-1], spec.speed, keep_to_line, waypoints=pts[:-1])
        elif kind == "goal":
            src = SteeringInput(world, np.asarray(spec.goal), spec.speed, steer, waypoints=spec.via)
        else:
            src = IdleInput()
        controls = settings.controls.with_(**spec.controls) if spec.controls else settings.controls
        cs = replace(csettings, locomotion_tags=spec.tags) if spec.tags else None
        world.add_agent(spec.name, spec.start, spec.facing, src, controls=controls, environment=spec.environment,
                        start_time=spec.start_time, path=spec.path, goal=spec.goal, controller=cs)
    followers = [spec for spec in sc.agents if spec.input_kind == "timed_path"]
    if followers:
        _add_path_followers(world, sc, followers, settings)
    return world


def _add_path_followers(world: World, sc, specs, settings: EnvironmentSettings) -> None:
    """Scenario agents with a ``timed_path``: each walks from its start to the path and
    follows it as drawn (global mode), with LHMM over the penalised search among the
    scene's obstacles (``environment: false``: blind to them); the order of the scenario's
    agents is kept."""
    from motionmatch.control.path import TimedPath, load_path, parse_path
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    order = [a.name for a in sc.agents]
    for spec in specs:
        tp = spec.timed_path
        if isinstance(tp, str):
            path = load_path(tp)
        else:
            raw = parse_path(tp)
            path = TimedPath.from_samples(raw.times, raw.points, rate=raw.rate or 150.0, scale=raw.scale or 1.0)
        avoid = spec.environment and len(world.scene) > 0
        f = PathFollower(world.db, path, FollowSettings(mode="global", time_limit=None),
                         position=(spec.start[0], 0.0, spec.start[1]), name=spec.name,
                         scene=world.scene if avoid else None, environment=world.matcher if avoid else None,
                         environment_settings=settings, world=world)
        f.agent.start_time = spec.start_time
        f.agent.path = f.path.input_points[:, [0, 2]]
    world.agents.sort(key=lambda a: order.index(a.name))


def _check_controller_fields(values: dict) -> None:
    """A scenario's ``controller`` fields: known names, each of its default's kind (number,
    flag, word); ``ValueError`` naming the field otherwise."""
    known = {f.name for f in fields(ControllerSettings)}
    bad = sorted(set(values) - known)
    if bad:
        raise ValueError(f"controller: unknown field(s) {bad}; known: {sorted(known)}")
    ref = ControllerSettings()
    for k, v in values.items():
        d = getattr(ref, k)
        ok = (isinstance(v, bool) if isinstance(d, bool) else isinstance(v, str) if isinstance(d, str)
              else isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
        if not ok:
            raise ValueError(f"controller.{k}: expected a value like {d!r}, got {v!r}")


def run_scenario(db: MotionDatabase, scenario, *, settings: EnvironmentSettings | None = None,
                 matcher: EnvironmentMatcher | None = None, progress: bool = False,
                 record_poses: bool | None = None, controller_overrides: dict | None = None
                 ) -> tuple[World, WorldRecord]:
    """Run a scenario from start to end: ``(world, record)``."""
    world = world_from_scenario(db, scenario, settings=settings, matcher=matcher, record_poses=record_poses,
                                controller_overrides=controller_overrides)
    return world, world.run(scenario.frames, progress=progress)
