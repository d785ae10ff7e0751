"""Sanity checks on output animation: broken frames and falling over."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from motionmatch.geometry.polyline import as_points

if TYPE_CHECKING:
    from motionmatch.anim.motion import Motion

_NOT_HEAD = ("end", "site", "nub", "top")


def count_nan_frames(motion_or_array: Motion | ArrayLike) -> int:
    """Number of frames holding any NaN or infinite value.

    Args:
        motion_or_array: a ``Motion`` (its local rotations, translations and world joint
            positions are checked) or an array ``[F, ...]`` (frame-major).
    """
    if hasattr(motion_or_array, "world_positions") and hasattr(motion_or_array, "rotations"):
        m = motion_or_array
        bad = np.zeros(m.num_frames, dtype=bool)
        for arr in (m.rotations, m.translations, m.world_positions):
            bad |= ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
        return int(bad.sum())
    a = np.asarray(motion_or_array, dtype=np.float64)
    if a.ndim == 0:
        return int(not np.isfinite(a))
    return int((~np.isfinite(a.reshape(a.shape[0], -1))).any(axis=1).sum())


def upright_fraction_positions(head_positions: ArrayLike, hips_positions: ArrayLike, margin: float = 0.0) -> float:
    """Share of frames (0..1) in which the head is higher than the hips.

    Args:
        head_positions: ``[F, 3]`` head positions (m).
        hips_positions: ``[F, 3]`` hips (pelvis) positions (m).
        margin: how much higher (m) the head must be to count.
    """
    head = as_points(head_positions, "head_positions", ndim=2)
    hips = as_points(hips_positions, "hips_positions", ndim=2)
    if head.shape != hips.shape:
        raise ValueError(f"head {list(head.shape)} and hips {list(hips.shape)} positions must have the same shape")
    if head.shape[0] == 0:
        raise ValueError("upright_fraction needs at least one frame")
    return float(np.mean(head[:, 1] > hips[:, 1] + margin))


def find_head(skeleton) -> int:
    """The head joint from names: the shallowest joint named ``head`` (not an end/top
    helper), else the shallowest named ``neck``."""
    from motionmatch.errors import SkeletonError

    depth = skeleton.depth()
    for words, exclude in ((("head",), _NOT_HEAD), (("head",), ()), (("neck",), _NOT_HEAD)):
        cands = skeleton.find(*words, exclude=exclude)
        if cands:
            return min(cands, key=lambda j: (depth[j], j))
    raise SkeletonError(f"no head joint found from names (looked for head/neck); pass head=... explicitly. "
                        f"Joints: {', '.join(skeleton.names)}")


def upright_fraction(
    motion: Motion, *, head: int | str | None = None, hips: int | str | None = None, margin: float = 0.0
) -> float:
    """Share of a clip's frames (0..1) in which the head is above the hips.

    Args:
        motion: the clip.
        head: the head joint (name or index); by default found from names (``Head``, else
            ``Neck``), see :func:`find_head`.
        hips: the pelvis joint; by default :func:`motionmatch.anim.root.find_hips`
            (``Hips``/``Pelvis``).
        margin: how much higher (m) the head must be to count.
    """
    from motionmatch.anim.root import find_hips

    skel = motion.skeleton
    h = find_head(skel) if head is None else skel.indices([head])[0]
    p = find_hips(skel) if hips is None else skel.indices([hips])[0]
    wp = motion.world_positions
    return upright_fraction_positions(wp[:, h], wp[:, p], margin)
