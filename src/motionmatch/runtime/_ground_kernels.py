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
   rise or a drop too high to step (a wall, a ledge).

Metres, seconds, Y up, quaternions ``(w, x, y, z)``. Pose arrays are the batch's output
rows: ``out_rot [C, J, 4]``, ``out_pos [C, J, 3]``, joint 0 the character root in the
world, the others local.
"""

from __future__ import annotations

import math

import numpy as np

from motionmatch._jit import no_refcount
from motionmatch.environment.terrain import terrain_query
from motionmatch.runtime._batch_kernels import PoseArrays, advance_sim_rows, pose_rows
from motionmatch.runtime._kernels import local_from_world, qmul, qrot, two_bone_ik_into

__all__ = ["GOAL_VELOCITY", "LIFT", "NORMAL", "READY", "SETTINGS", "SPEED_FACTOR", "ground_rows", "ground_step",
           "pack_ground", "pose_ground_rows", "scratch_size", "sim_pose_ground_rows", "state_width"]

#: the columns of a row's ground state ``state [C, W]`` (float64; :func:`state_width`):
#: 1 when the row was put on the ground before (else its next frame snaps onto it); the
#: root's lift above the floor (m), its rate (m/s) and the goal it followed last frame
#: (m); the ground's damped unit normal under the root [3]; the speed factor of the
#: row's next plain intents; the velocity (x, z, m/s) its input last asked for [2]; then
#: per foot ``k`` of ``K``: its contact weight (0 swinging .. 1 planted), its damped ground
#: height (m), that height's rate (m/s) and goal (m), and the flat pose's toe last frame
#: (world, m) [3]
READY, LIFT, LIFT_VEL, LIFT_GOAL, NORMAL, SPEED_FACTOR, GOAL_VELOCITY, FEET = 0, 1, 2, 3, 4, 7, 8, 10

#: the settings array's entries (:meth:`~motionmatch.runtime.ground.GroundSettings.kernel_array`)
SETTINGS = ("lift_halflife", "foot_halflife", "weight_halflife", "normal_halflife", "lean", "max_lean_rad",
            "max_foot_tilt_rad", "max_goal_speed", "reach_slack", "lookahead", "uphill_slowdown",
            "downhill_slowdown", "min_speed_factor", "step_limit_m", "wall_lookahead_m", "ik_skip_m")


def state_width(K: int) -> int:
    """The columns of a ground state row with ``K`` feet."""
    return FEET + 7 * K


def scratch_size(J: int, K: int) -> int:
    """The float64 entries of :func:`ground_rows`' scratch ``work`` for ``J`` joints (the
    leg chains' highest joint + 1 is enough: only theirs are used) and ``K`` feet (one
    such array per thread that runs the stage at once)."""
    return 7 * J + 6 * (2 * K + 3) + 36 + 21 + max(K, 1) + 27 + 12


_LN2 = math.log(2.0)


#: a leg whose IK target is nearer than ``ik_skip_m`` (:data:`SETTINGS`) to where the root's
#: move put its ankle, its foot turned as the root is (``1 - |q . tilt|`` below this: under
#: 3e-5 rad apart) and its knee bent (hip to ankle at least :data:`SKIP_BENT` m short of the
#: two bones' length: the two-bone IK swings a straight leg's knee by up to half a
#: millimetre for a micrometre's reach) keeps the flat pose's local rotations (no IK: the
#: level parts of a terrain); its joints are then within micrometres of the IK's
SKIP_TURN = 1e-10
SKIP_BENT = 1e-3


@no_refcount
def _spring(halflife, h):
    """``(y, exp(-y h))`` of a critically damped spring of ``halflife`` (s) over ``h`` s."""
    y = 2.0 * _LN2 / max(halflife, 1e-5)
    return y, math.exp(-y * h)


@no_refcount
def _track(x, v, goal, goal_prev, h, y, ey, max_speed):
    """A critically damped spring following a moving goal (at ``goal_prev`` a step ago, at
    ``goal`` now), the goal's speed fed forward up to ``max_speed`` (a ramp is followed
    without lag; a step's jump is taken by the spring). ``y, ey``: :func:`_spring` of its
    half-life over ``h``. Returns ``(x, v)`` after ``h`` s."""
    if h <= 0.0:
        return x, v
    gv = min(max((goal - goal_prev) / h, -max_speed), max_speed)
    e0 = x - goal_prev
    de0 = v - gv
    j1 = de0 + e0 * y
    return goal_prev + gv * h + ey * (e0 + j1 * h), gv + ey * (de0 - j1 * y * h)


@no_refcount
def _toward_up(n, fraction, max_angle, out):
    """``out [4]``: ``fraction`` of the rotation taking straight up to the unit normal
    ``n [3]``, its angle at most ``max_angle`` (rad). (The identity without a
    trigonometric call where the normal is straight up or ``fraction`` is 0: a foot in
    the air, level ground.)"""
    ax, az = n[2], -n[0]  # up x n
    s = math.sqrt(ax * ax + az * az)
    if s < 1e-12 or fraction <= 0.0:
        out[0], out[1], out[2], out[3] = 1.0, 0.0, 0.0, 0.0
        return
    ny = min(max(n[1], -1.0), 1.0)
    a = min(math.acos(ny), max_angle) * fraction
    if a < 1e-12:
        out[0], out[1], out[2], out[3] = 1.0, 0.0, 0.0, 0.0
        return
    sh = math.sin(0.5 * a) / s
    out[0], out[1], out[2], out[3] = math.cos(0.5 * a), ax * sh, 0.0, az * sh


@no_refcount
def _moved(tilt, origin, lift, p, out):
    """``out [3]``: point ``p`` turned by ``tilt`` about ``origin [3]`` and raised by ``lift``."""
    w, x, y, z = tilt[0], tilt[1], tilt[2], tilt[3]
    vx, vy, vz = p[0] - origin[0], p[1] - origin[1], p[2] - origin[2]
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    out[0] = origin[0] + vx + w * tx + (y * tz - z * ty)
    out[1] = origin[1] + vy + w * ty + (z * tx - x * tz) + lift
    out[2] = origin[2] + vz + w * tz + (x * ty - y * tx)


@no_refcount
def _chain_fk(chain, parents, root_pos, root_rot, rot, pos, world_pos, world_rot):
    """:func:`~motionmatch.runtime._kernels.forward_kinematics` of the joints ``chain``
    only (parents before children, joint 0 first; the joints the legs need): their world
    transforms into ``world_pos [J, 3]``, ``world_rot [J, 4]`` (the other rows untouched)."""
    for c in range(3):
        world_pos[0, c] = root_pos[c]
    for c in range(4):
        world_rot[0, c] = root_rot[c]
    for m in range(1, chain.shape[0]):
        j = chain[m]
        p = parents[j]
        w, x, y, z = world_rot[p, 0], world_rot[p, 1], world_rot[p, 2], world_rot[p, 3]
        vx, vy, vz = pos[j - 1, 0], pos[j - 1, 1], pos[j - 1, 2]
        tx = 2.0 * (y * vz - z * vy)
        ty = 2.0 * (z * vx - x * vz)
        tz = 2.0 * (x * vy - y * vx)
        world_pos[j, 0] = world_pos[p, 0] + vx + w * tx + (y * tz - z * ty)
        world_pos[j, 1] = world_pos[p, 1] + vy + w * ty + (z * tx - x * tz)
        world_pos[j, 2] = world_pos[p, 2] + vz + w * tz + (x * ty - y * tx)
        qmul(world_rot[p], rot[j - 1], world_rot[j])


def pack_ground(parents: np.ndarray, legs: np.ndarray, chain: np.ndarray, terrain_arrays: tuple,
                settings: np.ndarray) -> np.ndarray:
    """What :func:`ground_step` reads besides the rows, as one read-only float64 array
    (fewer arguments: a compiled call types and unboxes each one, about 0.1 us an array).
    What every row reads comes first, in a few cache lines: the sizes ``J, K, L, T, S, I,
    R, C, V``, ``settings``, the terrain's ``params [7]``, then ``parents [J]``, ``legs [K,
    4]`` and ``chain [L]`` (int64 entries stored as their bits, read through an int64
    view); then the terrain's ``heights [R, C]``, ``vertices [V, 3]`` and its int64
    ``triangles [T, 3]``, ``start [S]``, ``items [I]``."""
    params, heights, vertices, triangles, start, items = terrain_arrays
    legs = np.asarray(legs, dtype=np.int64).reshape(-1, 4)
    sizes = [len(parents), len(legs), len(chain), len(triangles), len(start), len(items), heights.shape[0],
             heights.shape[1], len(vertices)]
    skeleton = np.concatenate([parents, legs.ravel(), chain]).astype(np.int64)
    mesh = np.concatenate([np.asarray(triangles).ravel(), start, items]).astype(np.int64)
    data = np.concatenate([np.array(sizes, dtype=np.float64), settings, params, skeleton.view(np.float64),
                           np.asarray(heights, dtype=np.float64).ravel(),
                           np.asarray(vertices, dtype=np.float64).ravel(), mesh.view(np.float64)])
    data.setflags(write=False)
    return data


@no_refcount
def ground_step(rows, dt, frame, contacts, out_rot, out_pos, data, state, work):
    """:func:`ground_rows` with the skeleton, the terrain and the settings packed by
    :func:`pack_ground` into ``data`` (one compiled call over ``rows``; its views of them
    cost nothing: no reference counts), ``work`` its scratch (:func:`scratch_size`)."""
    J, K, L, T, S, n_items = int(data[0]), int(data[1]), int(data[2]), int(data[3]), int(data[4]), int(data[5])
    R, C, V = int(data[6]), int(data[7]), int(data[8])
    b = 9
    n = len(SETTINGS)
    settings = data[b:b + n]
    params = data[b + n:b + n + 7]
    b += n + 7
    skeleton = data[b:b + J + 4 * K + L].view(np.int64)
    parents = skeleton[:J]
    legs = skeleton[J:J + 4 * K].reshape((K, 4))
    chain = skeleton[J + 4 * K:]
    b += J + 4 * K + L
    heights = data[b:b + R * C].reshape((R, C))
    b += R * C
    vertices = data[b:b + 3 * V].reshape((V, 3))
    b += 3 * V
    mesh = data[b:].view(np.int64)
    triangles = mesh[:3 * T].reshape((T, 3))
    start = mesh[3 * T:3 * T + S]
    items = mesh[3 * T + S:3 * T + S + n_items]
    ground_rows(rows, dt, frame, contacts, out_rot, out_pos, parents, legs, chain, params, heights, vertices,
                triangles, start, items, state, settings, work)


@no_refcount
def ground_rows(rows, dt, frame, contacts, out_rot, out_pos, parents, legs, chain, terrain_params, heights_grid,
                vertices, triangles, start, items, state, settings, work):
    """Put the output poses of ``rows [R]`` (time steps ``dt [R]``, s) on a ground, in place
    in ``out_rot``, ``out_pos`` (see the module docstring for the steps), and update each
    row's ground state ``state [C, W]`` (the columns above).

    ``frame [C]`` the database frame each row plays, ``contacts [N, K]`` the database's
    foot contacts, ``parents [J]``, ``legs [K, 4]`` (hip, knee, ankle, toe), ``chain``
    the joints from the root to the legs' toes (parents first, 0 first). The ground:
    ``terrain_params`` and the five arrays after it, as
    :meth:`~motionmatch.environment.terrain.Terrain.kernel_arrays` gives them. ``settings``:
    the float64 array :data:`SETTINGS` names. ``work``: float64 scratch of at least
    :func:`scratch_size` entries (the caller's: nothing is allocated here)."""
    lift_hl, foot_hl, weight_hl, normal_hl = settings[0], settings[1], settings[2], settings[3]
    lean, max_lean, max_tilt, max_speed, slack = settings[4], settings[5], settings[6], settings[7], settings[8]
    lookahead, uphill, downhill, min_factor = settings[9], settings[10], settings[11], settings[12]
    step_limit, wall_ahead, skip = settings[13], settings[14], settings[15]
    J = chain[chain.shape[0] - 1] + 1  # (the joints up to the legs' last: all the scratch holds, packed tight)
    K = legs.shape[0]
    P = 1 + 2 * K + 2
    W, Y, V, G, T = FEET, FEET + K, FEET + 2 * K, FEET + 3 * K, FEET + 4 * K
    # (the scratch as views of the caller's array: compiled without reference counts, views cost nothing)
    wp = work[:3 * J].reshape((J, 3))
    wr = work[3 * J:7 * J].reshape((J, 4))
    o = 7 * J
    points = work[o:o + 2 * P].reshape((P, 2))
    heights = work[o + 2 * P:o + 3 * P]
    normals = work[o + 3 * P:o + 6 * P].reshape((P, 3))
    o += 6 * P
    root_rot, tilt, q, qa = work[o:o + 4], work[o + 4:o + 8], work[o + 8:o + 12], work[o + 12:o + 16]
    new_a, new_b, parent_r, hip_r = work[o + 16:o + 20], work[o + 20:o + 24], work[o + 24:o + 28], work[o + 28:o + 32]
    knee_r = work[o + 32:o + 36]
    o += 36
    d, dq, target, origin = work[o:o + 3], work[o + 3:o + 6], work[o + 6:o + 9], work[o + 9:o + 12]
    hip_p, knee_p, ankle_p = work[o + 12:o + 15], work[o + 15:o + 18], work[o + 18:o + 21]
    o += 21
    ws = work[o:o + max(K, 1)]
    o += max(K, 1)
    ik_v = work[o:o + 27].reshape((9, 3))
    ik_q = work[o + 27:o + 39].reshape((3, 4))
    last_h = -1.0  # (the springs' decays, made again only when the time step changes: one step for all rows)
    a = b = lift_y = lift_ey = foot_y = foot_ey = 0.0
    for n in range(rows.shape[0]):
        r = rows[n]
        h = dt[n]
        if h != last_h:
            last_h = h
            a = 1.0 - math.exp(-_LN2 * h / max(weight_hl, 1e-5))
            b = 1.0 - math.exp(-_LN2 * h / max(normal_hl, 1e-5))
            lift_y, lift_ey = _spring(lift_hl, h)
            foot_y, foot_ey = _spring(foot_hl, h)
        st = state[r]
        first = st[READY] == 0.0
        # the flat pose's feet, and the ground points
        _chain_fk(chain, parents, out_pos[r, 0], out_rot[r, 0], out_rot[r, 1:], out_pos[r, 1:], wp, wr)
        points[0, 0] = out_pos[r, 0, 0]
        points[0, 1] = out_pos[r, 0, 2]
        for k in range(K):
            toe = legs[k, 3]
            vx = vz = 0.0
            if not first and h > 0:
                vx = (wp[toe, 0] - st[T + 3 * k]) / h
                vz = (wp[toe, 2] - st[T + 3 * k + 2]) / h
            points[1 + k, 0] = wp[toe, 0]
            points[1 + k, 1] = wp[toe, 2]
            points[1 + K + k, 0] = wp[toe, 0] + vx * lookahead
            points[1 + K + k, 1] = wp[toe, 2] + vz * lookahead
        gx, gz = st[GOAL_VELOCITY], st[GOAL_VELOCITY + 1]
        gs = math.sqrt(gx * gx + gz * gz)
        ux, uz = (gx / gs, gz / gs) if gs > 1e-6 else (0.0, 0.0)
        for m in range(2):
            points[P - 2 + m, 0] = points[0, 0] + ux * wall_ahead * 0.5 * (m + 1)
            points[P - 2 + m, 1] = points[0, 1] + uz * wall_ahead * 0.5 * (m + 1)
        terrain_query(terrain_params, heights_grid, vertices, triangles, start, items, points, heights, normals)
        for c in range(3):
            origin[c] = out_pos[r, 0, c]
        base_y = origin[1]
        ground = heights[0]
        # contact weights, smoothed (a smoothstep of an exponential approach)
        for k in range(K):
            cv = 1.0 if contacts[frame[r], k] else 0.0
            st[W + k] = cv if first else st[W + k] + (cv - st[W + k]) * a
            w = min(max(st[W + k], 0.0), 1.0)
            ws[k] = w * w * (3.0 - 2.0 * w)
        # the ground's slope under the root, damped
        nn = 0.0
        for c in range(3):
            st[NORMAL + c] = normals[0, c] if first else st[NORMAL + c] + (normals[0, c] - st[NORMAL + c]) * b
            nn += st[NORMAL + c] * st[NORMAL + c]
        nn = math.sqrt(nn)
        for c in range(3):
            st[NORMAL + c] = st[NORMAL + c] / nn if nn > 1e-12 else (1.0 if c == 1 else 0.0)
        # the root's lift: the ground under it, lowered so that the lower planted foot reaches
        goal = ground
        cap = math.inf
        for k in range(K):
            g = heights[1 + k]
            goal = min(goal, ground + ws[k] * (g - ground))
            cap = min(cap, g + slack + (1.0 - ws[k]))
        if first:
            st[LIFT], st[LIFT_VEL] = goal, 0.0
        else:
            st[LIFT], st[LIFT_VEL] = _track(st[LIFT], st[LIFT_VEL], goal, st[LIFT_GOAL], h, lift_y, lift_ey,
                                                max_speed)
        st[LIFT_GOAL] = goal
        if st[LIFT] > cap:
            st[LIFT] = cap
        lift = st[LIFT]
        # the root: lifted, and tilted by part of the damped slope
        _toward_up(st[NORMAL:NORMAL + 3], lean, max_lean, tilt)
        qmul(tilt, out_rot[r, 0], root_rot)
        for c in range(4):
            out_rot[r, 0, c] = root_rot[c]
        out_pos[r, 0, 1] = base_y + lift
        # the next intents' speed: the grade along the way (damped normal), a wall ahead
        grade = -(st[NORMAL] * ux + st[NORMAL + 2] * uz) / max(st[NORMAL + 1], 1e-3)
        f = 1.0 - uphill * max(grade, 0.0) - downhill * max(-grade, 0.0)
        f = max(f, min_factor)
        if abs(heights[P - 2] - ground) > step_limit:  # (a ledge up or down)
            f = 0.0
        elif abs(heights[P - 1] - ground) > step_limit:
            f = min(f, 0.5)
        st[SPEED_FACTOR] = f
        for k in range(K):
            hip, knee, ankle, toe = legs[k, 0], legs[k, 1], legs[k, 2], legs[k, 3]
            g = heights[1 + k]
            ahead = max(g, heights[1 + K + k])
            fgoal = ws[k] * g + (1.0 - ws[k]) * ahead
            if first:
                st[Y + k], st[V + k] = fgoal, 0.0
            else:
                st[Y + k], st[V + k] = _track(st[Y + k], st[V + k], fgoal, st[G + k], h, foot_y, foot_ey, max_speed)
            st[G + k] = fgoal
            for c in range(3):
                st[T + 3 * k + c] = wp[toe, c]
            above = wp[toe, 1] - base_y  # the toe's height above the floor, flat
            F = st[Y + k] + ws[k] * (g - st[Y + k])
            F = max(F, g - above)  # the toe never below the surface
            # the foot turned toward the surface, its toe on the ground as on the floor
            _toward_up(normals[1 + k], ws[k], max_tilt, q)
            for c in range(3):
                d[c] = wp[toe, c] - wp[ankle, c]
            qrot(q, d, dq)
            target[0] = wp[toe, 0] - dq[0]
            target[1] = base_y + F + above - dq[1]
            target[2] = wp[toe, 2] - dq[2]
            # the leg where the lifted, tilted root put it (a rigid move of the flat pose)
            _moved(tilt, origin, lift, wp[ankle], ankle_p)
            e = 0.0
            for c in range(3):
                e += (target[c] - ankle_p[c]) ** 2
            if e < skip * skip and 1.0 - abs(q[0] * tilt[0] + q[1] * tilt[1] + q[2] * tilt[2]
                                             + q[3] * tilt[3]) < SKIP_TURN:
                ab = bc = ac = 0.0
                for c in range(3):
                    ab += (wp[knee, c] - wp[hip, c]) ** 2
                    bc += (wp[ankle, c] - wp[knee, c]) ** 2
                    ac += (wp[ankle, c] - wp[hip, c]) ** 2
                if math.sqrt(ac) < math.sqrt(ab) + math.sqrt(bc) - SKIP_BENT:
                    continue  # (the rigid move is the answer: the flat pose's local rotations)
            _moved(tilt, origin, lift, wp[hip], hip_p)
            _moved(tilt, origin, lift, wp[knee], knee_p)
            qmul(tilt, wr[parents[hip]], parent_r)
            qmul(tilt, wr[hip], hip_r)
            qmul(tilt, wr[knee], knee_r)
            if two_bone_ik_into(hip_p, knee_p, ankle_p, target, hip_r, knee_r, new_a, new_b, ik_v, ik_q):
                local_from_world(parent_r, new_a, out_rot[r, hip])
                local_from_world(new_a, new_b, out_rot[r, knee])
                qmul(q, wr[ankle], qa)
                local_from_world(new_b, qa, out_rot[r, ankle])
        st[READY] = 1.0


#: where :class:`~motionmatch.runtime._batch_kernels.PoseArrays`' plain tuple holds what the
#: ground stage reads (read by index). The two entry points below are compiled without
#: reference counts: handing the forty arrays of ``pose`` on to the poses stage otherwise
#: counts a reference to each (about 1.4 us a call, more than a row's ground stage)
_FRAME, _CONTACTS, _OUT_ROT, _OUT_POS = (PoseArrays._fields.index(f) for f in ("frame", "contacts", "out_rot",
                                                                                "out_pos"))


@no_refcount
def pose_ground_rows(rows, dt, pose, data, state, work):
    """The poses stage (:func:`~motionmatch.runtime._batch_kernels.pose_rows`, ``pose`` its
    plain tuple), then :func:`ground_step` on the same rows: one compiled call."""
    pose_rows(rows, dt, pose)
    ground_step(rows, dt, pose[_FRAME], pose[_CONTACTS], pose[_OUT_ROT], pose[_OUT_POS], data, state, work)


@no_refcount
def sim_pose_ground_rows(rows, dt, goals, sim, pose, data, state, work):
    """:func:`~motionmatch.runtime._batch_kernels.sim_pose_rows`' two stages (the simulated
    roots and the poses), then :func:`ground_step` on the same rows: one compiled call."""
    advance_sim_rows(rows, dt, goals, sim)
    pose_rows(rows, dt, pose)
    ground_step(rows, dt, pose[_FRAME], pose[_CONTACTS], pose[_OUT_ROT], pose[_OUT_POS], data, state, work)
