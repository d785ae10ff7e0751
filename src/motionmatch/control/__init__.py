"""What is wanted: springs, desired trajectories, and input devices turned into intents.

* :mod:`~motionmatch.control.springs`: critically damped springs (half-life
  parametrised, exact for any time step) and the interpolation alternative.
* :mod:`~motionmatch.control.trajectory`: the simulated character root and its predicted
  future positions / facings / velocities at the feature schema's offsets.
* :mod:`~motionmatch.control.intent`: the device-agnostic :class:`Intent` and gait speeds.
* :mod:`~motionmatch.control.keyboard`: keyboard keys and gamepad sticks to intents.
* :mod:`~motionmatch.control.script`: JSON timelines of keys / intents for offline runs.
* :mod:`~motionmatch.control.path`: drawn, timed paths and the revised future queries.
* :mod:`~motionmatch.control.direction_net`: DirectionNet, facing along a path;
  :mod:`~motionmatch.control.direction_cache`: the default one, trained on first use and cached.

This package knows nothing of databases or searches; it only says what the user wants.
"""

from motionmatch.control import springs
from motionmatch.control.intent import ACTIONS, GAITS, GaitSpeeds, Intent
from motionmatch.control.keyboard import (
    KEYS,
    KeyboardController,
    intent_from_keys,
    intent_from_stick,
    key_direction,
    normalize_key,
)
from motionmatch.control.path import PathError, TimedPath, load_path
from motionmatch.control.revision import QueryReviser, RevisionSettings
from motionmatch.control.script import Script, ScriptError, ScriptEvent, load_script, parse_script
from motionmatch.control.springs import (
    damper_exact,
    decay_spring,
    lerp_toward,
    spring_position,
    spring_rotation,
    spring_velocity,
)
from motionmatch.control.trajectory import PredictedTrajectory, RootState, TrajectoryPredictor, predict_trajectory

__all__ = [
    "ACTIONS",
    "GAITS",
    "KEYS",
    "GaitSpeeds",
    "Intent",
    "KeyboardController",
    "PathError",
    "PredictedTrajectory",
    "QueryReviser",
    "RevisionSettings",
    "RootState",
    "Script",
    "ScriptError",
    "ScriptEvent",
    "TimedPath",
    "TrajectoryPredictor",
    "damper_exact",
    "decay_spring",
    "intent_from_keys",
    "intent_from_stick",
    "key_direction",
    "lerp_toward",
    "load_path",
    "load_script",
    "normalize_key",
    "parse_script",
    "predict_trajectory",
    "spring_position",
    "spring_rotation",
    "spring_velocity",
    "springs",
]
