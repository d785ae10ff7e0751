"""BVH reading and writing.

The hierarchy is parsed token by token (it is small); the MOTION block is parsed in
bulk by a compiled kernel (:mod:`motionmatch.anim._bvh_numbers`), never value by value in
Python. Conventions at the boundary:

* Rotation channels are Euler angles in degrees, applied in the listed order
  (``Zrotation Yrotation Xrotation`` means ``R = Rz * Ry * Rx``), per joint.
* Position channels, on any joint, *replace* that joint's OFFSET by the animated
  translation (the convention of Bandai-Namco's and LAFAN1's files).
* Lengths are converted to metres at import (``units``), and back on export.
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
    OK,
    TOO_MANY_LINES,
    WRONG_COUNT,
    parse_frames,
)
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import POSITION_CHANNELS, ROTATION_CHANNELS, Skeleton
from motionmatch.errors import BVHError, SkeletonError

UNIT_SCALES = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254, "inch": 0.0254, "dm": 0.1}
_VALID_CHANNELS = set(POSITION_CHANNELS) | set(ROTATION_CHANNELS)
_TOKEN = re.compile(rb"\S+")


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


def _parse_header(raw: bytes, path: str) -> _Header:
    """Parse HIERARCHY and the MOTION header lines with line numbers for errors."""
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(raw, 0, _header_end(raw, path))]
    line_starts = None

    def line_of(pos: int) -> int:
        nonlocal line_starts
        if line_starts is None:
            line_starts = np.flatnonzero(np.frombuffer(raw[: _header_end(raw, path) + 1], np.uint8) == 10)
        return int(np.searchsorted(line_starts, pos)) + 1

    k = 0

    def fail(msg: str, pos: int | None = None) -> BVHError:
        if pos is None:
            pos = tokens[min(k, len(tokens) - 1)][1] if tokens else 0
        return BVHError(path, line_of(pos), msg)

    def next_tok(expect: str) -> tuple[bytes, int]:
        nonlocal k
        if k >= len(tokens):
            end = tokens[-1][1] if tokens else 0
            raise BVHError(path, line_of(end), f"file ends inside the hierarchy; expected {expect}")
        t = tokens[k]
        k += 1
        return t

    def read_float(what: str) -> float:
        tok, pos = next_tok(what)
        try:
            v = float(tok)
        except ValueError:
            raise BVHError(path, line_of(pos), f"expected a number for {what}, found {tok.decode(errors='replace')!r}") from None
        if not np.isfinite(v):
            raise BVHError(path, line_of(pos), f"{what} is {tok.decode()}; offsets must be finite numbers")
        return v

    tok, pos = next_tok("HIERARCHY")
    if tok.upper() != b"HIERARCHY":
        raise BVHError(path, line_of(pos), f"expected 'HIERARCHY' at the start of the file, found {tok.decode(errors='replace')!r}")

    names: list[str] = []
    parents: list[int] = []
    offsets: list[list[float]] = []
    channels: list[tuple[str, ...]] = []
    es_par: list[int] = []
    es_off: list[list[float]] = []
    stack: list[int] = []  # joint indices; -2 marks an End Site block
    total_channels = 0

    tok, pos = next_tok("ROOT")
    if tok != b"ROOT":
        raise BVHError(path, line_of(pos), f"expected 'ROOT <name>' after HIERARCHY, found {tok.decode(errors='replace')!r}")
    pending = "ROOT"
    while True:
        if pending in ("ROOT", "JOINT"):
            name_tok, npos = next_tok("a joint name")
            name = name_tok.decode(errors="replace")
            if name in names:
                raise BVHError(path, line_of(npos), f"duplicate joint name {name!r}; joint names must be unique")
            b, bpos = next_tok("'{'")
            if b != b"{":
                raise BVHError(path, line_of(bpos), f"expected '{{' after {pending} {name}, found {b.decode(errors='replace')!r}")
            names.append(name)
            parents.append(stack[-1] if stack else -1)
            offsets.append([0.0, 0.0, 0.0])
            channels.append(())
            stack.append(len(names) - 1)
        elif pending == "End":
            site, spos = next_tok("'Site'")
            if site != b"Site":
                raise BVHError(path, line_of(spos), f"expected 'End Site', found 'End {site.decode(errors='replace')}'")
            b, bpos = next_tok("'{'")
            if b != b"{":
                raise BVHError(path, line_of(bpos), "expected '{' after End Site")
            if not stack or stack[-1] < 0:
                raise BVHError(path, line_of(spos), "End Site outside a joint")
            es_par.append(stack[-1])
            es_off.append([0.0, 0.0, 0.0])
            stack.append(-2)
        # Body of the current block until a nested block or '}'.
        while True:
            tok, pos = next_tok("OFFSET, CHANNELS, JOINT, End Site or '}'")
            if tok == b"OFFSET":
                vals = [read_float("OFFSET") for _ in range(3)]
                if stack[-1] == -2:
                    es_off[-1] = vals
                else:
                    offsets[stack[-1]] = vals
            elif tok == b"CHANNELS":
                if stack[-1] == -2:
                    raise BVHError(path, line_of(pos), "an End Site cannot have CHANNELS")
                ntok, npos = next_tok("the channel count")
                try:
                    nch = int(ntok)
                except ValueError:
                    raise BVHError(path, line_of(npos), f"expected the number of channels, found {ntok.decode(errors='replace')!r}") from None
                if not 0 <= nch <= 6:
                    raise BVHError(path, line_of(npos), f"a joint has 0 to 6 channels, found {nch}")
                chs = []
                for _ in range(nch):
                    ctok, cpos = next_tok("a channel name")
                    c = ctok.decode(errors="replace")
                    fixed = c[0].upper() + c[1:].lower() if c else c
                    if fixed not in _VALID_CHANNELS:
                        raise BVHError(path, line_of(cpos), f"unknown channel name {c!r}; expected one of "
                                       "Xposition Yposition Zposition Xrotation Yrotation Zrotation")
                    if fixed in chs:
                        raise BVHError(path, line_of(cpos), f"channel {c!r} listed twice for joint {names[stack[-1]]!r}")
                    chs.append(fixed)
                channels[stack[-1]] = tuple(chs)
                total_channels += nch
            elif tok in (b"JOINT", b"ROOT"):
                if tok == b"ROOT":
                    raise BVHError(path, line_of(pos), "only one ROOT is supported per file (found a second ROOT)")
                if stack[-1] == -2:
                    raise BVHError(path, line_of(pos), "an End Site cannot have child joints")
                pending = "JOINT"
                break
            elif tok == b"End":
                pending = "End"
                break
            elif tok == b"}":
                stack.pop()
                pending = "done" if not stack else "}"
                break
            elif tok == b"MOTION":
                raise BVHError(path, line_of(pos), "MOTION found before the hierarchy was closed; a '}' is missing")
            else:
                raise BVHError(path, line_of(pos), f"unexpected {tok.decode(errors='replace')!r} in the hierarchy; "
                               "expected OFFSET, CHANNELS, JOINT, End Site or '}'")
        if pending == "done":
            break
        if pending == "}":
            continue
    # MOTION header
    tok, pos = next_tok("MOTION")
    if tok != b"MOTION":
        raise BVHError(path, line_of(pos), f"expected 'MOTION' after the hierarchy, found {tok.decode(errors='replace')!r}")
    tok, pos = next_tok("'Frames:'")
    if tok not in (b"Frames:", b"Frames"):
        raise BVHError(path, line_of(pos), f"expected 'Frames: <count>' after MOTION, found {tok.decode(errors='replace')!r}")
    if tok == b"Frames":
        next_tok("':'")
    ntok, npos = next_tok("the frame count")
    try:
        n_frames = int(ntok)
    except ValueError:
        raise BVHError(path, line_of(npos), f"expected an integer frame count, found {ntok.decode(errors='replace')!r}") from None
    if n_frames <= 0:
        raise BVHError(path, line_of(npos), f"the file declares {n_frames} frames; a motion needs at least one")
    t1, p1 = next_tok("'Frame Time:'")
    t2, p2 = next_tok("'Frame Time:'")
    if t1 != b"Frame" or t2 not in (b"Time:", b"Time"):
        raise BVHError(path, line_of(p1), f"expected 'Frame Time: <seconds>', found {t1.decode(errors='replace')!r}")
    if t2 == b"Time":
        next_tok("':'")
    ftok, fpos = next_tok("the frame time")
    try:
        frame_time = float(ftok)
    except ValueError:
        raise BVHError(path, line_of(fpos), f"expected the frame time in seconds, found {ftok.decode(errors='replace')!r}") from None
    if not (np.isfinite(frame_time) and frame_time > 0):
        raise BVHError(path, line_of(fpos), f"frame time must be a positive number of seconds, found {ftok.decode()}")
    if k != len(tokens):
        extra, epos = tokens[k]
        raise BVHError(path, line_of(epos), f"unexpected {extra.decode(errors='replace')!r} after 'Frame Time'")
    data_start = raw.find(b"\n", fpos)
    data_start = len(raw) if data_start < 0 else data_start + 1
    return _Header(names, parents, offsets, channels, es_par, es_off, n_frames, frame_time,
                   data_start, line_of(fpos) + 1)


def _header_end(raw: bytes, path: str) -> int:
    """Byte offset just past the 'Frame Time' line (where the numbers begin)."""
    m = re.search(rb"Frame\s+Time\s*:?[^\n]*", raw)
    if m is None:
        if re.search(rb"\bMOTION\b", raw) is None:
            if re.search(rb"\bHIERARCHY\b", raw) is None:
                raise BVHError(path, None, "not a BVH file: no HIERARCHY and no MOTION section")
            raise BVHError(path, None, "no MOTION section: the file ends after the hierarchy (truncated?)")
        raise BVHError(path, None, "no 'Frame Time:' line after MOTION (truncated file?)")
    return m.end()


def _resolve_units(units: str | float, offsets: NDArray, channels, values: NDArray, parents) -> float:
    if isinstance(units, (int, float)) and not isinstance(units, bool):
        if not units > 0:
            raise ValueError(f"units scale must be positive, got {units}")
        return float(units)
    if units in UNIT_SCALES:
        return UNIT_SCALES[units]
    if units != "auto":
        raise ValueError(f"units must be 'auto', one of {sorted(UNIT_SCALES)} or metres-per-unit as a number; got {units!r}")
    # Guess from the skeleton's size: the longest root-to-leaf chain of offsets.
    J = len(offsets)
    lengths = np.linalg.norm(offsets, axis=1)
    chain = np.zeros(J)
    for j in range(1, J):
        chain[j] = chain[parents[j]] + lengths[j]
    size = float(chain.max()) if J > 1 else 0.0
    if size == 0.0:
        size = float(np.abs(values).max()) if values.size else 0.0
    if size > 2000:
        return 0.001  # millimetres
    if size > 15:
        return 0.01  # centimetres: a creature of more than ~15 m in metres is implausible
    return 1.0


def parse_bvh(raw: bytes, path: str | Path = "<string>", *, units: str | float = "auto",
              name: str | None = None) -> Motion:
    """Parse BVH bytes into a :class:`Motion` (see :func:`load_bvh`)."""
    spath = str(path)
    if raw[:3] == b"\xef\xbb\xbf":
        raw = raw[3:]
    hdr = _parse_header(raw, spath)
    n_ch = sum(len(c) for c in hdr.channels)
    J = len(hdr.names)
    values = np.empty((hdr.n_frames, max(n_ch, 1)))
    buf = np.frombuffer(raw, dtype=np.uint8, offset=hdr.data_start) if hdr.data_start < len(raw) else np.zeros(0, np.uint8)
    if n_ch == 0:
        code, line_idx, got, detail = OK, 0, hdr.n_frames, 0
    else:
        code, line_idx, got, detail = parse_frames(buf, hdr.n_frames, n_ch, values)
    line_no = hdr.data_line + int(line_idx)
    if code == WRONG_COUNT:
        kind = "too few" if detail < n_ch else "too many"
        raise BVHError(spath, line_no, f"frame {got + 1} has {kind} values: {detail} found, {n_ch} expected "
                       f"(the sum of the CHANNELS counts of the {J} joints)")
    if code in (NOT_A_NUMBER, NON_FINITE):
        start = int(detail)
        end = start
        while end < len(buf) and buf[end] not in (9, 10, 13, 32):
            end += 1
        token = bytes(buf[start:end]).decode(errors="replace")
        what = "a non-finite value" if code == NON_FINITE else "a value that is not a number"
        raise BVHError(spath, line_no, f"frame {got + 1} contains {what}: {token!r}; every channel value must be a finite number")
    if code == TOO_MANY_LINES:
        raise BVHError(spath, line_no, f"more frame lines than the header's 'Frames: {hdr.n_frames}'; "
                       "fix the Frames count or remove the extra lines")
    if code == OK and got != hdr.n_frames:
        raise BVHError(spath, hdr.data_line + int(line_idx), f"the header declares {hdr.n_frames} frames but only {got} "
                       "were found (truncated file?)")
    offsets = np.asarray(hdr.offsets, dtype=np.float64)
    scale = _resolve_units(units, offsets, hdr.channels, values, hdr.parents)
    skeleton = Skeleton(
        names=tuple(hdr.names),
        parents=np.asarray(hdr.parents),
        offsets=offsets * scale,
        end_site_parents=np.asarray(hdr.end_site_parents, dtype=np.int64),
        end_site_offsets=np.asarray(hdr.end_site_offsets, dtype=np.float64).reshape(-1, 3) * scale,
        channels=tuple(hdr.channels),
    )
    rotations, translations = channels_to_local(skeleton, values[:, :n_ch], scale)
    stem = Path(spath).stem if name is None else name
    return Motion(skeleton, rotations, translations, fps=fps_from_frame_time(hdr.frame_time), name=stem,
                  source=Path(spath) if spath != "<string>" else None, file_scale=scale)


def fps_from_frame_time(frame_time: float) -> float:
    """Frames per second for a BVH ``Frame Time``, snapped to a whole rate when the file
    rounded it (``0.033333`` -> 30, ``0.0166667`` -> 60); other rates are kept as they are."""
    fps = 1.0 / frame_time
    whole = round(fps)
    if whole >= 1 and abs(fps - whole) <= 1e-4 * whole:
        return float(whole)
    return fps


def channels_to_local(skeleton: Skeleton, values: NDArray, scale: float) -> tuple[NDArray, NDArray]:
    """Convert per-frame channel values ``[F, C]`` to local rotations and translations."""
    F = values.shape[0]
    J = skeleton.num_joints
    translations = np.broadcast_to(skeleton.offsets, (F, J, 3)).copy()
    rotations = np.empty((F, J, 4))
    by_order: dict[str, tuple[list[int], list[list[int]]]] = {}
    col = 0
    for j, chs in enumerate(skeleton.channels):
        rot_cols = []
        for c in chs:
            if c in POSITION_CHANNELS:
                translations[:, j, "XYZ".index(c[0])] = values[:, col] * scale
            else:
                rot_cols.append(col)
            col += 1
        order = skeleton.rotation_order(j)
        joints, cols = by_order.setdefault(order, ([], []))
        joints.append(j)
        cols.append(rot_cols)
    for order, (joints, cols) in by_order.items():
        if not order:
            rotations[:, joints] = (1.0, 0.0, 0.0, 0.0)
            continue
        angles = np.radians(values[:, np.asarray(cols)])  # [F, Jg, len(order)]
        rotations[:, joints] = quat.from_euler_partial(angles, order) if len(order) != 3 else quat.from_euler(angles, order)
    return rotations, translations


def load_bvh(path: str | Path, *, units: str | float = "auto", name: str | None = None) -> Motion:
    """Read a BVH file into a :class:`Motion` in metres.

    Args:
        path: the ``.bvh`` file.
        units: length unit of the file: ``"auto"`` (guess from the skeleton's size:
            centimetres for human-sized skeletons written in cm, metres otherwise),
            ``"m"``, ``"cm"``, ``"mm"``, ``"in"``, or metres per file unit as a number.
        name: the motion's name (default: the file stem).

    Raises:
        BVHError: the file is malformed; the message names the file, line and problem.
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; pass a .bvh file (or use motionmatch.datasets.load_folder)")
    raw = path.read_bytes()
    return parse_bvh(raw, path, units=units, name=name)


# ----------------------------------------------------------------------- writing
def _write_channels(skeleton: Skeleton) -> tuple[tuple[str, ...], ...]:
    """Channels to write: the file's own, with partial rotation sets completed to three axes."""
    out = []
    for chs in skeleton.channels:
        rots = [c for c in chs if c in ROTATION_CHANNELS]
        if 0 < len(rots) < 3:
            missing = [c for c in ("Zrotation", "Yrotation", "Xrotation") if c not in rots]
            chs = tuple(chs) + tuple(missing)
        out.append(tuple(chs))
    return tuple(out)


def motion_to_channels(motion: Motion, scale: float) -> tuple[NDArray, tuple[tuple[str, ...], ...]]:
    """Channel values ``[F, C]`` (file units, degrees) and the channel layout to write."""
    skel = motion.skeleton
    layout = _write_channels(skel)
    F = motion.num_frames
    n_ch = sum(len(c) for c in layout)
    values = np.zeros((F, n_ch))
    col_of: list[list[int]] = []
    col = 0
    for chs in layout:
        col_of.append(list(range(col, col + len(chs))))
        col += len(chs)
    by_order: dict[str, tuple[list[int], list[list[int]]]] = {}
    for j, chs in enumerate(layout):
        rot_cols = []
        for c, ci in zip(chs, col_of[j]):
            if c in POSITION_CHANNELS:
                values[:, ci] = motion.translations[:, j, "XYZ".index(c[0])] / scale
            else:
                rot_cols.append(ci)
        if rot_cols:
            order = "".join(c[0].lower() for c in chs if c in ROTATION_CHANNELS)
            joints, cols = by_order.setdefault(order, ([], []))
            joints.append(j)
            cols.append(rot_cols)
        elif not np.allclose(motion.rotations[:, j], quat.identity(), atol=1e-9) and not np.allclose(
            np.abs(motion.rotations[:, j, 0]), 1.0, atol=1e-9
        ):
            raise BVHError(None, None, f"joint {skel.names[j]!r} is rotated but has no rotation channels to write")
    for order, (joints, cols) in by_order.items():
        euler = np.degrees(quat.to_euler(motion.rotations[:, joints], order))  # [F, Jg, 3]
        values[:, np.asarray(cols)] = euler
    # Joints without position channels must keep their offset: check nothing is lost.
    moved = ~skel.has_position_channels
    if np.any(moved):
        dev = np.abs(motion.translations[:, moved] - skel.offsets[moved]).max()
        if dev > 1e-6:
            j = np.flatnonzero(moved)[np.argmax(np.abs(motion.translations[:, moved] - skel.offsets[moved]).max(axis=(0, 2)))]
            raise BVHError(None, None, f"joint {skel.names[j]!r} has animated translations but no position channels; "
                           "add position channels to the skeleton before writing")
    return values, layout


def format_bvh(motion: Motion, *, units: str | float | None = None, precision: int = 6) -> str:
    """The BVH text of ``motion`` (see :func:`save_bvh`)."""
    if units is None:
        scale = motion.file_scale
    elif isinstance(units, str):
        if units not in UNIT_SCALES:
            raise ValueError(f"units must be one of {sorted(UNIT_SCALES)} or a number, got {units!r}")
        scale = UNIT_SCALES[units]
    else:
        scale = float(units)
    skel = motion.skeleton
    values, layout = motion_to_channels(motion, scale)
    lines = ["HIERARCHY"]
    children: list[list[int]] = [[] for _ in range(skel.num_joints)]
    for j in range(1, skel.num_joints):
        children[skel.parents[j]].append(j)
    sites: list[list[int]] = [[] for _ in range(skel.num_joints)]
    for e, p in enumerate(skel.end_site_parents):
        sites[p].append(e)
    fmt_off = f"{{:.{precision}f}} {{:.{precision}f}} {{:.{precision}f}}"

    def emit(j: int, depth: int) -> None:
        ind = "\t" * depth
        lines.append(f"{ind}{'ROOT' if j == 0 else 'JOINT'} {skel.names[j]}")
        lines.append(f"{ind}{{")
        lines.append(f"{ind}\tOFFSET " + fmt_off.format(*(skel.offsets[j] / scale)))
        lines.append(f"{ind}\tCHANNELS {len(layout[j])}" + "".join(" " + c for c in layout[j]))
        for c in children[j]:
            emit(c, depth + 1)
        for e in sites[j]:
            lines.append(f"{ind}\tEnd Site")
            lines.append(f"{ind}\t{{")
            lines.append(f"{ind}\t\tOFFSET " + fmt_off.format(*(skel.end_site_offsets[e] / scale)))
            lines.append(f"{ind}\t}}")
        lines.append(f"{ind}}}")

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, skel.num_joints * 4 + 100))
    try:
        emit(0, 0)
    finally:
        sys.setrecursionlimit(old)
    lines.append("MOTION")
    lines.append(f"Frames: {motion.num_frames}")
    lines.append(f"Frame Time: {1.0 / motion.fps:.10g}")
    values = np.where(np.abs(values) < 0.5 * 10.0**-precision, 0.0, values)  # no "-0.000000"
    row = " ".join([f"%.{precision}f"] * values.shape[1])
    body = "\n".join([row % tuple(r) for r in values.tolist()])
    return "\n".join(lines) + "\n" + body + "\n"


def save_bvh(motion: Motion, path: str | Path, *, units: str | float | None = None, precision: int = 6) -> Path:
    """Write ``motion`` as a BVH file, atomically (complete file or none).

    Joint names, hierarchy, End Sites and each joint's channel order are kept; lengths
    are written in the motion's original file units unless ``units`` says otherwise
    (``"m"``, ``"cm"``, ... or metres per unit); the frame time is ``1 / fps``.
    """
    text = format_bvh(motion, units=units, precision=precision)
    path = Path(path)
    with atomic_write(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return path


def validate_skeleton_for_bvh(skeleton: Skeleton) -> None:
    """Raise if a skeleton cannot be written as BVH (names with whitespace)."""
    for n in skeleton.names:
        if not n or any(ch.isspace() for ch in n) or n in ("{", "}"):
            raise SkeletonError(f"joint name {n!r} cannot be written to BVH (empty or containing whitespace)")
