"""Reading glTF 2.0 files we did not write (``.glb``, ``.gltf``), within limits: the
document, its GLB chunks and its accessors, every index, offset, stride and count checked
against what it points into, so that nothing outside a buffer is read; external buffers
only from the file's folder.

Used by the readers of users' meshes: a body (:mod:`motionmatch.io.user_mesh`) and a
terrain (:mod:`motionmatch.environment.terrain`). A refused file raises one line naming the
file and the field (:class:`~motionmatch.errors.MotionMatchError`).
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import numpy as np
import pygltflib as g
from numpy.typing import NDArray

from motionmatch._limits import MAX_JSON_BYTES, loads_json, read_bytes
from motionmatch.errors import MotionMatchError

__all__ = ["MAX_DATA_URI_BYTES", "MAX_GLTF_BYTES", "MAX_GLTF_COUNT", "Accessors", "load_gltf"]

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


class Accessors:
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


def load_gltf(path: Path) -> tuple[g.GLTF2, bytes | None]:
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
                               "(motionmatch._gltf_read.MAX_DATA_URI_BYTES); export the mesh as a .glb")
    return payload


def _data_uri(gltf: Path, uri: str, field: str) -> bytes:
    """The bytes of a base64 data URI of at most :data:`MAX_DATA_URI_BYTES`."""
    try:
        return base64.b64decode(_data_uri_payload(gltf, uri, field), validate=True)
    except ValueError:
        raise MotionMatchError(f"{gltf}: {field} is not valid base64; export the mesh as a .glb") from None
