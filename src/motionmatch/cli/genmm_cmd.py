"""``motionmatch genmm``: new motions from a few example clips (generative motion matching).

The main CLI calls :func:`register` with its ``add_subparsers()`` object; the parser
added here sets ``func``, a function of the parsed arguments returning the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.cli.retarget_cmd import add_rig_option, rig_from_args, write_played
from motionmatch.errors import MotionMatchError

__all__ = ["cmd_genmm", "register"]

DESCRIPTION = """\
Synthesize new motions that look like the example clips (GenMM: generative motion
matching; training-free, a fraction of a second per motion). Several examples of one
skeleton may be given: patches come from all of them and the output covers all of them.

Output BVH files have the first example's skeleton, joint names, channel layout and
units, and the frame time of the synthesis rate (--fps, default 30: examples at other
rates are resampled). With --samples K > 1, files OUT_0.bvh ... OUT_{K-1}.bvh are written
with seeds S, S+1, ...

Times: --frames counts output frames at --fps; keyframe times are seconds from the first
output frame (frame round(t * fps)). A keyframe BVH's own Frame Time is read as the
spacing of its keys unless --keyframe-times or --keyframe-spacing says otherwise (the
sparse keyframe example file says 1.0: one key per second).

--report writes JSON: coverage (0-1, share of the examples' 30-frame windows found in the
output with a mean frame distance under 2x the example's median frame-to-frame distance;
see 'motionmatch genmm-eval --help', which scores any files the same way), global_patch_distance,
local_patch_distance (means over the samples), set_diversity (when --samples > 1),
synthesis_s (seconds of synthesis per sample, no file I/O), per-sample values, the
settings and the metric definitions.

Frame rates: an example whose rate is outside 10-480 fps (a keyframe-like file with
Frame Time 1.0, or a wrong header) is warned about when it is resampled to --fps, and
refused when resampling would grow it to over 1,000 frames (a synthesis of minutes);
--fps native keeps the examples' frames as they are. A synthesis running for more than
a few seconds shows its progress (stage, share done, elapsed, time left) on stderr.
"""

EPILOG = """\
examples:
  motionmatch genmm salsa.bvh -o out.bvh --seed 3 --report report.json
  motionmatch genmm salsa.bvh -o out.bvh --samples 10 --frames 600
  motionmatch genmm crab.bvh -o crab_loop.bvh --loop --frames 300
  motionmatch genmm salsa.bvh -o kf.bvh --keyframes keys.bvh --keyframe-spacing 1.5
  motionmatch genmm salsa.bvh -o out.bvh --parts auto
  motionmatch genmm salsa.bvh -o out.bvh --parts "Hips,LeftUpLeg*,RightUpLeg*;Hips,Spine*"
  motionmatch genmm salsa.bvh -o done.bvh --complete walk.bvh --given "Hips,LeftUpLeg*,RightUpLeg*"
  motionmatch genmm walk_in_circle.bvh -o walk.bvh --locomotion
  motionmatch genmm --reassemble centaur.json -o centaur.bvh
  motionmatch genmm salsa.bvh -o out.bvh --device cuda      (needs: pip install 'motionmatch[gpu]')
"""


FRACTION = arg.number(float, lambda v: 0 < v < 1, "a number between 0 and 1")


def _alpha(text: str) -> float | None:
    if text.strip().lower() in ("none", "off", "0"):
        return None
    return arg.positive(text)


def _fps(text: str) -> float | None:
    if text.strip().lower() in ("native", "none", "example"):
        return None
    return arg.fps(text)


def _times(text: str) -> list[float]:
    try:
        return [arg.float_range(0, arg.MAX_SECONDS)(t) for t in text.replace(";", ",").split(",") if t.strip()]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected times in seconds (0 or more) like 1,2.5,4, got {text!r}") from None


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``genmm`` command to the main parser's subparsers; returns its parser."""
    p = sub.add_parser(
        "genmm",
        help="synthesize new motions from a few example clips (GenMM)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("examples", nargs="*", metavar="EXAMPLE.bvh", help="example clips (one skeleton)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.bvh", help="output file: .bvh, or .glb (glTF with a skinned body)")
    add_rig_option(p)
    p.add_argument("--body", metavar="MESH.glb", help="a glTF file (.glb/.gltf) whose skinned mesh (joints named as the skeleton's) replaces the generated mannequin in .glb/.fbx/.usd output")
    arg.add_bvh_options(p)
    g = p.add_argument_group("length and randomness")
    g.add_argument("--frames", type=arg.frames, metavar="N", help="output frames (default: twice the examples' frames)")
    g.add_argument("--duration", type=arg.seconds, metavar="SECONDS",
                   help="output length in seconds instead of --frames")
    g.add_argument("--seed", type=arg.int_range(0), default=0, metavar="S", help="random seed (default 0)")
    g.add_argument("--samples", type=arg.int_range(1, 1000), default=1, metavar="K",
                   help="number of outputs (seeds S..S+K-1)")
    g.add_argument("--fps", type=_fps, default=30.0, metavar="F",
                   help="synthesis and output frame rate (default 30; 'native' keeps the examples' rate)")
    s = p.add_argument_group("GenMM settings (defaults: the paper's)")
    s.add_argument("--patch-size", type=arg.int_range(1, 1000), default=11, metavar="P", help="frames per patch (11)")
    s.add_argument("--alpha", type=_alpha, default=0.01, help="completeness knob (0.01; 'none' disables)")
    s.add_argument("--iterations", type=arg.int_range(1, 1000), default=3,
                   help="match-and-blend iterations per stage (3)")
    s.add_argument("--pyramid-factor", type=FRACTION, default=0.75,
                   help="length ratio between stages (0.75)")
    s.add_argument("--coarse-ratio", type=arg.positive, default=5.0,
                   help="coarsest example length in patch sizes (5)")
    s.add_argument("--noise", type=arg.non_negative, default=10.0, metavar="SIGMA",
                   help="initial noise, std in feature units, wrapped into (-1, 1) (10: pure noise; 0: the examples)")
    s.add_argument("--root-weight", type=arg.positive, default=1.0,
                   help="weight of the root velocity/height features (1)")
    s.add_argument("--parts", default=None, metavar="SPEC",
                   help="skeleton-aware patches: 'auto' (trunk and limbs), a JSON file of joint lists, or "
                        "'A,B*;C,D*' (parts separated by ';', 'Name*' = joint and its subtree); default whole body")
    s.add_argument("--device", default="cpu", help="cpu (numpy, default), torch (PyTorch CPU), cuda or cuda:N")
    s.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                   help="precision of the distance computations (float32)")
    s.add_argument("--vote-sigma", type=arg.positive, default=None, metavar="FRAMES",
                   help="weight the patches' frames by a Gaussian of this many frames around each patch's centre "
                        "(default: average voting, the paper's)")
    s.add_argument("--threads", type=arg.int_range(1, 256), default=None, metavar="T",
                   help="CPU threads of a --device cpu synthesis (default: one per core); the output is the same "
                        "on any number")
    a = p.add_argument_group("applications")
    a.add_argument("--loop", action="store_true", help="an endless loop: the last frame is the first frame")
    a.add_argument("--loop-root", default="closed", choices=["closed", "travel"],
                   help="with --loop: close the root path too (default) or keep one cycle's travel")
    a.add_argument("--keyframes", metavar="FILE.bvh",
                   help="key poses (every frame a key) pinned in the output; joints matched by name")
    a.add_argument("--keyframe-times", type=_times, metavar="T1,T2,...", help="key times in seconds")
    a.add_argument("--keyframe-spacing", type=arg.seconds, metavar="SECONDS",
                   help="keys every SECONDS (default: the keyframe file's Frame Time)")
    a.add_argument("--complete", metavar="PARTIAL.bvh",
                   help="motion completion: keep --given joints of this clip exactly, synthesize the rest")
    a.add_argument("--given", metavar="JOINTS", help="with --complete: the given joints, comma-separated ('Name*' = subtree)")
    a.add_argument("--contacts", action="store_true", help="add foot-contact labels (feet detected or --feet)")
    a.add_argument("--feet", metavar="JOINTS", help="foot joints, comma-separated (default: detected)")
    a.add_argument("--fix-feet", action="store_true", help="plant feet during contacts with IK afterwards (implies --contacts)")
    a.add_argument("--locomotion", action="store_true",
                   help="random locomotion: contacts on, a random heading, feet planted afterwards")
    a.add_argument("--reassemble", metavar="SPEC.json",
                   help="a creature from parts of several skeletons: JSON {\"sources\": [{\"examples\": [...], "
                        "\"joints\": [...], \"rename\": {...}, \"scale\": 1.0}, ...]}; paths relative to the file")
    r = p.add_argument_group("report")
    r.add_argument("--report", metavar="REPORT.json", help="write metrics and timings as JSON")
    r.add_argument("--no-metrics", action="store_true", help="skip the metrics (quick for very long outputs)")
    r.add_argument("--quiet", action="store_true", help="print nothing but warnings and errors (no progress)")
    p.set_defaults(func=cmd_genmm)
    return p


def _out_paths(output: str, k: int) -> list[Path]:
    out = Path(output)
    if k == 1:
        return [out]
    return [out.with_name(f"{out.stem}_{i}{out.suffix or '.bvh'}") for i in range(k)]


def _sources(spec_path: str):
    """The sources of a reassembly file, checked: ``{"sources": [{"examples": [...], "joints": [...],
    "rename": {...}, "scale": 1.0}, ...]}`` (or the list alone); example paths relative to the file."""
    from motionmatch._limits import read_json
    from motionmatch.genmm import ReassemblySource

    path = Path(spec_path)
    spec = read_json(path, "reassembly", error=MotionMatchError)
    srcs = spec.get("sources") if isinstance(spec, dict) else spec
    out = []
    for s in srcs if isinstance(srcs, list) and srcs else [None]:
        ex = s.get("examples") if isinstance(s, dict) else None
        ex = [ex] if isinstance(ex, str) else ex
        scale = s.get("scale", 1.0) if isinstance(s, dict) else None
        if not (isinstance(ex, list) and ex and all(isinstance(e, str) for e in ex)
                and isinstance(s.get("joints"), list) and isinstance(s.get("rename", {}), dict)
                and isinstance(scale, (int, float)) and 0 < scale < float("inf")):
            raise MotionMatchError(f'{path}: a reassembly file holds {{"sources": [{{"examples": ["a.bvh"], '
                                   '"joints": ["Hips", "Spine*"], "rename": {}, "scale": 1.0}, ...]}')
        out.append(ReassemblySource([str(path.parent / e) for e in ex], s["joints"], s.get("rename", {}),
                                    float(scale)))
    return out


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse option combinations that cannot work, before any file is read."""
    if args.frames is not None and args.duration is not None:
        raise MotionMatchError("give --frames or --duration, not both")
    if not args.examples and not args.reassemble:
        raise MotionMatchError("give example BVH files (or --reassemble SPEC.json)")
    if args.examples and args.reassemble:
        raise MotionMatchError("--reassemble takes its examples from the JSON file; give no EXAMPLE.bvh with it")
    if args.complete and not args.given:
        raise MotionMatchError("--complete needs --given JOINTS (the joints of the partial clip to keep)")
    if args.complete and args.loop:
        raise MotionMatchError("--complete and --loop cannot be combined (the given clip fixes both ends)")
    from motionmatch.io.motion_files import MOTION_SUFFIXES, check_writer

    arg.output_file(args.output, MOTION_SUFFIXES, "output")
    check_writer(args.output)
    arg.output_file(args.report, (".json",), "report")


def _warnings_as_lines(prog: str):
    """Warnings as one line each (:func:`motionmatch.cli._common.warnings_as_lines`),
    every frame-rate warning (:class:`~motionmatch.genmm.FrameRateWarning`) shown."""
    from motionmatch.genmm import FrameRateWarning

    return arg.warnings_as_lines(prog, FrameRateWarning)


def _sample_progress(bar: arg.Progress, i: int, k: int) -> Callable:
    """A GenMM progress callback that shows sample ``i`` of ``k`` on ``bar``; the time left
    is the synthesis's own estimate for this sample plus as long again per sample to come."""
    head = f"sample {i + 1}/{k}, " if k > 1 else ""

    def report(p) -> None:
        per_sample = p.elapsed_s / p.fraction if p.fraction > 0 else float("inf")
        bar.update(f"{head}stage {p.stage}/{p.stages} ({p.frames} frames), iteration {p.iteration}/{p.iterations}",
                   done=(i + p.fraction) / k, eta_s=p.eta_s + (k - 1 - i) * per_sample)

    return report


def _synthesize(args: argparse.Namespace, cfg, parts, bar: arg.Progress) -> tuple[object, list]:
    """The generator (``None`` for a reassembly) and one result per sample; ``bar`` shows
    the progress."""
    from motionmatch.anim.bvh import load_bvh
    from motionmatch.genmm import Completion, GenMM, Keyframes, fix_foot_contacts, reassemble
    from motionmatch.genmm.synthesis import load_examples

    k = args.samples
    if args.reassemble:
        sources = _sources(args.reassemble)
        frames = args.frames if args.duration is None else round(args.duration * (args.fps or 30.0))
        return None, [reassemble(sources, frames, seed=args.seed + i, config=cfg, progress=_sample_progress(bar, i, k))
                      for i in range(k)]
    from motionmatch.datasets import load_takes, one_skeleton

    examples = one_skeleton(load_takes(args.examples, units=args.units, up=args.up),
                            hint="give examples of one skeleton ({n} here)")
    gen = GenMM(load_examples(examples), cfg, parts=parts)
    frames = args.frames if args.duration is None else round(args.duration * gen.fps)
    keys = None
    if args.keyframes:
        keys = Keyframes.from_bvh(args.keyframes, times=args.keyframe_times, spacing=args.keyframe_spacing)
    completion = None
    if args.complete:
        completion = Completion(load_bvh(args.complete, units=args.units, up_axis=args.up),
                                [g.strip() for g in args.given.split(",") if g.strip()])
    results = []
    for i in range(k):
        res = gen.sample(frames, seed=args.seed + i, loop=args.loop, loop_root=args.loop_root,
                         keyframes=keys, completion=completion, progress=_sample_progress(bar, i, k))
        if args.locomotion:
            import numpy as np

            from motionmatch.genmm.applications import turn

            angle = float(np.random.default_rng([args.seed + i, 1]).uniform(-np.pi, np.pi))
            res.motion = turn(res.motion, angle)
            res.extra["heading_rad"] = angle
        if (args.fix_feet or args.locomotion) and res.contacts is not None:
            res.motion = fix_foot_contacts(res.motion, res.contacts, res.feet)
        results.append(res)
    return gen, results


def cmd_genmm(args: argparse.Namespace) -> int:
    from motionmatch.genmm import GenMMConfig
    from motionmatch.genmm.parts import parse_parts_arg
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    _check_arguments(args)
    rig = rig_from_args(args)
    contacts = args.contacts or args.fix_feet or args.locomotion
    cfg = GenMMConfig(
        patch_size=args.patch_size, alpha=args.alpha, iterations=args.iterations,
        pyramid_factor=args.pyramid_factor, coarse_ratio=args.coarse_ratio, noise_sigma=args.noise,
        fps=args.fps, root_weight=args.root_weight, contacts=bool(contacts and not args.reassemble),
        feet=tuple(f.strip() for f in args.feet.split(",")) if args.feet else None,
        device=args.device, dtype=args.dtype, threads=args.threads, vote_sigma=args.vote_sigma,
    )
    parts = parse_parts_arg(args.parts) if args.parts else None
    t0 = time.perf_counter()
    prog = getattr(args, "prog", "motionmatch genmm")
    with _warnings_as_lines(prog), arg.Progress(prog, enabled=not args.quiet) as bar:
        gen, results = _synthesize(args, cfg, parts, bar)
        report = _report(args, cfg, gen, results)
        if not args.no_metrics and not args.reassemble:
            bar.update("scoring the output (coverage, patch distances)", phase=True)
            _score(args, gen, results, report)
    if args.reassemble:
        report["metrics_note"] = "no metrics for reassembled skeletons (the examples have other skeletons)"
    if gen is not None:
        say(f"genmm: {len(gen.examples)} example(s), {gen.example_frames} frames at {gen.fps:g} fps, "
            f"{gen.skeleton.num_joints} joints, {len(gen.parts)} part(s), device {args.device}")
    if getattr(args, "body", None) and results:
        from motionmatch.io.user_mesh import read_user_mesh

        read_user_mesh(getattr(args, "body", None), results[0].motion.skeleton)  # a mesh that does not fit fails before writing
    for res, path in zip(results, report["output"]):
        write_played(path, res.motion, rig, body=getattr(args, "body", None))
        say(f"wrote {path} ({res.motion.num_frames} frames at {res.motion.fps:g} fps, "
            f"synthesis {res.synthesis_s * 1000:.0f} ms)")
    if report["coverage"] is not None:
        say(f"coverage {100 * report['coverage']:.2f}%, global patch distance {report['global_patch_distance']:.3f}, "
            f"local {report['local_patch_distance']:.3f}"
            + (f", set diversity {report['set_diversity']:.3f}" if args.samples > 1 else ""))
    report["total_s"] = time.perf_counter() - t0
    if args.report:
        from motionmatch._files import atomic_write

        with atomic_write(args.report, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return 0


def _report(args: argparse.Namespace, cfg, gen, results: list) -> dict:
    """The report of a run, its metrics still ``None``."""
    paths = _out_paths(args.output, args.samples)
    return {
        "output": [str(p) for p in paths],
        "examples": list(args.examples) if args.examples else None,
        "frames": results[0].motion.num_frames,
        "fps": results[0].motion.fps,
        "samples": args.samples,
        "seeds": [args.seed + i for i in range(args.samples)],
        "device": args.device,
        "synthesis_s": float(sum(r.synthesis_s for r in results) / len(results)),
        "synthesis_s_per_sample": [r.synthesis_s for r in results],
        "stage_lengths": results[0].info.synthesis_lengths,
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.__dict__.items()},
        "parts": ({k: v for k, v in gen.part_names().items()} if gen is not None else None),
        "coverage": None, "global_patch_distance": None, "local_patch_distance": None, "set_diversity": None,
    }


def _score(args: argparse.Namespace, gen, results: list, report: dict) -> None:
    """Add the metrics of the outputs (coverage, patch distances, set diversity) to ``report``."""
    from motionmatch.metrics.genmm import evaluate

    tm = time.perf_counter()
    try:
        metrics = evaluate(gen.examples, [r.motion for r in results])
    except ValueError as e:  # examples or output too short for the metrics' windows
        raise MotionMatchError(f"cannot score the output: {e}; pass --no-metrics to skip the metrics") from None
    report.update({k: metrics[k] for k in ("coverage", "global_patch_distance", "local_patch_distance")})
    if args.samples > 1:
        report["set_diversity"] = metrics["set_diversity"]
    else:
        report.pop("set_diversity")
    report["per_sample"] = metrics["per_output"]
    report["metric_definitions"] = metrics["definitions"]
    report["coverage_thresholds"] = metrics["coverage_thresholds"]  # per example clip
    report["metrics_s"] = time.perf_counter() - tm
