"""Scenario files as worlds: a :class:`~motionmatch.environment.scenario.Scenario` (its
obstacles, agents and their inputs, settings) becomes a :class:`~motionmatch.runtime.world.
World` (:func:`world_from_scenario`) and runs from start to end (:func:`run_scenario`; its
numbers: :func:`motionmatch.metrics.scenario.scenario_report`). :func:`door_crowd` makes
the scenario of ``motionmatch bench crowd``: a crowd of any size crossing a wall through
two doors.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np

from motionmatch.control.path import TimedPath, load_path, parse_path
from motionmatch.database import MotionDatabase
from motionmatch.environment import parse_scenario
from motionmatch.runtime.controller import ControllerSettings
from motionmatch.runtime.crowd import SteeringInput, SteeringSettings
from motionmatch.runtime.environment_matching import (
    EnvironmentMatcher,
    EnvironmentSettings,
    environment_controller_settings,
)
from motionmatch.runtime.follow import FollowSettings, PathFollower
from motionmatch.runtime.inputs import IdleInput, ScriptInput
from motionmatch.runtime.modes import gait_speeds_from_database
from motionmatch.runtime.world import World, WorldRecord

__all__ = ["door_crowd", "door_crowd_world", "run_scenario", "world_from_scenario"]


def world_from_scenario(db: MotionDatabase, scenario, *, settings: EnvironmentSettings | None = None,
                        matcher: EnvironmentMatcher | None = None, record_poses: bool | None = None,
                        controller_overrides: dict | None = None) -> World:
    """A :class:`World` set up from a :class:`~motionmatch.environment.scenario.Scenario`."""
    sc = scenario
    if settings is None:
        settings = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"))
    cdict = {k: v for k, v in sc.controller.items() if k != "controls"}
    if "locomotion_tags" in sc.database:
        cdict["locomotion_tags"] = sc.database["locomotion_tags"]
    cdict.update(controller_overrides or {})
    _check_controller_fields(cdict)
    csettings = environment_controller_settings(**cdict)
    if record_poses is None:
        record_poses = len(sc.agents) <= 16
    world = World(db, sc.scene(), settings=settings, controller=csettings, matcher=matcher,
                  record_poses=record_poses, fps=sc.fps)
    steer = SteeringSettings.from_dict(sc.steering)
    keep_to_line = replace(steer, lateral_gain=0.0)  # path agents: one settings object, steered as one group
    gaits = gait_speeds_from_database(db)
    for spec in sc.agents:
        kind = spec.input_kind
        if kind == "timed_path":
            continue  # below: a path follower drives an agent of its own
        if kind == "script":
            src = ScriptInput(spec.script, sc.duration, gaits)
        elif kind == "path":  # steered through the polyline's points (round and round when it loops)
            pts = spec.route(sc.duration, f"agent {spec.name!r}: path")
            src = SteeringInput(world, pts[-1], spec.speed, keep_to_line, waypoints=pts[:-1])
        elif kind == "goal":
            src = SteeringInput(world, np.asarray(spec.goal), spec.speed, steer, waypoints=spec.via)
        else:
            src = IdleInput()
        controls = settings.controls.with_(**spec.controls) if spec.controls else settings.controls
        cs = replace(csettings, locomotion_tags=spec.tags) if spec.tags else None
        world.add_agent(spec.name, spec.start, spec.facing, src, controls=controls, environment=spec.environment,
                        start_time=spec.start_time, path=spec.path, goal=spec.goal, controller=cs)
    followers = [spec for spec in sc.agents if spec.input_kind == "timed_path"]
    if followers:
        _add_path_followers(world, sc, followers, settings)
    return world


def _add_path_followers(world: World, sc, specs, settings: EnvironmentSettings) -> None:
    """Scenario agents with a ``timed_path``: each walks from its start to the path and
    follows it as drawn (global mode), with LHMM over the penalised search among the
    scene's obstacles (``environment: false``: blind to them); the order of the scenario's
    agents is kept."""
    order = [a.name for a in sc.agents]
    for spec in specs:
        tp = spec.timed_path
        if isinstance(tp, str):
            path = load_path(tp)
        else:
            raw = parse_path(tp)
            path = TimedPath.from_samples(raw.times, raw.points, rate=raw.rate or 150.0, scale=raw.scale or 1.0)
        avoid = spec.environment and len(world.scene) > 0
        f = PathFollower(world.db, path, FollowSettings(mode="global", time_limit=None),
                         position=(spec.start[0], 0.0, spec.start[1]), name=spec.name,
                         scene=world.scene if avoid else None, environment=world.matcher if avoid else None,
                         environment_settings=settings, world=world)
        f.agent.start_time = spec.start_time
        f.agent.path = f.path.input_points[:, [0, 2]]
    world.agents.sort(key=lambda a: order.index(a.name))


def _check_controller_fields(values: dict) -> None:
    """A scenario's ``controller`` fields: known names, each of its default's kind (number,
    flag, word); ``ValueError`` naming the field otherwise."""
    known = {f.name for f in fields(ControllerSettings)}
    bad = sorted(set(values) - known)
    if bad:
        raise ValueError(f"controller: unknown field(s) {bad}; known: {sorted(known)}")
    ref = ControllerSettings()
    for k, v in values.items():
        d = getattr(ref, k)
        ok = (isinstance(v, bool) if isinstance(d, bool) else isinstance(v, str) if isinstance(d, str)
              else isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
        if not ok:
            raise ValueError(f"controller.{k}: expected a value like {d!r}, got {v!r}")


def run_scenario(db: MotionDatabase, scenario, *, settings: EnvironmentSettings | None = None,
                 matcher: EnvironmentMatcher | None = None, progress: bool = False,
                 record_poses: bool | None = None, controller_overrides: dict | None = None
                 ) -> tuple[World, WorldRecord]:
    """Run a scenario from start to end: ``(world, record)``."""
    world = world_from_scenario(db, scenario, settings=settings, matcher=matcher, record_poses=record_poses,
                                controller_overrides=controller_overrides)
    return world, world.run(scenario.frames, progress=progress)


#: the door scene of ``scenarios/doors.json``: a wall along x at z = 0 with a 1.85 m door
#: at x = -3 (taken northward by the south side) and a 0.9 m door at x = +3 (southward)
_DOOR_WALLS = (((-7.9625, 0.0), 8.075), ((0.2375, 0.0), 4.625), ((7.725, 0.0), 8.55))


def door_crowd(n: int, *, band: int = 90, spacing: float = 0.9, width: float = 16.0, speed: float = 1.3) -> dict:
    """A scenario (the JSON object, for :func:`~motionmatch.environment.parse_scenario`) of
    ``n`` agents crossing a wall through two doors in opposite directions: the walls of
    ``scenarios/doors.json``, ``n - n // 2`` agents south of it heading 12 m north through
    the wide door, ``n // 2`` north heading 12 m south through the narrow one, so the two
    streams cross behind the wall. Each side stands on a jittered grid ``width`` m wide
    (``spacing`` m apart) from 2.5 m off the wall back, in groups of at most ``band``
    agents (a scenario group holds 100 at most) on bands stacked away from the wall, each
    as deep as it needs plus a spare row to pick places from. A crowd of a thousand is a
    queue some 30 m deep on each side."""
    cols = int(width // spacing) + 1
    groups = []
    for side, count, door, seed in ((-1.0, n - n // 2, -3.0, 1), (1.0, n // 2, 3.0, 2)):
        near = 2.5
        for k, first in enumerate(range(0, count, band)):
            m = min(band, count - first)
            depth = spacing * (int(np.ceil(m / cols)) + 1)
            groups.append({"name": f"{'south' if side < 0 else 'north'}-{k}", "count": m,
                           "area": [[-width / 2, side * near], [width / 2, side * (near + depth)]],
                           "facing": [0.0, -side], "goal_offset": [0.0, -side * 12.0],
                           "via": [[door, side * 0.6], [door, -side * 0.6]], "speed": speed, "spacing": spacing,
                           "seed": seed * 1000 + k})
            near += depth + spacing
    walls = [{"shape": "box", "center": list(c), "size": [length, 0.3], "yaw_deg": 90.0, "height": [0.0, 2.5],
              "name": f"wall-{i}"} for i, (c, length) in enumerate(_DOOR_WALLS)]
    return {"name": f"door-crowd-{n}", "description": f"{n} agents crossing a wall through two doors both ways",
            "duration": 60.0, "obstacles": walls, "agents": [], "groups": groups,
            "search": {"collision_fallback": False}}


def door_crowd_world(db_path: str, n: int, environment: bool = True, batched: bool = True):
    """The :class:`~motionmatch.runtime.world.World` of :func:`door_crowd`'s ``n`` agents over
    the database saved at ``db_path`` (``environment``: environment-aware searches, the
    walls and the other agents' future bodies as obstacles; else plain matching;
    ``batched``: :attr:`World.batched <motionmatch.runtime.world.World.batched>`), the
    scenario's settings, no poses recorded: what ``motionmatch bench crowd`` steps (a
    module-level builder, so a :class:`~motionmatch.runtime.shards.ShardedWorld` can make it
    in each of its processes)."""
    db = MotionDatabase.load(db_path)
    sc = parse_scenario(door_crowd(n), label=f"door crowd of {n}")
    settings = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"),
                                              enabled=environment)
    world = world_from_scenario(db, sc, settings=settings, record_poses=False)
    world.batched = batched
    return world
