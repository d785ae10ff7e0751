"""Inertialization: smooth transitions by decaying the offset between two poses.

At a transition the difference between the pose being shown (source) and the new
animation (target) is stored as an offset per joint; the new animation then plays with
that offset added, and the offset decays to zero. Two decay laws:

* ``"quintic"``: Bollo's inertialization (the paper's Section 3.2.5). Per joint, the
  norm of the offset (rotation angle, or translation length) follows a quintic
  polynomial from ``x0`` with initial velocity ``v0`` to rest at ``t1``, along a fixed
  axis/direction. Overshoot is prevented as in Bollo's talk: ``v0`` is clamped to
  ``<= 0``, ``t1`` to ``<= 5 x0 / |v0|``, and the initial acceleration to ``>= 0``.
  (The paper's text prints the last clamp as ``c2 <- min(c2, 0)``; with its sign
  convention ``x0 >= 0`` decreasing to 0 that allows undershoot, so we use Bollo's
  ``a0 <- max(a0, 0)``, which the tests check.)
* ``"spring"``: a critically damped spring decaying the offset (rotation vector and
  translation) and its velocity toward zero with a half-life.
* ``"none"``: transitions are cuts (for the ablation).

Everything is vectorised over joints; the per-frame quintic decay is a compiled kernel
(:func:`motionmatch.runtime._kernels.quintic_offsets`), which :class:`Inertializer` uses
and the controller fuses into its per-frame pose kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from motionmatch.anim import quat
from motionmatch.runtime import _kernels
from motionmatch.runtime.rows import RowArrays, row_field

METHODS = ("quintic", "spring", "none")


def quintic_coefficients(x0: np.ndarray, v0: np.ndarray, t1: float) -> tuple[np.ndarray, ...]:
    """Coefficients ``(A, B, C, a0 / 2, v0, x0, t1)`` of Bollo's overshoot-free quintic.

    ``x0 >= 0`` is the initial offset norm, ``v0`` its rate of change, ``t1`` the desired
    blend time (s). Arrays broadcast. Returns per-element (possibly shortened) ``t1``.
    """
    x0 = np.asarray(x0, dtype=np.float64)
    v0 = np.minimum(np.asarray(v0, dtype=np.float64), 0.0)
    t1 = np.full_like(x0, float(t1))
    moving = v0 < -1e-12
    t1 = np.where(moving, np.minimum(t1, 5.0 * x0 / np.where(moving, -v0, 1.0)), t1)
    t1 = np.maximum(t1, 1e-6)
    a0 = np.maximum((-8.0 * v0 * t1 - 20.0 * x0) / t1**2, 0.0)
    A = -(a0 * t1**2 + 6.0 * v0 * t1 + 12.0 * x0) / (2.0 * t1**5)
    B = (3.0 * a0 * t1**2 + 16.0 * v0 * t1 + 30.0 * x0) / (2.0 * t1**4)
    C = -(3.0 * a0 * t1**2 + 12.0 * v0 * t1 + 20.0 * x0) / (2.0 * t1**3)
    return A, B, C, 0.5 * a0, v0, x0, t1


class InertialArrays(NamedTuple):
    """The arrays of :func:`inertial_rows` (``C`` rows of ``J`` joints), what they hold
    (compiled stages take them by name)."""

    elapsed: np.ndarray     #: ``[C]`` seconds since the transition
    started: np.ndarray     #: ``[C]`` bool: a quintic transition happened (its coefficients are valid)
    rot_offset: np.ndarray  #: ``[C, J, 4]`` rotation offsets (quaternions)
    pos_offset: np.ndarray  #: ``[C, J, 3]`` translation offsets (m)
    rot_axis: np.ndarray    #: ``[C, J, 3]`` unit axes of the rotation offsets
    pos_dir: np.ndarray     #: ``[C, J, 3]`` unit directions of the translation offsets
    rot_coeffs: np.ndarray  #: ``[C, 7, J]`` quintic coefficients of the angles
    pos_coeffs: np.ndarray  #: ``[C, 7, J]`` quintic coefficients of the distances


def inertial_rows(num_joints: int, capacity: int = 1) -> RowArrays:
    """The state of ``capacity`` inertializers of ``J = num_joints`` joints as rows (the
    fields of :class:`InertialArrays`)."""
    J = int(num_joints)
    f8 = np.float64
    shapes = {"elapsed": ((), f8), "started": ((), np.bool_), "rot_offset": ((J, 4), f8),
              "pos_offset": ((J, 3), f8), "rot_axis": ((J, 3), f8), "pos_dir": ((J, 3), f8),
              "rot_coeffs": ((7, J), f8), "pos_coeffs": ((7, J), f8)}
    return RowArrays({name: shapes[name] for name in InertialArrays._fields}, capacity)


class Inertializer:
    """Offsets for ``J`` joints' local rotations and translations, decaying over time.

    Args:
        num_joints: ``J``.
        method: ``"quintic"``, ``"spring"`` or ``"none"``.
        blend_time: quintic blend duration ``t1`` (s).
        halflife: spring half-life (s).
        rows, row: where the state that compiled kernels read lives: row ``row`` (default:
            a free one) of :func:`inertial_rows` arrays shared with other inertializers
            (default: arrays of its own).
    """

    def __init__(self, num_joints: int, method: str = "quintic", blend_time: float = 0.3, halflife: float = 0.1,
                 *, rows: RowArrays | None = None, row: int | None = None):
        if method not in METHODS:
            raise ValueError(f"inertialization method must be one of {METHODS}, got {method!r}")
        self.J = num_joints
        self.method = method
        self.blend_time = float(blend_time)
        self.halflife = float(halflife)
        self.rows = rows if rows is not None else inertial_rows(num_joints)
        self.row = self.rows.take() if row is None else int(row)
        self.reset()

    # the state, in its row
    def _in_rows(self) -> tuple:
        return self.rows, self.row

    elapsed = row_field(_in_rows, "elapsed", float, "Seconds since the last transition.")
    rot_offset = row_field(_in_rows, "rot_offset", doc="``[J, 4]`` rotation offsets (a view of the row).")
    pos_offset = row_field(_in_rows, "pos_offset", doc="``[J, 3]`` translation offsets (a view of the row).")
    _rot_axis = row_field(_in_rows, "rot_axis")
    _pos_dir = row_field(_in_rows, "pos_dir")

    @property
    def _rc(self) -> np.ndarray | None:
        """``[7, J]`` quintic coefficients of the rotation offsets (``None`` before a quintic transition)."""
        return self.rows.rot_coeffs[self.row] if self.rows.started[self.row] else None

    @property
    def _pc(self) -> np.ndarray | None:
        return self.rows.pos_coeffs[self.row] if self.rows.started[self.row] else None

    @property
    def _rot_coeffs(self) -> tuple[np.ndarray, ...] | None:
        """:func:`quintic_coefficients` of the rotation offsets (``None`` before a quintic transition)."""
        rc = self._rc
        return None if rc is None else tuple(rc)

    @property
    def _pos_coeffs(self) -> tuple[np.ndarray, ...] | None:
        pc = self._pc
        return None if pc is None else tuple(pc)

    def reset(self) -> None:
        J = self.J
        self.rot_offset = quat.identity((J,))
        self.pos_offset = 0.0
        self.rot_vel = np.zeros((J, 3))   # spring: d/dt of the rotation-vector offset
        self.pos_vel = np.zeros((J, 3))
        self.elapsed = 0.0
        r, i = self.rows, self.row
        r.rot_axis[i] = 0.0
        r.pos_dir[i] = 0.0
        r.started[i] = False

    def transition(self, src_rot: np.ndarray, src_rot_vel: np.ndarray, dst_rot: np.ndarray, dst_rot_vel: np.ndarray,
                   src_pos: np.ndarray, src_pos_vel: np.ndarray, dst_pos: np.ndarray, dst_pos_vel: np.ndarray) -> None:
        """Start a transition from the shown pose (``src``) to a new animation (``dst``).

        Rotations ``[J, 4]`` (local), angular velocities ``[J, 3]`` (rad/s), translations
        ``[J, 3]`` and their velocities ``[J, 3]``. ``src`` should be the pose *as shown*,
        offsets included, so a transition during a transition stays continuous.
        """
        if self.method == "none":
            self.reset()
            return
        off = quat.mul_inv(src_rot, dst_rot)
        off = np.where(off[:, :1] < 0, -off, off)  # shortest rotation
        rv = quat.log(off)  # [J, 3] axis * angle
        rv_vel = src_rot_vel - dst_rot_vel
        dp = src_pos - dst_pos
        dp_vel = src_pos_vel - dst_pos_vel
        self.elapsed = 0.0
        if self.method == "spring":
            self.rot_offset = off
            self._rv = rv
            self.rot_vel = rv_vel
            self.pos_offset = dp
            self.pos_vel = dp_vel
            return
        r, i = self.rows, self.row
        angle = np.linalg.norm(rv, axis=1)
        r.rot_axis[i] = np.where(angle[:, None] > 1e-9, rv / np.maximum(angle, 1e-12)[:, None], 0.0)
        v_angle = np.sum(rv_vel * self._rot_axis, axis=1)  # rate of change of the angle
        r.rot_coeffs[i] = np.stack(quintic_coefficients(angle, v_angle, self.blend_time))
        dist = np.linalg.norm(dp, axis=1)
        r.pos_dir[i] = np.where(dist[:, None] > 1e-9, dp / np.maximum(dist, 1e-12)[:, None], 0.0)
        v_dist = np.sum(dp_vel * self._pos_dir, axis=1)
        r.pos_coeffs[i] = np.stack(quintic_coefficients(dist, v_dist, self.blend_time))
        r.started[i] = True
        self.rot_offset = off
        self.pos_offset = dp

    def transition_to_frame(self, db_rot: np.ndarray, db_pos: np.ndarray, frame: int, nxt: int, fps: float,
                            src_rot: np.ndarray, src_pos: np.ndarray, prev_rot: np.ndarray, prev_pos: np.ndarray,
                            dt: float) -> None:
        """:meth:`transition` from the pose shown to a database frame, velocities by finite differences.

        ``db_rot [N, J+1, 4]``, ``db_pos [N, J+1, 3]``: a database's local transforms
        (joint 0, the root, is not blended); the target is frame ``frame`` with its
        velocity toward frame ``nxt`` at ``fps`` (zero when ``nxt == frame``). The source
        is the shown pose ``src_rot [J, 4]``, ``src_pos [J, 3]`` with its velocity from
        ``prev_rot``, ``prev_pos`` shown ``dt`` seconds before (zero when ``dt <= 0``).
        The quintic method runs as one compiled kernel.
        """
        if self.method == "quintic":
            r, i = self.rows, self.row
            _kernels.quintic_transition(db_rot, db_pos, int(frame), int(nxt), float(fps), src_rot, src_pos, prev_rot,
                                        prev_pos, float(dt), self.blend_time, r.rot_offset[i], r.rot_axis[i],
                                        r.rot_coeffs[i], r.pos_offset[i], r.pos_dir[i], r.pos_coeffs[i])
            r.started[i] = True
            self.elapsed = 0.0
            return
        q = quat
        f = slice(1, None)
        dst_rot = q.normalize(db_rot[frame, f].astype(np.float64))
        dst_pos = db_pos[frame, f].astype(np.float64)
        if nxt != frame:
            dst_w = q.log(q.mul_inv(db_rot[nxt, f], db_rot[frame, f])) * fps
            dst_v = (db_pos[nxt, f] - db_pos[frame, f]).astype(np.float64) * fps
        else:
            dst_w = dst_v = np.zeros((self.J, 3))
        if dt > 0:
            src_w, src_v = q.log(q.mul_inv(src_rot, prev_rot)) / dt, (src_pos - prev_pos) / dt
        else:
            src_w = src_v = np.zeros((self.J, 3))
        self.transition(src_rot, src_w, dst_rot, dst_w, src_pos, src_v, dst_pos, dst_v)

    def update(self, dt: float) -> None:
        """Advance the decay by ``dt`` seconds."""
        self.elapsed += dt
        if self.method == "spring":
            from motionmatch.control.springs import decay_spring

            rv, self.rot_vel = decay_spring(getattr(self, "_rv", np.zeros((self.J, 3))), self.rot_vel, self.halflife, dt)
            self._rv = rv
            self.rot_offset = quat.exp(rv)
            self.pos_offset, self.pos_vel = decay_spring(self.pos_offset, self.pos_vel, self.halflife, dt)
        elif self.method == "quintic" and self._rc is not None:
            _kernels.quintic_offsets(self._rot_axis, self._rc, self._pos_dir, self._pc, self.elapsed,
                                     self.rot_offset, self.pos_offset)

    def advance(self, dt: float) -> int:
        """Advance the decay by ``dt`` seconds for a caller that evaluates the offsets in
        its own kernel (the controller's :func:`~motionmatch.runtime._kernels.controller_pose`).

        Returns that kernel's ``inert_mode``: 0 no offsets to apply, 1 quintic offsets to
        evaluate at :attr:`elapsed` from the stored coefficients (into :attr:`rot_offset`,
        :attr:`pos_offset`), 2 offsets already current in :attr:`rot_offset`, :attr:`pos_offset`.
        """
        if self.method == "quintic":
            self.elapsed += dt
            return 1 if self._rc is not None else 0
        if self.method == "spring":
            self.update(dt)
            return 2
        self.elapsed += dt
        return 0

    def apply(self, rot: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The animation's pose ``[J, 4]``, ``[J, 3]`` with the current offsets applied."""
        if self.method == "none":
            return rot, pos
        return quat.mul(self.rot_offset, rot), pos + self.pos_offset
