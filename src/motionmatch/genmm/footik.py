"""Contact-aware foot clean-up: plant feet where the contact labels say so (two-bone IK).

For each foot and each run of contact frames, the foot is held at one place (its mean
position over the run, never below the floor it was on); a short smooth blend
(``blend_s``) eases in and out of each run so nothing pops. The leg's two upper joints
(hip and knee for a human) are turned by a two-bone IK to reach the new foot position;
the ankle keeps its world orientation, so a toe moves rigidly with it. The root and every
other joint are untouched.

The IK chain of a foot joint: when the foot joint is a toe or a chain-end helper
(``*_end``, ``*Nub``) its parent is the "ankle"; otherwise the foot joint itself is. The
two joints above the ankle are the ones rotated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionError

_HELPER_WORDS = ("toe", "_end", "end_", "nub", "site")


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of the runs of True in a 1-D bool array."""
    m = np.concatenate([[False], mask.astype(bool), [False]])
    d = np.diff(m.astype(np.int8))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def _smoothstep(x: np.ndarray) -> np.ndarray:
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
    runs = _runs(contact)
    targets = []
    for s, e in runs:
        target = positions[s:e].mean(axis=0)
        target[1] = max(target[1], positions[s:e, 1].min())
        targets.append(target)
        delta[s:e] = target - positions[s:e]
        weight[s:e] = 1.0
    for (s, e), target in zip(runs, targets):
        for k in range(1, blend + 1):
            w = float(_smoothstep(np.array(1.0 - k / (blend + 1))))
            for t in (s - k, e - 1 + k):
                if 0 <= t < F and w > weight[t]:
                    delta[t] = w * (target - positions[t])
                    weight[t] = w
    return delta


def _ik_chain(motion: Motion, foot: int) -> tuple[int, int, int] | None:
    skel = motion.skeleton
    name = skel.names[foot].lower()
    c = int(skel.parents[foot]) if any(w in name for w in _HELPER_WORDS) and skel.parents[foot] > 0 else foot
    b = int(skel.parents[c])
    a = int(skel.parents[b]) if b >= 0 else -1
    if a < 0:
        return None
    return a, b, c


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


def fix_foot_contacts(
    motion: Motion,
    contacts: np.ndarray,
    feet: Sequence[int],
    *,
    blend_s: float = 0.1,
) -> Motion:
    """A copy of ``motion`` with the feet planted during their contacts.

    Args:
        motion: the motion (e.g. a GenMM output).
        contacts: ``[F, K]`` bool contact labels of ``feet`` (e.g. ``GenMMResult.contacts``,
            or :func:`motionmatch.genmm.representation.contact_labels`).
        feet: ``[K]`` foot joint indices.
        blend_s: seconds over which a plant fades in and out.
    """
    contacts = np.asarray(contacts, dtype=bool)
    feet = [int(f) for f in feet]
    if contacts.shape != (motion.num_frames, len(feet)):
        raise MotionError(f"contacts must have shape [{motion.num_frames}, {len(feet)}], got {list(contacts.shape)}")
    out = motion.copy()
    blend = max(0, round(blend_s * motion.fps))
    parents = motion.skeleton.parents
    for k, foot in enumerate(feet):
        if not contacts[:, k].any():
            continue
        chain = _ik_chain(out, foot)
        if chain is None:
            continue
        a, b, c = chain
        wp, wr = out.world_positions, out.world_rotations
        delta = planted_offsets(wp[:, foot], contacts[:, k], blend)
        moving = np.linalg.norm(delta, axis=1) > 1e-9
        if not moving.any():
            continue
        T = wp[:, c] + delta
        new_a, new_b = two_bone_ik(wp[:, a], wp[:, b], wp[:, c], T, wr[:, a], wr[:, b])
        pa = parents[a]
        parent_rot = wr[:, pa] if pa >= 0 else quat.identity((motion.num_frames,))
        rot = out.rotations.copy()
        rot[:, a] = quat.inv_mul(parent_rot, new_a)
        rot[:, b] = quat.inv_mul(new_a, new_b)
        rot[:, c] = quat.inv_mul(new_b, wr[:, c])  # the ankle keeps its world orientation
        rot[~moving] = out.rotations[~moving]
        out = out.with_data(rot, out.translations)
    return out
