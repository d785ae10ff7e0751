"""GenMM on small synthetic clips: representation, matching, pyramid, applications, files."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from motionmatch.anim import Motion, Skeleton, load_bvh, quat, save_bvh
from motionmatch.errors import SkeletonError
from motionmatch.genmm import (
    Completion,
    FeatureLayout,
    GenMM,
    GenMMConfig,
    Keyframes,
    ReassemblySource,
    _core,
    auto_parts,
    decode,
    detect_feet,
    encode,
    fix_foot_contacts,
    reassemble,
    resolve_parts,
)
from motionmatch.genmm._backend import get_backend, torch_available
from motionmatch.genmm.engine import Engine, EngineSettings, PartData
from motionmatch.genmm.representation import contact_labels

NAMES = ("Hips", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe", "RightUpLeg", "RightLeg", "RightFoot", "RightToe",
         "Spine", "Chest", "Neck", "Head", "LeftArm", "LeftForeArm", "LeftHand", "RightArm", "RightForeArm", "RightHand")
PARENTS = np.array([-1, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11, 10, 13, 14, 10, 16, 17])
OFFSETS = np.array([[0, 0.9, 0], [0.1, 0, 0], [0, -0.42, 0], [0, -0.42, 0], [0, -0.05, 0.12],
                    [-0.1, 0, 0], [0, -0.42, 0], [0, -0.42, 0], [0, -0.05, 0.12],
                    [0, 0.15, 0], [0, 0.25, 0], [0, 0.2, 0], [0, 0.12, 0],
                    [0.18, 0.1, 0], [0.28, 0, 0], [0.25, 0, 0], [-0.18, 0.1, 0], [-0.28, 0, 0], [-0.25, 0, 0]], float)


def dancer(n: int = 240, fps: float = 30.0, seed: int = 0, name: str = "dancer", travel: float = 0.6) -> Motion:
    """A biped whose joints swing with incommensurate periods (no two patches alike), the
    root wandering on the ground and bobbing."""
    rng = np.random.default_rng(seed)
    skel = Skeleton(NAMES, PARENTS, OFFSETS)
    J = len(NAMES)
    t = np.arange(n) / fps
    rot = np.zeros((n, J, 4))
    for j in range(J):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        f1, f2 = rng.uniform(0.3, 1.7, size=2)
        ang = 0.5 * np.sin(2 * np.pi * f1 * t + rng.uniform(0, 6)) + 0.25 * np.sin(2 * np.pi * f2 * t)
        rot[:, j] = quat.from_axis_angle(axis, ang)
    yaw = 0.8 * np.sin(2 * np.pi * 0.13 * t)
    rot[:, 0] = quat.mul(quat.from_angle_y(yaw), rot[:, 0])
    tr = np.broadcast_to(OFFSETS, (n, J, 3)).copy()
    tr[:, 0, 0] = travel * np.sin(2 * np.pi * 0.11 * t)
    tr[:, 0, 2] = travel * t / t[-1] + 0.2 * np.sin(2 * np.pi * 0.23 * t)
    tr[:, 0, 1] = 0.9 + 0.04 * np.sin(2 * np.pi * 1.3 * t)
    return Motion(skel, rot, tr, fps, name=name)


def pose_gaps(out_rot: np.ndarray, ex_rot: np.ndarray) -> np.ndarray:
    """``[F]``: distance (6D, all given joints) of each output pose to its nearest example pose."""
    a = quat.to_6d(out_rot).reshape(len(out_rot), -1)
    b = quat.to_6d(ex_rot).reshape(len(ex_rot), -1)
    return np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1)).min(axis=1)


def same_rotations(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference between rotations, sign-insensitive."""
    d = np.abs(np.sum(a * b, axis=-1))
    return float(np.max(1.0 - np.minimum(d, 1.0)))


# ------------------------------------------------------------------ representation
def test_encode_decode_round_trip_and_velocity_definition():
    m = dancer()
    lay = FeatureLayout.build([m])
    X = encode(m, lay)
    assert X.shape == (m.num_frames, 6 * m.num_joints + 3)
    # Frame 0 holds the first displacement as a velocity, never an absolute position.
    v0 = (m.translations[1, 0, [0, 2]] - m.translations[0, 0, [0, 2]]) * m.fps / lay.scale
    np.testing.assert_allclose(X[0, lay.root_cols[:2]], v0, atol=1e-12)
    np.testing.assert_allclose(X[0, lay.root_cols[2]], m.translations[0, 0, 1] / lay.scale, atol=1e-12)
    rot, tr, con = decode(X, lay, m.fps, start=m.translations[0, 0])
    assert con is None
    assert same_rotations(rot, m.rotations) < 1e-12
    np.testing.assert_allclose(tr, m.translations, atol=1e-12)


def test_contact_columns_belong_to_feet_only():
    m = dancer()
    feet = detect_feet(m)
    assert [m.skeleton.names[f] for f in feet] == ["LeftToe", "RightToe"]
    lay = FeatureLayout.build([m], feet=feet)
    assert len(lay.contact_cols) == 2
    labels = contact_labels(m, feet)
    assert labels.shape == (m.num_frames, 2)
    X = encode(m, lay, labels)
    # The contact columns are owned by the feet: only parts holding a foot see them.
    assert set(lay.column_joint[lay.contact_cols]) == set(feet)
    legs_cols = lay.joint_columns([0, 1, 2, 3, 4])
    assert lay.contact_cols[0] in legs_cols and lay.contact_cols[1] not in legs_cols
    assert set(np.unique(X[:, lay.contact_cols])) <= {0.0, 1.0}


# ------------------------------------------------------------------------ core
def _brute_nn(X, Y, p, alpha, starts_ok):
    """Reference: unfolded patches, full distance matrix, GenMM normalisation."""
    P = np.stack([X[i:i + p].reshape(-1) for i in range(len(X) - p + 1)])
    Q = np.stack([Y[j:j + p].reshape(-1) for j in range(len(Y) - p + 1)])
    D = ((P[:, None, :] - Q[None, :, :]) ** 2).mean(-1)
    score = D / (alpha + D.min(axis=0)[None, :])
    score[:, ~starts_ok] = np.inf
    return np.argmin(score, axis=1)


@pytest.mark.parametrize("block_bytes", [1 << 30, 2000])
def test_nearest_patches_match_brute_force(block_bytes):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(40, 5)), rng.normal(size=(30, 5))
    Y = np.concatenate([a, b])
    X = rng.normal(size=(57, 5))
    p = 4
    be = get_backend("cpu", "float64")
    bank = _core.make_bank(be, [a, b], np.zeros(5), p)
    ok = np.isfinite(bank.yy)
    assert ok.sum() == (40 - p + 1) + (30 - p + 1)  # no patch across the two clips
    nn = _core.nearest_patches(be, X, bank, p, 0.05, block_bytes=block_bytes)
    np.testing.assert_array_equal(nn, _brute_nn(X, Y, p, 0.05, ok))


def test_vote_averages_overlapping_patches():
    be = get_backend("cpu", "float64")
    Y = np.arange(12.0)[:, None]
    bank = _core.make_bank(be, [Y], np.zeros(1), 3)
    nn = np.array([0, 5, 2])  # patches at frames 0-2, 5-7, 2-4 of Y
    out = _core.vote(be, bank, nn, 5, 3)
    # frame 0: 0; frame 1: (1+5)/2; frame 2: (2+6+2)/3; frame 3: (7+3)/2; frame 4: 4
    np.testing.assert_allclose(out[:, 0], [0, 3, 10 / 3, 5, 4])
    circ = _core.vote(be, bank, np.array([0, 5, 2, 9]), 4, 3, periodic=True)
    assert circ.shape == (4, 1)


def test_pyramid_lengths_follow_the_paper():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    eng = Engine([PartData("all", np.arange(3), [X])], 3, EngineSettings(), get_backend())
    ex = [ls[0] for ls in (eng.example_lengths(k)[0] for k in range(len(eng.scales)))]
    assert ex[0] == 55 and ex[-1] == 300  # coarsest = 5 x patch size
    assert all(b > a for a, b in itertools.pairwise(ex))
    ratios = np.array(ex[1:-1]) / np.array(ex[:-2])
    np.testing.assert_allclose(ratios, 1 / 0.75, rtol=0.03)
    syn = eng.synthesis_lengths(600)
    assert syn[0] == 110 and syn[-1] == 600 and len(syn) == len(ex)


# ------------------------------------------------------------------- synthesis
def test_noise_zero_same_length_reproduces_the_example_exactly():
    m = dancer(200)
    gen = GenMM(m, fps=None)
    res = gen.sample(m.num_frames, noise_sigma=0.0)
    out = res.motion
    assert same_rotations(out.rotations, m.rotations) < 1e-12
    np.testing.assert_allclose(out.translations, m.translations, atol=1e-9)
    np.testing.assert_allclose(out.world_positions, m.world_positions, atol=1e-9)


def test_default_length_fps_and_determinism():
    m = dancer(240, fps=60.0)
    gen = GenMM(m)  # synthesis at 30 fps: the example becomes 120 frames
    assert gen.fps == 30.0 and gen.example_frames == 120
    a = gen.sample(seed=5)
    b = gen.sample(seed=5)
    c = gen.sample(seed=6)
    assert a.motion.num_frames == 240 and a.motion.fps == 30.0
    np.testing.assert_array_equal(a.features, b.features)
    assert np.abs(a.features - c.features).max() > 1e-3
    assert a.synthesis_s > 0 and a.info.synthesis_lengths[-1] == 240


def test_outputs_are_made_of_example_patches():
    m = dancer(200)
    gen = GenMM(m, fps=None)
    out = gen.sample(400, seed=1)
    # Every output frame is a blend of example frames: its pose is near some example pose.
    assert np.median(pose_gaps(out.motion.rotations, m.rotations)) < 0.2


def test_block_size_does_not_change_the_result():
    m = dancer(150)
    a = GenMM(m, fps=None).sample(900, seed=2)
    b = GenMM(m, fps=None, block_mb=0.01).sample(900, seed=2)
    np.testing.assert_allclose(a.features, b.features, atol=1e-12)


def test_loop_last_pose_is_first_pose():
    m = dancer(200)
    gen = GenMM(m, fps=None)
    res = gen.sample(180, seed=3, loop=True)
    o = res.motion
    np.testing.assert_array_equal(o.rotations[-1], o.rotations[0])
    np.testing.assert_array_equal(o.translations[-1], o.translations[0])
    # Seamless: the step across the seam (frame -2 to frame 0 = -1) is like the others.
    wp = o.world_positions
    steps = np.linalg.norm(np.diff(wp, axis=0), axis=-1).mean(-1)
    assert steps[-1] < 3 * np.median(steps) + 1e-6
    travel = gen.sample(180, seed=3, loop=True, loop_root="travel").motion
    np.testing.assert_array_equal(travel.rotations[-1], travel.rotations[0])
    assert travel.translations[-1, 0, 1] == travel.translations[0, 0, 1]


def test_keyframes_are_hit_and_blended_in():
    m = dancer(240)
    gen = GenMM(m, fps=None)
    src, at = [30, 120, 200], [60, 250, 400]
    res = gen.sample(480, seed=0, keyframes=Keyframes.from_motion(m, src, frames=at))
    o = res.motion
    for s, f in zip(src, at):
        assert same_rotations(o.rotations[f], m.rotations[s]) < 1e-12
        assert abs(o.translations[f, 0, 1] - m.translations[s, 0, 1]) < 1e-9
    E6 = quat.to_6d(o.rotations).reshape(len(o), -1)
    steps = np.linalg.norm(np.diff(E6, axis=0), axis=1)
    for f in at:
        assert max(steps[f - 1], steps[f]) < 4 * np.median(steps)
    # Times in seconds: frame round(t * fps).
    k = Keyframes.from_motion(m, [10], times=[2.0])
    assert k.output_frames(30.0).tolist() == [60]


def test_seeds_give_different_motions_through_the_same_keyframes():
    # Blender's default: the output as long as the action, keys from its markers. The start
    # was the examples stretched to the coarsest length plus weak noise, so at this length
    # every seed matched the example itself and gave the same motion (issue: seeds 0 and 1
    # identical). The start is noise now; the keys stay pinned in every variant.
    m = dancer(120)
    gen = GenMM(m, fps=None)
    at = [0, 50, 100]
    keys = Keyframes.from_motion(m, at, frames=at)
    a, b = (gen.sample(m.num_frames, seed=s, keyframes=keys).motion for s in (0, 1))
    for o in (a, b):
        for f in at:
            assert same_rotations(o.rotations[f], m.rotations[f]) < 1e-12
    between = [f for f in range(m.num_frames) if min(abs(f - k) for k in at) > 5]
    gap = np.linalg.norm(quat.to_6d(a.rotations[between]) - quat.to_6d(b.rotations[between]), axis=-1)
    assert gap.max() > 0.1


def test_keyframes_from_a_reduced_skeleton_by_name(tmp_path):
    m = dancer(240)
    keep = ["Hips", "Spine", "Chest", "Neck", "Head"]
    idx = [m.skeleton.index(n) for n in keep]
    sk = Skeleton(tuple("ns:" + n for n in keep), np.array([-1, 0, 1, 2, 3]), OFFSETS[[0, 9, 10, 11, 12]])
    keys = Motion(sk, m.rotations[[20, 90]][:, idx], m.translations[[20, 90]][:, idx], fps=1.0)
    path = save_bvh(keys, tmp_path / "keys.bvh")
    kf = Keyframes.from_bvh(path)  # Frame Time 1.0 -> one key per second
    assert kf.output_frames(30.0).tolist() == [0, 30]
    kf = Keyframes.from_bvh(path, spacing=2.5)
    assert kf.output_frames(30.0).tolist() == [0, 75]
    o = GenMM(m, fps=None).sample(300, keyframes=kf).motion
    assert same_rotations(o.rotations[75][idx], m.rotations[90][idx]) < 1e-9


def test_completion_keeps_the_given_joints_exactly():
    m = dancer(240, seed=0)
    other = dancer(150, seed=7)
    given = ["Hips", "LeftUpLeg*", "RightUpLeg*"]
    gen = GenMM(m, fps=None, parts="auto")
    res = gen.sample(completion=Completion(other, given))
    o = res.motion
    assert o.num_frames == other.num_frames
    legs = [o.skeleton.index(n) for n in ("Hips", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe",
                                          "RightUpLeg", "RightLeg", "RightFoot", "RightToe")]
    np.testing.assert_array_equal(o.rotations[:, legs], other.rotations[:, legs])
    np.testing.assert_array_equal(o.translations[:, 0], other.translations[:, 0])
    head = o.skeleton.index("Head")
    assert same_rotations(o.rotations[:, head], other.rotations[:, head]) > 1e-4  # synthesized, not copied


def test_auto_parts_trunk_and_limbs():
    m = dancer()
    parts = auto_parts(m.skeleton, m.world_positions[0], feet=detect_feet(m))
    named = {k: {m.skeleton.names[j] for j in v} for k, v in parts.items()}
    assert named["trunk"] == {"Hips", "Spine", "Chest", "Neck", "Head"}
    assert named["LeftUpLeg"] == {"Hips", "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe"}
    assert named["LeftArm"] == {"Chest", "LeftArm", "LeftForeArm", "LeftHand"}
    assert len(parts) == 5
    covered = set().union(*parts.values())
    assert covered == set(range(m.num_joints))


def test_user_parts_subtrees_and_uncovered_joints():
    m = dancer()
    parts = resolve_parts(m.skeleton, [["Hips", "LeftUpLeg*", "RightUpLeg*"], ["Hips", "Spine"]])
    # Joints below Spine belong to no part: they join their nearest ancestor's part.
    assert set(range(m.num_joints)) == set().union(*parts.values())
    with pytest.raises(SkeletonError):
        resolve_parts(m.skeleton, [["Hips", "NoSuchJoint"]])


def test_skeleton_aware_synthesis_runs_and_blends_overlaps():
    m = dancer(200)
    gen = GenMM(m, fps=None, parts="auto")
    res = gen.sample(300, seed=1)
    assert res.motion.num_frames == 300 and np.all(np.isfinite(res.features))
    # Overlapping joints (the hips, in three parts) are averages, still valid rotations.
    assert np.allclose(np.linalg.norm(res.motion.rotations, axis=-1), 1.0)


def test_multiple_examples_cover_all_of_them():
    from motionmatch.metrics.genmm import covered_windows

    a, b = dancer(150, seed=1, name="a"), dancer(150, seed=2, name="b")
    gen = GenMM([a, b], fps=None)
    assert gen.example_frames == 300
    # Per clip, its covered share in each of three outputs (one output varies with the seed).
    cov = np.array([[c.mean() for c in covered_windows(gen.examples, gen.sample(seed=s).motion)] for s in range(3)])
    assert cov.min() > 0.8 and np.all(cov.mean(axis=0) > 0.9)


def test_bvh_output_frame_time_names_and_reload(tmp_path):
    m = dancer(240, fps=60.0)
    for i, kw in enumerate([{}, {"contacts": True}, {"parts": "auto"}, {"fps": None}]):
        parts = kw.pop("parts", None)
        gen = GenMM(m, parts=parts, **kw)
        o = gen.sample(100, seed=i, loop=(i == 0)).motion
        path = save_bvh(o, tmp_path / f"out{i}.bvh")
        text = path.read_text()
        assert f"Frame Time: {1.0 / gen.fps:.10g}" in text and "Frames: 100" in text
        back = load_bvh(path)
        assert back.skeleton.names == m.skeleton.names
        assert back.fps == gen.fps
        np.testing.assert_allclose(back.world_positions, o.world_positions, atol=2e-5)


def test_foot_ik_plants_feet():
    # Knees bent, hips swaying a few centimetres: the planted feet slide unless fixed.
    m = dancer(120)
    n, J = m.num_frames, m.num_joints
    rot = np.broadcast_to(quat.identity(), (n, J, 4)).copy()
    for hip, knee, foot in ((1, 2, 3), (5, 6, 7)):
        rot[:, hip] = quat.from_axis_angle(np.array([1.0, 0, 0]), np.full(n, -0.4))
        rot[:, knee] = quat.from_axis_angle(np.array([1.0, 0, 0]), np.full(n, 0.8))
        rot[:, foot] = quat.from_axis_angle(np.array([1.0, 0, 0]), np.full(n, -0.4))
    tr = np.broadcast_to(OFFSETS, (n, J, 3)).copy()
    t = np.arange(n) / m.fps
    tr[:, 0, 0] = 0.05 * np.sin(2 * np.pi * 0.5 * t)
    tr[:, 0, 2] = 0.2 * t
    tr[:, 0, 1] = 0.82 + 0.02 * np.sin(2 * np.pi * t)
    m = Motion(m.skeleton, rot, tr, m.fps)
    feet = detect_feet(m)
    con = np.zeros((n, len(feet)), dtype=bool)
    con[20:50, 0] = True
    con[60:90, 1] = True
    before = np.ptp(m.world_positions[20:50, feet[0]], axis=0).max()
    fixed = fix_foot_contacts(m, con, feet)
    wp = fixed.world_positions
    assert before > 0.05
    assert np.ptp(wp[20:50, feet[0]], axis=0).max() < 1e-6
    assert np.ptp(wp[60:90, feet[1]], axis=0).max() < 1e-6
    # The root and the upper body are untouched; so are frames far from any contact.
    np.testing.assert_allclose(wp[:, :1], m.world_positions[:, :1], atol=1e-12)
    head = m.skeleton.index("Head")
    np.testing.assert_allclose(wp[:, head], m.world_positions[:, head], atol=1e-12)
    np.testing.assert_allclose(wp[100:], m.world_positions[100:], atol=1e-12)


def test_contacts_and_fix_feet_through_genmm():
    m = dancer(240)
    gen = GenMM(m, fps=None, contacts=True)
    res = gen.sample(300, seed=2)
    assert res.contacts is not None and res.contacts.shape == (300, 2)
    fixed = fix_foot_contacts(res.motion, res.contacts, res.feet)
    assert fixed.num_frames == 300


def test_reassembly_of_two_skeletons():
    a = dancer(200, seed=1, name="a")
    # A second creature: same structure, other names and bone lengths.
    sk = Skeleton(tuple("b:" + n for n in NAMES), PARENTS, OFFSETS * 1.3)
    b0 = dancer(160, seed=4)
    b = Motion(sk, b0.rotations, b0.translations * 1.3, b0.fps, name="b")
    res = reassemble([
        ReassemblySource(a, ["Hips", "LeftUpLeg*", "RightUpLeg*"]),
        ReassemblySource(b, ["b:Hips", "b:Spine*"], rename={"b:Hips": "Hips"}),
    ], 200, seed=0, fps=None)
    o = res.motion
    names = o.skeleton.names
    assert names[0] == "Hips" and names.count("Hips") == 1
    assert "b:Head" in names and "LeftToe" in names and len(names) == len(NAMES)
    assert o.skeleton.parents[names.index("b:Spine")] == 0
    np.testing.assert_allclose(o.skeleton.offsets[names.index("b:Spine")], OFFSETS[9] * 1.3)
    assert o.num_frames == 200
    # The upper body moves like creature b: its poses are near b's.
    upper = o.rotations[:, [names.index("b:" + n) for n in NAMES[9:]]]
    assert np.median(pose_gaps(upper, b.rotations[:, 9:])) < 0.5
    with pytest.raises(SkeletonError):
        reassemble([ReassemblySource(a, ["LeftUpLeg*"]), ReassemblySource(b, ["b:Spine*"])], 100, fps=None)


def test_config_validation():
    with pytest.raises(ValueError):
        GenMMConfig(root_weight=0)
    with pytest.raises(TypeError):
        GenMM(dancer(), not_a_setting=1)
    with pytest.raises(ValueError):
        GenMM(dancer(), fps=None).sample(5)  # shorter than a patch
    with pytest.raises(ValueError):
        GenMM(dancer(), fps=None).sample(completion=Completion(dancer(), ["Hips"]), loop=True)


@pytest.mark.skipif(not torch_available(), reason="PyTorch not installed (optional 'gpu' extra)")
def test_torch_backend_matches_numpy():
    m = dancer(200)
    a = GenMM(m, fps=None, dtype="float64").sample(300, seed=4)
    b = GenMM(m, fps=None, dtype="float64", device="torch").sample(300, seed=4)
    np.testing.assert_allclose(a.features, b.features, atol=1e-9)
    m = dancer(150)
    c = GenMM(m, fps=None, device="torch").sample(m.num_frames, noise_sigma=0.0)  # float32 distances
    assert same_rotations(c.motion.rotations, m.rotations) < 1e-12


def test_rotation_6d_is_the_first_two_matrix_rows_and_goes_back():
    """The authors' 6D form (``quat2repr6d``: rows, not columns) and its inverse."""
    from motionmatch.genmm.representation import rotation_6d, rotation_from_6d

    rng = np.random.default_rng(3)
    q = rng.normal(size=(50, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    m = quat.to_matrix(q)
    d6 = rotation_6d(q)
    np.testing.assert_allclose(d6[:, :3], m[:, 0, :], atol=1e-15)
    np.testing.assert_allclose(d6[:, 3:], m[:, 1, :], atol=1e-15)
    assert not np.allclose(d6, quat.to_6d(q))  # not the columns
    back = rotation_from_6d(d6 * 3.0 + 0.0)  # any scale
    assert np.abs(np.abs(np.sum(back * q, axis=1)) - 1).max() < 1e-12
