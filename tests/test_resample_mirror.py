"""Resampling and mirroring on real clips."""

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.contacts import foot_contacts
from motionmatch.anim.mirror import mirror, mirror_pairs
from motionmatch.anim.resample import resample
from motionmatch.anim.root import extract_root
from motionmatch.errors import SkeletonError


@pytest.fixture(scope="module")
def walk30(data_dir):
    return load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh")


@pytest.fixture(scope="module")
def walk60(data_dir):
    return load_bvh(data_dir / "lafan1-60fps" / "walk1_subject1_walk2.bvh")


def test_resample_30_60_30_is_identity(walk30):
    up = resample(walk30, 60)
    assert up.fps == 60 and up.num_frames == 2 * walk30.num_frames - 1
    back = resample(up, 30)
    assert back.num_frames == walk30.num_frames
    np.testing.assert_allclose(back.world_positions, walk30.world_positions, atol=1e-9)


def test_resample_midpoints_are_between_frames(walk30):
    up = resample(walk30, 60)
    mid = up.world_positions[1::2]
    lo, hi = walk30.world_positions[:-1], walk30.world_positions[1:]
    # a slerped/lerped pose lies close to the average of its neighbours
    assert np.abs(mid - 0.5 * (lo + hi)).max() < 0.02


def test_resample_other_rates(walk60):
    down = resample(walk60, 24)
    assert abs(down.duration - walk60.num_frames / 60 * 24 / 24) < 0.1
    np.testing.assert_allclose(down.world_positions[0], walk60.world_positions[0], atol=1e-12)


def test_mirror_twice_is_identity(walk60):
    mm = mirror(mirror(walk60))
    np.testing.assert_allclose(mm.rotations, walk60.rotations, atol=1e-15)
    np.testing.assert_allclose(mm.translations, walk60.translations, atol=1e-15)
    assert mm.name == walk60.name


def test_mirror_reflects_trajectory_in_character_frame(walk60):
    m = mirror(walk60)
    r0, r1 = extract_root(walk60), extract_root(m)

    def local(root):
        p = root.positions - root.positions[0]
        f = root.directions[0]
        left = np.cross([0.0, 1.0, 0.0], f)
        return np.stack([p @ left, p @ f], axis=1)

    a, b = local(r0), local(r1)
    assert np.abs(a[:, 0]).max() > 0.3  # the clip does move sideways in its own frame
    np.testing.assert_allclose(b[:, 0], -a[:, 0], atol=1e-6)
    np.testing.assert_allclose(b[:, 1], a[:, 1], atol=1e-6)


def test_mirror_swaps_contacts(walk60):
    c0 = foot_contacts(walk60)
    c1 = foot_contacts(mirror(walk60))
    names = [walk60.skeleton.names[j] for j in c0.joints]
    assert names == ["LeftToe", "RightToe"]
    np.testing.assert_array_equal(c1.contacts[:, 0], c0.contacts[:, 1])
    np.testing.assert_array_equal(c1.contacts[:, 1], c0.contacts[:, 0])


def test_mirror_pairs_by_names_and_override(walk60):
    s = walk60.skeleton
    p = mirror_pairs(s)
    assert s.names[p[s.index("LeftUpLeg")]] == "RightUpLeg"
    assert p[s.index("Spine")] == s.index("Spine")
    with pytest.raises(SkeletonError, match="pairing is not symmetric"):
        mirror_pairs(s, overrides={"LeftHand": "RightFoot"})
    with pytest.raises(SkeletonError, match=r"unknown joint 'LeftHnd'.*Did you mean 'LeftHand'"):
        mirror_pairs(s, overrides={"LeftHnd": "RightHand"})


@pytest.mark.parametrize(("rel", "tol"), [
    ("lafan1-60fps/walk1_subject1_walk2.bvh", 1e-4),
    ("lafan1/walk1_subject1_stop.bvh", 1e-4),
    ("bandai-namco/dataset-1/dataset-1_walk_normal_001.bvh", 1e-4),
    ("genmm-examples/Joe_Salsa-Dancing-6.bvh", 1e-2),  # Mixamo rigs are slightly asymmetric (~7 mm)
    ("quadruped-dog/D1_025_KAN01_001.bvh", 3e-3),
])
def test_mirror_keeps_the_skeleton_and_reflects_world_poses(data_dir, rel, tol):
    """Mirrored clips must share the original skeleton (so they can be blended with it
    and written with it) while their world poses are the mirror image."""
    m = load_bvh(data_dir / rel)
    mm = mirror(m)
    assert mm.skeleton is m.skeleton
    pairs = mirror_pairs(m.skeleton)
    # up to the skeleton's own left/right asymmetry
    np.testing.assert_allclose(mm.world_positions, m.world_positions[:, pairs] * [-1, 1, 1], atol=tol)
    # Joints without position channels keep their bone offsets exactly.
    fixed = ~m.skeleton.has_position_channels
    np.testing.assert_allclose(mm.translations[:, fixed], m.translations[:, fixed], atol=1e-12)


def test_z_up_files_are_converted_to_y_up(walk30, tmp_path):
    """A clip written Z up (the world rotated +90 degrees about X) reads back Y up."""
    from motionmatch.anim import save_bvh
    from motionmatch.anim.axes import Z_UP_TO_Y_UP, rotate_world
    from motionmatch.anim.quat import conjugate

    z_up = rotate_world(walk30, conjugate(Z_UP_TO_Y_UP))
    assert np.abs(z_up.world_positions[..., 2]).max() > 1.0  # height is now along z
    save_bvh(z_up, tmp_path / "z.bvh")
    back = load_bvh(tmp_path / "z.bvh", up_axis="z")
    np.testing.assert_allclose(back.world_positions, walk30.world_positions, atol=1e-4)
    with pytest.raises(ValueError, match="up_axis"):
        load_bvh(tmp_path / "z.bvh", up_axis="x")
