"""Reading a character's rig (the skeleton a motion is retargeted onto) from a file.

:func:`read_rig` reads

- a ``.bvh`` file: its skeleton, in the unit and up axis found from the data (or given);
  the reference pose is its rest pose when that stands (a T or A pose), else its most
  upright frame (:func:`~motionmatch.anim.retarget_map.reference_rig`);
- a ``.glb``/``.gltf`` file with a skeleton: the joints of the skin of its first skinned
  mesh (a skinned rig: the mesh is written with the motion), else of its first skin, else
  its node tree; the nodes' own transforms (the bind pose a file is exported in) are the
  reference pose, their world transforms taken through any armature node above them (a
  rotation, a 0.01 scale); a rig whose bones are ten, a hundred or a thousand times a
  person's size is read in that unit (or as ``units`` says). Read within
  :mod:`motionmatch._gltf_read`'s limits;
- a ``.fbx`` file: refused in one line saying to export it as glTF (no FBX reader here).

A file over its size limit, a skeleton with two roots, a rig with no humanoid found or a
glTF rest pose that does not stand are refused with one line naming the file and the fix;
a rig that stands outside a person's height is warned about (a unit the file does not say).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from motionmatch._gltf_read import load_gltf
from motionmatch.anim import load_bvh, quat
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.motion import Motion
from motionmatch.anim.plausible import HEIGHT_RANGE
from motionmatch.anim.retarget import Retargeter, RetargetSettings
from motionmatch.anim.retarget_map import Rig, reference_rig, stands
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import DataWarning, MotionMatchError, SkeletonError

__all__ = ["RIG_SUFFIXES", "RigFile", "read_rig"]

#: File suffixes :func:`read_rig` reads.
RIG_SUFFIXES = (".bvh", ".glb", ".gltf")
_UNITS = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254}


@dataclass(frozen=True, eq=False)
class RigFile:
    """A rig read from a file.

    Attributes:
        path: the file.
        rig: its skeleton (metres, Y up) in its standing reference pose, with its roles.
        skinned: the file holds a mesh skinned to this skeleton (written with the motion in
            ``.glb``/``.fbx``/``.usd`` output: :func:`motionmatch.io.user_mesh.read_user_mesh`).
        file_scale: metres per unit of the file (0.01 for centimetres): BVH output on the
            rig is written in it.
    """

    path: Path
    rig: Rig
    skinned: bool
    file_scale: float

    def retarget(self, motion: Motion, settings: RetargetSettings | None = None,
                 roles_map: dict[str, str] | None = None, *, source: Rig | None = None) -> Motion:
        """``motion`` (any humanoid take, metres, Y up; ``roles_map`` overriding its roles)
        played by this rig (:class:`~motionmatch.anim.retarget.Retargeter`), named as the motion.
        ``source``: the motion's rig in its reference pose (default: found from the motion,
        :func:`~motionmatch.anim.retarget_map.reference_rig`; give it to retarget poses of
        one skeleton alike, as the viewer does)."""
        if source is None:
            source = reference_rig(motion, find_humanoid(motion.skeleton, roles_map))
        out = self.retargeter(source, settings)(motion)
        out.file_scale = self.file_scale
        return out

    def retargeter(self, source: Rig, settings: RetargetSettings | None = None) -> Retargeter:
        """The :class:`~motionmatch.anim.retarget.Retargeter` from ``source`` (a rig in its
        reference pose) to this rig."""
        return Retargeter(source, self.rig, settings)

    def write(self, path: str | Path, motion: Motion | list[tuple[str, Motion]], *, obstacles=(),
              terrain=None) -> Path:
        """Write motion on this rig (:meth:`retarget`'s output) to ``path`` by its suffix
        (:func:`~motionmatch.io.motion_files.write_motion`, with any obstacles and ground):
        BVH in the rig's unit; ``.glb``, ``.fbx`` and ``.usd`` with the rig's own skinned mesh
        where it has one."""
        from motionmatch.io.motion_files import write_motion

        return write_motion(path, motion, units=self.file_scale, body=self.path if self.skinned else None,
                            obstacles=obstacles, terrain=terrain)


def _roles(path: Path, skeleton: Skeleton, roles_map: dict[str, str] | None):
    try:
        return find_humanoid(skeleton, roles_map)
    except HumanoidError as e:
        raise HumanoidError(f"{path}: {e}; for a rig, give its roles with --rig-roles MAP.json") from None


def read_rig(path: str | Path, *, units: str | float = "auto", up: str = "auto",
             roles_map: dict[str, str] | None = None) -> RigFile:
    """The rig of a ``.bvh``, ``.glb`` or ``.gltf`` file (see the module).

    Args:
        path: the file.
        units: its length unit: ``"auto"`` (found from the rig's size), ``"m"``, ``"cm"``,
            ``"mm"``, ``"in"`` or metres per unit.
        up: the up axis of a BVH file: ``"auto"``, ``"y"`` or ``"z"`` (glTF is Y up).
        roles_map: ``{role: joint name}`` overriding the humanoid roles found.

    Raises:
        MotionMatchError: one line naming the file and the fix (see the module).
    """
    out = _read(Path(path), units, up, roles_map)
    pos, _ = out.rig.world()
    height = float(np.ptp(pos[:, 1]))
    low, high = HEIGHT_RANGE
    if not low <= height <= high:
        warnings.warn(f"{out.path}: the rig stands {height:.2f} m tall (a person: {low:g}-{high:g} m); if that is "
                      "not its size, give its unit (--rig-units cm, m, mm, in or metres per unit)", DataWarning,
                      stacklevel=2)
    return out


def _read(path: Path, units: str | float, up: str, roles_map: dict[str, str] | None) -> RigFile:
    suffix = path.suffix.lower()
    if suffix == ".fbx":
        raise MotionMatchError(f"{path}: FBX rigs are not read; export the rig as glTF 2.0 (.glb) "
                               "(Blender: File > Export > glTF 2.0, with its armature and skin) and give that")
    if suffix == ".bvh":
        motion = load_bvh(path, units=units, up_axis=up)
        roles = _roles(path, motion.skeleton, roles_map)
        try:
            rig = reference_rig(motion, roles)
        except HumanoidError as e:
            raise HumanoidError(f"{path}: {e}") from None
        return RigFile(path, rig, False, motion.file_scale)
    if suffix in (".glb", ".gltf"):
        return _read_gltf(path, units, roles_map)
    raise MotionMatchError(f"{path}: a rig is a {', '.join(RIG_SUFFIXES)} file (or .fbx exported as .glb); "
                           "give a file ending in one")


def _local_matrix(node, where: str, path: Path) -> np.ndarray:
    if node.matrix is not None and len(node.matrix) == 16:
        m = np.asarray(node.matrix, dtype=np.float64).reshape(4, 4).T  # column-major
    else:
        t = np.asarray(node.translation if node.translation is not None else (0.0, 0.0, 0.0), dtype=np.float64)
        r = np.asarray(node.rotation if node.rotation is not None else (0.0, 0.0, 0.0, 1.0), dtype=np.float64)
        s = np.asarray(node.scale if node.scale is not None else (1.0, 1.0, 1.0), dtype=np.float64)
        if t.shape != (3,) or r.shape != (4,) or s.shape != (3,):
            raise MotionMatchError(f"{path}: {where} has a malformed translation, rotation or scale; "
                                   "export the rig again as glTF 2.0 (.glb)")
        m = np.eye(4)
        m[:3, :3] = quat.to_matrix(quat.normalize(r[[3, 0, 1, 2]])) * s[None, :]
        m[:3, 3] = t
    if not np.all(np.isfinite(m)):
        raise MotionMatchError(f"{path}: {where} holds a NaN or infinite transform; export the rig again")
    return m


def _read_gltf(path: Path, units: str | float, roles_map: dict[str, str] | None) -> RigFile:
    doc, _blob = load_gltf(path)
    nodes = doc.nodes or []
    parent: dict[int, int] = {}
    for i, n in enumerate(nodes):
        for c in n.children or ():
            if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < len(nodes) or c in parent or c == i:
                raise MotionMatchError(f"{path}: nodes[{i}].children holds {c!r}, not a node of a tree; "
                                       "export the rig again as glTF 2.0 (.glb)")
            parent[c] = i
    for i in range(len(nodes)):  # every chain of parents ends (no cycle)
        p, steps = parent.get(i), 0
        while p is not None:
            steps += 1
            if steps > len(nodes):
                raise MotionMatchError(f"{path}: nodes[{i}]'s parents form a cycle; export the rig again as glTF 2.0 (.glb)")
            p = parent.get(p)
    skinned = next((n for n in nodes if n.mesh is not None and n.skin is not None), None)
    skin_index = skinned.skin if skinned is not None else (0 if doc.skins else None)
    if skin_index is not None:
        if isinstance(skin_index, bool) or not isinstance(skin_index, int) or not 0 <= skin_index < len(doc.skins or ()):
            raise MotionMatchError(f"{path}: a mesh node's skin {skin_index!r} is not one of the file's skins; "
                                   "export the rig again as glTF 2.0 (.glb)")
        joints = list(doc.skins[skin_index].joints or ())
        where = f"skins[{skin_index}]"
    else:
        joints = [i for i, n in enumerate(nodes) if n.mesh is None and n.camera is None]
        where = "the node tree"
    if not joints or any(isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < len(nodes) for j in joints):
        raise MotionMatchError(f"{path}: no skeleton ({where} names no nodes); give a rig with an armature "
                               "(a skin, or a tree of joint nodes)")
    jset = set(joints)

    def joint_parent(j: int) -> int | None:
        p = parent.get(j)
        while p is not None and p not in jset:
            p = parent.get(p)
        return p

    roots = [j for j in joints if joint_parent(j) is None]
    if skin_index is None and len(roots) > 1:  # a plain node tree: the tree with the most joints
        size = {r: 0 for r in roots}
        for j in joints:
            r = j
            while joint_parent(r) is not None:
                r = joint_parent(r)
            size[r] += 1
        keep = max(roots, key=lambda r: size[r])
        joints = [j for j in joints if _top(j, joint_parent) == keep]
        jset, roots = set(joints), [keep]
    if len(roots) > 1:
        names = [nodes[r].name or f"nodes[{r}]" for r in roots[:4]]
        raise MotionMatchError(f"{path}: the skeleton has {len(roots)} roots ({', '.join(map(repr, names))}); "
                               "a rig has one: parent them under one joint and export again")

    world: dict[int, np.ndarray] = {}

    def world_of(i: int) -> np.ndarray:
        chain = []
        while i is not None and i not in world:  # up to the first node whose world transform is known
            chain.append(i)
            i = parent.get(i)
        above = world[i] if i is not None else np.eye(4)
        for k in reversed(chain):
            above = world[k] = above @ _local_matrix(nodes[k], f"nodes[{k}]", path)
        return above

    order: list[int] = []
    kids: dict[int, list[int]] = {j: [] for j in joints}
    for j in joints:
        p = joint_parent(j)
        if p is not None:
            kids[p].append(j)
    stack = [roots[0]]
    while stack:
        j = stack.pop()
        order.append(j)
        stack.extend(reversed(kids[j]))
    index = {j: k for k, j in enumerate(order)}
    mats = np.stack([world_of(j) for j in order])
    lin = mats[:, :3, :3]
    det = np.linalg.det(lin)
    if np.any(np.abs(det) < 1e-12):
        raise MotionMatchError(f"{path}: a joint has a zero scale; export the rig again with its rest pose")
    scale = np.cbrt(np.abs(det))
    rot = quat.normalize(quat.from_matrix(lin / scale[:, None, None]))
    pos = mats[:, :3, 3]
    factor = _unit_factor(pos, units, path)
    pos = pos * factor
    parents = np.array([-1 if joint_parent(j) is None else index[joint_parent(j)] for j in order], dtype=np.int64)
    offsets = pos.copy()
    local = rot.copy()
    kid = parents >= 0
    offsets[kid] = quat.inv_rotate(rot[parents[kid]], pos[kid] - pos[parents[kid]])
    local[kid] = quat.inv_mul(rot[parents[kid]], rot[kid])
    names = tuple(nodes[j].name or f"node{j}" for j in order)
    try:
        skel = Skeleton(names, parents, offsets)
    except SkeletonError as e:
        raise MotionMatchError(f"{path}: {e}; rename the joints in the rig and export again") from None
    roles = _roles(path, skel, roles_map)
    if not stands(skel, local, roles):
        raise HumanoidError(f"{path}: the rig's rest pose does not stand (legs down, arms not raised); "
                            "export it in a T or A pose")
    rig = Rig(skel, local, roles, rest_rotations=local)
    if skinned is not None:  # a mesh that cannot be skinned on the rig fails now, before any work
        from motionmatch.io.user_mesh import read_user_mesh

        read_user_mesh(path, skel)
    elif any(n.mesh is not None for n in nodes):
        warnings.warn(f"{path}: its mesh has no skin, so it cannot follow the rig: the generated mannequin is "
                      "written instead (export the mesh with its armature modifier / skin)", DataWarning, stacklevel=3)
    return RigFile(path, rig, skinned is not None, factor)


def _top(j: int, joint_parent) -> int:
    while joint_parent(j) is not None:
        j = joint_parent(j)
    return j


def _unit_factor(pos: np.ndarray, units: str | float, path: Path) -> float:
    """Metres per unit of the file: as given, or (``"auto"``) the power of ten that makes the
    rig's height (the extent of its joints along Y) closest to a person's 1.7 m."""
    if units != "auto":
        if isinstance(units, str):
            if units not in _UNITS:
                raise MotionMatchError(f"{path}: unknown unit {units!r}; give one of {', '.join(_UNITS)} or metres per unit")
            return _UNITS[units]
        return float(units)
    height = float(np.ptp(pos[:, 1])) if len(pos) > 1 else 0.0
    if height <= 0 or 0.5 <= height <= 3.0:
        return 1.0
    return min((1.0, 0.1, 0.01, 0.001), key=lambda f: abs(np.log(height * f / 1.7)))
