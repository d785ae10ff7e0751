"""A humanoid standing in an A pose, made from its skeleton alone.

:func:`standing_pose` turns each humanoid bone (:func:`~motionmatch.anim.humanoid.find_humanoid`)
to point where a person standing at ease points it: the legs straight down and a little
apart, the spine, neck and head up, the arms hanging 45 degrees out from the body, the
feet forward. The mannequin is built in it (:func:`~motionmatch.anim.mannequin.bind_pose`):
every limb stands apart from the others whatever the rig's rest pose (LAFAN1's folds every
bone onto one line) and whatever the motion does, and no frame of the motion is needed.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from motionmatch.anim import kinematics, quat
from motionmatch.anim.humanoid import find_humanoid
from motionmatch.anim.skeleton import Skeleton

__all__ = ["ARM_SPREAD_DEG", "LEG_SPREAD_DEG", "rolled_like", "standing_pose"]

#: How far the arms hang out from the body, and the legs, in degrees from straight down.
ARM_SPREAD_DEG = 45.0
LEG_SPREAD_DEG = 4.0


def _frame_rotation(u1: np.ndarray, u2: np.ndarray, v1: np.ndarray, v2: np.ndarray) -> np.ndarray | None:
    """The rotation (w, x, y, z) taking direction ``u1`` to ``v1`` and the plane of ``u1``
    and ``u2`` to that of ``v1`` and ``v2`` (``u2`` to the side of ``v2``), or ``None``
    when either pair is parallel."""
    def basis(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        if np.linalg.norm(a) < 1e-9:
            return None
        e1 = a / np.linalg.norm(a)
        e2 = b - float(b @ e1) * e1
        n = float(np.linalg.norm(e2))
        if n < 1e-6 * max(float(np.linalg.norm(b)), 1e-12):
            return None
        e2 = e2 / n
        return np.stack([e1, e2, np.cross(e1, e2)], axis=1)
    src, dst = basis(u1, u2), basis(v1, v2)
    if src is None or dst is None:
        return None
    return quat.normalize(quat.from_matrix(dst @ src.T))


def standing_pose(skeleton: Skeleton, translations: np.ndarray | None = None,
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Local rotations ``(J, 4)`` and translations ``(J, 3)`` of ``skeleton`` standing,
    facing +Z, Y up (raises :class:`~motionmatch.anim.humanoid.HumanoidError` when it has
    no humanoid). ``translations (J, 3)``: the joints' offsets from their parents (m; by
    default the skeleton's); the root is put over the origin with its feet's lowest joint on
    the ground. Joints without a role keep their rest rotation relative to their parent."""
    roles = find_humanoid(skeleton)
    J = skeleton.num_joints
    trans = np.array(skeleton.offsets if translations is None else translations, dtype=np.float64).reshape(J, 3)
    ident = np.tile(quat.identity(), (J, 1))
    rest = kinematics.forward_kinematics(skeleton.parents, ident[None], trans[None])[0][0]
    up, front = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
    arm_s, arm_c = np.sin(np.radians(ARM_SPREAD_DEG)), np.cos(np.radians(ARM_SPREAD_DEG))
    leg_s, leg_c = np.sin(np.radians(LEG_SPREAD_DEG)), np.cos(np.radians(LEG_SPREAD_DEG))
    want: dict[int, tuple[int, np.ndarray]] = {}  # joint: (the child it aims at, the direction)
    sides: dict[int, tuple[int, int]] = {}  # joint: (its left, its right descendant): +X to the left

    def aim(joint: int | None, child: int | None, d) -> None:
        if joint is not None and child is not None and joint != child:
            want[joint] = (child, np.asarray(d, dtype=np.float64))

    top = roles.get("neck") if roles.get("neck") is not None else roles.get("head")
    if top is not None:
        chain = [top]
        while chain[-1] != roles.hips and chain[-1] >= 0:
            chain.append(int(skeleton.parents[chain[-1]]))
        chain = chain[::-1]
        for i, a in enumerate(chain[:-1]):  # at the next joint up the chain that is not on top of it
            b = next((b for b in chain[i + 1:] if np.linalg.norm(rest[b] - rest[a]) > 1e-6), None)
            aim(a, b, up)
        pair = next(((roles.get(f"left_{p}"), roles.get(f"right_{p}")) for p in ("upper_arm", "shoulder")
                     if roles.get(f"left_{p}") is not None and roles.get(f"right_{p}") is not None), None)
        for a in chain[1:]:
            if pair is not None and skeleton.descends_from(pair[0], a) and skeleton.descends_from(pair[1], a):
                sides[a] = pair
    sides[roles.hips] = (roles["left_upper_leg"], roles["right_upper_leg"])
    aim(roles.get("neck"), roles.get("head"), up)
    for side, x in (("left", 1.0), ("right", -1.0)):
        limb = {part: roles.get(f"{side}_{part}") for part in
                ("upper_leg", "lower_leg", "ankle", "toe", "shoulder", "upper_arm", "lower_arm", "hand")}
        aim(limb["upper_leg"], limb["lower_leg"], [x * leg_s, -leg_c, 0.0])
        aim(limb["lower_leg"], limb["ankle"], [x * leg_s, -leg_c, 0.0])
        aim(limb["ankle"], limb["toe"], front - 0.4 * up)
        aim(limb["shoulder"], limb["upper_arm"], [x, 0.0, 0.0])
        aim(limb["upper_arm"], limb["lower_arm"], [x * arm_s, -arm_c, 0.0])
        aim(limb["lower_arm"], limb["hand"], [x * arm_s, -arm_c, 0.0])
    world = ident.copy()
    local = ident.copy()
    for j in range(J):
        p = int(skeleton.parents[j])
        parent = world[p] if p >= 0 else quat.identity()
        if j in want:
            # the bone from j toward its aimed child, in j's frame at rest (identity rotations)
            child, d = want[j]
            bone = rest[child] - rest[j]
            turn = None
            if j in sides and np.linalg.norm(bone) > 1e-9:  # the hips and the spine: their left side to +X
                left, right = sides[j]
                turn = _frame_rotation(bone, rest[left] - rest[right], d, np.array([1.0, 0.0, 0.0]))
            if turn is None and np.linalg.norm(bone) > 1e-9:  # the least turn from the parent's frame
                turn = quat.mul(quat.between(quat.rotate(parent, bone), d), parent)
            if turn is not None:
                world[j] = turn
                local[j] = quat.mul(quat.conjugate(parent), world[j])
                continue
        world[j] = quat.mul(parent, local[j])
    pos = kinematics.forward_kinematics(skeleton.parents, local[None], trans[None])[0][0]
    trans[0, 0] -= pos[roles.hips, 0]
    trans[0, 2] -= pos[roles.hips, 2]
    trans[0, 1] -= min(pos[roles[f"{s}_{p}"], 1] for s in ("left", "right") for p in ("ankle", "foot"))
    return local, trans


def rolled_like(skeleton: Skeleton, local: np.ndarray, translations: np.ndarray,
                reference: np.ndarray) -> NDArray[np.float64]:
    """Local rotations ``(J, 4)`` of the pose ``local``, ``translations`` (each ``(J, 3/4)``)
    with every bone rolled about itself as in the pose of local rotations ``reference``
    (a frame of the motion the body is skinned in): the joints stay where they are.

    :func:`standing_pose` turns each bone from the rig's rest pose by the least turn, which
    leaves its roll about itself wherever the rest pose had it: LAFAN1's thighs and
    clavicles end up turned 160-180 degrees from any frame of its motion, its upper arms
    about 105. Skinned from such a pose, a vertex blended between the pelvis and a thigh
    follows two transforms half a turn apart and the mesh collapses and tears there (issue
    32); rolled as the motion rolls them, the transforms stay close. A joint with one child
    that carries the chain on (beside which it has only leaves: twist bones, a prop) gets
    the reference's rotation relative to its parent, turned by the least turn that points
    its bone as in ``local``; a joint with none (a toe, a hand without fingers) the
    reference's rotation relative to its parent; a joint where several chains start (the
    hips, the chest: its rotation fixed by where they are) keeps ``local``'s world rotation.
    Every joint of the chains stays where ``local`` has it (a leaf beside a bone turns with it)."""
    J = skeleton.num_joints
    local = np.asarray(local, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    trans = np.asarray(translations, dtype=np.float64)
    world_a = kinematics.forward_kinematics(skeleton.parents, local[None], trans[None])[1][0]
    children: list[list[int]] = [[] for _ in range(J)]
    size = np.ones(J, dtype=np.int64)  # joints in each subtree
    for j in range(J - 1, 0, -1):
        children[int(skeleton.parents[j])].append(j)
        size[skeleton.parents[j]] += size[j]

    def main_child(j: int) -> int | None:
        """The one child that carries the chain on (beside it only leaves: twist bones, props)."""
        kids = sorted(children[j], key=lambda c: -size[c])
        if not kids or (len(kids) > 1 and size[kids[1]] > 1):
            return None
        return kids[0]
    world = np.empty((J, 4))
    out = np.empty((J, 4))
    for j in range(J):
        p = int(skeleton.parents[j])
        parent = world[p] if p >= 0 else quat.identity()
        cand = quat.mul(parent, reference[j])
        c = main_child(j)
        if c is not None and np.linalg.norm(trans[c]) > 1e-9:
            bone = trans[c]
            world[j] = quat.mul(quat.between(quat.rotate(cand, bone), quat.rotate(world_a[j], bone)), cand)
        elif not children[j]:  # a toe, a hand without fingers, the head: as in the reference
            world[j] = cand
        else:
            world[j] = world_a[j]
        out[j] = quat.normalize(quat.mul(quat.conjugate(parent), world[j]))
    return out
