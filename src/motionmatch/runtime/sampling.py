"""A controller's reads of the database between its frames: the clip's last frame, the
database root and the local pose at a fractional frame, the pose's velocity at a frame.

:class:`DatabaseSampling` is a part of :class:`~motionmatch.runtime.controller.Controller`
(one of its base classes), kept in a file of its own: it reads the controller's database
and its root tracks (``db``, ``_db_root_pos``, ``_db_root_yaw``, ``root_yaw``)."""

from __future__ import annotations

import math

import numpy as np

from motionmatch.anim import quat
from motionmatch.runtime import _kernels

__all__ = ["DatabaseSampling"]


class DatabaseSampling:
    """Frames of the database as the controller plays them (a mixin of the controller)."""

    def _clip_last(self, frame: int) -> int:
        return int(self.db.clip_stops[self.db.frame_clip[frame]] - 1)

    @property
    def root_rot(self) -> np.ndarray:
        """The character root's rotation ``[4]`` (about +Y)."""
        return quat.from_angle_y(self.root_yaw)

    def _db_root_at(self, fpos: float) -> tuple[tuple[float, float, float], float]:
        """Database root position ``(x, y, z)`` and yaw (rad) at a fractional frame."""
        i = int(fpos)
        j = min(i + 1, self._clip_last(i))
        a = fpos - i
        b = 1 - a
        pi_, pj = self._db_root_pos[i].tolist(), self._db_root_pos[j].tolist()
        p = (b * pi_[0] + a * pj[0], b * pi_[1] + a * pj[1], b * pi_[2] + a * pj[2])
        y0, y1 = float(self._db_root_yaw[i]), float(self._db_root_yaw[j])
        dy = (y1 - y0 + math.pi) % (2 * math.pi) - math.pi
        return p, y0 + a * dy

    def _db_pose_at(self, fpos: float) -> tuple[np.ndarray, np.ndarray]:
        """Local rotations ``[J-1, 4]`` and translations ``[J-1, 3]`` of joints 1.. at ``fpos``."""
        db = self.db
        i = int(fpos)
        j = min(i + 1, self._clip_last(i))
        a = fpos - i
        J = db.skeleton.num_joints - 1
        r, t = np.empty((J, 4)), np.empty((J, 3))
        _kernels.sample_pose(self._rot64(i), self._rot64(j), self._pos64(i), self._pos64(j), a, r, t)
        return r, t

    def _rot64(self, i: int) -> np.ndarray:
        return self.db.rotations[i, 1:].astype(np.float64)

    def _pos64(self, i: int) -> np.ndarray:
        return self.db.translations[i, 1:].astype(np.float64)

    def _db_pose_velocity(self, frame: int) -> tuple[np.ndarray, np.ndarray]:
        db = self.db
        j = min(frame + 1, self._clip_last(frame))
        if j == frame:
            z = np.zeros((db.skeleton.num_joints - 1, 3))
            return z, z.copy()
        w = quat.log(quat.mul_inv(db.rotations[j, 1:], db.rotations[frame, 1:])) * db.fps
        v = (db.translations[j, 1:] - db.translations[frame, 1:]).astype(np.float64) * db.fps
        return w, v
