"""Domain check of the pose classifier (issue 18): keypoints from a real estimator on video
of the skinned body, against the rendered keypoints it was trained on.

Test clips of the default pose data (the classifiers never trained on them) are filmed on
the skinned mannequin (with a head and a face added) by the virtual camera from the test
azimuths (:func:`motionmatch.control.pose.bodyvideo.render_body_video`), MediaPipe Pose
(the ``webcam`` extra) runs on every frame, and the classifier is scored on both keypoint
streams against the same labels: macro-F1 and the confusion matrix, on the rendered
keypoints, on the estimator's keypoints, on both restricted to the frames where the
estimator found a body, on the estimator's keypoints after the stand-still calibration
(:mod:`motionmatch.control.pose.calibrate`; only where test clips stand still filmed from
the front), and on the rendered keypoints of the same frames with the estimator imitated by
the shipped noise model (:mod:`motionmatch.control.pose.imitate`: does it reproduce the gap?). The estimator's keypoints are cached in ``$MOTIONMATCH_CACHE/pose-domain``
(rendering and MediaPipe take a few frames per second on 2 cores; a cached run takes
seconds plus the classifier).

``--fit`` measures the same on training clips (seeds and azimuths of the training side)
and writes the estimator noise model the default classifier trains with
(:mod:`motionmatch.control.pose.imitate`, ``control/pose/estimator_mediapipe.json``).

    python benchmarks/bench_pose_camera.py                 # needs motionmatch[webcam]
    python benchmarks/bench_pose_camera.py --classifier A.npz --classifier B.npz
    python benchmarks/bench_pose_camera.py --fit           # re-measure the estimator noise model
    python benchmarks/bench_pose_camera.py --neutral       # re-measure TRAINING_NEUTRAL (no estimator)

Prints the numbers and the estimator's frame rate (frames per second of MediaPipe on
this machine's CPU, when it ran).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from motionmatch._files import atomic_write
from motionmatch.anim import load_bvh
from motionmatch.anim.resample import resample
from motionmatch.control.pose.dataset import TEST_AZIMUTHS, TRAIN_AZIMUTHS, RenderedClip, clip_split, data_files
from motionmatch.control.pose.default import DEFAULT_DATA, default_classifier, resolve_root
from motionmatch.control.pose.evaluate import evaluate_renders
from motionmatch.control.pose.imitate import SHIPPED
from motionmatch.control.pose.keypoints import MIN_CONFIDENCE, KeypointStream
from motionmatch.control.pose.labels import COMMANDS, label_frames, motion_facts
from motionmatch.control.pose.normalize import normalize_stream
from motionmatch.control.pose.render import RenderSettings, render_keypoints, world_keypoints
from motionmatch.datasets import tags_from_name

#: Version of the cached estimator keypoints (bump when the body video changes; 2: the added head).
CACHE_VERSION = 2


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


def _cache_dir() -> Path:
    from motionmatch.datasets import default_cache_dir

    return default_cache_dir() / "pose-domain"


def estimated_keypoints(f: Path, seconds: float, seed: int, azimuth: float, scale: float = 0.75,
                        model: str = "full") -> tuple[np.ndarray, np.ndarray, float, float]:
    """MediaPipe's keypoints of ``f``'s first ``seconds`` filmed on the skinned body:
    ``(keypoints [F, 13, 2] in the pixels of the full-size rendered keypoints, confidence
    [F, 13], render s, estimator s)``, cached on disk (``$MOTIONMATCH_CACHE/pose-domain``)
    by clip, seconds, camera seed and azimuth, image scale and model (the times are 0 when
    the cache answered)."""
    from motionmatch.control.pose.bodyvideo import render_body_video
    from motionmatch.control.pose.estimator import PoseEstimator

    path = _cache_dir() / f"{f.stem}-{seconds:g}s-seed{seed}-az{azimuth:+g}-x{scale:g}-{model}-v{CACHE_VERSION}.npz"
    if path.is_file():
        with np.load(path) as z:
            return z["keypoints"], z["confidence"], 0.0, 0.0
    settings = RenderSettings()
    m = _load(f, settings.fps, seconds)
    t0 = time.perf_counter()
    video = render_body_video(m, settings, seed=seed, azimuth=azimuth, scale=scale, labels=False)
    t1 = time.perf_counter()
    est = PoseEstimator(model)
    kps, confs = [], []
    for j, frame in enumerate(video.frames):
        kp, conf = est.estimate(frame, j / video.fps)
        kps.append(kp / scale)     # in the rendered keypoints' pixels
        confs.append(conf)
    est.close()
    t2 = time.perf_counter()
    kp, conf = np.stack(kps), np.stack(confs)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as fh:
        np.savez_compressed(fh, keypoints=kp, confidence=conf)
    return kp, conf, t1 - t0, t2 - t1


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


def _pass(root: Path, split: str, clips: int, seconds: float, scale: float, model: str) -> list[dict]:
    """Every clip of a pass: the clip's motion, its rendered keypoints (with and without the
    render's noise, labelled), the view azimuth, and MediaPipe's keypoints (cached).
    Test clips are filmed from the test azimuths (seeds 0, 1, ...), training clips from
    the training azimuths (seeds 100, 101, ...)."""
    from motionmatch.control.pose.imitate import view_azimuth
    from motionmatch.control.pose.render import body_facing

    azimuths = TEST_AZIMUTHS if split == "test" else TRAIN_AZIMUTHS
    base = 0 if split == "test" else 100
    settings = RenderSettings()
    out = []
    chosen = _clips(root, split, clips)
    print(f"{len(chosen)} {split} clips, {seconds:g} s each, {model} model, "
          f"{round(640 * scale)} x {round(480 * scale)} images", file=sys.stderr)
    for i, (sub, f) in enumerate(chosen):
        az = azimuths[i % len(azimuths)]
        m = _load(f, settings.fps, seconds)
        kp = world_keypoints(m)
        stream, info = render_keypoints(kp, settings.fps, settings, base + i, az)
        clean, _ = render_keypoints(kp, settings.fps, replace(settings, noise_px=0.0, noise_rel=0.0), base + i, az)
        imitated = None
        if SHIPPED["mediapipe"].is_file():
            imitated, _ = render_keypoints(kp, settings.fps, replace(settings, estimator="mediapipe"), base + i, az)
        stream.labels = label_frames(motion_facts(m, kp), info.cam_forward, info.cam_right)
        facing = body_facing(kp)
        view = view_azimuth(kp, facing, info.cameras, info.anchors)
        est, conf, t_r, t_e = estimated_keypoints(f, seconds, base + i, az, scale, model)
        F = len(stream)
        found = np.isfinite(est).all(axis=2) & (conf >= MIN_CONFIDENCE)
        found = found[:, [1, 2, 7, 8]].all(axis=1)
        print(f"  {f.stem}: {F} frames at azimuth {az:+g}, body found in {100 * found.mean():.0f}%"
              + (f", render {t_r:.1f} s, estimator {F / max(t_e, 1e-9):.1f} frames/s" if t_e else " (cached)"),
              file=sys.stderr)
        out.append({"name": f.stem, "group": sub.split("/")[0], "azimuth": az, "rendered": stream,
                    "clean": clean.keypoints, "imitated": imitated, "view": view, "estimated": est, "confidence": conf, "found": found,
                    "t_render": t_r, "t_est": t_e})
    return out


def fit(root: Path, clips: int, seconds: float, scale: float, model: str, out: Path) -> None:
    """Measure MediaPipe against the rendered keypoints on training clips; write the model."""
    from motionmatch.control.pose.imitate import fit_estimator_noise

    items = _pass(root, "train", clips, seconds, scale, model)
    noise = fit_estimator_noise([(c["clean"], c["estimated"], c["confidence"], c["view"]) for c in items],
                                source=f"MediaPipe Pose {model} (mediapipe 0.10.14) on the skinned body, "
                                       f"{len(items)} training clips x {seconds:g} s, "
                                       "benchmarks/bench_pose_camera.py --fit")
    noise.save(out)
    np.set_printoptions(precision=2, suppress=True, linewidth=140)
    print(f"wrote {out}: frames per view bin {noise.frames.tolist()}")
    print(f"body lost per bin {noise.lost}, mean run {noise.lost_run:.1f} frames")
    print(f"sides swapped per bin {noise.swap}, mean run {noise.swap_run:.1f} frames")
    print(f"noise correlation per keypoint {noise.ar}")


def _only_found(c: RenderedClip, found: np.ndarray) -> RenderedClip:
    """The clip with frames where the estimator found no body unlabelled (not scored)."""
    from dataclasses import replace as dc_replace

    labels = np.where(found, c.stream.labels, "")
    return RenderedClip(c.name, c.split, False, dc_replace(c.stream, labels=labels), c.cuts, c.azimuth)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="motion-capture root (default $MOTIONMATCH_DATA)")
    ap.add_argument("--clips", type=int, default=12, help="test clips (default 12)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of each clip (default 10)")
    ap.add_argument("--scale", type=float, default=0.75, help="image size factor of 640 x 480 (default 0.75)")
    ap.add_argument("--model", default="full", choices=("lite", "full", "heavy"))
    ap.add_argument("--classifier", metavar="MODEL.npz", action="append",
                    help="a saved classifier instead of the default improved one (repeat to compare several)")
    ap.add_argument("--neutral", action="store_true", help="print the training data's neutral pose and stop")
    ap.add_argument("--fit", metavar="OUT.json", nargs="?", const=str(SHIPPED["mediapipe"]),
                    help="measure MediaPipe on training clips (--fit-clips of --seconds) and write the estimator "
                         "noise model (default: the one shipped, control/pose/estimator_mediapipe.json)")
    ap.add_argument("--fit-clips", type=int, default=14, help="training clips measured by --fit (default 14)")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    args = ap.parse_args()
    root = resolve_root(args.data)
    if args.neutral:
        n = measure_neutral(root)
        print(json.dumps(np.round(n, 2).tolist()))
        return 0
    if args.fit:
        fit(root, args.fit_clips, args.seconds, args.scale, args.model, Path(args.fit))
        return 0

    from motionmatch.control.pose.calibrate import MAX_OFFSET, Calibration, neutral_target
    from motionmatch.control.pose.classify import load_classifier

    if args.classifier:
        clfs = {Path(p).stem: load_classifier(p) for p in args.classifier}
    else:
        clfs = {"default improved": default_classifier("improved", root=root)}
    items = _pass(root, "test", args.clips, args.seconds, args.scale, args.model)
    rendered, estimated, found_r, found_e, groups, imitated = [], [], [], [], [], []
    for c in items:
        r = c["rendered"]
        F = len(r)
        cuts = np.zeros(F, dtype=bool)
        cuts[0] = True
        e = KeypointStream(r.times, c["estimated"], r.names, c["confidence"], True, r.image_size, r.labels)
        rc = RenderedClip(c["name"], "test", False, r, cuts, np.full(F, c["azimuth"]))
        ec = RenderedClip(c["name"], "test", False, e, cuts, np.full(F, c["azimuth"]))
        rendered.append(rc)
        if c["imitated"] is not None:
            im = replace(c["imitated"], labels=r.labels)
            imitated.append(RenderedClip(c["name"], "test", False, im, cuts, np.full(F, c["azimuth"])))
        estimated.append(ec)
        found_r.append(_only_found(rc, c["found"]))
        found_e.append(_only_found(ec, c["found"]))
        groups.append(c["group"])

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

    n_frames = sum(len(c["found"]) for c in items)
    seen = sum(int(c["found"].sum()) for c in items)
    t_est = sum(c["t_est"] for c in items)
    t_render = sum(c["t_render"] for c in items)
    print()
    print(f"{n_frames} frames of {len(items)} test clips; MediaPipe {args.model} found a body in "
          f"{100 * seen / max(n_frames, 1):.1f}% of them"
          + (f" at {n_frames / t_est:.1f} frames/s (render {n_frames / max(t_render, 1e-9):.1f} frames/s)"
             if t_est else " (estimator keypoints from the cache)")
          + f"; calibrated groups: {', '.join(f'{g} ({c.frames} frames)' for g, c in cal_info.items()) or 'none'}")
    out = {}
    for cname, clf in clfs.items():
        results = {"rendered keypoints": evaluate_renders(clf, rendered),
                   "estimator keypoints": evaluate_renders(clf, estimated),
                   "rendered, body found": evaluate_renders(clf, found_r),
                   "estimator, body found": evaluate_renders(clf, found_e)}
        if cal_info:
            results["estimator, calibrated"] = evaluate_renders(clf, calibrated)
        if imitated:   # the noise model's own check: does imitating the estimator reproduce the gap?
            results["imitated estimator"] = evaluate_renders(clf, imitated)
        print(f"\nclassifier: {cname} ({clf.meta.get('trained_on', '?')})")
        print(f"{'keypoints':24s} {'macro-F1':>9s} {'accuracy':>9s} {'frames':>7s}")
        for name, ev in results.items():
            print(f"{name:24s} {ev.smoothed['macro_f1']:9.3f} {ev.smoothed['accuracy']:9.3f} {ev.frames:7d}")
        for name in ("rendered keypoints", "estimator keypoints"):
            ev = results[name]
            print(f"\nconfusion matrix, {name} (rows: true, columns: emitted):")
            print("  " + " ".join(f"{c[:6]:>6s}" for c in COMMANDS))
            for c, row in zip(COMMANDS, ev.confusion):
                if row.sum():
                    print("  " + " ".join(f"{v:6d}" for v in row) + f"  {c}")
        out[cname] = {k: v.to_dict() for k, v in results.items()}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
