"""Compiled ground queries: heights and normals of many ground points at once.

Both kernels write into arrays the caller owns (no allocation, no reference counting:
:data:`motionmatch._jit.no_refcount`), one point a loop iteration:

* :func:`height_field_query`: a regular grid of heights, bilinear within a cell,
  continued flat outside (the point's coordinates clamped to the grid);
* :func:`mesh_query`: the highest triangle above or below each point, its triangles
  bucketed in a uniform grid on the ground (x, z) (:func:`bucket_triangles`).

Metres, Y up; points are ``[N, 2]`` ground coordinates ``(x, z)``.
"""

from __future__ import annotations

import math

import numpy as np

from motionmatch._jit import no_refcount

__all__ = ["FLAT", "HEIGHT_FIELD", "MESH", "bucket_triangles", "height_field_query", "mesh_query", "terrain_query"]

#: a point on a triangle's edge (barycentric coordinates down to minus this) counts as inside it
EDGE_EPS = 1e-9


@no_refcount
def height_field_query(x0: float, z0: float, cell: float, heights: np.ndarray, points: np.ndarray,
                       out_h: np.ndarray, out_n: np.ndarray) -> None:
    """Heights ``out_h [N]`` and unit normals ``out_n [N, 3]`` of ``points [N, 2]`` on the
    height field ``heights [R, C]`` (``heights[i, j]`` at ``(x0 + j*cell, z0 + i*cell)``,
    ``R, C >= 2``). Inside, bilinear in the cell ``(i, j)`` that holds the point (the
    last cell for a point on the far edge); outside, the height at the nearest point of
    the grid's rectangle, with no slope across the edge it is beyond."""
    R, C = heights.shape
    inv = 1.0 / cell
    for k in range(points.shape[0]):
        u = (points[k, 0] - x0) * inv
        v = (points[k, 1] - z0) * inv
        inside_u = 0.0 <= u <= C - 1
        inside_v = 0.0 <= v <= R - 1
        u = min(max(u, 0.0), C - 1.0)
        v = min(max(v, 0.0), R - 1.0)
        j = min(int(u), C - 2)
        i = min(int(v), R - 2)
        fu = u - j
        fv = v - i
        h00 = heights[i, j]
        h01 = heights[i, j + 1]
        h10 = heights[i + 1, j]
        h11 = heights[i + 1, j + 1]
        a = h00 + (h01 - h00) * fu  # along x at row i
        b = h10 + (h11 - h10) * fu  # along x at row i + 1
        out_h[k] = a + (b - a) * fv
        dx = ((h01 - h00) * (1.0 - fv) + (h11 - h10) * fv) * inv if inside_u else 0.0
        dz = (b - a) * inv if inside_v else 0.0
        n = 1.0 / math.sqrt(dx * dx + dz * dz + 1.0)
        out_n[k, 0] = -dx * n
        out_n[k, 1] = n
        out_n[k, 2] = -dz * n


@no_refcount
def _cell_range(lo: float, hi: float, origin: float, cell: float, n: int) -> tuple[int, int]:
    """The first and last of ``n`` grid cells (from ``origin``, ``cell`` wide) that the
    interval ``[lo, hi]`` touches, clamped to the grid."""
    return min(max(int((lo - origin) / cell), 0), n - 1), min(max(int((hi - origin) / cell), 0), n - 1)


@no_refcount
def _count_cells(tri_lo: np.ndarray, tri_hi: np.ndarray, x0: float, z0: float, cell: float, nx: int, nz: int,
                 counts: np.ndarray) -> None:
    for t in range(tri_lo.shape[0]):
        i0, i1 = _cell_range(tri_lo[t, 1], tri_hi[t, 1], z0, cell, nz)
        j0, j1 = _cell_range(tri_lo[t, 0], tri_hi[t, 0], x0, cell, nx)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                counts[i * nx + j + 1] += 1


@no_refcount
def _fill_cells(tri_lo: np.ndarray, tri_hi: np.ndarray, x0: float, z0: float, cell: float, nx: int, nz: int,
                start: np.ndarray, fill: np.ndarray, items: np.ndarray) -> None:
    for t in range(tri_lo.shape[0]):
        i0, i1 = _cell_range(tri_lo[t, 1], tri_hi[t, 1], z0, cell, nz)
        j0, j1 = _cell_range(tri_lo[t, 0], tri_hi[t, 0], x0, cell, nx)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                c = i * nx + j
                items[start[c] + fill[c]] = t
                fill[c] += 1


def bucket_triangles(tri_lo: np.ndarray, tri_hi: np.ndarray, x0: float, z0: float, cell: float, nx: int,
                     nz: int) -> tuple[np.ndarray, np.ndarray]:
    """Triangles by grid cell: ``(start [nx*nz + 1], items)``, cell ``c = i*nx + j`` (row
    ``i`` along z, column ``j`` along x) holding ``items[start[c]:start[c+1]]``, each
    triangle in every cell its ground bounding rectangle ``tri_lo [T, 2]`` .. ``tri_hi``
    touches."""
    counts = np.zeros(nx * nz + 1, dtype=np.int64)
    _count_cells(tri_lo, tri_hi, x0, z0, cell, nx, nz, counts)
    start = np.cumsum(counts)
    items = np.empty(int(start[-1]), dtype=np.int64)
    _fill_cells(tri_lo, tri_hi, x0, z0, cell, nx, nz, start, np.zeros(nx * nz, dtype=np.int64), items)
    return start, items


@no_refcount
def mesh_query(vertices: np.ndarray, triangles: np.ndarray, start: np.ndarray, items: np.ndarray, x0: float,
               z0: float, cell: float, nx: int, nz: int, outside: float, points: np.ndarray, out_h: np.ndarray,
               out_n: np.ndarray) -> None:
    """Heights ``out_h [N]`` and unit normals ``out_n [N, 3]`` of ``points [N, 2]`` on the
    top surface of the triangles ``triangles [T, 3]`` (indices into ``vertices [V, 3]``)
    bucketed as :func:`bucket_triangles` made them: the highest triangle whose ground
    projection holds the point (on an edge counts), its height interpolated and its face
    normal turned up; where none does, ``outside`` with the normal straight up. Triangles
    standing on edge (no ground area) are never the ground."""
    for k in range(points.shape[0]):
        px = points[k, 0]
        pz = points[k, 1]
        best = -np.inf
        bx = 0.0
        by = 1.0
        bz = 0.0
        j = math.floor((px - x0) / cell)
        i = math.floor((pz - z0) / cell)
        if 0 <= i < nz and 0 <= j < nx:
            c = i * nx + j
            for m in range(start[c], start[c + 1]):
                t = items[m]
                a = triangles[t, 0]
                b = triangles[t, 1]
                d = triangles[t, 2]
                ax = vertices[a, 0]
                ay = vertices[a, 1]
                az = vertices[a, 2]
                e1x = vertices[b, 0] - ax
                e1y = vertices[b, 1] - ay
                e1z = vertices[b, 2] - az
                e2x = vertices[d, 0] - ax
                e2y = vertices[d, 1] - ay
                e2z = vertices[d, 2] - az
                det = e1x * e2z - e1z * e2x  # twice the signed ground area
                if abs(det) < 1e-14:
                    continue
                qx = px - ax
                qz = pz - az
                s = (qx * e2z - qz * e2x) / det
                r = (e1x * qz - e1z * qx) / det
                if s < -EDGE_EPS or r < -EDGE_EPS or s + r > 1.0 + EDGE_EPS:
                    continue
                y = ay + s * e1y + r * e2y
                if y > best:
                    best = y
                    nxv = e1y * e2z - e1z * e2y
                    nyv = e1z * e2x - e1x * e2z
                    nzv = e1x * e2y - e1y * e2x
                    if nyv < 0.0:
                        nxv, nyv, nzv = -nxv, -nyv, -nzv
                    inv = 1.0 / math.sqrt(nxv * nxv + nyv * nyv + nzv * nzv)
                    bx = nxv * inv
                    by = nyv * inv
                    bz = nzv * inv
        if best == -np.inf:
            out_h[k] = outside
            out_n[k, 0] = 0.0
            out_n[k, 1] = 1.0
            out_n[k, 2] = 0.0
        else:
            out_h[k] = best
            out_n[k, 0] = bx
            out_n[k, 1] = by
            out_n[k, 2] = bz



#: :class:`~motionmatch.environment.terrain.Terrain.kernel_arrays`' ``kind``
FLAT, HEIGHT_FIELD, MESH = 0, 1, 2


@no_refcount
def terrain_query(params: np.ndarray, heights: np.ndarray, vertices: np.ndarray, triangles: np.ndarray,
                  start: np.ndarray, items: np.ndarray, points: np.ndarray, out_h: np.ndarray,
                  out_n: np.ndarray) -> None:
    """:func:`height_field_query` or :func:`mesh_query` (or the flat floor) of ``points
    [N, 2]`` into ``out_h [N]``, ``out_n [N, 3]``, the ground given as the six arrays
    :meth:`~motionmatch.environment.terrain.Terrain.kernel_arrays` makes (``params``:
    kind, x0, z0, cell, nx, nz, outside): one compiled entry for every kind, for kernels
    that take any ground."""
    kind = int(params[0])
    x0, z0, cell, nx, nz, outside = params[1], params[2], params[3], int(params[4]), int(params[5]), params[6]
    if kind == HEIGHT_FIELD:
        height_field_query(x0, z0, cell, heights, points, out_h, out_n)
    elif kind == MESH:
        mesh_query(vertices, triangles, start, items, x0, z0, cell, nx, nz, outside, points, out_h, out_n)
    else:
        for k in range(points.shape[0]):
            out_h[k] = 0.0
            out_n[k, 0] = 0.0
            out_n[k, 1] = 1.0
            out_n[k, 2] = 0.0
