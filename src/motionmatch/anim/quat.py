"""Vectorised quaternion and rotation utilities.

Conventions: quaternions are ``(w, x, y, z)`` arrays of shape ``[..., 4]``, unit length,
and compose like rotation matrices: ``mul(a, b)`` rotates by ``b`` first, then ``a``
(``q_world_child = q_world_parent * q_local_child``). Angles are radians. Every function
broadcasts over leading dimensions and never loops in Python over frames.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

_AXES = {"x": 0, "y": 1, "z": 2}


def identity(shape: tuple[int, ...] = ()) -> Array:
    """Identity quaternions of shape ``[*shape, 4]``."""
    q = np.zeros((*shape, 4))
    q[..., 0] = 1.0
    return q


def normalize(q: ArrayLike, eps: float = 1e-12) -> Array:
    """Unit quaternions ``[..., 4]`` (zero-length inputs become identity)."""
    q = np.asarray(q, dtype=np.float64)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    out = q / np.maximum(n, eps)
    bad = n[..., 0] < eps
    if np.any(bad):
        out[bad] = (1.0, 0.0, 0.0, 0.0)
    return out


def conjugate(q: ArrayLike) -> Array:
    """Conjugate ``[..., 4]``; the inverse of a unit quaternion."""
    q = np.asarray(q, dtype=np.float64)
    return q * np.array([1.0, -1.0, -1.0, -1.0])


inverse = conjugate


def mul(a: ArrayLike, b: ArrayLike) -> Array:
    """Hamilton product ``a * b`` (apply ``b`` then ``a``), broadcasting ``[..., 4]``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def mul_inv(a: ArrayLike, b: ArrayLike) -> Array:
    """``a * conj(b)``."""
    return mul(a, conjugate(b))


def inv_mul(a: ArrayLike, b: ArrayLike) -> Array:
    """``conj(a) * b``: ``b`` expressed in the frame of ``a``."""
    return mul(conjugate(a), b)


def cross(a: ArrayLike, b: ArrayLike) -> Array:
    """Cross product of ``[..., 3]`` vectors (broadcasting); cheaper than ``np.cross``
    on the small arrays of per-frame code."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], axis=-1)


def rotate(q: ArrayLike, v: ArrayLike) -> Array:
    """Rotate vectors ``v [..., 3]`` by quaternions ``q [..., 4]`` (broadcasting)."""
    q = np.asarray(q, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    qv = q[..., 1:]
    t = 2.0 * cross(qv, v)
    return v + q[..., :1] * t + cross(qv, t)


def inv_rotate(q: ArrayLike, v: ArrayLike) -> Array:
    """Rotate ``v`` by the inverse of ``q``."""
    return rotate(conjugate(q), v)


def from_axis_angle(axis: ArrayLike, angle: ArrayLike) -> Array:
    """Quaternions from unit axes ``[..., 3]`` and angles ``[...]`` (radians)."""
    axis = np.asarray(axis, dtype=np.float64)
    half = 0.5 * np.asarray(angle, dtype=np.float64)[..., None]
    return np.concatenate([np.cos(half), np.sin(half) * axis], axis=-1)


def from_angle_y(angle: ArrayLike) -> Array:
    """Rotations about the vertical (+Y) axis by ``angle [...]`` radians."""
    half = 0.5 * np.asarray(angle, dtype=np.float64)
    z = np.zeros_like(half)
    return np.stack([np.cos(half), z, np.sin(half), z], axis=-1)


def _check_order(order: str) -> str:
    o = order.lower()
    if len(o) != 3 or any(c not in _AXES for c in o):
        raise ValueError(f"Euler order must be three letters from x/y/z, e.g. 'zyx'; got {order!r}")
    return o


def from_euler(angles: ArrayLike, order: str) -> Array:
    """Quaternions from Euler angles ``[..., 3]`` (radians).

    ``order`` names the axes of the three angles, e.g. ``"zyx"``: the rotation is
    ``R_z(a0) * R_y(a1) * R_x(a2)``, which is how BVH ``CHANNELS`` lists rotations.
    Repeated axes (``"zxz"``) are allowed.
    """
    o = _check_order(order)
    angles = np.asarray(angles, dtype=np.float64)
    out = None
    for i, c in enumerate(o):
        axis = np.zeros(3)
        axis[_AXES[c]] = 1.0
        qi = from_axis_angle(axis, angles[..., i])
        out = qi if out is None else mul(out, qi)
    return out


def to_matrix(q: ArrayLike) -> Array:
    """Rotation matrices ``[..., 3, 3]`` from quaternions ``[..., 4]``."""
    q = normalize(q)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    m = np.empty(q.shape[:-1] + (3, 3))
    m[..., 0, 0] = 1 - 2 * (y * y + z * z)
    m[..., 0, 1] = 2 * (x * y - w * z)
    m[..., 0, 2] = 2 * (x * z + w * y)
    m[..., 1, 0] = 2 * (x * y + w * z)
    m[..., 1, 1] = 1 - 2 * (x * x + z * z)
    m[..., 1, 2] = 2 * (y * z - w * x)
    m[..., 2, 0] = 2 * (x * z - w * y)
    m[..., 2, 1] = 2 * (y * z + w * x)
    m[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return m


def from_matrix(m: ArrayLike) -> Array:
    """Quaternions ``[..., 4]`` (w >= 0) from rotation matrices ``[..., 3, 3]``.

    Uses the numerically stable branch (largest diagonal term) per element.
    """
    m = np.asarray(m, dtype=np.float64)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    tr = m00 + m11 + m22
    cand = np.stack(
        [
            np.stack([1 + tr, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1),
            np.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
            np.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22, m[..., 1, 2] + m[..., 2, 1]], -1),
            np.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1], 1 - m00 - m11 + m22], -1),
        ],
        axis=-2,
    )
    pick = np.argmax(np.stack([tr, m00, m11, m22], -1), axis=-1)
    q = np.take_along_axis(cand, pick[..., None, None], axis=-2)[..., 0, :]
    q = normalize(q)
    return np.where(q[..., :1] < 0, -q, q)


def to_euler(q: ArrayLike, order: str) -> Array:
    """Euler angles ``[..., 3]`` (radians) in ``order`` (as in :func:`from_euler`).

    Delegates the decomposition (including gimbal-lock handling) to SciPy.
    """
    from scipy.spatial.transform import Rotation

    o = _check_order(order)
    q = normalize(q)
    flat = q.reshape(-1, 4)
    r = Rotation.from_quat(flat[:, [1, 2, 3, 0]])
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # gimbal lock: SciPy picks a valid solution
            e = r.as_euler(o.upper())
    return e.reshape(q.shape[:-1] + (3,))


def to_6d(q: ArrayLike) -> Array:
    """The continuous 6D representation ``[..., 6]``: the first two matrix columns."""
    m = to_matrix(q)
    return np.concatenate([m[..., :, 0], m[..., :, 1]], axis=-1)


def from_6d(d6: ArrayLike) -> Array:
    """Quaternions from 6D rotations ``[..., 6]`` (Gram-Schmidt, any scale)."""
    d6 = np.asarray(d6, dtype=np.float64)
    a, b = d6[..., :3], d6[..., 3:]
    c0 = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b - np.sum(c0 * b, axis=-1, keepdims=True) * c0
    c1 = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    c2 = cross(c0, c1)
    return from_matrix(np.stack([c0, c1, c2], axis=-1))


def log(q: ArrayLike) -> Array:
    """Rotation vectors ``[..., 3]`` (axis * angle, radians) from quaternions.

    The shortest rotation is taken (``q`` and ``-q`` give the same result).
    """
    q = normalize(q)
    q = np.where(q[..., :1] < 0, -q, q)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1)
    angle = 2.0 * np.arctan2(s, q[..., 0])
    # angle / s -> 2 as s -> 0 (first-order expansion), avoiding 0/0.
    scale = np.where(s > 1e-9, angle / np.maximum(s, 1e-300), 2.0)
    return v * scale[..., None]


def exp(rv: ArrayLike) -> Array:
    """Quaternions from rotation vectors ``[..., 3]`` (inverse of :func:`log`)."""
    rv = np.asarray(rv, dtype=np.float64)
    angle = np.linalg.norm(rv, axis=-1)
    half = 0.5 * angle
    scale = np.where(angle > 1e-9, np.sin(half) / np.maximum(angle, 1e-300), 0.5)
    return np.concatenate([np.cos(half)[..., None], rv * scale[..., None]], axis=-1)


def unroll(q: ArrayLike, axis: int = 0) -> Array:
    """Flip signs along ``axis`` (time) so consecutive quaternions lie in one hemisphere."""
    q = np.array(q, dtype=np.float64, copy=True)
    q = np.moveaxis(q, axis, 0)
    if q.shape[0] > 1:
        dots = np.sum(q[1:] * q[:-1], axis=-1)
        flips = np.cumsum(dots < 0, axis=0) % 2 == 1
        q[1:][flips] *= -1
    return np.moveaxis(q, 0, axis)


def slerp(a: ArrayLike, b: ArrayLike, t: ArrayLike) -> Array:
    """Spherical linear interpolation from ``a`` (t=0) to ``b`` (t=1), shortest path.

    ``t`` broadcasts against the leading dimensions of ``a`` and ``b``.
    """
    a = normalize(a)
    b = normalize(b)
    t = np.asarray(t, dtype=np.float64)[..., None]
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    sin_theta = np.sin(theta)
    close = sin_theta < 1e-6
    safe = np.where(close, 1.0, sin_theta)
    wa = np.where(close, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(close, t, np.sin(t * theta) / safe)
    return normalize(wa * a + wb * b)


def between(u: ArrayLike, v: ArrayLike) -> Array:
    """Shortest rotation taking direction ``u [..., 3]`` onto direction ``v [..., 3]``."""
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    u = u / np.maximum(np.linalg.norm(u, axis=-1, keepdims=True), 1e-12)
    v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    c = cross(u, v)
    w = 1.0 + np.sum(u * v, axis=-1, keepdims=True)
    q = np.concatenate([w, c], axis=-1)
    # Opposite vectors: rotate 180 degrees about any axis orthogonal to u.
    opposite = w[..., 0] < 1e-9
    if np.any(opposite):
        uo = u[opposite]
        ortho = cross(uo, np.array([1.0, 0.0, 0.0]))
        weak = np.linalg.norm(ortho, axis=-1) < 1e-6
        ortho[weak] = cross(uo[weak], np.array([0.0, 1.0, 0.0]))
        q[opposite] = np.concatenate([np.zeros((len(uo), 1)), ortho], axis=-1)
    return normalize(q)


def angular_velocity(q: ArrayLike, dt: float, axis: int = 0) -> Array:
    """Angular velocity (rad/s, world-frame vectors ``[..., 3]``) by finite differences.

    ``q`` is a time series along ``axis``; the result has the same length, using forward
    differences (the last frame repeats the previous value).
    """
    q = np.moveaxis(np.asarray(q, dtype=np.float64), axis, 0)
    out = np.zeros(q.shape[:-1] + (3,))
    if q.shape[0] > 1:
        out[:-1] = log(mul_inv(q[1:], q[:-1])) / dt
        out[-1] = out[-2]
    return np.moveaxis(out, 0, axis)


def yaw_angle(q: ArrayLike) -> Array:
    """Heading angle (radians about +Y) of the rotated +Z axis of ``q``."""
    fwd = rotate(q, np.array([0.0, 0.0, 1.0]))
    return np.arctan2(fwd[..., 0], fwd[..., 2])


def from_euler_partial(angles: ArrayLike, order: str) -> Array:
    """Like :func:`from_euler` for any number of axes (``len(order)`` angles, e.g. 1 or 2)."""
    o = order.lower()
    if not o or any(c not in _AXES for c in o):
        raise ValueError(f"axis order must use letters x/y/z, got {order!r}")
    angles = np.asarray(angles, dtype=np.float64)
    out = identity(angles.shape[:-1])
    for i, c in enumerate(o):
        axis = np.zeros(3)
        axis[_AXES[c]] = 1.0
        out = mul(out, from_axis_angle(axis, angles[..., i]))
    return out
