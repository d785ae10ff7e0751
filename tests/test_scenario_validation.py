"""Scenario files are checked with the bounds of the viewer's socket messages
(:mod:`motionmatch.validation`): a value out of range, of the wrong type, NaN or a
400-digit number is a one-line :class:`ScenarioError` naming the file and the field, and
whatever JSON a file holds, :func:`parse_scenario` returns a scenario or raises that error,
nothing else."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from json_strategies import fields_of, valid_for, value_for
from motionmatch import validation as V
from motionmatch.environment import Scenario, ScenarioError, load_scenario, parse_scenario
from motionmatch.environment import scenario_schema as S
from motionmatch.viewer import messages as M

GOOD = {"name": "ok", "duration": 5.0,
        "obstacles": [{"shape": "disk", "center": [0, 3], "radius": 0.4}],
        "agents": [{"name": "a", "start": [0, 0], "facing": [0, 1], "path": [[0, 0], [0, 4]], "speed": 1.2,
                    "controls": {"responsiveness": 3}},
                   {"name": "b", "start": [2, 0], "goal": [2, 8], "via": [[2, 4]], "start_time": 0.5}],
        "groups": [{"count": 4, "area": [[-40, -40], [40, 0]], "goal_offset": [0, 6], "seed": 3}],
        "penalty": {"use_heights": False}, "search": {"method": "linear"},
        "controller": {"search_interval": 0.2, "controls": {"evasion": 0.3}}, "steering": {"view_distance": 2.5},
        "database": {"locomotion_tags": "!dance"}, "regions": {"narrow": {"z": [1, 2]}}}


def with_(path: str, value):
    """``GOOD`` with the field at ``path`` (``agents.0.start.0``) set to ``value``."""
    d = copy.deepcopy(GOOD)
    *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
    target = d
    for k in parents:
        target = target[k]
    target[last] = value
    return d


def test_the_good_scenario_parses():
    sc = parse_scenario(GOOD)
    assert [a.name for a in sc.agents[:2]] == ["a", "b"] and len(sc.agents) == 6
    assert sc.agents[0].controls == {"responsiveness": 3.0} and sc.controller["controls"] == {"evasion": 0.3}
    assert sc.penalty == {"use_heights": False} and sc.steering == {"view_distance": 2.5}
    script = {"events": [{"t": 0, "keys": ["w"]}, {"t": 1, "intent": {"velocity": [0, 1.5], "facing": None}}],
              "note": "kept, unread"}
    assert parse_scenario({**GOOD, "agents": [{"start": [0, 0], "script": script}]}).agents[0].script == script


@pytest.mark.parametrize("path, value, says", [
    ("agents.0.start", [1e308, 0], "agents[0].start[0] must be between -1000 and 1000, got 1e+308"),
    ("agents.0.controls.responsiveness", 1e9, "agents[0].controls.responsiveness must be between 0 and 4"),
    ("agents.1.goal", [10**400, 0], "agents[1].goal[0] must be between -1000 and 1000, got an integer of 401 digits"),
    ("duration", math.nan, "duration must be finite"),
    ("duration", math.inf, "duration must be finite"),
    ("duration", 0, "duration must be between 0.01 and 3600"),
    ("agents.0.speed", "fast", "agents[0].speed must be a number, got str"),
    ("agents.0.speed", 100, "agents[0].speed must be between 0.3 and 6"),
    ("agents.1.start_time", -1, "agents[1].start_time must be between 0 and 3600"),
    ("agents.0.facing", [0, 0], "agents[0].facing must be a non-zero direction"),
    ("agents.0.path", [[0, 0]], "agents[0].path must have 2 to 4096 items, got 1"),
    ("agents.0.path.1", [0, 1e300], "agents[0].path[1][1] must be between -1000 and 1000"),
    ("agents.1.via", [[0, 0]] * 40, "agents[1].via must have 0 to 32 items, got 40"),
    ("agents.0.tags", 7, "agents[0].tags must be a string, got int"),
    ("agents.0.environment", 1, "agents[0].environment must be true or false, got int"),
    ("agents.0.wings", 2, "agents[0]: unknown field(s) 'wings'"),
    ("agents.0.timed_path", {"points": [[0, 0, 0], [1, 1e9, 0]]}, "agents[0].timed_path.points[1][1] must be between"),
    ("agents.0.timed_path", {"points": [[1, 0, 0], [1, 1, 0]]}, "agents[0].timed_path.points: times must increase"),
    ("agents.0.script", {"events": [{"t": 0, "intent": {"velocity": [1e308, 0]}}]},
     "agents[0].script.events[0].intent.velocity[0] must be between -6 and 6, got 1e+308"),
    ("agents.0.script", {"events": [{"t": 0, "intent": {"facing": [0, 0, math.inf]}}]},
     "agents[0].script.events[0].intent.facing[2] must be finite"),
    ("agents.0.script", {"events": [{"t": 10**400, "keys": ["w"]}]}, "agents[0].script.events[0].t must be between"),
    ("agents.0.script", {"events": [], "camera_yaw": "north"}, "agents[0].script.camera_yaw must be a number"),
    ("groups.0.count", 1000, "groups[0].count must be between 1 and 100, got 1000"),
    ("groups.0.count", 2.5, "groups[0].count must be an integer"),
    ("groups.0.spacing", 0.01, "groups[0].spacing must be between 0.5 and 10"),
    ("groups.0.goal_offset", [0, 5000], "groups[0].goal_offset[1] must be between -1000 and 1000"),
    ("obstacles.0.radius", 1e6, "obstacles[0].radius must be between 0.01 and 50"),
    ("obstacles.0.center", [0, math.nan], "obstacles[0].center[1] must be finite"),
    # the penalty's shape is one set of defaults for every scene: refused, whatever the value
    ("penalty.threshold", 0.4, "penalty.threshold: the obstacle penalty's shape and thresholds are the same"),
    ("penalty.slot_weights", [1, 0.5], "penalty.slot_weights: the obstacle penalty's shape and thresholds"),
    ("penalty.disk_body", 1, "penalty.disk_body must be true or false"),
    ("search.block_size", 10**20, "search.block_size must be between 1 and 4096"),
    ("controller.search_interval", -1, "controller.search_interval must be between 0 and 10"),
    ("controller.controls.evasion", 5, "controller.controls.evasion must be between 0 and 4"),
    ("controller.foot_locking", "yes", "controller.foot_locking must be true or false"),
    ("steering.view_angle_deg", 1e5, "steering.view_angle_deg must be between 0 and 180"),
    ("steering.wind", 1, "steering: unknown field(s) 'wind'"),
    ("regions.narrow.z", [0, 1e12], "regions.narrow.z[1] must be between -1000 and 1000"),
    ("database.requires", "jump", "database.requires must be a list, got str"),
    ("fps", 1e6, "fps must be between 1 and 480"),
])
def test_a_bad_value_is_one_line_naming_the_file_and_the_field(path, value, says):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(with_(path, value), "scenario.json")
    msg = str(e.value)
    assert msg.startswith("scenario.json: ") and says in msg, msg
    assert "\n" not in msg


def test_rules_across_fields_and_counts():
    agent = {"start": [0, 0], "path": [[0, 0], [0, 0]], "loop": True}
    for data, says in [({**GOOD, "agents": [agent]}, "agents[0].path: a loop of 0 m"),
                       ({**GOOD, "agents": [{"start": [0, 0], "path": [[0, 0], [0, 1]], "goal": [1, 1]}]}, "one input"),
                       ({**GOOD, "agents": [{"start": [0, 0], "via": [[1, 1]]}]}, "agents[0].via: waypoints need a goal"),
                       ({**GOOD, "groups": [{"area": [[0, 0], [1, 1]]}]}, "groups[0]: give one of goal_offset / goal"),
                       ({**GOOD, "groups": [{"count": 100, "area": [[0, 0], [1, 1]], "goal": [0, 0]}]}, "do not fit"),
                       ({**GOOD, "groups": [{"count": 100, "area": [[-900, -900], [900, 900]], "goal": [0, 0]}] * 201},
                        "at most 20000 agents in all"),
                       ({**GOOD, "agents": [{"start": [0, 0]}, {"start": [1, 0], "name": "agents[0]"}]}, "unique"),
                       ({"agents": []}, "missing field 'duration'"),
                       ([1, 2], "expected a JSON object, got list")]:
        with pytest.raises(ScenarioError) as e:
            parse_scenario(data, "s.json")
        assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_looping_path_is_bounded_when_it_is_walked_too():
    """The CLI's ``--duration`` changes the duration after parsing: the route still refuses
    a run that would repeat the loop past the bound."""
    sc = parse_scenario({**GOOD, "agents": [{"start": [0, 0], "path": [[0, 0], [0, 1], [1, 1]], "loop": True}]})
    assert len(sc.agents[0].route(sc.duration)) >= 4
    with pytest.raises(V.FieldError, match="laps"):
        sc.agents[0].route(1e12)


def test_path_files_are_read_only_from_the_scenario_folder(tmp_path):
    scen = tmp_path / "scen"
    (scen / "paths").mkdir(parents=True)
    (scen / "paths" / "p.json").write_text(json.dumps({"points": [[0, 0, 0], [1, 0, 1]]}))
    (tmp_path / "outside.json").write_text("{}")
    for name, ok in (("paths/p.json", True), ("../outside.json", False), (str(tmp_path / "outside.json"), False),
                     ("/etc/passwd", False), ("missing.json", False), ("a\x00b", False)):
        f = scen / "s.json"
        f.write_text(json.dumps({"duration": 5, "agents": [{"start": [0, 0], "timed_path": name}]}))
        if ok:
            assert load_scenario(f).agents[0].timed_path == str(scen / name)
        else:
            with pytest.raises(ScenarioError, match=r"agents\[0\].timed_path: no path file") as e:
                load_scenario(f, label="scenarios:s.json")
            assert str(e.value).startswith("scenarios:s.json: ") and str(scen) not in str(e.value)


def test_unreadable_files_are_one_line_errors_under_their_label(tmp_path):
    cases = {"bad.json": b"{", "deep.json": b"[" * 100_000 + b"]" * 100_000, "latin.json": b'{"name": "\xe9"}'}
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
    (tmp_path / "folder.json").mkdir()
    for name in [*cases, "folder.json", "missing.json"]:
        with pytest.raises(ScenarioError) as e:
            load_scenario(tmp_path / name, label=f"scenarios:{name}")
        assert str(e.value).startswith(f"scenarios:{name}: ") and "\n" not in str(e.value), str(e.value)
        assert str(tmp_path) not in str(e.value)


def test_messages_and_scenarios_share_their_bounds():
    """The same quantity is refused by both at the same value: a controls message and a
    scenario agent's controls, a group's speed, spacing and size, a position, an obstacle."""
    def message_ok(msg):
        try:
            M.validate(msg)
        except M.MessageError:
            return False
        return True

    def scenario_ok(data):
        try:
            parse_scenario(data)
        except ScenarioError:
            return False
        return True

    group = {"count": 4, "center": [0, 0], "target": [0, 5]}
    cases = [(lambda v: {"type": "controls", "responsiveness": v}, "agents.0.controls.responsiveness", V.CONTROL),
             (lambda v: {"type": "spawn_group", **group, "speed": v}, "agents.1.speed", V.SPEED),
             (lambda v: {"type": "spawn_group", **group, "spacing": v}, "groups.0.spacing", V.SPACING),
             (lambda v: {"type": "spawn_group", **group, "count": v}, "groups.0.count", (1, V.GROUP_SIZE)),
             (lambda v: {"type": "add_character", "position": [v, 0]}, "agents.0.start.0", V.WORLD),
             (lambda v: {"type": "obstacle_add", "obstacle": {"shape": "disk", "center": [0, 0], "radius": v}},
              "obstacles.0.radius", V.RADIUS)]
    for message, path, (lo, hi) in cases:
        for v, ok in ((lo, True), (hi, True), (hi + 1, False), (lo - 1, False)):
            assert message_ok(message(v)) == ok == scenario_ok(with_(path, v)), (path, v)


def test_the_settings_sections_name_the_settings_fields():
    """``penalty`` / ``search`` / ``controller`` / ``steering`` bound every field of the
    settings they set, no more (the runtime's classes are above the environment layer)."""
    from motionmatch.runtime.controller import ControllerSettings
    from motionmatch.runtime.crowd import SteeringSettings
    from motionmatch.runtime.environment_matching import Controls
    from motionmatch.search.penalized import PenaltyParams, SearchOptions

    names = {k: set(f) for k, f in S.SECTIONS.items()}
    assert names["penalty"] == {f.name for f in fields(PenaltyParams)}
    assert names["search"] == {f.name for f in fields(SearchOptions)}
    assert names["controller"] == {f.name for f in fields(ControllerSettings)} | {"controls"}
    assert names["steering"] == {f.name for f in fields(SteeringSettings)}
    assert set(V.CONTROL_NAMES) == {f.name for f in fields(Controls)}
    # every default lies within its bound
    for section, cls in (("penalty", PenaltyParams), ("search", SearchOptions), ("controller", ControllerSettings),
                         ("steering", SteeringSettings)):
        defaults = {f.name: getattr(cls(), f.name) for f in fields(cls)
                    if section != "penalty" or f.name in ("use_heights", "disk_body")}  # the rest: refused
        parse_scenario({**GOOD, section: {k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()}})


scenarios = fields_of(S.TOP).map(lambda d: {"duration": 5.0, "agents": [{"start": [0, 0]}], **d})
# agents and groups within bounds (and one of any kind) in a scenario otherwise right: to
# reach the rules across their fields, the groups' expansion, the agents' routes
crowds = st.builds(lambda agents, groups, duration, odd: {"duration": duration, "agents": agents + odd,
                                                          "groups": groups},
                   st.lists(valid_for(S.AGENT), max_size=3), st.lists(valid_for(S.GROUP), max_size=2),
                   valid_for(S.TOP["duration"]), st.lists(value_for(S.AGENT), max_size=1))
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def parses_or_says_where(data) -> Scenario | None:
    """The scenario of ``data`` or ``None`` after a one-line ScenarioError; nothing else."""
    try:
        sc = parse_scenario(json.loads(json.dumps(data)), "gen.json")
    except ScenarioError as e:
        assert str(e).startswith("gen.json: ") and "\n" not in str(e)
        return None
    assert isinstance(sc, Scenario) and 0 < sc.duration <= V.SECONDS[1]
    for a in sc.agents:
        assert all(V.WORLD[0] <= x <= V.WORLD[1] for x in a.start)
        assert a.path is None or len(a.route(sc.duration)) <= S.LOOP_POINTS + len(a.path)
    return sc


@SETTINGS
@given(scenarios)
def test_any_json_is_a_scenario_or_a_scenario_error(data):
    """Generated scenarios (any JSON in every field, mostly values of the field's kind, in
    and out of range): a Scenario or a one-line ScenarioError, never another exception."""
    parses_or_says_where(data)


@SETTINGS
@given(crowds)
def test_any_agents_and_groups_are_a_scenario_or_a_scenario_error(data):
    parses_or_says_where(data)
