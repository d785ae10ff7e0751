"""The live pose classifier's cost to a viewer session, per second of camera.

    python benchmarks/bench_pose_live.py [--data DIR] [--classifier MODEL.npz] [--fps 9] [--repeat 3]

A walk then a run (Bandai-Namco takes, the page camera test's) filmed through the virtual
camera, sampled the way the page's estimator delivers it (``--fps`` frames a second with
+-30% jitter), fed to a webcam :class:`~motionmatch.viewer.pose.ViewerPoseSource` (after
its calibration) three ways:

* **one pass per 30 Hz frame** (the baseline: what the session paid before frames were
  batched: each frame resampled to the classifier's 30 Hz normalised the history, computed
  features and ran the networks on its own);
* **one pass per camera frame**: a session tick after every frame (an idle machine);
* **one pass per second**: a session that fell a second behind takes that second's frames
  in one tick (a loaded machine).

Prints the session's CPU milliseconds per second of camera for each (best of ``--repeat``),
and the ratio against the baseline measured in the same run; the classifier is the default
one when cached (``motionmatch pose eval``), else ``--classifier``. Nothing here gates CI.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import data_root
from motionmatch.control.pose.classify import load_classifier
from motionmatch.control.pose.default import cached_classifiers
from motionmatch.control.pose.keypoints import standing_pose
from motionmatch.control.pose.render import RenderSettings
from motionmatch.control.pose.sources import render_bvh
from motionmatch.viewer.pose import ClassifierLoader, ViewerPoseSource


def frames(root: Path, fps: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(times [N], keypoints [N, 13, 3])``: 3.5 s standing (the calibration), then the walk
    and the run, at about ``fps`` frames a second."""
    s = RenderSettings(distance=(3.5, 3.5), height=(1.2, 1.2), max_segment_s=30.0)
    takes = [root / "bandai-namco" / "dataset-1" / "dataset-1_walk_normal_001.bvh",
             root / "bandai-namco" / "dataset-2" / "dataset-2_run_normal_001.bvh"]
    kp = np.concatenate([render_bvh(f, 0.0, s, label=False).keypoints[:, :, :2] for f in takes])
    stand = standing_pose() * 80.0 + np.array([320.0, 240.0])
    kp = np.concatenate([np.repeat(stand[None], 105, 0), kp])            # 30 Hz
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(0.7, 1.3, int(len(kp) / 30.0 * fps)) / fps)
    t = t[t < (len(kp) - 1) / 30.0]
    i = np.round(t * 30.0).astype(int)
    return t, np.concatenate([kp[i], np.ones((len(i), kp.shape[1], 1))], axis=2)


def session_ms(clf, t: np.ndarray, kp: np.ndarray, tick_every: int | None, grid: bool) -> float:
    """CPU ms of the session (ticks included) for the frames after calibration."""
    loader = ClassifierLoader()
    loader.set(clf)
    src = ViewerPoseSource("webcam", loader=loader)
    if grid:                                   # the baseline: one 30 Hz frame per push and tick
        g = np.arange(t[0], t[-1], 1 / 30.0)
        kp = np.stack([[np.interp(g, t, kp[:, k, d]) for d in range(3)] for k in range(kp.shape[1])]).transpose(2, 0, 1)
        t = g
    start = np.searchsorted(t, t[0] + 3.2)
    for i in range(start):
        src.push(kp[i], t[i])
    src._feed(1 / 60)
    assert src.calibration is not None, src.calibration_error
    c0 = time.thread_time()
    for i in range(start, len(t)):
        src.push(kp[i], t[i])
        if tick_every is None or (i - start + 1) % tick_every == 0:
            src._feed(1 / 60)
    src._feed(1 / 60)
    return 1000.0 * (time.thread_time() - c0) / (t[-1] - t[start])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="motion-capture root (default $MOTIONMATCH_DATA)")
    ap.add_argument("--classifier", metavar="MODEL.npz", help="a saved classifier (default: the cached default one)")
    ap.add_argument("--fps", type=float, default=9.0, help="camera frames a second (default 9: the page's estimator)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    root = Path(a.data) if a.data else data_root()
    if a.classifier:
        clf, name = load_classifier(a.classifier), a.classifier
    else:
        pair = cached_classifiers(root)
        if pair is None:
            sys.exit("no default classifier cached: run `motionmatch pose eval` first, or pass --classifier")
        clf, name = pair[1], "the default classifier"
    t, kp = frames(root, a.fps)
    print(f"{name}; {len(t)} camera frames at {a.fps:g}/s (+-30%), {t[-1] - t[0]:.1f} s")
    session_ms(clf, t, kp, 1, False)            # warm-up (kernels)
    cases = [("one pass per 30 Hz frame (baseline)", None, True), ("one pass per camera frame", 1, False),
             ("one pass per second (a session 1 s behind)", max(round(a.fps), 1), False)]
    base = None
    for label, every, grid in cases:
        ms = min(session_ms(clf, t, kp, every, grid) for _ in range(a.repeat))
        base = base or ms
        print(f"  {label:44s} {ms:7.1f} ms per camera second  ({base / ms:4.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
