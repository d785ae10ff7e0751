"""The ground characters stand on: flat (today's ``y = 0``), a height field or a triangle mesh.

* :mod:`.surfaces`: :class:`Terrain` and its kinds (:class:`FlatGround`,
  :class:`HeightField`, :class:`TriangleMesh`): heights and normals of many ground points
  at once (compiled: :mod:`._kernels`), and a triangulated surface to draw and export.
* :mod:`.files`: a ground from a scenario's ``"terrain"`` object or a terrain file
  (:func:`parse_terrain`, :func:`load_terrain`), every field checked, files read within
  limits.

A scenario without ``"terrain"`` has none (``None``): the flat floor, bit for bit as
before; ``{"flat": {}}`` names the same floor explicitly.
"""

from motionmatch.environment.terrain._kernels import terrain_query
from motionmatch.environment.terrain.files import TerrainError, load_terrain, parse_terrain
from motionmatch.environment.terrain.surfaces import FlatGround, HeightField, Terrain, TriangleMesh

__all__ = ["FlatGround", "HeightField", "Terrain", "TerrainError", "TriangleMesh", "load_terrain", "parse_terrain",
           "terrain_query"]
