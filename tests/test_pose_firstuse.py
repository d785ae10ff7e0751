"""Issue 33: the pose classifier on first use (a quick one at once, the default one trained
in a background process), and what it is made of. The page camera test of a fresh install
is in test_pose_camera.py."""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import data_root
from motionmatch.control.pose.classify import ClassifierError, MLPPoseClassifier, StreamingClassifier
from motionmatch.control.pose.keypoints import KEYPOINTS, KeypointStream
from test_pose_classify import _switching_stream, trained  # noqa: F401  (the fixture)


def test_a_live_stream_switches_classifier_keeping_its_context(trained):  # noqa: F811
    """After ``use``, the next frame's probabilities are the new classifier's on the whole
    stream (its context features whole at once, from the kept history); a classifier of
    other commands is refused."""
    knn, mlp = trained
    s = _switching_stream()
    live = StreamingClassifier(knn, KEYPOINTS, s.y_down)
    half = len(s) // 2
    live.push_many(s.times[:half], s.keypoints[:half])
    live.use(mlp)
    live.push(float(s.times[half]), s.keypoints[half])
    from motionmatch.control.pose.classify import resample_stream
    from motionmatch.control.pose.normalize import normalize_stream

    norm = normalize_stream(resample_stream(KeypointStream(s.times[:half + 1], s.keypoints[:half + 1], s.names)))
    offline = mlp.predict_proba(mlp.features(norm, np.array([len(norm) - 1])))[0]
    np.testing.assert_allclose(live.last_proba, offline, atol=1e-5)
    assert live.clf is mlp and live.command >= 0
    with pytest.raises(ClassifierError, match="same commands"):
        live.use(MLPPoseClassifier(commands=("a", "b", "c")))


def test_the_viewer_source_moves_to_the_loaders_new_classifier(trained):  # noqa: F811
    from motionmatch.viewer.pose import ClassifierLoader, ViewerPoseSource

    knn, mlp = trained
    loader = ClassifierLoader()
    loader.set(knn, "first")
    src = ViewerPoseSource("webcam", loader=loader, calibrate_s=0)
    s = _switching_stream()
    for t, k in zip(s.times[:60], s.keypoints[:60]):
        src.push(k, float(t))
    src._feed(1 / 60)
    assert src._clf_stream.clf is knn and src.status()["classifier"] == "first"
    loader.set(mlp, "second")
    for t, k in zip(s.times[60:90], s.keypoints[60:90]):
        src.push(k, float(t))
    src._feed(1 / 60)
    assert src._clf_stream.clf is mlp and src.status()["classifier"] == "second" and src.frames_in == 90


def test_sampling_first_gives_the_same_training_set_faster():
    """``training_set(sample_first=True)`` chooses the same frames (from the labels) and
    computes features only for them: the same ``(X, y)``."""
    from motionmatch.control.pose.dataset import DataConfig, load_clips, render_clips, training_set

    root = data_root()
    if not (root / "lafan1").is_dir():
        pytest.skip(f"{root / 'lafan1'} not found; set MOTIONMATCH_DATA to the shared data folder")
    cfg = DataConfig(folders=(("lafan1", 1, "walk1*"), ("lafan1", 1, "obstacles1*")))
    renders = [r for r in render_clips(load_clips(root, cfg), cfg, splits=("train",))]
    mlp = MLPPoseClassifier()
    t0 = time.perf_counter()
    X, y = training_set(renders, mlp.features, max_per_class=200, min_per_class=50, seed=3)
    t1 = time.perf_counter()
    Xs, ys = training_set(renders, mlp.features, max_per_class=200, min_per_class=50, seed=3, sample_first=True)
    t2 = time.perf_counter()
    np.testing.assert_array_equal(ys, y)
    np.testing.assert_allclose(Xs, X, atol=1e-6)
    assert len(np.unique(y)) >= 3 and t2 - t1 < t1 - t0


@pytest.mark.slow
def test_first_use_gives_the_quick_classifier_then_the_default_one(tmp_path):
    """From an empty cache (the tests' quick configuration): the loader trains the quick
    classifier and hands it out, starts the background process (its own, at low priority),
    and moves to the default one as soon as that is cached (here by another process: a
    pair written into the cache), saying so; the background process is stopped then, and
    a loader closed while it trains leaves no process behind."""
    pytest.importorskip("sklearn")
    from motionmatch.control.pose import default as d
    from motionmatch.control.pose.classify import KNNPoseClassifier, load_classifier
    from motionmatch.viewer.pose import ClassifierLoader

    root = data_root()
    if not (root / "lafan1").is_dir():
        pytest.skip(f"{root} has no motion capture; set MOTIONMATCH_DATA to the shared data folder")
    loader = ClassifierLoader(root, tmp_path / "cache", d.QUICK)
    loader.POLL_S = 0.2
    try:
        assert loader.get() is None
        deadline = time.monotonic() + 300
        while loader.get() is None and loader.error is None and time.monotonic() < deadline:
            time.sleep(0.2)
        quick = loader.get()
        assert loader.error is None and isinstance(quick, MLPPoseClassifier) and "quick" in quick.meta
        assert "quick classifier" in loader.description and "background" in loader.description
        while loader.background is None and time.monotonic() < deadline:
            time.sleep(0.1)
        bg = loader.background
        assert bg.poll() is None and bg.pid is not None            # training, in its own process
        # another process caches the default pair meanwhile (a kNN and the quick network re-read)
        quick.save(tmp_path / "imp.npz")
        imp = load_classifier(tmp_path / "imp.npz")
        knn = KNNPoseClassifier().fit(np.random.default_rng(0).normal(size=(30, 4)), np.arange(30) % 3)
        d.cache_classifiers(knn, imp, root, d.QUICK, tmp_path / "cache")
        while loader.get() is quick and time.monotonic() < deadline:
            time.sleep(0.1)
        new = loader.get()
        assert new is not quick and isinstance(new, MLPPoseClassifier)
        assert "default (improved) classifier" in loader.description and "now in use" in loader.description
        assert set(loader.ready_s) == {"quick", "default"} and loader.ready_s["default"] >= loader.ready_s["quick"]
        assert bg.poll() is not None                               # no longer needed: stopped
    finally:
        loader.close()
    # closed while the background trains: the process ends with the loader
    for f in (tmp_path / "cache").glob("knn-*.npz"):
        f.unlink()
    loader = ClassifierLoader(root, tmp_path / "cache", d.QUICK)
    loader.POLL_S = 0.2
    loader.get()
    deadline = time.monotonic() + 120
    while loader.background is None and time.monotonic() < deadline:  # the quick one is cached: seconds
        time.sleep(0.1)
    bg = loader.background
    assert bg is not None and bg.poll() is None
    loader.close()
    assert bg.poll() is not None and loader.background is None


def test_the_background_training_ends_with_the_process_that_started_it(tmp_path):
    """A viewer killed while the default classifier trains leaves no training behind: the
    child watches its parent and ends when it is gone."""
    import subprocess
    import sys
    from pathlib import Path

    root = data_root()
    if not (root / "lafan1").is_dir():
        pytest.skip(f"{root} has no motion capture; set MOTIONMATCH_DATA to the shared data folder")
    code = ("import sys; from motionmatch.control.pose.firstuse import BackgroundTraining; "
            "from motionmatch.control.pose.default import QUICK; "
            f"b = BackgroundTraining({str(root)!r}, {str(tmp_path / 'cache')!r}, QUICK); b.start(); print(b.pid)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    pid = int(out.stdout.strip())                      # its parent has ended already

    def running() -> bool:
        try:
            state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    if not Path("/proc").is_dir():
        pytest.skip("needs /proc to watch the process")
    deadline = time.monotonic() + 60
    while running() and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = running()
    if alive:                                          # (not left behind by a failing test either)
        import os
        import signal

        os.kill(pid, signal.SIGTERM)
    assert not alive, f"background training {pid} outlived its parent"
