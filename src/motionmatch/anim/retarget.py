"""Retargeting: a humanoid's motion played by another humanoid rig ("your character plays
the motion").

:class:`Retargeter` maps motion from a source rig to a target rig (each a
:class:`~motionmatch.anim.retarget_map.Rig`: a skeleton in metres, Y up, in a standing
reference pose; convert units and up axis at the boundary, as the file readers do):

1. **Rotations.** Every matched target joint (:func:`~motionmatch.anim.retarget_map.match_chains`)
   takes its source joint's world rotation relative to the source's reference pose, applied
   to its own reference pose after the swing that takes one rig's bones onto the other's
   (a T pose follows an arms-down pose; a rig whose joint axes or bone rolls differ follows
   it); its bone to the next joint of its chain is then turned onto the source bone's
   current world direction, exactly (the twist stays the source's). Unmatched joints
   (fingers of a rig whose source has none, twist bones, props, a ground root) keep their
   reference pose's local rotation.
2. **Root motion.** The target's hips follow the source's, scaled by the legs' length
   ratio (:func:`~motionmatch.anim.retarget_map.leg_length`) about the source's floor.
3. **Feet.** Foot IK (the two-bone IK of :mod:`motionmatch.anim.leg_ik`) keeps every source
   contact (:func:`~motionmatch.anim.contacts.foot_contacts`) planted: the target's contact
   joint is held at one place over each contact run, easing in and out over ``blend_s``; its
   foot's lowest point (joints and end sites from the ankle down, :func:`lowest_point`) at
   the source's, scaled, while planted, and never under the floor (the source's floor:
   :func:`~motionmatch.anim.grounding.floor_height`).

Independent poses rather than a take (the characters of one viewer tick):
:meth:`Retargeter.poses` (local transforms, steps 1 and 2) and :meth:`Retargeter.world_poses`
(world poses: the retargeting and the target's forward kinematics in one compiled pass, then,
with ``foot_ik``, each pose's feet put where the source pose's stand, all poses in one
compiled call: :mod:`motionmatch.anim.pose_feet`), each pose scaled about its own centre.

The rotations are one compiled pass over frames and joints (Numba), the rest numpy over all
frames at once; one minute at 60 fps onto a 65-joint rig takes about 0.12 s on a 2-core
machine (``benchmarks/bench_retarget.py``; the bar is 0.5 s).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numba
import numpy as np

from motionmatch.anim import quat
from motionmatch.anim._quat_kernels import qmul
from motionmatch.anim.contacts import foot_contacts
from motionmatch.anim.grounding import floor_height
from motionmatch.anim.humanoid import HumanoidRoles, carrier_joints, find_humanoid
from motionmatch.anim.kinematics import forward_kinematics
from motionmatch.anim.leg_ik import plant_weights, planted_offsets, two_bone_ik
from motionmatch.anim.motion import Motion
from motionmatch.anim.pose_feet import foot_chains, plant_pose_feet
from motionmatch.anim.retarget_map import ChainMatch, Rig, facing_frame, match_chains, reference_rig
from motionmatch.anim.root import extract_root
from motionmatch.anim.skeleton import POSITION_CHANNELS, Skeleton
from motionmatch.errors import DataWarning, MotionError

__all__ = ["RetargetSettings", "Retargeter", "Rig", "foot_points", "lowest_point", "reference_rig", "retarget"]


@dataclass(frozen=True)
class RetargetSettings:
    """How a motion is retargeted.

    Attributes:
        foot_ik: plant the target's feet where the source's are planted (and keep them out of the floor).
        blend_s: seconds over which a plant eases in and out.
        contact_height: m over a foot's planted height under which it may be in contact
            (:func:`~motionmatch.anim.contacts.foot_contacts`).
        contact_speed: m/s under which a foot low enough is in contact.
        scale_root: scale the root motion by the legs' length ratio (else copy it).
    """

    foot_ik: bool = True
    blend_s: float = 0.1
    contact_height: float = 0.06
    contact_speed: float = 0.5
    scale_root: bool = True

    def __post_init__(self) -> None:
        for name in ("blend_s", "contact_height", "contact_speed"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"RetargetSettings.{name} must be a number >= 0, got {v!r}")


@numba.njit(cache=True, nogil=True)
def _pose_kernel(qs, ps, source, offset, has_dir, local_bone, start, start_w, end, end_w, row_of, parents, rest,
                 offsets, hips, hips_t, world_out, local, wpos, wrot):  # pragma: no cover
    """The target's poses: a matched joint's world rotation is its source's times the pair's
    offset, its bone turned (shortest arc) onto the source's bone from the point ``start`` to
    the point ``end`` (each a blend of two source joints' positions ``ps [F, Js, 3]``) where
    it has a direction; any other joint keeps its rest local rotation (``rest``, unit).

    Without ``world_out``: the local rotations ``local [F, J, 4]``. With it (no local
    rotations): the world rotations ``wrot [F, J, 4]`` and positions ``wpos [F, J, 3]`` (the
    skeleton's ``offsets``, the joint ``hips`` at ``hips_t [F, 3]`` from its parent): the
    retargeting and the forward kinematics in one pass."""
    F, J = qs.shape[0], parents.shape[0]
    world = np.empty((J, 4))
    q = np.empty(4)
    turn = np.empty(4)
    for f in range(F):
        for j in range(J):
            r = row_of[j]
            p = parents[j]
            if r < 0 and p >= 0:  # unmatched: its rest local rotation (its world one for its children)
                qmul(world[p], rest[j], world[j])
                if not world_out:
                    for k in range(4):
                        local[f, j, k] = rest[j, k]
            elif r >= 0:
                qmul(qs[f, source[r]], offset[r], q)
                if has_dir[r]:
                    v = local_bone[r]  # the bone now: q * v * q^-1
                    tx = 2.0 * (q[2] * v[2] - q[3] * v[1])
                    ty = 2.0 * (q[3] * v[0] - q[1] * v[2])
                    tz = 2.0 * (q[1] * v[1] - q[2] * v[0])
                    ux = v[0] + q[0] * tx + (q[2] * tz - q[3] * ty)
                    uy = v[1] + q[0] * ty + (q[3] * tx - q[1] * tz)
                    uz = v[2] + q[0] * tz + (q[1] * ty - q[2] * tx)
                    a0, a1, b0, b1 = start[r, 0], start[r, 1], end[r, 0], end[r, 1]
                    sw, ew = start_w[r], end_w[r]
                    wx = ((1.0 - ew) * ps[f, b0, 0] + ew * ps[f, b1, 0]) - ((1.0 - sw) * ps[f, a0, 0] + sw * ps[f, a1, 0])
                    wy = ((1.0 - ew) * ps[f, b0, 1] + ew * ps[f, b1, 1]) - ((1.0 - sw) * ps[f, a0, 1] + sw * ps[f, a1, 1])
                    wz = ((1.0 - ew) * ps[f, b0, 2] + ew * ps[f, b1, 2]) - ((1.0 - sw) * ps[f, a0, 2] + sw * ps[f, a1, 2])
                    nu = np.sqrt(ux * ux + uy * uy + uz * uz)
                    nw = np.sqrt(wx * wx + wy * wy + wz * wz)
                    if nu > 1e-12 and nw > 1e-12:
                        ux, uy, uz, wx, wy, wz = ux / nu, uy / nu, uz / nu, wx / nw, wy / nw, wz / nw
                        turn[0] = 1.0 + ux * wx + uy * wy + uz * wz
                        turn[1] = uy * wz - uz * wy
                        turn[2] = uz * wx - ux * wz
                        turn[3] = ux * wy - uy * wx
                        if turn[0] < 1e-9:  # opposite: half a turn about an axis across the bone
                            turn[0], turn[1], turn[2], turn[3] = 0.0, 0.0, -uz, uy
                            if uy * uy + uz * uz < 1e-12:
                                turn[1], turn[2], turn[3] = uz, 0.0, -ux
                        n = np.sqrt(turn[0] ** 2 + turn[1] ** 2 + turn[2] ** 2 + turn[3] ** 2)
                        for k in range(4):
                            turn[k] /= n
                        qmul(turn, q, world[j])
                    else:
                        world[j] = q
                else:
                    world[j] = q
                if not world_out:
                    if p < 0:
                        local[f, j] = world[j]
                    else:
                        q[0], q[1], q[2], q[3] = world[p, 0], -world[p, 1], -world[p, 2], -world[p, 3]
                        qmul(q, world[j], local[f, j])
                    n = np.sqrt(local[f, j, 0] ** 2 + local[f, j, 1] ** 2 + local[f, j, 2] ** 2 + local[f, j, 3] ** 2)
                    for k in range(4):
                        local[f, j, k] /= n
            else:  # an unmatched root
                world[j] = rest[j]
                if not world_out:
                    local[f, j] = rest[j]
            if world_out:
                for k in range(4):
                    wrot[f, j, k] = world[j, k]
                if j == hips:
                    t0, t1, t2 = hips_t[f, 0], hips_t[f, 1], hips_t[f, 2]
                else:
                    t0, t1, t2 = offsets[j, 0], offsets[j, 1], offsets[j, 2]
                if p < 0:
                    wpos[f, j, 0], wpos[f, j, 1], wpos[f, j, 2] = t0, t1, t2
                else:  # the parent's rotation applied to the offset: a * t * a^-1
                    aw, ax, ay, az = world[p, 0], world[p, 1], world[p, 2], world[p, 3]
                    tx = 2.0 * (ay * t2 - az * t1)
                    ty = 2.0 * (az * t0 - ax * t2)
                    tz = 2.0 * (ax * t1 - ay * t0)
                    wpos[f, j, 0] = wpos[f, p, 0] + t0 + aw * tx + (ay * tz - az * ty)
                    wpos[f, j, 1] = wpos[f, p, 1] + t1 + aw * ty + (az * tx - ax * tz)
                    wpos[f, j, 2] = wpos[f, p, 2] + t2 + aw * tz + (ax * ty - ay * tx)


def foot_points(skeleton: Skeleton, ankle: int) -> tuple[list[int], np.ndarray]:
    """The joints of a foot (``ankle`` and every joint below it) and ``[E]`` bool: which
    of the skeleton's end sites hang from them."""
    joints = [j for j in range(ankle, skeleton.num_joints) if skeleton.descends_from(j, ankle)]
    return joints, np.isin(skeleton.end_site_parents, joints)


def lowest_point(motion: Motion, ankle: int) -> np.ndarray:
    """``[F]`` the height (m) of the lowest joint or end site of the foot below ``ankle``
    (:func:`foot_points`) in each frame."""
    s = motion.skeleton
    joints, ends = foot_points(s, ankle)
    low = motion.world_positions[:, joints, 1].min(axis=1)
    if ends.any():
        par = s.end_site_parents[ends]
        es = motion.world_positions[:, par] + quat.rotate(motion.world_rotations[:, par], s.end_site_offsets[ends])
        low = np.minimum(low, es[..., 1].min(axis=1))
    return low


class Retargeter:
    """Motion of one rig played by another (see the module).

    Args:
        source: the rig the motions come on (:func:`~motionmatch.anim.retarget_map.reference_rig`).
        target: the rig that plays them.
        settings: what to do (:class:`RetargetSettings`).
    """

    def __init__(self, source: Rig, target: Rig, settings: RetargetSettings | None = None):
        self.source = source
        self.target = target
        self.settings = settings if settings is not None else RetargetSettings()
        self.match: ChainMatch = match_chains(source, target)
        _say_unmatched(source, target)
        t = target.skeleton
        self._row_of = np.full(t.num_joints, -1, dtype=np.int64)
        self._row_of[self.match.target] = np.arange(len(self.match.target))
        self._skeleton = _with_hips_channels(t, target.roles.hips)
        self._parents = np.ascontiguousarray(t.parents, dtype=np.int64)
        self._offsets = np.ascontiguousarray(t.offsets, dtype=np.float64)
        self._start = np.ascontiguousarray(self.match.start.reshape(-1, 2))  # the source points of the bones
        self._end = np.ascontiguousarray(self.match.end.reshape(-1, 2))
        self._rest_local = np.ascontiguousarray(quat.normalize(np.asarray(target.rotations, dtype=np.float64)))
        # the joints above the hips keep their reference pose: their world transforms once
        pos, rot = target.world()
        self._rest_pos = pos + t.offsets[0]
        self._rest_rot = rot
        # a ground root that only carries the character (a SimulationBone, a BoneRoot) follows it
        self._carries = bool(target.roles.above_hips) and carrier_joints(t) == target.roles.above_hips
        fwd = quat.inv_rotate(facing_frame(pos, target.roles), np.array([0.0, 0.0, 1.0]))
        self._rest_yaw = quat.from_angle_y(np.arctan2(fwd[0], fwd[2]))
        self._feet = foot_chains(source.skeleton, source.roles, t, target.roles)

    @property
    def scale(self) -> float:
        """The legs' length ratio, target over source."""
        return self.match.scale

    @property
    def carries(self) -> bool:
        """The target has a ground root that only carries the character (it follows the
        character's root on the ground: :meth:`poses`' ``root_positions``, ``root_rotations``)."""
        return self._carries

    def __call__(self, motion: Motion) -> Motion:
        """``motion`` (on the source rig's skeleton) on the target rig."""
        s = self.source.skeleton
        if not motion.skeleton.same_topology(s):
            diff = motion.skeleton.first_difference(s, "in the motion", "in the source rig")
            raise MotionError(f"{motion.name or 'motion'}: not on the retargeter's source skeleton ({diff}); "
                              "make a Retargeter for its rig")
        m, st = self.match, self.settings
        qs, ps = motion.world_rotations, motion.world_positions
        # 1. rotations: matched joints follow their source joints, bones turned onto the source's
        local = self._local_rotations(qs, ps)
        # 2. root motion
        floor = floor_height(motion)
        floor = 0.0 if floor is None else floor
        k = m.scale if st.scale_root else 1.0
        hips_pos = ps[:, m.hips[1]] * k
        hips_pos[:, 1] += floor * (1.0 - k)
        out = self._with_hips_at(motion, local, hips_pos)
        if st.foot_ik:
            sr, tr = self.source.roles, self.target.roles
            contacts = foot_contacts(motion, feet=list(sr.contact_joints), height_threshold=st.contact_height,
                                     velocity_threshold=st.contact_speed, ground_height=floor).contacts
            want = np.stack([floor + k * (lowest_point(motion, sr[f"{s}_ankle"]) - floor) for s in ("left", "right")], 1)
            if contacts.any():  # the target's feet where the source's are, on the whole, where they touch the floor
                low = np.stack([lowest_point(out, tr[f"{s}_ankle"]) for s in ("left", "right")], 1)
                hips_pos[:, 1] += float(np.median((want - low)[contacts]))
                out = self._with_hips_at(motion, local, hips_pos)
            out = self._plant_feet(out, contacts, np.maximum(want, floor), floor, motion.fps)
        return out

    def _local_rotations(self, qs: np.ndarray, ps: np.ndarray) -> np.ndarray:
        """The target's local rotations ``[F, J, 4]`` of source world rotations ``qs [F, Js, 4]``
        and positions ``ps [F, Js, 3]`` (the compiled pass, step 1 of the module doc)."""
        m = self.match
        F, J = len(qs), self.target.skeleton.num_joints
        local = np.empty((F, J, 4))
        _pose_kernel(np.ascontiguousarray(qs, dtype=np.float64), np.ascontiguousarray(ps, dtype=np.float64), m.source,
                     m.offset, m.has_direction, m.local_bone, self._start, m.start_w, self._end, m.end_w, self._row_of,
                     self._parents, self._rest_local, self._offsets, -1, np.zeros((F, 3)), False, local,
                     np.empty((0, J, 3)), np.empty((0, J, 4)))
        return local

    def poses(self, world_rotations: np.ndarray, world_positions: np.ndarray, *, floor: float | np.ndarray = 0.0,
              centres: np.ndarray | None = None, root_positions: np.ndarray | None = None,
              root_rotations: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Independent poses of the source on the target, all in one call (the characters of
        a viewer's tick): steps 1 and 2 of the module doc, no foot IK (it needs a take's
        contacts), the floor given rather than found.

        Args:
            world_rotations: ``[F, Js, 4]`` the source poses' world rotations (w, x, y, z).
            world_positions: ``[F, Js, 3]`` their world positions (m).
            floor: the height (m) the hips' height is scaled about (the legs' ratio): one,
                or ``[F]`` one per pose (the ground under each character).
            centres: ``[F, 3]`` the ground points each pose's hips (and a carrying root) are
                scaled about across the ground (a character's root: it stays where it
                is); ``None``: the origin, as :meth:`__call__` scales a take.
            root_positions, root_rotations: ``[F, 3]`` and ``[F, 4]`` each pose's character
                root on the ground and its heading (a rotation about +Y taking +Z to the
                facing): where a target's ground root that carries the character goes
                (``None``: under the hips, facing as the source's root joint).

        Returns:
            ``(rotations [F, J, 4], translations [F, J, 3])``: the target's local transforms
            (its skeleton's offsets where it has no position channels), as :meth:`__call__`
            gives them for a take of these frames with ``foot_ik`` off and its floor at ``floor``.
        """
        qs = np.asarray(world_rotations, dtype=np.float64)
        ps = np.asarray(world_positions, dtype=np.float64)
        self._check_poses(qs, ps)
        local = self._local_rotations(qs, ps)
        hips_pos = self._hips_positions(ps, floor, centres)
        root_pos = root_rot = None
        if self._carries:
            k = self.match.scale if self.settings.scale_root else 1.0
            about = np.zeros((len(ps), 3)) if centres is None else np.asarray(centres, dtype=np.float64).reshape(-1, 3)
            about = np.column_stack([about[:, 0], np.broadcast_to(np.asarray(floor, dtype=np.float64), len(about)),
                                     about[:, 2]])
            if root_positions is None:
                root_positions = np.column_stack([ps[:, 0, 0], np.zeros(len(ps)), ps[:, 0, 2]])
            if root_rotations is None:
                root_rotations = quat.from_angle_y(quat.yaw_angle(qs[:, 0]))
            root_pos = about + k * (np.asarray(root_positions, dtype=np.float64) - about)
            root_rot = np.asarray(root_rotations, dtype=np.float64)
        return self._placed(local, hips_pos, root_pos, root_rot)

    def world_poses(self, world_rotations: np.ndarray, world_positions: np.ndarray, *,
                    floor: float | np.ndarray = 0.0, centres: np.ndarray | None = None,
                    root_positions: np.ndarray | None = None,
                    root_rotations: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`poses` as the target's world positions ``[F, J, 3]`` and rotations
        ``[F, J, 4]`` (what a viewer draws): for a target without a ground root that carries
        the character, retargeting and forward kinematics in one compiled pass. With the
        settings' ``foot_ik``, each pose's feet then stand where the source pose's do (on the
        floor at ``floor``, a planted foot where the source's is: :mod:`motionmatch.anim.pose_feet`)."""
        qs = np.ascontiguousarray(world_rotations, dtype=np.float64)
        ps = np.ascontiguousarray(world_positions, dtype=np.float64)
        if self._carries:
            local, trans = self.poses(qs, ps, floor=floor, centres=centres, root_positions=root_positions,
                                      root_rotations=root_rotations)
            wpos, wrot = forward_kinematics(self._parents, local, trans)
            wpos, wrot = np.ascontiguousarray(wpos), np.ascontiguousarray(wrot)
        else:
            self._check_poses(qs, ps)
            hips_pos = self._hips_positions(ps, floor, centres)
            t = self.target.skeleton
            h = self.match.hips[0]
            if t.parents[h] >= 0:
                p = int(t.parents[h])
                hips_pos = quat.inv_rotate(self._rest_rot[p], hips_pos - self._rest_pos[p])
            m = self.match
            F, J = len(qs), t.num_joints
            wpos, wrot = np.empty((F, J, 3)), np.empty((F, J, 4))
            _pose_kernel(qs, ps, m.source, m.offset, m.has_direction, m.local_bone, self._start, m.start_w, self._end,
                         m.end_w, self._row_of, self._parents, self._rest_local, self._offsets, h,
                         np.ascontiguousarray(hips_pos, dtype=np.float64), True, np.empty((0, J, 4)), wpos, wrot)
        if self.settings.foot_ik:
            fc, st = self._feet, self.settings
            fl = (np.ascontiguousarray(floor, dtype=np.float64) if np.ndim(floor) == 1  # (np.broadcast_to: 10 us)
                  else np.full(len(qs), float(floor)))
            plant_pose_feet(wpos, wrot, ps, qs, fl, self.match.scale if st.scale_root else 1.0, st.contact_height,
                            fc.legs, fc.valid, fc.target_points, fc.target_ends,
                            fc.target_end_offsets, fc.source_points, fc.source_ends, fc.source_end_offsets,
                            fc.source_ankles, fc.below, fc.part, fc.lengths, fc.body)
        return wpos, wrot

    def _check_poses(self, qs: np.ndarray, ps: np.ndarray) -> None:
        J = self.source.skeleton.num_joints
        if qs.ndim != 3 or qs.shape[1:] != (J, 4) or ps.shape != qs.shape[:2] + (3,):
            raise MotionError(f"poses of {J} source joints must be [F, {J}, 4] rotations and [F, {J}, 3] positions, "
                              f"got {list(qs.shape)} and {list(ps.shape)}")

    def _hips_positions(self, ps: np.ndarray, floor, centres) -> np.ndarray:
        """``[F, 3]`` the target's hips in the world: the source's, scaled by the legs' ratio
        about each pose's centre on the ground at ``floor``."""
        k = self.match.scale if self.settings.scale_root else 1.0
        about = np.zeros((len(ps), 3)) if centres is None else np.array(centres, dtype=np.float64).reshape(-1, 3)
        about[:, 1] = floor
        return about + k * (ps[:, self.match.hips[1]] - about)

    def _with_hips_at(self, motion: Motion, local: np.ndarray, hips_pos: np.ndarray) -> Motion:
        """The target motion of local rotations ``local`` with its hips at ``hips_pos [F, 3]``
        in the world (and a ground root that carries the character under them, facing as the
        source's character root)."""
        root_pos = root_rot = None
        if self._carries:
            root = extract_root(motion)
            root_pos = root.positions * (self.match.scale if self.settings.scale_root else 1.0)
            root_rot = root.rotations
        rot, trans = self._placed(local, hips_pos, root_pos, root_rot)
        return Motion(self._skeleton, rot, trans, motion.fps, name=motion.name, source=motion.source,
                      file_scale=motion.file_scale, tags=motion.tags)

    def _placed(self, local: np.ndarray, hips_pos: np.ndarray, root_pos: np.ndarray | None,
                root_rot: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Local rotations and translations of the target with its hips at ``hips_pos [F, 3]``;
        a ground root that carries the character at ``root_pos [F, 3]`` (its height the rest
        pose's), heading ``root_rot [F, 4]``."""
        t = self.target.skeleton
        trans = np.broadcast_to(t.offsets, local.shape[:2] + (3,)).copy()
        h = self.match.hips[0]
        if t.parents[h] < 0:
            trans[:, h] = hips_pos
        elif not self._carries:
            p = int(t.parents[h])
            trans[:, h] = quat.inv_rotate(self._rest_rot[p], hips_pos - self._rest_pos[p])
        else:
            local = local.copy()
            root_pos = np.array(root_pos, dtype=np.float64)
            root_pos[:, 1] = self._rest_pos[0, 1]
            root_rot = quat.mul(quat.mul(root_rot, quat.conjugate(self._rest_yaw)), self._rest_rot[0])
            p = int(t.parents[h])
            rel_rot = quat.inv_mul(self._rest_rot[0], self._rest_rot[p])  # the hips' parent in the root's frame
            rel_pos = quat.inv_rotate(self._rest_rot[0], self._rest_pos[p] - self._rest_pos[0])
            parent_rot = quat.mul(root_rot, rel_rot)
            parent_pos = root_pos + quat.rotate(root_rot, rel_pos)
            local[:, h] = quat.inv_mul(parent_rot, quat.mul(self._rest_rot[p], local[:, h]))
            local[:, 0] = root_rot
            trans[:, 0] = root_pos
            trans[:, h] = quat.inv_rotate(parent_rot, hips_pos - parent_pos)
        return local, trans

    def _plant_feet(self, out: Motion, contacts: np.ndarray, want: np.ndarray, floor: float, fps: float) -> Motion:
        """Foot IK: each foot's contact joint held over its contact runs (``contacts [F, 2]``),
        its lowest point at ``want [F, 2]`` while planted and never under ``floor``."""
        tr = self.target.roles
        blend = max(0, round(self.settings.blend_s * fps))
        t = out.skeleton
        wp, wr = out.world_positions, out.world_rotations
        rot = out.rotations.copy()
        for i, side in enumerate(("left", "right")):
            a, b, c = tr[f"{side}_upper_leg"], tr[f"{side}_lower_leg"], tr[f"{side}_ankle"]
            if t.parents[b] != a or t.parents[c] != b:
                continue  # a leg with joints between its hip, knee and ankle: no two-bone chain
            contact = contacts[:, i]
            want_low = want[:, i]
            low = lowest_point(out, c)
            w = plant_weights(contact, blend)
            delta = planted_offsets(wp[:, tr[f"{side}_foot"]], contact, blend) if contact.any() else np.zeros((len(w), 3))
            delta[:, 1] = w * (want_low - low)
            delta[:, 1] = np.maximum(delta[:, 1], floor - low)  # never under the floor
            moving = np.linalg.norm(delta, axis=1) > 1e-9
            if not moving.any():
                continue
            target = wp[:, c] + delta
            new_a, new_b = two_bone_ik(wp[:, a], wp[:, b], wp[:, c], target, wr[:, a], wr[:, b])
            reach = np.linalg.norm(wp[:, b] - wp[:, a], axis=1) + np.linalg.norm(wp[:, c] - wp[:, b], axis=1)
            short = np.linalg.norm(target - wp[:, a], axis=1) - reach  # > 0: the leg cannot get there
            missed = contact & (short > UNREACHED_M)
            if missed.sum() > UNREACHED_SHARE * max(int(contact.sum()), 1):
                warnings.warn(f"{out.name or 'motion'}: the rig's {side} leg cannot reach the floor where the source's "
                              f"foot is planted in {100 * missed.sum() / contact.sum():.0f}% of its contact frames (by up "
                              f"to {100 * short[missed].max():.0f} cm): the foot floats there; check the rig's and the "
                              "take's units", DataWarning, stacklevel=3)
            pa = int(t.parents[a])
            rot[moving, a] = quat.inv_mul(wr[moving, pa], new_a[moving])
            rot[moving, b] = quat.inv_mul(new_a[moving], new_b[moving])
            rot[moving, c] = quat.inv_mul(new_b[moving], wr[moving, c])  # the ankle keeps its world rotation
        return out.with_data(rot, out.translations)


#: A planted foot the leg misses by more than this (m) in more than this share of its contact
#: frames is warned about.
UNREACHED_M = 0.02
UNREACHED_SHARE = 0.05

#: Roles whose absence on one rig leaves a visible part of the other unanimated.
_VISIBLE = ("head", "left_upper_arm", "left_lower_arm", "left_hand", "right_upper_arm", "right_lower_arm",
            "right_hand")


def _say_unmatched(source: Rig, target: Rig) -> None:
    """One warning line per rig that lacks a head, arm or hand the other has."""
    def rig(r: Rig) -> str:
        return f"{r.skeleton.num_joints} joints, root {r.skeleton.names[0]!r}"

    lost = [r for r in _VISIBLE if r in source.roles and r not in target.roles]
    if lost:
        warnings.warn(f"the target rig ({rig(target)}) has no {', '.join(lost)} found: the source's do not play "
                      'on it; name its joints in a roles map (--rig-roles MAP.json: {"left_upper_arm": "JointName", '
                      "...})", DataWarning, stacklevel=3)
    still = [r for r in _VISIBLE if r in target.roles and r not in source.roles]
    if still:
        warnings.warn(f"the source ({rig(source)}) has no {', '.join(still)} found: the target's keep the rig's "
                      "pose; name the source's joints in a roles map (--roles MAP.json)", DataWarning, stacklevel=3)


def _with_hips_channels(skeleton: Skeleton, hips: int) -> Skeleton:
    """``skeleton`` with position channels on its hips (the root motion's joint) when they are missing."""
    if skeleton.has_position_channels[hips]:
        return skeleton
    ch = list(skeleton.channels)
    ch[hips] = POSITION_CHANNELS + tuple(c for c in ch[hips] if c not in POSITION_CHANNELS)
    return Skeleton(skeleton.names, skeleton.parents, skeleton.offsets, skeleton.end_site_parents,
                    skeleton.end_site_offsets, tuple(ch))


def retarget(motion: Motion, target: Skeleton | Rig, *, source_roles: HumanoidRoles | None = None,
             target_roles: HumanoidRoles | None = None, settings: RetargetSettings | None = None) -> Motion:
    """``motion`` played by ``target`` (a skeleton whose rest pose stands, or a
    :class:`~motionmatch.anim.retarget_map.Rig`); the source's reference pose is its rest
    pose when it stands, else its most upright frame. Roles default to
    :func:`~motionmatch.anim.humanoid.find_humanoid`'s."""
    src = reference_rig(motion, source_roles if source_roles is not None else find_humanoid(motion.skeleton))
    tgt = target if isinstance(target, Rig) else reference_rig(target, target_roles)
    return Retargeter(src, tgt, settings)(motion)
