"""Strafing (issue 33 item 2): a held key (Q) and the gamepad's right stick keep the facing
while the character moves in any direction; scripts give it as ``"facing"``. The mapping
with known answers, the script's validation, and on the real data (LAFAN1, which has
sidestep and backward clips) a strafing script keeps its facing where the same keys
without it turn the character to its direction of travel."""

from __future__ import annotations

import math

import numpy as np
import pytest

from motionmatch.anim import quat
from motionmatch.control.intent import GaitSpeeds
from motionmatch.control.keyboard import (
    KeyboardController,
    intent_from_keys,
    intent_from_sticks,
    normalize_key,
    stick_direction,
)
from motionmatch.control.script import ScriptError, parse_script
from motionmatch.database import MotionDatabase
from motionmatch.runtime.inputs import KeyboardInput


def _close(a, b, tol=1e-9):
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=tol)


# ----------------------------------------------------------------------------- the key
def test_q_is_the_strafe_key_and_browser_code_keyq_names_it():
    assert normalize_key("KeyQ") == "q" and normalize_key("Q") == "q"


@pytest.mark.parametrize("yaw", [0.0, math.pi / 2, -2.0])
def test_holding_q_faces_the_camera_forward_whatever_the_keys_move(yaw):
    fwd = np.array([math.sin(yaw), 0.0, math.cos(yaw)])
    left = np.array([math.cos(yaw), 0.0, -math.sin(yaw)])
    g = GaitSpeeds()
    for keys, way in ((["d"], -left), (["a"], left), (["s"], -fwd), (["w"], fwd)):
        it = intent_from_keys([*keys, "q"], camera_yaw=yaw, gaits=g)
        assert _close(it.facing, fwd), (keys, it)
        assert _close(it.velocity, way * g.walk), (keys, it)
        plain = intent_from_keys(keys, camera_yaw=yaw, gaits=g)
        assert plain.facing is None and _close(plain.velocity, it.velocity)
    # standing with Q held: turn to face where the camera looks
    still = intent_from_keys(["q"], camera_yaw=yaw)
    assert not still.moving and _close(still.facing, fwd) and still.gait == "idle"


def test_the_keyboard_controller_strafes_while_q_is_held_and_stops_when_released():
    kb = KeyboardController(camera_yaw=0.0)
    a = kb.update({"d", "q"}, 0.0)
    b = kb.update({"d", "q"}, 1 / 60)
    assert a is b and _close(a.facing, [0, 0, 1]) and a.velocity[0] < 0
    c = kb.update({"d"}, 1 / 60)
    assert c.facing is None and a.changed_sharply(c)  # switching strafing off searches at once


# ----------------------------------------------------------------------------- the gamepad
def test_the_right_stick_sets_the_facing_camera_relative():
    assert stick_direction(0.05, 0.1) is None  # inside the deadzone
    assert _close(stick_direction(0.0, 1.0), [0, 0, 1])  # up: camera forward (+Z at yaw 0)
    assert _close(stick_direction(1.0, 0.0), [-1, 0, 0])  # right: camera right (-X at yaw 0)
    assert _close(stick_direction(0.0, -0.5), [0, 0, -1])
    assert _close(stick_direction(0.0, 1.0, camera_yaw=math.pi / 2), [1, 0, 0])
    assert _close(stick_direction(1.0, 0.0, camera_yaw=math.pi / 2), [0, 0, 1])
    # twin stick: move right (left stick) while facing forward (right stick)
    it = intent_from_sticks((1.0, 0.0), (0.0, 1.0))
    assert _close(it.facing, [0, 0, 1]) and it.velocity[0] < -1.0 and abs(it.velocity[2]) < 1e-9
    # the right stick at rest: face the direction of travel
    assert intent_from_sticks((1.0, 0.0), (0.1, 0.0)).facing is None
    # the left stick at rest, the right one pushed: stand and face it
    turn = intent_from_sticks((0.0, 0.0), (-1.0, 0.0))
    assert not turn.moving and _close(turn.facing, [1, 0, 0])
    with pytest.raises(ValueError, match="right stick"):
        intent_from_sticks((0.0, 0.0), (float("nan"), 0.0))


def test_the_sticks_drive_the_keyboard_input_until_they_rest():
    inp = KeyboardInput(camera_yaw=0.0)
    inp.set_keys(["w"])
    inp.set_sticks((0.0, -1.0), (0.0, 1.0))  # back away while facing forward
    w = inp.intent(None, 0.0, 0.0)
    assert w.intent.velocity[2] < 0 and _close(w.intent.facing, [0, 0, 1])
    inp.set_sticks((0.0, 0.0), (0.0, 0.0))
    w = inp.intent(None, 0.0, 1 / 60)
    assert w.intent.velocity[2] > 0 and w.intent.facing is None  # the keys again


# ----------------------------------------------------------------------------- scripts
def test_a_keys_event_with_facing_keeps_that_facing():
    s = parse_script({"duration": 3.0, "events": [{"t": 0.0, "keys": ["d"], "facing": [0, 1]},
                                                  {"t": 1.0, "keys": ["s"], "facing": [3, 0]},
                                                  {"t": 2.0, "keys": ["s"], "facing": None}]})
    play = s.playback()
    a, b = play.intent(0.0, 0.0), play.intent(0.5, 0.5)
    assert a is b and _close(a.facing, [0, 0, 1]) and a.velocity[0] < 0  # (one intent while it holds)
    c = play.intent(1.0, 0.5)
    assert _close(c.facing, [1, 0, 0]) and c.velocity[2] < 0  # normalised
    assert play.intent(2.0, 1.0).facing is None
    q = parse_script({"duration": 1.0, "camera_yaw": math.pi / 2, "events": [{"t": 0.0, "keys": ["s", "q"]}]})
    it = q.intent_at(0.5)
    assert _close(it.facing, [1, 0, 0]) and it.velocity[0] < 0  # Q: the camera's forward, backing away


@pytest.mark.parametrize("event, message", [
    ({"t": 0.0, "keys": ["d"], "facing": [0, 0]}, 'event 0: "facing" must be a non-zero ground direction'),
    ({"t": 0.0, "keys": ["d"], "facing": "north"}, 'event 0: "facing" must be a list of 2 numbers'),
    ({"t": 0.0, "keys": ["d"], "facing": [1, float("nan")]}, '"facing" must be a list of 2 numbers'),
    ({"t": 0.0, "intent": {"velocity": [1, 0]}, "facing": [0, 1]}, "put it inside the intent"),
])
def test_a_bad_facing_is_one_line_naming_the_event_and_the_fix(event, message):
    with pytest.raises(ScriptError) as e:
        parse_script({"duration": 1.0, "events": [event]}, path="strafe.json")
    text = str(e.value)
    assert message in text and text.startswith("strafe.json, event 0: ") and "\n" not in text


# ----------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def lafan(data_dir):
    from motionmatch.datasets import load_folder

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return MotionDatabase.build(load_folder(folder), mirror_copies=True)


SIDEWAYS_AND_BACK = [{"t": 0.0, "keys": ["d"]}, {"t": 4.0, "keys": ["s"]}, {"t": 8.0, "keys": ["a"]}]


def strafe_errors(db, facing) -> tuple[float, float]:
    """A 12 s script (right, back, left at walking speed) with ``facing`` on every event;
    returns the mean facing error (degrees, against ``facing``, or against the direction
    of travel when ``None``) and the mean velocity error (m/s), after the first second."""
    from motionmatch.runtime.offline import run_script

    events = [dict(e, facing=facing) for e in SIDEWAYS_AND_BACK]
    rec = run_script(db, parse_script({"duration": 12.0, "events": events}), fps=30.0)
    yaw = quat.yaw_angle(rec.motion.world_rotations[:, 0])
    fwd = np.stack([np.sin(yaw), np.cos(yaw)], axis=1)
    pos = rec.motion.world_positions[:, 0][:, [0, 2]]
    vel = np.gradient(pos, axis=0) * 30.0
    want = rec.desired_velocity[:, [0, 2]]
    aim = np.broadcast_to(np.asarray(facing, float) / np.linalg.norm(facing), want.shape) if facing is not None \
        else want / np.linalg.norm(want, axis=1, keepdims=True)
    err = np.degrees(np.arccos(np.clip((fwd * aim).sum(axis=1), -1.0, 1.0)))[30:]
    return float(err.mean()), float(np.linalg.norm(vel - want, axis=1)[30:].mean())


def test_a_strafing_script_keeps_its_facing_while_it_moves_sideways_and_backwards(lafan):
    facing_err, vel_err = strafe_errors(lafan, [0.0, 1.0])
    # without the facing the same keys turn the character to face its way (90-180 degrees off +Z)
    yaw_off = strafe_errors(lafan, None)
    assert facing_err < 10.0, facing_err
    assert vel_err < 0.7, vel_err
    assert yaw_off[0] < 15.0  # (and it does face its way then)
    from motionmatch.runtime.offline import run_script

    plain = run_script(lafan, parse_script({"duration": 12.0, "events": SIDEWAYS_AND_BACK}), fps=30.0)
    yaw = quat.yaw_angle(plain.motion.world_rotations[:, 0])[30:]
    off_z = np.degrees(np.abs(np.angle(np.exp(1j * yaw))))  # angle from +Z
    assert off_z.mean() > 60.0, off_z.mean()
