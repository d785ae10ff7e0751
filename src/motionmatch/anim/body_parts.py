"""A humanoid mannequin's head and hands, sized from the body.

The mannequin (:mod:`motionmatch.anim.mannequin`) makes every bone a capsule whose
thickness comes from how much skeleton hangs below it. That gives a neck-wide peg for a
head joint that is a leaf with no or a tiny end site (LAFAN1's head ends in a zero-length
end site) and stubs for hands without finger joints. :func:`head_and_hands` adds, on a
humanoid (:func:`~motionmatch.anim.humanoid.find_humanoid`), a head and, where a hand has
no finger joints, a mitten with a thumb, sized from the body's height (a 1.75 m person: a
head 0.23 m tall, a hand 0.18 m long).

All sizes are in metres for a body of :data:`REFERENCE_HEIGHT`, scaled by the body's
height; the body's height is read from its bone lengths (legs, spine, neck), so it does
not depend on the pose the mannequin is built in.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim.humanoid import HumanoidError, HumanoidRoles, find_humanoid
from motionmatch.anim.skeleton import Skeleton

__all__ = ["REFERENCE_HEIGHT", "body_height_from_bones", "head_and_hands"]

#: The height (m) the sizes below are given for.
REFERENCE_HEIGHT = 1.75
#: The head: its axis starts this far past the head joint along the neck and ends
#: further out; its radius (m, at the reference height).
HEAD_AXIS = (0.05, 0.13)
HEAD_RADIUS = 0.095
#: The mitten: along the forearm from the wrist, and its radius at the wrist and the tips.
HAND_AXIS = (0.03, 0.12)
HAND_RADIUS = (0.04, 0.032)
#: The thumb: from the wrist's side toward the front of the body.
THUMB_AXIS = ((0.03, 0.025), (0.07, 0.055))  # (along the forearm, toward the front) at each end
THUMB_RADIUS = 0.015
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


def _standing(positions: np.ndarray, roles: HumanoidRoles) -> bool:
    """Whether the pose stands up (Y up): the spine points up from the hips and the legs
    down (within about 45 degrees)."""
    top = next((roles.get(r) for r in ("head", "neck", "chest") if roles.get(r) is not None), None)
    if top is None:
        return False
    spine = positions[top] - positions[roles.hips]
    legs = 0.5 * (positions[roles["left_ankle"]] + positions[roles["right_ankle"]]) - positions[roles.hips]
    return bool(spine[1] > 0.7 * np.linalg.norm(spine) and legs[1] < -0.7 * np.linalg.norm(legs))


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
    if not _standing(positions, roles):
        return empty  # a quadruped rigged with humanoid names keeps the procedural body
    s = body_height_from_bones(skeleton, positions, roles) / REFERENCE_HEIGHT
    owner, a, b, r0, r1 = [], [], [], [], []
    head = roles.get("head")
    below = roles.get("neck") if roles.get("neck") not in (None, head) else roles.get("chest")
    up = _unit(positions[head] - positions[below]) if head is not None and below is not None else None
    if up is not None:
        owner.append(head)
        a.append(positions[head] + HEAD_AXIS[0] * s * up)
        b.append(positions[head] + HEAD_AXIS[1] * s * up)
        r0.append(HEAD_RADIUS * s)
        r1.append(HEAD_RADIUS * s)
    left = _unit(positions[roles["left_upper_leg"]] - positions[roles["right_upper_leg"]])
    spine_up = _unit(positions[head if head is not None else roles.hips] - positions[roles.hips])
    front = _unit(np.cross(left, spine_up)) if left is not None and spine_up is not None else None
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
