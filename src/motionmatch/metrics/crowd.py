"""Agent-agent collisions of a crowd frame by frame, for crowds too large for the pairwise
tracks of :func:`~motionmatch.metrics.scenario.scenario_report` (which compares every agent
with every other over the whole run).

A body is the ellipse of the database frame it plays (``EnvironmentMatcher.played_ellipses``)
placed at its character root, as :func:`~motionmatch.metrics.scenario.body_tracks` places
it when poses are not recorded; two bodies collide when their ellipses overlap
(:func:`~motionmatch.geometry.shapes.signed_distance` < 0) and so do their vertical extents
(the higher one's top raised by ``head_top``), as
:func:`~motionmatch.environment.collision.pair_distances` decides. Neighbours are found
through a uniform grid of the ellipses' centres, not among all pairs.
"""

from __future__ import annotations

import numba
import numpy as np

from motionmatch.geometry.grid import point_grid
from motionmatch.geometry.shapes import (
    C_P,
    C_Q,
    C_R,
    C_TYPE,
    C_UX,
    C_UZ,
    C_X,
    C_YMAX,
    C_YMIN,
    C_Z,
    ROW,
    T_ELLIPSE,
    signed_distance,
)

__all__ = ["agents_colliding", "placed_ellipses"]


def placed_ellipses(played: np.ndarray, pos: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """``[A, 8]`` world body ellipses of bodies whose ellipses in their character frame are
    ``played [A, 8]`` (centre x, z, unit axis x, z, semi-axes, lowest and highest point), at
    roots ``pos [A, 2]`` (x, z, m) turned by ``yaw [A]`` (rad about +Y)."""
    e = np.asarray(played, dtype=np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    out = e.copy()
    out[:, 0] = pos[:, 0] + c * e[:, 0] + s * e[:, 1]
    out[:, 1] = pos[:, 1] - s * e[:, 0] + c * e[:, 1]
    out[:, 2] = c * e[:, 2] + s * e[:, 3]
    out[:, 3] = -s * e[:, 2] + c * e[:, 3]
    return out


@numba.njit(cache=True, nogil=True)
def _colliding(ell, head_top, cell_start, items, nx, nz, x0, z0, cell, out):
    A = ell.shape[0]
    row = np.zeros(ROW)
    for i in range(A):
        i0 = max(int(np.floor((ell[i, 0] - cell - x0) / cell)), 0)
        i1 = min(int(np.floor((ell[i, 0] + cell - x0) / cell)), nx - 1)
        j0 = max(int(np.floor((ell[i, 1] - cell - z0) / cell)), 0)
        j1 = min(int(np.floor((ell[i, 1] + cell - z0) / cell)), nz - 1)
        lo = ell[i, 6]
        hi = ell[i, 7] + head_top
        for ci in range(i0, i1 + 1):
            for cj in range(j0, j1 + 1):
                c = ci * nz + cj
                for k in range(cell_start[c], cell_start[c + 1]):
                    m = items[k]
                    if m == i or out[i]:
                        continue
                    if hi <= ell[m, 6] or lo >= ell[m, 7] + head_top:
                        continue
                    row[C_TYPE] = T_ELLIPSE
                    row[C_X] = ell[m, 0]
                    row[C_Z] = ell[m, 1]
                    n = np.hypot(ell[m, 2], ell[m, 3])
                    row[C_UX] = ell[m, 2] / n if n > 1e-12 else 1.0
                    row[C_UZ] = ell[m, 3] / n if n > 1e-12 else 0.0
                    row[C_P] = ell[m, 4]
                    row[C_Q] = ell[m, 5]
                    row[C_R] = max(ell[m, 4], ell[m, 5])
                    row[C_YMIN] = ell[m, 6]
                    row[C_YMAX] = ell[m, 7] + head_top
                    if signed_distance(ell[i, 0], ell[i, 1], ell[i, 2], ell[i, 3], ell[i, 4], ell[i, 5], row) < 0.0:
                        out[i] = True
                        out[m] = True


def agents_colliding(ellipses: np.ndarray, head_top: float = 0.1) -> np.ndarray:
    """``[A]`` bool: whether each body of ``ellipses [A, 8]`` (world, one frame) intersects
    another's."""
    ell = np.ascontiguousarray(ellipses, dtype=np.float64).reshape(-1, 8)
    out = np.zeros(len(ell), dtype=bool)
    if len(ell) < 2:
        return out
    # two bodies can touch only if their centres are within the sum of their largest semi-axes
    cell = max(2.0 * float(np.max(ell[:, 4:6])), 1e-3)
    start, items, nx, nz, x0, z0 = point_grid(ell[:, :2], cell)
    _colliding(ell, float(head_top), start, items, nx, nz, x0, z0, cell, out)
    return out
