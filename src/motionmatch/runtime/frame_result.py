"""What one controller update produces: a :class:`FrameResult` (the pose, the frame
played, whether it searched) and the per-group costs of its search (:class:`GroupCosts`,
computed when read)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from motionmatch.control.trajectory import PredictedTrajectory
from motionmatch.database import MotionDatabase

__all__ = ["FrameResult", "GroupCosts"]


class GroupCosts(Mapping):
    """The squared distance per feature group between a search's normalised query and the
    frame it chose (:meth:`MotionDatabase.group_costs`), computed when first read: a
    crowd's searches make them every frame and almost nobody reads them (the viewer's debug
    panel does). A read-only mapping ``{group: cost}``; ``dict(costs)`` copies it.

    Args:
        db: the database; query: ``[D]`` the normalised query (held, not copied: the
            controller makes a new one for every search); frame: the chosen frame.
    """

    __slots__ = ("_costs", "_db", "_frame", "_query")

    def __init__(self, db: MotionDatabase, query: np.ndarray, frame: int):
        self._db, self._query, self._frame = db, query, int(frame)
        self._costs: dict[str, float] | None = None

    def _get(self) -> dict[str, float]:
        if self._costs is None:
            self._costs = self._db.group_costs(self._query, self._frame)
            self._db = self._query = None
        return self._costs

    def __getitem__(self, key: str) -> float:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return f"GroupCosts({self._get()!r})"


@dataclass
class FrameResult:
    """What one update produced.

    Attributes:
        rotations: ``[J, 4]`` local rotations; joint 0 is the character root (world yaw).
        translations: ``[J, 3]`` local translations; joint 0 is the root's world position.
        frame: database frame being played.
        mode: the controller's mode.
        searched, transitioned: whether a search / a transition happened this update.
        desired: the desired trajectory (world) used for the last query.
        contacts: ``[K]`` bool, feet locked this frame.
    """

    rotations: np.ndarray
    translations: np.ndarray
    frame: int
    mode: str
    searched: bool
    transitioned: bool
    desired: PredictedTrajectory | None
    contacts: np.ndarray
    costs: Mapping[str, float] = field(default_factory=dict)
