"""Render each skeleton's mannequin from four sides (front, its left, back, its right) into PNGs.

    python scripts/render_mannequins.py                      # every skeleton in $MOTIONMATCH_DATA -> out/mannequins/
    python scripts/render_mannequins.py --only bandai -o docs/mannequins   # the images the docs show
    python scripts/render_mannequins.py --pose bind          # in the bind pose the viewer uses (a frame of the take)

What is drawn is the procedural body of :mod:`motionmatch.anim.mannequin` (no motion): by
default in the *A pose made from the skeleton alone*
(:func:`motionmatch.anim.standing.standing_pose`: legs straight down, spine up, arms 30
degrees out from the body, the file's own bone lengths), so an image holds no frame of the
take; ``--pose bind`` draws the body in the bind pose the viewer builds it in (the same A
pose for most humanoids; a frame of the take where that fits better, and for animals).

The images are drawn with matplotlib alone (orthographic, painter's order, one directional
light plus ambient, a ground line and the body's shadow on it): no GPU, no browser, a few
seconds per skeleton.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

import numpy as np

from motionmatch.anim import load_bvh
from motionmatch.anim.body_parts import stands
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.mannequin import Mannequin, mannequin, mannequin_for, sliding_joints
from motionmatch.anim.motion import Motion
from motionmatch.anim.standing import standing_pose

#: (label, file under the data folder): one take per skeleton.
SKELETONS = (
    ("lafan1", "lafan1/walk1_subject1_stop.bvh"),
    ("bandai-namco", "bandai-namco/dataset-2/dataset-2_walk_normal_001.bvh"),
    ("cmu-xia", "genmm-examples/Xia_normal.bvh"),
    ("mixamo-joe", "genmm-examples/Joe_Walk-In-Circle.bvh"),
    ("mixamo-malcolm", "genmm-examples/Malcolm_Gangnam-Style.bvh"),
    ("dog", "quadruped-dog/D1_025_KAN01_001.bvh"),
    ("elephant", "genmm-examples/Elephant_idle1.bvh"),
    ("crab", "genmm-examples/Crabnew_Crab-dance-long.bvh"),
)
VIEWS = (("front", 0.0), ("left", 90.0), ("back", 180.0), ("right", 270.0))
BODY_RGB = np.array([0.80, 0.74, 0.66])
LIGHT = np.array([0.45, 0.75, 0.50])


def _stands(motion: Motion) -> bool:
    """Whether ``motion`` is a humanoid's that stands in some frame (a dog rigged with
    humanoid names does not)."""
    try:
        roles = find_humanoid(motion.skeleton)
    except HumanoidError:
        return False
    frames = np.linspace(0, motion.num_frames - 1, min(32, motion.num_frames)).astype(int)
    return any(stands(p, roles) for p in motion.world_positions[frames])


def _facing(body: Mannequin, motion: Motion) -> float:
    """Yaw (radians about +Y) that turns the body's front to +Z."""
    try:
        roles = find_humanoid(motion.skeleton)
        p = body.bind_positions
        left = p[roles["left_upper_leg"]] - p[roles["right_upper_leg"]]
    except (HumanoidError, KeyError):
        return 0.0
    front = np.cross(left, [0.0, 1.0, 0.0])
    return float(np.arctan2(front[0], front[2]))


def top_of(v: np.ndarray) -> float:
    return float(v[:, 1].max())


def _draw(ax, body: Mannequin, yaw: float, lim: tuple[float, float, float, float]) -> None:
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Ellipse

    c, s = np.cos(yaw), np.sin(yaw)
    rot = np.array([[c, 0.0, -s], [0.0, 1.0, 0.0], [s, 0.0, c]])  # turns the body by -yaw about +Y
    v = body.vertices.astype(np.float64) @ rot.T
    n = body.normals.astype(np.float64) @ rot.T
    tri = body.triangles
    # the camera looks along -Z at the body's front (x to the right of the image is the body's left... mirrored: -x)
    fn = np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])
    facing = fn[:, 2] > 0
    tri = tri[facing]
    depth = v[tri, 2].mean(axis=1)
    order = np.argsort(depth)
    tri = tri[order]
    light = LIGHT / np.linalg.norm(LIGHT)
    lam = np.clip(n[tri].mean(axis=1) @ light, 0.0, 1.0)
    rim = np.clip(n[tri].mean(axis=1)[:, 1], 0.0, 1.0) * 0.12  # sky light from above
    shade = 0.32 + 0.62 * lam + rim
    colors = np.clip(BODY_RGB[None] * shade[:, None], 0, 1)
    x0, x1, y0, y1 = lim
    ax.set_facecolor("#dfe7ef")
    ax.axhspan(y0, 0.0, color="#b9b29f", zorder=0)
    ax.axhline(0.0, color="#8f8878", lw=0.8, zorder=0.5)
    low = v[v[:, 1] < 0.15 * float(np.ptp(v[:, 1])), 0]  # the feet: the shadow under them
    ax.add_patch(Ellipse((float(-np.mean([low.min(), low.max()])), 0.0), float(np.ptp(low)) * 1.2 + 0.05,
                         0.03 * top_of(v), color="#6f6a5c", alpha=0.5, zorder=0.6, lw=0))
    xy = np.stack([-v[tri, 0], v[tri, 1]], axis=-1)  # the image's x: the camera's right = -x of the body's frame
    ax.add_collection(PolyCollection(xy, facecolors=colors, edgecolors=colors, linewidths=0.15, zorder=1))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def render(motion: Motion, label: str, out: Path, pose: str) -> Path:
    """Draw ``motion``'s mannequin from four sides into ``out/<label>.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if pose == "standing" and _stands(motion):
        body = mannequin(motion.skeleton, standing_pose(motion.skeleton, motion.translations[0]), sliding_joints(motion))
    else:  # an animal (or --pose bind): the pose the viewer builds the body in
        body = mannequin_for(motion)
    verts = body.vertices.astype(np.float64)
    verts[:, 1] -= verts[:, 1].min()
    centre = verts.mean(axis=0)
    verts[:, [0, 2]] -= centre[[0, 2]]
    body = Mannequin(verts.astype(np.float32), body.normals, body.triangles, body.joints, body.weights,
                     body.bind_positions - np.r_[centre[0], 0.0, centre[2]], body.bind_rotations)
    yaw0 = _facing(body, motion)
    half = 0.55 * float(max(np.ptp(verts[:, 0]), np.ptp(verts[:, 2]), 0.8 * np.ptp(verts[:, 1])))
    top = float(verts[:, 1].max()) * 1.06
    lim = (-half, half, -0.06 * top, top)
    fig, axes = plt.subplots(1, 4, figsize=(12.0, 12.0 * top * 1.12 / (4 * 2 * half) + 0.4), dpi=100)
    for ax, (name, deg) in zip(axes, VIEWS):
        _draw(ax, body, yaw0 + np.radians(deg), lim)
        ax.set_title(name, fontsize=9)
    fig.suptitle(f"{label}: {motion.skeleton.num_joints} joints", fontsize=10)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{label}.png"
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100)
    plt.close(fig)
    from PIL import Image  # (matplotlib's own dependency) 64 colours: a small file for the docs

    Image.open(buf).convert("RGB").quantize(colors=64).save(path, optimize=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", type=Path, default=Path("out/mannequins"))
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("MOTIONMATCH_DATA", "../shared/data")))
    ap.add_argument("--only", nargs="*", default=None, help="labels to draw (default: all)")
    ap.add_argument("--pose", choices=("standing", "bind"), default="standing")
    args = ap.parse_args(argv)
    for label, rel in SKELETONS:
        if args.only and label not in args.only:
            continue
        path = args.data / rel
        if not path.is_file():
            print(f"{label}: {path} is missing; skipped", file=sys.stderr)
            continue
        print(render(load_bvh(path), label, args.out, args.pose))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
