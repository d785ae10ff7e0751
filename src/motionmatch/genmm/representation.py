"""The per-frame feature vector GenMM matches and blends, and the way back to a `Motion`.

Each frame of a clip becomes one row of ``D`` numbers (float64 here; the synthesis casts
to its working dtype):

=====================  ======  ========================================================
columns                count   what
=====================  ======  ========================================================
joint rotations        6 J     every joint's *local* rotation in the continuous 6D form
                               of the authors' code (:func:`rotation_6d`: the first two
                               *rows* of its matrix). The root joint's local rotation is
                               its world rotation, so the root's heading is absolute.
root velocity          2       the root joint's ground-plane velocity ``(vx, vz)`` in world
                               axes, in m/s divided by the body scale ``H`` (so body
                               heights per second), times ``root_weight``. Frame ``t`` holds
                               the forward difference ``(p[t+1] - p[t]) * fps``; the last
                               frame repeats the one before. The absolute start position
                               is *not* a feature: it is kept aside and the path is
                               rebuilt by summing velocities, so ``decode(encode(m))``
                               gives back ``m``'s root path (to rounding).
root height            1       the root joint's absolute height ``y / H * root_weight``.
joint translations     3 T     local translations ``/ H`` of the non-root joints whose
                               translation is animated in the examples (position channels
                               that change); joints whose translation is constant keep it.
foot contacts          K       optional, one per *foot joint* (never per joint): 1 where
                               that foot is planted, 0 elsewhere, times ``contact_weight``.
=====================  ======  ========================================================

``H`` (:func:`body_scale`) is the root's median height above the lowest joint of the
frame, in metres (about 0.95 for an adult human, 0.25 for the crab, 1.4 for the
elephant): it makes the root features unit-free, so the same ``root_weight`` suits
creatures of any size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.contacts import find_feet, foot_contacts
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import MotionError, SkeletonError

#: Name words of chains that never carry a foot (heads, tails, trunks, ears...).
_NOT_LEG = frozenset(("head", "neck", "tail", "nose", "ear", "eye", "eyebrow", "mouth", "jaw", "tongue", "trunk",
                      "wing", "hair"))


def _words(name: str) -> set[str]:
    """Lower-case words of a joint name: ``"LeftForeArm"`` -> {left, fore, arm},
    ``"BN_Ear_L_02"`` -> {bn, ear, l}."""
    return {w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)}
_TRANSLATION_EPS = 1e-9  # metres: a translation that varies by less than this is constant


def body_scale(motion: Motion) -> float:
    """``H``: the root's median height above the lowest joint of each frame (m).

    Falls back to the skeleton's longest root-to-leaf chain (then 1 m) for degenerate clips.
    """
    wp = motion.world_positions
    h = float(np.median(wp[:, 0, 1] - wp[:, :, 1].min(axis=1)))
    if h > 1e-3:
        return h
    off = np.linalg.norm(motion.skeleton.offsets, axis=1)
    chain = np.zeros(motion.num_joints)
    for j in range(1, motion.num_joints):
        chain[j] = chain[motion.skeleton.parents[j]] + off[j]
    size = float(chain.max())
    return size if size > 1e-3 else 1.0


def _descendants(skeleton: Skeleton, j: int) -> list[int]:
    out = [j]
    for k in range(j + 1, skeleton.num_joints):
        p = skeleton.parents[k]
        while p > j:
            p = skeleton.parents[p]
        if p == j:
            out.append(k)
    return out


def _ancestors(skeleton: Skeleton, j: int) -> list[int]:
    out = []
    while j >= 0:
        out.append(j)
        j = int(skeleton.parents[j])
    return out


def detect_feet(motion: Motion, *, low_fraction: float = 0.2) -> list[int]:
    """Foot joints of any creature, from names and from the example's motion.

    1. Joints named like feet (toe/foot/ankle/heel/paw/hoof: the deepest one per chain,
       as :func:`motionmatch.anim.contacts.find_feet`).
    2. The tips of other chains (a leaf joint, or its BVH end sites) that come down to
       the floor: within ``low_fraction * H`` of the lowest tip (5th percentile heights
       over the clip), on limbs (the joints from the tip up to the first branching) with no
       head, neck, tail, nose, ear, eye, jaw, trunk or wing joint. This finds the front feet of quadrupeds (joints named
       "Hand") and the legs of creatures with unnamed bones (the crab); a human's hands
       are far from the floor and stay out. For a chain found this way the foot is the
       name-based foot on it, else the leaf.

    Returns sorted joint indices (possibly empty: then no contact labels are made).
    """
    skel = motion.skeleton
    try:
        named = set(find_feet(skel))
    except SkeletonError:
        named = set()
    wp = motion.world_positions
    H = body_scale(motion)
    leaves = [j for j in range(skel.num_joints) if not skel.children(j)]
    es = motion.end_site_positions() if len(skel.end_site_parents) else None
    tip = {}
    for j in leaves:
        h = float(np.percentile(wp[:, j, 1], 5))
        if es is not None:
            for e in np.flatnonzero(skel.end_site_parents == j):
                h = min(h, float(np.percentile(es[:, e, 1], 5)))
        tip[j] = h
    feet = set(named)
    if tip:
        floor = min(tip.values())
        for j, h in tip.items():
            if h - floor > low_fraction * H:
                continue
            chain = _ancestors(skel, j)
            # The limb's own joints: up from the tip to the first branching joint.
            limb = [chain[0]]
            for a in chain[1:-1]:
                if len(skel.children(a)) > 1:
                    break
                limb.append(a)
            if any(_NOT_LEG & _words(skel.names[a]) for a in limb):
                continue
            on_chain = [a for a in chain if a in named]
            if not on_chain:
                feet.add(j)
    return sorted(feet)


@dataclass(frozen=True)
class FeatureLayout:
    """Which columns of the feature vector hold what (see the module docstring).

    Attributes:
        skeleton: the skeleton the features describe.
        scale: body scale ``H`` in metres.
        root_weight: weight of the root velocity and height columns.
        contact_weight: weight of the contact columns.
        rot_cols: ``[J, 6]`` columns of each joint's 6D rotation.
        root_cols: ``[3]`` columns ``(vx, vz, y)`` of the root.
        trans_joints: non-root joints with animated translations.
        trans_cols: ``[T, 3]`` their columns.
        feet: foot joints with a contact column.
        contact_cols: ``[K]`` their columns.
        rest_translations: ``[J, 3]`` translations of joints whose translation is constant
            (from the first example's first frame).
    """

    skeleton: Skeleton
    scale: float
    root_weight: float
    contact_weight: float
    rot_cols: np.ndarray
    root_cols: np.ndarray
    trans_joints: tuple[int, ...]
    trans_cols: np.ndarray
    feet: tuple[int, ...]
    contact_cols: np.ndarray
    rest_translations: np.ndarray
    column_joint: np.ndarray = field(repr=False)

    @property
    def num_columns(self) -> int:
        return int(self.column_joint.shape[0])

    def joint_columns(self, joints: Sequence[int]) -> np.ndarray:
        """All columns owned by ``joints`` (rotations, root features for the root,
        translations, and the contact column of feet among them), sorted."""
        js = np.zeros(self.skeleton.num_joints, dtype=bool)
        js[list(joints)] = True
        return np.flatnonzero(js[self.column_joint])

    def rotation_columns(self) -> np.ndarray:
        return self.rot_cols.reshape(-1)

    @staticmethod
    def build(
        examples: Sequence[Motion],
        *,
        root_weight: float = 1.0,
        contact_weight: float = 1.0,
        feet: Sequence[int] | None = None,
        scale: float | None = None,
    ) -> FeatureLayout:
        """The layout for clips sharing one skeleton (the first clip's).

        ``feet``: contact joints (indices), or ``None`` for no contact columns.
        """
        if not examples:
            raise MotionError("GenMM needs at least one example clip")
        first = examples[0]
        skel = first.skeleton
        for m in examples[1:]:
            if not m.skeleton.same_topology(skel):
                raise MotionError(
                    f"example {m.name!r} has another skeleton than {first.name!r} (joint names or hierarchy differ); "
                    "use genmm.reassemble for examples of different skeletons"
                )
        J = skel.num_joints
        H = float(scale) if scale is not None else body_scale(first)
        animated = np.zeros(J, dtype=bool)
        ref = first.translations[0]
        for m in examples:
            dev = np.abs(m.translations - ref[None]).max(axis=(0, 2))
            animated |= dev > _TRANSLATION_EPS
        animated[0] = False
        trans_joints = tuple(int(j) for j in np.flatnonzero(animated))
        feet_t = tuple(sorted(int(f) for f in feet)) if feet is not None else ()
        col_joint: list[int] = []
        rot_cols = np.arange(6 * J).reshape(J, 6)
        col_joint += [j for j in range(J) for _ in range(6)]
        root_cols = np.arange(6 * J, 6 * J + 3)
        col_joint += [0, 0, 0]
        start = 6 * J + 3
        trans_cols = np.arange(start, start + 3 * len(trans_joints)).reshape(-1, 3)
        col_joint += [j for j in trans_joints for _ in range(3)]
        start += 3 * len(trans_joints)
        contact_cols = np.arange(start, start + len(feet_t))
        col_joint += list(feet_t)
        return FeatureLayout(
            skeleton=skel, scale=H, root_weight=float(root_weight), contact_weight=float(contact_weight),
            rot_cols=rot_cols, root_cols=root_cols, trans_joints=trans_joints, trans_cols=trans_cols,
            feet=feet_t, contact_cols=contact_cols, rest_translations=ref.copy(),
            column_joint=np.asarray(col_joint, dtype=np.int64),
        )


def rotation_6d(q: np.ndarray) -> np.ndarray:
    """``[..., 6]``: the first two rows of the rotation matrices of quaternions ``[..., 4]``,
    the 6D form of the authors' code (``quat2repr6d``). Not the first two columns
    (:func:`motionmatch.anim.quat.to_6d`, what this was before): a distance between rows
    weighs a joint's rotation about the parent's axes, between columns about its own, and
    with rows the syntheses were more diverse on five of the six genmm examples, coverage
    as high or higher on four (benchmarks/README.md, "GenMM set diversity")."""
    m = quat.to_matrix(q)
    return np.concatenate([m[..., 0, :], m[..., 1, :]], axis=-1)


def rotation_from_6d(d6: np.ndarray) -> np.ndarray:
    """Quaternions ``[..., 4]`` from :func:`rotation_6d` values ``[..., 6]`` (Gram-Schmidt on
    the two rows, any scale)."""
    d6 = np.asarray(d6, dtype=np.float64)
    a, b = d6[..., :3], d6[..., 3:]
    r0 = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b - np.sum(r0 * b, axis=-1, keepdims=True) * r0
    r1 = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return quat.from_matrix(np.stack([r0, r1, quat.cross(r0, r1)], axis=-2))


def root_velocity(positions: np.ndarray, fps: float) -> np.ndarray:
    """``[F, 2]`` ground-plane forward-difference velocities (m/s) of root positions ``[F, 3]``;
    the last frame repeats the one before (zero for a single frame)."""
    v = np.zeros((positions.shape[0], 2))
    if positions.shape[0] > 1:
        v[:-1] = np.diff(positions[:, [0, 2]], axis=0) * fps
        v[-1] = v[-2]
    return v


def encode(motion: Motion, layout: FeatureLayout, contacts: np.ndarray | None = None) -> np.ndarray:
    """``[F, D]`` float64 features of ``motion`` (see the module docstring).

    ``contacts``: ``[F, K]`` bool labels of ``layout.feet`` (required when the layout has
    contact columns; see :func:`contact_labels`).
    """
    F, J = motion.num_frames, motion.num_joints
    if J != layout.skeleton.num_joints:
        raise MotionError(f"{motion.name}: {J} joints, the feature layout has {layout.skeleton.num_joints}")
    X = np.empty((F, layout.num_columns))
    X[:, layout.rot_cols.reshape(-1)] = rotation_6d(motion.rotations).reshape(F, 6 * J)
    w = layout.root_weight / layout.scale
    root = motion.translations[:, 0]
    X[:, layout.root_cols[:2]] = root_velocity(root, motion.fps) * w
    X[:, layout.root_cols[2]] = root[:, 1] * w
    if layout.trans_joints:
        X[:, layout.trans_cols.reshape(-1)] = (
            motion.translations[:, list(layout.trans_joints)].reshape(F, -1) / layout.scale
        )
    if layout.feet:
        if contacts is None:
            raise MotionError(f"{motion.name}: the layout has contact columns but no contact labels were given")
        c = np.asarray(contacts)
        if c.shape != (F, len(layout.feet)):
            raise MotionError(f"{motion.name}: contacts must have shape [{F}, {len(layout.feet)}], got {list(c.shape)}")
        X[:, layout.contact_cols] = c.astype(np.float64) * layout.contact_weight
    return X


def contact_labels(motion: Motion, feet: Sequence[int]) -> np.ndarray:
    """``[F, K]`` bool contact labels of the foot joints ``feet``: height and speed under
    thresholds scaled to the creature's size (6 cm and 0.5 m/s for ``H = 0.95`` m), median
    filtered (:func:`motionmatch.anim.contacts.foot_contacts`)."""
    if not len(feet):
        return np.zeros((motion.num_frames, 0), dtype=bool)
    k = body_scale(motion) / 0.95
    wp = motion.world_positions[:, list(feet), 1]
    ground = float(np.percentile(wp.min(axis=1), 2))
    return foot_contacts(motion, feet=list(feet), height_threshold=0.06 * k, velocity_threshold=0.5 * k,
                         ground_height=ground).contacts


def decode(
    X: np.ndarray,
    layout: FeatureLayout,
    fps: float,
    *,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Local rotations ``[F, J, 4]``, translations ``[F, J, 3]`` and contacts ``[F, K]`` (or
    ``None``) from features ``[F, D]``.

    The root path starts at ``start`` (``[x, z]`` or ``[x, y, z]``, the y is ignored;
    default the origin) and follows the summed velocities.
    """
    X = np.asarray(X, dtype=np.float64)
    F = X.shape[0]
    J = layout.skeleton.num_joints
    rot = np.empty((F, J, 4))
    cols = layout.rot_cols.reshape(-1)
    for f0 in range(0, F, 4096):  # in chunks: the 6D -> quaternion temporaries are large
        f1 = min(f0 + 4096, F)
        rot[f0:f1] = rotation_from_6d(X[f0:f1, cols].reshape(f1 - f0, J, 6))
    rot = quat.unroll(rot, axis=0)
    tr = np.broadcast_to(layout.rest_translations, (F, J, 3)).copy()
    if layout.trans_joints:
        tr[:, list(layout.trans_joints)] = X[:, layout.trans_cols.reshape(-1)].reshape(F, -1, 3) * layout.scale
    w = layout.scale / layout.root_weight
    v = X[:, layout.root_cols[:2]] * w
    s = np.zeros(2) if start is None else np.asarray(start, dtype=np.float64).reshape(-1)[[0, -1]]
    xz = np.empty((F, 2))
    xz[0] = s
    if F > 1:
        xz[1:] = s + np.cumsum(v[:-1], axis=0) / fps
    tr[:, 0, 0] = xz[:, 0]
    tr[:, 0, 2] = xz[:, 1]
    tr[:, 0, 1] = X[:, layout.root_cols[2]] * w
    contacts = None
    if layout.feet:
        contacts = X[:, layout.contact_cols] > 0.5 * layout.contact_weight
    return rot, tr, contacts
