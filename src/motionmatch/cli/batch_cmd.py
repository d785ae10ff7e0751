"""``motionmatch batch``: databases, GenMM sets and evaluation sweeps on Ray.

    motionmatch batch build DATA... -o DB.npz [--mirror] [--workers N | --address HOST:PORT]
    motionmatch batch genmm EXAMPLE.bvh... -o DIR --variants N [--seeds 0,5,9]
    motionmatch batch sweep SPEC.json -o DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from motionmatch.batch.cluster import import_ray
from motionmatch.cli import _common as arg
from motionmatch.errors import MotionMatchError

DESCRIPTION = """\
Run a large job as many small tasks on Ray (pip install 'motionmatch[ray]'): with no
--address Ray starts inside this command on this machine (--workers tasks at once,
default every core); --address HOST:PORT joins a running cluster ('ray start --head' on
one machine, 'ray start --address HOST:PORT' on the others; motionmatch installed and
the input files at the same paths on every node).

Every job is resumable: a cell (a clip, an example and seed, a scenario/path x setting
x seed) whose outputs exist from an earlier run with the same inputs is skipped, so
running a stopped or partly failed job again computes only what is missing. Outputs are
written atomically as cells finish; a failed cell is reported with its error and the
job goes on (exit code 1 at the end). Each job writes a manifest (JSON: the inputs' and
outputs' SHA-256, versions, settings, timings).
"""

EPILOG = """\
examples:
  motionmatch batch build ../shared/data/lafan1-60fps --mirror -o lafan.npz --workers 2
  motionmatch batch build ../shared/data/lafan1-60fps --mirror -o lafan.npz --address 10.0.0.5:6379
  motionmatch batch genmm ../shared/data/genmm-examples/*.bvh -o variants/ --variants 8 --frames 300
  motionmatch batch sweep sweep.json -o results/
"""

SWEEP_HELP = """\
Run every scenario file and path file of SPEC.json x every named setting x every seed
through the World, one report per cell (DIR/cells/*.json), then DIR/cells.csv,
DIR/summary.csv (means over seeds per file and setting) and DIR/summary.png. SPEC.json:

  {"database": "lafan_env.npz",
   "scenarios": ["scenarios/doors-small.json"], "paths": ["paths/square.json"],
   "settings": {"approx": {"method": "coherent-approx"}, "exact": {"method": "linear"},
                "plain": {"method": "plain"}, "lhmm": {"k": 3, "levels": 3}},
   "seeds": [0, 1, 2], "duration": 20.0}

File names are relative to SPEC.json. Scenario settings: method, penalty, search,
controller; path settings: mode, k, levels, interval. Seeds place a scenario's crowd
groups, and start a path's character start_jitter_m (default 0) from the path's start.
"""


def _progress(prog: str, quiet: bool):
    """A progress callback for the jobs (done/total, rate, time left) and the bar it draws on."""
    bar = arg.Progress(prog, enabled=not quiet)

    def show(s) -> None:
        if s.phase != "running":
            bar.update(f"{s.phase} ({s.total - s.finished} of {s.total} cells to compute)", phase=True)
            return
        what = f"{s.finished}/{s.total} cells"
        if s.skipped:
            what += f" ({s.skipped} already done)"
        if s.failed:
            what += f", {s.failed} failed"
        if s.rate > 0:
            what += f", {s.rate:.2f} cells/s"
        bar.update(what, done=s.finished / s.total if s.total else 1.0,
                   eta_s=s.eta_s if s.rate > 0 else None)

    return bar, show


def _finish(args: argparse.Namespace, result) -> int:
    print(result.summary())
    for c in result.failed[:20]:
        print(f"{args.prog}: failed: {c.key}: {c.error}", file=sys.stderr)
    if len(result.failed) > 20:
        print(f"{args.prog}: ... and {len(result.failed) - 20} more (see {result.manifest})", file=sys.stderr)
    print(f"wrote {result.manifest}")
    if result.failed:
        print(f"{args.prog}: error: {len(result.failed)} cell(s) failed; run the same command again to retry "
              "only them", file=sys.stderr)
        return 1
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    import_ray()  # first: without Ray nothing can run
    from motionmatch.batch import build

    arg.output_file(args.output, (".npz",), "database")
    bar, show = _progress(args.prog, args.quiet)
    with bar:
        result = build(args.data, args.output, fps=args.fps, mirror_copies=args.mirror, schema=args.schema,
                       units=args.units, up=args.up, address=args.address, workers=args.workers, progress=show)
    code = _finish(args, result)
    if not result.failed:
        import json

        info = json.loads(result.manifest.read_text(encoding="utf-8")).get("database", {})
        if info:
            print(f"wrote {args.output}: {info['frames']} frames ({info['searchable']} searchable) from "
                  f"{info['clips']} clips at {args.fps:g} fps")
        else:
            print(f"{args.output}: up to date")
    return code


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(t) for t in text.replace(";", ",").split(",") if t.strip()]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 0 like 0,1,7, got {text!r}")
    return seeds


def cmd_genmm(args: argparse.Namespace) -> int:
    import_ray()  # first: without Ray nothing can run
    from motionmatch.batch.genmm import genmm
    from motionmatch.genmm import GenMMConfig

    if args.output and Path(args.output).is_file():
        raise MotionMatchError(f"{args.output}: is a file; give a folder for the outputs")
    seeds = args.seeds if args.seeds is not None else list(range(args.seed, args.seed + args.variants))
    cfg = GenMMConfig(patch_size=args.patch_size, alpha=args.alpha, iterations=args.iterations,
                      noise_sigma=args.noise, fps=args.fps)
    bar, show = _progress(args.prog, args.quiet)
    with bar:
        result = genmm(args.examples, args.output, seeds=seeds, frames=args.frames, config=cfg, loop=args.loop,
                       units=args.units, up=args.up,
                       fmt=args.format, address=args.address, workers=args.workers, progress=show)
    print(f"wrote {Path(args.output) / 'metrics.csv'}")
    return _finish(args, result)


def cmd_sweep(args: argparse.Namespace) -> int:
    import_ray()  # first: without Ray nothing can run
    from motionmatch.batch.sweep import sweep
    from motionmatch.batch.sweep_spec import load_sweep

    spec = load_sweep(args.spec)  # checked before Ray starts
    if Path(args.output).is_file():
        raise MotionMatchError(f"{args.output}: is a file; give a folder for the outputs")
    bar, show = _progress(args.prog, args.quiet)
    with bar:
        result = sweep(spec, args.output, address=args.address, workers=args.workers, progress=show)
    out = Path(args.output)
    print(f"wrote {out / 'cells.csv'}, {out / 'summary.csv'}"
          + (f", {out / 'summary.png'}" if (out / "summary.png").exists() else " (no plot: pip install "
             "'motionmatch[viz]')"))
    return _finish(args, result)


def _address(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT of a Ray cluster's head, got {text!r}")
    return text


def register(sub: argparse._SubParsersAction) -> None:
    from motionmatch.cli.genmm_cmd import _alpha, _fps  # one spelling of genmm's option types

    common = argparse.ArgumentParser(add_help=False)
    c = common.add_argument_group("Ray")
    where = c.add_mutually_exclusive_group()
    where.add_argument("--address", type=_address, metavar="HOST:PORT",
                       help="join the Ray cluster whose head is at HOST:PORT (default: start Ray in this command)")
    where.add_argument("--workers", type=arg.int_range(1, 1024), metavar="N",
                       help="tasks at once with the embedded Ray (default: every core)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress")

    p = sub.add_parser("batch", help="databases, GenMM sets and evaluation sweeps as parallel jobs on Ray",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    jobs = p.add_subparsers(dest="job", metavar="JOB")

    b = jobs.add_parser("build", parents=[common], help="build a database, one task per clip",
                        description="Build the database 'motionmatch build' builds (the same arrays), one Ray task "
                        "per clip; finished clips are kept in DB.npz.parts/ so that a rerun computes only missing "
                        "or changed ones; DB.manifest.json lists inputs, outputs and timings.")
    b.add_argument("data", nargs="+", metavar="DATA", help="BVH files or folders")
    b.add_argument("-o", "--output", required=True, metavar="DB.npz", help="database file to write")
    b.add_argument("--fps", type=arg.fps, default=60.0, help="frame rate of the database (default 60)")
    b.add_argument("--mirror", action="store_true", help="add a mirrored copy of every clip (tagged 'mirrored')")
    b.add_argument("--schema", default="classic",
                   help="feature schema: classic (27-D), classic-3d (33-D, for jump/creep), environment, "
                        "environment-heights (each with +ground: the ground's rise along the trajectory, from the "
                        "planted feet) or a .json file")
    arg.add_bvh_options(b)
    b.set_defaults(func=cmd_build)

    g = jobs.add_parser("genmm", parents=[common], help="GenMM variants of many examples, one task per (example, seed)",
                        description="Synthesize --variants motions from every example (seeds S..S+N-1, or --seeds), "
                        "each as 'motionmatch genmm EXAMPLE --seed S' would: DIR/<example>/<example>_seed<S>.bvh, "
                        "its metrics row beside it (.json), DIR/metrics.csv (coverage, global and local patch "
                        "distance, synthesis time per output) and DIR/manifest.json.")
    g.add_argument("examples", nargs="+", metavar="EXAMPLE.bvh", help="example clips, each synthesized on its own")
    arg.add_bvh_options(g)
    g.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write into")
    g.add_argument("--variants", type=arg.int_range(1, 100_000), default=1, metavar="N",
                   help="variants per example (default 1)")
    g.add_argument("--seed", type=arg.int_range(0), default=0, metavar="S", help="first seed (default 0)")
    g.add_argument("--seeds", type=_seeds, metavar="S1,S2,...", help="these seeds instead of --seed/--variants")
    g.add_argument("--frames", type=arg.frames, metavar="N", help="output frames (default: twice the example's)")
    g.add_argument("--fps", type=_fps, default=30.0, metavar="F", help="synthesis and output rate (default 30)")
    g.add_argument("--patch-size", type=arg.int_range(1, 1000), default=11, metavar="P", help="frames per patch (11)")
    g.add_argument("--alpha", type=_alpha, default=0.01, help="completeness knob (0.01; 'none' disables)")
    g.add_argument("--iterations", type=arg.int_range(1, 1000), default=3, help="iterations per stage (3)")
    g.add_argument("--noise", type=arg.non_negative, default=1.0, metavar="SIGMA", help="initial noise (1)")
    g.add_argument("--loop", action="store_true", help="endless loops")
    g.add_argument("--format", choices=("bvh", "glb"), default="bvh", help="output format (default bvh)")
    g.set_defaults(func=cmd_genmm)

    s = jobs.add_parser("sweep", parents=[common], help="scenarios/paths x settings x seeds through the World",
                        description=SWEEP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("spec", metavar="SPEC.json", help="the sweep file")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write into")
    s.set_defaults(func=cmd_sweep)
    p.set_defaults(func=arg.missing_command(p, jobs))
