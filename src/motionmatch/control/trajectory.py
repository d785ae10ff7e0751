"""Desired future trajectory of the character root, predicted with springs (paper Sec. 3.2.3).

The character root ("simulation bone") is a point on the ground with a heading. Its
state is a :class:`RootState`: position, velocity, acceleration, rotation about +Y and
angular velocity. Given a desired velocity and facing, :class:`TrajectoryPredictor`
evaluates where the root will be, which way it will face and how fast it will move at
a few future times (the feature schema's offsets, e.g. ``(1/3, 2/3, 1.0)`` s), each in
closed form (:func:`motionmatch.control.springs.spring_velocity`, and
:func:`~motionmatch.control.springs.spring_rotation` reduced to the heading angle,
evaluated at every offset at once), so there is no per-frame loop and the result does
not depend on a frame rate.

Modes:
    ``"spring"``: velocity and facing follow critically damped springs (the paper's
        method): continuous acceleration, smooth trajectories.
    ``"linear"``: velocity and facing are interpolated toward the goal at a fixed rate
        (:func:`~motionmatch.control.springs.lerp_velocity_exact`,
        :func:`~motionmatch.control.springs.damper_rotation`), the ablation of
        Sec. 4.2.1: the acceleration jumps whenever the input changes.

Vertical motion: with ``vertical=False`` (2D, the default) the y components of the
velocity, acceleration and goal are ignored and predicted heights stay at the current
height. With ``vertical=True`` (the paper's 3D mode, Sec. 3.3.1) y is sprung as well.
For a jump as in the paper, give the root an upward speed ``v_y``
(``predictor.state = state.replace(velocity=...)``) and ask for ``-v_y`` as the goal's
y velocity until the jump ends; ``floor`` (if set) keeps heights at or above the ground.
For creeping the paper instead fixes the trajectory height (0.4 m), which a controller
can write into the predicted positions itself.

Facings are unit vectors in the ground plane; rotations are quaternions ``(w, x, y, z)``
about +Y taking the character's +Z (forward) to its facing. All outputs are world frame;
:meth:`PredictedTrajectory.local` expresses them in a root frame for a feature query.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from motionmatch.anim import quat
from motionmatch.control import springs
from motionmatch.control.intent import STILL_SPEED, Intent, vec3

FORWARD = np.array([0.0, 0.0, 1.0])
MODES = ("spring", "linear")


def heading_of(c: float, s: float) -> float:
    """Heading angle (rad) of the rotation about +Y ``(c, 0, s, 0)`` (``c = cos(a / 2)``,
    ``s = sin(a / 2)``), computed as :func:`motionmatch.anim.quat.yaw_angle` does (the
    rotated +Z axis is ``(2 c s, 0, 1 - 2 s^2)``), wrapped to ``(-pi, pi]``."""
    return math.atan2(c * (2.0 * s), 1.0 - s * (2.0 * s))


def heading_of_angle(angle: float) -> float:
    """``quat.yaw_angle(quat.from_angle_y(angle))`` for one angle (rad), without arrays."""
    half = 0.5 * angle
    return heading_of(math.cos(half), math.sin(half))


def yaw_rotation(direction: ArrayLike) -> np.ndarray:
    """Rotation ``[..., 4]`` about +Y taking +Z to the ground projection of ``direction [..., 3]``."""
    d = np.asarray(direction, dtype=np.float64)
    return quat.from_angle_y(np.arctan2(d[..., 0], d[..., 2]))


def _as_yaw(q: ArrayLike) -> np.ndarray:
    """The heading part of a rotation (rotation about +Y with the same forward projection)."""
    q = np.asarray(q, dtype=np.float64)
    if q.shape in ((2,), (3,)):  # a facing direction was given ([x, z] or [x, y, z])
        return yaw_rotation(vec3(q, "facing"))
    if q.shape != (4,) or not np.all(np.isfinite(q)):
        raise ValueError(f"rotation must be a quaternion (w, x, y, z) or a facing direction [3], got {q!r}")
    return quat.from_angle_y(quat.yaw_angle(quat.normalize(q)))


@dataclass(frozen=True, eq=False)
class RootState:
    """Kinematic state of the character root (world frame).

    Attributes:
        position: ``[3]`` metres.
        velocity: ``[3]`` m/s.
        acceleration: ``[3]`` m/s^2.
        rotation: ``[4]`` heading quaternion about +Y (a facing direction ``[3]`` is
            accepted and converted; any tilt of a full rotation is removed).
        angular_velocity: ``[3]`` rad/s; only the y component (turning) is kept.
    """

    position: np.ndarray = None  # type: ignore[assignment]
    velocity: np.ndarray = None  # type: ignore[assignment]
    acceleration: np.ndarray = None  # type: ignore[assignment]
    rotation: np.ndarray = None  # type: ignore[assignment]
    angular_velocity: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        z = np.zeros(3)
        for name in ("position", "velocity", "acceleration", "angular_velocity"):
            val = getattr(self, name)
            object.__setattr__(self, name, z.copy() if val is None else vec3(val, f"RootState.{name}"))
        w = self.angular_velocity
        object.__setattr__(self, "angular_velocity", np.array([0.0, w[1], 0.0]))
        rot = quat.identity() if self.rotation is None else _as_yaw(self.rotation)
        object.__setattr__(self, "rotation", rot)

    @property
    def direction(self) -> np.ndarray:
        """Unit facing direction ``[3]`` in the ground plane."""
        return quat.rotate(self.rotation, FORWARD)

    @property
    def yaw(self) -> float:
        """Heading angle (radians about +Y, 0 = facing +Z)."""
        y = self.__dict__.get("_yaw")
        if y is None:
            y = float(quat.yaw_angle(self.rotation))
            object.__setattr__(self, "_yaw", y)
        return y

    @classmethod
    def _trusted(cls, position: np.ndarray, velocity: np.ndarray, acceleration: np.ndarray, yaw_angle: float,
                 yaw_rate: float) -> RootState:
        """A state from values known to be valid (float64 ``[3]`` arrays the state may
        own, a heading angle and turning rate in rad and rad/s), without the checks and
        conversions of the constructor: the per-frame path of :class:`TrajectoryPredictor`."""
        st = object.__new__(cls)
        half = 0.5 * heading_of_angle(yaw_angle)  # wrapped like the constructor's _as_yaw
        c, s_ = math.cos(half), math.sin(half)
        sa = object.__setattr__
        sa(st, "position", position)
        sa(st, "velocity", velocity)
        sa(st, "acceleration", acceleration)
        sa(st, "rotation", np.array([c, 0.0, s_, 0.0]))
        sa(st, "angular_velocity", np.array([0.0, yaw_rate, 0.0]))
        sa(st, "_yaw", heading_of(c, s_))
        return st

    def replace(self, **changes) -> RootState:
        """A copy with some fields replaced."""
        return replace(self, **changes)

    def moved_to(self, position: np.ndarray) -> RootState:
        """``replace(position=position)`` for a float64 ``[3]`` array the new state may own,
        without the constructor's checks of the fields kept (the same values: the per-frame
        path of the controller's root adjustment)."""
        st = object.__new__(RootState)
        sa = object.__setattr__
        sa(st, "position", position)
        sa(st, "velocity", self.velocity)
        sa(st, "acceleration", self.acceleration)
        sa(st, "rotation", _as_yaw(self.rotation))  # (as the constructor makes it)
        sa(st, "angular_velocity", self.angular_velocity)
        return st


@dataclass(frozen=True, eq=False)
class PredictedTrajectory:
    """Future root samples at ``times`` (seconds after now), world frame.

    Attributes:
        times: ``[K]`` seconds.
        positions: ``[K, 3]`` metres.
        velocities: ``[K, 3]`` m/s.
        directions: ``[K, 3]`` unit facing directions in the ground plane.
        rotations: ``[K, 4]`` heading quaternions.
    """

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    directions: np.ndarray
    rotations: np.ndarray

    def local(self, origin: ArrayLike, rotation: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(positions, directions, velocities)`` expressed in the frame of a root.

        ``origin [3]`` and ``rotation`` (heading quaternion ``[4]`` or facing ``[3]``) are
        those of the frame, typically the current animation or simulation root. In the
        result +Z is that root's forward and +X its left.
        """
        r = _as_yaw(rotation)
        o = vec3(origin, "origin")
        return (
            quat.inv_rotate(r, self.positions - o),
            quat.inv_rotate(r, self.directions),
            quat.inv_rotate(r, self.velocities),
        )


def _goals(
    state: RootState, desired: Intent | ArrayLike, facing: ArrayLike | None, vertical: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Goal velocity ``[3]`` and goal heading quaternion ``[4]``."""
    if isinstance(desired, Intent):
        vg = np.array(desired.velocity)
        if facing is None:
            facing = desired.facing
    else:
        vg = vec3(desired, "desired velocity")
    if not vertical:
        vg[1] = 0.0
    if facing is not None:
        f = np.asarray(facing, dtype=np.float64)
        if f.shape == (4,):
            return vg, _as_yaw(f)
        f = vec3(f, "desired facing")
        if np.hypot(f[0], f[2]) < 1e-9:
            raise ValueError("desired facing must be a non-zero ground-plane direction (or None)")
        return vg, yaw_rotation(f)
    if np.hypot(vg[0], vg[2]) >= STILL_SPEED:
        return vg, yaw_rotation(vg)
    return vg, state.rotation.copy()


def predict_trajectory(
    state: RootState,
    desired: Intent | ArrayLike,
    times: ArrayLike,
    facing: ArrayLike | None = None,
    velocity_halflife: float = 0.3,
    facing_halflife: float = 0.3,
    mode: str = "spring",
    vertical: bool = False,
    floor: float | None = None,
) -> PredictedTrajectory:
    """Root samples at ``times`` after ``state``, heading for ``desired``; see :class:`TrajectoryPredictor`.

    ``desired`` is an :class:`~motionmatch.control.intent.Intent` (its velocity and
    facing are used) or a desired velocity ``[3]``; ``facing`` (direction ``[3]`` or
    heading quaternion ``[4]``) overrides the intent's; with neither, the goal facing is
    the direction of the desired velocity, or the current facing when that is ~0.
    """
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"times must be a non-empty list of seconds >= 0, got {times!r}")
    vg, qg = _goals(state, desired, facing, vertical)
    x0, v0, a0 = state.position, state.velocity.copy(), state.acceleration.copy()
    if not vertical:
        v0[1] = 0.0
        a0[1] = 0.0
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    tt = t[:, None]
    if mode == "spring":
        pos, vel, _ = springs.spring_velocity(x0, v0, a0, vg, velocity_halflife, tt)
    else:
        pos, vel = springs.lerp_velocity_exact(x0, v0, vg, velocity_halflife, tt)
    if floor is not None and vertical:
        pos[:, 1] = np.maximum(pos[:, 1], floor)
    yaw, _ = _heading(state, qg, facing_halflife, mode, t)
    rot = quat.from_angle_y(yaw)
    dirs = np.stack([np.sin(yaw), np.zeros_like(yaw), np.cos(yaw)], axis=-1)
    return PredictedTrajectory(t.copy(), pos, vel, dirs, rot)


def _heading(
    state: RootState, q_goal: np.ndarray, halflife: float, mode: str, t: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """Heading angles and turning rates after ``t``: the rotation springs restricted to +Y.

    For rotations about +Y only, :func:`~motionmatch.control.springs.spring_rotation`
    (and :func:`~motionmatch.control.springs.damper_rotation`) reduce exactly to the
    scalar springs on the heading angle's offset from the goal, wrapped to
    ``[-pi, pi)`` (the shortest way round); this is that reduction, several times faster
    than the quaternion form for a handful of samples.
    """
    goal = float(quat.yaw_angle(q_goal))
    offset = (state.yaw - goal + np.pi) % (2.0 * np.pi) - np.pi
    if mode == "spring":
        off, rate = springs.decay_spring(offset, state.angular_velocity[1], halflife, t)
    else:
        off = springs.damper_exact(offset, 0.0, halflife, t)
        rate = -springs.LN2 / max(halflife, springs.MIN_HALFLIFE) * off
    return goal + off, rate


class TrajectoryPredictor:
    """Simulated character root plus its spring-predicted future.

    Args:
        times: future offsets in seconds (the feature schema's, e.g. ``(1/3, 2/3, 1.0)``).
        velocity_halflife: seconds for the velocity, from zero acceleration, to get
            halfway to the desired velocity (see :mod:`motionmatch.control.springs`).
            The default 0.3 s is about the 0.27 s common in game demos under the
            envelope convention (0.27 * 1.21 = 0.33).
        facing_halflife: same for the heading.
        mode: ``"spring"`` (the paper's) or ``"linear"`` (interpolation ablation).
        vertical: spring the y axis too (3D mode for jumps); otherwise heights stay put.
        floor: in vertical mode, the lowest height the root may reach (``None``: none).
        state: initial :class:`RootState` (default: at the origin, facing +Z, at rest).

    Per frame, a controller typically calls ``traj = predictor.predict(intent)`` to build
    the query (from the simulated root, or ``predict(intent, state=anim_root_state)`` from
    the animation's root) and ``predictor.advance(dt, intent)`` to move the simulated root.
    """

    def __init__(
        self,
        times: ArrayLike = (1.0 / 3.0, 2.0 / 3.0, 1.0),
        velocity_halflife: float = 0.3,
        facing_halflife: float = 0.3,
        mode: str = "spring",
        vertical: bool = False,
        floor: float | None = None,
        state: RootState | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        for name, h in (("velocity_halflife", velocity_halflife), ("facing_halflife", facing_halflife)):
            if not np.isfinite(h) or h < 0:
                raise ValueError(f"{name} must be finite and >= 0 seconds, got {h!r}")
        t = np.asarray(times, dtype=np.float64).reshape(-1)
        if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise ValueError(f"times must be a non-empty list of seconds >= 0, got {times!r}")
        self.times = t
        self.velocity_halflife = float(velocity_halflife)
        self.facing_halflife = float(facing_halflife)
        self.mode = mode
        self.vertical = bool(vertical)
        self.floor = floor
        self.state = state if state is not None else RootState()

    def reset(
        self,
        position: ArrayLike = (0.0, 0.0, 0.0),
        facing: ArrayLike = (0.0, 0.0, 1.0),
        velocity: ArrayLike = (0.0, 0.0, 0.0),
    ) -> RootState:
        """Put the simulated root at ``position`` facing ``facing`` (direction or quaternion), moving at ``velocity``."""
        self.state = RootState(position=position, velocity=velocity, rotation=facing)
        return self.state

    def predict(
        self,
        desired: Intent | ArrayLike,
        facing: ArrayLike | None = None,
        state: RootState | None = None,
    ) -> PredictedTrajectory:
        """Future samples at :attr:`times` from ``state`` (default: the simulated root)."""
        if self.mode == "spring" and not self.vertical and facing is None and isinstance(desired, Intent):
            return self._predict_planar(self.state if state is None else state, desired)
        return predict_trajectory(
            self.state if state is None else state,
            desired,
            self.times,
            facing=facing,
            velocity_halflife=self.velocity_halflife,
            facing_halflife=self.facing_halflife,
            mode=self.mode,
            vertical=self.vertical,
            floor=self.floor,
        )

    def _goal_heading(self, s: RootState, desired: Intent) -> tuple[float, float, float]:
        """Goal velocity ``(x, z)`` and goal heading (rad) of an intent, as :func:`_goals`
        and :func:`_heading` derive them, on floats."""
        gx, _, gz = desired.velocity.tolist()
        f = desired.facing
        if f is not None:
            fx, _, fz = f.tolist()
            goal = heading_of_angle(math.atan2(fx, fz))
        elif math.hypot(gx, gz) >= STILL_SPEED:
            goal = heading_of_angle(math.atan2(gx, gz))
        else:
            goal = s.yaw
        return gx, gz, goal

    def _predict_planar(self, s: RootState, desired: Intent) -> PredictedTrajectory:
        """:meth:`predict` in the common case (spring mode, 2D, an :class:`Intent`) on
        floats: :func:`predict_trajectory`'s closed forms without small-array overhead."""
        gx, gz, goal = self._goal_heading(s, desired)
        y = springs.SPRING_HALFLIFE_FACTOR / max(self.velocity_halflife, springs.MIN_HALFLIFE)
        yy = y * y
        yh = springs.SPRING_HALFLIFE_FACTOR / max(self.facing_halflife, springs.MIN_HALFLIFE)
        px, py, pz = s.position.tolist()
        vx, _, vz = s.velocity.tolist()
        ax, _, az = s.acceleration.tolist()
        j0x, j0z = vx - gx, vz - gz
        j1x, j1z = ax + j0x * y, az + j0z * y
        off0 = (s.yaw - goal + math.pi) % (2.0 * math.pi) - math.pi
        j1h = float(s.angular_velocity[1]) + off0 * yh
        pos, vel, dirs, rot = [], [], [], []
        for t in self.times.tolist():
            yt = y * t
            e = math.exp(-yt)
            e1 = -math.expm1(-yt)
            n2 = 1.0 - (1.0 + yt) * e
            pos.append((px + gx * t + j0x * e1 / y + j1x * n2 / yy, py,
                        pz + gz * t + j0z * e1 / y + j1z * n2 / yy))
            vel.append((gx + e * (j0x + j1x * t), 0.0, gz + e * (j0z + j1z * t)))
            yaw = goal + math.exp(-yh * t) * (off0 + j1h * t)
            dirs.append((math.sin(yaw), 0.0, math.cos(yaw)))
            rot.append((math.cos(0.5 * yaw), 0.0, math.sin(0.5 * yaw), 0.0))
        return PredictedTrajectory(self.times.copy(), np.array(pos), np.array(vel), np.array(dirs), np.array(rot))

    def advance(self, dt: float, desired: Intent | ArrayLike, facing: ArrayLike | None = None) -> RootState:
        """Step the simulated root ``dt`` seconds toward ``desired``; returns (and stores) the new state.

        Exact for any ``dt``: the new state equals the prediction at offset ``dt``.
        """
        if not (dt >= 0 and math.isfinite(dt)):
            raise ValueError(f"dt must be finite and >= 0 seconds, got {dt!r}")
        if self.mode == "spring" and not self.vertical and facing is None and isinstance(desired, Intent):
            return self._advance_planar(float(dt), desired)
        return self._advance_springs(dt, desired, facing)

    def _advance_planar(self, dt: float, desired: Intent) -> RootState:
        """:meth:`advance` in the common case (spring mode, 2D, an :class:`Intent`), on
        Python floats: the same closed forms as
        :func:`~motionmatch.control.springs.spring_velocity` and
        :func:`~motionmatch.control.springs.decay_spring`, without small-array overhead."""
        s = self.state
        gx, gz, goal = self._goal_heading(s, desired)
        # velocity spring (x and z; y is not sprung in 2D: its velocity and acceleration are 0)
        t = dt
        y = springs.SPRING_HALFLIFE_FACTOR / max(self.velocity_halflife, springs.MIN_HALFLIFE)
        yt = y * t
        e = math.exp(-yt)
        e1 = -math.expm1(-yt)
        n2 = 1.0 - (1.0 + yt) * e
        yy = y * y
        p, v, a = s.position.tolist(), s.velocity.tolist(), s.acceleration.tolist()
        xs, vs, as_ = [0.0, p[1], 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        for c, g in ((0, gx), (2, gz)):
            v0, a0 = v[c], a[c]
            j0 = v0 - g
            j1 = a0 + j0 * y
            xs[c] = p[c] + g * t + j0 * e1 / y + j1 * n2 / yy
            vs[c] = g + e * (j0 + j1 * t)
            as_[c] = e * (a0 - j1 * yt)
        # heading spring toward the goal, the shortest way round
        off0 = (s.yaw - goal + math.pi) % (2.0 * math.pi) - math.pi
        w0 = float(s.angular_velocity[1])
        yh = springs.SPRING_HALFLIFE_FACTOR / max(self.facing_halflife, springs.MIN_HALFLIFE)
        eh = math.exp(-yh * t)
        j1 = w0 + off0 * yh
        off = eh * (off0 + j1 * t)
        rate = eh * (w0 - j1 * yh * t)
        self.state = RootState._trusted(np.array(xs), np.array(vs), np.array(as_), goal + off, rate)
        return self.state

    def _advance_springs(self, dt: float, desired: Intent | ArrayLike, facing: ArrayLike | None = None) -> RootState:
        """:meth:`advance` on the array springs of :mod:`motionmatch.control.springs`: the
        general path, for every mode and input (:meth:`advance` takes a float fast path in
        the common case)."""
        if not np.isfinite(dt) or dt < 0:
            raise ValueError(f"dt must be finite and >= 0 seconds, got {dt!r}")
        s = self.state
        vg, qg = _goals(s, desired, facing, self.vertical)
        v0, a0 = s.velocity.copy(), s.acceleration.copy()
        if not self.vertical:
            v0[1] = 0.0
            a0[1] = 0.0
        if self.mode == "spring":
            x, v, a = springs.spring_velocity(s.position, v0, a0, vg, self.velocity_halflife, dt)
        else:
            x, v = springs.lerp_velocity_exact(s.position, v0, vg, self.velocity_halflife, dt)
            lam = springs.LN2 / max(self.velocity_halflife, springs.MIN_HALFLIFE)
            a = -lam * (v - vg)
        yaw, rate = _heading(s, qg, self.facing_halflife, self.mode, float(dt))
        q, w = quat.from_angle_y(yaw), np.array([0.0, float(rate), 0.0])
        if self.vertical and self.floor is not None and x[1] <= self.floor:
            x[1] = self.floor
            v[1] = max(v[1], 0.0)
            a[1] = max(a[1], 0.0)
        self.state = RootState(x, v, a, q, w)
        return self.state
