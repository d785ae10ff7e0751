"""Render a take beside the same take retargeted onto another rig, as skinned bodies, to look at.

    python scripts/render_retarget.py TAKE.bvh RIG -o side_by_side.png [--frames 0 40 80] [--range 0:300]

Left of each pair: the take on its own skeleton's mannequin; right: the take played by RIG
(``.bvh`` or ``.glb``/``.gltf``: :func:`motionmatch.io.rig_file.read_rig`; a skinned glTF rig
is drawn with its own mesh), placed beside it. Each frame is drawn from the side and from the
front (matplotlib, flat-shaded triangles, the floor as a grid at y = 0). Nothing is written
into the repository; the image goes where ``-o`` says.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from mpl_toolkits.mplot3d.art3d import Poly3DCollection

from motionmatch.anim import load_bvh
from motionmatch.anim.humanoid import find_humanoid
from motionmatch.anim.mannequin import mannequin_for
from motionmatch.io.rig_file import read_rig
from motionmatch.io.user_mesh import read_user_mesh

LIGHT = np.array([0.4, 0.8, 0.45]) / np.linalg.norm([0.4, 0.8, 0.45])


def _draw(ax, verts, tris, colour, shift):
    v = verts + shift
    tri = v[tris]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    shade = 0.35 + 0.65 * np.clip(n @ LIGHT, 0.0, 1.0)
    faces = tri[:, :, [0, 2, 1]]  # matplotlib's z is up: (x, z, y)
    col = Poly3DCollection(faces, facecolors=np.clip(np.asarray(colour)[None] * shade[:, None], 0, 1),
                           linewidths=0)
    ax.add_collection3d(col)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("take")
    ap.add_argument("rig")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--frames", type=int, nargs="+", default=[0, 30, 60])
    ap.add_argument("--range", default="0:300", help="frames A:B of the take to retarget")
    args = ap.parse_args()

    a, b = (int(x) for x in args.range.split(":"))
    take = load_bvh(args.take, up_axis="auto")[a:b]
    rig = read_rig(args.rig)
    played = rig.retarget(take)
    src_body = mannequin_for(take)
    rig_body = read_user_mesh(rig.path, played.skeleton) if rig.skinned else mannequin_for(played)
    hips = find_humanoid(take.skeleton).hips
    views = (("front", 8, -90), ("side", 8, 0))
    fig = plt.figure(figsize=(4.2 * len(args.frames), 8.4))
    for col, f in enumerate(args.frames):
        vs = src_body.skin(take.world_positions[f], take.world_rotations[f])
        vt = rig_body.skin(played.world_positions[f], played.world_rotations[f])
        centre = take.world_positions[f, hips].copy()
        for row, (label, elev, azim) in enumerate(views):
            ax = fig.add_subplot(2, len(args.frames), row * len(args.frames) + col + 1, projection="3d")
            across = np.array([0.0, 0.0, 0.9]) if label == "side" else np.array([0.9, 0.0, 0.0])
            _draw(ax, vs, src_body.triangles, (0.75, 0.75, 0.78), -0.5 * across)
            _draw(ax, vt, rig_body.triangles, (0.95, 0.55, 0.25), 0.5 * across)
            gx = np.linspace(centre[0] - 1.2, centre[0] + 1.2, 7)
            gz = np.linspace(centre[2] - 1.2, centre[2] + 1.2, 7)
            for x in gx:
                ax.plot([x, x], [gz[0], gz[-1]], [0, 0], color="0.7", lw=0.5)
            for z in gz:
                ax.plot([gx[0], gx[-1]], [z, z], [0, 0], color="0.7", lw=0.5)
            ax.set_xlim(centre[0] - 1.1, centre[0] + 1.1)
            ax.set_ylim(centre[2] - 1.1, centre[2] + 1.1)
            ax.set_zlim(0.0, 2.2)
            ax.set_box_aspect((1, 1, 1))
            ax.view_init(elev, azim)
            ax.set_axis_off()
            ax.set_title(f"frame {a + f}, {label}: {take.name} (grey) / on {Path(args.rig).name} (orange)", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=80)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
