"""Keypoint streams, files, name mapping, normalisation and resampling (no motion data needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.control.pose.classify import resample_stream
from motionmatch.control.pose.keypoints import (
    COCO17,
    KEYPOINTS,
    KP,
    KeypointError,
    KeypointStream,
    canonical_name,
    concatenate_streams,
    load_keypoints,
    save_keypoints,
)
from motionmatch.control.pose.normalize import normalize_stream
from test_pose_common import standing_pose, synthetic_stream


@pytest.mark.parametrize(("name", "want"), [
    ("left_shoulder", "left_shoulder"), ("LShoulder", "left_shoulder"), ("RIGHT_KNEE", "right_knee"),
    ("shoulder_l", "left_shoulder"), ("RHip", "right_hip"), ("LeftHand", "left_wrist"), ("nose", "nose"),
    ("left_eye", None), ("left_heel", None), ("left_foot_index", None), ("MidHip", None), ("Neck", None),
])
def test_canonical_names(name, want):
    assert canonical_name(name) == want


def test_canonical_reorders_and_fills_missing():
    T = 3
    kp = np.arange(T * 17 * 2, dtype=float).reshape(T, 17, 2)
    s = KeypointStream(np.arange(T) / 30, kp, COCO17)
    c = s.canonical()
    assert c.names == KEYPOINTS
    np.testing.assert_array_equal(c.keypoints[:, KP["left_hip"]], kp[:, COCO17.index("left_hip")])
    np.testing.assert_array_equal(c.keypoints[:, KP["nose"]], kp[:, 0])
    s2 = KeypointStream(np.arange(T) / 30, kp[:, 5:], COCO17[5:])  # no nose
    assert np.isnan(s2.canonical().keypoints[:, KP["nose"]]).all()
    with pytest.raises(KeypointError, match="left_hip"):
        KeypointStream(np.arange(T) / 30, kp[:, :11], COCO17[:11]).canonical()


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_file_roundtrip(tmp_path, suffix):
    s = synthetic_stream(12)
    s.keypoints[3, KP["left_wrist"]] = np.nan
    s.confidence = np.full((12, len(KEYPOINTS)), 0.9)
    s.labels = np.array(["walk_forward"] * 6 + [""] * 6)
    s.meta = {"who": "test", "fps": 30}
    s.image_size = (640, 480)
    back = load_keypoints(save_keypoints(s, tmp_path / f"k{suffix}"))
    np.testing.assert_allclose(back.times, s.times, atol=1e-6)
    np.testing.assert_allclose(back.keypoints, s.keypoints, atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(back.confidence, s.confidence, atol=1e-4)
    assert back.names == s.names and list(back.labels) == list(s.labels)
    assert back.meta == s.meta and back.image_size == (640, 480) and back.y_down


def test_json_format_is_documented_shape(tmp_path):
    s = synthetic_stream(3)
    d = json.loads(save_keypoints(s, tmp_path / "k.json").read_text())
    assert d["format"] == "motionmatch-keypoints" and d["version"] == 1
    assert len(d["times"]) == 3 and len(d["keypoints"][0]) == len(KEYPOINTS) and len(d["keypoints"][0][0]) == 2
    d["keypoints"][1][0] = [None, None]   # a missing keypoint is null
    (tmp_path / "m.json").write_text(json.dumps(d))
    assert np.isnan(load_keypoints(tmp_path / "m.json").keypoints[1, 0]).all()


@pytest.mark.parametrize(("bad", "match"), [
    ({"times": [0, 0.1], "keypoints": [[[0, 0]]], "names": ["nose"]}, "shape"),
    ({"times": [0.1, 0.0], "keypoints": [[[0, 0]], [[0, 0]]], "names": ["nose"]}, "increasing"),
    ({"times": [0.0], "names": ["nose"]}, "missing field 'keypoints'"),
    ({"times": [0.0], "keypoints": [[["a", 0]]], "names": ["nose"]}, "cannot read"),
])
def test_bad_files_say_what_is_wrong(tmp_path, bad, match):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(KeypointError, match=match):
        load_keypoints(p)


def test_unknown_file_types_and_missing_files(tmp_path):
    with pytest.raises(KeypointError, match="unknown keypoint file type"):
        save_keypoints(synthetic_stream(2), tmp_path / "x.txt")
    with pytest.raises(KeypointError, match="no such keypoint file"):
        load_keypoints(tmp_path / "nope.json")


def test_normalisation_removes_position_size_and_distance():
    """The same body filmed bigger, elsewhere in the image, or flipped to y-up gives the same poses."""
    a = synthetic_stream(40, scale=80.0)
    b = synthetic_stream(40, scale=160.0)
    b.keypoints = (b.keypoints - [320, 240]) * 1.0 + [100, 400]
    na, nb = normalize_stream(a), normalize_stream(b)
    np.testing.assert_allclose(na.poses, nb.poses, atol=0.03)
    up = KeypointStream(a.times, a.keypoints * [1, -1], a.names, y_down=False)
    np.testing.assert_allclose(normalize_stream(up).poses, na.poses, atol=1e-9)
    # hips at the origin, y up: the nose is above the hips, the left shoulder on +x
    p = na.poses[20]
    assert np.allclose(0.5 * (p[KP["left_hip"]] + p[KP["right_hip"]]), 0, atol=0.02)
    assert p[KP["nose"], 1] > 1.0 and p[KP["left_shoulder"], 0] > 0.2


def test_foreshortened_torso_does_not_blow_up_the_pose():
    s = synthetic_stream(20)
    squashed = s.keypoints.copy()
    for k in ("nose", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow"):
        squashed[:, KP[k], 1] = 240 - 0.2 * (240 - squashed[:, KP[k], 1])  # torso seen end-on
    n = normalize_stream(KeypointStream(s.times, squashed, s.names))
    ref = normalize_stream(s)
    np.testing.assert_allclose(n.scale, ref.scale, rtol=0.05)  # the legs keep the scale


def test_resets_at_gaps_and_jumps_and_missing_hips_are_held():
    s = synthetic_stream(30)
    s.times[15:] += 1.0                    # a one-second gap
    s.keypoints[25:] += [400, 0]           # the person jumps across the image
    s.keypoints[8, KP["left_hip"]] = np.nan
    n = normalize_stream(s)
    assert n.reset[0] and n.reset[15] and n.reset[25]
    assert not n.valid[8] and np.isfinite(n.poses[8]).all()
    assert n.reset.sum() <= 5


def test_resample_stream_rates_and_gaps():
    s = synthetic_stream(31, fps=60.0)
    r = resample_stream(s, 30.0)
    assert len(r) == 16
    np.testing.assert_allclose(r.keypoints, s.keypoints[::2], atol=1e-9)
    g = synthetic_stream(10, fps=30.0)
    g.times[5:] += 0.5
    rg = resample_stream(g, 30.0)
    assert np.isnan(rg.keypoints[8]).all() and np.isfinite(rg.keypoints[0]).all()
    both = concatenate_streams([s, s])
    assert len(both) == 62 and np.all(np.diff(both.times) > 0)


def test_standing_pose_helper_is_facing_the_camera():
    p = standing_pose()
    assert p[KP["left_shoulder"], 0] > p[KP["right_shoulder"], 0]
