"""The uneven ground of a preview video (:func:`motionmatch.io.preview.render_preview`).

:class:`PreviewGround` draws a :class:`~motionmatch.environment.terrain.Terrain` under
the preview's figure, over the rectangle of ground the camera sees:

* the surface as quads (at the terrain's detail: a height field's cells, half a mesh's
  typical triangle; coarser where that would make more than :data:`MAX_TILES`), each
  coloured by its height (green-grey low to sand high, over the whole terrain's range, so
  a colour means the same height in every frame) and hill-shaded by its slope (lighter
  facing the light, darker turned away), a mesh whose rows and quads run from the
  farthest from the camera to the nearest so that painting them in order (one quad mesh,
  drawn in one call) hides what a hill hides;
* the grid lines lying on it, each a polyline sampled where the surface bends (a height
  field's cell edges, where its bilinear heights bend, so the line follows the surface
  exactly).

Both are made once per rectangle (the camera's grid rectangle moves in steps of the grid's
spacing) and only projected each frame. It also puts points on the ground (the shadow,
the trajectories) and gives the ground's height under the character to the camera.
Metres, Y up; vectorised over points.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from motionmatch.environment.terrain import HeightField, Terrain

__all__ = ["MAX_LINE_SAMPLES", "MAX_TILES", "PreviewGround", "check_terrain"]

#: most points on the grid's lines in one view (the samples along a line spread out beyond)
MAX_LINE_SAMPLES = 12000
#: most shaded quads of the surface in one view (larger than the terrain's detail beyond)
MAX_TILES = 3000
#: slopes are this many times steeper for the light than they are (hill shading)
RELIEF_EXAGGERATION = 3.0
#: samples a side over the terrain's bounds to find its range of heights
_RANGE_SAMPLES = 129
#: colour of the lowest and the highest ground
_LOW = np.array([0.80, 0.87, 0.76])
_HIGH = np.array([0.87, 0.76, 0.60])
#: direction the light comes from (unit, Y up): from the upper left, behind the default camera
_LIGHT = np.array([-0.55, 0.7, -0.45]) / np.linalg.norm([-0.55, 0.7, -0.45])


def check_terrain(terrain: object) -> Terrain | None:
    """``terrain`` as a ground to draw: ``None`` for none or a flat ground (today's floor
    at ``y = 0``, drawn exactly as without one); anything but a
    :class:`~motionmatch.environment.terrain.Terrain` is a ``ValueError`` of one line."""
    if terrain is None:
        return None
    if not isinstance(terrain, Terrain):
        raise ValueError(f"terrain must be a motionmatch.environment.terrain.Terrain (e.g. from load_terrain(FILE) or "
                         f"a scenario's .terrain) or None, got {type(terrain).__name__}")
    return None if terrain.is_flat else terrain


def _detail(terrain: Terrain) -> float:
    """Metres between the samples that follow ``terrain``'s shape: a height field's cell,
    half a mesh's typical triangle."""
    if isinstance(terrain, HeightField):
        return terrain.cell
    v, t = terrain.surface(margin=0.0)
    xz = v[:, [0, 2]][t]
    size = np.ptp(xz, axis=1).max(axis=1)
    return float(max(np.median(size) / 2, 1e-3))


class PreviewGround:
    """The ground grid, shadows and trajectories of a preview on ``terrain``.

    Args:
        terrain: the ground (not flat: see :func:`check_terrain`).
        spacing: metres between the grid's lines.
    """

    def __init__(self, terrain: Terrain, spacing: float):
        self.terrain = terrain
        self.spacing = float(spacing)
        self.detail = _detail(terrain)
        # samples along lines lie on multiples of the detail from this origin (a height
        # field's cell edges), so that they stay put as the grid's rectangle moves
        self.origin = np.array(terrain.origin) if isinstance(terrain, HeightField) else np.zeros(2)
        bounds = terrain.bounds()
        if bounds is None:
            self.low = self.high = 0.0
        else:
            lo, hi = bounds
            gx, gz = np.meshgrid(np.linspace(lo[0], hi[0], _RANGE_SAMPLES), np.linspace(lo[1], hi[1], _RANGE_SAMPLES))
            h = terrain.heights(np.stack([gx.ravel(), gz.ravel()], axis=1))
            self.low, self.high = float(h.min()), float(h.max())
            if isinstance(terrain, HeightField):  # its grid's own heights: the exact range
                self.low, self.high = min(self.low, float(terrain.grid.min())), max(self.high, float(terrain.grid.max()))
        self._key: tuple | None = None
        self._lines = self._line_ends = self._surface = self._tile_colours = np.zeros(0)

    # ------------------------------------------------------------------ points on it
    def heights(self, xz: NDArray) -> NDArray:
        """``[...]``: the ground's height (m) under ground points ``xz [..., 2]``."""
        xz = np.asarray(xz, dtype=np.float64)
        return self.terrain.heights(xz.reshape(-1, 2)).reshape(xz.shape[:-1])

    def on_ground(self, points: NDArray) -> NDArray:
        """A copy of ``points [..., 3]`` moved onto the surface (y = the ground's height
        under each point's x, z)."""
        out = np.array(points, dtype=np.float64)
        out[..., 1] = self.heights(out[..., [0, 2]])
        return out

    # ---------------------------------------------------------- the grid and tiles
    def _samples(self, lo: float, hi: float, step: float) -> tuple[NDArray, NDArray]:
        """Samples from ``lo`` to ``hi`` (both included) at the multiples of ``step`` from
        the terrain's origin between, along x and along z: ``([Sx], [Sz])``."""
        out = []
        for k in range(2):
            o = float(self.origin[k])
            inner = o + step * np.arange(math.floor((lo[k] - o) / step) + 1, math.ceil((hi[k] - o) / step))
            out.append(np.concatenate([[lo[k]], inner[(inner > lo[k]) & (inner < hi[k])], [hi[k]]]))
        return out[0], out[1]

    def _make(self, lo: NDArray, hi: NDArray, forward: NDArray) -> None:
        sp = self.spacing
        xs = np.arange(lo[0], hi[0] + sp / 2, sp)
        zs = np.arange(lo[1], hi[1] + sp / 2, sp)
        # lines: constant z (along x), then constant x (along z), sampled where the surface bends
        extent = (hi[0] - lo[0]) * len(zs) + (hi[1] - lo[1]) * len(xs)  # metres of lines
        along_x, along_z = self._samples(lo, hi, max(self.detail, extent / MAX_LINE_SAMPLES))
        rows = np.stack(np.broadcast_arrays(along_x[None, :], zs[:, None]), axis=-1)  # [Lz, Sx, 2]
        cols = np.stack(np.broadcast_arrays(xs[:, None], along_z[None, :]), axis=-1)  # [Lx, Sz, 2]
        flat = np.concatenate([rows.reshape(-1, 2), cols.reshape(-1, 2)])
        points = np.stack([flat[:, 0], self.terrain.heights(flat), flat[:, 1]], axis=1)
        self._lines = points
        self._line_ends = np.cumsum([along_x.size] * len(zs) + [along_z.size] * len(xs))[:-1]
        # the surface: quads between samples, shaded by their normal, in rows painted far to near
        area = float(np.prod(hi - lo))
        tx, tz = self._samples(lo, hi, max(self.detail, math.sqrt(area / MAX_TILES)))
        gx, gz = np.meshgrid(tx, tz)
        gy = self.terrain.heights(np.stack([gx.ravel(), gz.ravel()], axis=1)).reshape(gx.shape)
        g = np.stack([gx, gy, gz], axis=-1)  # [Z, X, 3]: rows along z, columns along x
        across = abs(forward[0]) > abs(forward[2])
        if across:  # the camera looks along x more than along z: rows along x
            g = g.transpose(1, 0, 2)
        row_axis, column_axis = (0, 2) if across else (2, 0)
        if forward[row_axis] > 0:  # the farthest row first
            g = g[::-1]
        if forward[column_axis] > 0:  # in a row, the farthest quad first
            g = g[:, ::-1]
        self._surface = np.ascontiguousarray(g)
        normal = np.cross(g[1:, 1:] - g[:-1, :-1], g[1:, :-1] - g[:-1, 1:]).reshape(-1, 3)  # the diagonals'
        normal *= np.sign(normal[:, 1:2]) / np.linalg.norm(normal, axis=1, keepdims=True)  # (turned up)
        centre = (g[1:, 1:] + g[:-1, :-1] + g[1:, :-1] + g[:-1, 1:]).reshape(-1, 3) / 4
        self._tile_colours = self.colours(centre[:, 1], normal)

    def ground(self, lo: NDArray, hi: NDArray, forward: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
        """The ground over the rectangle ``lo [2] .. hi [2]`` (x, z), made once per rectangle:
        ``(lines [P, 3], line_ends [L-1], surface [R+1, C+1, 3], colours [R*C, 3])``: the
        grid lines (every ``spacing`` from ``lo``) as points on the surface, split into
        polylines at ``line_ends`` (``np.split``), and the surface as a mesh of ``R x C``
        quads (``surface[i, j]``, ``[i, j+1]``, ``[i+1, j+1]``, ``[i+1, j]``) with their RGB
        colours, row by row: rows run along the ground axis the camera's ``forward [3]``
        looks along less, the farthest row first and in each row the farthest quad first,
        so that painting them in that order (a quad mesh's order) hides what a hill hides."""
        key = (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]), *map(float, forward))
        if key != self._key:
            self._make(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64), np.asarray(forward))
            self._key = key
        return self._lines, self._line_ends, self._surface, self._tile_colours

    def colours(self, heights: NDArray, normals: NDArray) -> NDArray:
        """``[N, 3]`` RGB of ground at ``heights [N]`` with ``normals [N, 3]``: its height
        along the low-to-high ramp, lit by a light from the upper left (slopes steepened
        :data:`RELIEF_EXAGGERATION` times for the light, as in a map's hill shading), so
        that slopes facing it are lighter and those turned away darker; level ground keeps
        the ramp's colour."""
        span = self.high - self.low
        t = np.clip((heights - self.low) / span, 0.0, 1.0) if span > 1e-6 else np.zeros_like(heights)
        base = _LOW + t[:, None] * (_HIGH - _LOW)
        n = normals * [RELIEF_EXAGGERATION, 1.0, RELIEF_EXAGGERATION]
        n /= np.linalg.norm(n, axis=1, keepdims=True)
        shade = np.clip((n @ _LIGHT) / _LIGHT[1], 0.6, 1.15)
        return np.clip(base * shade[:, None], 0.0, 1.0)
