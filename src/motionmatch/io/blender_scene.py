"""Motions in Blender: armatures, actions and skinned meshes from motionmatch data, and back.

Runs where Blender's Python module ``bpy`` imports (inside Blender, or ``pip install
'motionmatch[blender]'``); used by the FBX writer (:mod:`motionmatch.io.fbx`) and the
Blender add-on (:mod:`motionmatch.blender`).

Axes: motionmatch is Y up, Blender Z up; a point ``(x, y, z)`` becomes ``(x, -z, y)`` in
Blender (the convention of Blender's glTF and FBX importers), and the vector part of a
quaternion turns the same way. Lengths stay metres (one Blender unit).

Bones: :func:`new_armature` makes one bone per joint, its head at the joint's rest
position and its tail towards its children (any roll). A pose bone's keys are relative to
its rest bone, so :func:`write_action` turns motionmatch's world transforms into each
bone's basis: for bone ``j`` with parent ``p``, rest orientations ``Rr`` and rest heads ``h``
(armature space), and posed rotations ``mq`` and positions ``m`` (armature space, joint
rotation times rest orientation)::

    rotation = Rr_j^-1 Rr_p mq_p^-1 mq_j
    location = Rr_j^-1 (Rr_p mq_p^-1 (m_j - m_p) - (h_j - h_p))

which is Blender's ``pose_j = pose_p (rest_p^-1 rest_j) basis_j`` solved for the basis, so
any armature (ours, or one from Blender's BVH/FBX importers) gets the exact joint
positions. :func:`read_motion` is the inverse: it evaluates an armature's action frame by
frame and returns a :class:`~motionmatch.anim.motion.Motion`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import MotionMatchError
from motionmatch.io.preview import MissingDependencyError

__all__ = [
    "build_character",
    "from_blender",
    "moving_joints",
    "new_armature",
    "new_skinned_mesh",
    "quat_from_blender",
    "quat_to_blender",
    "read_motion",
    "require_bpy",
    "set_scene_fps",
    "to_blender",
    "write_action",
]

MIN_BONE_LENGTH = 0.02  # m; Blender deletes zero-length bones
_LINEAR = 1  # the value of 'LINEAR' among Blender's keyframe interpolations (CONSTANT, LINEAR, BEZIER, ...)


def require_bpy() -> ModuleType:
    """Blender's ``bpy`` module, or a one-line :class:`MissingDependencyError` naming the extra."""
    try:
        return importlib.import_module("bpy")
    except ImportError as e:
        raise MissingDependencyError(
            "this needs Blender's Python module 'bpy', which is not installed here; install it with "
            "`pip install 'motionmatch[blender]'` (Python 3.11), or set MOTIONMATCH_BLENDER_PYTHON to a "
            "Python that has it"
        ) from e


# ------------------------------------------------------------------------ axes
def to_blender(v: np.ndarray) -> np.ndarray:
    """Points/vectors ``[..., 3]`` from motionmatch (Y up) to Blender (Z up): ``(x, -z, y)``."""
    v = np.asarray(v, dtype=np.float64)
    return np.stack([v[..., 0], -v[..., 2], v[..., 1]], axis=-1)


def from_blender(v: np.ndarray) -> np.ndarray:
    """Points/vectors ``[..., 3]`` from Blender (Z up) to motionmatch (Y up): ``(x, z, -y)``."""
    v = np.asarray(v, dtype=np.float64)
    return np.stack([v[..., 0], v[..., 2], -v[..., 1]], axis=-1)


def quat_to_blender(q: np.ndarray) -> np.ndarray:
    """Rotations ``[..., 4]`` (w, x, y, z) from motionmatch's axes to Blender's."""
    q = np.asarray(q, dtype=np.float64)
    return np.stack([q[..., 0], q[..., 1], -q[..., 3], q[..., 2]], axis=-1)


def quat_from_blender(q: np.ndarray) -> np.ndarray:
    """Rotations ``[..., 4]`` (w, x, y, z) from Blender's axes to motionmatch's."""
    q = np.asarray(q, dtype=np.float64)
    return np.stack([q[..., 0], q[..., 1], q[..., 3], -q[..., 2]], axis=-1)


# ------------------------------------------------------------------- the scene
def set_scene_fps(scene: Any, fps: float) -> None:
    """Set ``scene``'s frame rate to ``fps`` (integer rate and a base for fractional ones)."""
    rate = max(1, round(fps))
    scene.render.fps = rate
    scene.render.fps_base = rate / fps


def _collection(collection: Any) -> Any:
    bpy = require_bpy()
    return collection if collection is not None else bpy.context.scene.collection


def _rest_positions(skeleton: Skeleton) -> np.ndarray:
    """``[J, 3]`` joint positions in the rest pose (every joint unrotated), motionmatch axes."""
    pos = np.zeros((skeleton.num_joints, 3))
    for j in range(skeleton.num_joints):
        p = skeleton.parents[j]
        pos[j] = skeleton.offsets[j] + (pos[p] if p >= 0 else 0.0)
    return pos


def _bone_tails(skeleton: Skeleton, heads: np.ndarray, end_sites: np.ndarray,
                moving: np.ndarray | None = None) -> np.ndarray:
    """``[J, 3]`` bone tails: towards the mean of the children (or the end site), else along the
    parent bone, at least :data:`MIN_BONE_LENGTH` long (motionmatch axes).

    ``moving [J]`` (bool) marks joints whose location is animated: no bone points at such a
    child (see :func:`_keep_off_moving_children`), or Blender's FBX importer connects the
    child to it and drops the child's location keys."""
    J = skeleton.num_joints
    direction = np.zeros((J, 3))
    for j in range(J):
        kids = skeleton.children(j)
        ends = np.flatnonzero(skeleton.end_site_parents == j)
        if kids:
            direction[j] = np.mean(heads[kids] - heads[j], axis=0)
        elif len(ends):
            direction[j] = np.mean(end_sites[ends], axis=0)
    for j in range(J):  # leaves without an end site continue their parent's direction
        if np.linalg.norm(direction[j]) < 1e-6:
            p = skeleton.parents[j]
            d = direction[p] if p >= 0 else np.zeros(3)
            direction[j] = 0.5 * d if np.linalg.norm(d) > 1e-6 else np.array([0.0, 0.1, 0.0])
    if moving is not None:
        _keep_off_moving_children(skeleton, heads, direction, np.asarray(moving, dtype=bool))
    length = np.linalg.norm(direction, axis=1, keepdims=True)
    direction = np.where(length < MIN_BONE_LENGTH, direction / np.maximum(length, 1e-9) * MIN_BONE_LENGTH, direction)
    return heads + direction


def _fbx_connects(heads: np.ndarray, j: int, kids: list[int], moving_kids: list[int], direction: np.ndarray) -> bool:
    """Whether Blender's FBX importer would connect one of ``moving_kids`` to bone ``j`` if
    the bone pointed along ``direction [3]``: the importer makes each bone's tail its head
    plus its axis times the mean distance to its child bones (at least 1 cm) and connects a
    child whose head is at that tail (``io_scene_fbx/import_fbx.py``,
    ``FbxImportHelperNode.build_skeleton``, ``child_connect``)."""
    norm = float(np.linalg.norm(direction))
    if norm < 1e-9:
        return True
    reach = max(0.01, float(np.mean(np.linalg.norm(heads[kids] - heads[j], axis=1))))
    tail = heads[j] + direction / norm * reach
    gap = float(np.linalg.norm(heads[moving_kids] - tail, axis=1).min())
    return gap < 1e-3 * reach


def _keep_off_moving_children(skeleton: Skeleton, heads: np.ndarray, direction: np.ndarray,
                              moving: np.ndarray) -> None:
    """Turn (in place) each bone of ``direction [J, 3]`` that Blender's FBX importer would
    connect to a child whose location is animated (:func:`_fbx_connects`).

    A connected bone's location is ignored, so e.g. LAFAN1's ``Hips`` (an animated offset
    from ``SimulationBone``) came back centimetres off. Such a bone points at the mean of
    its other children instead, else along the first of forward, side and up (motionmatch's
    +Z, +X, +Y) that is well off its moving children, as long as the distance to them."""
    for j in range(skeleton.num_joints):
        kids = skeleton.children(j)
        moving_kids = [c for c in kids if moving[c]]
        if not moving_kids or not _fbx_connects(heads, j, kids, moving_kids, direction[j]):
            continue
        fixed = [c for c in kids if not moving[c]]
        off = np.mean(heads[moving_kids] - heads[j], axis=0)
        size = max(float(np.linalg.norm(off)), MIN_BONE_LENGTH)
        candidates = [np.mean(heads[fixed] - heads[j], axis=0)] if fixed else []
        candidates += [axis * size for axis in np.eye(3)[[2, 0, 1]] if abs(axis @ off) < 0.5 * size]
        for d in candidates:
            if not _fbx_connects(heads, j, kids, moving_kids, d):
                direction[j] = d
                break


def new_armature(skeleton: Skeleton, name: str, *, bind: Any = None, collection: Any = None,
                 moving: np.ndarray | None = None) -> Any:
    """A new armature object with one bone per joint of ``skeleton`` (named after the joints),
    linked into ``collection`` (default the scene's). Its rest pose is the skeleton's rest
    pose, or ``bind``'s pose (an object with ``bind_positions [J, 3]`` and ``bind_rotations
    [J, 4]``, joint world transforms, e.g. a :class:`~motionmatch.anim.mannequin.Mannequin`)
    so that a mesh made in that pose is skinned as it was made. ``moving [J]`` (bool) marks
    joints whose location is animated (e.g. :func:`moving_joints`): no bone's tail points at
    such a child, so that Blender's FBX importer does not connect it (and drop its location
    keys) when the armature is exported and imported again. Leaves object mode."""
    bpy = require_bpy()
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    _collection(collection).objects.link(obj)
    if bind is None:
        heads = _rest_positions(skeleton)
        tails = _bone_tails(skeleton, heads, skeleton.end_site_offsets, moving)
    else:
        heads = np.asarray(bind.bind_positions, dtype=np.float64)
        ends = quat.rotate(np.asarray(bind.bind_rotations)[skeleton.end_site_parents], skeleton.end_site_offsets)
        tails = _bone_tails(skeleton, heads, ends, moving)
    hb, tb = to_blender(heads), to_blender(tails)
    view_layer = bpy.context.view_layer
    previous = view_layer.objects.active
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        bones = []
        for j, joint in enumerate(skeleton.names):
            b = data.edit_bones.new(joint)
            b.head, b.tail, b.roll = hb[j].tolist(), tb[j].tolist(), 0.0
            if skeleton.parents[j] >= 0:
                b.parent = bones[skeleton.parents[j]]
            bones.append(b)
        names = [b.name for b in bones]
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        view_layer.objects.active = previous if previous is not None else obj
    renamed = [(a, b) for a, b in zip(skeleton.names, names) if a != b]
    if renamed:
        raise MotionMatchError(f"Blender renamed joint {renamed[0][0]!r} to {renamed[0][1]!r} (bone names are at "
                               "most 63 bytes and unique); rename the joint")
    for pb in obj.pose.bones:
        pb.rotation_mode = "QUATERNION"
    return obj


def new_skinned_mesh(armature: Any, mesh: Any, name: str, *, collection: Any = None) -> Any:
    """A mesh object deformed by ``armature``: ``mesh`` has ``vertices [V, 3]``,
    ``triangles [T, 3]``, ``joints [V, 4]`` (indices into the armature's joints, in the
    skeleton's order) and ``weights [V, 4]``, in the rest pose, motionmatch axes (e.g. a
    :class:`motionmatch.anim.mannequin.Mannequin`)."""
    bpy = require_bpy()
    verts = to_blender(np.asarray(mesh.vertices, dtype=np.float64))
    tris = np.asarray(mesh.triangles, dtype=np.int64)
    joints = np.asarray(mesh.joints, dtype=np.int64)
    weights = np.asarray(mesh.weights, dtype=np.float64)
    me = bpy.data.meshes.new(name)
    me.vertices.add(len(verts))
    me.vertices.foreach_set("co", verts.astype(np.float32).ravel())
    me.loops.add(tris.size)
    me.loops.foreach_set("vertex_index", tris.astype(np.int32).ravel())
    me.polygons.add(len(tris))
    me.polygons.foreach_set("loop_start", np.arange(0, tris.size, 3, dtype=np.int32))
    me.polygons.foreach_set("use_smooth", np.ones(len(tris), dtype=bool))
    me.update()
    me.validate()
    obj = bpy.data.objects.new(name, me)
    _collection(collection).objects.link(obj)
    obj.parent = armature
    mod = obj.modifiers.new("Armature", "ARMATURE")
    mod.object = armature
    bone_names = [b.name for b in _ordered_bones(armature)]
    groups = [obj.vertex_groups.new(name=n) for n in bone_names]
    for v, (js, ws) in enumerate(zip(joints.tolist(), weights.tolist())):
        for j, w in zip(js, ws):
            if w > 0.0:
                groups[j].add([v], w, "ADD")
    return obj


def moving_joints(motion: Motion, tolerance: float = 1e-5) -> np.ndarray:
    """``[J]`` bool: the joints (besides the root) whose translation from their parent leaves
    their rest offset by more than ``tolerance`` metres in some frame (an animated location,
    e.g. LAFAN1's ``Hips`` under ``SimulationBone``)."""
    drift = np.abs(motion.translations - motion.skeleton.offsets).max(axis=(0, 2))
    out = drift > tolerance
    out[0] = False
    return out


def build_character(motion: Motion, *, mesh: Any = None, name: str | None = None, start: int = 0,
                    collection: Any = None) -> tuple[Any, Any]:
    """An armature playing ``motion`` (a new action, keys at frames ``start + i``) and, when
    ``mesh`` is given, its skinned mesh (the armature's rest pose is then the mesh's bind
    pose, when it has one). Returns ``(armature object, mesh object or None)``."""
    name = name or motion.name or "character"
    bind = mesh if mesh is not None and hasattr(mesh, "bind_rotations") else None
    arm = new_armature(motion.skeleton, name, bind=bind, collection=collection, moving=moving_joints(motion))
    write_action(arm, motion, name=f"{name}_action", start=start,
                 bind_rotations=None if bind is None else bind.bind_rotations)
    body = new_skinned_mesh(arm, mesh, f"{name}_body", collection=collection) if mesh is not None else None
    return arm, body


# --------------------------------------------------------- bones and transforms
def _ordered_bones(obj: Any) -> list[Any]:
    """The armature's bones, parents before children, in the armature's order otherwise."""
    bones = list(obj.data.bones)
    roots = [b for b in bones if b.parent is None]
    if len(roots) != 1:
        raise MotionMatchError(f"armature {obj.name!r} has {len(roots)} root bones; motionmatch needs exactly one "
                               "(parent the others to one root bone)")
    out, stack = [], [roots[0]]
    order = {b.name: i for i, b in enumerate(bones)}
    while stack:
        b = stack.pop()
        out.append(b)
        stack.extend(sorted(b.children, key=lambda c: -order[c.name]))
    return out


def _matrix(m: Any) -> np.ndarray:
    return np.array([list(row) for row in m], dtype=np.float64)


def _object_transform(obj: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """The object's world translation ``[3]``, rotation ``[4]`` and (uniform) scale."""
    loc, rot, scale = obj.matrix_world.decompose()
    s = np.array(scale, dtype=np.float64)
    if np.ptp(s) > 1e-4 * np.abs(s).max():
        raise MotionMatchError(f"armature {obj.name!r} has a non-uniform scale {tuple(s)}; apply its scale first")
    return np.array(loc, dtype=np.float64), np.array(rot, dtype=np.float64), float(s.mean())


def _rest(obj: Any, bones: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rest heads ``[J, 3]``, rest orientations ``[J, 4]`` (armature space) and parent indices ``[J]``."""
    index = {b.name: i for i, b in enumerate(bones)}
    mats = np.array([_matrix(b.matrix_local) for b in bones])
    heads = mats[:, :3, 3]
    rots = quat.from_matrix(mats[:, :3, :3] / np.linalg.norm(mats[:, :3, :3], axis=1, keepdims=True))
    parents = np.array([index[b.parent.name] if b.parent is not None else -1 for b in bones], dtype=np.int64)
    return heads, rots, parents


def _forward_kinematics(motion: Motion) -> tuple[np.ndarray, np.ndarray]:
    """World positions ``[F, J, 3]`` and rotations ``[F, J, 4]``, numpy over frames (no compiled
    kernel: Blender's Python may have another Numba than the one that filled the cache)."""
    parents = motion.skeleton.parents
    pos = np.empty(motion.translations.shape)
    rot = np.empty(motion.rotations.shape)
    pos[:, 0], rot[:, 0] = motion.translations[:, 0], motion.rotations[:, 0]
    for j in range(1, motion.num_joints):
        p = parents[j]
        pos[:, j] = pos[:, p] + quat.rotate(rot[:, p], motion.translations[:, j])
        rot[:, j] = quat.mul(rot[:, p], motion.rotations[:, j])
    return pos, rot


def _channelbag(action: Any, obj: Any) -> Any:
    """Where ``action``'s F-curves for ``obj`` live: the slot's channel bag (Blender 4.4+)
    or the action itself (older Blender)."""
    if not hasattr(action, "slots"):
        return action
    from bpy_extras import anim_utils

    slot = action.slots[0] if len(action.slots) else action.slots.new(id_type="OBJECT", name=obj.name)
    return anim_utils.action_ensure_channelbag_for_slot(action, slot)


def _assign(obj: Any, action: Any) -> None:
    if obj.animation_data is None:
        obj.animation_data_create()
    obj.animation_data.action = action
    if hasattr(action, "slots") and len(action.slots):
        obj.animation_data.action_slot = action.slots[0]


def _key_channels(bag: Any, bone: str, prop: str, values: np.ndarray, frames: np.ndarray) -> None:
    """One F-curve per column of ``values [F, C]`` for ``pose.bones[bone].prop``, linear keys."""
    path = f'pose.bones["{bone}"].{prop}'
    co = np.empty((len(frames), 2), dtype=np.float32)
    co[:, 0] = frames
    for i in range(values.shape[1]):
        old = bag.fcurves.find(path, index=i)
        if old is not None:
            bag.fcurves.remove(old)
        try:
            fc = bag.fcurves.new(path, index=i, group_name=bone)
        except TypeError:  # the legacy Action API names it action_group
            fc = bag.fcurves.new(path, index=i, action_group=bone)
        fc.keyframe_points.add(len(frames))
        co[:, 1] = values[:, i]
        fc.keyframe_points.foreach_set("co", co.ravel())
        fc.keyframe_points.foreach_set("interpolation", np.full(len(frames), _LINEAR, dtype=np.int32))
        fc.update()


def write_action(obj: Any, motion: Motion, *, name: str | None = None, start: int = 0,
                 assign: bool = True, bind_rotations: np.ndarray | None = None) -> Any:
    """A new action on armature ``obj`` that plays ``motion``: keys at frames ``start + i``
    on every bone named like a joint (rotation in the bone's own rotation mode, location).

    Every bone of the armature must be a joint of ``motion`` (same name); its hierarchy is the
    armature's. The armature's rest pose is taken to be the motion's rest pose (every joint
    unrotated), or the pose whose joint world rotations are ``bind_rotations [J, 4]``
    (motionmatch axes, the motion's joint order). ``assign`` makes it the armature's current
    action. Returns the action.
    """
    bpy = require_bpy()
    import mathutils

    bones = _ordered_bones(obj)
    joints = motion.skeleton
    missing = [b.name for b in bones if b.name not in joints._index]  # type: ignore[attr-defined]
    if missing:
        raise MotionMatchError(f"the motion has no joint for bone(s) {', '.join(map(repr, missing[:5]))} of "
                               f"armature {obj.name!r}")
    order = [joints.index(b.name) for b in bones]
    heads, rest_rot, parents = _rest(obj, bones)
    t_a, r_a, s_a = _object_transform(obj)
    # world transforms in Blender axes -> armature space, with each bone's rest orientation
    world_pos, world_rot = _forward_kinematics(motion)
    P = to_blender(world_pos[:, order])
    Q = world_rot[:, order]
    if bind_rotations is not None:
        Q = quat.mul_inv(Q, np.asarray(bind_rotations, dtype=np.float64)[order])
    Q = quat_to_blender(Q)
    m = quat.inv_rotate(r_a, P - t_a) / s_a
    mq = quat.mul(quat.mul(quat.inv_mul(r_a, Q), r_a), rest_rot)
    has_parent = parents >= 0
    par = np.where(has_parent, parents, 0)
    mq_p = np.where(has_parent[:, None], mq[:, par], quat.identity((1, len(bones))))
    m_p = np.where(has_parent[:, None], m[:, par], 0.0)
    rr_p = np.where(has_parent[:, None], rest_rot[par], quat.identity((len(bones),)))
    h_p = np.where(has_parent[:, None], heads[par], 0.0)
    rot = quat.inv_mul(rest_rot, quat.mul(rr_p, quat.inv_mul(mq_p, mq)))
    loc = quat.inv_rotate(rest_rot, quat.rotate(rr_p, quat.inv_rotate(mq_p, m - m_p)) - (heads - h_p))
    rot = quat.unroll(quat.normalize(rot), axis=0)

    anim = obj.animation_data
    before = (anim.action, getattr(anim, "action_slot", None)) if anim is not None else (None, None)
    action = bpy.data.actions.new(name or f"{motion.name or obj.name}_action")
    bag = _channelbag(action, obj)
    _assign(obj, action)
    frames = start + np.arange(motion.num_frames, dtype=np.float64)
    for j, b in enumerate(bones):
        pb = obj.pose.bones[b.name]
        mode = pb.rotation_mode
        if mode == "AXIS_ANGLE":
            pb.rotation_mode = mode = "QUATERNION"
        if mode == "QUATERNION":
            _key_channels(bag, b.name, "rotation_quaternion", rot[:, j], frames)
        else:
            eul = np.empty((motion.num_frames, 3))
            prev = None
            for f in range(motion.num_frames):
                e = mathutils.Quaternion(rot[f, j].tolist()).to_euler(mode, *(() if prev is None else (prev,)))
                eul[f], prev = e, e
            _key_channels(bag, b.name, "rotation_euler", eul, frames)
        _key_channels(bag, b.name, "location", loc[:, j], frames)
    action.use_fake_user = True
    if not assign:  # back to the armature's action before
        obj.animation_data.action = before[0]
        if before[0] is not None and before[1] is not None:
            obj.animation_data.action_slot = before[1]
    return action


def read_motion(obj: Any, action: Any = None, *, frames: Sequence[int] | None = None, fps: float | None = None,
                name: str | None = None) -> Motion:
    """The motion an armature plays: ``action`` (default its current one) evaluated at
    ``frames`` (default the action's frame range), at ``fps`` (default the scene's).

    Joints are the armature's bones (parents first, names kept), in metres and motionmatch's
    axes; the rest pose is the armature's rest pose, and leaf bones' tails become end sites.
    The armature's current action and the scene's frame are restored afterwards.
    """
    bpy = require_bpy()
    scene = bpy.context.scene
    bones = _ordered_bones(obj)
    heads, rest_rot, parents = _rest(obj, bones)
    t_a, r_a, s_a = _object_transform(obj)
    anim = obj.animation_data
    before = (anim.action, getattr(anim, "action_slot", None)) if anim is not None else (None, None)
    if action is None:
        action = before[0]
        if action is None:
            raise MotionMatchError(f"armature {obj.name!r} has no action; give it one (or pick one) first")
    if frames is None:
        lo, hi = action.frame_range
        frames = range(round(lo), round(hi) + 1)
    frames = list(frames)
    frame_before = (scene.frame_current, scene.frame_subframe)
    _assign(obj, action)
    mats = np.empty((len(frames), len(bones), 4, 4))
    try:
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            pose = obj.pose.bones
            mats[i] = [_matrix(pose[b.name].matrix) for b in bones]
    finally:
        if anim is None:
            obj.animation_data_clear()
        else:
            obj.animation_data.action = before[0]
            if before[1] is not None:
                obj.animation_data.action_slot = before[1]
        scene.frame_set(frame_before[0], subframe=frame_before[1])
    rot3 = mats[..., :3, :3] / np.linalg.norm(mats[..., :3, :3], axis=-2, keepdims=True)
    mq = quat.from_matrix(rot3)
    # joint world rotation: the bone's rotation from its rest orientation, in world axes
    Q = quat.mul(quat.mul(r_a, quat.mul_inv(mq, rest_rot)), quat.conjugate(r_a))
    P = quat.rotate(r_a, mats[..., :3, 3] * s_a) + t_a
    Q, P = quat_from_blender(Q), from_blender(P)
    rest = from_blender(quat.rotate(r_a, heads * s_a) + t_a)
    has_parent = parents >= 0
    par = np.where(has_parent, parents, 0)
    offsets = rest - np.where(has_parent[:, None], rest[par], 0.0)
    Qp = np.where(has_parent[:, None], Q[:, par], quat.identity((1, len(bones))))
    Pp = np.where(has_parent[:, None], P[:, par], 0.0)
    rotations = quat.unroll(quat.normalize(quat.inv_mul(Qp, Q)), axis=0)
    translations = quat.inv_rotate(Qp, P - Pp)
    moves = np.abs(translations - offsets).max(axis=0).max(axis=1) > 1e-5 * max(s_a, 1.0)
    moves[0] = True  # the root is positioned by the motion
    translations[:, ~moves] = offsets[~moves]
    channels = tuple(("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation") if mv
                     else ("Zrotation", "Yrotation", "Xrotation") for mv in moves)
    leaves = [j for j, b in enumerate(bones) if not b.children]
    tails = np.array([np.array(bones[j].tail_local, dtype=np.float64) for j in leaves]).reshape(-1, 3)
    tail_world = from_blender(quat.rotate(r_a, tails * s_a) + t_a)
    skeleton = Skeleton(tuple(b.name for b in bones), parents, offsets,
                        end_site_parents=np.array(leaves, dtype=np.int64),
                        end_site_offsets=tail_world - rest[leaves], channels=channels)
    rate = fps if fps is not None else scene.render.fps / scene.render.fps_base
    return Motion(skeleton, rotations, translations, rate, name=name or action.name)
