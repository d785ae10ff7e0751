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


_REFLECT_VEC = np.array([-1.0, 1.0, 1.0])           # M = diag(-1, 1, 1): the world's reflection
_REFLECT_VEC_QUAT = np.array([1.0, 1.0, -1.0, -1.0])  # q of M R M
_AXIS_FLIP = np.array([[-1.0, 1.0, 1.0], [1.0, -1.0, 1.0], [1.0, 1.0, -1.0]])  # N_a: -1 on axis a
_AXIS_REFLECT_QUAT = np.array([  # q of N_a R N_a
    [1.0, 1.0, -1.0, -1.0],
    [1.0, -1.0, 1.0, -1.0],
    [1.0, -1.0, -1.0, 1.0],
])
_TOLERANCE = 0.15  # largest offset mismatch accepted, relative to the bones involved


def _half_turn_table() -> np.ndarray:
    t = np.zeros((3, 3, 4))
    for a in range(3):
        for b in range(3):
            if a == b:
                t[a, b, 0] = 1.0
            else:
                t[a, b, 1 + (3 - a - b)] = 1.0  # 180 degrees about the third axis
    return t


_HALF_TURN = _half_turn_table()  # q of N_a N_b, indexed [a, b]


def local_mirror_axes(skeleton: Skeleton, pairs: np.ndarray) -> np.ndarray | None:
    """Per joint, the local axis ``a`` whose reflection ``N_a`` maps the joint's child
    offsets (joints and end sites) onto its mirror joint's: ``N_a o_c = o_pair(c)``.

    Chosen jointly for each left/right pair, so a joint and its mirror use the same axis;
    joints without children inherit their parent's. ``None`` when some joint fits no axis
    within 15% of its bones' length (the skeleton is too asymmetric). LAFAN1's bones run
    along their local x, so it mirrors across local z; Mixamo rigs across local x.
    """
    J = skeleton.num_joints
    off = skeleton.offsets
    kids: list[list[np.ndarray]] = [[] for _ in range(J)]  # (offset, partner offset)
    animated = skeleton.has_position_channels
    for c in range(1, J):
        p = skeleton.parents[c]
        if animated[c] and pairs[c] == c and pairs[p] == p:
            continue  # e.g. hips under a root bone: a position, not a bone, and not mirrored by N
        kids[p].append((off[c], off[pairs[c]]))
    es_par, es_off = skeleton.end_site_parents, skeleton.end_site_offsets
    for e, p in enumerate(es_par):
        partners = np.flatnonzero(es_par == pairs[p])
        nth = np.flatnonzero(es_par[: e + 1] == p).size - 1
        if len(partners):
            kids[p].append((es_off[e], es_off[partners[min(nth, len(partners) - 1)]]))
    axes = np.full(J, -1)
    for j in range(J):
        if axes[j] >= 0:
            continue
        pairs_j = kids[j] + [(b, a) for a, b in kids[pairs[j]]] if pairs[j] != j else kids[j]
        pairs_j = [(a, b) for a, b in pairs_j if np.linalg.norm(a) + np.linalg.norm(b) > 1e-9]
        if not pairs_j:
            continue  # a leaf: inherits below
        o = np.array([a for a, _ in pairs_j])
        t = np.array([b for _, b in pairs_j])
        length = max(float(np.linalg.norm(o, axis=1).max()), 1e-9)
        errs = [float(np.abs(o * _AXIS_FLIP[k] - t).max()) / length for k in range(3)]
        k = int(np.argmin(errs))
        if errs[k] > _TOLERANCE:
            return None
        axes[j] = axes[pairs[j]] = k
    for j in range(J):
        if axes[j] < 0:
            axes[j] = axes[skeleton.parents[j]] if j > 0 else 0
    return axes


def mirror(motion: Motion, overrides: Mapping[str, str] | None = None) -> Motion:
    """The clip reflected left/right (``x -> -x`` in the world, left and right joints swapped).

    The mirrored clip keeps the original skeleton (offsets, channels). With ``M`` the
    world reflection and ``N_j`` the local reflections of :func:`local_mirror_axes`, world
    rotations become ``M R_pair(j) N_j``: local rotations become ``N_parent R N_j`` (the
    root ``M R N_0``) and local translations ``N_parent t`` (the root ``M t``). World
    positions are the mirror image up to the skeleton's own asymmetry, and
    ``mirror(mirror(m))`` is ``m`` exactly. If the skeleton is too asymmetric for that,
    the offsets are reflected instead (and the skeleton's offsets change).
    """
    from motionmatch.anim import quat

    pairs = mirror_pairs(motion.skeleton, overrides)
    skel = motion.skeleton
    name = motion.name[:-9] if motion.name.endswith("_mirrored") else motion.name + "_mirrored"
    axes = local_mirror_axes(skel, pairs)
    if axes is not None:
        parent_axes = np.concatenate([[0], axes[skel.parents[1:]]])
        src_r = motion.rotations[:, pairs]
        rotations = quat.mul(src_r * _AXIS_REFLECT_QUAT[parent_axes], _HALF_TURN[parent_axes, axes])
        rotations[:, 0] = quat.mul(motion.rotations[:, 0] * _REFLECT_VEC_QUAT, _HALF_TURN[0, axes[0]])
        translations = motion.translations[:, pairs] * _AXIS_FLIP[parent_axes]
        translations[:, 0] = motion.translations[:, 0] * _REFLECT_VEC
        fixed = ~skel.has_position_channels  # bones keep their own lengths exactly
        translations[:, fixed] = motion.translations[:, fixed]
        return motion.with_data(rotations, translations, name=name)
    # Fallback: reflect the offsets too. End sites move to the mirror joint; their order
    # is kept so the BVH layout is unchanged.
    es_par = skel.end_site_parents
    es_off = skel.end_site_offsets.copy()
    for e, p in enumerate(es_par):
        partners = np.flatnonzero(es_par == pairs[p])
        same = np.flatnonzero(es_par[: e + 1] == p).size - 1
        src = partners[min(same, len(partners) - 1)] if len(partners) else e
        es_off[e] = skel.end_site_offsets[src] * _REFLECT_VEC
    new_skel = Skeleton(skel.names, skel.parents, skel.offsets[pairs] * _REFLECT_VEC, es_par, es_off, skel.channels)
    rotations = motion.rotations[:, pairs] * _REFLECT_VEC_QUAT
    translations = motion.translations[:, pairs] * _REFLECT_VEC
    return motion.with_data(rotations, translations, skeleton=new_skel, name=name)
