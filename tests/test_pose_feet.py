"""Feet on the ground on a rig in the viewer (issue 32): the per-pose foot IK of
``Retargeter.world_poses`` (``motionmatch.anim.pose_feet``), on LAFAN1's walk played by
rigs whose legs differ: LAFAN1 with thighs 1.25 and shins 1.15 times as long and shorter feet
(made here, never written; also renamed to Character Creator's scheme with a ground root that
carries the character, twist and share bones and five toes a foot), and the Mixamo rig of
``genmm-examples`` (feet 6-14 cm off the ground without it)."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.anim import Motion, Skeleton, quat
from motionmatch.anim.contacts import foot_contacts
from motionmatch.anim.grounding import floor_height
from motionmatch.anim.retarget import Retargeter, RetargetSettings, foot_points
from motionmatch.anim.retarget_map import Rig, reference_rig
from rigs import lafan_clip, make_rig

pytestmark = pytest.mark.data


def long_legged(m: Motion) -> Motion:
    """``m`` on a skeleton whose thighs are 1.25 and shins 1.15 times as long, its feet' end sites 0.7."""
    s = m.skeleton
    off, tr = s.offsets.copy(), m.translations.copy()
    for name, k in (("LeftLeg", 1.25), ("RightLeg", 1.25), ("LeftFoot", 1.15), ("RightFoot", 1.15)):
        off[s.names.index(name)] *= k
        tr[:, s.names.index(name)] *= k
    skel = Skeleton(s.names, s.parents, off, s.end_site_parents, 0.7 * s.end_site_offsets, s.channels)
    return Motion(skel, m.rotations, tr, m.fps)


@pytest.fixture(scope="module")
def walk(data_dir):
    return lafan_clip(data_dir, 600)


@pytest.fixture(scope="module")
def rigs(data_dir, walk):
    from motionmatch.io.rig_file import read_rig

    cc = make_rig(long_legged(walk), "cc", ground_root=True)  # its BoneRoot only carries the character
    return {"long legs": reference_rig(long_legged(walk)),
            "mixamo": read_rig(data_dir / "genmm-examples" / "Joe_Walk-In-Circle.bvh").rig,
            "cc long legs, ground root": reference_rig(cc)}


def foot_heights(rig: Rig, wp: np.ndarray, wr: np.ndarray) -> np.ndarray:
    """``[F, 2]`` the lowest point of each foot (left, right) of world poses on ``rig``."""
    s = rig.skeleton
    out = []
    for side in ("left", "right"):
        joints, ends = foot_points(s, rig.roles[f"{side}_ankle"])
        low = wp[:, joints, 1].min(axis=1)
        if ends.any():
            par = s.end_site_parents[ends]
            low = np.minimum(low, (wp[:, par] + quat.rotate(wr[:, par], s.end_site_offsets[ends]))[..., 1].min(axis=1))
        out.append(low)
    return np.stack(out, axis=1)


def as_viewer_plays(r: Retargeter, walk: Motion, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The take's frames as a viewer tick's characters: each scaled about its own root on the ground."""
    ps = walk.world_positions
    centres = ps[:, 0] * np.array([1.0, 0.0, 1.0]) + [0.0, floor, 0.0]
    return r.world_poses(walk.world_rotations, ps, floor=floor, centres=centres)


@pytest.mark.parametrize("name", ["long legs", "mixamo", "cc long legs, ground root"])
def test_feet_at_contacts_are_on_the_ground_on_a_rig_with_other_legs(walk, rigs, name):
    src, tgt = reference_rig(walk), rigs[name]
    floor = floor_height(walk)
    contacts = foot_contacts(walk, feet=list(src.roles.contact_joints), ground_height=floor).contacts
    r = Retargeter(src, tgt)
    assert abs(r.scale - 1.0) > 0.02  # the legs differ
    wp, wr = as_viewer_plays(r, walk, floor)
    h = foot_heights(tgt, wp, wr) - floor
    at = np.abs(h[contacts])
    assert np.percentile(at, 90) < 0.02 and np.median(at) < 0.01, (np.median(at), np.percentile(at, 90))
    assert h.min() > -0.005  # never in the floor
    # a planted foot does not slide more than the source's (the rig is scaled about its root)
    source_speed = [planted_speed(walk.world_positions[:, src.roles[f"{s}_ankle"]], contacts[:, i], walk.fps)
                    for i, s in enumerate(("left", "right"))]
    for i, side in enumerate(("left", "right")):
        assert planted_speed(wp[:, tgt.roles[f"{side}_ankle"]], contacts[:, i], walk.fps) < 1.2 * source_speed[i] + 0.01
    # the measure can fail: the same poses without the foot IK float, sink or slide
    wp0, wr0 = as_viewer_plays(Retargeter(src, tgt, RetargetSettings(foot_ik=False)), walk, floor)
    h0 = np.abs(foot_heights(tgt, wp0, wr0) - floor)[contacts]
    slide0 = planted_speed(wp0[:, tgt.roles["left_ankle"]], contacts[:, 0], walk.fps)
    assert np.percentile(h0, 90) > 0.02 or slide0 > 1.2 * source_speed[0] + 0.01, (np.percentile(h0, 90), slide0)


def planted_speed(p: np.ndarray, contact: np.ndarray, fps: float) -> float:
    """The median speed (m/s) across the ground of positions ``p [F, 3]`` between two frames in contact."""
    both = contact[1:] & contact[:-1]
    return float(np.median(np.linalg.norm(np.diff(p[:, [0, 2]], axis=0), axis=1)[both]) * fps)


def test_the_foot_ik_moves_only_the_legs_and_keeps_the_skeleton(walk, rigs):
    """Each pose stays a pose of the rig: every bone keeps its length, the ankles their world
    rotations, every joint off the legs where it was without the IK."""
    src, tgt = reference_rig(walk), rigs["mixamo"]
    floor = floor_height(walk)
    wp, wr = as_viewer_plays(Retargeter(src, tgt), walk, floor)
    wp0, wr0 = as_viewer_plays(Retargeter(src, tgt, RetargetSettings(foot_ik=False)), walk, floor)
    s = tgt.skeleton
    bones = np.linalg.norm(wp[:, 1:] - wp[:, s.parents[1:]], axis=-1)
    assert np.allclose(bones, np.linalg.norm(wp0[:, 1:] - wp0[:, s.parents[1:]], axis=-1), atol=1e-9)
    # each joint's rotation relative to its parent is the rig's, but for the hip, knee and ankle
    legs = {tgt.roles[f"{side}_{p}"] for side in ("left", "right") for p in ("upper_leg", "lower_leg", "ankle")}
    rel = quat.inv_mul(wr[:, s.parents[1:]], wr[:, 1:])
    rel0 = quat.inv_mul(wr0[:, s.parents[1:]], wr0[:, 1:])
    keep = [j - 1 for j in range(1, s.num_joints) if j not in legs]
    assert np.allclose(np.abs(np.sum(rel[:, keep] * rel0[:, keep], -1)), 1.0, atol=1e-9)
    for side in ("left", "right"):
        a = tgt.roles[f"{side}_ankle"]
        assert np.allclose(np.abs(np.sum(wr[:, a] * wr0[:, a], -1)), 1.0, atol=1e-9)
    off_legs = [j for j in range(s.num_joints)
                if not any(s.descends_from(j, tgt.roles[f"{side}_upper_leg"]) for side in ("left", "right"))]
    assert np.abs(wp[:, off_legs] - wp0[:, off_legs]).max() < 1e-12
