"""A humanoid mannequin has a head sized from the body and hands (issue 32, part 4's head
and hands); a quadruped rigged with humanoid names keeps the procedural body."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.body_parts import body_height_from_bones, head_and_hands
from motionmatch.anim.humanoid import find_humanoid
from motionmatch.anim.mannequin import bind_pose, mannequin_for

STANDING = ["lafan1/walk1_subject1_stop.bvh", "lafan1-60fps/walk1_subject1_walk2.bvh",
            "bandai-namco/dataset-2/dataset-2_run_active_001.bvh", "genmm-examples/Joe_Salsa-Dancing-6.bvh",
            "genmm-examples/Xia_normal.bvh"]


def _owned(body, joints):
    dom = body.joints[np.arange(len(body.joints)), np.argmax(body.weights, axis=1)]
    return float(np.isin(dom, list(joints)).mean())


@pytest.mark.parametrize("take", STANDING, ids=lambda t: t.split("/")[-1][:24])
def test_head_and_hands(data_dir, take):
    m = load_bvh(data_dir / take)
    roles = find_humanoid(m.skeleton)
    body = mannequin_for(m)
    head = roles["head"]
    assert _owned(body, [head]) >= 0.04  # LAFAN1: 0 before (a neck-wide peg), 12% now
    skel = m.skeleton
    for side in ("left", "right"):
        hand = roles[f"{side}_hand"]
        below = [j for j in range(skel.num_joints) if skel.descends_from(j, hand)]
        assert _owned(body, below) >= 0.01, side
    # the head reaches a skull's height above the head joint, along the spine
    wp = body.bind_positions
    height = body_height_from_bones(skel, wp, roles)
    owned = body.vertices[body.joints[np.arange(len(body.joints)), np.argmax(body.weights, axis=1)] == head]
    assert owned[:, 1].max() - wp[head, 1] > 0.09 * height


@pytest.mark.parametrize("take", ["quadruped-dog/D1_025_KAN01_001.bvh", "genmm-examples/Elephant_idle1.bvh"])
def test_a_quadruped_with_humanoid_names_gets_no_head_or_mittens(data_dir, take):
    m = load_bvh(data_dir / take)
    find_humanoid(m.skeleton)  # named like a humanoid
    rot, pos = bind_pose(m)
    from motionmatch.anim import kinematics

    wp = kinematics.forward_kinematics(m.skeleton.parents, rot[None], pos[None])[0][0]
    assert len(head_and_hands(m.skeleton, wp)[0]) == 0


def test_sizes_follow_the_body(data_dir):
    """Twice as large a skeleton: twice as large a head."""
    m = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh")
    rot, pos = bind_pose(m)
    from motionmatch.anim import kinematics

    wp = kinematics.forward_kinematics(m.skeleton.parents, rot[None], pos[None])[0][0]
    small = head_and_hands(m.skeleton, wp)
    big = head_and_hands(m.skeleton.scaled(2.0), 2.0 * wp)
    np.testing.assert_allclose(big[3], 2.0 * small[3], rtol=1e-9)
    assert 1.65 < body_height_from_bones(m.skeleton, wp, find_humanoid(m.skeleton)) < 1.85


# --------------------------------------------------------------- the whole body (issue 32, part 4)
def _measures(m):
    """A humanoid mannequin's proportions, as fractions of its height: the torso's width and
    depth at the hips joint, the waist and the chest; each foot's length, width, how far its
    heel reaches behind the ankle and its toes past the toe joint; the head's share of the vertices."""
    from motionmatch.anim.mannequin import mannequin
    from motionmatch.anim.standing import standing_pose

    s = m.skeleton
    roles = find_humanoid(s)
    body = mannequin(s, standing_pose(s, m.translations[0]))  # measured standing (the bind pose may be a stride)
    p = body.bind_positions
    height = body_height_from_bones(s, p, roles)
    dom = body.joints[np.arange(len(body.joints)), np.argmax(body.weights, axis=1)]
    up = np.array([0.0, 1.0, 0.0])
    left = p[roles["left_upper_leg"]] - p[roles["right_upper_leg"]]
    left[1] = 0.0
    left /= np.linalg.norm(left)
    front = np.cross(left, up)
    torso = body.vertices[np.isin(dom, [roles.hips, *roles.spine_chain])]
    legs = [j for side in ("left", "right") for j in range(s.num_joints)
            if s.descends_from(roles[f"{side}_upper_leg"], j) and s.descends_from(j, roles.hips)]
    hips = body.vertices[np.isin(dom, [roles.hips, *roles.spine_chain, *legs])]  # the thighs make the hips' width
    hy, ny = p[roles.hips, 1], p[roles["neck"], 1]
    out = {"height": height, "head": float(np.mean(dom == roles["head"]))}
    for name, t in (("pelvis", 0.0), ("waist", 0.3), ("chest", 0.62)):
        part = hips if name == "pelvis" else torso
        band = part[np.abs(part[:, 1] - (hy + t * (ny - hy))) < 0.02 * height]
        out[name] = (float(np.ptp(band @ left)) / height, float(np.ptp(band @ front)) / height)
    for side in ("left", "right"):
        ankle = roles[f"{side}_ankle"]
        foot = body.vertices[np.isin(dom, [j for j in range(s.num_joints) if s.descends_from(j, ankle)])]
        ahead = p[roles[f"{side}_foot"]] - p[ankle]  # along the foot (tilted in a frame of a run)
        ahead /= np.linalg.norm(ahead)
        across = np.cross(up, ahead)
        across /= np.linalg.norm(across)
        out[f"{side}_foot"] = {
            "length": float(np.ptp(foot @ ahead)) / height,
            "width": float(np.ptp(foot @ across)) / height,
            "heel": float(p[ankle] @ ahead - (foot @ ahead).min()) / height,
            "toes": float((foot @ ahead).max() - p[roles[f"{side}_foot"]] @ ahead) / height,
        }
    return out


HUMANOIDS = STANDING + ["bandai-namco/dataset-1/dataset-1_walk-left_tired_001.bvh", "genmm-examples/Joe_Walk-In-Circle.bvh",
                        "genmm-examples/Malcolm_Gangnam-Style.bvh"]


@pytest.mark.parametrize("take", HUMANOIDS, ids=lambda t: t.split("/")[-1][:24])
def test_a_body_of_human_proportions(data_dir, take):
    """Torso, pelvis and feet in human proportions (as fractions of the height; a person:
    hips 0.19, waist 0.17, chest 0.19 wide and 0.12 deep; a foot 0.15 long and 0.055 wide).
    LAFAN1 before: a pelvis 0.24 wide and a chest 0.09, a foot a 0.02-wide stick with no heel."""
    m = _measures(load_bvh(data_dir / take))
    pelvis, waist, chest = m["pelvis"], m["waist"], m["chest"]
    assert 0.16 < chest[0] < 0.23 and 0.11 < chest[1] < 0.17, chest
    assert 0.14 < waist[0] < 0.2 and waist[0] < chest[0], waist
    # (the hips' width at the hip joints is the thighs' tops)
    assert 0.15 < pelvis[0] < 0.22 and pelvis[0] <= 1.08 * chest[0], "a pelvis wider than the chest: a skirt"
    for side in ("left", "right"):
        f = m[f"{side}_foot"]
        # (Mixamo's Joe has cartoon feet: his toes' end joints make them 0.22 long)
        assert 0.13 < f["length"] < 0.24 and 0.045 < f["width"] < 0.1, f  # (the ankle's own width counts)
        assert f["heel"] > 0.025 and f["toes"] > 0.01, f  # a heel behind the ankle, toes past the ball
    assert m["head"] >= 0.04


@pytest.mark.parametrize("scheme", ["unreal", "mixamo", "cc"])
def test_renamed_rigs_get_the_same_body(data_dir, scheme):
    """LAFAN1 renamed to Unreal, Mixamo and Character Creator names (with a ground root, twist
    and share bones, a prop, several toes per foot) gets the body LAFAN1 gets: a head of at
    least 4 % of the vertices, hands, feet with heels and toes, the same proportions."""
    from rigs import lafan_clip, make_rig

    base = _measures(lafan_clip(data_dir, 60))
    rig = make_rig(lafan_clip(data_dir, 60), scheme, ground_root=True)
    m = _measures(rig)
    assert m["head"] >= 0.04
    for key in ("pelvis", "waist", "chest"):
        np.testing.assert_allclose(m[key], base[key], atol=0.015, err_msg=key)
    for side in ("left", "right"):
        for key in ("length", "heel"):
            assert abs(m[f"{side}_foot"][key] - base[f"{side}_foot"][key]) < 0.02, (side, key)
    body = mannequin_for(rig)
    roles = find_humanoid(rig.skeleton)
    dom = body.joints[np.arange(len(body.joints)), np.argmax(body.weights, axis=1)]
    for side in ("left", "right"):
        assert np.mean(dom == roles[f"{side}_hand"]) >= 0.01, side


def test_the_standing_pose_is_made_from_the_skeleton(data_dir):
    """LAFAN1's rest pose folds every bone along +X; its A pose stands: legs straight down
    (the ankle a leg's length under the hip), the spine up, the left side at +X, the arms 45
    degrees out, the feet on the ground, the toes forward."""
    from motionmatch.anim import kinematics
    from motionmatch.anim.standing import standing_pose

    m = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh")
    s = m.skeleton
    roles = find_humanoid(s)
    rot, tr = standing_pose(s)
    p = kinematics.forward_kinematics(s.parents, rot[None], tr[None])[0][0]
    for side, x in (("left", 1.0), ("right", -1.0)):
        hip, ankle = p[roles[f"{side}_upper_leg"]], p[roles[f"{side}_ankle"]]
        leg = np.linalg.norm(s.offsets[roles[f"{side}_lower_leg"]]) + np.linalg.norm(s.offsets[roles[f"{side}_ankle"]])
        assert hip[1] - ankle[1] > 0.99 * leg  # straight, and down
        assert x * (hip[0] - p[roles.hips][0]) > 0.05  # the left leg at +X
        arm = p[roles[f"{side}_lower_arm"]] - p[roles[f"{side}_upper_arm"]]
        assert abs(np.degrees(np.arctan2(x * arm[0], -arm[1])) - 45.0) < 0.5
        toe = p[roles[f"{side}_toe"]] - p[roles[f"{side}_ankle"]]
        assert toe[2] > 0.1 and toe[1] < 0
    spine = p[roles["neck"]] - p[roles.hips]
    assert spine[1] > 0.999 * np.linalg.norm(spine)
    assert min(p[roles[f"{s_}_{j}"], 1] for s_ in ("left", "right") for j in ("ankle", "foot")) == pytest.approx(0.0)
    # a skeleton with no humanoid: one line, no pose
    from motionmatch.anim.humanoid import HumanoidError

    with pytest.raises(HumanoidError):
        standing_pose(load_bvh(data_dir / "genmm-examples" / "Crabnew_Crab-dance-long.bvh").skeleton)


def test_feet_without_toe_joints_still_have_heel_and_toes(data_dir):
    """LAFAN1 with its toe joints dropped: each foot is still a foot (a heel behind the ankle,
    toes in front of it, as long as a person's), owned by the ankle."""
    from motionmatch.anim.rig_edit import drop_joints
    from rigs import lafan_clip

    m = drop_joints(lafan_clip(data_dir, 60), ["LeftToe", "RightToe"])
    roles = find_humanoid(m.skeleton)
    assert roles.get("left_toe") is None
    body = mannequin_for(m)
    p = body.bind_positions
    height = body_height_from_bones(m.skeleton, p, roles)
    dom = body.joints[np.arange(len(body.joints)), np.argmax(body.weights, axis=1)]
    left = p[roles["left_upper_leg"]] - p[roles["right_upper_leg"]]
    front = np.cross(left, [0.0, 1.0, 0.0])
    front[1] = 0.0
    front /= np.linalg.norm(front)
    for side in ("left", "right"):
        ankle = roles[f"{side}_ankle"]
        foot = body.vertices[dom == ankle]
        along = (foot - p[ankle]) @ front
        assert along.min() < -0.025 * height and along.max() > 0.1 * height, (side, along.min(), along.max())
        # a foot, not a ball (a leaf ankle was a ball as thick as 0.38 of the shin: 0.3 m)
        assert np.ptp(foot[:, 1]) < 0.1 * height and np.ptp(foot @ left / np.linalg.norm(left)) < 0.08 * height
