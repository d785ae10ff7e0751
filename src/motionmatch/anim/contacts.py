"""Foot contacts: which feet touch the ground in each frame."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import median_filter

from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import SkeletonError

_FOOT_WORDS = ("toe", "foot", "ankle", "heel", "paw", "hoof")
_NOT_FOOT = ("end", "site", "nub", "thumb")


def find_feet(skeleton: Skeleton) -> list[int]:
    """Foot joints: a humanoid's two contact joints (its toes, or its ankles where it has
    no toes: :func:`~motionmatch.anim.humanoid.find_humanoid`); on other skeletons, for
    each leg chain the deepest joint named toe/foot/ankle/heel/paw/hoof (``LeftToe`` over
    ``LeftFoot``), skipping end-of-chain helper joints.

    Returns joint indices sorted by index. Raises ``SkeletonError`` when none is found
    (pass ``feet=[...]`` explicitly then).
    """
    try:
        return sorted(find_humanoid(skeleton).contact_joints)
    except HumanoidError:
        pass
    cands = skeleton.find(*_FOOT_WORDS, exclude=_NOT_FOOT)
    if not cands:
        # Try including "_End" joints (e.g. a skeleton whose only foot joints are ends).
        cands = skeleton.find(*_FOOT_WORDS)
    if not cands:
        raise SkeletonError(
            "no foot joints found from names (looked for toe/foot/ankle/heel/paw/hoof); "
            f"pass feet=[...] explicitly. Joints: {', '.join(skeleton.names)}"
        )
    cset = set(cands)
    feet = []
    for j in cands:
        # Keep j only if no descendant is also a candidate (the deepest foot joint per leg).
        k = j
        has_desc = False
        for d in range(j + 1, skeleton.num_joints):
            p = d
            while p > k:
                p = skeleton.parents[p]
            if p == k and d in cset:
                has_desc = True
                break
        if not has_desc:
            feet.append(j)
    return sorted(feet)


@dataclass(frozen=True)
class FootContacts:
    """Contact labels.

    Attributes:
        joints: indices of the foot joints, ``[K]``.
        contacts: ``[F, K]`` bool, ``True`` where the foot is planted.
    """

    joints: tuple[int, ...]
    contacts: np.ndarray

    def fraction(self) -> float:
        """Share of (frame, foot) pairs in contact."""
        return float(self.contacts.mean()) if self.contacts.size else 0.0


def foot_contacts(
    motion: Motion,
    feet: Sequence[int | str] | None = None,
    *,
    height_threshold: float = 0.06,
    velocity_threshold: float = 0.5,
    filter_s: float = 0.05,
    ground_height: float | np.ndarray | None = None,
) -> FootContacts:
    """Label foot contacts by height and speed thresholds, median filtered.

    A foot is in contact when its height above the ground is under
    ``rest_height + height_threshold`` (m) and its speed under ``velocity_threshold``
    (m/s). ``rest_height`` is the foot's height when planted, estimated per foot as the
    5th percentile of its height over the clip (clipped to [0, 0.2] m), so ankles and toes
    work alike. The labels are then median-filtered over ``filter_s`` seconds (an odd number of frames,
    3 at 30 and 60 fps), short enough to keep a sprint's ~0.1 s stance.

    Args:
        motion: the clip.
        feet: joint names or indices (default: :func:`find_feet`).
        ground_height: the floor's height (m); default 0. Or ``[F, K]``: the ground's
            height under each foot in each frame (a terrain).
    """
    skel = motion.skeleton
    idx = find_feet(skel) if feet is None else skel.indices(feet)
    wp = motion.world_positions[:, idx]
    ground = 0.0 if ground_height is None else ground_height
    height = wp[..., 1] - ground
    rest = np.clip(np.percentile(height, 5, axis=0), 0.0, 0.2)
    vel = np.gradient(wp, 1.0 / motion.fps, axis=0) if motion.num_frames > 1 else np.zeros_like(wp)
    speed = np.linalg.norm(vel, axis=-1)
    c = (height < rest + height_threshold) & (speed < velocity_threshold)
    size = round(filter_s * motion.fps) | 1
    if size > 1 and motion.num_frames >= size:
        c = median_filter(c.astype(np.uint8), size=(size, 1), mode="nearest").astype(bool)
    return FootContacts(tuple(idx), c)
