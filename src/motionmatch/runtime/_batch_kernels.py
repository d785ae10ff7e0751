"""Compiled per-frame stages of many controllers at once (numba): loops over rows of
:class:`~motionmatch.runtime.batch.ControllerBatch` state, each row doing exactly what one
controller's frame does (the per-character kernel
:func:`~motionmatch.runtime._kernels.controller_pose` for the pose).

Each kernel reads one named tuple of exactly the arrays it needs (:class:`PlaybackArrays`,
:class:`SimArrays`, :class:`PoseArrays`: fields of a :class:`DatabaseArrays` and of a
batch's :class:`ControllerRows` and inertialization rows, by name; :func:`stage_arrays`),
built once per batch size and passed as a plain tuple that the kernel names again on entry
(as :mod:`motionmatch._jit` describes: numba types a plain tuple of 25 arrays about as fast
as 25 arguments, 3.9 against 3.5 us a call, a named tuple in 5.7 us). ``rows [R]`` are the
rows to step and ``dt [R]`` their time steps (s).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from motionmatch._jit import no_refcount
from motionmatch.control.intent import STILL_SPEED
from motionmatch.control.springs import MIN_HALFLIFE, SPRING_HALFLIFE_FACTOR
from motionmatch.runtime._kernels import FootLocks, Pose, PoseData, Quintic, controller_pose, quintic_transition
from motionmatch.search.penalized import gather_with_agents

#: ``ControllerRows.inert_kind``: how a row's inertialization offsets come
NO_OFFSETS, QUINTIC, SPRING = 0, 1, 2

#: ``ControllerRows.mode``: a controller's mode (its ``mode`` names it)
MODES = ("locomotion", "idle", "dance", "jump", "creep", "punch")
LOCOMOTION = 0

#: ``ControllerRows.last_kind``: what a controller's last intent was: none yet; a plain
#: intent with no actions, held in ``last_goal`` and ``last_gait``; another (kept by the
#: controller as an object)
LAST_NONE, LAST_PLAIN, LAST_OBJECT = 0, 1, 2

#: m/s: the default speed change of ``Intent.changed_sharply``
SHARP_SPEED_DELTA = 1.0


class DatabaseArrays(NamedTuple):
    """What the per-frame kernels read of a database (``N`` frames, ``J`` joints, ``K`` feet)."""

    rotations: np.ndarray     #: ``[N, J, 4]`` local rotations (joint 0 the root)
    translations: np.ndarray  #: ``[N, J, 3]`` local translations (m)
    contacts: np.ndarray      #: ``[N, K]`` bool foot contacts
    parents: np.ndarray       #: ``[J]`` int64
    legs: np.ndarray          #: ``[K, 4]`` (hip, knee, ankle, toe) of every foot; ``[0, 4]``: no foot locking
    no_legs: np.ndarray       #: ``[0, 4]``
    clip_last: np.ndarray     #: ``[N]`` the last frame of each frame's clip
    clip_first: np.ndarray    #: ``[N]`` the first frame of each frame's clip
    track_pos: np.ndarray     #: ``[N, 3]`` float64 root positions (m)
    track_yaw: np.ndarray     #: ``[N]`` float64 root headings (rad about +Y)
    fps: float


class ControllerRows(NamedTuple):
    """The arrays of a :class:`~motionmatch.runtime.batch.ControllerBatch`'s state (``C``
    rows, ``J`` joints, ``K`` legs), what they hold; the stages take some of them by name.
    Seconds, metres, radians; quaternions ``(w, x, y, z)``."""

    frame_pos: np.ndarray          #: ``[C]`` fractional database frame playing
    play_rate: np.ndarray          #: ``[C]`` database seconds played per second: 1 forward, -1 backward (idle)
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
    out_contacts: np.ndarray       #: ``[C, K]`` bool: feet locked in the output
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
    clock: np.ndarray              #: ``[C]`` the controller's time (s since it was made)
    since_search: np.ndarray       #: ``[C]`` since its last search (``inf`` before the first)
    mode: np.ndarray               #: ``[C]`` int64: its mode, an index of :data:`MODES`
    last_kind: np.ndarray          #: ``[C]`` int64: :data:`LAST_NONE`, :data:`LAST_PLAIN` or :data:`LAST_OBJECT`
    last_goal: np.ndarray          #: ``[C, 5]`` a plain last intent's goal (``runtime.batch.intent_goal``)
    last_gait: np.ndarray          #: ``[C]`` int64: its gait, an index of ``control.intent.GAITS``
    search_interval: np.ndarray    #: ``[C]`` (settings)
    adjust_halflife: np.ndarray    #: ``[C]`` (settings)
    sharp_turn_deg: np.ndarray     #: ``[C]`` (settings)
    sim_compiled: np.ndarray       #: ``[C]`` bool: its simulated root advances in :func:`advance_sim_rows` (spring, 2D)
    adjust_max_ratio: np.ndarray   #: ``[C]`` (settings)
    adjust_min_speed: np.ndarray   #: ``[C]`` (settings)
    sim_max_distance: np.ndarray   #: ``[C]`` (settings)


class PlaybackArrays(NamedTuple):
    """What :func:`playback_rows` reads and writes."""

    fps: float
    clip_last: np.ndarray
    clip_first: np.ndarray
    track_pos: np.ndarray
    track_yaw: np.ndarray
    frame_pos: np.ndarray
    play_rate: np.ndarray
    frame: np.ndarray
    root_pos: np.ndarray
    root_yaw: np.ndarray
    db_root_pos: np.ndarray
    db_root_yaw: np.ndarray


class SimArrays(NamedTuple):
    """What :func:`advance_sim_rows` reads and writes."""

    sim_pos: np.ndarray
    sim_vel: np.ndarray
    sim_acc: np.ndarray
    sim_heading: np.ndarray
    sim_angle: np.ndarray
    sim_rate: np.ndarray
    sim_version: np.ndarray
    velocity_halflife: np.ndarray
    facing_halflife: np.ndarray


class PoseArrays(NamedTuple):
    """What :func:`pose_rows` reads and writes."""

    rotations: np.ndarray
    translations: np.ndarray
    contacts: np.ndarray
    parents: np.ndarray
    legs: np.ndarray
    no_legs: np.ndarray
    clip_last: np.ndarray
    frame_pos: np.ndarray
    frame: np.ndarray
    root_pos: np.ndarray
    root_yaw: np.ndarray
    shown_rot: np.ndarray
    shown_pos: np.ndarray
    shown_slot: np.ndarray
    last_dt: np.ndarray
    locked: np.ndarray
    lock_pos: np.ndarray
    release: np.ndarray
    release_t: np.ndarray
    lock_t: np.ndarray
    out_rot: np.ndarray
    out_pos: np.ndarray
    out_contacts: np.ndarray
    inert_kind: np.ndarray
    foot_locking: np.ndarray
    unlock_distance: np.ndarray
    foot_blend_time: np.ndarray
    foot_lock_in_time: np.ndarray
    elapsed: np.ndarray
    started: np.ndarray
    rot_offset: np.ndarray
    pos_offset: np.ndarray
    rot_axis: np.ndarray
    pos_dir: np.ndarray
    rot_coeffs: np.ndarray
    pos_coeffs: np.ndarray


class DecisionArrays(NamedTuple):
    """What :func:`decide_rows` reads and writes."""

    clock: np.ndarray
    since_search: np.ndarray
    mode: np.ndarray
    last_kind: np.ndarray
    last_goal: np.ndarray
    last_gait: np.ndarray
    search_interval: np.ndarray
    adjust_halflife: np.ndarray
    sharp_turn_deg: np.ndarray
    play_rate: np.ndarray
    root_pos: np.ndarray
    root_yaw: np.ndarray
    sim_pos: np.ndarray
    sim_heading: np.ndarray
    adjust_max_ratio: np.ndarray
    adjust_min_speed: np.ndarray
    sim_max_distance: np.ndarray


def stage_arrays(cls, *sources) -> tuple:
    """The fields of ``cls`` (one of the stage tuples) taken by name from the first of
    ``sources`` that has each (a :class:`DatabaseArrays`, a batch's rows), as the stage's
    kernel takes them: a plain tuple (see the module docstring)."""
    return tuple(cls(*(next(getattr(s, n) for s in sources if hasattr(s, n)) for n in cls._fields)))


@numba.njit(cache=True)
def playback_rows(rows, dt, at_end, speed, turn_rate, arrays):
    """Advance playback of every row by its ``dt`` times its ``play_rate`` (clamped at its
    clip's last frame, or its first when playing backward) and move its character root by the clip's root motion between the database roots played
    before and now (rotated into the character's heading). ``arrays``: a plain
    :class:`PlaybackArrays`.

    Writes ``at_end [R]`` (the clip's last frame, or first, was reached), ``speed [R]`` (m/s, planar)
    and ``turn_rate [R]`` (rad/s) of the root motion over the step (0 when ``dt == 0``).
    """
    st = PlaybackArrays(*arrays)
    two_pi = 2.0 * math.pi
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        rate = st.play_rate[r]
        fp = st.frame_pos[r] + h * st.fps * rate
        if rate >= 0:
            last = st.clip_last[st.frame[r]]
            end = fp >= last
        else:
            last = st.clip_first[st.frame[r]]
            end = fp <= last
        if end:
            fp = float(last)
        i = int(fp)
        st.frame_pos[r] = fp
        st.frame[r] = i
        # the database root at the fractional frame fp
        j = min(i + 1, st.clip_last[i])
        a = fp - i
        b = 1 - a
        px = b * st.track_pos[i, 0] + a * st.track_pos[j, 0]
        py = b * st.track_pos[i, 1] + a * st.track_pos[j, 1]
        pz = b * st.track_pos[i, 2] + a * st.track_pos[j, 2]
        y0 = st.track_yaw[i]
        dy = (st.track_yaw[j] - y0 + math.pi) % two_pi - math.pi
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
def decide_rows(rows, dt, at_end, speed, turn_rate, force, root_motion_only, plain, goals, gaits,
                adjust_here, coast, sharp, arrays):
    """The clocks and the common decision of every row: advance its clock and search timer
    by ``dt [R]``; whether its intent changed sharply from its last (``sharp [R]``, written:
    1 or 0, -1 where an intent is not plain and Python decides, see :func:`changed_sharply`);
    then whether its frame only coasts (``coast [R]``, written): it plays locomotion on,
    with no search due and no mode to change. That is: the clip's end not reached
    (``at_end [R]``, after playback), no search forced (``force [R]``), the mode locomotion,
    the search timer under
    ``search_interval`` (to 1e-9 s), a plain intent (``plain [R]``: an ``Intent`` with no
    actions) moving faster than 1 mm/s and no sharp change. A coasting row's root is pulled
    toward its simulated root (:func:`adjust_root`, unless ``adjust_halflife`` is 0, ``dt``
    0 or ``root_motion_only [R]``; with the root motion's ``speed``, ``turn_rate [R]``); a
    row whose simulated root would then have to be pulled back toward it (farther than
    ``sim_max_distance``), or that needs a root adjustment when ``adjust_here`` is false,
    does not coast (Python adjusts it). A coasting row plays forward (``play_rate`` 1) and
    its intent (``goals [R, 5]``, ``gaits [R]``) becomes its last. ``arrays``: a plain
    :class:`DecisionArrays`."""
    st = DecisionArrays(*arrays)
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        st.clock[r] += h
        st.since_search[r] += h
        coast[n] = False
        kind = st.last_kind[r]
        if kind == LAST_NONE:
            sharp[n] = 0
        elif kind == LAST_PLAIN and plain[n]:
            sharp[n] = 1 if changed_sharply(goals[n], gaits[n], st.last_goal[r], st.last_gait[r],
                                            st.sharp_turn_deg[r]) else 0
        else:
            sharp[n] = -1
        if sharp[n] != 0 or at_end[n] or force[n] or st.mode[r] != LOCOMOTION or not plain[n]:
            continue
        if st.since_search[r] >= st.search_interval[r] - 1e-9 or not math.hypot(goals[n, 0], goals[n, 1]) > 1e-3:
            continue
        if st.adjust_halflife[r] > 0 and h > 0 and not root_motion_only[n]:
            if not adjust_here:
                continue
            x, z, yaw = adjust_root(st.root_pos[r, 0], st.root_pos[r, 2], st.root_yaw[r], st.sim_pos[r, 0],
                                    st.sim_pos[r, 2], st.sim_heading[r], h, speed[n], turn_rate[n],
                                    st.adjust_halflife[r], st.adjust_max_ratio[r], st.adjust_min_speed[r])
            if math.hypot(st.sim_pos[r, 0] - x, st.sim_pos[r, 2] - z) > st.sim_max_distance[r]:
                continue
            st.root_pos[r, 0] = x
            st.root_pos[r, 1] = st.root_pos[r, 1] + 0.0
            st.root_pos[r, 2] = z
            st.root_yaw[r] = yaw
        coast[n] = True
        if st.play_rate[r] < 0:
            st.play_rate[r] = 1.0
        st.last_kind[r] = LAST_PLAIN
        for k in range(5):
            st.last_goal[r, k] = goals[n, k]
        st.last_gait[r] = gaits[n]


@no_refcount
def playback_decide_rows(rows, dt, at_end, speed, turn_rate, force, root_motion_only, plain, goals, gaits, coast,
                         sharp, playback, decision):
    """:func:`playback_rows`, then :func:`decide_rows` (roots adjusted here), in one call
    (``playback``, ``decision``: their plain tuples): the numbers of the two calls."""
    playback_rows(rows, dt, at_end, speed, turn_rate, playback)
    decide_rows(rows, dt, at_end, speed, turn_rate, force, root_motion_only, plain, goals, gaits, True, coast, sharp,
                decision)


@numba.njit(cache=True)
def adjust_root(x, z, yaw, sim_x, sim_z, sim_yaw, dt, speed, turn_rate, halflife, max_ratio, min_speed):
    """The character root ``(x, z)`` (m) and heading ``yaw`` (rad) pulled toward the
    simulated root ``(sim_x, sim_z)``, ``sim_yaw`` over ``dt`` seconds with half-life
    ``halflife`` (s), the pull at most ``max_ratio`` times the root motion's own ``speed``
    (m/s) and ``turn_rate`` (rad/s) plus ``min_speed`` (m/s; twice as much in rad/s): the
    new ``(x, z, yaw)``, yaw wrapped to ``[-pi, pi)``."""
    k = 1.0 - 0.5 ** (dt / halflife)
    stx = (sim_x - x) * k
    stz = (sim_z - z) * k
    limit = (max_ratio * speed + min_speed) * dt
    n = math.hypot(stx, stz)
    if n > limit:
        f = limit / n
        stx = stx * f
        stz = stz * f
    two_pi = 2 * math.pi
    dyaw = (sim_yaw - yaw + math.pi) % two_pi - math.pi
    ystep = dyaw * k
    ylimit = (max_ratio * turn_rate + 2 * min_speed) * dt
    ystep = min(max(ystep, -ylimit), ylimit)
    return x + stx, z + stz, (yaw + ystep + math.pi) % two_pi - math.pi


@numba.njit(cache=True)
def advance_clocks(rows, going, dt, now, start_time, started, local_time, owed, step_dt, steps, live):
    """The input clocks of a world's agents (rows ``rows [A]`` of the columns ``start_time``,
    ``started``, ``local_time``, ``owed``) for a step of ``dt`` seconds at world time
    ``now``: each one's step ``step_dt [A]`` (``dt`` plus what it owed); one not
    ``going [A]`` (skipped: a level of detail) owes it; one whose start time has come is
    ``live [A]``: its input's clock advances by ``steps [A]`` (0 on its first step, which
    is at its start time) and it has started."""
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt + owed[r]
        step_dt[n] = h
        live[n] = False
        steps[n] = 0.0
        if not going[n]:
            owed[r] = h
            continue
        owed[r] = 0.0
        if now >= start_time[r]:
            s = h if started[r] else 0.0
            local_time[r] += s
            started[r] = True
            live[n] = True
            steps[n] = s


@numba.njit(cache=True)
def changed_sharply(a, gait_a, b, gait_b, limit_deg):
    """``Intent.changed_sharply`` of two plain intents with no actions, given as goals
    ``a``, ``b`` ``[5]`` (``runtime.batch.intent_goal``: velocity x, z; facing x, z; 1 if
    facing) and gait indices: the speed changes by :data:`SHARP_SPEED_DELTA` or more, the
    gait changes, the direction of travel turns by ``limit_deg`` or more (both moving), the
    facing is set or unset, or turns by ``limit_deg`` or more."""
    ax = a[0]
    az = a[1]
    bx = b[0]
    bz = b[1]
    sa = math.hypot(ax, az)
    sb = math.hypot(bx, bz)
    if abs(sa - sb) >= SHARP_SPEED_DELTA:
        return True
    if gait_a != gait_b:
        return True
    if sa >= STILL_SPEED and sb >= STILL_SPEED:
        cos = (ax / sa) * (bx / sb) + (az / sa) * (bz / sb)
        if math.degrees(math.acos(max(-1.0, min(1.0, cos)))) >= limit_deg:
            return True
    if (a[4] > 0) != (b[4] > 0):
        return True
    if a[4] == 0:
        return False
    cos = a[2] * b[2] + 0.0 + a[3] * b[3]  # (the 3D facings' dot product: y is 0)
    return math.degrees(math.acos(max(-1.0, min(1.0, cos)))) >= limit_deg


@numba.njit(cache=True, nogil=True, _nrt=True)
def pose_rows(rows, dt, arrays):
    """Every row's pose this frame: the database pose at its fractional frame plus its
    inertialization offsets (quintic ones evaluated here, spring ones already current),
    forward kinematics and foot-locking IK on its legs, into ``out_rot [J, 4]``,
    ``out_pos [J, 3]`` (joint 0: the character root in the world) and ``out_contacts [K]``.
    The pose shown before becomes the previous one (when ``dt > 0``). ``arrays``: a plain
    :class:`PoseArrays`. A row's pose reads and writes that row alone (and the database):
    calls on different rows may run at once, on several threads (it holds no GIL)."""
    p = PoseArrays(*arrays)
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        kind = p.inert_kind[r]
        if kind == SPRING:
            mode = 2  # offsets advanced by the caller
        else:
            p.elapsed[r] += h
            mode = 1 if kind == QUINTIC and p.started[r] else 0
        fp = p.frame_pos[r]
        i = int(fp)
        j = min(i + 1, p.clip_last[i])
        if h > 0:
            p.shown_slot[r] = 1 - p.shown_slot[r]
            p.last_dt[r] = h
        k = p.shown_slot[r]
        legs = p.legs if p.foot_locking[r] else p.no_legs
        for q in range(p.out_contacts.shape[1]):
            p.out_contacts[r, q] = False
        controller_pose(PoseData(p.rotations, p.translations, p.parents, legs, p.contacts),
                        Quintic(p.rot_axis[r], p.rot_coeffs[r], p.pos_dir[r], p.pos_coeffs[r]),
                        Pose(p.rot_offset[r], p.pos_offset[r]),
                        FootLocks(p.unlock_distance[r], p.foot_blend_time[r], p.foot_lock_in_time[r], p.locked[r],
                                  p.lock_pos[r], p.release[r], p.release_t[r], p.lock_t[r]),
                        Pose(p.shown_rot[r, k], p.shown_pos[r, k]), Pose(p.out_rot[r], p.out_pos[r]),
                        p.out_contacts[r], i, j, fp - i, mode, p.elapsed[r], p.root_pos[r], p.root_yaw[r],
                        p.frame[r], h)


@numba.njit(cache=True)
def _heading_of(c, s):
    """:func:`motionmatch.control.trajectory.heading_of`."""
    return math.atan2(c * (2.0 * s), 1.0 - s * (2.0 * s))


@numba.njit(cache=True)
def _heading_of_angle(angle):
    """:func:`motionmatch.control.trajectory.heading_of_angle`."""
    half = 0.5 * angle
    return _heading_of(math.cos(half), math.sin(half))


@no_refcount
def sim_pose_rows(rows, dt, goals, sim, pose):
    """:func:`advance_sim_rows`, then :func:`pose_rows`, in one call (``sim``, ``pose``:
    their plain tuples): the numbers of the two calls. Compiled without reference counts:
    handing its tuples on to the two would otherwise count a reference to each of their
    arrays, twice (about 2 us a call, more than a row's pose). (The two say ``_nrt=True``:
    a kernel compiled from one without reference counts inherits that unless it says
    otherwise, and they allocate.)"""
    advance_sim_rows(rows, dt, goals, sim)
    pose_rows(rows, dt, pose)


@numba.njit(cache=True, _nrt=True)
def advance_sim_rows(rows, dt, goals, arrays):
    """Advance every row's simulated root by its ``dt`` toward its goal: the critically
    damped velocity and heading springs in closed form, on the ground plane, as
    :meth:`TrajectoryPredictor.advance <motionmatch.control.trajectory.TrajectoryPredictor.advance>`
    does for an :class:`~motionmatch.control.intent.Intent` (spring mode, 2D; the same
    operations in the same order).

    ``goals [R, 5]``: the intent's velocity ``x, z`` (m/s), its facing ``x, z`` and 1 when
    it has one (else 0): the goal heading is the facing's, else the velocity's when moving,
    else the current heading. ``arrays``: a plain :class:`SimArrays`."""
    st = SimArrays(*arrays)
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


@numba.njit(cache=True, nogil=True)
def planar_query(r, root_pos, root_yaw, sim_vel, sim_acc, sim_rate, velocity_halflife, facing_halflife, goal, times,
                 raw, pos_cols, dir_cols, mean, scale, weights, vcols, q, pos, vel, dirs, rot):
    """The query of row ``r``'s controller for an intent ``goal [5]`` (:func:`advance_sim_rows`'
    packing) in the common case, as :meth:`Controller._query
    <motionmatch.runtime.controller.Controller._query>` builds it from the spring
    prediction (:meth:`TrajectoryPredictor._predict_planar
    <motionmatch.control.trajectory.TrajectoryPredictor._predict_planar>` from the
    character's root with the simulated root's velocity, acceleration and turning rate;
    the same operations in the same order): the desired trajectory at ``times [T]`` into
    ``pos, vel, dirs [T, 3]`` and ``rot [T, 4]``; the query ``q [D]`` (float32): the raw
    features of the frame playing, ``raw [D]``, with the trajectory's positions and
    directions in the character frame at ``pos_cols, dir_cols [P, 3]`` (x column, z
    column, sample), normalised (``(raw - mean) / scale * weights``), the vertical
    columns ``vcols`` zeroed (the planar view). Arrays ``root_pos`` to
    ``facing_halflife`` are the batch's rows."""
    px = root_pos[r, 0]
    py = root_pos[r, 1]
    pz = root_pos[r, 2]
    yaw0 = root_yaw[r]
    half = 0.5 * _heading_of_angle(yaw0)  # the yaw of RootState._trusted(..., yaw0, ...)
    syaw = _heading_of(math.cos(half), math.sin(half))
    gx = goal[0]
    gz = goal[1]
    if goal[4] != 0.0:
        g = _heading_of_angle(math.atan2(goal[2], goal[3]))
    elif math.hypot(gx, gz) >= STILL_SPEED:
        g = _heading_of_angle(math.atan2(gx, gz))
    else:
        g = syaw
    y = SPRING_HALFLIFE_FACTOR / max(velocity_halflife[r], MIN_HALFLIFE)
    yy = y * y
    yh = SPRING_HALFLIFE_FACTOR / max(facing_halflife[r], MIN_HALFLIFE)
    vx = sim_vel[r, 0]
    vz = sim_vel[r, 2]
    ax = sim_acc[r, 0]
    az = sim_acc[r, 2]
    j0x = vx - gx
    j0z = vz - gz
    j1x = ax + j0x * y
    j1z = az + j0z * y
    off0 = (syaw - g + math.pi) % (2.0 * math.pi) - math.pi
    j1h = sim_rate[r] + off0 * yh
    for k in range(times.shape[0]):
        t = times[k]
        yt = y * t
        e = math.exp(-yt)
        e1 = -math.expm1(-yt)
        n2 = 1.0 - (1.0 + yt) * e
        pos[k, 0] = px + gx * t + j0x * e1 / y + j1x * n2 / yy
        pos[k, 1] = py
        pos[k, 2] = pz + gz * t + j0z * e1 / y + j1z * n2 / yy
        vel[k, 0] = gx + e * (j0x + j1x * t)
        vel[k, 1] = 0.0
        vel[k, 2] = gz + e * (j0z + j1z * t)
        yaw = g + math.exp(-yh * t) * (off0 + j1h * t)
        dirs[k, 0] = math.sin(yaw)
        dirs[k, 1] = 0.0
        dirs[k, 2] = math.cos(yaw)
        rot[k, 0] = math.cos(0.5 * yaw)
        rot[k, 1] = 0.0
        rot[k, 2] = math.sin(0.5 * yaw)
        rot[k, 3] = 0.0
    c = math.cos(yaw0)
    s = math.sin(yaw0)
    full = np.empty(raw.shape[0])
    for d in range(raw.shape[0]):
        full[d] = np.float64(raw[d])
    for n in range(pos_cols.shape[0]):
        k = pos_cols[n, 2]
        x = pos[k, 0] - px
        z = pos[k, 2] - pz
        full[pos_cols[n, 0]] = c * x - s * z
        full[pos_cols[n, 1]] = s * x + c * z
    for n in range(dir_cols.shape[0]):
        k = dir_cols[n, 2]
        x = dirs[k, 0]
        z = dirs[k, 2]
        full[dir_cols[n, 0]] = c * x - s * z
        full[dir_cols[n, 1]] = s * x + c * z
    for d in range(raw.shape[0]):
        q[d] = np.float32((full[d] - mean[d]) / scale[d] * weights[d])
    for n in range(vcols.shape[0]):
        q[vcols[n]] = 0.0


@numba.njit(cache=True, nogil=True)
def planar_queries(rows, goals, root_pos, root_yaw, sim_vel, sim_acc, sim_rate, velocity_halflife, facing_halflife,
                   frame, times, raw_features, pos_cols, dir_cols, mean, scale, weights, vcols, q, pos, vel, dirs, rot):
    """:func:`planar_query` of many rows at once: row ``rows[i]`` toward ``goals[i]`` into
    ``q[i]``, ``pos[i]``, ``vel[i]``, ``dirs[i]``, ``rot[i]`` (``[R, D]``, ``[R, T, 3]``,
    ``[R, T, 4]``), the frame playing of each read from ``frame`` (the batch's rows): the
    queries of a step's searches in one call, each computed as alone."""
    for i in range(rows.shape[0]):
        r = rows[i]
        planar_query(r, root_pos, root_yaw, sim_vel, sim_acc, sim_rate, velocity_halflife, facing_halflife, goals[i],
                     times, raw_features[frame[r]], pos_cols, dir_cols, mean, scale, weights, vcols, q[i], pos[i],
                     vel[i], dirs[i], rot[i])


@numba.njit(cache=True, nogil=True)
def gather_many(static_grid, static_tick, agent_grid, agent_tick, owner, agent_slots, uids, rows, root_pos, root_yaw,
                positions, radii, world, local, out, counts, order_key, found, nearest):
    """:func:`~motionmatch.search.penalized.gather_with_agents` for many searches at once:
    search ``i`` of the character in batch row ``rows[i]`` (world agent ``uids[i]``) along
    ``positions[i] [T, 3]`` within ``radii[i]``, into ``world[i], local[i]``, ``out[rows[i]]``,
    ``counts[rows[i]]``; ``found[i]``, ``nearest[i]``: its ``(M, nearest)`` (``-M``: ``out`` too
    small, nothing prepared). Each search takes its own visit marks, counting up from
    ``static_tick`` and ``agent_tick`` (``static_tick`` 0: the scene has no grid); returns
    the last of each."""
    for i in range(rows.shape[0]):
        r = rows[i]
        if static_tick > 0:
            static_tick += 1
        agent_tick += 1
        m, near = gather_with_agents(static_grid, static_tick, agent_grid, agent_tick, owner, agent_slots, uids[i],
                                     root_pos[r, 0], root_pos[r, 2], root_yaw[r], positions[i], radii[i], world[i],
                                     local[i], out[r], counts[r], order_key)
        found[i] = m
        nearest[i] = near
    return static_tick, agent_tick


@numba.njit(cache=True, nogil=True)
def quintic_transitions(rows, frames, clip_last, blend_times, db_rot, db_pos, fps, track_pos, track_yaw, shown_rot,
                        shown_pos, shown_slot, last_dt, frame, frame_pos, play_rate, db_root_pos, db_root_yaw,
                        rot_off, rot_axis, rot_coeffs, pos_off, pos_dir, pos_coeffs, started, elapsed):
    """The transitions of many controllers at once (:meth:`Controller._transition_to
    <motionmatch.runtime.controller.Controller._transition_to>` with quintic
    inertialization): row ``rows[i]`` plays database frame ``frames[i]`` next (its clip's
    last frame ``clip_last[i]``), blended over ``blend_times[i]`` s from the pose it shows
    (:func:`~motionmatch.runtime._kernels.quintic_transition` into its inertialization
    row), its clip time and database root (``track_pos [N, 3]``, ``track_yaw [N]``) set as
    ``_db_root_at`` reads them: the same operations in the same order."""
    two_pi = 2.0 * math.pi
    for i in range(rows.shape[0]):
        r = rows[i]
        f = frames[i]
        nxt = min(f + 1, clip_last[i])
        k = shown_slot[r]
        quintic_transition(db_rot, db_pos, f, nxt, fps, shown_rot[r, k], shown_pos[r, k], shown_rot[r, k ^ 1],
                           shown_pos[r, k ^ 1], last_dt[r], blend_times[i], rot_off[r], rot_axis[r], rot_coeffs[r],
                           pos_off[r], pos_dir[r], pos_coeffs[r])
        started[r] = True
        elapsed[r] = 0.0
        frame[r] = f
        fpos = float(f)
        frame_pos[r] = fpos
        play_rate[r] = 1.0
        # _db_root_at(fpos): i = int(fpos), j = min(i + 1, clip last of i), a = fpos - i
        j = min(f + 1, clip_last[i])
        a = fpos - f
        b = 1 - a
        for c in range(3):
            db_root_pos[r, c] = b * track_pos[f, c] + a * track_pos[j, c]
        y0 = track_yaw[f]
        dy = (track_yaw[j] - y0 + math.pi) % two_pi - math.pi
        db_root_yaw[r] = y0 + a * dy
