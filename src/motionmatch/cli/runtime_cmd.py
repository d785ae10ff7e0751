"""``motionmatch build`` and ``motionmatch run``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.cli.retarget_cmd import add_rig_option


def cmd_build(args: argparse.Namespace) -> int:
    from motionmatch.database import MotionDatabase, SearchWeights, schema_by_name
    from motionmatch.datasets import fit_skeletons, load_takes, one_skeleton, skeleton_groups

    arg.output_file(args.output, (".npz",), "database")
    progress = not args.quiet and sys.stderr.isatty()
    schema = schema_by_name(args.schema)
    if args.roles:
        from motionmatch.database.schema import load_roles

        schema = schema.with_roles(load_roles(args.roles))
    weights = SearchWeights.parse(args.weights, schema) if args.weights else None
    with arg.warnings_as_lines(args.prog):
        clips = load_takes(args.data, units=args.units, up=args.up, progress=progress)
        groups = skeleton_groups(fit_skeletons(clips)) if args.per_skeleton else [one_skeleton(clips)]
    outputs = [Path(args.output)] if len(groups) == 1 else \
        [Path(args.output).with_name(f"{Path(args.output).stem}_{k + 1}.npz") for k in range(len(groups))]
    built = []
    for group in groups:  # every database is built before any is written
        db = MotionDatabase.build(group, fps=args.fps, mirror_copies=args.mirror, schema=schema, progress=progress)
        if weights is not None:
            weights.apply(db)
        built.append(db)
    for db, out in zip(built, outputs):
        db.save(out)
        print(f"wrote {out}: {db.num_frames} frames ({db.valid.sum()} searchable) from {len(db.clip_names)} clips "
              f"at {db.fps:g} fps, {db.schema.dims}-D '{db.schema.name}' features"
              + (f", skeleton {db.skeleton.names[1]!r}-rooted with {db.skeleton.num_joints - 1} joints"
                 if len(built) > 1 else "")
              + f"; tags: {', '.join(db.tags)}"
              + (f"; weights: {weights.describe()}" if weights is not None else ""))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from motionmatch.cli.retarget_cmd import rig_from_args, write_played
    from motionmatch.control.script import load_script
    from motionmatch.database import MotionDatabase, SearchWeights
    from motionmatch.io.motion_files import MOTION_SUFFIXES, check_writer
    from motionmatch.metrics.report import run_report
    from motionmatch.runtime.controller import ControllerSettings
    from motionmatch.runtime.offline import run_script

    out = arg.output_file(args.output, MOTION_SUFFIXES, "output")
    check_writer(args.output)
    arg.output_file(args.report, (".json",), "report")
    arg.preview_file(args.preview)  # its packages too, before the run
    script = load_script(args.input)
    rig = rig_from_args(args)
    sc = scene = None
    if args.scene:
        from motionmatch.environment.scenario import load_scenario

        sc = load_scenario(args.scene, agents_required=False)  # (a bad terrain: one line naming its field)
        scene = sc.scene()
    db = MotionDatabase.load(args.db)
    if args.weights:
        SearchWeights.parse(args.weights, db.schema).apply(db)
    if getattr(args, "body", None):
        from motionmatch.io.user_mesh import read_user_mesh

        read_user_mesh(getattr(args, "body", None), db.skeleton)  # a mesh that does not fit fails before the run
    settings = ControllerSettings(
        search_interval=args.search_interval, search_method=args.search_method,
        inertialization=args.inertialization, foot_locking=not args.no_foot_locking,
        trajectory_mode=args.trajectory,
    )
    progress = sys.stderr.isatty()
    rec = run_script(db, script, settings, fps=args.fps, progress=progress, name=out.stem, scene=scene)
    terrain = None if sc is None else sc.terrain
    write_played(out, rec.motion, rig, body=getattr(args, "body", None), terrain=terrain,
                 obstacles=() if sc is None else sc.obstacles)
    print(f"wrote {out}: {rec.motion.num_frames} frames at {args.fps:g} fps" + (f" on {args.rig}" if rig else ""))
    if args.report:
        from motionmatch._files import atomic_write

        report = run_report(rec, db, script, terrain=terrain)
        if args.scene:
            report["scene"] = args.scene
        with atomic_write(args.report, "w") as f:
            json.dump(report, f, indent=2)
        print(f"wrote {args.report}: foot skating {report['foot_skating_mps']:.3f} m/s "
              f"(database playback {report['playback_foot_skating_mps']:.3f}), response time "
              f"{report['response_time_s'] if report['response_time_s'] is not None else 'n/a'} s, "
              f"{report['update_ms_mean']:.2f} ms per update"
              + (f" (first-run compilation, {report['warm_up']['compile_s']:.1f} s in {report['warm_up']['frames']} "
                 "updates, left out)" if report["warm_up"]["frames"] else "")
              + (f"; on the ground: feet at contacts within {_metres(report['foot_ground_error_m'])} (p95), "
                 f"deepest {_metres(report['foot_penetration_m'])} below it" if terrain is not None else ""))
    if args.preview:
        from motionmatch.io.preview import render_preview

        render_preview(rec.motion, args.preview, desired_trajectory=rec.desired,
                       actual_trajectory=rec.motion.world_positions[:, 0], progress=progress, terrain=terrain)
        print(f"wrote {args.preview}")
    return 0


def _metres(v) -> str:
    return "n/a" if v is None else f"{v:.3f} m"


WEIGHTS_HELP = (
    "the search's loss: comma-separated name=value items, name 'responsiveness' (trajectory groups), "
    "'continuity' (pose groups) or a feature group; what is not named weighs 1, so "
    "'responsiveness=0.8,continuity=0.2' (or 'paper') is the paper's weighted loss (Eq. 13) and 'unit' "
    "the plain distance")


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser(
        "build", help="build a motion-matching database from BVH files or folders",
        description="Load BVH clips (folders recursively; tags from file names), resample them to one frame rate, "
        "optionally add mirrored copies, extract features and save a versioned .npz database. Each file's up axis "
        "and unit are found from the data (or --up/--units), a take whose feet are off the floor is put on the "
        "ground, takes implausible for a person are warned about, and takes of one rig with and without a ground "
        "root or extra leaf joints are brought to one skeleton (one warning line each).",
    )
    b.add_argument("data", nargs="+", metavar="DATA", help="BVH files or folders")
    b.add_argument("-o", "--output", required=True, metavar="DB.npz", help="database file to write")
    b.add_argument("--fps", type=arg.fps, default=60.0, help="frame rate of the database (default 60)")
    b.add_argument("--mirror", action="store_true", help="add a mirrored copy of every clip (tagged 'mirrored')")
    b.add_argument("--schema", default="classic",
                   help="feature schema: classic (27-D), classic-3d (33-D, for jump/creep), environment, "
                        "environment-heights (each with +ground: the ground's rise along the trajectory, from the "
                        "planted feet) or a .json file")
    b.add_argument("--weights", metavar="SPEC", help=WEIGHTS_HELP + " (default: the schema's group weights)")
    arg.add_bvh_options(b)
    b.add_argument("--roles", metavar="MAP.json",
                   help='humanoid roles to use instead of those found on the rig: a JSON object such as '
                   '{"left_foot": "CC_Base_L_ToeBase", "hips": "CC_Base_Hip"} (README: humanoid roles)')
    b.add_argument("--per-skeleton", action="store_true",
                   help="takes of different skeletons: one database per skeleton, DB_1.npz, DB_2.npz, ... "
                   "(default: refuse them, naming the first joint that differs)")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=cmd_build)

    r = sub.add_parser(
        "run", help="drive a character offline with a scripted input and write its animation",
        description="Play a character from DB.npz under the key presses or intents of SCRIPT.json, at a fixed "
        "frame rate, and write the animation as BVH (joint 0 is the character root). Offline, directions are "
        "world axes: W = +Z (forward), D = -X (right of a character facing +Z). Script format: "
        '{"duration": 20.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 5.0, "keys": ["w", "shift"]}, ...]}.',
    )
    r.add_argument("--db", required=True, metavar="DB.npz", help="database built with 'motionmatch build'")
    r.add_argument("--input", required=True, metavar="SCRIPT.json", help="timeline of keys or intents")
    r.add_argument("-o", "--output", required=True, metavar="OUT.bvh", help="animation to write (.bvh, or .glb: glTF with a skinned body)")
    r.add_argument("--body", metavar="MESH.glb", help="a glTF file (.glb/.gltf) whose skinned mesh (joints named as the skeleton's) replaces the generated mannequin in .glb/.fbx/.usd output")
    add_rig_option(r)
    r.add_argument("--report", metavar="REPORT.json", help="write metrics (foot skating, response time, ...)")
    r.add_argument("--preview", metavar="OUT.mp4|OUT.gif", help="render a stick-figure video with trajectories")
    r.add_argument("--scene", metavar="SCENE.json",
                   help="a scenario or follow scene file: the character walks on its \"terrain\" (feet on the "
                   "surface, slower uphill, a rise over 35 cm a wall) among its obstacles (avoided by the "
                   "environment-aware search); its agents are not played")
    r.add_argument("--fps", type=arg.fps, default=60.0, help="simulation and output frame rate (default 60)")
    r.add_argument("--search-interval", type=arg.seconds, default=0.1, help="seconds between searches (default 0.1)")
    r.add_argument("--search-method", choices=("box", "brute"), default="box")
    r.add_argument("--inertialization", choices=("quintic", "spring", "none"), default="quintic")
    r.add_argument("--trajectory", choices=("spring", "linear"), default="spring",
                   help="trajectory prediction: springs (default) or linear interpolation (ablation)")
    r.add_argument("--no-foot-locking", action="store_true", help="turn off foot locking IK")
    r.add_argument("--weights", metavar="SPEC", help=WEIGHTS_HELP + " (default: the weights the database was built with)")
    r.set_defaults(func=cmd_run)
