"""The characters' bodies for the page: each skeleton's mannequin mesh, sent once.

The page draws every character as a skinned mesh (three.js ``SkinnedMesh``, skinned on
the GPU): the mannequin of its skeleton (:func:`motionmatch.anim.mannequin.mannequin_for`,
built in a bind pose chosen from the skeleton's motion), whose bones follow the world joint
positions and rotations of the pose frames (:mod:`motionmatch.viewer.protocol`). A
skeleton's mesh is built once per viewer, on a worker thread (the database's while the
viewer prepares, before pages connect), and fetched by the page over HTTP
(``GET /api/body/{key}``: :class:`Bodies`); the skeleton's entry in the ``welcome`` and
``characters`` messages names its URL (``"body"``).

Binary layout (little-endian, every section a multiple of 4 bytes)::

    offset  size   field
    0       4      magic          b"MMB1"
    4       4      vertices       u32  V
    8       4      triangles      u32  F
    12      4      joints         u32  J (the skeleton's joints; the frames' bone order)
    16      12V    positions      V x 3 f32  rest pose, metres
    ...     12V    normals        V x 3 f32  unit
    ...     12F    triangles      F x 3 u32  counter-clockwise seen from outside
    ...     8V     skin joints    V x 4 u16  joint indices
    ...     16V    skin weights   V x 4 f32  each row sums to 1
    ...     64J    inverse bind   J x 16 f32 column-major 4x4: the inverse of each joint's
                                  world transform in the bind pose

A 23-joint human of about 6,000 vertices takes about 0.4 MB.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from concurrent.futures import Executor, Future

import numpy as np

from motionmatch.anim.mannequin import Mannequin, mannequin_for
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton

__all__ = ["BODY_MAGIC", "Bodies", "database_sample", "decode_body", "encode_body", "skeleton_key"]

BODY_MAGIC = b"MMB1"
_HEAD = struct.Struct("<4sIII")


def skeleton_key(skeleton: Skeleton) -> str:
    """A short content key of a skeleton (hierarchy and offsets): equal skeletons share a body."""
    h = hashlib.sha1()
    h.update(np.asarray(skeleton.parents, dtype="<i8").tobytes())
    h.update(np.round(np.asarray(skeleton.offsets, dtype=np.float64), 6).astype("<f8").tobytes())
    return h.hexdigest()[:20]


def encode_body(body: Mannequin) -> bytes:
    """A mannequin in the page's binary layout (module doc)."""
    m = body
    V, F, J = len(m.vertices), len(m.triangles), len(m.bind_positions)
    inv_bind = np.asarray(m.inverse_bind_matrices(), dtype=np.float64)
    parts = [
        _HEAD.pack(BODY_MAGIC, V, F, J),
        np.asarray(m.vertices, dtype="<f4").tobytes(),
        np.asarray(m.normals, dtype="<f4").tobytes(),
        np.asarray(m.triangles, dtype="<u4").tobytes(),
        np.asarray(m.joints, dtype="<u2").tobytes(),
        np.asarray(m.weights, dtype="<f4").tobytes(),
        inv_bind.transpose(0, 2, 1).astype("<f4").tobytes(),  # column-major, as three.js reads a Matrix4
    ]
    return b"".join(parts)


def decode_body(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an encoded body (tests and Python clients; the page has its own reader)."""
    magic, V, F, J = _HEAD.unpack_from(data, 0)
    if magic != BODY_MAGIC:
        raise ValueError(f"not a body (magic {magic!r})")
    off = _HEAD.size
    out = {}
    for name, dtype, shape in (("vertices", "<f4", (V, 3)), ("normals", "<f4", (V, 3)), ("triangles", "<u4", (F, 3)),
                               ("joints", "<u2", (V, 4)), ("weights", "<f4", (V, 4)),
                               ("inverse_bind", "<f4", (J, 4, 4))):
        n = int(np.prod(shape))
        out[name] = np.frombuffer(data, dtype=dtype, count=n, offset=off).reshape(shape)
        off += n * np.dtype(dtype).itemsize
    if off != len(data):
        raise ValueError(f"body has {len(data) - off} trailing bytes")
    out["inverse_bind"] = out["inverse_bind"].transpose(0, 2, 1)  # back to row-major
    return out


class Bodies:
    """The bodies of a viewer's skeletons by key, each built once (on ``pool``) when first
    asked for: by the page (:meth:`get`, the HTTP route, off the event loop), an export
    (:meth:`mannequin`) or :meth:`start` (the viewer's preparation, before pages connect).
    A skeleton is registered with a motion of it, for the bind pose."""

    def __init__(self, pool: Executor):
        self.pool = pool
        self._lock = threading.Lock()
        self._motions: dict[str, Motion] = {}
        self._futures: dict[str, Future] = {}

    def register(self, motion: Motion, *, start: bool = False) -> str:
        """Know the body of ``motion``'s skeleton (its bind pose chosen from ``motion``,
        :func:`~motionmatch.anim.mannequin.mannequin_for`; the first motion registered for a
        skeleton is kept); ``start``: build it now. Returns the page's URL of it."""
        key = skeleton_key(motion.skeleton)
        with self._lock:
            self._motions.setdefault(key, motion)
        if start:
            self._future(key)
        return f"/api/body/{key}"

    def _future(self, key: str) -> Future | None:
        with self._lock:
            fut = self._futures.get(key)
            if fut is None and key in self._motions:
                fut = self._futures[key] = self.pool.submit(_build, self._motions[key])
            return fut

    def get(self, key: str, timeout: float = 120.0) -> bytes | None:
        """The encoded body of ``key`` (``None``: no such skeleton); raises what building it raised."""
        fut = self._future(key)
        return None if fut is None else fut.result(timeout)[1]

    def mannequin(self, skeleton: Skeleton, timeout: float = 120.0) -> Mannequin | None:
        """The mannequin the page draws for ``skeleton`` (``None``: not registered)."""
        fut = self._future(skeleton_key(skeleton))
        return None if fut is None else fut.result(timeout)[0]


def _build(motion: Motion) -> tuple[Mannequin, bytes]:
    body = mannequin_for(motion)
    return body, encode_body(body)


def database_sample(db, frames: int = 64) -> Motion:
    """A :class:`~motionmatch.anim.Motion` of ``frames`` frames spread over the database
    ``db`` (its characters' body is built in one of them)."""
    idx = np.unique(np.linspace(0, db.num_frames - 1, min(frames, db.num_frames)).astype(np.int64))
    return Motion(db.skeleton, db.rotations[idx].astype(np.float64), db.translations[idx].astype(np.float64), db.fps,
                  name="database sample")
