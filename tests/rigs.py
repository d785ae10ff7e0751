"""Rigs of other tools made from the shared LAFAN1 files at test time (never committed).

:func:`make_rig` renames a LAFAN1 clip (hips-rooted, 22 joints) to the Unreal, Mixamo or
Character Creator scheme, adds what those rigs carry (a ground root, a pelvis joint of
its own, twist bones, several toes per foot, a prop) and can break it the ways files from
other labs come broken: Z up, centimetres, rooted at the hips with the feet 0.94 m under
the floor. Every added joint has a zero rotation, so the world pose of every original
joint is unchanged: a rig and the original describe the same body.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from motionmatch.anim import Motion, Skeleton, load_bvh, quat, save_bvh
from motionmatch.anim.axes import Z_UP_TO_Y_UP, rotate_world
from motionmatch.anim.rig_edit import rooted_at

LAFAN = ("Hips", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe", "RightUpLeg", "RightLeg", "RightFoot", "RightToe",
         "Spine", "Spine1", "Spine2", "Neck", "Head", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
         "RightShoulder", "RightArm", "RightForeArm", "RightHand")

_UNREAL = ("pelvis", "thigh_l", "calf_l", "foot_l", "ball_l", "thigh_r", "calf_r", "foot_r", "ball_r", "spine_01",
           "spine_02", "spine_03", "neck_01", "head", "clavicle_l", "upperarm_l", "lowerarm_l", "hand_l",
           "clavicle_r", "upperarm_r", "lowerarm_r", "hand_r")
_MIXAMO = tuple(f"mixamorig:{n}" for n in ("Hips", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToeBase", "RightUpLeg",
                                            "RightLeg", "RightFoot", "RightToeBase", "Spine", "Spine1", "Spine2",
                                            "Neck", "Head", "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
                                            "RightShoulder", "RightArm", "RightForeArm", "RightHand"))
_CC = tuple(f"CC_Base_{n}" for n in ("Hip", "L_Thigh", "L_Calf", "L_Foot", "L_ToeBase", "R_Thigh", "R_Calf",
                                     "R_Foot", "R_ToeBase", "Waist", "Spine01", "Spine02", "NeckTwist01", "Head",
                                     "L_Clavicle", "L_Upperarm", "L_Forearm", "L_Hand", "R_Clavicle", "R_Upperarm",
                                     "R_Forearm", "R_Hand"))
NAMES = {"lafan": LAFAN, "unreal": _UNREAL, "mixamo": _MIXAMO, "cc": _CC}
GROUND_ROOT = {"lafan": "Root", "unreal": "root", "mixamo": "mixamorig:Root", "cc": "CC_Base_BoneRoot"}


def lafan_clip(data_dir: Path, frames: int = 300, start: int = 0, take: str = "walk1_subject1_walk2") -> Motion:
    """``frames`` frames of a LAFAN1 take at 60 fps, rooted at the hips (its
    ``SimulationBone`` dropped: 22 joints, as LAFAN1 publishes them)."""
    m = rooted_at(load_bvh(data_dir / "lafan1-60fps" / f"{take}.bvh"), "Hips")
    m = m[start:start + frames]
    m.name = take
    return m


def _rebuild(m: Motion, names: list[str], parents: list[int], source: list[int | None],
             offsets: list[np.ndarray | None]) -> Motion:
    """A clip on a new joint list: joint ``k`` copies old joint ``source[k]``'s animation, or
    is added (zero rotation, translation ``offsets[k]``)."""
    F, J = m.num_frames, len(names)
    rot = np.broadcast_to(quat.identity(), (F, J, 4)).copy()
    tr = np.zeros((F, J, 3))
    off = np.zeros((J, 3))
    channels = []
    for k, s in enumerate(source):
        if s is None:
            tr[:, k] = offsets[k]
            off[k] = offsets[k]
            channels.append(("Zrotation", "Yrotation", "Xrotation"))
        else:
            rot[:, k], tr[:, k], off[k] = m.rotations[:, s], m.translations[:, s], m.skeleton.offsets[s]
            channels.append(m.skeleton.channels[s])
    if source[0] is None:
        channels[0] = ("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation")
    new_of = {src: k for k, src in enumerate(source) if src is not None}
    old_es = m.skeleton
    es = [(new_of[int(p)], o) for p, o in zip(old_es.end_site_parents, old_es.end_site_offsets) if int(p) in new_of]
    skel = Skeleton(tuple(names), np.asarray(parents), off, np.array([p for p, _ in es], dtype=np.int64),
                    np.array([o for _, o in es]).reshape(-1, 3), channels=tuple(channels))
    return Motion(skel, rot, tr, m.fps, name=m.name, file_scale=m.file_scale)


def make_rig(m: Motion, scheme: str, *, ground_root: bool = False, extras: bool = True, z_up: bool = False,
             feet_below_floor: bool = False) -> Motion:
    """``m`` (a LAFAN1 clip) as a rig of ``scheme`` (``lafan``, ``unreal``, ``mixamo``, ``cc``).

    Args:
        ground_root: add a static root joint on the floor above the hips (CC's ``BoneRoot``).
        extras: what the scheme's rigs carry: Unreal twist bones and a prop on the right
            hand; Mixamo toe ends; Character Creator a ``Pelvis`` joint of its own under
            the hips, twist and share bones and six toe joints per foot.
        z_up: express the clip in a Z-up world.
        feet_below_floor: move the whole clip down by its mean hips height (the file's
            origin at the hips: the feet about 0.94 m under the floor).
    """
    if m.skeleton.names != LAFAN:
        raise ValueError("make_rig takes a hips-rooted LAFAN1 clip (22 joints)")
    new = NAMES[scheme]
    names: list[str] = []
    parents: list[int] = []
    source: list[int | None] = []
    offsets: list[np.ndarray | None] = []
    where: dict[int, int] = {}

    def add(name: str, parent: int, src: int | None, offset=None) -> int:
        names.append(name)
        parents.append(parent)
        source.append(src)
        offsets.append(None if offset is None else np.asarray(offset, dtype=float))
        return len(names) - 1

    root = add(GROUND_ROOT[scheme], -1, None, [0.0, 0.0, 0.0]) if ground_root else -1
    old_parents = m.skeleton.parents
    cc_pelvis = None
    for j, name in enumerate(LAFAN):
        p = root if old_parents[j] < 0 else where[old_parents[j]]
        if scheme == "cc" and extras and name in ("LeftUpLeg", "RightUpLeg"):
            if cc_pelvis is None:
                cc_pelvis = add("CC_Base_Pelvis", where[0], None, [0.0, 0.0, 0.0])
            p = cc_pelvis
        where[j] = add(new[j], p, j)
        if not extras:
            continue
        off = m.skeleton.offsets
        es = m.skeleton.end_site_offsets[list(m.skeleton.end_site_parents).index(j)] \
            if j in m.skeleton.end_site_parents else 0.5 * off[j]  # where a leaf ends
        if scheme == "unreal" and name in ("LeftUpLeg", "LeftLeg", "LeftArm", "LeftForeArm",
                                           "RightUpLeg", "RightLeg", "RightArm", "RightForeArm"):
            base = new[j].rsplit("_", 1)
            add(f"{base[0]}_twist_01_{base[1]}", where[j], None, 0.5 * off[j + 1])
        if scheme == "unreal" and name == "RightHand":
            add("weapon_r", where[j], None, [0.0, 0.1, 0.0])
        if scheme == "mixamo" and name.endswith("Toe"):
            add(new[j].replace("ToeBase", "Toe_End"), where[j], None, es)
        if scheme == "cc" and name in ("LeftUpLeg", "LeftLeg", "RightUpLeg", "RightLeg"):
            add(new[j] + "Twist01", where[j], None, 0.5 * off[j + 1])
            if name.endswith("Leg") and not name.endswith("UpLeg"):
                add(new[j].replace("Calf", "KneeShareBone"), where[j], None, [0.0, 0.0, 0.0])
        if scheme == "cc" and name.endswith("Toe"):
            side = new[j].split("_")[2]
            add(f"CC_Base_{side}_ToeBaseShareBone", where[j], None, [0.0, 0.0, 0.0])
            tip = es / max(np.linalg.norm(es), 1e-9) * 0.04
            for i, toe in enumerate(("BigToe1", "IndexToe1", "MidToe1", "RingToe1", "PinkyToe1")):
                side_step = np.cross(tip, [0.0, 1.0, 0.0]) * (i - 2) * 0.5
                add(f"CC_Base_{side}_{toe}", where[j], None, tip + side_step)
    out = _rebuild(m, names, parents, source, offsets)
    if feet_below_floor:
        hips = where[0]
        drop = float(np.mean(out.world_positions[:, hips, 1]))
        tr = out.translations.copy()
        tr[:, 0, 1] -= drop
        out = out.with_data(out.rotations, tr)
    if z_up:
        out = rotate_world(out, quat.conjugate(Z_UP_TO_Y_UP))
    out.name = f"{m.name}_{scheme}"
    return out


def write_rig(m: Motion, folder: Path, stem: str, *, cm: bool = True) -> Path:
    """Save a rig as BVH (in centimetres unless ``cm`` is false)."""
    folder.mkdir(parents=True, exist_ok=True)
    return save_bvh(m, folder / f"{stem}.bvh", units="cm" if cm else "m")
