"""Path following over several starts: the mean and spread of each path's numbers, and the
same runs with another source tree's code (before/after in one run).

    python benchmarks/bench_follow_spread.py [--jitter=-4,-2,0,2,4] [--tight] [--baseline TREE] [--json]

Motion matching on a large database is chaotic: a start facing one or two degrees off the
path's tangent sends a run down other clips, and a single run's mean distance moves by
several centimetres (the S-curve: 0.026 to 0.094 m over five such starts). One run per
path cannot tell a regression from noise, so this follows each path (the five of
``paths/``, and with ``--tight`` the tight set ``paths/tight/``) from starts facing
``--jitter`` degrees off the tangent, with the defaults, and prints per path the mean,
standard deviation and range of the mean distance (m) from the character's root ground
track to the drawn polyline over the whole run, how many runs completed, the share of
the drawn path passed within 0.5 m, and the time taken against the drawing's.

``--baseline TREE``: the same runs with the code of TREE (a source tree, e.g. a git
worktree of an older revision: ``git worktree add --detach ../base a5d2c0c``), run in a
subprocess with ``PYTHONPATH=TREE/src``, then both side by side with the ratio of the
means. Only APIs present since before issue 17 are used, so older trees run too.
The database: ``--db`` (a saved ``.npz``) or the mirrored LAFAN1 that
``bench_follow.py`` caches under ``out/follow/`` (built here when missing).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPO, data_root

PATHS = ("s_curve", "square", "zigzag", "circle", "figure_eight")
TIGHT = ("chicane", "hairpins", "loops", "slalom", "switchbacks")


def follow_all(db_file: Path, files: list[Path], jitters: list[float]) -> list[dict]:
    """One run per (path, start jitter) with the code on ``sys.path``; one dict each."""
    from motionmatch.control.path import load_path
    from motionmatch.control.revision import RevisionSettings
    from motionmatch.database import MotionDatabase
    from motionmatch.geometry.polyline import distance_to_path
    from motionmatch.runtime.follow import FollowSettings, PathFollower, default_v_max

    db = MotionDatabase.load(db_file)
    v_max = default_v_max(db)
    out = []
    for f in files:
        for j in jitters:
            path = load_path(f)
            t = path.tangents[0]
            c, s = math.cos(math.radians(j)), math.sin(math.radians(j))
            facing = np.array([c * t[0] + s * t[2], 0.0, -s * t[0] + c * t[2]])
            fl = PathFollower(db, path, FollowSettings(revision=RevisionSettings(v_max=v_max)), facing=facing)
            t0 = time.perf_counter()
            rec = fl.run()
            out.append({
                "path": f.stem, "jitter_deg": j, "mean_distance_m": float(rec.mean_distance),
                "completed": bool(rec.completed),
                "within_0_5m": float((distance_to_path(rec.path.input_points, rec.root) <= 0.5).mean()),
                "time_s": float(rec.completion_frame / rec.fps) if rec.completion_frame >= 0 else None,
                "drawn_s": float(rec.path.duration), "wall_s": time.perf_counter() - t0,
            })
            print(f"  {f.stem} {j:+g} deg: {out[-1]['mean_distance_m']:.3f} m", file=sys.stderr, flush=True)
    return out


def summary(runs: list[dict], names: tuple[str, ...]) -> dict[str, dict]:
    out = {}
    for n in names:
        rs = [r for r in runs if r["path"] == n]
        if not rs:
            continue
        m = np.array([r["mean_distance_m"] for r in rs])
        times = [r["time_s"] for r in rs if r["time_s"] is not None]
        out[n] = {"runs": len(rs), "mean_m": float(m.mean()), "sd_m": float(m.std(ddof=1)) if len(m) > 1 else 0.0,
                  "min_m": float(m.min()), "max_m": float(m.max()), "completed": sum(r["completed"] for r in rs),
                  "within_0_5m": float(np.mean([r["within_0_5m"] for r in rs])),
                  "time_s": float(np.mean(times)) if times else None, "drawn_s": rs[0]["drawn_s"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--db", help="a saved database (.npz); default: bench_follow's cache out/follow/lafan1_mirrored.npz")
    ap.add_argument("--jitter", default="-4,-2,0,2,4", help="start facings, degrees off the path's tangent")
    ap.add_argument("--tight", action="store_true", help="also the tight set paths/tight/")
    ap.add_argument("--only-tight", action="store_true", help="the tight set alone")
    ap.add_argument("--baseline", help="a source tree to run the same runs with (its src/ on PYTHONPATH)")
    ap.add_argument("--json", action="store_true", help="print the runs as JSON")
    args = ap.parse_args()
    jitters = [float(x) for x in args.jitter.split(",")]
    names = (() if args.only_tight else PATHS) + (TIGHT if args.tight or args.only_tight else ())
    files = [REPO / "paths" / f"{n}.json" if n in PATHS else REPO / "paths" / "tight" / f"{n}.json" for n in names]
    db_file = Path(args.db) if args.db else REPO / "out" / "follow" / "lafan1_mirrored.npz"
    if not db_file.exists():
        from motionmatch.database import MotionDatabase
        from motionmatch.datasets import load_folder

        db_file.parent.mkdir(parents=True, exist_ok=True)
        MotionDatabase.cached(db_file, load_folder(data_root(args.data) / "lafan1-60fps"), mirror_copies=True)
    base = None
    if args.baseline:
        tree = Path(args.baseline).resolve()
        cmd = [sys.executable, __file__, "--db", str(db_file), f"--jitter={args.jitter}", "--json"]
        cmd += ["--only-tight"] if args.only_tight else (["--tight"] if args.tight else [])
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        print(f"baseline: {tree} ...", file=sys.stderr, flush=True)
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
        if res.returncode:
            sys.exit(f"the baseline run failed:\n{res.stderr[-2000:]}")
        base = json.loads(res.stdout)
    runs = follow_all(db_file, files, jitters)
    if args.json:
        print(json.dumps(runs))
        return 0
    now = summary(runs, names)
    before = summary(base, names) if base is not None else None
    print(f"Mean distance (m) from the root's ground track to the drawn path over {len(jitters)} starts "
          f"(facing {args.jitter} deg off the tangent): mean +- sd [min-max], completed, share within 0.5 m, "
          f"time / drawn (s)")
    for label, summ in (("this tree", now), (f"baseline {args.baseline}", before)):
        if summ is None:
            continue
        print(f"\n{label}")
        for n, s in summ.items():
            t = f"{s['time_s']:.1f}" if s["time_s"] is not None else "-"
            print(f"  {n:<13} {s['mean_m']:.3f} +- {s['sd_m']:.3f} [{s['min_m']:.3f}-{s['max_m']:.3f}]  "
                  f"{s['completed']}/{s['runs']}  {s['within_0_5m']:.2f}  {t}/{s['drawn_s']:.1f}")
    if before is not None:
        print("\nratio of the means (this tree / baseline)")
        for n, s in now.items():
            if n in before:
                print(f"  {n:<13} {s['mean_m'] / before[n]['mean_m']:.2f}")
    if TIGHT[0] in now:
        ok = all(now[n]["completed"] == now[n]["runs"] and now[n]["mean_m"] <= 0.15 for n in TIGHT if n in now)
        print(f"\ntight set: every run completed and every path's mean <= 0.15 m: {'PASS' if ok else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
