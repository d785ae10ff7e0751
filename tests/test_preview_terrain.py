"""Preview videos on uneven ground (issue 31, item 4): the terrain drawn under the figure,
the feet and the shadow on it, the flat floor exactly as before, bad input refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the preview needs matplotlib (pip install 'motionmatch[viz]')")
import matplotlib
from PIL import Image

from motionmatch.environment.terrain import FlatGround, HeightField
from motionmatch.io import preview
from motionmatch.io.preview import render_preview
from motionmatch.io.preview_ground import PreviewGround, check_terrain

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clip(data_dir):
    from motionmatch.anim import load_bvh

    f = data_dir / "lafan1" / "walk1_subject1_stop.bvh"
    if not f.is_file():
        pytest.skip(f"{f} not found; set MOTIONMATCH_DATA to the shared data folder")
    return load_bvh(f)[:40]


@pytest.fixture(scope="module")
def forest():
    from motionmatch.environment import load_scenario

    return load_scenario(REPO / "scenarios" / "forest.json")


@pytest.fixture(scope="module")
def hiker(data_dir, forest, request):
    """2.5 s of a character walking up the forest's ramp (x = 11 m, from z = 3.5 m, where
    the ground is already 0.3 m up), on LAFAN1 (the database cached as other tests do)."""
    from motionmatch.control.script import parse_script
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import load_folder
    from motionmatch.runtime.inputs import ScriptInput
    from motionmatch.runtime.offline import run_input

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found; set MOTIONMATCH_DATA to the shared data folder")
    db = MotionDatabase.cached(request.config.cache.mkdir("motionmatch-db") / "lafan1-60fps.npz", load_folder(folder))
    script = parse_script({"duration": 2.5, "events": [{"t": 0.0, "keys": ["w"]}]})
    return run_input(db, lambda agent: ScriptInput(script, gaits=agent.ctrl.gaits), script.frame_count(1 / 60),
                     fps=60.0, start=(11.0, 3.5), scene=forest.scene())


def _renderer(motion, *, desired=None, actual=None, terrain=None, size=(320, 240), camera="follow"):
    """A renderer as :func:`render_preview` makes it (30 fps output)."""
    F = motion.num_frames
    ground = check_terrain(terrain)
    if actual is None:
        actual = motion.world_positions[:, 0]
    return preview._Renderer(
        motion, size=size, dpi=100.0, camera=camera, projection="perspective", azimuth=35.0, elevation=22.0,
        fov=40.0, desired=preview._as_trajectory(desired, "desired", F), actual=preview._as_trajectory(actual, "a", F),
        contacts=preview._default_contacts(motion, ground), shown=preview.output_frame_indices(F, motion.fps, 30.0),
        title=None, terrain=ground)


def _future(motion, offsets=(10, 20, 30)):
    hips = motion.world_positions[:, 0]
    F = motion.num_frames
    return np.stack([hips[np.minimum(np.arange(F) + k, F - 1)] for k in offsets], axis=1)


# ------------------------------------------------------------------- the flat floor
# sha256 of every frame of the two previews of _golden(), rendered by the code before
# terrains were drawn (matplotlib 3.11.2): a flat run's video must stay the same, pixel for pixel
GOLDEN_MATPLOTLIB = "3.11.2"
GOLDEN = {"follow": "114445ca94c05ac8a879284a4ec1b8543a8f17e1a7d470574022ae5171d0627b",
          "fixed": "d6545665285aa0861049063325b32fe1e49960ed06786a99abfde034d8bf4973"}


def _golden(clip, camera, terrain=None) -> str:
    F = clip.num_frames
    hips = clip.world_positions[:, 0].copy()
    fut = np.stack([hips[np.minimum(np.arange(F) + k, F - 1)] for k in (10, 20, 30)], axis=1)
    shown = preview.output_frame_indices(F, clip.fps, 30)
    r = preview._Renderer(clip, size=(240, 180), dpi=100, camera=camera, projection="perspective", azimuth=35,
                          elevation=22, fov=40, desired=preview._as_trajectory(fut, "d", F),
                          actual=preview._as_trajectory(hips, "a", F), contacts=preview._default_contacts(clip),
                          shown=shown, title="golden", terrain=check_terrain(terrain))
    h = hashlib.sha256()
    for k in range(len(shown)):
        h.update(r.draw(k).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("camera", ["follow", "fixed"])
def test_a_flat_run_renders_the_same_pixels_as_before_terrains(clip, camera):
    if matplotlib.__version__ != GOLDEN_MATPLOTLIB:
        pytest.skip(f"the reference frames were drawn by matplotlib {GOLDEN_MATPLOTLIB}, this is "
                    f"{matplotlib.__version__} (its anti-aliasing may differ)")
    assert _golden(clip, camera) == GOLDEN[camera]
    assert _golden(clip, camera, FlatGround()) == GOLDEN[camera]  # a flat terrain given: the same floor


def test_a_flat_terrain_writes_the_same_file_as_none(clip, tmp_path):
    a = render_preview(clip, tmp_path / "none.gif", desired_trajectory=_future(clip), size=(200, 150), progress=False)
    b = render_preview(clip, tmp_path / "flat.gif", desired_trajectory=_future(clip), size=(200, 150), progress=False,
                       terrain=FlatGround())
    assert a.read_bytes() == b.read_bytes()


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", ["scenarios/forest.json", {"flat": {}}, np.zeros((4, 4))])
def test_a_bad_terrain_is_refused_in_one_line_before_any_file(clip, tmp_path, bad):
    with pytest.raises(ValueError) as e:
        render_preview(clip, tmp_path / "a.gif", terrain=bad, progress=False)
    msg = str(e.value)
    assert "terrain must be a motionmatch.environment.terrain.Terrain" in msg and "\n" not in msg
    assert type(bad).__name__ in msg
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------- the ground's geometry
def test_grid_lines_lie_on_the_surface_and_bend_where_it_does():
    """Height field lines are sampled at its cells' edges, so every drawn point is on the
    surface and a point between two samples is too (bilinear: straight along a line)."""
    axis = np.arange(0.0, 10.01, 0.5)
    X, Z = np.meshgrid(axis, axis)
    field = HeightField((0.0, 0.0), 0.5, 0.4 * np.sin(X) * np.cos(Z / 1.3))
    g = PreviewGround(field, spacing=1.0)
    forward = np.array([0.3, -0.4, -0.87])  # looking mostly towards -z: rows along x
    lines, ends, surface, colours = g.ground(np.array([-1.0, -1.0]), np.array([11.0, 11.0]), forward)
    np.testing.assert_allclose(lines[:, 1], field.heights(lines[:, [0, 2]]), atol=1e-12)
    for line in np.split(lines, ends):
        mid = (line[1:] + line[:-1]) / 2
        np.testing.assert_allclose(mid[:, 1], field.heights(mid[:, [0, 2]]), atol=1e-9)
    assert len(np.split(lines, ends)) == 2 * 13  # lines every metre from -1 to 11, both ways
    # the surface covers the rectangle on the ground's heights, its rows and each row's quads
    # painted from the farthest (along the camera's forward, on the ground) to the nearest
    np.testing.assert_allclose(surface[..., 1], field.heights(surface[..., [0, 2]].reshape(-1, 2)).reshape(
        surface.shape[:2]), atol=1e-12)
    depth = surface[..., [0, 2]] @ forward[[0, 2]]
    assert np.all(np.diff(depth, axis=0) < 0) and np.all(np.diff(depth, axis=1) < 0)
    assert np.all(np.diff(surface[..., 2], axis=1) == 0)  # rows along x (the camera looks along z more)
    assert (surface[..., 0].min(), surface[..., 2].max()) == (-1.0, 11.0)
    R, C = surface.shape[0] - 1, surface.shape[1] - 1
    assert (R, C) == (24, 24)  # the field's 0.5 m cells
    assert colours.shape == (R * C, 3) and 0.0 <= colours.min() and colours.max() <= 1.0
    # looking along +x instead: rows along z, the farthest (largest x) first
    _, _, across, _ = g.ground(np.array([-1.0, -1.0]), np.array([11.0, 11.0]), np.array([0.9, -0.4, 0.1]))
    assert np.all(np.diff(across[..., 0], axis=1) == 0) and np.all(np.diff(across[..., 0], axis=0) < 0)
    # colours: higher ground browner (more red than green), a slope to the light lighter than one away
    h, n = np.array([-0.4, 0.4, 0.0, 0.0]), np.array([[0, 1, 0], [0, 1, 0], [-0.26, 0.97, 0], [0.26, 0.97, 0]])
    c = g.colours(h, n)
    assert c[1, 0] - c[1, 1] > c[0, 0] - c[0, 1]
    assert c[2].sum() > c[3].sum()


def test_a_mesh_ground_is_drawn_on_its_triangles():
    """A triangle mesh (a plane rising 0.2 m per metre along x): lines and quads on it."""
    from motionmatch.environment.terrain import TriangleMesh

    v = np.array([[-5.0, -1.0, -5.0], [5.0, 1.0, -5.0], [5.0, 1.0, 5.0], [-5.0, -1.0, 5.0]])
    mesh = TriangleMesh(v, [[0, 2, 1], [0, 3, 2]])
    g = PreviewGround(mesh, spacing=0.5)
    lines, ends, surface, colours = g.ground(np.array([-4.0, -4.0]), np.array([4.0, 4.0]), np.array([0.6, -0.4, -0.7]))
    np.testing.assert_allclose(lines[:, 1], 0.2 * lines[:, 0], atol=1e-12)
    np.testing.assert_allclose(surface[..., 1], 0.2 * surface[..., 0], atol=1e-12)
    assert len(np.split(lines, ends)) == 2 * 17
    assert (g.low, g.high) == pytest.approx((-1.0, 1.0))
    # higher tiles browner; the slope faces -x, towards the light (from -x): lighter than level ground as high
    h = ((surface[1:, 1:] + surface[:-1, :-1] + surface[1:, :-1] + surface[:-1, 1:]) / 4)[..., 1].ravel()
    order = np.argsort(h)
    assert np.all(np.diff((colours[:, 0] - colours[:, 1])[order]) >= -1e-12)
    level = g.colours(h, np.tile([0.0, 1.0, 0.0], (len(h), 1)))
    assert np.all(colours.sum(axis=1) > level.sum(axis=1))


# ----------------------------------------------------------------------- on the forest
def test_the_forest_preview_draws_the_relief_and_the_feet_on_it(hiker, forest):
    motion = hiker.motion
    on = _renderer(motion, desired=hiker.desired, terrain=forest.terrain)
    flat = _renderer(motion, desired=hiker.desired)
    k = len(on.shown) - 1
    img, img_flat = on.draw(k), flat.draw(k)
    # the ground: shaded tiles where the flat floor is white between its grey lines
    ground = img[int(0.6 * img.shape[0]):]
    ground_flat = img_flat[int(0.6 * img.shape[0]):]
    white = (ground > 245).all(axis=-1).mean()
    white_flat = (ground_flat > 245).all(axis=-1).mean()
    assert white < 0.05 < 0.8 < white_flat
    assert (np.abs(ground.astype(int) - ground_flat).sum(axis=-1) > 30).mean() > 0.8
    # the ground's colours vary with its relief (a ramp: a range of heights in view)
    assert len(np.unique(ground.reshape(-1, 3) // 8, axis=0)) > 20

    # planted feet are drawn where the surface under them is drawn (a few pixels: a foot
    # joint stands a few centimetres above its sole), and far from where y = 0 would be
    wp = motion.world_positions
    feet, planted = np.asarray(on.feet), on.contacts
    gaps, gaps_flat, n = [], [], 0
    for k in range(len(on.shown)):
        f = int(on.shown[k])
        for j in feet[planted[f]]:
            foot = wp[f, j]
            under = np.array([foot[0], forest.terrain.height(foot[0], foot[2]), foot[2]])
            px, px_under = on.pixels(k, foot), on.pixels(k, under)
            gaps.append(np.linalg.norm(px - px_under))
            gaps_flat.append(np.linalg.norm(px - on.pixels(k, under * [1, 0, 1])))
            n += 1
            assert 0 <= px[0] < 320 and 0 <= px[1] < 240
            if k == len(on.shown) - 1:  # the surface is drawn there, not the white background
                c, r = np.rint(px_under).astype(int)
                assert not (img[r - 1 : r + 2, c - 1 : c + 2] > 245).all()
    assert n >= 20, "too few planted feet to judge"
    assert np.median(gaps) < 3.0 and np.max(gaps) < 6.0
    assert np.min(gaps_flat) > 10.0  # the ground is 0.3 to 0.6 m up there: y = 0 is far below

    # the shadow and both trajectories lie on the surface too
    np.testing.assert_allclose(on.actual[:, 1], forest.terrain.heights(on.actual[:, [0, 2]]))
    d = on.desired.reshape(-1, 3)
    np.testing.assert_allclose(d[:, 1], forest.terrain.heights(d[:, [0, 2]]))


def test_the_camera_frames_a_character_on_a_plateau_as_on_the_floor(clip):
    """The same walk 2 m up on a plateau is drawn exactly where it is on the floor: the
    camera follows the ground's height (and the character's size ignores it)."""
    from motionmatch.anim import Motion

    up = clip.translations.copy()
    up[:, 0, 1] += 2.0
    lifted = Motion(clip.skeleton, clip.rotations, up, clip.fps)
    plateau = HeightField((-50.0, -50.0), 10.0, np.full((11, 11), 2.0))
    for camera in ("follow", "fixed"):
        on = _renderer(lifted, terrain=plateau, camera=camera)
        floor = _renderer(clip, camera=camera)
        assert on.scale == pytest.approx(floor.scale)
        for k in (0, len(on.shown) // 2, len(on.shown) - 1):
            f = int(on.shown[k])
            np.testing.assert_allclose(on.pixels(k, lifted.world_positions[f]), floor.pixels(k, clip.world_positions[f]),
                                       atol=1e-6)
            assert np.isfinite(on.draw(k)).all()


# ------------------------------------------------------------------- the command line
def test_run_and_follow_draw_their_scenes_terrain(tmp_path, capsys):
    """``motionmatch run --scene`` and ``follow --scene`` previews show the scene's ground
    (a synthetic walker database: quick)."""
    from motionmatch.cli.main import main
    from motionmatch.database import MotionDatabase
    from synthetic import walker

    db = MotionDatabase.build([walker(n=240, speed=1.2), walker(n=240, turn_rate=0.8, name="arc")])
    db_file = db.save(tmp_path / "db.npz")
    axis = np.arange(-10.0, 10.01, 1.0)
    X, Z = np.meshgrid(axis, axis)
    scene = tmp_path / "hill.json"
    scene.write_text(json.dumps({"duration": 1.0, "terrain": {"height_field": {
        "origin": [-10, -10], "cell": 1.0, "heights": (0.15 * np.sin(X / 2) * np.sin(Z / 2) + 0.05 * Z).tolist()}}}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 1.5, "events": [{"t": 0, "keys": ["w"]}]}))
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"points": [[0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [2.0, 0.0, 2.0]]}))

    def white_ground(gif: Path) -> float:
        with Image.open(gif) as im:
            im.seek(im.n_frames - 1)
            rgb = np.asarray(im.convert("RGB"))
        return float((rgb[int(0.7 * rgb.shape[0]):] > 245).all(axis=-1).mean())

    common = {"run": ["--input", str(script)], "follow": ["--path", str(path)]}
    for command, args in common.items():
        for on in (True, False):
            out = tmp_path / f"{command}_{on}.gif"
            argv = [command, "--db", str(db_file), *args, "-o", str(tmp_path / f"{command}_{on}.bvh"),
                    "--preview", str(out)] + (["--scene", str(scene)] if on else [])
            assert main(argv) == 0, capsys.readouterr().err
            white = white_ground(out)
            assert (white < 0.05) if on else (white > 0.8), (command, on, white)
