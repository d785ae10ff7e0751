"""A uniform grid over packed obstacle rows: "which rows come within a radius of these points".

Each row (:mod:`motionmatch.geometry.shapes`) is bucketed in every cell (``cell`` metres
square) that its bounding square touches; a query visits the cells around the points'
bounding box, marks each row once per query (``stamp``, ``tick``) and keeps the rows whose
shape comes within the radius of one of the points (:func:`~.shapes.point_lower_bound`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from motionmatch.geometry.shapes import C_R, C_X, C_Z, point_lower_bound

__all__ = ["build_grid", "grid_query"]


def build_grid(rows: np.ndarray, cell: float) -> tuple | None:
    """The grid over ``rows [S, ROW]``: ``(cell_start [nx*nz+1], items, nx, nz, x0, z0)``
    (cell ``(i, j)`` holds ``items[cell_start[i*nz+j]:cell_start[i*nz+j+1]]``; ``x0, z0``
    the grid's corner, m), or ``None`` for no rows."""
    r = rows
    if len(r) == 0:
        return None
    lo = np.array([(r[:, C_X] - r[:, C_R]).min(), (r[:, C_Z] - r[:, C_R]).min()])
    hi = np.array([(r[:, C_X] + r[:, C_R]).max(), (r[:, C_Z] + r[:, C_R]).max()])
    nx = max(1, math.ceil((hi[0] - lo[0]) / cell) + 1)
    nz = max(1, math.ceil((hi[1] - lo[1]) / cell) + 1)
    cells: list[list[int]] = [[] for _ in range(nx * nz)]
    for m in range(len(r)):
        i0 = int(np.floor((r[m, C_X] - r[m, C_R] - lo[0]) / cell))
        i1 = int(np.floor((r[m, C_X] + r[m, C_R] - lo[0]) / cell))
        j0 = int(np.floor((r[m, C_Z] - r[m, C_R] - lo[1]) / cell))
        j1 = int(np.floor((r[m, C_Z] + r[m, C_R] - lo[1]) / cell))
        for i in range(max(i0, 0), min(i1, nx - 1) + 1):
            for j in range(max(j0, 0), min(j1, nz - 1) + 1):
                cells[i * nz + j].append(m)
    start = np.zeros(nx * nz + 1, dtype=np.int64)
    start[1:] = np.cumsum([len(c) for c in cells])
    items = np.array([m for c in cells for m in c], dtype=np.int64)
    return start, items, nx, nz, float(lo[0]), float(lo[1])


@numba.njit(cache=True, nogil=True)
def grid_query(cell_start, items, nx, nz, x0, z0, cell, points, radius, rows, stamp, tick, out):
    """Static row indices within ``radius`` of one of ``points [P, 2]`` (into ``out``);
    returns how many."""
    lo_x = np.inf
    lo_z = np.inf
    hi_x = -np.inf
    hi_z = -np.inf
    for p in range(points.shape[0]):
        lo_x = min(lo_x, points[p, 0])
        hi_x = max(hi_x, points[p, 0])
        lo_z = min(lo_z, points[p, 1])
        hi_z = max(hi_z, points[p, 1])
    i0 = max(int(np.floor((lo_x - radius - x0) / cell)), 0)
    i1 = min(int(np.floor((hi_x + radius - x0) / cell)), nx - 1)
    j0 = max(int(np.floor((lo_z - radius - z0) / cell)), 0)
    j1 = min(int(np.floor((hi_z + radius - z0) / cell)), nz - 1)
    n = 0
    for i in range(i0, i1 + 1):
        for j in range(j0, j1 + 1):
            c = i * nz + j
            for s in range(cell_start[c], cell_start[c + 1]):
                m = items[s]
                if stamp[m] == tick:
                    continue
                stamp[m] = tick
                for p in range(points.shape[0]):
                    if point_lower_bound(points[p, 0], points[p, 1], rows[m]) <= radius:
                        out[n] = m
                        n += 1
                        break
    return n
