"""Compiled quaternion arithmetic on ``[4]`` arrays (w, x, y, z), and the two-bone leg IK
built on it, for the kernels of every layer above (retargeting, the controller's pose,
the ground stage)."""

from __future__ import annotations

import numpy as np

from motionmatch._jit import no_refcount


@no_refcount
def qmul(a, b, out):  # pragma: no cover - compiled
    """``out = a * b`` (the rotation ``b`` then ``a``)."""
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw


@no_refcount
def qrot(q, v, out):
    w, x, y, z = q[0], q[1], q[2], q[3]
    tx = 2.0 * (y * v[2] - z * v[1])
    ty = 2.0 * (z * v[0] - x * v[2])
    tz = 2.0 * (x * v[1] - y * v[0])
    out[0] = v[0] + w * tx + (y * tz - z * ty)
    out[1] = v[1] + w * ty + (z * tx - x * tz)
    out[2] = v[2] + w * tz + (x * ty - y * tx)


@no_refcount
def between(u, v, out):
    nu = np.sqrt(u[0] ** 2 + u[1] ** 2 + u[2] ** 2)
    nv = np.sqrt(v[0] ** 2 + v[1] ** 2 + v[2] ** 2)
    if nu < 1e-12 or nv < 1e-12:
        out[0], out[1], out[2], out[3] = 1.0, 0.0, 0.0, 0.0
        return
    ux, uy, uz = u[0] / nu, u[1] / nu, u[2] / nu
    vx, vy, vz = v[0] / nv, v[1] / nv, v[2] / nv
    w = 1.0 + ux * vx + uy * vy + uz * vz
    cx, cy, cz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
    if w < 1e-9:  # opposite: any perpendicular axis
        cx, cy, cz = 0.0, -uz, uy
        if cy * cy + cz * cz < 1e-12:
            cx, cy, cz = uz, 0.0, -ux
        w = 0.0
    n = np.sqrt(w * w + cx * cx + cy * cy + cz * cz)
    out[0], out[1], out[2], out[3] = w / n, cx / n, cy / n, cz / n


@no_refcount
def norm3(v):
    return np.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


@no_refcount
def two_bone_ik_into(a, b, c, target, a_rot, b_rot, new_a, new_b, v, qs):
    """:func:`two_bone_ik` with its scratch from the caller (``v [9, 3]``, ``qs [3, 4]``: no
    allocation, for a caller looping over many legs); the same numbers."""
    eps = 1e-6
    for k in range(4):
        new_a[k] = a_rot[k]
        new_b[k] = b_rot[k]
    ab, bc, to_t, u, w, knee_a, cm, cm_k, end_k = v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]
    for i in range(3):
        ab[i] = b[i] - a[i]
        bc[i] = c[i] - b[i]
        to_t[i] = target[i] - a[i]
    lab = norm3(ab)
    lbc = norm3(bc)
    dist = norm3(to_t)
    if lab < eps or lbc < eps or dist < eps:
        return False
    d = min(max(dist, abs(lab - lbc) + eps), lab + lbc - eps)
    for i in range(3):
        u[i] = to_t[i] / dist
    along = ab[0] * u[0] + ab[1] * u[1] + ab[2] * u[2]
    for i in range(3):
        w[i] = ab[i] - along * u[i]
    npole = norm3(w)
    if npole < eps:
        return False
    for i in range(3):
        w[i] /= npole
    x = (lab * lab - lbc * lbc + d * d) / (2.0 * d)
    h = np.sqrt(max(lab * lab - x * x, 0.0))
    for i in range(3):
        knee_a[i] = x * u[i] + h * w[i]  # knee - a
    qa = qs[0]
    between(ab, knee_a, qa)
    qmul(qa, a_rot, new_a)
    for i in range(3):
        bc[i] = c[i] - a[i]  # (reused: c - a)
    qrot(qa, bc, cm)
    for i in range(3):
        knee = a[i] + knee_a[i]
        cm_k[i] = cm[i] + a[i] - knee
        end_k[i] = a[i] + d * u[i] - knee
    qb = qs[1]
    between(cm_k, end_k, qb)
    tmp = qs[2]
    qmul(qa, b_rot, tmp)
    qmul(qb, tmp, new_b)
    return True
