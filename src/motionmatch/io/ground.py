"""The ground of a run as a mesh for the files we write (``.glb``, ``.usd``).

:func:`ground_mesh` turns a :class:`~motionmatch.environment.terrain.Terrain` into
vertices, smooth vertex normals and triangles (metres, Y up, triangles counter-clockwise
seen from above): a height field with its flat continuation out to ``margin`` metres
around its grid, a mesh as it is, the flat floor as a square.
"""

from __future__ import annotations

import numpy as np

from motionmatch.environment.terrain import Terrain

__all__ = ["EXPORT_MARGIN", "EXPORT_SIDE", "GROUND_COLOUR", "ground_mesh"]

#: metres of flat ground drawn around a height field (and the half side of a flat floor)
EXPORT_MARGIN = 20.0
#: most vertices a side of an exported height field (every k-th row and column beyond)
EXPORT_SIDE = 1025
#: base colour (linear RGB) of the ground
GROUND_COLOUR = (0.30, 0.36, 0.24)


def ground_mesh(terrain: Terrain, margin: float = EXPORT_MARGIN,
                max_side: int = EXPORT_SIDE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(vertices [V, 3], normals [V, 3], triangles [T, 3])`` of ``terrain``'s surface;
    normals are the area-weighted mean of the faces around each vertex (up where none)."""
    v, t = terrain.surface(margin=margin, max_side=max_side)
    face = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])  # length: twice the area
    n = np.zeros_like(v)
    for k in range(3):
        np.add.at(n, t[:, k], face)
    length = np.linalg.norm(n, axis=1, keepdims=True)
    n = np.where(length > 1e-12, n / np.maximum(length, 1e-12), [0.0, 1.0, 0.0])
    return v, n, t
