"""Planting feet with two-bone IK, vectorised over frames (numpy): the pieces foot clean-ups
and retargeting share.

:func:`two_bone_ik` turns a leg's two upper joints (hip and knee) so that its ankle reaches a
target in every frame at once; :func:`planted_offsets` gives the per-frame displacement that
holds a foot still over each run of contact frames, easing in and out. The runtime's per-row
compiled IK (``runtime/_kernels.py``) is the same construction for one pose.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import distance_transform_edt

from motionmatch.anim import quat

__all__ = ["contact_runs", "plant_weights", "planted_offsets", "smoothstep", "two_bone_ik"]


def contact_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of the runs of True in a 1-D bool array."""
    m = np.concatenate([[False], mask.astype(bool), [False]])
    d = np.diff(m.astype(np.int8))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def planted_offsets(positions: np.ndarray, contact: np.ndarray, blend: int) -> np.ndarray:
    """``[F, 3]`` offsets that hold a foot still over each contact run (at the run's mean
    position, not below its lowest point) and ease in and out over ``blend`` frames either
    side: there the foot moves the fraction ``w`` (a smoothstep from 1 to 0) of the way from
    its own position to the plant; where two fades overlap the stronger one wins."""
    F = positions.shape[0]
    delta = np.zeros((F, 3))
    weight = np.zeros(F)
    runs = contact_runs(contact)
    targets = []
    for s, e in runs:
        target = positions[s:e].mean(axis=0)
        target[1] = max(target[1], positions[s:e, 1].min())
        targets.append(target)
        delta[s:e] = target - positions[s:e]
        weight[s:e] = 1.0
    for (s, e), target in zip(runs, targets):
        for k in range(1, blend + 1):
            w = float(smoothstep(np.array(1.0 - k / (blend + 1))))
            for t in (s - k, e - 1 + k):
                if 0 <= t < F and w > weight[t]:
                    delta[t] = w * (target - positions[t])
                    weight[t] = w
    return delta


def two_bone_ik(A, B, C, T, qa_world, qb_world):
    """Vectorised two-bone IK: new world rotations ``[F, 4]`` of joints ``a`` and ``b`` so that
    the chain end ``C`` reaches ``T`` (all ``[F, 3]``), knee kept in its current bending plane;
    unreachable targets are approached with the leg straight."""
    eps = 1e-9
    lab = np.linalg.norm(B - A, axis=1)
    lbc = np.linalg.norm(C - B, axis=1)
    to_t = T - A
    dist = np.linalg.norm(to_t, axis=1)
    ok = (lab > 1e-6) & (lbc > 1e-6) & (dist > 1e-6)
    d = np.clip(dist, np.abs(lab - lbc) + 1e-6, lab + lbc - 1e-6)
    u = to_t / np.maximum(dist, eps)[:, None]
    ab = B - A
    pole = ab - np.sum(ab * u, axis=1, keepdims=True) * u
    npole = np.linalg.norm(pole, axis=1)
    # A straight leg has no bending plane: bend it the way the knee currently points
    # relative to the chain end instead.
    ok &= npole > 1e-7
    w = pole / np.maximum(npole, eps)[:, None]
    x = (lab**2 - lbc**2 + d**2) / (2.0 * np.maximum(d, eps))
    h = np.sqrt(np.maximum(lab**2 - x**2, 0.0))
    knee = A + x[:, None] * u + h[:, None] * w
    end = A + d[:, None] * u
    ra = quat.between(ab, knee - A)
    new_a = quat.mul(ra, qa_world)
    c_moved = A + quat.rotate(ra, C - A)
    rb = quat.between(c_moved - knee, end - knee)
    new_b = quat.mul(rb, quat.mul(ra, qb_world))
    new_a[~ok] = qa_world[~ok]
    new_b[~ok] = qb_world[~ok]
    return new_a, new_b


def plant_weights(contact: np.ndarray, blend: int) -> np.ndarray:
    """``[F]`` how much of each frame a foot is held: 1 in its contact runs, easing to 0
    over ``blend`` frames either side (the weights :func:`planted_offsets` applies)."""
    contact = np.asarray(contact, dtype=bool)
    if not contact.any():
        return np.zeros(contact.shape[0])
    d = distance_transform_edt(~contact)
    return np.where(d <= blend, smoothstep(1.0 - d / (blend + 1)), 0.0)
