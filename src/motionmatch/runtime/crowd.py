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

from motionmatch.control.intent import GAIT_INDEX, Intent, IntentRows
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

    A world asks all its agents with this input at once (:meth:`wants_together`): every
    step steers them together (:func:`steer_all`) and their intents come as columns
    (:class:`~motionmatch.control.intent.IntentRows`), not an object per agent; their
    targets and arrivals are kept in the world's steering, in arrays."""

    def __init__(self, world, goal, speed: float, settings: SteeringSettings | None = None,
                 waypoints=None, side: float = 1.0):
        self.world = world
        pts = [] if waypoints is None else [np.asarray(w, dtype=np.float64) for w in waypoints]
        self.targets = [*pts, np.asarray(goal, dtype=np.float64)]
        self.speed = float(speed)
        self.s = settings or SteeringSettings()
        self.side = side
        self._crowd: _Crowd | None = None  # the world's steering (looked up on first use)
        #: ``(group, j)``: where the world's steering keeps this input's target index and
        #: arrival (row ``j`` of ``group``'s arrays), or ``None``: in :attr:`_alone`
        self._slot: tuple[_Group, int] | None = None
        self._alone = [0, False]  # (target index, arrived) while steered alone

    def progress(self) -> tuple[int, bool]:
        """``(target index, arrived)``: :attr:`target_index` and :attr:`arrived`."""
        if self._slot is None:
            return self._alone[0], self._alone[1]
        g, j = self._slot
        return int(g.k[j]), bool(g.arrived[j])

    @property
    def target_index(self) -> int:
        """The index in :attr:`targets` of the target the agent heads for now."""
        return self.progress()[0]

    @property
    def arrived(self) -> bool:
        """Whether the agent reached its goal (within ``arrive_distance``, after the waypoints)."""
        return self.progress()[1]

    def attach(self, group: _Group, j: int) -> None:
        """From now on, the target index and arrival are row ``j`` of ``group``'s arrays (the
        world's steering, :class:`_Crowd`)."""
        self._slot = (group, j)

    def detach(self) -> None:
        """From now on, the target index and arrival are kept here again (steered alone)."""
        self._alone = list(self.progress())
        self._slot = None

    def aim(self, p: np.ndarray) -> tuple[int, np.ndarray]:
        """``(k, target)``: the target an agent at ``p [2]`` heads for now (the waypoints
        within ``waypoint_radius`` passed), and its index in :attr:`targets`."""
        k = self.target_index
        while k < len(self.targets) - 1 and math.hypot(*(self.targets[k] - p)) < self.s.waypoint_radius:
            k += 1
        return k, self.targets[k]

    @staticmethod
    def wants_together(world, at: np.ndarray) -> IntentRows:
        """The intents of the world's agents at rows ``at [n]`` of
        :meth:`~motionmatch.runtime.world.World.ground_positions` (each driven by a
        :class:`SteeringInput`), steered this step with every steering agent of the world
        (once per step, :func:`steer_all`), as columns. Their wants have no desired
        trajectory, no forced search and no root-motion-only step."""
        return _crowd(world).steer_once(world).intents(at)

    def intent(self, agent, t: float, dt: float) -> Want:
        crowd = self._crowd
        world = self.world
        if crowd is None or crowd.world() is not world:
            crowd = self._crowd = _crowd(world)
        crowd.steer_once(world)
        if self._slot is not None and crowd.steers(self):  # (steered with the world's other steering agents)
            g, j = self._slot
            return Want(crowd.intents(g.idx[j:j + 1])[0])
        # an input the world did not ask with the others (e.g. inside another input): steered alone
        pos, uids = world.ground_positions()
        p = agent.root_xz
        k, aim = self.aim(p)
        self._alone[0] = k
        v = steer_all(np.vstack([p[None], pos[uids != agent.uid]]), np.zeros(1, dtype=np.int64), aim[None],
                      np.array([self.speed]), np.array([self.side], dtype=np.float64), self.s)[0]
        goal = self.targets[k]
        if k == len(self.targets) - 1 and math.hypot(goal[0] - p[0], goal[1] - p[1]) < self.s.arrive_distance:
            self._alone[1] = True
        vx, vz = float(v[0]), float(v[1])
        sp = math.hypot(vx, vz)
        if sp < STILL_BELOW:
            return IDLE
        return Want(Intent.planar(vx, vz, "walk" if sp < RUN_FROM else "run"))


@dataclass(eq=False)
class _Group:
    """The steering agents of a world that share settings (one :func:`steer_all` call):
    their rows of the world's ground positions ``idx [m]``, their inputs, targets padded
    to the longest route ``[m, T, 2]``, last target index, speeds, sides; each one's
    target index ``k [m]`` and arrival ``arrived [m]``."""

    idx: np.ndarray
    sources: list
    targets: np.ndarray
    last: np.ndarray
    speeds: np.ndarray
    sides: np.ndarray
    settings: SteeringSettings
    k: np.ndarray
    arrived: np.ndarray


class _Crowd:
    """The steering of one world's :class:`SteeringInput` agents, all at once per step.

    The agents are grouped by their settings' values (one :func:`steer_all` call each: a
    scenario's groups, each with its own settings object, usually make one); a group's
    arrays (targets padded to the longest route, speeds, sides, target indices, arrivals)
    are kept while the world's agents and their inputs stay the same, and each step
    advances every agent's target past the waypoints it is within reach of in a few
    vectorised passes. Each step's velocities and gaits are columns by row of the world's
    ground positions (:meth:`intents`)."""

    def __init__(self, world):
        self.world = weakref.ref(world)
        self._frame: int | None = None
        self._key: int | None = None  # the world's inputs_version when the groups were built
        self._groups: list[_Group] = []
        self._members: set[int] = set()  # ids of the inputs in the groups
        self.velocity = np.zeros((0, 2))  # [G, 2] this step's velocities (x, z, m/s) by ground-position row
        self.gaits = np.zeros(0, dtype=np.int64)  # [G] their gaits (indices of GAITS)

    def steers(self, source: SteeringInput) -> bool:
        """Whether ``source`` is among the inputs steered together."""
        return id(source) in self._members

    def steer_once(self, world) -> _Crowd:
        """Steer every steering agent of ``world`` for this step, unless done already."""
        if self._frame != world.frame:
            self._steer(world)
        return self

    def intents(self, at: np.ndarray) -> IntentRows:
        """This step's intents of the steering agents at ground-position rows ``at [n]``."""
        return IntentRows.planar(self.velocity[at], self.gaits[at])

    def _build(self, world, key: int) -> None:
        """The groups of the world's steering agents (by settings, compared by value) and
        their arrays; each input's target index and arrival carried over."""
        for g in self._groups:
            for src in g.sources:
                src.detach()
        members: dict = {}
        at = world.global_rows().tolist()  # (each agent's row of world.ground_positions)
        for n, a in zip(at, world.agents):
            if isinstance(a.source, SteeringInput):
                members.setdefault(a.source.s, []).append((n, a.source))
        self._groups = []
        for ms in members.values():
            srcs = [m[1] for m in ms]
            T = max(len(s_.targets) for s_ in srcs)
            targets = np.zeros((len(ms), T, 2))
            for j, s_ in enumerate(srcs):
                targets[j, :len(s_.targets)] = s_.targets
            g = _Group(np.array([m[0] for m in ms], dtype=np.int64), srcs, targets,
                       np.array([len(s_.targets) - 1 for s_ in srcs], dtype=np.int64),
                       np.array([s_.speed for s_ in srcs]), np.array([s_.side for s_ in srcs], dtype=np.float64),
                       srcs[0].s, np.array([s_.target_index for s_ in srcs], dtype=np.int64),
                       np.array([s_.arrived for s_ in srcs], dtype=bool))
            for j, s_ in enumerate(srcs):
                s_.attach(g, j)
            self._groups.append(g)
        self._members = {id(s_) for g in self._groups for s_ in g.sources}
        self._key = key

    def _steer(self, world) -> None:
        """Every steering agent's velocity and gait, from where the agents stand at the
        step's start, into :attr:`velocity` and :attr:`gaits` (by ground-position row);
        their targets advanced and arrivals noted."""
        pos, _uids = world.ground_positions()
        key = world.inputs_version
        if key != self._key:
            self._build(world, key)
        G = len(pos)
        velocity, gaits = np.zeros((G, 2)), np.zeros(G, dtype=np.int64)
        for g in self._groups:
            idx, targets, last, settings = g.idx, g.targets, g.last, g.settings
            k = g.k
            p = pos[idx]
            rows = np.arange(len(idx))
            while True:  # SteeringInput.aim for all: past every waypoint within reach
                t = targets[rows, k]
                move = (k < last) & (np.hypot(t[:, 0] - p[:, 0], t[:, 1] - p[:, 1]) < settings.waypoint_radius)
                if not move.any():
                    break
                k = k + move
            aims = targets[rows, k]
            v = steer_all(pos, idx, aims, g.speeds, g.sides, settings)
            # the rule of one agent's intent for the whole group at once: stand under
            # STILL_BELOW m/s, walk under RUN_FROM, else run
            sp = np.hypot(v[:, 0], v[:, 1])
            go = sp >= STILL_BELOW
            velocity[idx] = np.where(go[:, None], v, 0.0)
            gaits[idx] = np.where(go, np.where(sp >= RUN_FROM, GAIT_INDEX["run"], GAIT_INDEX["walk"]), GAIT_INDEX["idle"])
            g.k[:] = k
            g.arrived |= (k == last) & (np.hypot(aims[:, 0] - p[:, 0], aims[:, 1] - p[:, 1]) < settings.arrive_distance)
        self.velocity, self.gaits = velocity, gaits
        self._frame = world.frame


def _crowd(world) -> _Crowd:
    """The :class:`_Crowd` of ``world`` (made on first use, kept by the world: its
    ``steering`` slot; a table beside the worlds would keep every world alive through its
    agents' inputs)."""
    c = world.steering
    if c is None:
        c = world.steering = _Crowd(world)
    return c
