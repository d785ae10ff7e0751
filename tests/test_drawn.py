"""Drawn-trajectory control as the ETH paper has it (issue 33 item 1): the steering along a
drawing with known answers (nearest point, windows, laps, the route), its files and their
one-line errors, and on the real data (LAFAN1): the character goes to the drawing's
nearest point (not its start), follows it at the walking speed (Shift: the running speed),
goes round a closed drawing again and back to the start of an open one asked to loop, and
the keyboard takes over when a movement key is pressed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import REPO
from motionmatch.control.path import PathError, load_path
from motionmatch.control.path_steering import (
    Drawing,
    DrawnSteering,
    SteerSettings,
    load_drawing,
    nearest_on_polyline,
    parse_drawing,
)
from motionmatch.database import MotionDatabase
from motionmatch.runtime.drawn import PHASE_CODES, DrawnPathInput
from motionmatch.runtime.inputs import KeyboardInput


def line(x0, z0, x1, z1, n=50):
    s = np.linspace(0.0, 1.0, n)[:, None]
    return np.array([x0, z0]) * (1 - s) + np.array([x1, z1]) * s


def circle(cx, cz, r, n=120):
    a = np.linspace(0.0, 2 * math.pi, n)
    return np.stack([cx + r * np.sin(a), cz - r * np.cos(a)], axis=1)


# ----------------------------------------------------------------------------- known answers
def test_nearest_on_polyline_within_an_arc_window():
    pts = np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 4.0]])
    arc = np.array([0.0, 4.0, 8.0])
    assert np.allclose(nearest_on_polyline(pts, arc, 1.5, 2.0, 0.0, 8.0), (1.5, 2.0))
    assert np.allclose(nearest_on_polyline(pts, arc, 5.0, 3.0, 0.0, 8.0), (7.0, 1.0))
    # the window keeps the answer on its part of the line (clamped to it)
    assert np.allclose(nearest_on_polyline(pts, arc, 5.0, 3.0, 0.0, 2.0), (2.0, math.hypot(3.0, 3.0)))
    assert np.allclose(nearest_on_polyline(pts, arc, 1.5, 2.0, 5.0, 8.0), (6.0, 2.5))  # (4, 2), not (1.5, 0)


def test_a_drawing_knows_whether_it_is_closed_and_its_lap():
    open_ = Drawing(line(-4, 3, 4, 3))
    assert not open_.closed and not open_.loops and abs(open_.length - 8.0) < 1e-9
    assert abs(open_.lap - 8.0) < 1e-9
    ring = Drawing(circle(0, 4, 2)[:-2])  # its end a few centimetres short of its start: closed
    assert ring.closed and ring.loops and abs(ring.lap - 2 * math.pi * 2) < 0.05
    back = Drawing(line(0, 1, 0, 4), SteerSettings(loop=True))  # open, asked to loop: straight back
    assert back.loops and not back.closed and abs(back.lap - 6.0) < 1e-6
    assert np.allclose(back.point_at(4.5), [0.0, 2.5])  # 1.5 m into the way back
    assert not Drawing(circle(0, 4, 2), SteerSettings(loop=False)).loops


def test_the_steering_heads_for_the_nearest_point_then_along_the_drawing():
    d = Drawing(line(-4, 3, 4, 3))
    s = DrawnSteering(d)
    st = s.steer([0.0, 0.0], 1.0, [1 / 3, 2 / 3, 1.0])
    assert np.allclose(s.entry, [0.0, 3.0]) and abs(s.entry_arc - 4.0) < 1e-9
    assert st.phase == "approach" and np.allclose(st.velocity, [0.0, 1.0])  # straight to (0, 3), not to (-4, 3)
    assert np.allclose(st.positions[:, 0], 0.0) and np.allclose(st.positions[:, 1], [1 / 3, 2 / 3, 1.0])
    st = s.steer([0.0, 2.6], 1.0, [1 / 3, 2 / 3, 1.0])  # within the capture radius: following
    assert st.phase == "follow" and st.velocity[0] > 0.8  # toward +x, the way the line was drawn
    assert np.allclose(st.directions[-1], [1.0, 0.0], atol=1e-6)
    for x in np.arange(0.0, 4.01, 0.25):
        st = s.steer([x, 3.0], 1.0, [1 / 3, 2 / 3, 1.0])
    assert st.phase == "done" and not np.any(st.velocity) and not np.any(st.speeds)


def test_a_closed_drawing_counts_its_laps_and_a_self_crossing_one_is_followed_in_order():
    ring = Drawing(circle(0, 4, 2))
    s = DrawnSteering(ring)
    for a in np.linspace(0.0, 4 * math.pi + 0.3, 400):  # twice round, along the drawing
        s.steer([2 * math.sin(a), 4 - 2 * math.cos(a)], 1.0, [0.5])
    assert s.phase == "follow" and s.laps == 2
    # a figure eight crosses itself at (0, 4): passing there keeps the progress where it was
    t = np.linspace(0.0, 2 * math.pi, 200)
    eight = np.stack([2 * np.sin(t), 4 + np.sin(2 * t)], axis=1)
    s8 = DrawnSteering(Drawing(eight, SteerSettings(loop=False)))
    for k in range(0, 120):
        s8.steer(eight[k], 1.0, [0.5])
    assert 0.55 * Drawing(eight).length < s8.progress < 0.65 * Drawing(eight).length


@pytest.mark.parametrize("points, message", [
    ([[0, 0]], "at least two distinct points"),
    ([[0, 0], [0.1, 0]], "draw at least 0.3 m"),
    ([[0, 0], [float("nan"), 1]], "drawing point 1 is not finite"),
    ([[0, 0], [5000, 0]], "must be within"),
])
def test_a_bad_drawing_is_one_line(points, message):
    with pytest.raises(PathError, match=message) as e:
        Drawing(points)
    assert "\n" not in str(e.value)


def test_steer_settings_refuse_bad_values():
    with pytest.raises(ValueError, match="speed must be within"):
        SteerSettings(speed=0.0)
    with pytest.raises(ValueError, match="lookahead must be within"):
        SteerSettings(lookahead=float("nan"))


# ----------------------------------------------------------------------------- files
def test_the_shipped_drawing_files_read_and_timed_readers_refuse_them():
    f = load_drawing(REPO / "paths" / "drawn" / "loop.json")
    assert f.drawing.closed and f.drawing.loops and not f.run
    o = load_drawing(REPO / "paths" / "drawn" / "open.json")
    assert not o.drawing.loops and abs(o.seconds([0, 0], 1.0) - (1.25 * (o.drawing.nearest([0, 0])[1]
                                                                        + o.drawing.length) + 3.0)) < 1e-9
    with pytest.raises(PathError, match='"control" is \'drawn\''):
        load_path(REPO / "paths" / "drawn" / "loop.json")


@pytest.mark.parametrize("change, message", [
    ({"control": "steer"}, '"control" must be "timed"'),
    ({"loop": "yes"}, '"loop" must be true or false, or null'),
    ({"run": 1}, '"run" must be true or false'),
    ({"speed": -1}, '"speed" must be a speed within 0.1 and 12 m/s'),
    ({"duration": 0}, '"duration" must be a number of seconds'),
    ({"points": [[0, 0], [1, 0, 2]]}, '"points" must all be'),
    ({"points": [[0, 0], [1, "a"]]}, '"points" must hold numbers only'),
    ({"extra": 1}, "unknown field"),
])
def test_a_bad_drawing_file_is_one_line_naming_the_file_and_field(tmp_path, change, message):
    doc = {"control": "drawn", "points": [[0, 0], [0, 2], [1, 3]], **change}
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(PathError) as e:
        load_drawing(f)
    assert message in str(e.value) and str(e.value).startswith(str(f)) and "\n" not in str(e.value)


def test_parse_drawing_takes_timed_points_and_the_settings():
    f = parse_drawing({"control": "drawn", "points": [[0.0, 0, 1], [1.0, 0, 3]], "loop": True, "run": True,
                       "speed": 1.1, "duration": 12})
    assert f.run and f.drawing.loops and f.settings.speed == 1.1 and f.duration == 12.0
    assert np.allclose(f.drawing.points[0], [0.0, 1.0])  # (the times unread)


# ----------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def lafan(data_dir):
    from motionmatch.datasets import load_folder

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return MotionDatabase.build(load_folder(folder), mirror_copies=True)


FPS = 30.0


def drive(db, source, seconds, *, start=(0.0, 0.0), at=None):
    """Step one agent driven by ``source`` for ``seconds``; ``at(t, source)`` is called
    before each step. Returns the root ground positions ``[F, 2]`` and phase codes ``[F]``."""
    from motionmatch.runtime.world import World

    world = World(db, environment=False, agents_as_obstacles=False, stagger=False, record_poses=False, fps=FPS)
    agent = world.add_agent("drawn", start, (0.0, 1.0))
    agent.source = source
    roots = []
    for i in range(round(seconds * FPS)):
        if at is not None:
            at(i / FPS, source)
        world.step(0.0 if i == 0 else 1.0 / FPS)
        roots.append(agent.ctrl.root_pos[[0, 2]].copy())
    return np.array(roots), np.array(source.phases)


def follow_speed(roots, phases, settle=1.0):
    fol = np.flatnonzero(phases == PHASE_CODES.index("follow"))
    fol = fol[fol >= fol[0] + round(settle * FPS)]
    fol = fol[fol < len(roots) - 1]
    return float(np.mean(np.linalg.norm(roots[fol + 1] - roots[fol], axis=1)) * FPS)


def test_the_character_goes_straight_to_the_nearest_point_not_the_start(lafan):
    from motionmatch.geometry.polyline import distance_to_path

    drawing = line(-6, 3, 6, 3, 100)  # drawn from (-6, 3): its nearest point to the origin is (0, 3)
    src = DrawnPathInput(drawing, record_phases=True)
    roots, _ = drive(lafan, src, 6.0)
    d = distance_to_path(np.insert(roots, 1, 0.0, axis=1), np.insert(drawing, 1, 0.0, axis=1))
    first = roots[np.flatnonzero(d <= 0.35)[0]]
    reached = Drawing(drawing).point_at(Drawing(drawing).nearest(first)[0])
    assert np.allclose(src.steering.entry, [0.0, 3.0], atol=1e-6)
    assert np.hypot(*(reached - [0.0, 3.0])) < 0.5, reached  # where the drawing is nearest (its start: 6 m off)
    assert np.abs(roots[: np.flatnonzero(d <= 0.35)[0], 0]).max() < 0.6  # straight there: x stays near 0


def test_it_follows_at_the_walking_speed_and_runs_with_shift(lafan):
    from motionmatch.runtime.modes import gait_speeds_from_database

    g = gait_speeds_from_database(lafan)
    drawing = line(0, 1, 0, 40, 200)
    walk = DrawnPathInput(drawing, record_phases=True)
    v_walk = follow_speed(*drive(lafan, walk, 10.0))
    keys = KeyboardInput(g)
    keys.set_keys(["shift"])
    run = DrawnPathInput(drawing, keys=keys, record_phases=True)
    roots, phases = drive(lafan, run, 10.0)
    v_run = follow_speed(roots, phases)
    assert abs(v_walk - g.walk) < 0.15 * g.walk, (v_walk, g.walk)
    assert abs(v_run - g.run) < 0.2 * g.run, (v_run, g.run)
    assert v_run > 1.6 * v_walk
    assert not run.handed_over  # Shift alone does not take over
    # constant: the speed in 1 s windows stays within 20% of its mean
    fol = np.flatnonzero(phases == PHASE_CODES.index("follow"))[30:-1]
    sp = np.linalg.norm(roots[fol + 1] - roots[fol], axis=1) * FPS
    win = sp[: len(sp) // 30 * 30].reshape(-1, 30).mean(axis=1)
    assert np.all(np.abs(win - win.mean()) < 0.2 * win.mean()), win


def test_a_closed_drawing_loops_and_an_open_one_asked_to_goes_back_to_its_start(lafan):
    ring = circle(0, 3, 1.6)  # 10 m round, started at (0, 1.4)
    src = DrawnPathInput(ring, run=True, record_phases=True)
    roots, phases = drive(lafan, src, 14.0)
    assert src.drawing.closed and src.steering.laps >= 1 and src.phase == "follow"
    r = np.hypot(roots[:, 0], roots[:, 1] - 3.0)
    fol = phases == PHASE_CODES.index("follow")
    assert np.abs(r[fol] - 1.6).mean() < 0.25, np.abs(r[fol] - 1.6).mean()
    back = DrawnPathInput(line(0, 1, 0, 4, 30), SteerSettings(loop=True), record_phases=True)
    roots, _ = drive(lafan, back, 14.0)
    far = int(np.argmax(roots[:, 1]))
    assert roots[far, 1] > 3.4  # reached the end (the U-turn cut by the lookahead) ...
    assert roots[far:, 1].min() < 1.5 and back.steering.laps >= 1  # ... and came back to the start
    stay = DrawnPathInput(line(0, 1, 0, 4, 30), record_phases=True)
    roots, _ = drive(lafan, stay, 10.0)
    assert stay.phase == "done" and roots[-1, 1] > 3.4  # not asked to loop: it stands at the end


def test_the_keyboard_takes_over_when_a_movement_key_is_pressed(lafan):
    keys = KeyboardInput(camera_yaw=0.0)
    src = DrawnPathInput(line(-6, 3, 6, 3, 100), keys=keys, record_phases=True)

    def press(t, s):
        if abs(t - 4.0) < 1e-6:
            keys.set_keys(["s"])  # back, toward -z (camera yaw 0)

    roots, phases = drive(lafan, src, 7.0, at=press)
    k = round(4.0 * FPS)
    assert src.handed_over and src.phase == "keyboard" and phases[k] == PHASE_CODES.index("keyboard")
    assert (phases[:k] != PHASE_CODES.index("keyboard")).all()
    assert roots[-1, 1] < roots[k, 1] - 1.0  # it walked away from the line, as the key said


def test_motionmatch_follow_plays_a_drawn_file_and_reports_it(lafan, tmp_path, capsys):
    from motionmatch.cli.main import main

    db = lafan.save(tmp_path / "lafan.npz")
    out, report = tmp_path / "drawn.bvh", tmp_path / "drawn.json"
    assert main(["follow", "--db", str(db), "--path", str(REPO / "paths" / "drawn" / "open.json"), "-o", str(out),
                 "--report", str(report), "--fps", "30"]) == 0
    r = json.loads(report.read_text())
    assert out.stat().st_size > 0 and r["phase"] == "done" and not r["loops"]
    assert r["first_reached_to_entry_m"] < 0.5 and r["start_to_entry_m"] > 2.0
    assert r["mean_distance_m"] < 0.2 and r["speed_cv"] < 0.2
    # a timed file and a drawn one in one run: refused in one line, nothing written
    out2 = tmp_path / "mixed.bvh"
    assert main(["follow", "--db", str(db), "--path", str(REPO / "paths" / "drawn" / "open.json"), "--path",
                 str(REPO / "paths" / "circle.json"), "-o", str(out2)]) == 1
    assert "either timed paths or" in capsys.readouterr().err and not out2.exists()


def test_holding_q_while_following_strafes_along_the_drawing(lafan):

    keys = KeyboardInput(camera_yaw=0.0)
    keys.set_keys(["q"])  # strafe: face +Z while following a line toward +X
    src = DrawnPathInput(line(0, 0.3, 12, 0.3, 100), keys=keys, record_phases=True)
    from motionmatch.runtime.world import World

    world = World(lafan, environment=False, agents_as_obstacles=False, stagger=False, record_poses=False, fps=FPS)
    agent = world.add_agent("drawn", (0.0, 0.0), (0.0, 1.0))
    agent.source = src
    yaws, xs = [], []
    for i in range(round(8 * FPS)):
        world.step(0.0 if i == 0 else 1.0 / FPS)
        yaws.append(agent.ctrl.root_yaw)
        xs.append(agent.ctrl.root_pos[0])
    want = src.intent(agent, 8.0, 0.0)
    assert np.allclose(want.intent.facing, [0, 0, 1]) and np.allclose(want.desired.directions[:, 2], 1.0)
    off = np.degrees(np.abs(np.angle(np.exp(1j * np.array(yaws[60:])))))  # from +Z, after 2 s
    assert off.mean() < 20.0, off.mean()  # facing +Z ...
    # ... while it sidesteps along the line (slower than it walks: 2.7 m in 8 s here; Q does not take over)
    assert xs[-1] > 2.0 and not src.handed_over
