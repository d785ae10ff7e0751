"""Numbers that say how good an animation is.

Array-level functions take frame-major arrays in metres and seconds (Y up) and document
their shapes and units; the ``*_motion`` functions and :func:`upright_fraction` are thin
conveniences on a :class:`motionmatch.anim.Motion`.

=============================  ===========================================================
foot sliding                   :func:`foot_skating`, :func:`foot_skating_motion` (m/s)
smoothness                     :func:`jerk`, :func:`jerk_motion` (m/s^3)
search behaviour               :func:`count_transitions`, :func:`transitions_per_second`
responsiveness                 :func:`response_time`, :func:`mean_response_time` (s)
following a trajectory/path    :func:`trajectory_error`, :func:`distance_to_path`,
                               :func:`mean_distance_to_path` (m)
sanity                         :func:`count_nan_frames`, :func:`upright_fraction`
generative synthesis (GenMM)   :func:`coverage`, :func:`local_patch_distance`,
                               :func:`global_patch_distance`, :func:`set_diversity`
=============================  ===========================================================
"""

from motionmatch.geometry.polyline import distance_to_path, mean_distance_to_path
from motionmatch.metrics.control import (
    count_transitions,
    mean_response_time,
    response_time,
    trajectory_error,
    transitions_per_second,
    travel_directions,
)
from motionmatch.metrics.feet import foot_skating, foot_skating_motion
from motionmatch.metrics.genmm import coverage, global_patch_distance, local_patch_distance, set_diversity
from motionmatch.metrics.sanity import count_nan_frames, find_head, upright_fraction, upright_fraction_positions
from motionmatch.metrics.smoothness import jerk, jerk_motion

__all__ = [
    "count_nan_frames",
    "count_transitions",
    "coverage",
    "distance_to_path",
    "find_head",
    "foot_skating",
    "foot_skating_motion",
    "global_patch_distance",
    "jerk",
    "jerk_motion",
    "local_patch_distance",
    "mean_distance_to_path",
    "mean_response_time",
    "response_time",
    "set_diversity",
    "trajectory_error",
    "transitions_per_second",
    "travel_directions",
    "upright_fraction",
    "upright_fraction_positions",
]
