"""Retargeting speed: one minute of 60 fps motion onto another rig, against the issue's bar (0.5 s).

    python benchmarks/bench_retarget.py [--data DIR] [--repeats 5] [--json]

The source is the first 3,600 frames of LAFAN1's ``walk3_subject1_walk`` (``lafan1-60fps``,
rooted at the hips); the target the Mixamo rig of ``genmm-examples/Joe_Walk-In-Circle.bvh`` (65 joints, T
pose). Each repeat retargets a fresh copy of the motion (its forward kinematics not yet
cached), foot IK on, through the same :class:`~motionmatch.anim.retarget.Retargeter`; the
first call (Numba's cached kernels loaded) is reported apart. Printed: the median time, the
fastest, and the median's ratio to the bar (under 1 meets it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from _common import data_root

BAR_S = 0.5
FRAMES = 3600


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = data_root(args.data)

    from motionmatch.anim import load_bvh
    from motionmatch.anim.retarget import Retargeter, reference_rig
    from motionmatch.anim.rig_edit import rooted_at

    path = root / "lafan1-60fps" / "walk3_subject1_walk.bvh"
    if not path.exists():
        raise SystemExit(f"{path} not found: the benchmark needs the shared LAFAN1 data (--data DIR)")
    source = rooted_at(load_bvh(path), "Hips")[:FRAMES]
    if source.num_frames < FRAMES:
        raise SystemExit(f"need {FRAMES} frames of LAFAN1 walks under {root / 'lafan1-60fps'}, found {source.num_frames}")
    target = load_bvh(root / "genmm-examples" / "Joe_Walk-In-Circle.bvh")
    retargeter = Retargeter(reference_rig(source), reference_rig(target))

    def once() -> float:
        fresh = source.copy()
        t0 = time.perf_counter()
        out = retargeter(fresh)
        dt = time.perf_counter() - t0
        assert np.all(np.isfinite(out.rotations))
        return dt

    first = once()
    times = [once() for _ in range(args.repeats)]
    med = statistics.median(times)
    result = {"frames": FRAMES, "target_joints": target.num_joints, "first_s": round(first, 4),
              "median_s": round(med, 4), "fastest_s": round(min(times), 4), "bar_s": BAR_S,
              "ratio_to_bar": round(med / BAR_S, 3)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"retarget {FRAMES} frames (1 min at 60 fps) onto a {target.num_joints}-joint rig, foot IK on: "
              f"median {med * 1000:.1f} ms, fastest {min(times) * 1000:.1f} ms (first call {first * 1000:.1f} ms); "
              f"{med / BAR_S:.3f} of the {BAR_S} s bar")


if __name__ == "__main__":
    main()
