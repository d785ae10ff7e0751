"""``motionmatch genmm-eval``: score any motion against example clips with GenMM's numbers.

The main CLI calls :func:`register` with its ``add_subparsers()`` object; the parser
added here sets ``func``, a function of the parsed arguments returning the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.errors import MotionMatchError

__all__ = ["cmd_genmm_eval", "register"]

DESCRIPTION = """\
Score generated motions against example clips with the numbers of the GenMM paper
(Li et al. 2023, Sec. 4.1), so that motions from any tool (GenMM, GANimator, your own)
can be compared on one scale. All files must have the same joints (matched by name).

  coverage               share (0-1) of the examples' 30-frame windows that appear in a
                         generated file: some aligned window of it is within 2x the
                         example's median frame-to-frame distance (6D joint rotations).
                         Higher is better; the first half of an example scores about 0.5.
  global_patch_distance  the generated motion cut into segments of at least 30 frames,
                         each matched to its nearest example segment (dynamic
                         programming): mean frame distance. Lower is closer to the examples.
  local_patch_distance   mean over the generated 15-frame windows of the distance to the
                         nearest example window. Lower is closer.
  set_diversity          (two or more generated files) how much the files differ from
                         each other, frame by frame, relative to the examples' own spread;
                         0 means identical files. Files of different lengths are compared
                         over the shortest one's frames.

Coverage, the patch distances: means over the generated files (each file's own values
are in the JSON under per_output). Frame distances are Euclidean over all joints' local
6D rotations; root positions are not compared. Everything is evaluated at --fps (default
30, the paper's rate; files at other rates are resampled), since windows count frames.
"""

EPILOG = """\
examples:
  motionmatch genmm-eval out.bvh --example salsa.bvh
  motionmatch genmm-eval out_*.bvh --example salsa.bvh --json
  motionmatch genmm-eval gan_1.bvh gan_2.bvh --example dance1.bvh dance2.bvh --json > scores.json
"""


def _fps(text: str) -> float | None:
    if text.strip().lower() in ("native", "none"):
        return None
    return arg.fps(text)


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``genmm-eval`` command to the main parser's subparsers; returns its parser."""
    p = sub.add_parser(
        "genmm-eval",
        help="score generated motions against examples (coverage, patch distances, set diversity)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("generated", nargs="+", metavar="GENERATED.bvh", help="generated motions to score")
    p.add_argument("--example", nargs="+", required=True, metavar="EXAMPLE.bvh",
                   help="the example clips the motions should reproduce (one skeleton)")
    p.add_argument("--fps", type=_fps, default=30.0, metavar="F",
                   help="rate of evaluation (default 30; 'native': the generated files' own rate)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON on stdout")
    arg.add_bvh_options(p)
    p.set_defaults(func=cmd_genmm_eval)
    return p


def _load(path: str, units: str | float = "auto", up: str = "auto"):
    from motionmatch.anim.bvh import load_bvh

    if not Path(path).is_file():
        raise MotionMatchError(f"{path}: no such file")
    return load_bvh(path, units=units, up_axis=up)


def _joint_order(motion, names: tuple[str, ...], path: str, ref_path: str) -> list[int]:
    """Indices of ``names`` among ``motion``'s joints; an error naming both files when the
    joint sets differ."""
    own = motion.skeleton.names
    if set(own) != set(names):
        missing = [n for n in names if n not in set(own)]
        extra = [n for n in own if n not in set(names)]
        detail = "; ".join(x for x in (
            f"missing {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}" if missing else "",
            f"extra {', '.join(extra[:4])}{' ...' if len(extra) > 4 else ''}" if extra else "") if x)
        raise MotionMatchError(
            f"{path} and {ref_path} have different joints ({len(own)} vs {len(names)}; {detail}); "
            "the metrics compare motions of one skeleton")
    return [own.index(n) for n in names]


def _features(motion, order: list[int]):
    """``[F, 6 J]`` rotation features with the joints in ``order`` (rotations are local, so
    only the order of the columns matters)."""
    from motionmatch.metrics.genmm import rotation_features

    F = rotation_features(motion).reshape(motion.num_frames, -1, 6)
    return F[:, order].reshape(motion.num_frames, -1)


def cmd_genmm_eval(args: argparse.Namespace) -> int:
    from motionmatch.anim.resample import resample
    from motionmatch.metrics.genmm import evaluate

    prog = getattr(args, "prog", "motionmatch genmm-eval")
    with arg.Progress(prog, enabled=True) as bar:
        bar.update("reading the files", phase=True)
        examples = [_load(p, args.units, args.up) for p in args.example]
        generated = [_load(p, args.units, args.up) for p in args.generated]
        names = examples[0].skeleton.names
        ex_order = [_joint_order(m, names, p, args.example[0]) for m, p in zip(examples, args.example)]
        gen_order = [_joint_order(m, names, p, args.example[0]) for m, p in zip(generated, args.generated)]
        fps = args.fps
        if fps is None:
            rates = sorted({round(m.fps, 6) for m in generated})
            if len(rates) > 1:
                raise MotionMatchError(f"the generated files have different frame rates ({', '.join(f'{r:g}' for r in rates)}); "
                                       "pass --fps F to evaluate them at one rate")
            fps = generated[0].fps
        generated = [m if abs(m.fps - fps) < 1e-9 else resample(m, fps) for m in generated]
        examples = [m if abs(m.fps - fps) < 1e-9 else resample(m, fps) for m in examples]
        for m, p in zip(generated, args.generated):
            if m.num_frames < 30:
                raise MotionMatchError(f"{p}: {m.num_frames} frames at {fps:g} fps, fewer than the 30 the "
                                       "global patch distance needs")
        for m, p in zip(examples, args.example):
            if m.num_frames < 30:
                raise MotionMatchError(f"{p}: {m.num_frames} frames at {fps:g} fps, fewer than the 30-frame "
                                       "windows of the metrics; give a longer example")
        bar.update(f"scoring {len(generated)} file(s) against {len(examples)} example(s)", phase=True)
        rep = evaluate([_features(m, o) for m, o in zip(examples, ex_order)],
                       [_features(m, o) for m, o in zip(generated, gen_order)])
    out = {
        "coverage": rep["coverage"],
        "global_patch_distance": rep["global_patch_distance"],
        "local_patch_distance": rep["local_patch_distance"],
    }
    if len(generated) > 1:
        out["set_diversity"] = rep["set_diversity"]
        out["set_diversity_frames"] = rep["set_diversity_frames"]
    out.update({
        "fps": fps,
        "generated": list(args.generated),
        "examples": list(args.example),
        "joints": len(names),
        "coverage_thresholds": rep["coverage_thresholds"],
        "per_output": rep["per_output"],
        "definitions": rep["definitions"],
    })
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{len(generated)} generated file(s) vs {len(examples)} example(s), {len(names)} joints, at {fps:g} fps")
    print(f"coverage               {100 * out['coverage']:.2f}%")
    print(f"global patch distance  {out['global_patch_distance']:.4f}")
    print(f"local patch distance   {out['local_patch_distance']:.4f}")
    if "set_diversity" in out:
        print(f"set diversity          {out['set_diversity']:.4f} (over {out['set_diversity_frames']} frames)")
    if len(generated) > 1:
        for p, c, g, lo in zip(args.generated, *(rep["per_output"][k] for k in
                                                ("coverage", "global_patch_distance", "local_patch_distance"))):
            print(f"  {p}: coverage {100 * c:.2f}%, global {g:.4f}, local {lo:.4f}", file=sys.stdout)
    return 0
