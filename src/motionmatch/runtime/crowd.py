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


# ============================================================================ many agents at once
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
