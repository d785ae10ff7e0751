"""Domain check of the pose classifier (issue 18): keypoints from a real estimator on video
of the skinned body, against the rendered keypoints it was trained on.

Test clips of the default pose data (the classifiers never trained on them) are filmed on
the skinned mannequin by the virtual camera from the test azimuths
(:func:`motionmatch.control.pose.bodyvideo.render_body_video`), MediaPipe Pose (the
``webcam`` extra) runs on every frame, and the default improved classifier is scored on
both keypoint streams against the same labels: macro-F1 and the confusion matrix, on
the rendered keypoints, on the estimator's keypoints, and on the estimator's keypoints
after the stand-still calibration (:mod:`motionmatch.control.pose.calibrate`; the
performer's neutral pose taken from the estimator's stand-still frames filmed from the
front, per skeleton).

    python benchmarks/bench_pose_camera.py                 # needs motionmatch[webcam]
    python benchmarks/bench_pose_camera.py --neutral       # re-measure TRAINING_NEUTRAL (no estimator)

Prints the numbers and the estimator's frame rate (frames per second of MediaPipe on
this machine's CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from motionmatch.anim import load_bvh
from motionmatch.anim.resample import resample
from motionmatch.control.pose.dataset import TEST_AZIMUTHS, RenderedClip, clip_split, data_files
from motionmatch.control.pose.default import DEFAULT_DATA, default_classifier, resolve_root
from motionmatch.control.pose.evaluate import evaluate_renders
from motionmatch.control.pose.keypoints import KeypointStream
from motionmatch.control.pose.labels import COMMANDS, label_frames, motion_facts
from motionmatch.control.pose.normalize import normalize_stream
from motionmatch.control.pose.render import RenderSettings, render_keypoints, world_keypoints
from motionmatch.datasets import tags_from_name


def _clips(root: Path, split: str, limit: int):
    """The ``split`` clips, taken in turn from each kind of take (by the name's first word
    after the dataset prefix), so a few clips still cover walks, runs, dances, ..."""
    by_kind: dict[str, list] = {}
    for sub, f in data_files(root, DEFAULT_DATA):
        if clip_split(f.stem, DEFAULT_DATA) == split and sub in ("lafan1", "bandai-namco/dataset-1",
                                                                 "bandai-namco/dataset-2"):
            kind = f.stem.split("_")[1] if f.stem.startswith("dataset-") else f.stem.rstrip("0123456789_")[:5]
            by_kind.setdefault(kind, []).append((sub, f))
    out = []
    lists = list(by_kind.values())
    for i in range(max((len(v) for v in lists), default=0)):
        out += [v[i] for v in lists if i < len(v)]
    return out[:limit] if limit else out


def _load(f: Path, fps: float, seconds: float, start_s: float = 0.0):
    m = load_bvh(f)
    m.tags = tags_from_name(f.stem)
    if abs(m.fps - fps) > 1e-6:
        m = resample(m, fps)
    a = min(int(start_s * fps), max(0, m.num_frames - 1))
    b = min(m.num_frames, a + int(seconds * fps)) if seconds else m.num_frames
    return m[a:b] if (a, b) != (0, m.num_frames) else m


def measure_neutral(root: Path) -> np.ndarray:
    """``[13, 2]`` the median normalised pose of stand_still frames filmed from the front."""
    poses = []
    s = RenderSettings(noise_px=0.0, noise_rel=0.0)
    for split in ("train", "val"):
        for _, f in _clips(root, split, 0):
            m = _load(f, s.fps, 0.0)
            kp = world_keypoints(m)
            stream, info = render_keypoints(kp, s.fps, s, 0, 0.0)
            lab = label_frames(motion_facts(m, kp), info.cam_forward, info.cam_right)
            ok = lab == "stand_still"
            if ok.sum() >= 10:
                poses.append(normalize_stream(stream).poses[ok])
    P = np.concatenate(poses)
    print(f"{len(P)} stand_still frames from the front", file=sys.stderr)
    return np.median(P, axis=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="motion-capture root (default $MOTIONMATCH_DATA)")
    ap.add_argument("--clips", type=int, default=12, help="test clips (default 12)")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds of each clip (default 20)")
    ap.add_argument("--scale", type=float, default=0.75, help="image size factor of 640 x 480 (default 0.75)")
    ap.add_argument("--model", default="full", choices=("lite", "full", "heavy"))
    ap.add_argument("--classifier", metavar="MODEL.npz", help="a saved classifier instead of the default improved one")
    ap.add_argument("--neutral", action="store_true", help="print the training data's neutral pose and stop")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    args = ap.parse_args()
    root = resolve_root(args.data)
    if args.neutral:
        n = measure_neutral(root)
        print(json.dumps(np.round(n, 2).tolist()))
        return 0

    from motionmatch.control.pose.bodyvideo import render_body_video
    from motionmatch.control.pose.calibrate import MAX_OFFSET, Calibration, neutral_target
    from motionmatch.control.pose.estimator import PoseEstimator

    if args.classifier:
        from motionmatch.control.pose.classify import load_classifier

        clf = load_classifier(args.classifier)
    else:
        clf = default_classifier("improved", root=root)
    settings = RenderSettings()
    rendered, estimated, groups = [], [], []
    t_render = t_est = 0.0
    n_frames = 0
    seen = 0
    clips = _clips(root, "test", args.clips)
    print(f"{len(clips)} test clips, {args.seconds:g} s each, {args.model} model, "
          f"{round(640 * args.scale)} x {round(480 * args.scale)} images", file=sys.stderr)
    for i, (sub, f) in enumerate(clips):
        m = _load(f, settings.fps, args.seconds)
        az = TEST_AZIMUTHS[i % len(TEST_AZIMUTHS)]
        t0 = time.perf_counter()
        video = render_body_video(m, settings, seed=i, azimuth=az, scale=args.scale)
        t1 = time.perf_counter()
        est = PoseEstimator(args.model)
        kps, confs = [], []
        for j, frame in enumerate(video.frames):
            kp, conf = est.estimate(frame, j / video.fps)
            kps.append(kp / args.scale)     # in the rendered keypoints' pixels
            confs.append(conf)
        est.close()
        t2 = time.perf_counter()
        t_render += t1 - t0
        t_est += t2 - t1
        F = len(video.frames)
        n_frames += F
        r = video.keypoints
        cuts = np.zeros(F, dtype=bool)
        cuts[0] = True
        e = KeypointStream(r.times, np.stack(kps), r.names, np.stack(confs), True, r.image_size, r.labels)
        found = e.present()[:, [1, 2, 7, 8]].all(axis=1)
        seen += int(found.sum())
        rendered.append(RenderedClip(f.stem, "test", False, r, cuts, np.full(F, az)))
        estimated.append(RenderedClip(f.stem, "test", False, e, cuts, np.full(F, az)))
        groups.append(sub.split("/")[0])
        print(f"  {f.stem}: {F} frames at azimuth {az:+g}, body found in {100 * found.mean():.0f}%, "
              f"render {t1 - t0:.1f} s, estimator {F / max(t2 - t1, 1e-9):.1f} frames/s", file=sys.stderr)

    # calibration per skeleton source: the estimator's stand-still frames filmed from the front
    calibrated = []
    cal_info = {}
    for g in sorted(set(groups)):
        poses = []
        for r, e, gg in zip(rendered, estimated, groups):
            if gg != g or abs(float(r.azimuth[0])) > 15:
                continue
            ok = (r.labels == "stand_still") & e.stream.present()[:, [1, 2, 7, 8]].all(axis=1)
            if ok.any():
                poses.append(normalize_stream(e.stream).poses[ok])
        if poses:
            neutral = np.median(np.concatenate(poses), axis=0)
            offset = np.clip(neutral_target() - neutral, -MAX_OFFSET, MAX_OFFSET)
            cal_info[g] = Calibration(1.0, neutral, offset, 1.0, int(sum(len(p) for p in poses)))
    for e, g in zip(estimated, groups):
        c = cal_info.get(g)
        s = c.apply_stream(e.stream) if c is not None else e.stream
        calibrated.append(RenderedClip(e.name, "test", False, s, e.cuts, e.azimuth))

    results = {"rendered keypoints": evaluate_renders(clf, rendered),
               "estimator keypoints": evaluate_renders(clf, estimated)}
    if cal_info:
        results["estimator, calibrated"] = evaluate_renders(clf, calibrated)
    print()
    print(f"{n_frames} frames of {len(clips)} test clips; MediaPipe {args.model} found a body in "
          f"{100 * seen / max(n_frames, 1):.1f}% of them at {n_frames / max(t_est, 1e-9):.1f} frames/s "
          f"(render {n_frames / max(t_render, 1e-9):.1f} frames/s); calibrated groups: "
          f"{', '.join(f'{g} ({c.frames} frames)' for g, c in cal_info.items()) or 'none'}")
    print(f"{'keypoints':24s} {'macro-F1':>9s} {'accuracy':>9s} {'frames':>7s}")
    for name, ev in results.items():
        print(f"{name:24s} {ev.smoothed['macro_f1']:9.3f} {ev.smoothed['accuracy']:9.3f} {ev.frames:7d}")
    for name, ev in results.items():
        print(f"\nconfusion matrix, {name} (rows: true, columns: emitted):")
        print("  " + " ".join(f"{c[:6]:>6s}" for c in COMMANDS))
        for c, row in zip(COMMANDS, ev.confusion):
            if row.sum():
                print("  " + " ".join(f"{v:6d}" for v in row) + f"  {c}")
    if args.json:
        Path(args.json).write_text(json.dumps({k: v.to_dict() for k, v in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
