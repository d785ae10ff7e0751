"""The ground in the files we write: a ``.glb`` and a USD file of a run on terrain hold it
as a mesh on the terrain's surface (checked by reading the file back, and by the Khronos
glTF validator when it is installed)."""

from __future__ import annotations

import numpy as np
import pygltflib
import pytest

from motionmatch.environment import load_scenario
from motionmatch.environment.terrain import FlatGround, HeightField, TriangleMesh
from motionmatch.io.ground import ground_mesh
from motionmatch.io.motion_files import write_motion
from synthetic import walker
from test_gltf import REPO, validate

HILLS = HeightField((-3.0, -2.0), 0.5, np.sin(np.arange(13)[:, None] * 0.5) * np.cos(np.arange(11)[None] * 0.4))


def _read_mesh(path, name: str) -> np.ndarray:
    doc = pygltflib.GLTF2().load_binary(str(path))
    blob = doc.binary_blob()
    node = next(n for n in doc.nodes if n.name == name)
    acc = doc.accessors[doc.meshes[node.mesh].primitives[0].attributes.POSITION]
    view = doc.bufferViews[acc.bufferView]
    return np.frombuffer(blob, np.float32, acc.count * 3, view.byteOffset + (acc.byteOffset or 0)).reshape(-1, 3)


def test_ground_mesh_lies_on_the_terrain_with_upward_normals():
    v, n, _ = ground_mesh(HILLS)
    np.testing.assert_allclose(v[:, 1], HILLS.heights(v[:, [0, 2]]), atol=1e-12)  # every vertex on the ground
    inside = (v[:, 0] > -3.0) & (v[:, 0] < 2.0) & (v[:, 2] > -2.0) & (v[:, 2] < 4.0)
    assert (n[:, 1] > 0).all()
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0)
    np.testing.assert_allclose(n[inside], HILLS.normals(v[inside][:, [0, 2]]), atol=0.35)  # close to the slope
    lo, hi = v.min(axis=0), v.max(axis=0)
    assert lo[0] == -23.0 and hi[2] == 4.0 + 20.0  # the flat continuation around the grid
    fv, _, ft = ground_mesh(FlatGround())
    assert (fv[:, 1] == 0).all() and len(ft) == 2


def test_glb_of_a_run_on_terrain_holds_the_ground(tmp_path):
    m = walker(n=60)
    out = write_motion(tmp_path / "run.glb", [("a", m), ("b", walker(n=60, heading=1.0))], terrain=HILLS)
    v = _read_mesh(out, "terrain")
    np.testing.assert_allclose(v[:, 1], HILLS.heights(v[:, [0, 2]].astype(np.float64)), atol=1e-5)
    plain = write_motion(tmp_path / "plain.glb", m)
    assert not any(n.name == "terrain" for n in pygltflib.GLTF2().load_binary(str(plain)).nodes)
    validate(out)


def test_glb_of_a_mesh_terrain_keeps_its_triangles(tmp_path):
    mesh = TriangleMesh([[0, 0, 0], [0, 0.5, 4], [4, 0.2, 0], [4, 1, 4]], [[0, 1, 2], [2, 1, 3]])
    out = write_motion(tmp_path / "run.glb", walker(n=30), terrain=mesh)
    np.testing.assert_allclose(_read_mesh(out, "terrain"), mesh.vertices, atol=1e-6)
    validate(out)


def test_usd_of_a_run_on_the_forest_holds_the_ground(tmp_path):
    pytest.importorskip("pxr", reason="usd-core is not installed (pip install 'motionmatch[usd]')")
    from pxr import Usd, UsdGeom

    forest = load_scenario(REPO / "scenarios" / "forest.json").terrain
    out = write_motion(tmp_path / "run.usda", walker(n=30), terrain=forest)
    stage = Usd.Stage.Open(str(out))
    geom = UsdGeom.Mesh(stage.GetPrimAtPath("/World/Terrain"))
    pts = np.array(geom.GetPointsAttr().Get())
    assert len(pts) == (105 + 2) * (97 + 2)
    np.testing.assert_allclose(pts[:, 1], forest.heights(pts[:, [0, 2]].astype(np.float64)), atol=1e-5)
    counts = np.array(geom.GetFaceVertexCountsAttr().Get())
    assert (counts == 3).all() and len(counts) == 2 * (104 + 2) * (96 + 2)
    assert any(p.GetTypeName() == "SkelRoot" for p in stage.Traverse())  # and the character beside it


def test_scenario_and_follow_write_their_scenes_terrain(tmp_path, capsys):
    """``motionmatch scenario`` and ``follow --scene`` on a scene with terrain: the .glb and
    USD outputs hold the ground (and the characters walk on it: no note says otherwise)."""
    import json

    from motionmatch.cli.main import main
    from motionmatch.database import MotionDatabase

    db = MotionDatabase.build([walker(n=240, speed=1.2), walker(n=240, turn_rate=0.8, name="arc")])
    db_file = db.save(tmp_path / "db.npz")
    scene = tmp_path / "hills.json"
    scene.write_text(json.dumps({"duration": 1.0, "terrain": HILLS.to_dict(), "agents": [
        {"start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}}]}))
    out = tmp_path / "scene.glb"
    assert main(["scenario", str(scene), "--db", str(db_file), "-o", str(out), "--quiet"]) == 0
    assert "do not walk on it yet" not in capsys.readouterr().err
    v = _read_mesh(out, "terrain")
    np.testing.assert_allclose(v[:, 1], HILLS.heights(v[:, [0, 2]].astype(np.float64)), atol=1e-5)
    path = tmp_path / "line.json"
    path.write_text(json.dumps({"points": [[0, 0, 0], [2, 0, 2], [4, 0, 4]]}))
    follow = tmp_path / "follow.glb"
    assert main(["follow", "--db", str(db_file), "--path", str(path), "--scene", str(scene), "--mode", "global",
                 "-o", str(follow)]) == 0
    assert len(_read_mesh(follow, "terrain")) == len(v)
    validate(out, follow)


def test_top_down_previews_draw_the_terrain(tmp_path):
    """``plot_scene`` / ``render_scene`` (the ``--preview`` of ``motionmatch scenario``)
    draw a terrain's relief under the scene; flat ground draws as no terrain."""
    pytest.importorskip("matplotlib", reason="previews need matplotlib: pip install 'motionmatch[viz]'")
    from PIL import Image

    from motionmatch.environment.obstacles import disk
    from motionmatch.environment.preview import plot_scene, render_scene
    from motionmatch.environment.scene import Scene

    rows = Scene([disk(0.5, 1.0, 0.3)]).rows_at(0.0)
    tracks = np.zeros((1, 3, 8))
    tracks[0, :, 1] = [-1.0, 0.0, 1.0]
    tracks[0, :, 2], tracks[0, :, 4], tracks[0, :, 5] = 1.0, 0.3, 0.2
    images = {}
    for name, terrain in (("none", None), ("flat", FlatGround()), ("hills", HILLS)):
        out = plot_scene(tmp_path / f"{name}.png", rows, tracks, terrain=terrain, bounds=((-3, -2), (2, 4)))
        images[name] = np.asarray(Image.open(out).convert("RGB")).astype(int)
    assert (images["flat"] == images["none"]).all()
    changed = np.abs(images["hills"] - images["none"]).sum(axis=-1) > 30
    assert changed.mean() > 0.5  # the relief fills the plot
    gif = render_scene(tmp_path / "run.gif", rows, tracks, fps=60.0, out_fps=60.0, terrain=HILLS)
    assert Image.open(gif).n_frames == 3
