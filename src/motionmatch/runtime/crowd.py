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

A crowd is a :class:`~motionmatch.runtime.world.World` whose agents have
:class:`SteeringInput` inputs. Each world step steers all of them at once
(:func:`steer_all`: one compiled pass, the neighbours each agent can see found through a
uniform grid of the agents' positions, not among all pairs); the per-agent rule in
``tests/oracles/steering.py`` is what it is checked against.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, fields

import numba
import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.geometry.grid import point_grid
from motionmatch.runtime.inputs import IDLE, InputSource, Want

__all__ = ["SteeringInput", "SteeringSettings", "steer_all"]


#: steered speeds (m/s) under which an agent stands, and from which it runs rather than walks
STILL_BELOW = 0.05
RUN_FROM = 2.5


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


def steer_all(pos: np.ndarray, idx: np.ndarray, aims: np.ndarray, speeds: np.ndarray, sides: np.ndarray,
              s: SteeringSettings) -> np.ndarray:
    """Desired planar velocities of many agents at once (the module docstring's rule).

    Args:
        pos: ``[N, 2]`` ground positions (x, z, m) of every agent (the ones each sees).
        idx: ``[A]`` rows of ``pos`` that are steered.
        aims: ``[A, 2]`` their current targets (m); speeds: ``[A]`` preferred speeds (m/s);
        sides: ``[A]`` +-1, the side to turn to when another agent is dead ahead.
        s: the steering settings.

    Returns:
        ``[A, 2]`` desired velocities (x, z, m/s). Each agent sees the others within
        ``view_distance`` through a grid of ``view_distance`` cells over ``pos``.
    """
    pos = np.ascontiguousarray(pos, dtype=np.float64).reshape(-1, 2)
    idx = np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)
    out = np.zeros((len(idx), 2))
    if not len(idx):
        return out
    cell = max(float(s.view_distance), 1e-3)
    start, items, nx, nz, x0, z0 = point_grid(pos, cell)
    _steer_rows(pos, idx, np.ascontiguousarray(aims, dtype=np.float64).reshape(-1, 2),
                np.ascontiguousarray(speeds, dtype=np.float64).reshape(-1),
                np.ascontiguousarray(sides, dtype=np.float64).reshape(-1), math.cos(math.radians(s.view_angle_deg)),
                float(s.view_distance), float(s.lateral_gain), float(s.arrive_distance), float(s.slow_distance),
                start, items, nx, nz, x0, z0, cell, out)
    return out


@numba.njit(cache=True, nogil=True)
def _steer_rows(pos, idx, aims, speeds, sides, view_cos, view, gain, arrive, slow, cell_start, items, nx, nz, x0, z0,
                cell, out):
    """:func:`steer_all`'s loop: for each steered agent, the nearest other agent in its cone
    of vision among the grid cells within ``view`` of it, and the velocity into ``out``."""
    for a in range(idx.shape[0]):
        i = idx[a]
        px = pos[i, 0]
        pz = pos[i, 1]
        tx = aims[a, 0] - px
        tz = aims[a, 1] - pz
        dist = math.hypot(tx, tz)
        if dist < arrive:
            out[a, 0] = 0.0
            out[a, 1] = 0.0
            continue
        dx = tx / dist
        dz = tz / dist
        v = speeds[a] * min(1.0, dist / max(slow, 1e-6))
        best = np.inf
        j = -1
        far2 = view * view * (1.0 + 1e-9)  # (surely out of view beyond: no square root)
        i0 = max(int(np.floor((px - view - x0) / cell)), 0)
        i1 = min(int(np.floor((px + view - x0) / cell)), nx - 1)
        j0 = max(int(np.floor((pz - view - z0) / cell)), 0)
        j1 = min(int(np.floor((pz + view - z0) / cell)), nz - 1)
        for ci in range(i0, i1 + 1):
            for cj in range(j0, j1 + 1):
                c = ci * nz + cj
                for k in range(cell_start[c], cell_start[c + 1]):
                    m = items[k]
                    if m == i:
                        continue
                    rx = pos[m, 0] - px
                    rz = pos[m, 1] - pz
                    ahead = rx * dx + rz * dz
                    if (view_cos >= 0.0 and ahead <= 0.0) or rx * rx + rz * rz > far2:
                        continue  # (behind, with a cone of vision under 180 degrees; or too far)
                    r = math.hypot(rx, rz)
                    if not (r < view and r > 1e-6 and ahead / max(r, 1e-9) > view_cos):
                        continue
                    if r < best or (r == best and m < j):  # the nearest; ties: the first agent
                        best = r
                        j = m
        if j >= 0:
            nxx = (pos[j, 0] - px) / best
            nzz = (pos[j, 1] - pz) / best
            # the heading turned +90 degrees (left), and which side of it the other agent is on
            cross = dx * nzz - dz * nxx
            away = (-1.0 if cross > 0 else 1.0) if abs(cross) > 1e-3 else sides[a]
            ppx = -nzz  # perpendicular to the direction toward the other, pointing away from it
            ppz = nxx
            if (ppx * -dz + ppz * dx) * away < 0:
                ppx = -ppx
                ppz = -ppz
            f = gain * (1.0 - best / view)
            ddx = dx + f * ppx
            ddz = dz + f * ppz
            n = max(math.hypot(ddx, ddz), 1e-9)
            dx = ddx / n
            dz = ddz / n
        out[a, 0] = dx * v
        out[a, 1] = dz * v


class SteeringInput(InputSource):
    """An agent input (for :class:`~motionmatch.runtime.world.World`) that steers toward a
    goal, or through ``waypoints`` then the goal, among the world's other agents.

    Every world step, the first steering input asked steers every agent of the world
    whose input is a :class:`SteeringInput` at once (:func:`steer_all`); the others read
    their row."""

    def __init__(self, world, goal, speed: float, settings: SteeringSettings | None = None,
                 waypoints=None, side: float = 1.0):
        self.world = world
        pts = [] if waypoints is None else [np.asarray(w, dtype=np.float64) for w in waypoints]
        self.targets = [*pts, np.asarray(goal, dtype=np.float64)]
        self.speed = float(speed)
        self.s = settings or SteeringSettings()
        self.side = side
        self._k = 0
        self._crowd: _Crowd | None = None  # the world's steering (looked up on first use)
        #: ``(world frame, agent uid, target index, want, arrived)``: this step's, made by the
        #: world's steering for the whole group (read without a lookup)
        self._now: tuple | None = None
        #: whether the agent reached its goal (within ``arrive_distance``, after the waypoints)
        self.arrived = False

    def aim(self, p: np.ndarray) -> tuple[int, np.ndarray]:
        """``(k, target)``: the target an agent at ``p [2]`` heads for now (the waypoints
        within ``waypoint_radius`` passed), and its index in :attr:`targets`."""
        k = self._k
        while k < len(self.targets) - 1 and math.hypot(*(self.targets[k] - p)) < self.s.waypoint_radius:
            k += 1
        return k, self.targets[k]

    def intent(self, agent, t: float, dt: float) -> Want:
        world = self.world
        now = self._now
        if now is None or now[0] != world.frame:
            crowd = self._crowd
            if crowd is None or crowd._world() is not world:
                crowd = self._crowd = _crowd(world)
            crowd.steer_once(world)  # (every steering agent of the world, this step's wants into their inputs)
            now = self._now
        if now is not None and now[0] == world.frame and now[1] == agent.uid:
            _, _, self._k, want, arrived = now  # (steered with the world's other steering agents this step)
            if arrived:
                self.arrived = True
            return want
        # an input the step did not see (e.g. inside another input): steered alone
        pos, uids = world.ground_positions()
        p = agent.root_xz
        self._k, aim = self.aim(p)
        v = steer_all(np.vstack([p[None], pos[uids != agent.uid]]), np.zeros(1, dtype=np.int64), aim[None],
                      np.array([self.speed]), np.array([self.side], dtype=np.float64), self.s)[0]
        goal = self.targets[self._k]
        if self._k == len(self.targets) - 1 and math.hypot(goal[0] - p[0], goal[1] - p[1]) < self.s.arrive_distance:
            self.arrived = True
        vx, vz = float(v[0]), float(v[1])
        sp = math.hypot(vx, vz)
        if sp < STILL_BELOW:
            return IDLE
        return Want(Intent.planar(vx, vz, "walk" if sp < RUN_FROM else "run"))


class _Crowd:
    """The steering of one world's :class:`SteeringInput` agents, all at once per step.

    The agents are grouped by their settings' values (one :func:`steer_all` call each: a
    scenario's groups, each with its own settings object, usually make one); a group's
    arrays (targets padded to the longest route, speeds, sides) are kept while the world's
    agents and their inputs stay the same, and each step advances every agent's target
    past the waypoints it is within reach of in a few vectorised passes."""

    def __init__(self, world):
        self._world = weakref.ref(world)
        self._frame: int | None = None
        self._key: tuple | None = None  # (the inputs' ids, in the world's order): when the groups were built
        self._groups: list[tuple] = []

    def steer_once(self, world) -> None:
        """Steer every steering agent of ``world`` for this step, unless done already:
        each input's ``_now`` holds its agent's want (see :meth:`_steer`)."""
        if self._frame != world.frame:
            self._steer(world)

    def _build(self, world, key: tuple) -> None:
        """The groups of the world's steering agents (by settings, compared by value) and their arrays."""
        members: dict[int, list] = {}
        at = world._global_rows().tolist()  # (each agent's row of world.ground_positions)
        for n, a in zip(at, world.agents):
            if isinstance(a.source, SteeringInput):
                members.setdefault(a.source.s, []).append((n, a.uid, a.source))
        self._groups = []
        for ms in members.values():
            srcs = [m[2] for m in ms]
            T = max(len(s.targets) for s in srcs)
            targets = np.zeros((len(ms), T, 2))
            for j, s_ in enumerate(srcs):
                targets[j, :len(s_.targets)] = s_.targets
            last = np.array([len(s_.targets) - 1 for s_ in srcs], dtype=np.int64)
            self._groups.append((np.array([m[0] for m in ms], dtype=np.int64), [m[1] for m in ms], srcs, targets, last,
                                 np.array([s_.speed for s_ in srcs]), np.array([s_.side for s_ in srcs], dtype=np.float64),
                                 srcs[0].s))
        self._key = key

    def _steer(self, world) -> None:
        """Every steering agent's want, from where the agents stand at the step's start, into
        its input's ``_now``: ``(world frame, agent uid, target index, want, arrived)``."""
        pos, _uids = world.ground_positions()
        key = tuple(map(id, (a.source for a in world.agents)))
        if key != self._key:
            self._build(world, key)
        for idx, uids, srcs, targets, last, speeds, sides, settings in self._groups:
            k = np.fromiter((s_._k for s_ in srcs), dtype=np.int64, count=len(srcs))
            p = pos[idx]
            rows = np.arange(len(idx))
            while True:  # SteeringInput.aim for all: past every waypoint within reach
                t = targets[rows, k]
                move = (k < last) & (np.hypot(t[:, 0] - p[:, 0], t[:, 1] - p[:, 1]) < settings.waypoint_radius)
                if not move.any():
                    break
                k = k + move
            aims = targets[rows, k]
            v = steer_all(pos, idx, aims, speeds, sides, settings)
            # SteeringInput.intent's rule for the whole group at once (idle, walk or run by the
            # speed; arrived within arrive_distance of the goal)
            sp = np.hypot(v[:, 0], v[:, 1])
            go = sp >= STILL_BELOW
            going = np.flatnonzero(go).tolist()
            gaits = ["run" if r else "walk" for r in (sp[go] >= RUN_FROM).tolist()]
            wants = [IDLE] * len(sp)
            vel = np.zeros((len(sp), 3))
            vel[:, 0], vel[:, 2] = v[:, 0], v[:, 1]
            new = tuple.__new__
            for j, it in zip(going, Intent.planar_rows(vel, going, gaits)):
                wants[j] = new(Want, (it, None, False, False))  # Want(it), without its keyword handling
            K = k.tolist()
            arrived = ((k == last) & (np.hypot(aims[:, 0] - p[:, 0], aims[:, 1] - p[:, 1]) < settings.arrive_distance)
                       ).tolist()
            frame = world.frame
            for s_, uid, kj, w, ar in zip(srcs, uids, K, wants, arrived):
                s_._now = (frame, uid, kj, w, ar)
        self._frame = world.frame


def _crowd(world) -> _Crowd:
    """The :class:`_Crowd` of ``world`` (made on first use, kept by the world: its
    ``steering`` slot; a table beside the worlds would keep every world alive through its
    agents' inputs)."""
    c = world.steering
    if c is None:
        c = world.steering = _Crowd(world)
    return c
