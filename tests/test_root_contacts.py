"""Acceptance: orientation sanity of root extraction and foot contacts on real data.

These catch axis, rotation-order and unit mistakes: the extracted facing must agree
with the direction of travel on forward locomotion, planted feet must be near the
ground, and the head must be above the hips.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.contacts import find_feet, foot_contacts
from motionmatch.anim.root import extract_root, find_hips, root_bone_forward_axis, with_root_bone


def _walk_run_files(root: Path) -> list[Path]:
    out = []
    for f in sorted((root / "lafan1-60fps").glob("*.bvh")):
        if re.search(r"_(walk|run|jog|sprint)\d*$", f.stem):
            out.append(f)
    for f in sorted((root / "bandai-namco").rglob("*.bvh")):
        if re.match(r"dataset-\d_(walk|run|dash)_", f.name):
            out.append(f)
    return out


def _feet_direction(motion):
    """Unit heel-to-toe direction on the ground of the planted feet (held through flight
    phases): a cue for where the body faces that does not depend on the hips/shoulders axis
    the root extraction uses. Swinging feet are left out: they pitch and point anywhere."""
    s = motion.skeleton
    wp = motion.world_positions
    contacts = foot_contacts(motion)
    d = np.zeros((motion.num_frames, 3))
    for k, toe in enumerate(contacts.joints):
        v = wp[:, toe] - wp[:, s.parents[toe]]
        v[:, 1] = 0
        d += contacts.contacts[:, k, None] * v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
    n = np.linalg.norm(d, axis=1)
    good = n > 1e-6
    idx = np.maximum.accumulate(np.where(good, np.arange(len(n)), 0))
    idx[: np.argmax(good)] = np.argmax(good)
    return d[idx] / np.maximum(n[idx, None], 1e-9)


@pytest.fixture(scope="module")
def walk_run_clips(data_dir):
    files = _walk_run_files(data_dir)
    assert len(files) > 200, f"expected the LAFAN1 and Bandai-Namco walk/run clips under {data_dir}"
    return [load_bvh(f) for f in files]


def test_facing_agrees_with_direction_of_travel(walk_run_clips):
    """Mean cos(facing, root velocity) >= 0.9 over frames faster than 0.5 m/s on every
    forward walk/run clip.

    Several LAFAN1 takes named walk/run/jog also contain stretches of running backwards or
    sideways (5-34% of their moving frames, measured with the toes' direction). A clip counts
    as *forward* when fewer than 3% of its moving frames travel against the feet's direction;
    that cue is independent of the hips/shoulders axis the facing is computed from. Every
    clip (forward or not) must also have its facing agree with the planted feet's direction
    (mean cosine > 0.5: an axis or order mistake gives about 0 or -1).
    """
    forward, failures = 0, []
    for m in walk_run_clips:
        root = extract_root(m)
        v = root.velocities(m.fps)
        speed = np.linalg.norm(v, axis=1)
        moving = speed > 0.5
        feet = _feet_direction(m)
        agree_feet = float(np.mean(np.sum(feet * root.directions, axis=1)))
        if agree_feet < 0.5:  # stylised gaits (splayed feet, skipping) reach only ~0.6
            failures.append(f"{m.name}: facing vs feet direction {agree_feet:.3f}")
        if moving.sum() < 30:
            continue
        backwards = np.mean(np.sum(v[moving] * feet[moving], axis=1) < 0)
        if backwards >= 0.03:
            continue
        forward += 1
        cos = np.sum(v[moving] * root.directions[moving], axis=1) / speed[moving]
        if cos.mean() < 0.9:
            failures.append(f"{m.name}: mean cos(facing, velocity) {cos.mean():.3f}")
    assert forward >= 150, f"only {forward} forward clips found"
    assert not failures, "\n".join(failures)


def test_contacts_near_ground_and_head_above_hips(walk_run_clips):
    for m in walk_run_clips:
        c = foot_contacts(m)
        assert len(c.joints) == 2, m.name
        assert 0.05 < c.fraction() < 0.95, f"{m.name}: contact fraction {c.fraction():.2f}"
        h = m.world_positions[:, list(c.joints), 1][c.contacts]
        assert h.min() >= -0.05 and h.max() <= 0.25, f"{m.name}: contact heights {h.min():.3f}..{h.max():.3f}"
        head = m.skeleton.find("head")[0]
        hips = find_hips(m.skeleton)
        assert np.all(m.world_positions[:, head, 1] > m.world_positions[:, hips, 1]), m.name


def test_existing_root_bone_recognised(data_dir):
    m = load_bvh(data_dir / "lafan1-60fps" / "walk1_subject1_walk2.bvh")
    assert m.skeleton.names[0] == "SimulationBone"
    axis = root_bone_forward_axis(m)
    assert axis is not None
    root = extract_root(m)
    assert root.from_bone
    # The bone agrees with what we would extract from the body.
    extracted = extract_root(m, use_existing=False)
    assert np.mean(np.sum(root.directions * extracted.directions, axis=1)) > 0.95
    assert np.mean(np.linalg.norm(root.positions - extracted.positions, axis=1)) < 0.1
    # Bandai-Namco's joint_Root stays at the origin while the hips travel: not a root bone.
    b = load_bvh(next((data_dir / "bandai-namco" / "dataset-1").glob("dataset-1_walk_normal_*.bvh")))
    assert root_bone_forward_axis(b) is None
    assert not extract_root(b).from_bone


def test_with_root_bone_keeps_world_pose(data_dir):
    m = load_bvh(data_dir / "lafan1" / "walk1_subject1_stop.bvh")
    r = with_root_bone(m)
    assert r.skeleton.names[0] == "SimulationBone" and r.num_joints == m.num_joints + 1
    np.testing.assert_allclose(r.world_positions[:, 1:], m.world_positions, atol=1e-9)
    again = extract_root(r)
    assert again.from_bone
    np.testing.assert_allclose(root_bone_forward_axis(r), [0, 0, 1])


def test_with_root_bone_canonicalises_existing_bone(data_dir):
    m = load_bvh(data_dir / "lafan1-60fps" / "walk1_subject1_walk2.bvh")
    np.testing.assert_allclose(root_bone_forward_axis(m), [1, 0, 0])  # LAFAN1's bone faces +X
    r = with_root_bone(m)
    assert r.skeleton.names == m.skeleton.names
    np.testing.assert_allclose(r.world_positions[:, 1:], m.world_positions[:, 1:], atol=1e-9)
    np.testing.assert_allclose(root_bone_forward_axis(r), [0, 0, 1])
    np.testing.assert_allclose(r.world_positions[:, 0, 1], 0.0, atol=1e-12)


@pytest.mark.parametrize("rel", ["quadruped-dog/D1_025_KAN01_001.bvh", "genmm-examples/Crabnew_Crab-dance-long.bvh",
                                 "genmm-examples/Elephant_idle1.bvh", "genmm-examples/Xia_normal.bvh"])
def test_other_skeletons_get_a_root_and_feet(data_dir, rel):
    m = load_bvh(data_dir / rel)
    root = extract_root(m)
    assert np.allclose(np.linalg.norm(root.directions, axis=1), 1.0)
    feet = find_feet(m.skeleton) if "Crab" not in rel else None
    if feet is not None:
        assert len(feet) >= 2
        c = foot_contacts(m)
        assert c.contacts.shape == (m.num_frames, len(feet))


def test_dog_facing_follows_travel(data_dir):
    m = load_bvh(data_dir / "quadruped-dog" / "D1_025_KAN01_001.bvh")
    root = extract_root(m)
    v = root.velocities(m.fps)
    speed = np.linalg.norm(v, axis=1)
    k = speed > 0.5
    assert k.sum() > 100
    assert np.mean(np.sum(v[k] * root.directions[k], axis=1) / speed[k]) > 0.8
