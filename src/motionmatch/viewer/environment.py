"""The viewer's environment adapter: obstacles and other agents make characters avoid them.

One :class:`ViewerEnvironment` per browser session (its ``session.env``):

* the page's obstacles (disks, boxes, ellipses with heights; moving ones with a velocity
  or timed waypoints, counted from the time they were placed) become a
  :class:`~motionmatch.environment.scene.Scene`;
* every motion-matching character gets a :class:`CharacterChooser`: the environment-aware
  penalised search (:class:`~motionmatch.runtime.world.EnvironmentChooser`) with the
  character's high-level controls (the page's sliders) read at every search;
* the other characters' future body ellipses count as obstacles, time-aligned slot by
  slot (as :class:`~motionmatch.runtime.world.World` does), snapshotted once per tick
  before anyone moves;
* while a drawn path is followed, the path's query is searched with the penalties when an
  obstacle or another character is near it, and the path's own long-horizon matcher
  chooses otherwise (path following without obstacles is unchanged);
* near obstacles the root is not pulled toward the simulated (obstacle-blind) root:
  root motion only, so body and root motion stay consistent (paper Sec. 5.1);
* a scenario's penalty, search and default controls apply to the whole session
  (:meth:`ViewerEnvironment.configure`); a character with ``environment`` false gets the
  plain search (still an obstacle for the others), one with ``assist`` false (scenario
  agents) no intent or path filter, as in :class:`~motionmatch.runtime.world.World`;
* :meth:`ViewerEnvironment.debug` gives the debug panel the future body ellipses, the
  penalty of each obstacle on them and the clearance.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from motionmatch.environment.obstacles import Obstacle
from motionmatch.environment.scene import Scene
from motionmatch.geometry.shapes import (
    C_ID,
    C_R,
    C_X,
    C_Z,
    ROW,
    T_ELLIPSE,
    barrier,
    ellipse_obstacle_distances,
)
from motionmatch.runtime.world import Controls, EnvironmentChooser, EnvironmentMatcher, EnvironmentSettings

__all__ = ["CharacterChooser", "ViewerEnvironment", "obstacle_from_viewer", "route_around", "shared_matcher"]

CONTROL_NAMES = ("responsiveness", "continuity", "evasion", "anticipation")

_matchers: dict[int, tuple[object, EnvironmentMatcher]] = {}


def shared_matcher(db) -> EnvironmentMatcher:
    """The :class:`EnvironmentMatcher` of ``db``, built once per database and shared by
    every session (its body ellipses and search structures are read-only)."""
    hit = _matchers.get(id(db))
    if hit is not None and hit[0] is db:
        return hit[1]
    m = EnvironmentMatcher(db)
    _matchers[id(db)] = (db, m)
    return m


def obstacle_from_viewer(o: dict) -> Obstacle:
    """An :class:`Obstacle` from the viewer's obstacle dict (scenario format plus ``id`` and
    ``t0``, the session time it was placed at). The viewer moves an obstacle from its
    centre from ``t0`` on (``velocity``), or along ``path`` with times counted from ``t0``;
    the returned obstacle gives the same positions against the session clock."""
    t0 = float(o.get("t0") or 0.0)
    d = {k: v for k, v in o.items() if k not in ("id", "t0")}
    if d.get("path") is not None:
        d["path"] = [[float(p[0]) + t0, float(p[1]), float(p[2])] for p in d["path"]]
    elif d.get("velocity") is not None and any(d["velocity"]):
        vx, vz = (float(v) for v in d["velocity"])
        cx, cz = (float(v) for v in d["center"])
        d["center"] = [cx - vx * t0, cz - vz * t0]
    return Obstacle.from_dict(d, f"obstacle {o.get('id', '?')}")


def _controls(values: dict, base: Controls) -> Controls:
    return Controls(**{k: float(values.get(k, getattr(base, k))) for k in CONTROL_NAMES})


def route_around(scene: Scene, times: np.ndarray, xz: np.ndarray, clearance: float = 0.6
                 ) -> tuple[np.ndarray, np.ndarray]:
    """A drawn path (``times [R]`` s, ``xz [R, 2]`` world metres) routed around the
    obstacles it crosses now: the samples inside an obstacle's bounding circle grown by
    ``clearance`` metres are pushed out onto that circle, on the side the path
    passes (by the mean of those samples), giving an arc around it. Moving obstacles
    are left to the penalised search. Returns ``(times, xz)``."""
    P = np.array(xz, dtype=np.float64)
    sc = scene
    if not len(sc) or len(P) < 2:
        return times, P
    rows = sc.static_rows
    for m in np.argsort(np.hypot(rows[:, C_X] - P[0, 0], rows[:, C_Z] - P[0, 1])):
        c = rows[m, [C_X, C_Z]]
        R = float(rows[m, C_R]) + clearance
        dist = np.hypot(P[:, 0] - c[0], P[:, 1] - c[1])
        inside = dist < R
        if not inside.any() or (inside[0] and dist[0] < rows[m, C_R]):
            continue  # untouched, or starting inside it (nothing sensible to route)
        idx = np.flatnonzero(inside)
        # each run of samples inside gets its own arc
        for run in np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1):
            a, b = max(run[0] - 1, 0), min(run[-1] + 1, len(P) - 1)
            u = P[b] - P[a]
            nu = float(np.hypot(*u))
            if nu < 1e-9:
                continue
            u /= nu
            nrm = np.array([-u[1], u[0]])
            off = float(np.mean((P[run] - c) @ nrm))
            side = 1.0 if off >= 0 else -1.0
            rel = P[run] - c
            t = rel @ u
            lat = np.sqrt(np.maximum(R * R - t * t, 0.0))
            cur = (rel @ nrm) * side
            P[run] = c + np.outer(t, u) + np.outer(side * np.maximum(cur, lat), nrm)
    return times, P


class CharacterChooser:
    """The frame chooser the adapter gives one character (see the module doc).

    Args:
        env: the session's :class:`ViewerEnvironment`.
        character: the :class:`~motionmatch.viewer.characters.MMCharacter`.
        chooser: its :class:`EnvironmentChooser` (shared with the path variant).
        fallback: while following a path: the path's matcher, used when nothing is near.
    """

    def __init__(self, env: ViewerEnvironment, character, chooser: EnvironmentChooser, fallback=None):
        self.env = env
        self.character = character
        self.chooser = chooser
        self.fallback = fallback
        self.last_method = ""

    def for_path(self, matcher) -> CharacterChooser:
        """The chooser to use while a drawn path is followed (``matcher``: the path's)."""
        return CharacterChooser(self.env, self.character, self.chooser, fallback=matcher)

    def _sync(self, ctrl) -> None:
        ch = self.chooser
        vals = self.character.controls
        key = tuple(float(vals.get(k, 1.0)) for k in CONTROL_NAMES)
        if getattr(self, "_key", None) != key:
            ch.controls = _controls(vals, self.env.settings.controls)
            self._key = key
        intent = getattr(self.character, "intent", None)
        if intent is not None:  # the target speed of Anticipation, as the world's agents take it
            ch.target_speed = float(intent.speed)
            return
        des = ctrl.last_desired
        if des is not None and len(des.velocities):
            v = des.velocities[min(1, len(des.velocities) - 1)]
            ch.target_speed = float(math.hypot(v[0], v[2]))

    def __call__(self, ctrl, query: np.ndarray, mask: np.ndarray, view: str):
        self._sync(ctrl)
        if self.fallback is not None:
            cnt = self.chooser.gather(ctrl)[1]
            if int(cnt.sum()) == 0:
                self.last_method = "path"
                return self.fallback(ctrl, query, mask, view)
        idx, cost = self.chooser(ctrl, query, mask, view)
        self.last_method = self.chooser.last.method if self.chooser.last is not None else ""
        return idx, cost


class ViewerEnvironment:
    """The environment adapter of one viewer session (see the module doc): ``set_obstacles``
    when the scene changes, ``attach``/``detach`` characters, ``before_step`` once per tick,
    ``controls_changed``, ``configure`` (a scenario's settings) and ``debug`` overlays.

    Args:
        db: the session's database.
        settings: environment-aware search settings (default :class:`EnvironmentSettings`:
            the paper's penalty, its optimised search, tuned default controls).
        agents_as_obstacles: the other characters' future ellipses count as obstacles.
    """

    #: metres kept between a character's root and an obstacle's bounding circle when steering
    steer_clearance = 0.55
    #: ... and when routing a drawn path around it
    path_clearance = 0.6

    def __init__(self, db, settings: EnvironmentSettings | None = None, *, agents_as_obstacles: bool = True):
        self.db = db
        self.settings = settings or EnvironmentSettings()
        self.matcher = shared_matcher(db)
        self.scene = Scene()
        self.scene_ids: list[int] = []  # scene index -> viewer obstacle id
        self._static_disks = np.zeros((0, 4))  # x, z, bounding radius, scene index
        self._max_radius = 0.0
        self._obs_clear: dict[int, float] = {}
        self.time = 0.0
        self.agents_as_obstacles = agents_as_obstacles
        self.choosers: dict[int, CharacterChooser] = {}
        self._chars: dict[int, object] = {}
        self._rows = np.zeros((0, ROW))
        self._slots = np.zeros(0, dtype=np.int64)
        self._owner = np.zeros(0, dtype=np.int64)
        self._roots = np.zeros((0, 2))
        p = self.settings.penalty
        self.radius = p.threshold + self.settings.reach + p.margin

    # ------------------------------------------------------------------ scene
    def set_obstacles(self, obstacles: list[dict], t: float) -> None:
        objs = [obstacle_from_viewer(o) for o in obstacles]
        self.scene = Scene(objs)
        self.scene_ids = [int(o.get("id", i)) for i, o in enumerate(obstacles)]
        rows = self.scene.static_rows
        self._static_disks = (np.stack([rows[:, C_X], rows[:, C_Z], rows[:, C_R], rows[:, C_ID]], axis=1)
                              if len(rows) else np.zeros((0, 4)))
        self._max_radius = max((o.bounding_radius for o in objs), default=0.0)
        self.time = float(t)
        for c in self.choosers.values():
            c.chooser.scene = self.scene

    # ------------------------------------------------------------------ settings
    def configure(self, settings: EnvironmentSettings) -> None:
        """Use ``settings`` (penalty, search, default controls; e.g. a scenario's) for every
        character of the session from now on, the attached ones included."""
        self.settings = settings
        p = settings.penalty
        self.radius = p.threshold + settings.reach + p.margin
        for cid, cc in self.choosers.items():
            cc.chooser.settings = self._settings_for(self._chars.get(cid))
            cc._key = None  # the controls are read again (their defaults may have changed)

    def _settings_for(self, character) -> EnvironmentSettings:
        """The session's settings, with the environment ignored for a plain character
        (``character.environment`` false: scenario ``environment: false``)."""
        if character is not None and not getattr(character, "environment", True):
            return replace(self.settings, enabled=False)
        return self.settings

    # ------------------------------------------------------------------ characters
    def attach(self, character) -> None:
        first = character.id not in self.choosers
        character.reweight_locally = False
        if first and not getattr(character, "_env_controls", False):
            # the sliders show the environment-aware defaults (Controls), not the neutral 1s
            d = self.settings.controls
            for k in CONTROL_NAMES:
                character.controls[k] = float(getattr(d, k))
            character._env_controls = True
        index = character.id
        enabled = bool(getattr(character, "environment", True))
        ec = EnvironmentChooser(self.matcher, self._settings_for(character),
                                controls=_controls(character.controls, self.settings.controls),
                                scene=self.scene, clock=lambda: self.time,
                                obstacles_fn=self._others_fn(index) if self.agents_as_obstacles else None)
        cc = CharacterChooser(self, character, ec)
        self.choosers[index] = cc
        self._chars[index] = character
        character.chooser = cc
        assist = enabled and bool(getattr(character, "assist", True))
        character.intent_filter = self.steer_intent if assist else None
        character.path_filter = self.route_path if assist else None
        follower = getattr(character, "follower", None)
        character.tap.inner = cc.for_path(follower.matcher) if follower is not None else cc
        character._env_settings = (character.settings, replace(character.settings, adjust_halflife=0.0))

    # ------------------------------------------------------------------ steering
    def _obstacle_disks(self, t: float, ahead: float = 0.0, speed: float = 0.0) -> np.ndarray:
        """``[M, 4]`` (x, z, bounding radius, viewer id) of every obstacle at time ``t``;
        moving ones where they are predicted when reached (at most ``ahead`` seconds on)."""
        sc = self.scene
        if not len(sc):
            return np.zeros((0, 4))
        if not len(sc.moving_ids):
            return self._static_disks
        out = [self._static_disks]
        for i in sc.moving_ids:
            o = sc.obstacles[int(i)]
            p = o.predicted(t, ahead)
            out.append(np.array([[p[0], p[1], o.bounding_radius, float(i)]]))
        return np.concatenate(out) if out else np.zeros((0, 4))

    def steer_intent(self, character, intent, dt: float):
        """The intent bent around the obstacle that blocks the way ahead (an intent filter,
        see :class:`~motionmatch.viewer.characters.MMCharacter`).

        The desired velocity ``v`` (keyboard, crowd steering or pose commands) is kept when
        no obstacle's bounding circle, grown by :attr:`steer_clearance`, meets the corridor
        ``[0, max(1.2, 1.6 |v|)]`` metres ahead; otherwise it is turned, at the same speed,
        toward the point beside the nearest blocking obstacle on the side the character is
        already on (kept while that obstacle blocks, so it does not dither). The trajectory
        the controller then predicts passes the obstacle, and the penalised search picks
        the poses that follow it without touching anything."""
        v = np.asarray(intent.velocity, dtype=np.float64)
        sp = float(math.hypot(v[0], v[2]))
        if sp < 0.05 or not len(self.scene):
            character._env_side = None
            return intent
        look = max(1.2, 1.6 * sp)
        # nothing can block within reach (bounds from this tick's clearances): keep the intent
        if self._obs_clear.get(character.id, -np.inf) > look + self._max_radius + 2 * self.steer_clearance:
            character._env_side = None
            return intent
        d = np.array([v[0], v[2]]) / sp
        n = np.array([-d[1], d[0]])
        disks = self._obstacle_disks(self.time, ahead=min(look / sp, 1.5), speed=sp)
        p = np.array(character.root_xz)
        rel = disks[:, :2] - p
        along = rel @ d
        lat = rel @ n
        R = disks[:, 2] + self.steer_clearance
        block = (along > -0.1) & (along < look + R) & (np.abs(lat) < R)
        if not block.any():
            character._env_side = None
            return intent
        j = int(np.flatnonzero(block)[np.argmin(along[block] - R[block])])
        ident = int(disks[j, 3])
        mem = getattr(character, "_env_side", None)
        if mem is not None and mem[0] == ident:
            side = mem[1]
        else:
            side = -1.0 if lat[j] > 0.02 else 1.0
            character._env_side = (ident, side)
        aim = disks[j, :2] + n * side * R[j] * 1.05
        to = aim - p
        dist = float(np.hypot(*to))
        if dist < 1e-6:
            return intent
        nd = to / dist
        if nd @ d < 0.0:  # never turn back: walk along the obstacle instead
            nd = n * side
        from motionmatch.control.intent import Intent

        return Intent(velocity=[nd[0] * sp, 0.0, nd[1] * sp], facing=intent.facing, gait=intent.gait,
                      actions=intent.actions)

    def route_path(self, times: np.ndarray, xz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A drawn path routed around the scene's static obstacles (:func:`route_around`
        with :attr:`path_clearance`); a path filter of the characters."""
        return route_around(self.scene, times, xz, self.path_clearance)

    def detach(self, character) -> None:
        if character.intent_filter == self.steer_intent:
            character.intent_filter = None
        if character.path_filter == self.route_path:
            character.path_filter = None
        self.choosers.pop(character.id, None)
        self._chars.pop(character.id, None)

    def controls_changed(self, character) -> None:
        cc = self.choosers.get(character.id)
        if cc is not None:
            cc._key = None

    # ------------------------------------------------------------------ per tick
    def _others_fn(self, cid: int):
        def fn(chooser: EnvironmentChooser):
            if len(self._owner) == 0:
                return self._rows, self._slots
            ch = self._chars.get(cid)
            keep = self._owner != cid
            if ch is not None:
                # only agents whose current position is within reach of a few metres
                x, z = ch.root_xz
                near = np.hypot(self._roots[:, 0] - x, self._roots[:, 1] - z) < self.radius + 4.0
                keep &= near
            return self._rows[keep], self._slots[keep]
        return fn

    def agent_rows(self, characters) -> None:
        """Snapshot every motion-matching character's future body ellipses (world rows, one
        per slot, id ``-1 - character id``) before anyone moves this tick."""
        mm = [c for c in characters if c.id in self._chars]
        A = len(mm)
        K = len(self.matcher.slots)
        if A < 2 or not self.agents_as_obstacles:
            self._rows = np.zeros((0, ROW))
            self._slots = np.zeros(0, dtype=np.int64)
            self._owner = np.zeros(0, dtype=np.int64)
            self._roots = np.zeros((0, 2))
            return
        frames = np.array([int(c.ctrl.frame) for c in mm])
        pos = np.array([(c.ctrl.root_pos[0], c.ctrl.root_pos[2]) for c in mm])
        yaw = np.array([float(c.ctrl.root_yaw) for c in mm])
        e = self.matcher.ellipses[frames]  # [A, K, 5 | 7] in each character's frame
        cs, sn = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
        rows = np.zeros((A, K, ROW))
        rows[..., 0] = T_ELLIPSE
        rows[..., 1] = pos[:, 0:1] + cs * e[..., 0] + sn * e[..., 1]
        rows[..., 2] = pos[:, 1:2] - sn * e[..., 0] + cs * e[..., 1]
        a = np.hypot(e[..., 2], e[..., 3])
        ux = np.where(a > 1e-9, e[..., 2] / np.maximum(a, 1e-9), 1.0)
        uz = np.where(a > 1e-9, e[..., 3] / np.maximum(a, 1e-9), 0.0)
        rows[..., 3] = cs * ux + sn * uz
        rows[..., 4] = -sn * ux + cs * uz
        rows[..., 5] = a
        rows[..., 6] = e[..., 4]
        rows[..., 7] = np.maximum(a, e[..., 4])
        if e.shape[-1] >= 7:
            rows[..., 8] = e[..., 5]
            rows[..., 9] = e[..., 6] + self.settings.penalty.height_top
        else:  # no height features: a body from the ground to 2 m (as world_ellipses assumes)
            rows[..., 8] = 0.0
            rows[..., 9] = 2.0 + self.settings.penalty.height_top
        ids = np.array([c.id for c in mm])
        rows[..., 10] = (-1 - ids)[:, None]
        rows[..., 11] = 1.0
        self._rows = rows.reshape(A * K, ROW)
        self._slots = np.tile(np.arange(K), A)
        self._owner = np.repeat(ids, K)
        self._roots = np.repeat(pos, K, axis=0)

    def before_step(self, characters, t: float, dt: float) -> None:
        self.time = float(t)
        self.agent_rows(characters)
        mine = [c for c in characters if c.id in self.choosers]
        if not mine:
            return
        obs, agents = self.clearances(mine)
        self._obs_clear = dict(zip((c.id for c in mine), obs.tolist()))
        near = np.minimum(obs, agents) < self.radius + 1.0
        for c, n in zip(mine, near.tolist()):
            if getattr(c, "follower", None) is not None:
                continue
            plain, env = getattr(c, "_env_settings", (c.settings, c.settings))
            if plain is not c.settings:  # the character's settings changed: derive again
                plain, env = c.settings, replace(c.settings, adjust_halflife=0.0)
                c._env_settings = (plain, env)
            want = env if n else plain
            if c.ctrl.s is not want:
                c.ctrl.s = want

    def clearances(self, characters) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds ``([A], [A])`` (m) of the distance from each character's root to the
        nearest obstacle (bounding circles; moving ones less 1.5 s of their travel) and to
        the nearest future ellipse of another character (``inf``: none), all at once."""
        pos = np.array([c.root_xz for c in characters], dtype=np.float64).reshape(-1, 2)
        A = len(pos)
        obs = np.full(A, np.inf)
        d = self._static_disks
        if len(d):
            obs = np.min(np.hypot(pos[:, None, 0] - d[None, :, 0], pos[:, None, 1] - d[None, :, 1]) - d[None, :, 2],
                         axis=1)
        sc = self.scene
        for i in sc.moving_ids:
            o = sc.obstacles[int(i)]
            p = o.position(self.time)
            reach = o.bounding_radius + 1.5 * float(np.hypot(*o.velocity_at(self.time)))
            obs = np.minimum(obs, np.hypot(pos[:, 0] - p[0], pos[:, 1] - p[1]) - reach)
        agents = np.full(A, np.inf)
        if len(self._owner):
            r = self._rows
            dd = np.hypot(pos[:, None, 0] - r[None, :, C_X], pos[:, None, 1] - r[None, :, C_Z]) - r[None, :, C_R]
            ids = np.array([c.id for c in characters])
            dd[ids[:, None] == self._owner[None, :]] = np.inf
            agents = dd.min(axis=1)
        return obs, agents

    # ------------------------------------------------------------------ debug
    def debug(self, character) -> dict:
        """Future body ellipses ``[[cx, cz, ux, uz, a, b], ...]`` (world), the penalty each
        nearby obstacle or character puts on them (``[[id, penalty], ...]``; characters as
        ``"agent N"``), the last search's total penalty and method, and the clearance (m)
        of the current body to the nearest obstacle or character (``null``: none near)."""
        ctrl = character.ctrl
        ell = self.matcher.world_ellipses(int(ctrl.frame), (ctrl.root_pos[0], ctrl.root_pos[2]),
                                          float(ctrl.root_yaw))
        out: dict = {"ellipses": np.round(ell[:, :6], 3).tolist()}
        cc = self.choosers.get(character.id)
        pen = self.settings.penalty
        slots = self.matcher.slots
        rows, slot_of = self.scene.query(self.time, np.array([[ctrl.root_pos[0], ctrl.root_pos[2]]]),
                                         self.radius + 3.0, slots)
        if len(self._owner):
            keep = self._owner != character.id
            rows = np.concatenate([rows, self._rows[keep]])
            slot_of = np.concatenate([slot_of, self._slots[keep]])
        per: dict = {}
        clearance = np.inf
        total = 0.0
        if len(rows):
            d = ellipse_obstacle_distances(ell[:, :6], rows)  # [K, M]
            for k in range(len(slots)):
                sel = (slot_of == -1) | (slot_of == k)
                w = pen.slot_weights[k] if k < len(pen.slot_weights) else pen.slot_weights[-1]
                for m in np.flatnonzero(sel):
                    b = w * barrier(float(d[k, m]) - pen.margin, pen.threshold, pen.exponent)
                    ident = int(rows[m, C_ID])
                    key = f"agent {-1 - ident}" if ident < 0 else self.scene_ids[ident]
                    per[key] = per.get(key, 0.0) + b
                    total += b
            first = (slot_of == -1) | (slot_of == 0)
            if first.any():
                clearance = float(d[0, first].min())
            else:
                dx = rows[:, C_X] - ctrl.root_pos[0]
                dz = rows[:, C_Z] - ctrl.root_pos[2]
                clearance = float(np.min(np.hypot(dx, dz) - rows[:, C_R]))
        items = sorted(((k, round(v, 4)) for k, v in per.items() if v > 0), key=lambda kv: -kv[1])
        pen_out: dict = {"total": round(total, 4), "obstacles": [[k, v] for k, v in items[:12]]}
        if cc is not None and cc.chooser.last is not None:
            r = cc.chooser.last
            pen_out["search"] = {"method": cc.last_method or r.method, "penalty": round(float(r.penalty), 4),
                                 "collides": bool(r.collides)}
        out["penalties"] = pen_out
        out["clearance"] = round(clearance, 3) if np.isfinite(clearance) else None
        used = cc.chooser.controls if cc is not None else _controls(character.controls, self.settings.controls)
        out["controls"] = {k: round(float(getattr(used, k)), 3) for k in CONTROL_NAMES}  # as the last search used
        return out


def warm_up(db) -> None:
    """Build the shared matcher of ``db`` and run one penalised search with an obstacle
    near (compiles the search kernels before the first page connects)."""
    from types import SimpleNamespace

    from motionmatch.runtime.controller import Controller

    env = ViewerEnvironment(db)
    env.set_obstacles([{"id": 0, "shape": "disk", "center": [0.0, 0.6], "radius": 0.3}], 0.0)
    ctrl = Controller(db)
    ch = SimpleNamespace(id=0, controls={}, ctrl=ctrl, settings=ctrl.s, tap=SimpleNamespace(inner=None),
                         follower=None, root_xz=(0.0, 0.0), intent_filter=None, path_filter=None)
    env.attach(ch)
    ctrl.chooser = ch.tap.inner
    from motionmatch.control.intent import Intent

    ctrl.update(1 / 60, Intent(velocity=[0.0, 0.0, 1.3], gait="walk"), force_search=True)
    env.debug(ch)
    env.set_obstacles([], 0.0)  # and the plain search, when nothing is near
    ctrl.update(1 / 60, Intent(velocity=[0.0, 0.0, 1.3], gait="walk"), force_search=True)
