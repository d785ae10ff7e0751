"""The feature database: features with known answers, normalisation, weights, tags, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.database import (
    DatabaseError,
    FeatureTerm,
    MotionDatabase,
    SchemaError,
    TagQueryError,
    default_schema,
)
from motionmatch.datasets import load_folder
from synthetic import walker


def test_default_schema_sizes():
    assert default_schema().dims == 27
    assert default_schema(vertical=True).dims == 33
    with pytest.raises(SchemaError):
        FeatureTerm("x", "bone_position")  # no joints
    with pytest.raises(SchemaError):
        FeatureTerm("x", "trajectory_position", offsets=(-1.0,))


def test_features_of_a_straight_walk_have_known_values():
    db = MotionDatabase.build([walker(speed=1.2, heading=0.7)], fps=60)
    s = db.schema
    f = db.raw_features[10]
    # In the character frame, the future root positions lie straight ahead at speed * t.
    np.testing.assert_allclose(f[s.slice("trajectory_position")], [0, 0.4, 0, 0.8, 0, 1.2], atol=1e-5)
    np.testing.assert_allclose(f[s.slice("trajectory_direction")], [0, 1, 0, 1, 0, 1], atol=1e-6)
    # hips move forward at 1.2 m/s; the left foot is on the character's left (+X)
    np.testing.assert_allclose(f[s.slice("hip_velocity")], [0, 0, 1.2], atol=1e-5)
    left = f[s.slice("foot_position")][:3]
    assert left[0] > 0.05
    # Frames whose future (1 s = 60 frames) runs past the end are not valid.
    assert db.valid.sum() == 180 - 60 and not db.valid[-60:].any()


def test_normalisation_and_weights():
    clips = [walker(speed=s, heading=h, name=f"walk_{i}") for i, (s, h) in enumerate([(1.0, 0), (2.0, 1), (0.5, 2)])]
    db = MotionDatabase.build(clips)
    sl = db.schema.slice("trajectory_position")
    raw = db.raw_features.astype(float)
    expect = (raw[:, sl] - raw[:, sl].mean(0)) / raw[:, sl].std(0).mean() * 1.0
    np.testing.assert_allclose(db.features[:, sl], expect, rtol=1e-4, atol=1e-5)
    # Paper's weighted loss: 0.8 trajectory, 0.2 pose, as squared-distance weights.
    db.set_weights({t.name: 1.0 for t in db.schema.terms}, responsiveness=0.8, continuity=0.2)
    q = db.features[5].copy()
    costs = db.group_costs(q + 1.0 * db.weights, 5)
    np.testing.assert_allclose(costs["trajectory_position"], 0.8 * 6, rtol=1e-5)
    np.testing.assert_allclose(costs["foot_position"], 0.2 * 6, rtol=1e-5)
    with pytest.raises(Exception, match="no feature term"):
        db.set_weights({"nope": 1.0})


def test_compiled_normalisation_is_numpys_to_the_last_bit():
    from motionmatch.database._normalise import column_mean_std, normalized

    rng = np.random.default_rng(3)
    raw = (rng.normal(size=(5003, 7)) * [1e-3, 1, 50, 1e4, 0.1, 3, 7] + [0, 100, -3, 1e5, 0, 0, 2]).astype(np.float32)
    raw[:, 6] = 2.0  # a constant column
    x = raw.astype(np.float64)
    mean, std = column_mean_std(raw)
    assert np.array_equal(mean, x.mean(axis=0)) and np.array_equal(std, x.std(axis=0))
    scale, weights = rng.uniform(0.1, 3, 7), rng.uniform(0, 2, 7)
    assert np.array_equal(normalized(raw, mean, scale, weights), ((x - mean) / scale * weights).astype(np.float32))


def test_tag_queries():
    clips = [walker(name="a", tags=("walk",)), walker(name="b", tags=("run",)), walker(name="c", tags=("dance", "walk"))]
    db = MotionDatabase.build(clips)
    clip_ok = lambda q: sorted({db.clip_of(i) for i in np.flatnonzero(db.mask(q))})  # noqa: E731
    assert clip_ok("walk") == [0, 2]
    assert clip_ok("walk | run") == [0, 1, 2]
    assert clip_ok("!dance") == [0, 1]
    assert clip_ok("walk & !dance") == [0]
    assert clip_ok("(run | dance) walk") == [2]
    assert clip_ok("*") == [0, 1, 2]
    for bad in ("walk |", "(walk", "wlak", "walk $"):
        with pytest.raises(TagQueryError):
            db.mask(bad)
    # the engine's own queries name tags some data lack: there, a tag no clip has
    lenient = lambda q: sorted({db.clip_of(i) for i in np.flatnonzero(db.mask(q, strict=False))})  # noqa: E731
    assert lenient("!dance & !creep & !punch") == [0, 1] and lenient("creep | run") == [1]
    with pytest.raises(TagQueryError):
        db.mask("walk $", strict=False)  # not a query at all: still an error


def test_save_load_roundtrip_and_corruption(tmp_path):
    db = MotionDatabase.build([walker(), walker(name="b", heading=1.0)], mirror_copies=True)
    assert len(db.clip_names) == 4 and "mirrored" in db.tags
    p = db.save(tmp_path / "db.npz")
    db2 = MotionDatabase.load(p)
    np.testing.assert_array_equal(db2.features, db.features)
    assert db2.clip_tags == db.clip_tags and db2.skeleton.names == db.skeleton.names
    with pytest.raises(DatabaseError, match="stale"):
        MotionDatabase.load(p, expect_hash="0" * 64)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    with pytest.raises(DatabaseError, match="corrupt"):
        MotionDatabase.load(bad)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(DatabaseError, match="not a motionmatch database"):
        MotionDatabase.load(other)
    with pytest.raises(DatabaseError, match="build"):
        MotionDatabase.load(tmp_path / "missing.npz")


def test_mixed_skeletons_are_refused(data_dir):
    a = walker()
    from motionmatch.anim import load_bvh

    b = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh")
    with pytest.raises(DatabaseError, match="different skeleton"):
        MotionDatabase.build([a, b])


def test_lafan_database(data_dir):
    clips = load_folder(data_dir / "lafan1-60fps")
    db = MotionDatabase.build(clips, mirror_copies=True)
    assert db.num_frames == 2 * sum(c.num_frames for c in clips)
    assert db.features.dtype == np.float32 and db.features.flags.c_contiguous
    # no valid frame's future crosses its clip's end
    ends = db.clip_stops[db.frame_clip] - 1
    idx = np.flatnonzero(db.valid)
    assert np.all(idx + 60 <= ends[idx])
    # canonical root: on the ground, yaw only
    assert np.abs(db.translations[:, 0, 1]).max() < 1e-6
    assert np.abs(db.rotations[:, 0, [1, 3]]).max() < 1e-6
    # forward locomotion dominates: mean future direction points ahead
    sl = db.schema.slice("trajectory_direction")
    assert db.raw_features[db.valid, sl][:, 1].mean() > 0.5
    # mirrored copies mirror the lateral features
    walk = db.clip_names.index("walk1_subject1_walk2")
    mir = db.clip_names.index("walk1_subject1_walk2_mirrored")
    a = db.raw_features[db.clip_starts[walk]: db.clip_stops[walk]]
    b = db.raw_features[db.clip_starts[mir]: db.clip_stops[mir]]
    tp = db.schema.slice("trajectory_position")
    np.testing.assert_allclose(b[:, tp][:, 0::2], -a[:, tp][:, 0::2], atol=1e-4)
    np.testing.assert_allclose(b[:, tp][:, 1::2], a[:, tp][:, 1::2], atol=1e-4)


def test_cached_rebuilds_stale_or_corrupt_files(tmp_path):
    p = tmp_path / "cache.npz"
    clips = [walker(), walker(name="b", heading=1.0)]
    db = MotionDatabase.cached(p, clips)
    assert p.exists()
    again = MotionDatabase.cached(p, clips)  # loads: same inputs
    np.testing.assert_array_equal(again.features, db.features)
    with pytest.warns(UserWarning, match="stale"):
        other = MotionDatabase.cached(p, clips[:1])  # other inputs: rebuilt
    assert len(other.clip_names) == 1
    p.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="corrupt"):
        fixed = MotionDatabase.cached(p, clips)
    assert len(fixed.clip_names) == 2
