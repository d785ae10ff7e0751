"""A humanoid mannequin's head, hands and feet, sized from the body.

The mannequin (:mod:`motionmatch.anim.mannequin`) makes every bone a capsule whose
thickness comes from how much skeleton hangs below it. That gives a neck-wide peg for a
head joint that is a leaf with no or a tiny end site (LAFAN1's head ends in a zero-length
end site) and stubs for hands without finger joints. :func:`head_and_hands` adds, on a
humanoid (:func:`~motionmatch.anim.humanoid.find_humanoid`), a head and, where a hand has
no finger joints, a mitten with a thumb, sized from the body's height (a 1.75 m person: a
head 0.23 m tall, a hand 0.18 m long). :func:`feet` gives each foot a heel behind the
ankle, a sole to the ball and toes past the toe joint (a foot 0.26 m long and 0.09 m wide),
also on a rig without toe joints. :func:`humanoid_shape` gathers these and the torso and
limb proportions of :mod:`motionmatch.anim.body_proportions`: what the mannequin adds to,
and changes in, a humanoid's procedural body.

All sizes are in metres for a body of :data:`REFERENCE_HEIGHT`, scaled by the body's
height; the body's height is read from its bone lengths (legs, spine, neck), so it does
not depend on the pose the mannequin is built in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motionmatch.anim.body_proportions import limb_radii, torso_capsules
from motionmatch.anim.humanoid import HumanoidError, HumanoidRoles, find_humanoid
from motionmatch.anim.skeleton import Skeleton

__all__ = ["REFERENCE_HEIGHT", "HumanoidShape", "body_height_from_bones", "feet", "head_and_hands", "humanoid_shape", "stands"]

#: The height (m) the sizes below are given for.
REFERENCE_HEIGHT = 1.75
#: The head: a cranium (a capsule from back to front, ``(up, forward)`` of its ends from the
#: head joint, along the neck and the body's front) and a face and jaw below its front; radii
#: in m at the reference height: 0.17 m wide, 0.21 m deep, 0.24 m from chin to crown.
CRANIUM_AXIS, CRANIUM_RADIUS = ((0.115, -0.025), (0.115, 0.02)), 0.085
JAW_AXIS, JAW_RADIUS = ((0.075, 0.03), (0.02, 0.045)), 0.055
#: The most the head grows to hold a head-top joint (one farther out is not the skull's top).
HEAD_GROWTH = 1.45
#: The mitten: along the forearm from the wrist, and its radius at the wrist and the tips.
HAND_AXIS = (0.03, 0.12)
HAND_RADIUS = (0.04, 0.032)
#: The thumb: from the wrist's side toward the front of the body.
THUMB_AXIS = ((0.03, 0.025), (0.07, 0.055))  # (along the forearm, toward the front) at each end
THUMB_RADIUS = 0.015
#: The foot, in the foot's frame (``f``: ankle to toe joint, ``d``: toward the sole, square to
#: ``f``): the heel's centre ``(along f, along d)`` from the ankle and its radius; the sole's
#: two capsules (either side of the foot's axis) from the heel to the ball (the toe joint),
#: their offset and radius at the heel and at the ball; the toes' length past the toe joint
#: and their radius at the ball and the tips.
HEEL = ((-0.01, 0.055), 0.032)
SOLE_OFFSET, SOLE_RADIUS = 0.018, (0.026, 0.024)
TOES_LENGTH, TOES_RADIUS = 0.035, (0.023, 0.019)
#: The sole passes this far under the toe joint (m at the reference height): the ball's
#: capsules are lifted off the toe joint by their radius less this.
SOLE_UNDER_TOE = 0.012
#: Toes reach to the toe's end joint when it is nearer than this (m at the reference height).
TOES_REACH = 0.13
#: The instep (the ankle's bone to the toe joint): its radius at the ankle and the ball.
INSTEP_RADIUS = (0.04, 0.026)
#: A foot without a toe joint: where its ball is from the ankle (forward, up).
BALL_WITHOUT_TOE = (0.14, -0.06)
#: A hand with finger joints: the bones from the wrist to the fingers' roots, and each
#: finger's bones (radius at the start and end, m at the reference height).
PALM_RADIUS, FINGER_RADIUS = (0.03, 0.022), (0.011, 0.009)
_FINGERS = ("thumb", "index", "middle", "ring", "pinky", "little", "finger", "digit")


def _path_length(skeleton: Skeleton, positions: np.ndarray, top: int, bottom: int) -> float:
    """Length (m) of the bone chain from ``top`` down to its descendant ``bottom``."""
    total = 0.0
    j = bottom
    while j != top and j > 0:
        p = int(skeleton.parents[j])
        total += float(np.linalg.norm(positions[j] - positions[p]))
        j = p
    return total


def body_height_from_bones(skeleton: Skeleton, positions: np.ndarray, roles: HumanoidRoles) -> float:
    """A humanoid's standing height (m) from its bone lengths: leg (upper leg to ankle) +
    torso and neck (hips to head) over 0.89 (an ankle and a skull above the head joint
    make the rest: LAFAN1, 1.75 m), whatever the pose."""
    leg = np.mean([_path_length(skeleton, positions, roles[f"{s}_upper_leg"], roles[f"{s}_ankle"])
                   for s in ("left", "right")])
    top = roles.get("head") if roles.get("head") is not None else roles.get("neck")
    torso = _path_length(skeleton, positions, roles.hips, top) if top is not None else 0.6 * leg
    return float((leg + torso) / 0.89)


def _has_fingers(skeleton: Skeleton, hand: int) -> bool:
    kids = np.flatnonzero(skeleton.parents == hand)
    return any(any(w in skeleton.names[k].lower() for w in _FINGERS) for k in kids)


def _unit(v: np.ndarray) -> np.ndarray | None:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-9 else None


def stands(positions: np.ndarray, roles: HumanoidRoles) -> bool:
    """Whether the pose stands up (Y up): the spine points up from the hips and the legs
    down (within about 45 degrees)."""
    top = next((roles.get(r) for r in ("head", "neck", "chest") if roles.get(r) is not None), None)
    if top is None:
        return False
    spine = positions[top] - positions[roles.hips]
    legs = 0.5 * (positions[roles["left_ankle"]] + positions[roles["right_ankle"]]) - positions[roles.hips]
    return bool(spine[1] > 0.7 * np.linalg.norm(spine) and legs[1] < -0.7 * np.linalg.norm(legs))


def _below(skeleton: Skeleton, joint: int) -> np.ndarray:
    """The joints below ``joint`` (not itself)."""
    return np.array([j for j in range(skeleton.num_joints) if j != joint and skeleton.descends_from(j, joint)],
                    dtype=np.int64)


def _head_scale(skeleton: Skeleton, positions: np.ndarray, head: int, up: np.ndarray, face: np.ndarray,
                s: float) -> float:
    """How much larger than the reference the head is drawn so that it holds the joints
    above the head joint (a head-top joint: Mixamo's ``HeadTop_End``), up to :data:`HEAD_GROWTH`."""
    below = _below(skeleton, head)
    if not len(below):
        return 1.0
    rel = positions[below] - positions[head]
    for k in np.linspace(1.0, HEAD_GROWTH, 10):  # the smallest head that holds them (by 1 cm)
        held = np.zeros(len(below), dtype=bool)
        for ends, radius in ((CRANIUM_AXIS, CRANIUM_RADIUS), (JAW_AXIS, JAW_RADIUS)):
            a = k * s * (ends[0][0] * up + ends[0][1] * face)
            b = k * s * (ends[1][0] * up + ends[1][1] * face)
            t = np.clip((rel - a) @ (b - a) / max(float((b - a) @ (b - a)), 1e-18), 0.0, 1.0)
            d = np.linalg.norm(rel - a - t[:, None] * (b - a), axis=1)
            held |= d < k * s * radius - 0.01 * s
        if held.all():
            return float(k)
    return 1.0  # joints far out of any head (a prop, a hat): the reference size


def head_and_hands(skeleton: Skeleton, positions: np.ndarray) -> tuple[np.ndarray, ...]:
    """Capsules of a humanoid's head and finger-less hands in a pose (``positions [J, 3]``:
    world joint positions, m, Y up): ``owner [K]`` (the head or hand joint), ``a [K, 3]``,
    ``b [K, 3]``, ``r0 [K]``, ``r1 [K]``. Empty arrays for a skeleton with no humanoid, or
    one that does not stand in this pose (a dog's ``LeftUpLeg``: its spine is level)."""
    empty = (np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0))
    try:
        roles = find_humanoid(skeleton)
    except HumanoidError:
        return empty
    if not stands(positions, roles):
        return empty  # a quadruped rigged with humanoid names keeps the procedural body
    s = body_height_from_bones(skeleton, positions, roles) / REFERENCE_HEIGHT
    owner, a, b, r0, r1 = [], [], [], [], []
    head = roles.get("head")
    below = roles.get("neck") if roles.get("neck") not in (None, head) else roles.get("chest")
    up = _unit(positions[head] - positions[below]) if head is not None and below is not None else None
    left = _unit(positions[roles["left_upper_leg"]] - positions[roles["right_upper_leg"]])
    spine_up = _unit(positions[head if head is not None else roles.hips] - positions[roles.hips])
    front = _unit(np.cross(left, spine_up)) if left is not None and spine_up is not None else None
    face = _unit(front - float(front @ up) * up) if up is not None and front is not None else None
    if up is not None:
        face = np.zeros(3) if face is None else face
        hs = s * _head_scale(skeleton, positions, head, up, face, s)
        for (ends, radius) in ((CRANIUM_AXIS, CRANIUM_RADIUS), (JAW_AXIS, JAW_RADIUS)):
            owner.append(head)
            a.append(positions[head] + hs * (ends[0][0] * up + ends[0][1] * face))
            b.append(positions[head] + hs * (ends[1][0] * up + ends[1][1] * face))
            r0.append(radius * hs)
            r1.append(radius * hs)
    for side in ("left", "right"):
        hand, fore = roles.get(f"{side}_hand"), roles.get(f"{side}_lower_arm")
        if hand is None or fore is None or _has_fingers(skeleton, hand):
            continue
        along = _unit(positions[hand] - positions[fore])
        if along is None:
            continue
        owner.append(hand)
        a.append(positions[hand] + HAND_AXIS[0] * s * along)
        b.append(positions[hand] + HAND_AXIS[1] * s * along)
        r0.append(HAND_RADIUS[0] * s)
        r1.append(HAND_RADIUS[1] * s)
        if front is None:
            continue
        thumb_dir = _unit(front - np.dot(front, along) * along)
        if thumb_dir is None:
            continue
        (a0, f0), (a1, f1) = THUMB_AXIS
        owner.append(hand)
        a.append(positions[hand] + s * (a0 * along + f0 * thumb_dir))
        b.append(positions[hand] + s * (a1 * along + f1 * thumb_dir))
        r0.append(THUMB_RADIUS * s)
        r1.append(THUMB_RADIUS * s * 0.85)
    if not owner:
        return empty
    return (np.asarray(owner, np.int64), np.asarray(a, float), np.asarray(b, float), np.asarray(r0, float),
            np.asarray(r1, float))


def _foot_frame(toe_dir: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The foot's axes: ``f`` (toward the toes), ``d`` (toward the sole, square to ``f``),
    ``side`` (``f x d``), or ``None`` for a foot along the body's up axis."""
    f = _unit(toe_dir)
    if f is None:
        return None
    d = _unit(-up - float(-up @ f) * f)
    if d is None:
        return None
    return f, d, np.cross(f, d)


def feet(skeleton: Skeleton, positions: np.ndarray, roles: HumanoidRoles, scale: float,
         ) -> tuple[list[int], list[np.ndarray], list[np.ndarray], list[float], list[float], list[int]]:
    """Capsules ``(owner, a, b, r0, r1, child)`` of both feet in the bind pose ``positions (J, 3)``:
    a heel behind and below the ankle, a sole of two capsules from the heel to the ball
    (owned by the ankle), toes past the toe joint (owned by the toe, by the ankle on a rig
    without toes, whose ball is put :data:`BALL_WITHOUT_TOE` from the ankle)."""
    owner: list[int] = []
    a: list[np.ndarray] = []
    b: list[np.ndarray] = []
    r0: list[float] = []
    r1: list[float] = []
    child: list[int] = []  # the sole ends at the toe joint: skinning blends it with the toes there
    top = next((roles.get(r) for r in ("neck", "head", "chest") if roles.get(r) is not None), None)
    up = _unit(positions[top] - positions[roles.hips]) if top is not None else None
    lu, ru = roles.get("left_upper_leg"), roles.get("right_upper_leg")
    left = _unit(positions[lu] - positions[ru])
    if up is None or left is None:
        return owner, a, b, r0, r1, child
    front = _unit(np.cross(left, up))
    for side in ("left", "right"):
        ankle, toe = roles[f"{side}_ankle"], roles.get(f"{side}_toe")
        if toe is not None and np.linalg.norm(positions[toe] - positions[ankle]) > 0.03 * scale:
            ball, toe_owner = positions[toe], toe
        elif front is not None:
            ball = positions[ankle] + scale * (BALL_WITHOUT_TOE[0] * front + BALL_WITHOUT_TOE[1] * up)
            toe_owner = ankle
        else:
            continue
        frame = _foot_frame(ball - positions[ankle], up)
        if frame is None:
            continue
        f, d, across = frame
        heel = positions[ankle] + scale * (HEEL[0][0] * f + HEEL[0][1] * d)
        ball = ball - (SOLE_RADIUS[1] - SOLE_UNDER_TOE) * scale * d
        owner.append(ankle)
        child.append(-1)
        a.append(heel)
        b.append(heel)
        r0.append(HEEL[1] * scale)
        r1.append(HEEL[1] * scale)
        for sign in (1.0, -1.0):
            off = sign * SOLE_OFFSET * scale * across
            owner.append(ankle)
            child.append(toe_owner if toe_owner != ankle else -1)
            a.append(heel + 0.4 * off)
            b.append(ball + off)
            r0.append(SOLE_RADIUS[0] * scale)
            r1.append(SOLE_RADIUS[1] * scale)
            # the toes run on, level with the ground the sole stands on, to the toes' end joint if any
            toe_f = _unit(f - float(f @ up) * up)
            if toe_f is None:
                continue
            length = TOES_LENGTH * scale
            if toe_owner != ankle and len(tips := _below(skeleton, toe_owner)):
                tip = positions[tips[np.argmax((positions[tips] - ball) @ toe_f)]]
                reach = float(np.linalg.norm(tip - ball))
                if 0.5 * length < reach < TOES_REACH * scale:  # toward the toes' end joint, 1 cm past it
                    toe_f = (tip - ball) / reach
                    length = reach + 0.01 * scale
            owner.append(toe_owner)
            child.append(-1)
            a.append(ball + off)
            b.append(ball + 0.5 * off + length * toe_f)
            r0.append(TOES_RADIUS[0] * scale)
            r1.append(TOES_RADIUS[1] * scale)
    return owner, a, b, r0, r1, child


@dataclass(frozen=True)
class HumanoidShape:
    """What a humanoid's body adds to and changes in the procedural one (m, bind pose).

    Attributes:
        owner: ``(K,)`` the joint each added capsule belongs to.
        a, b: ``(K, 3)`` the added capsules' ends.
        r0, r1: ``(K,)`` their radii at ``a`` and ``b``.
        child: ``(K,)`` the joint at ``b`` that skinning blends a capsule's vertices with
            around it (the next spine joint, the toe), or -1.
        bone_radii: ``{(joint, child joint): (r0, r1)}``: the radii of the skeleton's bones
            between roles (limbs, the spine, the neck).
        replaced: joints whose own bones, and those of every joint below them, are left
            out: the head and the toes, drawn whole by the capsules above (a head-top joint's
            end site, eyes, a toe's end site would poke out of them).
    """

    owner: np.ndarray
    a: np.ndarray
    b: np.ndarray
    r0: np.ndarray
    r1: np.ndarray
    child: np.ndarray
    bone_radii: dict
    replaced: tuple[int, ...]
    bone_girth: dict


def humanoid_shape(skeleton: Skeleton, positions: np.ndarray) -> HumanoidShape | None:
    """The head, hands, feet, torso and limb proportions of a humanoid standing in the
    bind pose ``positions (J, 3)`` (world, m, Y up), or ``None`` (no humanoid, or one that
    does not stand: a quadruped rigged with humanoid names keeps the procedural body)."""
    try:
        roles = find_humanoid(skeleton)
    except HumanoidError:
        return None
    if not stands(positions, roles):
        return None
    s = body_height_from_bones(skeleton, positions, roles) / REFERENCE_HEIGHT
    h_owner, h_a, h_b, h_r0, h_r1 = head_and_hands(skeleton, positions)
    parts = [torso_capsules(skeleton, positions, roles, s), feet(skeleton, positions, roles, s)]
    owner = np.r_[h_owner, [o for p in parts for o in p[0]]].astype(np.int64)
    a = np.concatenate([h_a.reshape(-1, 3)] + [np.reshape(p[1], (-1, 3)) for p in parts])
    b = np.concatenate([h_b.reshape(-1, 3)] + [np.reshape(p[2], (-1, 3)) for p in parts])
    r0 = np.r_[h_r0, [r for p in parts for r in p[3]]].astype(float)
    r1 = np.r_[h_r1, [r for p in parts for r in p[4]]].astype(float)
    child = np.r_[np.full(len(h_owner), -1), [c for p in parts for c in p[5]]].astype(np.int64)
    radii = limb_radii(skeleton, positions, roles, s)
    for side in ("left", "right"):
        ankle, toe = roles[f"{side}_ankle"], roles.get(f"{side}_toe")
        if toe is not None:
            chain_top = toe
            while skeleton.parents[chain_top] not in (ankle, -1):
                chain_top = int(skeleton.parents[chain_top])
            radii[(ankle, chain_top)] = (INSTEP_RADIUS[0] * s, INSTEP_RADIUS[1] * s)
    # a bare leaf joint (an ankle without toes): as thick as the limb into it, not a ball
    for (_, j), (_, r_end) in list(radii.items()):
        if j >= 0 and not len(skeleton.children(j)):
            radii[(j, -1)] = (r_end, r_end)
    for side in ("left", "right"):  # a hand with fingers: a palm and fingers a hand's size
        hand = roles.get(f"{side}_hand")
        if hand is None or not _has_fingers(skeleton, hand):
            continue
        for j in range(skeleton.num_joints):
            if not skeleton.descends_from(j, hand):
                continue
            r = PALM_RADIUS if j == hand else FINGER_RADIUS
            for c in [*skeleton.children(j), -1]:
                radii[(j, c)] = (r[0] * s, r[1] * s)
    replaced = [j for j in (roles.get("head"), roles.get("left_toe"), roles.get("right_toe")) if j is not None]
    if roles.get("head") is None or not np.any(owner == roles.get("head")):
        replaced = replaced[1:] if roles.get("head") is not None else replaced  # no cranium drawn: keep its bones
    girth = {**radii, **limb_radii(skeleton, positions, roles, s, girth=True)}
    return HumanoidShape(owner, a, b, r0, r1, child, radii, tuple(int(j) for j in replaced), girth)
