"""Foot IK for independent poses on a retargeted rig: the viewer's characters, each tick.

A take's foot IK (:meth:`motionmatch.anim.retarget.Retargeter.__call__`) plants each contact
run where the source's foot stood, which needs the whole take. A viewer's characters come one
pose at a time, so :func:`plant_pose_feet` corrects each pose on its own, all the poses of a
tick in one compiled call, from what the source pose says:

* **height**: each target foot's lowest point (its joints and end sites from the ankle down,
  as :func:`~motionmatch.anim.retarget.lowest_point`) at the source foot's height over the
  pose's floor (a lifted foot's scaled by the legs' ratio), never under the floor: a foot
  planted on the source is on the ground on the rig, whatever the rig's legs, ankles and feet;
* **reach**: where a planted leg is too short for that, the body (the hips and below) comes
  down as far as it needs first;
* **place**: while the source foot is near the floor (its lowest point within
  ``contact_height`` of it, fading out by 3 times that), the target's ankle is moved across
  the ground onto the source ankle's place: a rig scaled about its character's root would
  otherwise slide a planted foot by ``1 - scale`` of the root's speed.

The leg (hip, knee, ankle: a two-bone chain) is bent by the compiled two-bone IK of
:mod:`motionmatch.anim._quat_kernels` (the knee kept in its plane, a target out of reach
approached with the leg straight); the ankle keeps its world rotation, and every joint
hanging from the leg (the foot, toes, twist and share bones) follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numpy.typing import NDArray

from motionmatch.anim.skeleton import Skeleton

__all__ = ["FootChains", "foot_chains", "plant_pose_feet"]

_SIDES = ("left", "right")


@dataclass(frozen=True)
class FootChains:
    """The two legs of a retargeting, as index arrays for :func:`plant_pose_feet`.

    Attributes:
        legs: ``[2, 3]`` the target's upper leg, lower leg and ankle per side (left, right).
        valid: ``[2]`` the side is a two-bone chain (the knee the hip's child, the ankle the knee's).
        target_points, source_points: ``[2, n]`` the joints of each foot (the ankle and below; -1 pads).
        target_ends, source_ends: ``[2, m]`` the joints the foot's end sites hang from (-1 pads) and
        target_end_offsets, source_end_offsets: ``[2, m, 3]`` their offsets (m).
        source_ankles: ``[2]`` the source's ankles.
        below: ``[2, k]`` the target's joints under each upper leg (-1 pads), and
        part: ``[2, k]`` which joint of the leg each hangs from: 0 the upper leg, 1 the lower
            leg, 2 the ankle (the ankle itself included).
        lengths: ``[2, 2]`` each leg's upper and lower bone lengths (m: the same in every pose).
        body: the hips and every joint under them (what comes down when a planted leg is
            too short to reach its foot's place: not a ground root that carries the character).
    """

    legs: NDArray[np.int64]
    valid: NDArray[np.bool_]
    target_points: NDArray[np.int64]
    target_ends: NDArray[np.int64]
    target_end_offsets: NDArray[np.float64]
    source_points: NDArray[np.int64]
    source_ends: NDArray[np.int64]
    source_end_offsets: NDArray[np.float64]
    source_ankles: NDArray[np.int64]
    below: NDArray[np.int64]
    part: NDArray[np.int64]
    lengths: NDArray[np.float64]
    body: NDArray[np.int64]


def _padded(rows: list[list[int]]) -> np.ndarray:
    out = np.full((len(rows), max(1, max(len(r) for r in rows))), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def _feet(skeleton: Skeleton, ankles: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    points, ends, offsets = [], [], []
    for ankle in ankles:
        joints = [j for j in range(ankle, skeleton.num_joints) if skeleton.descends_from(j, ankle)]
        es = [e for e, p in enumerate(skeleton.end_site_parents) if int(p) in joints]
        points.append(joints)
        ends.append([int(skeleton.end_site_parents[e]) for e in es])
        offsets.append([skeleton.end_site_offsets[e] for e in es])
    m = max(1, max(len(e) for e in ends))
    off = np.zeros((len(ankles), m, 3))
    for i, o in enumerate(offsets):
        if o:
            off[i, :len(o)] = o
    return _padded(points), _padded(ends), off


def foot_chains(source: Skeleton, source_roles, target: Skeleton, target_roles) -> FootChains:
    """The legs of ``target`` and the feet of ``source`` by their humanoid roles."""
    legs = np.array([[target_roles[f"{s}_upper_leg"], target_roles[f"{s}_lower_leg"], target_roles[f"{s}_ankle"]]
                     for s in _SIDES], dtype=np.int64)
    valid = np.array([target.parents[b] == a and target.parents[c] == b for a, b, c in legs])
    tp, te, to = _feet(target, [int(c) for c in legs[:, 2]])
    s_ankles = [int(source_roles[f"{s}_ankle"]) for s in _SIDES]
    sp, se, so = _feet(source, s_ankles)
    below = [[j for j in range(a + 1, target.num_joints) if target.descends_from(j, a)] for a in legs[:, 0]]
    part = [[2 if target.descends_from(j, c) else 1 if target.descends_from(j, b) else 0 for j in rows]
            for rows, (_a, b, c) in zip(below, legs)]
    hips = target_roles.hips
    body = np.array([j for j in range(target.num_joints) if target.descends_from(j, hips)], dtype=np.int64)
    lengths = np.linalg.norm(target.offsets[legs[:, 1:]], axis=-1)
    return FootChains(legs, valid, tp, te, to, sp, se, so, np.array(s_ankles, dtype=np.int64), _padded(below),
                      _padded(part), lengths, body)


@numba.njit(cache=True, nogil=True, inline="always")
def _mul(a0, a1, a2, a3, b0, b1, b2, b3):  # pragma: no cover - compiled
    """The quaternion product ``a * b`` of scalars (no arrays: a view or a call passing
    arrays costs more than a leg's arithmetic)."""
    return (a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3, a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
            a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1, a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0)


@numba.njit(cache=True, nogil=True, inline="always")
def _rot(q0, q1, q2, q3, x, y, z):  # pragma: no cover - compiled
    """The vector ``(x, y, z)`` turned by the unit quaternion ``q``."""
    tx = 2.0 * (q2 * z - q3 * y)
    ty = 2.0 * (q3 * x - q1 * z)
    tz = 2.0 * (q1 * y - q2 * x)
    return x + q0 * tx + (q2 * tz - q3 * ty), y + q0 * ty + (q3 * tx - q1 * tz), z + q0 * tz + (q1 * ty - q2 * tx)


@numba.njit(cache=True, nogil=True, inline="always")
def _between(ux, uy, uz, vx, vy, vz):  # pragma: no cover - compiled
    """The shortest turn taking the direction ``u`` onto ``v`` (identity for a zero vector)."""
    nu = np.sqrt(ux * ux + uy * uy + uz * uz)
    nv = np.sqrt(vx * vx + vy * vy + vz * vz)
    if nu < 1e-12 or nv < 1e-12:
        return 1.0, 0.0, 0.0, 0.0
    ux, uy, uz, vx, vy, vz = ux / nu, uy / nu, uz / nu, vx / nv, vy / nv, vz / nv
    w = 1.0 + ux * vx + uy * vy + uz * vz
    cx, cy, cz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
    if w < 1e-9:  # opposite: half a turn about an axis across
        cx, cy, cz, w = 0.0, -uz, uy, 0.0
        if cy * cy + cz * cz < 1e-12:
            cx, cy, cz = uz, 0.0, -ux
    n = np.sqrt(w * w + cx * cx + cy * cy + cz * cz)
    return w / n, cx / n, cy / n, cz / n


@numba.njit(cache=True, nogil=True, inline="always")
def _lowest(pos, rot, f, i, points, ends, offsets):  # pragma: no cover - compiled
    """The lowest height of foot ``i``'s joints and end sites in pose ``f``."""
    low = np.inf
    for k in range(points.shape[1]):
        j = points[i, k]
        if j < 0:
            break
        low = min(low, pos[f, j, 1])
    for k in range(ends.shape[1]):
        p = ends[i, k]
        if p < 0:
            break
        y = _rot(rot[f, p, 0], rot[f, p, 1], rot[f, p, 2], rot[f, p, 3], offsets[i, k, 0], offsets[i, k, 1],
                 offsets[i, k, 2])[1]
        low = min(low, pos[f, p, 1] + y)
    return low


@numba.njit(cache=True, nogil=True)
def plant_pose_feet(wpos, wrot, ps, qs, floor, scale, contact_height, legs, valid, t_points, t_ends, t_offsets,
                    s_points, s_ends, s_offsets, s_ankles, below, part, lengths, body):  # pragma: no cover - compiled
    """Correct target poses ``wpos [F, J, 3]``, ``wrot [F, J, 4]`` (world, in place) so that
    their feet stand where the source poses' (``ps [F, Js, 3]``, ``qs [F, Js, 4]``) do (see the
    module); ``floor [F]`` the ground's height under each pose, ``scale`` the legs' ratio.
    Where a planted leg cannot reach its foot's place, the body (the hips and below) first
    comes down as far as it needs (weighted by how planted the foot is).

    The leg's two-bone IK (as :func:`motionmatch.anim._quat_kernels.two_bone_ik_into`: the
    knee kept in its plane, a target out of reach approached with the leg straight) gives
    the upper leg's world turn ``ra`` and the lower leg's ``rb * ra``; the joints under each
    turn with it, the ankle and what hangs from it only move."""
    eps = 1e-6
    aim = np.empty((2, 3))  # each ankle's target
    weight = np.empty(2)
    for f in range(wpos.shape[0]):
        fl = floor[f]
        # the ankles' targets, and how far the body must come down for a planted leg to reach its own
        drop = 0.0
        for i in range(2):
            if not valid[i]:
                continue
            a, b, c = legs[i, 0], legs[i, 1], legs[i, 2]
            hs = _lowest(ps, qs, f, i, s_points, s_ends, s_offsets)
            ht = _lowest(wpos, wrot, f, i, t_points, t_ends, t_offsets)
            x = 1.0 - (hs - fl - 0.5 * contact_height) / (2.5 * contact_height)  # 1 near the floor, 0 above
            x = min(max(x, 0.0), 1.0)
            weight[i] = x * x * (3.0 - 2.0 * x)
            sa = s_ankles[i]
            aim[i, 0] = wpos[f, c, 0] + weight[i] * (ps[f, sa, 0] - wpos[f, c, 0])
            k = scale + weight[i] * (1.0 - scale)  # a planted foot as high as the source's, a lifted one scaled
            aim[i, 1] = wpos[f, c, 1] + max(fl + k * (hs - fl), fl) - ht
            aim[i, 2] = wpos[f, c, 2] + weight[i] * (ps[f, sa, 2] - wpos[f, c, 2])
            reach = 0.999 * (lengths[i, 0] + lengths[i, 1])
            rx, ry, rz = aim[i, 0] - wpos[f, a, 0], aim[i, 1] - wpos[f, a, 1], aim[i, 2] - wpos[f, a, 2]
            across = reach * reach - rx * rx - rz * rz
            if rx * rx + ry * ry + rz * rz > reach * reach and across > 0.0:  # lowered by this it reaches
                drop = max(drop, weight[i] * (-ry - np.sqrt(across)))
        if drop > 0.0:
            for j in body:
                wpos[f, j, 1] -= drop
        for i in range(2):
            if not valid[i]:
                continue
            a, b, c = legs[i, 0], legs[i, 1], legs[i, 2]
            dx, dy, dz = aim[i, 0] - wpos[f, c, 0], aim[i, 1] - wpos[f, c, 1], aim[i, 2] - wpos[f, c, 2]
            if abs(dx) + abs(dy) + abs(dz) < 1e-9:
                continue
            ax, ay, az = wpos[f, a, 0], wpos[f, a, 1], wpos[f, a, 2]
            bx, by, bz = wpos[f, b, 0], wpos[f, b, 1], wpos[f, b, 2]
            cx, cy, cz = wpos[f, c, 0], wpos[f, c, 1], wpos[f, c, 2]
            abx, aby, abz = bx - ax, by - ay, bz - az
            lab, lbc = lengths[i, 0], lengths[i, 1]
            tx, ty, tz = cx + dx - ax, cy + dy - ay, cz + dz - az
            dist = np.sqrt(tx * tx + ty * ty + tz * tz)
            if lab < eps or lbc < eps or dist < eps:
                continue
            d = min(max(dist, abs(lab - lbc) + eps), lab + lbc - eps)
            ux, uy, uz = tx / dist, ty / dist, tz / dist
            along = abx * ux + aby * uy + abz * uz
            px, py, pz = abx - along * ux, aby - along * uy, abz - along * uz  # the knee's side of the line
            npole = np.sqrt(px * px + py * py + pz * pz)
            toe = t_points[i, 1]
            if npole < 1e-4 and toe >= 0:  # a straight leg: the knee bends toward the toes
                fx, fy, fz = wpos[f, toe, 0] - cx, wpos[f, toe, 1] - cy, wpos[f, toe, 2] - cz
                along = fx * ux + fy * uy + fz * uz
                px, py, pz = fx - along * ux, fy - along * uy, fz - along * uz
                npole = np.sqrt(px * px + py * py + pz * pz)
            if npole < eps:
                continue
            px, py, pz = px / npole, py / npole, pz / npole
            xk = (lab * lab - lbc * lbc + d * d) / (2.0 * d)
            hk = np.sqrt(max(lab * lab - xk * xk, 0.0))
            kx, ky, kz = xk * ux + hk * px, xk * uy + hk * py, xk * uz + hk * pz  # the new knee - a
            ra = _between(abx, aby, abz, kx, ky, kz)
            mx, my, mz = _rot(ra[0], ra[1], ra[2], ra[3], cx - ax, cy - ay, cz - az)  # the ankle turned with the hip
            rb = _between(mx - kx, my - ky, mz - kz, d * ux - kx, d * uy - ky, d * uz - kz)
            rab = _mul(rb[0], rb[1], rb[2], rb[3], ra[0], ra[1], ra[2], ra[3])
            nkx, nky, nkz = _rot(ra[0], ra[1], ra[2], ra[3], abx, aby, abz)
            nkx, nky, nkz = ax + nkx, ay + nky, az + nkz  # the knee, moved
            ex, ey, ez = _rot(rab[0], rab[1], rab[2], rab[3], cx - bx, cy - by, cz - bz)
            mvx, mvy, mvz = nkx + ex - cx, nky + ey - cy, nkz + ez - cz  # how far the ankle moves
            q = _mul(ra[0], ra[1], ra[2], ra[3], wrot[f, a, 0], wrot[f, a, 1], wrot[f, a, 2], wrot[f, a, 3])
            wrot[f, a, 0], wrot[f, a, 1], wrot[f, a, 2], wrot[f, a, 3] = q
            for k in range(below.shape[1]):
                j = below[i, k]
                if j < 0:
                    break
                g = part[i, k]
                if g == 2:  # the ankle and below keep their world rotations and move with the ankle
                    wpos[f, j, 0] += mvx
                    wpos[f, j, 1] += mvy
                    wpos[f, j, 2] += mvz
                    continue
                t = ra if g == 0 else rab
                ox, oy, oz = (ax, ay, az) if g == 0 else (bx, by, bz)
                nx, ny, nz = (ax, ay, az) if g == 0 else (nkx, nky, nkz)
                rx, ry, rz = _rot(t[0], t[1], t[2], t[3], wpos[f, j, 0] - ox, wpos[f, j, 1] - oy, wpos[f, j, 2] - oz)
                wpos[f, j, 0], wpos[f, j, 1], wpos[f, j, 2] = nx + rx, ny + ry, nz + rz
                q = _mul(t[0], t[1], t[2], t[3], wrot[f, j, 0], wrot[f, j, 1], wrot[f, j, 2], wrot[f, j, 3])
                wrot[f, j, 0], wrot[f, j, 1], wrot[f, j, 2], wrot[f, j, 3] = q
