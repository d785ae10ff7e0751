"""Which target bone follows which source bone: the role chains of two humanoids matched,
and the standing poses they are matched in.

A :class:`Rig` is a skeleton with a **reference pose** in which it stands (legs down,
spine up, arms not raised): a T pose, an A pose or a frame of a take. Its local rotations
are what the retargeter leaves unmapped joints at. :func:`reference_rig` makes one: the
skeleton's rest pose when it stands, else the most upright frame of a motion on it (LAFAN1's
rest pose lays every bone along +X, where no pose can be read).

:func:`match_chains` pairs the joints of two rigs by their humanoid roles
(:mod:`motionmatch.anim.humanoid`): per side the leg (upper leg, lower leg, ankle, toe) and
the arm (shoulder, upper arm, lower arm, hand); in the centre the hips, then the spine up to
the neck matched by their places along it (spines of as many joints one to one; a spine of
three joints follows a spine of two: each target spine bone points along the source's spine
line between the same places), then neck and head. Each pair gives the target joint

* the **source joint** whose world rotation it follows (relative to the reference pose),
* where there is a next joint on the chain on both rigs, a **bone direction**: the target
  bone to that next joint is turned onto the source's, in the world, exactly;
* a **swing**: the rotation that takes the source's bone in its reference pose onto the
  target's (both rigs turned to face +Z, Y up): what makes a T pose follow an arms-down
  pose, and a rig whose joint axes differ from the source's follow it. Joints without a
  bone direction (hands, toes, the head) take their chain's previous swing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from motionmatch.anim import kinematics, quat
from motionmatch.anim.humanoid import HumanoidError, HumanoidRoles, find_humanoid
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton

__all__ = ["ChainMatch", "Rig", "match_chains", "most_upright_frame", "reference_rig", "stands"]

#: A pose stands when each leg (hip to ankle) points down along the body's up axis at
#: least this much (cosine) and no upper arm points up more than :data:`ARM_UP_LIMIT`.
LEG_DOWN = 0.8
ARM_UP_LIMIT = 0.8

_LEG = ("upper_leg", "lower_leg", "ankle", "toe")
_ARM = ("shoulder", "upper_arm", "lower_arm", "hand")


@dataclass(frozen=True, eq=False)
class Rig:
    """A skeleton in a standing reference pose.

    Attributes:
        skeleton: the joints (metres, Y up).
        rotations: ``[J, 4]`` local rotations of the reference pose (identity: the rest pose).
        roles: the humanoid roles (:func:`~motionmatch.anim.humanoid.find_humanoid`).
        rest_rotations: ``[J, 4]`` local rotations of the pose in which each bone continues
            its parent's as the rig's author made it (a BVH file's zero pose, a glTF file's
            bind pose); ``None``: identity. A joint with no next joint on its chain (a hand,
            a toe, the head) is taken to point along its parent's bone in that pose.
    """

    skeleton: Skeleton
    rotations: NDArray[np.float64]
    roles: HumanoidRoles
    rest_rotations: NDArray[np.float64] | None = None

    def leaf_axis(self, j: int) -> np.ndarray:
        """``[3]`` the unit axis a joint points along in its own frame: its parent's bone
        continued through it in the rest pose (zero for a joint at its parent's place)."""
        off = self.skeleton.offsets[j]
        n = np.linalg.norm(off)
        if n < 1e-9 or self.skeleton.parents[j] < 0:
            return np.zeros(3)
        rest = self.rest_rotations[j] if self.rest_rotations is not None else np.array([1.0, 0.0, 0.0, 0.0])
        return quat.inv_rotate(rest, off / n)

    def world(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """World positions ``[J, 3]`` and rotations ``[J, 4]`` of the reference pose (root at the origin)."""
        s = self.skeleton
        tr = s.offsets.copy()
        tr[0] = 0.0
        pos, rot = kinematics.forward_kinematics(s.parents, self.rotations[None], tr[None])
        return pos[0], rot[0]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _top(roles: HumanoidRoles) -> int | None:
    return next((roles.get(r) for r in ("head", "neck", "chest") if roles.get(r) is not None), None)


def _up(wp: np.ndarray, roles: HumanoidRoles) -> np.ndarray:
    """``[..., 3]`` the body's up axis in positions ``[..., J, 3]``: from the hips to the head
    (neck, chest); on a rig with none of them found, from between the ankles to the hips."""
    top = _top(roles)
    hips = wp[..., roles.hips, :]
    if top is not None:
        return _unit(wp[..., top, :] - hips)
    return _unit(hips - 0.5 * (wp[..., roles["left_ankle"], :] + wp[..., roles["right_ankle"], :]))


def _upright_scores(wp: np.ndarray, roles: HumanoidRoles) -> tuple[np.ndarray, np.ndarray]:
    """``[F]`` how much the legs point down the body's up axis (the worse leg's cosine; with
    no head found, how parallel the two legs are), and ``[F]`` the highest cosine of an upper
    arm with that axis, for positions ``[F, J, 3]``."""
    up = _up(wp, roles)
    legs = [_unit(wp[:, roles[f"{s}_ankle"]] - wp[:, roles[f"{s}_upper_leg"]]) for s in ("left", "right")]
    if _top(roles) is None:
        down = np.sum(legs[0] * legs[1], axis=-1)
    else:
        down = -np.max([np.sum(leg * up, axis=-1) for leg in legs], axis=0)
    arms = [np.sum(_unit(wp[:, roles[f"{s}_lower_arm"]] - wp[:, roles[f"{s}_upper_arm"]]) * up, axis=-1)
            for s in ("left", "right") if f"{s}_lower_arm" in roles and f"{s}_upper_arm" in roles]
    arm_up = np.max(arms, axis=0) if arms else np.full(len(wp), -1.0)
    return down, arm_up


def stands(skeleton: Skeleton, rotations: np.ndarray, roles: HumanoidRoles) -> bool:
    """Whether local rotations ``[J, 4]`` put ``skeleton`` in a standing pose (legs down
    the spine's axis, arms not raised: a T or A pose)."""
    rig = Rig(skeleton, np.asarray(rotations, dtype=np.float64), roles)
    pos, _ = rig.world()
    legs, arms = _upright_scores(pos[None], roles)
    return bool(legs[0] >= LEG_DOWN and arms[0] <= ARM_UP_LIMIT)


def most_upright_frame(motion: Motion, roles: HumanoidRoles) -> int:
    """The frame of ``motion`` whose legs point most straight down the body's axis with
    the arms down (its best standing pose)."""
    legs, arms = _upright_scores(motion.world_positions, roles)
    return int(np.argmax(legs - 0.25 * np.maximum(arms, 0.0)))


def reference_rig(source: Skeleton | Motion, roles: HumanoidRoles | None = None) -> Rig:
    """The standing reference pose of a skeleton: its rest pose when it stands, else (for a
    motion) the local rotations of its most upright frame, the ends of its chains (head,
    hands, toes and what hangs from them) straight as in the rest pose (a frame's bent toes
    or wrists are not taken for the rig's neutral pose).

    Raises:
        HumanoidError: no humanoid on the skeleton, or a skeleton (without a motion)
            whose rest pose does not stand: one line saying to give a take on it.
    """
    skel = source.skeleton if isinstance(source, Motion) else source
    roles = roles if roles is not None else find_humanoid(skel)
    rest = np.tile([1.0, 0.0, 0.0, 0.0], (skel.num_joints, 1))
    if stands(skel, rest, roles):
        return Rig(skel, rest, roles)
    if not isinstance(source, Motion):
        raise HumanoidError(f"the rest pose of this skeleton ({skel.num_joints} joints, root {skel.names[0]!r}) "
                            "does not stand (legs down, arms not raised); give a take on it or its pose")
    f = most_upright_frame(source, roles)
    rotations = source.rotations[f].copy()
    ends = [roles.get(r) for r in ("head", "left_hand", "right_hand", "left_toe", "right_toe")]
    for j in range(skel.num_joints):  # the ends of the chains straight, as in the rest pose
        if any(e is not None and skel.descends_from(j, e) for e in ends):
            rotations[j] = rest[j]
    return Rig(skel, rotations, roles)


def facing_frame(pos: np.ndarray, roles: HumanoidRoles) -> np.ndarray:
    """``[4]`` the rotation turning a pose (positions ``[J, 3]``) so that its pelvis faces +Z:
    left (from the right upper leg to the left) toward +X, up (from the hips to the first
    spine joint, or the top of the body) toward +Y. Both are bones of the hips, so the turn
    does not depend on how the rest of the body is posed: two poses of one rig are matched
    with their hips as they are."""
    first = roles.spine_chain[0] if roles.spine_chain else _top(roles)
    left = pos[roles["left_upper_leg"]] - pos[roles["right_upper_leg"]]
    left = _unit(left)
    up = pos[first] - pos[roles.hips] if first is not None else _up(pos, roles)
    up = _unit(up - np.dot(up, left) * left)
    fwd = np.cross(left, up)
    return quat.from_matrix(np.stack([left, up, fwd]))


def leg_length(rig: Rig) -> float:
    """The legs' length (m): upper plus lower leg, the mean of the two sides (bone lengths:
    the same in every pose)."""
    pos, _ = rig.world()
    r = rig.roles
    return float(np.mean([np.linalg.norm(pos[r[f"{s}_lower_leg"]] - pos[r[f"{s}_upper_leg"]])
                          + np.linalg.norm(pos[r[f"{s}_ankle"]] - pos[r[f"{s}_lower_leg"]]) for s in ("left", "right")]))


@dataclass(frozen=True)
class ChainMatch:
    """The matched joints of a target rig, in the target's joint order.

    Attributes:
        target: ``[M]`` target joints that follow a source joint.
        source: ``[M]`` the source joint each follows (its world rotation).
        offset: ``[M, 4]`` the constant rotation ``R_s^-1 R_t`` of each pair: target world
            rotation = source world rotation * offset (before the bone direction is fixed).
        has_direction: ``[M]`` bool, the pair has a bone direction.
        local_bone: ``[M, 3]`` the target bone (to its next chain joint) in the target
            joint's frame (zero where there is none).
        start, end: ``[M, 2]`` int and ``start_w``, ``end_w``: ``[M]`` the source points the
            target bone runs between: ``(1 - w) * p[i0] + w * p[i1]`` (a joint: ``w = 0``).
        hips: ``(target hips, source hips)``.
        scale: the legs' length ratio, target over source (root motion is scaled by it).
    """

    target: NDArray[np.int64]
    source: NDArray[np.int64]
    offset: NDArray[np.float64]
    has_direction: NDArray[np.bool_]
    local_bone: NDArray[np.float64]
    start: NDArray[np.int64]
    start_w: NDArray[np.float64]
    end: NDArray[np.int64]
    end_w: NDArray[np.float64]
    hips: tuple[int, int]
    scale: float


def _centre_line(rig: Rig) -> tuple[list[int], np.ndarray]:
    """Joints from the hips up the spine to the neck (or the head), and their places along it
    (joint ``k`` of ``n`` at ``k / (n - 1)``: spines of as many joints match one to one)."""
    r = rig.roles
    top = r.get("neck") if r.get("neck") is not None else r.get("head")
    joints = [r.hips, *r.spine_chain] + ([top] if top is not None else [])
    return joints, np.linspace(0.0, 1.0, len(joints))


def _at(joints: list[int], frac: np.ndarray, u: float) -> tuple[int, int, float]:
    """The point at fraction ``u`` of a joint line: ``(i0, i1, w)``."""
    k = int(np.clip(np.searchsorted(frac, u, side="right") - 1, 0, len(joints) - 2))
    span = frac[k + 1] - frac[k]
    w = float(np.clip((u - frac[k]) / span, 0.0, 1.0)) if span > 1e-12 else 0.0
    return joints[k], joints[k + 1], w


def match_chains(source: Rig, target: Rig) -> ChainMatch:
    """Pair the joints of ``target`` with ``source``'s by their roles (see the module)."""
    ps, rs_world = source.world()
    pt, rt_world = target.world()
    ns, nt = facing_frame(ps, source.roles), facing_frame(pt, target.roles)
    sr, tr = source.roles, target.roles
    # rows: target joint, source joint, the target end of its bone, the source points its bone runs between
    rows: list[tuple[int, int, int | None, tuple[int, int, float] | None, tuple[int, int, float] | None]] = []
    rows.append((tr.hips, sr.hips, None, None, None))
    # the centre line
    tj, tf = _centre_line(target)
    sj, sf = _centre_line(source)
    both_neck = tr.get("neck") is not None and sr.get("neck") is not None
    for k in range(1, len(tj)):
        j = tj[k]
        if k == len(tj) - 1:  # the top of the line: the neck, or the head
            if both_neck and tr.get("head") is not None and sr.get("head") is not None:
                rows.append((j, sr["neck"], tr["head"], (sr["neck"], sr["neck"], 0.0), (sr["head"], sr["head"], 0.0)))
                rows.append((tr["head"], sr["head"], None, None, None))
            elif tr.get("head") is not None and j == tr["head"] and sr.get("head") is not None:
                rows.append((j, sr["head"], None, None, None))
            else:
                rows.append((j, sj[-1], None, None, None))
            continue
        a, b = _at(sj, sf, tf[k]), _at(sj, sf, tf[k + 1])
        twist = a[0] if a[0] != sr.hips or len(sj) < 2 else sj[1]
        rows.append((j, twist, tj[k + 1], a, b))
    for side in ("left", "right"):
        for chain in (_LEG, _ARM):
            common = [p for p in chain if f"{side}_{p}" in tr and f"{side}_{p}" in sr]
            for k, part in enumerate(common):
                role = f"{side}_{part}"
                if k + 1 < len(common):
                    nxt = f"{side}_{common[k + 1]}"
                    rows.append((tr[role], sr[role], tr[nxt], (sr[role], sr[role], 0.0), (sr[nxt], sr[nxt], 0.0)))
                else:
                    rows.append((tr[role], sr[role], None, None, None))
    rows.sort(key=lambda r: r[0])
    seen: dict[int, int] = {}
    for i, r in enumerate(rows):
        seen.setdefault(r[0], i)
    rows = [rows[i] for i in sorted(seen.values())]

    def point(spec: tuple[int, int, float]) -> np.ndarray:
        return (1.0 - spec[2]) * ps[spec[0]] + spec[2] * ps[spec[1]]

    M = len(rows)
    swing = np.tile([1.0, 0.0, 0.0, 0.0], (M, 1))
    has_dir = np.zeros(M, dtype=bool)
    local_bone = np.zeros((M, 3))
    for i, (j, _s, end, a, b) in enumerate(rows):
        if end is None:
            continue
        ds = quat.rotate(ns, point(b) - point(a))
        dt = quat.rotate(nt, pt[end] - pt[j])
        if np.linalg.norm(ds) < 1e-9 or np.linalg.norm(dt) < 1e-9:
            continue
        swing[i] = quat.between(ds, dt)
        has_dir[i] = True
        local_bone[i] = quat.inv_rotate(rt_world[j], pt[end] - pt[j])
    # joints without a bone direction: the swing of their own axis (the parent's bone
    # continued), else that of the nearest matched ancestor with a bone direction
    index_of = {r[0]: i for i, r in enumerate(rows)}
    own = np.zeros(M, dtype=bool)
    for i, (j, s, _end, _a, _b) in enumerate(rows):
        if has_dir[i] or j == tr.hips:
            continue
        es, et = source.leaf_axis(s), target.leaf_axis(j)
        if np.linalg.norm(es) > 0 and np.linalg.norm(et) > 0:
            swing[i] = quat.between(quat.rotate(ns, quat.rotate(rs_world[s], es)),
                                    quat.rotate(nt, quat.rotate(rt_world[j], et)))
            own[i] = True
    for i, (j, *_rest) in enumerate(rows):
        if has_dir[i] or own[i]:
            continue
        p = int(target.skeleton.parents[j])
        while p >= 0 and not (p in index_of and has_dir[index_of[p]]):
            p = int(target.skeleton.parents[p])
        if p >= 0 and j != tr.hips:
            swing[i] = swing[index_of[p]]
    src = np.array([r[1] for r in rows], dtype=np.int64)
    tgt = np.array([r[0] for r in rows], dtype=np.int64)
    # the source's reference rotations swung onto the target's bones (in the normalized frame),
    # and the target's reference rotations (in the normalized frame): offset = R_s^-1 R_t
    r_s = quat.mul(swing, quat.mul(ns, rs_world[src]))
    r_t = quat.mul(nt, rt_world[tgt])
    offset = quat.normalize(quat.inv_mul(r_s, r_t))
    starts = [r[3] if r[3] is not None else (r[1], r[1], 0.0) for r in rows]
    ends = [r[4] if r[4] is not None else (r[1], r[1], 0.0) for r in rows]
    return ChainMatch(
        target=tgt, source=src, offset=offset, has_direction=has_dir, local_bone=local_bone,
        start=np.array([s[:2] for s in starts], dtype=np.int64), start_w=np.array([s[2] for s in starts]),
        end=np.array([e[:2] for e in ends], dtype=np.int64), end_w=np.array([e[2] for e in ends]),
        hips=(tr.hips, sr.hips), scale=leg_length(target) / leg_length(source),
    )
