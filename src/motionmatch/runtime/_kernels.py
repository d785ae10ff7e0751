"""Compiled per-frame kernels for one character's pose (numba).

Per frame the controller works on ~20-70 joints: at that size numpy's per-call overhead
dominates, so the pose pipeline (sampling between database frames, inertialization
offsets, forward kinematics, leg IK) runs here. Quaternions are ``(w, x, y, z)``.

:func:`controller_pose` and :func:`lock_feet` take their arrays in named tuples
(:class:`PoseData`, :class:`Quintic`, :class:`FootLocks`, :class:`Pose`), built by their
compiled caller (:func:`motionmatch.runtime._batch_kernels.pose_rows`) from a batch's row.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from motionmatch._jit import no_refcount
from motionmatch.anim._quat_kernels import qmul, qrot
from motionmatch.anim._quat_kernels import two_bone_ik_into as two_bone_ik_into


class Pose(NamedTuple):
    """Local joint transforms (a pose, or offsets added to one)."""

    rot: np.ndarray  #: ``[J, 4]`` float64 rotations (w, x, y, z)
    pos: np.ndarray  #: ``[J, 3]`` float64 translations (m)


class PoseData(NamedTuple):
    """What a character's poses are sampled from (a database's arrays)."""

    rot: np.ndarray       #: ``[N, J, 4]`` the database's local rotations (any float type); joint 0 the root
    pos: np.ndarray       #: ``[N, J, 3]`` its local translations (m)
    parents: np.ndarray   #: ``[J]`` int64 parent joints (-1: the root)
    legs: np.ndarray      #: ``[K, 4]`` int64 leg chains: hip, knee, ankle, toe joints (``K = 0``: no foot locking)
    contacts: np.ndarray  #: ``[N, K]`` bool the database's foot contacts


class FootLocks(NamedTuple):
    """A character's foot locks: settings, and state updated in place (``K`` feet)."""

    unlock_distance: float  #: a locked foot farther than this (m) from its lock is released
    blend_time: float       #: fade-out (s) of a released lock's correction
    lock_in_time: float     #: fade-in (s) of a new lock's correction
    locked: np.ndarray      #: ``[K]`` bool feet locked now
    lock_pos: np.ndarray    #: ``[K, 3]`` where each locked foot is held (m, world)
    release: np.ndarray     #: ``[K, 3]`` the correction of a released lock, being faded out (m)
    release_t: np.ndarray   #: ``[K]`` seconds since the release (``inf``: none)
    lock_t: np.ndarray      #: ``[K]`` seconds since the lock


class Quintic(NamedTuple):
    """The decay of a quintic inertialization's offsets (``J`` joints, set at each transition)."""

    rot_axis: np.ndarray    #: ``[J, 3]`` unit axes of the rotation offsets
    rot_coeffs: np.ndarray  #: ``[7, J]`` quintics of their angles (rad; see :func:`_quintic_at`)
    pos_dir: np.ndarray     #: ``[J, 3]`` unit directions of the translation offsets
    pos_coeffs: np.ndarray  #: ``[7, J]`` quintics of their lengths (m)


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
    for c in range(3):
        world_pos[0, c] = root_pos[c]
    for c in range(4):
        world_rot[0, c] = root_rot[c]
    for j in range(1, parents.shape[0]):
        p = parents[j]
        qrot(world_rot[p], pos[j - 1], tmp)
        for c in range(3):
            world_pos[j, c] = world_pos[p, c] + tmp[c]
        qmul(world_rot[p], rot[j - 1], world_rot[j])


@numba.njit(cache=True)
def two_bone_ik(a, b, c, target, a_rot, b_rot, new_a, new_b):
    """New world rotations of ``a`` (hip) and ``b`` (knee) so the chain's end ``c`` reaches
    ``target`` (see :func:`motionmatch.runtime.ik.two_bone_ik`). Returns False when the
    chain is degenerate (rotations copied unchanged). Written element by element (no
    array expressions), which keeps its compilation short."""
    return two_bone_ik_into(a, b, c, target, a_rot, b_rot, new_a, new_b, np.empty((9, 3)), np.empty((3, 4)))


@no_refcount
def local_from_world(parent_world, child_world, out):
    """``out = conj(parent_world) * child_world`` (:func:`qmul`'s sums, in its order: the
    same numbers; no allocation)."""
    aw, ax, ay, az = parent_world[0], -parent_world[1], -parent_world[2], -parent_world[3]
    bw, bx, by, bz = child_world[0], child_world[1], child_world[2], child_world[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw


@numba.njit(cache=True)
def _quintic_at(c, j, t):
    """Bollo's quintic (coefficient rows ``A, B, C, a0/2, v0, x0, t1`` of ``c [7, J]``) of
    joint ``j`` at time ``t``; 0 from ``t1`` on."""
    t1 = c[6, j]
    if t >= t1:
        return 0.0
    tt = t
    return (((((c[0, j] * tt + c[1, j]) * tt + c[2, j]) * tt + c[3, j]) * tt + c[4, j]) * tt) + c[5, j]


@numba.njit(cache=True)
def quintic_offsets(rot_axis, rot_coeffs, pos_dir, pos_coeffs, t, rot_off, pos_off):
    """Inertialization offsets of ``J`` joints ``t`` seconds after a quintic transition.

    ``rot_axis``, ``pos_dir``: ``[J, 3]`` unit axes / directions of the offsets;
    ``rot_coeffs``, ``pos_coeffs``: ``[7, J]`` quintic coefficients (see
    :func:`motionmatch.runtime.inertialize.quintic_coefficients`). Writes the offset
    rotations ``rot_off [J, 4]`` (``exp`` of axis * angle) and translations ``pos_off [J, 3]``.
    """
    for j in range(rot_axis.shape[0]):
        a = _quintic_at(rot_coeffs, j, t)
        rx, ry, rz = rot_axis[j, 0] * a, rot_axis[j, 1] * a, rot_axis[j, 2] * a
        angle = np.sqrt(rx * rx + ry * ry + rz * rz)
        half = 0.5 * angle
        scale = np.sin(half) / max(angle, 1e-300) if angle > 1e-9 else 0.5
        rot_off[j, 0] = np.cos(half)
        rot_off[j, 1] = rx * scale
        rot_off[j, 2] = ry * scale
        rot_off[j, 3] = rz * scale
        d = _quintic_at(pos_coeffs, j, t)
        for c in range(3):
            pos_off[j, c] = pos_dir[j, c] * d


@numba.njit(cache=True)
def lock_feet(data, frame, root_pos, root_rot, pose, dt, locks, shown):
    """Foot locking on a pose (in place): keep feet where they touched down with two-bone
    IK on the legs, fade a released lock's correction out.

    ``data`` a :class:`PoseData` (its ``legs``, ``parents`` and the contacts of the played
    ``frame``); ``pose`` a :class:`Pose` of joints 1.. (its ``rot`` corrected in place);
    ``root_pos [3]``, ``root_rot [4]`` the character root; ``locks`` the
    :class:`FootLocks` (state updated in place). ``shown [K]`` receives the feet locked
    now. Times in seconds, distances in metres.
    """
    parents = data.parents
    legs = data.legs
    rot = pose.rot
    pos = pose.pos
    unlock_distance = locks.unlock_distance
    blend_time = locks.blend_time
    lock_in_time = locks.lock_in_time
    locked = locks.locked
    lock_pos = locks.lock_pos
    release = locks.release
    release_t = locks.release_t
    lock_t = locks.lock_t
    J = parents.shape[0]
    wp = np.empty((J, 3))
    wr = np.empty((J, 4))
    forward_kinematics(parents, root_pos, root_rot, rot, pos, wp, wr)
    new_a = np.empty(4)
    new_b = np.empty(4)
    offset = np.empty(3)
    target = np.empty(3)
    for k in range(legs.shape[0]):
        hip, knee, ankle, toe = legs[k, 0], legs[k, 1], legs[k, 2], legs[k, 3]
        shown[k] = False
        # a lock broken by distance (a release as long as unlock_distance) fades out before
        # the foot locks again; taking it over would hold the foot where the broken lock was,
        # and break and take it over again every frame while the contact lasts
        r2 = release[k, 0] ** 2 + release[k, 1] ** 2 + release[k, 2] ** 2
        broken = release_t[k] < blend_time and r2 >= unlock_distance * unlock_distance
        if data.contacts[frame, k]:
            if not locked[k] and not broken:
                locked[k] = True
                for c in range(3):
                    lock_pos[k, c] = wp[toe, c]
                lock_t[k] = 0.0
                # a lock taking over from a fading release keeps the foot where it is shown
                if release_t[k] < blend_time:
                    a = release_t[k] / blend_time
                    w = (1 - a) ** 2 * (1 + 2 * a)
                    for c in range(3):
                        lock_pos[k, c] = wp[toe, c] + release[k, c] * w
                    lock_t[k] = lock_in_time
                # never lock a foot below the floor (y = 0): a transition's blend can dip a toe
                # under it for a few frames, and the lock would hold it there (the soak found
                # a toe 8 cm deep for 3.7 s)
                lock_pos[k, 1] = max(lock_pos[k, 1], 0.0)
                release_t[k] = np.inf
            elif locked[k]:
                d2 = 0.0
                for c in range(3):
                    d2 += (lock_pos[k, c] - wp[toe, c]) ** 2
                if np.sqrt(d2) > unlock_distance:
                    _unlock(k, wp[toe], locks)
        elif locked[k]:
            _unlock(k, wp[toe], locks)
        if locked[k]:
            lock_t[k] += dt
            a = min(lock_t[k] / lock_in_time, 1.0) if lock_in_time > 0 else 1.0
            w = a * a * (3 - 2 * a)  # smooth fade-in
            for c in range(3):
                offset[c] = (lock_pos[k, c] - wp[toe, c]) * w
            shown[k] = True
        elif release_t[k] < blend_time:
            release_t[k] += dt
            a = min(release_t[k] / blend_time, 1.0)
            w = (1 - a) ** 2 * (1 + 2 * a)  # smooth (cubic) fade-out
            for c in range(3):
                offset[c] = release[k, c] * w
        else:
            continue
        if offset[0] * offset[0] + offset[1] * offset[1] + offset[2] * offset[2] < 1e-10:
            continue
        for c in range(3):
            target[c] = wp[ankle, c] + offset[c]
        if two_bone_ik(wp[hip], wp[knee], wp[ankle], target, wr[hip], wr[knee], new_a, new_b):
            local_from_world(wr[parents[hip]], new_a, rot[hip - 1])
            local_from_world(new_a, new_b, rot[knee - 1])
            # keep the ankle's world orientation, so the toe lands where the ankle moved it
            local_from_world(new_b, wr[ankle], rot[ankle - 1])


@numba.njit(cache=True)
def _unlock(k, toe_p, locks):
    """Release foot ``k`` of :class:`FootLocks` ``locks``: fade out the correction it had
    (as shown)."""
    a = min(locks.lock_t[k] / locks.lock_in_time, 1.0) if locks.lock_in_time > 0 else 1.0
    w = a * a * (3 - 2 * a)
    locks.locked[k] = False
    for c in range(3):
        locks.release[k, c] = (locks.lock_pos[k, c] - toe_p[c]) * w
    locks.release_t[k] = 0.0


@numba.njit(cache=True)
def _frame_pair(db_rot, db_pos, i, j):
    """Local rotations ``[J, 4]`` and positions ``[J, 3]`` of joints 1.. of database frames
    ``i`` and ``j`` (of ``db_rot [N, J+1, 4]``, ``db_pos [N, J+1, 3]``), as float64 copies:
    ``(rot_i, rot_j, pos_i, pos_j)``."""
    J = db_rot.shape[1] - 1
    ra = np.empty((J, 4))
    rb = np.empty((J, 4))
    pa = np.empty((J, 3))
    pb = np.empty((J, 3))
    for q in range(J):
        for c in range(4):
            ra[q, c] = db_rot[i, q + 1, c]
            rb[q, c] = db_rot[j, q + 1, c]
        for c in range(3):
            pa[q, c] = db_pos[i, q + 1, c]
            pb[q, c] = db_pos[j, q + 1, c]
    return ra, rb, pa, pb


@numba.njit(cache=True)
def controller_pose(data, quintic, offsets, locks, shown, out, shown_contacts, i, j, alpha, inert_mode, inert_t,
                    root_pos, root_yaw, frame, dt):
    """One controller frame's pose in one call: sample the database between frames ``i``
    and ``j`` (``alpha`` in [0, 1]), add the inertialization offsets, lock the feet, and
    write the character's pose.

    Args:
        data: a :class:`PoseData` (``legs`` with no rows: no foot locking).
        quintic, offsets: the inertialization: ``inert_mode`` 0 no offsets, 1 the
            :class:`Quintic` decay evaluated at ``inert_t`` seconds into ``offsets`` (a
            :class:`Pose` ``[J-1]``), 2 offsets already in ``offsets``.
        locks: the :class:`FootLocks` (as :func:`lock_feet`).
        shown: a :class:`Pose` ``[J-1]`` that receives the local pose shown.
        out: a :class:`Pose` ``[J]`` that receives the pose with joint 0 the root.
        shown_contacts: ``[K]`` receives the feet locked this frame.
        root_pos, root_yaw: character root ``[3]`` (m) and heading (rad about +Y);
            ``frame`` the played frame.
    """
    shown_rot = shown.rot
    shown_pos = shown.pos
    rot_off = offsets.rot
    pos_off = offsets.pos
    J1 = shown_rot.shape[0]
    ra, rb, pa, pb = _frame_pair(data.rot, data.pos, i, j)
    sample_pose(ra, rb, pa, pb, alpha, shown_rot, shown_pos)
    if inert_mode == 1:
        quintic_offsets(quintic.rot_axis, quintic.rot_coeffs, quintic.pos_dir, quintic.pos_coeffs, inert_t, rot_off,
                        pos_off)
    if inert_mode != 0:
        tmp = np.empty(4)
        for q in range(J1):
            qmul(rot_off[q], shown_rot[q], tmp)
            for c in range(4):
                shown_rot[q, c] = tmp[c]
            for c in range(3):
                shown_pos[q, c] = shown_pos[q, c] + pos_off[q, c]
    half = 0.5 * root_yaw
    root_rot = np.empty(4)
    root_rot[0] = np.cos(half)
    root_rot[1] = 0.0
    root_rot[2] = np.sin(half)
    root_rot[3] = 0.0
    if data.legs.shape[0] > 0:
        lock_feet(data, frame, root_pos, root_rot, shown, dt, locks, shown_contacts)
    for c in range(4):
        out.rot[0, c] = root_rot[c]
    for c in range(3):
        out.pos[0, c] = root_pos[c]
    for q in range(J1):
        for c in range(4):
            out.rot[q + 1, c] = shown_rot[q, c]
        for c in range(3):
            out.pos[q + 1, c] = shown_pos[q, c]


@numba.njit(cache=True)
def _log_into(q, out):
    """Rotation vector (axis * angle) of quaternion ``q [4]`` into ``out [3]``, as
    :func:`motionmatch.anim.quat.log` computes it (normalised, shortest way round)."""
    n = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if n < 1e-12:
        w, x, y, z = 1.0, 0.0, 0.0, 0.0
    else:
        m = max(n, 1e-12)
        w, x, y, z = q[0] / m, q[1] / m, q[2] / m, q[3] / m
    if w < 0:
        w, x, y, z = -w, -x, -y, -z
    s = np.sqrt(x * x + y * y + z * z)
    angle = 2.0 * np.arctan2(s, w)
    scale = angle / max(s, 1e-300) if s > 1e-9 else 2.0
    out[0] = x * scale
    out[1] = y * scale
    out[2] = z * scale


@numba.njit(cache=True)
def _mul_inv_into(a, b, out):
    """``out = a * conj(b)``."""
    cb = np.empty(4)
    cb[0] = b[0]
    cb[1] = -b[1]
    cb[2] = -b[2]
    cb[3] = -b[3]
    qmul(a, cb, out)


@numba.njit(cache=True)
def _quintic_coeffs_into(x0, v0, t1, c, j):
    """Bollo's overshoot-free quintic of one offset norm ``x0`` (rate ``v0``, blend ``t1``
    s) into column ``j`` of ``c [7, J]`` (see :func:`motionmatch.runtime.inertialize.quintic_coefficients`)."""
    v0 = min(v0, 0.0)
    if v0 < -1e-12:
        t1 = min(t1, 5.0 * x0 / -v0)
    t1 = max(t1, 1e-6)
    t2 = t1 * t1
    a0 = max((-8.0 * v0 * t1 - 20.0 * x0) / t2, 0.0)
    c[0, j] = -(a0 * t2 + 6.0 * v0 * t1 + 12.0 * x0) / (2.0 * t1 ** 5)
    c[1, j] = (3.0 * a0 * t2 + 16.0 * v0 * t1 + 30.0 * x0) / (2.0 * t1 ** 4)
    c[2, j] = -(3.0 * a0 * t2 + 12.0 * v0 * t1 + 20.0 * x0) / (2.0 * t1 ** 3)
    c[3, j] = 0.5 * a0
    c[4, j] = v0
    c[5, j] = x0
    c[6, j] = t1


@numba.njit(cache=True)
def quintic_transition(db_rot, db_pos, frame, nxt, fps, src_rot, src_pos, prev_rot, prev_pos, dt, blend_time,
                       rot_off, rot_axis, rot_coeffs, pos_off, pos_dir, pos_coeffs):
    """Start a quintic inertialization from the pose shown (``src_rot [J, 4]``,
    ``src_pos [J, 3]``; its velocity from the previous pose shown ``dt`` s before, zero
    when ``dt <= 0``) to database frame ``frame`` (velocity toward frame ``nxt`` at
    ``fps``; zero when ``nxt == frame``) for the ``J`` joints 1.. of ``db_rot [N, J+1, 4]``,
    ``db_pos [N, J+1, 3]``. Writes the offsets ``rot_off [J, 4]``, ``pos_off [J, 3]``,
    their axes/directions ``[J, 3]`` and quintic coefficients ``[7, J]``, as
    :meth:`motionmatch.runtime.inertialize.Inertializer.transition` does."""
    J = src_rot.shape[0]
    # the target pose exactly as the controller samples it (normalised rotations)
    ra, rb, pa, pb = _frame_pair(db_rot, db_pos, frame, nxt)
    dst_rot = np.empty((J, 4))
    dst_pos = np.empty((J, 3))
    sample_pose(ra, rb, pa, pb, 0.0, dst_rot, dst_pos)
    q = np.empty(4)
    rv = np.empty(3)
    sw = np.empty(3)
    dw = np.empty(3)
    qa = np.empty(4)
    qb = np.empty(4)
    for k in range(J):
        dst = dst_rot[k]
        # angular velocities: of the pose shown, and of the database at the target frame
        if dt > 0:
            _mul_inv_into(src_rot[k], prev_rot[k], q)
            _log_into(q, sw)
            for c in range(3):
                sw[c] = sw[c] / dt
        else:
            sw[0] = sw[1] = sw[2] = 0.0
        if nxt != frame:
            for c in range(4):
                qa[c] = db_rot[nxt, k + 1, c]
                qb[c] = db_rot[frame, k + 1, c]
            _mul_inv_into(qa, qb, q)
            _log_into(q, dw)
            for c in range(3):
                dw[c] = dw[c] * fps
        else:
            dw[0] = dw[1] = dw[2] = 0.0
        # rotation offset (shortest way round), its angle and axis
        _mul_inv_into(src_rot[k], dst, q)
        if q[0] < 0:
            for c in range(4):
                q[c] = -q[c]
        for c in range(4):
            rot_off[k, c] = q[c]
        _log_into(q, rv)
        angle = np.sqrt(rv[0] * rv[0] + rv[1] * rv[1] + rv[2] * rv[2])
        v_angle = 0.0
        for c in range(3):
            rot_axis[k, c] = rv[c] / max(angle, 1e-12) if angle > 1e-9 else 0.0
            v_angle += (sw[c] - dw[c]) * rot_axis[k, c]
        _quintic_coeffs_into(angle, v_angle, blend_time, rot_coeffs, k)
        # translation offset
        d2 = 0.0
        for c in range(3):
            pos_off[k, c] = src_pos[k, c] - dst_pos[k, c]
            d2 += pos_off[k, c] * pos_off[k, c]
        dist = np.sqrt(d2)
        v_dist = 0.0
        for c in range(3):
            pos_dir[k, c] = pos_off[k, c] / max(dist, 1e-12) if dist > 1e-9 else 0.0
            sv = (src_pos[k, c] - prev_pos[k, c]) / dt if dt > 0 else 0.0
            dv = (db_pos[nxt, k + 1, c] - db_pos[frame, k + 1, c]) * fps if nxt != frame else 0.0
            v_dist += (sv - dv) * pos_dir[k, c]
        _quintic_coeffs_into(dist, v_dist, blend_time, pos_coeffs, k)
