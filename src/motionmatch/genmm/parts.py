"""Skeletal parts for skeleton-aware patches, and joint names given by users.

A *part* is a set of joints matched and blended on its own; parts overlap in a few joints
(where they attach to each other), whose values are averaged. :func:`auto_parts` splits
any skeleton into a trunk and its limbs from the topology alone; users can give their
own parts (:func:`resolve_parts`) as lists of joint names, where ``"Name*"`` means the
joint and everything below it.

Joint names are matched exactly, else without namespace prefixes (``mixamorig7:Hips``
matches ``Hips``) and case, as long as that is unambiguous.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from motionmatch._limits import read_json
from motionmatch.anim.kinematics import forward_kinematics
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import SkeletonError

PartsSpec = None | str | Sequence[Sequence[str | int]] | Mapping[str, Sequence[str | int]]


_TRUNK_WORDS = frozenset(("spine", "chest", "torso", "neck", "head", "back"))


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)}


def _bare(name: str) -> str:
    for sep in (":", "|"):
        name = name.rsplit(sep, 1)[-1]
    return name.lower()


def find_joint(skeleton: Skeleton, name: str | int) -> int:
    """Index of a joint by index, exact name, or unique name ignoring namespace and case."""
    if isinstance(name, (int, np.integer)):
        return skeleton.indices([int(name)])[0]
    if name in skeleton.names:
        return skeleton.index(name)
    hits = [j for j, n in enumerate(skeleton.names) if _bare(n) == _bare(name)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise SkeletonError(f"joint name {name!r} is ambiguous: {', '.join(skeleton.names[j] for j in hits)}")
    return skeleton.index(name)  # raises with suggestions


def descendants(skeleton: Skeleton, j: int) -> list[int]:
    """``j`` and every joint below it."""
    inside = np.zeros(skeleton.num_joints, dtype=bool)
    inside[j] = True
    for k in range(j + 1, skeleton.num_joints):
        inside[k] = inside[skeleton.parents[k]]
    return [int(k) for k in np.flatnonzero(inside)]


def resolve_joints(skeleton: Skeleton, spec: Sequence[str | int]) -> list[int]:
    """Joint indices for names/indices; ``"Name*"`` adds the joint's whole subtree."""
    out: list[int] = []
    for item in spec:
        if isinstance(item, str) and item.endswith("*"):
            out += descendants(skeleton, find_joint(skeleton, item[:-1]))
        else:
            out.append(find_joint(skeleton, item))
    return sorted(set(out))


def _rest_positions(skeleton: Skeleton) -> np.ndarray:
    J = skeleton.num_joints
    rot = np.zeros((1, J, 4))
    rot[..., 0] = 1.0
    return forward_kinematics(skeleton.parents, rot, skeleton.offsets[None])[0][0]


def auto_parts(
    skeleton: Skeleton,
    positions: np.ndarray | None = None,
    feet: Sequence[int] = (),
    *,
    min_limb_joints: int = 3,
) -> dict[str, list[int]]:
    """Split a skeleton into a trunk and limbs, from its topology.

    The trunk is the chain from the root that continues into the child whose subtree holds
    a spine/chest/neck/head joint (by name), else whose subtree reaches highest
    (``positions [J, 3]``: a typical pose, default the rest pose), e.g. hips, spine, neck,
    head; for a crab, the body and an eye stalk. Every other subtree hanging from the trunk with at least
    ``min_limb_joints`` joints is a limb (legs, arms, a tail, each crab leg); smaller ones
    (an eye, a head-top end) stay with the trunk. Each limb also holds the trunk joint it
    hangs from, so limbs and trunk overlap there; limbs holding a foot (``feet``) also hold
    the root joint, so that the root's motion is matched together with the legs.

    Returns ``{part name: sorted joint indices}``, the trunk first.
    """
    J = skeleton.num_joints
    pos = _rest_positions(skeleton) if positions is None else np.asarray(positions, dtype=np.float64)
    children = [skeleton.children(j) for j in range(J)]
    top = pos[:, 1].copy()
    for j in range(J - 1, 0, -1):
        top[skeleton.parents[j]] = max(top[skeleton.parents[j]], top[j])
    trunky = np.array([bool(_TRUNK_WORDS & _words(n)) for n in skeleton.names])
    has_trunky = trunky.copy()
    for j in range(J - 1, 0, -1):
        has_trunky[skeleton.parents[j]] |= has_trunky[j]
    trunk = [0]
    while children[trunk[-1]]:
        cands = children[trunk[-1]]
        named = [c for c in cands if has_trunky[c]]
        trunk.append(max(named or cands, key=lambda c: (top[c], len(descendants(skeleton, c)))))
    on_trunk = set(trunk)
    trunk_part = list(trunk)
    limbs: dict[str, list[int]] = {}
    foot_set = set(int(f) for f in feet)
    for t in trunk:
        for c in children[t]:
            if c in on_trunk:
                continue
            sub = descendants(skeleton, c)
            if len(sub) < min_limb_joints:
                trunk_part += sub
                continue
            joints = set(sub) | {t}
            if foot_set & set(sub):
                joints.add(0)
            name = skeleton.names[c]
            while name in limbs:
                name += "_"
            limbs[name] = sorted(joints)
    parts = {"trunk": sorted(trunk_part)}
    parts.update(limbs)
    return parts


def resolve_parts(
    skeleton: Skeleton,
    parts: PartsSpec,
    *,
    positions: np.ndarray | None = None,
    feet: Sequence[int] = (),
) -> dict[str, list[int]]:
    """Parts as ``{name: joint indices}`` from any accepted form.

    * ``None`` or ``"body"``: one part, the whole skeleton (the paper's default).
    * ``"auto"``: :func:`auto_parts`.
    * a list of joint lists, or a dict ``{name: joints}``; joints by name or index,
      ``"Name*"`` for a subtree.
    * a path to a JSON file holding such a list or dict.

    Joints that no part holds join the part of their nearest ancestor that has one.
    """
    if parts is None or (isinstance(parts, str) and parts in ("body", "none", "whole")):
        return {"body": list(range(skeleton.num_joints))}
    if isinstance(parts, str) and parts == "auto":
        return auto_parts(skeleton, positions, feet)
    if isinstance(parts, (str, Path)):
        parts = _parts_file(Path(parts))
    if isinstance(parts, Mapping):
        named = {str(k): resolve_joints(skeleton, v) for k, v in parts.items()}
    else:
        named = {}
        for i, spec in enumerate(parts):
            if isinstance(spec, str):
                raise SkeletonError("parts must be a list of joint *lists* (got a list of strings)")
            named[f"part{i}"] = resolve_joints(skeleton, spec)
    if not named or any(not v for v in named.values()):
        raise SkeletonError("every part needs at least one joint")
    owner = np.full(skeleton.num_joints, -1)
    keys = list(named)
    for i, k in enumerate(keys):
        for j in named[k]:
            if owner[j] < 0:
                owner[j] = i
    for j in range(skeleton.num_joints):
        if owner[j] < 0:
            a = j
            while a >= 0 and owner[a] < 0:
                a = int(skeleton.parents[a])
            i = owner[a] if a >= 0 else 0
            owner[j] = i
            named[keys[i]] = sorted(set(named[keys[i]]) | {j})
    return named


def _parts_file(path: Path) -> list | dict:
    """The joint lists of a JSON parts file, checked to be joint lists."""
    if not path.is_file():
        raise SkeletonError(f"parts must be 'auto', 'body', a JSON file, or joint lists; {str(path)!r} is none of "
                            "these")
    parts = read_json(path, "parts", error=SkeletonError)
    groups = parts.values() if isinstance(parts, dict) else parts if isinstance(parts, list) else None
    if groups is None or not all(isinstance(g, list) and all(isinstance(j, (str, int)) for j in g) for g in groups):
        raise SkeletonError(f'{path}: a parts file holds joint lists: [["Hips", "Spine*"], ...] or '
                            '{"trunk": ["Hips", "Spine*"], ...}')
    return parts


def parse_parts_arg(text: str) -> PartsSpec:
    """The CLI's ``--parts``: ``auto``, ``body``, a JSON file, or inline parts separated
    by ``;`` with joints separated by ``,`` (``"Hips,LeftUpLeg*;Hips,Spine*"``)."""
    t = text.strip()
    if t in ("auto", "body", "none", "whole"):
        return t
    if Path(t).suffix.lower() == ".json" or Path(t).is_file():
        return t
    parts = [[s.strip() for s in grp.split(",") if s.strip()] for grp in t.split(";") if grp.strip()]
    if not parts:
        raise SkeletonError(f"--parts {text!r}: expected 'auto', a JSON file, or 'A,B*;C,D*'")
    return parts
