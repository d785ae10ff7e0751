"""A ground from a scenario's ``"terrain"`` object or a terrain file, every field checked.

The ``"terrain"`` object of a scenario file (and of a ``motionmatch follow --scene`` file)
is one of::

    {"flat": {}}                                              # y = 0: today's floor
    {"height_field": {"origin": [x0, z0], "cell": c, "heights": [[h00, h01, ...], ...]}}
    {"height_field": {"origin": [x0, z0], "cell": c, "file": "hills.npy"}}
    {"height_field": {"origin": [x0, z0], "cell": c, "file": "hills.png", "scale": 0.001,
                      "offset": -5.0}}
    {"mesh": "ground.glb"}    or    {"mesh": {"file": "ground.obj", "outside": 0.0}}

``heights[i][j]`` is the ground's height (m) at ``(x0 + j*c, z0 + i*c)``: rows along z,
columns along x (a PNG's rows are its image rows, top first). A ``.npy`` holds a 2-D
array of metres (times ``scale``, plus ``offset``, when given); a PNG is 16-bit greyscale,
each value times ``scale`` (m, required) plus ``offset``. A mesh is a ``.glb`` or ``.obj``
whose top surface is the ground (:class:`~.surfaces.TriangleMesh`); ``outside`` is the
ground's height where it has no triangle.

Files are read only from the folder of the file that names them (the scenario's), within
the limits below, each checked before anything is allocated. A bad value is one
:class:`~motionmatch.validation.FieldError` naming the field (``terrain.height_field.
heights[3] has 7 values, row 0 has 8; give rows of equal length``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from motionmatch._limits import file_size, read_bytes, read_json
from motionmatch.environment.terrain.surfaces import FlatGround, HeightField, Terrain, TriangleMesh
from motionmatch.errors import MotionMatchError
from motionmatch.validation import WORLD, Custom, FieldError, Num, Obj, Str, check_fields, point

__all__ = ["CELL", "MAX_GRID_SIDE", "MAX_MESH_TRIANGLES", "MAX_TERRAIN_FILE_BYTES", "TERRAIN_HEIGHT", "TerrainError",
           "load_terrain", "parse_terrain"]

#: a height field's cell (m): a centimetre to a hundred metres
CELL = (0.01, 100.0)
#: the ground's heights and a mesh's vertices (m)
TERRAIN_HEIGHT = (-1000.0, 1000.0)
#: rows or columns of a height field (4096 x 4096 heights: 128 MiB of float64)
MAX_GRID_SIDE = 4096
#: triangles of a terrain mesh
MAX_MESH_TRIANGLES = 4_000_000
#: bytes of a terrain's ``.npy``, ``.png``, ``.obj`` or ``.glb`` file
MAX_TERRAIN_FILE_BYTES = 256 * 2**20
#: characters of a file name
FILE_LEN = 1024


class TerrainError(MotionMatchError, ValueError):
    """A terrain file is malformed; the message (one line) names the file and the field."""


def _in_folder(name: str, where: str, folder: Path | None) -> Path:
    """The file ``name`` in ``folder`` (the file that names it lies there), else a FieldError:
    a scenario cannot make the viewer read files elsewhere."""
    if folder is None:
        raise FieldError("invalid", f"{where}: files are not read here; give the heights inline")
    f = folder / name
    try:
        inside = f.resolve().is_relative_to(folder.resolve()) and f.is_file()
    except (OSError, ValueError):  # a NUL character, a name too long
        inside = False
    if not inside:
        raise FieldError("invalid", f"{where}: no file {name!r} in the folder {str(folder) or '.'!r}; put it beside "
                                    "the file that names it")
    return f


# ----------------------------------------------------------------------------- height fields
def _grid_shape(rows: int, cols: int, where: str) -> None:
    if rows < 2 or cols < 2:
        raise FieldError("invalid", f"{where} must have at least 2 rows and 2 columns, got {rows} x {cols}")
    if rows > MAX_GRID_SIDE or cols > MAX_GRID_SIDE:
        raise FieldError("too_large", f"{where} has {rows} x {cols} heights, more than {MAX_GRID_SIDE} a side; "
                                      "give a coarser grid (a larger cell)")


def _check_heights(h: np.ndarray, where: str) -> np.ndarray:
    """``h [R, C]`` float64, every value finite and within :data:`TERRAIN_HEIGHT`."""
    lo, hi = TERRAIN_HEIGHT
    bad = ~np.isfinite(h) | (h < lo) | (h > hi)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        v = h[i, j]
        what = "must be finite" if not np.isfinite(v) else f"must be between {lo:g} and {hi:g}, got {v:g}"
        raise FieldError("invalid", f"{where}[{i}][{j}] {what}")
    return h


def _inline_heights(v: Any, where: str) -> np.ndarray:
    """Rows of numbers as ``[R, C]`` float64: every row a list of as many numbers as the first."""
    if not isinstance(v, list):
        raise FieldError("invalid", f"{where} must be a list of rows of heights, got {type(v).__name__}")
    if not v or not isinstance(v[0], list):
        raise FieldError("invalid", f"{where} must be a list of rows (lists) of heights")
    cols = len(v[0])
    _grid_shape(len(v), cols, where)
    for i, row in enumerate(v):
        if not isinstance(row, list):
            raise FieldError("invalid", f"{where}[{i}] must be a row (list) of heights, got {type(row).__name__}")
        if len(row) != cols:
            raise FieldError("invalid", f"{where}[{i}] has {len(row)} values, row 0 has {cols}; give rows of equal "
                                        "length (a rectangular grid)")
        if not set(map(type, row)) <= {int, float}:
            j = next(j for j, x in enumerate(row) if type(x) not in (int, float))
            raise FieldError("invalid", f"{where}[{i}][{j}] must be a number, got {type(row[j]).__name__}")
    try:
        h = np.array(v, dtype=np.float64)
    except OverflowError:  # an integer too large for a float
        raise FieldError("invalid", f"{where} holds a number too large for a height") from None
    return _check_heights(h, where)


def _npy_heights(f: Path, where: str) -> np.ndarray:
    """A 2-D array of real numbers from a ``.npy`` file, its header checked before reading."""
    file_size(f, "height field", MAX_TERRAIN_FILE_BYTES, error=_field_error, label=f"{where} {f.name!r}")
    try:
        with open(f, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(fh)
            if len(shape) != 2 or dtype.hasobject or dtype.kind not in "iuf":
                raise FieldError("invalid", f"{where}: {f.name!r} holds a {dtype} array of shape {list(shape)}; "
                                            "give a 2-D array of numbers (metres)")
            _grid_shape(shape[0], shape[1], where)
            fh.seek(0)
            h = np.lib.format.read_array(fh, allow_pickle=False)
    except FieldError:
        raise
    except (ValueError, OSError, EOFError) as e:
        raise FieldError("invalid", f"{where}: {f.name!r} is not a readable .npy file "
                                    f"({' '.join(str(e).split())[:120]})") from None
    return np.asarray(h, dtype=np.float64)


def _png_heights(f: Path, where: str) -> np.ndarray:
    """The values of a 16-bit greyscale PNG ``[rows, columns]`` (its size checked before decoding)."""
    import io

    from PIL import Image

    data = read_bytes(f, "height field", MAX_TERRAIN_FILE_BYTES, error=_field_error, label=f"{where} {f.name!r}")
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format != "PNG":
                raise FieldError("invalid", f"{where}: {f.name!r} is not a PNG file")
            if im.mode not in ("I;16", "I;16B", "I;16L", "I"):
                raise FieldError("invalid", f"{where}: {f.name!r} is a PNG of mode {im.mode!r}; give a 16-bit "
                                            "greyscale PNG")
            _grid_shape(im.height, im.width, where)
            return np.asarray(im, dtype=np.float64)
    except FieldError:
        raise
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise FieldError("invalid", f"{where}: {f.name!r} is not a readable PNG ({' '.join(str(e).split())[:120]})"
                         ) from None


def _field_error(message: str) -> FieldError:
    return FieldError("invalid", message)


_HEIGHT_FIELD = {
    "origin": point(),
    "cell": Num(*CELL),
    "heights": Custom(lambda v, w: v, optional=True),
    "file": Str(FILE_LEN, optional=True),
    "scale": Num(-1000.0, 1000.0, optional=True),
    "offset": Num(*TERRAIN_HEIGHT, optional=True, default=0.0),
}


def _height_field(v: Any, where: str, folder: Path | None) -> HeightField:
    if not isinstance(v, dict):
        raise FieldError("invalid", f"{where} must be an object {{\"origin\", \"cell\", \"heights\" or \"file\"}}")
    d = check_fields(v, _HEIGHT_FIELD, where)
    if (d["heights"] is None) == (d["file"] is None):
        raise FieldError("invalid", f"{where}: give one of 'heights' (rows of metres) or 'file' (.npy or .png)")
    if d["heights"] is not None:
        if d["scale"] is not None or d["offset"]:
            raise FieldError("invalid", f"{where}: 'scale' and 'offset' go with a 'file'; give inline heights in "
                                        "metres")
        h = _inline_heights(d["heights"], f"{where}.heights")
    else:
        name = d["file"]
        f = _in_folder(name, f"{where}.file", folder)
        suffix = f.suffix.lower()
        if suffix == ".npy":
            h = _npy_heights(f, f"{where}.file")
            scale = 1.0 if d["scale"] is None else d["scale"]
        elif suffix == ".png":
            if d["scale"] is None:
                raise FieldError("invalid", f"{where}.scale: a PNG's values need a scale (metres per unit, e.g. "
                                            "0.001 for millimetres)")
            h = _png_heights(f, f"{where}.file")
            scale = d["scale"]
        else:
            raise FieldError("invalid", f"{where}.file: {name!r} is not a .npy or .png file")
        with np.errstate(all="ignore"):
            h = h * scale + d["offset"]
        h = _check_heights(h, f"{where}.file {name!r}: heights")
    (x0, z0), cell = d["origin"], d["cell"]
    rows, cols = h.shape
    far = (x0 + (cols - 1) * cell, z0 + (rows - 1) * cell)
    if max(abs(far[0]), abs(far[1])) > WORLD[1]:
        raise FieldError("invalid", f"{where}: the grid reaches ({far[0]:g}, {far[1]:g}), past the "
                                    f"{WORLD[1]:g} m of the world; give a smaller cell or fewer heights")
    return HeightField((x0, z0), cell, h)


# ----------------------------------------------------------------------------- meshes
def _obj_mesh(f: Path, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of a Wavefront ``.obj`` (``v`` and ``f`` lines; polygons as fans)."""
    data = read_bytes(f, "terrain mesh", MAX_TERRAIN_FILE_BYTES, error=_field_error, label=f"{where} {f.name!r}")
    fast = _obj_triangles(data)
    return fast if fast is not None else _obj_lines(data, f, where)


def _obj_triangles(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """The common ``.obj`` read in a few array operations: every ``v`` line ``x y z``,
    every ``f`` line a triangle of positive indices (``i``, ``i/t``, ``i/t/n``, ``i//n``),
    at most :data:`MAX_MESH_TRIANGLES`; ``None`` for anything else (read line by line,
    which names the line of an error)."""
    import re
    import warnings

    lines = data.splitlines()
    vl = [ln[2:] for ln in lines if ln[:2] == b"v "]
    fl = [ln[2:] for ln in lines if ln[:2] == b"f "]
    if len(fl) > MAX_MESH_TRIANGLES:
        return None
    try:
        with warnings.catch_warnings():  # (older numpy warns where newer raises: both end here)
            warnings.simplefilter("error")
            verts = np.fromstring(b"\n".join(vl), dtype=np.float64, sep=" ") if vl else np.zeros(0)
            idx = (np.fromstring(re.sub(rb"/\S*", b"", b"\n".join(fl)), dtype=np.int64, sep=" ") if fl
                   else np.zeros(0, dtype=np.int64))
    except (ValueError, OverflowError, DeprecationWarning):
        return None
    if verts.size != 3 * len(vl) or idx.size != 3 * len(fl):
        return None  # other vertex forms, polygons or a bad number: line by line
    idx = idx.reshape(-1, 3)
    if len(idx) and (idx.min() < 1 or idx.max() > len(vl)):
        return None  # relative (negative) indices, or one past the vertices
    return verts.reshape(-1, 3), idx - 1


def _obj_lines(data: bytes, f: Path, where: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_obj_mesh` line by line: polygons, relative indices, and the line of an error."""
    verts: list[list[float]] = []
    tris: list[tuple[int, int, int]] = []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        parts = line.split()
        if not parts or parts[0] not in ("v", "f"):
            continue
        try:
            if parts[0] == "v":
                if len(parts) < 4:
                    raise ValueError("a vertex needs x y z")
                verts.append([float(parts[1]), float(parts[2]), float(parts[3])])
                continue
            idx = [int(p.split("/", 1)[0]) for p in parts[1:]]
        except ValueError as e:
            raise FieldError("invalid", f"{where}: {f.name!r} line {n}: {' '.join(str(e).split())[:80]}") from None
        if len(idx) < 3:
            raise FieldError("invalid", f"{where}: {f.name!r} line {n}: a face needs 3 vertices")
        idx = [i - 1 if i > 0 else len(verts) + i for i in idx]
        if min(idx) < 0 or max(idx) >= len(verts):
            raise FieldError("invalid", f"{where}: {f.name!r} line {n}: a face names a vertex that is not defined "
                                        "before it")
        tris.extend((idx[0], idx[k], idx[k + 1]) for k in range(1, len(idx) - 1))
        if len(tris) > MAX_MESH_TRIANGLES:
            raise FieldError("too_large", f"{where}: {f.name!r} has more than {MAX_MESH_TRIANGLES:,} triangles; "
                                          "give a coarser mesh")
    return np.array(verts, dtype=np.float64).reshape(-1, 3), np.array(tris, dtype=np.int64).reshape(-1, 3)


def _glb_mesh(f: Path, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Every triangle of a glTF file's default scene, in world coordinates (nodes' transforms applied)."""
    import pygltflib as g

    from motionmatch._gltf_read import Accessors, load_gltf

    try:
        file_size(f, "terrain mesh", MAX_TERRAIN_FILE_BYTES, error=_field_error, label=f"{where} {f.name!r}")
        doc, blob = load_gltf(f)
        reader = Accessors(doc, f, blob)
        scene = doc.scenes[doc.scene or 0] if doc.scenes else None
        roots = list(scene.nodes or ()) if scene is not None else list(range(len(doc.nodes or ())))
        verts: list[np.ndarray] = []
        tris: list[np.ndarray] = []
        count = [0, 0]
        stack = [(r, np.eye(4), 0) for r in roots]
        while stack:
            k, parent, depth = stack.pop()
            node = reader.item(doc.nodes, k, "scene nodes")
            if depth > 64:
                raise FieldError("invalid", f"{where}: {f.name!r} nests nodes more than 64 deep (a cycle?)")
            world = parent @ _node_matrix(node)
            stack.extend((c, world, depth + 1) for c in node.children or ())
            if node.mesh is None:
                continue
            mesh = reader.item(doc.meshes, node.mesh, f"nodes[{k}].mesh")
            for p, prim in enumerate(mesh.primitives or ()):
                at = f"meshes[{node.mesh}].primitives[{p}]"
                if prim.mode not in (None, g.TRIANGLES):
                    raise FieldError("invalid", f"{where}: {f.name!r} {at} has mode {prim.mode}; triangulate it")
                if prim.attributes.POSITION is None:
                    continue
                pos = reader.read(prim.attributes.POSITION, f"{at}.attributes.POSITION").astype(np.float64)
                if pos.shape[1] != 3:
                    raise reader.refuse(f"{at}.attributes.POSITION", "is not VEC3")
                idx = (reader.read(prim.indices, f"{at}.indices").reshape(-1).astype(np.int64)
                       if prim.indices is not None else np.arange(len(pos)))
                if len(idx) % 3 or (len(idx) and (idx.min() < 0 or idx.max() >= len(pos))):
                    raise reader.refuse(f"{at}.indices", f"are not triangles of its {len(pos)} vertices")
                verts.append(pos @ world[:3, :3].T + world[:3, 3])
                tris.append(idx.reshape(-1, 3) + count[0])
                count[0] += len(pos)
                count[1] += len(idx) // 3
                if count[1] > MAX_MESH_TRIANGLES:
                    raise FieldError("too_large", f"{where}: {f.name!r} has more than {MAX_MESH_TRIANGLES:,} "
                                                  "triangles; give a coarser mesh")
    except FieldError:
        raise
    except MotionMatchError as e:
        raise FieldError("invalid", f"{where}: {e}") from None
    if not verts:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    return np.concatenate(verts), np.concatenate(tris)


def _node_matrix(node) -> np.ndarray:
    """A glTF node's local transform as a 4x4 matrix (``matrix`` is column-major; else T R S)."""
    if node.matrix is not None and len(node.matrix) == 16:
        return np.array(node.matrix, dtype=np.float64).reshape(4, 4).T
    m = np.eye(4)
    if node.scale is not None:
        m = np.diag([*map(float, node.scale), 1.0]) @ m
    if node.rotation is not None:
        x, y, z, w = map(float, node.rotation)
        r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        rot = np.eye(4)
        rot[:3, :3] = r
        m = rot @ m
    if node.translation is not None:
        t = np.eye(4)
        t[:3, 3] = list(map(float, node.translation))
        m = t @ m
    return m


_MESH = {"file": Str(FILE_LEN), "outside": Num(*TERRAIN_HEIGHT, optional=True, default=0.0)}


def _mesh(v: Any, where: str, folder: Path | None) -> TriangleMesh:
    d = {"file": v, "outside": 0.0} if isinstance(v, str) else Obj(_MESH).check(v, where)
    name = Str(FILE_LEN).check(d["file"], f"{where}.file" if isinstance(v, dict) else where)
    f = _in_folder(name, where, folder)
    suffix = f.suffix.lower()
    if suffix == ".obj":
        verts, tris = _obj_mesh(f, where)
    elif suffix in (".glb", ".gltf"):
        verts, tris = _glb_mesh(f, where)
    else:
        raise FieldError("invalid", f"{where}: {name!r} is not a .glb, .gltf or .obj file")
    if len(tris) == 0:
        raise FieldError("invalid", f"{where}: {name!r} has no faces (triangles); give a mesh of the ground's "
                                    "surface")
    lo, hi = TERRAIN_HEIGHT
    bad = ~np.isfinite(verts).all(axis=1) | (np.abs(verts[:, [0, 2]]) > WORLD[1]).any(axis=1) \
        | (verts[:, 1] < lo) | (verts[:, 1] > hi)
    if bad.any():
        k = int(np.argmax(bad))
        raise FieldError("invalid", f"{where}: {name!r} vertex {k} is {verts[k].tolist()}, not finite or outside "
                                    f"the world (x, z within {WORLD[1]:g} m, y within {lo:g}..{hi:g} m)")
    return TriangleMesh(verts, tris, outside=d["outside"], source=name)


# ----------------------------------------------------------------------------- the "terrain" object
def parse_terrain(v: Any, where: str = "terrain", folder: str | Path | None = None) -> Terrain:
    """The ground of a ``"terrain"`` object (see the module docstring), or a
    :class:`~motionmatch.validation.FieldError` naming the field at ``where``. Files it
    names are read from ``folder`` only (``None``: inline heights only, as from the viewer's
    page)."""
    if not isinstance(v, dict):
        raise FieldError("invalid", f"{where} must be an object with one of 'flat', 'height_field', 'mesh'")
    kinds = [k for k in ("flat", "height_field", "mesh") if k in v]
    extra = sorted(set(v) - {"flat", "height_field", "mesh", "name", "description"}, key=str)
    if extra:
        raise FieldError("invalid", f"{where}: unknown field(s) {', '.join(map(repr, extra))}; known: description, "
                                    "flat, height_field, mesh, name")
    if len(kinds) != 1:
        raise FieldError("invalid", f"{where} must have one of 'flat', 'height_field', 'mesh', got "
                                    f"{kinds or 'none'}")
    for k in ("name", "description"):
        if v.get(k) is not None:
            Str(4000).check(v[k], f"{where}.{k}")
    kind = kinds[0]
    at = f"{where}.{kind}"
    folder = Path(folder) if folder is not None else None
    if kind == "flat":
        if not (v["flat"] is True or (isinstance(v["flat"], dict) and not v["flat"])):
            raise FieldError("invalid", f"{at} must be {{}} (the flat ground is y = 0 everywhere)")
        return FlatGround()
    if kind == "height_field":
        return _height_field(v["height_field"], at, folder)
    return _mesh(v["mesh"], at, folder)


def load_terrain(path: str | Path, *, label: str | None = None) -> Terrain:
    """The ground of a terrain JSON file (a ``"terrain"`` object, or an object holding one
    under ``"terrain"``, as a scenario file does), files it names read from its folder; a
    bad one raises a one-line :class:`TerrainError` naming the file and the field."""
    p = Path(path)
    shown = label or str(p)
    data = read_json(p, "terrain", error=TerrainError, label=shown)
    where = "terrain"
    if isinstance(data, dict) and isinstance(data.get("terrain"), dict):
        data = data["terrain"]
    try:
        return parse_terrain(data, where, p.parent)
    except FieldError as e:
        raise TerrainError(f"{shown}: {e}") from None
