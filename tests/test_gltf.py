"""glTF export: every command that writes motion writes a valid .glb whose skeleton animation
reproduces the motion's forward kinematics (within 1 mm)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pygltflib
import pytest

from motionmatch.anim import load_bvh, quat
from motionmatch.cli.main import main

pytestmark = pytest.mark.data

REPO = Path(__file__).resolve().parents[1]
VALIDATOR = REPO / "tools" / "gltf-validator"
WALK = "lafan1-60fps/walk1_subject1_walk2.bvh"


def validate(*files: Path) -> None:
    """The Khronos glTF validator reports no errors (skips when it is not installed)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: cannot run the Khronos glTF validator")
    if not (VALIDATOR / "node_modules" / "gltf-validator").is_dir():
        pytest.skip(f"the glTF validator is not installed: run 'npm ci' in {VALIDATOR}")
    out = subprocess.run(["node", "validate.mjs", *map(str, files)], cwd=VALIDATOR, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    for line in out.splitlines():
        r = json.loads(line)
        assert r["errors"] == 0, f"{r['file']}: {r['messages']}"


def glb_joint_positions(path: Path, animation: int, frames: list[int]) -> tuple[list[str], np.ndarray]:
    """Names and world positions ``(len(frames), J, 3)`` of the joints of one skin, computed from
    the file's nodes and the keys of one animation (one key per frame)."""
    doc = pygltflib.GLTF2().load_binary(str(path))
    blob = doc.binary_blob()

    def read(i: int) -> np.ndarray:
        acc = doc.accessors[i]
        view = doc.bufferViews[acc.bufferView]
        width = {"SCALAR": 1, "VEC3": 3, "VEC4": 4, "MAT4": 16}[acc.type]
        dtype = {pygltflib.FLOAT: np.float32, pygltflib.UNSIGNED_SHORT: np.uint16,
                 pygltflib.UNSIGNED_INT: np.uint32}[acc.componentType]
        start = view.byteOffset + (acc.byteOffset or 0)
        return np.frombuffer(blob, dtype=dtype, count=acc.count * width, offset=start).reshape(acc.count, width)

    skin = doc.skins[animation]
    nodes = skin.joints
    parent = {c: p for p, n in enumerate(doc.nodes) for c in (n.children or [])}
    F = len(frames)
    local_r = {n: np.tile(np.array(doc.nodes[n].rotation or [0, 0, 0, 1.0])[[3, 0, 1, 2]], (F, 1)) for n in nodes}
    local_t = {n: np.tile(np.array(doc.nodes[n].translation or [0, 0, 0.0]), (F, 1)) for n in nodes}
    anim = doc.animations[animation]
    for ch in anim.channels:
        s = anim.samplers[ch.sampler]
        values = read(s.output)[frames].astype(np.float64)
        if ch.target.path == "rotation":
            local_r[ch.target.node] = values[:, [3, 0, 1, 2]]
        elif ch.target.path == "translation" and ch.target.node in local_t:
            local_t[ch.target.node] = values
    world_r, world_p = {}, {}
    for n in nodes:  # parents come first in our files
        p = parent.get(n)
        if p in world_r:
            world_r[n] = quat.mul(world_r[p], local_r[n])
            world_p[n] = world_p[p] + quat.rotate(world_r[p], local_t[n])
        else:
            world_r[n], world_p[n] = local_r[n], local_t[n]
    return [doc.nodes[n].name for n in nodes], np.stack([world_p[n] for n in nodes], axis=1)


def check_round_trip(path: Path, motion, animation: int = 0) -> None:
    frames = [0, motion.num_frames // 2, motion.num_frames - 1]
    names, pos = glb_joint_positions(path, animation, frames)
    assert names == list(motion.skeleton.names)
    err = np.linalg.norm(pos - motion.world_positions[frames], axis=-1).max()
    assert err < 1e-3, f"{path.name}: joints {err * 1000:.2f} mm from motionmatch's forward kinematics"


@pytest.fixture(scope="module")
def database(data_dir, tmp_path_factory):
    src = data_dir / WALK
    if not src.exists():
        pytest.skip(f"{src} not in the data folder")
    out = tmp_path_factory.mktemp("glb") / "walk.npz"
    assert main(["build", str(src), "-o", str(out), "-q"]) == 0
    return out


def test_convert_writes_a_valid_glb_that_matches_the_motion(data_dir, tmp_path):
    src = data_dir / WALK
    out = tmp_path / "walk.glb"
    assert main(["convert", str(src), str(out), "--range", "0:120"]) == 0
    motion = load_bvh(src)[0:120]
    check_round_trip(out, motion)
    validate(out)
    doc = pygltflib.GLTF2().load_binary(str(out))
    assert doc.animations[0].samplers and len(doc.meshes) == 1 and doc.skins[0].inverseBindMatrices is not None
    t = doc.accessors[doc.animations[0].samplers[0].input]
    assert t.count == 120 and abs(t.max[0] - 119 / motion.fps) < 1e-5  # one key per frame at the motion's rate


@pytest.mark.slow  # four commands end to end (about 160 s on a loaded 2-core machine, compilation included)
def test_run_follow_scenario_and_genmm_write_valid_glbs(database, data_dir, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 2.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 1.0, "keys": ["d"]}]}))
    run = tmp_path / "run.glb"
    assert main(["run", "--db", str(database), "--input", str(script), "-o", str(run)]) == 0
    follow = tmp_path / "follow.glb"
    assert main(["follow", "--db", str(database), "--path", str(REPO / "paths" / "circle.json"), "-o", str(follow)]) == 0
    scene = tmp_path / "scene.glb"
    assert main(["scenario", str(REPO / "scenarios" / "cubes-approach.json"), "--db", str(database), "-o", str(scene),
                 "--duration", "2", "--quiet"]) == 0
    gen = tmp_path / "gen.glb"
    example = data_dir / "genmm-examples" / "Crabnew_Crab-dance-long.bvh"
    assert main(["genmm", str(example), "-o", str(gen), "--frames", "60", "--samples", "2", "--iterations", "1",
                 "--no-metrics", "--quiet"]) == 0
    variants = [tmp_path / "gen_0.glb", tmp_path / "gen_1.glb"]
    validate(run, follow, scene, *variants)
    # the ground track of a run (its root bone) and the scenario's agents and obstacles
    doc = pygltflib.GLTF2().load_binary(str(scene))
    assert len(doc.animations) >= 1 and len(doc.skins) == len([a for a in doc.animations if a.name != "obstacles"])
    assert any(m.name.startswith("obstacle_") for m in doc.meshes)
    names, pos = glb_joint_positions(run, 0, [0, 60, 119])
    assert names[0] == "SimulationBone" and np.abs(pos[:, 0, 1]).max() < 1e-6  # the root on the ground
    assert np.linalg.norm(pos[-1, 0] - pos[0, 0]) > 0.5  # and walking


def test_write_motion_round_trips_other_skeletons(data_dir, tmp_path):
    from motionmatch.io.motion_files import write_motion

    for rel in ("bandai-namco/dataset-1/dataset-1_walk-left_tired_001.bvh", "quadruped-dog/D1_025_KAN01_001.bvh"):
        src = data_dir / rel
        if not src.exists():
            continue
        motion = load_bvh(src)[0:90]
        out = write_motion(tmp_path / f"{src.stem}.glb", motion)
        check_round_trip(out, motion)
    with pytest.raises(Exception, match="glb"):
        write_motion(tmp_path / "x.obj", motion)
    assert not (tmp_path / "x.obj").exists()
