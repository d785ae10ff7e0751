"""``motionmatch follow`` (path following) and ``motionmatch train-direction-net``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.cli.retarget_cmd import add_rig_option, rig_from_args, write_played
from motionmatch.errors import MotionMatchError

FOLLOW_HELP = """\
Make a character follow a drawn, timed path: {"points": [[t, x, z], ...]} (seconds, metres
on the ground, Y up; or a CSV with columns t, x, z), at the speed it was drawn, with
long-horizon motion matching LHMM(k, l) and revised future queries. The path is resampled
(--rate Hz of drawing time; world time = drawing time / --scale: 1.0 for world seconds,
0.2 for a path drawn with a mouse on screen), smoothed, and followed from the character
(--mode local) or where it was drawn after walking to its start (--mode global). Give
--path several times for several characters at once (OUT.bvh becomes OUT_0.bvh, ...).

--scene SCENE.json takes the obstacles (static and moving) of a scenario file: every LHMM
step is searched with the obstacle penalties, so the character plans ahead along the path
and around the obstacles; --no-avoid follows the same path blind to them. Either way the
report scores the run against the scene (collision_fraction, collision_time_s, collisions,
min_clearance_m), as 'motionmatch scenario' does. Obstacles are in world coordinates: use
--mode global, or --start at the path's first point, so the path stays where it was drawn.

A path file with "control": "drawn" is a drawing followed as the responsive motion-matching
paper has it instead: {"control": "drawn", "points": [[x, z], ...], "loop": null, "run":
false, "speed": null, "run_speed": null, "duration": null}: the character walks straight
to the nearest point of the drawing, along it at a constant walking speed ("run": true:
the running speed; speeds in m/s, null: the database's), round again when the drawing is
closed or "loop" is true (straight back to its start), for "duration" seconds (null: the
approach and one round, two when it loops). Its report: start_to_entry_m,
first_reached_to_entry_m, mean_distance_m, speed_mps, speed_cv, laps. The LHMM options
do not apply to it.
"""


def _load_net(args, db):
    from motionmatch.control.direction_net import DirectionNet, require_torch, train_direction_net

    if args.net:
        return DirectionNet.load(args.net)
    if not args.train_net:
        from motionmatch.control.direction_cache import default_direction_net

        return default_direction_net(progress=sys.stderr.isatty())  # cached; trained from $MOTIONMATCH_DATA once
    require_torch()  # before saying that it trains
    print(f"training DirectionNet on the database's root trajectories ({args.net_epochs} epochs; "
          "save one with 'motionmatch train-direction-net' and pass --net to skip this)", file=sys.stderr)
    return train_direction_net(db, epochs=args.net_epochs, progress=sys.stderr.isatty())


def _output_names(out: Path, n: int) -> list[Path]:
    if n == 1:
        return [out]
    return [out.with_name(f"{out.stem}_{i}{out.suffix}") for i in range(n)]


def _controls(files: list[str]) -> list[str]:
    """Each path file's ``"control"`` (``"timed"`` or ``"drawn"``; CSV files are timed)."""
    from motionmatch._limits import MAX_JSON_BYTES, loads_json, read_bytes
    from motionmatch.control.path import PathError
    from motionmatch.control.path_steering import file_control

    out = []
    for f in files:
        if Path(f).suffix.lower() == ".csv":
            out.append("timed")
            continue
        obj = loads_json(read_bytes(Path(f), "path", MAX_JSON_BYTES, error=PathError), f, error=PathError)
        try:
            out.append(file_control(obj))
        except PathError as e:
            raise PathError(f"{f}: {e}") from None
    return out


def _follow_drawn(args: argparse.Namespace) -> int:
    """``motionmatch follow`` on ``"control": "drawn"`` files (see FOLLOW_HELP)."""
    from motionmatch._files import atomic_write
    from motionmatch.control.path_steering import load_drawing
    from motionmatch.database import MotionDatabase
    from motionmatch.io.motion_files import MOTION_SUFFIXES, check_writer, write_motion
    from motionmatch.metrics.drawn import drawn_report
    from motionmatch.runtime.drawn import run_drawing

    out = arg.output_file(args.output, MOTION_SUFFIXES, "output")
    check_writer(args.output)
    arg.output_file(args.report, (".json",), "report")
    if args.scene:
        raise MotionMatchError('--scene is for timed paths; a "control": "drawn" file is followed without obstacles')
    starts = args.start or []
    if starts and len(starts) not in (1, len(args.path)):
        raise MotionMatchError("give --start once, or once per --path")
    files = [load_drawing(p) for p in args.path]
    db = MotionDatabase.load(args.db)
    reports = []
    for i, (f, name) in enumerate(zip(files, _output_names(out, len(files)))):
        start = starts[i if len(starts) > 1 else 0] if starts else (0.0, 0.0)
        rec, src = run_drawing(db, f, start=start, fps=args.fps, progress=sys.stderr.isatty(), name=name.stem)
        write_motion(name, rec.motion, body=getattr(args, "body", None))
        r = drawn_report(rec, src, args.fps)
        reports.append(r)
        print(f"wrote {name}: {rec.motion.num_frames} frames at {args.fps:g} fps; drawing reached "
              f"{r['first_reached_to_entry_m']} m from its nearest point, mean distance {r['mean_distance_m']} m, "
              f"{r['speed_mps']} m/s, {r['laps']} round(s), {r['phase']}")
    if args.report:
        doc = dict(reports[0]) if len(reports) == 1 else {"characters": reports}
        with atomic_write(args.report, "w") as fh:
            json.dump(doc, fh, indent=2)
        print(f"wrote {args.report}")
    return 0


def cmd_follow(args: argparse.Namespace) -> int:
    from motionmatch.control.path import load_path
    from motionmatch.control.revision import RevisionSettings

    controls = _controls(args.path)
    if "drawn" in controls:
        if set(controls) != {"drawn"}:
            raise MotionMatchError('give either timed paths or "control": "drawn" files in one run, not both')
        return _follow_drawn(args)
    from motionmatch.database import MotionDatabase
    from motionmatch.io.motion_files import MOTION_SUFFIXES, check_writer
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower, run_followers

    out = arg.output_file(args.output, MOTION_SUFFIXES, "output")
    check_writer(args.output)
    arg.output_file(args.report, (".json",), "report")
    arg.preview_file(args.preview)
    arg.output_file(args.plot, (".png",), "plot")
    starts = args.start or []
    if starts and len(starts) not in (1, len(args.path)):
        raise MotionMatchError("give --start once, or once per --path")
    if args.no_avoid and not args.scene:
        raise MotionMatchError("--no-avoid needs --scene (the obstacles to be blind to)")
    smooth = not (args.no_smoothing or args.raw)
    paths = [load_path(p, rate=args.rate, scale=args.scale, smooth=smooth) for p in args.path]
    scene = sc = matcher = env = None
    if args.scene:
        from motionmatch.environment import load_scenario

        sc = load_scenario(args.scene, agents_required=False)
        scene = sc.scene()
    common = dict(alpha=args.alpha, beta=args.beta, v_max=args.v_max, turn_accel=args.turn_accel,
                  brake_accel=args.brake_accel, facing=args.facing,
                  joystick_deg=args.joystick_deg, corner_deg=args.corner_deg, corner_advance=args.corner_advance)
    if args.raw:
        rev = RevisionSettings.raw(**common)
    else:
        rev = RevisionSettings(desired=args.desired, speed_limit=not args.no_speed_limit,
                               turn_limit=not args.no_turn_limit,
                               sharp_corners=args.corners and not args.no_corners, **common)
    settings = FollowSettings(mode=args.mode, k=args.k, levels=args.levels, interval=args.interval, revision=rev,
                              hysteresis=args.hysteresis, tags=args.tags,
                              revise_every_frame=args.revise_every_frame,
                              **({"net_feedback": args.net_feedback} if args.net_feedback else {}))
    rig = rig_from_args(args)
    db = MotionDatabase.load(args.db)
    if getattr(args, "body", None):
        from motionmatch.io.user_mesh import read_user_mesh

        read_user_mesh(args.body, db.skeleton)  # a mesh that does not fit fails before the run
    if args.tags:
        try:
            db.mask(args.tags)
        except MotionMatchError as e:
            raise MotionMatchError(f"--tags: {e}") from None
    if sc is not None and not args.no_avoid:
        from motionmatch.runtime.environment_matching import EnvironmentMatcher, EnvironmentSettings

        env = EnvironmentSettings.from_dicts(sc.penalty, sc.search)
        matcher = EnvironmentMatcher(db)
    net = _load_net(args, db) if args.facing == "net" else None
    names = _output_names(out, len(paths))
    from motionmatch.runtime.world import World

    # every character in one world (independent of each other), among the scene's obstacles
    avoid = scene is not None and not args.no_avoid and len(scene) > 0
    world = World(db, scene if avoid or (scene is not None and scene.terrain is not None) else None, matcher=matcher, environment=avoid, agents_as_obstacles=False,
                  stagger=False, record_poses=False, fps=args.fps)
    followers = []
    for i, p in enumerate(paths):
        pos = None
        if starts:
            x, z = starts[i if len(starts) > 1 else 0]
            pos = (x, 0.0, z)
        followers.append(PathFollower(db, p, settings, position=pos, facing_net=net, name=names[i].stem,
                                      scene=None if args.no_avoid else scene, environment=matcher,
                                      environment_settings=env, world=world))
    records = run_followers(followers, fps=args.fps, progress=sys.stderr.isatty())
    reports = []
    for name, rec in zip(names, records):
        write_played(name, rec.motion, rig, body=getattr(args, "body", None),
                     terrain=sc.terrain if sc is not None else None)
        r = follow_report(rec, scene, db)
        reports.append(r)
        status = "completed" if r["completed"] else "NOT completed"
        print(f"wrote {name}: {rec.motion.num_frames} frames at {args.fps:g} fps; {status}, mean distance "
              f"{r['mean_distance_m']:.3f} m, {r['knn_calls_per_match']:.1f} k-NN searches and "
              f"{r['ms_per_match']:.2f} ms per match")
        if scene is not None:
            print(f"  {'blind to' if args.no_avoid else 'avoiding'} {len(scene)} obstacle(s): collision "
                  f"fraction {r['collision_fraction']:.3f}, {r['collisions']} collision(s), min clearance "
                  f"{r['min_clearance_m']:.3f} m")
    if args.report:
        from motionmatch._files import atomic_write

        doc = dict(reports[0]) if len(reports) == 1 else {"characters": reports}
        doc["settings"] = {"mode": args.mode, "k": args.k, "levels": args.levels, "facing": args.facing,
                           **({"net_feedback": settings.net_feedback} if args.facing == "net" else {}),
                           "v_max_mps": followers[0].v_max, "interval_s": args.interval,
                           "smoothing": smooth, "desired": rev.desired, "speed_limit": rev.speed_limit,
                           "sharp_corners": rev.sharp_corners, "scene": args.scene,
                           "avoid": bool(args.scene) and not args.no_avoid}
        with atomic_write(args.report, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"wrote {args.report}")
    if args.plot:
        from motionmatch.io.preview import plot_trajectories

        plot_trajectories(args.plot, {n.stem: r.root for n, r in zip(names, records)},
                          paths={f"path {i}": r.path.input_points for i, r in enumerate(records)},
                          title="path following (top view)")
        print(f"wrote {args.plot}")
    if args.preview:
        from motionmatch.io.preview import render_preview

        rec = records[0]
        render_preview(rec.motion, args.preview, desired_trajectory=rec.desired, actual_trajectory=rec.root,
                       progress=sys.stderr.isatty(), title=f"LHMM({args.k}, {args.levels}), {args.mode}",
                       terrain=sc.terrain if sc is not None else None)
        print(f"wrote {args.preview}")
    return 0


def cmd_train_net(args: argparse.Namespace) -> int:
    from motionmatch.control.direction_net import (
        DirectionNetConfig,
        facing_errors,
        require_torch,
        tracks_from_database,
        train_direction_net,
    )
    from motionmatch.database import MotionDatabase

    arg.output_file(args.output, (".npz",), "network")
    if bool(args.db) == bool(args.data):
        raise MotionMatchError("give --db DB.npz or --data FOLDER (BVH clips), not both")
    require_torch()  # before the database is built
    if args.db:
        db = MotionDatabase.load(args.db)
    else:
        from motionmatch.datasets import load_takes, one_skeleton

        print(f"building a mirrored database from {args.data}", file=sys.stderr)
        db = MotionDatabase.build(one_skeleton(load_takes([Path(args.data)], units=args.units, up=args.up)),
                                  mirror_copies=True)
    config = DirectionNetConfig(hidden=args.hidden, feedback=not args.no_feedback)
    net = train_direction_net(db, config=config, epochs=args.epochs,
                              seed=args.seed, tags=args.tags, holdout=args.holdout, progress=sys.stderr.isatty())
    net.save(args.output)
    print(f"wrote {args.output}: DirectionNet ({args.hidden} GRU units), L1 loss {net.history[-1]:.4f} "
          f"after {args.epochs} epochs")
    if args.holdout:
        test = tracks_from_database(db, args.tags, holdout=args.holdout, heldout=True)
        if test:
            e = facing_errors(net, test)
            print(f"held-out clips ({args.holdout}), facing 1/3, 2/3, 1 s ahead, mean error: DirectionNet "
                  f"{e['net_deg']:.1f} deg, path tangent {e['tangent_deg']:.1f} deg, facing kept "
                  f"{e['held_deg']:.1f} deg ({e['samples']} samples)")
    return 0


EPOCHS = arg.int_range(1, 100_000)


def _xz(text: str) -> tuple[float, float]:
    try:
        x, z = (arg.finite(v) for v in text.replace(",", " ").split())
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected 'X Z' or 'X,Z' in metres, got {text!r}") from None
    return x, z


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("follow", help="make a character follow a drawn, timed path (LHMM), or a drawing (\"control\": \"drawn\")",
                       description=FOLLOW_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("--db", required=True, metavar="DB.npz", help="database built with 'motionmatch build'")
    f.add_argument("--path", required=True, action="append", metavar="PATH.json",
                   help="the path (.json or .csv); repeat for several characters")
    f.add_argument("-o", "--output", required=True, metavar="OUT.bvh", help="animation to write (.bvh, or .glb: glTF with a skinned body)")
    add_rig_option(f)
    f.add_argument("--body", metavar="MESH.glb", help="a glTF file (.glb/.gltf) whose skinned mesh (joints named as the skeleton's) replaces the generated mannequin in .glb/.fbx/.usd output")
    f.add_argument("--mode", choices=("local", "global"), default="local",
                   help="local: the path starts at the character; global: walk to where it was drawn first")
    f.add_argument("--start", type=_xz, action="append", metavar="X,Z",
                   help="where the character starts (m; default the origin); once, or once per --path")
    f.add_argument("--k", type=arg.int_range(1, 100), default=3, help="LHMM candidates per level (default 3)")
    f.add_argument("--levels", type=arg.int_range(1, 10), default=3,
                   help="LHMM levels (default 3; 1 = plain motion matching)")
    f.add_argument("--interval", type=arg.seconds, default=1 / 6, help="seconds between matches (default 1/6)")
    f.add_argument("--hysteresis", action="store_true",
                   help="switch only when clearly better than continuing the clip playing now")
    f.add_argument("--facing", choices=("tangent", "joystick", "net"), default="tangent",
                   help="facing directions: path tangent, tangent + joystick angle, or DirectionNet")
    f.add_argument("--joystick-deg", type=arg.float_range(-180, 180), default=0.0,
                   help="joystick facing offset in degrees (positive: to the right); a path file's "
                   '"joystick": [[t, deg], ...] timeline is added')
    f.add_argument("--net", metavar="NET.npz", help="trained DirectionNet (default: one trained on this machine on first use "
                   "from $MOTIONMATCH_DATA/lafan1-60fps, then cached; needs PyTorch the first time)")
    f.add_argument("--train-net", action="store_true", help="train a DirectionNet on DB.npz now instead "
                   "(needs PyTorch: pip install 'motionmatch[net]')")
    f.add_argument("--net-epochs", type=EPOCHS, default=10, help="epochs when training DirectionNet here")
    f.add_argument("--net-feedback", choices=("character", "plan"),
                   help="the past facings DirectionNet reads: the character's ('character', the default) or those "
                   "it planned itself ('plan')")
    f.add_argument("--v-max", type=arg.positive, help="speed limit in m/s (default: from the database's speeds)")
    f.add_argument("--turn-accel", type=arg.positive, help="turn limit: the sideways acceleration (m/s^2) the "
                   "character runs a turn at, at most (default: the database's 90th percentile)")
    f.add_argument("--brake-accel", type=arg.positive, help="turn limit: how hard (m/s^2) the character slows "
                   "down before a tight turn and speeds up after it (default: the database's 90th percentile)")
    f.add_argument("--no-turn-limit", action="store_true", help="ablation: do not slow down for tight turns")
    f.add_argument("--revise-every-frame", action="store_true",
                   help="revise the query on every frame instead of once per match (the paper)")
    f.add_argument("--rate", type=arg.fps, help="resampling rate in Hz of drawing time (default the file's, else 150)")
    f.add_argument("--scale", type=arg.float_range(0.001, 1000),
                   help="drawing-speed factor: world time = drawing time / scale (default the file's, else 1.0)")
    f.add_argument("--desired", choices=("window", "current", "nearest"), default="window",
                   help="desired position: windowed nearest (default), current-time point, or nearest point")
    f.add_argument("--alpha", type=arg.non_negative, default=0.0,
                   help="desired-position window back, path frames (1/30 s)")
    f.add_argument("--beta", type=arg.non_negative, default=10.0,
                   help="desired-position window ahead, path frames (1/30 s)")
    f.add_argument("--corner-deg", type=arg.float_range(0, 180), default=80.0, help="sharp-corner angle (degrees)")
    f.add_argument("--corner-advance", type=arg.non_negative, default=2.0,
                   help="c: path frames a stuck desired position advances")
    f.add_argument("--no-smoothing", action="store_true", help="ablation: do not smooth the path")
    f.add_argument("--no-speed-limit", action="store_true", help="ablation: no speed limit on future points")
    f.add_argument("--corners", action="store_true", help="the paper's sharp-corner modification (off by default: "
                   "on paths drawn by hand it pulled the character off the drawing, and helped on no path)")
    f.add_argument("--no-corners", action="store_true", help="no sharp-corner modification (the default)")
    f.add_argument("--raw", action="store_true", help="ablation: the raw future query (none of the revisions)")
    f.add_argument("--tags", help="tag query of the frames to match (default: locomotion, '!dance & !creep & !jump')")
    f.add_argument("--scene", metavar="SCENE.json",
                   help="a scenario file whose obstacles the character avoids while following (see above)")
    f.add_argument("--no-avoid", action="store_true",
                   help="with --scene: follow blind to the obstacles, still scored against them")
    f.add_argument("--fps", type=arg.fps, default=60.0, help="simulation and output frame rate (default 60)")
    f.add_argument("--report", metavar="REPORT.json",
                   help="write metrics: mean_distance_m, completed, knn_calls_per_match, ms_per_match, ...")
    f.add_argument("--plot", metavar="OUT.png", help="top view of the input path(s) and the root path(s)")
    f.add_argument("--preview", metavar="OUT.mp4|OUT.gif", help="stick-figure video (first character)")
    f.set_defaults(func=cmd_follow)

    t = sub.add_parser("train-direction-net", help="train DirectionNet (facing along paths) on a database; needs PyTorch",
                       description="Train DirectionNet, the GRU that predicts a character's facing along a path "
                       "from the path and the facings before (its own predictions fed back, as the paper's), on "
                       "the root trajectories of DB.npz (4-second windows, L1 loss, Adam), and save it as .npz for "
                       "'motionmatch follow --facing net --net NET.npz'. Deterministic for a --seed (one CPU thread). "
                       "Needs PyTorch: pip install 'motionmatch[net]'. The default network ('follow --facing net' "
                       "trains it on first use and caches it): --data $MOTIONMATCH_DATA/lafan1-60fps --holdout "
                       "subject4 --epochs 30 --seed 0.")
    t.add_argument("--db", metavar="DB.npz", help="database to learn from (or --data)")
    t.add_argument("--data", metavar="FOLDER", help="folder of BVH clips: a mirrored database is built from it "
                   "(the default network: $MOTIONMATCH_DATA/lafan1-60fps)")
    arg.add_bvh_options(t)
    t.add_argument("--holdout", metavar="TEXT", help="leave out the clips whose name contains TEXT (e.g. subject4) "
                   "and report the facing error on them against the path tangent's")
    t.add_argument("-o", "--output", required=True, metavar="NET.npz")
    t.add_argument("--epochs", type=EPOCHS, default=20, help="training epochs (default 20)")
    t.add_argument("--hidden", type=arg.int_range(1, 1024), default=30, help="GRU units (default 30)")
    t.add_argument("--no-feedback", action="store_true", help="the first format: no past facing fed back (the "
                   "facing enters only as the window's frame), for comparisons")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--tags", default="!dance & !creep & !jump", help="clips to learn from (tag query)")
    t.set_defaults(func=cmd_train_net)
