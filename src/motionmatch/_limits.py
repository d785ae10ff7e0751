"""Reading files we did not write, within limits: one place for the checks every reader
makes before it allocates.

A reader hands a file's declared sizes to these functions before it trusts them: a JSON
file's size, nesting depth and number sizes (:func:`read_json`, :func:`loads_json`), an
``.npz`` file's members, shapes and uncompressed sizes read from its zip directory and
``.npy`` headers before anything is decompressed (:func:`read_npz`), a file's size
(:func:`file_size`, :func:`read_bytes`: regular files only). A refused file raises one line that
names the file, the field and the fix, as :class:`~motionmatch.errors.InputError` or as
the reader's own error type (``error=``: a callable taking the message), which the
command line prints without a traceback (exit 1).

The limits are documented constants; the README's "Limits on input files" lists them.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from motionmatch.errors import InputError

__all__ = ["MAX_INT_DIGITS", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "MAX_NPZ_BYTES", "MAX_NPZ_MEMBERS",
           "MAX_RIG_UPLOAD_BYTES", "Refuse",
           "file_size", "loads_json", "read_bytes", "read_json", "read_npz"]

MAX_JSON_BYTES = 64 * 2**20
"""Bytes of one JSON file (a path, scenario, sweep, script, keypoint, schema or parts
file): 64 MiB, half an hour of 33 keypoints at 30 fps; longer recordings are ``.npz``."""

MAX_JSON_DEPTH = 64
"""Levels of nested arrays and objects in a JSON file or string (the deepest format,
a scenario's obstacle waypoints, needs 5)."""

MAX_INT_DIGITS = 20
"""Digits of an integer in a JSON file (every count, seed and index fits in 19; Python
itself stops at 4,300 with a message that does not name the file)."""

MAX_NPZ_BYTES = 2 * 2**30
"""Uncompressed bytes of all arrays of one ``.npz`` file together (a database, a
classifier, a DirectionNet), read from its zip directory before anything is
decompressed: 2 GiB, 12 times a database of LAFAN1 with its mirror (160 MB)."""

MAX_NPZ_MEMBERS = 256
"""Arrays in one ``.npz`` file (a database holds 8, a keypoint file up to 8)."""

MAX_RIG_UPLOAD_BYTES = 64 * 2**20
"""Bytes of a rig file a viewer's page uploads ("Use my character"): 64 MiB, a skinned
character with its textures; larger ones are given on the command line (``--rig``)."""

Refuse = Callable[[str], Exception]
"""How a reader turns a message into its own error type (``InputError`` by default)."""

_BRACKETS = np.zeros(256, dtype=np.int8)
_BRACKETS[[ord("["), ord("{")]] = 1
_BRACKETS[[ord("]"), ord("}")]] = -1


def _raise(error: Refuse, message: str) -> NoReturn:
    raise error(message)


def _line(data: bytes, pos: int) -> int:
    return data.count(b"\n", 0, pos) + 1


def file_size(path: str | Path, what: str, max_bytes: int, *, error: Refuse = InputError,
              label: str | None = None) -> int:
    """The size in bytes of ``path``, a regular file of at most ``max_bytes`` (a folder, a
    device, a FIFO or a socket is refused: reading one may never end)."""
    shown = label or str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _raise(error, f"{shown}: cannot read it: no such {what} file")
    except OSError as e:
        _raise(error, f"{shown}: cannot read the {what} file ({e.strerror or e})")
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket"
        _raise(error, f"{shown}: {kind}, not a {what} file; give a regular file")
    if st.st_size > max_bytes:
        _raise(error, f"{shown}: {st.st_size:,} bytes, over the {max_bytes:,} bytes a {what} file may have; "
                      "split it or give a smaller file")
    return st.st_size


def read_bytes(path: str | Path, what: str, max_bytes: int, *, error: Refuse = InputError,
               label: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused over ``max_bytes`` (also when it grows
    while it is read)."""
    file_size(path, what, max_bytes, error=error, label=label)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        _raise(error, f"{label or path}: cannot read the {what} file ({e.strerror or e})")
    if len(data) > max_bytes:
        _raise(error, f"{label or path}: over the {max_bytes:,} bytes a {what} file may have; give a smaller file")
    return data


def _backslashes_before(data: bytes, pos: int) -> int:
    k = pos
    while k > 0 and data[k - 1] == 0x5C:
        k -= 1
    return pos - k


def _check_depth(data: bytes, shown: str, error: Refuse) -> None:
    """Refuse JSON text nested deeper than :data:`MAX_JSON_DEPTH` (brackets inside strings
    do not count), before a recursive parser sees it."""
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return
    codes = np.frombuffer(data, dtype=np.uint8)
    at = np.flatnonzero(_BRACKETS[codes])
    quotes = np.flatnonzero(codes == ord('"'))
    if len(quotes):  # leave out the brackets inside strings: between an odd and an even unescaped quote
        maybe = quotes[(quotes > 0) & (codes[np.maximum(quotes - 1, 0)] == ord("\\"))]
        escaped = [q for q in maybe.tolist() if _backslashes_before(data, q) % 2]
        if escaped:
            quotes = np.setdiff1d(quotes, escaped)
        at = at[np.searchsorted(quotes, at) % 2 == 0]
    depth = np.cumsum(_BRACKETS[codes[at]], dtype=np.int32)
    over = np.flatnonzero(depth > MAX_JSON_DEPTH)
    if len(over):
        pos = int(at[over[0]])
        _raise(error, f"{shown}: line {_line(data, pos)}: arrays and objects nested more than {MAX_JSON_DEPTH} "
                      "levels deep; give the format's own structure")


def loads_json(text: str | bytes, shown: str, *, error: Refuse = InputError) -> Any:
    """Decode JSON text within the limits: at most :data:`MAX_JSON_DEPTH` levels deep,
    integers of at most :data:`MAX_INT_DIGITS` digits, no float literal that overflows
    (``1e400``). ``shown`` names the text in errors (a file, or a file and a field).
    Syntax errors raise ``error`` too (one line, with the position)."""
    data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    _check_depth(data, shown, error)

    def big(token: str, what: str) -> NoReturn:
        pos = data.find(token.encode())
        where = f"{shown}: line {_line(data, pos)}" if pos >= 0 else shown
        _raise(error, f"{where}: the number {token[:12]}... {what}; write a number in the format's range")

    def parse_int(token: str) -> int:
        if len(token.lstrip("-")) > MAX_INT_DIGITS:
            big(token, f"has {len(token.lstrip('-')):,} digits, more than the {MAX_INT_DIGITS} allowed")
        return int(token)

    def parse_float(token: str) -> float:
        v = float(token)
        if math.isinf(v):
            big(token, "is too large for a floating-point number")
        return v

    try:
        return json.loads(data, parse_int=parse_int, parse_float=parse_float)
    except json.JSONDecodeError as e:
        _raise(error, f"{shown}: not valid JSON ({e})")
    except UnicodeDecodeError:
        _raise(error, f"{shown}: not UTF-8 text; JSON files are UTF-8")
    except RecursionError:  # cannot happen below MAX_JSON_DEPTH; kept as a last guard
        _raise(error, f"{shown}: nested too deep")


def read_json(path: str | Path, what: str, *, max_bytes: int = MAX_JSON_BYTES, error: Refuse = InputError,
              label: str | None = None) -> Any:
    """The decoded JSON file ``path`` (a regular file of at most ``max_bytes``, decoded by
    :func:`loads_json`); ``what`` names the format in errors (``"scenario"``)."""
    return loads_json(read_bytes(path, what, max_bytes, error=error, label=label), label or str(path), error=error)


# ----------------------------------------------------------------------------- .npz
def _npy_header(f, shown: str, name: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and header length of the ``.npy`` member open as ``f``."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f".npy format version {version} is not read (1.0 and 2.0 are)")
    except (ValueError, OSError, EOFError) as e:
        raise _Refused(f"{shown}: array {name!r} has no valid .npy header ({' '.join(str(e).split())[:120]})") from None
    return tuple(int(n) for n in shape), dtype, f.tell()


def read_npz(path: str | Path, what: str, fix: str, *, max_bytes: int = MAX_NPZ_BYTES,
             error: Refuse = InputError, label: str | None = None) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path``, checked before anything is decompressed:
    at most :data:`MAX_NPZ_MEMBERS` arrays, all ``.npy`` members, at most ``max_bytes``
    uncompressed together (the zip directory's sizes), each ``.npy`` header's shape and
    dtype holding exactly its member's bytes, no Python objects (pickles). ``fix`` says
    what to do with a refused file (``"rebuild it with 'motionmatch build'"``)."""
    shown = label or str(path)
    file_size(path, what, max_bytes, error=error, label=label)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            _check_members(infos, zf, shown, what, max_bytes)
            out = {}
            for info in infos:
                with zf.open(info) as f:
                    out[info.filename[:-4]] = np.lib.format.read_array(f, allow_pickle=False)
            return out
    except _Refused as e:
        _raise(error, f"{e}; {fix}")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, EOFError, ValueError,
            NotImplementedError) as e:
        _raise(error, f"{shown}: corrupt or unreadable .npz file ({' '.join(str(e).split())[:160]}); {fix}")


class _Refused(Exception):
    """A refusal inside :func:`read_npz`, turned into the reader's error with its fix."""


def _check_members(infos: list[zipfile.ZipInfo], zf: zipfile.ZipFile, shown: str, what: str, max_bytes: int) -> None:
    if len(infos) > MAX_NPZ_MEMBERS:
        raise _Refused(f"{shown}: {len(infos):,} arrays, more than the {MAX_NPZ_MEMBERS} a {what} file may hold")
    total = sum(i.file_size for i in infos)
    if total > max_bytes:
        big = max(infos, key=lambda i: i.file_size)
        raise _Refused(f"{shown}: its arrays unpack to {total:,} bytes ({big.filename!r}: {big.file_size:,}), "
                       f"over the {max_bytes:,} a {what} file may have")
    for info in infos:
        name = info.filename
        if not name.endswith(".npy"):
            raise _Refused(f"{shown}: member {name!r} is not an array (.npy)")
        with zf.open(info) as f:
            shape, dtype, head = _npy_header(f, shown, name[:-4])
        if dtype.hasobject:
            raise _Refused(f"{shown}: array {name[:-4]!r} holds Python objects, which are not read")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes != info.file_size - head:
            raise _Refused(f"{shown}: array {name[:-4]!r} declares shape {list(shape)} of {dtype} ({nbytes:,} "
                           f"bytes) but holds {max(info.file_size - head, 0):,}; the file is corrupt")
