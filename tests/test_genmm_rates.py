"""GenMM's frame-rate checks (implausible rates warned about or refused) and its progress
reports (stage, share done, time left), on small synthetic clips."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from motionmatch.anim import Motion, save_bvh
from motionmatch.anim.resample import resample
from motionmatch.errors import MotionError
from motionmatch.genmm import PLAUSIBLE_FPS, Completion, FrameRateWarning, GenMM, Keyframes, SynthesisProgress
from motionmatch.genmm.rates import MAX_RESAMPLED_FRAMES, resampled_frames
from test_genmm import dancer


@pytest.fixture
def no_warnings():
    """Any warning inside the test is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize("frames, fps, to_fps", [(21, 1.0, 30.0), (300, 1.0, 30.0), (240, 60.0, 30.0),
                                                 (100, 7.0, 30.0), (3000, 2000.0, 30.0)])
def test_resampled_frames_is_what_resample_makes(frames, fps, to_fps):
    assert resampled_frames(frames, fps, to_fps) == resample(dancer(frames, fps=fps), to_fps).num_frames


def test_a_keyframe_like_example_is_warned_about_with_the_fix(tmp_path):
    path = save_bvh(dancer(21, fps=1.0), tmp_path / "keys_as_example.bvh")
    with pytest.warns(FrameRateWarning) as rec:
        gen = GenMM([path])
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert str(path) in msg and "1 fps" in msg and "21 frames become 601" in msg
    assert "--fps native" in msg and "fps=None" in msg
    assert gen.example_frames == 601 and gen.fps == 30.0


def test_a_blown_up_example_is_refused_before_any_work():
    slow = dancer(300, fps=1.0, name="slow")
    with pytest.raises(MotionError, match=r"slow: example at 1 fps .* its 300 frames into 8,971 .*--fps native"):
        GenMM([slow])
    assert resampled_frames(300, 1.0, 30.0) > MAX_RESAMPLED_FRAMES


def test_implausibly_high_rates_are_warned_about_too():
    with pytest.warns(FrameRateWarning, match="1000 fps"):
        GenMM([dancer(2000, fps=1000.0)])


def test_plausible_or_not_resampled_rates_say_nothing(no_warnings):
    low, high = PLAUSIBLE_FPS
    assert (low, high) == (10.0, 480.0)
    GenMM([dancer(100, fps=low)])
    GenMM([dancer(1000, fps=high)])
    gen = GenMM([dancer(300, fps=1.0)], fps=None)  # the fix: the examples' own rate, no resampling
    assert gen.fps == 1.0 and gen.sample(40).motion.num_frames == 40


def test_key_poses_one_second_apart_are_legitimate(tmp_path, no_warnings):
    m = dancer(240)
    keys = Motion(m.skeleton, m.rotations[[20, 90]], m.translations[[20, 90]], fps=1.0)
    kf = Keyframes.from_bvh(save_bvh(keys, tmp_path / "keys.bvh"))  # Frame Time 1.0: a key per second
    out = GenMM(m).sample(keyframes=kf).motion
    assert kf.output_frames(30.0).tolist() == [0, 30] and out.num_frames == 480


def test_a_completion_clip_is_checked_like_an_example():
    gen = GenMM(dancer(240), parts="auto")
    with pytest.raises(MotionError, match="completion clip at 1 fps"):
        gen.sample(completion=Completion(dancer(300, fps=1.0), ["Hips"]))


def test_progress_is_reported_after_every_iteration(capsys):
    gen = GenMM(dancer(240), iterations=2)
    seen: list[SynthesisProgress] = []
    res = gen.sample(300, seed=0, progress=seen.append)
    stages = len(res.info.synthesis_lengths)
    assert len(seen) == 2 * stages
    assert [(p.stage, p.iteration) for p in seen] == [(k, i) for k in range(1, stages + 1) for i in (1, 2)]
    assert [p.frames for p in seen[1::2]] == res.info.synthesis_lengths
    fractions = np.array([p.fraction for p in seen])
    assert np.all(np.diff(fractions) > 0) and fractions[-1] == pytest.approx(1.0)
    assert fractions[-3] < 0.75  # the full-length stage is most of the work
    elapsed = np.array([p.elapsed_s for p in seen])
    assert np.all(np.diff(elapsed) >= 0) and elapsed[-1] <= res.synthesis_s
    assert seen[-1].eta_s == pytest.approx(0.0, abs=1e-9)
    for p in seen:
        assert p.eta_s == pytest.approx(p.elapsed_s * (1 - p.fraction) / p.fraction)
    np.testing.assert_array_equal(res.features, gen.sample(300, seed=0).features)  # reporting changes nothing
    assert capsys.readouterr() == ("", "")  # the API is quiet
