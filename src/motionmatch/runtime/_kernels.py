"""Compiled per-frame kernels for one character's pose (numba).

Per frame the controller works on ~20-70 joints: at that size numpy's per-call overhead
dominates, so the pose pipeline (sampling between database frames, inertialization
offsets, forward kinematics, leg IK) runs here. Quaternions are ``(w, x, y, z)``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def qmul(a, b, out):
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw


@numba.njit(cache=True, inline="always")
def qrot(q, v, out):
    w, x, y, z = q[0], q[1], q[2], q[3]
    tx = 2.0 * (y * v[2] - z * v[1])
    ty = 2.0 * (z * v[0] - x * v[2])
    tz = 2.0 * (x * v[1] - y * v[0])
    out[0] = v[0] + w * tx + (y * tz - z * ty)
    out[1] = v[1] + w * ty + (z * tx - x * tz)
    out[2] = v[2] + w * tz + (x * ty - y * tx)


@numba.njit(cache=True)
def sample_pose(rot_a, rot_b, pos_a, pos_b, alpha, out_rot, out_pos):
    """Slerp ``[J, 4]`` rotations and lerp ``[J, 3]`` translations between two frames."""
    J = rot_a.shape[0]
    for j in range(J):
        d = 0.0
        for c in range(4):
            d += rot_a[j, c] * rot_b[j, c]
        sign = 1.0
        if d < 0.0:
            d = -d
            sign = -1.0
        if d > 0.9995:
            wa = 1.0 - alpha
            wb = alpha * sign
        else:
            th = np.arccos(d)
            s = np.sin(th)
            wa = np.sin((1.0 - alpha) * th) / s
            wb = np.sin(alpha * th) / s * sign
        n = 0.0
        for c in range(4):
            v = wa * rot_a[j, c] + wb * rot_b[j, c]
            out_rot[j, c] = v
            n += v * v
        n = np.sqrt(n)
        for c in range(4):
            out_rot[j, c] /= n
        for c in range(3):
            out_pos[j, c] = (1.0 - alpha) * pos_a[j, c] + alpha * pos_b[j, c]


@numba.njit(cache=True)
def apply_offsets(rot, pos, rot_off, pos_off, out_rot, out_pos):
    """``out_rot = rot_off * rot``, ``out_pos = pos + pos_off`` per joint."""
    for j in range(rot.shape[0]):
        qmul(rot_off[j], rot[j], out_rot[j])
        for c in range(3):
            out_pos[j, c] = pos[j, c] + pos_off[j, c]


@numba.njit(cache=True)
def forward_kinematics(parents, root_pos, root_rot, rot, pos, world_pos, world_rot):
    """World transforms ``[J, 3]``, ``[J, 4]`` of a pose whose joint 0 is the root and
    whose other joints' local transforms are ``rot[j - 1]``, ``pos[j - 1]``."""
    tmp = np.empty(3)
    world_pos[0] = root_pos
    world_rot[0] = root_rot
    for j in range(1, parents.shape[0]):
        p = parents[j]
        qrot(world_rot[p], pos[j - 1], tmp)
        for c in range(3):
            world_pos[j, c] = world_pos[p, c] + tmp[c]
        qmul(world_rot[p], rot[j - 1], world_rot[j])


@numba.njit(cache=True)
def _between(u, v, out):
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


@numba.njit(cache=True)
def two_bone_ik(a, b, c, target, a_rot, b_rot, new_a, new_b):
    """New world rotations of ``a`` (hip) and ``b`` (knee) so the chain's end ``c`` reaches
    ``target`` (see :func:`motionmatch.runtime.ik.two_bone_ik`). Returns False when the
    chain is degenerate (rotations copied unchanged)."""
    eps = 1e-6
    new_a[:] = a_rot
    new_b[:] = b_rot
    lab = np.sqrt(np.sum((b - a) ** 2))
    lbc = np.sqrt(np.sum((c - b) ** 2))
    to_t = target - a
    dist = np.sqrt(np.sum(to_t ** 2))
    if lab < eps or lbc < eps or dist < eps:
        return False
    d = min(max(dist, abs(lab - lbc) + eps), lab + lbc - eps)
    u = to_t / dist
    ab = b - a
    pole = ab - np.dot(ab, u) * u
    npole = np.sqrt(np.sum(pole ** 2))
    if npole < eps:
        return False
    w = pole / npole
    x = (lab * lab - lbc * lbc + d * d) / (2.0 * d)
    h = np.sqrt(max(lab * lab - x * x, 0.0))
    knee = a + x * u + h * w
    end = a + d * u
    qa = np.empty(4)
    _between(ab, knee - a, qa)
    qmul(qa, a_rot, new_a)
    cm = np.empty(3)
    qrot(qa, c - a, cm)
    cm += a
    qb = np.empty(4)
    _between(cm - knee, end - knee, qb)
    tmp = np.empty(4)
    qmul(qa, b_rot, tmp)
    qmul(qb, tmp, new_b)
    return True


@numba.njit(cache=True)
def local_from_world(parent_world, child_world, out):
    """``out = conj(parent_world) * child_world``."""
    inv = np.empty(4)
    inv[0] = parent_world[0]
    inv[1] = -parent_world[1]
    inv[2] = -parent_world[2]
    inv[3] = -parent_world[3]
    qmul(inv, child_world, out)
