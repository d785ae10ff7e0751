"""Round trips through Blender: the GLB and FBX files motionmatch writes, imported by Blender's
own importers (headless ``bpy``), posed at the first, middle and last frames: every joint's
world position within 1 mm of motionmatch's forward kinematics, and (FBX) every skinned
vertex within 1 mm of the mannequin's own linear-blend skinning. And the Blender add-on
(motionmatch.blender): registered, GenMM run on the action of a BVH imported by Blender's
own importer; the new actions have the asked length, their poses come from the example
(coverage), a marker's pose is pinned, and a motion not from the example scores no
coverage (the metric can fail).

``bpy`` (Blender as a Python module) needs its own Python (3.11, numpy < 2): the tests run
``tests/blender_joints.py`` in the Python named by ``$MOTIONMATCH_BLENDER_PYTHON`` (CI makes
one), or in this one if it has ``bpy``; they skip, saying so, when there is none.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.mannequin import mannequin_for
from motionmatch.io.preview import MissingDependencyError

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
PROBE = HERE / "blender_joints.py"
TOLERANCE_M = 1e-3


def blender_python() -> str | None:
    """The Python to run ``bpy`` in: ``$MOTIONMATCH_BLENDER_PYTHON``, or this one if it has bpy."""
    env = os.environ.get("MOTIONMATCH_BLENDER_PYTHON", "").strip()
    if env:
        return env
    return sys.executable if importlib.util.find_spec("bpy") is not None else None


def run_in_blender(python: str, *args: str, timeout: float = 300) -> dict:
    """Run a script with ``python`` (this checkout's source first on its path); its last stdout
    line, as JSON."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([python, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert done.returncode == 0, f"{args[0]} failed in {python}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def bpy_python() -> str:
    """The Python with bpy the tests run Blender in (skips when there is none)."""
    python = blender_python()
    if python is None:
        pytest.skip("no Python with Blender's bpy module: set MOTIONMATCH_BLENDER_PYTHON to one "
                    "(.ci/run makes it) or `pip install 'motionmatch[blender]'` (Python 3.11)")
    try:
        ok = subprocess.run([python, "-c", "import bpy"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip(f"MOTIONMATCH_BLENDER_PYTHON={python} cannot import bpy")
    return python


#: The characters the round trips write: a LAFAN1 walker, the GenMM crab, a 60 fps LAFAN1
#: walker whose ``Hips`` moves under ``SimulationBone`` and a Bandai-Namco walker whose
#: ``Hips`` moves under ``joint_Root`` (animated locations, which Blender's FBX importer
#: dropped when it connected the two bones). One frame rate (the 60 fps clip's; the 30 fps
#: ones are played twice as fast) so that one FBX and one GLB hold them all.
CHARACTERS = (("walker", "lafan1/walk1_subject1_stop.bvh"), ("crab", "genmm-examples/Crabnew_Crab-dance-long.bvh"),
              ("walker60", "lafan1-60fps/walk1_subject1_walk2.bvh"),
              ("bandai", "bandai-namco/dataset-1/dataset-1_walk-left_tired_001.bvh"))
FRAMES = 40
FPS = 60.0


@pytest.fixture(scope="module")
def characters(data_dir):
    """The :data:`CHARACTERS` (three skeletons, one frame rate), with their mannequins."""
    out = []
    for name, rel in CHARACTERS:
        path = data_dir / rel
        if not path.is_file():
            pytest.skip(f"{path} not found in the motion data")
        m = load_bvh(path)[0:FRAMES]
        m = m.with_data(m.rotations, m.translations, fps=FPS)
        out.append((name, m, mannequin_for(m)))
    return out


def _frames(motion) -> list[int]:
    return [0, motion.num_frames // 2, motion.num_frames - 1]


def _check_joints(seen: dict, name: str, motion) -> None:
    bones = seen["joints"][name]
    got = np.array([bones[j] for j in motion.skeleton.names]).transpose(1, 0, 2)
    err = np.abs(got - motion.world_positions[_frames(motion)]).max()
    assert err < TOLERANCE_M, f"{name}: joints {err * 1000:.3f} mm away from forward kinematics"


@pytest.fixture(scope="module")
def blender_view(bpy_python, characters, data_dir, tmp_path_factory) -> dict:
    """The characters written to one FBX (through ``save_fbx``'s Blender subprocess) and one
    GLB, the 60 fps walker's clip converted to GLB by ``motionmatch convert``, and what
    Blender makes of each file (one Blender start for the three files)."""
    from motionmatch.cli.main import main
    from motionmatch.io.fbx import save_fbx
    from motionmatch.io.motion_files import write_motion

    folder = tmp_path_factory.mktemp("blender")
    names, motions, bodies = zip(*characters)
    fbx = save_fbx(list(motions), folder / "all.fbx", meshes=list(bodies), names=list(names),
                   blender_python_path=bpy_python)
    glb = write_motion(folder / "all.glb", list(zip(names, motions)))
    converted = folder / "walker60.glb"
    assert main(["convert", str(data_dir / CHARACTERS[2][1]), "--range", f"0:{FRAMES}", str(converted)]) == 0
    m = motions[0]
    seen = run_in_blender(bpy_python, str(PROBE), str(m.fps), ",".join(map(str, _frames(m))), "--mesh",
                          str(fbx), str(glb), str(converted))
    return {"fbx": seen[str(fbx)], "glb": seen[str(glb)], "converted": seen[str(converted)]}


@pytest.mark.data
def test_fbx_round_trip_joints_and_skin(blender_view, characters):
    seen = blender_view["fbx"]
    for name, m, body in characters:
        _check_joints(seen, name, m)
        got = np.array(seen["meshes"][f"{name}_body"])
        want = body.skin(m.world_positions[_frames(m)], m.world_rotations[_frames(m)])
        assert got.shape == want.shape, f"{name}: {got.shape[1]} vertices in Blender, {want.shape[1]} written"
        err = np.abs(got - want).max()
        assert err < TOLERANCE_M, f"{name}: skinned vertices {err * 1000:.3f} mm away from the mannequin's skinning"


def _armature_of(seen: dict, name: str, motion) -> dict:
    """The imported armature that is ``name``'s: the one named so, else the only one with
    exactly its joints."""
    joints = set(motion.skeleton.names)
    arms = [a for a, bones in seen["joints"].items() if a == name or set(bones) == joints]
    assert arms, f"{name}: no armature with its joints among {list(seen['joints'])}"
    return {"joints": {name: seen["joints"][sorted(arms, key=lambda a: a != name)[0]]}}


@pytest.mark.data
def test_glb_round_trip_joints(blender_view, characters):
    for name, m, _ in characters:
        _check_joints(_armature_of(blender_view["glb"], name, m), name, m)


@pytest.mark.data
def test_converted_60fps_glb_round_trip_joints(blender_view, characters):
    name, m, _ = characters[2]
    assert m.skeleton.names[:2] == ("SimulationBone", "Hips")
    hips = m.translations[:, 1] - m.skeleton.offsets[1]
    assert np.abs(hips).max() > 0.01  # the layout under test: Hips moves under SimulationBone
    _check_joints(_armature_of(blender_view["converted"], name, m), name, m)


def test_no_bone_points_at_a_child_whose_location_is_animated():
    """LAFAN1's layout: a root whose only child's location is animated. Pointed at that child
    (as it was), Blender's FBX importer would connect the child and drop its location keys;
    the root turns forward instead, and the other bones keep pointing at their children.
    Pure numpy: runs without bpy."""
    from motionmatch.anim import Motion, Skeleton, quat
    from motionmatch.io import blender_scene as bs

    names, parents = ("root", "hips", "spine", "head"), np.array([-1, 0, 1, 2])
    offsets = np.array([[0, 0, 0], [0, 0.9, 0], [0, 0.3, 0], [0, 0.4, 0]], dtype=float)
    tr = np.broadcast_to(offsets, (4, 4, 3)).copy()
    tr[:, 1, 2] += np.linspace(0.0, 0.05, 4)  # hips slides forward from the root
    motion = Motion(Skeleton(names, parents, offsets), quat.identity((4, 4)), tr, 30.0)
    moving = bs.moving_joints(motion)
    assert moving.tolist() == [False, True, False, False]
    skel, heads = motion.skeleton, bs._rest_positions(motion.skeleton)
    before = bs._bone_tails(skel, heads, skel.end_site_offsets) - heads
    after = bs._bone_tails(skel, heads, skel.end_site_offsets, moving) - heads
    assert bs._fbx_connects(heads, 0, [1], [1], before[0])  # what main wrote: root at hips
    assert not bs._fbx_connects(heads, 0, [1], [1], after[0])
    assert np.allclose(after[0], [0, 0, 0.9])  # forward, as long as the distance to hips
    assert np.allclose(after[1:], before[1:])
    assert bs._fbx_connects(heads, 1, [2], [2], after[1])  # a fixed child stays connectable


def test_fbx_without_bpy_names_the_extra(tmp_path, monkeypatch):
    from motionmatch.io import fbx
    from synthetic import walker

    monkeypatch.delenv("MOTIONMATCH_BLENDER_PYTHON", raising=False)
    monkeypatch.setattr(fbx, "_has_bpy", lambda: False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'motionmatch\[blender\]'.*MOTIONMATCH_BLENDER_PYTHON"):
        fbx.save_fbx(walker(5), tmp_path / "w.fbx")
    monkeypatch.setenv("MOTIONMATCH_BLENDER_PYTHON", str(tmp_path / "no-such-python"))
    with pytest.raises(Exception, match="cannot run it"):
        fbx.save_fbx(walker(5), tmp_path / "w.fbx")
    assert not list(tmp_path.iterdir())  # no partial file


# ---------------------------------------------------------------------- the add-on
@pytest.fixture(scope="module")
def addon_run(bpy_python, data_dir, characters, tmp_path_factory) -> dict:
    """One Blender start for the add-on's operators: GenMM on a BVH imported by Blender's own
    importer, motionmatch's Import of the 60 fps LAFAN1 walker's BVH, and Walk along curve
    on a small synthetic database (:func:`blender_addon_check.main`, ``import_and_follow``)."""
    from motionmatch.anim import save_bvh
    from motionmatch.database import MotionDatabase
    from synthetic import walker

    example = data_dir / "genmm-examples" / "Joe_Walk-In-Circle.bvh"
    other = data_dir / "genmm-examples" / "Joe_Salsa-Dancing-6.bvh"
    for p in (example, other):
        if not p.is_file():
            pytest.skip(f"{p} not found in the motion data")
    folder = tmp_path_factory.mktemp("addon")
    bvh = save_bvh(characters[2][1], folder / "walker60.bvh")
    specs = [(1.3, 1.3, 0.0), (1.3, 1.3, 0.45), (1.3, 1.3, -0.45), (1.0, 1.4, 0.0)]  # speed, end speed, turn rate
    db = MotionDatabase.build([walker(n=240, speed=a, end_speed=b, turn_rate=r, name=f"walk_{i}")
                               for i, (a, b, r) in enumerate(specs)], mirror_copies=True)
    db.save(folder / "walkers.npz")
    return run_in_blender(bpy_python, str(HERE / "blender_addon_check.py"), str(example), str(other), str(bvh),
                          str(folder / "walkers.npz"))


@pytest.mark.data
def test_addon_import_bvh_plays_the_motion(addon_run, characters):
    """The add-on's Import of a BVH (60 fps LAFAN1, Hips moving under SimulationBone) into a
    30 fps scene: an armature and its body; the motion keyed frame for frame, every joint
    within 1 mm of forward kinematics."""
    out = addon_run
    name, m, _ = characters[2]
    assert out["import_result"] == ["FINISHED"]
    assert out["import_objects"] == [["walker60", "ARMATURE"], ["walker60_body", "MESH"]]
    assert out["import_frames"][1] - out["import_frames"][0] == m.num_frames - 1
    _check_joints({"joints": {name: out["import_joints"]}}, name, m)


@pytest.mark.data
def test_addon_walks_along_a_curve(addon_run):
    """Walk along curve on a circle of radius 3 m at 1.3 m/s: the walker goes round it, near
    the curve all the way, taking at least the drawn time, and ends where it started. (How
    closely motion matching follows a path is tests/test_follow.py's business.)"""
    out = addon_run
    assert out["follow_result"] == ["FINISHED"]
    assert 18.0 < out["curve_length"] < 18.9  # 2 pi 3 m, as Blender's polygon of it
    drawn = out["curve_length"] / 1.3 * out["fps"]
    assert drawn * 0.95 <= out["walker_frames"] <= drawn * 2.0
    xz = np.array(out["walker_root_xz"])
    radius = np.hypot(xz[:, 0], xz[:, 1])
    off = np.abs(radius - 3.0)  # a database of four synthetic walkers: near, not on, the curve
    assert off.max() < 1.0 and np.median(off) < 0.3, f"the walker strays {off.max():.2f} m off the circle"
    turned = np.unwrap(np.arctan2(xz[:, 1], xz[:, 0]))
    assert abs(turned[-1] - turned[0]) > 0.9 * 2 * np.pi  # all the way round
    assert np.hypot(*(xz[-1] - xz[0])) < 0.6


@pytest.mark.data
def test_addon_genmm_on_an_imported_bvh(addon_run):
    out = addon_run
    assert out["result"] == out["keyed_result"] == ["FINISHED"]
    assert out["fps"] == 30.0 and out["source_frames"] > 300
    assert [a["name"] for a in out["actions"]] == ["Joe_Walk-In-Circle_genmm_0", "Joe_Walk-In-Circle_genmm_1"]
    assert out["assigned"] == "Joe_Walk-In-Circle_genmm_0"
    for a in out["actions"]:
        assert a["frames"] == 90 and a["range"] == [1.0, 90.0]  # 3 s at 30 fps from the action's first frame
        # 90 frames can cover at most 61 of the example's 30-frame windows: nearly all of those
        most = (a["frames"] - 29) / (out["source_frames"] - 29)
        assert a["coverage"] > 0.8 * most, f"{a['name']}: covers {a['coverage']:.3f} of the example (most {most:.3f})"
        assert a["local_patch_distance"] < 0.1 * out["control_local_patch_distance"]
    assert out["control_coverage"] < 0.01
    assert out["marker_rotation_error_rad"] < 1e-3  # the pose at the marker is the example's
    assert out["variants_differ_rad"] > 0.1  # two seeds, two motions


INSTALL_ZIP = """
import json, sys, bpy
bpy.ops.wm.read_factory_settings(use_empty=True)
result = bpy.ops.extensions.package_install_files(filepath=sys.argv[1], repo="user_default", enable_on_install=True)
print(json.dumps({"result": sorted(result), "operators": sorted(n for n in dir(bpy.ops.motionmatch) if not n.startswith("_")),
                  "modules": sorted(m for m in sys.modules if m.startswith("bl_ext.user_default.motionmatch"))}))
"""


def test_addon_zip_installs_as_a_blender_extension(bpy_python, tmp_path, monkeypatch):
    import zipfile

    from motionmatch.cli.main import main

    out = tmp_path / "motionmatch_addon.zip"
    assert main(["blender-addon", "-o", str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        manifest = z.read("motionmatch_addon/blender_manifest.toml").decode().splitlines()
    assert {"motionmatch_addon/__init__.py", "motionmatch_addon/operators.py", "motionmatch_addon/panel.py"} <= names
    assert 'id = "motionmatch"' in manifest and 'type = "add-on"' in manifest
    monkeypatch.setenv("HOME", str(tmp_path))  # Blender's user folders (its extension repository) go here
    got = run_in_blender(bpy_python, "-c", INSTALL_ZIP, str(out))
    assert got["result"] == ["FINISHED"]
    assert got["operators"] == ["follow_curve", "genmm", "import_motion"]
    assert "bl_ext.user_default.motionmatch.operators" in got["modules"]


def test_genmm_on_numpy_1_names_gives_the_same_motion(monkeypatch):
    """Blender's Python pins NumPy 1.x, which lacks some array-API names and ``device=``; the
    namespace that stands in for them gives the same synthesis as NumPy 2's own."""
    from motionmatch.genmm import GenMM, _backend
    from synthetic import walker

    example = walker(90, fps=30.0)
    want = GenMM([example]).sample(45, seed=3).motion
    monkeypatch.setattr(_backend, "_NUMPY", _backend._NumPy1())
    with pytest.raises(AttributeError):
        _backend._NUMPY.not_a_numpy_function_at_all  # noqa: B018  (other names are numpy's own)
    got = GenMM([example]).sample(45, seed=3).motion
    assert np.allclose(got.rotations, want.rotations, atol=1e-6)
    assert np.allclose(got.translations, want.translations, atol=1e-6)


def test_commands_refuse_fbx_before_running_when_no_bpy(tmp_path, monkeypatch, capsys):
    from motionmatch.anim import save_bvh
    from motionmatch.cli.main import main
    from motionmatch.io import fbx
    from synthetic import walker

    monkeypatch.delenv("MOTIONMATCH_BLENDER_PYTHON", raising=False)
    monkeypatch.setattr(fbx, "_has_bpy", lambda: False)
    src = save_bvh(walker(10), tmp_path / "w.bvh")
    assert main(["convert", str(src), str(tmp_path / "w.fbx")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'motionmatch[blender]'" in err
    assert not (tmp_path / "w.fbx").exists()
