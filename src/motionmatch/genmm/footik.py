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
from motionmatch.anim.leg_ik import planted_offsets, two_bone_ik
from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionError

_HELPER_WORDS = ("toe", "_end", "end_", "nub", "site")


def _ik_chain(motion: Motion, foot: int) -> tuple[int, int, int] | None:
    skel = motion.skeleton
    name = skel.names[foot].lower()
    c = int(skel.parents[foot]) if any(w in name for w in _HELPER_WORDS) and skel.parents[foot] > 0 else foot
    b = int(skel.parents[c])
    a = int(skel.parents[b]) if b >= 0 else -1
    if a < 0:
        return None
    return a, b, c


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
