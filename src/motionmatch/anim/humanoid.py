"""Humanoid roles on any rig: which joint is the hips, the spine, the head, each arm and leg.

:func:`find_humanoid` reads a :class:`~motionmatch.anim.skeleton.Skeleton` and returns a
frozen :class:`HumanoidRoles`. It works from three things, in this order of trust:

* **names**, for the common naming schemes: Mixamo (``mixamorig:LeftUpLeg``), Unreal
  (``pelvis``, ``spine_01``, ``thigh_l``, ``calf_l``, ``foot_l``, ``ball_l``), Character
  Creator (``CC_Base_Hip``, ``CC_Base_L_Thigh``, ``CC_Base_L_ToeBase``), LAFAN1
  (``LeftUpLeg``, ``LeftToe``), Bandai-Namco (``UpperLeg_L``, ``Toes_L``), CMU
  (``LHipJoint``, ``LeftUpLeg``, ``LeftToeBase``), 3ds Max Biped (``Bip01_L_Thigh``), VRM
  humanoid bones (``leftUpperLeg``, ``leftToes``) and SMPL (``L_Hip``, ``L_Knee``);
  twist, roll and share bones (``thigh_twist_01_l``, ``CC_Base_L_CalfTwist01``) never
  take a limb role;
* **topology**: the legs are the chains below the upper legs; the hips are where the legs
  and the spine meet (also when the legs hang from a pelvis joint of their own, as in
  Character Creator); joints above the hips (a ground root, ``BoneRoot``) are extra roots;
  the toe is the ankle's child (the one named toe/ball, else the one carrying the most
  joints: several toe joints per foot are fine; a foot with none has no toe role); leaf
  chains no role names (props, end sites as joints) are ignored;
* **rest-pose geometry**, where names are missing: the legs and hips of a rig without limb
  names are read from its branching (the first joint with three long chains below it is
  the hips; the two smaller chains, pointing away from the largest, are the legs) and its
  left side is the side of ``up x forward`` (up: hips to the end of the spine; forward:
  ankle to toe) in a rest pose that stands (a T or A pose; a rest pose with every bone
  along one axis, like LAFAN1's, needs names). The arms, neck and head are found from
  names only.

Role names (:data:`ROLES`) follow the VRM humanoid's, in snake case: ``hips``, ``spine``
(the first spine joint), ``chest`` (where the arms branch), ``neck``, ``head``, and per
side ``left_shoulder`` (clavicle), ``left_upper_arm``, ``left_lower_arm``, ``left_hand``,
``left_upper_leg``, ``left_lower_leg``, ``left_ankle``, ``left_toe``. One more per side,
``left_foot``, is the foot's **contact joint**: what foot contacts, foot features and foot
locking use: the toe where the rig has one, else the ankle (in LAFAN1 ``LeftToe``, as the
feature schemas always meant).

A small map overrides any role: ``find_humanoid(skeleton, {"left_foot":
"CC_Base_L_ToeBase", "hips": "CC_Base_Hip"})``; a feature schema file carries the same map
under ``"roles"`` (see :mod:`motionmatch.database.schema`). Overriding ``left_ankle`` or
``left_toe`` moves the contact joint with it unless ``left_foot`` is named too.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import SkeletonError

__all__ = ["CENTRE_ROLES", "ROLES", "SIDE_ROLES", "HumanoidError", "HumanoidRoles", "carrier_joints", "find_humanoid",
           "helper_joints", "side_of"]

CENTRE_ROLES = ("hips", "spine", "chest", "neck", "head")
_LIMB = ("shoulder", "upper_arm", "lower_arm", "hand", "upper_leg", "lower_leg", "ankle", "toe", "foot")
SIDE_ROLES = tuple(f"{s}_{p}" for s in ("left", "right") for p in _LIMB)
#: Every role name a roles map or a feature schema may use.
ROLES = CENTRE_ROLES + SIDE_ROLES
#: The roles a humanoid must have (the rest may be missing: a rig without arms or toes).
REQUIRED = ("hips", "left_upper_leg", "left_lower_leg", "left_ankle", "right_upper_leg", "right_lower_leg",
            "right_ankle")


class HumanoidError(SkeletonError):
    """No humanoid found on a skeleton, or a roles map that does not fit it."""


def side_of(name: str) -> str | None:
    """``"L"``, ``"R"`` or ``None``: which side a joint name says it is on (``Left``,
    ``_l``, ``L_``, ``.L``, ``LHipJoint``, VRM's ``leftUpperLeg``)."""
    low = name.lower()
    if "left" in low:
        return "L"
    if "right" in low:
        return "R"
    m = re.search(r"(?:^|[_.\-: ])([LRlr])(?:$|[_.\-: 0-9])|^([LR])(?=[A-Z][a-z])", name)
    if m:
        return (m.group(1) or m.group(2)).upper()
    return None


# ------------------------------------------------------------------ name classes
_PREFIX = re.compile(r"^(?:.*:)?(?:cc_base_|bip\d*_|def_|org_|mch_|b_|bn_)*", re.IGNORECASE)
_SIDE_WORDS = re.compile(r"left|right|(?:^|(?<=[_.\-: ]))[lr](?=$|[_.\-: 0-9])", re.IGNORECASE)
_SIDE_LETTER = re.compile(r"^[LR](?=[A-Z])")  # LHipJoint, RShoulder
_HELPER = ("twist", "roll", "share", "helper", "corrective", "bend", "ik", "pole", "target", "end", "nub", "site",
           "top", "tip", "eye", "jaw", "breast", "rib")
_FINGER = ("thumb", "index", "middle", "ring", "pinky", "little", "finger", "digit")
_CLASSES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    # role, words (any), excluded words
    ("toe", ("toe", "ball"), ("end",)),
    ("ankle", ("foot", "ankle"), ()),
    ("upper_leg", ("upleg", "upperleg", "thigh", "femur"), ()),
    ("lower_leg", ("lowerleg", "calf", "shin", "knee", "leg"), ("up",)),
    ("hip_side", ("hip",), ()),
    ("hand", ("hand", "wrist"), _FINGER),
    ("lower_arm", ("forearm", "lowerarm", "elbow"), ()),
    ("upper_arm", ("upperarm", "arm"), ("fore", "lower")),
    ("shoulder", ("shoulder", "clavicle", "collar"), ()),
)


def _stem(name: str) -> str:
    """A name without namespaces, rig prefixes and side markers, lower case, no separators."""
    s = _PREFIX.sub("", name)
    s = _SIDE_WORDS.sub("", _SIDE_LETTER.sub("", s))
    return re.sub(r"[_.\-: 0-9]", "", s.lower())


def _limb_class(name: str) -> str | None:
    s = _stem(name)
    if not s or any(h in s for h in _HELPER):
        return None
    for role, words, excluded in _CLASSES:
        if any(w in s for w in words) and not any(x in s for x in excluded):
            return role
    return None


# ------------------------------------------------------------------ the result
@dataclass(frozen=True)
class HumanoidRoles:
    """The humanoid roles of one skeleton.

    Attributes:
        joint_names: the skeleton's joint names (``J``), for messages and :meth:`names`.
        roles: ``(role, joint index)`` pairs of every role found (see :data:`ROLES`).
        spine_chain: the joints from the hips (exclusive) to the neck (or the head), in order.
        above_hips: joints between the skeleton's root and the hips (a ground root), root first.
        overridden: the roles a roles map named.
        from_names: ``True`` when the legs were found from names (else from the branching).
    """

    joint_names: tuple[str, ...]
    roles: tuple[tuple[str, int], ...]
    spine_chain: tuple[int, ...] = ()
    above_hips: tuple[int, ...] = ()
    overridden: tuple[str, ...] = ()
    from_names: bool = True

    def get(self, role: str) -> int | None:
        """The joint of ``role`` (``None`` when the rig has none)."""
        if role not in ROLES:
            raise HumanoidError(f"unknown humanoid role {role!r}; roles are: {', '.join(ROLES)}")
        return dict(self.roles).get(role)

    def __getitem__(self, role: str) -> int:
        j = self.get(role)
        if j is None:
            raise HumanoidError(f"this rig has no {role!r} joint; name it in a roles map "
                                f'(e.g. "roles": {{"{role}": "JointName"}} in a --schema file)')
        return j

    def __contains__(self, role: str) -> bool:
        return role in dict(self.roles)

    def names(self) -> dict[str, str]:
        """``{role: joint name}`` of every role found."""
        return {r: self.joint_names[j] for r, j in self.roles}

    @property
    def hips(self) -> int:
        return self["hips"]

    @property
    def contact_joints(self) -> tuple[int, int]:
        """The (left, right) feet's contact joints: the toe where there is one, else the ankle."""
        return self["left_foot"], self["right_foot"]

    def leg_chain(self, side: str) -> tuple[int, int, int, int]:
        """``(upper leg, lower leg, ankle, contact joint)`` of ``side`` (``"left"``/``"right"``)."""
        return (self[f"{side}_upper_leg"], self[f"{side}_lower_leg"], self[f"{side}_ankle"], self[f"{side}_foot"])

    def describe(self) -> str:
        """One line: the main roles' joint names."""
        n = self.names()
        keys = ("hips", "head", "left_hand", "right_hand", "left_foot", "right_foot")
        return ", ".join(f"{k}={n[k]}" for k in keys if k in n)


# ------------------------------------------------------------------ finding
def _rest_positions(skeleton: Skeleton) -> np.ndarray:
    pos = np.zeros((skeleton.num_joints, 3))
    for j in range(1, skeleton.num_joints):
        pos[j] = pos[skeleton.parents[j]] + skeleton.offsets[j]
    return pos


class _Tree:
    """Parents, depths, descendants and paths of a skeleton (small helpers for the finder)."""

    def __init__(self, skeleton: Skeleton):
        self.parents = np.asarray(skeleton.parents)
        self.depth = skeleton.depth()
        J = skeleton.num_joints
        self.children: list[list[int]] = [[] for _ in range(J)]
        for j in range(1, J):
            self.children[self.parents[j]].append(j)
        self.size = np.ones(J, dtype=np.int64)  # joints in each subtree
        self.height = np.zeros(J, dtype=np.int64)  # longest chain below each joint
        for j in range(J - 1, 0, -1):
            p = self.parents[j]
            self.size[p] += self.size[j]
            self.height[p] = max(self.height[p], self.height[j] + 1)

    def ancestors(self, j: int) -> list[int]:
        """``j`` and its ancestors, ``j`` first."""
        out = [j]
        while self.parents[out[-1]] >= 0:
            out.append(int(self.parents[out[-1]]))
        return out

    def is_below(self, j: int, a: int) -> bool:
        return a in self.ancestors(j)

    def path(self, a: int, b: int) -> list[int]:
        """Joints strictly between ancestor ``a`` and its descendant ``b``, top first."""
        up = self.ancestors(b)
        return up[1:up.index(a)][::-1] if a in up else []

    def lca(self, joints: Sequence[int]) -> int:
        common = set(self.ancestors(joints[0]))
        for j in joints[1:]:
            common &= set(self.ancestors(j))
        return max(common, key=lambda k: self.depth[k])


def _first(cands: Sequence[int], tree: _Tree) -> int | None:
    return min(cands, key=lambda j: (tree.depth[j], j)) if cands else None


def _leg_by_names(skeleton: Skeleton, tree: _Tree, classes: list[str | None], side: str) -> dict[str, int]:
    """The leg roles of one side from names, or ``{}``."""
    names = skeleton.names
    on_side = [j for j in range(skeleton.num_joints) if side_of(names[j]) == side]
    upper = _first([j for j in on_side if classes[j] == "upper_leg"], tree)
    if upper is None:  # SMPL-like: L_Hip -> L_Knee -> L_Ankle
        upper = _first([j for j in on_side if classes[j] == "hip_side"
                        and any(classes[d] in ("lower_leg", "ankle") for d in range(j + 1, skeleton.num_joints)
                                if tree.is_below(d, j))], tree)
        if upper is not None and any(classes[c] == "upper_leg" for c in tree.children[upper]):
            upper = None
    if upper is None:
        return {}
    below = [j for j in range(upper + 1, skeleton.num_joints) if tree.is_below(j, upper)]
    ankle = _first([j for j in below if classes[j] == "ankle"], tree)
    if ankle is None:
        return {}
    between = tree.path(upper, ankle)
    named = [j for j in between if classes[j] == "lower_leg"]
    lower = named[0] if named else (between[-1] if between else None)
    out = {"upper_leg": upper, "ankle": ankle}
    if lower is not None:
        out["lower_leg"] = lower
    toe = _toe_of(skeleton, tree, classes, ankle)
    if toe is not None:
        out["toe"] = toe
    return out


def _toe_of(skeleton: Skeleton, tree: _Tree, classes: list[str | None], ankle: int) -> int | None:
    """The ankle's toe: a child named toe/ball, else the child carrying the most joints
    (not a helper bone); ``None`` for a foot without toes."""
    kids = [c for c in tree.children[ankle] if classes[c] == "toe"]
    if kids:
        return _first(kids, tree)
    below = [j for j in range(ankle + 1, skeleton.num_joints) if classes[j] == "toe" and tree.is_below(j, ankle)]
    if below:  # a toe under an unnamed metatarsal joint: the child it hangs from
        top = _first(below, tree)
        return tree.path(ankle, top)[0] if tree.path(ankle, top) else top
    stems = [_stem(skeleton.names[c]) for c in tree.children[ankle]]
    plain = [c for c, s in zip(tree.children[ankle], stems) if not any(h in s for h in _HELPER)]
    return max(plain, key=lambda c: (tree.size[c], -c)) if plain else None


def _arm_by_names(skeleton: Skeleton, tree: _Tree, classes: list[str | None], side: str) -> dict[str, int]:
    names = skeleton.names
    on_side = [j for j in range(skeleton.num_joints) if side_of(names[j]) == side]
    upper = _first([j for j in on_side if classes[j] == "upper_arm"], tree)
    shoulders = sorted((j for j in on_side if classes[j] == "shoulder"), key=lambda j: (tree.depth[j], j))
    shoulder = shoulders[0] if shoulders else None
    if upper is None:  # collar -> shoulder -> elbow -> wrist: the last "shoulder" is the upper arm
        below = [j for j in shoulders[1:] if tree.is_below(j, shoulders[0])]
        upper, shoulder = (below[0], shoulder) if below else (shoulder, None)
    if upper is None:
        return {}
    out = {"upper_arm": upper}
    if shoulder is not None and tree.is_below(upper, shoulder) and shoulder != upper:
        out["shoulder"] = shoulder
    elif shoulder is None and tree.parents[upper] >= 0:
        p = int(tree.parents[upper])
        if side_of(names[p]) == side and classes[p] is None and len(tree.children[p]) == 1:
            out["shoulder"] = p
    below = [j for j in range(upper + 1, skeleton.num_joints) if tree.is_below(j, upper)]
    hand = _first([j for j in below if classes[j] == "hand"], tree)
    if hand is None:
        return out
    out["hand"] = hand
    between = tree.path(upper, hand)
    named = [j for j in between if classes[j] == "lower_arm"]
    if named or between:
        out["lower_arm"] = named[0] if named else between[-1]
    return out


def _centre_by_names(skeleton: Skeleton, tree: _Tree, hips: int) -> dict[str, int]:
    """Neck and head below the hips from names."""
    below = [j for j in range(hips + 1, skeleton.num_joints) if tree.is_below(j, hips)]
    heads = [j for j in below if "head" in _stem(skeleton.names[j])
             and not any(h in _stem(skeleton.names[j]) for h in ("top", "end", "nub", "site"))
             and side_of(skeleton.names[j]) is None]
    out = {}
    head = _first(heads, tree)
    if head is not None:
        out["head"] = head
        necks = [j for j in tree.path(hips, head) if "neck" in _stem(skeleton.names[j])]
        if necks:
            out["neck"] = necks[0]
    return out


def _by_branching(skeleton: Skeleton, tree: _Tree, rest: np.ndarray) -> dict[str, int] | None:
    """Roles from the branching and the rest pose, for rigs without limb names."""
    long = [j for j in range(skeleton.num_joints)
            if sum(1 for c in tree.children[j] if tree.height[c] >= 2) >= 3]
    if not long:
        return None
    hips = _first(long, tree)
    branches = sorted((c for c in tree.children[hips] if tree.height[c] >= 2), key=lambda c: -tree.size[c])
    if len(branches) != 3:
        return None
    spine_top, legs = branches[0], branches[1:]
    ups = [rest[c] - rest[hips] for c in legs]
    up = rest[_deepest(tree, spine_top)] - rest[hips]
    if np.linalg.norm(up) < 1e-9:
        return None
    up = up / np.linalg.norm(up)
    chains = [_chain(tree, c) for c in legs]
    if any(len(ch) < 3 for ch in chains):
        return None
    leg_dirs = [rest[ch[2]] - rest[hips] for ch in chains]
    if any(float(np.dot(d, up)) > -0.3 * np.linalg.norm(d) for d in leg_dirs):
        return None  # the "legs" do not point away from the spine
    toes = [ch[3] if len(ch) > 3 else None for ch in chains]
    if toes[0] is None or toes[1] is None:
        return None
    fwd = sum(rest[t] - rest[ch[2]] for t, ch in zip(toes, chains))
    fwd = fwd - np.dot(fwd, up) * up
    if np.linalg.norm(fwd) < 1e-9:
        return None
    left_dir = np.cross(up, fwd)
    order = sorted(range(2), key=lambda i: -float(np.dot(ups[i] + rest[chains[i][2]] - rest[hips], left_dir)))
    out = {"hips": hips}
    for side, i in zip(("left", "right"), order):
        ch = chains[i]
        out.update({f"{side}_upper_leg": ch[0], f"{side}_lower_leg": ch[1], f"{side}_ankle": ch[2]})
        if len(ch) > 3:
            out[f"{side}_toe"] = ch[3]
    return out


def _deepest(tree: _Tree, j: int) -> int:
    while tree.children[j]:
        j = max(tree.children[j], key=lambda c: (tree.height[c], tree.size[c]))
    return j


def _chain(tree: _Tree, j: int) -> list[int]:
    out = [j]
    while tree.children[out[-1]]:
        out.append(max(tree.children[out[-1]], key=lambda c: (tree.height[c], tree.size[c])))
    return out


def _apply_overrides(skeleton: Skeleton, roles: dict[str, int], overrides: Mapping[str, str]) -> tuple[str, ...]:
    for role, joint in overrides.items():
        if role not in ROLES:
            raise HumanoidError(f"roles map: unknown role {role!r}; roles are: {', '.join(ROLES)}")
        if not isinstance(joint, str):
            raise HumanoidError(f"roles map: {role!r} must name a joint (a string), got {joint!r}")
        try:
            roles[role] = skeleton.index(joint)
        except SkeletonError as e:
            raise HumanoidError(f"roles map: {role!r}: {e}") from None
    return tuple(overrides)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def find_humanoid(skeleton: Skeleton, overrides: Mapping[str, str] | None = None) -> HumanoidRoles:
    """The humanoid roles of ``skeleton`` (see the module's description).

    Args:
        skeleton: any rig (metres or not: only directions and names are read).
        overrides: ``{role: joint name}``, wins over what is found.

    Raises:
        HumanoidError: no hips with two legs found (one line naming what is missing and
            how to name it), or a roles map naming an unknown role or joint.
    """
    key = tuple(sorted((overrides or {}).items()))
    per = _CACHE.setdefault(skeleton, {})
    if key not in per:
        per[key] = _find(skeleton, dict(overrides or {}))
    return per[key]


def _find(skeleton: Skeleton, overrides: dict[str, str]) -> HumanoidRoles:
    tree = _Tree(skeleton)
    classes = [_limb_class(n) for n in skeleton.names]
    roles: dict[str, int] = {}
    from_names = True
    legs = {s: _leg_by_names(skeleton, tree, classes, s[0].upper()) for s in ("left", "right")}
    if all(legs.values()):
        for side, leg in legs.items():
            roles.update({f"{side}_{k}": v for k, v in leg.items()})
    else:
        found = _by_branching(skeleton, tree, _rest_positions(skeleton))
        if found is not None:
            roles.update(found)
            from_names = False
    for side in ("left", "right"):
        roles.update({f"{side}_{k}": v for k, v in _arm_by_names(skeleton, tree, classes, side[0].upper()).items()})
    named = _apply_overrides(skeleton, roles, overrides)
    uppers = [roles[k] for k in ("left_upper_leg", "right_upper_leg") if k in roles]
    if "hips" not in roles and len(uppers) == 2:
        hips = tree.lca(uppers)
        centre = _centre_by_names(skeleton, tree, int(tree.ancestors(hips)[-1]))
        if "head" in centre and hips not in tree.ancestors(centre["head"]):
            hips = tree.lca([*uppers, centre["head"]])
        roles["hips"] = hips
    if "hips" in roles:
        for k, v in _centre_by_names(skeleton, tree, roles["hips"]).items():
            roles.setdefault(k, v)
        _apply_overrides(skeleton, roles, overrides)
    missing = [r for r in REQUIRED if r not in roles]
    if missing:
        raise HumanoidError(
            f"no humanoid found on this skeleton ({skeleton.num_joints} joints, root {skeleton.names[0]!r}): "
            f"no {', '.join(missing)}; name the joints in a roles map "
            f'(e.g. "roles": {{"{missing[0]}": "JointName"}} in a --schema file)')
    hips = roles["hips"]
    top = roles.get("neck", roles.get("head"))
    spine = tuple(tree.path(hips, top)) if top is not None else ()
    if spine:
        roles.setdefault("spine", spine[0])
        arms = [roles[k] for k in ("left_upper_arm", "right_upper_arm") if k in roles]
        chest = tree.lca([*arms, top]) if arms else spine[-1]
        roles.setdefault("chest", chest if chest in spine else spine[-1])
    for side in ("left", "right"):
        if f"{side}_ankle" in overrides and f"{side}_toe" not in overrides:  # the toe of the ankle named
            toe = _toe_of(skeleton, tree, classes, roles[f"{side}_ankle"])
            roles.pop(f"{side}_toe", None)
            if toe is not None:
                roles[f"{side}_toe"] = toe
        if f"{side}_foot" not in overrides:
            toe = roles.get(f"{side}_toe")
            roles[f"{side}_foot"] = toe if toe is not None else roles[f"{side}_ankle"]
    return HumanoidRoles(
        joint_names=skeleton.names, roles=tuple((r, int(roles[r])) for r in ROLES if r in roles),
        spine_chain=tuple(int(j) for j in spine), above_hips=tuple(int(j) for j in tree.ancestors(hips)[1:][::-1]),
        overridden=named, from_names=from_names,
    )


def carrier_joints(skeleton: Skeleton) -> tuple[int, ...]:
    """Joints that only carry the character over the ground and have no body: on a
    humanoid, the joints above the hips when each has one child (a ``SimulationBone``, a
    Character Creator ``BoneRoot``, both); on other skeletons a root with one child that
    has its own position channels. A bone from such a joint is a pedestal, never a limb."""
    try:
        above = find_humanoid(skeleton).above_hips
    except HumanoidError:
        above = ()
    if above and all(int(np.sum(skeleton.parents == j)) == 1 for j in above):
        return tuple(above)
    kids = np.flatnonzero(skeleton.parents == 0)
    if skeleton.num_joints > 1 and len(kids) == 1 and skeleton.has_position_channels[kids[0]]:
        return (0,)
    return ()


_DEFORM_HELPERS = ("twist", "roll", "share", "helper", "corrective")


def helper_joints(skeleton: Skeleton) -> np.ndarray:
    """``[J]`` bool: leaf joints that only help skinning (twist, roll, share and corrective
    bones: ``thigh_twist_01_l``, ``CC_Base_L_KneeShareBone``); they carry no body part of
    their own. End joints (``HeadTop_End``) are not helpers: they end a body part."""
    out = np.zeros(skeleton.num_joints, dtype=bool)
    leaf = np.ones(skeleton.num_joints, dtype=bool)
    leaf[skeleton.parents[1:]] = False
    for j in np.flatnonzero(leaf):
        stem = _PREFIX.sub("", skeleton.names[j]).lower()
        out[j] = any(w in stem for w in _DEFORM_HELPERS)
    return out
