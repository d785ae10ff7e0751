"""Feature extraction: one row of raw (un-normalised) features per frame of a clip."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.humanoid import ROLES, HumanoidError, find_humanoid
from motionmatch.anim.motion import Motion
from motionmatch.anim.root import find_hips
from motionmatch.anim.skeleton import Skeleton
from motionmatch.database.ground import support_heights
from motionmatch.database.schema import FeatureSchema, SchemaError


def resolve_joint(skeleton: Skeleton, role_or_name: str, roles: Mapping[str, str] | None = None) -> int:
    """Joint index for a humanoid role (:data:`motionmatch.anim.humanoid.ROLES`: ``hips``,
    ``left_foot`` (the foot's contact joint), ``head``, ...) or a joint name.

    ``roles`` (a schema's roles map, ``{role: joint name}``) wins over what is found on
    the rig; ``hips`` not named there is :func:`~motionmatch.anim.root.find_hips`.
    """
    roles = dict(roles or {})
    if role_or_name == "hips" and "hips" not in roles:
        return find_hips(skeleton)
    if role_or_name in ROLES:
        try:
            return find_humanoid(skeleton, roles)[role_or_name]
        except HumanoidError as e:
            raise SchemaError(f"cannot resolve {role_or_name!r}: {e}") from None
    return skeleton.index(role_or_name)


def offset_frames(schema: FeatureSchema, fps: float) -> dict[float, int]:
    """Future offsets (s) in frames at ``fps`` (at least one frame)."""
    return {o: max(1, round(o * fps)) for o in schema.trajectory_offsets}


#: Below this root speed (m/s) a body ellipse is oriented by the facing, not the motion.
ELLIPSE_STILL_SPEED = 0.15
#: Smallest semi-axis of a body ellipse (m).
ELLIPSE_MIN_AXIS = 0.05


def body_ellipses(world_positions: np.ndarray, root_pos: np.ndarray, facing: np.ndarray, fps: float,
                  frame_clip: np.ndarray | None = None) -> np.ndarray:
    """The body's ground footprint of every frame as an ellipse (world frame).

    The semi-major axis lies along the direction of motion (the root's displacement over
    +-0.05 s, within the clip), or along the facing when the root moves slower than
    :data:`ELLIPSE_STILL_SPEED`; the semi-minor axis is perpendicular to it. Every joint
    but the root bone (joint 0) is projected onto both axes: each semi-axis is half the
    extent of the projections and the centre is the middle of the extents (a tighter fit
    than centring on the root, which the paper does: LAFAN1's toes would otherwise make a
    side-stepping body 40 cm deep instead of 30). Heights are the lowest and highest joint
    above the root (the ground).

    Args:
        world_positions: ``[F, J, 3]`` joint positions (joint 0 the ground root).
        root_pos: ``[F, 3]`` root positions; facing: ``[F, 3]`` root facings.
        frame_clip: ``[F]`` clip index of each frame (None: one clip), so that directions
            never straddle clips.

    Returns:
        ``[F, 8]``: centre x, z, unit axis x, z, semi-major, semi-minor, lowest and
        highest joint height.
    """
    F = world_positions.shape[0]
    h = max(1, round(0.05 * fps))
    idx = np.arange(F)
    if frame_clip is None:
        lo_lim, hi_lim = np.zeros(F, dtype=np.int64), np.full(F, F - 1)
    else:
        starts = np.r_[0, np.flatnonzero(np.diff(frame_clip)) + 1]
        stops = np.r_[starts[1:], F] - 1
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, F]))
        lo_lim, hi_lim = starts[seg], stops[seg]
    a_i = np.maximum(idx - h, lo_lim)
    b_i = np.minimum(idx + h, hi_lim)
    disp = root_pos[b_i][:, [0, 2]] - root_pos[a_i][:, [0, 2]]
    span = np.maximum(b_i - a_i, 1) / fps
    speed = np.linalg.norm(disp, axis=1) / span
    fac = facing[:, [0, 2]]
    fac = fac / np.maximum(np.linalg.norm(fac, axis=1, keepdims=True), 1e-9)
    moving = speed >= ELLIPSE_STILL_SPEED
    u = np.where(moving[:, None], disp / np.maximum(np.linalg.norm(disp, axis=1, keepdims=True), 1e-9), fac)
    w = np.stack([-u[:, 1], u[:, 0]], axis=1)
    rel = world_positions[:, 1:, :][:, :, [0, 2]] - root_pos[:, None, [0, 2]]
    pu = np.einsum("fjc,fc->fj", rel, u)
    pw = np.einsum("fjc,fc->fj", rel, w)
    cu = 0.5 * (pu.max(axis=1) + pu.min(axis=1))
    cw = 0.5 * (pw.max(axis=1) + pw.min(axis=1))
    a = np.maximum(0.5 * (pu.max(axis=1) - pu.min(axis=1)), ELLIPSE_MIN_AXIS)
    b = np.maximum(0.5 * (pw.max(axis=1) - pw.min(axis=1)), ELLIPSE_MIN_AXIS)
    centre = root_pos[:, [0, 2]] + u * cu[:, None] + w * cw[:, None]
    hy = world_positions[:, 1:, 1] - root_pos[:, None, 1]
    return np.column_stack([centre, u, a, b, hy.min(axis=1), hy.max(axis=1)])


def ellipse_features(track: np.ndarray, root_pos: np.ndarray, root_rot: np.ndarray, future: np.ndarray,
                     vertical: bool) -> np.ndarray:
    """Raw ``ellipse`` features of frames: the ellipses of frames ``future [F, K]`` (from
    ``track``, :func:`body_ellipses`) in the character frame of each frame (``root_pos
    [F, 3]``, ``root_rot [F, 4]``). Returns ``[F, K * (7 if vertical else 5)]``."""
    F, K = future.shape
    per = 7 if vertical else 5
    out = np.empty((F, K, per))
    for k in range(K):
        e = track[future[:, k]]
        c = np.zeros((F, 3))
        c[:, 0], c[:, 2] = e[:, 0] - root_pos[:, 0], e[:, 1] - root_pos[:, 2]
        ax = np.zeros((F, 3))
        ax[:, 0], ax[:, 2] = e[:, 2] * e[:, 4], e[:, 3] * e[:, 4]
        cl = quat.inv_rotate(root_rot, c)
        al = quat.inv_rotate(root_rot, ax)
        out[:, k, 0], out[:, k, 1] = cl[:, 0], cl[:, 2]
        out[:, k, 2], out[:, k, 3] = al[:, 0], al[:, 2]
        out[:, k, 4] = e[:, 5]
        if vertical:
            out[:, k, 5], out[:, k, 6] = e[:, 6], e[:, 7]
    return out.reshape(F, K * per)


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
    roles = schema.roles_map
    hips = resolve_joint(skel, "hips", roles)
    offs = offset_frames(schema, motion.fps)
    out = np.empty((F, schema.dims))
    inv = root_rot[:, None]
    track = ground = None
    for term in schema.terms:
        sl = schema.slice(term.name)
        if term.is_environment:
            if track is None:
                track = body_ellipses(wp, root_pos, facing, motion.fps)
            future = np.stack([np.minimum(np.arange(F) + offs[o], F - 1) for o in term.offsets], axis=1)
            out[:, sl] = ellipse_features(track, root_pos, root_rot, future, term.vertical)
            continue
        if term.kind == "ground_height":
            if ground is None:
                ground = support_heights(motion)
            out[:, sl] = np.stack([ground[np.minimum(np.arange(F) + offs[o], F - 1)] - ground
                                   for o in term.offsets], axis=1)
            continue
        if term.is_bone:
            joints = [resolve_joint(skel, j, roles) for j in term.joints]
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
