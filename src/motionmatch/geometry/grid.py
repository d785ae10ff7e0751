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

__all__ = ["box_grid", "build_grid", "grid_query", "point_grid"]


def build_grid(rows: np.ndarray, cell: float) -> tuple | None:
    """The grid over ``rows [S, ROW]``: ``(cell_start [nx*nz+1], items, nx, nz, x0, z0)``
    (cell ``(i, j)`` holds ``items[cell_start[i*nz+j]:cell_start[i*nz+j+1]]``, in
    ascending row order; ``x0, z0`` the grid's corner, m), or ``None`` for no rows."""
    r = rows
    if len(r) == 0:
        return None
    return box_grid(r[:, C_X] - r[:, C_R], r[:, C_X] + r[:, C_R], r[:, C_Z] - r[:, C_R], r[:, C_Z] + r[:, C_R], cell)


def point_grid(points: np.ndarray, cell: float) -> tuple | None:
    """:func:`build_grid` over points ``[N, 2]`` (x, z, m): each in the one cell it lies in."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if len(p) == 0:
        return None
    return box_grid(p[:, 0], p[:, 0], p[:, 1], p[:, 1], cell)


def box_grid(x_lo: np.ndarray, x_hi: np.ndarray, z_lo: np.ndarray, z_hi: np.ndarray, cell: float) -> tuple:
    """:func:`build_grid` over ``S`` boxes ``[x_lo, x_hi] x [z_lo, z_hi]`` (``[S]`` each, m),
    each bucketed in every cell it touches (one compiled pass)."""
    lo = (float(x_lo.min()), float(z_lo.min()))
    hi = (float(x_hi.max()), float(z_hi.max()))
    nx = max(1, math.ceil((hi[0] - lo[0]) / cell) + 1)
    nz = max(1, math.ceil((hi[1] - lo[1]) / cell) + 1)
    f8 = np.float64
    start, items = _fill_cells(np.ascontiguousarray(x_lo, f8), np.ascontiguousarray(x_hi, f8),
                               np.ascontiguousarray(z_lo, f8), np.ascontiguousarray(z_hi, f8), lo[0], lo[1],
                               float(cell), nx, nz)
    return start, items, nx, nz, lo[0], lo[1]


@numba.njit(cache=True, nogil=True)
def _cell_range(lo, hi, origin, cell, n):
    """First and last cell (clipped to ``[0, n)``) of the interval ``[lo, hi]``."""
    return max(int(np.floor((lo - origin) / cell)), 0), min(int(np.floor((hi - origin) / cell)), n - 1)


@numba.njit(cache=True, nogil=True)
def _fill_cells(x_lo, x_hi, z_lo, z_hi, x0, z0, cell, nx, nz):
    """``(cell_start [nx*nz+1], items)`` of boxes bucketed by the cells they touch (a
    counting sort: count, prefix sums, fill; items in ascending box order per cell)."""
    S = x_lo.shape[0]
    start = np.zeros(nx * nz + 1, dtype=np.int64)
    for m in range(S):
        i0, i1 = _cell_range(x_lo[m], x_hi[m], x0, cell, nx)
        j0, j1 = _cell_range(z_lo[m], z_hi[m], z0, cell, nz)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                start[i * nz + j + 1] += 1
    for c in range(nx * nz):
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    items = np.empty(start[nx * nz], dtype=np.int64)
    for m in range(S):
        i0, i1 = _cell_range(x_lo[m], x_hi[m], x0, cell, nx)
        j0, j1 = _cell_range(z_lo[m], z_hi[m], z0, cell, nz)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                c = i * nz + j
                items[fill[c]] = m
                fill[c] += 1
    return start, items


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
