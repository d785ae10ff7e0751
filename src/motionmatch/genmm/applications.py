"""GenMM's applications (paper, Section 5) as one-call functions.

=========================  =================================================================
:func:`complete`           motion completion: a given partial-body motion is kept exactly,
                           the rest of the body is synthesized around it.
:func:`keyframe_guided`    sparse key poses pinned at given times.
:func:`loop`               an endless loop: last frame = first frame, seamless.
:func:`random_locomotion`  new locomotion from a locomotion clip, along another path (foot
                           contacts and foot clean-up on).
:func:`reassemble`         a creature made of parts of different skeletons, joined at shared
                           joints, each part animated from its own creature's examples.
=========================  =================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import SkeletonError
from motionmatch.genmm.engine import PartData, ProgressCallback
from motionmatch.genmm.footik import fix_foot_contacts
from motionmatch.genmm.parts import PartsSpec, resolve_joints
from motionmatch.genmm.representation import FeatureLayout, body_scale, encode
from motionmatch.genmm.synthesis import (
    Completion,
    GenMM,
    GenMMConfig,
    GenMMResult,
    Keyframes,
    _at_fps,
    _config,
    load_examples,
)

__all__ = ["ReassemblySource", "complete", "keyframe_guided", "loop", "random_locomotion", "reassemble", "turn"]


def complete(examples, partial: Motion, joints: Sequence[str | int], *, seed: int | None = None,
             parts: PartsSpec = "auto", config: GenMMConfig | None = None, **settings) -> GenMMResult:
    """Complete a partial-body motion: ``joints`` of ``partial`` are kept exactly (their
    rotations, and the root's translation when the root is among them), the other joints
    are synthesized from ``examples``, skeleton-aware by default (the paper's setting).
    The output is as long as ``partial``."""
    gen = GenMM(examples, config, parts=parts, **settings)
    return gen.sample(seed=seed, completion=Completion(partial, joints))


def keyframe_guided(examples, keyframes: Keyframes, frames: int | None = None, *, seed: int | None = None,
                    parts: PartsSpec = None, config: GenMMConfig | None = None, **settings) -> GenMMResult:
    """Synthesize through sparse key poses: each key's joints are pinned at its time at every
    stage of the pyramid (see :class:`~motionmatch.genmm.Keyframes` for times and joints)."""
    gen = GenMM(examples, config, parts=parts, **settings)
    return gen.sample(frames, seed=seed, keyframes=keyframes)


def loop(examples, frames: int | None = None, *, seed: int | None = None, loop_root: str = "closed",
         parts: PartsSpec = None, config: GenMMConfig | None = None, **settings) -> GenMMResult:
    """An endless loop of ``frames`` frames whose last frame is its first (see
    :meth:`GenMM.sample`, ``loop`` and ``loop_root``)."""
    gen = GenMM(examples, config, parts=parts, **settings)
    return gen.sample(frames, seed=seed, loop=True, loop_root=loop_root)


def random_locomotion(example, frames: int | None = None, *, seed: int | None = None, random_heading: bool = True,
                      fix_feet: bool = True, config: GenMMConfig | None = None, **settings) -> GenMMResult:
    """New locomotion from a locomotion clip, along a different path.

    The clip's walk is cut and recombined by GenMM (its turns and straight parts in a new
    order, so the path differs from the example's); with ``random_heading`` the whole result
    is also turned about the vertical through its start by a random angle (from the same
    seed). Foot contacts are part of the features and the feet are planted afterwards
    (``fix_feet``), so recombined steps do not slide.
    """
    settings.setdefault("contacts", True)
    gen = GenMM(example, config, **settings)
    rng = np.random.default_rng(0 if seed is None else seed)
    res = gen.sample(frames, rng=rng)
    res.seed = 0 if seed is None else seed
    m = res.motion
    if random_heading:
        angle = float(rng.uniform(-np.pi, np.pi))
        m = turn(m, angle)
        res.extra["heading_rad"] = angle
    if fix_feet and res.contacts is not None:
        m = fix_foot_contacts(m, res.contacts, res.feet)
    res.motion = m
    return res


def turn(motion: Motion, angle: float) -> Motion:
    """``motion`` turned by ``angle`` radians about the vertical through its first root
    position (the whole path and every facing turn together)."""
    q = quat.from_angle_y(float(angle))
    rot = motion.rotations.copy()
    tr = motion.translations.copy()
    rot[:, 0] = quat.mul(q, rot[:, 0])
    origin = tr[0, 0] * np.array([1.0, 0.0, 1.0])
    tr[:, 0] = origin + quat.rotate(q, tr[:, 0] - origin)
    return motion.with_data(rot, tr)


# ------------------------------------------------------------------ reassembly
@dataclass
class ReassemblySource:
    """The part of a new creature taken from one example creature.

    Attributes:
        examples: clips (Motions or BVH paths) of one skeleton.
        joints: the joints taken from it (names or indices, ``"Name*"`` for a subtree). They
            must form a connected piece; every source after the first must share at least
            one joint with those before it (after renaming): that is where it is attached.
        rename: names of joints in the new skeleton (``{"mixamorig7:Hips": "Hips"}``); a
            joint keeps its own name otherwise. Joints of different sources with the same
            new name are one shared joint: it exists once, with the bone offset of the first
            source that has it, and its rotation is blended from all sources that have it.
        scale: factor on this source's bone lengths and translations (to fit a human torso
            to an elephant, say).
    """

    examples: object
    joints: Sequence[str | int]
    rename: Mapping[str, str] = field(default_factory=dict)
    scale: float = 1.0


def _assemble(sources: list[tuple[list[Motion], list[int], list[str], float]]
              ) -> tuple[Skeleton, list[list[tuple[int, int]]], np.ndarray]:
    """The new skeleton; per source, ``(source joint, new joint)`` pairs; ``[J]`` the source
    that owns (defines the offset of) each new joint."""
    names: list[str] = []
    owner: list[tuple[int, int]] = []  # (source, source joint) that defines each new joint
    index: dict[str, int] = {}
    for s, (_motions, joints, new_names, _) in enumerate(sources):
        for j, nm in zip(joints, new_names):
            if nm not in index:
                index[nm] = len(names)
                names.append(nm)
                owner.append((s, j))
    # Parents: the nearest selected ancestor in the owning source.
    parent_name: dict[str, str | None] = {}
    for nm, (s, j) in zip(names, owner):
        motions, joints, new_names, _ = sources[s]
        sel = dict(zip(joints, new_names))
        skel = motions[0].skeleton
        a = int(skel.parents[j])
        while a >= 0 and a not in sel:
            a = int(skel.parents[a])
        parent_name[nm] = sel[a] if a >= 0 else None
    roots = [nm for nm in names if parent_name[nm] is None]
    if len(roots) != 1:
        raise SkeletonError(
            f"the reassembled joints do not form one tree: {len(roots)} top joints ({', '.join(roots)}); "
            "each source after the first must share a joint (same new name) with the others"
        )
    # Depth-first order from the root, so parents come before children.
    children: dict[str, list[str]] = {nm: [] for nm in names}
    for nm in names:
        if parent_name[nm] is not None:
            children[parent_name[nm]].append(nm)
    order: list[str] = []
    stack = [roots[0]]
    while stack:
        nm = stack.pop()
        order.append(nm)
        stack.extend(reversed(children[nm]))
    new_index = {nm: i for i, nm in enumerate(order)}
    J = len(order)
    parents = np.array([-1 if parent_name[nm] is None else new_index[parent_name[nm]] for nm in order])
    offsets = np.zeros((J, 3))
    channels = []
    es_par, es_off = [], []
    for i, nm in enumerate(order):
        s, j = owner[names.index(nm)]
        skel = sources[s][0][0].skeleton
        scale = sources[s][3]
        offsets[i] = skel.offsets[j] * scale
        ch = tuple(skel.channels[j])
        if i == 0 and not any(c.endswith("position") for c in ch):
            ch = ("Xposition", "Yposition", "Zposition", *ch)
        channels.append(ch)
        for e in np.flatnonzero(skel.end_site_parents == j):
            es_par.append(i)
            es_off.append(skel.end_site_offsets[e] * scale)
    skeleton = Skeleton(tuple(order), parents, offsets, np.asarray(es_par, dtype=np.int64),
                        np.asarray(es_off).reshape(-1, 3), tuple(channels))
    pairs = []
    for _motions, joints, new_names, _ in sources:
        pairs.append([(j, new_index[nm]) for j, nm in zip(joints, new_names)])
    owners = np.array([owner[names.index(nm)][0] for nm in order])
    return skeleton, pairs, owners


def reassemble(sources: Sequence[ReassemblySource], frames: int | None = None, *, seed: int | None = None,
               config: GenMMConfig | None = None, progress: ProgressCallback | None = None,
               **settings) -> GenMMResult:
    """Synthesize a creature assembled from parts of different skeletons (motion reassembly).

    Each source gives some joints of the new skeleton and example clips of its own
    creature; each source is one skeletal part, matched and blended against its own
    creature's patches only, and the shared (overlapping) joints, present in several
    sources, are averaged, which ties the parts together during synthesis. The root (and
    its ground velocity and height) comes from the first source holding the new skeleton's
    root. Joints should have compatible local frames where they are shared (e.g. two
    Mixamo characters; a human and a quadruped share a hips joint only loosely).

    Returns a :class:`GenMMResult` whose motion is on the new skeleton (BVH-writable).
    Foot contacts are not used here (``contacts`` is ignored). ``progress`` is called as
    in :meth:`GenMM.sample`.
    """
    cfg = _config(config, dict(settings))
    if cfg.contacts:
        raise ValueError("reassemble does not use foot contacts; leave contacts off")
    if not sources:
        raise ValueError("reassemble needs at least one source")
    prepared = []
    fps = cfg.fps
    for src in sources:
        motions = load_examples(src.examples)
        motions, f = _at_fps(motions, fps)
        fps = f if fps is None else fps
        skel = motions[0].skeleton
        for m in motions[1:]:
            if not m.skeleton.same_topology(skel):
                raise SkeletonError("the clips of one reassembly source must share a skeleton")
        joints = resolve_joints(skel, src.joints)
        if not joints:
            raise SkeletonError("every reassembly source needs at least one joint")
        new_names = [src.rename.get(skel.names[j], skel.names[j]) for j in joints]
        if len(set(new_names)) != len(new_names):
            raise SkeletonError("two joints of one source got the same new name")
        prepared.append((motions, joints, new_names, float(src.scale)))
    skeleton, pairs, owners = _assemble(prepared)
    J = skeleton.num_joints
    root_src = next(s for s, pr in enumerate(pairs) if any(nj == 0 for _, nj in pr))
    # Views: each clip on the new skeleton (its own joints filled in, the rest at rest).
    root_ref = None
    views: list[list[Motion]] = []
    for s, (motions, _joints, _names, scale) in enumerate(prepared):
        vs = []
        for m in motions:
            rot = np.zeros((m.num_frames, J, 4))
            rot[..., 0] = 1.0
            tr = np.broadcast_to(skeleton.offsets, (m.num_frames, J, 3)).copy()
            for j, nj in pairs[s]:
                rot[:, nj] = m.rotations[:, j]
                if nj != 0 and owners[nj] == s:  # a shared joint keeps its owner's bone
                    tr[:, nj] = m.translations[:, j] * scale
                elif s == root_src:
                    tr[:, 0] = m.translations[:, j] * scale
            vs.append(Motion(skeleton, rot, tr, fps=m.fps, name=m.name, file_scale=m.file_scale))
            if s == root_src and root_ref is None:
                root_ref = tr[0, 0].copy()
        views.append(vs)
    for s, vs in enumerate(views):
        if s != root_src:
            for v in vs:
                v.translations[:, 0] = root_ref
    root_view = views[root_src][0]
    all_views = [v for vs in views for v in vs]
    ordered = [root_view] + [v for v in all_views if v is not root_view]
    layout = FeatureLayout.build(ordered, root_weight=cfg.root_weight, scale=body_scale(root_view))
    part_data = []
    for s, vs in enumerate(views):
        new_joints = [nj for _, nj in pairs[s]]
        cols = layout.joint_columns(new_joints)
        if s != root_src:
            cols = np.setdiff1d(cols, layout.root_cols)
        feats = [encode(v, layout) for v in vs]
        part_data.append(PartData(f"source{s}", cols, [X[:, cols] for X in feats]))
    gen = GenMM._from_prepared(
        config=cfg, fps=float(fps), examples=[root_view], layout=layout, parts=part_data,
        part_joints={f"source{s}": sorted(nj for _, nj in pairs[s]) for s in range(len(pairs))},
    )
    if frames is None:
        frames = 2 * max(sum(m.num_frames for m in p[0]) for p in prepared)
    res = gen.sample(frames, seed=seed, progress=progress)
    res.extra["skeleton_sources"] = [[skeleton.names[nj] for _, nj in pr] for pr in pairs]
    return res
