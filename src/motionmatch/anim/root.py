"""The character root (the "simulation bone"): where the character is and where it faces.

The root is the hips projected to the ground plane (y = 0), facing a direction derived
from the body itself: the cross product of the left-to-right axis through the hips and
shoulders with the vertical, never an axis assumed per dataset. Both are smoothed with a
Savitzky-Golay filter. Files that already carry such a root bone (a root joint on the
ground, rotating about the vertical only, following the hips, e.g. LAFAN1's
``SimulationBone``) are recognised and used as they are, after checking which of the
bone's axes points forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import savgol_filter

from motionmatch.anim import quat
from motionmatch.anim.humanoid import HumanoidError, find_humanoid, side_of
from motionmatch.anim.mirror import mirror_pairs
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import SkeletonError

UP = np.array([0.0, 1.0, 0.0])
_HIP_WORDS = ("upleg", "upperleg", "thigh", "hip", "femur", "leg")
_SHOULDER_WORDS = ("shoulder", "clavicle", "upperarm", "arm")
_NOT_UPPER = ("fore", "lower", "hand", "finger", "thumb", "index", "calf", "foot", "toe", "knee", "shin")


@dataclass(frozen=True)
class CharacterRoot:
    """The character's ground position and facing over a clip.

    Attributes:
        positions: ``[F, 3]`` root positions on the ground (y = 0), metres.
        directions: ``[F, 3]`` unit facing directions in the ground plane.
        from_bone: ``True`` when read from a root bone the file already carries.
    """

    positions: np.ndarray
    directions: np.ndarray
    from_bone: bool = False

    @property
    def rotations(self) -> np.ndarray:
        """``[F, 4]`` rotations about +Y taking the character's +Z to its facing."""
        return quat.from_angle_y(np.arctan2(self.directions[:, 0], self.directions[:, 2]))

    def velocities(self, fps: float) -> np.ndarray:
        """``[F, 3]`` root velocities (m/s)."""
        return np.gradient(self.positions, 1.0 / fps, axis=0) if len(self.positions) > 1 else np.zeros_like(self.positions)


__all__ = ["CharacterRoot", "extract_root", "facing_from_body", "find_hips", "lateral_pairs",
           "root_bone_forward_axis", "side_of", "with_root_bone"]


def find_hips(skeleton: Skeleton) -> int:
    """The pelvis joint: the humanoid's hips (:func:`~motionmatch.anim.humanoid.find_humanoid`:
    where the legs and the spine meet) unless a joint named hips/pelvis sits above them
    (a quadruped rigged as a 3ds Max Biped); else the joint named hips/pelvis nearest the
    root; else the first joint with three or more children."""
    named = skeleton.find("hips", "pelvis")
    depth = skeleton.depth()
    first_named = min(named, key=lambda j: (depth[j], j)) if named else None
    try:
        hips = find_humanoid(skeleton).hips
    except HumanoidError:
        hips = None
    if hips is not None:
        p = hips
        while p >= 0 and p != first_named:
            p = int(skeleton.parents[p])
        return hips if p < 0 or p == hips else int(first_named)
    if first_named is not None:
        return first_named
    for j in range(skeleton.num_joints):
        if len(skeleton.children(j)) >= 3:
            return j
    return 0


def lateral_pairs(skeleton: Skeleton, rest_positions: np.ndarray | None = None) -> list[tuple[int, int]]:
    """(left, right) joint pairs that span the body's width: hips and shoulders.

    Uses the highest pairs in the hierarchy whose names say hip/thigh/upper-leg or
    shoulder/clavicle/upper-arm; falls back to the top-most left/right pairs of any kind.
    Pairs whose joints coincide (zero width) are skipped in favour of their children. A rig
    whose names pair no mirror (a prop on one hand: ``weapon_r``) uses its humanoid roles'
    upper legs and shoulders (or upper arms).
    """
    try:
        pairs = mirror_pairs(skeleton)
    except SkeletonError:
        try:
            roles = find_humanoid(skeleton)
        except HumanoidError:
            raise SkeletonError("no left/right joint pairs found from the names and no humanoid; "
                                "cannot derive the facing direction") from None
        out = [(roles["left_upper_leg"], roles["right_upper_leg"])]
        for role in ("shoulder", "upper_arm"):
            if f"left_{role}" in roles and f"right_{role}" in roles:
                out.append((roles[f"left_{role}"], roles[f"right_{role}"]))
                break
        return out
    depth = skeleton.depth()
    cand = []
    for j in range(skeleton.num_joints):
        k = pairs[j]
        if k == j or side_of(skeleton.names[j]) != "L" or side_of(skeleton.names[k]) != "R":
            continue
        cand.append((j, k))
    if not cand:
        raise SkeletonError("no left/right joint pairs found from the names; cannot derive the facing direction")
    if rest_positions is not None:
        wide = [(a, b) for a, b in cand if np.linalg.norm(rest_positions[a] - rest_positions[b]) > 1e-3]
        cand = wide or cand

    def pick(words: tuple[str, ...]) -> list[tuple[int, int]]:
        hits = [(a, b) for a, b in cand
                if any(w in skeleton.names[a].lower() for w in words)
                and not any(x in skeleton.names[a].lower() for x in _NOT_UPPER)]
        if not hits:
            return []
        top = min(depth[a] for a, _ in hits)
        return [(a, b) for a, b in hits if depth[a] == top]

    chosen = pick(_HIP_WORDS) + pick(_SHOULDER_WORDS)
    if not chosen:
        top = min(depth[a] for a, _ in cand)
        chosen = [(a, b) for a, b in cand if depth[a] == top]
    return list(dict.fromkeys(chosen))


def _smooth(x: np.ndarray, fps: float, window_s: float, order: int) -> np.ndarray:
    n = len(x)
    win = round(window_s * fps) | 1  # odd
    win = min(win, n if n % 2 == 1 else n - 1)
    if win <= order:
        return x.copy()
    return savgol_filter(x, win, order, axis=0, mode="interp")


def facing_from_body(motion: Motion) -> np.ndarray:
    """``[F, 3]`` unit facing directions (unsmoothed) from the hips/shoulders left-right axis."""
    wp = motion.world_positions
    pairs = lateral_pairs(motion.skeleton, wp[0])
    left = np.zeros((motion.num_frames, 3))
    for a, b in pairs:
        d = wp[:, a] - wp[:, b]
        d[:, 1] = 0.0
        left += d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-9)
    fwd = np.cross(left, UP)
    fwd[:, 1] = 0.0
    n = np.linalg.norm(fwd, axis=1, keepdims=True)
    # Frames where the axis is vertical (lying on the side): hold the last good value.
    good = n[:, 0] > 1e-6
    if not np.any(good):
        raise SkeletonError(f"{motion.name}: the left/right axis is vertical in every frame; cannot derive a facing")
    idx = np.where(good, np.arange(len(good)), 0)
    idx = np.maximum.accumulate(idx)
    idx[: np.argmax(good)] = np.argmax(good)
    return fwd[idx] / n[idx]


def _normalise_planar(d: np.ndarray) -> np.ndarray:
    d = d.copy()
    d[:, 1] = 0.0
    return d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-9)


def root_bone_forward_axis(motion: Motion, body_facing: np.ndarray | None = None) -> np.ndarray | None:
    """If joint 0 is a character root bone, the local axis of it that points forward.

    A root bone stays on the ground (|y| < 5 cm), rotates about the vertical only,
    and stays near the hips (mean horizontal distance < 0.5 m). Its forward axis is the
    one of ``±X, ±Z`` best aligned with the body's facing (mean cosine > 0.7).
    Returns ``None`` when joint 0 is not such a bone.
    """
    skel = motion.skeleton
    if len(skel.children(0)) == 0 or skel.num_joints < 3:
        return None
    root_pos = motion.world_positions[:, 0]
    root_rot = motion.world_rotations[:, 0]
    if np.abs(root_pos[:, 1]).max() > 0.05:
        return None
    if np.abs(root_rot[:, [1, 3]]).max() > 1e-3:  # any tilt about x or z
        return None
    hips = find_hips(skel)
    if hips == 0:
        return None
    d = motion.world_positions[:, hips, [0, 2]] - root_pos[:, [0, 2]]
    if np.mean(np.linalg.norm(d, axis=1)) > 0.5:
        return None
    facing = facing_from_body(motion) if body_facing is None else body_facing
    best, best_cos = None, 0.7
    for axis in ([0, 0, 1], [0, 0, -1], [1, 0, 0], [-1, 0, 0]):
        a = np.array(axis, dtype=np.float64)
        c = float(np.mean(np.sum(_normalise_planar(quat.rotate(root_rot, a)) * facing, axis=1)))
        if c > best_cos:
            best, best_cos = a, c
    return best


def extract_root(
    motion: Motion,
    *,
    use_existing: bool = True,
    position_window_s: float = 0.5,
    direction_window_s: float = 0.5,
    polyorder: int = 2,
) -> CharacterRoot:
    """The character root of ``motion``.

    Args:
        motion: the clip.
        use_existing: use a root bone the file already carries (see
            :func:`root_bone_forward_axis`) instead of extracting one.
        position_window_s, direction_window_s: Savitzky-Golay window lengths (seconds)
            for the ground position and the facing direction.
        polyorder: Savitzky-Golay polynomial order.
    """
    body = facing_from_body(motion)
    if use_existing:
        axis = root_bone_forward_axis(motion, body)
        if axis is not None:
            pos = motion.world_positions[:, 0].copy()
            pos[:, 1] = 0.0
            dirs = _normalise_planar(quat.rotate(motion.world_rotations[:, 0], axis))
            return CharacterRoot(pos, dirs, from_bone=True)
    hips = find_hips(motion.skeleton)
    pos = motion.world_positions[:, hips].copy()
    pos[:, 1] = 0.0
    pos = _smooth(pos, motion.fps, position_window_s, polyorder)
    pos[:, 1] = 0.0
    dirs = _normalise_planar(_smooth(body, motion.fps, direction_window_s, polyorder))
    return CharacterRoot(pos, dirs, from_bone=False)


def with_root_bone(motion: Motion, root: CharacterRoot | None = None, name: str = "SimulationBone") -> Motion:
    """The clip with a canonical character root bone as joint 0.

    Joint 0 then stays on the ground (y = 0) and rotates about +Y only, with its local +Z
    axis the character's facing. A root bone the file already carries is re-oriented to
    this convention (LAFAN1's ``SimulationBone`` faces its +X); otherwise a new joint
    ``name`` is added above the old root. World poses of all other joints are unchanged.
    """
    if root is None:
        root = extract_root(motion)
    r_rot = root.rotations
    r_pos = root.positions
    skel = motion.skeleton
    if root.from_bone:
        # Re-express joint 0's children under the canonical root transform.
        old_rot = motion.world_rotations[:, 0]
        old_pos = motion.world_positions[:, 0]
        rel_rot = quat.inv_mul(r_rot, old_rot)  # old root frame in the new root frame [F, 4]
        rel_pos = quat.inv_rotate(r_rot, old_pos - r_pos)
        rotations = motion.rotations.copy()
        translations = motion.translations.copy()
        rotations[:, 0] = r_rot
        translations[:, 0] = r_pos
        for c in skel.children(0):
            rotations[:, c] = quat.mul(rel_rot, motion.rotations[:, c])
            translations[:, c] = rel_pos + quat.rotate(rel_rot, motion.translations[:, c])
        channels = list(skel.channels)
        for c in skel.children(0):
            if not any(ch.endswith("position") for ch in channels[c]):
                channels[c] = ("Xposition", "Yposition", "Zposition", *channels[c])
        new_skel = Skeleton(skel.names, skel.parents, skel.offsets, skel.end_site_parents,
                            skel.end_site_offsets, tuple(channels))
        return motion.with_data(rotations, translations, skeleton=new_skel)
    if name in skel.names:
        raise SkeletonError(f"cannot add a root bone named {name!r}: the skeleton already has a joint of that name")
    old_rot = quat.inv_mul(r_rot, motion.rotations[:, 0])
    old_pos = quat.inv_rotate(r_rot, motion.translations[:, 0] - r_pos)
    rotations = np.concatenate([r_rot[:, None], old_rot[:, None], motion.rotations[:, 1:]], axis=1)
    translations = np.concatenate([r_pos[:, None], old_pos[:, None], motion.translations[:, 1:]], axis=1)
    channels = (("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation"),)
    old_channels = list(skel.channels)
    if not any(c.endswith("position") for c in old_channels[0]):
        old_channels[0] = ("Xposition", "Yposition", "Zposition", *old_channels[0])
    new_skel = Skeleton(
        (name, *skel.names),
        np.concatenate([[-1], np.asarray(skel.parents) + 1]),
        np.concatenate([np.zeros((1, 3)), skel.offsets]),
        np.asarray(skel.end_site_parents) + 1,
        skel.end_site_offsets,
        (*channels, *old_channels),
    )
    return motion.with_data(rotations, translations, skeleton=new_skel)
