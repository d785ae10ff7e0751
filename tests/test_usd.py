"""USD export (UsdSkel): read back with usd-core's own skeleton query, joint world positions
match motionmatch's forward kinematics within 1 mm at the first, middle and last frames."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.errors import MotionMatchError
from motionmatch.io.preview import MissingDependencyError

pxr = pytest.importorskip("pxr", reason="usd-core is not installed (pip install 'motionmatch[usd]')")
from pxr import Usd, UsdGeom, UsdSkel  # noqa: E402

from motionmatch.io.usd import save_usd  # noqa: E402

CLIPS = ["genmm-examples/Crabnew_Crab-dance-long.bvh", "lafan1/walk1_subject1_stop.bvh",
         "quadruped-dog/D1_047z_KAN01_004.bvh", "genmm-examples/Malcolm_Gangnam-Style.bvh"]


def _clip(data_dir, rel: str, frames: int = 40):
    path = data_dir / rel
    if not path.is_file():
        pytest.skip(f"{path} not found in the motion data")
    m = load_bvh(path)
    return m[slice(0, min(frames, m.num_frames))]


def usd_joint_world_positions(path, frames) -> dict[str, np.ndarray]:
    """``{character prim name: [len(frames), J, 3]}`` joint world positions, computed by UsdSkel."""
    stage = Usd.Stage.Open(str(path))
    cache = UsdSkel.Cache()
    out = {}
    for prim in stage.Traverse():
        if not prim.IsA(UsdSkel.Skeleton):
            continue
        root = UsdSkel.Root(prim.GetParent())
        cache.Populate(root, Usd.PrimDefaultPredicate)
        query = cache.GetSkelQuery(UsdSkel.Skeleton(prim))
        frames_out = []
        for f in frames:
            xf = UsdGeom.XformCache(Usd.TimeCode(f))
            mats = query.ComputeJointWorldTransforms(xf)
            frames_out.append([list(m.ExtractTranslation()) for m in mats])
        out[prim.GetParent().GetName()] = np.array(frames_out)
    return out


@pytest.mark.data
@pytest.mark.parametrize("rel", CLIPS)
def test_usd_round_trip_matches_forward_kinematics(data_dir, tmp_path, rel):
    motion = _clip(data_dir, rel)
    F = motion.num_frames
    frames = [0, F // 2, F - 1]
    for suffix in (".usda", ".usdc"):
        out = save_usd(motion, tmp_path / f"clip{suffix}", names=["character"])
        got = usd_joint_world_positions(out, frames)["character"]
        err = np.abs(got - motion.world_positions[frames]).max()
        assert err < 1e-3, f"{rel} ({suffix}): joint positions differ by {err * 1000:.3f} mm"


@pytest.mark.data
def test_usd_stage_metadata_names_and_mesh(data_dir, tmp_path):
    a = _clip(data_dir, "lafan1/walk1_subject1_stop.bvh", 12)
    b = a.with_data(a.rotations[::-1].copy(), a.translations[::-1].copy(), name="other")
    V = 8
    rng = np.random.default_rng(0)

    class Mesh:  # a tiny skinned mesh with the mannequin's fields
        vertices = rng.normal(size=(V, 3)).astype(np.float32)
        normals = np.tile(np.array([0, 1, 0], np.float32), (V, 1))
        triangles = np.array([[0, 1, 2], [2, 3, 0], [4, 5, 6], [6, 7, 4]], np.uint32)
        joints = rng.integers(0, a.num_joints, size=(V, 4)).astype(np.uint16)
        weights = np.full((V, 4), 0.25, np.float32)

    out = save_usd([a, b], tmp_path / "two.usda", meshes=[Mesh, None], names=["walker", "walker"])
    stage = Usd.Stage.Open(str(out))
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert stage.GetTimeCodesPerSecond() == pytest.approx(a.fps)
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0, a.num_frames - 1)
    skel = UsdSkel.Skeleton.Get(stage, "/World/walker/Skeleton")
    assert list(skel.GetJointNamesAttr().Get()) == list(a.skeleton.names)
    assert stage.GetPrimAtPath("/World/walker_1/Skeleton").IsValid()  # second name made unique
    binding = UsdSkel.BindingAPI(stage.GetPrimAtPath("/World/walker/Body"))
    assert np.array_equal(np.array(binding.GetJointIndicesPrimvar().Get()).reshape(V, 4), Mesh.joints)
    assert binding.GetJointIndicesPrimvar().GetElementSize() == 4
    pos = usd_joint_world_positions(out, [0, a.num_frames - 1])
    assert np.abs(pos["walker"] - a.world_positions[[0, -1]]).max() < 1e-3
    assert np.abs(pos["walker_1"] - b.world_positions[[0, -1]]).max() < 1e-3


def test_joint_names_become_valid_unique_paths():
    from motionmatch.io.usd import joint_paths

    paths = joint_paths(["mixamorig:Hips", "mixamorig:Spine", "mixamorig_Spine", "1Leg"], np.array([-1, 0, 0, 1]))
    assert paths == ["mixamorig_Hips", "mixamorig_Hips/mixamorig_Spine", "mixamorig_Hips/mixamorig_Spine_1",
                     "mixamorig_Hips/mixamorig_Spine/_Leg"]


def test_bad_suffix_and_mixed_frame_rates(tmp_path):
    from synthetic import walker

    a, b = walker(10, fps=60.0), walker(10, fps=30.0)
    with pytest.raises(MotionMatchError, match=r"must end in \.usd"):
        save_usd(a, tmp_path / "x.fbx")
    with pytest.raises(MotionMatchError, match="share a frame rate"):
        save_usd([a, b], tmp_path / "x.usda")
    assert not list(tmp_path.iterdir())  # nothing written


def test_missing_usd_core_names_the_extra(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_pxr(name, *args, **kw):
        if name == "pxr" or name.startswith("pxr."):
            raise ImportError("No module named 'pxr'")
        return real_import(name, *args, **kw)

    import importlib

    monkeypatch.setattr(importlib, "import_module", lambda name, *a: no_pxr(name))
    from motionmatch.io import usd

    with pytest.raises(MissingDependencyError, match=r"motionmatch\[usd\]"):
        usd.require_usd()
    assert issubclass(MissingDependencyError, MotionMatchError)


@pytest.mark.data
def test_convert_to_usd_skins_the_mannequin_like_motionmatch(data_dir, tmp_path):
    """``motionmatch convert X.bvh X.usda``: the mannequin skinned by UsdSkel (its bind pose in
    bindTransforms) lands within 1 mm of the mannequin's own skinning."""
    from motionmatch.anim.mannequin import mannequin_for
    from motionmatch.cli.main import main

    src = data_dir / "genmm-examples" / "Elephant_idle1.bvh"
    if not src.is_file():
        pytest.skip(f"{src} not found in the motion data")
    out = tmp_path / "elephant.usda"
    assert main(["convert", str(src), str(out)]) == 0
    motion = load_bvh(src)
    body = mannequin_for(motion)
    stage = Usd.Stage.Open(str(out))
    cache = UsdSkel.Cache()
    root = UsdSkel.Root(stage.GetPrimAtPath("/World/Elephant_idle1"))
    cache.Populate(root, Usd.PrimDefaultPredicate)
    skel_query = cache.GetSkelQuery(UsdSkel.Skeleton(stage.GetPrimAtPath("/World/Elephant_idle1/Skeleton")))
    skinning = cache.GetSkinningQuery(stage.GetPrimAtPath("/World/Elephant_idle1/Body"))
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/World/Elephant_idle1/Body"))
    for f in (0, motion.num_frames - 1):
        xforms = skel_query.ComputeSkinningTransforms(Usd.TimeCode(f))
        points = mesh.GetPointsAttr().Get(Usd.TimeCode(f))
        assert skinning.ComputeSkinnedPoints(xforms, points, Usd.TimeCode(f))
        want = body.skin(motion.world_positions[f], motion.world_rotations[f])
        err = np.abs(np.array(points) - want).max()
        assert err < 1e-3, f"frame {f}: UsdSkel's skinned mesh is {err * 1000:.2f} mm from the mannequin's"
