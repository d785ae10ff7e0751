"""A humanoid mannequin's torso, pelvis and limbs in human proportions.

The mannequin (:mod:`motionmatch.anim.mannequin`) sizes every bone from how much skeleton
hangs below it. On a humanoid that makes the pelvis the widest part of the body (three
capsules as thick as a leg is long meet at the hips: a skirt), the chest a thin pipe, and
the upper arms as thick as the thighs. Here, for a humanoid that stands in the bind pose
(:func:`~motionmatch.anim.humanoid.find_humanoid`), the bones between the roles get radii
from a table of human proportions (:data:`LIMB_RADII`), and the torso gets its width: beside
the spine, from the hips to the neck, two capsules run on either side of it, their offset
and radius following :data:`TORSO_PROFILE` (a pelvis 0.35 m wide, a waist 0.27 m, a chest
0.33 m and 0.21 m deep, for a 1.75 m person), and a capsule across the hip joints makes
the pelvis and the seat.

All sizes are metres at :data:`~motionmatch.anim.body_parts.REFERENCE_HEIGHT` (1.75 m),
scaled by the body's height read from its bones.
"""

from __future__ import annotations

import itertools

import numpy as np

from motionmatch.anim.humanoid import HumanoidRoles
from motionmatch.anim.skeleton import Skeleton

__all__ = ["LIMB_RADII", "TORSO_PROFILE", "limb_radii", "torso_capsules"]

#: Radius (m, at 1.75 m) at the start and end of the bones from one role's joint to another's
#: (through any joints between them: CMU's ``LHipJoint``, a second neck joint).
LIMB_RADII = {
    ("hips", "upper_leg"): (0.06, 0.06),
    ("upper_leg", "lower_leg"): (0.076, 0.05),
    ("lower_leg", "ankle"): (0.05, 0.034),
    ("chest", "shoulder"): (0.06, 0.055),
    ("shoulder", "upper_arm"): (0.05, 0.034),
    ("upper_arm", "lower_arm"): (0.048, 0.037),
    ("lower_arm", "hand"): (0.037, 0.027),
    ("chest", "neck"): (0.06, 0.05),
    ("neck", "head"): (0.05, 0.048),
}
#: At most this fraction of the distance between the hip joints: a thigh's radius at the hip,
#: so that the thighs do not touch (the pelvis fills the crotch).
THIGH_GAP = 0.41
#: At most this fraction of half the distance between the shoulder joints: the neck's radius.
NECK_ROOM = 0.3
#: The torso from the hips joint (0) to the neck joint (1): ``(t, offset, radius)``: the two
#: capsules beside the spine are ``offset`` to either side of it and ``radius`` thick (so the
#: torso is ``2 (offset + radius)`` wide and ``2 radius`` deep); the spine's own bones get the radius.
TORSO_PROFILE = (
    (0.0, 0.04, 0.085),
    (0.3, 0.045, 0.085),
    (0.62, 0.055, 0.105),
    (0.88, 0.07, 0.09),
    (1.0, 0.035, 0.06),
)
#: The torso above this fraction of the spine is at most this fraction of half the distance
#: between the shoulder joints wide (each side).
UPPER_CHEST, SHOULDER_ROOM = 0.8, 0.72
#: The pelvis: a capsule between the two hip joints, this far below them, this thick.
PELVIS_DROP, PELVIS_RADIUS = 0.0, 0.072
#: How far toward each hip joint the pelvis reaches (a fraction of the way).
PELVIS_SPAN = 0.5


def _unit(v: np.ndarray) -> np.ndarray | None:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-9 else None


def _path(skeleton: Skeleton, top: int, bottom: int) -> list[int] | None:
    """Joints from ``top`` down to its descendant ``bottom`` (both included), or ``None``."""
    chain = [bottom]
    j = bottom
    while j != top:
        j = int(skeleton.parents[j])
        if j < 0:
            return None
        chain.append(j)
    return chain[::-1]


def limb_radii(skeleton: Skeleton, positions: np.ndarray, roles: HumanoidRoles, scale: float,
               girth: bool = False) -> dict[tuple[int, int], tuple[float, float]]:
    """``{(joint, child joint): (r0, r1)}`` (m) for the bones between the roles of
    :data:`LIMB_RADII` and along the spine (:data:`TORSO_PROFILE`), interpolated by length
    along each chain of bones; ``positions (J, 3)`` are the bind pose's world positions.
    ``girth``: the spine's bones as far as the torso reaches sideways (its radius plus the
    side capsules' offset), to tell whether an arm touches the torso."""
    out: dict[tuple[int, int], tuple[float, float]] = {}

    def along(chain: list[int], r_start: float, r_end: float) -> None:
        seg = np.linalg.norm(np.diff(positions[chain], axis=0), axis=1)
        total = float(seg.sum())
        if total < 1e-9:
            return
        t = np.r_[0.0, np.cumsum(seg)] / total
        for k in range(len(chain) - 1):
            out[(chain[k], chain[k + 1])] = (scale * (r_start + (r_end - r_start) * t[k]),
                                             scale * (r_start + (r_end - r_start) * t[k + 1]))

    lu, ru = roles.get("left_upper_leg"), roles.get("right_upper_leg")
    apart = float(np.linalg.norm(positions[lu] - positions[ru])) if lu is not None and ru is not None else np.inf
    la, ra = roles.get("left_upper_arm"), roles.get("right_upper_arm")
    shoulders = 0.5 * float(np.linalg.norm(positions[la] - positions[ra])) if la is not None and ra is not None else np.inf
    for (top, bottom), (r0, r1) in LIMB_RADII.items():
        if (top, bottom) == ("upper_leg", "lower_leg"):  # thighs that do not touch at the crotch
            r0 = min(r0, THIGH_GAP * apart / scale)
        if bottom in ("neck", "head"):  # a neck clear of the upper arms on narrow shoulders
            r0, r1 = min(r0, NECK_ROOM * shoulders / scale), min(r1, NECK_ROOM * shoulders / scale)
        for side in ("left", "right"):
            a = roles.get(top) if top in ("hips", "chest", "neck") else roles.get(f"{side}_{top}")
            b = roles.get(bottom) if bottom in ("neck", "head") else roles.get(f"{side}_{bottom}")
            if a is None or b is None:
                continue
            chain = _path(skeleton, a, b)
            if chain is not None and len(chain) > 1:
                along(chain, r0, r1)
    spine = _spine(skeleton, roles)
    if spine is not None:
        ts = _spine_fractions(positions, spine)
        knots, offs, rads = _profile(positions, roles, scale)
        radius = np.interp(ts, knots, rads + (offs if girth else 0.0))
        for k in range(len(spine) - 1):
            out[(spine[k], spine[k + 1])] = (float(radius[k]), float(radius[k + 1]))
    return out


def _profile(positions: np.ndarray, roles: HumanoidRoles, scale: float) -> tuple[np.ndarray, ...]:
    """:data:`TORSO_PROFILE` for this body: knots, offsets and radii (m), the upper chest no
    wider than :data:`SHOULDER_ROOM` of the shoulder joints' half distance, narrowing the
    offset first (a rig with narrow shoulders: the arms hang clear of the chest)."""
    knots = np.array([p[0] for p in TORSO_PROFILE])
    offs = np.array([p[1] for p in TORSO_PROFILE]) * scale
    rads = np.array([p[2] for p in TORSO_PROFILE]) * scale
    la, ra = roles.get("left_upper_arm"), roles.get("right_upper_arm")
    if la is not None and ra is not None:
        room = SHOULDER_ROOM * 0.5 * float(np.linalg.norm(positions[la] - positions[ra]))
        top = knots >= UPPER_CHEST
        excess = np.maximum(offs + rads - room, 0.0) * top
        cut = np.minimum(excess, offs)
        offs = offs - cut
        rads = np.maximum(rads - (excess - cut), 0.5 * rads)
    return knots, offs, rads


def _legs_parent(skeleton: Skeleton, left: int, right: int) -> int:
    """The joint both legs hang from (the hips, or a pelvis joint of its own under them:
    Character Creator's ``CC_Base_Pelvis``): the pelvis belongs to it, so that the thighs
    blend with it."""
    j = int(skeleton.parents[left])
    while j >= 0 and not skeleton.descends_from(right, j):
        j = int(skeleton.parents[j])
    return max(j, 0)


def _spine(skeleton: Skeleton, roles: HumanoidRoles) -> list[int] | None:
    """The hips, the spine's joints and the neck (or the head), in order, or ``None``."""
    top = roles.get("neck") if roles.get("neck") is not None else roles.get("head")
    if top is None:
        return None
    chain = _path(skeleton, roles.hips, top)
    return chain if chain is not None and len(chain) > 1 else None


def _spine_fractions(positions: np.ndarray, spine: list[int]) -> np.ndarray:
    seg = np.linalg.norm(np.diff(positions[spine], axis=0), axis=1)
    return np.r_[0.0, np.cumsum(seg)] / max(float(seg.sum()), 1e-9)


def torso_capsules(skeleton: Skeleton, positions: np.ndarray, roles: HumanoidRoles, scale: float,
                   ) -> tuple[list[int], list[np.ndarray], list[np.ndarray], list[float], list[float], list[int]]:
    """The torso's width: capsules ``(owner, a, b, r0, r1, child)`` beside the spine (each
    owned by the spine joint below it, ``child`` the one above it: skinning blends the two
    around it) and between the hip joints (owned by the joint the legs hang from, ``child``
    -1), in the bind pose
    ``positions (J, 3)`` (m)."""
    owner: list[int] = []
    a: list[np.ndarray] = []
    b: list[np.ndarray] = []
    r0: list[float] = []
    r1: list[float] = []
    child: list[int] = []
    spine = _spine(skeleton, roles)
    lu, ru = roles.get("left_upper_leg"), roles.get("right_upper_leg")
    hip_side = _unit(positions[lu] - positions[ru]) if lu is not None and ru is not None else None
    if spine is None or hip_side is None:
        return owner, a, b, r0, r1, child
    la, ra = roles.get("left_upper_arm"), roles.get("right_upper_arm")
    arm_side = _unit(positions[la] - positions[ra]) if la is not None and ra is not None else None
    if arm_side is None or float(arm_side @ hip_side) < 0.5:
        arm_side = hip_side  # a twisted or armless torso: the hips' side all the way up
    pts = positions[spine]
    ts = _spine_fractions(positions, spine)
    knots, offs, rads = _profile(positions, roles, scale)

    def at(t: float) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Point on the spine, its sideways direction, the offset and radius at fraction ``t``."""
        k = int(np.clip(np.searchsorted(ts, t, side="right") - 1, 0, len(ts) - 2))
        u = (t - ts[k]) / max(ts[k + 1] - ts[k], 1e-12)
        p = pts[k] + u * (pts[k + 1] - pts[k])
        along = _unit(pts[k + 1] - pts[k])
        side = (1.0 - t) * hip_side + t * arm_side
        if along is not None:
            side = side - float(side @ along) * along
        side = _unit(side)
        return p, (hip_side if side is None else side), float(np.interp(t, knots, offs)), float(np.interp(t, knots, rads))

    for k in range(len(spine) - 1):  # each spine bone, cut at the profile's knots
        cuts = np.unique(np.r_[ts[k], knots[(knots > ts[k]) & (knots < ts[k + 1])], ts[k + 1]])
        for t0, t1 in itertools.pairwise(cuts):
            p0, s0, o0, q0 = at(float(t0))
            p1, s1, o1, q1 = at(float(t1))
            for sign in (1.0, -1.0):
                owner.append(spine[k])
                child.append(spine[k + 1])
                a.append(p0 + sign * o0 * s0)
                b.append(p1 + sign * o1 * s1)
                r0.append(q0)
                r1.append(q1)
    up = _unit(pts[-1] - pts[0])
    if up is not None:
        drop = PELVIS_DROP * scale * up
        mid = 0.5 * (positions[lu] + positions[ru])
        owner.append(_legs_parent(skeleton, lu, ru))  # between the hip joints: the thighs own the outside
        child.append(-1)
        a.append(mid + PELVIS_SPAN * (positions[lu] - mid) - drop)
        b.append(mid + PELVIS_SPAN * (positions[ru] - mid) - drop)
        r0.append(PELVIS_RADIUS * scale)
        r1.append(PELVIS_RADIUS * scale)
    return owner, a, b, r0, r1, child
