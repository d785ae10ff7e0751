"""Facing along drawn paths (issue 33, item 8): tangent, joystick and two DirectionNets, same run.

    python benchmarks/bench_facing.py --old OLD.npz [--new NEW.npz] [--db DB.npz] [--drawn]
                                      [--only NAME ...] [--configs KEY ...] [--starts -4,0,4]

Follows the five clean paths of ``paths/`` (and, with ``--drawn``, the drawings of
``paths/drawn_by_hand/``) with the classic LAFAN1 database (default
``/work/cache/lafan.npz``, ``$MOTIONMATCH_DB``), LHMM(3, 3), local mode, 60 Hz, ``v_max``
from the database, once per facing:

* ``tangent``: the path's tangent (with the follower's steering back toward the path);
* ``tangent_no_steer``: the path's tangent alone (the paper's Eq. 2);
* ``joystick``: the tangent turned 30 degrees right (a joystick held there);
* ``net_old``: DirectionNet of the first format (``--old``: the facing enters only as the
  frame, nothing fed back), its frame the character's facing (as before issue 33);
* ``net_old_plan``: the same network, its frame the facing it planned itself;
* ``net_new_char``: DirectionNet as the paper has it, past facings fed back (``--new``;
  default: the default network, trained on first use and cached), reading the
  character's past facings (``FollowSettings.net_feedback="character"``);
* ``net_new``: the same network reading its own planned facings (``"plan"``, the default).

Prints per path and facing the mean distance (m) from the root to the drawn polyline
(means over ``--starts``), whether it completed, and the mean angle (degrees) between the
character's facing and its travel over frames moving at 0.5 m/s or more; then each
facing's mean over the paths.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPO

CLEAN = ("s_curve", "square", "zigzag", "circle", "figure_eight")
# key: (revision settings, network, follow settings)
CONFIGS = {
    "tangent": ({"facing": "tangent"}, None, {}),
    "tangent_no_steer": ({"facing": "tangent", "steer": False}, None, {}),
    "joystick": ({"facing": "joystick", "joystick_deg": 30.0}, None, {}),
    "net_old": ({"facing": "net", "steer": False}, "old", {"net_feedback": "character"}),
    "net_old_steer": ({"facing": "net"}, "old", {"net_feedback": "character"}),
    "net_old_plan": ({"facing": "net"}, "old", {"net_feedback": "plan"}),
    "net_new_char": ({"facing": "net"}, "new", {"net_feedback": "character"}),
    "net_new_no_steer": ({"facing": "net", "steer": False}, "new", {"net_feedback": "plan"}),
    "net_new": ({"facing": "net"}, "new", {"net_feedback": "plan"}),
}


def facing_vs_travel(rec) -> float:
    """Mean angle (degrees) between the character's facing and its travel (frames >= 0.5 m/s)."""
    from motionmatch.anim import quat

    yaw = quat.yaw_angle(rec.motion.rotations[:, 0])
    v = np.diff(rec.root, axis=0) * rec.fps
    moving = np.hypot(v[:, 0], v[:, 2]) >= 0.5
    d = np.abs((yaw[:-1] - np.arctan2(v[:, 0], v[:, 2]) + np.pi) % (2 * np.pi) - np.pi)
    return float(np.degrees(d[moving].mean())) if moving.any() else float("nan")


def run_one(db, path_file: Path, rev: dict, net, follow: dict, start_deg: float) -> dict:
    from motionmatch.control.path import load_path
    from motionmatch.control.revision import RevisionSettings
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower, default_v_max

    path = load_path(path_file)
    settings = FollowSettings(revision=RevisionSettings(v_max=default_v_max(db), **rev), **follow)
    facing = None
    if start_deg:
        t = path.tangents[0]
        c, s = math.cos(math.radians(start_deg)), math.sin(math.radians(start_deg))
        facing = np.array([c * t[0] + s * t[2], 0.0, -s * t[0] + c * t[2]])
    f = PathFollower(db, path, settings, name=path_file.stem, facing=facing, facing_net=net)
    t0 = time.perf_counter()
    rec = f.run()
    rep = follow_report(rec)
    rep["wall_s"] = time.perf_counter() - t0
    rep["facing_vs_travel_deg"] = facing_vs_travel(rec)
    return rep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=os.environ.get("MOTIONMATCH_DB", "/work/cache/lafan.npz"))
    ap.add_argument("--old", help="a DirectionNet of the first format (net_old; skipped without)")
    ap.add_argument("--new", help="a DirectionNet with feedback (default: the default network, cached)")
    ap.add_argument("--drawn", action="store_true", help="also the drawings of paths/drawn_by_hand/")
    ap.add_argument("--only", nargs="+", help="path names")
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--starts", default="0", help="start facings, degrees off the path's tangent (e.g. -4,0,4)")
    args = ap.parse_args()
    from motionmatch.control.direction_net import DirectionNet
    from motionmatch.database import MotionDatabase

    db = MotionDatabase.load(args.db)
    nets = {}
    configs = list(args.configs)
    if any(CONFIGS[k][1] == "old" for k in configs):
        if args.old:
            nets["old"] = DirectionNet.load(args.old)
            if nets["old"].config.feedback:
                sys.exit(f"--old {args.old}: this network feeds facings back (the new format)")
        else:
            configs = [k for k in configs if CONFIGS[k][1] != "old"]
    if any(CONFIGS[k][1] == "new" for k in configs):
        if args.new:
            nets["new"] = DirectionNet.load(args.new)
        else:
            from motionmatch.control.direction_cache import default_direction_net

            nets["new"] = default_direction_net(progress=True)
    files = [(n, REPO / "paths" / f"{n}.json") for n in CLEAN]
    if args.drawn:
        files += [(f"drawn/{f.stem}", f) for f in sorted((REPO / "paths" / "drawn_by_hand").glob("*.json"))]
    if args.only:
        files = [(n, f) for n, f in files if n in args.only or n.split("/")[-1] in args.only]
    starts = [float(x) for x in args.starts.split(",")]
    t0 = time.perf_counter()
    res: dict[str, dict[str, dict]] = {}
    for name, f in files:
        for key in configs:
            rev, which, follow = CONFIGS[key]
            runs = [run_one(db, f, rev, nets.get(which), follow, j) for j in starts]
            res.setdefault(name, {})[key] = {
                "mean_distance_m": float(np.mean([r["mean_distance_m"] for r in runs])),
                "completed": all(r["completed"] for r in runs),
                "facing_vs_travel_deg": float(np.mean([r["facing_vs_travel_deg"] for r in runs])),
            }
            print(f"  {name} {key}: {res[name][key]['mean_distance_m']:.3f} m", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    print(f"Facing on {args.db}: LHMM(3,3), local mode, 60 Hz; {len(files)} paths x {len(configs)} facings x "
          f"{len(starts)} start(s) ({', '.join(f'{j:g}' for j in starts)} deg) in {wall:.0f} s")
    print("mean distance (m) | mean angle between facing and travel (deg); (fail): not completed\n")
    w = 16
    print(f"{'path':<22}" + "".join(f"{k:>{w}}" for k in configs))
    for name, runs in res.items():
        cells = []
        for k in configs:
            r = runs[k]
            c = f"{r['mean_distance_m']:.3f} | {r['facing_vs_travel_deg']:.0f}"
            cells.append(c if r["completed"] else f"(fail) {c}")
        print(f"{name:<22}" + "".join(f"{c:>{w}}" for c in cells))
    for label, names in (("clean mean", [n for n, _ in files if "/" not in n]),
                         ("drawn mean", [n for n, _ in files if n.startswith("drawn/")])):
        if names:
            print(f"{label:<22}" + "".join(f"{np.mean([res[n][k]['mean_distance_m'] for n in names]):>{w}.3f}"
                                           for k in configs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
