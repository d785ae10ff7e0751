"""Your own data (issue 32, part 2): the up axis and unit found from the data, grounding,
the implausible-take warnings, and takes of one rig brought to one skeleton. Rigs are
made from the shared LAFAN1 files at test time (tests/rigs.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.axes import detect_up_axis
from motionmatch.anim.grounding import floor_height, ground
from motionmatch.anim.plausible import humanoid_warnings
from motionmatch.anim.rig_edit import drop_joints, rooted_at
from motionmatch.datasets import fit_skeletons, load_takes, one_skeleton, skeleton_groups
from motionmatch.errors import DatasetError, DataWarning
from rigs import lafan_clip, make_rig, write_rig


def _caught(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message) for w in got if issubclass(w.category, DataWarning)]


@pytest.fixture(scope="module")
def clip(data_dir):
    return lafan_clip(data_dir, 300)


def test_up_axis_found_from_the_data(data_dir, clip, tmp_path):
    """Z-up copies read back as the original; Y-up originals (walking, crawling, dancing)
    and a quadruped stay Y up."""
    path = write_rig(make_rig(clip, "unreal", ground_root=True, z_up=True), tmp_path, "walk_zup")
    assert detect_up_axis(load_bvh(path)) == "z"
    back = load_bvh(path, up_axis="auto")
    orig = make_rig(clip, "unreal", ground_root=True)
    np.testing.assert_allclose(back.world_positions, orig.world_positions, atol=2e-5)
    for f in ("lafan1/ground1_subject4.bvh", "lafan1/dance2_subject1_crop.bvh", "lafan1/obstacles1_subject1.bvh",
              "genmm-examples/Elephant_idle1.bvh", "genmm-examples/Joe_Salsa-Dancing-6.bvh"):
        assert detect_up_axis(load_bvh(data_dir / f)) == "y", f
    assert detect_up_axis(load_bvh(next((data_dir / "quadruped-dog").glob("*.bvh")))) == "y"


def test_grounding_puts_a_hips_rooted_take_on_the_floor(clip):
    broken = make_rig(clip, "mixamo", feet_below_floor=True)
    assert floor_height(broken) < -0.8
    fixed, moved = ground(broken)
    assert 0.8 < moved < 1.0
    orig = make_rig(clip, "mixamo")
    assert np.abs(fixed.world_positions - orig.world_positions).max() < 0.02  # on the floor the original stands on
    same, zero = ground(orig)
    assert zero == 0.0 and same is orig


def test_lafan1_originals_are_not_moved(data_dir):
    """Every LAFAN1 take's floor is within 2 cm of zero: grounding leaves the data as it was."""
    for f in sorted((data_dir / "lafan1-60fps").glob("*.bvh"))[::4] + sorted((data_dir / "lafan1").glob("*.bvh")):
        h = floor_height(load_bvh(f))
        assert h is not None and abs(h) < 0.03, (f.name, h)


def test_warnings_fire_on_broken_copies_not_on_originals(data_dir, clip, tmp_path):
    """Implausible takes: read with the wrong up axis (a short person walking slowly), in
    the wrong unit, with the feet under the floor; the originals get none."""
    walk = make_rig(clip, "cc", ground_root=True)
    walk.tags = ("walk",)
    assert humanoid_warnings(walk) == []
    zup = write_rig(make_rig(clip, "cc", ground_root=True, z_up=True), tmp_path, "walk_cc_zup")
    lying = load_bvh(zup, up_axis="y")
    lying.tags = ("walk",)
    found = humanoid_warnings(lying)
    assert any("tall, implausible for a person" in w and "--up" in w for w in found), found
    assert any("a walk at" in w and "implausibly slow" in w for w in found), found
    metres = load_bvh(write_rig(walk, tmp_path, "walk_cc"), units="m")
    assert any("try --units cm" in w for w in humanoid_warnings(metres))
    below = make_rig(clip, "cc", feet_below_floor=True)
    assert any("m under the floor" in w for w in humanoid_warnings(below))
    assert not any("floor" in w for w in humanoid_warnings(below, grounded=True))
    for w in humanoid_warnings(lying) + humanoid_warnings(metres) + humanoid_warnings(below):
        assert "\n" not in w and w.startswith(("walk", "<", str(tmp_path)))
    originals, said = _caught(load_takes, [data_dir / "lafan1", data_dir / "lafan1-60fps"])
    assert said == [] and len(originals) == 50
    # what build reads from LAFAN1 is what it read before: the files as they are
    from motionmatch.datasets import load_folder

    for a, b in zip(originals[5:], load_folder(data_dir / "lafan1-60fps")):
        assert a.name == b.name and a.tags == b.tags and a.skeleton.equivalent(b.skeleton, atol=0)
        np.testing.assert_array_equal(a.rotations, b.rotations)
        np.testing.assert_array_equal(a.translations, b.translations)


def test_rig_edits_keep_world_poses(clip):
    rig = make_rig(clip, "cc", ground_root=True)
    hips = rooted_at(rig, "CC_Base_Hip")
    assert hips.skeleton.names[0] == "CC_Base_Hip" and hips.num_joints == rig.num_joints - 1
    np.testing.assert_allclose(hips.world_positions, rig.world_positions[:, 1:], atol=1e-9)
    fewer = drop_joints(rig, ["CC_Base_L_BigToe1", "CC_Base_L_ToeBaseShareBone"])
    keep = [rig.skeleton.index(n) for n in fewer.skeleton.names]
    np.testing.assert_allclose(fewer.world_positions, rig.world_positions[:, keep], atol=1e-9)


def test_one_rig_with_and_without_ground_root_and_extra_leaves(clip):
    with_root = make_rig(clip, "cc", ground_root=True)
    plain_leaves = make_rig(clip, "unreal", extras=False)
    unreal = make_rig(clip, "unreal", ground_root=True)  # twist bones and a prop
    takes, said = _caught(fit_skeletons, [make_rig(clip, "cc"), with_root, plain_leaves, unreal])
    assert len(skeleton_groups(takes)) == 2  # CC, Unreal
    assert takes[0].skeleton.same_topology(takes[1].skeleton)
    assert takes[2].skeleton.same_topology(takes[3].skeleton) and takes[3].num_joints == 22
    assert any("dropped the joints above the hips (CC_Base_BoneRoot)" in w for w in said)
    assert any("dropped the joints above the hips (root)" in w for w in said)
    assert any("leaf joints the other takes lack (thigh_twist_01_l" in w for w in said)
    np.testing.assert_allclose(takes[1].world_positions, with_root.world_positions[:, 1:], atol=1e-9)


def test_different_skeletons_name_the_first_joint_that_differs(clip):
    cc = make_rig(clip, "cc")
    cc_plain = make_rig(clip, "cc", extras=False)  # no CC_Base_Pelvis between the hips and the legs
    cc.name, cc_plain.name = "a", "b"
    with pytest.raises(DatasetError) as e:
        one_skeleton([cc, cc_plain])
    msg = str(e.value)
    assert "b has a different skeleton from a: joint 1 is 'CC_Base_L_Thigh' (under 'CC_Base_Hip') in b, " \
           "'CC_Base_Pelvis' (under 'CC_Base_Hip') in a" in msg and "--per-skeleton" in msg and "\n" not in msg


def test_a_ground_root_has_no_body(clip):
    """A Character Creator BoneRoot on the floor above the hips, under the database's own
    SimulationBone: neither gets a bone in the mannequin (no pedestal from the floor to the
    pelvis) nor a stick in the viewer."""
    from motionmatch.anim.humanoid import carrier_joints
    from motionmatch.anim.mannequin import body_joints, mannequin_for
    from motionmatch.database import MotionDatabase
    from motionmatch.viewer.characters import skeleton_info

    db = MotionDatabase.build([make_rig(clip[:120], "cc", ground_root=True)])
    skel = db.skeleton
    assert [skel.names[j] for j in carrier_joints(skel)] == ["SimulationBone", "CC_Base_BoneRoot"]
    assert not body_joints(skel)[:2].any() and body_joints(skel)[2:].all()
    body = mannequin_for(db.clip_motion(0))
    assert not np.isin(body.joints[body.weights > 0], [0, 1]).any()
    # the same body as the rig without the ground root (a pedestal would add a thick capsule)
    plain = mannequin_for(MotionDatabase.build([make_rig(clip[:120], "cc")]).clip_motion(0))
    assert abs(len(body.vertices) - len(plain.vertices)) < 0.02 * len(plain.vertices)
    np.testing.assert_allclose(np.sort(body.vertices[:, 1])[:50], np.sort(plain.vertices[:, 1])[:50], atol=0.02)
    info = skeleton_info(skel, db.foot_joints, ground_root=True)
    assert [skel.names[j] for j in info["hidden"]] == ["CC_Base_BoneRoot", "CC_Base_Hip"]
    # the viewer's figure is sized from the body, not from the BoneRoot left where the take began
    from motionmatch.viewer.characters import _db_extent

    plain_db = MotionDatabase.build([clip[:120]])
    assert abs(_db_extent(db) - _db_extent(plain_db)) < 0.05
    assert info["height"] == skeleton_info(plain_db.skeleton, plain_db.foot_joints, ground_root=True)["height"]


def test_twist_and_share_bones_carry_no_body(clip):
    """Character Creator's twist and share bones and Unreal's twist bones own no vertex."""
    from motionmatch.anim.humanoid import helper_joints
    from motionmatch.anim.mannequin import mannequin_for

    for scheme, expected in (("cc", {"CC_Base_L_ThighTwist01", "CC_Base_L_KneeShareBone", "CC_Base_L_ToeBaseShareBone"}),
                             ("unreal", {"thigh_twist_01_l", "lowerarm_twist_01_l"})):
        rig = make_rig(clip[:120], scheme)
        helpers = helper_joints(rig.skeleton)
        assert expected <= {rig.skeleton.names[j] for j in np.flatnonzero(helpers)}
        body = mannequin_for(rig)
        assert not np.isin(body.joints[body.weights > 0], np.flatnonzero(helpers)).any()


def test_joints_listed_in_another_order_are_one_skeleton(clip, tmp_path):
    """An exporter that writes the arms before the legs: the same rig, put in one order."""
    from motionmatch.anim.rig_edit import in_joint_order

    rig = make_rig(clip[:120], "mixamo")
    names = rig.skeleton.names
    legs_last = (names[0], *[n for n in names[1:] if "Leg" not in n and "Foot" not in n and "Toe" not in n],
                 *[n for n in names[1:] if "Leg" in n or "Foot" in n or "Toe" in n])
    other = in_joint_order(rig, legs_last)
    np.testing.assert_allclose(other.world_positions, rig.world_positions[:, rig.skeleton.indices(legs_last)])
    takes, said = _caught(fit_skeletons, [rig, other])
    assert len(skeleton_groups(takes)) == 1 and any("put in the order of the other takes" in w for w in said)
    np.testing.assert_allclose(takes[1].world_positions, rig.world_positions, atol=1e-12)
    with pytest.raises(Exception, match="before its parent"):
        in_joint_order(rig, tuple(reversed(names)))


@pytest.mark.parametrize(("unit", "scale"), [("in", 0.0254), ("mm", 0.001), ("m", 1.0), ("cm", 0.01)])
def test_the_unit_is_found_from_a_persons_height(clip, tmp_path, unit, scale):
    """A humanoid in inches was read as centimetres (a 0.7 m person): its height says inches."""
    from motionmatch.anim import save_bvh

    path = save_bvh(make_rig(clip[:30], "unreal", ground_root=True), tmp_path / "walk.bvh", units=unit)
    m = load_bvh(path)
    assert m.file_scale == scale
    assert humanoid_warnings(m) == []
