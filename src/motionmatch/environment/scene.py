"""A scene: static and moving obstacles, and fast "which obstacles are near this trajectory".

Static obstacles are packed once into rows (:mod:`motionmatch.geometry.shapes`) and
bucketed in a uniform grid (:mod:`motionmatch.geometry.grid`) (cells of ``cell`` metres, each obstacle in every cell its
bounding square touches); a query collects the obstacles of the cells around a few
trajectory points, then keeps those whose shape comes within the radius of a point.
Moving obstacles are few and always considered; for a search at time ``t`` each
contributes one proxy per future ellipse slot, at its position predicted for
``t + offset`` (time-aligned, like other agents' future ellipses).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from motionmatch.environment.obstacles import Obstacle
from motionmatch.environment.terrain import Terrain
from motionmatch.geometry.grid import build_grid, grid_query
from motionmatch.geometry.shapes import C_R, C_X, C_Z, ROW, point_lower_bound

__all__ = ["Scene"]


class Scene:
    """Obstacles of a world.

    Args:
        obstacles: the obstacles (static and moving).
        cell: grid cell size (m) for static obstacles.
        terrain: the ground (:mod:`motionmatch.environment.terrain`); ``None``: the flat
            floor, y = 0.
    """

    def __init__(self, obstacles: Iterable[Obstacle] = (), *, cell: float = 2.0, terrain: Terrain | None = None):
        self.obstacles: list[Obstacle] = list(obstacles)
        self.terrain = terrain
        self.cell = float(cell)
        self.static_ids = np.array([i for i, o in enumerate(self.obstacles) if not o.moving], dtype=np.int64)
        self.moving_ids = np.array([i for i, o in enumerate(self.obstacles) if o.moving], dtype=np.int64)
        self.static_rows = (np.stack([self.obstacles[i].row(ident=int(i)) for i in self.static_ids])
                            if len(self.static_ids) else np.zeros((0, ROW)))
        self._build_grid()
        self._tick = 0

    def __len__(self) -> int:
        """The number of obstacles."""
        return len(self.obstacles)

    def __bool__(self) -> bool:
        """Always true: a scene without obstacles is still a world's ground (its
        :attr:`terrain`), so ``scene or Scene()`` keeps it."""
        return True

    def _build_grid(self) -> None:
        self._grid = build_grid(self.static_rows, self.cell)
        self._stamp = np.zeros(len(self.static_rows), dtype=np.int64)
        self._out = np.empty(len(self.static_rows), dtype=np.int64)

    def grid_arrays(self) -> tuple | None:
        """The static grid for compiled queries: ``(cell_start, items, nx, nz, x0, z0, cell,
        rows, stamp, ids)`` (``stamp [S]`` visit marks: pass :meth:`next_tick`; ``ids [S]``
        scratch for the row indices), or ``None`` without static obstacles."""
        if self._grid is None:
            return None
        start, items, nx, nz, x0, z0 = self._grid
        return (start, items, nx, nz, x0, z0, self.cell, self.static_rows, self._stamp, self._out)

    def next_tick(self) -> int:
        """A new visit mark for a grid query (see :meth:`grid_arrays`)."""
        self._tick += 1
        return self._tick

    def used_ticks(self, last: int) -> None:
        """A compiled caller took the visit marks up to ``last`` itself (one per query of
        many, counting on from :meth:`next_tick`'s): the next mark comes after it."""
        self._tick = max(self._tick, int(last))

    # ------------------------------------------------------------------ queries
    def static_near(self, points: np.ndarray, radius: float) -> np.ndarray:
        """Indices (into :attr:`static_rows`) of the static obstacles whose shape comes
        within ``radius`` (m) of one of ``points [P, 2]`` (world x, z)."""
        if self._grid is None:
            return np.zeros(0, dtype=np.int64)
        start, items, nx, nz, x0, z0 = self._grid
        self._tick += 1
        n = grid_query(start, items, nx, nz, x0, z0, self.cell, np.ascontiguousarray(points, dtype=np.float64),
                       float(radius), self.static_rows, self._stamp, self._tick, self._out)
        return self._out[:n].copy()

    def query(self, t: float, points: np.ndarray, radius: float, offsets: Sequence[float]
              ) -> tuple[np.ndarray, np.ndarray]:
        """World rows for a search at time ``t``: static obstacles near the trajectory
        ``points [P, 2]`` (every slot); each moving obstacle where it is now (every slot:
        the proxy "aligned with the rendered object", paper Sec. 6.1.2) and, per slot
        ``k``, the "additional proxy" at its position predicted for ``t + offsets[k]``.
        Returns ``(rows [M, ROW], slot_of [M])``."""
        ids = self.static_near(points, radius)
        rows = [self.static_rows[ids]]
        slots = [np.full(len(ids), -1, dtype=np.int64)]
        if len(self.moving_ids):
            mv = []
            sl = []
            for i in self.moving_ids:
                o = self.obstacles[i]
                mv.append(o.row(o.position(t), ident=int(i)))
                sl.append(-1)
                for k, dt in enumerate(offsets):
                    mv.append(o.row(o.predicted(t, dt), ident=int(i)))
                    sl.append(k)
            rows.append(np.stack(mv))
            slots.append(np.asarray(sl, dtype=np.int64))
        return np.concatenate(rows), np.concatenate(slots)

    def rows_at(self, t: float) -> np.ndarray:
        """``[len(obstacles), ROW]``: every obstacle where it is at time ``t`` (for collision
        measures); the row's id column is the obstacle's index."""
        if not self.obstacles:
            return np.zeros((0, ROW))
        return np.stack([o.row(o.position(t) if o.moving else None, ident=i) for i, o in enumerate(self.obstacles)])

    def clearance(self, point: Sequence[float], t: float = 0.0) -> float:
        """Lower bound of the distance (m) from a ground point to the nearest obstacle at ``t``."""
        rows = self.rows_at(t)
        if len(rows) == 0:
            return np.inf
        return float(min(point_lower_bound(float(point[0]), float(point[1]), r) for r in rows))

    def bounds(self, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(lo [2], hi [2])``: bounding rectangle (x, z) of the obstacles at ``t``."""
        rows = self.rows_at(t)
        if len(rows) == 0:
            return np.zeros(2), np.zeros(2)
        return (np.array([(rows[:, C_X] - rows[:, C_R]).min(), (rows[:, C_Z] - rows[:, C_R]).min()]),
                np.array([(rows[:, C_X] + rows[:, C_R]).max(), (rows[:, C_Z] + rows[:, C_R]).max()]))
