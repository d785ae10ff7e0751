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

Running characters in a scene lives in :mod:`motionmatch.runtime.world`; the penalised
search in :mod:`motionmatch.search.penalized`.
"""

from motionmatch.environment.obstacles import Obstacle, ObstacleError, box, disk, ellipse
from motionmatch.environment.scenario import AgentSpec, Scenario, ScenarioError, load_scenario, parse_scenario
from motionmatch.environment.scene import Scene

__all__ = ["AgentSpec", "Obstacle", "ObstacleError", "Scenario", "ScenarioError", "Scene", "box", "disk", "ellipse",
           "load_scenario", "parse_scenario"]
