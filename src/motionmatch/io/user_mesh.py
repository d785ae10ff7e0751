"""A user's skinned mesh (glTF 2.0, ``.glb`` or ``.gltf``) as the body of a skeleton.

:func:`read_user_mesh` reads the first skinned mesh of a file into a
:class:`~motionmatch.anim.mannequin.Mannequin` of a given skeleton, so that every writer
(``.glb``, ``.fbx``, ``.usd``) skins it in place of the generated mannequin:

- joints are matched **by name**: every joint of the skeleton that carries the body
  (:func:`~motionmatch.anim.mannequin.body_joints`) must be one of the skin's joints, and
  every skin joint a vertex is weighted to must be in the skeleton; otherwise one line
  names the file and the joints;
- the bind pose is the file's: each joint's world transform is the inverse of its inverse
  bind matrix (glTF's column-major matrices, any uniform scale removed). Its joint frames
  are turned onto the skeleton's by each joint's bones (the rotation taking the skeleton's
  offsets of its children onto the file's, :func:`_align_frames`): none for a file whose
  joints have the skeleton's frames (as motionmatch's own ``.glb``), and for a rig made
  elsewhere the frames our motions rotate (the twist about a single bone is kept from the
  file);
- units: glTF is metres and Y up, as we are; a file whose bones are 10, 100 or 1000 times
  (or a tenth, ...) the skeleton's is taken to be in that unit and scaled to metres;
- vertices keep the file's four strongest weights (of ``JOINTS_0``/``WEIGHTS_0`` and any
  further sets), normalized to sum to 1; triangles of every primitive of the mesh.

:func:`body_for` is the one place the writers get a motion's body from: the user's mesh
when one is given, else the generated mannequin.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pygltflib as g
from numpy.typing import NDArray

from motionmatch._gltf_read import MAX_DATA_URI_BYTES, MAX_GLTF_BYTES, MAX_GLTF_COUNT, Accessors, load_gltf
from motionmatch.anim import quat
from motionmatch.anim.mannequin import Mannequin, body_joints, mannequin_for
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import MotionMatchError

__all__ = ["MAX_DATA_URI_BYTES", "MAX_GLTF_BYTES", "MAX_GLTF_COUNT", "body_for", "read_user_mesh"]


def body_for(motion: Motion, user_mesh: str | Path | None = None) -> Mannequin:
    """``motion``'s body: the skinned mesh of the glTF file ``user_mesh`` on its skeleton
    (:func:`read_user_mesh`), or the generated mannequin
    (:func:`~motionmatch.anim.mannequin.mannequin_for`) when none is given."""
    if user_mesh is None:
        return mannequin_for(motion)
    return read_user_mesh(user_mesh, motion.skeleton)


def read_user_mesh(path: str | Path, skeleton: Skeleton) -> Mannequin:
    """The first skinned mesh of the glTF file ``path`` as a body of ``skeleton`` (joints
    matched by name, the file's bind pose); cached per file (and its modification time) and
    skeleton. Raises :class:`~motionmatch.errors.MotionMatchError` (one line naming the
    file) for a file that cannot be read, has no skinned mesh, or whose joints do not match."""
    path = Path(path)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as e:
        raise MotionMatchError(f"{path}: cannot read the body mesh ({e.strerror or e}); give a .glb or .gltf file") from None
    return _read_cached(str(path), str(path.resolve()), stamp, skeleton.names, skeleton.parents.tobytes(),
                        np.ascontiguousarray(skeleton.offsets).tobytes(), skeleton.channels,
                        skeleton.end_site_parents.tobytes(), np.ascontiguousarray(skeleton.end_site_offsets).tobytes())


@functools.lru_cache(maxsize=8)
def _read_cached(path: str, _resolved: str, _stamp: int, names, parents, offsets, channels, es_par,
                 es_off) -> Mannequin:
    J = len(names)
    skel = Skeleton(names, np.frombuffer(parents, dtype=np.int64), np.frombuffer(offsets).reshape(J, 3),
                    np.frombuffer(es_par, dtype=np.int64), np.frombuffer(es_off).reshape(-1, 3), channels)
    return _read(Path(path), skel)


def _read(path: Path, skel: Skeleton) -> Mannequin:
    if path.suffix.lower() not in (".glb", ".gltf"):
        raise MotionMatchError(f"{path}: a body mesh is a glTF file; give a .glb or .gltf file")
    doc, blob = load_gltf(path)
    k = next((k for k, n in enumerate(doc.nodes or ()) if n.mesh is not None and n.skin is not None), None)
    if k is None:
        raise MotionMatchError(f"{path}: no skinned mesh (a mesh node with a skin); export the mesh with its armature")
    node = doc.nodes[k]
    reader = Accessors(doc, path, blob)
    skin = reader.item(doc.skins, node.skin, f"nodes[{k}].skin")
    skin_names = [reader.item(doc.nodes, i, f"skins[{node.skin}].joints").name or f"node{i}"
                  for i in skin.joints or ()]
    if skin.inverseBindMatrices is None:
        raise MotionMatchError(f"{path}: the skin has no inverse bind matrices; export the mesh with its bind pose")
    ibm = reader.read(skin.inverseBindMatrices, f"skins[{node.skin}].inverseBindMatrices")
    if ibm.shape[1] != 16:
        raise reader.refuse(f"skins[{node.skin}].inverseBindMatrices", "is not of type MAT4")
    ibm = ibm.reshape(-1, 4, 4).transpose(0, 2, 1).astype(np.float64)
    if len(ibm) != len(skin_names):
        raise MotionMatchError(f"{path}: the skin has {len(skin_names)} joints but {len(ibm)} inverse bind matrices")

    verts, norms, tris, joints, weights = [], [], [], [], []
    base = 0
    mesh = reader.item(doc.meshes, node.mesh, f"nodes[{k}].mesh")
    for p, prim in enumerate(mesh.primitives or ()):
        at = f"meshes[{node.mesh}].primitives[{p}]"
        if prim.mode not in (None, g.TRIANGLES):
            raise MotionMatchError(f"{path}: the body mesh has a primitive of mode {prim.mode}; triangulate it")
        attrs = prim.attributes
        if attrs.POSITION is None or attrs.JOINTS_0 is None or attrs.WEIGHTS_0 is None:
            raise MotionMatchError(f"{path}: a primitive of the body mesh lacks POSITION, JOINTS_0 or WEIGHTS_0")

        def attribute(name: str, width: int, n: int | None, at: str = at, attrs=attrs) -> NDArray:
            a = reader.read(getattr(attrs, name), f"{at}.attributes.{name}")
            if a.shape[1] != width or (n is not None and len(a) != n):
                raise reader.refuse(f"{at}.attributes.{name}", f"holds {len(a)} of {a.shape[1]} components; "
                                    f"expected {n if n is not None else 'any number'} of {width}")
            return a

        v = attribute("POSITION", 3, None).astype(np.float64)
        sets_j = [attribute("JOINTS_0", 4, len(v))]
        sets_w = [attribute("WEIGHTS_0", 4, len(v))]
        if getattr(attrs, "JOINTS_1", None) is not None and getattr(attrs, "WEIGHTS_1", None) is not None:
            sets_j.append(attribute("JOINTS_1", 4, len(v)))
            sets_w.append(attribute("WEIGHTS_1", 4, len(v)))
        jj = np.concatenate([s.astype(np.int64) for s in sets_j], axis=1)
        ww = np.concatenate([s.astype(np.float64) for s in sets_w], axis=1)
        idx = (reader.read(prim.indices, f"{at}.indices").reshape(-1).astype(np.int64) if prim.indices is not None
               else np.arange(len(v), dtype=np.int64))
        if len(idx) % 3 or (len(idx) and (idx.min() < 0 or idx.max() >= len(v))):
            raise reader.refuse(f"{at}.indices", f"are not triangles of the primitive's {len(v)} vertices")
        verts.append(v)
        norms.append(attribute("NORMAL", 3, len(v)).astype(np.float64) if attrs.NORMAL is not None else None)
        tris.append(idx.reshape(-1, 3) + base)
        joints.append(jj)
        weights.append(ww)
        base += len(v)
    v = np.concatenate(verts)
    tri = np.concatenate(tris)
    jj, ww = np.concatenate(joints), np.concatenate(weights)
    if np.any(jj >= len(skin_names)) or np.any(jj < 0) or np.any(ww < 0) or not np.all(np.isfinite(ww)):
        raise MotionMatchError(f"{path}: skin weights refer to joints the skin does not have (or are negative)")

    # joints by name
    index = {n: i for i, n in enumerate(skel.names)}
    used = np.unique(jj[ww > 0])
    unknown = [skin_names[i] for i in used if skin_names[i] not in index]
    present = set(skin_names)
    missing = [skel.names[j] for j in np.flatnonzero(body_joints(skel)) if skel.names[j] not in present]
    if unknown or missing:
        parts = ([f"skeleton joints missing from its skin: {', '.join(missing)}"] if missing else []) + \
                ([f"skin joints not in the skeleton: {', '.join(unknown)}"] if unknown else [])
        raise MotionMatchError(f"{path}: the body mesh does not fit this skeleton ({'; '.join(parts)}); "
                               "give a mesh skinned to a skeleton with the same joint names")
    to_skel = np.array([index.get(n, 0) for n in skin_names], dtype=np.int64)

    # the bind pose: world transforms of the skin's joints, in the skeleton's order
    try:
        world = np.linalg.inv(ibm)  # (S, 4, 4), row-major
    except np.linalg.LinAlgError:
        raise reader.refuse(f"skins[{node.skin}].inverseBindMatrices", "holds a singular matrix") from None
    lin = world[:, :3, :3]
    scale = np.cbrt(np.abs(np.linalg.det(lin)))[:, None, None]
    rot = quat.normalize(quat.from_matrix(lin / np.maximum(scale, 1e-12)))
    J = skel.num_joints
    bind_pos = np.zeros((J, 3))
    bind_rot = np.tile([1.0, 0.0, 0.0, 0.0], (J, 1))
    have = np.zeros(J, dtype=bool)
    for s, name in enumerate(skin_names):
        if name in index:
            bind_pos[index[name]] = world[s, :3, 3]
            bind_rot[index[name]] = rot[s]
            have[index[name]] = True
    for j in np.flatnonzero(~have):  # a joint without body (a root over the ground): under its first child
        kids = [k for k in skel.children(int(j)) if have[k]]
        if kids:
            bind_pos[j], bind_rot[j] = bind_pos[kids[0]], bind_rot[kids[0]]
    unit = _unit_scale(skel, bind_pos, have)
    bind_pos, v = bind_pos / unit, v / unit
    bind_rot = _align_frames(skel, bind_pos, bind_rot, have)

    # the four strongest weights of each vertex, on the skeleton's joints
    order = np.argsort(-ww, axis=1, kind="stable")[:, :4]
    w4 = np.take_along_axis(ww, order, axis=1)
    j4 = to_skel[np.take_along_axis(jj, order, axis=1)]
    total = w4.sum(axis=1, keepdims=True)
    if np.any(total <= 0):
        raise MotionMatchError(f"{path}: {int(np.sum(total <= 0))} vertices of the body mesh have no skin weight")
    w4 = w4 / total
    j4[w4 == 0] = 0
    if any(n is None for n in norms):
        normals = _vertex_normals(v, tri)
    else:
        normals = np.concatenate(norms)
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    return Mannequin(
        vertices=v.astype(np.float32),
        normals=normals.astype(np.float32),
        triangles=tri.astype(np.uint32),
        joints=j4.astype(np.uint16),
        weights=w4.astype(np.float32),
        bind_positions=bind_pos,
        bind_rotations=bind_rot,
    )


def _unit_scale(skel: Skeleton, bind_pos: np.ndarray, have: NDArray[np.bool_]) -> float:
    """File units per metre: a power of ten when the file's bones are that many times the
    skeleton's (100 for a file in centimetres), else 1."""
    kids = np.array([j for j in range(1, skel.num_joints) if have[j] and have[skel.parents[j]]], dtype=np.int64)
    if not len(kids):
        return 1.0
    ours = np.linalg.norm(skel.offsets[kids], axis=1)
    theirs = np.linalg.norm(bind_pos[kids] - bind_pos[skel.parents[kids]], axis=1)
    ok = ours > 1e-6
    if not np.any(ok):
        return 1.0
    ratio = float(np.median(theirs[ok] / ours[ok]))
    power = round(np.log10(max(ratio, 1e-12)))
    return 10.0 ** power if power != 0 and abs(np.log10(ratio) - power) < 0.1 else 1.0


def _align_frames(skel: Skeleton, bind_pos: np.ndarray, bind_rot: np.ndarray, have: NDArray[np.bool_]) -> np.ndarray:
    """Bind rotations ``(J, 4)`` in the skeleton's joint frames: each joint's file rotation
    turned by the rotation that takes the skeleton's offsets of its children onto the file's
    bones (in the file's joint frame): Kabsch over two or more children, the shortest arc for
    one; a leaf joint keeps its parent's turn."""
    J = skel.num_joints
    out = bind_rot.copy()
    turn = np.tile([1.0, 0.0, 0.0, 0.0], (J, 1))
    for j in range(J):
        kids = [k for k in skel.children(j) if have[k] and np.linalg.norm(skel.offsets[k]) > 1e-9]
        if not have[j] or not kids:
            turn[j] = turn[skel.parents[j]] if skel.parents[j] >= 0 else turn[j]
            continue
        ours = skel.offsets[kids]  # in the skeleton's joint frame
        theirs = quat.rotate(quat.conjugate(bind_rot[j])[None], bind_pos[kids] - bind_pos[j])  # file frame
        ours_u = ours / np.linalg.norm(ours, axis=1, keepdims=True)
        theirs_u = theirs / np.maximum(np.linalg.norm(theirs, axis=1, keepdims=True), 1e-12)
        if len(kids) >= 2 and np.linalg.matrix_rank(ours_u, tol=1e-3) >= 2:
            u, _, vt = np.linalg.svd(theirs_u.T @ ours_u)  # R maps ours onto theirs
            d = np.sign(np.linalg.det(u @ vt))
            r = u @ np.diag([1.0, 1.0, d]) @ vt
            turn[j] = quat.normalize(quat.from_matrix(r))
        else:
            turn[j] = _shortest_arc(ours_u[0], theirs_u[0])
        out[j] = quat.normalize(quat.mul(bind_rot[j], turn[j]))
    for j in range(J):  # leaf joints: the parent's turn
        if have[j] and not [k for k in skel.children(j) if have[k] and np.linalg.norm(skel.offsets[k]) > 1e-9]:
            out[j] = quat.normalize(quat.mul(bind_rot[j], turn[j]))
    return out


def _shortest_arc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation ``(w, x, y, z)`` taking unit vector ``a`` onto unit vector ``b`` along the shortest arc."""
    c = float(a @ b)
    if c < -1.0 + 1e-9:  # opposite: half a turn about any axis perpendicular to a
        axis = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(axis) < 1e-6:
            axis = np.cross(a, [0.0, 1.0, 0.0])
        axis /= np.linalg.norm(axis)
        return np.array([0.0, *axis])
    q = np.array([1.0 + c, *np.cross(a, b)])
    return q / np.linalg.norm(q)


def _vertex_normals(v: np.ndarray, tri: np.ndarray) -> np.ndarray:
    fn = np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])
    n = np.zeros_like(v)
    for k in range(3):
        np.add.at(n, tri[:, k], fn)
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
