"""The world characters move in: obstacles, scenes, body ellipses, collision measures, scenarios.

* :mod:`~motionmatch.environment.obstacles`: disks, ellipses, boxes with a height range,
  static or moving (:class:`Obstacle`).
* :mod:`~motionmatch.environment.scene`: a :class:`Scene` answers "which obstacles are near
  this trajectory" (a grid for static obstacles; moving ones at their predicted positions).
* :mod:`~motionmatch.geometry.shapes`: packed obstacle rows, ellipse-obstacle signed
  distances and the log barrier (numba).
* :mod:`~motionmatch.environment.body`: body ellipses of database frames (the environment
  features) and of played motion.
* :mod:`~motionmatch.environment.collision`: collision time / fraction of played motion.
* :mod:`~motionmatch.environment.scenario`: scenario files (JSON).
* :mod:`~motionmatch.environment.terrain`: the ground: flat, a height field or a triangle
  mesh, with vectorised height and normal queries.

Running characters in a scene lives in :mod:`motionmatch.runtime.world`; the penalised
search in :mod:`motionmatch.search.penalized`.
"""

from motionmatch.environment.obstacles import Obstacle, ObstacleError, box, disk, ellipse
from motionmatch.environment.scenario import AgentSpec, Scenario, ScenarioError, load_scenario, parse_scenario
from motionmatch.environment.scene import Scene
from motionmatch.environment.terrain import FlatGround, HeightField, Terrain, TerrainError, TriangleMesh, load_terrain

__all__ = ["AgentSpec", "FlatGround", "HeightField", "Obstacle", "ObstacleError", "Scenario", "ScenarioError", "Scene",
           "Terrain", "TerrainError", "TriangleMesh", "box", "disk", "ellipse", "load_scenario", "load_terrain",
           "parse_scenario"]
