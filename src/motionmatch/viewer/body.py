"""The characters' bodies for the page: each skeleton's mannequin mesh, sent once.

The page draws every character as a skinned mesh (three.js ``SkinnedMesh``, skinned on
the GPU): the mannequin of its skeleton (:func:`motionmatch.anim.mannequin.mannequin_for`,
built in a bind pose chosen from the skeleton's motion), whose bones follow the world joint
positions and rotations of the pose frames (:mod:`motionmatch.viewer.protocol`). A
skeleton's mesh is built once per viewer, on a worker thread (the database's while the
viewer prepares, before pages connect), and fetched by the page over HTTP
(``GET /api/body/{key}``: :class:`Bodies`); the skeleton's entry in the ``welcome`` and
``characters`` messages names its URL (``"body"``).

Two levels of detail: the mannequin itself, and a coarse copy of it
(:func:`coarse_mesh`: vertices merged on a grid of about 1/36 of the body's size, those
of one piece of surface and the same dominant joint only) that the page draws for characters far from the camera
and for every character's shadow. Both share the skeleton and the bind pose.

Binary layout (little-endian, every section a multiple of 4 bytes)::

    offset  size   field
    0       4      magic          b"MMB2"
    4       4      joints         u32  J (the skeleton's joints; the frames' bone order)
    8       4      vertices       u32  V  (the mannequin)
    12      4      triangles      u32  F
    16      4      vertices       u32  V2 (the coarse copy)
    20      4      triangles      u32  F2
    24      64J    inverse bind   J x 16 f32 column-major 4x4: the inverse of each joint's
                                  world transform in the bind pose
    then, for the mannequin (V, F) and then the coarse copy (V2, F2):
            12V    positions      V x 3 f32  bind pose, metres
            12V    normals        V x 3 f32  unit
            12F    triangles      F x 3 u32  counter-clockwise seen from outside
            8V     skin joints    V x 4 u16  joint indices
            16V    skin weights   V x 4 f32  each row sums to 1

A 23-joint human (LAFAN1) of about 7,000 vertices (coarse: about 1,000) takes about 0.6 MB.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from concurrent.futures import Executor
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from motionmatch.anim.mannequin import Mannequin, mannequin_for
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton

__all__ = ["BODY_MAGIC", "COARSE_STEP", "Bodies", "coarse_mesh", "database_sample", "decode_body", "encode_body",
           "skeleton_key"]

BODY_MAGIC = b"MMB2"
_HEAD = struct.Struct("<4sIIIII")
#: The coarse copy's grid step, as a fraction of the body's longest side.
COARSE_STEP = 1.0 / 36.0
_MESH = (("vertices", "<f4", 3), ("normals", "<f4", 3), ("triangles", "<u4", 3), ("joints", "<u2", 4),
         ("weights", "<f4", 4))


def skeleton_key(skeleton: Skeleton) -> str:
    """A short content key of a skeleton (hierarchy and offsets): equal skeletons share a body."""
    h = hashlib.sha1()
    h.update(np.asarray(skeleton.parents, dtype="<i8").tobytes())
    h.update(np.round(np.asarray(skeleton.offsets, dtype=np.float64), 6).astype("<f8").tobytes())
    return h.hexdigest()[:20]


def coarse_mesh(body: Mannequin, step: float | None = None) -> dict[str, np.ndarray]:
    """A coarse copy of a mannequin (vertex clustering): the vertices of one grid cell of
    side ``step`` (m; default :data:`COARSE_STEP` of the body's longest side) that share
    their dominant joint and its weight (in thirds) and are joined by edges within the cell become one, at their
    mean, with their summed skin weights (the four largest, normalised); triangles that
    collapse are dropped. Keys as :data:`_MESH`."""
    v = np.asarray(body.vertices, dtype=np.float64)
    joints = np.asarray(body.joints, dtype=np.int64)
    w = np.asarray(body.weights, dtype=np.float64)
    J = len(body.bind_positions)
    if step is None:
        step = float(np.ptp(v, axis=0).max()) * COARSE_STEP
    dominant = joints[np.arange(len(v)), np.argmax(w, axis=1)]
    cell = np.floor((v - v.min(axis=0)) / step).astype(np.int64)
    # and how much of it its dominant joint carries (thirds): a crease where a limb's blend
    # meets a rigid part (the thigh under the pelvis) is not averaged into one vertex
    blend = np.rint(np.max(w, axis=1) * 3).astype(np.int64)
    _, key = np.unique(np.column_stack([cell, dominant, blend]), axis=0, return_inverse=True)
    key = key.reshape(-1)
    # one vertex per piece of surface in a cell: vertices joined by edges within it (two
    # surfaces that only pass near each other, an arm beside the chest, stay apart)
    tri = np.asarray(body.triangles, dtype=np.int64)
    a, b = tri.reshape(-1), np.roll(tri, -1, axis=1).reshape(-1)
    inside = key[a] == key[b]
    graph = coo_matrix((np.ones(int(inside.sum())), (a[inside], b[inside])), shape=(len(v), len(v)))
    C, inv = connected_components(graph, directed=False)
    count = np.bincount(inv, minlength=C)[:, None]
    pos = np.column_stack([np.bincount(inv, v[:, k], C) for k in range(3)]) / count
    nrm = np.column_stack([np.bincount(inv, body.normals[:, k].astype(np.float64), C) for k in range(3)])
    nrm /= np.maximum(np.linalg.norm(nrm, axis=1, keepdims=True), 1e-12)
    W = np.zeros((C, J))
    np.add.at(W, (np.repeat(inv, 4), joints.reshape(-1)), w.reshape(-1))
    top = np.argsort(-W, axis=1, kind="stable")[:, :4]
    tw = np.take_along_axis(W, top, axis=1)
    tw /= tw.sum(axis=1, keepdims=True)
    top[tw == 0.0] = 0
    t = inv[tri]
    t = t[(t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])]
    _, first = np.unique(np.sort(t, axis=1), axis=0, return_index=True)
    t = t[np.sort(first)]
    return {"vertices": pos, "normals": nrm, "triangles": t, "joints": top, "weights": tw}


def encode_body(body: Mannequin) -> bytes:
    """A mannequin and its coarse copy in the page's binary layout (module doc)."""
    full = {"vertices": body.vertices, "normals": body.normals, "triangles": body.triangles, "joints": body.joints,
            "weights": body.weights}
    low = coarse_mesh(body)
    J = len(body.bind_positions)
    inv_bind = np.asarray(body.inverse_bind_matrices(), dtype=np.float64)
    parts = [_HEAD.pack(BODY_MAGIC, J, len(full["vertices"]), len(full["triangles"]), len(low["vertices"]),
                        len(low["triangles"])),
             inv_bind.transpose(0, 2, 1).astype("<f4").tobytes()]  # column-major, as three.js reads a Matrix4
    for mesh in (full, low):
        parts += [np.asarray(mesh[name], dtype=dtype).tobytes() for name, dtype, _ in _MESH]
    return b"".join(parts)


def decode_body(data: bytes) -> dict:
    """The arrays of an encoded body (tests and Python clients; the page has its own
    reader): ``inverse_bind`` ``(J, 4, 4)`` row-major, the mannequin's arrays by the keys
    of :data:`_MESH` and its coarse copy's under ``"coarse"``."""
    magic, J, V, F, V2, F2 = _HEAD.unpack_from(data, 0)
    if magic != BODY_MAGIC:
        raise ValueError(f"not a body (magic {magic!r})")
    off = _HEAD.size
    inv = np.frombuffer(data, dtype="<f4", count=16 * J, offset=off).reshape(J, 4, 4).transpose(0, 2, 1)
    off += 64 * J
    meshes = []
    for nv, nf in ((V, F), (V2, F2)):
        mesh = {}
        for name, dtype, width in _MESH:
            n = (nf if name == "triangles" else nv) * width
            mesh[name] = np.frombuffer(data, dtype=dtype, count=n, offset=off).reshape(-1, width)
            off += n * np.dtype(dtype).itemsize
        meshes.append(mesh)
    if off != len(data):
        raise ValueError(f"body has {len(data) - off} trailing bytes")
    return {**meshes[0], "inverse_bind": inv, "coarse": meshes[1]}


class Bodies:
    """The bodies of a viewer's skeletons by key, each built once, in the thread that first
    asks for it: the page's (:meth:`get`, the HTTP route, off the event loop), an export's
    (:meth:`mannequin`), or ``pool`` (:meth:`register` with ``start``: the viewer's
    preparation, before pages connect); others asking meanwhile wait for it. A skeleton is
    registered with a motion of it, for the bind pose."""

    def __init__(self, pool: Executor, user_mesh: Path | None = None):
        self.pool = pool
        self.user_mesh = user_mesh  # drawn for the skeletons it fits (io.user_mesh), the mannequin for others
        self._lock = threading.Lock()
        self._motions: dict[str, Motion] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._built: dict[str, tuple[Mannequin, bytes] | BaseException] = {}
        self._added: list[str] = []  # keys of the bodies added (oldest first)

    def register(self, motion: Motion, *, start: bool = False) -> str:
        """Know the body of ``motion``'s skeleton (its bind pose chosen from ``motion``,
        :func:`~motionmatch.anim.mannequin.mannequin_for`; the first motion registered for a
        skeleton is kept); ``start``: build it now on the pool. Returns the page's URL of it."""
        key = skeleton_key(motion.skeleton)
        with self._lock:
            if key not in self._motions:
                self._motions[key] = motion
                self._locks[key] = threading.Lock()
        if start:
            self.pool.submit(self._body, key)
        return f"/api/body/{key}"

    def _body(self, key: str) -> tuple[Mannequin, bytes] | None:
        with self._lock:
            lock = self._locks.get(key)
        if lock is None:
            return None
        with lock:
            if key not in self._built:
                if key not in self._motions:  # an added body, forgotten meanwhile
                    return None
                try:
                    self._built[key] = _build(self._motions[key], self.user_mesh)
                except Exception as e:  # kept: every later request gets the same one-line reason
                    self._built[key] = e
        got = self._built.get(key)  # (an added body may have been forgotten meanwhile)
        if got is None:
            return None
        if isinstance(got, BaseException):
            raise got
        return got

    #: Bodies added with :meth:`add` (users' rigs) kept at once; older ones are forgotten.
    MAX_ADDED = 16

    def add(self, skeleton: Skeleton, body: Mannequin, tag: str = "") -> str:
        """Keep a body built elsewhere (a user's rig: its own skinned mesh, or its mannequin)
        for ``skeleton``; ``tag`` tells apart bodies of one skeleton (e.g. a hash of the
        mesh). Returns the page's URL of it. At most :data:`MAX_ADDED` are kept: the oldest
        go (a page still drawing one then draws stick figures)."""
        key = hashlib.sha1(f"{skeleton_key(skeleton)}:{tag}".encode()).hexdigest()[:20]
        built = (body, encode_body(body))
        with self._lock:
            if key not in self._locks:
                self._locks[key] = threading.Lock()
                self._added.append(key)
            self._built[key] = built
            while len(self._added) > self.MAX_ADDED:
                old = self._added.pop(0)
                self._locks.pop(old, None)
                self._built.pop(old, None)
        return f"/api/body/{key}"

    def get(self, key: str) -> bytes | None:
        """The encoded body of ``key`` (``None``: no such skeleton); raises what building it raised."""
        got = self._body(key)
        return None if got is None else got[1]

    def mannequin(self, skeleton: Skeleton) -> Mannequin | None:
        """The mannequin the page draws for ``skeleton`` (``None``: not registered)."""
        got = self._body(skeleton_key(skeleton))
        return None if got is None else got[0]


def _build(motion: Motion, user_mesh: Path | None = None) -> tuple[Mannequin, bytes]:
    body = None
    if user_mesh is not None:
        from motionmatch.errors import MotionMatchError
        from motionmatch.io.user_mesh import read_user_mesh

        try:
            body = read_user_mesh(user_mesh, motion.skeleton)
        except MotionMatchError:  # another skeleton (a GenMM example's): its own mannequin
            body = None
    if body is None:
        body = mannequin_for(motion)
    return body, encode_body(body)


def database_sample(db, frames: int = 64) -> Motion:
    """A :class:`~motionmatch.anim.Motion` of ``frames`` frames spread over the database
    ``db`` (its characters' body is built in one of them)."""
    idx = np.unique(np.linspace(0, db.num_frames - 1, min(frames, db.num_frames)).astype(np.int64))
    return Motion(db.skeleton, db.rotations[idx].astype(np.float64), db.translations[idx].astype(np.float64), db.fps,
                  name="database sample")
