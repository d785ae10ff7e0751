"""The ground characters stand on: flat, a height field, or a triangle mesh.

Every ground answers the same two questions for many points at once: the height (m) of
the ground under ground points ``(x, z)`` and its unit normal there
(:meth:`Terrain.query`, compiled: :mod:`._kernels`), and gives a triangulated surface to
draw and export (:meth:`Terrain.surface`).

* :class:`FlatGround`: ``y = 0`` everywhere, today's floor (normals straight up).
* :class:`HeightField`: heights on a regular grid, ``heights[i, j]`` at ``(x0 + j*cell,
  z0 + i*cell)``, bilinear in between and continued flat outside (the height at the
  nearest point of the grid's rectangle).
* :class:`TriangleMesh`: the top surface of a triangle mesh (the highest triangle above
  or below a point), ``outside`` (default 0 m) where no triangle is; its triangles are
  bucketed in a grid on the ground so that a query visits only the few near a point.

Metres, Y up. Building one from a file or a scenario's ``"terrain"`` object is
:mod:`.files`' job.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from motionmatch._jit import readonly
from motionmatch.environment.terrain._kernels import (
    FLAT,
    HEIGHT_FIELD,
    MESH,
    bucket_triangles,
    height_field_query,
    mesh_query,
)

__all__ = ["FlatGround", "HeightField", "Terrain", "TriangleMesh"]

#: most grid cells along a side of a mesh's triangle buckets
MAX_BUCKETS_SIDE = 2048


def _points(points) -> np.ndarray:
    """``points`` as a read-only contiguous ``[N, 2]`` float64 array (one array type for the
    kernels: :func:`motionmatch._jit.readonly`)."""
    p = np.ascontiguousarray(points, dtype=np.float64)
    if p.ndim == 1:
        p = p.reshape(1, -1)
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"points must be [N, 2] ground coordinates (x, z), got shape {tuple(np.shape(points))}")
    return readonly(p)


class Terrain(ABC):
    """A ground: heights and normals of ground points, and a surface to draw."""

    #: what it is: ``flat``, ``height_field`` or ``mesh``
    kind: str = ""

    @property
    def is_flat(self) -> bool:
        """Whether it is exactly today's floor, ``y = 0`` everywhere."""
        return False

    def query(self, points) -> tuple[np.ndarray, np.ndarray]:
        """``(heights [N], normals [N, 3])``: the ground's height (m) and its unit normal
        (pointing up) under each of ``points [N, 2]`` (world x, z, metres)."""
        p = _points(points)
        h = np.empty(len(p))
        n = np.empty((len(p), 3))
        self._query(p, h, n)
        return h, n

    def query_into(self, points: np.ndarray, out_h: np.ndarray, out_n: np.ndarray) -> None:
        """:meth:`query` into arrays the caller keeps (no allocation: a per-frame caller's
        scratch): ``points [N, 2]``, ``out_h [N]`` and ``out_n [N, 3]``, float64, C-contiguous."""
        p = _points(points)
        for name, a, shape in (("out_h", out_h, (len(p),)), ("out_n", out_n, (len(p), 3))):
            if a.shape != shape or a.dtype != np.float64 or not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError(f"{name} must be a writable C-contiguous float64 array of shape {shape}")
        self._query(p, out_h, out_n)

    def heights(self, points) -> np.ndarray:
        """``[N]``: the ground's height (m) under ``points [N, 2]`` (x, z)."""
        return self.query(points)[0]

    def normals(self, points) -> np.ndarray:
        """``[N, 3]``: the ground's unit normal under ``points [N, 2]`` (x, z)."""
        return self.query(points)[1]

    def height(self, x: float, z: float) -> float:
        """The ground's height (m) under one point."""
        return float(self.heights(np.array([[x, z]]))[0])

    def kernel_arrays(self) -> tuple:
        """The ground as six arrays for compiled callers of
        :func:`~motionmatch.environment.terrain.terrain_query` (the same types for every
        kind: ``(params [7]`` float64: kind, x0, z0, cell, nx, nz, outside; ``heights [R, C],
        vertices [V, 3], triangles [T, 3], start, items)``, the arrays of other kinds empty,
        all read-only); made once."""
        a = getattr(self, "_kernel_arrays", None)
        if a is None:
            a = self._kernel_arrays = self._make_kernel_arrays()
        return a

    def _make_kernel_arrays(self) -> tuple:
        return _kernel_tuple(FLAT)

    @abstractmethod
    def _query(self, points: np.ndarray, out_h: np.ndarray, out_n: np.ndarray) -> None:
        """Fill ``out_h [N]`` and ``out_n [N, 3]`` for ``points [N, 2]`` (float64, contiguous)."""

    @abstractmethod
    def bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(lo [2], hi [2])``: the ground rectangle (x, z) where the ground is not flat
        (``None``: nowhere)."""

    @abstractmethod
    def surface(self, margin: float = 50.0, max_side: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A triangulated surface to draw or export: ``(vertices [V, 3], triangles [T, 3])``
        (metres; triangles counter-clockwise seen from above, so their normals point up),
        reaching ``margin`` metres past :meth:`bounds` where the ground goes on flat.
        ``max_side``: a height field is drawn with at most this many vertices a side (every
        k-th row and column, the last kept)."""

    @abstractmethod
    def to_dict(self) -> dict:
        """The scenario file's ``"terrain"`` object of this ground."""


def _kernel_tuple(kind: int, x0: float = 0.0, z0: float = 0.0, cell: float = 1.0, heights=None, vertices=None,
                  triangles=None, start=None, items=None, nx: int = 0, nz: int = 0, outside: float = 0.0) -> tuple:
    """:meth:`Terrain.kernel_arrays`' tuple, missing arrays empty (read-only, contiguous)."""
    def arr(a, shape, dtype):
        return readonly(np.ascontiguousarray(np.zeros(shape, dtype=dtype) if a is None else a, dtype=dtype))
    params = np.array([kind, x0, z0, cell, nx, nz, outside], dtype=np.float64)
    return (readonly(params), arr(heights, (2, 2), np.float64), arr(vertices, (0, 3), np.float64),
            arr(triangles, (0, 3), np.int64), arr(start, (1,), np.int64), arr(items, (0,), np.int64))


class FlatGround(Terrain):
    """Today's floor: ``y = 0`` everywhere, normals ``(0, 1, 0)``."""

    kind = "flat"

    @property
    def is_flat(self) -> bool:
        return True

    def _query(self, points, out_h, out_n) -> None:
        out_h[:] = 0.0
        out_n[:] = (0.0, 1.0, 0.0)

    def bounds(self) -> None:
        return None

    def surface(self, margin: float = 50.0, max_side: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        m = float(margin)
        v = np.array([[-m, 0.0, -m], [m, 0.0, -m], [m, 0.0, m], [-m, 0.0, m]])
        return v, np.array([[0, 3, 2], [0, 2, 1]], dtype=np.int64)

    def to_dict(self) -> dict:
        return {"flat": {}}

    def __repr__(self) -> str:
        return "FlatGround()"


class HeightField(Terrain):
    """Heights on a regular grid (see the module docstring).

    Args:
        origin: ``(x0, z0)``, the ground position (m) of ``heights[0, 0]``.
        cell: the grid's spacing (m), the same along x and z.
        heights: ``[R, C]`` heights (m), ``R, C >= 2``; row ``i`` lies at ``z0 + i*cell``,
            column ``j`` at ``x0 + j*cell``.
    """

    kind = "height_field"

    def __init__(self, origin, cell: float, heights):
        h = np.array(heights, dtype=np.float64)
        if h.ndim != 2 or h.shape[0] < 2 or h.shape[1] < 2:
            raise ValueError(f"heights must be [rows, columns] with at least 2 of each, got shape {h.shape}")
        if not np.isfinite(h).all():
            raise ValueError("heights must be finite")
        if not (math.isfinite(cell) and cell > 0):
            raise ValueError(f"cell must be a positive number of metres, got {cell}")
        h.flags.writeable = False
        self.origin = (float(origin[0]), float(origin[1]))
        self.cell = float(cell)
        self.grid = h

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, columns)`` of the grid."""
        return self.grid.shape

    def _query(self, points, out_h, out_n) -> None:
        height_field_query(self.origin[0], self.origin[1], self.cell, self.grid, points, out_h, out_n)

    def _make_kernel_arrays(self) -> tuple:
        return _kernel_tuple(HEIGHT_FIELD, self.origin[0], self.origin[1], self.cell, heights=self.grid)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        R, C = self.grid.shape
        lo = np.array(self.origin)
        return lo, lo + self.cell * np.array([C - 1, R - 1])

    def surface(self, margin: float = 50.0, max_side: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        R, C = self.grid.shape
        step = 1 if max_side is None else max(1, math.ceil((max(R, C) - 1) / max(max_side - 1, 1)))
        rows = np.unique(np.r_[np.arange(0, R, step), R - 1])
        cols = np.unique(np.r_[np.arange(0, C, step), C - 1])
        x = self.origin[0] + self.cell * cols
        z = self.origin[1] + self.cell * rows
        h = self.grid[np.ix_(rows, cols)]
        if margin > 0:  # a ring of vertices at the edge's heights: the flat continuation
            x = np.r_[x[0] - margin, x, x[-1] + margin]
            z = np.r_[z[0] - margin, z, z[-1] + margin]
            h = np.pad(h, 1, mode="edge")
        nz, nx = h.shape
        gx, gz = np.meshgrid(x, z)
        vertices = np.stack([gx.ravel(), h.ravel(), gz.ravel()], axis=1)
        a = (np.arange(nz - 1)[:, None] * nx + np.arange(nx - 1)[None, :]).ravel()
        # corners a (i, j), b (i, j+1), c (i+1, j), d (i+1, j+1): up-facing is (a, c, b), (b, c, d)
        b, c = a + 1, a + nx
        d = c + 1
        triangles = np.concatenate([np.stack([a, c, b], 1), np.stack([b, c, d], 1)])
        return vertices, triangles.astype(np.int64)

    def to_dict(self) -> dict:
        return {"height_field": {"origin": list(self.origin), "cell": self.cell, "heights": self.grid.tolist()}}

    def __repr__(self) -> str:
        return f"HeightField(origin={self.origin}, cell={self.cell:g}, shape={self.grid.shape})"


class TriangleMesh(Terrain):
    """The top surface of a triangle mesh (see the module docstring).

    Args:
        vertices: ``[V, 3]`` positions (m, Y up).
        triangles: ``[T, 3]`` vertex indices, ``T >= 1``.
        outside: the ground's height (m) where no triangle lies above or below a point.
        source: the file it came from (kept for :meth:`to_dict`).
    """

    kind = "mesh"

    def __init__(self, vertices, triangles, *, outside: float = 0.0, source: str | None = None):
        v = np.array(vertices, dtype=np.float64).reshape(-1, 3)
        t = np.array(triangles, dtype=np.int64).reshape(-1, 3)
        if len(t) == 0:
            raise ValueError("a terrain mesh needs at least one triangle")
        if t.min() < 0 or t.max() >= len(v):
            raise ValueError(f"triangle indices must lie in 0..{len(v) - 1}")
        if not np.isfinite(v).all():
            raise ValueError("vertices must be finite")
        v.flags.writeable = False
        t.flags.writeable = False
        self.vertices, self.triangles = v, t
        self.outside = float(outside)
        self.source = source
        xz = v[:, [0, 2]][t]  # [T, 3, 2]
        tri_lo, tri_hi = xz.min(axis=1), xz.max(axis=1)
        self._lo, self._hi = tri_lo.min(axis=0), tri_hi.max(axis=0)
        extent = float(max((self._hi - self._lo).max(), 1e-6))
        typical = float(np.median((tri_hi - tri_lo).max(axis=1)))
        cell = max(typical, extent / MAX_BUCKETS_SIDE, 1e-6)
        self._cell = cell
        self._nx = int(min(math.floor((self._hi[0] - self._lo[0]) / cell) + 1, MAX_BUCKETS_SIDE + 1))
        self._nz = int(min(math.floor((self._hi[1] - self._lo[1]) / cell) + 1, MAX_BUCKETS_SIDE + 1))
        self._start, self._items = bucket_triangles(np.ascontiguousarray(tri_lo), np.ascontiguousarray(tri_hi),
                                                    float(self._lo[0]), float(self._lo[1]), cell, self._nx,
                                                    self._nz)

    def _query(self, points, out_h, out_n) -> None:
        mesh_query(self.vertices, self.triangles, self._start, self._items, float(self._lo[0]), float(self._lo[1]),
                   self._cell, self._nx, self._nz, self.outside, points, out_h, out_n)

    def _make_kernel_arrays(self) -> tuple:
        return _kernel_tuple(MESH, float(self._lo[0]), float(self._lo[1]), self._cell, vertices=self.vertices,
                             triangles=self.triangles, start=self._start, items=self._items, nx=self._nx,
                             nz=self._nz, outside=self.outside)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self._lo.copy(), self._hi.copy()

    def surface(self, margin: float = 50.0, max_side: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        v, t = self.vertices, self.triangles
        e1 = v[t[:, 1]] - v[t[:, 0]]
        e2 = v[t[:, 2]] - v[t[:, 0]]
        down = np.cross(e1, e2)[:, 1] < 0  # wound clockwise seen from above: turned so that they face up
        t = np.where(down[:, None], t[:, [0, 2, 1]], t)
        return v.copy(), t.copy()

    def to_dict(self) -> dict:
        if self.source is None:
            raise ValueError("a terrain mesh built in memory has no file to name; save its triangles as .obj first")
        d: dict = {"file": self.source}
        if self.outside:
            d["outside"] = self.outside
        return {"mesh": d}

    def __repr__(self) -> str:
        return f"TriangleMesh({len(self.triangles)} triangles, source={self.source!r})"
