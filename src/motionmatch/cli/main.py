"""Entry point of the ``motionmatch`` command."""

from __future__ import annotations

import argparse
import sys

from motionmatch import __version__
from motionmatch.errors import MotionMatchError

DESCRIPTION = """\
motionmatch: data-driven character animation by motion matching.

Lengths are metres, time seconds, Y is up. Motion data is read from BVH files (any
skeleton, any channel order); datasets can be fetched or pointed to with
$MOTIONMATCH_DATA.
"""

EPILOG = """\
examples:
  motionmatch viewer --open                  # the interactive viewer (default dataset)
  motionmatch inspect ../shared/data/lafan1-60fps
  motionmatch inspect walk.bvh --json
  motionmatch convert walk.bvh walk_mirrored_30.bvh --mirror --fps 30 --range 0:600
  motionmatch datasets list
  motionmatch build ../shared/data/lafan1-60fps --mirror -o lafan.npz
  motionmatch run --db lafan.npz --input script.json -o out.bvh --report report.json --preview out.mp4
  motionmatch follow --db lafan.npz --path paths/square.json -o out.bvh --report report.json --preview out.mp4
  motionmatch genmm ../shared/data/genmm-examples/Joe_Salsa-Dancing-6.bvh -o salsa_new.bvh --samples 10 --report r.json
  motionmatch genmm-eval salsa_new_*.bvh --example ../shared/data/genmm-examples/Joe_Salsa-Dancing-6.bvh --json

  motionmatch pose eval --json
  motionmatch scenario scenarios/zigzag-cones.json --db lafan_env.npz -o run.npz --report r.json
  motionmatch convert walk.bvh walk.glb        # or .fbx (Blender's exporter), .usda (UsdSkel)
  motionmatch retarget walk.bvh --to hero.glb -o walk_hero.glb   # your character plays the take
  motionmatch blender-addon -o motionmatch_addon.zip
  motionmatch batch build ../shared/data/lafan1-60fps --mirror -o lafan.npz --workers 2   (pip install 'motionmatch[ray]')
  motionmatch bench crowd --db lafan_env.npz --agents 1000 --environment --json

Run 'motionmatch COMMAND --help' for the options of a command.
"""


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (the option, what it expects and
    where the help is), and whose commands know their name (``args.prog``) for error messages."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def set_defaults(self, **kwargs) -> None:
        if "func" in kwargs:
            kwargs.setdefault("prog", self.prog)
        super().set_defaults(**kwargs)


def one_line(e: BaseException) -> str:
    """An error's message on one line; an OS error names its file and says what failed."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return " ".join(str(e).split()) or type(e).__name__


def build_parser() -> argparse.ArgumentParser:
    from motionmatch.cli import (
        anim_cmd,
        batch_cmd,
        bench_cmd,
        blender_cmd,
        datasets_cmd,
        follow_cmd,
        genmm_cmd,
        genmm_eval_cmd,
        pose_cmd,
        retarget_cmd,
        runtime_cmd,
        scenario_cmd,
        viewer_cmd,
    )

    parser = Parser(
        prog="motionmatch", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"motionmatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    anim_cmd.register(sub)
    retarget_cmd.register(sub)
    bench_cmd.register(sub)
    datasets_cmd.register(sub)
    runtime_cmd.register(sub)
    follow_cmd.register(sub)
    genmm_cmd.register(sub)
    genmm_eval_cmd.register(sub)
    pose_cmd.register(sub)
    scenario_cmd.register(sub)
    batch_cmd.register(sub)
    viewer_cmd.register(sub)
    blender_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    from motionmatch.cli._common import warnings_as_lines

    try:
        with warnings_as_lines(getattr(args, "prog", "motionmatch")):  # data and mode warnings: one line each
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which closed early: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (MotionMatchError, OSError, ValueError) as e:
        # refused input or an unreadable/unwritable file (the library refuses bad values with
        # ValueError or its subclasses); anything else is a bug and keeps its traceback
        print(f"{getattr(args, 'prog', 'motionmatch')}: error: {one_line(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
