"""Critically damped springs with exact (closed-form) updates, parametrised by half-life.

Every function here advances a state by ``dt`` seconds *exactly*: the result is the
analytic solution of the differential equation at ``t = dt``, so one call with
``dt = 1.0`` equals sixty calls with ``dt = 1/60`` (up to rounding), at any frame rate.
All of them broadcast over arrays: ``x``, ``v``, goals, ``halflife`` and ``dt`` may be
scalars or arrays of compatible shapes (``dt`` of shape ``[K, 1]`` against states of
shape ``[3]`` evaluates ``K`` future times at once).

The second-order spring
-----------------------
A damped spring pulling ``x`` toward ``g`` obeys ``x'' = -k (x - g) - c x'``. With the
critical damping ``c = 2 sqrt(k)`` the characteristic equation has the double root
``-y`` (``y = c / 2``), and the general solution relative to the goal is::

    x(t) - g = (j0 + j1 t) e^(-y t),   j0 = x0 - g,   j1 = v0 + y j0
    x'(t)    = (v0 - y j1 t) e^(-y t)

This is the paper's Eq. 9 (there with ``g = 0`` and ``omega = y``) and Eq. 10 (whose
extracted text garbles the constant ``c``; for a position goal ``c = g``). The paper's
"decaying rate" ``d`` is our ``2 y``.

What "half-life" means here
---------------------------
The *half-life* ``h`` is the time a spring released **at rest** (``v0 = 0``) takes to
halve its distance to the goal: ``x(h) - g = (x0 - g) / 2``. From rest the remaining
fraction is ``(1 + y t) e^(-y t)``, so ``h`` and ``y`` are related by
``(1 + u) e^(-u) = 1/2`` with ``u = y h``. Its solution is
``u = -W_{-1}(-1 / (2e)) - 1 = 1.6783469900...`` (``W_{-1}`` the lower branch of the
Lambert W function), hence ``y = 1.67835 / h`` (:func:`halflife_to_damping`).

A widespread game-programming convention instead takes ``y = (4 ln 2 / h) / 2 =
1.38629 / h``, i.e. it halves the *envelope* ``e^(-y t)`` in ``h / 2`` and leaves about
59.7 % of the distance after ``h``: its springs are slower than ours for the same
number. To reuse half-lives tuned under that convention, multiply them by
``1.67835 / 1.38629 = 1.2107`` (:data:`ENVELOPE_TO_DISTANCE_HALFLIFE`).

For the first-order :func:`damper_exact` (and :func:`lerp_toward`) the half-life has its
plain meaning at any starting state: the distance halves every ``h`` seconds.

A half-life of zero snaps to the goal (``y`` becomes huge; no division by zero occurs).
Half-lives must be non-negative and time steps non-negative.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from motionmatch.anim import quat

Array = NDArray[np.float64]

LN2 = float(np.log(2.0))

#: ``u`` solving ``(1 + u) e^(-u) = 1/2``: damping times half-life for a critically damped
#: spring released at rest (see the module docstring).
SPRING_HALFLIFE_FACTOR = 1.6783469900166605

#: Multiply a half-life tuned under the ``y = 2 ln 2 / h`` convention by this to get the
#: half-life (in this module's meaning) of the same spring.
ENVELOPE_TO_DISTANCE_HALFLIFE = SPRING_HALFLIFE_FACTOR / (2.0 * LN2)

MIN_HALFLIFE = 1e-9  # half-lives below this (including 0) snap to the goal


def _check_nonneg(name: str, value: ArrayLike) -> Array:
    if isinstance(value, (float, int)):  # fast path for the common scalar case
        if not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be finite and >= 0 seconds, got {value!r}")
        return np.float64(value)
    a = np.asarray(value, dtype=np.float64)
    if np.any(a < 0) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite and >= 0 seconds, got {value!r}")
    return a


def halflife_to_damping(halflife: ArrayLike) -> Array:
    """Damping ``y`` (1/s) of a critically damped spring that halves its distance from rest in ``halflife`` s."""
    h = _check_nonneg("halflife", halflife)
    return SPRING_HALFLIFE_FACTOR / np.maximum(h, MIN_HALFLIFE)


def damping_to_halflife(damping: ArrayLike) -> Array:
    """Inverse of :func:`halflife_to_damping`."""
    y = np.asarray(damping, dtype=np.float64)
    if np.any(y <= 0):
        raise ValueError(f"damping must be > 0, got {damping!r}")
    return SPRING_HALFLIFE_FACTOR / y


def lerp_rate_to_halflife(rate: float, fps: float) -> float:
    """Half-life equivalent to ``x = lerp(x, goal, rate)`` applied once per frame at ``fps``.

    ``rate`` in ``(0, 1)``; ``rate = 1`` (snap) gives 0.
    """
    if not 0.0 < rate <= 1.0 or fps <= 0:
        raise ValueError(f"need 0 < rate <= 1 and fps > 0, got rate={rate!r}, fps={fps!r}")
    if rate == 1.0:
        return 0.0
    return float(LN2 / (fps * -np.log1p(-rate)))


# ---------------------------------------------------------------------------------------
# First order: exponential approach ("damper", frame-rate independent lerp)
# ---------------------------------------------------------------------------------------


def damper_exact(x: ArrayLike, goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike) -> Array:
    """Move ``x`` toward ``goal``, halving the distance every ``halflife`` seconds.

    ``x + (goal - x) (1 - 2^(-dt / halflife))``: the exact solution of
    ``x' = (ln 2 / halflife) (goal - x)``. Its velocity jumps whenever ``goal`` jumps.
    """
    h = _check_nonneg("halflife", halflife)
    t = _check_nonneg("dt", dt)
    x = np.asarray(x, dtype=np.float64)
    goal = np.asarray(goal, dtype=np.float64)
    keep = np.exp2(-t / np.maximum(h, MIN_HALFLIFE))
    return goal + (x - goal) * keep


def lerp_toward(x: ArrayLike, goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike) -> Array:
    """The interpolation alternative of the paper's spring-damper ablation (Sec. 4.2.1).

    A per-frame ``x = lerp(x, goal, rate)`` made independent of the frame rate: the
    blend factor for a step ``dt`` is ``1 - 2^(-dt / halflife)``
    (see :func:`lerp_rate_to_halflife` to convert a per-frame rate). The same curve as
    :func:`damper_exact`, named for ablation code: it is continuous in ``x`` but its
    velocity is discontinuous whenever the goal changes, which is the defect the springs
    remove.
    """
    return damper_exact(x, goal, halflife, dt)


def lerp_velocity_exact(
    x: ArrayLike, v: ArrayLike, v_goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike
) -> tuple[Array, Array]:
    """Velocity interpolated toward ``v_goal`` (:func:`lerp_toward`), position integrated exactly.

    The first-order counterpart of :func:`spring_velocity` used by the ``"linear"``
    trajectory mode: ``v(t) = v_goal + (v0 - v_goal) 2^(-t/h)``,
    ``x(t) = x0 + v_goal t + (v0 - v_goal) (h / ln 2) (1 - 2^(-t/h))``. Returns ``(x, v)``.
    """
    h = _check_nonneg("halflife", halflife)
    t = _check_nonneg("dt", dt)
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    vg = np.asarray(v_goal, dtype=np.float64)
    lam = LN2 / np.maximum(h, MIN_HALFLIFE)
    keep = np.exp(-lam * t)
    dv = v - vg
    return x + vg * t + dv * (1.0 - keep) / lam, vg + dv * keep


# ---------------------------------------------------------------------------------------
# Second order: critically damped springs
# ---------------------------------------------------------------------------------------


def spring_position(
    x: ArrayLike, v: ArrayLike, x_goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike
) -> tuple[Array, Array]:
    """Critically damped spring of position ``x`` (velocity ``v``) toward ``x_goal``.

    Returns ``(x, v)`` after ``dt`` seconds. Released at rest it never overshoots and is
    halfway to the goal after ``halflife`` seconds (see the module docstring).
    """
    y = halflife_to_damping(halflife)
    t = _check_nonneg("dt", dt)
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    g = np.asarray(x_goal, dtype=np.float64)
    j0 = x - g
    j1 = v + j0 * y
    e = np.exp(-y * t)
    return g + e * (j0 + j1 * t), e * (v - j1 * y * t)


def decay_spring(x: ArrayLike, v: ArrayLike, halflife: ArrayLike, dt: ArrayLike) -> tuple[Array, Array]:
    """Critically damped spring toward zero (offset decay for inertialization). Returns ``(x, v)``."""
    return spring_position(x, v, 0.0, halflife, dt)


def spring_velocity(
    x: ArrayLike, v: ArrayLike, a: ArrayLike, v_goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike
) -> tuple[Array, Array, Array]:
    """The character spring: velocity ``v`` critically damped toward ``v_goal``, position integrated exactly.

    The paper's Eqs. 10-11: the velocity follows ``v(t) = v_goal + (j0 + j1 t) e^(-y t)``
    with ``j0 = v0 - v_goal`` and ``j1 = a0 + y j0`` (``a`` is the acceleration), and the
    position is its integral::

        x(t) = x0 + v_goal t + j0 (1 - e^(-y t)) / y + j1 (1 - (1 + y t) e^(-y t)) / y^2

    Returns ``(x, v, a)`` after ``dt`` seconds. ``halflife`` is the time for the
    velocity, starting with zero acceleration, to get halfway to ``v_goal``.
    """
    y = halflife_to_damping(halflife)
    t = _check_nonneg("dt", dt)
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    vg = np.asarray(v_goal, dtype=np.float64)
    j0 = v - vg
    j1 = a + j0 * y
    yt = y * t
    e = np.exp(-yt)
    x_new = x + vg * t + j0 * (-np.expm1(-yt)) / y + j1 * (1.0 - (1.0 + yt) * e) / (y * y)
    v_new = vg + e * (j0 + j1 * t)
    a_new = e * (a - j1 * yt)
    return x_new, v_new, a_new


def spring_rotation(
    q: ArrayLike, w: ArrayLike, q_goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike
) -> tuple[Array, Array]:
    """Critically damped spring of a rotation ``q [..., 4]`` with angular velocity ``w [..., 3]`` toward ``q_goal``.

    The offset rotation ``q * q_goal^-1`` is taken as its rotation vector (axis * angle,
    shortest way round, :func:`motionmatch.anim.quat.log`) and sprung toward zero like
    :func:`spring_position`; ``w`` is the world-frame angular velocity (rad/s). The
    result is exact when the rotation axis is fixed (e.g. rotations about +Y only, as for
    a character's facing) and a standard approximation otherwise. Returns unit
    quaternions and angular velocities ``(q, w)``.
    """
    y = halflife_to_damping(halflife)
    t = _check_nonneg("dt", dt)
    q = np.asarray(q, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    g = np.asarray(q_goal, dtype=np.float64)
    j0 = quat.log(quat.mul_inv(q, g))
    j1 = w + j0 * y
    e = np.exp(-y * t)
    offset = quat.exp(e * (j0 + j1 * t))
    return quat.normalize(quat.mul(offset, g)), e * (w - j1 * y * t)


def damper_rotation(q: ArrayLike, q_goal: ArrayLike, halflife: ArrayLike, dt: ArrayLike) -> tuple[Array, Array]:
    """First-order (interpolation) counterpart of :func:`spring_rotation`.

    The offset rotation vector from ``q_goal`` to ``q`` halves every ``halflife`` seconds
    (a frame-rate independent slerp toward the goal); any current angular velocity is
    ignored, which is what makes interpolation jerky when the goal changes. Returns
    ``(q, w)``, ``w`` the angular velocity of the interpolated rotation.
    """
    h = _check_nonneg("halflife", halflife)
    t = _check_nonneg("dt", dt)
    g = np.asarray(q_goal, dtype=np.float64)
    lam = LN2 / np.maximum(h, MIN_HALFLIFE)
    rv = quat.log(quat.mul_inv(q, g)) * np.exp(-lam * t)
    return quat.normalize(quat.mul(quat.exp(rv), g)), -lam * rv
