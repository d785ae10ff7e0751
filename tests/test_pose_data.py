"""Keypoints from motion capture, the virtual camera and the labelling rules (real data)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.resample import resample
from motionmatch.control.pose.keypoints import KP
from motionmatch.control.pose.labels import (
    COMMANDS,
    MotionFacts,
    clean_labels,
    direction_labels,
    label_frames,
    motion_facts,
)
from motionmatch.control.pose.render import (
    LIMBS,
    Camera,
    RenderSettings,
    body_facing,
    damp_limbs,
    joint_map,
    mirror_keypoints,
    render_keypoints,
    world_keypoints,
)

pytestmark = pytest.mark.data

STAGE_FRONT = (np.array([[0.0, 0.0, -1.0]]), np.array([[1.0, 0.0, 0.0]]))  # a camera at +Z looking back at -Z


def _clip(data_dir, rel):
    m = load_bvh(data_dir / rel)
    from motionmatch.datasets import tags_from_name

    m.tags = tags_from_name(m.name)
    m = m if m.fps == 30 else resample(m, 30)
    kp = world_keypoints(m)
    return m, kp, motion_facts(m, kp)


def _labels_from_stage_front(facts: MotionFacts) -> Counter:
    F = facts.speed.shape[0]
    lab = label_frames(facts, np.repeat(STAGE_FRONT[0], F, 0), np.repeat(STAGE_FRONT[1], F, 0))
    return Counter(x for x in lab.tolist() if x)


def test_direction_rules():
    fwd = np.array([[0.0, 0.0, -1.0]] * 6)
    right = np.array([[1.0, 0.0, 0.0]] * 6)
    v = np.array([[0, 0, 1.0], [1.0, 0, 0], [-1.0, 0, 0], [0, 0, -1.0], [1.0, 0, 1.0], [0.3, 0, 1.0]])
    assert direction_labels(v, fwd, right).tolist() == ["forward", "left", "right", "", "", "forward"]


def test_label_cleanup_drops_flickers():
    lab = np.array(["walk_left"] * 30 + ["run_left"] * 3 + ["walk_left"] * 30 + ["stand_still"] * 5 + [""] * 10)
    out = clean_labels(lab, 30.0)
    assert set(out[:63]) == {"walk_left"} and set(out[63:]) == {""}


@pytest.mark.parametrize("rel", ["lafan1-60fps/walk1_subject1_walk2.bvh",
                                 "bandai-namco/dataset-1/dataset-1_walk_normal_001.bvh",
                                 "genmm-examples/Joe_Salsa-Dancing-6.bvh"])
def test_keypoints_from_any_humanoid(data_dir, rel):
    m, kp, _ = _clip(data_dir, rel)
    jm = joint_map(m.skeleton)
    assert len(jm) == 13 and len(set(jm.values())) == 13
    f = kp[len(kp) // 2]
    assert f[KP["nose"], 1] > f[KP["left_shoulder"], 1] > f[KP["left_hip"], 1] > f[KP["left_knee"], 1] \
        > f[KP["left_ankle"], 1]
    facing = body_facing(kp[len(kp) // 2:len(kp) // 2 + 1])[0]
    left = np.array([facing[2], 0.0, -facing[0]])               # +90 degrees about +Y from the facing
    assert (f[KP["left_shoulder"]] - f[KP["right_shoulder"]]) @ left > 0.1
    assert (f[KP["nose"]] - 0.5 * (f[KP["left_shoulder"]] + f[KP["right_shoulder"]])) @ facing > 0.0
    mk = mirror_keypoints(kp)
    np.testing.assert_allclose(mirror_keypoints(mk), kp)


def test_camera_projection_and_sides():
    cam = Camera.look_at([0, 1.0, 4.0], [0, 1.0, 0.0])           # in front of a performer facing +Z
    np.testing.assert_allclose(cam.project(np.array([0.0, 1.0, 0.0])), [320, 240])
    left_of_performer = cam.project(np.array([0.3, 1.0, 0.0]))
    above = cam.project(np.array([0.0, 1.5, 0.0]))
    assert left_of_performer[0] > 320 and above[1] < 240         # their left: image right; up: image up


def test_render_azimuth_and_cuts(data_dir):
    _, kp, facts = _clip(data_dir, "bandai-namco/dataset-1/dataset-1_walk_normal_001.bvh")
    s = RenderSettings(noise_px=0.0, noise_rel=0.0)
    front, info = render_keypoints(kp, 30.0, s, rng=0, azimuth=0.0)
    hips0 = front.keypoints[0, [KP["left_hip"], KP["right_hip"]], 0]
    assert hips0[0] > hips0[1]                                  # facing the camera: left hip on the right
    lab = label_frames(facts, info.cam_forward, info.cam_right)
    assert Counter(x for x in lab if x).most_common(1)[0][0] == "walk_forward"
    assert info.cuts.sum() >= 2                                 # walking into the camera forces new placements
    _, info = render_keypoints(kp, 30.0, s, rng=0, azimuth=90.0)
    lab = label_frames(facts, info.cam_forward, info.cam_right)
    assert Counter(x for x in lab if x).most_common(1)[0][0] == "walk_right"   # camera on their left


@pytest.mark.parametrize(("rel", "want"), [
    ("bandai-namco/dataset-1/dataset-1_walk-left_normal_001.bvh", "walk_left"),
    ("bandai-namco/dataset-1/dataset-1_walk-right_normal_001.bvh", "walk_right"),
    ("bandai-namco/dataset-1/dataset-1_walk_normal_001.bvh", "walk_forward"),
    ("bandai-namco/dataset-1/dataset-1_run_normal_001.bvh", "run_forward"),
    ("bandai-namco/dataset-1/dataset-1_dash_angry_001.bvh", "run_forward"),
    ("bandai-namco/dataset-1/dataset-1_run_sad_001.bvh", "run_forward"),  # a slow run is still a run
    ("bandai-namco/dataset-1/dataset-1_punch_normal_001.bvh", "punch"),
    ("bandai-namco/dataset-1/dataset-1_dance-short_normal_001.bvh", "dance"),
])
def test_labels_match_the_clip_names(data_dir, rel, want):
    """Bandai-Namco names directions as seen from the stage front: so do the rules."""
    _, _, facts = _clip(data_dir, rel)
    got = _labels_from_stage_front(facts)
    assert got.most_common(1)[0][0] == want, got


def test_labels_from_motion_in_long_takes(data_dir):
    _, _, ground = _clip(data_dir, "lafan1/ground1_subject4.bvh")
    c = _labels_from_stage_front(ground)
    assert sum(v for k, v in c.items() if k.startswith("creep")) > 600
    assert c["stand_still"] > 30
    _, _, obstacles = _clip(data_dir, "lafan1/obstacles1_subject1.bvh")
    assert 60 < obstacles.jump.sum() < 600          # jumps over obstacles, not climbing on them
    c = _labels_from_stage_front(obstacles)
    assert c["jump"] > 60 and "creep_forward" not in c
    _, _, run = _clip(data_dir, "bandai-namco/dataset-1/dataset-1_dash_happy_001.bvh")
    assert run.jump.sum() == 0                      # running strides are not jumps
    _, _, kick = _clip(data_dir, "bandai-namco/dataset-1/dataset-1_kick_normal_001.bvh")
    assert set(_labels_from_stage_front(kick)) <= {"stand_still"}     # kicks are no command (standing is)
    assert set(_labels_from_stage_front(ground)) <= set(COMMANDS)


def test_still_parts_of_a_tagged_take_are_not_its_action(data_dir):
    """The Bandai-Namco dance take opens with about 8 s of standing still: labelled by the
    motion (standing still), not by the take's name; the dancing itself stays dance."""
    _, _, facts = _clip(data_dir, "bandai-namco/dataset-1/dataset-1_dance-short_normal_001.bvh")
    F = facts.speed.shape[0]
    lab = label_frames(facts, np.repeat(STAGE_FRONT[0], F, 0), np.repeat(STAGE_FRONT[1], F, 0))
    lead = Counter(lab[30:210].tolist())
    assert lead["stand_still"] > 150 and lead["dance"] == 0, lead
    assert Counter(lab[600:1500].tolist())["dance"] > 850


def test_damp_limbs_scales_only_the_limbs_fast_motion():
    """Known answers: a wrist swinging at 2 Hz around a fixed offset from moving hips keeps
    its offset and the hips' path, and loses (gain 0) or keeps (gain 1) its swing; the
    torso and head never change; each camera segment draws its own gain."""
    F, fps = 120, 30.0
    t = np.arange(F) / fps
    uv = np.zeros((F, len(KP), 2))
    uv[:, :, 0] = 100.0 + 20.0 * t[:, None]                      # everything walks right
    uv[:, KP["left_wrist"], 1] = 50.0 + 10.0 * np.sin(2 * np.pi * 2.0 * t)   # a 2 Hz swing
    uv[:, KP["nose"], 1] = 5.0 * np.sin(2 * np.pi * 2.0 * t)
    rng = np.random.default_rng(0)
    same = damp_limbs(uv, fps, [0], (1.0, 1.0), rng)
    assert np.allclose(same, uv)
    flat = damp_limbs(uv, fps, [0], (0.0, 0.0), rng)
    limb = [KP[n] for pair in LIMBS for n in pair]
    other = [k for k in range(len(KP)) if k not in limb]
    assert np.array_equal(flat[:, other], uv[:, other])             # torso, hips and head untouched
    w = flat[10:-10, KP["left_wrist"], 1]
    assert abs(w.mean() - 50.0) < 0.5 and w.std() < 0.25 * (uv[10:-10, KP["left_wrist"], 1]).std()
    assert np.allclose(flat[:, KP["left_wrist"], 0], uv[:, KP["left_wrist"], 0])   # the walk is slow motion
    # two segments, gains drawn from [0.2, 0.9]: the swing's amplitude differs between them
    two = damp_limbs(uv, fps, [0, 60], (0.2, 0.9), np.random.default_rng(1))
    amp = [np.ptp(two[a + 10:a + 50, KP["left_wrist"], 1]) / np.ptp(uv[a + 10:a + 50, KP["left_wrist"], 1])
           for a in (0, 60)]
    assert all(0.1 < a < 1.0 for a in amp) and abs(amp[0] - amp[1]) > 0.02, amp
