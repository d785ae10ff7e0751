"""``motionmatch retarget``: takes played by another rig, and the ``--rig`` option of the commands that write motion."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from motionmatch.cli import _common as arg
from motionmatch.errors import MotionMatchError

RIG_HELP = ("a character's rig to play the output on: a .bvh, or a .glb/.gltf with a skeleton (a skinned one's "
            "mesh is written with the motion in .glb/.fbx/.usd output); .fbx rigs: export them as .glb")


def add_rig_option(parser: argparse.ArgumentParser) -> None:
    """``--rig RIG`` (and ``--rig-roles``) on a command that writes motion."""
    parser.add_argument("--rig", metavar="RIG", help=RIG_HELP)
    parser.add_argument("--rig-roles", metavar="MAP.json",
                        help='humanoid roles of the rig where they are not found from its joint names: a JSON object '
                        'such as {"hips": "pelvis_jnt", "left_foot": "l_ball_jnt"}')


def rig_from_args(args: argparse.Namespace):
    """The :class:`~motionmatch.io.rig_file.RigFile` of ``--rig`` (``None`` without it),
    read before the command runs: a rig that cannot be used fails first, nothing written."""
    if not getattr(args, "rig", None):
        return None
    if getattr(args, "body", None):
        raise MotionMatchError("--rig and --body: give one (--rig plays the motion on your rig and writes its own "
                               "mesh; --body skins a mesh of the database's skeleton)")
    from motionmatch.io.rig_file import read_rig

    roles = _roles(getattr(args, "rig_roles", None))
    return read_rig(args.rig, units=getattr(args, "rig_units", "auto"), up=getattr(args, "rig_up", "auto"),
                    roles_map=roles)


def write_played(path, motion, rig, **kw):
    """Write a command's output motion (one, or ``(name, motion)`` pairs): as it is
    (:func:`~motionmatch.io.motion_files.write_motion`, ``kw`` passed on) without a rig,
    else retargeted onto ``rig`` and written with its mesh (:meth:`RigFile.write`)."""
    from motionmatch.anim.motion import Motion
    from motionmatch.io.motion_files import write_motion

    if rig is None:
        return write_motion(path, motion, **kw)
    kw.pop("body", None)
    played = rig.retarget(motion) if isinstance(motion, Motion) else [(n, rig.retarget(m)) for n, m in motion]
    return rig.write(path, played, **kw)


def _roles(path: str | None) -> dict[str, str] | None:
    if not path:
        return None
    from motionmatch.database.schema import load_roles

    return load_roles(path)


def cmd_retarget(args: argparse.Namespace) -> int:
    from motionmatch.anim import load_bvh
    from motionmatch.anim.retarget import RetargetSettings
    from motionmatch.cli.anim_cmd import expand_paths
    from motionmatch.io.motion_files import MOTION_SUFFIXES, check_writer
    from motionmatch.io.rig_file import read_rig

    rig = read_rig(args.to, units=args.rig_units, up=args.rig_up, roles_map=_roles(args.rig_roles))
    files = expand_paths(args.inputs)
    out = Path(args.output)
    several = len(files) > 1 or Path(args.inputs[0]).is_dir()
    suffix = f".{args.format}" if args.format else (".glb" if rig.skinned else ".bvh")
    if several:
        if out.suffix.lower() in MOTION_SUFFIXES:
            raise MotionMatchError(f"{out}: {len(files)} inputs are written to a folder; give -o a folder name")
        targets = [out / f"{f.stem}{suffix}" for f in files]
        if len({t.name for t in targets}) < len(targets):
            raise MotionMatchError(f"{out}: inputs in different folders share a file name; retarget them one folder "
                                   "at a time")
    else:
        arg.output_file(out, MOTION_SUFFIXES, "output")
        targets = [out]
    check_writer(targets[0])
    source_roles = _roles(args.roles)
    settings = RetargetSettings(foot_ik=not args.no_foot_ik, scale_root=not args.no_scale_root)
    from tqdm import tqdm

    bar = tqdm(list(zip(files, targets)), desc="retarget", unit="file", file=sys.stderr,
               disable=args.quiet or len(files) < 2 or not sys.stderr.isatty())
    for src, dst in bar:
        motion = load_bvh(src, units=args.units, up_axis=args.up)
        played = rig.retarget(motion, settings, source_roles)
        dst.parent.mkdir(parents=True, exist_ok=True)
        rig.write(dst, played)
        line = (f"wrote {dst}: {played.num_frames} frames at {played.fps:g} fps on {rig.path.name} "
                f"({rig.rig.skeleton.num_joints} joints{', skinned' if rig.skinned else ''})")
        if bar.disable:
            print(line)
        else:
            bar.write(line)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "retarget",
        help="play takes on another character's rig (retargeting)",
        description="Play each humanoid take IN (a .bvh file; folders are searched) on the rig RIG and write it.\n\n"
        "RIG is a .bvh, or a .glb/.gltf with a skeleton; a skinned glTF rig's own mesh is written with the\n"
        "motion in .glb/.fbx/.usd output (your character walking). An .fbx rig: export it as .glb first.\n\n"
        "Joints are matched by their humanoid roles (hips, spine, neck, head, arms, legs, feet, toes), found\n"
        "from names (Mixamo, Unreal, Character Creator, LAFAN1, CMU, Bandai-Namco, VRM, ...) and from the\n"
        "skeleton's shape; --roles/--rig-roles name them where that fails. Bones follow the source's world\n"
        "directions with its twist, whatever the two rigs' rest poses (T or A pose), joint axes, up axes and\n"
        "units; the root motion is scaled by the legs' length ratio, and foot IK keeps every foot contact of\n"
        "the source planted, on the floor. Joints with no match in the source (fingers, twist bones, props, a\n"
        "ground root) keep the rig's own pose.\n\n"
        "One input: OUT is a file (.bvh in the rig's unit, .glb, .fbx, .usda). Several (or a folder): OUT is a\n"
        "folder, one file each, named after the inputs, with a progress bar.",
        epilog="examples:\n"
        "  motionmatch retarget walk.bvh --to hero.glb -o walk_hero.glb\n"
        "  motionmatch retarget takes/ --to mixamo_rig.bvh -o takes_mixamo/ --format bvh\n"
        "  motionmatch retarget walk.bvh --to rig.glb --rig-roles roles.json -o out.bvh",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="IN", help="humanoid takes: .bvh files or folders")
    p.add_argument("--to", required=True, metavar="RIG", help="the rig: .bvh, .glb or .gltf (.fbx: export it as .glb)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output file (.bvh, .glb, .fbx, .usd) for one input; a folder for several")
    p.add_argument("--format", choices=("bvh", "glb", "fbx", "usda"),
                   help="file type written into a folder OUT (default: glb for a skinned rig, else bvh)")
    p.add_argument("--units", type=arg.units, default="auto", help=arg.UNITS_HELP + " (of the inputs)")
    p.add_argument("--up", choices=arg.UP_CHOICES, default="auto", help="up axis of the inputs: auto, y or z")
    p.add_argument("--rig-units", type=arg.units, default="auto", help="length unit of RIG (default: found from its size)")
    p.add_argument("--rig-up", choices=arg.UP_CHOICES, default="auto", help="up axis of a .bvh RIG: auto, y or z")
    p.add_argument("--roles", metavar="MAP.json", help="humanoid roles of the inputs where names do not say them")
    p.add_argument("--rig-roles", metavar="MAP.json", help="humanoid roles of RIG where names do not say them")
    p.add_argument("--no-foot-ik", action="store_true", help="do not plant the feet (directions only)")
    p.add_argument("--no-scale-root", action="store_true", help="copy the root motion unscaled")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_retarget)
