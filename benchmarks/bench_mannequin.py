"""The mannequin (issue 16): build time per skeleton and how far its vertices leave their bones.

    python benchmarks/bench_mannequin.py [--data DIR] [--frames N] [--all]

For one take per skeleton in the data folder it reports the body's size, the time to build
it (uncached: the cache is cleared first; best of 3), and, over the take's frames (every
frame, or ``--frames`` evenly spaced ones), the largest ratio of a vertex's distance to its
bones (:func:`motionmatch.anim.mannequin.bone_distances`) to its bind-pose distance, and how
how many vertices exceed 1.25 and 1.5 of it (blends across the joints move a vertex on the
outside of a bend off its bones: issue 32), and the seams: the 99th percentile and the largest
stretch of a triangle's edges over the frames (each edge in its bind-pose length, the short
edges of surface nets counted at the median edge; near-rigid weights tore the hips and
shoulders at 3-7 and up to 9-12). With ``--all`` it does so for every BVH file of the data
folder (each with its own bind pose) and ends with the worst.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _common import data_root
from motionmatch.anim import load_bvh
from motionmatch.anim.mannequin import _cached, bind_pose, bone_distances, mannequin, sliding_joints
from motionmatch.datasets import SKELETON_SAMPLES as TAKES


def _edges(v: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """``(..., T, 3)`` the lengths of the triangles' edges of vertices ``(..., V, 3)``."""
    return np.stack([np.linalg.norm(v[..., tri[:, (i + 1) % 3], :] - v[..., tri[:, i], :], axis=-1)
                     for i in range(3)], axis=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data")
    ap.add_argument("--frames", type=int, default=0, help="evenly spaced frames per take (0: all)")
    ap.add_argument("--all", action="store_true", help="every BVH file of the data folder, not one per skeleton")
    args = ap.parse_args()
    root = data_root(args.data)
    takes = sorted(str(p.relative_to(root)) for p in root.rglob("*.bvh")) if args.all else TAKES
    worst_all = (0.0, "")
    print(f"{'take':44s} {'J':>3s} {'verts':>6s} {'build s':>8s} {'frames':>6s} {'max ratio':>9s} {'>1.25':>6s} "
          f"{'>1.5':>5s} {'stretch p99':>11s} {'max':>6s}")
    for take in takes:
        path = root / take
        if not path.exists():
            print(f"{take:44s} (not in the data folder)")
            continue
        motion = load_bvh(path)
        pose, sliding = bind_pose(motion), sliding_joints(motion)
        best = np.inf
        for _ in range(3):
            _cached.cache_clear()
            t0 = time.perf_counter()
            body = mannequin(motion.skeleton, pose, sliding) if sliding else mannequin(motion.skeleton, pose)
            best = min(best, time.perf_counter() - t0)
        n = motion.num_frames if args.frames <= 0 else min(args.frames, motion.num_frames)
        frames = np.unique(np.linspace(0, motion.num_frames - 1, n).astype(int))
        rest = bone_distances(body, motion.skeleton, body.bind_positions, body.bind_rotations,
                              body.vertices.astype(np.float64))
        worst = np.zeros(len(rest))
        tri = body.triangles.astype(np.int64)
        bind = _edges(body.vertices.astype(np.float64), tri)
        bind = np.maximum(bind, np.median(bind))
        stretch = np.zeros(len(tri))
        for c in range(0, len(frames), 8):
            f = frames[c:c + 8]
            d = bone_distances(body, motion.skeleton, motion.world_positions[f], motion.world_rotations[f])
            worst = np.maximum(worst, d.max(axis=0))
            posed = body.skin(motion.world_positions[f], motion.world_rotations[f])
            stretch = np.maximum(stretch, (_edges(posed, tri) / bind).max(axis=(0, 2)))
        ratio = worst / np.maximum(rest, 1e-9)
        print(f"{take:44s} {motion.num_joints:3d} {len(body.vertices):6d} {best:8.3f} {len(frames):6d} "
              f"{ratio.max():9.3f} {int(np.sum(ratio > 1.25)):6d} {int(np.sum(ratio > 1.5)):5d} "
              f"{np.percentile(stretch, 99):11.2f} {stretch.max():6.2f}", flush=True)
        worst_all = max(worst_all, (float(ratio.max()), take))
    print(f"worst: {worst_all[0]:.3f} ({worst_all[1]})")


if __name__ == "__main__":
    main()
