"""The ground as the page draws it, and the page's terrain files.

:func:`terrain_drawing` is what a ``terrain`` message carries (server -> page): ``null``
for the flat floor (the page's own ground plane), else the ground's surface
(:meth:`~motionmatch.environment.terrain.Terrain.surface`) in the page's form:

- a height field as its grid: ``{"kind": "height_field", "origin": [x0, z0], "cell":
  [cx, cz], "rows": R, "cols": C, "heights": [R*C values, row after row, to the
  millimetre]}`` (``heights[i*C + j]`` at ``(x0 + j*cx, z0 + i*cz)``), at most
  :data:`PAGE_SIDE` values a side (a larger grid resampled over the same rectangle); the
  page adds the flat continuation around it;
- a mesh as ``{"kind": "mesh", "vertices": [x, y, z, ...], "triangles": [a, b, c, ...],
  "outside": h}``, at most :data:`PAGE_TRIANGLES` triangles (a larger one is refused with
  one line).

:func:`page_terrain` checks a terrain the page sends (``terrain_set``): the scenario
file's ``"terrain"`` object with its heights inline (the page reads the file the user
picked; no file on the server is named by the page).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from motionmatch.environment.terrain import HeightField, Terrain, TriangleMesh, parse_terrain

__all__ = ["PAGE_SIDE", "PAGE_TRIANGLES", "page_terrain", "terrain_drawing"]

#: most heights a side of a height field sent to the page
PAGE_SIDE = 513
#: most triangles of a mesh sent to the page
PAGE_TRIANGLES = 400_000


def terrain_drawing(terrain: Terrain | None) -> dict | None:
    """The ``terrain`` of a ``terrain`` message (see the module docstring)."""
    if terrain is None or terrain.is_flat:
        return None
    if isinstance(terrain, HeightField):
        R, C = terrain.shape
        if max(R, C) <= PAGE_SIDE:
            h, cell = terrain.grid, (terrain.cell, terrain.cell)
        else:  # resampled on a coarser regular grid over the same rectangle (bilinear)
            lo, hi = terrain.bounds()
            rows, cols = min(R, PAGE_SIDE), min(C, PAGE_SIDE)
            gx, gz = np.meshgrid(np.linspace(lo[0], hi[0], cols), np.linspace(lo[1], hi[1], rows))
            h = terrain.heights(np.stack([gx.ravel(), gz.ravel()], 1)).reshape(rows, cols)
            cell = ((hi[0] - lo[0]) / (cols - 1), (hi[1] - lo[1]) / (rows - 1))
        return {"kind": "height_field", "origin": list(terrain.origin), "cell": [float(c) for c in cell],
                "rows": int(h.shape[0]), "cols": int(h.shape[1]), "heights": np.round(h, 3).ravel().tolist()}
    if isinstance(terrain, TriangleMesh):
        v, t = terrain.surface(margin=0.0)
        if len(t) > PAGE_TRIANGLES:
            raise ValueError(f"the terrain mesh has {len(t):,} triangles, more than the {PAGE_TRIANGLES:,} the page "
                             "draws; give a coarser mesh")
        return {"kind": "mesh", "vertices": np.round(v, 4).ravel().tolist(), "triangles": t.ravel().tolist(),
                "outside": terrain.outside}
    raise TypeError(f"cannot draw a {type(terrain).__name__}")


def page_terrain(v: Any, where: str) -> Terrain | None:
    """A terrain the page sent (``null``: the flat floor), or a
    :class:`~motionmatch.validation.FieldError` naming the field."""
    if v is None:
        return None
    return parse_terrain(v, where, folder=None)
