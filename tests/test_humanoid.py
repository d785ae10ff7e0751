"""Humanoid roles on any rig (issue 32, part 1): known answers on the shared skeletons and
on rigs renamed to other tools' schemes, the roles map, and a schema that names a joint."""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.anim import Skeleton, load_bvh
from motionmatch.anim.contacts import find_feet
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.root import find_hips
from motionmatch.database import MotionDatabase, schema_by_name
from motionmatch.database.schema import FeatureSchema, SchemaError, default_schema
from motionmatch.runtime.batch import leg_chains
from rigs import LAFAN, NAMES, lafan_clip, make_rig

LAFAN_ROLES = {
    "hips": "Hips", "spine": "Spine", "chest": "Spine2", "neck": "Neck", "head": "Head",
    "left_shoulder": "LeftShoulder", "left_upper_arm": "LeftArm", "left_lower_arm": "LeftForeArm",
    "left_hand": "LeftHand", "left_upper_leg": "LeftUpLeg", "left_lower_leg": "LeftLeg", "left_ankle": "LeftFoot",
    "left_toe": "LeftToe", "left_foot": "LeftToe",
    "right_shoulder": "RightShoulder", "right_upper_arm": "RightArm", "right_lower_arm": "RightForeArm",
    "right_hand": "RightHand", "right_upper_leg": "RightUpLeg", "right_lower_leg": "RightLeg",
    "right_ankle": "RightFoot", "right_toe": "RightToe", "right_foot": "RightToe",
}


def _renamed(scheme: str) -> dict[str, str]:
    """LAFAN_ROLES with the joint names of ``scheme``."""
    to = dict(zip(LAFAN, NAMES[scheme]))
    return {r: to[n] for r, n in LAFAN_ROLES.items()}


def test_lafan1_roles(data_dir):
    skel = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh").skeleton
    roles = find_humanoid(skel)
    assert roles.names() == LAFAN_ROLES
    assert roles.spine_chain == tuple(skel.indices(["Spine", "Spine1", "Spine2"]))
    assert roles.above_hips == () and roles.from_names
    assert roles.contact_joints == tuple(skel.indices(["LeftToe", "RightToe"]))


def test_shared_skeletons(data_dir):
    """Bandai-Namco (a joint_Root above the hips), CMU (hip joints between the hips and the
    legs), Mixamo with fingers and toe ends, LAFAN1 at 60 fps (a SimulationBone root)."""
    bandai = find_humanoid(load_bvh(next((data_dir / "bandai-namco" / "dataset-1").glob("*.bvh"))).skeleton)
    assert bandai.names()["hips"] == "Hips" and bandai.names()["left_foot"] == "Toes_L"
    assert bandai.names()["right_lower_arm"] == "LowerArm_R" and bandai.names()["left_shoulder"] == "Shoulder_L"
    assert [bandai.joint_names[j] for j in bandai.above_hips] == ["joint_Root"]
    cmu = find_humanoid(load_bvh(data_dir / "genmm-examples" / "Xia_normal.bvh").skeleton).names()
    assert (cmu["hips"], cmu["left_upper_leg"], cmu["left_foot"], cmu["neck"]) == ("Hips", "LeftUpLeg", "LeftToeBase",
                                                                                  "Neck")
    mix = find_humanoid(load_bvh(data_dir / "genmm-examples" / "Malcolm_Gangnam-Style.bvh").skeleton).names()
    assert mix["left_hand"] == "mixamorig:LeftHand" and mix["left_foot"] == "mixamorig:LeftToeBase"
    assert mix["head"] == "mixamorig:Head"
    sim = load_bvh(next((data_dir / "lafan1-60fps").glob("*.bvh"))).skeleton
    assert find_humanoid(sim).names() == LAFAN_ROLES


@pytest.mark.parametrize("scheme", ["unreal", "mixamo", "cc"])
@pytest.mark.parametrize("ground_root", [False, True])
def test_renamed_rigs(data_dir, scheme, ground_root):
    """Unreal (twist bones, a prop), Mixamo (toe ends), Character Creator (a pelvis joint of
    its own, twist and share bones, six toe joints per foot), with and without a ground
    root, Z up: the roles are LAFAN1's under the scheme's names."""
    rig = make_rig(lafan_clip(data_dir, 10), scheme, ground_root=ground_root, z_up=True)
    roles = find_humanoid(rig.skeleton)
    assert roles.names() == _renamed(scheme)
    assert len(roles.above_hips) == int(ground_root)
    assert find_feet(rig.skeleton) == sorted(roles.contact_joints)
    assert find_hips(rig.skeleton) == rig.skeleton.index(_renamed(scheme)["hips"])


def test_vrm_and_smpl_names(data_dir):
    skel = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh").skeleton
    vrm = ("hips", "leftUpperLeg", "leftLowerLeg", "leftFoot", "leftToes", "rightUpperLeg", "rightLowerLeg",
           "rightFoot", "rightToes", "spine", "chest", "upperChest", "neck", "head", "leftShoulder", "leftUpperArm",
           "leftLowerArm", "leftHand", "rightShoulder", "rightUpperArm", "rightLowerArm", "rightHand")
    roles = find_humanoid(Skeleton(vrm, skel.parents, skel.offsets)).names()
    assert (roles["left_ankle"], roles["left_foot"], roles["right_lower_arm"], roles["chest"]) == (
        "leftFoot", "leftToes", "rightLowerArm", "upperChest")
    # SMPL: the "foot" is the toe, the "shoulder" the upper arm below a collar
    smpl = ("Pelvis", "L_Hip", "L_Knee", "L_Ankle", "L_Foot", "R_Hip", "R_Knee", "R_Ankle", "R_Foot", "Spine1",
            "Spine2", "Spine3", "Neck", "Head", "L_Collar", "L_Shoulder", "L_Elbow", "L_Wrist", "R_Collar",
            "R_Shoulder", "R_Elbow", "R_Wrist")
    roles = find_humanoid(Skeleton(smpl, skel.parents, skel.offsets)).names()
    assert (roles["hips"], roles["left_upper_leg"], roles["left_ankle"], roles["left_foot"]) == (
        "Pelvis", "L_Hip", "L_Ankle", "L_Foot")
    assert (roles["left_shoulder"], roles["left_upper_arm"], roles["left_lower_arm"], roles["left_hand"]) == (
        "L_Collar", "L_Shoulder", "L_Elbow", "L_Wrist")


def test_unnamed_rig_from_branching_and_rest_pose(data_dir):
    """A Mixamo rig (T pose at rest) with every joint renamed j0, j1, ...: the legs and hips
    from the branching, left from ``up x forward``."""
    skel = load_bvh(data_dir / "genmm-examples" / "Joe_Walk-In-Circle.bvh").skeleton
    anon = Skeleton(tuple(f"j{i}" for i in range(skel.num_joints)), skel.parents, skel.offsets)
    roles = find_humanoid(anon)
    assert not roles.from_names
    got = {r: skel.names[j] for r, j in roles.roles}
    assert got["left_upper_leg"] == "mixamorig7:LeftUpLeg" and got["right_ankle"] == "mixamorig7:RightFoot"
    assert got["hips"] == "mixamorig7:Hips" and got["left_foot"] == "mixamorig7:LeftToeBase"
    mirrored = Skeleton(anon.names, anon.parents, anon.offsets * [-1.0, 1.0, 1.0])  # left and right swap
    assert mirrored.names[find_humanoid(mirrored)["left_upper_leg"]] == anon.names[roles["right_upper_leg"]]


def test_roles_map_overrides_and_bad_maps(data_dir):
    skel = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh").skeleton
    roles = find_humanoid(skel, {"left_foot": "LeftFoot", "head": "Neck"})
    assert roles.names()["left_foot"] == "LeftFoot" and roles.names()["head"] == "Neck"
    assert roles.names()["right_foot"] == "RightToe" and set(roles.overridden) == {"left_foot", "head"}
    moved = find_humanoid(skel, {"left_toe": "LeftFoot"})
    assert moved.names()["left_foot"] == "LeftFoot"  # the contact joint follows the toe
    lower = find_humanoid(skel, {"left_ankle": "LeftLeg"})  # the toe and contact follow the ankle named
    assert (lower.names()["left_toe"], lower.names()["left_foot"]) == ("LeftFoot", "LeftFoot")
    toeless = find_humanoid(skel, {"left_ankle": "LeftToe"})
    assert "left_toe" not in toeless and toeless.names()["left_foot"] == "LeftToe"
    with pytest.raises(HumanoidError, match="unknown role 'left_knee'"):
        find_humanoid(skel, {"left_knee": "LeftLeg"})
    with pytest.raises(HumanoidError, match=r"'left_foot'.*unknown joint 'LeftToes'.*Did you mean"):
        find_humanoid(skel, {"left_foot": "LeftToes"})


def test_no_humanoid_is_one_line(data_dir):
    crab = load_bvh(data_dir / "genmm-examples" / "Crabnew_Crab-dance-long.bvh").skeleton
    with pytest.raises(HumanoidError) as e:
        find_humanoid(crab)
    msg = str(e.value)
    assert "\n" not in msg and "no humanoid found" in msg and '"roles"' in msg
    # a roles map naming the legs makes it one
    legs = {"hips": "ORG_BN_Bip01_Pelvis", "left_upper_leg": "DEF_BN_Leg_L_11", "left_lower_leg": "DEF_BN_Leg_L_12",
            "left_ankle": "DEF_BN_Leg_L_13", "right_upper_leg": "DEF_BN_Leg_R_11",
            "right_lower_leg": "DEF_BN_Leg_R_12", "right_ankle": "DEF_BN_Leg_R_13"}
    assert find_humanoid(crab, legs).names()["left_foot"] in ("DEF_BN_Leg_L_13", "DEF_BN_Leg_L_14")


def test_schema_roles_change_the_joint_used(data_dir, tmp_path):
    """Naming ``left_foot`` in a schema file's roles map changes the database's foot
    features, its contacts and the leg that foot locking bends."""
    clip = lafan_clip(data_dir, 240)
    path = tmp_path / "schema.json"
    doc = json.loads(default_schema().to_json())
    doc["roles"] = {"left_foot": "LeftFoot"}
    path.write_text(json.dumps(doc))
    schema = schema_by_name(str(path))
    assert schema.roles_map == {"left_foot": "LeftFoot"}
    plain = MotionDatabase.build([clip])
    named = MotionDatabase.build([clip], schema=schema)
    sk = named.skeleton
    assert [sk.names[j] for j in plain.foot_joints] == ["LeftToe", "RightToe"]
    assert [sk.names[j] for j in named.foot_joints] == ["LeftFoot", "RightToe"]
    sl = schema.slice("foot_position")
    assert not np.allclose(plain.raw_features[:, sl][:, :3], named.raw_features[:, sl][:, :3])
    np.testing.assert_array_equal(plain.raw_features[:, sl][:, 3:], named.raw_features[:, sl][:, 3:])
    assert [tuple(sk.names[j] for j in leg) for leg in leg_chains(named)] == [
        ("LeftUpLeg", "LeftLeg", "LeftFoot", "LeftFoot"), ("RightUpLeg", "RightLeg", "RightFoot", "RightToe")]
    again = FeatureSchema.from_json(named.schema.to_json())  # the roles survive a save
    assert again.roles_map == {"left_foot": "LeftFoot"}
    assert plain.schema.to_json() == default_schema().to_json() and '"roles"' not in plain.schema.to_json()


def test_schema_refuses_bad_roles(tmp_path):
    path = tmp_path / "bad.json"
    doc = json.loads(default_schema().to_json())
    doc["roles"] = {"left_paw": "LeftFoot"}
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=r"bad.json: roles: unknown role 'left_paw'"):
        schema_by_name(str(path))
    doc["roles"] = ["LeftFoot"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="roles must be an object"):
        schema_by_name(str(path))


def test_character_creator_rig_builds(data_dir):
    """The rig of the issue (CC names, six toe joints per foot, a ground root): the old
    name lookup found seven feet per side and refused it."""
    rig = make_rig(lafan_clip(data_dir, 240), "cc", ground_root=True)
    db = MotionDatabase.build([rig])
    assert [db.skeleton.names[j] for j in db.foot_joints] == ["CC_Base_L_ToeBase", "CC_Base_R_ToeBase"]
    assert [tuple(db.skeleton.names[j] for j in leg)[:3] for leg in leg_chains(db)] == [
        ("CC_Base_L_Thigh", "CC_Base_L_Calf", "CC_Base_L_Foot"), ("CC_Base_R_Thigh", "CC_Base_R_Calf", "CC_Base_R_Foot")]
    base = MotionDatabase.build([lafan_clip(data_dir, 240)])
    np.testing.assert_allclose(db.raw_features, base.raw_features, atol=1e-4)
    np.testing.assert_array_equal(db.contacts, base.contacts)


def test_a_foot_without_toes_contacts_at_the_ankle(data_dir):
    """No toe joints: the contact joint is the ankle, and foot locking bends the same leg."""
    from motionmatch.anim.rig_edit import drop_joints

    clip = drop_joints(lafan_clip(data_dir, 240), ["LeftToe", "RightToe"])
    roles = find_humanoid(clip.skeleton)
    assert "left_toe" not in roles and roles.names()["left_foot"] == "LeftFoot"
    db = MotionDatabase.build([clip])
    assert [tuple(db.skeleton.names[j] for j in leg) for leg in leg_chains(db)] == [
        ("LeftUpLeg", "LeftLeg", "LeftFoot", "LeftFoot"), ("RightUpLeg", "RightLeg", "RightFoot", "RightFoot")]


@pytest.mark.parametrize("command", [["inspect", "x.bvh"], ["convert", "a.bvh", "b.bvh"], ["build", "d", "-o", "x.npz"],
                                     ["genmm", "a.bvh", "-o", "b.bvh"], ["genmm-eval", "a.bvh", "--example", "b.bvh"],
                                     ["viewer"], ["batch", "build", "d", "-o", "x.npz"],
                                     ["batch", "genmm", "a.bvh", "-o", "d"], ["pose", "render", "a.bvh", "-o", "k.npz"],
                                     ["train-direction-net", "-o", "n.npz"]])
def test_every_command_that_reads_bvh_takes_up_and_units(command):
    from motionmatch.cli.main import build_parser

    args = build_parser().parse_args([*command, "--up", "z", "--units", "cm"])
    assert (args.up, args.units) == ("z", "cm")
    assert build_parser().parse_args(command).up == "auto"


def test_a_roles_map_on_the_command_line(data_dir, tmp_path, capsys):
    """``build --roles MAP.json`` and a schema file holding only ``roles``: the joint named
    is the database's foot; a map naming no role is refused in one line, nothing written."""
    from motionmatch.cli.main import main

    take = str(data_dir / "lafan1" / "walk1_subject1_stop.bvh")
    (tmp_path / "map.json").write_text(json.dumps({"right_foot": "RightFoot"}))
    (tmp_path / "only_roles.json").write_text(json.dumps({"roles": {"left_foot": "LeftFoot"}}))
    assert main(["build", take, "-o", str(tmp_path / "a.npz"), "--roles", str(tmp_path / "map.json"), "-q"]) == 0
    assert main(["build", take, "-o", str(tmp_path / "b.npz"), "--schema", str(tmp_path / "only_roles.json"),
                 "-q"]) == 0
    a, b = MotionDatabase.load(tmp_path / "a.npz"), MotionDatabase.load(tmp_path / "b.npz")
    assert [a.skeleton.names[j] for j in a.foot_joints] == ["LeftToe", "RightFoot"]
    assert [b.skeleton.names[j] for j in b.foot_joints] == ["LeftFoot", "RightToe"]
    assert b.schema.dims == 27
    (tmp_path / "bad.json").write_text(json.dumps(["LeftFoot"]))
    capsys.readouterr()
    assert main(["build", take, "-o", str(tmp_path / "c.npz"), "--roles", str(tmp_path / "bad.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "bad.json: a roles map is a JSON object" in err and not (tmp_path / "c.npz").exists()
