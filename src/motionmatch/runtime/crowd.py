"""Rule-based crowd steering that produces target trajectories for environment-aware agents.

Each agent heads for its goal (through optional waypoints) at its preferred speed, slowing
down over the last ``slow_distance`` metres. It looks ahead in a cone of vision (half
angle ``view_angle_deg`` around its heading to the goal, ``view_distance`` deep); if other
agents are in it, a lateral force perpendicular to the direction toward the nearest one,
pointing away from it and growing as it gets closer, bends the desired direction (paper
Sec. 6.1.5). The result is an :class:`~motionmatch.control.intent.Intent` whose spring
prediction is the agent's target trajectory; the environment-aware search then picks
poses and root motion that follow it while avoiding the obstacles and the other agents'
future bodies. Obstacles are left to the search: steering only spreads agents out.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.runtime.inputs import IDLE, InputSource, Want

__all__ = ["SteeringInput", "SteeringSettings", "steer", "steer_all"]


@dataclass(frozen=True)
class SteeringSettings:
    """Crowd steering parameters (metres, degrees, m/s)."""

    view_angle_deg: float = 60.0
    view_distance: float = 3.0
    lateral_gain: float = 1.2
    arrive_distance: float = 0.4
    slow_distance: float = 1.0
    waypoint_radius: float = 1.0

    @classmethod
    def from_dict(cls, d: dict | None) -> SteeringSettings:
        d = dict(d or {})
        names = {f.name for f in fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise ValueError(f"unknown steering field(s) {bad}; known: {sorted(names)}")
        return cls(**{k: float(v) for k, v in d.items()})


def steer(p: np.ndarray, goal: np.ndarray, speed: float, others: np.ndarray, s: SteeringSettings,
          side: float = 1.0) -> np.ndarray:
    """Desired planar velocity ``[2]`` (x, z) of an agent at ``p`` heading for ``goal`` among
    ``others [M, 2]`` (positions of the other agents). ``side`` (+-1) breaks ties when
    another agent is dead ahead."""
    to_goal = np.asarray(goal, dtype=np.float64) - p
    dist = float(np.hypot(*to_goal))
    if dist < s.arrive_distance:
        return np.zeros(2)
    d = to_goal / dist
    v = speed * min(1.0, dist / max(s.slow_distance, 1e-6))
    if len(others):
        rel = others - p
        r = np.hypot(rel[:, 0], rel[:, 1])
        cosang = (rel @ d) / np.maximum(r, 1e-9)
        seen = (r < s.view_distance) & (r > 1e-6) & (cosang > np.cos(np.radians(s.view_angle_deg)))
        if seen.any():
            j = int(np.flatnonzero(seen)[np.argmin(r[seen])])
            n = rel[j] / r[j]
            left = np.array([-d[1], d[0]])  # the heading turned +90 degrees in the (x, z) plane
            cross = d[0] * n[1] - d[1] * n[0]  # > 0: the other agent is on the `left` side
            away = -np.sign(cross) if abs(cross) > 1e-3 else side
            perp = np.array([-n[1], n[0]])  # perpendicular to the direction toward the other
            if (perp @ left) * away < 0:
                perp = -perp
            f = s.lateral_gain * (1.0 - r[j] / s.view_distance)
            lat = perp
            dd = d + f * lat
            d = dd / max(np.hypot(*dd), 1e-9)
    return d * v


class SteeringInput(InputSource):
    """An agent input (for :class:`~motionmatch.runtime.world.World`) that steers toward a
    goal, or through ``waypoints`` then the goal, among the world's other agents."""

    def __init__(self, world, goal, speed: float, settings: SteeringSettings | None = None,
                 waypoints=None, side: float = 1.0):
        self.world = world
        pts = [] if waypoints is None else [np.asarray(w, dtype=np.float64) for w in waypoints]
        self.targets = [*pts, np.asarray(goal, dtype=np.float64)]
        self.speed = float(speed)
        self.s = settings or SteeringSettings()
        self.side = side
        self._k = 0
        #: whether the agent reached its goal (within ``arrive_distance``, after the waypoints)
        self.arrived = False

    def intent(self, agent, t: float, dt: float) -> Want:
        p = agent.root_xz
        while self._k < len(self.targets) - 1 and np.hypot(*(self.targets[self._k] - p)) < self.s.waypoint_radius:
            self._k += 1
        pos, uids = self.world.ground_positions()
        others = pos[uids != agent.uid]
        if self._k == len(self.targets) - 1 and np.hypot(*(self.targets[-1] - p)) < self.s.arrive_distance:
            self.arrived = True
        v = steer(p, self.targets[self._k], self.speed, others, self.s, self.side)
        sp = float(np.hypot(*v))
        if sp < 0.05:
            return IDLE
        return Want(Intent(velocity=[v[0], 0.0, v[1]], gait="walk" if sp < 2.5 else "run"))


# ============================================================================ batched crowd
def steer_all(pos: np.ndarray, idx: np.ndarray, aims: np.ndarray, speeds: np.ndarray, sides: np.ndarray,
              s: SteeringSettings) -> np.ndarray:
    """:func:`~motionmatch.runtime.crowd.steer` for many characters at once.

    Args:
        pos: ``[N, 2]`` ground positions of every character (the ones each sees).
        idx: ``[A]`` rows of ``pos`` that are steered.
        aims: ``[A, 2]`` their current targets; speeds: ``[A]`` preferred speeds (m/s);
        sides: ``[A]`` +-1 tie-breakers.

    Returns:
        ``[A, 2]`` desired velocities (m/s).
    """
    p = pos[idx]
    to = aims - p
    dist = np.hypot(to[:, 0], to[:, 1])
    d = to / np.maximum(dist, 1e-9)[:, None]
    v = speeds * np.minimum(1.0, dist / max(s.slow_distance, 1e-6))
    v[dist < s.arrive_distance] = 0.0
    rel = pos[None, :, :] - p[:, None, :]  # [A, N]: from each steered character to every character
    r = np.hypot(rel[..., 0], rel[..., 1])
    r[np.arange(len(idx)), idx] = np.inf
    cosang = np.einsum("ijc,ic->ij", rel, d) / np.maximum(r, 1e-9)
    seen = (r < s.view_distance) & (cosang > np.cos(np.radians(s.view_angle_deg)))
    rr = np.where(seen, r, np.inf)
    j = np.argmin(rr, axis=1) if rr.shape[1] else np.zeros(len(idx), dtype=np.int64)
    has = np.isfinite(rr[np.arange(len(idx)), j]) if rr.shape[1] else np.zeros(len(idx), dtype=bool)
    if has.any():
        a = np.flatnonzero(has)
        rj = r[a, j[a]]
        n = rel[a, j[a]] / rj[:, None]
        da = d[a]
        left = np.stack([-da[:, 1], da[:, 0]], axis=1)
        cross = da[:, 0] * n[:, 1] - da[:, 1] * n[:, 0]
        away = np.where(np.abs(cross) > 1e-3, -np.sign(cross), sides[a])
        perp = np.stack([-n[:, 1], n[:, 0]], axis=1)
        perp[np.einsum("ic,ic->i", perp, left) * away < 0] *= -1.0
        f = s.lateral_gain * (1.0 - rj / s.view_distance)
        nd = da + f[:, None] * perp
        d[a] = nd / np.maximum(np.hypot(nd[:, 0], nd[:, 1]), 1e-9)[:, None]
    return d * v[:, None]


def _steer_all(pos: np.ndarray, targets: np.ndarray, speeds: np.ndarray, active: np.ndarray,
               s: SteeringSettings) -> np.ndarray:
    """:func:`steer` for every agent of a :class:`Crowd` at once: ``[A, 2]`` desired
    velocities (inactive agents stand but are still seen; even/odd agents break ties
    to opposite sides)."""
    n = len(pos)
    sides = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return steer_all(pos, np.arange(n), targets, np.where(active, speeds, 0.0), sides, s)


class Crowd:
    """Many environment-aware characters stepped together, vectorised over agents.

    The per-character :class:`~motionmatch.runtime.controller.Controller` costs a few hundred
    microseconds of Python per frame; a crowd needs less. Here every per-frame step is one
    numpy operation over all agents: steering (:func:`steer`, cone of vision and lateral
    force), the target trajectory (the steering velocity approached by an exponential damper,
    predicted in closed form at the ellipse offsets), playback of the matched clip with its
    root motion, and inertialization (rotation offsets decaying exponentially). Searches are
    spread over frames (agent ``i`` searches on frames ``i mod n``, ``n`` frames apart) and
    use the same penalised search, obstacles and other agents' future ellipses as
    :class:`~motionmatch.runtime.world.World`. No foot locking.

    Args:
        db: database; scene: obstacles; settings: :class:`~motionmatch.runtime.world.EnvironmentSettings`.
        matcher: a shared :class:`~motionmatch.runtime.world.EnvironmentMatcher`.
        search_interval: seconds between an agent's searches (default 10 frames at 60 Hz).
        transition_ratio: switch only when the best score is below this times the current one.
        velocity_halflife: of the target-trajectory damper (s).
        blend_halflife: of the inertialization offsets (s).
        record_poses: keep local poses (for previews and metrics from skeletons).
    """

    def __init__(self, db, scene=None, *, settings=None, matcher=None, search_interval: float = 10 / 60,
                 transition_ratio: float = 0.9, velocity_halflife: float = 0.25, blend_halflife: float = 0.1,
                 fps: float = 60.0, locomotion_tags: str = "!dance & !creep & !jump", record_poses: bool = False,
                 steering: SteeringSettings | None = None):
        from motionmatch.anim import quat
        from motionmatch.environment.scene import Scene
        from motionmatch.runtime.world import EnvironmentMatcher, EnvironmentSettings

        self.db = db
        self.scene = scene or Scene()
        self.settings = settings or EnvironmentSettings()
        self.matcher = matcher or EnvironmentMatcher(db)
        self.fps = float(fps)
        self.interval = max(1, round(search_interval * fps))
        self.ratio = float(transition_ratio)
        self.vel_hl = float(velocity_halflife)
        self.blend_hl = float(blend_halflife)
        self.record_poses = record_poses
        self.steering = steering or SteeringSettings()
        try:
            m = db.mask(locomotion_tags)
        except Exception:  # unknown tag: every valid frame
            m = db.valid.copy()
        self.mask = m if m.any() else db.valid.copy()
        speed = db.root_speeds()
        ok = np.flatnonzero(self.mask)
        self.rest_frame = int(ok[np.argmin(speed[ok])])
        self.db_pos = db.translations[:, 0, [0, 2]].astype(np.float64)
        self.db_yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
        self.clip_last = (db.clip_stops[db.frame_clip] - 1).astype(np.int64)
        # trajectory feature columns: (column x, column z, offset index, is position)
        times = list(db.schema.trajectory_offsets)
        self.offsets = np.asarray(times)
        self.traj_cols = []
        for t in db.schema.terms:
            if not t.is_trajectory:
                continue
            sl = db.schema.slice(t.name)
            step = 3 if t.vertical else 2
            for n, o in enumerate(t.offsets):
                self.traj_cols.append((sl.start + step * n, sl.start + step * n + step - 1, times.index(o),
                                       t.kind == "trajectory_position"))
        self.agents: list = []
        self.time = 0.0
        self.frame_count = 0
        self._state = None

    # ------------------------------------------------------------------ setup
    def add_agent(self, name: str, start, facing=(0.0, 1.0), goal=None, *, speed: float = 1.3, waypoints=None,
                  controls=None, environment: bool = True, start_time: float = 0.0, path=None):
        from types import SimpleNamespace

        from motionmatch.search.penalized import SearchOptions

        targets = [] if waypoints is None else [np.asarray(w, dtype=np.float64) for w in waypoints]
        goal = np.asarray(start if goal is None else goal, dtype=np.float64)
        a = SimpleNamespace(name=name, start=np.asarray(start, dtype=np.float64), facing=np.asarray(facing, float),
                            targets=[*targets, goal], goal=goal, speed=float(speed), path=path,
                            controls=controls or self.settings.controls, environment=environment,
                            start_time=float(start_time), chooser=None, log=None, k=0,
                            options=self.settings.search if environment else SearchOptions(method="plain"))
        from motionmatch.runtime.world import SearchLog

        a.log = SearchLog()
        self.agents.append(a)
        self._state = None
        return a

    def _init_state(self) -> None:
        A = len(self.agents)
        J = self.db.skeleton.num_joints
        self.pos = np.array([a.start for a in self.agents]).reshape(A, 2)
        self.yaw = np.array([np.arctan2(a.facing[0], a.facing[1]) for a in self.agents])
        self.frame_pos = np.full(A, float(self.rest_frame))
        self.vel = np.zeros((A, 2))
        self.previous = np.full(A, -1, dtype=np.int64)
        self.phase = np.arange(A) % self.interval
        self.rot_off = np.zeros((A, J - 1, 3))  # inertialization: rotation vectors
        self.pos_off = np.zeros((A, J - 1, 3))
        self.speeds = np.array([a.speed for a in self.agents])
        self._state = True

    # ------------------------------------------------------------------ stepping
    def _targets(self) -> np.ndarray:
        out = np.empty((len(self.agents), 2))
        for i, a in enumerate(self.agents):
            while a.k < len(a.targets) - 1 and np.hypot(*(a.targets[a.k] - self.pos[i])) < self.steering.waypoint_radius:
                a.k += 1
            out[i] = a.targets[a.k]
        return out

    def _agent_rows(self):
        from motionmatch.environment.body import body_obstacle_rows

        K = len(self.matcher.slots)
        A = len(self.agents)
        e = self.matcher.ellipses[self.frame_pos.astype(np.int64)]  # [A, K, 5|7]
        rows = body_obstacle_rows(e, self.pos, self.yaw, -1 - np.arange(A), self.settings.penalty.height_top)
        return rows, np.tile(np.arange(K), A), np.repeat(np.arange(A), K)

    def _query(self, i: int, frame: int) -> np.ndarray:
        """Normalised query (all columns) of agent ``i`` playing ``frame``."""
        db = self.db
        raw = db.raw_features[frame].astype(np.float64).copy()
        lam = np.log(2.0) / max(self.vel_hl, 1e-6)
        v0 = self.vel[i]
        vg = self.goal_vel[i]
        t = self.offsets
        decay = (1.0 - np.exp(-lam * t)) / lam
        disp = vg[None, :] * t[:, None] + (v0 - vg)[None, :] * decay[:, None]  # [K, 2] world
        vel_t = vg[None, :] + (v0 - vg)[None, :] * np.exp(-lam * t)[:, None]
        c, s = np.cos(self.yaw[i]), np.sin(self.yaw[i])
        lx = c * disp[:, 0] - s * disp[:, 1]
        lz = s * disp[:, 0] + c * disp[:, 1]
        sp = np.hypot(vel_t[:, 0], vel_t[:, 1])
        dirx = np.where(sp > 0.05, vel_t[:, 0] / np.maximum(sp, 1e-9), np.sin(self.yaw[i]))
        dirz = np.where(sp > 0.05, vel_t[:, 1] / np.maximum(sp, 1e-9), np.cos(self.yaw[i]))
        dlx = c * dirx - s * dirz
        dlz = s * dirx + c * dirz
        for cx, cz, k, is_pos in self.traj_cols:
            raw[cx], raw[cz] = (lx[k], lz[k]) if is_pos else (dlx[k], dlz[k])
        q = db.normalize(raw)
        if self.matcher.vcols.size:
            q[self.matcher.vcols] = 0.0
        return q.astype(np.float64), np.stack([lx, lz], axis=1)

    def _search(self, i: int, rows_all) -> None:
        import time as _time

        from motionmatch.geometry.shapes import ROW
        from motionmatch.search.penalized import prepare_obstacles

        t0 = _time.perf_counter()
        c0 = _time.thread_time()
        a = self.agents[i]
        m = self.matcher
        st = self.settings
        cur = int(self.frame_pos[i])
        q_full, traj_local = self._query(i, cur)
        q = q_full[m.cols]
        K = len(m.slots)
        nearest = np.inf
        if a.environment:
            c, s = np.cos(self.yaw[i]), np.sin(self.yaw[i])
            pts_local = np.vstack([[0.0, 0.0], traj_local])
            pts_world = np.stack([self.pos[i, 0] + c * pts_local[:, 0] + s * pts_local[:, 1],
                                  self.pos[i, 1] - s * pts_local[:, 0] + c * pts_local[:, 1]], axis=1)
            radius = st.penalty.threshold + st.reach + st.penalty.margin
            rows, slot_of = self.scene.query(self.time, pts_world, radius, m.slots)
            ar, asl, owner = rows_all
            keep = owner != i
            rows = np.concatenate([rows, ar[keep]])
            slot_of = np.concatenate([slot_of, asl[keep]])
            obs, cnt, nearest = prepare_obstacles(rows, slot_of, self.pos[i], self.yaw[i], pts_local, radius, K)
        else:
            obs, cnt = np.zeros((K, 1, ROW)), np.zeros(K, dtype=np.int64)
        ctl = a.controls
        ev = 1.0
        if np.isfinite(nearest) and ctl.evasion < 1.0:
            ev = ctl.evasion + (1.0 - ctl.evasion) * float(np.clip((nearest - st.body_radius) / st.penalty.threshold,
                                                                   0.0, 1.0))
        w = m.weights(ctl, ev)
        envw = st.penalty.env_weight * (1.0 + ctl.anticipation * float(np.hypot(*self.goal_vel[i])))
        prev = int(self.previous[i]) if self.previous[i] >= 0 else None
        c1 = _time.thread_time()
        res = m.search.search(q, obs, cnt, mask=self.mask, init_index=cur if self.mask[cur] else None,
                              previous=prev, weights=w, penalty=st.penalty, env_weight=envw, options=a.options)
        c2 = _time.thread_time()
        self.previous[i] = res.index
        cur_score = float(m.search.score(np.array([cur]), q, obs, cnt, weights=w, penalty=st.penalty,
                                         env_weight=envw)[0])
        at_end = self.frame_pos[i] >= self.clip_last[cur]
        same_ahead = (self.db.frame_clip[res.index] == self.db.frame_clip[cur] and 0 <= res.index - cur <= 10)
        if at_end or (not same_ahead and res.score < self.ratio * cur_score):
            self._transition(i, res.index)
        lg = a.log
        lg.times.append(_time.perf_counter() - t0)
        lg.cpu_times.append(_time.thread_time() - c0)
        lg.search_cpu_times.append(c2 - c1)
        lg.methods.append(res.method)
        lg.collides.append(res.collides)
        lg.obstacles.append(int(cnt.sum()))
        lg.frames.append(res.index)

    def _transition(self, i: int, frame: int) -> None:
        from motionmatch.anim import quat

        cur = int(self.frame_pos[i])
        db = self.db
        shown = quat.mul(quat.exp(self.rot_off[i]), db.rotations[cur, 1:].astype(np.float64))
        self.rot_off[i] = quat.log(quat.mul_inv(shown, db.rotations[frame, 1:].astype(np.float64)))
        self.pos_off[i] = self.pos_off[i] + db.translations[cur, 1:] - db.translations[frame, 1:]
        self.frame_pos[i] = float(frame)

    def step(self, dt: float) -> None:
        """Advance every agent by ``dt`` seconds."""
        if self._state is None:
            self._init_state()
        A = len(self.agents)
        active = np.array([self.time + 1e-9 >= a.start_time for a in self.agents])
        self.goal_vel = _steer_all(self.pos, self._targets(), self.speeds, active, self.steering)
        # playback with root motion
        old = self.frame_pos.astype(np.int64)
        self.frame_pos = np.minimum(self.frame_pos + dt * self.db.fps, self.clip_last[old].astype(np.float64))
        new = self.frame_pos.astype(np.int64)
        d = self.db_pos[new] - self.db_pos[old]
        oy = self.db_yaw[old]
        turn = self.yaw - oy
        c, s = np.cos(turn), np.sin(turn)
        self.pos = self.pos + np.stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]], axis=1)
        dy = (self.db_yaw[new] - oy + np.pi) % (2 * np.pi) - np.pi
        self.yaw = (self.yaw + dy + np.pi) % (2 * np.pi) - np.pi
        # target-trajectory damper
        k = 1.0 - 0.5 ** (dt / max(self.vel_hl, 1e-6))
        self.vel = self.vel + (self.goal_vel - self.vel) * k
        # inertialization offsets decay
        f = 0.5 ** (dt / max(self.blend_hl, 1e-6))
        self.rot_off *= f
        self.pos_off *= f
        # searches: agents whose turn it is, and agents at the end of their clip
        due = (self.frame_count % self.interval) == self.phase
        due |= self.frame_pos >= self.clip_last[self.frame_pos.astype(np.int64)]
        if self.frame_count == 0:
            due[:] = True
        if due.any():
            rows_all = self._agent_rows()
            for i in np.flatnonzero(due):
                self._search(int(i), rows_all)
        self.time += dt
        self.frame_count += 1
        _ = A

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """``[A, J, 4]`` local rotations and ``[A, J, 3]`` translations (joint 0: the root)."""
        from motionmatch.anim import quat

        db = self.db
        fr = self.frame_pos.astype(np.int64)
        A, J = len(self.agents), db.skeleton.num_joints
        rot = np.empty((A, J, 4))
        tr = np.empty((A, J, 3))
        rot[:, 0] = quat.from_angle_y(self.yaw)
        tr[:, 0] = np.stack([self.pos[:, 0], np.zeros(A), self.pos[:, 1]], axis=1)
        rot[:, 1:] = quat.mul(quat.exp(self.rot_off), db.rotations[fr, 1:].astype(np.float64))
        tr[:, 1:] = db.translations[fr, 1:] + self.pos_off
        return rot, tr

    def run(self, n_frames: int, *, progress: bool = False):
        """Step ``n_frames`` frames and record them (a :class:`~motionmatch.runtime.world.WorldRecord`)."""
        import time as _time

        from tqdm import tqdm

        from motionmatch.runtime.world import WorldRecord

        if self._state is None:
            self._init_state()
        A = len(self.agents)
        J = self.db.skeleton.num_joints
        K = len(self.matcher.slots)
        dt = 1.0 / self.fps
        pos = np.zeros((A, n_frames, 3))
        yaw = np.zeros((A, n_frames))
        frames = np.zeros((A, n_frames), dtype=np.int64)
        searched = np.zeros((A, n_frames), dtype=bool)
        rots = np.zeros((A, n_frames, J, 4), dtype=np.float32) if self.record_poses else None
        trs = np.zeros((A, n_frames, J, 3), dtype=np.float32) if self.record_poses else None
        secs = np.zeros(n_frames)
        for f in tqdm(range(n_frames), desc="simulating crowd", unit="frame", disable=not progress):
            n0 = [len(a.log.times) for a in self.agents]
            t0 = _time.perf_counter()
            self.step(0.0 if self.frame_count == 0 else dt)
            secs[f] = _time.perf_counter() - t0
            pos[:, f, 0], pos[:, f, 2] = self.pos[:, 0], self.pos[:, 1]
            yaw[:, f] = self.yaw
            frames[:, f] = self.frame_pos.astype(np.int64)
            searched[:, f] = [len(a.log.times) > n for a, n in zip(self.agents, n0)]
            if self.record_poses:
                rots[:, f], trs[:, f] = self.pose()
        desired = np.full((A, n_frames, K, 3), np.nan, dtype=np.float32)
        return WorldRecord([a.name for a in self.agents], self.fps, pos, yaw, frames, searched, desired, rots, trs,
                           secs, [a.log for a in self.agents])


def crowd_from_scenario(db, scenario, *, settings=None, matcher=None, record_poses: bool = False) -> Crowd:
    """A :class:`Crowd` from a scenario whose agents steer toward goals (path and script
    agents are not supported here: use :class:`~motionmatch.runtime.world.World`)."""
    from motionmatch.runtime.world import EnvironmentSettings

    sc = scenario
    if settings is None:
        settings = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"))
    kw = {}
    if "search_interval" in sc.controller:
        kw["search_interval"] = float(sc.controller["search_interval"])
    if "locomotion_tags" in sc.database:
        kw["locomotion_tags"] = sc.database["locomotion_tags"]
    crowd = Crowd(db, sc.scene(), settings=settings, matcher=matcher, fps=sc.fps, record_poses=record_poses,
                  steering=SteeringSettings.from_dict(sc.steering), **kw)
    for a in sc.agents:
        if a.input_kind not in ("goal", "idle"):
            raise ValueError(f"agent {a.name!r}: the batched crowd runs goal (steering) agents only, not {a.input_kind}")
        controls = settings.controls.with_(**a.controls) if a.controls else settings.controls
        crowd.add_agent(a.name, a.start, a.facing, a.goal, speed=a.speed, waypoints=a.via, controls=controls,
                        environment=a.environment, start_time=a.start_time)
    return crowd
