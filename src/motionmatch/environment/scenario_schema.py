"""The fields of a scenario file, each with its type and bounds.

The field types and the bounds a scenario shares with the viewer's socket messages
(ground coordinates, directions, controls, speeds, seconds, group sizes, waypoints, path
points, obstacles) are :mod:`motionmatch.validation`'s; the numbers only a scenario has
(the ``penalty``, ``search``, ``controller`` and ``steering`` settings) are bounded here,
each by what a real scene could need. :mod:`motionmatch.environment.scenario` builds a
:class:`~motionmatch.environment.scenario.Scenario` from the cleaned values.

The settings sections name the fields of
:class:`~motionmatch.search.penalized.PenaltyParams`,
:class:`~motionmatch.search.penalized.SearchOptions`,
:class:`~motionmatch.runtime.controller.ControllerSettings` and
:class:`~motionmatch.runtime.crowd.SteeringSettings` (``tests/test_scenario_validation.py``
keeps them the same); the words (search method, inertialization...) are checked where
they are used.
"""

from __future__ import annotations

from typing import Any

from motionmatch.validation import (
    CAMERA_YAW,
    DIRECTION,
    FPS,
    GROUP_SIZE,
    KEY_LEN,
    KEYS_HELD,
    NAME_LEN,
    OBSTACLES,
    PATH_POINTS,
    PATH_SCALE,
    SECONDS,
    SEED,
    SPACING,
    SPEED,
    WAYPOINTS,
    WORLD,
    YAW_DEG,
    Bool,
    Custom,
    Field,
    FieldError,
    List,
    Num,
    Obj,
    Str,
    TimedPoints,
    Tuple,
    Vec,
    check_fields,
    controls,
    point,
    validate_obstacle,
)

__all__ = ["AGENT", "AGENTS", "CONTROLLER", "GROUP", "LOOP_POINTS", "PENALTY", "SEARCH", "SECTIONS", "STEERING",
           "TOP"]

#: agents of a scenario in all (its ``agents`` and its groups' members): a bound on memory
#: (a plain crowd of 10,000 steps at about a tenth of the rate of 1,000 on two cores)
AGENTS = 20_000
#: points of a looping path once repeated for the whole run
LOOP_POINTS = 100_000
#: characters of a description, of a tag query, of a path file name
TEXT_LEN = 4000
TAG_QUERY_LEN = 256
FILE_LEN = 1024
#: a scenario's duration (s)
DURATION = (0.01, SECONDS[1])
#: events of an agent's script
SCRIPT_EVENTS = 10_000


def section(fields: dict[str, Field]) -> Obj:
    """An optional object of ``fields``: the fields it gives, cleaned."""
    return Obj(fields, partial=True, optional=True, default={})


def _direction(v: Any, where: str) -> tuple[float, float]:
    d = Vec(2, *DIRECTION).check(v, where)
    if abs(d[0]) + abs(d[1]) < 1e-9:
        raise FieldError("invalid", f"{where} must be a non-zero direction")
    return d


def _vector(lo: float, hi: float) -> Custom:
    """``[x, z]`` or ``[x, y, z]``, each within ``[lo, hi]``."""

    def check(v: Any, where: str) -> tuple:
        if not isinstance(v, list) or len(v) not in (2, 3):
            raise FieldError("invalid", f"{where} must be [x, z] or [x, y, z]")
        return Vec(len(v), lo, hi).check(v, where)

    return Custom(check, optional=True)


_SCRIPT = {
    "duration": Num(*DURATION, optional=True),
    "camera_yaw": Num(*CAMERA_YAW, optional=True),
    "events": List(Obj({
        "t": Num(*SECONDS),
        "keys": List(Str(KEY_LEN), 0, KEYS_HELD, optional=True),
        "intent": Obj({"velocity": _vector(-SPEED[1], SPEED[1]), "direction": _vector(*WORLD),
                       "speed": Num(0.0, SPEED[1], optional=True), "facing": _vector(*WORLD),
                       "gait": Str(16, optional=True), "actions": List(Str(16), 0, 8, optional=True)}, optional=True),
    }), 0, SCRIPT_EVENTS),
}


def _script(v: Any, where: str) -> dict:
    """A timeline (the ``motionmatch run`` format, :mod:`motionmatch.control.script`): its
    numbers bounded here, its keys, order and times checked when the world is built;
    other fields are kept, unread."""
    if not isinstance(v, dict):
        raise FieldError("invalid", f"{where} must be {{\"events\": [...]}} (the 'motionmatch run' format)")
    check_fields({k: x for k, x in v.items() if k in _SCRIPT}, _SCRIPT, where)
    return dict(v)


_TIMED_PATH = {
    "points": TimedPoints(2, PATH_POINTS),
    "scale": Num(*PATH_SCALE, optional=True),
    "rate": Num(1.0, 1000.0, optional=True),
    "joystick": List(Tuple(Num(*SECONDS), Num(*YAW_DEG)), 0, PATH_POINTS, optional=True),
    "name": Str(NAME_LEN, optional=True),
    "description": Str(TEXT_LEN, optional=True),
}


def _timed_path(v: Any, where: str) -> dict | str:
    """A drawn path ``{"points": [[t, x, z], ...], ...}`` (cleaned, lists) or a path file's
    name (resolved beside the scenario file by the caller)."""
    if isinstance(v, str):
        return Str(FILE_LEN).check(v, where)
    if not isinstance(v, dict):
        raise FieldError("invalid", f"{where} must be {{\"points\": [[t, x, z], ...]}} or a path file name")
    o = check_fields(v, _TIMED_PATH, where)
    return {k: [list(p) for p in x] if isinstance(x, list) else x for k, x in o.items() if x is not None}


def _regions(v: Any, where: str) -> dict:
    """Named parts of the scene (for tests and reports): ``{name: {"x": [lo, hi], "z": [lo, hi]}}``."""
    if not isinstance(v, dict):
        raise FieldError("invalid", f"{where} must be an object, got {type(v).__name__}")
    if len(v) > 64:
        raise FieldError("too_large", f"{where} must have at most 64 regions, got {len(v)}")
    box = section({"x": point(), "z": point()})
    return {Str(NAME_LEN).check(k, f"{where} name"): box.check(r, f"{where}.{k}" if k.isprintable() else f"{where}[{k!r}]")
            for k, r in v.items()}


def _terrain(v: Any, where: str) -> dict:
    """The ground (:mod:`motionmatch.environment.terrain.files`): an object here, its fields
    checked when the scenario is built (files it names are read from the scenario's folder)."""
    if not isinstance(v, dict):
        raise FieldError("invalid", f"{where} must be an object with one of 'flat', 'height_field', 'mesh'")
    return v


def _one_input(a: dict, where: str) -> None:
    inputs = [k for k in ("script", "path", "timed_path", "goal") if a[k] is not None]
    if len(inputs) > 1:
        raise FieldError("invalid", f"{where}: give one input of script / path / timed_path / goal, got {inputs}")
    if a["via"] is not None and a["goal"] is None:
        raise FieldError("invalid", f"{where}.via: waypoints need a goal")


def _one_goal(g: dict, where: str) -> None:
    if (g["goal_offset"] is None) == (g["goal"] is None):
        raise FieldError("invalid", f"{where}: give one of goal_offset / goal")


#: an agent: ``start``, ``facing``, one input at most (see :mod:`motionmatch.environment.scenario`)
AGENT = Obj({
    "name": Str(NAME_LEN, optional=True),
    "start": point(),
    "facing": Custom(_direction, optional=True, default=(0.0, 1.0)),
    "script": Custom(_script, optional=True),
    "path": List(point(), 2, PATH_POINTS, optional=True),
    "timed_path": Custom(_timed_path, optional=True),
    "goal": point(optional=True),
    "via": List(point(), 0, WAYPOINTS, optional=True),
    "speed": Num(*SPEED, optional=True, default=1.3),
    "gait": Str(16, optional=True, default="walk"),
    "controls": section(controls().fields),
    "environment": Bool(optional=True, default=True),
    "start_time": Num(*SECONDS, optional=True, default=0.0),
    "tags": Str(TAG_QUERY_LEN, optional=True),
    "loop": Bool(optional=True, default=False),
}, rule=_one_input)

#: a group of agents on a jittered grid (see ``_expand_group`` there), toward one of
#: ``goal_offset`` / ``goal``; a name leaves room for its members' ``-99``
GROUP = Obj({
    "name": Str(NAME_LEN - 4, optional=True),
    "count": Num(1, GROUP_SIZE, integer=True, optional=True, default=1),
    "area": Tuple(point(), point()),
    "facing": Custom(_direction, optional=True, default=(0.0, 1.0)),
    "goal_offset": point(optional=True),
    "goal": point(optional=True),
    "via": List(point(), 0, WAYPOINTS, optional=True),
    "speed": Num(*SPEED, optional=True, default=1.3),
    "spacing": Num(*SPACING, optional=True, default=0.8),
    "seed": Num(*SEED, integer=True, optional=True),
    "controls": section(controls().fields),
    "environment": Bool(optional=True, default=True),
    "start_jitter": Num(0.0, 5.0, optional=True, default=0.15),
}, rule=_one_goal)

def _shared_default(v: Any, where: str) -> Any:
    """A penalty-shape field in a scenario file: refused (one set of defaults for every scene)."""
    raise FieldError("invalid", f"{where}: the obstacle penalty's shape and thresholds are the same for every "
                                "scene (motionmatch.search.penalized.PenaltyParams, the paper's values); remove "
                                "it and set the characters' controls (responsiveness, continuity, evasion, "
                                "anticipation) instead")


#: ``penalty``: :class:`~motionmatch.search.penalized.PenaltyParams`. Its shape (threshold,
#: exponent, weights, margins) is one set of defaults for every scene and is refused here
#: with a one-line error; a scene may only switch the height gating off (``use_heights``)
#: or run the disk-body ablation (``disk_body``).
PENALTY: dict[str, Field] = {
    **{name: Custom(_shared_default) for name in
       ("threshold", "exponent", "env_weight", "slot_weights", "margin", "height_low", "height_top")},
    "use_heights": Bool(), "disk_body": Bool(),
}

#: ``search``: :class:`~motionmatch.search.penalized.SearchOptions`
SEARCH: dict[str, Field] = {
    "method": Str(32), "plain_when_clear": Bool(), "adaptive": Bool(), "dissimilarity": Bool(),
    "v": Num(0.0, 10.0), "warm_start": Bool(), "start_back": Num(0.0, 1.0), "collision_fallback": Bool(),
    "max_stride": Num(1, 4096, integer=True), "segment_slack": Num(0.0, 10.0), "block_bounds": Bool(),
    "block_size": Num(1, 4096, integer=True), "super_blocks": Num(0, 4096, integer=True),
}

#: ``controller``: :class:`~motionmatch.runtime.controller.ControllerSettings` (seconds,
#: metres, m/s) and the default ``controls``
CONTROLLER: dict[str, Field] = {
    "search_interval": Num(0.0, 10.0), "search_method": Str(16), "inertialization": Str(16),
    "blend_time": Num(0.01, 5.0), "spring_halflife": Num(0.01, 5.0), "trajectory_mode": Str(16),
    "velocity_halflife": Num(0.01, 5.0), "facing_halflife": Num(0.01, 5.0), "transition_ratio": Num(0.0, 2.0),
    "same_clip_window": Num(0, 1000, integer=True), "reselect_history": Num(0.0, 10.0), "sharp_turn_deg": Num(0.0, 180.0), "idle_speed": Num(0.0, 2.0),
    "foot_locking": Bool(), "foot_unlock_distance": Num(0.0, 2.0), "foot_blend_time": Num(0.01, 5.0),
    "foot_lock_in_time": Num(0.01, 5.0), "jump_duration": Num(0.1, 10.0), "adjust_halflife": Num(0.0, 5.0),
    "adjust_max_ratio": Num(0.0, 10.0), "adjust_min_speed": Num(0.0, 10.0), "sim_max_distance": Num(0.0, 10.0),
    "locomotion_tags": Str(TAG_QUERY_LEN), "idle_seconds": Num(0.0, 30.0), "jump_settle": Num(0.0, 5.0), "punch_recoil": Num(0.0, 5.0),
    "vertical_spring": Bool(), "controls": section(controls().fields),
}

#: ``steering``: :class:`~motionmatch.runtime.crowd.SteeringSettings` (metres, degrees)
STEERING: dict[str, Field] = {
    "view_angle_deg": Num(0.0, 180.0), "view_distance": Num(0.0, 100.0), "lateral_gain": Num(0.0, 10.0),
    "arrive_distance": Num(0.0, 100.0), "slow_distance": Num(0.0, 100.0), "waypoint_radius": Num(0.05, 100.0),
}

_DATABASE: dict[str, Field] = {"requires": List(Str(NAME_LEN), 0, 32), "locomotion_tags": Str(TAG_QUERY_LEN)}

#: the settings sections: the fields each gives, cleaned
SECTIONS = {"penalty": PENALTY, "search": SEARCH, "controller": CONTROLLER, "steering": STEERING,
            "database": _DATABASE}

#: the top level
TOP: dict[str, Field] = {
    "name": Str(NAME_LEN, optional=True),
    "description": Str(TEXT_LEN, optional=True, default=""),
    "expect": Str(TEXT_LEN, optional=True, default=""),
    "notes": Str(TEXT_LEN, optional=True),
    "duration": Num(*DURATION),
    "fps": Num(*FPS, optional=True, default=60.0),
    "obstacles": List(Custom(validate_obstacle), 0, OBSTACLES, optional=True, default=[]),
    "agents": List(AGENT, 0, AGENTS, optional=True, default=[]),
    "groups": List(GROUP, 0, AGENTS, optional=True, default=[]),
    "regions": Custom(_regions, optional=True, default={}),
    "terrain": Custom(_terrain, optional=True),
    **{k: section(fields) for k, fields in SECTIONS.items()},
}
