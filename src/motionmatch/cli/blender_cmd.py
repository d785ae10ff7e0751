"""``motionmatch blender-addon``: the zip that Blender installs as the motionmatch add-on."""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

import motionmatch
from motionmatch.cli import _common as arg

ADDON_FOLDER = "motionmatch_addon"  # the folder inside the zip
ADDON_FILES = ("__init__.py", "operators.py", "panel.py")

MANIFEST = """\
schema_version = "1.0.0"
id = "motionmatch"
version = "{version}"
name = "motionmatch"
tagline = "GenMM and motion matching on armatures, motionmatch imports"
maintainer = "motionmatch developers"
type = "add-on"
website = "https://pypi.org/project/motionmatch/"
tags = ["Animation"]
blender_version_min = "4.2.0"
license = ["SPDX:MIT"]

[permissions]
files = "Read motion files and motion databases"
"""

HELP = """\
Write the Blender add-on as a zip: in Blender, Edit > Preferences > Add-ons > Install from
Disk (Blender 4.2+ reads its blender_manifest.toml as an extension; older ones its bl_info).
The add-on needs motionmatch in Blender's own Python: run Blender's Python with
'-m pip install motionmatch' first (Blender's Python: Blender > Scripting > Python console,
import sys; sys.executable). In the 3D view's sidebar, tab "motionmatch": GenMM on the
active armature's action (length, seed, variants, loop, keyframes from timeline markers),
walk along the active curve by motion matching (database file, speed), import of
motionmatch files (BVH with a mannequin body, GLB, FBX, USD).
"""


def addon_source() -> Path:
    """The folder of the add-on's sources (``motionmatch/blender``), found without importing it."""
    return Path(motionmatch.__file__).resolve().parent / "blender"


def build_addon_zip(out: str | Path) -> Path:
    """Write the add-on zip to ``out`` (atomically): its sources and a Blender extension manifest."""
    from motionmatch._files import atomic_path

    src = addon_source()
    with atomic_path(out) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ADDON_FILES:
            z.write(src / name, f"{ADDON_FOLDER}/{name}")
        z.writestr(f"{ADDON_FOLDER}/blender_manifest.toml", MANIFEST.format(version=motionmatch.__version__))
    return Path(out)


def cmd_blender_addon(args: argparse.Namespace) -> int:
    out = arg.output_file(args.output, (".zip",), "add-on zip")
    build_addon_zip(out)
    print(f"wrote {out}: install it in Blender (Edit > Preferences > Add-ons > Install from Disk); it needs "
          "motionmatch in Blender's Python (<blender python> -m pip install motionmatch)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("blender-addon", help="write the Blender add-on zip (GenMM, follow a curve, import)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="motionmatch_addon.zip", metavar="ADDON.zip",
                   help="the zip to write (default motionmatch_addon.zip)")
    p.set_defaults(func=cmd_blender_addon)
