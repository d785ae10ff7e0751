"""The viewer's crowd steering: spawned groups and scenario agents walk to goals or along
target paths among each other.

One :class:`ViewerCrowd` per browser session (made on first use) steers every character given a
target (:meth:`ViewerCrowd.assign`): a goal (through optional waypoints) or a target path
(a polyline, followed by aiming at a point ``lookahead`` metres ahead of the character's
projection on it). The steering is :func:`motionmatch.runtime.crowd.steer`: head for the
target at the preferred speed, slow down near the final goal, and bend the direction by a
lateral force away from the nearest other character in the cone of vision. The result is
the character's :class:`~motionmatch.control.intent.Intent`; obstacles and the other
characters' future bodies are left to the environment-aware search (and its intent
filter).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.runtime.crowd import SteeringSettings, steer, steer_all

__all__ = ["CrowdTarget", "ViewerCrowd", "steer_all"]


@dataclass
class CrowdTarget:
    """Where one character is going.

    Attributes:
        targets: ``[W, 2]`` waypoints then the goal (goal mode), or the path's last point.
        path: ``[P, 2]`` target path (path mode) or ``None``.
        speed: preferred speed (m/s).
        side: +1 / -1, breaks ties when another character is dead ahead.
    """

    targets: np.ndarray
    path: np.ndarray | None = None
    speed: float = 1.3
    side: float = 1.0
    k: int = 0                     # current waypoint
    s: float = 0.0                 # arc length reached on the path
    arrived: bool = False
    cum: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def goal(self) -> np.ndarray:
        return self.targets[-1]


class ViewerCrowd:
    """Crowd steering of one viewer session (see the module doc): ``assign`` a target,
    ``intent(character, dt)`` every tick, ``before_step`` once per tick, ``release`` a
    removed character.

    Args:
        db: the session's database (unused: steering needs positions only).
        settings: :class:`~motionmatch.runtime.crowd.SteeringSettings`.
        lookahead: metres ahead on a target path that a character aims at.
    """

    def __init__(self, db=None, settings: SteeringSettings | None = None, lookahead: float = 2.0):
        self.settings = settings or SteeringSettings()
        self.lookahead = float(lookahead)
        self.targets: dict[int, CrowdTarget] = {}
        self._ids = np.zeros(0, dtype=np.int64)
        self._pos = np.zeros((0, 2))
        self._vel: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ targets
    def assign(self, character, *, goal=None, via=None, path=None, speed: float = 1.3) -> CrowdTarget:
        """Steer ``character`` to ``goal`` ``[x, z]`` (through the waypoints ``via [W, 2]``
        first), or along ``path [P >= 2, 2]``, at ``speed`` m/s; it becomes the
        character's intent source."""
        if not speed > 0:
            raise ValueError(f"speed must be > 0 m/s, got {speed}")
        if path is not None:
            p = np.asarray(path, dtype=np.float64).reshape(-1, 2)
            if len(p) < 2 or not np.all(np.isfinite(p)):
                raise ValueError("a target path needs at least two finite [x, z] points")
            seg = np.hypot(*np.diff(p, axis=0).T)
            p = p[np.r_[True, seg > 1e-6]]
            if len(p) < 2:
                raise ValueError("a target path needs two distinct points")
            cum = np.r_[0.0, np.cumsum(np.hypot(*np.diff(p, axis=0).T))]
            tgt = CrowdTarget(targets=p[-1:].copy(), path=p, speed=float(speed), cum=cum)
        elif goal is not None:
            pts = [] if via is None else [np.asarray(w, dtype=np.float64).reshape(2) for w in via]
            g = np.asarray(goal, dtype=np.float64).reshape(2)
            if not np.all(np.isfinite(g)):
                raise ValueError("the goal must be a finite [x, z]")
            tgt = CrowdTarget(targets=np.array([*pts, g]), speed=float(speed))
        else:
            raise ValueError("give a goal or a target path")
        tgt.side = 1.0 if character.id % 2 == 0 else -1.0
        self.targets[character.id] = tgt
        character.intent_source = self
        character.goal = tuple(float(v) for v in tgt.goal)
        return tgt

    def release(self, character) -> None:
        self.targets.pop(character.id, None)
        if character.intent_source is self:
            character.intent_source = None

    # ------------------------------------------------------------------ per tick
    def before_step(self, characters, t: float, dt: float) -> None:
        """Snapshot every character's ground position (the others each one sees) and steer
        every steered character at once (:func:`steer_all`)."""
        chars = [c for c in characters if hasattr(c, "ctrl")]
        self._ids = np.array([c.id for c in chars], dtype=np.int64)
        self._pos = np.array([c.root_xz for c in chars], dtype=np.float64).reshape(-1, 2)
        gone = set(self.targets) - set(self._ids.tolist())
        for cid in gone:
            del self.targets[cid]
        self._vel = {}
        rows = [k for k, cid in enumerate(self._ids.tolist()) if cid in self.targets]
        if not rows:
            return
        idx = np.array(rows)
        tg = [self.targets[int(self._ids[k])] for k in rows]
        aims = np.array([self._aim(g, self._pos[k]) for g, k in zip(tg, rows)])
        speeds = np.array([g.speed for g in tg])
        sides = np.array([g.side for g in tg])
        v = steer_all(self._pos, idx, aims, speeds, sides, self.settings)
        self._vel = {int(self._ids[k]): v[j] for j, k in enumerate(rows)}

    def _project(self, tgt: CrowdTarget, p: np.ndarray) -> float:
        """Arc length of the point of the path nearest ``p`` within ``[s - 1, s + 3]`` m."""
        P = tgt.path
        a = P[:-1]
        ab = np.diff(P, axis=0)
        l2 = np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-12)
        u = np.clip(np.einsum("ij,ij->i", p - a, ab) / l2, 0.0, 1.0)
        s = tgt.cum[:-1] + u * np.sqrt(l2)
        d = np.hypot(*(a + u[:, None] * ab - p).T)
        d = np.where((s >= tgt.s - 1.0) & (s <= tgt.s + 3.0), d, np.inf)
        j = int(np.argmin(d))
        return float(s[j]) if np.isfinite(d[j]) else tgt.s

    def _aim(self, tgt: CrowdTarget, p: np.ndarray) -> np.ndarray:
        s = self.settings
        if tgt.path is not None:
            tgt.s = max(tgt.s, self._project(tgt, p))
            ahead = min(tgt.s + self.lookahead, float(tgt.cum[-1]))
            x = np.interp(ahead, tgt.cum, tgt.path[:, 0])
            z = np.interp(ahead, tgt.cum, tgt.path[:, 1])
            return np.array([x, z])
        while tgt.k < len(tgt.targets) - 1 and np.hypot(*(tgt.targets[tgt.k] - p)) < s.waypoint_radius:
            tgt.k += 1
        return tgt.targets[tgt.k]

    def intent(self, character, dt: float) -> Intent | None:
        """The steering intent of ``character`` (``None``: it has no target here)."""
        tgt = self.targets.get(character.id)
        if tgt is None:
            return None
        p = np.array(character.root_xz, dtype=np.float64)
        v = self._vel.get(character.id)
        if v is None:  # not stepped through before_step yet: steer this one alone
            aim = self._aim(tgt, p)
            others = self._pos[self._ids != character.id] if len(self._ids) else np.zeros((0, 2))
            v = steer(p, aim, tgt.speed, others, self.settings, tgt.side)
        sp = float(np.hypot(*v))
        if tgt.path is None:
            final = tgt.k == len(tgt.targets) - 1
        else:
            final = tgt.s >= float(tgt.cum[-1]) - self.lookahead
        if final and np.hypot(*(tgt.goal - p)) < self.settings.arrive_distance:
            if not tgt.arrived:
                tgt.arrived = True
                character.events.append({"type": "arrived", "id": character.id,
                                         "goal": [round(float(x), 3) for x in tgt.goal]})
            return Intent.idle()
        if sp < 0.05:
            return Intent.idle()
        return Intent(velocity=[v[0], 0.0, v[1]], gait="walk" if sp < 2.5 else "run")

    def status(self) -> dict:
        """How many characters are steered and how many have arrived."""
        return {"steered": len(self.targets), "arrived": sum(t.arrived for t in self.targets.values())}
