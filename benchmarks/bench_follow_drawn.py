"""Table 2's ablation on paths drawn as people draw them (issue 33, item 7).

    python benchmarks/bench_follow_drawn.py [--db DB.npz] [--only NAME ...] [--configs KEY ...]
                                            [--plots DIR] [--json OUT.json] [--jobs N]

Follows every drawing of ``paths/drawn_by_hand/`` (recorded in the real page by
``scripts/record_drawings.py``: hand jitter, uneven speed, overshoots, corrections, a pause,
touchpad jitter), the five clean paths of ``paths/`` and the tight set ``paths/tight/`` with the classic LAFAN1 database
(default ``/work/cache/lafan.npz``, ``$MOTIONMATCH_DB``), LHMM(3, 3), local mode, tangent
facing, 60 Hz, ``v_max`` from the database, and prints one row per path and configuration:

* ``full``: the defaults (every revision of the paper on except the sharp-corner
  modification, off by default since this benchmark: see ``RevisionSettings.sharp_corners``);
* ``no_smoothing``: the path not smoothed;
* ``no_speed_limit``: no speed limit, nor turn limit;
* ``corners``: the paper's sharp-corner modification on (the paper's full method);
* ``raw``: the raw future query (current-time point, no limits, no corners, no smoothing).

Columns: mean and max distance (m) from the root to the drawn polyline, completed,
completion time against the drawn duration (s), foot skating (m/s of planted feet),
transitions per second; and each configuration's mean distance, time and skating as a
ratio to the full method's in the same run. Below: per configuration, on how many paths
it is worse than the full method (fail, or >= 10% and 5 mm farther) and better (10% and 5
mm nearer, completed), and the geometric means of its ratios over the drawn and the clean
paths. ``--plots DIR``: one PNG per path with every configuration's root path.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPO

CLEAN = ("s_curve", "square", "zigzag", "circle", "figure_eight")
DRAWN_DIR = REPO / "paths" / "drawn_by_hand"
# key: (label, smoothing, revision changes)
CONFIGS = {
    "full": ("Proposed (full)", True, {}),
    "no_smoothing": ("No input path smoothing", False, {}),
    "no_speed_limit": ("No speed limit (nor turn limit)", True, {"speed_limit": False, "turn_limit": False}),
    "corners": ("With the paper's sharp-corner modification", True, {"sharp_corners": True}),
    "raw": ("Raw future query", False, {"desired": "current", "speed_limit": False, "turn_limit": False,
                                        "steer": False}),
}


def path_files(only: list[str] | None) -> list[tuple[str, Path]]:
    drawn = sorted(DRAWN_DIR.glob("*.json"))
    files = [(f"drawn/{f.stem}", f) for f in drawn] + [(f"clean/{n}", REPO / "paths" / f"{n}.json") for n in CLEAN]
    files += [(f"tight/{f.stem}", f) for f in sorted((REPO / "paths" / "tight").glob("*.json"))]
    if only:
        files = [(n, f) for n, f in files if n.split("/")[-1] in only or n in only]
    return files


_DB = {}


def _database(db_file: str):
    if db_file not in _DB:
        from motionmatch.database import MotionDatabase

        _DB[db_file] = MotionDatabase.load(db_file)
    return _DB[db_file]


def run_one(db_file: str, path_file: str, key: str, start_deg: float = 0.0) -> dict:
    """One run: the follow report, wall seconds, and the root path (for the figures); the
    character starts facing ``start_deg`` degrees off the path's first tangent."""
    from motionmatch.control.path import load_path
    from motionmatch.control.revision import RevisionSettings
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower, default_v_max

    db = _database(db_file)
    _label, smooth, rev = CONFIGS[key]
    path = load_path(path_file, smooth=smooth)
    settings = FollowSettings(revision=RevisionSettings(v_max=default_v_max(db), **rev))
    facing = None
    if start_deg:
        t = path.tangents[0]
        c, s = math.cos(math.radians(start_deg)), math.sin(math.radians(start_deg))
        facing = np.array([c * t[0] + s * t[2], 0.0, -s * t[0] + c * t[2]])
    f = PathFollower(db, path, settings, name=Path(path_file).stem, facing=facing)
    t0 = time.perf_counter()
    rec = f.run()
    rep = follow_report(rec)
    rep["wall_s"] = time.perf_counter() - t0
    rep["root_xz"] = rec.root[:, [0, 2]].round(3).tolist()
    rep["input_xz"] = rec.path.input_points[:, [0, 2]].round(3).tolist()
    return rep


def combine(runs: list[dict]) -> dict:
    """Runs of one path and configuration from several starts: the first run's root path
    (figures), the mean of each number (the max of max distances), completed if all were;
    ``runs``: every run's numbers."""
    out = dict(runs[0])
    for k in ("mean_distance_m", "foot_skating_mps", "transitions_per_s", "wall_s", "path_duration_s"):
        out[k] = float(np.mean([r[k] for r in runs]))
    out["max_distance_m"] = float(max(r["max_distance_m"] for r in runs))
    out["completed"] = all(r["completed"] for r in runs)
    times = [r["completion_time_s"] for r in runs]
    out["completion_time_s"] = float(np.mean(times)) if all(times) else None
    out["runs"] = [{k: v for k, v in r.items() if k not in ("root_xz", "input_xz")} for r in runs]
    return out


def worse(r: dict, base: dict) -> bool:
    if not r["completed"]:
        return bool(base["completed"])
    return r["mean_distance_m"] >= base["mean_distance_m"] * 1.10 and r["mean_distance_m"] >= base["mean_distance_m"] + 0.005


def better(r: dict, base: dict) -> bool:
    if not r["completed"]:
        return False
    if not base["completed"]:
        return True
    return r["mean_distance_m"] <= base["mean_distance_m"] / 1.10 and r["mean_distance_m"] <= base["mean_distance_m"] - 0.005


def gmean(xs) -> float:
    xs = [x for x in xs if x and math.isfinite(x) and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def figure(png: Path, name: str, runs: dict) -> None:
    """A panel per configuration: the drawn path dashed, the root path solid (red: not completed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(runs), 4.3), dpi=80)
    FigureCanvasAgg(fig)
    for i, (key, r) in enumerate(runs.items()):
        ax = fig.add_subplot(1, len(runs), i + 1)
        p, q = np.asarray(r["input_xz"]), np.asarray(r["root_xz"])
        ax.plot(p[:, 0], p[:, 1], ".--", color="0.55", lw=0.8, ms=1.5)
        ax.plot(q[:, 0], q[:, 1], "-", color="C0" if r["completed"] else "C3", lw=1.4)
        ax.plot(q[:1, 0], q[:1, 1], "o", color="k", ms=4)
        ax.set_title(f"{key}\nmean {r['mean_distance_m']:.3f} m, max {r['max_distance_m']:.2f} m", fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
        ax.invert_xaxis()
        ax.tick_params(labelsize=7)
        ax.grid(True, color="0.92")
    fig.suptitle(f"{name}: drawn path (dashed, its events as dots) and root path, top view, m")
    fig.tight_layout()
    fig.savefig(png, format="png")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=os.environ.get("MOTIONMATCH_DB", "/work/cache/lafan.npz"))
    ap.add_argument("--only", nargs="+", help="path names (e.g. zigzag pad_loop)")
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--plots", help="folder for one PNG per path")
    ap.add_argument("--json", help="write every number (and root paths) here")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1: the machine is shared)")
    ap.add_argument("--starts", default="0", help="start facings, degrees off the path's tangent (e.g. -4,0,4): "
                    "each run is repeated from each, and the tables show means over them (motion matching "
                    "on a large database is chaotic: a start 2 degrees off can change a run by centimetres)")
    args = ap.parse_args()
    if not Path(args.db).exists():
        sys.exit(f"--db {args.db}: not found (build it: motionmatch build lafan1-60fps -o {args.db})")
    files = path_files(args.only)
    if not files:
        sys.exit("no paths: run python scripts/record_drawings.py (paths/drawn_by_hand/) or check --only")
    configs = ["full", *[c for c in args.configs if c != "full"]]
    starts = [float(x) for x in args.starts.split(",")]
    jobs = [(name, str(f), key, j) for name, f in files for key in configs for j in starts]
    t0 = time.perf_counter()
    single: dict[tuple, dict] = {}
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as ex:
            futs = [((n, k, j), ex.submit(run_one, args.db, f, k, j)) for n, f, k, j in jobs]
            for key, fut in futs:
                single[key] = fut.result()
    else:
        for i, (n, f, k, j) in enumerate(jobs):
            single[(n, k, j)] = run_one(args.db, f, k, j)
            print(f"  [{i + 1}/{len(jobs)}] {n} {k} {j:g} deg: {single[(n, k, j)]['mean_distance_m']:.3f} m",
                  file=sys.stderr, flush=True)
    results: dict[str, dict[str, dict]] = {}
    for name, _f in files:
        for k in configs:
            results.setdefault(name, {})[k] = combine([single[(name, k, j)] for j in starts])
    wall = time.perf_counter() - t0
    report(results, configs, args.db, wall, starts)
    if args.plots:
        out = Path(args.plots)
        out.mkdir(parents=True, exist_ok=True)
        for n, runs in results.items():
            figure(out / f"{n.replace('/', '_')}.png", n, runs)
        print(f"\nfigures: {out}/<set>_<path>.png")
    if args.json:
        Path(args.json).write_text(json.dumps(results, default=float))
    return 0


def report(results: dict, configs: list[str], db: str, wall: float, starts: list[float]) -> None:
    print(f"Path following on {db}: LHMM(3,3), local mode, tangent facing, 60 Hz; {len(results)} paths x "
          f"{len(configs)} configurations x {len(starts)} start(s) ({', '.join(f'{j:g}' for j in starts)} deg off "
          f"the tangent; means over them) in {wall:.0f} s\n")
    print(f"{'path':<22}{'configuration':<17}{'mean m':>8}{'max m':>7}{'done':>6}{'time/drawn s':>14}"
          f"{'skate m/s':>10}{'trans/s':>8}{'x mean':>8}{'x time':>8}{'x skate':>8}")
    for n, runs in results.items():
        base = runs["full"]
        for k in configs:
            r = runs[k]
            tm = r["completion_time_s"]
            ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
            print(f"{n if k == 'full' else '':<22}{k:<17}{r['mean_distance_m']:>8.3f}{r['max_distance_m']:>7.2f}"
                  f"{'yes' if r['completed'] else 'NO':>6}"
                  f"{(f'{tm:.1f}' if tm else '-') + '/' + format(r['path_duration_s'], '.1f'):>14}"
                  f"{r['foot_skating_mps']:>10.3f}{r['transitions_per_s']:>8.2f}"
                  f"{ratio(r['mean_distance_m'], base['mean_distance_m']):>8}"
                  f"{ratio(tm, base['completion_time_s']):>8}"
                  f"{ratio(r['foot_skating_mps'], base['foot_skating_mps']):>8}")
    print("\nAgainst the full method (worse: fail, or >= 10% and 5 mm farther; better: 10% and 5 mm nearer):")
    print(f"{'configuration':<17}{'set':<7}{'worse on':>9}{'better on':>10}{'failed':>7}{'gmean x mean':>13}"
          f"{'gmean x max':>12}{'gmean x skate':>14}")
    for k in configs[1:]:
        for s in ("drawn", "clean", "tight"):
            names = [n for n in results if n.startswith(s + "/")]
            if not names:
                continue
            w = [n.split("/")[1] for n in names if worse(results[n][k], results[n]["full"])]
            b = [n.split("/")[1] for n in names if better(results[n][k], results[n]["full"])]
            fails = sum(not results[n][k]["completed"] for n in names)
            gm = gmean(results[n][k]["mean_distance_m"] / results[n]["full"]["mean_distance_m"] for n in names)
            gx = gmean(results[n][k]["max_distance_m"] / results[n]["full"]["max_distance_m"] for n in names)
            gs = gmean(results[n][k]["foot_skating_mps"] / results[n]["full"]["foot_skating_mps"] for n in names)
            print(f"{k:<17}{s:<7}{len(w):>4}/{len(names):<4}{len(b):>5}/{len(names):<4}{fails:>7}{gm:>13.2f}"
                  f"{gx:>12.2f}{gs:>14.2f}")
            if w:
                print(f"{'':<24}worse: {', '.join(w)}")
            if b:
                print(f"{'':<24}better: {', '.join(b)}")
    full_fail = [n for n in results if not results[n]["full"]["completed"]]
    print(f"\nfull method: completed {len(results) - len(full_fail)}/{len(results)}"
          + (f" (not: {', '.join(full_fail)})" if full_fail else ""))


if __name__ == "__main__":
    sys.exit(main())
