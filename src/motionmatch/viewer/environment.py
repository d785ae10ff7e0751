"""What the viewer needs of the environment around its session's world: the page's
obstacles as a :class:`~motionmatch.environment.scene.Scene`, one shared
:class:`~motionmatch.runtime.environment_matching.EnvironmentMatcher` per database, the debug panel's
overlays, and a warm-up that compiles the penalised search before the first page.

Obstacle avoidance itself is the session world's (:class:`~motionmatch.runtime.world.World`):
every character searches with the obstacle penalties and treats the others' future bodies
as obstacles, exactly as ``motionmatch scenario`` runs; a drawn path is followed with
long-horizon matching over the penalised search.
"""

from __future__ import annotations

import numpy as np

from motionmatch.environment.obstacles import Obstacle
from motionmatch.environment.scene import Scene
from motionmatch.environment.terrain import Terrain
from motionmatch.geometry.shapes import C_ID, C_R, C_X, C_Z, barrier, ellipse_obstacle_distances
from motionmatch.runtime.environment_matching import EnvironmentMatcher
from motionmatch.runtime.world import World
from motionmatch.validation import CONTROL_NAMES

__all__ = ["CONTROL_NAMES", "environment_debug", "obstacle_from_viewer", "scene_from_viewer", "shared_matcher",
           "warm_up"]

_matchers: dict[int, tuple[object, EnvironmentMatcher]] = {}


def shared_matcher(db) -> EnvironmentMatcher:
    """The :class:`EnvironmentMatcher` of ``db``, built once per database and shared by
    every session (its body ellipses and search structures are read-only)."""
    hit = _matchers.get(id(db))
    if hit is not None and hit[0] is db:
        return hit[1]
    m = EnvironmentMatcher(db)
    _matchers[id(db)] = (db, m)
    return m


def obstacle_from_viewer(o: dict) -> Obstacle:
    """An :class:`Obstacle` from the viewer's obstacle dict (scenario format plus ``id`` and
    ``t0``, the world time it was placed at). The viewer moves an obstacle from its
    centre from ``t0`` on (``velocity``), or along ``path`` with times counted from ``t0``;
    the returned obstacle gives the same positions against the world clock."""
    t0 = float(o.get("t0") or 0.0)
    d = {k: v for k, v in o.items() if k not in ("id", "t0")}
    if d.get("path") is not None:
        d["path"] = [[float(p[0]) + t0, float(p[1]), float(p[2])] for p in d["path"]]
    elif d.get("velocity") is not None and any(d["velocity"]):
        vx, vz = (float(v) for v in d["velocity"])
        cx, cz = (float(v) for v in d["center"])
        d["center"] = [cx - vx * t0, cz - vz * t0]
    return Obstacle.from_dict(d, f"obstacle {o.get('id', '?')}")


def scene_from_viewer(obstacles: list[dict], terrain: Terrain | None = None) -> Scene:
    """The :class:`Scene` of the page's obstacles (in order: scene index ``i`` is
    ``obstacles[i]``) on the session's ground (``None``: the flat floor)."""
    return Scene([obstacle_from_viewer(o) for o in obstacles], terrain=terrain)


def environment_debug(world: World, agent, scene_ids: list[int], page_ids: dict[int, int]) -> dict:
    """The debug panel's environment overlays of ``agent``: its future body ellipses
    ``[[cx, cz, ux, uz, a, b], ...]`` (world), the penalty each nearby obstacle or other
    character puts on them (``[[id, penalty], ...]``: obstacles by their page id,
    characters as ``"agent N"``), the last search's method and penalty, the clearance (m)
    of its current body to the nearest obstacle or character (``null``: none near) and the
    controls its searches use.

    Args:
        scene_ids: the page id of each scene obstacle; page_ids: agent uid -> page id.
    """
    ctrl = agent.ctrl
    m = world.matcher
    ell = m.world_ellipses(int(ctrl.frame), (ctrl.root_pos[0], ctrl.root_pos[2]), float(ctrl.root_yaw))
    out: dict = {"ellipses": np.round(ell[:, :6], 3).tolist()}
    s = world.settings
    pen = s.penalty
    radius = pen.threshold + s.reach + pen.margin
    rows, slot_of = world.scene.query(world.time, np.array([[ctrl.root_pos[0], ctrl.root_pos[2]]]), radius + 3.0,
                                      m.slots)
    if world.agents_as_obstacles and len(world.agents) > 1:
        others, oslots, owner = world.agent_rows()
        keep = owner != agent.uid
        rows = np.concatenate([rows, others[keep]])
        slot_of = np.concatenate([slot_of, oslots[keep]])
    per: dict = {}
    clearance = np.inf
    total = 0.0
    if len(rows):
        d = ellipse_obstacle_distances(ell[:, :6], rows)  # [K, M]
        for k in range(len(m.slots)):
            w = pen.slot_weights[k] if k < len(pen.slot_weights) else pen.slot_weights[-1]
            for j in np.flatnonzero((slot_of == -1) | (slot_of == k)):
                b = w * barrier(float(d[k, j]) - pen.margin, pen.threshold, pen.exponent)
                ident = int(rows[j, C_ID])
                key = f"agent {page_ids.get(-1 - ident, -1 - ident)}" if ident < 0 else scene_ids[ident]
                per[key] = per.get(key, 0.0) + b
                total += b
        first = (slot_of == -1) | (slot_of == 0)
        if first.any():
            clearance = float(d[0, first].min())
        else:
            dx = rows[:, C_X] - ctrl.root_pos[0]
            dz = rows[:, C_Z] - ctrl.root_pos[2]
            clearance = float(np.min(np.hypot(dx, dz) - rows[:, C_R]))
    items = sorted(((k, round(v, 4)) for k, v in per.items() if v > 0), key=lambda kv: -kv[1])
    pen_out: dict = {"total": round(total, 4), "obstacles": [[k, v] for k, v in items[:12]]}
    ch = agent.chooser
    if ch is not None and ch.last is not None:
        r = ch.last
        pen_out["search"] = {"method": r.method, "penalty": round(float(r.penalty), 4), "collides": bool(r.collides)}
    out["penalties"] = pen_out
    out["clearance"] = round(clearance, 3) if np.isfinite(clearance) else None
    if ch is not None:
        out["controls"] = {k: round(float(getattr(ch.controls, k)), 3) for k in CONTROL_NAMES}
    return out


def warm_up(db) -> None:
    """Build the shared matcher of ``db`` and run penalised searches with an obstacle near
    and none (compiles the search kernels before the first page connects)."""
    from motionmatch.environment.obstacles import disk
    from motionmatch.runtime.controller import ControllerSettings
    from motionmatch.runtime.inputs import KeyboardInput

    world = World(db, Scene([disk(0.0, 1.0, 0.3)]), matcher=shared_matcher(db), controller=ControllerSettings(),
                  record_poses=False)
    walk = KeyboardInput()
    walk.set_keys(["w"])
    agent = world.add_agent("warm-up", (0.0, 0.0), (0.0, 1.0), walk)
    world.add_agent("other", (1.0, 2.0), (0.0, -1.0))
    world.step(0.0)
    environment_debug(world, agent, [0], {})
    world.set_scene(Scene())
    agent.ctrl.since_search = 1.0  # the plain search, when nothing is near
    world.step(1 / 60)
