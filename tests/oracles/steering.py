"""Crowd steering agent by agent in numpy: what the compiled steering of many agents at once
(:func:`motionmatch.runtime.crowd.steer_all`) is checked against."""

from __future__ import annotations

import numpy as np

from motionmatch.runtime.crowd import SteeringSettings

__all__ = ["steer"]


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
            dd = d + f * perp
            d = dd / max(np.hypot(*dd), 1e-9)
    return d * v
