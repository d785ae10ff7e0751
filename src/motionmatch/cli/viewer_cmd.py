"""``motionmatch viewer``: the interactive web viewer."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from motionmatch.cli import _common as arg

DEFAULT_PORT = 8765

_DEPS = {"starlette": "starlette", "uvicorn": "uvicorn", "websockets": "websockets"}


def _port(text: str) -> int:
    """A TCP port number, 0 to 65535 (argparse type: a usage error otherwise)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {n}")
    return n


def _missing_deps() -> list[str]:
    return [pkg for mod, pkg in _DEPS.items() if importlib.util.find_spec(mod) is None]


def cmd_viewer(args: argparse.Namespace) -> int:
    err = sys.stderr
    missing = _missing_deps()
    if missing:
        print(f"motionmatch viewer: needs {', '.join(missing)}: pip install 'motionmatch[viewer]'", file=err)
        return 1
    if args.db and args.data:
        print("motionmatch viewer: give --db or --data, not both", file=err)
        return 2
    if args.token is not None:
        from motionmatch.viewer.access import check_token

        try:
            check_token(args.token)
        except ValueError as e:
            print(f"motionmatch viewer: --token: {e}", file=err)
            return 2
    from motionmatch.viewer._bundle import BundleError, ensure_bundle
    from motionmatch.viewer.data import FileCatalog, default_roots, open_database
    from motionmatch.viewer.messages import Limits
    from motionmatch.viewer.server import Viewer, serve

    def log(msg: str) -> None:
        print(msg, file=err, flush=True)

    for given, check, what in ((args.db, Path.is_file, "no such database file"),
                               (args.data, Path.is_dir, "not a folder of BVH files")):
        if given is not None and not check(Path(given).expanduser()):  # before building the page
            print(f"motionmatch viewer: {Path(given).expanduser()}: {what}", file=err)
            return 1
    try:
        static = ensure_bundle(log=log, rebuild=args.rebuild_page)
    except BundleError as e:
        print(f"motionmatch viewer: {e}", file=err)
        return 1
    progress = err.isatty() and not args.quiet
    from motionmatch.cli._common import warnings_as_lines

    with warnings_as_lines("motionmatch viewer"):
        db, source = open_database(args.db, args.data, schema=args.schema, mirror=not args.no_mirror,
                                   progress=progress, fetch_progress=not args.quiet, log=log,
                                   units=args.units, up=args.up, roles=args.roles)
    log(f"database: {db!r} ({source.description})")
    if args.rig and args.body:
        print("motionmatch viewer: --rig and --body: give one (--rig draws the characters on your rig, with its own "
              "mesh; --body skins a mesh of the database's skeleton)", file=err)
        return 2
    if args.body:  # a mesh that does not fit the database's skeleton: one line, before serving
        from motionmatch.errors import MotionMatchError
        from motionmatch.io.user_mesh import read_user_mesh

        try:
            read_user_mesh(args.body, db.skeleton)
        except MotionMatchError as e:
            print(f"motionmatch viewer: {e}", file=err)
            return 1
    roots = default_roots(source.folder, args.allow or (), args.scenarios)
    catalog = FileCatalog(roots)
    log("data folders the page may read: " + (", ".join(f"{k}={v}" for k, v in catalog.roots.items()) or "none"))
    viewer = Viewer(db, catalog=catalog, source_description=source.description, static_dir=static,
                    limits=Limits(), record_seconds=args.record_seconds, max_sessions=args.max_sessions,
                    body_mesh=Path(args.body) if args.body else None)
    if args.rig:  # the user's character: a rig that cannot be used fails here, in one line, before serving
        from motionmatch.database.schema import load_roles
        from motionmatch.errors import MotionMatchError

        try:
            viewer.rig = viewer.rigs.load(args.rig, units=args.rig_units, up=args.rig_up,
                                          roles_map=load_roles(args.rig_roles) if args.rig_roles else None)
        except MotionMatchError as e:
            print(f"motionmatch viewer: {e}", file=err)
            return 1
        for line in viewer.rig.warnings:
            log(f"motionmatch viewer: warning: {line}")
        log(f"characters drawn on {viewer.rig.name} ({viewer.rig.joints} joints"
            f"{', its own skinned mesh' if viewer.rig.file.skinned else ', the mannequin of its skeleton'})")
    viewer.prepare(source.db_path, log=log)  # compile what a moving character needs; the rest meanwhile
    port = args.port if args.port is not None else DEFAULT_PORT
    try:
        serve(viewer, args.host, port, open_browser=args.open, allowed_hosts=tuple(args.allow_host or ()),
              token=args.token, log=lambda m: print(m, flush=True))
    except OSError as e:
        if args.port is None:
            log(f"port {DEFAULT_PORT} is busy; using a free port")
            serve(viewer, args.host, 0, open_browser=args.open, allowed_hosts=tuple(args.allow_host or ()),
                  token=args.token, log=lambda m: print(m, flush=True))
        else:
            print(f"motionmatch viewer: {e}", file=err)
            return 1
    except KeyboardInterrupt:
        pass
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser(
        "viewer", help="interactive web viewer: steer characters, draw paths, debug matches, GenMM",
        description="Start a local web app and print its URL. Each browser tab is its own simulation at 60 Hz: "
        "W/A/S/D (camera-relative), Shift sprint, Up/Down target speed, J jump, P dance, C creep; draw paths on "
        "the ground; place obstacles (disks, boxes, heights, velocities) that characters avoid; load scenario files "
        "and press play; spawn crowds with goals and target paths; drive the character with pose commands from a "
        "recorded keypoint file; debug matches (feature-group costs, next-best candidates, desired vs matched "
        "trajectories, future body ellipses, obstacle penalties); pause, step, scrub; export BVH and video; GenMM "
        "variants side by side. "
        "Without --db/--data the default dataset is used: $MOTIONMATCH_DATA, else the download cache, else it is "
        "downloaded once. The page may load files only from the data folders listed at start.",
    )
    src = v.add_mutually_exclusive_group()
    src.add_argument("--db", metavar="DB.npz", help="database built with 'motionmatch build'")
    src.add_argument("--data", metavar="DIR", help="folder of BVH clips (built into a cached database)")
    from motionmatch.cli._common import add_bvh_options

    add_bvh_options(v)  # how --data's files are read
    v.add_argument("--roles", metavar="MAP.json", help="with --data: humanoid roles to use instead of those found "
                   'on the rig, a JSON object such as {"left_foot": "ball_l"}')
    v.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it, and then "
                   "every request needs the token of the printed URL)")
    v.add_argument("--token", metavar="TOKEN", help="the secret every request must carry (?token=, then a cookie; "
                   "or 'Authorization: token ...'); default: a random one when --host is not loopback, none on "
                   "loopback")
    v.add_argument("--allow-host", action="append", metavar="NAME",
                   help="a host name the viewer answers to besides its address, IP addresses and localhost "
                   "(a name of this machine when serving on 0.0.0.0; requests naming any other host get "
                   "HTTP 421, which stops DNS-rebinding pages)")
    v.add_argument("--port", type=_port, default=None, help=f"port (default {DEFAULT_PORT}, or a free one if busy; "
                   "0: a free one)")
    v.add_argument("--open", action="store_true", help="open the page in the default browser")
    v.add_argument("--body", metavar="MESH.glb", help="a glTF file (.glb/.gltf) whose skinned mesh (joints named as "
                   "the database skeleton's) the page draws and exports instead of the generated mannequin")
    v.add_argument("--rig", metavar="RIG", help="draw every motion-matching character on your character's rig: a "
                   ".glb/.gltf with a skeleton (its skinned mesh drawn; without a skin, the mannequin of its skeleton) "
                   "or a .bvh; the motion is retargeted to it every tick (the page's 'Use my character' does the same)")
    v.add_argument("--rig-roles", metavar="MAP.json", help="humanoid roles of RIG where its joint names do not say them")
    v.add_argument("--rig-units", type=arg.units, default="auto", help="length unit of RIG (default: found from its size)")
    v.add_argument("--rig-up", choices=arg.UP_CHOICES, default="auto", help="up axis of a .bvh RIG: auto, y or z")
    v.add_argument("--schema", default="classic-3d",
                   help="feature schema when building from clips (default classic-3d: jump and creep work)")
    v.add_argument("--no-mirror", action="store_true", help="do not add mirrored copies when building")
    v.add_argument("--allow", action="append", metavar="DIR",
                   help="another folder the page may load files from (BVH examples, scenarios, keypoints)")
    v.add_argument("--scenarios", metavar="DIR", help="folder of scenario files (default ./scenarios, else the "
                   "repository's scenarios/ when running from a source checkout)")
    v.add_argument("--record-seconds", type=arg.seconds, default=120.0,
                   help="seconds of each character's motion kept for BVH export (default 120)")
    v.add_argument("--max-sessions", type=arg.int_range(1, 1000), default=16, help="open tabs at once (default 16)")
    v.add_argument("--rebuild-page", action="store_true", help="rebuild the page from web/ (needs Node.js)")
    v.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    v.set_defaults(func=cmd_viewer)
