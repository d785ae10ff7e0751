"""Intents, trajectory prediction, keyboard / gamepad mapping and timeline scripts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from motionmatch.anim import quat
from motionmatch.control import (
    GaitSpeeds,
    Intent,
    KeyboardController,
    RootState,
    ScriptError,
    TrajectoryPredictor,
    intent_from_keys,
    intent_from_stick,
    load_script,
    normalize_key,
    parse_script,
    predict_trajectory,
)
from motionmatch.errors import MotionMatchError

X, Y, Z = np.eye(3)
G = GaitSpeeds()


def angle_between(a, b):
    a = np.asarray(a) / np.linalg.norm(a, axis=-1, keepdims=True)
    b = np.asarray(b) / np.linalg.norm(b, axis=-1, keepdims=True)
    return np.degrees(np.arccos(np.clip(np.sum(a * b, axis=-1), -1, 1)))


# ---------------------------------------------------------------------------------------
# Intent
# ---------------------------------------------------------------------------------------


def test_intent_basics():
    i = Intent([0.0, 0.0, 2.0], gait="run")
    assert i.speed == pytest.approx(2.0)
    np.testing.assert_allclose(i.direction, Z)
    assert i.moving and not i.strafing
    with pytest.raises(ValueError):
        i.velocity[0] = 1.0  # read-only
    idle = Intent.idle()
    assert idle.speed == 0.0 and not idle.moving and idle.gait == "idle"
    np.testing.assert_allclose(idle.direction, 0.0)
    s = Intent([1.0, 0.0], facing=[0.0, 3.0], gait="walk")  # 2-vectors are [x, z]
    np.testing.assert_allclose(s.velocity, [1.0, 0.0, 0.0])
    np.testing.assert_allclose(s.facing, Z)
    assert s.strafing
    np.testing.assert_allclose(s.facing_or(X), Z)
    np.testing.assert_allclose(i.facing_or(X), Z)
    np.testing.assert_allclose(idle.facing_or([2.0, 0.0, 0.0]), X)
    # copying an intent with a (read-only) facing keeps the facing and leaves the original alone
    t = s.with_(gait="run")
    np.testing.assert_allclose(t.facing, Z)
    assert t.gait == "run" and s.gait == "walk"


def test_intent_validation_and_equality():
    with pytest.raises(ValueError, match="gait"):
        Intent(gait="trot")
    with pytest.raises(ValueError, match="action"):
        Intent(actions={"fly"})
    with pytest.raises(ValueError, match="facing"):
        Intent(facing=[0.0, 1.0, 0.0])
    with pytest.raises(ValueError):
        Intent([np.nan, 0.0, 0.0])
    a = Intent([0.0, 0.0, 1.4], gait="walk", actions=["jump"])
    b = Intent(np.array([0.0, 0.0, 1.4]), None, "walk", frozenset({"jump"}))
    assert a == b and hash(a) == hash(b)
    assert a != a.with_(gait="run")
    assert a.actions == frozenset({"jump"})


def test_planar_intent_is_the_checked_one():
    a, b = Intent.planar(0.3, -1.2, "walk"), Intent(velocity=[0.3, 0.0, -1.2], gait="walk")
    assert a == b and hash(a) == hash(b) and a.facing is None and a.actions == frozenset()
    assert a.velocity.dtype == np.float64 and not a.velocity.flags.writeable
    assert a.speed == b.speed and a.with_(gait="run") == b.with_(gait="run")


def test_from_speed_direction():
    i = Intent.from_speed_direction(3.5, [1.0, 0.0, 1.0])
    np.testing.assert_allclose(i.velocity, 3.5 * np.array([1, 0, 1]) / math.sqrt(2))
    assert i.gait == "run"
    assert Intent.from_speed_direction(1.0, [0.0, 0.0, 0.0]).gait == "idle"


def test_gait_speeds():
    assert G.speed("walk") == 1.4 and G.speed("idle") == 0.0 and G.creep == 0.8
    assert [G.gait_for_speed(s) for s in (0.0, 1.0, 2.5, 4.0, 6.0)] == ["idle", "walk", "run", "run", "sprint"]
    with pytest.raises(ValueError):
        GaitSpeeds(walk=4.0, run=3.0)


def test_changed_sharply():
    walk = Intent.from_speed_direction(1.4, Z)
    assert not walk.changed_sharply(Intent.from_speed_direction(1.6, Z))
    assert walk.changed_sharply(Intent.from_speed_direction(1.4, X))  # 90 degrees
    assert not walk.changed_sharply(Intent.from_speed_direction(1.4, [0.3, 0.0, 1.0]))  # ~17 degrees
    assert walk.changed_sharply(Intent.from_speed_direction(1.4, [0.3, 0.0, 1.0]), angle_deg=10)
    assert walk.changed_sharply(Intent.idle())  # speed drop 1.4
    assert walk.changed_sharply(walk.with_(actions=frozenset({"jump"})))
    assert walk.changed_sharply(walk.with_(facing=X))
    assert Intent.idle().changed_sharply(Intent.from_speed_direction(1.4, Z))
    assert not Intent.idle().changed_sharply(Intent.idle())


# ---------------------------------------------------------------------------------------
# Trajectory prediction
# ---------------------------------------------------------------------------------------


def test_constant_velocity_gives_straight_line():
    v = np.array([1.0, 0.0, 2.0])
    state = RootState(position=[3.0, 0.0, -1.0], velocity=v, rotation=v)
    p = TrajectoryPredictor(times=(0.25, 0.5, 1.0), state=state)
    tr = p.predict(v)
    np.testing.assert_allclose(tr.positions, state.position + v * tr.times[:, None], atol=1e-12)
    np.testing.assert_allclose(tr.velocities, np.broadcast_to(v, (3, 3)), atol=1e-12)
    np.testing.assert_allclose(tr.directions, np.broadcast_to(v / np.linalg.norm(v), (3, 3)), atol=1e-9)
    assert tr.positions.shape == tr.directions.shape == tr.velocities.shape == (3, 3)
    assert tr.rotations.shape == (3, 4)


def test_moved_to_is_replace_of_the_position_bit_for_bit():
    """The controller's per-frame move of the simulated root (``moved_to``) makes exactly
    the state the checked constructor makes (``replace(position=...)``): every field, bit for
    bit, on states from the constructor and from the predictor's trusted path."""
    rng = np.random.default_rng(3)
    states = [RootState._trusted(rng.normal(size=3), rng.normal(size=3), rng.normal(size=3),
                                 float(rng.uniform(-9, 9)), float(rng.normal())) for _ in range(300)]
    states += [RootState(position=rng.normal(size=3), velocity=rng.normal(size=3),
                         rotation=quat.normalize(rng.normal(size=4)), angular_velocity=rng.normal(size=3))
               for _ in range(300)]
    for st in states:
        p = rng.normal(size=3)
        a, b = st.replace(position=p), st.moved_to(p.copy())
        for f in ("position", "velocity", "acceleration", "rotation", "angular_velocity"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert a.yaw == b.yaw


def test_from_rest_speed_increases_monotonically():
    times = np.linspace(0.02, 2.0, 100)
    tr = predict_trajectory(RootState(), [0.0, 0.0, 3.5], times)
    speed = np.linalg.norm(tr.velocities, axis=1)
    assert np.all(np.diff(speed) > 0)
    assert speed[-1] < 3.5 + 1e-9 and speed[-1] > 3.4
    assert np.all(np.diff(tr.positions[:, 2]) > 0)
    np.testing.assert_allclose(tr.positions[:, [0, 1]], 0.0, atol=1e-12)


def test_facing_turns_toward_desired():
    times = np.linspace(0.05, 1.5, 30)
    desired = np.array([-2.0, 0.0, 0.0])  # to the character's right
    tr = predict_trajectory(RootState(), desired, times)
    ang = angle_between(tr.directions, desired)
    assert np.all(np.diff(ang) < 0)
    assert ang[0] < 90 and ang[-1] < 1.0
    np.testing.assert_allclose(np.linalg.norm(tr.directions, axis=1), 1.0)
    np.testing.assert_allclose(tr.directions[:, 1], 0.0, atol=1e-12)
    assert np.all(tr.directions[:, 0] < 0)  # turned right, toward -X


@pytest.mark.parametrize("mode", ["spring", "linear"])
def test_heading_matches_quaternion_springs(mode):
    from motionmatch.control import springs

    rng = np.random.default_rng(3)
    times = np.linspace(0.0, 1.2, 13)
    for _ in range(20):
        yaw0, yaw_goal, w0 = rng.uniform(-np.pi, np.pi), rng.uniform(-np.pi, np.pi), rng.normal()
        state = RootState(rotation=quat.from_angle_y(yaw0), angular_velocity=[0.0, w0, 0.0])
        goal = np.array([np.sin(yaw_goal), 0.0, np.cos(yaw_goal)])
        tr = predict_trajectory(state, np.zeros(3), times, facing=goal, facing_halflife=0.25, mode=mode)
        if mode == "spring":
            q, _ = springs.spring_rotation(
                state.rotation, state.angular_velocity, quat.from_angle_y(yaw_goal), 0.25, times[:, None]
            )
        else:
            q, _ = springs.damper_rotation(state.rotation, quat.from_angle_y(yaw_goal), 0.25, times[:, None])
        np.testing.assert_allclose(np.abs(np.sum(tr.rotations * q, axis=-1)), 1.0, atol=1e-9)
        np.testing.assert_allclose(tr.directions, quat.rotate(q, Z), atol=1e-9)


def test_strafing_keeps_desired_facing():
    tr = predict_trajectory(RootState(), Intent([2.0, 0.0, 0.0], facing=Z, gait="run"), (0.5, 1.0))
    np.testing.assert_allclose(tr.directions, [Z, Z], atol=1e-12)
    assert tr.positions[-1, 0] > 1.0
    # explicit facing overrides
    tr = predict_trajectory(RootState(), [0.0, 0.0, 1.0], (2.0,), facing=X)
    assert angle_between(tr.directions[0], X) < 2.0


def test_standing_still_keeps_facing():
    state = RootState(rotation=X)
    tr = predict_trajectory(state, np.zeros(3), (0.5, 1.0))
    np.testing.assert_allclose(tr.directions, [X, X], atol=1e-12)
    np.testing.assert_allclose(tr.positions, 0.0, atol=1e-12)


def test_linear_mode_differs():
    times = np.linspace(0.05, 1.0, 20)
    spring = predict_trajectory(RootState(), [0.0, 0.0, 3.0], times, mode="spring")
    linear = predict_trajectory(RootState(), [0.0, 0.0, 3.0], times, mode="linear")
    assert np.abs(spring.positions - linear.positions).max() > 0.05
    # interpolation responds at once (acceleration jumps), the spring starts gently
    assert linear.velocities[0, 2] > spring.velocities[0, 2]
    with pytest.raises(ValueError, match="mode"):
        predict_trajectory(RootState(), [0.0, 0.0, 3.0], times, mode="cubic")


@pytest.mark.parametrize("mode", ["spring", "linear"])
def test_advance_matches_prediction_and_is_step_independent(mode):
    start = RootState(velocity=[1.0, 0.0, 0.0], acceleration=[0.0, 0.0, 2.0], rotation=X, angular_velocity=[0, 0.5, 0])
    desired = Intent.from_speed_direction(3.0, [-1.0, 0.0, 1.0])
    a = TrajectoryPredictor(times=(0.8,), mode=mode, state=start)
    pred = a.predict(desired)
    for _ in range(48):
        a.advance(1 / 60, desired)
    b = TrajectoryPredictor(mode=mode, state=start)
    b.advance(0.8, desired)
    np.testing.assert_allclose(a.state.position, pred.positions[0], atol=1e-9)
    np.testing.assert_allclose(a.state.velocity, pred.velocities[0], atol=1e-9)
    np.testing.assert_allclose(a.state.direction, pred.directions[0], atol=1e-9)
    np.testing.assert_allclose(a.state.position, b.state.position, atol=1e-9)
    np.testing.assert_allclose(a.state.rotation, b.state.rotation, atol=1e-9)


def test_vertical_mode():
    state = RootState(velocity=[0.0, 3.0, 0.0])
    flat = predict_trajectory(state, [0.0, -3.0, 1.0], (0.2, 0.4))
    np.testing.assert_allclose(flat.positions[:, 1], 0.0)
    np.testing.assert_allclose(flat.velocities[:, 1], 0.0)
    up = predict_trajectory(state, [0.0, -3.0, 1.0], (0.2, 0.4, 3.0), vertical=True, floor=0.0)
    assert up.positions[0, 1] > 0.2
    assert up.positions[2, 1] == 0.0  # clamped at the floor after landing
    p = TrajectoryPredictor(vertical=True, floor=0.0, state=state)
    for _ in range(200):
        p.advance(1 / 60, [0.0, -3.0, 0.0])
        assert p.state.position[1] >= 0.0


def test_local_frame():
    state = RootState(position=[1.0, 0.0, 1.0], velocity=[2.0, 0.0, 0.0], rotation=X)  # facing +X
    tr = predict_trajectory(state, [2.0, 0.0, 0.0], (0.5, 1.0))
    pos, dirs, vel = tr.local(state.position, state.rotation)
    np.testing.assert_allclose(pos, [[0, 0, 1.0], [0, 0, 2.0]], atol=1e-12)  # straight ahead = +Z
    np.testing.assert_allclose(dirs, [Z, Z], atol=1e-12)
    np.testing.assert_allclose(vel, [2 * Z, 2 * Z], atol=1e-12)
    pos2, _, _ = tr.local(state.position, X)  # a facing direction works too
    np.testing.assert_allclose(pos2, pos, atol=1e-12)


def test_root_state_conversions():
    s = RootState(rotation=quat.mul(quat.from_angle_y(0.7), quat.from_axis_angle(X, 0.3)), angular_velocity=[1, 2, 3])
    assert s.yaw == pytest.approx(0.7)
    np.testing.assert_allclose(s.angular_velocity, [0, 2, 0])
    np.testing.assert_allclose(RootState(rotation=[1.0, 0.0]).direction, X, atol=1e-12)
    p = TrajectoryPredictor()
    p.reset(position=[1, 0, 2], facing=-X)
    np.testing.assert_allclose(p.state.direction, -X, atol=1e-12)
    with pytest.raises(ValueError):
        TrajectoryPredictor(times=())
    with pytest.raises(ValueError):
        p.advance(-1.0, Intent.idle())


# ---------------------------------------------------------------------------------------
# Keyboard and gamepad
# ---------------------------------------------------------------------------------------


def test_wasd_directions():
    np.testing.assert_allclose(intent_from_keys({"w"}).velocity, G.walk * Z)
    np.testing.assert_allclose(intent_from_keys({"s"}).velocity, -G.walk * Z)
    np.testing.assert_allclose(intent_from_keys({"a"}).velocity, G.walk * X)
    np.testing.assert_allclose(intent_from_keys({"D"}).velocity, -G.walk * X)
    diag = intent_from_keys({"w", "d"})
    assert diag.speed == pytest.approx(G.walk)
    np.testing.assert_allclose(diag.direction, np.array([-1.0, 0.0, 1.0]) / math.sqrt(2))
    assert intent_from_keys({"w", "s"}) == Intent.idle()
    assert intent_from_keys({"a", "d"}) == Intent.idle()
    np.testing.assert_allclose(intent_from_keys({"w", "s", "a"}).direction, X)
    assert intent_from_keys(set()) == Intent.idle()
    assert intent_from_keys({"w"}).facing is None


def test_camera_yaw_rotates():
    yaw = math.pi / 2  # camera looks along +X
    np.testing.assert_allclose(intent_from_keys({"w"}, camera_yaw=yaw).direction, X, atol=1e-12)
    np.testing.assert_allclose(intent_from_keys({"d"}, camera_yaw=yaw).direction, Z, atol=1e-12)
    np.testing.assert_allclose(intent_from_keys({"a"}, camera_yaw=yaw).direction, -Z, atol=1e-12)
    # consistent with quaternions: W is the camera's forward, i.e. +Z rotated by the yaw
    yaw = 0.4
    np.testing.assert_allclose(
        intent_from_keys({"w"}, camera_yaw=yaw).direction, quat.rotate(quat.from_angle_y(yaw), Z), atol=1e-12
    )


def test_sprint_creep_and_actions():
    sprint = intent_from_keys({"w", "shift"})
    assert sprint.speed == pytest.approx(G.sprint) and sprint.gait == "sprint"
    creep = intent_from_keys({"w", "c"})
    assert creep.speed == pytest.approx(0.8) and "creep" in creep.actions
    assert intent_from_keys({"j"}).actions == {"jump"}
    assert intent_from_keys({"space", "w"}).actions == {"jump"}
    assert intent_from_keys({"p"}).actions == {"dance"} and not intent_from_keys({"p"}).moving
    assert intent_from_keys({"w"}).gait == "walk"


def test_key_aliases():
    for name, canon in [
        ("W", "w"),
        ("KeyW", "w"),
        ("ArrowUp", "up"),
        ("up_arrow", "up"),
        ("Down", "down"),
        ("LShift", "shift"),
        ("ShiftRight", "shift"),
        ("left shift", "shift"),
        ("Space", "j"),
        (" ", "j"),
    ]:
        assert normalize_key(name) == canon, name
    with pytest.raises(ValueError, match="unknown key"):
        normalize_key("x")


def test_keyboard_controller_speed_steps():
    kb = KeyboardController(speed_step=0.5, max_speed=3.0)
    assert kb.update({"w"}).speed == pytest.approx(1.4)
    assert kb.update({"w", "up"}, 1 / 60).speed == pytest.approx(1.9)
    assert kb.update({"w", "up"}, 1 / 60).speed == pytest.approx(1.9)  # held: no repeat
    kb.update({"w"}, 1 / 60)
    i = kb.update({"w", "ArrowUp"}, 1 / 60)
    assert i.speed == pytest.approx(2.4) and i.gait == "walk"  # the walk/run boundary is 2.45
    assert kb.update({"w", "up"}, 1 / 60).gait == "walk"  # held
    kb.update({"w"}, 1 / 60)
    assert kb.update({"w", "up"}, 1 / 60).gait == "run"  # 2.9
    for _ in range(5):
        kb.update({"w"}, 1 / 60)
        kb.update({"w", "up"}, 1 / 60)
    assert kb.target_speed == pytest.approx(3.0)  # clamped
    assert kb.update({"w", "shift"}).speed == pytest.approx(G.sprint)  # shift ignores the target
    for _ in range(20):
        kb.update({"down"}, 1 / 60)
        kb.update(set(), 1 / 60)
    assert kb.target_speed == pytest.approx(0.5)
    assert kb.update(set()) == Intent.idle()
    kb.reset()
    assert kb.target_speed == pytest.approx(1.4)


def test_keyboard_repeat_and_strictness():
    kb = KeyboardController(repeat_interval=0.25, max_speed=10.0)
    kb.update({"up"}, 0.0)  # press: +0.5
    kb.update({"up"}, 0.6)  # held 0.6 s: two repeats
    assert kb.target_speed == pytest.approx(1.4 + 1.5)
    assert kb.update({"w", "x"}).speed > 0  # unknown keys ignored by default
    with pytest.raises(ValueError):
        KeyboardController(strict=True).update({"x"})


def test_stick():
    assert intent_from_stick(0.05, 0.1) == Intent.idle()
    full = intent_from_stick(0.0, 1.0)
    np.testing.assert_allclose(full.velocity, G.run * Z)
    edge = intent_from_stick(0.0, 0.16)
    assert G.walk <= edge.speed < G.walk + 0.1
    right = intent_from_stick(1.0, 0.0)
    np.testing.assert_allclose(right.direction, -X, atol=1e-12)
    assert intent_from_stick(0.0, 1.0, sprint=0.9).speed == pytest.approx(G.sprint)
    assert intent_from_stick(0.0, 1.0, sprint=0.2).speed == pytest.approx(G.run)
    np.testing.assert_allclose(intent_from_stick(0.0, 1.0, camera_yaw=math.pi / 2).direction, X, atol=1e-12)
    half = intent_from_stick(0.0, 0.15 + 0.85 / 2)
    assert half.speed == pytest.approx(0.5 * (G.walk + G.run))
    assert intent_from_stick(0.0, 0.0, actions={"jump"}).actions == {"jump"}


# ---------------------------------------------------------------------------------------
# Scripts
# ---------------------------------------------------------------------------------------

EXAMPLE = {
    "duration": 20.0,
    "events": [
        {"t": 0.0, "keys": ["w"]},
        {"t": 5.0, "keys": ["w", "shift"]},
        {"t": 8.0, "keys": ["d"]},
        {"t": 12.0, "keys": []},
    ],
}


def test_example_script(tmp_path):
    path = tmp_path / "SCRIPT.json"
    path.write_text(json.dumps(EXAMPLE))
    s = load_script(path)
    assert s.duration == 20.0 and len(s.events) == 4 and s.camera_yaw == 0.0
    np.testing.assert_allclose(s.intent_at(2.0).velocity, G.walk * Z)
    assert s.intent_at(6.0).gait == "sprint"
    np.testing.assert_allclose(s.intent_at(9.0).velocity, -G.walk * X)
    assert s.intent_at(15.0) == Intent.idle()
    frames = list(s.intents(1 / 30))
    assert len(frames) == 600
    for t, intent in frames[::37]:
        assert intent == s.intent_at(t), t
    changes = s.direction_changes()
    assert [c[0] for c in changes] == [0.0, 8.0]
    np.testing.assert_allclose(changes[0][1], Z)
    np.testing.assert_allclose(changes[1][1], -X)
    assert [c[0] for c in s.direction_changes(include_starts=False)] == [8.0]


def test_intent_events_and_camera():
    s = parse_script(
        {
            "duration": 10.0,
            "camera_yaw": math.pi / 2,
            "note": "kept in extra",
            "events": [
                {"t": 1.0, "keys": ["W"]},
                {
                    "t": 3.0,
                    "intent": {"velocity": [0.0, 2.0], "facing": [1.0, 0.0], "gait": "run", "actions": ["jump"]},
                },
                {"t": 4.0, "intent": {"velocity": [1.0, 0.0, 0.0]}},
                {"t": 5.0, "intent": {"direction": [0.0, -1.0], "gait": "sprint"}},
                {"t": 6.0, "intent": {"direction": [1.0, 1.0], "speed": 2.0, "facing": None}},
            ],
        }
    )
    assert s.extra == {"note": "kept in extra"}
    assert s.intent_at(0.5) == Intent.idle()
    np.testing.assert_allclose(s.intent_at(2.0).direction, X, atol=1e-12)  # camera yaw applies to keys
    i = s.intent_at(3.5)
    np.testing.assert_allclose(i.velocity, [0.0, 0.0, 2.0])  # world frame, no camera
    np.testing.assert_allclose(i.facing, X)
    assert i.gait == "run" and i.actions == {"jump"}
    assert s.intent_at(4.5).gait == "walk"  # from the speed
    np.testing.assert_allclose(s.intent_at(5.5).velocity, -G.sprint * Z)
    assert s.intent_at(7.0).speed == pytest.approx(2.0) and s.intent_at(7.0).facing is None
    times = [c[0] for c in s.direction_changes()]
    assert times == [1.0, 3.0, 4.0, 5.0, 6.0]


def test_script_up_key_persists():
    s = parse_script(
        {
            "duration": 6.0,
            "events": [
                {"t": 0.0, "keys": ["w", "up"]},
                {"t": 1.0, "keys": ["w", "up"]},  # still held: no second press
                {"t": 2.0, "keys": ["w"]},
                {"t": 3.0, "keys": ["w", "arrowup"]},
            ],
        }
    )
    assert s.intent_at(1.5).speed == pytest.approx(1.9)
    assert s.intent_at(2.5).speed == pytest.approx(1.9)
    assert s.intent_at(4.0).speed == pytest.approx(2.4)
    last = list(s.intents(0.1))[-1][1]
    assert last.speed == pytest.approx(2.4)


@pytest.mark.parametrize(
    ("data", "index", "words"),
    [
        ({"events": []}, None, "duration"),
        ({"duration": "20", "events": []}, None, "duration"),
        ({"duration": 0, "events": []}, None, "duration"),
        ({"duration": 5.0}, None, "events"),
        ([1, 2], None, "JSON object"),
        ({"duration": 5.0, "events": [{"t": 2.0, "keys": []}, {"t": 1.0, "keys": []}]}, 1, "sorted"),
        ({"duration": 5.0, "events": [{"t": -1.0, "keys": []}]}, 0, ">= 0"),
        ({"duration": 5.0, "events": [{"t": 6.0, "keys": []}]}, 0, "after the end"),
        ({"duration": 5.0, "events": [{"t": True, "keys": []}]}, 0, '"t"'),
        ({"duration": 5.0, "events": [{"keys": []}]}, 0, '"t"'),
        ({"duration": 5.0, "events": [{"t": 0.0, "keys": ["w", "x"]}]}, 0, "unknown key 'x'"),
        ({"duration": 5.0, "events": [{"t": 0.0, "keys": "w"}]}, 0, "list"),
        ({"duration": 5.0, "events": [{"t": 0.0}]}, 0, "exactly one"),
        ({"duration": 5.0, "events": [{"t": 0.0, "keys": [], "intent": {}}]}, 0, "exactly one"),
        ({"duration": 5.0, "events": [{"t": 0.0, "key": ["w"]}]}, 0, "unknown field"),
        ({"duration": 5.0, "events": [{"t": 0.0, "intent": {"velocity": [1.0]}}]}, 0, "velocity"),
        ({"duration": 5.0, "events": [{"t": 0.0, "intent": {"gait": "trot"}}]}, 0, "gait"),
        ({"duration": 5.0, "events": [{"t": 0.0, "intent": {"actions": ["fly"]}}]}, 0, "fly"),
        ({"duration": 5.0, "events": [{"t": 0.0, "intent": {"facing": [0.0, 0.0]}}]}, 0, "facing"),
        ({"duration": 5.0, "events": [{"t": 0.0, "intent": {"speed": 2.0}}]}, 0, "direction"),
        ({"duration": 5.0, "events": [{"t": 0.0, "intent": {"velocity": [1, 0], "tilt": 1}}]}, 0, "tilt"),
        ({"duration": 5.0, "camera_yaw": "north", "events": []}, None, "camera_yaw"),
    ],
)
def test_script_errors(tmp_path, data, index, words):
    path = tmp_path / "bad_script.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ScriptError) as info:
        load_script(path)
    err = info.value
    assert isinstance(err, MotionMatchError) and isinstance(err, ValueError)
    assert err.index == index
    msg = str(err)
    assert "bad_script.json" in msg
    assert words in msg
    if index is not None:
        assert f"event {index}" in msg


def test_script_invalid_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"duration": 5.0, "events": [}')
    with pytest.raises(ScriptError, match=r"broken\.json.*line 1"):
        load_script(path)


def test_script_messages_suggest_fix():
    with pytest.raises(ScriptError, match="reorder"):
        parse_script({"duration": 5.0, "events": [{"t": 2.0, "keys": []}, {"t": 1.0, "keys": []}]})
    with pytest.raises(ScriptError, match=r"add the length"):
        parse_script({"events": []})


def test_keyboard_remembers_intents_but_follows_yaw_speed_and_gaits():
    """A held key set maps to one Intent object (built once); a new camera yaw, target
    speed or gait table gives a new one, and Up still steps the speed on its press."""
    kb = KeyboardController()
    first = kb.update({"w"}, 1 / 60)
    assert kb.update(frozenset({"KeyW"}), 1 / 60) is first
    np.testing.assert_allclose(first.velocity, [0.0, 0.0, kb.gaits.walk])
    kb.camera_yaw = np.pi / 2
    np.testing.assert_allclose(kb.update({"w"}, 1 / 60).velocity, [kb.gaits.walk, 0.0, 0.0], atol=1e-12)
    kb.camera_yaw = 0.0
    speed = kb.target_speed
    up = kb.update({"w", "up"}, 1 / 60)
    assert kb.target_speed == pytest.approx(speed + kb.speed_step)
    np.testing.assert_allclose(up.velocity, [0.0, 0.0, speed + kb.speed_step])
    assert kb.update({"w", "up"}, 1 / 60) is up  # held: no second step
    kb.gaits = GaitSpeeds(walk=1.0, run=2.0, sprint=3.0)
    assert kb.update({"w", "shift"}, 1 / 60).velocity[2] == pytest.approx(3.0)
