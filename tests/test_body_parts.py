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
