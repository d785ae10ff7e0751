"""Foot skating: how fast planted feet slide over the ground."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from motionmatch.geometry.polyline import as_points, horizontal
from motionmatch.metrics._common import check_fps

if TYPE_CHECKING:
    from motionmatch.anim.contacts import FootContacts
    from motionmatch.anim.motion import Motion


def foot_skating(foot_positions: ArrayLike, contacts: ArrayLike, fps: float) -> float:
    """Mean horizontal speed (m/s) of the feet while they are planted.

    For every foot ``k`` and every pair of consecutive frames ``(f, f + 1)`` in which the
    foot is in contact in *both* frames, the sliding speed is the horizontal (x, z)
    displacement ``|p[f + 1, k] - p[f, k]|`` times ``fps``. The result is the mean of these
    speeds over all such pairs of all feet (each pair counts once, so a foot that is
    planted longer weighs more). Vertical motion is ignored: lifting a heel is not skating.

    Args:
        foot_positions: ``[F, K, 3]`` world positions of ``K`` foot joints (m).
        contacts: ``[F, K]`` bool, ``True`` where the foot is planted.
        fps: frames per second of the arrays.

    Returns:
        The mean sliding speed in m/s; ``0.0`` when no foot is planted in two consecutive
        frames (nothing can slide).
    """
    p = as_points(foot_positions, "foot_positions", ndim=3)
    c = np.asarray(contacts, dtype=bool)
    if c.shape != p.shape[:2]:
        raise ValueError(f"contacts must have shape {list(p.shape[:2])} ([F, K]) to match foot_positions, "
                         f"got {list(c.shape)}")
    fps = check_fps(fps)
    if p.shape[0] < 2:
        return 0.0
    both = c[1:] & c[:-1]  # [F-1, K]
    if not np.any(both):
        return 0.0
    step = np.linalg.norm(horizontal(p[1:] - p[:-1]), axis=-1)  # [F-1, K], metres per frame
    return float(step[both].mean() * fps)


def foot_skating_motion(motion: Motion, contacts: FootContacts | None = None) -> float:
    """:func:`foot_skating` of a clip's foot joints, in m/s.

    Args:
        motion: the clip.
        contacts: contact labels and the joints they belong to; by default
            :func:`motionmatch.anim.contacts.foot_contacts` of the clip (height and speed
            thresholds, so feet that slide fast are not labelled planted: pass labels from
            the source animation to measure what a runtime did to them).
    """
    if contacts is None:
        from motionmatch.anim.contacts import foot_contacts

        contacts = foot_contacts(motion)
    joints = list(contacts.joints)
    return foot_skating(motion.world_positions[:, joints], contacts.contacts, motion.fps)
