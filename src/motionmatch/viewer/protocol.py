"""The viewer's wire format: compact binary pose frames (server -> page).

Every simulation tick the server sends one binary websocket message with the pose of
every character of the session. Everything else (commands from the page, replies,
debug data, scene changes) is JSON text; see :mod:`motionmatch.viewer.messages`.

Pose frame, little-endian (``FRAME_HEADER`` then one block per character)::

    offset size  field
    0      1     kind            u8   = 1 (KIND_POSE)
    1      1     version         u8   = PROTOCOL_VERSION
    2      2     flags           u16  FLAG_PAUSED | FLAG_HISTORY | FLAG_PARTIAL
    4      4     tick            u32  simulation tick (60 per simulated second)
    8      4     time            f32  simulated seconds
    12     2     characters      u16  number of blocks that follow
    14     2     history         u16  frames held in the scrub history
    16     2     history_back    u16  frames back from the newest (0: live)
    18     2     reserved        u16

    per character (``CHAR_HEADER``, 32 bytes, then the joints' positions and rotations):
    0      2     id              u16
    2      2     joints          u16  J
    4      1     mode            u8   index into MODES
    5      1     flags           u8   CF_SEARCHED | CF_TRANSITIONED | CF_SELECTED | CF_FOLLOWING | CF_CLIP
    6      1     contacts        u8   bit k: foot k (skeleton's ``feet[k]``) is planted
    7      1     reserved        u8
    8      12    root            3 x f32  world position of joint 0 (the character root), metres
    20     4     yaw             f32  heading of the root about +Y (radians; facing = (sin, 0, cos))
    24     4     scale           f32  metres per unit of the joint offsets below
    28     4     reserved        u32
    32     6J    joints          J x 3 x i16  world joint position minus the root position, / scale
    32+6J  6J    rotations       J x 3 x u16  world joint rotation, "smallest three" (below)
    ...    0|2   padding         to a multiple of 4 bytes

A character of 23 joints takes 32 + 138 + 138 = 308 bytes; 50 of them at 60 Hz,
0.92 MB/s. Joint positions are quantised to ``scale`` (about 0.1 mm for a human),
relative to the root so a character far from the origin keeps that precision.

Rotations (unit quaternions (w, x, y, z), q and -q the same) in three 16-bit words: the
component of largest magnitude is made positive and left out (the page recovers it as
sqrt(1 - the others' squares)); the other three, in order, each in [-1/sqrt 2, 1/sqrt 2],
are stored in the low 15 bits of the words as round((v sqrt 2 + 1) / 2 x 32767); the
left-out component's index (0..3) is bit 15 of word 0 (low bit) and of word 1 (high
bit). A rotation's error is at most about 0.007 degrees. The page skins each character's mesh
with them (bone matrix = translation(position) x rotation, the mesh bound in the
skeleton's rest pose, :mod:`motionmatch.viewer.body`); the stick figure uses the positions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numba
import numpy as np

PROTOCOL_VERSION = 3
KIND_POSE = 1

FLAG_PAUSED = 1
FLAG_HISTORY = 2
#: the frame holds only some characters (those outside the page's view are sent less
#: often): the page keeps the last pose of the others
FLAG_PARTIAL = 4

CF_SEARCHED = 1
CF_TRANSITIONED = 2
CF_SELECTED = 4
CF_FOLLOWING = 8
CF_CLIP = 16

#: Mode names by code (``mode`` byte of a character block).
MODES = ("idle", "locomotion", "jump", "dance", "creep", "clip", "follow", "agent", "punch")
MODE_CODES = {m: i for i, m in enumerate(MODES)}

FRAME_HEADER = struct.Struct("<BBHIfHHHH")
CHAR_HEADER = struct.Struct("<HHBBBB3fffI")
assert FRAME_HEADER.size == 20 and CHAR_HEADER.size == 32

_I16 = 32767


def char_block_size(joints: int) -> int:
    """Bytes of one character block with ``joints`` joints (padded to 4)."""
    n = CHAR_HEADER.size + 12 * joints
    return n + (-n) % 4


def pose_scale(extent: float) -> float:
    """Quantisation step (m) for joints up to ``extent`` metres from the root, with a 50% margin."""
    return max(float(extent), 0.05) * 1.5 / _I16


@dataclass
class CharacterPose:
    """One character's block before encoding."""

    id: int
    positions: np.ndarray      # [J, 3] world joint positions, joint 0 = root
    rotations: np.ndarray      # [J, 4] world joint rotations (w, x, y, z)
    yaw: float
    scale: float
    mode: str = "idle"
    flags: int = 0
    contacts: int = 0


def encode_frame(tick: int, time: float, chars: list[CharacterPose], *, flags: int = 0, history: int = 0,
                 history_back: int = 0) -> bytes:
    """The binary pose frame of one tick (every character's joints quantised together: a
    few array operations for the lot, then each block's header and bytes put in place)."""
    sizes = [len(c.positions) for c in chars]
    size = FRAME_HEADER.size + sum(char_block_size(J) for J in sizes)
    buf = bytearray(size)
    FRAME_HEADER.pack_into(buf, 0, KIND_POSE, PROTOCOL_VERSION, flags & 0xFFFF, tick & 0xFFFFFFFF, float(time),
                           len(chars), min(history, 0xFFFF), min(history_back, 0xFFFF), 0)
    if not chars:
        return bytes(buf)
    rot = encode_rotations(np.concatenate([np.asarray(c.rotations, dtype=np.float64).reshape(-1, 4) for c in chars]))
    pos = np.concatenate([np.asarray(c.positions, dtype=np.float64).reshape(-1, 3) for c in chars])  # [sum J, 3]
    counts = np.asarray(sizes, dtype=np.int64)
    roots = pos[np.cumsum(counts) - counts]  # [A, 3] each character's joint 0
    scale = np.repeat(np.array([c.scale for c in chars], dtype=np.float64), counts)[:, None]
    q = np.clip(np.rint((pos - np.repeat(roots, counts, axis=0)) / scale), -_I16, _I16).astype("<i2").tobytes()
    rot = rot.tobytes()
    off, r0 = FRAME_HEADER.size, 0
    for c, J, root in zip(chars, sizes, roots.tolist()):
        CHAR_HEADER.pack_into(buf, off, c.id & 0xFFFF, J, MODE_CODES.get(c.mode, 0), c.flags & 0xFF,
                              c.contacts & 0xFF, 0, root[0], root[1], root[2], float(c.yaw), float(c.scale), 0)
        start = off + CHAR_HEADER.size
        buf[start:start + 6 * J] = q[r0:r0 + 6 * J]
        buf[start + 6 * J:start + 12 * J] = rot[r0:r0 + 6 * J]
        r0 += 6 * J
        off += char_block_size(J)
    return bytes(buf)


_ROT_RANGE = 2.0 ** -0.5   # the three smallest components of a unit quaternion lie within +-1/sqrt 2
_OTHERS = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])


def encode_rotations(rotations: np.ndarray) -> np.ndarray:
    """``[N, 4]`` unit quaternions (w, x, y, z) as ``[N, 3]`` ``<u2`` words ("smallest
    three", see the module doc): one compiled pass."""
    r = np.ascontiguousarray(rotations, dtype=np.float64).reshape(-1, 4)
    out = np.empty((len(r), 3), dtype="<u2")
    _encode_rotations(r, out)
    return out


@numba.njit(cache=True, nogil=True)
def _encode_rotations(r, out):  # pragma: no cover - compiled
    """Each row of ``r [N, 4]`` normalised, its largest component's sign made positive and
    the other three quantised into ``out [N, 3]`` (uint16), the largest's index in the top
    bits of the first two words."""
    half = 0.5 * _I16
    for n in range(r.shape[0]):
        w, x, y, z = r[n, 0], r[n, 1], r[n, 2], r[n, 3]
        norm = max(np.sqrt(((w * w + x * x) + y * y) + z * z), 1e-12)
        q0, q1, q2, q3 = w / norm, x / norm, y / norm, z / norm
        big = 0
        top = abs(q0)
        if abs(q1) > top:
            big, top = 1, abs(q1)
        if abs(q2) > top:
            big, top = 2, abs(q2)
        if abs(q3) > top:
            big = 3
        q = (q0, q1, q2, q3)
        sign = -1.0 if q[big] < 0.0 else 1.0
        k = 0
        for c in range(4):
            if c == big:
                continue
            v = np.rint((q[c] * sign / _ROT_RANGE + 1.0) * half)
            out[n, k] = np.uint16(min(max(v, 0.0), float(_I16)))
            k += 1
        out[n, 0] |= np.uint16((big & 1) << 15)
        out[n, 1] |= np.uint16((big >> 1) << 15)


def decode_rotations(words: np.ndarray) -> np.ndarray:
    """``[N, 3]`` words of :func:`encode_rotations` as ``[N, 4]`` unit quaternions."""
    w = np.asarray(words, dtype=np.int64).reshape(-1, 3)
    big = (w[:, 0] >> 15) | ((w[:, 1] >> 15) << 1)
    small = ((w & 0x7FFF) / (0.5 * _I16) - 1.0) * _ROT_RANGE
    out = np.empty((len(w), 4))
    rows = np.arange(len(w))
    out[rows[:, None], _OTHERS[big]] = small
    out[rows, big] = np.sqrt(np.maximum(1.0 - np.sum(small * small, axis=1), 0.0))
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def with_history_flags(frame: bytes, *, paused: bool, history: int, back: int) -> bytes:
    """A stored frame re-stamped for replay while scrubbing (``FLAG_HISTORY``)."""
    b = bytearray(frame)
    kind, ver, flags, tick, t, n, _h, _b, _r = FRAME_HEADER.unpack_from(b, 0)
    flags = (flags | FLAG_HISTORY) if back > 0 else (flags & ~FLAG_HISTORY)
    flags = (flags | FLAG_PAUSED) if paused else (flags & ~FLAG_PAUSED)
    FRAME_HEADER.pack_into(b, 0, kind, ver, flags, tick, t, n, min(history, 0xFFFF), min(back, 0xFFFF), 0)
    return bytes(b)


@dataclass
class DecodedCharacter:
    id: int
    mode: str
    flags: int
    contacts: int
    root: np.ndarray
    yaw: float
    positions: np.ndarray  # [J, 3] world
    rotations: np.ndarray  # [J, 4] world (w, x, y, z), unit


@dataclass
class DecodedFrame:
    flags: int
    tick: int
    time: float
    history: int
    history_back: int
    characters: list[DecodedCharacter]

    def by_id(self, cid: int) -> DecodedCharacter:
        for c in self.characters:
            if c.id == cid:
                return c
        raise KeyError(cid)


def decode_frame(data: bytes) -> DecodedFrame:
    """Parse a pose frame (tests and Python clients; the page has its own reader)."""
    if len(data) < FRAME_HEADER.size:
        raise ValueError("pose frame too short")
    kind, ver, flags, tick, t, n, hist, back, _ = FRAME_HEADER.unpack_from(data, 0)
    if kind != KIND_POSE or ver != PROTOCOL_VERSION:
        raise ValueError(f"not a version-{PROTOCOL_VERSION} pose frame (kind {kind}, version {ver})")
    off = FRAME_HEADER.size
    chars = []
    for _ in range(n):
        cid, J, mode, cflags, contacts, _r, x, y, z, yaw, scale, _r2 = CHAR_HEADER.unpack_from(data, off)
        q = np.frombuffer(data, dtype="<i2", count=3 * J, offset=off + CHAR_HEADER.size).reshape(J, 3)
        root = np.array([x, y, z])
        r = decode_rotations(np.frombuffer(data, dtype="<u2", count=3 * J, offset=off + CHAR_HEADER.size + 6 * J))
        chars.append(DecodedCharacter(cid, MODES[mode] if mode < len(MODES) else "?", cflags, contacts, root, yaw,
                                      root + q.astype(np.float64) * scale, r))
        off += char_block_size(J)
    if off != len(data):
        raise ValueError(f"pose frame has {len(data) - off} trailing bytes")
    return DecodedFrame(flags, tick, t, hist, back, chars)
