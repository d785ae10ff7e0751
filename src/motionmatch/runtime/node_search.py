"""Long-horizon matching among obstacles: each LHMM node searched with the obstacle
penalties (Environment-aware Motion Matching's penalised search as a
:class:`~motionmatch.runtime.lhmm.NodeSearch`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from motionmatch.environment.scene import Scene
from motionmatch.geometry.shapes import ROW
from motionmatch.runtime.environment_matching import (
    FOLLOW_CONTROLS,
    Controls,
    EnvironmentMatcher,
    EnvironmentSettings,
    evasion_factor,
)
from motionmatch.search.penalized import prepare_obstacles

__all__ = ["PenalizedNodeSearch"]



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
