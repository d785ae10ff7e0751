"""The World: many characters stepped together among obstacles, each an :class:`Agent`
(a controller, an environment-aware chooser, an input), and what a run of it records.

* :class:`Agent` and :class:`World`: characters with their inputs (a timeline script, a
  path to follow, a crowd-steering goal, or nothing), stepped together; searches are
  spread over frames (agent ``i`` searches on frames ``i mod n``).
* :class:`WorldRecord`: what :meth:`World.run` recorded.

Environment-aware matching lives in :mod:`~motionmatch.runtime.environment_matching` (the
controls, the settings, the matcher) and :mod:`~motionmatch.runtime.chooser` (the frame
chooser); scenario files become worlds in :mod:`~motionmatch.runtime.scenarios`.
"""

from __future__ import annotations

import functools
import gc
import os
import time
import weakref
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from motionmatch.database import MotionDatabase
from motionmatch.environment.body import body_obstacle_rows
from motionmatch.environment.scene import Scene
from motionmatch.geometry.grid import build_grid, grid_query
from motionmatch.geometry.shapes import ROW
from motionmatch.runtime import _batch_kernels as BK
from motionmatch.runtime.agents import Agent, StepResults
from motionmatch.runtime.batch import ControllerBatch
from motionmatch.runtime.chooser import (
    AGENT_CELL,
    CHOOSER_COLUMNS,
    NO_GRID,
    NO_IDS,
    AgentObstacles,
    EnvironmentChooser,
    ObstaclePool,
)
from motionmatch.runtime.controller import Controller, ControllerSettings
from motionmatch.runtime.deferred import DeferredSearches
from motionmatch.runtime.environment_matching import (
    Controls,
    EnvironmentMatcher,
    EnvironmentSettings,
    environment_controller_settings,
)
from motionmatch.runtime.inputs import IDLE, IdleInput, InputSource, WantRows
from motionmatch.runtime.recording import StepRecorder
from motionmatch.runtime.rows import RowArrays

__all__ = ["Agent", "StepResults", "World", "WorldRecord"]

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
        self._batch.set_terrain(self.scene.terrain)  # (the ground stage: runtime/ground.py)
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
        #: the obstacle buffers of a step's searches made ready together (:class:`~motionmatch.runtime.chooser.ObstaclePool`)
        self.obstacle_pool = ObstaclePool()
        self._rows_frame = -1
        self._next_uid = 0
        self._positions: tuple[int, np.ndarray, np.ndarray] | None = None
        self._agent_batch_rows: np.ndarray | None = None  # (see _rows; None when the agents changed)
        self._agent_uids = np.zeros(0, dtype=np.int64)  # (see _uids)
        self._agent_rows_take: np.ndarray | slice | None = None  # (see _rows: a slice when the rows are consecutive)
        self._peers: _Peers | None = None  # (agents stepped by other worlds: split)
        #: its agents' input clocks, a column each, at their controllers' rows of its batch:
        #: ``start_time`` (world s), ``started`` (bool), ``local_time`` (s of input since
        #: the start), ``owed`` (s not yet stepped: a level of detail)
        self.agent_clocks = RowArrays({"start_time": ((), np.float64), "started": ((), np.bool_),
                                       "local_time": ((), np.float64), "owed": ((), np.float64)})
        #: its agents' choosers' state (:data:`~motionmatch.runtime.chooser.CHOOSER_COLUMNS`), a
        #: column each at their controllers' rows
        self.chooser_columns = RowArrays(CHOOSER_COLUMNS)
        #: changes whenever an agent is added or removed or an input replaced
        self.inputs_version = 0
        self._kinds: tuple | None = None  # (inputs_version, the agents' inputs by kind; see _input_kinds)
        self._roster_of: tuple | None = None  # ((inputs_version, batched), _Roster; see _roster)
        self._ask_scratch: tuple | None = None  # (see _ask_inputs)
        self._wants_memo: tuple | None = None  # (the last step's Want objects and their WantRows; _ask_inputs)
        self._deferred: DeferredSearches | None = None  # (see _deferred_searches)

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
        self.agent_clocks.grow_to(self._batch.state.capacity)
        self.chooser_columns.grow_to(self._batch.state.capacity)
        agent.join(self)
        self.agents.append(agent)
        self._agent_rows = self._positions = self._agent_batch_rows = None
        self.inputs_changed()
        return agent

    def remove_agent(self, agent: Agent) -> None:
        """Take ``agent`` out of the world (it is no longer stepped nor an obstacle; its
        controller keeps its state, in a batch of its own)."""
        self.agents.remove(agent)
        agent.join(None)
        agent.ctrl.move_to(ControllerBatch(self.db))
        self._agent_rows = self._positions = self._agent_batch_rows = None
        self.inputs_changed()

    def set_scene(self, scene: Scene) -> None:
        """Replace the obstacles (every agent's search sees the new scene from now on)."""
        self.scene = scene
        self._batch.set_terrain(scene.terrain)
        for a in self.agents:
            if a.chooser is not None:
                a.chooser.scene = scene

    def _others_fn(self, uid: int) -> AgentObstacles:
        """The obstacles of agent ``uid``'s searches among the others: their rows near the
        search's points (:meth:`agents_near`), its own left out."""
        return AgentObstacles(self, uid)

    def agent_grid_query(self) -> tuple:
        """``(grid, tick, owner, slots)``: the grid over :meth:`agent_rows` as the ten
        arrays of :func:`~motionmatch.search.penalized.gather_with_agents` (an empty one
        with fewer than two agents), a new visit mark, and the rows' owners and slots."""
        if self.seen() < 2:
            return NO_GRID, 0, NO_IDS, NO_IDS
        rows, slots, owner = self.agent_rows()
        grid = self._agent_grid
        if grid is None:
            return NO_GRID, 0, NO_IDS, NO_IDS
        self._grid_tick += 1
        start, items, nx, nz, x0, z0, stamp, out = grid
        return (start, items, nx, nz, float(x0), float(z0), AGENT_CELL, rows, stamp, out), self._grid_tick, owner, slots

    def used_grid_ticks(self, last: int) -> None:
        """The agent grid's visit marks up to ``last`` were used (by a batched gather)."""
        self._grid_tick = max(self._grid_tick, int(last))

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
            _, pos, _, uids = self.everyone()
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
        self.inputs_changed()

    def inputs_changed(self) -> None:
        """Note that its agents or their inputs changed (:attr:`inputs_version`)."""
        self.inputs_version += 1
        self._kinds = None

    def _input_kinds(self) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
        """Its agents' inputs by kind, kept until :attr:`inputs_version` changes: ``(together,
        asked, reports, own_chooser)``: the agent indices of each input class that wants
        for all its agents at once (``{class: [n]}``), and ``[A]`` bool: whose input is
        asked one by one, whose input reports its steps, whose may name a frame chooser."""
        if self._kinds is None or self._kinds[0] != self.inputs_version:
            kinds = [type(a.source) for a in self.agents]
            together: dict[type, list[int]] = {}
            for i, kind in enumerate(kinds):
                if _wants_together(kind):
                    together.setdefault(kind, []).append(i)
            asked = np.fromiter((not _wants_together(k) for k in kinds), dtype=bool, count=len(kinds))
            reports = np.fromiter((_reports_steps(k) for k in kinds), dtype=bool, count=len(kinds))
            own = np.fromiter((_has_own_chooser(k) for k in kinds), dtype=bool, count=len(kinds))
            groups = {k: np.array(v, dtype=np.int64) for k, v in together.items()}
            for a, named in zip(self.agents, own.tolist()):
                if not named:
                    a.ctrl.chooser = a.chooser  # (an input that named one before may have been replaced)
            self._kinds = (self.inputs_version, (groups, asked, reports, own))
        return self._kinds[1]

    def _roster(self) -> _Roster:
        """Its agents' controllers and choosers (lists, never changed in place) and whether
        all are rows of its batch stepped by the compiled stages, kept until
        :attr:`inputs_version` (an agent added or removed) or :attr:`batched` changes."""
        key = (self.inputs_version, self.batched)
        if self._roster_of is None or self._roster_of[0] != key:
            ctrls = [a.ctrl for a in self.agents]
            b = self._batch
            ours = self.batched and all(c.batch is b and c.batched for c in ctrls)
            _together, _asked, reports, own = self._input_kinds()
            self._roster_of = (key, _Roster(ctrls, [a.chooser for a in self.agents], ours,
                                            np.flatnonzero(reports).tolist(), np.flatnonzero(own).tolist()))
        return self._roster_of[1]

    def states(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(frames [A], root_pos [A, 3], root_yaw [A])``: its own agents' database frames,
        roots (m) and yaws (rad) now, in the order of :attr:`agents` (copies)."""
        st, rows = self._batch.state, self._rows()
        return st.frame[rows], st.root_pos[rows], st.root_yaw[rows]

    @property
    def peer_places(self) -> np.ndarray:
        """``[P]`` its peers' places among all the agents it sees (:meth:`split`), in the
        order :meth:`set_peer_state` takes them."""
        p = self._peers
        return np.zeros(0, dtype=np.int64) if p is None else p.peer_at

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

    def global_rows(self) -> np.ndarray:
        """``[A]`` each of its agents' place among all it sees (:meth:`split`; ``0..A-1`` without peers)."""
        return np.arange(len(self.agents)) if self._peers is None else self._peers.own_at

    def everyone(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
            r = self._agent_batch_rows = np.fromiter((a.ctrl.row for a in self.agents), dtype=np.int64,
                                                     count=len(self.agents))
            self._agent_uids = np.fromiter((a.uid for a in self.agents), dtype=np.int64, count=len(self.agents))
            self._agent_uids.flags.writeable = False  # (handed out as is: ground_positions)
            consecutive = len(r) and np.array_equal(r, np.arange(r[0], r[0] + len(r)))
            self._agent_rows_take = slice(int(r[0]), int(r[0]) + len(r)) if consecutive else r
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
        frames, pos, yaw, uids = self.everyone()
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
        b = self._batch
        roster = self._roster()
        if not skip and roster.ours:  # (every agent, all rows of the batch: the common case)
            if agents:
                self._step_agents(agents, wants, dts, self._deferred_searches(), self._threads(), roster, self._rows())
        else:
            ours = [self.batched and a.ctrl.batch is b and a.ctrl.batched for a in agents]
            k = [i for i, yes in enumerate(ours) if yes]
            if len(k) == len(agents):
                if agents:
                    self._step_agents(agents, wants, dts, self._deferred_searches(), self._threads())
            else:
                if k:
                    self._step_agents([agents[i] for i in k], wants.take(k), [dts[i] for i in k],
                                      self._deferred_searches(), self._threads())
                for i in (i for i, yes in enumerate(ours) if not yes):  # (one by one, as their own update would)
                    self._step_agents([agents[i]], wants.take([i]), [dts[i]], None, None)
        if not skip:  # (agents: all of them, in order)
            if roster.reporting:
                started = self.agent_clocks.started[self._rows()].tolist()
                for i in roster.reporting:
                    if started[i]:
                        agents[i].source.stepped(agents[i], float(dts[i]))
        elif (reports := self._input_kinds()[2]).any():  # (some inputs report their steps)
            uids = self._uids()
            reporting = {int(u) for u in uids[reports]}
            for a, step_dt in zip(agents, dts.tolist()):
                if a.uid in reporting and a.started:
                    a.source.stepped(a, step_dt)
        if self.frame == 0 and self.stagger and self.seen() > 1:
            # spread searches: agent i searches i frames later (mod the search interval)
            n = max(1, round(self.controller_settings.search_interval * self.fps))
            for i, a in zip(self.global_rows().tolist(), self.agents):
                a.ctrl.since_search = -(i % n) / self.fps
        self.time += dt
        self.frame += 1

    def _ask_inputs(self, dt: float, skip: frozenset) -> tuple[list[Agent], WantRows, np.ndarray]:
        """Every input's want for this step, from the state at its start: the agents to
        update (the others owe the time), their wants (inputs that want together, e.g.
        crowd steering, asked once for all their agents) and their steps ``[n]`` in seconds.
        The agents' clocks advance in their columns (:attr:`agent_clocks`)."""
        A = len(self.agents)
        rows = self._rows()
        c = self.agent_clocks
        scratch = self._ask_scratch  # (the clocks' outputs, read within the step only)
        if scratch is None or len(scratch[0]) != A:
            scratch = self._ask_scratch = (np.ones(A, dtype=bool), np.empty(A), np.empty(A), np.empty(A, dtype=bool))
        going, step_dt, steps, live = scratch
        if skip:
            going = ~np.isin(self._uids(), np.fromiter(skip, dtype=np.int64, count=len(skip)))
        BK.advance_clocks(rows, going, float(dt), self.time + 1e-9, c.start_time, c.started, c.local_time, c.owed,
                          step_dt, steps, live)
        together, asked, _reports, _own = self._input_kinds()
        if skip:
            idx = np.flatnonzero(going)
            agents = [self.agents[i] for i in idx.tolist()]
            dts, steps, live, asked = step_dt[idx], steps[idx], live[idx], asked[idx]
        else:
            idx, agents, dts = None, list(self.agents), step_dt
        n = len(agents)
        groups = []
        if together:
            at = np.arange(n) if idx is None else np.full(A, -1, dtype=np.int64)
            if idx is not None:
                at[idx] = np.arange(n)
            for kind, members in together.items():
                ks = at[members]
                ks = ks[ks >= 0]
                ks = ks[live[ks]]
                if len(ks):
                    positions = members if len(ks) == len(members) else (np.arange(A) if idx is None else idx)[ks]
                    groups.append((ks, kind.wants_together(self, self.global_rows()[positions])))
        if not together and idx is None:  # (every agent asked: its want, or standing until it starts)
            times, stepped, lives = c.local_time[rows].tolist(), steps.tolist(), live.tolist()
            wants = [(k, a.source.intent(a, times[k], stepped[k]) if lives[k] else IDLE) for k, a in enumerate(agents)]
            one_by_one = None
        else:
            one_by_one = (~live | asked).nonzero()[0].tolist()
            wants = []
        if one_by_one:
            times = c.local_time[rows if idx is None else rows[idx]].tolist()
            stepped, lives = steps.tolist(), live.tolist()
            wants = [(k, agents[k].source.intent(agents[k], times[k], stepped[k]) if lives[k] else IDLE)
                     for k in one_by_one]
        if not groups and len(wants) == n:  # (every row a Want: the same objects as last step, the same rows)
            memo = self._wants_memo
            if memo is not None and len(memo[0]) == n and all(w is m for (_, w), m in zip(wants, memo[0])):
                return agents, memo[1], dts
            rows = WantRows.assemble(n, wants, groups)
            self._wants_memo = ([w for _, w in wants], rows)
            return agents, rows, dts
        return agents, WantRows.assemble(n, wants, groups), dts

    def _step_agents(self, agents: list[Agent], wants: WantRows, hs: list[float], defer, threads,
                     roster: _Roster | None = None, rows: np.ndarray | None = None) -> None:
        """Step ``agents`` (their ``wants`` and steps ``hs`` in seconds, one each) through
        the update pipeline (:meth:`Controller.step_many <motionmatch.runtime.controller.
        Controller.step_many>`: several at once when they are rows of the world's batch),
        after setting what the agents add to their controllers: each one's frame chooser
        this step (its input's, else its environment-aware one), whether it moves by root
        motion only (near obstacles, or as its input asks) and its chooser's target speed.
        The results' poses are copied out of the batch at once (:attr:`Agent.result` builds
        its :class:`~motionmatch.runtime.controller.FrameResult` when read). ``roster``,
        ``rows``: the world's (:meth:`_roster`, :meth:`_rows`) when ``agents`` are all of its
        agents, all rows of its batch."""
        if roster is None:
            ctrls, choosers = [a.ctrl for a in agents], [a.chooser for a in agents]
        else:
            ctrls, choosers = roster.ctrls, roster.choosers
        rmo = wants.root_motion_only  # (copied before the choosers add to it)
        if roster is not None:  # (agents: all of them, in order)
            for i in roster.naming:
                mine = agents[i].source.chooser(agents[i])
                ctrls[i].chooser = mine if mine is not None else choosers[i]
        elif (own := self._input_kinds()[3]).any():  # (an input that may name its own chooser: asked each step)
            chosen = {a.uid for a in (self.agents[i] for i in np.flatnonzero(own).tolist())}
            for a, c, ch in zip(agents, ctrls, choosers):
                if a.uid in chosen:
                    mine = a.source.chooser(a)
                    c.chooser = mine if mine is not None else ch
        before = None  # each chooser's searches so far (-1: none)
        if not self.environment:  # (no agent has a chooser)
            pass
        elif roster is not None and choosers:  # (every agent's chooser in the columns)
            cols = self.chooser_columns
            goals = wants.intents.goals
            rmo = rmo | cols.near[rows]
            cols.target_speed[rows] = np.hypot(goals[:, 0], goals[:, 1])  # (the intents' speeds)
            before = cols.searches[rows]
        elif any(ch is not None for ch in choosers):
            rmo = rmo.copy()
            goals = wants.intents.goals
            speeds = np.hypot(goals[:, 0], goals[:, 1]).tolist()  # (the intents' speeds)
            before = []
            for k, ch in enumerate(choosers):
                if ch is None:
                    before.append(-1)
                    continue
                if ch.near:
                    rmo[k] = True
                ch.target_speed = speeds[k]  # (read by its searches only)
                before.append(ch.searches)
        decided = Controller.step_many(ctrls, hs, wants.intents, wants.desired, wants.search_now, rmo, defer=defer,
                                       threads=threads, rows=rows)
        step = StepResults(wants, ctrls, choosers, decided, before, None if rows is None else self._agent_rows_take)
        for k, a in enumerate(agents):
            a.last_step = (step, k)

    def _deferred_searches(self) -> DeferredSearches:
        """The list that takes a step's deferred searches: made ready together, their jobs
        run at once (on two threads with two or more, :meth:`DeferredSearches.run`); the
        world's one, empty again after each step's searches ended."""
        d, pool = self._deferred, self._threads()
        if d is None or len(d) or d.pool is not pool:
            d = self._deferred = DeferredSearches(pool, self.obstacle_pool)
        return d

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

    def recorder(self, n_frames: int, **kw) -> StepRecorder:
        """A :class:`~motionmatch.runtime.recording.StepRecorder` of this world's agents for
        ``n_frames`` frames (``kw``: its options; ``poses`` defaults to ``record_poses``)."""
        kw.setdefault("poses", self.record_poses)
        return StepRecorder(self.agents, n_frames, joints=self.db.skeleton.num_joints,
                            contacts=len(self.db.foot_joints), offsets=len(self.db.schema.trajectory_offsets), **kw)

    def record(self, n_frames: int, recorder: StepRecorder, *, progress: bool = False) -> StepRecorder:
        """Step ``n_frames`` frames at the world's fps (the first at ``dt = 0`` in a world not
        stepped yet), each step handed to ``recorder``: the one loop of offline runs
        (:meth:`run`, :func:`~motionmatch.runtime.offline.run_input`)."""
        from tqdm import tqdm

        dt = 1.0 / self.fps
        for f in tqdm(range(n_frames), desc="simulating", unit="frame", disable=not progress):
            t0 = time.perf_counter()
            self.step(0.0 if f == 0 and self.frame == 0 else dt)
            seconds = time.perf_counter() - t0
            _, pos, yaw = self.states()
            recorder.add((pos, yaw), t0, seconds)
        return recorder

    def run(self, n_frames: int, *, progress: bool = False) -> WorldRecord:
        """Step ``n_frames`` frames at the world's fps and record them (:meth:`record`)."""
        rec = self.record(n_frames, self.recorder(n_frames), progress=progress)
        logs = [a.chooser.log if a.chooser is not None else None for a in self.agents]
        return WorldRecord([a.name for a in self.agents], self.fps, rec.root_positions, rec.root_yaws, rec.frames,
                           rec.searched, rec.desired, rec.rotations, rec.translations, rec.seconds, logs)


class _Roster(NamedTuple):
    """A world's agents' controllers and choosers, in its order (see :meth:`World._roster`)."""

    ctrls: list[Controller]
    choosers: list
    ours: bool  # every one a row of the world's batch, stepped by the compiled stages
    reporting: list[int]  # the agents whose input reports its steps (InputSource.stepped)
    naming: list[int]  # the agents whose input may name a frame chooser (InputSource.chooser)


@functools.cache
def _has_own_chooser(kind: type) -> bool:
    """Whether inputs of class ``kind`` may name a frame chooser (:meth:`InputSource.chooser`;
    the contract's default names none: a world of many agents skips calling it)."""
    return getattr(kind, "chooser", None) is not InputSource.chooser


@functools.cache
def _wants_together(kind: type) -> bool:
    """Whether inputs of class ``kind`` want for all their agents at once (``wants_together``,
    see :class:`~motionmatch.runtime.inputs.InputSource`)."""
    return callable(getattr(kind, "wants_together", None))


@functools.cache
def _reports_steps(kind: type) -> bool:
    """Whether inputs of class ``kind`` do something in :meth:`InputSource.stepped` (the
    contract's default does nothing: a world of many agents skips calling it)."""
    return getattr(kind, "stepped", None) is not InputSource.stepped
