"""What a :class:`~motionmatch.viewer.session.Session` and its parts share: the tick rate
and :class:`Rejected`, a valid message that cannot be carried out now."""

from __future__ import annotations

from motionmatch.errors import MotionMatchError

__all__ = ["DT", "TICK_HZ", "Rejected"]

TICK_HZ = 60
DT = 1.0 / TICK_HZ


class Rejected(MotionMatchError):
    """A valid message that cannot be carried out now (unknown id, nothing recorded...)."""
