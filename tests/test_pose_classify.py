"""Classifiers, smoothers, streaming, model files and the command mapping (synthetic data)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from motionmatch.control.intent import GaitSpeeds
from motionmatch.control.pose.classify import (
    ClassifierError,
    HMMFilter,
    KNNPoseClassifier,
    MajorityVote,
    MLPPoseClassifier,
    StreamingClassifier,
    hmm_filter_grid,
    load_classifier,
)
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.pose.features import mirror_motion_features, motion_features, pose_window_features
from motionmatch.control.pose.keypoints import KEYPOINTS, KeypointError, KeypointStream
from motionmatch.control.pose.labels import COMMAND_INDEX, COMMANDS
from motionmatch.control.pose.normalize import normalize_stream
from test_pose_common import synthetic_stream

pytest.importorskip("sklearn")

# three synthetic "commands": standing still, swinging the arms while drifting to image +x
# (the performer's left), and to -x
KINDS = {"stand_still": 0.0, "walk_left": 4.0, "walk_right": -4.0}


def _stream(vx, seed, frames=60):
    return synthetic_stream(frames, vx=vx, seed=seed, swing=0.0 if vx == 0 else 0.3)


def _training(clf, seeds=range(3)):
    Xs, ys = [], []
    for s in seeds:
        for name, vx in KINDS.items():
            n = normalize_stream(_stream(vx, s))
            idx = np.arange(clf.window - 1, 60)
            Xs.append(clf.features(n, idx))
            ys.append(np.full(idx.size, COMMAND_INDEX[name]))
    return np.concatenate(Xs), np.concatenate(ys)


@pytest.fixture(scope="module")
def trained():
    knn = KNNPoseClassifier()
    knn.fit(*_training(knn))
    mlp = MLPPoseClassifier(members=2, hidden=(32,))
    mlp.fit(*_training(mlp), max_iter=200)
    return knn, mlp


def _switching_stream():
    """Standing, then drifting left, then right: 3 x 2 s at 30 Hz."""
    parts = [_stream(v, 9) for v in (0.0, 4.0, -4.0)]
    kp = np.concatenate([p.keypoints - p.keypoints[0, 7] + (parts[0].keypoints[-1, 7] if i else 0)
                         for i, p in enumerate(parts)])
    return KeypointStream(np.arange(len(kp)) / 30.0, kp, KEYPOINTS)


def test_majority_vote_is_the_papers_smoother():
    mv = MajorityVote(5)
    seq = [1, 1, 2, 1, 2, 2, 2, 1, 1, 1]
    out = [mv.update(np.eye(13)[k]) for k in seq]
    assert out == [1, 1, 1, 1, 1, 2, 2, 2, 2, 1]   # the most frequent of the last five
    tie = MajorityVote(4)
    assert [tie.update(np.eye(13)[k]) for k in (1, 1, 2, 2)] == [1, 1, 1, 1]   # a tie keeps the current label


def test_hmm_needs_evidence_but_follows_it():
    h = HMMFilter(np.full(13, 1 / 13), stay=0.9, margin=1.5)
    p_a = np.full(13, 0.01)
    p_a[3] = 0.88
    p_b = np.roll(p_a, 2)
    out = [h.update(p_a) for _ in range(10)]
    assert out[-1] == 3
    assert h.update(p_b) == 3                 # one contrary frame does not switch
    out = [h.update(p_b) for _ in range(4)]
    assert out[-1] == 5                       # a few do


def test_hmm_grid_is_the_filter_run_with_each_setting():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.full(13, 0.3), size=200)
    reset = np.zeros(200, bool)
    reset[[0, 120]] = True
    priors, natural = rng.dirichlet(np.ones(13)), rng.dirichlet(np.ones(13))
    stay, power, margin = np.array([0.5, 0.9, 0.95]), np.array([1.0, 0.5, 1.5]), np.array([1.0, 2.0, 1.2])
    grid = hmm_filter_grid(P, reset, priors, natural, stay, power, margin)
    assert grid.shape == (3, 200)
    for g in range(3):
        f = HMMFilter(priors, stay[g], power[g], margin[g], natural)
        one = []
        for t in range(200):
            if reset[t]:
                f.reset()
            one.append(f.update(P[t]))
        np.testing.assert_array_equal(grid[g], one)
    assert len(set(map(tuple, grid))) > 1                    # the settings do differ
    with pytest.raises(ClassifierError):
        hmm_filter_grid(P, reset, priors, natural, stay, power[:2], margin)


def test_classifiers_separate_the_synthetic_commands(trained):
    """The improved classifier sees where the body goes; the baseline sees normalised poses
    only, so it tells standing from swinging but not the direction of travel."""
    knn, mlp = trained
    s = _switching_stream()
    names = mlp.classify(s).names()
    assert names[50] == "stand_still" and names[110] == "walk_left" and names[170] == "walk_right"
    names = knn.classify(s).names()
    assert names[50] == "stand_still" and {names[110], names[170]} <= {"walk_left", "walk_right"}


def test_streaming_equals_batch(trained):
    s = _switching_stream()
    for clf in trained:
        batch = clf.classify(s).names()
        sc = StreamingClassifier(clf, s.names)
        live = [sc.push(t, k) for t, k in zip(s.times, s.keypoints)]
        assert live == batch, type(clf)


def test_streaming_a_backlog_at_once_equals_one_by_one_at_the_cost_of_one(trained):
    """A live source that fell behind hands the classifier seconds of frames at once
    (``push_many``): the same commands as one push per frame, from one pass of the
    networks, not one per 30 Hz frame (that cost, per frame, is what made a loaded
    session fall further and further behind)."""
    _, mlp = trained
    s = _switching_stream()
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.05, 0.2, 60))                 # an estimator at 5-20 frames/s
    t = t[t < s.times[-1]]
    kp = np.stack([np.stack([np.interp(t, s.times, s.keypoints[:, k, d]) for d in range(2)], axis=1)
                   for k in range(len(KEYPOINTS))], axis=1)
    one = StreamingClassifier(mlp, KEYPOINTS)
    each = [one.push(ti, k) for ti, k in zip(t, kp)]

    calls = []
    counted = replace(mlp)
    counted.predict_proba = lambda X: calls.append(len(X)) or mlp.predict_proba(X)
    many = StreamingClassifier(counted, KEYPOINTS)
    cut = [0, 1, 5, 25, len(t)]                                # bursts of 1, 4, 20 and the rest
    after = [many.push_many(t[a:b], kp[a:b]) for a, b in itertools.pairwise(cut)]
    assert after == [each[b - 1] for b in cut[1:]]
    assert len(calls) == 4 and sum(calls) == int(np.floor((t[-1] - t[0]) * mlp.rate + 1e-6)) + 1
    np.testing.assert_allclose(many.last_proba, one.last_proba)
    with pytest.raises(KeypointError, match="increase"):      # refused whole: nothing taken
        many.push_many([t[-1] + 0.1, t[-1] + 0.05], kp[:2])
    assert many.push(t[-1] + 0.1, kp[-1]) == one.push(t[-1] + 0.1, kp[-1])


def test_the_live_classifier_multiplies_on_one_blas_thread(trained):
    """A few rows at a time gain nothing from BLAS threads, and on a loaded machine each
    product waited for the second thread to be scheduled (a viewer session stalled for
    seconds); batch classification keeps its threads."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads() -> int:
        return max((i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"), default=0)

    _, mlp = trained
    before = blas_threads()
    seen = []
    counted = replace(mlp)
    counted.predict_proba = lambda X: seen.append(blas_threads()) or mlp.predict_proba(X)
    s = _switching_stream()
    StreamingClassifier(counted, KEYPOINTS).push_many(s.times[:10], s.keypoints[:10])
    counted.classify(s)
    assert seen == [min(before, 1), before] and blas_threads() == before


def test_streaming_resamples_other_rates(trained):
    _, mlp = trained
    s = _switching_stream()
    t60 = np.arange(0, s.times[-1] + 1e-9, 1 / 60)
    kp60 = np.stack([np.stack([np.interp(t60, s.times, s.keypoints[:, k, d]) for d in range(2)], axis=1)
                     for k in range(len(KEYPOINTS))], axis=1)
    sc = StreamingClassifier(mlp, KEYPOINTS)
    out = [sc.push(t, k) for t, k in zip(t60, kp60)]
    batch = mlp.classify(s).names()
    assert out[::2] == batch                  # every other 60 Hz pose lands on a 30 Hz frame
    assert max(set(out[150:230]), key=out[150:230].count) == "walk_left"


def test_model_files_roundtrip(tmp_path, trained):
    s = _switching_stream()
    for clf in trained:
        back = load_classifier(clf.save(tmp_path / f"{clf.kind}.npz"))
        assert type(back) is type(clf)
        a, b = clf.classify(s), back.classify(s)
        np.testing.assert_allclose(a.proba, b.proba, atol=1e-5)
        assert a.names() == b.names()
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ClassifierError):
        load_classifier(tmp_path / "junk.npz")
    with pytest.raises(ClassifierError, match="no such"):
        load_classifier(tmp_path / "missing.npz")


def test_untrained_classifiers_say_so():
    with pytest.raises(ClassifierError):
        MLPPoseClassifier().predict_proba(np.zeros((1, 4)))
    with pytest.raises(ClassifierError):
        KNNPoseClassifier().predict_proba(np.zeros((1, 4)))


def test_features_are_causal_and_mirror():
    s = synthetic_stream(60, vx=3.0)
    n = normalize_stream(s)
    full = motion_features(n, 30.0)
    cut = motion_features(normalize_stream(s[:40]), 30.0)
    np.testing.assert_allclose(full[:40], cut, atol=1e-5)          # frame t ignores frames after t
    assert pose_window_features(n).shape == (60, 10 * len(KEYPOINTS) * 2)
    m = s.keypoints.copy()
    m[..., 0] = 640 - m[..., 0]
    from motionmatch.control.pose.keypoints import MIRROR

    mirrored = KeypointStream(s.times, m[:, MIRROR], KEYPOINTS)
    fm = motion_features(normalize_stream(mirrored), 30.0)
    np.testing.assert_allclose(fm, mirror_motion_features(full), atol=1e-4)
    # with the 2 s long context (more frames, a swing, so the frequency bands are not empty)
    s = synthetic_stream(90, vx=3.0, swing=0.3)
    full = motion_features(normalize_stream(s), 30.0, long=60)
    assert full.shape[1] == motion_features(normalize_stream(s), 30.0).shape[1] + 3 * len(KEYPOINTS) + 19
    np.testing.assert_allclose(full[:50], motion_features(normalize_stream(s[:50]), 30.0, long=60), atol=1e-5)
    m = s.keypoints.copy()
    m[..., 0] = 640 - m[..., 0]
    fm = motion_features(normalize_stream(KeypointStream(s.times, m[:, MIRROR], KEYPOINTS)), 30.0, long=60)
    np.testing.assert_allclose(fm, mirror_motion_features(full, long=60), atol=1e-4)
    assert np.abs(full[:, -13:-1]).max() > 0.01                # arm swings show in the frequency bands


def test_command_mapping_follows_the_keyboard_conventions():
    g = GaitSpeeds(walk=1.4, run=3.5, sprint=5.0, creep=0.8)
    m = CommandMapper(g)
    assert np.allclose(m.update("walk_forward").velocity, [0, 0, 1.4])
    assert np.allclose(m.update("walk_left", 1 / 60).velocity, [1.4, 0, 0])    # like A: +X
    assert np.allclose(m.update("run_right", 1 / 60).velocity, [-3.5, 0, 0])   # like D: -X
    c = m.update("creep_forward", 1 / 60)
    assert "creep" in c.actions and np.isclose(c.speed, 0.8)
    j = m.update("jump", 1 / 60)
    assert "jump" in j.actions and j.speed > 0                                # a moving jump keeps its velocity
    for _ in range(80):                                                       # a long jump command re-triggers
        j = m.update("jump", 1 / 60)
        if "jump" not in j.actions:
            break
    assert "jump" not in j.actions and "jump" in m.update("jump", 1 / 60).actions
    assert m.update("dance", 1 / 60).actions == frozenset({"dance"})
    assert m.update("stand_still", 1 / 60).speed == 0 and m.update("punch", 1 / 60).speed == 0
    assert m.update("", 1 / 60).speed == 0
    with pytest.raises(ValueError):
        m.update("moonwalk")
    assert set(COMMANDS) >= {"walk_forward", "punch"} and len(COMMANDS) == 13


def test_mirror_average_answers_a_mirror_image_with_the_mirrored_command(trained, tmp_path):
    from motionmatch.control.pose.classify import mirror_commands

    mirror = mirror_commands(COMMANDS)
    assert COMMANDS[mirror[COMMAND_INDEX["walk_left"]]] == "walk_right"
    assert COMMANDS[mirror[COMMAND_INDEX["creep_right"]]] == "creep_left"
    assert COMMANDS[mirror[COMMAND_INDEX["dance"]]] == "dance"
    assert np.array_equal(mirror[mirror], np.arange(len(COMMANDS)))
    _knn, mlp = trained
    X, _y = _training(mlp)
    avg = replace(mlp, mirror_average=True)
    P = avg.predict_proba(X)
    Pm = avg.predict_proba(mirror_motion_features(X, mlp.window, mlp.context, mlp.long))
    np.testing.assert_allclose(Pm, P[:, mirror], atol=1e-5)     # exactly symmetric
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
    plain = mlp.predict_proba(X)
    assert not np.allclose(plain, P)                            # the average changes the answer
    # and it survives a save and load
    path = avg.save(tmp_path / "mlp.npz")
    np.testing.assert_allclose(load_classifier(path).predict_proba(X[:50]), P[:50], atol=1e-6)


def test_boosted_trees_blend_in_and_are_saved_with_the_networks(tmp_path):
    mlp = MLPPoseClassifier(members=1, hidden=(32,), tree_weight=0.5, tree_iter=20)
    X, y = _training(mlp)
    mlp.fit(X, y, max_iter=100)
    assert mlp.trees is not None and mlp.trees.num_trees > 0
    P = mlp.predict_proba(X)
    nets_only = replace(mlp, tree_weight=0.0).predict_proba(X)
    trees_only = mlp.trees.proba(X)
    np.testing.assert_allclose(P, 0.5 * nets_only + 0.5 * trees_only, atol=1e-9)   # the blend, as documented
    assert np.mean(np.argmax(P, axis=1) == y) > 0.9
    back = load_classifier(mlp.save(tmp_path / "blend.npz"))
    np.testing.assert_allclose(back.predict_proba(X), P, atol=1e-6)
    assert back.tree_weight == 0.5
    # a file whose trees are cut short is refused with the file's name
    with np.load(tmp_path / "blend.npz", allow_pickle=False) as z:
        d = {k: z[k] for k in z.files if k != "tree_value"}
    np.savez(tmp_path / "cut.npz", **d)
    with pytest.raises(ClassifierError, match=r"cut\.npz.*missing"):
        load_classifier(tmp_path / "cut.npz")


def test_the_viewer_webcam_source_places_each_change_at_its_frame_time(trained):
    """A session tick that takes seconds of webcam frames at once (a starved session)
    classifies them in one pass and still records each change of command at the time of
    the frame that made it: the changes of the whole stream classified offline."""
    from motionmatch.viewer.pose import ClassifierLoader, ViewerPoseSource

    _, mlp = trained
    loader = ClassifierLoader()
    loader.set(mlp)
    src = ViewerPoseSource("webcam", loader=loader, calibrate_s=0)
    full = _switching_stream()                                # stand 2 s, left 2 s, right 2 s
    s = KeypointStream(full.times[::2], full.keypoints[::2], full.names)    # 15 frames/s
    for ti, k in zip(s.times + 100.0, s.keypoints):           # the page's clock
        src.push(np.c_[k, np.ones(len(k))], ti)
    calls = []
    real = mlp.predict_proba
    mlp.predict_proba = lambda X: calls.append(len(X)) or real(X)
    try:
        src._feed(1 / 60)
    finally:
        del mlp.predict_proba
    assert len(calls) == 1 and src.frames_in == len(s)
    out = mlp.classify(s)                                     # (resampled to 30 Hz)
    names = out.names()
    changes = [(round(float(out.times[i]), 3), c) for i, c in enumerate(names) if i == 0 or c != names[i - 1]]
    assert list(src.timeline) == changes and {"stand_still", "walk_left", "walk_right"} <= {c for _, c in changes}
    assert src.status()["history"] == [list(e) for e in changes[-6:]] and src.command == names[-1]
