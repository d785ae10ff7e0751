"""The terrain model: height fields, meshes and the flat floor against brute-force
references (property tests), known answers, files (.npy, 16-bit PNG, .obj, .glb) and bad
terrain refused in one line naming the field."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from motionmatch.environment.terrain import (
    FlatGround,
    HeightField,
    TerrainError,
    TriangleMesh,
    load_terrain,
    parse_terrain,
)
from motionmatch.environment.terrain import files as terrain_files
from motionmatch.validation import FieldError

FINITE = st.floats(-50.0, 50.0, allow_nan=False, allow_infinity=False)


# ----------------------------------------------------------------------------- references
def reference_height_field(origin, cell, heights, points):
    """scipy's linear interpolation on the grid, the coordinates clamped to it first."""
    from scipy.interpolate import RegularGridInterpolator

    R, C = heights.shape
    xs = origin[0] + cell * np.arange(C)
    zs = origin[1] + cell * np.arange(R)
    f = RegularGridInterpolator((zs, xs), heights, method="linear")
    p = np.stack([np.clip(points[:, 1], zs[0], zs[-1]), np.clip(points[:, 0], xs[0], xs[-1])], axis=1)
    return f(p)


def reference_mesh_top(vertices, triangles, points, eps):
    """The highest triangle holding each point (barycentric coordinates >= eps), by
    checking every triangle; ``nan`` where none does."""
    out = np.full(len(points), np.nan)
    for a, b, c in triangles:
        A, B, C = vertices[a], vertices[b], vertices[c]
        e1, e2 = B - A, C - A
        det = e1[0] * e2[2] - e1[2] * e2[0]
        if abs(det) < 1e-14:
            continue
        q = points - A[[0, 2]]
        s = (q[:, 0] * e2[2] - q[:, 1] * e2[0]) / det
        r = (e1[0] * q[:, 1] - e1[2] * q[:, 0]) / det
        inside = (s >= eps) & (r >= eps) & (s + r <= 1 - eps)
        y = A[1] + s * e1[1] + r * e2[1]
        out = np.where(inside & ~(out >= y), y, out)
    return out


# ----------------------------------------------------------------------------- height fields
@settings(max_examples=60, deadline=None)
@given(rows=st.integers(2, 7), cols=st.integers(2, 7), cell=st.floats(0.05, 5.0),
       ox=FINITE, oz=FINITE, data=st.data())
def test_height_field_matches_scipy_everywhere(rows, cols, cell, ox, oz, data):
    heights = data.draw(arrays(np.float64, (rows, cols), elements=st.floats(-20, 20)))
    span = np.array([cols - 1, rows - 1]) * cell
    pts = data.draw(arrays(np.float64, (16, 2), elements=st.floats(-1.5, 2.5)))
    pts = np.array([ox, oz]) + pts * span  # inside and outside the grid
    hf = HeightField((ox, oz), cell, heights)
    h, n = hf.query(pts)
    np.testing.assert_allclose(h, reference_height_field((ox, oz), cell, heights, pts), atol=1e-9, rtol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0, atol=1e-12)
    assert (n[:, 1] > 0).all()


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(2, 6), cols=st.integers(2, 6), data=st.data())
def test_height_field_normals_are_the_slope(rows, cols, data):
    """Inside a cell (away from its edges) the normal is (-dh/dx, 1, -dh/dz), normalised,
    with the slope by central differences of the reference heights; outside, straight up
    across the edge the point is beyond."""
    heights = data.draw(arrays(np.float64, (rows, cols), elements=st.floats(-5, 5)))
    u = data.draw(st.floats(0.0, cols - 1.0))
    v = data.draw(st.floats(0.0, rows - 1.0))
    assume(min(u % 1, 1 - u % 1) > 1e-3 and min(v % 1, 1 - v % 1) > 1e-3)
    cell = 0.5
    hf = HeightField((1.0, -2.0), cell, heights)
    p = np.array([[1.0 + u * cell, -2.0 + v * cell]])
    e = 1e-6
    dx = (reference_height_field((1, -2), cell, heights, p + [e, 0]) - reference_height_field((1, -2), cell, heights, p - [e, 0])) / (2 * e)
    dz = (reference_height_field((1, -2), cell, heights, p + [0, e]) - reference_height_field((1, -2), cell, heights, p - [0, e])) / (2 * e)
    want = np.array([-dx[0], 1.0, -dz[0]]) / np.sqrt(dx[0] ** 2 + dz[0] ** 2 + 1)
    np.testing.assert_allclose(hf.normals(p)[0], want, atol=1e-6)
    beyond = np.array([[1.0 - 3.0, -2.0 + v * cell]])  # west of the grid: no slope along x
    assert hf.normals(beyond)[0, 0] == 0.0


def test_height_field_known_answers():
    hf = HeightField((10.0, 20.0), 2.0, [[0.0, 2.0], [4.0, 6.0]])  # h = x-slope 1 m/m, z-slope 2 m/m
    h, n = hf.query([[11.0, 21.0], [10.0, 20.0], [12.0, 22.0], [0.0, 0.0], [100.0, 21.0]])
    np.testing.assert_allclose(h, [3.0, 0.0, 6.0, 0.0, 4.0])
    np.testing.assert_allclose(n[0], np.array([-1.0, 1.0, -2.0]) / np.sqrt(6.0))
    np.testing.assert_allclose(n[4], np.array([0.0, 1.0, -2.0]) / np.sqrt(5.0))  # east of it: flat along x
    assert hf.height(11.0, 21.0) == 3.0
    assert hf.heights(np.array([11.0, 21.0])).shape == (1,)  # one point as [2]


def test_a_15_degree_ramp_has_a_15_degree_normal():
    s = np.tan(np.radians(15.0))
    hf = HeightField((0.0, 0.0), 1.0, [[0.0, 0.0], [s * 1.0, s * 1.0]] * 1)
    n = hf.normals([[0.5, 0.5]])[0]
    assert np.degrees(np.arccos(n[1])) == pytest.approx(15.0, abs=1e-9)


# ----------------------------------------------------------------------------- meshes
@settings(max_examples=50, deadline=None)
@given(data=st.data(), n_tri=st.integers(1, 25))
def test_mesh_top_surface_matches_brute_force(data, n_tri):
    """Random (overlapping, any-size, any-winding) triangles: the bucketed kernel finds the
    highest triangle over each point, as checking every triangle does (points on an edge
    may count either way: the answer lies between the strict and the loose reference)."""
    verts = data.draw(arrays(np.float64, (3 * n_tri, 3), elements=st.floats(-10, 10)))
    tris = np.arange(3 * n_tri).reshape(-1, 3)
    areas = np.abs(np.cross(verts[tris[:, 1]] - verts[tris[:, 0]], verts[tris[:, 2]] - verts[tris[:, 0]])[:, 1])
    assume((areas > 1e-6).any())
    pts = data.draw(arrays(np.float64, (32, 2), elements=st.floats(-12, 12)))
    mesh = TriangleMesh(verts, tris, outside=-3.0)
    h, n = mesh.query(pts)
    strict = reference_mesh_top(verts, tris, pts, 1e-7)
    loose = reference_mesh_top(verts, tris, pts, -1e-7)
    some = ~np.isnan(strict)
    assert (h[some] >= strict[some] - 1e-7).all()  # no triangle that holds the point is missed
    assert (h <= np.maximum(np.where(np.isnan(loose), -3.0, loose), -3.0) + 1e-7).all()  # none that does not is used
    none = np.isnan(loose)
    assert (h[none] == -3.0).all() and (n[none] == [0.0, 1.0, 0.0]).all()
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0, atol=1e-9)
    assert (n[:, 1] >= 0).all()


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(2, 6), cols=st.integers(2, 6), data=st.data())
def test_a_height_fields_surface_as_a_mesh_matches_it_at_the_grid_points(rows, cols, data):
    heights = data.draw(arrays(np.float64, (rows, cols), elements=st.floats(-5, 5)))
    hf = HeightField((-1.0, 2.0), 0.7, heights)
    v, t = hf.surface(margin=5.0)
    mesh = TriangleMesh(v, t, outside=123.0)
    lo, hi = hf.bounds()
    gx, gz = np.meshgrid(np.linspace(lo[0], hi[0], cols), np.linspace(lo[1], hi[1], rows))
    grid = np.stack([gx.ravel(), gz.ravel()], 1)
    np.testing.assert_allclose(mesh.heights(grid), heights.ravel(), atol=1e-9)
    far = np.array([[lo[0] - 4.0, lo[1] - 4.0], [hi[0] + 4.0, 0.5 * (lo[1] + hi[1])]])  # the flat continuation
    np.testing.assert_allclose(mesh.heights(far), hf.heights(far), atol=1e-9)
    e1 = v[t[:, 1]] - v[t[:, 0]]
    e2 = v[t[:, 2]] - v[t[:, 0]]
    assert (np.cross(e1, e2)[:, 1] > 0).all()  # every triangle faces up


def test_mesh_known_answers_and_overhang():
    # a 2 x 2 m square at y = 1 (two triangles, one wound each way) and a roof at y = 3 over its half x > 1
    v = [[0, 1, 0], [2, 1, 0], [2, 1, 2], [0, 1, 2], [1, 3, 0], [2, 3, 0], [2, 3, 2], [1, 3, 2]]
    t = [[0, 1, 2], [0, 3, 2], [4, 5, 6], [4, 6, 7]]
    mesh = TriangleMesh(v, t)
    h, n = mesh.query([[0.5, 0.5], [1.5, 1.0], [5.0, 5.0], [2.0, 2.0]])
    np.testing.assert_allclose(h, [1.0, 3.0, 0.0, 3.0])
    np.testing.assert_allclose(n, [[0, 1, 0]] * 4)
    ramp = TriangleMesh([[0, 0, 0], [0, 0, 1], [1, 1, 0]], [[0, 1, 2]])  # 45 degrees up along x
    np.testing.assert_allclose(ramp.query([[0.25, 0.25]])[1][0], [-np.sqrt(0.5), np.sqrt(0.5), 0.0])


def test_flat_ground_is_y_zero():
    h, n = FlatGround().query(np.random.default_rng(0).uniform(-1e3, 1e3, (100, 2)))
    assert (h == 0.0).all() and (n == [0.0, 1.0, 0.0]).all()
    assert FlatGround().is_flat and not HeightField((0, 0), 1, np.zeros((2, 2))).is_flat
    assert parse_terrain({"flat": {}}).is_flat


def test_queries_are_vectorised_and_fast():
    """A large field answers 100,000 points in one compiled call (well under a second)."""
    import time

    rng = np.random.default_rng(1)
    hf = HeightField((-100.0, -100.0), 0.5, rng.normal(size=(401, 401)))
    pts = rng.uniform(-120, 120, (100_000, 2))
    hf.query(pts[:10])
    t0 = time.perf_counter()
    h, n = hf.query(pts)
    assert time.perf_counter() - t0 < 1.0
    assert h.shape == (100_000,) and n.shape == (100_000, 3)
    v, t = hf.surface(margin=0.0, max_side=101)
    mesh = TriangleMesh(v, t)
    mesh.query(pts[:10])
    t0 = time.perf_counter()
    mesh.query(pts)
    assert time.perf_counter() - t0 < 1.0


# ----------------------------------------------------------------------------- the "terrain" object and files
def test_inline_height_field_round_trips():
    d = {"height_field": {"origin": [1.0, -2.0], "cell": 0.5, "heights": [[0, 1, 2], [3, 4, 5.5]]}}
    hf = parse_terrain(d)
    assert isinstance(hf, HeightField) and hf.shape == (2, 3)
    assert hf.to_dict() == {"height_field": {"origin": [1.0, -2.0], "cell": 0.5,
                                             "heights": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.5]]}}
    assert parse_terrain(hf.to_dict()).height(1.25, -2.0) == 0.5


@pytest.mark.parametrize("terrain, field", [
    ({"height_field": {"origin": [0, 0], "cell": 0, "heights": [[0, 1], [2, 3]]}}, "terrain.height_field.cell"),
    ({"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, 1], [2]]}}, "terrain.height_field.heights[1]"),
    ({"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, 1], [2, float("nan")]]}},
     "terrain.height_field.heights[1][1] must be finite"),
    ({"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, "1"], [2, 3]]}},
     "terrain.height_field.heights[0][1] must be a number"),
    ({"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, 1]]}}, "at least 2 rows"),
    ({"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, 1e9], [0, 0]]}},
     "terrain.height_field.heights[0][1] must be between"),
    ({"height_field": {"origin": [999.5, 0], "cell": 1, "heights": [[0, 1], [2, 3]]}}, "past the 1000 m"),
    ({"height_field": {"origin": [0, 0], "cell": 1}}, "one of 'heights'"),
    ({"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, 1], [2, 3]], "size": 3}}, "'size'"),
    ({"hills": {}}, "unknown field(s) 'hills'"),
    ({"flat": {}, "mesh": "a.obj"}, "one of 'flat', 'height_field', 'mesh'"),
    ({"flat": {"height": 1}}, "terrain.flat"),
    ([[0, 1]], "must be an object"),
])
def test_bad_terrain_is_one_line_naming_the_field(terrain, field):
    with pytest.raises(FieldError) as e:
        parse_terrain(terrain)
    assert field in str(e.value) and "\n" not in str(e.value)


def test_too_many_heights_are_refused_before_use():
    with pytest.raises(FieldError, match="more than 4096 a side"):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 0.01, "heights": [[0.0] * 4097] * 2}})


def test_npy_and_16_bit_png_height_fields(tmp_path):
    from PIL import Image

    grid = np.array([[0, 1000, 2000], [3000, 4000, 65535]], dtype=np.uint16)
    Image.fromarray(grid).save(tmp_path / "hills.png")  # mode I;16
    np.save(tmp_path / "hills.npy", grid.astype(np.float64) * 0.001)
    png = parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "hills.png", "scale": 0.001,
                                          "offset": -1.0}}, folder=tmp_path)
    npy = parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "hills.npy"}}, folder=tmp_path)
    np.testing.assert_allclose(png.grid, grid * 0.001 - 1.0)
    np.testing.assert_allclose(npy.grid, grid * 0.001)
    assert npy.height(2.0, 1.0) == pytest.approx(65.535)
    with pytest.raises(FieldError, match=re.escape("terrain.height_field.scale: a PNG's values need a scale")):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "hills.png"}}, folder=tmp_path)
    Image.fromarray(np.zeros((3, 3), np.uint8)).save(tmp_path / "eight.png")
    with pytest.raises(FieldError, match="mode 'L'; give a 16-bit greyscale PNG"):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "eight.png", "scale": 1}},
                      folder=tmp_path)
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2)))
    with pytest.raises(FieldError, match="give a 2-D array"):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "cube.npy"}}, folder=tmp_path)
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(FieldError, match=re.escape("not a readable .npy")):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "junk.npy"}}, folder=tmp_path)


def test_files_only_from_the_folder_and_within_the_size_limit(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "hills.npy", np.zeros((3, 3)))
    with pytest.raises(FieldError, match=re.escape("no file '../hills.npy'")):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "../hills.npy"}},
                      folder=tmp_path / "sub")
    with pytest.raises(FieldError, match="files are not read here"):
        parse_terrain({"mesh": "ground.obj"})
    monkeypatch.setattr(terrain_files, "MAX_TERRAIN_FILE_BYTES", 64)
    with pytest.raises(FieldError, match=r"terrain.height_field.file 'hills.npy': .* bytes, over the 64 bytes"):
        parse_terrain({"height_field": {"origin": [0, 0], "cell": 1, "file": "hills.npy"}}, folder=tmp_path)


def test_obj_mesh(tmp_path):
    (tmp_path / "ground.obj").write_text(
        "# a quad at y = 0.5 and a triangle fan\nv 0 0.5 0\nv 2 0.5 0\nv 2 0.5 2\nv 0 0.5 2\nvn 0 1 0\n"
        "f 1//1 2//1 3//1 4//1\n")
    mesh = parse_terrain({"mesh": {"file": "ground.obj", "outside": -1.0}}, folder=tmp_path)
    assert isinstance(mesh, TriangleMesh) and len(mesh.triangles) == 2
    np.testing.assert_allclose(mesh.heights([[1.0, 1.0], [3.0, 3.0]]), [0.5, -1.0])
    assert mesh.to_dict() == {"mesh": {"file": "ground.obj", "outside": -1.0}}
    (tmp_path / "empty.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 0 1\n")
    with pytest.raises(FieldError, match=re.escape("terrain.mesh: 'empty.obj' has no faces")):
        parse_terrain({"mesh": "empty.obj"}, folder=tmp_path)
    (tmp_path / "bad.obj").write_text("v 0 0 0\nv 1 zero 0\n")
    with pytest.raises(FieldError, match=re.escape("'bad.obj' line 2")):
        parse_terrain({"mesh": "bad.obj"}, folder=tmp_path)
    (tmp_path / "far.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 0 5000\nf 1 2 3\n")
    with pytest.raises(FieldError, match="vertex 2 is"):
        parse_terrain({"mesh": "far.obj"}, folder=tmp_path)
    (tmp_path / "ground.stl").write_text("solid")
    with pytest.raises(FieldError, match=re.escape("not a .glb, .gltf or .obj")):
        parse_terrain({"mesh": "ground.stl"}, folder=tmp_path)


def _write_glb(path, vertices, triangles, translation=(0.0, 0.0, 0.0)):
    import pygltflib as g

    v = np.asarray(vertices, np.float32)
    t = np.asarray(triangles, np.uint32).reshape(-1)
    blob = v.tobytes() + t.tobytes()
    doc = g.GLTF2(scene=0, scenes=[g.Scene(nodes=[0])],
                  nodes=[g.Node(mesh=0, translation=list(translation))],
                  meshes=[g.Mesh(primitives=[g.Primitive(attributes=g.Attributes(POSITION=0), indices=1)])],
                  accessors=[g.Accessor(bufferView=0, componentType=g.FLOAT, count=len(v), type=g.VEC3,
                                        min=v.min(0).tolist(), max=v.max(0).tolist()),
                             g.Accessor(bufferView=1, componentType=g.UNSIGNED_INT, count=len(t), type=g.SCALAR)],
                  bufferViews=[g.BufferView(buffer=0, byteOffset=0, byteLength=v.nbytes),
                               g.BufferView(buffer=0, byteOffset=v.nbytes, byteLength=t.nbytes)],
                  buffers=[g.Buffer(byteLength=len(blob))])
    doc.set_binary_blob(blob)
    doc.save_binary(str(path))


def test_glb_mesh_with_node_transform(tmp_path):
    _write_glb(tmp_path / "ground.glb", [[0, 0, 0], [0, 0, 4], [4, 2, 0]], [[0, 1, 2]], translation=(1.0, 0.5, 0.0))
    mesh = load_terrain(_terrain_file(tmp_path, {"mesh": "ground.glb"}))
    assert mesh.height(2.0, 1.0) == pytest.approx(0.5 + 0.5)  # x = 2 is 1 m into the 2-in-4 slope
    (tmp_path / "broken.glb").write_bytes(b"glTF" + b"\x02\x00\x00\x00" + b"\xff" * 20)
    with pytest.raises(TerrainError, match=r"terrain.json: terrain.mesh: .*broken.glb.*header"):
        load_terrain(_terrain_file(tmp_path, {"mesh": "broken.glb"}))


def _terrain_file(folder, terrain) -> str:
    p = folder / "terrain.json"
    p.write_text(json.dumps(terrain))
    return str(p)


def test_load_terrain_names_the_file(tmp_path):
    f = _terrain_file(tmp_path, {"terrain": {"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, 1], [2]]}}})
    with pytest.raises(TerrainError) as e:
        load_terrain(f)
    assert str(e.value).startswith(f"{f}: terrain.height_field.heights[1] has 1 values")
    (tmp_path / "nan.json").write_text('{"height_field": {"origin": [0, 0], "cell": 1, "heights": [[0, NaN], [0, 0]]}}')
    with pytest.raises(TerrainError, match=re.escape("heights[0][1] must be finite")):
        load_terrain(tmp_path / "nan.json")


def test_obj_forms_read_alike(tmp_path):
    """The array reader of plain triangle files and the line-by-line reader (polygons,
    relative indices, 4-number vertices) give the same mesh."""
    hf = HeightField((0.0, 0.0), 1.0, np.random.default_rng(3).normal(size=(6, 7)))
    v, t = hf.surface(margin=0.0)
    plain = "".join(f"v {a:.17g} {b:.17g} {c:.17g}\n" for a, b, c in v) + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in t)
    slashes = "".join(f"v {a:.17g} {b:.17g} {c:.17g}\n" for a, b, c in v) + "vt 0 0\nvn 0 1 0\n" + "".join(
        f"f {a + 1}/1/1 {b + 1}//1 {c + 1}/1\n" for a, b, c in t)
    relative = "".join(f"v {a:.17g} {b:.17g} {c:.17g} 1.0\nf -1 -1 -1\n" for a, b, c in v[:1]) + "".join(
        f"v {a:.17g} {b:.17g} {c:.17g} 1.0\n" for a, b, c in v[1:]) + "".join(
        f"f {a - len(v)} {b - len(v)} {c - len(v)}\n" for a, b, c in t)
    meshes = []
    for name, text in (("plain", plain), ("slashes", slashes), ("relative", relative)):
        (tmp_path / f"{name}.obj").write_text(text)
        meshes.append(parse_terrain({"mesh": f"{name}.obj"}, folder=tmp_path))
    assert terrain_files._obj_triangles(plain.encode()) is not None  # the array reader took these
    assert terrain_files._obj_triangles(slashes.encode()) is not None
    assert terrain_files._obj_triangles(relative.encode()) is None  # and left this one to the lines
    for m in meshes[1:]:
        np.testing.assert_array_equal(m.vertices, meshes[0].vertices)
    np.testing.assert_array_equal(meshes[1].triangles, meshes[0].triangles)
    np.testing.assert_array_equal(meshes[2].triangles[1:], meshes[0].triangles)  # after its one degenerate face


def test_huge_declared_grids_are_refused_before_they_are_read(tmp_path):
    """A .npy whose header declares 100,000 x 100,000 heights (the file holds none) and a
    PNG of 5,000 x 2 pixels are refused from their headers, in one line naming the field."""
    from PIL import Image

    with open(tmp_path / "huge.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (100_000, 100_000)})
    Image.fromarray(np.zeros((2, 5000), np.uint16)).save(tmp_path / "wide.png")
    for name, extra in (("huge.npy", {}), ("wide.png", {"scale": 0.01})):
        with pytest.raises(FieldError) as e:
            parse_terrain({"height_field": {"origin": [0, 0], "cell": 0.1, "file": name, **extra}}, folder=tmp_path)
        assert "terrain.height_field.file" in str(e.value) and "more than 4096 a side" in str(e.value)


def test_query_into_the_callers_arrays():
    hf = HeightField((0.0, 0.0), 1.0, [[0.0, 1.0], [2.0, 3.0]])
    pts = np.array([[0.5, 0.5], [0.0, 1.0]])
    pts.flags.writeable = False  # read-only points are taken as they are
    h, n = np.empty(2), np.empty((2, 3))
    hf.query_into(pts, h, n)
    np.testing.assert_allclose(h, [1.5, 2.0])
    np.testing.assert_allclose(n, hf.normals(pts))
    with pytest.raises(ValueError, match="out_n must be"):
        hf.query_into(pts, h, np.empty((2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=re.escape("points must be [N, 2]")):
        hf.heights(np.zeros((3, 3)))
