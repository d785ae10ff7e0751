"""Compiled kernel of the ground stage (:mod:`motionmatch.runtime.ground`): the poses of
many controller rows put on a terrain, after the poses stage (numba), in one call
(:func:`ground_step`) with the terrain's own compiled query inside it
(:func:`~motionmatch.environment.terrain.terrain_query`: any kind of ground):

1. forward kinematics of each row's output pose as the poses stage left it (on the flat
   floor), and the ground points to ask the terrain about: the character root, each
   foot's contact joint, where that foot will be a moment later (its horizontal velocity
   times a look-ahead), and two points ahead of the root along the velocity its input
   last asked for;
2. the root lifted onto the ground (damped) and tilted by part of the ground's damped
   slope, lowered so that the lower planted foot reaches, each foot's contact put on the
   surface by its leg's two-bone IK and turned toward the surface's normal (within a
   limit), weighted by a smoothed contact weight (no pops in and out of contact);
3. the speed factor of the row's next intents: slower uphill than downhill, 0 before a
   rise too high to step (a wall).

Metres, seconds, Y up, quaternions ``(w, x, y, z)``. Pose arrays are the batch's output
rows: ``out_rot [C, J, 4]``, ``out_pos [C, J, 3]``, joint 0 the character root in the
world, the others local.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from motionmatch.environment.terrain import terrain_query
from motionmatch.runtime._kernels import forward_kinematics, local_from_world, qmul, qrot, two_bone_ik

__all__ = ["ground_step"]

_LN2 = math.log(2.0)


@numba.njit(cache=True)
def _track(x, v, goal, goal_prev, h, halflife, max_speed):
    """A critically damped spring following a moving goal (at ``goal_prev`` a step ago, at
    ``goal`` now), the goal's speed fed forward up to ``max_speed`` (a ramp is followed
    without lag; a step's jump is taken by the spring). Returns ``(x, v)`` after ``h`` s."""
    if h <= 0.0:
        return x, v
    gv = min(max((goal - goal_prev) / h, -max_speed), max_speed)
    y = 2.0 * _LN2 / max(halflife, 1e-5)
    e0 = x - goal_prev
    de0 = v - gv
    j1 = de0 + e0 * y
    ey = math.exp(-y * h)
    return goal_prev + gv * h + ey * (e0 + j1 * h), gv + ey * (de0 - j1 * y * h)


@numba.njit(cache=True)
def _toward_up(n, fraction, max_angle, out):
    """``out [4]``: ``fraction`` of the rotation taking straight up to the unit normal
    ``n [3]``, its angle at most ``max_angle`` (rad)."""
    ny = min(max(n[1], -1.0), 1.0)
    angle = math.acos(ny)
    ax, az = n[2], -n[0]  # up x n
    s = math.sqrt(ax * ax + az * az)
    a = min(angle, max_angle) * fraction
    if s < 1e-12 or a < 1e-12:
        out[0], out[1], out[2], out[3] = 1.0, 0.0, 0.0, 0.0
        return
    sh = math.sin(0.5 * a) / s
    out[0], out[1], out[2], out[3] = math.cos(0.5 * a), ax * sh, 0.0, az * sh


@numba.njit(cache=True)
def ground_step(rows, dt, frame, contacts, out_rot, out_pos, parents, legs, terrain, cols, settings):
    """Put the output poses of ``rows [R]`` (time steps ``dt [R]``, s) on the ground ``terrain``
    (a :meth:`~motionmatch.environment.terrain.Terrain.kernel_arrays` tuple), in place in
    ``out_rot``, ``out_pos`` (see the module docstring for the steps).

    ``frame [C]`` the database frame each row plays, ``contacts [N, K]`` the database's
    foot contacts.
    ``cols``: the rows' ground state, updated (a plain tuple of
    :class:`~motionmatch.runtime.ground.GroundColumns`' arrays in its field order).
    ``settings``: :meth:`~motionmatch.runtime.ground.GroundSettings.kernel_tuple`."""
    (ready, lift, lift_vel, lift_goal, normal, weight, foot_y, foot_vel, foot_goal, toe_prev, speed_factor,
     goal_velocity) = cols
    (lift_hl, foot_hl, weight_hl, normal_hl, lean, max_lean, max_tilt, max_speed, slack, lookahead, uphill, downhill,
     min_factor, step_limit, wall_ahead) = settings
    J = parents.shape[0]
    K = legs.shape[0]
    P = 1 + 2 * K + 2
    wp = np.empty((J, 3))
    wr = np.empty((J, 4))
    points = np.empty((P, 2))
    heights = np.empty(P)
    normals = np.empty((P, 3))
    toe0 = np.empty((max(K, 1), 3))
    ankle0 = np.empty((max(K, 1), 3))
    ankle_rot0 = np.empty((max(K, 1), 4))
    root_rot = np.empty(4)
    tilt = np.empty(4)
    q = np.empty(4)
    qa = np.empty(4)
    new_a = np.empty(4)
    new_b = np.empty(4)
    d = np.empty(3)
    dq = np.empty(3)
    target = np.empty(3)
    ws = np.empty(max(K, 1))
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        first = not ready[r]
        # the flat pose's feet, and the ground points
        forward_kinematics(parents, out_pos[r, 0], out_rot[r, 0], out_rot[r, 1:], out_pos[r, 1:], wp, wr)
        points[0, 0] = out_pos[r, 0, 0]
        points[0, 1] = out_pos[r, 0, 2]
        for k in range(K):
            ankle, toe = legs[k, 2], legs[k, 3]
            for c in range(3):
                toe0[k, c] = wp[toe, c]
                ankle0[k, c] = wp[ankle, c]
            for c in range(4):
                ankle_rot0[k, c] = wr[ankle, c]
            points[1 + k, 0] = wp[toe, 0]
            points[1 + k, 1] = wp[toe, 2]
            vx = vz = 0.0
            if not first and h > 0:
                vx = (wp[toe, 0] - toe_prev[r, k, 0]) / h
                vz = (wp[toe, 2] - toe_prev[r, k, 2]) / h
            points[1 + K + k, 0] = wp[toe, 0] + vx * lookahead
            points[1 + K + k, 1] = wp[toe, 2] + vz * lookahead
        gx, gz = goal_velocity[r, 0], goal_velocity[r, 1]
        gs = math.sqrt(gx * gx + gz * gz)
        ux, uz = (gx / gs, gz / gs) if gs > 1e-6 else (0.0, 0.0)
        for m in range(2):
            points[P - 2 + m, 0] = points[0, 0] + ux * wall_ahead * 0.5 * (m + 1)
            points[P - 2 + m, 1] = points[0, 1] + uz * wall_ahead * 0.5 * (m + 1)
        terrain_query(terrain, points, heights, normals)
        base_y = out_pos[r, 0, 1]
        ground = heights[0]
        # contact weights, smoothed (a smoothstep of an exponential approach)
        a = 1.0 - math.exp(-_LN2 * h / max(weight_hl, 1e-5))
        for k in range(K):
            cv = 1.0 if contacts[frame[r], k] else 0.0
            weight[r, k] = cv if first else weight[r, k] + (cv - weight[r, k]) * a
            w = min(max(weight[r, k], 0.0), 1.0)
            ws[k] = w * w * (3.0 - 2.0 * w)
        # the ground's slope under the root, damped
        b = 1.0 - math.exp(-_LN2 * h / max(normal_hl, 1e-5))
        nn = 0.0
        for c in range(3):
            normal[r, c] = normals[0, c] if first else normal[r, c] + (normals[0, c] - normal[r, c]) * b
            nn += normal[r, c] * normal[r, c]
        nn = math.sqrt(nn)
        for c in range(3):
            normal[r, c] = normal[r, c] / nn if nn > 1e-12 else (1.0 if c == 1 else 0.0)
        # the root's lift: the ground under it, lowered so that the lower planted foot reaches
        goal = ground
        cap = math.inf
        for k in range(K):
            g = heights[1 + k]
            goal = min(goal, ground + ws[k] * (g - ground))
            cap = min(cap, g + slack + (1.0 - ws[k]))
        if first:
            lift[r], lift_vel[r] = goal, 0.0
        else:
            lift[r], lift_vel[r] = _track(lift[r], lift_vel[r], goal, lift_goal[r], h, lift_hl, max_speed)
        lift_goal[r] = goal
        if lift[r] > cap:
            lift[r] = cap
        # the root: lifted, and tilted by part of the damped slope
        _toward_up(normal[r], lean, max_lean, tilt)
        qmul(tilt, out_rot[r, 0], root_rot)
        for c in range(4):
            out_rot[r, 0, c] = root_rot[c]
        out_pos[r, 0, 1] = base_y + lift[r]
        # the next intents' speed: the grade along the way (damped normal), a wall ahead
        grade = -(normal[r, 0] * ux + normal[r, 2] * uz) / max(normal[r, 1], 1e-3)
        f = 1.0 - uphill * max(grade, 0.0) - downhill * max(-grade, 0.0)
        f = max(f, min_factor)
        if heights[P - 2] - ground > step_limit:
            f = 0.0
        elif heights[P - 1] - ground > step_limit:
            f = min(f, 0.5)
        speed_factor[r] = f
        if K == 0:
            ready[r] = True
            continue
        forward_kinematics(parents, out_pos[r, 0], out_rot[r, 0], out_rot[r, 1:], out_pos[r, 1:], wp, wr)
        for k in range(K):
            hip, knee, ankle = legs[k, 0], legs[k, 1], legs[k, 2]
            g = heights[1 + k]
            ahead = max(g, heights[1 + K + k])
            fgoal = ws[k] * g + (1.0 - ws[k]) * ahead
            if first:
                foot_y[r, k], foot_vel[r, k] = fgoal, 0.0
            else:
                foot_y[r, k], foot_vel[r, k] = _track(foot_y[r, k], foot_vel[r, k], fgoal, foot_goal[r, k], h,
                                                      foot_hl, max_speed)
            foot_goal[r, k] = fgoal
            for c in range(3):
                toe_prev[r, k, c] = toe0[k, c]
            above = toe0[k, 1] - base_y  # the toe's height above the floor, flat
            F = foot_y[r, k] + ws[k] * (g - foot_y[r, k])
            F = max(F, g - above)  # the toe never below the surface
            # the foot turned toward the surface, its toe on the ground as on the floor
            _toward_up(normals[1 + k], ws[k], max_tilt, q)
            for c in range(3):
                d[c] = toe0[k, c] - ankle0[k, c]
            qrot(q, d, dq)
            target[0] = toe0[k, 0] - dq[0]
            target[1] = base_y + F + above - dq[1]
            target[2] = toe0[k, 2] - dq[2]
            if two_bone_ik(wp[hip], wp[knee], wp[ankle], target, wr[hip], wr[knee], new_a, new_b):
                local_from_world(wr[parents[hip]], new_a, out_rot[r, hip])
                local_from_world(new_a, new_b, out_rot[r, knee])
                qmul(q, ankle_rot0[k], qa)
                local_from_world(new_b, qa, out_rot[r, ankle])
        ready[r] = True
