"""Edits that bring one rig to another: dropping the joints above the hips (a ground root
that only carries the character) and dropping leaf chains (props, extra toes, end joints).

Both keep the world pose of every joint that stays.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import DEFAULT_ROOT_CHANNELS, POSITION_CHANNELS, Skeleton
from motionmatch.errors import SkeletonError

__all__ = ["drop_joints", "in_joint_order", "rooted_at"]


def _subset(motion: Motion, keep: list[int], rotations: np.ndarray, translations: np.ndarray,
            root_channels: tuple[str, ...] | None = None) -> Motion:
    """The clip on joints ``keep`` in that order (parents first; every kept joint's parent
    kept, but the first, which becomes the root), with their local arrays taken from
    ``rotations`` and ``translations`` (``[F, J, ...]`` of the old joints)."""
    s = motion.skeleton
    new_index = {old: k for k, old in enumerate(keep)}
    parents = np.array([-1] + [new_index[int(s.parents[j])] for j in keep[1:]])
    channels = [s.channels[j] for j in keep]
    if root_channels is not None:
        channels[0] = root_channels
    es_keep = [e for e, p in enumerate(s.end_site_parents) if int(p) in new_index]
    offsets = s.offsets[keep].copy()
    if root_channels is not None:
        offsets[0] = translations[0, keep[0]]
    skel = Skeleton(tuple(s.names[j] for j in keep), parents, offsets,
                    np.array([new_index[int(s.end_site_parents[e])] for e in es_keep], dtype=np.int64),
                    s.end_site_offsets[es_keep].reshape(-1, 3), tuple(channels))
    return motion.with_data(rotations[:, keep], translations[:, keep], skeleton=skel)


def rooted_at(motion: Motion, joint: int | str) -> Motion:
    """The clip with ``joint`` as its root: the joints above it are dropped (with the other
    branches hanging from them), ``joint`` gets its world rotation and position and
    position channels. World poses of ``joint`` and its descendants are unchanged."""
    s = motion.skeleton
    j0 = s.indices([joint])[0]
    if j0 == 0:
        return motion
    keep = [j for j in range(s.num_joints) if s.descends_from(j, j0)]
    rot = motion.rotations.copy()
    tr = motion.translations.copy()
    rot[:, j0] = motion.world_rotations[:, j0]
    tr[:, j0] = motion.world_positions[:, j0]
    ch = s.channels[j0]
    root_ch = ch if any(c in POSITION_CHANNELS for c in ch) else \
        (*POSITION_CHANNELS, *[c for c in ch if c not in POSITION_CHANNELS]) if ch else DEFAULT_ROOT_CHANNELS
    return _subset(motion, keep, rot, tr, root_channels=tuple(root_ch))


def drop_joints(motion: Motion, names: Iterable[str]) -> Motion:
    """The clip without the joints ``names`` and everything below them (leaf chains:
    props, extra toes). The root cannot be dropped."""
    s = motion.skeleton
    drop = set(s.indices(list(names)))
    if 0 in drop:
        raise SkeletonError(f"cannot drop the root joint {s.names[0]!r}")
    keep = [j for j in range(s.num_joints) if not any(s.descends_from(j, d) for d in drop)]
    return _subset(motion, keep, motion.rotations, motion.translations)


def in_joint_order(motion: Motion, names: tuple[str, ...]) -> Motion:
    """The clip with its joints in the order ``names`` (the same joints and hierarchy
    written in another order, as exporters do); nothing else changes."""
    s = motion.skeleton
    if set(names) != set(s.names) or len(names) != s.num_joints:
        raise SkeletonError(f"cannot reorder {motion.name or 'the clip'}: its joints are not {len(names)} joints named so")
    order = s.indices(list(names))
    seen: set[int] = set()
    for j in order:
        if s.parents[j] >= 0 and int(s.parents[j]) not in seen:
            raise SkeletonError(f"cannot reorder {motion.name or 'the clip'}: {s.names[j]!r} would come before its parent")
        seen.add(j)
    return _subset(motion, order, motion.rotations, motion.translations)
