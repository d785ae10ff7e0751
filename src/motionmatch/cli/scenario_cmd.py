"""``motionmatch scenario``: run an environment scenario file and report what happened.

    motionmatch scenario SCENE.json --db DB.npz -o OUT.npz [--preview OUT.mp4] [--report REPORT.json]

Also runnable as ``python -m motionmatch.cli.scenario_cmd ...`` (same arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.cli.retarget_cmd import add_rig_option, rig_from_args, write_played
from motionmatch.errors import MotionMatchError

DESCRIPTION = """\
Run the characters of a scenario file (obstacles, agents, their inputs, duration: see
scenarios/README.md) with environment-aware motion matching and write their animation
(OUT.npz: per agent root positions, headings, database frames, body ellipses and local
poses), a top-down preview video and a JSON report (ms_per_search, diversity, error_m,
collision_time_s, collision_fraction, per-agent numbers). The database should carry body
ellipses (build it with '--schema environment', or 'environment-heights' for jumping and
crouching); any database works, ellipses are then computed from its poses.
"""

_ANIMATION_SUFFIXES = (".glb", ".fbx", ".usd", ".usda", ".usdc")  # every agent in one file (io.motion_files)


def _save_output(path: Path, world, rec, report: dict, tracks) -> None:
    import numpy as np

    from motionmatch._files import atomic_write

    arrays = {
        "names": np.array(rec.names),
        "fps": np.array(rec.fps),
        "root_positions": rec.root_positions.astype(np.float32),
        "root_yaws": rec.root_yaws.astype(np.float32),
        "frames": rec.frames,
        "searched": rec.searched,
        "desired": rec.desired,
        "ellipses": tracks.astype(np.float32),
        "obstacles_t0": world.scene.rows_at(0.0).astype(np.float32),
        "report": np.array(json.dumps(report)),
    }
    if rec.rotations is not None:
        arrays["rotations"] = rec.rotations
        arrays["translations"] = rec.translations
    with atomic_write(path, "wb") as f:
        np.savez_compressed(f, **arrays)


def cmd_scenario(args: argparse.Namespace) -> int:
    from motionmatch._jit import compile_intervals
    from motionmatch.database import MotionDatabase
    from motionmatch.environment import load_scenario
    from motionmatch.io.motion_files import check_writer
    from motionmatch.metrics.scenario import body_tracks, scenario_report
    from motionmatch.runtime.environment_matching import EnvironmentSettings
    from motionmatch.runtime.scenarios import run_scenario

    out = arg.output_file(args.output, (".npz", *_ANIMATION_SUFFIXES), "output")
    check_writer(out)
    animation = out.suffix.lower() in _ANIMATION_SUFFIXES
    if animation and args.no_poses:
        raise MotionMatchError(f"{out}: a {out.suffix} file shows the agents' poses; leave out --no-poses")
    arg.output_file(args.report, (".json",), "report")
    arg.preview_file(args.preview)
    sc = load_scenario(args.scene)
    if args.duration is not None:
        sc.duration = float(args.duration)
    if getattr(args, "rig", None) and not animation:
        raise MotionMatchError(f"--rig: {out.name} holds no animation; write a .glb, .bvh, .fbx or .usd file to play "
                               "the agents on a rig")
    rig = rig_from_args(args)
    db = MotionDatabase.load(args.db)
    if getattr(args, "body", None):
        from motionmatch.io.user_mesh import read_user_mesh

        read_user_mesh(getattr(args, "body", None), db.skeleton)  # a mesh that does not fit fails before the run
    search = dict(sc.search)
    if args.method:
        search["method"] = args.method
    settings = EnvironmentSettings.from_dicts(sc.penalty, search, sc.controller.get("controls"),
                                              enabled=not args.plain)
    progress = not args.quiet and sys.stderr.isatty()
    with compile_intervals() as warm:  # (a first run compiles: kept apart from the search times)
        world, rec = run_scenario(db, sc, settings=settings, progress=progress,
                                  record_poses=False if args.no_poses else (True if animation else None))
    report = scenario_report(world, rec, sc, compiles=warm.intervals)
    tracks = body_tracks(world, rec)
    if animation:  # every agent skinned and animated (.glb: the obstacles as meshes)
        write_played(out, [(n, rec.motion(i, db.skeleton)) for i, n in enumerate(rec.names)], rig,
                     obstacles=sc.obstacles, body=getattr(args, "body", None), terrain=sc.terrain)
    else:
        _save_output(out, world, rec, report, tracks)
    print(f"wrote {out}: {len(rec.names)} agent(s), {rec.frames.shape[1]} frames at {rec.fps:g} fps")
    wu = report["warm_up"]
    warm_note = (f" (median {report['ms_per_search_median']:.3f}; warm-up left out: {wu['searches']} searches "
                 f"during {wu['compile_s']:.1f} s of first-run compilation)" if wu["searches"] else "")
    print(f"  {report['ms_per_search']:.3f} ms per search{warm_note}, diversity {report['diversity']}, "
          f"error {report['error_m'] if report['error_m'] is not None else 'n/a'} m, collision time "
          f"{report['collision_time_s']:.3f} s, collision fraction {report['collision_fraction']:.3f}, "
          f"{report['realtime_factor']:.1f}x real time")
    torso = report.get("torso_rotation_deg")
    if torso and torso["mean"] is not None:
        print(f"  torso rotation (shoulders against the direction of travel, moving frames): mean "
              f"{torso['mean']:.1f}, p90 {torso['p90']:.1f}, max {torso['max']:.1f} degrees")
    if args.report:
        from motionmatch._files import atomic_write

        with atomic_write(args.report, "w") as f:
            json.dump(report, f, indent=2)
        print(f"wrote {args.report}")
    if args.preview:
        import numpy as np

        from motionmatch.environment.collision import body_distances
        from motionmatch.environment.preview import render_scene

        scene = world.scene
        moving = scene.moving_ids.size > 0
        inside = np.zeros(tracks.shape[:2], dtype=bool)
        rows = (np.stack([scene.rows_at(f / rec.fps) for f in range(tracks.shape[1])]) if moving
                else scene.rows_at(0.0))
        for i in range(tracks.shape[0]):
            if len(scene):
                inside[i] = (body_distances(tracks[i], rows) < 0).any(axis=1)
        skel = None
        if rec.rotations is not None and len(rec.names) <= 16:
            skel = np.stack([rec.motion(i, db.skeleton).world_positions for i in range(len(rec.names))])
        render_scene(args.preview, scene.rows_at if moving else scene.rows_at(0.0), tracks, skeletons=skel,
                     parents=db.skeleton.parents, fps=rec.fps, paths=[a.path for a in world.agents],
                     inside=inside, title=sc.name, progress=progress, terrain=sc.terrain)
        print(f"wrote {args.preview}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenario", help="run an environment scenario (obstacles, agents) and report collisions",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", metavar="SCENE.json", help="scenario file (see scenarios/README.md)")
    add_rig_option(p)
    p.add_argument("--body", metavar="MESH.glb", help="a glTF file (.glb/.gltf) whose skinned mesh (joints named as the skeleton's) replaces the generated mannequin in .glb/.fbx/.usd output")
    p.add_argument("--db", required=True, metavar="DB.npz", help="database built with 'motionmatch build'")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="recorded run to write (.npz; or .glb: glTF of every agent skinned and animated, with the obstacles; .fbx, .usd: the agents)")
    p.add_argument("--report", metavar="REPORT.json", help="write the numbers as JSON")
    p.add_argument("--preview", metavar="OUT.mp4|OUT.gif", help="render a top-down video")
    p.add_argument("--method", choices=("coherent-approx", "linear", "plain"),
                   help="search method: coherent-approx (the paper's, approximate), linear (exact) or plain "
                        "(no environment); default: the scenario's, else coherent-approx")
    p.add_argument("--plain", action="store_true", help="ignore the environment (plain motion matching)")
    p.add_argument("--duration", type=arg.seconds, help="override the scenario's duration (s)")
    p.add_argument("--no-poses", action="store_true", help="do not record local poses (large crowds)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_scenario)


def main(argv: list[str] | None = None) -> int:
    from motionmatch.cli.main import main as motionmatch

    return motionmatch(["scenario", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
