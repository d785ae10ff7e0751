"""``motionmatch pose``: human pose control (eval, run, record, train, render, live)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.errors import MotionMatchError

KEYPOINT_FILES = (".json", ".npz")
COMMAND_HELP = ("creep_forward, creep_left, creep_right, dance, jump, punch, run_forward, run_left, run_right, "
                "stand_still, walk_forward, walk_left, walk_right")


def _label(text: str) -> str:
    """A pose command (argparse type)."""
    from motionmatch.control.pose.labels import COMMANDS

    if text not in COMMANDS:
        raise argparse.ArgumentTypeError(f"unknown command {text!r}; use one of {COMMAND_HELP}")
    return text


def _video(text: str) -> str:
    """An existing video file (argparse type)."""
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such video file")
    return text


def _progress() -> bool:
    return sys.stderr.isatty()


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _check_data(data: str | None, config) -> Path:
    """The motion-capture root (``--data``, else ``$MOTIONMATCH_DATA`` or ../shared/data),
    checked to hold the folders ``config`` renders before anything is printed: a missing
    root or folder is a one-line error, not progress lines and then the error."""
    from motionmatch.control.pose.dataset import data_files
    from motionmatch.control.pose.default import resolve_root

    root = resolve_root(data)
    data_files(root, config.data)
    return root


def _classifier(spec: str, data: str | None, quick: bool = False):
    from motionmatch.control.pose.classify import load_classifier
    from motionmatch.control.pose.default import QUICK, TrainConfig, default_classifier

    if spec in ("improved", "best", "knn"):
        cfg = QUICK if quick else TrainConfig()
        root = _check_data(data, cfg)  # its cache is keyed by the data too
        _say(f"loading the default {spec} classifier (trained from the motion capture on first use; cached)")
        return default_classifier(spec, root=root, config=cfg, progress=_progress())
    return load_classifier(spec)


# ------------------------------------------------------------------------------- eval
def cmd_eval(args: argparse.Namespace) -> int:
    from motionmatch.control.pose import default as d
    from motionmatch.control.pose.evaluate import format_table, plot_confusion

    out = Path(args.out)
    t_start = time.perf_counter()
    cfg = d.QUICK if args.quick else d.TrainConfig()
    if args.seed:
        cfg = d.with_seed(cfg, args.seed)
    root = _check_data(args.data, cfg)
    _say("rendering the motion capture through the virtual camera ...")
    data = d.prepare(root, cfg, progress=_progress())
    _say(f"  {len(data.train)} training, {len(data.val)} validation and {len(data.test)} test renders, "
         f"{len(data.train_transitions)} + {len(data.val_transitions)} + {len(data.test_transitions)} two-part "
         f"performances ({data.seconds:.1f} s)")
    _say("training the kNN baseline and the improved classifier (settings chosen on validation, then refit) ...")
    t_train = time.perf_counter()
    knn, imp = d.train(data)
    t_train = time.perf_counter() - t_train
    d.cache_classifiers(knn, imp, root, cfg)  # pose run and the viewer use them from now on
    _say("evaluating on the held-out test clips and camera azimuths ...")
    ev = d.evaluate(data, knn, imp)
    out.mkdir(parents=True, exist_ok=True)
    pngs = {}
    for name, res in ev.results.items():
        title = (f"{name}: held-out clips, azimuths {', '.join(f'{a:g}' for a in cfg.data.test_azimuths)}; "
                 f"macro-F1 {res.smoothed['macro_f1']:.3f}")
        pngs[name] = str(plot_confusion(res.confusion, out / f"confusion_{name}.png", title))
    result = ev.to_dict()
    result["confusion_png"] = pngs
    result["config"] = cfg.to_dict()
    result["protocol"] = d.protocol(data, imp)
    result["seconds"] = {"prepare": round(data.seconds, 1), "train": round(t_train, 1),
                         "total": round(time.perf_counter() - t_start, 1)}
    from motionmatch._files import atomic_write

    with atomic_write(out / "pose_eval.json", "w") as f:
        json.dump(result, f, indent=1)
    if args.save_models:
        knn.save(out / "knn.npz")
        imp.save(out / "improved.npz")
    if args.json:
        slim = {k: ({kk: vv for kk, vv in v.items() if kk != "confusion"} if isinstance(v, dict) and "per_class" in v
                    else v) for k, v in result.items()}
        print(json.dumps(slim, indent=1))
        return 0
    counts = ev.counts
    print("scored frames per command (train / validation / test):")
    for c in counts["train"]:
        print(f"  {c:14s} {counts['train'][c]:7d} / {counts['val'][c]:6d} / {counts['test'][c]:6d}")
    print()
    pr = result["protocol"]
    res_commands = result["improved"]["commands"]
    print(f"validation protocol: {pr['summary']}")
    sv = pr.get("smoother_validation")
    if sv:
        print(f"  chosen on validation: stay {sv['stay']}, power {sv['power']}, margin {sv['margin']} (validation "
              f"macro-F1 {sv['macro_f1']:.3f}, latency median {sv['latency_median_s']} s, flicker "
              f"{sv['flicker_per_s']:.2f}/s)")
        if any(sv.get("bias", [])):
            print("  per-class log-offsets chosen on validation: " + ", ".join(
                f"{c} {b:+.1f}" for c, b in zip(res_commands, sv["bias"]) if b))
    print()
    print(format_table(ev.results))
    print()
    for name, res in ev.results.items():
        print(f"confusion matrix, {name} (rows: true, columns: emitted, order as above):")
        for row in res.confusion:
            print("  " + " ".join(f"{v:5d}" for v in row))
        lat = ev.latency[name]
        print(f"latency ({name}): median {lat['median_s']} s, mean {lat['mean_s']} s, p90 {lat['p90_s']} s, "
              f"{100 * lat['under_200ms']:.0f}% under 200 ms, {lat['misses']} missed of {lat['measured']} transitions")
        print(f"flicker ({name}): {res.flicker_per_s:.3f} changes/s on steady motion (raw labels "
              f"{res.flicker_raw_per_s:.3f})")
        print()
    print(f"wrote {', '.join(pngs.values())} and {out / 'pose_eval.json'} ({result['seconds']['total']:.0f} s)")
    return 0


# ------------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    from motionmatch.anim import save_bvh
    from motionmatch.control.pose.keypoints import load_keypoints
    from motionmatch.database import MotionDatabase
    from motionmatch.metrics.report import pose_run_report
    from motionmatch.runtime.pose_run import run_keypoints

    out = arg.output_file(args.output, (".bvh",), "output")
    arg.output_file(args.report, (".json",), "report")
    stream = load_keypoints(args.keypoints)
    if len(stream) < 2:
        raise MotionMatchError(f"{args.keypoints}: needs at least two frames")
    db = MotionDatabase.load(args.db)
    clf = _classifier(args.classifier, args.data)
    run = run_keypoints(db, stream, clf, fps=args.fps, progress=_progress(), name=out.stem)
    save_bvh(run.record.motion, out)
    segs = run.segments()
    print(f"wrote {out}: {run.record.motion.num_frames} frames at {args.fps:g} fps; commands: "
          + ", ".join(f"{s['command'] or '-'} {s['start_s']:.1f}-{s['end_s']:.1f}s" for s in segs[:12])
          + (" ..." if len(segs) > 12 else ""))
    if args.report:
        from motionmatch._files import atomic_write

        rep = pose_run_report(run, db)
        with atomic_write(args.report, "w") as f:
            json.dump(rep, f, indent=2)
        print(f"wrote {args.report}")
    return 0


# ------------------------------------------------------------------------------- record / train / render / live
def _source(args):
    from motionmatch.control.pose.sources import WebcamSource

    src = args.video if args.video is not None else args.camera
    return WebcamSource(src, args.model, args.model_path, args.seconds)


def cmd_record(args: argparse.Namespace) -> int:
    from motionmatch.control.pose.keypoints import save_keypoints
    from motionmatch.control.pose.sources import record

    default = f"{args.label}.json" if args.label else (Path(args.video).stem + ".json" if args.video else None)
    if default is None and not args.output:
        raise MotionMatchError("name the output: -o KEYPOINTS.json (or give --label, which names it LABEL.json)")
    out = arg.output_file(args.output or default, KEYPOINT_FILES, "recording")
    what = f"'{args.label}'" if args.label else "keypoints"
    if args.video:
        _say(f"reading {args.video} through the {args.model} pose model ...")
    else:
        _say(f"recording {args.seconds or 10:g} s of {what} from camera {args.camera} ... (perform now)")
    if args.video is None and args.seconds is None:
        args.seconds = 10.0
    with _source(args) as cam:
        stream = record(cam, args.seconds, args.label)
    if args.label:
        stream.meta["label"] = args.label
    stream.meta.update({"model": args.model, "source": str(args.video) if args.video else f"camera {args.camera}"})
    save_keypoints(stream, out)
    seen = float(stream.present()[:, :9].all(axis=1).mean()) if len(stream) else 0.0
    print(f"wrote {out}: {len(stream)} frames ({stream.fps:.1f} fps), a body in {100 * seen:.0f}% of them"
          + (f", labelled {args.label}" if args.label else ""))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    import numpy as np

    from motionmatch.control.pose.classify import KNNPoseClassifier, MLPPoseClassifier, resample_stream
    from motionmatch.control.pose.default import QUICK, TrainConfig
    from motionmatch.control.pose.keypoints import load_keypoints
    from motionmatch.control.pose.labels import COMMAND_INDEX
    from motionmatch.control.pose.normalize import normalize_stream

    arg.output_file(args.output, (".npz",), "model")
    cfg = QUICK if args.quick else TrainConfig()
    root = None if args.only_recordings else _check_data(args.data, cfg)
    dflt = TrainConfig()
    clf = KNNPoseClassifier() if args.kind == "knn" else MLPPoseClassifier(
        members=args.members or dflt.members, hidden=dflt.hidden, alpha=dflt.alpha, long=dflt.long,
        mirror_average=dflt.mirror_average, tree_weight=dflt.tree_weight, tree_iter=dflt.tree_iter)
    Xs, ys = [], []
    for path in args.recordings:
        s = load_keypoints(path)
        label = args.label or s.meta.get("label")
        if s.labels is None and not label:
            raise MotionMatchError(f"{path}: no labels (record with --label, or pass --label)")
        s = resample_stream(s, clf.rate)
        lab = s.labels if s.labels is not None and not args.label else np.full(len(s), label)
        bad = sorted({x for x in lab if x and x not in COMMAND_INDEX})
        if bad:
            raise MotionMatchError(f"{path}: unknown labels {bad}; use {COMMAND_HELP}")
        norm = normalize_stream(s)
        idx = np.flatnonzero((lab != "") & (np.arange(len(s)) >= clf.window - 1))
        if idx.size:
            Xs.append(clf.features(norm, idx))
            ys.append(np.array([COMMAND_INDEX[x] for x in lab[idx]]))
    if not args.only_recordings:
        from motionmatch.control.pose import default as d
        from motionmatch.control.pose.dataset import training_set

        _say("adding the rendered motion capture (pass --only-recordings to skip) ...")
        data = d.prepare(root, cfg, progress=_progress())
        renders = data.train + data.val + ([t.render for t in data.train_transitions] if args.kind != "knn" else [])
        cap = cfg.knn_max_per_class if args.kind == "knn" else cfg.mlp_max_per_class
        X, y = training_set(renders, clf.features, max_per_class=cap,
                            min_per_class=0 if args.kind == "knn" else cfg.mlp_min_per_class)
        Xs.append(X)
        ys.append(y)
    if not Xs:
        raise MotionMatchError("no training windows (recordings need at least one labelled window of "
                               f"{clf.window} frames)")
    X, y = np.concatenate(Xs), np.concatenate(ys)
    if len(np.unique(y)) < 2:
        raise MotionMatchError("the recordings hold one command only; record several (or drop "
                               "--only-recordings to add the rendered motion capture)")
    clf.fit(X, y)
    clf.meta = {"trained_on": [str(p) for p in args.recordings] + ([] if args.only_recordings else ["rendered"])}
    clf.save(args.output)
    print(f"wrote {args.output}: {args.kind} classifier from {len(y)} windows of "
          f"{len(np.unique(y))} commands")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from motionmatch.control.pose.keypoints import save_keypoints
    from motionmatch.control.pose.sources import render_bvh

    arg.output_file(args.output, KEYPOINT_FILES, "keypoint file")
    s = render_bvh(args.bvh, azimuth=args.azimuth, seed=args.seed, mirrored=args.mirror, units=args.units, up=args.up)
    save_keypoints(s, args.output)
    print(f"wrote {args.output}: {len(s)} frames of {len(s.names)} keypoints at {s.fps:.0f} fps "
          f"(azimuth {args.azimuth:g} deg)")
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    import numpy as np

    from motionmatch.control.pose.calibrate import CalibrationError, Calibrator
    from motionmatch.control.pose.classify import StreamingClassifier
    from motionmatch.control.pose.keypoints import KEYPOINTS, KeypointStream
    from motionmatch.database import MotionDatabase
    from motionmatch.runtime.pose_run import run_keypoints

    out = None
    if args.output:
        from motionmatch.io.motion_files import MOTION_SUFFIXES

        out = arg.output_file(args.output, MOTION_SUFFIXES, "output")
    db = MotionDatabase.load(args.db)
    clf = _classifier(args.classifier, args.data)
    sc = StreamingClassifier(clf, KEYPOINTS)
    cal = Calibrator(args.calibrate)
    calibration = None
    ts, ks, cs = [], [], []
    last = None
    t0 = time.perf_counter()
    n = 0
    _say(f"stand still, facing the camera, for {args.calibrate:g} s (calibration) ..." if args.calibrate > 0
         else "no calibration (--calibrate 0)")
    try:
        with _source(args) as cam:
            for t, kp, conf in cam:
                n += 1
                if calibration is None and args.calibrate > 0:
                    if cal.push(t, kp, conf):
                        calibration = cal.result()
                        _say(f"calibrated from {calibration.frames} frames (torso {calibration.scale:.0f} px, facing "
                             f"ratio {calibration.facing_ratio:.2f}); perform now" + ("" if args.video else
                                                                                      ", Ctrl+C stops"))
                    continue
                if calibration is not None:
                    kp = calibration.apply(kp)
                ts.append(t)
                ks.append(kp)
                cs.append(conf)
                cmd = sc.push(t, kp, conf)
                if cmd != last:
                    print(f"{t:8.2f} s  {cmd or '-'}", flush=True)
                    last = cmd
    except KeyboardInterrupt:
        pass
    except CalibrationError as e:
        raise MotionMatchError(f"{args.video or f'camera {args.camera}'}: {e}") from None
    wall = time.perf_counter() - t0
    if args.calibrate > 0 and calibration is None:
        raise MotionMatchError(f"{args.video or f'camera {args.camera}'}: it ended after {cal.elapsed:.1f} s, before "
                               f"the {args.calibrate:g} s of calibration")
    _say(f"{n} frames in {wall:.1f} s ({n / max(wall, 1e-9):.1f} frames/s through the estimator and classifier)")
    if out is None:
        return 0
    if len(ts) < 2:
        raise MotionMatchError("fewer than two frames after calibration: nothing to animate")
    from motionmatch.io.motion_files import write_motion

    stream = KeypointStream(np.asarray(ts), np.stack(ks), KEYPOINTS, np.stack(cs), True)
    run = run_keypoints(db, stream, clf, fps=args.fps, progress=_progress(), name=out.stem)
    write_motion(out, run.record.motion)
    segs = run.segments()
    print(f"wrote {out}: {run.record.motion.num_frames} frames at {args.fps:g} fps; commands: "
          + ", ".join(f"{s['command'] or '-'} {s['start_s']:.1f}-{s['end_s']:.1f}s" for s in segs[:12])
          + (" ..." if len(segs) > 12 else ""))
    return 0


def _camera_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--video", type=_video, metavar="FILE", help="read a video file instead of the camera")
    p.add_argument("--camera", default=0, type=arg.int_range(0), help="camera index (default 0)")
    p.add_argument("--model", default="full", choices=("lite", "full", "heavy"),
                   help="MediaPipe landmark model (only full is inside the mediapipe wheel; the others are "
                   "downloaded on first use)")
    p.add_argument("--model-path", metavar="FILE.task", help="a MediaPipe Tasks pose landmarker model file "
                   "(needed with mediapipe 1.x, which ships no pose model)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pose", help="human pose control: evaluate, run from keypoints, record, train",
        description="A performer's body keypoints (webcam, recorded file, or motion capture through a virtual camera), "
        "classified into 13 commands (" + COMMAND_HELP + "), drive the character. Directions are relative to the "
        "camera: forward = toward it, left/right = the performer's left/right as they face it.",
    )
    ps = p.add_subparsers(dest="pose_command", metavar="POSE")

    e = ps.add_parser("eval", help="train the default classifiers and evaluate them on held-out renders",
                      description="Render LAFAN1 / Bandai-Namco clips through a virtual camera, train the kNN baseline "
                      "and the improved classifier, and report per-class precision/recall/F1, confusion matrices "
                      "(PNG), latency and flicker on held-out clips filmed from held-out azimuths.")
    e.add_argument("--data", type=arg.existing_folder, metavar="DIR", help="motion-capture root (default $MOTIONMATCH_DATA or ../shared/data)")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON (the improved classifier under 'best')")
    e.add_argument("--out", type=arg.folder, default="pose-eval", metavar="DIR",
                   help="where to write the PNGs and pose_eval.json")
    e.add_argument("--quick", action="store_true", help="a small, fast configuration (for smoke tests)")
    e.add_argument("--seed", type=arg.int_range(0), default=0, help="random seed of cameras and training")
    e.add_argument("--save-models", action="store_true", help="also write knn.npz and improved.npz to --out")
    e.set_defaults(func=cmd_eval)

    r = ps.add_parser("run", help="drive a character offline with a recorded keypoint stream",
                      description="Classify a keypoint file (JSON/NPZ: times [T], keypoints [T,K,2|3], names [K]), "
                      "turn the commands into intents and play the character from DB.npz; write the animation as BVH.")
    r.add_argument("--db", required=True, metavar="DB.npz", help="database (build with --schema classic-3d for jump/creep)")
    r.add_argument("--keypoints", required=True, metavar="FILE", help="keypoint stream (.json or .npz)")
    r.add_argument("-o", "--output", required=True, metavar="OUT.bvh")
    r.add_argument("--report", metavar="R.json", help="write metrics and the command timeline")
    r.add_argument("--classifier", default="improved", metavar="improved|knn|MODEL.npz",
                   help="the default improved classifier, the kNN baseline, or a trained model file")
    r.add_argument("--data", type=arg.existing_folder, metavar="DIR", help="motion-capture root for training the default classifier")
    r.add_argument("--fps", type=arg.fps, default=60.0, help="simulation and output frame rate (default 60)")
    r.set_defaults(func=cmd_run)

    rec = ps.add_parser("record", help="keypoints of a video or the webcam to a file (needs motionmatch[webcam])",
                        description="Run the pose estimator (MediaPipe, the webcam extra) over a video file or the "
                        "camera and write the keypoints (13 COCO body keypoints, pixels, y down) as JSON or NPZ. "
                        "With --label every frame is labelled (training data for pose train).")
    rec.add_argument("--label", type=_label, help="the command performed: " + COMMAND_HELP)
    rec.add_argument("-o", "--output", metavar="FILE", help="output .json/.npz (default LABEL.json or VIDEO.json)")
    rec.add_argument("--seconds", type=arg.seconds, help="how long (default: 10 s of camera, the whole video)")
    _camera_args(rec)
    rec.set_defaults(func=cmd_record)

    t = ps.add_parser("train", help="train a classifier from labelled recordings (plus the rendered data)")
    t.add_argument("recordings", nargs="*", metavar="FILE", help="labelled keypoint files (pose record)")
    t.add_argument("-o", "--output", required=True, metavar="MODEL.npz")
    t.add_argument("--kind", choices=("improved", "knn"), default="improved")
    t.add_argument("--label", type=_label, help="label every frame of the recordings with this command")
    t.add_argument("--only-recordings", action="store_true", help="do not add the rendered motion capture")
    t.add_argument("--members", type=arg.int_range(1, 100),
                   help="networks in the improved classifier's ensemble (default: the "
                   "default classifier's)")
    t.add_argument("--data", type=arg.existing_folder, metavar="DIR", help="motion-capture root")
    t.add_argument("--quick", action="store_true", help="use the small rendered configuration")
    t.set_defaults(func=cmd_train)

    rn = ps.add_parser("render", help="keypoints of a BVH clip filmed by the virtual camera (a test stream)")
    rn.add_argument("bvh", metavar="CLIP.bvh")
    arg.add_bvh_options(rn)
    rn.add_argument("-o", "--output", required=True, metavar="FILE.json|.npz")
    rn.add_argument("--azimuth", type=arg.float_range(-360, 360), default=0.0,
                    help="camera azimuth from the performer's facing (deg)")
    rn.add_argument("--seed", type=arg.int_range(0), default=0)
    rn.add_argument("--mirror", action="store_true", help="film the mirror image")
    rn.set_defaults(func=cmd_render)

    lv = ps.add_parser("live", help="drive a character from the webcam or a video (needs motionmatch[webcam])",
                       description="Read the camera (or --video FILE) through the pose estimator, calibrate on the "
                       "first seconds (stand still, facing the camera), print each recognised command as it "
                       "changes, and with -o write the character driven by them (BVH or .glb). Left and right are "
                       "the performer's own, as in a mirror.")
    lv.add_argument("--db", required=True, metavar="DB.npz", help="database (build with --schema classic-3d for jump/creep)")
    lv.add_argument("-o", "--output", metavar="OUT.bvh|.glb", help="write the driven character when the input ends "
                    "(Ctrl+C ends the camera)")
    lv.add_argument("--classifier", default="improved", metavar="improved|knn|MODEL.npz")
    lv.add_argument("--calibrate", type=arg.float_range(0, 30), default=3.0, metavar="SECONDS",
                    help="stand-still calibration at the start (default 3; 0: none)")
    lv.add_argument("--seconds", type=arg.seconds, help="stop after this long")
    lv.add_argument("--fps", type=arg.fps, default=60.0, help="output frame rate (default 60)")
    lv.add_argument("--data", type=arg.existing_folder, metavar="DIR",
                    help="motion-capture root for training the default classifier")
    _camera_args(lv)
    lv.set_defaults(func=cmd_live)

    p.set_defaults(func=arg.missing_command(p, ps))
