"""The spring predictor's array formulation: what its float fast paths are checked against.

:meth:`~motionmatch.control.trajectory.TrajectoryPredictor.predict` and
:meth:`~motionmatch.control.trajectory.TrajectoryPredictor.advance` take closed forms on
Python floats in the common case (spring mode, 2D, an :class:`~motionmatch.control.intent.Intent`);
these functions take the array path for every input.
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from motionmatch.control.intent import Intent
from motionmatch.control.trajectory import PredictedTrajectory, RootState, TrajectoryPredictor, predict_trajectory

__all__ = ["advance_reference", "predict_reference"]


def predict_reference(
    predictor: TrajectoryPredictor,
    desired: Intent | ArrayLike,
    facing: ArrayLike | None = None,
    state: RootState | None = None,
) -> PredictedTrajectory:
    """``predictor.predict(desired, facing, state)`` through :func:`predict_trajectory` for
    every mode, with the predictor's times and settings."""
    return predict_trajectory(
        predictor.state if state is None else state,
        desired,
        predictor.times,
        facing=facing,
        velocity_halflife=predictor.velocity_halflife,
        facing_halflife=predictor.facing_halflife,
        mode=predictor.mode,
        vertical=predictor.vertical,
        floor=predictor.floor,
    )


def advance_reference(
    predictor: TrajectoryPredictor, dt: float, desired: Intent | ArrayLike, facing: ArrayLike | None = None
) -> RootState:
    """``predictor.advance(dt, desired, facing)`` on the array springs of
    :mod:`motionmatch.control.springs` for every input: the general path ``advance`` takes
    outside its float fast path, here forced. Returns (and stores) the new state."""
    return predictor._advance_springs(dt, desired, facing)
