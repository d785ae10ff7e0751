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

import base64
import functools
import struct
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import numpy as np
import pygltflib as g
from numpy.typing import NDArray

from motionmatch._limits import MAX_JSON_BYTES, loads_json, read_bytes
from motionmatch.anim import quat
from motionmatch.anim.mannequin import Mannequin, body_joints, mannequin_for
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import MotionMatchError

__all__ = ["body_for", "read_user_mesh"]

_COMPONENTS = {g.BYTE: np.int8, g.UNSIGNED_BYTE: np.uint8, g.SHORT: np.int16, g.UNSIGNED_SHORT: np.uint16,
               g.UNSIGNED_INT: np.uint32, g.FLOAT: np.float32}
_WIDTH = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}
_NORMALIZED_SCALE = {np.uint8: 255.0, np.uint16: 65535.0, np.int8: 127.0, np.int16: 32767.0}
_JSON_CHUNK, _BIN_CHUNK = 0x4E4F534A, 0x004E4942

MAX_GLTF_BYTES = 256 * 2**20
"""Bytes of a body's glTF file and of each of its external buffers: 256 MiB."""
MAX_DATA_URI_BYTES = 32 * 2**20
"""Bytes a buffer's data URI may hold once decoded (larger meshes come as ``.glb``)."""
MAX_GLTF_COUNT = 2**24
"""Elements of one accessor (16.8 million vertices, indices or matrices)."""


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
    doc, blob = _load(path)
    k = next((k for k, n in enumerate(doc.nodes or ()) if n.mesh is not None and n.skin is not None), None)
    if k is None:
        raise MotionMatchError(f"{path}: no skinned mesh (a mesh node with a skin); export the mesh with its armature")
    node = doc.nodes[k]
    reader = _Accessors(doc, path, blob)
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


class _Accessors:
    """Reads accessors of a glTF document (the GLB's binary chunk, data-URI or external
    buffers), every index, offset, stride and count checked against what it points into, so
    that nothing outside a buffer is read; external buffers only from the file's folder."""

    def __init__(self, doc: g.GLTF2, path: Path, blob: bytes | None):
        self.doc, self.path, self.blob = doc, path, blob
        self.buffers: dict[int, bytes] = {}

    def refuse(self, field: str, problem: str) -> MotionMatchError:
        return MotionMatchError(f"{self.path}: {field} {problem}; export the mesh again as glTF 2.0 (.glb)")

    def item(self, items: list | None, index: object, field: str):
        """``items[index]``, refused naming ``field`` when the index is not one of them."""
        n = len(items or ())
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise self.refuse(field, f"is {index!r}, not an index of the file's {n} entries")
        return items[index]

    def number(self, value: object, field: str, lo: int, hi: int, default: int | None = None) -> int:
        """A whole number in ``[lo, hi]`` (``default`` when absent)."""
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self.refuse(field, f"is {value!r}; expected a whole number from {lo:,} to {hi:,}")
        return value

    def _buffer(self, i: object, field: str) -> bytes:
        buf = self.item(self.doc.buffers, i, field)
        if i not in self.buffers:
            uri = buf.uri
            if uri is None:
                if self.blob is None:
                    raise self.refuse(f"buffers[{i}]", "has no uri and the file has no binary chunk")
                data = self.blob
            elif isinstance(uri, str) and uri.startswith("data:"):
                data = _data_uri(self.path, uri, f"buffers[{i}].uri")
            else:
                target = _inside(self.path, uri, f"buffers[{i}].uri")
                data = read_bytes(target, "glTF buffer", MAX_GLTF_BYTES, error=MotionMatchError,
                                  label=f"{self.path}: buffers[{i}].uri {uri!r}")
            self.number(buf.byteLength, f"buffers[{i}].byteLength", 0, len(data), default=len(data))
            self.buffers[i] = data
        return self.buffers[i]

    def read(self, index: object, field: str) -> NDArray:
        """The accessor ``index`` (named ``field`` in errors) as an array ``[count, width]``."""
        acc = self.item(self.doc.accessors, index, field)
        where = f"accessors[{index}]"
        if acc.sparse is not None:
            raise MotionMatchError(f"{self.path}: sparse accessors are not read; export the mesh without them")
        if acc.componentType not in _COMPONENTS:
            raise self.refuse(f"{where}.componentType", f"is {acc.componentType!r}; expected one of "
                              f"{', '.join(str(c) for c in _COMPONENTS)}")
        if acc.type not in _WIDTH:
            raise self.refuse(f"{where}.type", f"is {acc.type!r}; expected one of {', '.join(_WIDTH)}")
        dtype = np.dtype(_COMPONENTS[acc.componentType])
        width = _WIDTH[acc.type]
        count = self.number(acc.count, f"{where}.count", 0, MAX_GLTF_COUNT)
        if acc.bufferView is None:
            return np.zeros((count, width), dtype=dtype)
        vfield = f"{where}.bufferView"
        view = self.item(self.doc.bufferViews, acc.bufferView, vfield)
        vwhere = f"bufferViews[{acc.bufferView}]"
        data = self._buffer(view.buffer, f"{vwhere}.buffer")
        v0 = self.number(view.byteOffset, f"{vwhere}.byteOffset", 0, len(data), default=0)
        vlen = self.number(view.byteLength, f"{vwhere}.byteLength", 0, len(data) - v0)
        item = dtype.itemsize * width
        stride = self.number(view.byteStride, f"{vwhere}.byteStride", item, max(item, 252), default=item)
        if stride % dtype.itemsize:
            raise self.refuse(f"{vwhere}.byteStride", f"{stride} is not a multiple of the component size "
                              f"{dtype.itemsize}")
        start = self.number(acc.byteOffset, f"{where}.byteOffset", 0, vlen, default=0)
        need = stride * (count - 1) + item if count else 0
        if start + need > vlen:
            raise self.refuse(f"{where}.count", f"{count:,} elements of {item} bytes every {stride} from byte "
                              f"{start} need {start + need:,} bytes, more than {vwhere}'s {vlen:,}")
        raw = np.frombuffer(data, dtype=np.uint8, count=need, offset=v0 + start)
        rows = np.lib.stride_tricks.as_strided(raw, shape=(count, item), strides=(stride, 1), writeable=False)
        out = np.ascontiguousarray(rows).view(dtype).reshape(count, width)
        if acc.normalized and dtype.type in _NORMALIZED_SCALE:
            return out.astype(np.float64) / _NORMALIZED_SCALE[dtype.type]
        return out


def _load(path: Path) -> tuple[g.GLTF2, bytes | None]:
    """The glTF document of ``path`` and its GLB binary chunk (``None`` for a ``.gltf``):
    a ``.glb`` of at most :data:`MAX_GLTF_BYTES`, JSON of at most
    :data:`motionmatch._limits.MAX_JSON_BYTES` within :func:`~motionmatch._limits.loads_json`'s
    limits, the GLB's chunks within the file, data URIs of at most
    :data:`MAX_DATA_URI_BYTES`, image URIs inside the file's folder (they are not read)."""
    binary = path.suffix.lower() == ".glb"
    raw = read_bytes(path, "glTF", MAX_GLTF_BYTES if binary else MAX_JSON_BYTES, error=MotionMatchError)
    blob = None
    if binary and raw[:4] != b"glTF":
        raise MotionMatchError(f"{path}: not a readable glTF file (no binary glTF header); export the mesh as glTF "
                               "2.0 (.glb)")
    if raw[:4] == b"glTF":
        text, blob = _glb_chunks(path, raw)
        del raw
    else:
        text = raw
    if len(text) > MAX_JSON_BYTES:
        raise MotionMatchError(f"{path}: its JSON has {len(text):,} bytes, more than {MAX_JSON_BYTES:,}; "
                               "export the mesh as glTF 2.0 (.glb)")
    d = loads_json(text, str(path), error=MotionMatchError)
    if not isinstance(d, dict):
        raise MotionMatchError(f"{path}: not a glTF file (its JSON is not an object); export the mesh as glTF 2.0")
    for i, buf in enumerate(d.get("buffers") or ()):  # before pygltflib copies them
        uri = buf.get("uri") if isinstance(buf, dict) else None
        if isinstance(uri, str) and uri.startswith("data:"):
            _data_uri_payload(path, uri, f"buffers[{i}].uri")
    del d
    try:  # pygltflib's own decoding (it fixes up primitives' attributes after the JSON's)
        doc = g.GLTF2.gltf_from_json(text.decode("utf-8"))
    except Exception as e:  # dataclasses-json raises whatever a field's type conversion raises
        raise MotionMatchError(f"{path}: not a readable glTF file ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
                               "export the mesh as glTF 2.0 (.glb)") from None
    for i, image in enumerate(doc.images or ()):
        if image.uri is not None and not (isinstance(image.uri, str) and image.uri.startswith("data:")):
            _inside(path, image.uri, f"images[{i}].uri")
    return doc, blob


def _glb_chunks(path: Path, raw: bytes) -> tuple[bytes, bytes | None]:
    """The JSON and binary chunks of a GLB file, each checked to lie within the file."""
    def refuse(problem: str) -> MotionMatchError:
        return MotionMatchError(f"{path}: {problem}; export the mesh again as glTF 2.0 (.glb)")

    if len(raw) < 20:
        raise refuse("a GLB file of less than 20 bytes")
    version, length = struct.unpack_from("<II", raw, 4)
    if version != 2:
        raise refuse(f"header: GLB version {version}; expected 2")
    if length != len(raw):
        raise refuse(f"header: length {length:,} but the file has {len(raw):,} bytes")
    chunks: list[tuple[int, bytes]] = []
    at = 12
    while at + 8 <= len(raw):
        size, kind = struct.unpack_from("<II", raw, at)
        if size > len(raw) - at - 8:
            raise refuse(f"chunk {len(chunks)}: {size:,} bytes from byte {at + 8:,}, past the end of the file")
        chunks.append((kind, raw[at + 8:at + 8 + size]))
        at += 8 + size
    if not chunks or chunks[0][0] != _JSON_CHUNK:
        raise refuse("its first chunk is not JSON")
    blob = chunks[1][1] if len(chunks) > 1 and chunks[1][0] == _BIN_CHUNK else None
    return chunks[0][1], blob


def _inside(gltf: Path, uri: object, field: str) -> Path:
    """The file a relative URI of ``gltf`` names, refused unless it lies inside the glTF
    file's folder: no scheme (``file:``, ``http:``), no absolute path, no ``..``, no link
    that leads out (reading devices and FIFOs is refused when the file is read)."""
    shown = f"{gltf}: {field} {uri!r}"
    if not isinstance(uri, str) or not uri:
        raise MotionMatchError(f"{shown} is not a file name; give a relative path")
    rel = unquote(uri)
    first = rel.split("/", 1)[0]
    if ":" in first or rel.startswith(("/", "\\")) or "\\" in rel or "\0" in rel \
            or ".." in PurePosixPath(rel).parts:
        raise MotionMatchError(f"{shown} is not inside the file's folder; put the file beside the .gltf and give "
                               "its name")
    folder = gltf.resolve().parent
    target = (folder / rel).resolve()
    if not target.is_relative_to(folder):
        raise MotionMatchError(f"{shown} leads out of the file's folder (a link); put the file beside the .gltf")
    return target


def _data_uri_payload(gltf: Path, uri: str, field: str) -> str:
    """The base64 text of a data URI, refused unless it holds at most :data:`MAX_DATA_URI_BYTES`."""
    head, comma, payload = uri.partition(",")
    if not comma or not head.endswith(";base64"):
        raise MotionMatchError(f"{gltf}: {field} is a data URI without base64 data; export the mesh as a .glb")
    if len(payload) > (MAX_DATA_URI_BYTES + 2) // 3 * 4:
        raise MotionMatchError(f"{gltf}: {field} holds {len(payload) * 3 // 4:,} bytes, more than the "
                               f"{MAX_DATA_URI_BYTES:,} a data URI may hold "
                               "(motionmatch.io.user_mesh.MAX_DATA_URI_BYTES); export the mesh as a .glb")
    return payload


def _data_uri(gltf: Path, uri: str, field: str) -> bytes:
    """The bytes of a base64 data URI of at most :data:`MAX_DATA_URI_BYTES`."""
    try:
        return base64.b64decode(_data_uri_payload(gltf, uri, field), validate=True)
    except ValueError:
        raise MotionMatchError(f"{gltf}: {field} is not valid base64; export the mesh as a .glb") from None


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
