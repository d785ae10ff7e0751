"""The ground under a captured motion (from its planted feet) and the ``ground_height``
feature term: known answers on a synthetic step, LAFAN1's platforms, existing schemas
unchanged, and a database that asks for the term plays flat data as one that does not."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import data_root
from motionmatch.anim import Motion
from motionmatch.database import MotionDatabase
from motionmatch.database.ground import FLOOR_DEADBAND, support_heights
from motionmatch.database.schema import SchemaError, default_schema, environment_schema, schema_by_name
from synthetic import walker


def standing_then_up(rise: float, n: int = 240, fps: float = 60.0) -> Motion:
    """The synthetic biped standing still, lifted by ``rise`` metres halfway (a step onto a box)."""
    m = walker(n=n, fps=fps, speed=0.0, name="step_up")
    tr = m.translations.copy()
    tr[n // 2:, 0, 1] += rise
    return Motion(m.skeleton, m.rotations, tr, fps, name="step_up")


def test_a_step_up_is_found_from_the_planted_feet():
    g = support_heights(standing_then_up(0.3))
    assert (g[:110] == 0.0).all()
    np.testing.assert_allclose(g[130:], 0.3, atol=1e-9)
    assert ((g[110:130] >= 0.0) & (g[110:130] <= 0.3 + 1e-9)).all()  # between the stances: in between
    assert (support_heights(standing_then_up(FLOOR_DEADBAND / 2)) == 0.0).all()  # a capture's noise is the floor


def test_gliding_feet_are_never_planted_and_give_the_floor():
    assert (support_heights(walker(n=120, speed=1.0)) == 0.0).all()


def test_lafan1_platforms_and_flat_takes():
    take = data_root() / "lafan1" / "obstacles1_subject1.bvh"
    flat = data_root() / "lafan1-60fps" / "walk1_subject1_walk2.bvh"
    if not take.exists() or not flat.exists():
        pytest.skip(f"LAFAN1 not found under {data_root()}; set MOTIONMATCH_DATA")
    from motionmatch.anim import load_bvh

    g = support_heights(load_bvh(take))
    assert 0.2 < (g > 0.3).mean() < 0.5  # about a third of the take is on platforms and boxes
    on = g[(g > 0.8) & (g < 1.2)]
    assert len(on) > 300 and abs(np.median(on) - 1.0) < 0.08  # the platforms about 1 m high
    assert (support_heights(load_bvh(flat)) == 0.0).all()


def test_existing_schemas_are_unchanged_and_ground_is_asked_for():
    for name, dims in (("classic", 27), ("classic-3d", 33), ("environment", 42), ("environment-heights", 48)):
        s = schema_by_name(name)
        assert s.dims == dims and not any(t.kind == "ground_height" for t in s.terms)
        g = schema_by_name(name + "+ground")
        assert g.dims == dims + 3 and g.name == name + "+ground"
        assert g.terms[:-1] == s.terms and g.term("ground_height").offsets == (1 / 3, 2 / 3, 1.0)
        assert type(g).from_json(g.to_json()) == g
    assert default_schema().with_ground().with_ground().dims == 30
    with pytest.raises(SchemaError, match=r"'\+ground'"):
        schema_by_name("nonsense+ground")


def test_ground_features_are_the_rise_along_the_trajectory():
    m = standing_then_up(0.3)
    db = MotionDatabase.build([m], schema=default_schema().with_ground())
    sl = db.schema.slice("ground_height")
    raw = db.raw_features[:, sl]
    g = support_heights(db.clip_motion(0))  # the clip as the database holds it (its root bone added)
    F = len(g)
    for k, frames in enumerate((20, 40, 60)):
        want = g[np.minimum(np.arange(F) + frames, F - 1)] - g
        np.testing.assert_allclose(raw[:F, k], want, atol=1e-6)  # (the database keeps poses in float32)
    assert raw[:, 2].max() == pytest.approx(0.3)  # 1 s before the step up
    env = MotionDatabase.build([m], schema=environment_schema(heights=True).with_ground())
    np.testing.assert_allclose(env.raw_features[:, env.schema.slice("ground_height")], raw)


def test_a_ground_schema_plays_flat_data_as_the_same_schema_without_it():
    from motionmatch.environment import parse_scenario
    from motionmatch.runtime.scenarios import run_scenario

    clips = [walker(n=240, speed=1.2), walker(n=240, speed=1.0, turn_rate=0.6, name="arc"),
             walker(n=240, speed=0.0, name="stand")]
    spec = {"duration": 3.0, "agents": [
        {"name": "a", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}, {"t": 1.5, "keys": ["d"]}]}},
        {"name": "b", "start": [2, 0], "goal": [2, 5], "speed": 1.2}]}
    runs = []
    for schema in (default_schema(), default_schema().with_ground()):
        db = MotionDatabase.build(clips, schema=schema)
        _world, rec = run_scenario(db, parse_scenario(spec, "s.json"))
        runs.append(rec)
    np.testing.assert_array_equal(runs[0].frames, runs[1].frames)
    np.testing.assert_array_equal(runs[0].root_positions, runs[1].root_positions)


def test_build_run_and_follow_with_a_ground_schema(tmp_path, data_dir):
    """``motionmatch build --schema classic+ground`` on LAFAN1's platform take, then ``run``
    and ``follow`` on it, as on any database."""
    import json

    from motionmatch.cli.main import main

    take = data_dir / "lafan1" / "obstacles1_subject1.bvh"
    if not take.exists():
        pytest.skip(f"{take} not found")
    db = tmp_path / "db.npz"
    assert main(["build", str(take), "--schema", "classic+ground", "-o", str(db), "--quiet"]) == 0
    loaded = MotionDatabase.load(db)
    assert loaded.schema.name == "classic+ground" and loaded.schema.dims == 30
    assert np.abs(loaded.raw_features[:, loaded.schema.slice("ground_height")]).max() > 0.5  # steps onto platforms
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 2.0, "events": [{"t": 0.0, "keys": ["w"]}]}))
    assert main(["run", "--db", str(db), "--input", str(script), "-o", str(tmp_path / "run.bvh")]) == 0
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"points": [[0, 0, 0], [2, 0, 2], [4, 2, 4]]}))
    assert main(["follow", "--db", str(db), "--path", str(path), "-o", str(tmp_path / "f.bvh")]) == 0
