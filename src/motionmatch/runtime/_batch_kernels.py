"""Compiled per-frame stages of many controllers at once (numba): loops over rows of
:class:`~motionmatch.runtime.batch.ControllerBatch` state, each row doing exactly what one
controller's frame does (the per-character kernel
:func:`~motionmatch.runtime._kernels.controller_pose` for the pose).

The kernels read three named tuples of arrays: ``db`` a :class:`DatabaseArrays`, ``st`` a
:class:`ControllerRows`, ``inert`` an :class:`~motionmatch.runtime.inertialize.InertialArrays`;
``rows [R]`` are the rows to step and ``dt [R]`` their time steps (s). The tuples are
passed flat (``*db, *st, *inert``) and rebuilt inside: numba takes a call with some forty
arrays in a few microseconds, a call with tuples of them in several times that.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from motionmatch.control.intent import STILL_SPEED
from motionmatch.control.springs import MIN_HALFLIFE, SPRING_HALFLIFE_FACTOR
from motionmatch.runtime._kernels import controller_pose
from motionmatch.runtime.inertialize import InertialArrays

#: ``ControllerRows.inert_kind``: how a row's inertialization offsets come
NO_OFFSETS, QUINTIC, SPRING = 0, 1, 2


class DatabaseArrays(NamedTuple):
    """What the per-frame kernels read of a database (``N`` frames, ``J`` joints, ``K`` feet)."""

    rotations: np.ndarray     #: ``[N, J, 4]`` local rotations (joint 0 the root)
    translations: np.ndarray  #: ``[N, J, 3]`` local translations (m)
    contacts: np.ndarray      #: ``[N, K]`` bool foot contacts
    parents: np.ndarray       #: ``[J]`` int64
    legs: np.ndarray          #: ``[K, 4]`` (hip, knee, ankle, toe) of every foot; ``[0, 4]``: no foot locking
    no_legs: np.ndarray       #: ``[0, 4]``
    clip_last: np.ndarray     #: ``[N]`` the last frame of each frame's clip
    root_pos: np.ndarray      #: ``[N, 3]`` float64 root positions (m)
    root_yaw: np.ndarray      #: ``[N]`` float64 root headings (rad about +Y)
    fps: float


class ControllerRows(NamedTuple):
    """A :class:`ControllerBatch`'s arrays (``C`` rows, ``J`` joints, ``K`` legs) as one
    value for the compiled kernels. Seconds, metres, radians; quaternions ``(w, x, y, z)``."""

    frame_pos: np.ndarray          #: ``[C]`` fractional database frame playing
    frame: np.ndarray              #: ``[C]`` int64, its integer part
    root_pos: np.ndarray           #: ``[C, 3]`` character root (world)
    root_yaw: np.ndarray           #: ``[C]`` its heading
    db_root_pos: np.ndarray        #: ``[C, 3]`` the database root at ``frame_pos`` (root motion's origin)
    db_root_yaw: np.ndarray        #: ``[C]``
    shown_rot: np.ndarray          #: ``[C, 2, J-1, 4]`` the last two local poses shown (joints 1..)
    shown_pos: np.ndarray          #: ``[C, 2, J-1, 3]``
    shown_slot: np.ndarray         #: ``[C]`` int64: which of the two is the latest
    last_dt: np.ndarray            #: ``[C]`` the time between them
    locked: np.ndarray             #: ``[C, K]`` bool: foot locked
    lock_pos: np.ndarray           #: ``[C, K, 3]`` where (world)
    release: np.ndarray            #: ``[C, K, 3]`` offset of a released lock, fading out
    release_t: np.ndarray          #: ``[C, K]`` since the release
    lock_t: np.ndarray             #: ``[C, K]`` since the lock
    out_rot: np.ndarray            #: ``[C, J, 4]`` the pose output (joint 0: the root, world)
    out_pos: np.ndarray            #: ``[C, J, 3]``
    contacts: np.ndarray           #: ``[C, K]`` bool: feet locked in the output
    inert_kind: np.ndarray         #: ``[C]`` int64 (settings): ``_batch_kernels`` NO_OFFSETS, QUINTIC, SPRING
    foot_locking: np.ndarray       #: ``[C]`` bool (settings)
    unlock_distance: np.ndarray    #: ``[C]`` (settings)
    foot_blend_time: np.ndarray    #: ``[C]`` (settings)
    foot_lock_in_time: np.ndarray  #: ``[C]`` (settings)
    sim_pos: np.ndarray            #: ``[C, 3]`` the simulated root (the desired trajectory's origin, world)
    sim_vel: np.ndarray            #: ``[C, 3]`` its velocity (m/s)
    sim_acc: np.ndarray            #: ``[C, 3]`` its acceleration (m/s^2)
    sim_heading: np.ndarray        #: ``[C]`` its heading as its RootState reports it (``.yaw``)
    sim_angle: np.ndarray          #: ``[C]`` the heading angle it was last advanced to (unwrapped)
    sim_rate: np.ndarray           #: ``[C]`` its turning rate (rad/s)
    sim_version: np.ndarray        #: ``[C]`` int64, counts the advances (a cached RootState is stale after one)
    velocity_halflife: np.ndarray  #: ``[C]`` of its velocity spring (s; its predictor's)
    facing_halflife: np.ndarray    #: ``[C]`` of its heading spring (s; its predictor's)


_ND = len(DatabaseArrays._fields)  # where each tuple's arrays start and end in the flat arguments
_NDS = _ND + len(ControllerRows._fields)


@numba.njit(cache=True, inline="always")
def _unpack(a):
    """``(db, st, inert)`` from the flat arguments."""
    return DatabaseArrays(*a[:_ND]), ControllerRows(*a[_ND:_NDS]), InertialArrays(*a[_NDS:])


@numba.njit(cache=True, inline="always")
def _unpack2(a):
    """``(db, st)`` from the flat arguments."""
    return DatabaseArrays(*a[:_ND]), ControllerRows(*a[_ND:])


@numba.njit(cache=True)
def playback_rows(rows, dt, at_end, speed, turn_rate, *arrays):
    """Advance playback of every row by its ``dt`` (clamped at its clip's last frame) and
    move its character root by the clip's root motion between the database roots played
    before and now (rotated into the character's heading).

    Writes ``at_end [R]`` (the clip's last frame was reached), ``speed [R]`` (m/s, planar)
    and ``turn_rate [R]`` (rad/s) of the root motion over the step (0 when ``dt == 0``).
    """
    db, st = _unpack2(arrays)
    two_pi = 2.0 * math.pi
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        fp = st.frame_pos[r] + h * db.fps
        last = db.clip_last[st.frame[r]]
        end = fp >= last
        if end:
            fp = float(last)
        i = int(fp)
        st.frame_pos[r] = fp
        st.frame[r] = i
        # the database root at the fractional frame fp
        j = min(i + 1, db.clip_last[i])
        a = fp - i
        b = 1 - a
        px = b * db.root_pos[i, 0] + a * db.root_pos[j, 0]
        py = b * db.root_pos[i, 1] + a * db.root_pos[j, 1]
        pz = b * db.root_pos[i, 2] + a * db.root_pos[j, 2]
        y0 = db.root_yaw[i]
        dy = (db.root_yaw[j] - y0 + math.pi) % two_pi - math.pi
        new_yaw = y0 + a * dy
        old_yaw = st.db_root_yaw[r]
        d0 = px - st.db_root_pos[r, 0]
        d1 = py - st.db_root_pos[r, 1]
        d2 = pz - st.db_root_pos[r, 2]
        turn = st.root_yaw[r] - old_yaw  # rotates the clip's world into the character's
        c = math.cos(turn)
        s = math.sin(turn)
        st.root_pos[r, 0] = st.root_pos[r, 0] + (c * d0 + s * d2)
        st.root_pos[r, 1] = st.root_pos[r, 1] + d1
        st.root_pos[r, 2] = st.root_pos[r, 2] + (-s * d0 + c * d2)
        st.root_yaw[r] = (st.root_yaw[r] + (new_yaw - old_yaw) + math.pi) % two_pi - math.pi
        st.db_root_pos[r, 0] = px
        st.db_root_pos[r, 1] = py
        st.db_root_pos[r, 2] = pz
        st.db_root_yaw[r] = new_yaw
        at_end[n] = end
        if h > 0:
            speed[n] = math.hypot(d0, d2) / h
            turn_rate[n] = abs(new_yaw - old_yaw) / h
        else:
            speed[n] = 0.0
            turn_rate[n] = 0.0


@numba.njit(cache=True)
def pose_rows(rows, dt, *arrays):
    """Every row's pose this frame: the database pose at its fractional frame plus its
    inertialization offsets (quintic ones evaluated here, spring ones already current),
    forward kinematics and foot-locking IK on its legs, into ``st.out_rot [J, 4]``,
    ``st.out_pos [J, 3]`` (joint 0: the character root in the world) and ``st.contacts [K]``.
    The pose shown before becomes the previous one (when ``dt > 0``)."""
    db, st, inert = _unpack(arrays)
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        kind = st.inert_kind[r]
        if kind == SPRING:
            mode = 2  # offsets advanced by the caller
        else:
            inert.elapsed[r] += h
            mode = 1 if kind == QUINTIC and inert.started[r] else 0
        fp = st.frame_pos[r]
        i = int(fp)
        j = min(i + 1, db.clip_last[i])
        if h > 0:
            st.shown_slot[r] = 1 - st.shown_slot[r]
            st.last_dt[r] = h
        k = st.shown_slot[r]
        legs = db.legs if st.foot_locking[r] else db.no_legs
        for q in range(st.contacts.shape[1]):
            st.contacts[r, q] = False
        controller_pose(db.rotations, db.translations, i, j, fp - i, mode, inert.elapsed[r], inert.rot_axis[r],
                        inert.rot_coeffs[r], inert.pos_dir[r], inert.pos_coeffs[r], inert.rot_offset[r],
                        inert.pos_offset[r], st.root_pos[r], st.root_yaw[r], db.parents, legs, db.contacts,
                        st.frame[r], h, st.unlock_distance[r], st.foot_blend_time[r], st.foot_lock_in_time[r],
                        st.locked[r], st.lock_pos[r], st.release[r], st.release_t[r], st.lock_t[r], st.shown_rot[r, k],
                        st.shown_pos[r, k], st.out_rot[r], st.out_pos[r], st.contacts[r])


@numba.njit(cache=True, inline="always")
def _heading_of(c, s):
    """:func:`motionmatch.control.trajectory.heading_of`."""
    return math.atan2(c * (2.0 * s), 1.0 - s * (2.0 * s))


@numba.njit(cache=True, inline="always")
def _heading_of_angle(angle):
    """:func:`motionmatch.control.trajectory.heading_of_angle`."""
    half = 0.5 * angle
    return _heading_of(math.cos(half), math.sin(half))


@numba.njit(cache=True)
def advance_sim_rows(rows, dt, goals, *arrays):
    """Advance every row's simulated root by its ``dt`` toward its goal: the critically
    damped velocity and heading springs in closed form, on the ground plane, as
    :meth:`TrajectoryPredictor.advance <motionmatch.control.trajectory.TrajectoryPredictor.advance>`
    does for an :class:`~motionmatch.control.intent.Intent` (spring mode, 2D; the same
    operations in the same order).

    ``goals [R, 5]``: the intent's velocity ``x, z`` (m/s), its facing ``x, z`` and 1 when
    it has one (else 0): the goal heading is the facing's, else the velocity's when moving,
    else the current heading."""
    _db, st = _unpack2(arrays)
    two_pi = 2.0 * math.pi
    for n in range(rows.shape[0]):
        r = rows[n]
        t = dt[n]
        gx = goals[n, 0]
        gz = goals[n, 1]
        if goals[n, 4] != 0.0:
            goal = _heading_of_angle(math.atan2(goals[n, 2], goals[n, 3]))
        elif math.hypot(gx, gz) >= STILL_SPEED:
            goal = _heading_of_angle(math.atan2(gx, gz))
        else:
            goal = st.sim_heading[r]
        # velocity spring (x and z; y is not sprung in 2D: its velocity and acceleration are 0)
        y = SPRING_HALFLIFE_FACTOR / max(st.velocity_halflife[r], MIN_HALFLIFE)
        yt = y * t
        e = math.exp(-yt)
        e1 = -math.expm1(-yt)
        n2 = 1.0 - (1.0 + yt) * e
        yy = y * y
        for c in range(0, 3, 2):
            g = gx if c == 0 else gz
            v0 = st.sim_vel[r, c]
            a0 = st.sim_acc[r, c]
            j0 = v0 - g
            j1 = a0 + j0 * y
            st.sim_pos[r, c] = st.sim_pos[r, c] + g * t + j0 * e1 / y + j1 * n2 / yy
            st.sim_vel[r, c] = g + e * (j0 + j1 * t)
            st.sim_acc[r, c] = e * (a0 - j1 * yt)
        st.sim_vel[r, 1] = 0.0
        st.sim_acc[r, 1] = 0.0
        # heading spring toward the goal, the shortest way round
        off0 = (st.sim_heading[r] - goal + math.pi) % two_pi - math.pi
        w0 = st.sim_rate[r]
        yh = SPRING_HALFLIFE_FACTOR / max(st.facing_halflife[r], MIN_HALFLIFE)
        eh = math.exp(-yh * t)
        j1 = w0 + off0 * yh
        off = eh * (off0 + j1 * t)
        angle = goal + off
        st.sim_angle[r] = angle
        st.sim_rate[r] = eh * (w0 - j1 * yh * t)
        half = 0.5 * _heading_of_angle(angle)  # the heading its RootState reports (RootState._trusted)
        st.sim_heading[r] = _heading_of(math.cos(half), math.sin(half))
        st.sim_version[r] += 1
