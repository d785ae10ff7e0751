"""Retargeting (issue 32 part 3) on skeletons built here, with known answers: a rig whose joint
axes (bone rolls) differ, an A pose against a T pose, a longer-legged rig, foot IK; and the
bad inputs refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.anim import Motion, Skeleton, quat
from motionmatch.anim.grounding import floor_height
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.leg_ik import plant_weights, planted_offsets, smoothstep
from motionmatch.anim.retarget import Retargeter, RetargetSettings, retarget
from motionmatch.anim.retarget_map import Rig, most_upright_frame, reference_rig, stands
from motionmatch.errors import DataWarning, MotionError

# name, parent, offset (m) of a T-posed humanoid facing +Z, left toward +X
_T_POSE = (
    ("Hips", None, (0.0, 0.95, 0.0)),
    ("Spine", "Hips", (0.0, 0.12, 0.0)), ("Spine1", "Spine", (0.0, 0.15, 0.0)),
    ("Neck", "Spine1", (0.0, 0.22, 0.0)), ("Head", "Neck", (0.0, 0.12, 0.02)),
    ("LeftShoulder", "Spine1", (0.05, 0.18, 0.0)), ("LeftArm", "LeftShoulder", (0.13, 0.0, 0.0)),
    ("LeftForeArm", "LeftArm", (0.28, 0.0, 0.0)), ("LeftHand", "LeftForeArm", (0.25, 0.0, 0.0)),
    ("RightShoulder", "Spine1", (-0.05, 0.18, 0.0)), ("RightArm", "RightShoulder", (-0.13, 0.0, 0.0)),
    ("RightForeArm", "RightArm", (-0.28, 0.0, 0.0)), ("RightHand", "RightForeArm", (-0.25, 0.0, 0.0)),
    ("LeftUpLeg", "Hips", (0.1, -0.05, 0.0)), ("LeftLeg", "LeftUpLeg", (0.0, -0.42, 0.0)),
    ("LeftFoot", "LeftLeg", (0.0, -0.41, 0.0)), ("LeftToe", "LeftFoot", (0.0, -0.05, 0.13)),
    ("RightUpLeg", "Hips", (-0.1, -0.05, 0.0)), ("RightLeg", "RightUpLeg", (0.0, -0.42, 0.0)),
    ("RightFoot", "RightLeg", (0.0, -0.41, 0.0)), ("RightToe", "RightFoot", (0.0, -0.05, 0.13)),
)


def t_pose(leg_scale: float = 1.0, arms_down_deg: float = 0.0) -> Skeleton:
    """The humanoid above (legs ``leg_scale`` times as long; arms lowered by ``arms_down_deg``: an A pose)."""
    names = tuple(n for n, _, _ in _T_POSE)
    parents = [-1 if p is None else names.index(p) for _, p, _ in _T_POSE]
    off = np.array([o for _, _, o in _T_POSE], dtype=float)
    legs = [names.index(n) for n in ("LeftLeg", "LeftFoot", "RightLeg", "RightFoot")]
    off[legs] *= leg_scale
    off[0, 1] = 0.05 + 0.83 * leg_scale + 0.05
    a = np.radians(arms_down_deg)
    for side, sign in (("Left", 1.0), ("Right", -1.0)):
        for n in ("ForeArm", "Hand"):
            j = names.index(side + n)
            length = np.linalg.norm(off[j])
            off[j] = [sign * length * np.cos(a), -length * np.sin(a), 0.0]
    es_par = np.array([names.index(n) for n in ("Head", "LeftHand", "RightHand", "LeftToe", "RightToe")])
    es_off = np.array([[0, 0.1, 0], [0.08, 0, 0], [-0.08, 0, 0], [0, 0, 0.05], [0, 0, 0.05]], dtype=float)
    return Skeleton(names, np.array(parents), off, es_par, es_off)


def walking(skel: Skeleton, frames: int = 240, fps: float = 60.0) -> Motion:
    """A smooth made-up motion: legs and arms swinging, a little twist everywhere, moving forward."""
    t = np.arange(frames) / fps
    J = skel.num_joints
    rng = np.random.default_rng(3)
    axes = rng.normal(size=(J, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    amp = rng.uniform(0.05, 0.3, J)
    phase = rng.uniform(0, 2 * np.pi, J)
    ang = amp[None] * np.sin(2 * np.pi * 1.0 * t[:, None] + phase[None])
    rot = quat.from_axis_angle(np.broadcast_to(axes, (frames, J, 3)), ang)
    for side, sign in (("Left", 1.0), ("Right", -1.0)):  # legs swing about X, knees bend forward
        up = skel.index(side + "UpLeg")
        knee = skel.index(side + "Leg")
        rot[:, up] = quat.from_axis_angle(np.array([1.0, 0, 0]), 0.4 * sign * np.sin(2 * np.pi * t))
        rot[:, knee] = quat.from_axis_angle(np.array([1.0, 0, 0]), 0.3 + 0.3 * np.sin(2 * np.pi * t + 1))
    tr = np.broadcast_to(skel.offsets, (frames, J, 3)).copy()
    tr[:, 0, 2] = 1.2 * t
    return Motion(skel, rot, tr, fps, name="made_up")


def rolled(skel: Skeleton, seed: int = 1) -> tuple[Skeleton, np.ndarray]:
    """The same rig with every joint's axes turned at random (bone rolls, other joint axes):
    the skeleton and the local rotations of its pose that matches ``skel``'s rest pose."""
    rng = np.random.default_rng(seed)
    g = quat.normalize(rng.normal(size=(skel.num_joints, 4)))  # each joint's frame in the world
    pos = np.zeros((skel.num_joints, 3))
    for j in range(1, skel.num_joints):
        pos[j] = pos[skel.parents[j]] + skel.offsets[j]
    off = skel.offsets.copy()
    local = g.copy()
    for j in range(1, skel.num_joints):
        p = skel.parents[j]
        off[j] = quat.inv_rotate(g[p], pos[j] - pos[p])
        local[j] = quat.inv_mul(g[p], g[j])
    es_off = quat.inv_rotate(g[skel.end_site_parents], skel.end_site_offsets)
    return Skeleton(skel.names, skel.parents, off, skel.end_site_parents, es_off), local


NO_IK = RetargetSettings(foot_ik=False)


def test_the_same_rig_gives_back_the_motion():
    skel = t_pose()
    m = walking(skel)
    out = retarget(m, skel, settings=NO_IK)
    assert np.allclose(out.world_positions, m.world_positions, atol=1e-9)
    assert np.allclose(np.abs(np.sum(out.world_rotations * m.world_rotations, -1)), 1.0, atol=1e-9)


def test_other_joint_axes_follow_the_same_world_pose():
    skel = t_pose()
    m = walking(skel)
    other, pose = rolled(skel)
    roles = find_humanoid(other)
    target = Rig(other, pose, roles, rest_rotations=pose)
    out = retarget(m, target, settings=NO_IK)
    assert np.abs(out.world_positions - m.world_positions).max() < 1e-9
    # every joint turns as the source's does, in its own axes: the rest-to-now rotation is the same
    src_turn = quat.mul_inv(m.world_rotations, Retargeter(reference_rig(m), target).source.world()[1][None])
    tgt_turn = quat.mul_inv(out.world_rotations, target.world()[1][None])
    assert np.allclose(np.abs(np.sum(src_turn * tgt_turn, -1)), 1.0, atol=1e-9)


def test_an_a_pose_rig_follows_a_t_pose_motion():
    t, a = t_pose(), t_pose(arms_down_deg=40.0)
    assert stands(a, quat.identity((a.num_joints,)), find_humanoid(a))
    m = walking(t)
    out = retarget(m, a, settings=NO_IK)
    # the same bone lengths and exact directions: every joint where the source's is
    assert np.abs(out.world_positions - m.world_positions).max() < 1e-9
    # and at rest it is the T pose again: the A pose's arms raised by 40 degrees
    rest = m.with_data(quat.identity((1, t.num_joints)), t.offsets[None].copy())
    back = retarget(rest, a, settings=NO_IK)
    hand, fore = a.index("LeftHand"), a.index("LeftForeArm")
    bone = back.world_positions[0, hand] - back.world_positions[0, fore]
    assert np.allclose(bone / np.linalg.norm(bone), [1.0, 0.0, 0.0], atol=1e-9)


def test_root_motion_is_scaled_by_the_legs_length_ratio():
    short, long = t_pose(), t_pose(leg_scale=1.3)
    m = walking(short)
    r = Retargeter(reference_rig(m), reference_rig(long), NO_IK)
    assert r.scale == pytest.approx(1.3)
    out = r(m)
    hips = out.skeleton.index("Hips")
    floor = floor_height(m)  # scaled about the source's floor: the feet stay on it
    want = 1.3 * m.world_positions[:, 0]
    want[:, 1] = floor + 1.3 * (m.world_positions[:, 0, 1] - floor)
    assert np.allclose(out.world_positions[:, hips], want, atol=1e-9)
    for j in range(1, m.num_joints):  # every bone points as the source's
        p = m.skeleton.parents[j]
        a = m.world_positions[:, j] - m.world_positions[:, p]
        b = out.world_positions[:, j] - out.world_positions[:, p]
        cos = np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        assert cos.min() > 1 - 1e-9, m.skeleton.names[j]



def test_independent_poses_in_one_call_are_the_takes_frames():
    """``Retargeter.poses`` (a viewer tick's characters, one call): frames of a take given as
    separate poses come out as the take's own retargeting (foot IK off, the same floor);
    scaled about each pose's own centre, a pose is the same body moved (the legs' ratio 1.3);
    a pose of the wrong joint count is refused in one line."""
    short, long = t_pose(), t_pose(leg_scale=1.3)
    m = walking(short)
    r = Retargeter(reference_rig(m), reference_rig(long), NO_IK)
    whole = r(m)
    rot, tr = r.poses(m.world_rotations[::-1], m.world_positions[::-1], floor=floor_height(m))
    from motionmatch.anim.kinematics import forward_kinematics

    pos, wrot = forward_kinematics(long.parents, rot, tr)
    assert np.allclose(pos[::-1], whole.world_positions, atol=1e-9)
    assert np.allclose(np.abs(np.sum(wrot[::-1] * whole.world_rotations, -1)), 1.0, atol=1e-9)
    # about each pose's centre on the ground: the hips move by k times their offset from it
    centres = m.world_positions[:, 0] * [1.0, 0.0, 1.0]
    rot2, tr2 = r.poses(m.world_rotations, m.world_positions, floor=0.0, centres=centres)
    hips = tr2[:, 0]
    want = centres + 1.3 * (m.world_positions[:, 0] - centres)
    assert np.allclose(hips, want, atol=1e-9)
    assert np.allclose(rot2, whole.rotations, atol=1e-12)
    # the world poses in one compiled pass: the forward kinematics of those local transforms
    wp2, wr2 = r.world_poses(m.world_rotations, m.world_positions, floor=0.0, centres=centres)
    fk_pos, fk_rot = forward_kinematics(long.parents, rot2, tr2)
    assert np.allclose(wp2, fk_pos, atol=1e-9)
    assert np.allclose(np.abs(np.sum(wr2 * fk_rot, -1)), 1.0, atol=1e-9)
    with pytest.raises(MotionError, match=r"\[F, 21, 4\]"):
        r.poses(m.world_rotations[:, :5], m.world_positions[:, :5])


def test_foot_ik_plants_the_feet_of_a_sliding_source():
    skel = t_pose()
    F = 120
    rot = quat.identity((F, skel.num_joints))
    for side in ("Left", "Right"):  # knees a little bent, so the legs can reach
        rot[:, skel.index(side + "UpLeg")] = quat.from_axis_angle(np.array([1.0, 0, 0]), -0.25)
        rot[:, skel.index(side + "Leg")] = quat.from_axis_angle(np.array([1.0, 0, 0]), 0.5)
    tr = np.broadcast_to(skel.offsets, (F, skel.num_joints, 3)).copy()
    tr[:, 0, 2] = np.linspace(0.0, 0.12, F)  # the body glides 12 cm: both feet skate
    m = Motion(skel, rot, tr, 60.0)
    lowest = m.world_positions[:, skel.index("LeftToe"), 1].min()
    tr[:, 0, 1] -= lowest  # toes on the floor
    m = m.with_data(rot, tr)
    toes = [skel.index("LeftToe"), skel.index("RightToe")]
    assert np.ptp(m.world_positions[:, toes, 2]) > 0.1
    out = retarget(m, t_pose(leg_scale=1.1))
    p = out.world_positions[:, [out.skeleton.index("LeftToe"), out.skeleton.index("RightToe")]]
    assert np.ptp(p[..., 0], axis=0).max() < 1e-6 and np.ptp(p[..., 2], axis=0).max() < 1e-6  # held in place
    assert abs(p[..., 1].min()) < 1e-6  # on the floor, not under it
    unplanted = retarget(m, t_pose(leg_scale=1.1), settings=NO_IK)
    assert np.ptp(unplanted.world_positions[:, out.skeleton.index("LeftToe"), 2]) > 0.1


def test_plant_weights_match_planted_offsets():
    contact = np.zeros(40, dtype=bool)
    contact[10:20] = True
    w = plant_weights(contact, 4)
    assert np.all(w[10:20] == 1.0) and w[5] == 0.0 and w[25] == 0.0
    assert w[8] == pytest.approx(float(smoothstep(np.array(1 - 2 / 5))))
    pos = np.zeros((40, 3))
    pos[:, 0] = np.arange(40) * 0.01
    d = planted_offsets(pos, contact, 4)
    target = pos[10:20].mean(axis=0)
    assert np.allclose(d, w[:, None] * (target - pos), atol=1e-12)


def test_a_standing_pose_is_read_from_a_take_when_the_rest_pose_does_not_stand():
    skel = t_pose()
    folded = Skeleton(skel.names, skel.parents, np.abs(skel.offsets[:, [1, 0, 2]]) * [1, 1, 0],
                      skel.end_site_parents, skel.end_site_offsets)  # every bone along +X
    roles = find_humanoid(skel)
    assert not stands(folded, quat.identity((skel.num_joints,)), roles)
    with pytest.raises(HumanoidError, match="does not stand"):
        reference_rig(folded, roles)
    m = walking(skel)
    assert most_upright_frame(m, roles) in range(m.num_frames)
    assert stands(skel, reference_rig(m).rotations, roles)


def test_bad_inputs_are_refused_in_one_line():
    skel = t_pose()
    m = walking(skel)
    r = Retargeter(reference_rig(m), reference_rig(t_pose(leg_scale=1.2)))
    other = walking(t_pose(arms_down_deg=10))  # same names, other offsets: fine
    r(other)
    renamed = Skeleton(tuple(n.replace("Left", "L_") for n in skel.names), skel.parents, skel.offsets)
    with pytest.raises(MotionError, match="not on the retargeter's source skeleton") as e:
        r(m.with_data(m.rotations, m.translations, skeleton=renamed))
    assert "\n" not in str(e.value)
    blob = Skeleton(("a", "b", "c"), np.array([-1, 0, 1]), np.ones((3, 3)))
    with pytest.raises(HumanoidError, match="no humanoid found") as e:
        retarget(m, blob)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="blend_s"):
        RetargetSettings(blend_s=-1.0)


def test_a_plant_the_legs_cannot_reach_is_warned_about():
    skel = t_pose()
    F = 120
    rot = quat.identity((F, skel.num_joints))
    tr = np.broadcast_to(skel.offsets, (F, skel.num_joints, 3)).copy()
    tr[:, 0, 2] = np.linspace(0.0, 0.8, F)  # 0.4 m/s: "planted" all along, 80 cm apart at the ends
    m = Motion(skel, rot, tr, 60.0, name="glide")
    m = m.with_data(rot, tr - [0.0, m.world_positions[:, skel.index("LeftToe"), 1].min(), 0.0])
    with pytest.warns(DataWarning) as said:
        retarget(m, t_pose(leg_scale=1.1))
    lines = sorted(str(w.message) for w in said)
    assert len(lines) == 2 and all("cannot reach the floor where the source's foot is planted" in s for s in lines)
    assert lines[0].startswith("glide: the rig's left leg") and lines[1].startswith("glide: the rig's right leg")
    import warnings

    short = m.with_data(rot, np.broadcast_to(m.translations[:1], m.translations.shape).copy())  # standing still
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        retarget(short, t_pose(leg_scale=1.1))


def test_a_source_without_toes_puts_the_targets_toes_on_its_floor():
    """A source whose feet end at the ankle (no toe joint, no end site) stands on its ankles
    (its floor: the lowest point where a foot is planted); a target with toes and toe tips
    puts them on that floor, not its ankles."""
    full = t_pose()
    keep = [j for j, n in enumerate(full.names) if "Toe" not in n]
    es = [k for k, p in enumerate(full.end_site_parents) if p in keep]
    remap = {j: i for i, j in enumerate(keep)}
    ankles = Skeleton(tuple(full.names[j] for j in keep), np.array([remap.get(int(full.parents[j]), -1) for j in keep]),
                      full.offsets[keep], np.array([remap[int(full.end_site_parents[k])] for k in es]),
                      full.end_site_offsets[es])
    F = 120
    rot = quat.identity((F, ankles.num_joints))
    for side in ("Left", "Right"):
        rot[:, ankles.index(side + "UpLeg")] = quat.from_axis_angle(np.array([1.0, 0, 0]), -0.2)
        rot[:, ankles.index(side + "Leg")] = quat.from_axis_angle(np.array([1.0, 0, 0]), 0.4)
    tr = np.broadcast_to(ankles.offsets, (F, ankles.num_joints, 3)).copy()
    m = Motion(ankles, rot, tr, 60.0)
    m = m.with_data(rot, tr - [0.0, m.world_positions[:, ankles.index("LeftFoot"), 1].min() - 0.07, 0.0])
    assert find_humanoid(ankles).get("left_toe") is None
    out = retarget(m, full)
    for side in ("Left", "Right"):
        toe = out.world_positions[:, full.index(side + "Toe"), 1]
        tip = out.end_site_positions()[:, list(full.end_site_parents).index(full.index(side + "Toe")), 1]
        assert abs(min(toe.min(), tip.min()) - floor_height(m)) < 0.005  # on the floor the source stands on
