"""Numba kernels that gather and prepare a search's obstacles (for
:mod:`motionmatch.search.penalized`, whose ``prepare_obstacles``, ``prepare_obstacles_into``,
``prepare_static``, ``trajectory_points``, ``gather_static`` and ``gather_with_agents`` they
are): the pre-selection points of a query trajectory, the obstacle rows near them (static
ones from a grid, other agents' bodies from theirs) moved into the character's frame and
time-aligned per future slot, nearest first, as ``obs [K, M, ROW]`` and ``counts [K]``
(the column layout of :mod:`motionmatch.geometry.shapes`) for
:mod:`motionmatch.search._penalized_kernels`' scoring."""

from __future__ import annotations

import math

import numba
import numpy as np

from motionmatch.geometry.grid import grid_query
from motionmatch.geometry.shapes import C_TYPE, C_UX, C_UZ, C_X, C_Z, point_lower_bound


@numba.njit(cache=True, nogil=True)
def prepare_obstacles(rows, slot_of, root_x, root_z, yaw, points, radius, out, counts, order_key):
    """Move world obstacle rows into the character frame and pre-select them per slot.

    ``rows [M, ROW]`` world rows; ``slot_of [M]``: the slot a row belongs to (-1: every
    slot; time-aligned proxies of moving obstacles and agents name theirs); the character
    at ``(root_x, root_z)`` facing yaw ``yaw`` (+Z rotated about +Y); ``points [P, 2]``: the
    query trajectory (character frame, the origin included by the caller); a row is kept
    when its shape comes within ``radius`` of one of the points. ``out [K, M, ROW]``,
    ``counts [K]``; ``order_key [M]`` scratch. Kept rows are sorted per slot by type (disks
    first) then distance to the slot's point ``points[k + 1]``. Returns the smallest
    lower-bound distance from the character (origin) to a kept obstacle (``inf``: none).
    """
    K = counts.shape[0]
    for k in range(K):
        counts[k] = 0
    c = math.cos(yaw)
    s = math.sin(yaw)
    nearest = np.inf
    local = np.empty(rows.shape[1])
    for m in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            local[j] = rows[m, j]
        dx = rows[m, C_X] - root_x
        dz = rows[m, C_Z] - root_z
        # world -> character: inverse yaw rotation (x' = c x - s z, z' = s x + c z)
        local[C_X] = c * dx - s * dz
        local[C_Z] = s * dx + c * dz
        ux = rows[m, C_UX]
        uz = rows[m, C_UZ]
        local[C_UX] = c * ux - s * uz
        local[C_UZ] = s * ux + c * uz
        near = np.inf
        for p in range(points.shape[0]):
            dlb = point_lower_bound(points[p, 0], points[p, 1], local)
            if dlb < near:
                near = dlb
        if near > radius:
            continue
        d0 = point_lower_bound(0.0, 0.0, local)
        if d0 < nearest:
            nearest = d0
        for k in range(K):
            if slot_of[m] >= 0 and slot_of[m] != k:
                continue
            n = counts[k]
            for j in range(rows.shape[1]):
                out[k, n, j] = local[j]
            counts[k] = n + 1
    # sort each slot: disks first, then by distance to the slot's trajectory point
    for k in range(K):
        n = counts[k]
        if n < 2:
            continue
        pk = min(k + 1, points.shape[0] - 1)
        for m in range(n):
            order_key[m] = out[k, m, C_TYPE] * 1e6 + point_lower_bound(points[pk, 0], points[pk, 1], out[k, m])
        for m in range(1, n):  # insertion sort (few obstacles)
            j = m
            while j > 0 and order_key[j - 1] > order_key[j]:
                t = order_key[j]
                order_key[j] = order_key[j - 1]
                order_key[j - 1] = t
                for col in range(rows.shape[1]):
                    t = out[k, j, col]
                    out[k, j, col] = out[k, j - 1, col]
                    out[k, j - 1, col] = t
                j -= 1
    return nearest


@numba.njit(cache=True, nogil=True)
def trajectory_points(root_x, root_z, yaw, positions, world, local):
    """The pre-selection points of a search: the character's root ``(root_x, root_z)`` and
    its query trajectory ``positions [P, 3]`` (world metres, Y up), into ``world [P + 1, 2]``
    (x, z) and, moved into the character frame (facing ``yaw``), ``local [P + 1, 2]``."""
    c = math.cos(yaw)
    s = math.sin(yaw)
    world[0, 0] = root_x
    world[0, 1] = root_z
    local[0, 0] = 0.0
    local[0, 1] = 0.0
    for p in range(positions.shape[0]):
        x = positions[p, 0]
        z = positions[p, 2]
        world[p + 1, 0] = x
        world[p + 1, 1] = z
        dx = x - root_x
        dz = z - root_z
        local[p + 1, 0] = c * dx - s * dz
        local[p + 1, 1] = s * dx + c * dz


@numba.njit(cache=True, nogil=True)
def prepare_static(rows, ids, root_x, root_z, yaw, points, radius, out, counts, order_key):
    """:func:`prepare_obstacles` of the rows ``rows[ids]`` (static obstacles: every slot),
    without gathering them first. ``out`` must hold ``len(ids)`` rows per slot."""
    sel = np.empty((ids.shape[0], rows.shape[1]))
    for m in range(ids.shape[0]):
        for j in range(rows.shape[1]):
            sel[m, j] = rows[ids[m], j]
    slot_of = np.full(ids.shape[0], -1, dtype=np.int64)
    return prepare_obstacles(sel, slot_of, root_x, root_z, yaw, points, radius, out, counts, order_key)


@numba.njit(cache=True, nogil=True)
def gather_static(cell_start, items, nx, nz, x0, z0, cell, rows, stamp, ids, tick, root_x, root_z, yaw, positions,
                  radius, world, local, out, counts, order_key):
    """The obstacles of a search in a scene of static obstacles, in one call:
    :func:`trajectory_points` (into ``world, local [P + 1, 2]``), the scene's grid query
    (:func:`motionmatch.geometry.grid.grid_query`: the grid ``cell_start, items, nx, nz,
    x0, z0, cell`` over ``rows [S, ROW]``, ``stamp [S]`` and ``tick`` its visit marks, the
    row indices into ``ids [S]``; the first ten arguments are :meth:`Scene.grid_arrays`) and :func:`prepare_static` into ``out [K, >= S, ROW]``,
    ``counts [K]``. Returns ``(M, nearest)``: how many rows are near (0: none, ``counts``
    zeroed, ``nearest`` inf) and the lower bound of the distance to the nearest."""
    trajectory_points(root_x, root_z, yaw, positions, world, local)
    M = grid_query(cell_start, items, nx, nz, x0, z0, cell, world, radius, rows, stamp, tick, ids)
    if M == 0:
        for k in range(counts.shape[0]):
            counts[k] = 0
        return 0, np.inf
    return M, prepare_static(rows, ids[:M], root_x, root_z, yaw, local, radius, out, counts, order_key)


@numba.njit(cache=True, nogil=True)
def gather_with_agents(static_grid, static_tick, agent_grid, agent_tick, owner, agent_slots, uid, root_x, root_z, yaw,
                       positions, radius, world, local, out, counts, order_key):
    """The obstacles of a search among static obstacles and the other agents of a world, in
    one call: :func:`trajectory_points` (into ``world, local [P + 1, 2]``), the scene's
    grid query (``static_grid``: :meth:`Scene.grid_arrays
    <motionmatch.environment.scene.Scene.grid_arrays>`, or an empty tuple's stand-in with
    no rows; ``static_tick`` its visit mark), the agents' (``agent_grid``: the same ten
    arrays over the agents' future ellipse rows, queried ``radius + 1e-6``; their rows in
    ascending order, those of ``owner == uid`` left out; ``agent_slots`` the slot of each),
    the static rows first (every slot) then the agents', and :func:`prepare_obstacles`
    into ``out [K, >= M, ROW]``, ``counts [K]``: what ``EnvironmentChooser.gather`` does
    with a world's agents as ``obstacles_fn`` (the same rows in the same order). Returns
    ``(M, nearest)``: rows near (0: none, ``counts`` zeroed, ``nearest`` inf); ``-M`` when
    ``out`` holds fewer than ``M`` rows per slot (nothing prepared: grow it and call again)."""
    trajectory_points(root_x, root_z, yaw, positions, world, local)
    s_start, s_items, s_nx, s_nz, s_x0, s_z0, s_cell, s_rows, s_stamp, s_ids = static_grid
    a_start, a_items, a_nx, a_nz, a_x0, a_z0, a_cell, a_rows, a_stamp, a_ids = agent_grid
    ms = 0
    if s_rows.shape[0] > 0:
        ms = grid_query(s_start, s_items, s_nx, s_nz, s_x0, s_z0, s_cell, world, radius, s_rows, s_stamp,
                        static_tick, s_ids)
    ma = 0
    if a_rows.shape[0] > 0:
        ma = grid_query(a_start, a_items, a_nx, a_nz, a_x0, a_z0, a_cell, world, radius + 1e-6, a_rows, a_stamp,
                        agent_tick, a_ids)
    near = np.sort(a_ids[:ma])
    keep = 0
    for n in range(ma):
        if owner[near[n]] != uid:
            near[keep] = near[n]
            keep += 1
    M = ms + keep
    if M == 0:
        for k in range(counts.shape[0]):
            counts[k] = 0
        return 0, np.inf
    if out.shape[1] < M or order_key.shape[0] < M:
        return -M, np.inf
    sel = np.empty((M, s_rows.shape[1] if s_rows.shape[0] > 0 else a_rows.shape[1]))
    slot_of = np.empty(M, dtype=np.int64)
    for m in range(ms):
        for j in range(sel.shape[1]):
            sel[m, j] = s_rows[s_ids[m], j]
        slot_of[m] = -1
    for n in range(keep):
        i = near[n]
        for j in range(sel.shape[1]):
            sel[ms + n, j] = a_rows[i, j]
        slot_of[ms + n] = agent_slots[i]
    return M, prepare_obstacles(sel, slot_of, root_x, root_z, yaw, local, radius, out, counts, order_key)
