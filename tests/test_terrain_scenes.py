"""Terrain in scenario files and ``follow --scene`` files: parsed, validated, kept on the
scenario and its scene; the forest scene; no terrain (or the flat one) is today's floor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from motionmatch.environment import (
    FlatGround,
    HeightField,
    ScenarioError,
    load_scenario,
    parse_scenario,
)
from synthetic import walker

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"
HILL = {"height_field": {"origin": [-2.0, -2.0], "cell": 1.0, "heights": [[0.0, 0.1, 0.2], [0.1, 0.2, 0.3],
                                                                          [0.2, 0.3, 0.4]]}}


def _scenario(**extra) -> dict:
    return {"duration": 1.0, "agents": [{"start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}}],
            **extra}


def test_a_scenario_keeps_its_terrain_on_itself_and_its_scene():
    sc = parse_scenario(_scenario(terrain=HILL), "s.json")
    assert isinstance(sc.terrain, HeightField)
    assert sc.scene().terrain is sc.terrain
    assert sc.terrain.height(-1.0, -1.0) == pytest.approx(0.2)
    again = parse_scenario(json.loads(json.dumps(sc.to_dict())), "s.json")  # saved and read back
    np.testing.assert_array_equal(again.terrain.grid, sc.terrain.grid)


def test_no_terrain_is_none_and_changes_nothing():
    sc = parse_scenario(_scenario(), "s.json")
    assert sc.terrain is None and sc.scene().terrain is None
    assert "terrain" not in sc.to_dict()
    for f in SCENARIOS.glob("*.json"):
        if f.stem != "forest":
            assert load_scenario(f).terrain is None, f.name


def test_bad_terrain_in_a_scenario_names_the_file_and_field(tmp_path):
    cases = {
        "cell": ({"height_field": {**HILL["height_field"], "cell": 0}}, "terrain.height_field.cell must be between"),
        "ragged": ({"height_field": {**HILL["height_field"], "heights": [[0, 1], [0]]}},
                   "terrain.height_field.heights[1] has 1 values"),
        "type": ("hills", "terrain must be an object"),
        "mesh": ({"mesh": "nowhere.glb"}, "terrain.mesh: no file 'nowhere.glb'"),
    }
    for name, (terrain, message) in cases.items():
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps(_scenario(terrain=terrain)))
        with pytest.raises(ScenarioError) as e:
            load_scenario(f)
        assert str(e.value).startswith(f"{f}: {message}"), str(e.value)
        assert "\n" not in str(e.value)


def test_a_follow_scene_may_be_terrain_alone_and_read_its_files_beside_it(tmp_path):
    """``motionmatch follow --scene`` reads scenario files without agents: a terrain alone
    is a scene; a mesh file is read from the scene file's folder."""
    (tmp_path / "ground.obj").write_text("v -5 0.2 -5\nv 5 0.2 -5\nv 5 0.2 5\nv -5 0.2 5\nf 1 4 3 2\n")
    f = tmp_path / "scene.json"
    f.write_text(json.dumps({"duration": 10.0, "terrain": {"mesh": "ground.obj"}}))
    sc = load_scenario(f, agents_required=False)
    assert sc.agents == [] and sc.terrain.height(1.0, 1.0) == pytest.approx(0.2)
    assert sc.scene().terrain is sc.terrain


def test_explicit_flat_terrain_plays_the_same_frames_as_none():
    from motionmatch.database import MotionDatabase
    from motionmatch.runtime.scenarios import run_scenario

    db = MotionDatabase.build([walker(n=240, speed=1.2), walker(n=240, speed=1.0, turn_rate=0.6, name="arc")])
    runs = []
    for terrain in (None, {"flat": {}}):
        spec = _scenario(duration=2.0, **({"terrain": terrain} if terrain else {}))
        spec["agents"].append({"name": "b", "start": [2, 0], "goal": [2, 5], "speed": 1.2})
        sc = parse_scenario(spec, "s.json")
        assert (sc.terrain is None) == (terrain is None)
        if terrain:
            assert isinstance(sc.terrain, FlatGround)
        world, rec = run_scenario(db, sc)
        assert world.scene.terrain is sc.terrain  # the world keeps its scenario's ground (none here: no obstacle)
        runs.append(rec)
    np.testing.assert_array_equal(runs[0].root_positions, runs[1].root_positions)


# ----------------------------------------------------------------------------- the forest
def _forest_module():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import make_forest
    finally:
        sys.path.pop(0)
    return make_forest


def test_the_forest_loads_with_hills_trees_logs_and_a_ledge():
    sc = load_scenario(SCENARIOS / "forest.json")
    t = sc.terrain
    assert isinstance(t, HeightField) and t.shape == (105, 97) and t.cell == 0.5
    assert sc.scene().terrain is t
    # slopes: at most about 15 degrees everywhere but the ledge (sampled on a fine grid)
    lo, hi = t.bounds()
    gx, gz = np.meshgrid(np.linspace(lo[0], hi[0], 400), np.linspace(lo[1], hi[1], 400))
    pts = np.stack([gx.ravel(), gz.ravel()], 1)
    led = sc.regions["ledge"]
    away = ~((pts[:, 1] > led["z"][0]) & (pts[:, 1] < led["z"][1]))
    slope = np.degrees(np.arccos(t.normals(pts[away])[:, 1]))
    assert 8.0 < slope.max() <= 15.5
    # the ramp climbs to a plateau 2 m up, then a 0.6 m ledge down
    x = 12.0
    assert t.height(x, 2.0) == pytest.approx(0.0, abs=0.01)
    assert t.height(x, 15.4) == pytest.approx(2.0, abs=0.01)
    assert t.height(x, 15.5) - t.height(x, 16.0) == pytest.approx(0.6, abs=0.01)
    trees = [o for o in sc.obstacles if o.shape == "disk"]
    logs = [o for o in sc.obstacles if o.shape == "box"]
    assert len(trees) == 60 and len(logs) == 3
    centres = np.array([o.center for o in trees])
    base = t.heights(centres)
    assert np.all(np.array([o.height[0] for o in trees]) < base)  # trunks reach into the ground
    gaps = np.linalg.norm(centres[:, None] - centres[None], axis=-1) + np.eye(len(trees)) * 99
    assert gaps.min() >= 2.5
    for o in logs:  # lying on the ground, 0.35 m above it
        assert o.height[1] - t.height(*o.center) == pytest.approx(0.35, abs=1e-3)
    assert len(sc.agents) == 10 and sc.expect and sc.description


def test_the_forest_file_is_what_its_script_writes():
    M = _forest_module()
    d = M.forest()
    f = json.loads((SCENARIOS / "forest.json").read_text())
    assert f["obstacles"] == d["obstacles"] and f["agents"] == d["agents"]
    np.testing.assert_array_equal(np.array(f["terrain"]["height_field"]["heights"]),
                                  np.array(d["terrain"]["height_field"]["heights"]))
