"""The frame chooser of an environment-aware character: it gathers the obstacles near the
character's query trajectory (static, moving ones at their predicted positions, other
agents' future ellipses, each time-aligned with the ellipse slot it is compared with),
applies the high-level controls (:mod:`motionmatch.runtime.environment_matching`) and runs
the penalised search (Environment-aware Motion Matching, Sec. 5-6).

* :class:`EnvironmentChooser`: a :attr:`Controller.chooser <motionmatch.runtime.controller.
  Controller.chooser>`; a world begins the searches of a step together
  (:meth:`EnvironmentChooser.begin_many`) and runs their compiled kernels at once.
* :class:`SearchLog`: what one character's searches did, in bounded memory.
* :class:`AgentObstacles` and :class:`ObstaclePool`: a world's other agents as obstacles,
  and the buffers of the searches begun together.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from motionmatch.environment.scene import Scene
from motionmatch.geometry.shapes import ROW
from motionmatch.runtime import _batch_kernels as BK
from motionmatch.runtime.controller import Controller
from motionmatch.runtime.environment_matching import (
    Controls,
    EnvironmentMatcher,
    EnvironmentSettings,
    anticipation_weight,
    evasion_factor,
)
from motionmatch.runtime.recent import RecentRows
from motionmatch.runtime.rows import RowArrays, row_field
from motionmatch.search.penalized import (
    ChoiceJob,
    SearchBuffers,
    SearchOptions,
    SearchResult,
    gather_static,
    gather_with_agents,
    prepare_obstacles_into,
    prepare_static,
    trajectory_points,
)

__all__ = ["AGENT_CELL", "CHOOSER_COLUMNS", "AgentObstacles", "EnvironmentChooser", "ObstaclePool", "SearchLog"]

#: a chooser's state that a world reads and writes for all its agents at once, a column
#: each at the agents' rows (:meth:`EnvironmentChooser.place`): whether its last search
#: found obstacles within reach, the speed (m/s) its agent's input asks for, its searches
CHOOSER_COLUMNS = {"near": ((), np.bool_), "target_speed": ((), np.float64), "searches": ((), np.int64)}


#: cell size (m) of the grid over the agents' future body ellipses that searches query
AGENT_CELL = 2.0

#: a grid over no rows (the ten arrays of ``gather_with_agents``), and no row indices
NO_IDS = np.zeros(0, dtype=np.int64)
NO_GRID = (np.zeros(2, dtype=np.int64), NO_IDS, 1, 1, 0.0, 0.0, 1.0, np.zeros((0, ROW)), NO_IDS, NO_IDS)


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
        self._columns, self._row = RowArrays(CHOOSER_COLUMNS), 0  # (see place)
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
        #: Evasion's factor on the direction weights at the last search (1: none)
        self.direction_factor = 1.0
        self._evasion_at: float | None = None
        #: (the world's obstacle pool, batch row, its two views) of searches begun together (begin_many)
        self._pooled: tuple | None = None

    def place(self, columns: RowArrays | None, row: int = 0) -> None:
        """Keep its :data:`CHOOSER_COLUMNS` state in row ``row`` of ``columns`` from now on
        (a world's, at its agent's row), or in columns of its own again (``None``)."""
        old, r = self._columns, self._row
        if columns is None:
            columns, row = RowArrays(CHOOSER_COLUMNS), 0
        for name in CHOOSER_COLUMNS:
            getattr(columns, name)[row] = getattr(old, name)[r]
        self._columns, self._row = columns, int(row)

    def _at(self) -> tuple[RowArrays, int]:
        return self._columns, self._row

    near = row_field(_at, "near", bool, "Whether its last search found obstacles within reach.")
    target_speed = row_field(_at, "target_speed", float, "The speed (m/s) its agent's input asks for, set by "
                             "the world before the agent decides (the anticipation weight of its next search).")
    searches = row_field(_at, "searches", int, "How many searches it made (as its log counts them).")
    del _at

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
                if isinstance(self.obstacles_fn, AgentObstacles):
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

    def _gather_with_agents(self, others: AgentObstacles, root, yaw: float, positions, radius: float, pts_w,
                            local) -> tuple:
        """:meth:`gather` among static obstacles and a world's other agents (``others``):
        the trajectory points, both grid queries and the pre-selection in one compiled call
        (:func:`~motionmatch.search.penalized.gather_with_agents`: the rows and their order
        of the general path)."""
        sc = self.scene
        if self._grid is None or self._grid[0] is not sc:
            self._grid = (sc, sc.grid_arrays())
            self._fit(max(len(sc.static_rows), 1))
        grid = self._grid[1] if self._grid[1] is not None else NO_GRID
        while True:  # (again with larger buffers when they were too small; new visit marks)
            tick = sc.next_tick() if grid is not NO_GRID else 0
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
        a desired trajectory (what :meth:`begin_many` does for many choosers at once)."""
        return self.settings.enabled and not self.scene.moving_ids.size and isinstance(self.obstacles_fn, AgentObstacles)

    def end(self, job: ChoiceJob) -> tuple[np.ndarray, np.ndarray]:
        """The choice of a job from :meth:`begin` that has run: ``([index], [cost])``, as a
        frame chooser returns them (logged)."""
        t1, c1 = time.perf_counter(), time.thread_time()
        ctrl, t0, wall0, cpu0, obs, cnt, mask, cur, prev, envw, opts = job.context  # (a _ChoiceContext)
        job.context = None
        idx, method, cur_plain = self.matcher.search.choice_end(job)
        c2 = time.thread_time()
        search_cpu = job.cpu_s + (c2 - c1)  # (with the plain search, when it ran here)
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
        cpu = cpu0 + search_cpu  # (its bookkeeping after c2 left out: a CPU clock read costs about 2 us)
        self.log.add(wall, cpu, search_cpu, method, bool(out[3] > 0.0), sum(cnt.tolist()), idx, t0)
        self._columns.searches[self._row] += 1
        return np.array([idx], dtype=np.int64), np.array([cost])

    @staticmethod
    def begin_many(ctrls: list[Controller], queries: list[np.ndarray], masks: list[np.ndarray],
                   pool: ObstaclePool) -> list[ChoiceJob]:
        """:meth:`begin` of each controller's chooser (an :class:`EnvironmentChooser`) for
        its query and mask, the obstacles of those that gather among a world's agents
        (:meth:`_gathers_with_agents`) all in one compiled call (:func:`~motionmatch.runtime.
        _batch_kernels.gather_many`: each search's rows, order and numbers as alone, into
        ``pool``'s buffers); the others begin alone. Each search's log gets an equal share
        of the batched call's time."""
        t0, c0 = time.perf_counter(), time.thread_time()
        choosers = [c.chooser for c in ctrls]
        together = [k for k, ch in enumerate(choosers)
                    if type(ch) is EnvironmentChooser and ch._gathers_with_agents()]
        gathered: dict[int, tuple] = {}
        if together:
            gathered = EnvironmentChooser._gather_many([ctrls[k] for k in together], [choosers[k] for k in together],
                                                       together, pool)
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

    @staticmethod
    def _gather_many(ctrls: list[Controller], choosers: list[EnvironmentChooser], keys: list[int],
                     pool: ObstaclePool) -> dict:
        """The obstacles of each chooser's search (``{key: (obstacles, counts, nearest)}``, as
        :meth:`gather` returns them) among the static obstacles of one scene and a world's
        agents, in one compiled call; choosers of other scenes, or searches whose rows did
        not fit the pool's buffers (then grown for the next step), gather alone."""
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
        grid = ch0._grid[1] if ch0._grid[1] is not None else NO_GRID
        others = ch0.obstacles_fn
        agent_grid, agent_tick, owner, slots = others.grid()
        n = len(same)
        traj = [ctrls[i].last_desired.positions for i in same]
        T = traj[0].shape[0]
        if any(p.shape[0] != T for p in traj):
            for i in same:
                alone(i)
            return out
        K = ch0._K
        st = ctrls[same[0]].batch.state
        rows = np.fromiter((ctrls[i].row for i in same), dtype=np.int64, count=n)
        obstacles, counts, key = pool.arrays(len(st.frame), K)
        found, nearest = np.empty(n, dtype=np.int64), np.empty(n)
        uids = np.fromiter((choosers[i].obstacles_fn.uid for i in same), dtype=np.int64, count=n)
        radii = np.fromiter((choosers[i]._packed()[0] for i in same), dtype=np.float64, count=n)
        tick = sc.next_tick() if grid is not NO_GRID else 0
        last_static, last_agent = BK.gather_many(grid, tick, agent_grid, agent_tick, owner, slots, uids, rows,
                                                 st.root_pos, st.root_yaw, np.stack(traj), radii,
                                                 np.empty((n, T + 1, 2)), np.empty((n, T + 1, 2)), obstacles, counts,
                                                 key, found, nearest)
        if last_static:
            sc.used_ticks(last_static)
        others.used_ticks(last_agent)
        for i, r, m, near in zip(same, rows.tolist(), found.tolist(), nearest.tolist()):
            ch = choosers[i]
            if m == 0:
                out[keys[i]] = ch._empty(K)
            elif m > 0:
                views = ch._pooled
                if views is None or views[0] is not obstacles or views[1] != r:
                    views = ch._pooled = (obstacles, r, obstacles[r], counts[r])  # (the same objects step after step)
                out[keys[i]] = (views[2], views[3], near)
            else:  # (too many rows for the pool: this one alone, and a larger pool from now on)
                pool.grow(-m)
                alone(i)
        return out

    @property
    def last(self) -> SearchResult | None:
        """The last search's :class:`~motionmatch.search.penalized.SearchResult` (built on
        demand from the search buffers; ``None`` before the first search)."""
        if self._last is None:
            return None
        return self._buffers.result(*self._last)




class AgentsAsObstacles(Protocol):
    """What :class:`AgentObstacles` reads of a world (:class:`~motionmatch.runtime.world.World`)."""

    def seen(self) -> int: ...

    def agent_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def agents_near(self, points: np.ndarray, radius: float) -> np.ndarray: ...

    def agent_grid_query(self) -> tuple: ...

    def used_grid_ticks(self, last: int) -> None: ...


class AgentObstacles:
    """An :class:`EnvironmentChooser`'s ``obstacles_fn`` for agent ``uid`` of ``world``: the
    other agents' future ellipse rows near the search's points, its own left out (the
    chooser gathers them with the scene's in one compiled call; called, as any
    ``obstacles_fn``, it returns them)."""

    def __init__(self, world: AgentsAsObstacles, uid: int):
        self.world = world
        self.uid = uid

    def grid(self) -> tuple:
        """The world's agent grid for one query (:meth:`World.agent_grid_query
        <motionmatch.runtime.world.World.agent_grid_query>`)."""
        return self.world.agent_grid_query()

    def used_ticks(self, last: int) -> None:
        """The grid's visit marks up to ``last`` were used by a batched gather."""
        self.world.used_grid_ticks(last)

    def __call__(self, chooser: EnvironmentChooser, points: np.ndarray, radius: float):
        w = self.world
        if w.seen() < 2:
            return np.zeros((0, ROW)), np.zeros(0, dtype=np.int64)
        rows, slots, owner = w.agent_rows()
        ids = w.agents_near(points, radius)
        ids = ids[owner[ids] != self.uid]
        return rows[ids], slots[ids]


class ObstaclePool:
    """The obstacle buffers of a world's searches begun together (:meth:`EnvironmentChooser.
    begin_many`): ``[R, K, M, ROW]`` rows and ``[R, K]`` counts, one block per batch row (a
    chooser's search reads its row's until its next search, as its own buffers), ``M``
    rows per slot (:attr:`capacity`, grown when a search needs more)."""

    def __init__(self, capacity: int = 32):
        self.capacity = int(capacity)
        self._arrays: tuple | None = None

    def arrays(self, R: int, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(obstacles [R, K, M, ROW], counts [R, K], scratch [M])``, made anew when the
        batch or the capacity grew."""
        p = self._arrays
        cap = self.capacity
        if p is None or p[0].shape[0] < R or p[0].shape[1] != K or p[0].shape[2] < cap:
            p = self._arrays = (np.empty((R, K, cap, ROW)), np.zeros((R, K), dtype=np.int64), np.empty(cap))
        return p

    def grow(self, rows: int) -> None:
        """A search needed ``rows`` rows per slot: room for twice that from the next step on."""
        self.capacity = max(self.capacity, 2 * int(rows))
