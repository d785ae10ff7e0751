"""The viewer's terrain: the ``terrain_set`` message checked like every other (hostile
input answered with an error, never a crash), the ground as the page draws it, and a
session that keeps the ground on its world's scene, sends it to the page, saves it with
the scene and takes the forest's from its scenario file."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO, data_root
from motionmatch.environment.terrain import FlatGround, HeightField, TriangleMesh
from motionmatch.viewer import messages as M
from motionmatch.viewer.terrain import PAGE_SIDE, terrain_drawing

HILL = {"height_field": {"origin": [-2.0, -1.0], "cell": 0.5, "heights": [[0, 0.1, 0.2], [0.1, 0.3, 0.2]]}}


def test_terrain_set_is_checked_like_other_messages():
    out = M.parse(json.dumps({"type": "terrain_set", "terrain": HILL, "seq": 3}))
    assert isinstance(out["terrain"], HeightField) and out["seq"] == 3
    assert M.parse(json.dumps({"type": "terrain_set", "terrain": None}))["terrain"] is None
    assert isinstance(M.parse(json.dumps({"type": "terrain_set", "terrain": {"flat": {}}}))["terrain"], FlatGround)
    for terrain, says in (
        ({"height_field": {**HILL["height_field"], "cell": 0}}, "terrain_set.terrain.height_field.cell must be"),
        ({"height_field": {**HILL["height_field"], "heights": [[0, 1], [0]]}}, "heights[1] has 1 values"),
        ({"height_field": {"origin": [0, 0], "cell": 1, "file": "/etc/passwd"}}, "files are not read here"),
        ({"mesh": "../../secret.glb"}, "files are not read here"),
        ({"flat": 1}, "terrain_set.terrain.flat must be {}"),
        ("hills", "must be an object"),
    ):
        with pytest.raises(M.MessageError) as e:
            M.parse(json.dumps({"type": "terrain_set", "terrain": terrain, "seq": 9}))
        assert says in str(e.value) and e.value.code == "invalid" and e.value.seq == 9 and "\n" not in str(e.value)
    with pytest.raises(M.MessageError) as e:  # over the message size: refused before parsing
        M.parse(json.dumps({"type": "terrain_set", "terrain": {"height_field": {
            "origin": [0, 0], "cell": 0.1, "heights": [[1.234567] * 200] * 200}}}))
    assert e.value.code == "too_large"


hostile_numbers = st.one_of(st.floats(), st.integers(-10**30, 10**30), st.booleans(), st.none(), st.text(max_size=3))
hostile_rows = st.lists(st.one_of(st.lists(hostile_numbers, max_size=5), hostile_numbers), max_size=5)
hostile_terrain = st.one_of(
    st.fixed_dictionaries({"height_field": st.fixed_dictionaries(
        {}, optional={"origin": st.lists(hostile_numbers, max_size=3), "cell": hostile_numbers,
                      "heights": hostile_rows, "file": st.text(max_size=8), "scale": hostile_numbers,
                      "offset": hostile_numbers})}),
    st.fixed_dictionaries({}, optional={"flat": st.one_of(st.just({}), hostile_numbers), "mesh": hostile_numbers,
                                        "name": hostile_numbers}),
    hostile_numbers)


@settings(max_examples=300, deadline=None)
@given(hostile_terrain)
def test_any_terrain_a_page_sends_is_taken_or_refused_with_an_error(terrain):
    text = json.dumps({"type": "terrain_set", "terrain": terrain})
    try:
        out = M.parse(text)
    except M.MessageError as e:
        assert e.code in ("invalid", "too_large", "bad_json") and "\n" not in str(e)
        return
    t = out["terrain"]
    if t is not None:  # what is taken answers with finite heights
        h, n = t.query(np.array([[0.0, 0.0], [1e3, -1e3]]))
        assert np.isfinite(h).all() and np.isfinite(n).all()


def test_the_page_gets_the_grid_or_the_mesh():
    hf = HeightField((-2.0, -1.0), 0.5, [[0, 0.1, 0.2], [0.1, 0.3, 0.2]])
    d = terrain_drawing(hf)
    assert d == {"kind": "height_field", "origin": [-2.0, -1.0], "cell": [0.5, 0.5], "rows": 2, "cols": 3,
                 "heights": [0.0, 0.1, 0.2, 0.1, 0.3, 0.2]}
    assert terrain_drawing(None) is None and terrain_drawing(FlatGround()) is None
    big = HeightField((0.0, 0.0), 0.25, np.random.default_rng(0).normal(size=(700, 1200)))
    d = terrain_drawing(big)
    assert d["cols"] == PAGE_SIDE and d["rows"] == PAGE_SIDE and len(d["heights"]) == PAGE_SIDE ** 2
    _, hi = big.bounds()
    assert d["origin"][0] + (d["cols"] - 1) * d["cell"][0] == pytest.approx(hi[0])  # the same rectangle
    assert d["origin"][1] + (d["rows"] - 1) * d["cell"][1] == pytest.approx(hi[1])
    j, i = 7, 11
    x, z = d["origin"][0] + j * d["cell"][0], d["origin"][1] + i * d["cell"][1]
    assert d["heights"][i * d["cols"] + j] == pytest.approx(big.height(x, z), abs=5e-4)  # resampled bilinearly
    mesh = TriangleMesh([[0, 0, 0], [0, 0, 1], [1, 0.5, 0]], [[0, 1, 2]], outside=0.25)
    d = terrain_drawing(mesh)
    assert d["kind"] == "mesh" and len(d["vertices"]) == 9 and d["outside"] == 0.25
    assert sorted(d["triangles"]) == [0, 1, 2]


# ----------------------------------------------------------------------------- a session
@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    from test_viewer_support import small_database, viewer_deps_or_skip

    viewer_deps_or_skip()
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer

    db = small_database(tmp_path_factory.getbasetemp())
    return Viewer(db, catalog=FileCatalog({"data": data_root(), "repo": REPO / "scenarios"}), adaptive_rate=False)


def _session(viewer):
    from motionmatch.viewer.session import Session

    out: list = []
    return Session(viewer, out.append), out


def _reply(out, seq):
    return [m for m in out if isinstance(m, dict) and m.get("seq") == seq][-1]


def test_a_session_keeps_the_pages_terrain_on_its_world(viewer):
    s, out = _session(viewer)
    assert s.welcome()["terrain"] is None
    s.handle(M.validate({"type": "terrain_set", "terrain": HILL, "seq": 1}))
    r = _reply(out, 1)
    assert r["type"] == "ack" and (r["terrain"], r["rows"], r["cols"]) == ("height_field", 2, 3), r
    sent = [m for m in out if isinstance(m, dict) and m.get("type") == "terrain"][-1]
    assert sent["terrain"]["kind"] == "height_field" and sent["terrain"]["rows"] == 2
    assert isinstance(s.world.scene.terrain, HeightField)
    s.handle(M.validate({"type": "obstacle_add", "obstacle": {"shape": "disk", "center": [1, 1], "radius": 0.3},
                         "seq": 2}))
    assert s.world.scene.terrain is s.terrain and len(s.world.scene) == 1  # obstacles on the same ground
    assert s.welcome()["terrain"]["heights"] == [0.0, 0.1, 0.2, 0.1, 0.3, 0.2]
    s.handle(M.validate({"type": "scene_save", "seq": 3}))
    saved = [m for m in out if isinstance(m, dict) and m.get("type") == "scene"][-1]["scene"]
    assert saved["terrain"] == HeightField((-2.0, -1.0), 0.5, HILL["height_field"]["heights"]).to_dict()
    from motionmatch.environment import parse_scenario

    assert parse_scenario(saved, "saved.json").terrain.height(-1.5, -0.5) == pytest.approx(0.3)
    s.handle(M.validate({"type": "terrain_set", "terrain": None, "seq": 4}))
    assert s.terrain is None and s.world.scene.terrain is None
    assert [m for m in out if isinstance(m, dict) and m.get("type") == "terrain"][-1]["terrain"] is None
    s.step()  # steps on as before


def test_loading_the_forest_sends_its_ground_and_its_characters_walk_on_it(viewer):
    s, out = _session(viewer)
    s.handle({"type": "scenario_load", "file": "repo:forest.json", "seq": 1})
    r = _reply(out, 1)
    assert r["type"] == "ack" and r["agents"] == 10 and r["obstacles"] == 63, r
    assert not any("terrain" in n for n in r["notes"])
    sent = [m for m in out if isinstance(m, dict) and m.get("type") == "terrain"][-1]["terrain"]
    assert (sent["rows"], sent["cols"]) == (105, 97) and sent["cell"] == [0.5, 0.5]
    assert max(sent["heights"]) == pytest.approx(2.0) and math.isclose(sent["origin"][0], -20.0)
    assert isinstance(s.world.scene.terrain, HeightField)
    for _ in range(30):
        s.step(1 / 60)
    roots = np.array([a.result.translations[0] for a in s.world.agents])  # (joint 0: the root, world)
    ground = s.world.scene.terrain.heights(roots[:, [0, 2]])
    assert np.abs(roots[:, 1] - ground).max() < 0.15 and ground.max() > 0.05  # on the hills, not at y = 0


def test_a_scenario_with_a_mesh_terrain_sends_its_triangles(viewer, tmp_path):
    """A scenario's terrain mesh (a file beside it, read by the server) reaches the page as
    its triangles; a file the catalog does not serve is never read."""
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.session import Session

    (tmp_path / "ground.obj").write_text("v -4 0.3 -4\nv 4 0.3 -4\nv 4 0.8 4\nv -4 0.8 4\nf 1 4 3 2\n")
    (tmp_path / "mesh.json").write_text(json.dumps({
        "duration": 2.0, "terrain": {"mesh": {"file": "ground.obj", "outside": 0.1}},
        "agents": [{"start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}}]}))
    out: list = []
    s = Session(Viewer(viewer.db, catalog=FileCatalog({"mine": tmp_path}), adaptive_rate=False), out.append)
    s.handle({"type": "scenario_load", "file": "mine:mesh.json", "seq": 1})
    assert _reply(out, 1)["type"] == "ack", _reply(out, 1)
    sent = [m for m in out if isinstance(m, dict) and m.get("type") == "terrain"][-1]["terrain"]
    assert sent["kind"] == "mesh" and len(sent["triangles"]) == 6 and sent["outside"] == 0.1
    assert isinstance(s.world.scene.terrain, TriangleMesh) and s.terrain.height(0.0, 0.0) == pytest.approx(0.55)
    s.handle({"type": "scene_save", "seq": 2})  # a mesh's file stays where it is: not saved inline
    assert "terrain" not in [m for m in out if isinstance(m, dict) and m.get("type") == "scene"][-1]["scene"]
