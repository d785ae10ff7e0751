"""The ground stage (issue 31): characters on uneven ground, on the real data.

Each terrain run is compared with the same script on the flat floor (the metrics of
:mod:`motionmatch.metrics.ground`): feet at contacts on the surface, none in it, no more
foot skating than on the floor, the hips lowered where a foot must reach down; a flat
terrain given explicitly plays the very same frames as none; a ledge too high to step
is a wall."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.control.intent import Intent
from motionmatch.control.script import parse_script
from motionmatch.database import MotionDatabase
from motionmatch.environment.scene import Scene
from motionmatch.environment.terrain import FlatGround, HeightField
from motionmatch.metrics.feet import foot_skating
from motionmatch.metrics.ground import ground_report
from motionmatch.runtime.controller import Controller
from motionmatch.runtime.ground import GroundSettings, needs_ground
from motionmatch.runtime.offline import run_script

SCRIPT = {"events": [{"t": 0.0, "keys": ["w"]}, {"t": 5.0, "keys": ["s"]}, {"t": 10.0, "keys": []}],
          "duration": 11.0}
CELL = 0.25
AXIS = np.arange(-5.0, 15.0 + 1e-9, CELL)


def _field(h_of) -> HeightField:
    """A height field over x, z in [-5, 15] m from ``h_of(X, Z)``."""
    X, Z = np.meshgrid(AXIS, AXIS)
    return HeightField((AXIS[0], AXIS[0]), CELL, h_of(X, Z))


GRADE = np.tan(np.radians(15.0))
TERRAINS = {
    # 15 degrees up from z = 1 m for 2.5 m (0.67 m high), then a plateau; walked up and back down
    "ramp": _field(lambda X, Z: np.clip(Z - 1.0, 0.0, 2.5) * GRADE),
    "hills": _field(lambda X, Z: 0.4 * np.sin(X / 2.0) * np.sin(Z / 2.5)),
    # steps of 15 cm every 0.6 m from z = 1 m (four of them), walked up and back down
    "steps": _field(lambda X, Z: np.floor(np.clip(Z - 1.0, 0.0, 2.4) / 0.6) * 0.15),
    "bumpy": HeightField((-5.0, -5.0), 0.5, np.random.default_rng(0).uniform(0.0, 0.08, (41, 41))),
}


@pytest.fixture(scope="module")
def db(data_dir):
    from motionmatch.datasets import load_folder

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return MotionDatabase.build(load_folder(folder), mirror_copies=True)


def _measure(db, rec, terrain) -> dict:
    wp = rec.motion.world_positions
    out = ground_report(wp, rec.frames, db, terrain)
    out["skating"] = foot_skating(wp[:, list(db.foot_joints)], db.contacts[rec.frames], rec.motion.fps)
    return out


@pytest.fixture(scope="module")
def runs(db):
    script = parse_script(SCRIPT)
    flat = run_script(db, script)
    out = {"flat": (flat, _measure(db, flat, None))}
    for name, terrain in TERRAINS.items():
        rec = run_script(db, script, scene=Scene(terrain=terrain))
        out[name] = (rec, _measure(db, rec, terrain))
    return out


def test_no_terrain_and_flat_terrain_have_no_ground_stage():
    assert not needs_ground(None) and not needs_ground(FlatGround()) and needs_ground(TERRAINS["hills"])


def test_a_flat_terrain_plays_the_same_frames_as_none(db, runs):
    script = parse_script(SCRIPT)
    flat, _ = runs["flat"]
    given = run_script(db, script, scene=Scene(terrain=FlatGround()))
    np.testing.assert_array_equal(given.frames, flat.frames)
    np.testing.assert_array_equal(given.motion.rotations, flat.motion.rotations)
    np.testing.assert_array_equal(given.motion.translations, flat.motion.translations)


@pytest.mark.parametrize("name", list(TERRAINS))
def test_feet_stand_on_the_terrain_as_on_the_floor(runs, name):
    _, flat = runs["flat"]
    rec, m = runs[name]
    assert np.isfinite(rec.motion.world_positions).all()
    # contact feet at their floor heights above the surface: within 3 cm (p95), or within
    # 5 mm of the flat run's own (the measure's floor: the shown pose is the played frame's
    # blended by inertialization and foot locks, 2.9-3.3 cm on the floor with this script)
    assert m["foot_ground_error_m"] <= max(0.03, flat["foot_ground_error_m"] + 0.005), (m, flat)
    assert m["foot_penetration_m"] <= 0.03, m
    assert m["skating"] <= 1.5 * flat["skating"], (m, flat)


def test_the_root_climbs_the_ramp_and_comes_back_down(runs):
    rec, m = runs["ramp"]
    root = rec.motion.world_positions[:, 0]
    top = TERRAINS["ramp"].heights(root[:, [0, 2]])
    assert root[:, 1].max() > 0.5  # up on the plateau (0.67 m)
    # the root follows the ground under it within a few centimetres (the lower foot's reach)
    assert np.abs(root[:, 1] - top).max() < 0.15
    assert abs(root[-1, 1] - top[-1]) < 0.05
    assert m["hips_height_change"] < 0.0  # lowered to reach the lower foot, on average


def test_uphill_is_walked_slower_than_the_floor(runs):
    """Speed adapts to the slope: on the 15-degree ramp, going up (the first 5 s, +z), the
    root moves slower than the same script's on the floor over the same stretch of z."""
    def speed_between(rec, z0, z1):
        root = rec.motion.world_positions[: 5 * 60, 0]
        on = (root[:, 2] > z0) & (root[:, 2] < z1)
        v = np.linalg.norm(np.diff(root[:, [0, 2]], axis=0), axis=1) * rec.motion.fps
        return float(v[on[1:]].mean())
    up, flat = speed_between(runs["ramp"][0], 1.5, 3.0), speed_between(runs["flat"][0], 1.5, 3.0)
    assert up < 0.92 * flat, (up, flat)


def test_hips_lower_on_the_steps_so_the_lower_foot_reaches(runs):
    _, flat = runs["flat"]
    _, m = runs["steps"]
    assert m["hips_height_change"] < flat["hips_height_change"] - 0.002


def test_no_pose_pop_on_the_ramp(runs):
    """No joint's acceleration on the ramp above the flat run's p99 by far (the root's
    lift is damped and the feet blend in and out of contact)."""
    def p99(rec):
        wp = rec.motion.world_positions
        acc = np.linalg.norm(wp[2:] - 2 * wp[1:-1] + wp[:-2], axis=-1) * rec.motion.fps ** 2
        return np.percentile(acc, 99)
    assert p99(runs["ramp"][0]) <= 1.5 * p99(runs["flat"][0])


def test_a_ledge_too_high_to_step_is_a_wall_up_or_down(db):
    ledge = _field(lambda X, Z: np.where(Z > 2.0, 0.6, 0.0))
    script = parse_script({"events": [{"t": 0.0, "keys": ["w"]}], "duration": 6.0})
    rec = run_script(db, script, scene=Scene(terrain=ledge))
    root = rec.motion.world_positions[:, 0]
    assert root[:, 2].max() < 2.0  # stopped before it
    assert root[:, 1].max() < 0.1
    # and from the top: a 0.6 m drop is a ledge, stopped at too
    down = run_script(db, script, scene=Scene(terrain=_field(lambda X, Z: np.where(Z > 2.0, 0.0, 0.6))))
    root = down.motion.world_positions[:, 0]
    assert root[:, 2].max() < 2.0 and root[-1, 1] > 0.5


def test_a_controller_of_its_own_runs_the_same_stage(db):
    """``Controller.update`` (a world of one) puts its character on its batch's ground."""
    plateau = _field(lambda X, Z: np.full_like(X, 0.3))
    ctrl = Controller(db)
    ctrl.batch.set_terrain(plateau, GroundSettings())
    walk = Intent.planar(0.0, 1.0, "walk")
    for i in range(120):
        r = ctrl.update(0.0 if i == 0 else 1 / 60, walk)
    assert r.translations[0, 1] == pytest.approx(0.3, abs=0.02)
    flat = Controller(db)
    for i in range(120):
        f = flat.update(0.0 if i == 0 else 1 / 60, walk)
    assert f.translations[0, 1] == 0.0



def test_legs_left_without_ik_stay_within_a_tenth_of_a_millimetre(db):
    """A leg whose IK target is where the root's move put its ankle keeps its flat pose
    (``GroundSettings.ik_skip_m``: no IK on level ground, the cost of the stage): every
    joint of the same walk (walk, run, walk back; 800 frames) within 0.1 mm of the run
    that solves every leg, on level ground and on the steps' treads (bent legs only: a
    straight leg's IK swings its knee by up to half a millimetre)."""
    from motionmatch.anim.kinematics import forward_kinematics

    level = _field(lambda X, Z: np.zeros_like(X))
    intents = ([Intent.planar(0.0, 1.3, "walk")] * 300 + [Intent.planar(1.0, 0.5, "run")] * 200
               + [Intent.planar(-1.0, -1.0, "walk")] * 300)

    def joints(terrain, skip):
        ctrl = Controller(db)
        ctrl.batch.set_terrain(terrain, GroundSettings(ik_skip_m=skip))
        rot, pos = [], []
        for i, it in enumerate(intents):
            r = ctrl.update(0.0 if i == 0 else 1 / 60, it)
            rot.append(r.rotations.copy())
            pos.append(r.translations.copy())
        return forward_kinematics(db.skeleton.parents, np.array(rot), np.array(pos))[0]

    for terrain in (level, TERRAINS["steps"]):
        skipped, solved = joints(terrain, GroundSettings().ik_skip_m), joints(terrain, 0.0)
        assert np.isfinite(skipped).all()
        assert not np.array_equal(skipped, solved)  # (legs were skipped: the IK's float noise is not there)
        assert np.linalg.norm(skipped - solved, axis=-1).max() <= 1e-4



def test_a_mesh_ground_carries_the_character_as_its_height_field_does(db):
    """The stage takes any ground: the hills as a triangle mesh (their surface, two
    triangles a cell) lift the root as the height field does, within the triangles'
    departure from the bilinear surface (a few centimetres)."""
    from motionmatch.environment.terrain import TriangleMesh

    field = TERRAINS["hills"]
    mesh = TriangleMesh(*field.surface(margin=0.0))
    walk = Intent.planar(0.4, 1.2, "walk")

    def roots(terrain):
        ctrl = Controller(db)
        ctrl.batch.set_terrain(terrain)
        return np.array([ctrl.update(0.0 if i == 0 else 1 / 60, walk).translations[0].copy() for i in range(240)])

    on_field, on_mesh = roots(field), roots(mesh)
    assert np.ptp(on_field[:, 1]) > 0.2  # (up and down the hills)
    assert np.abs(on_mesh[:, 1] - on_field[:, 1]).max() < 0.04
    assert np.abs(on_mesh[:, 1] - field.heights(on_mesh[:, [0, 2]])).max() < 0.15


# --------------------------------------------------------------------------- the command line
def test_run_scene_walks_on_the_scenes_terrain_and_reports_the_ground(tmp_path, capsys):
    """``motionmatch run --scene FILE``: the script played on the scene's terrain, the
    report's ground keys measured on it (a synthetic walker database: quick)."""
    import json

    from motionmatch.cli.main import main
    from synthetic import walker

    db = MotionDatabase.build([walker(n=240, speed=1.2), walker(n=240, turn_rate=0.8, name="arc")])
    db_file = db.save(tmp_path / "db.npz")
    scene = tmp_path / "plateau.json"
    scene.write_text(json.dumps({"duration": 1.0, "terrain": {"height_field": {"origin": [-10, -10], "cell": 1.0,
                                                               "heights": [[0.25] * 21] * 21}}}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 2.0, "events": [{"t": 0, "keys": ["w"]}]}))
    out, report = tmp_path / "run.bvh", tmp_path / "r.json"
    assert main(["run", "--db", str(db_file), "--input", str(script), "--scene", str(scene), "-o", str(out),
                 "--report", str(report)]) == 0
    assert "on the ground" in capsys.readouterr().out
    r = json.loads(report.read_text())
    for key in ("foot_ground_error_m", "foot_penetration_m", "hips_height_change"):
        assert key in r
    assert r["foot_penetration_m"] <= 0.03
    root_y = load_bvh(out).world_positions[:, 0, 1]  # (metres, as loaded)
    assert root_y[-1] == pytest.approx(0.25, abs=0.02)  # on the plateau


def test_run_scene_with_a_bad_terrain_is_one_line_and_writes_nothing(tmp_path, capsys):
    import json

    from motionmatch.cli.main import main
    from synthetic import walker

    db_file = MotionDatabase.build([walker(n=240, speed=1.2)]).save(tmp_path / "db.npz")
    scene = tmp_path / "bad.json"
    scene.write_text(json.dumps({"duration": 1.0, "terrain": {"height_field": {"origin": [0, 0], "cell": 0.0,
                                                               "heights": [[0, 0], [0, 0]]}}}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 1.0, "events": [{"t": 0, "keys": ["w"]}]}))
    out = tmp_path / "run.bvh"
    assert main(["run", "--db", str(db_file), "--input", str(script), "--scene", str(scene), "-o", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cell" in err and "Traceback" not in err
    assert not out.exists()


# --------------------------------------------------------------------------- paths, crowds, +ground
def test_a_path_is_followed_on_the_hills_as_on_the_floor(db):
    from pathlib import Path

    from motionmatch.control.path import load_path
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    path = Path(__file__).resolve().parents[1] / "paths" / "s_curve.json"
    hills = Scene(terrain=TERRAINS["hills"])
    flat = follow_report(PathFollower(db, load_path(path), FollowSettings()).run(), None, db)
    f = PathFollower(db, load_path(path), FollowSettings(), scene=hills)
    rec = f.run()
    r = follow_report(rec, hills, db)
    assert r["completed"] and r["mean_distance_m"] <= 0.15, r
    root = rec.motion.world_positions[:, 0]
    assert np.abs(root[:, 1] - TERRAINS["hills"].heights(root[:, [0, 2]])).max() < 0.15  # on the hills
    assert r["foot_penetration_m"] <= 0.03
    assert r["foot_ground_error_m"] <= flat["foot_ground_error_m"] + 0.01, (r, flat)
    assert r["foot_skating_mps"] <= 1.5 * flat["foot_skating_mps"] + 1e-3


def test_a_path_follower_stops_at_a_ledge_and_walks_the_steps(db):
    """A drawn path across a 60 cm ledge (up or down) ends before it: the follower stops
    there, on its side, as a keyboard's character does; across 15 cm steps it is not cut
    and is walked to its end."""
    from motionmatch.control.path import TimedPath
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    t = np.linspace(0.0, 7.0, 50)
    path = TimedPath.from_samples(t, np.stack([np.zeros_like(t), 1.2 * t], axis=1))  # 8.4 m north
    for low, high in ((0.0, 0.6), (0.6, 0.0)):
        ledge = _field(lambda X, Z, low=low, high=high: np.where(Z > 4.0, high, low))
        f = PathFollower(db, path, FollowSettings(), scene=Scene(terrain=ledge))
        rec = f.run()
        root = rec.motion.world_positions[:, 0]
        assert f.ledge_m == pytest.approx(3.35, abs=0.1)  # (0.8 m before it rises 35 cm: the grid ramps from z = 4)
        assert 3.2 < root[:, 2].max() < 4.1  # (up to it, not over)
        assert np.abs(root[:, 1] - low).max() < 0.05  # on its own side
    f = PathFollower(db, path, FollowSettings(), scene=Scene(terrain=TERRAINS["steps"]))
    rec = f.run()
    root = rec.motion.world_positions[:, 0]
    assert f.ledge_m is None and root[:, 2].max() > 7.5 and root[-1, 1] > 0.5  # up the four steps (0.6 m)


def test_a_crowd_of_50_crosses_the_forest_as_it_crosses_the_floor(db):
    """The forest with 48 walkers, its hero and hiker (8 s), and the same without its
    terrain: collisions no worse than 1.5x, feet on the ground (no deeper than the flat
    crowd's toes dip below the floor, which is 15 cm: transitions), as close to it as on
    the floor."""
    import copy
    import json
    from pathlib import Path

    from motionmatch.environment import parse_scenario
    from motionmatch.metrics.scenario import scenario_report
    from motionmatch.runtime.scenarios import run_scenario

    d = json.loads((Path(__file__).resolve().parents[1] / "scenarios" / "forest.json").read_text())
    d["duration"] = 8.0
    d["groups"][0].update(count=48, area=[[-18.0, -19.0], [-6.0, -12.0]])
    for a in d["agents"]:
        if "script" in a:
            a["script"]["events"] = [e for e in a["script"]["events"] if e["t"] < d["duration"]]
    flat = copy.deepcopy(d)
    del flat["terrain"]
    reports = {}
    for name, dd in (("forest", d), ("flat", flat)):
        sc = parse_scenario(dd)
        world, rec = run_scenario(db, sc, record_poses=True)
        reports[name] = scenario_report(world, rec, sc)
    f, g = reports["flat"], reports["forest"]
    assert g["agents_count"] == 50
    assert g["collision_fraction"] <= 1.5 * f["collision_fraction"] + 0.005, (g["collision_fraction"],
                                                                               f["collision_fraction"])
    assert g["foot_penetration_m"] <= 0.03 and g["foot_ground_error_m"] <= f["foot_ground_error_m"] + 0.01


def test_a_ground_schema_query_carries_the_terrains_rise(data_dir):
    """With ``+ground`` features the query's ground heights are the terrain's: at each
    trajectory offset, the height under the desired position minus the height under the
    root (a 15-degree ramp: known answers)."""
    from motionmatch.anim import load_bvh
    from motionmatch.database import schema_by_name

    folder = data_dir / "lafan1-60fps"
    clips = [load_bvh(folder / f"{n}.bvh") for n in ("walk1_subject1_walk2",) if (folder / f"{n}.bvh").exists()]
    if not clips:
        pytest.skip("walk1_subject1_walk2.bvh not found")
    gdb = MotionDatabase.build(clips, schema=schema_by_name("classic+ground"))
    ramp = TERRAINS["ramp"]
    ctrl = Controller(gdb)
    ctrl.batch.set_terrain(ramp)
    walk = Intent.planar(0.0, 1.0, "walk")
    seen = 0
    for i in range(90):
        ctrl.update(0.0 if i == 0 else 1 / 60, walk, force_search=True)
        q, _, _ = ctrl.last_query
        sl = gdb.schema.slice(next(t.name for t in gdb.schema.terms if t.kind == "ground_height"))
        raw = q[sl].astype(np.float64) / gdb.weights[sl] * gdb.scale[sl] + gdb.mean[sl]
        pos = ctrl.last_desired.positions
        root = ctrl.root_pos
        want = ramp.heights(pos[:, [0, 2]]) - ramp.height(root[0], root[2])
        np.testing.assert_allclose(raw, want, atol=1e-4)
        seen += bool(np.abs(want).max() > 0.05)
    assert seen > 10  # (walking up the ramp: the rise is there to match)
