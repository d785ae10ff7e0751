"""GenMM evaluation on the real example clips (issue 17): coverage with a threshold
relative to the example scores a truncated copy about its share, and every measure scores
bad inputs (truncated copies, noise, a held pose, another motion) badly. Also the
``motionmatch genmm-eval`` command. Skipped without $MOTIONMATCH_DATA/genmm-examples."""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.anim import load_bvh, save_bvh
from motionmatch.anim.resample import resample
from motionmatch.cli.main import main
from motionmatch.metrics.genmm import (
    coverage,
    coverage_thresholds,
    evaluate,
    global_patch_distance,
    local_patch_distance,
    rotation_features,
)

pytestmark = pytest.mark.data

# Every example clip with real motion (the keyframe file holds 21 keys at 1 fps).
CLIPS = ["Joe_Salsa-Dancing-6.bvh", "Crabnew_Crab-dance-long.bvh", "Elephant_idle1.bvh",
         "Joe_Walk-In-Circle.bvh", "Malcolm_Gangnam-Style.bvh", "Xia_normal.bvh"]


@pytest.fixture(scope="module")
def clips30(data_dir):
    """The example clips at 30 fps, the rate of evaluation, by file name."""
    folder = data_dir / "genmm-examples"
    if not folder.is_dir():
        pytest.skip(f"GenMM example clips not found in {folder}; set MOTIONMATCH_DATA to the shared data folder")
    out = {}
    for name in CLIPS:
        m = load_bvh(folder / name)
        out[name] = m if abs(m.fps - 30.0) < 1e-9 else resample(m, 30.0)
    return out


@pytest.mark.parametrize("name", CLIPS)
def test_a_truncated_copy_covers_about_its_share(clips30, name):
    """The acceptance test: the first 10%, 50% and 100% of an example, given as the
    generated motion, cover within 0.1 of 0.1, 0.5 and 1.0 of it."""
    ex = clips30[name]
    X = rotation_features(ex)
    for share in (0.1, 0.5, 1.0):
        got = coverage(X, X[:round(share * len(X))])
        assert abs(got - share) <= 0.1, (name, share, got)


def test_the_old_absolute_threshold_could_not_fail(clips30):
    """Why the threshold is relative: with GANimator's absolute 2.0 a tenth of the salsa
    already covers most of it."""
    X = rotation_features(clips30["Joe_Salsa-Dancing-6.bvh"])
    assert coverage(X, X[:len(X) // 10], threshold=2.0) > 0.5
    assert coverage(X, X[:len(X) // 10]) < 0.1


def test_thresholds_follow_the_example_speed(clips30):
    """Twice the median frame step: a clip played at half speed (every frame doubled by
    slerp) gets about half the threshold."""
    ex = clips30["Crabnew_Crab-dance-long.bvh"]
    X = rotation_features(ex)
    (th,) = coverage_thresholds(X)
    assert th == pytest.approx(2 * np.median(np.linalg.norm(np.diff(X, axis=0), axis=1)))
    slow = resample(ex, 60.0)  # the same frames, twice as dense: half the step
    (th_slow,) = coverage_thresholds(rotation_features(slow))
    assert th_slow == pytest.approx(th / 2, rel=0.1)


def test_bad_outputs_score_badly(clips30):
    """Noise, a held pose and another motion of the same skeleton cover (almost) nothing
    and lie far from the example; the example itself covers all at distance 0."""
    ex = clips30["Joe_Salsa-Dancing-6.bvh"]
    X = rotation_features(ex)
    (th,) = coverage_thresholds(X)
    rng = np.random.default_rng(0)
    # Noise as large as the motion itself: per frame, the example's RMS distance to its mean pose.
    noisy = X + rng.normal(scale=np.sqrt(X.var(axis=0).sum() / X.shape[1]), size=X.shape)
    held = np.repeat(X[len(X) // 2][None], len(X), axis=0)
    other = rotation_features(clips30["Joe_Walk-In-Circle.bvh"])  # same 65 joints, another motion
    assert coverage(X, X) == 1.0
    assert local_patch_distance(X, X) == pytest.approx(0.0, abs=1e-6)
    assert global_patch_distance(X, X) == pytest.approx(0.0, abs=1e-6)
    for bad in (noisy, held, other):
        assert coverage(X, bad) < 0.05
        # Farther from the example than any covered window may be.
        assert local_patch_distance(X, bad) > th
        assert global_patch_distance(X, bad) > th
    # A jittered copy (small per-frame noise) stays covered and close: the measures
    # are not all-or-nothing.
    jitter = X + rng.normal(scale=0.1 * th / np.sqrt(X.shape[1]), size=X.shape)
    assert coverage(X, jitter) == 1.0 and local_patch_distance(X, jitter) < th


def test_set_diversity_separates_copies_from_different_motions(clips30):
    X = rotation_features(clips30["Joe_Salsa-Dancing-6.bvh"])
    n = len(X) // 2
    same = evaluate(X, [X[:n], X[:n]])
    shifted = evaluate(X, [X[:n], X[n:2 * n]])  # two different halves of the dance
    assert same["set_diversity"] == pytest.approx(0.0, abs=1e-9)
    assert shifted["set_diversity"] > 0.5
    assert same["coverage"] == pytest.approx(shifted["per_output"]["coverage"][0])


def test_genmm_eval_command(clips30, tmp_path, capsys):
    """The command on files: the numbers are the library's, one file gives no set diversity."""
    ex = clips30["Crabnew_Crab-dance-long.bvh"][:150]  # short files keep the test lean
    ex_path = save_bvh(ex, tmp_path / "example.bvh")
    half = save_bvh(ex[:75], tmp_path / "half.bvh")
    assert main(["genmm-eval", str(half), str(ex_path), "--example", str(ex_path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert set(rep) >= {"coverage", "global_patch_distance", "local_patch_distance", "set_diversity"}
    c_half, c_whole = rep["per_output"]["coverage"]
    X = rotation_features(ex)
    assert c_half == pytest.approx(coverage(X, X[:75]), abs=0.02) and c_half < 0.5
    assert c_whole == pytest.approx(1.0)
    assert rep["coverage"] == pytest.approx((c_half + c_whole) / 2)
    assert rep["set_diversity_frames"] == 75
    # One file: no set diversity.
    assert main(["genmm-eval", str(ex_path), "--example", str(ex_path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert "set_diversity" not in rep and rep["global_patch_distance"] < 0.01


def test_genmm_eval_refuses_another_skeleton_naming_both_files(data_dir, capsys):
    folder = data_dir / "genmm-examples"
    gen, ex = folder / "Xia_normal.bvh", folder / "Crabnew_Crab-dance-long.bvh"
    assert main(["genmm-eval", str(gen), "--example", str(ex)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different joints" in err
    assert str(gen) in err and str(ex) in err
