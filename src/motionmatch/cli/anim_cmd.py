"""``motionmatch inspect`` and ``motionmatch convert``."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

from motionmatch.anim import load_bvh
from motionmatch.anim.mirror import mirror
from motionmatch.anim.resample import resample
from motionmatch.anim.summary import summarize
from motionmatch.cli import _common as arg
from motionmatch.errors import MotionMatchError


def expand_paths(paths: list[str]) -> list[Path]:
    """Files as given, and the ``.bvh`` files found (recursively, sorted) in folders."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.suffix.lower() == ".bvh")
            if not found:
                raise MotionMatchError(f"{p}: no .bvh files in this folder")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise MotionMatchError(f"{p}: no such file or folder")
    return out


def cmd_inspect(args: argparse.Namespace) -> int:
    files = expand_paths(args.paths)
    failed = 0
    rows = []
    from tqdm import tqdm

    bar = tqdm(files, desc="inspect", unit="file", disable=len(files) < 20 or not sys.stderr.isatty(), file=sys.stderr)
    from motionmatch.anim.plausible import humanoid_warnings
    from motionmatch.datasets import tags_from_name
    from motionmatch.errors import DataWarning

    for f in bar:
        try:
            m = load_bvh(f, units=args.units, up_axis=args.up)
            m.tags = tags_from_name(f.stem)
            s = summarize(m)
            found = humanoid_warnings(m)
        except (MotionMatchError, OSError) as e:
            failed += 1
            print(f"{args.prog}: error: {e}", file=sys.stderr)
            continue
        with arg.warnings_as_lines(args.prog):
            for line in found:
                warnings.warn(line, DataWarning, stacklevel=1)
        if args.json:
            d = s.to_dict()
            if math.isnan(d["contact_fraction"]):
                d["contact_fraction"] = None
            print(json.dumps(d), flush=True)
        else:
            rows.append(s)
    if rows:
        header = f"{'file':<44} {'frames':>7} {'fps':>5} {'dur s':>7} {'joints':>6} {'height m':>8} " \
                 f"{'mean m/s':>8} {'max m/s':>8} {'contact':>7}  feet"
        print(header)
        print("-" * len(header))
        for s in rows:
            name = Path(s.path).name
            name = name if len(name) <= 44 else name[:41] + "..."
            contact = "-" if math.isnan(s.contact_fraction) else f"{100 * s.contact_fraction:6.1f}%"
            print(f"{name:<44} {s.frames:>7} {s.fps:>5g} {s.duration_s:>7.2f} {s.joints:>6} {s.height_m:>8.2f} "
                  f"{s.mean_speed_mps:>8.2f} {s.max_speed_mps:>8.2f} {contact:>7}  {', '.join(s.feet) or '(none found)'}")
        if len(rows) > 1:
            frames = sum(s.frames for s in rows)
            secs = sum(s.duration_s for s in rows)
            print(f"{len(rows)} files, {frames} frames, {secs / 60:.1f} min")
    return 1 if failed else 0


def parse_range(text: str, fps: float, frames: int) -> slice:
    """``A:B`` in frames (end exclusive, either may be empty) or seconds with an ``s`` suffix."""
    if ":" not in text:
        raise MotionMatchError(f"--range must look like A:B (frames) or 1.5s:4s (seconds), got {text!r}")
    a, b = text.split(":", 1)

    def conv(v: str, default: int) -> int:
        v = v.strip()
        if not v:
            return default
        try:
            return round(float(v[:-1]) * fps) if v.endswith("s") else int(v)
        except (ValueError, OverflowError):
            raise MotionMatchError(f"--range: {v!r} is not a frame number or a time like 2.5s") from None

    start, stop = conv(a, 0), conv(b, frames)
    start, stop = (start + frames if start < 0 else start), (stop + frames if stop < 0 else stop)
    if not 0 <= start < stop <= frames:
        raise MotionMatchError(f"--range {text} selects no frames of a {frames}-frame clip")
    return slice(start, stop)


def cmd_convert(args: argparse.Namespace) -> int:
    from motionmatch.io.motion_files import MOTION_SUFFIXES, check_writer, write_motion

    out = arg.output_file(args.output, MOTION_SUFFIXES, "output")
    check_writer(args.output)
    m = load_bvh(args.input, units=args.units, up_axis=args.up)
    if args.range:
        m = m[parse_range(args.range, m.fps, m.num_frames)]
    if args.mirror:
        m = mirror(m)
    if args.fps:
        m = resample(m, args.fps)
    if getattr(args, "body", None):
        from motionmatch.io.user_mesh import read_user_mesh

        read_user_mesh(getattr(args, "body", None), m.skeleton)  # a mesh that does not fit fails before writing
    write_motion(out, m, units=args.out_units, body=getattr(args, "body", None))
    print(f"wrote {out}: {m.num_frames} frames at {m.fps:g} fps ({m.duration:.2f} s)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="summarise BVH files: frames, fps, size, feet, root speed, contacts",
        description="Load each BVH file (folders are searched recursively) and print frames, fps, duration, "
        "joint count, body height, detected feet, mean and max root speed (m/s, ground plane) and the share "
        "of frames with a foot in contact. A humanoid take that is implausible for a person (height outside "
        "1.2-2.3 m, feet off the floor where they touch it, a walk slower than 0.3 m/s) gets a warning line.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="BVH files or folders")
    p.add_argument("--json", action="store_true", help="print one JSON object per file instead of a table")
    arg.add_bvh_options(p)
    p.set_defaults(func=cmd_inspect)

    c = sub.add_parser(
        "convert",
        help="cut, mirror and resample a BVH file",
        description="Read IN, optionally keep a frame range, mirror left/right and resample, and write OUT "
        "(atomically, in the input's units unless --out-units says otherwise). Order: range, mirror, fps.",
    )
    c.add_argument("input", metavar="IN", help="input .bvh file")
    c.add_argument("output", metavar="OUT", help="output file: .bvh, or .glb (glTF with a skinned body)")
    c.add_argument("--fps", type=arg.fps, help="resample to this frame rate (slerp for rotations)")
    c.add_argument("--mirror", action="store_true", help="mirror left/right (joint pairs found from names)")
    c.add_argument("--range", metavar="A:B", help="keep frames A (inclusive) to B (exclusive); 2.5s:10s for seconds")
    c.add_argument("--units", type=arg.units, default="auto", help=arg.UNITS_HELP)
    c.add_argument("--out-units", type=arg.units, default=None, help="length unit of OUT (default: as IN)")
    c.add_argument("--up", choices=arg.UP_CHOICES, default="auto",
                   help="up axis of IN: auto (default: found from the data), y or z; OUT is always Y up")
    c.add_argument("--body", metavar="MESH.glb", help="a glTF file (.glb/.gltf) whose skinned mesh (joints named as the skeleton's) replaces the generated mannequin in .glb/.fbx/.usd output")
    c.set_defaults(func=cmd_convert)
