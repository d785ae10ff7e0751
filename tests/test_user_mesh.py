"""A user's skinned glTF mesh as the body: read back our own export exactly, in other units,
through the CLI's ``--body``, and refused with one line when its joints do not fit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pygltflib
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.mannequin import mannequin_for
from motionmatch.anim.skeleton import Skeleton
from motionmatch.cli.main import main
from motionmatch.errors import MotionMatchError
from motionmatch.io.gltf import Character, write_glb
from motionmatch.io.user_mesh import body_for, read_user_mesh

pytestmark = pytest.mark.data

TAKE = "genmm-examples/Joe_Baseball-Milling-Idle-edited-keyframes.bvh"  # 24 joints, 21 frames


@pytest.fixture(scope="module")
def exported(data_dir, tmp_path_factory):
    path = data_dir / TAKE
    if not path.exists():
        pytest.skip(f"{path} not in the data folder")
    motion = load_bvh(path)
    out = tmp_path_factory.mktemp("user_mesh") / "body.glb"
    write_glb(out, [Character("joe", motion)])
    return motion, mannequin_for(motion), out


def assert_same_body(got, want, atol=1e-6):
    np.testing.assert_allclose(got.vertices, want.vertices, atol=atol)
    np.testing.assert_array_equal(got.triangles, want.triangles)
    np.testing.assert_array_equal(got.joints[want.weights > 0], want.joints[want.weights > 0])
    np.testing.assert_allclose(got.weights, want.weights, atol=1e-6)
    np.testing.assert_allclose(got.normals, want.normals, atol=1e-5)
    np.testing.assert_allclose(got.bind_positions, want.bind_positions, atol=atol)
    dots = np.abs(np.sum(got.bind_rotations * want.bind_rotations, axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-6)


def test_our_export_read_back_is_the_same_body(exported):
    motion, body, path = exported
    user = read_user_mesh(path, motion.skeleton)
    assert_same_body(user, body)
    assert read_user_mesh(path, motion.skeleton) is user  # cached
    assert body_for(motion, path) is user and body_for(motion) is body
    frames = [0, motion.num_frames // 2, motion.num_frames - 1]
    wp, wr = motion.world_positions[frames], motion.world_rotations[frames]
    np.testing.assert_allclose(user.skin(wp, wr), body.skin(wp, wr), atol=1e-5)


def test_a_file_in_centimetres_is_read_in_metres(exported, tmp_path):
    motion, body, _ = exported
    big = dataclasses.replace(body, vertices=body.vertices * 100, bind_positions=body.bind_positions * 100)
    path = tmp_path / "cm.glb"
    write_glb(path, [Character("joe", motion, big)])
    assert_same_body(read_user_mesh(path, motion.skeleton), body, atol=1e-5)


def test_a_mesh_on_other_joints_is_refused_in_one_line(exported, tmp_path):
    motion, _, path = exported
    skel = motion.skeleton
    names = list(skel.names)
    names[3] = "SomeoneElsesSpine"
    other = Skeleton(tuple(names), skel.parents, skel.offsets, skel.end_site_parents, skel.end_site_offsets,
                     skel.channels)
    with pytest.raises(MotionMatchError) as e:
        read_user_mesh(path, other)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    assert "missing from its skin: SomeoneElsesSpine" in msg and f"not in the skeleton: {skel.names[3]}" in msg
    # no skin at all, or not glTF
    plain = pygltflib.GLTF2()
    plain.save_binary(str(tmp_path / "plain.glb"))
    with pytest.raises(MotionMatchError, match="no skinned mesh"):
        read_user_mesh(tmp_path / "plain.glb", skel)
    (tmp_path / "junk.glb").write_bytes(b"not a gltf file")
    with pytest.raises(MotionMatchError, match=r"junk\.glb: not a readable glTF"):
        read_user_mesh(tmp_path / "junk.glb", skel)


def test_convert_takes_a_body(exported, data_dir, tmp_path, capsys):
    motion, body, path = exported
    out = tmp_path / "with_body.glb"
    assert main(["convert", str(data_dir / TAKE), str(out), "--body", str(path)]) == 0
    assert_same_body(read_user_mesh(out, motion.skeleton), body)
    other = data_dir / "genmm-examples/Xia_normal.bvh"
    if other.exists():  # another skeleton: one line, no file written
        assert main(["convert", str(other), str(tmp_path / "no.glb"), "--body", str(path)]) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "does not fit this skeleton" in err
        assert not (tmp_path / "no.glb").exists()


def test_a_rig_with_other_joint_frames_is_turned_onto_the_skeletons(exported, tmp_path):
    """A rig made elsewhere (e.g. Blender's bones point along their Y axis) has other joint
    frames: its bind rotations are turned so that each joint's bones point where the
    skeleton's offsets say, exactly where a joint has two or more children."""
    from motionmatch.anim import quat

    motion, body, _ = exported
    skel = motion.skeleton
    rng = np.random.default_rng(3)
    turn = quat.normalize(rng.normal(size=(skel.num_joints, 4)))
    rig = dataclasses.replace(body, bind_rotations=quat.mul(body.bind_rotations, turn))
    path = tmp_path / "rig.glb"
    write_glb(path, [Character("joe", motion, rig)])
    got = read_user_mesh(path, skel)
    np.testing.assert_allclose(got.bind_positions, body.bind_positions, atol=1e-5)
    for j in range(skel.num_joints):
        kids = [k for k in skel.children(j) if np.linalg.norm(skel.offsets[k]) > 1e-6]
        for k in kids:  # each bone where the skeleton's offset says
            np.testing.assert_allclose(quat.rotate(got.bind_rotations[j], skel.offsets[k]),
                                       body.bind_positions[k] - body.bind_positions[j], atol=1e-4)
        if len(kids) >= 2:
            assert abs(np.sum(got.bind_rotations[j] * body.bind_rotations[j])) > 1 - 1e-6


def test_the_viewer_draws_the_users_mesh_where_it_fits(exported, data_dir):
    from concurrent.futures import ThreadPoolExecutor

    from motionmatch.viewer.body import Bodies

    motion, _, path = exported
    with ThreadPoolExecutor(1) as pool:
        bodies = Bodies(pool, user_mesh=path)
        bodies.register(motion)
        assert bodies.mannequin(motion.skeleton) is read_user_mesh(path, motion.skeleton)
        other = data_dir / "genmm-examples/Xia_normal.bvh"
        if other.exists():  # a skeleton it does not fit (a GenMM example's): its own mannequin
            xia = load_bvh(other)
            bodies.register(xia)
            assert bodies.mannequin(xia.skeleton) is mannequin_for(xia)
