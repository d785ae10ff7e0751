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

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from motionmatch.anim import quat
from motionmatch.control import springs
from motionmatch.control.intent import STILL_SPEED, Intent, vec3

FORWARD = np.array([0.0, 0.0, 1.0])
MODES = ("spring", "linear")


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
        return float(quat.yaw_angle(self.rotation))

    def replace(self, **changes) -> RootState:
        """A copy with some fields replaced."""
        return replace(self, **changes)


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

    def advance(self, dt: float, desired: Intent | ArrayLike, facing: ArrayLike | None = None) -> RootState:
        """Step the simulated root ``dt`` seconds toward ``desired``; returns (and stores) the new state.

        Exact for any ``dt``: the new state equals the prediction at offset ``dt``.
        """
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
