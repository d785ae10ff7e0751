"""BVH reading and writing.

The hierarchy is parsed token by token (it is small); the MOTION block is parsed in
bulk by compiled kernels (:mod:`motionmatch.anim._bvh_numbers`), never value by value in
Python: one pass turns the text into channel values, a second turns the channel values
into local quaternions and translations. Conventions at the boundary:

* Rotation channels are Euler angles in degrees, applied in the listed order
  (``Zrotation Yrotation Xrotation`` means ``R = Rz * Ry * Rx``), per joint.
* Position channels, on any joint, *replace* that joint's OFFSET by the animated
  translation (the convention of Bandai-Namco's and LAFAN1's files); a joint with only
  some position channels keeps its OFFSET on the other axes.
* Lengths are converted to metres at import (``units``), and back on export.
* Joints are numbered in file order (depth-first, children in file order); the writer
  writes them in that order too, so a skeleton whose joints are numbered otherwise comes
  back renumbered (same names, same hierarchy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from motionmatch._files import atomic_write
from motionmatch.anim import quat
from motionmatch.anim._bvh_numbers import (
    NON_FINITE,
    NOT_A_NUMBER,
    TOO_MANY_LINES,
    WRONG_COUNT,
    parse_frames,
)
from motionmatch.anim._bvh_numbers import channels_to_local as _channels_to_local_kernel
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import POSITION_CHANNELS, ROTATION_CHANNELS, Skeleton
from motionmatch.errors import BVHError, InputError, SkeletonError

UNIT_SCALES = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254, "inch": 0.0254, "dm": 0.1}
_VALID_CHANNELS = set(POSITION_CHANNELS) | set(ROTATION_CHANNELS)
_CHANNEL_NAMES = "Xposition Yposition Zposition Xrotation Yrotation Zrotation"
_TOKEN = re.compile(rb"\S+")
# Numbers as the frame parser reads them (Python's float() would also take '1_0', 'nan', ...).
_FLOAT = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(rb"[+-]?\d+")
_NON_FINITE = re.compile(rb"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_FRAME_TIME = re.compile(rb"Frame\s+Time\s*:?[^\n]*")
_KEYWORDS = frozenset({b"HIERARCHY", b"ROOT", b"JOINT", b"End", b"OFFSET", b"CHANNELS", b"{", b"}", b"MOTION"})
_BODY = "OFFSET, CHANNELS, JOINT, End Site or '}'"

MAX_BVH_JOINTS = 4096
"""Joints of one BVH file (End Sites not counted): a body with fingers and a face has a
few hundred."""
MAX_BVH_JOINT_FRAMES = 2**24
"""Frames times joints of one BVH file (16.8 million: 0.9 GB of local rotations and
translations): an hour at 60 fps of a 77-joint skeleton. Longer takes are split."""
MAX_BVH_BYTES = 2**30
"""Bytes of one BVH file (1 GiB: twice an hour at 60 fps of a 77-joint skeleton written
with ten characters a value), checked before it is read. Longer takes are split."""
MAX_INDENT = 64
"""Tabs of indentation the writer puts before a joint at most (deeper joints are written
at this depth), so that a file's size is linear in its joints however deep they nest."""


@dataclass
class _Header:
    names: list[str]
    parents: list[int]
    offsets: list[list[float]]
    channels: list[tuple[str, ...]]
    end_site_parents: list[int]
    end_site_offsets: list[list[float]]
    n_frames: int
    frame_time: float
    data_start: int   # byte offset of the first frame line
    data_line: int    # 1-based line number of the first frame line


def _show(tok: bytes) -> str:
    return repr(tok.decode("utf-8", errors="replace"))


def _float(tok: bytes) -> float | None:
    """A decimal number token as a float (inf for 'inf'/'nan' words, to be reported as
    non-finite); ``None`` when it is not a number."""
    if _FLOAT.fullmatch(tok):
        return float(tok)
    if _NON_FINITE.fullmatch(tok):
        return float("inf")
    return None


def _parse_header(raw: bytes, path: str) -> _Header:
    """Parse HIERARCHY and the MOTION header lines; errors name the line."""
    m = _FRAME_TIME.search(raw)
    # Without a 'Frame Time' line the whole file is read as header: the walk below then
    # says where it stops making sense (truncated hierarchy, missing MOTION, ...).
    end = len(raw) if m is None else m.end()
    toks = raw[:end].split()
    n_tok = len(toks)
    positions: list[int] = []

    def line_at(byte: int) -> int:
        return raw.count(b"\n", 0, byte) + 1

    def line(k: int) -> int:
        """1-based line of token ``k`` (token positions are found only on errors)."""
        if not positions:
            positions.extend(mm.start() for mm in _TOKEN.finditer(raw, 0, end))
        return line_at(positions[min(k, n_tok - 1)]) if n_tok else 1

    def error(k: int, msg: str) -> BVHError:
        return BVHError(path, line(k), msg)

    k = 0

    def take(expect: str) -> bytes:
        nonlocal k
        if k >= n_tok:
            last = len(raw[:end].rstrip())
            raise BVHError(path, line_at(last), f"the file ends here (truncated?); expected {expect}")
        k += 1
        return toks[k - 1]

    def take_float(what: str) -> float:
        tok = take(f"a number for {what}")
        v = _float(tok)
        if v is None:
            raise error(k - 1, f"expected a number for {what}, found {_show(tok)}")
        if not np.isfinite(v):
            raise error(k - 1, f"{what} is {_show(tok)}; expected a finite number")
        return v

    def take_name(keyword: str) -> str:
        tok = take(f"a joint name after {keyword}")
        if tok in (b"{", b"}"):
            raise error(k - 1, f"expected a joint name after {keyword}, found {_show(tok)}")
        name = tok.decode("utf-8", errors="replace")
        if name in index:
            raise error(k - 1, f"duplicate joint name {name!r} (first defined on line {line(index[name])}); "
                        "expected a unique name for every joint")
        index[name] = k - 1
        return name

    def take_open(after: str) -> None:
        tok = take(f"'{{' after {after}")
        if tok != b"{":
            raise error(k - 1, f"expected '{{' after {after}, found {_show(tok)}")

    def take_value(key: bytes, expect: str) -> bytes:
        """The value of ``Key: value`` written as 'Key:' 'v', 'Key' ':' 'v' or 'Key:v'."""
        tok = take(expect)
        if not tok.startswith(key):
            raise error(k - 1, f"expected {expect}, found {_show(tok)}")
        rest = tok[len(key):]
        if rest in (b"", b":"):
            tok = take(expect)
            if rest == b"" and tok.startswith(b":"):
                tok = tok[1:] or take(expect)
            return tok
        if rest.startswith(b":"):
            return rest[1:]
        raise error(k - 1, f"expected {expect}, found {_show(tok)}")

    names: list[str] = []
    parents: list[int] = []
    offsets: list[list[float]] = []
    channels: list[tuple[str, ...]] = []
    es_par: list[int] = []
    es_off: list[list[float]] = []
    index: dict[str, int] = {}       # joint name -> token index of its name
    has_channels: list[bool] = []
    stack: list[tuple[int, int]] = []  # (joint index or -1 for an End Site, token index of the opening)

    tok = take("'HIERARCHY'")
    if tok.upper() != b"HIERARCHY":
        shown = _show(tok[:20]) + ("..." if len(tok) > 20 else "")
        raise error(k - 1, f"not a BVH file: expected 'HIERARCHY' at the start of the file, found {shown}")
    tok = take("'ROOT <name>'")
    if tok != b"ROOT":
        raise error(k - 1, f"expected 'ROOT <name>' after HIERARCHY, found {_show(tok)}")

    def open_joint(keyword: str) -> None:
        if len(names) == MAX_BVH_JOINTS:
            raise error(k - 1, f"more than {MAX_BVH_JOINTS} joints (motionmatch.anim.bvh.MAX_BVH_JOINTS); "
                        "expected a skeleton with fewer joints")
        name = take_name(keyword)
        take_open(f"{keyword} {name}")
        names.append(name)
        parents.append(stack[-1][0] if stack else -1)
        offsets.append([0.0, 0.0, 0.0])
        channels.append(())
        has_channels.append(False)
        stack.append((len(names) - 1, k - 1))

    open_joint("ROOT")
    while stack:
        tok = take(_BODY)
        j = stack[-1][0]
        if tok == b"OFFSET":
            vals = [take_float("OFFSET"), take_float("OFFSET"), take_float("OFFSET")]
            if j < 0:
                es_off[-1] = vals
            else:
                offsets[j] = vals
        elif tok == b"CHANNELS":
            if j < 0:
                raise error(k - 1, "an End Site cannot have CHANNELS; expected OFFSET or '}'")
            if has_channels[j]:
                raise error(k - 1, f"joint {names[j]!r} has a second CHANNELS line; expected one per joint")
            has_channels[j] = True
            ntok = take("the channel count")
            if not _INT.fullmatch(ntok):
                raise error(k - 1, f"expected the number of channels after CHANNELS, found {_show(ntok)}")
            nch = int(ntok)
            if not 0 <= nch <= 6:
                raise error(k - 1, f"expected a channel count of 0 to 6, found {nch}")
            chs: list[str] = []
            for i in range(nch):
                ctok = take(f"{nch} channel names")
                if ctok in _KEYWORDS:
                    raise error(k - 1, f"CHANNELS {nch} lists only {i} channel names before {_show(ctok)}; "
                                f"expected {nch} names from {_CHANNEL_NAMES}")
                c = ctok.decode("utf-8", errors="replace")
                fixed = c[:1].upper() + c[1:].lower()
                if fixed not in _VALID_CHANNELS:
                    raise error(k - 1, f"unknown channel name {c!r}; expected one of {_CHANNEL_NAMES}")
                if fixed in chs:
                    raise error(k - 1, f"channel {c!r} listed twice for joint {names[j]!r}; expected each axis once")
                chs.append(fixed)
            channels[j] = tuple(chs)
        elif tok == b"JOINT":
            if j < 0:
                raise error(k - 1, "an End Site cannot have child joints; expected OFFSET or '}'")
            open_joint("JOINT")
        elif tok == b"End":
            site = take("'Site' after 'End'")
            if site != b"Site":
                raise error(k - 1, f"expected 'End Site', found 'End {site.decode('utf-8', errors='replace')}'")
            if j < 0:
                raise error(k - 1, "an End Site cannot contain another End Site; expected OFFSET or '}'")
            take_open("End Site")
            es_par.append(j)
            es_off.append([0.0, 0.0, 0.0])
            stack.append((-1, k - 1))
        elif tok == b"}":
            stack.pop()
        elif tok == b"ROOT":
            raise error(k - 1, "found a second ROOT inside the hierarchy; expected one ROOT per file "
                        "(is a '}' missing?)")
        elif tok == b"MOTION":
            what = "End Site" if j < 0 else f"joint {names[j]!r}"
            raise error(k - 1, f"expected '}}' to close {what} (opened on line {line(stack[-1][1])}) "
                        "before MOTION; a '}' is missing")
        else:
            t = tok.decode("utf-8", errors="replace")
            if j >= 0 and t[:1].upper() + t[1:].lower() in _VALID_CHANNELS:
                raise error(k - 1, f"channel name {t!r} after the CHANNELS list of joint {names[j]!r}: "
                            f"its count is {len(channels[j])}; expected {_BODY}")
            raise error(k - 1, f"unexpected {_show(tok)} in the hierarchy; expected {_BODY}")

    # MOTION header
    tok = take("'MOTION'")
    if tok == b"ROOT":
        raise error(k - 1, f"a second ROOT ({len(names)} joints under the first): a BVH file holds one skeleton; "
                    "give each skeleton a file of its own, or join them under one ROOT")
    if tok != b"MOTION":
        raise error(k - 1, f"expected 'MOTION' after the hierarchy, found {_show(tok)}")
    ntok = take_value(b"Frames", "'Frames: <count>'")
    if not _INT.fullmatch(ntok):
        raise error(k - 1, f"expected an integer frame count after 'Frames:', found {_show(ntok)}")
    n_frames = int(ntok) if len(ntok) <= 19 else 2**63  # a 5,000-digit count is merely too large
    if n_frames * len(names) > MAX_BVH_JOINT_FRAMES:
        raise error(k - 1, f"'Frames: {ntok[:20].decode()}{'...' if len(ntok) > 20 else ''}' for {len(names)} joints "
                    f"is more than {MAX_BVH_JOINT_FRAMES:,} joint-frames (motionmatch.anim.bvh.MAX_BVH_JOINT_FRAMES); "
                    "expected a shorter take: split the file")
    if n_frames > len(raw):
        raise error(k - 1, f"'Frames: {n_frames}' but the file has only {len(raw)} bytes (a frame takes at least "
                    "its line); expected the Frames count to match the number of frame lines")
    if n_frames <= 0:
        raise error(k - 1, f"the file declares {n_frames} frames; expected at least one frame")
    tok = take("'Frame Time: <seconds>'")
    if tok != b"Frame":
        raise error(k - 1, f"expected 'Frame Time: <seconds>' after 'Frames:', found {_show(tok)}")
    ftok = take_value(b"Time", "'Frame Time: <seconds>'")
    fk = k - 1
    frame_time = _float(ftok)
    if frame_time is None:
        raise error(fk, f"expected the frame time in seconds, found {_show(ftok)}")
    if not (np.isfinite(frame_time) and frame_time > 0 and np.isfinite(1.0 / frame_time)):
        raise error(fk, f"expected a positive frame time in seconds, found {_show(ftok)}")
    if k != n_tok:
        raise error(k, f"unexpected {_show(toks[k])} after the frame time; expected the frame values on the next line")
    if m is None:  # cannot happen: the walk above needs 'Frame Time'
        raise BVHError(path, None, "no 'Frame Time:' line")
    data_start = min(m.end() + 1, len(raw))  # just past the newline that ends the 'Frame Time' line
    return _Header(names, parents, offsets, channels, es_par, es_off, n_frames, frame_time,
                   data_start, line_at(data_start))


def _resolve_units(units: str | float, offsets: NDArray, position_values: NDArray, parents) -> float:
    if isinstance(units, (int, float, np.floating, np.integer)) and not isinstance(units, bool):
        if not (np.isfinite(units) and units > 0):
            raise ValueError(f"units scale must be a positive number of metres per file unit, got {units}")
        return float(units)
    if units in UNIT_SCALES:
        return UNIT_SCALES[units]
    if units != "auto":
        raise ValueError(f"units must be 'auto', one of {sorted(UNIT_SCALES)} or metres-per-unit as a number; got {units!r}")
    # Guess from the skeleton's size: the longest root-to-leaf chain of offsets.
    J = len(offsets)
    with np.errstate(over="ignore"):  # absurd offsets (1e200) just make a big skeleton
        lengths = np.linalg.norm(offsets, axis=1)
    chain = np.zeros(J)
    for j in range(1, J):
        chain[j] = chain[parents[j]] + lengths[j]
    size = float(chain.max()) if J > 1 else 0.0
    if size == 0.0:
        # No bones to measure (a single joint, or all offsets zero): use the animated
        # positions (rotation angles say nothing about units).
        size = float(np.abs(position_values).max()) if position_values.size else 0.0
    if size > 2000:
        return 0.001  # millimetres
    if size > 15:
        return 0.01  # centimetres: a creature of more than ~15 m in metres is implausible
    return 1.0


#: A person's height (m): what the auto unit of a humanoid aims for.
_PERSON = (1.2, 2.3)


def _humanoid_scale(names: tuple[str, ...], parents, offsets: NDArray, guess: float) -> float:
    """The auto unit of a humanoid: ``guess`` (from the skeleton's size) if it makes a person
    1.2-2.3 m tall (from the bone lengths,
    :func:`~motionmatch.anim.body_parts.body_height_from_bones`), else the first unit of
    :data:`UNIT_SCALES` that does (a rig in inches read as centimetres would be 0.7 m tall),
    else ``guess``."""
    from motionmatch.anim.body_parts import body_height_from_bones
    from motionmatch.anim.humanoid import HumanoidError, find_humanoid

    try:
        skel = Skeleton(names, np.asarray(parents, dtype=np.int64), offsets)
        roles = find_humanoid(skel)
    except (HumanoidError, SkeletonError):
        return guess
    rest = np.zeros_like(offsets)
    for j in range(1, len(names)):
        rest[j] = rest[skel.parents[j]] + offsets[j]
    height = body_height_from_bones(skel, rest, roles)
    for scale in (guess, *UNIT_SCALES.values()):
        if _PERSON[0] <= height * scale <= _PERSON[1]:
            return scale
    return guess


def _layout(channels: tuple[tuple[str, ...], ...]) -> tuple[NDArray, NDArray, NDArray, int]:
    """Per-joint column tables for the conversion kernel: ``rot_cols``, ``rot_axes``, ``pos_cols``."""
    J = len(channels)
    rot_cols = np.full((J, 3), -1, dtype=np.int64)
    rot_axes = np.zeros((J, 3), dtype=np.int64)
    pos_cols = np.full((J, 3), -1, dtype=np.int64)
    col = 0
    for j, chs in enumerate(channels):
        r = 0
        for c in chs:
            axis = "XYZ".index(c[0])
            if c in POSITION_CHANNELS:
                pos_cols[j, axis] = col
            else:
                rot_cols[j, r] = col
                rot_axes[j, r] = axis
                r += 1
            col += 1
    return rot_cols, rot_axes, pos_cols, col


def parse_bvh(raw: bytes | str, path: str | Path = "<string>", *, units: str | float = "auto",
              name: str | None = None, up_axis: str = "y") -> Motion:
    """Parse BVH text (bytes, or a str) into a :class:`Motion` (see :func:`load_bvh`)."""
    spath = str(path)
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    elif not isinstance(raw, bytes):
        raw = bytes(raw)
    if raw[:3] == b"\xef\xbb\xbf":
        raw = raw[3:]
    if b"\n" not in raw and b"\r" in raw:  # classic Mac line endings: CR alone
        raw = raw.replace(b"\r", b"\n")
    hdr = _parse_header(raw, spath)
    J = len(hdr.names)
    rot_cols, rot_axes, pos_cols, n_ch = _layout(tuple(hdr.channels))
    if n_ch == 0:
        extra = _TOKEN.search(raw, hdr.data_start)
        if extra is not None:
            raise BVHError(spath, raw.count(b"\n", 0, extra.start()) + 1,
                           f"found {_show(extra.group())} but the hierarchy declares no channels; "
                           "expected no frame values")
        values = np.zeros((hdr.n_frames, 0))
    else:
        # Never allocate more rows than there are lines (a corrupt 'Frames:' can be huge).
        rows = min(hdr.n_frames, raw.count(b"\n", hdr.data_start) + 1)
        values = np.empty((rows, n_ch))
        buf = np.frombuffer(raw, dtype=np.uint8, offset=hdr.data_start) if hdr.data_start < len(raw) \
            else np.zeros(0, np.uint8)
        code, line_idx, got, detail = parse_frames(buf, hdr.n_frames, n_ch, values)
        line_no = hdr.data_line + int(line_idx)
        if code == WRONG_COUNT:
            kind = "too few" if detail < n_ch else "too many"
            raise BVHError(spath, line_no, f"frame {got + 1} has {kind} values: {detail} found, {n_ch} expected "
                           f"(the sum of the CHANNELS counts of the {J} joints)")
        if code in (NOT_A_NUMBER, NON_FINITE):
            start = int(detail)
            end = start
            while end < len(buf) and buf[end] not in (9, 10, 11, 12, 13, 32):
                end += 1
            token = bytes(buf[start:end]).decode("utf-8", errors="replace")
            if code == NON_FINITE:
                msg = f"frame {got + 1} contains a non-finite value {token!r}; expected a finite number"
            else:
                msg = f"frame {got + 1} contains {token!r}; expected a number"
            raise BVHError(spath, line_no, msg + " for every channel")
        if code == TOO_MANY_LINES:
            raise BVHError(spath, line_no, f"more frame lines than the header's 'Frames: {hdr.n_frames}'; "
                           "expected the Frames count to match the number of frame lines")
        if got != hdr.n_frames:
            raise BVHError(spath, line_no, f"the header declares {hdr.n_frames} frames but only {got} were found "
                           f"(truncated file?); expected {hdr.n_frames} lines of {n_ch} values")
    offsets = np.asarray(hdr.offsets, dtype=np.float64).reshape(J, 3)
    has_pos = pos_cols >= 0
    scale = _resolve_units(units, offsets, values[:, pos_cols[has_pos]], hdr.parents)
    if units == "auto":
        scale = _humanoid_scale(tuple(hdr.names), hdr.parents, offsets, scale)
    skeleton = Skeleton(
        names=tuple(hdr.names),
        parents=np.asarray(hdr.parents, dtype=np.int64),
        offsets=offsets * scale,
        end_site_parents=np.asarray(hdr.end_site_parents, dtype=np.int64),
        end_site_offsets=np.asarray(hdr.end_site_offsets, dtype=np.float64).reshape(-1, 3) * scale,
        channels=tuple(hdr.channels),
    )
    F = hdr.n_frames
    rotations = np.empty((F, J, 4))
    translations = np.empty((F, J, 3))
    _channels_to_local_kernel(values, rot_cols, rot_axes, pos_cols, scale, skeleton.offsets, rotations, translations)
    stem = Path(spath).stem if name is None else name
    motion = Motion(skeleton, rotations, translations, fps=fps_from_frame_time(hdr.frame_time), name=stem,
                    source=Path(spath) if spath != "<string>" else None, file_scale=scale)
    if up_axis.lower() != "y":
        from motionmatch.anim.axes import to_y_up

        motion = to_y_up(motion, up_axis)
    return motion


def fps_from_frame_time(frame_time: float) -> float:
    """Frames per second for a BVH ``Frame Time``, snapped to a whole rate when the file
    rounded it (``0.033333`` -> 30, ``0.0166667`` -> 60); other rates are kept as they are."""
    fps = 1.0 / frame_time
    whole = round(fps)
    if whole >= 1 and abs(fps - whole) <= 1e-4 * whole:
        return float(whole)
    return fps


def channels_to_local(skeleton: Skeleton, values: NDArray, scale: float) -> tuple[NDArray, NDArray]:
    """Convert per-frame channel values ``[F, C]`` (degrees, file units) to local rotations
    ``[F, J, 4]`` and translations ``[F, J, 3]`` (metres)."""
    rot_cols, rot_axes, pos_cols, n_ch = _layout(skeleton.channels)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != n_ch:
        raise ValueError(f"expected channel values of shape [F, {n_ch}], got {list(values.shape)}")
    F, J = values.shape[0], skeleton.num_joints
    rotations = np.empty((F, J, 4))
    translations = np.empty((F, J, 3))
    _channels_to_local_kernel(values, rot_cols, rot_axes, pos_cols, float(scale),
                              np.ascontiguousarray(skeleton.offsets), rotations, translations)
    return rotations, translations


def load_bvh(path: str | Path, *, units: str | float = "auto", name: str | None = None,
             up_axis: str = "y") -> Motion:
    """Read a BVH file into a :class:`Motion` in metres.

    Args:
        path: the ``.bvh`` file.
        units: length unit of the file: ``"auto"`` (guess from the skeleton's size:
            centimetres for human-sized skeletons written in cm, metres otherwise),
            ``"m"``, ``"cm"``, ``"mm"``, ``"in"``, or metres per file unit as a number.
        name: the motion's name (default: the file stem).
        up_axis: the file's up axis, ``"y"`` (most BVH files) or ``"z"``, or ``"auto"``
            (a humanoid standing along +Z is Z up: :func:`motionmatch.anim.axes.detect_up_axis`);
            the motion is converted to Y up (the whole world rotated -90 degrees about X)
            and is written back Y up.

    Raises:
        BVHError: the file is malformed; the message names the file, line and problem.
        InputError: the file is larger than :data:`MAX_BVH_BYTES`.
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; pass a .bvh file (or use motionmatch.datasets.load_folder)")
    size = path.stat().st_size
    if size > MAX_BVH_BYTES:
        raise InputError(f"{path}: {size:,} bytes, over the {MAX_BVH_BYTES:,} bytes a BVH file may have "
                         "(motionmatch.anim.bvh.MAX_BVH_BYTES); split the take into shorter files")
    raw = path.read_bytes()
    return parse_bvh(raw, path, units=units, name=name, up_axis=up_axis)


# ----------------------------------------------------------------------- writing
def _file_order(parents: NDArray) -> list[int]:
    """Joints in the order a BVH file lists them: depth first, children by index."""
    J = len(parents)
    children: list[list[int]] = [[] for _ in range(J)]
    for j in range(1, J):
        children[parents[j]].append(j)
    order: list[int] = []
    stack = [0]
    while stack:
        j = stack.pop()
        order.append(j)
        stack.extend(reversed(children[j]))
    return order


def _write_channels(skeleton: Skeleton) -> tuple[tuple[str, ...], ...]:
    """Channels to convert to: the file's own, with partial rotation sets completed to three
    axes (the missing axes appended, so that the listed ones keep their place)."""
    out = []
    for chs in skeleton.channels:
        rots = [c for c in chs if c in ROTATION_CHANNELS]
        if 0 < len(rots) < 3:
            missing = [c for c in ("Zrotation", "Yrotation", "Xrotation") if c not in rots]
            chs = tuple(chs) + tuple(missing)
        out.append(tuple(chs))
    return tuple(out)


def motion_to_channels(motion: Motion, scale: float, precision: int = 6, where: str | None = None
                       ) -> tuple[NDArray, tuple[tuple[str, ...], ...], list[int]]:
    """Channel values to write.

    Returns:
        ``values [F, C]`` in file units and degrees, columns in file order (joints in
        :func:`_file_order`); the channel layout of each joint (by joint index); and the
        file order of the joints. A joint that had fewer than three rotation channels keeps
        its layout when its rotations still fit in those axes (the other angles print as
        zero), and gets the missing axes appended otherwise.
    """
    skel = motion.skeleton
    where = where or (motion.name or "<motion>")
    full = _write_channels(skel)
    F = motion.num_frames
    per_joint: list[dict[str, NDArray]] = [{} for _ in range(skel.num_joints)]
    by_order: dict[str, list[int]] = {}
    for j, chs in enumerate(full):
        for c in chs:
            if c in POSITION_CHANNELS:
                per_joint[j][c] = motion.translations[:, j, "XYZ".index(c[0])] / scale
        order = "".join(c[0].lower() for c in chs if c in ROTATION_CHANNELS)
        if order:
            by_order.setdefault(order, []).append(j)
        elif not np.allclose(np.abs(motion.rotations[:, j, 0]), 1.0, atol=1e-9):
            raise BVHError(where, None, f"joint {skel.names[j]!r} is rotated but has no rotation channels; "
                           "expected rotation channels on every rotated joint")
    for order, joints in by_order.items():
        euler = np.degrees(quat.to_euler(motion.rotations[:, joints], order))  # [F, Jg, 3]
        for g, j in enumerate(joints):
            for i, axis in enumerate(order):
                per_joint[j][axis.upper() + "rotation"] = euler[:, g, i]
    # Joints (axes) without position channels must keep their offset: check nothing is lost.
    for j, chs in enumerate(skel.channels):
        for a in range(3):
            if "XYZ"[a] + "position" in chs:
                continue
            dev = float(np.abs(motion.translations[:, j, a] - skel.offsets[j, a]).max())
            if dev > 1e-6 * max(1.0, abs(float(skel.offsets[j, a]))):
                raise BVHError(where, None, f"joint {skel.names[j]!r} has animated translations on "
                               f"{'XYZ'[a]} (up to {dev:.3g} m from its offset) but no {'XYZ'[a]}position channel; "
                               "expected position channels on every translated joint")
    zero = 0.5 * 10.0 ** -precision
    layout: list[tuple[str, ...]] = []
    for j, chs in enumerate(full):
        own = skel.channels[j]
        if len(chs) - len(own) == 1:
            # Two rotation channels: a rotation about those axes decomposes with a zero third
            # angle, but SciPy keeps the middle angle within +-90 degrees and may return the
            # other Tait-Bryan solution (a + 180, 180 - b, c + 180); take the one with c = 0.
            names3 = [c for c in chs if c in ROTATION_CHANNELS]
            a, b, c = (per_joint[j][n] for n in names3)
            flip = (np.abs(c) >= zero) & (np.abs(_wrap_degrees(c + 180.0)) < zero)
            if np.any(flip):
                per_joint[j][names3[0]] = np.where(flip, _wrap_degrees(a + 180.0), a)
                per_joint[j][names3[1]] = np.where(flip, _wrap_degrees(180.0 - b), b)
                per_joint[j][names3[2]] = np.where(flip, 0.0, c)
        if len(chs) != len(own) and all(np.abs(per_joint[j][c]).max() < zero for c in chs[len(own):]):
            chs = own
        layout.append(chs)
    order_ = _file_order(skel.parents)
    cols = [per_joint[j][c] for j in order_ for c in layout[j]]
    values = np.stack(cols, axis=1) if cols else np.zeros((F, 0))
    return values, tuple(layout), order_


def _wrap_degrees(a: NDArray) -> NDArray:
    """Angles wrapped to [-180, 180)."""
    return (a + 180.0) % 360.0 - 180.0


def format_bvh(motion: Motion, *, units: str | float | None = None, precision: int = 6) -> str:
    """The BVH text of ``motion`` (see :func:`save_bvh`)."""
    return _format_bvh(motion, units, precision, None)


def _format_bvh(motion: Motion, units: str | float | None, precision: int, where: str | None) -> str:
    if units is None:
        scale = motion.file_scale
    elif isinstance(units, str):
        if units not in UNIT_SCALES:
            raise ValueError(f"units must be one of {sorted(UNIT_SCALES)} or a number, got {units!r}")
        scale = UNIT_SCALES[units]
    else:
        scale = float(units)
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"units scale must be a positive number of metres per file unit, got {units}")
    skel = motion.skeleton
    validate_skeleton_for_bvh(skel)
    values, layout, _ = motion_to_channels(motion, scale, precision, where)
    J = skel.num_joints
    children: list[list[int]] = [[] for _ in range(J)]
    for j in range(1, J):
        children[skel.parents[j]].append(j)
    sites: list[list[int]] = [[] for _ in range(J)]
    for e, p in enumerate(skel.end_site_parents):
        sites[p].append(e)
    fmt_off = f"{{:.{precision}f}} {{:.{precision}f}} {{:.{precision}f}}"

    def off(v: NDArray) -> str:
        v = np.where(np.abs(v) < 0.5 * 10.0**-precision, 0.0, v)
        return fmt_off.format(*v)

    lines = ["HIERARCHY"]
    stack: list[tuple[int, int, bool]] = [(0, 0, False)]
    while stack:  # iterative depth-first walk: no recursion limit on deep skeletons
        j, depth, closing = stack.pop()
        ind = "\t" * min(depth, MAX_INDENT)
        if closing:
            for e in sites[j]:
                lines.append(f"{ind}\tEnd Site")
                lines.append(f"{ind}\t{{")
                lines.append(f"{ind}\t\tOFFSET " + off(skel.end_site_offsets[e] / scale))
                lines.append(f"{ind}\t}}")
            lines.append(f"{ind}}}")
            continue
        lines.append(f"{ind}{'ROOT' if j == 0 else 'JOINT'} {skel.names[j]}")
        lines.append(f"{ind}{{")
        lines.append(f"{ind}\tOFFSET " + off(skel.offsets[j] / scale))
        lines.append(f"{ind}\tCHANNELS {len(layout[j])}" + "".join(" " + c for c in layout[j]))
        stack.append((j, depth, True))
        stack.extend((c, depth + 1, False) for c in reversed(children[j]))
    lines.append("MOTION")
    lines.append(f"Frames: {motion.num_frames}")
    lines.append(f"Frame Time: {1.0 / motion.fps:.10g}")
    if values.shape[1] == 0:
        return "\n".join(lines) + "\n" + "\n" * motion.num_frames
    values = np.where(np.abs(values) < 0.5 * 10.0**-precision, 0.0, values)  # no "-0.000000"
    row = " ".join([f"%.{precision}f"] * values.shape[1])
    body = "\n".join([row % tuple(r) for r in values.tolist()])
    return "\n".join(lines) + "\n" + body + "\n"


def save_bvh(motion: Motion, path: str | Path, *, units: str | float | None = None, precision: int = 6) -> Path:
    """Write ``motion`` as a BVH file, atomically (complete file or none).

    Joint names, hierarchy, End Sites and each joint's channel order are kept; lengths
    are written in the motion's original file units unless ``units`` says otherwise
    (``"m"``, ``"cm"``, ... or metres per unit); the frame time is ``1 / fps``. Joints
    are written depth first (the order :func:`load_bvh` numbers them).

    Raises:
        BVHError: the motion cannot be written without loss (a rotated joint without
            rotation channels, a translated joint without position channels).
        SkeletonError: a joint name is empty or contains whitespace.
    """
    path = Path(path)
    text = _format_bvh(motion, units, precision, str(path))
    with atomic_write(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return path


def validate_skeleton_for_bvh(skeleton: Skeleton) -> None:
    """Raise if a skeleton cannot be written as BVH (names with whitespace)."""
    for n in skeleton.names:
        if not n or any(ch.isspace() for ch in n) or n in ("{", "}"):
            raise SkeletonError(f"joint name {n!r} cannot be written to BVH (empty, a brace, or containing whitespace)")
