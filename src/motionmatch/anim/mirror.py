"""Left/right mirroring of skeletons and clips.

A clip is mirrored by reflecting the whole body in the world's YZ plane (``x -> -x``)
and swapping left and right joints. In the character's own frame that is a reflection
of its trajectory across its forward axis, and it is its own inverse:
``mirror(mirror(m))`` equals ``m``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import SkeletonError

# Substitutions that turn a left name into a right name (and back). Each pattern is a
# regular expression with one group, the side marker, and is tried on whole names.
_WORD_PAIRS = (("Left", "Right"), ("left", "right"), ("LEFT", "RIGHT"))
# Single-letter side markers delimited by separators: _L, L_, .L, -L, :L, L at start
# followed by an upper-case letter (LHipJoint), etc.
_LETTER = re.compile(r"(?:(?<=^)|(?<=[_.\-: ]))([LRlr])(?=$|[_.\-: 0-9])|^([LR])(?=[A-Z][a-z])")


def _swap_letter(m: re.Match) -> str:
    c = m.group(1) or m.group(2)
    return {"L": "R", "R": "L", "l": "r", "r": "l"}[c]


def _candidates(name: str) -> list[str]:
    out = []
    for a, b in _WORD_PAIRS:
        if a in name:
            out.append(name.replace(a, b))
        if b in name:
            out.append(name.replace(b, a))
    swapped = _LETTER.sub(_swap_letter, name)
    if swapped != name:
        out.append(swapped)
    return out


def mirror_pairs(skeleton: Skeleton, overrides: Mapping[str, str] | None = None) -> np.ndarray:
    """``[J]`` index of each joint's mirror joint (itself for centre joints).

    Pairs are found from names (Left/Right, left/right, _L/_R, L_/R_, .L/.R, LHip/RHip,
    ...). ``overrides`` maps joint names to their partners and wins over the names;
    each override is applied both ways.
    """
    J = skeleton.num_joints
    pair = np.arange(J)
    names = skeleton.names
    for j, n in enumerate(names):
        for cand in _candidates(n):
            k = skeleton._index.get(cand)  # type: ignore[attr-defined]
            if k is not None and k != j:
                pair[j] = k
                break
    if overrides:
        for a, b in overrides.items():
            ia, ib = skeleton.index(a), skeleton.index(b)
            pair[ia], pair[ib] = ib, ia
    if not np.array_equal(pair[pair], np.arange(J)):
        bad = [names[j] for j in range(J) if pair[pair[j]] != j]
        raise SkeletonError(f"left/right pairing is not symmetric for joints {bad}; pass overrides={{left: right}}")
    for j in range(1, J):
        pj, pp = skeleton.parents[pair[j]], pair[skeleton.parents[j]]
        if pj != pp:
            raise SkeletonError(
                f"joint {names[j]!r} pairs with {names[pair[j]]!r}, but their parents "
                f"({names[skeleton.parents[j]]!r}, {names[pj] if pj >= 0 else None!r}) are not mirror joints; "
                "fix the pairing with overrides"
            )
    return pair


_REFLECT_VEC = np.array([-1.0, 1.0, 1.0])
_REFLECT_QUAT = np.array([1.0, 1.0, -1.0, -1.0])  # q of M R M for M = diag(-1, 1, 1)


def mirror(motion: Motion, overrides: Mapping[str, str] | None = None) -> Motion:
    """The clip reflected left/right (``x -> -x`` in the world, left and right joints swapped)."""
    pairs = mirror_pairs(motion.skeleton, overrides)
    skel = motion.skeleton
    # End sites: each end site moves to the mirror joint. Their order in the skeleton is
    # kept, so they are re-paired by parent to keep the BVH layout unchanged.
    es_par = skel.end_site_parents
    es_off = skel.end_site_offsets.copy()
    if len(es_par):
        for e, p in enumerate(es_par):
            partners = np.flatnonzero(es_par == pairs[p])
            same = np.flatnonzero(es_par[: e + 1] == p).size - 1
            src = partners[min(same, len(partners) - 1)] if len(partners) else e
            es_off[e] = skel.end_site_offsets[src] * _REFLECT_VEC
    new_skel = Skeleton(skel.names, skel.parents, skel.offsets[pairs] * _REFLECT_VEC, es_par, es_off, skel.channels)
    rotations = motion.rotations[:, pairs] * _REFLECT_QUAT
    translations = motion.translations[:, pairs] * _REFLECT_VEC
    name = motion.name[:-9] if motion.name.endswith("_mirrored") else motion.name + "_mirrored"
    return motion.with_data(rotations, translations, skeleton=new_skel, name=name)
