"""Feature extraction: one row of raw (un-normalised) features per frame of a clip."""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.contacts import find_feet
from motionmatch.anim.motion import Motion
from motionmatch.anim.root import find_hips, side_of
from motionmatch.anim.skeleton import Skeleton
from motionmatch.database.schema import FeatureSchema, SchemaError


def resolve_joint(skeleton: Skeleton, role_or_name: str) -> int:
    """Joint index for a role (``left_foot``, ``right_foot``, ``hips``) or a joint name."""
    if role_or_name == "hips":
        return find_hips(skeleton)
    if role_or_name in ("left_foot", "right_foot"):
        want = "L" if role_or_name == "left_foot" else "R"
        feet = [j for j in find_feet(skeleton) if side_of(skeleton.names[j]) == want]
        if len(feet) != 1:
            raise SchemaError(
                f"cannot resolve {role_or_name!r}: found {[skeleton.names[j] for j in feet]} on that side; "
                "name the joint explicitly in the schema (joints=('LeftToe', ...))"
            )
        return feet[0]
    return skeleton.index(role_or_name)


def offset_frames(schema: FeatureSchema, fps: float) -> dict[float, int]:
    """Future offsets (s) in frames at ``fps`` (at least one frame)."""
    return {o: max(1, round(o * fps)) for o in schema.trajectory_offsets}


def clip_features(motion: Motion, schema: FeatureSchema) -> tuple[np.ndarray, np.ndarray]:
    """Raw features ``[F, D]`` (float64) and validity ``[F]`` of a clip.

    ``motion`` must carry a canonical root bone as joint 0 (see
    :func:`motionmatch.anim.root.with_root_bone`): on the ground, facing its +Z. A frame
    is valid when every future offset of the schema stays inside the clip.
    """
    skel = motion.skeleton
    F = motion.num_frames
    wp = motion.world_positions
    root_pos = wp[:, 0]
    root_rot = motion.world_rotations[:, 0]
    facing = quat.rotate(root_rot, np.array([0.0, 0.0, 1.0]))
    vel = np.gradient(wp, 1.0 / motion.fps, axis=0) if F > 1 else np.zeros_like(wp)
    hips = find_hips(skel)
    offs = offset_frames(schema, motion.fps)
    out = np.empty((F, schema.dims))
    inv = root_rot[:, None]
    for term in schema.terms:
        sl = schema.slice(term.name)
        if term.is_bone:
            joints = [resolve_joint(skel, j) for j in term.joints]
            if term.kind == "bone_position":
                v = quat.inv_rotate(inv, wp[:, joints] - root_pos[:, None])
            else:
                v = quat.inv_rotate(inv, vel[:, joints])
            out[:, sl] = v.reshape(F, -1)
            continue
        cols = []
        for o in term.offsets:
            idx = np.minimum(np.arange(F) + offs[o], F - 1)
            if term.kind == "trajectory_position":
                local = quat.inv_rotate(root_rot, root_pos[idx] - root_pos)
                extra = wp[idx, hips, 1] - root_pos[idx, 1]
            else:
                local = quat.inv_rotate(root_rot, facing[idx])
                extra = vel[idx, hips, 1]
            cols.append(local[:, 0])
            if term.vertical:
                cols.append(extra)
            cols.append(local[:, 2])
        out[:, sl] = np.stack(cols, axis=1)
    max_off = max(offs.values(), default=0)
    valid = np.arange(F) + max_off <= F - 1
    return out, valid
