"""Path following: the paper's Tables 1 and 2 (LHMM timing, ablations of the query revision).

    python benchmarks/bench_follow.py [--data DIR] [--paths DIR] [--out DIR] [--json] [--no-figures] [--no-dance]
                                      [--no-tight] [--no-facing]

Builds a mirrored LAFAN1 database (``lafan1-60fps``, ~108k frames at 60 fps, classic
27-D features) and a second one whose queries have nine future samples (the paper's "BMM
with longer queries", 51-D), then follows every test path of ``paths/`` (S-curve,
square, zigzag, circle with rising speed, figure-eight) at 60 Hz in local mode with
tangent facings and prints:

* **Table 2** (the paper's): the mean distance (m) from the character's root to the input
  path, per path, for the full method (LHMM(3, 3), every revision on) and each ablation
  row: no smoothing; desired position = the current frame's path point; desired position
  = the nearest path point; no speed limit; with the sharp-corner modification (off by default since
  issue 33: benchmarks/bench_follow_drawn.py); the raw future
  query. ``(fail)`` marks a path not completed (the desired position never reached the
  end, or the root skipped part of the path). Below it: BMM, LHMM(10, 3), BMM with longer
  queries, and the full method with the controller's root pull on; then transitions per
  second (smoothness) for the same runs, and which ablations are worse than the full method
  where (worse: a failure, or a mean distance larger by at least 10% and 5 mm).
* **Table 1**: milliseconds per match (median, mean, p95 over all matches of all paths)
  and k-NN searches per match of LHMM(3, 3), BMM, BMM with longer queries and LHMM(10, 3),
  with ratios to BMM measured in the same run. Bars: LHMM(3, 3) median under 2 ms, BMM
  under 0.3 ms.
* **Our additions**: ablations of the turn limit, of the capped smoothing blur, of
  revising the query every frame instead of once per match (the paper's), of braking
  ahead of turns, of the pace bounds on the desired position and of the facings along
  the query (``steer``); the tight, fast path set ``paths/tight/`` (turns of radius
  0.3-0.5 m drawn at 3-4.5 m/s) with the defaults, the same ablations and the method
  before issue 17 (single runs: ``bench_follow_spread.py`` gives means and spreads over
  several starts); and the
  facing comparison of Section VIII-C (tangent, joystick held 30 degrees right,
  the default DirectionNet, trained on first use and cached): mean distance, the angle between facing and
  travel, and DirectionNet's error on held-out clips (subject 4) against the tangent's.
* Several characters at once (four paths stepped together), and **Section VIII-D**:
  the same paths with a dance-only database (LAFAN1's dance clips, mirrored).

Figures: one PNG per path with the input path and the root path of every configuration
(``--out``, default ``out/follow/`` in the repository, which git ignores).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPO, data_root
from motionmatch.anim import quat
from motionmatch.control.direction_cache import default_direction_net
from motionmatch.control.direction_net import facing_errors, tracks_from_database
from motionmatch.control.path import load_path
from motionmatch.control.revision import RevisionSettings
from motionmatch.database import MotionDatabase, default_schema
from motionmatch.datasets import load_folder
from motionmatch.geometry.polyline import distance_to_path
from motionmatch.metrics.follow import follow_report
from motionmatch.runtime.controller import ControllerSettings
from motionmatch.runtime.follow import FollowSettings, PathFollower, default_v_max, run_followers

PATHS = ("s_curve", "square", "zigzag", "circle", "figure_eight")
LONG_OFFSETS = tuple((i + 1) / 9 for i in range(9))

# name: (label, smoothing, revision changes, follow-settings changes, database)
ABLATIONS = {
    "full": ("Proposed (full), LHMM(3,3)", True, {}, {}, "main"),
    "no_smoothing": ("No input path smoothing", False, {}, {}, "main"),
    "current_point": ("No desired pos. comp. (current frame point)", True, {"desired": "current"}, {}, "main"),
    "nearest_point": ("No desired pos. comp. (nearest path point)", True, {"desired": "nearest"}, {}, "main"),
    "no_speed_limit": ("No speed limit (nor turn limit)", True, {"speed_limit": False, "turn_limit": False}, {},
                       "main"),
    "corners": ("With the sharp-corner modification (off by default)", True, {"sharp_corners": True}, {}, "main"),
    "raw": ("Raw future query", False, {"desired": "current", "speed_limit": False, "turn_limit": False}, {},
            "main"),
    # ours, beyond the paper's table
    "no_turn_limit": ("No turn limit (ours)", True, {"turn_limit": False}, {}, "main"),
    "uncapped_smoothing": ("Smoothing blur not capped (ours)", {"max_blur": None}, {}, {}, "main"),
    "per_frame": ("Query revised every frame", True, {}, {"revise_every_frame": True}, "main"),
    "no_braking": ("No braking before turns (ours)", True, {"brake_accel": 1e9}, {}, "main"),
    "no_pace": ("No pace bounds on the desired position (ours)", True, {"min_pace": None, "max_pace": None}, {},
                "main"),
    "no_steer": ("Facings along the path, not the query (ours)", True, {"steer": False}, {}, "main"),
}
EXTRAS = {
    "bmm": ("BMM(1,1)", True, {}, {"k": 1, "levels": 1}, "main"),
    "lhmm_10_3": ("LHMM(10,3)", True, {}, {"k": 10}, "main"),
    "bmm_long": ("BMM with longer queries (9 samples)", True, {}, {"k": 1, "levels": 1}, "long"),
    "root_pull": ("Full, with the controller's root pull", True, {},
                  {"controller": ControllerSettings(adjust_halflife=0.2)}, "main"),
}
TIMING = ("full", "bmm", "bmm_long", "lhmm_10_3")
# the tight set: the defaults, per-frame revision, and the method as it was before issue 17
# (per-frame revision, no turn limit, the paper's smoothing uncapped)
TIGHT_CONFIGS = {
    "full": ("Defaults", True, {}, {}),
    "per_frame": ("Query revised every frame", True, {}, {"revise_every_frame": True}),
    "no_turn_limit": ("No turn limit", True, {"turn_limit": False}, {}),
    "no_braking": ("No braking before turns", True, {"brake_accel": 1e9}, {}),
    "no_pace": ("No pace bounds on the desired position", True, {"min_pace": None, "max_pace": None}, {}),
    "no_steer": ("Facings along the path, not the query", True, {"steer": False}, {}),
    "before": ("Before issue 17 (per frame, no turn limit, uncapped)", {"max_blur": None},
               {"turn_limit": False, "min_pace": None, "max_pace": None, "steer": False}, {"revise_every_frame": True}),
}
TIGHT = ("chicane", "hairpins", "loops", "slalom", "switchbacks")
FACING = {
    "tangent": ("Tangential direction", {"facing": "tangent"}),
    "joystick": ("Joystick (held 30 deg right)", {"facing": "joystick", "joystick_deg": 30.0}),
    "net": ("DirectionNet (default)", {"facing": "net"}),
}
HOLDOUT = "subject4"


def facing_vs_travel(rec) -> float:
    """Mean angle (degrees) between the character's facing and its direction of travel,
    over the frames it moves at 0.5 m/s or more."""
    yaw = quat.yaw_angle(rec.motion.rotations[:, 0])
    v = np.diff(rec.root, axis=0) * rec.fps
    moving = np.hypot(v[:, 0], v[:, 2]) >= 0.5
    travel = np.arctan2(v[:, 0], v[:, 2])
    d = np.abs((yaw[:-1] - travel + np.pi) % (2 * np.pi) - np.pi)
    return float(np.degrees(d[moving].mean())) if moving.any() else float("nan")


def run_config(db, path_file: Path, smooth: bool | dict, rev: dict, follow: dict, v_max: float, **kwargs):
    load = smooth if isinstance(smooth, dict) else {"smooth": smooth}
    path = load_path(path_file, **load)
    settings = FollowSettings(revision=RevisionSettings(v_max=v_max, **rev), **follow)
    f = PathFollower(db, path, settings, name=path_file.stem, **kwargs)
    f.ctrl.searcher()  # build the search structure before timing
    t0 = time.perf_counter()
    rec = f.run()
    wall = time.perf_counter() - t0
    return rec, follow_report(rec), wall


def figure(png: Path, name: str, path: np.ndarray, runs: dict) -> None:
    """One PNG per path: a panel per configuration, the input path dashed, the root path solid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = len(runs)
    cols = 4
    rows = -(-n // cols)
    fig = Figure(figsize=(4 * cols, 4 * rows), dpi=80)
    FigureCanvasAgg(fig)
    for i, (label, (root, r)) in enumerate(runs.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.plot(path[:, 0], path[:, 2], "--", color="0.5", lw=1.2)
        ax.plot(root[:, 0], root[:, 2], "-", color="C0" if r["completed"] else "C3", lw=1.5)
        ax.plot(root[:1, 0], root[:1, 2], "o", color="k", ms=4)
        ax.set_title(f"{label}\n{cell(r)} m", fontsize=9)
        ax.set_aspect("equal", adjustable="datalim")
        ax.invert_yaxis()
        ax.tick_params(labelsize=7)
        ax.grid(True, color="0.92")
    fig.suptitle(f"{name}: input path (dashed) and root path (blue; red: not completed), top view, metres")
    fig.tight_layout()
    fig.savefig(png, format="png")


def worse(r: dict, base: dict) -> bool:
    if not r["completed"]:
        return True
    return r["mean_distance_m"] >= base["mean_distance_m"] * 1.10 and r["mean_distance_m"] >= base["mean_distance_m"] + 0.005


def cell(r: dict) -> str:
    return f"{r['mean_distance_m']:.3f}" if r["completed"] else f"(fail) {r['mean_distance_m']:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--paths", default=str(REPO / "paths"), help="folder of the test paths (default paths/)")
    ap.add_argument("--out", default=str(REPO / "out" / "follow"), help="folder for the figures")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--no-dance", action="store_true", help="skip the dance-database runs")
    ap.add_argument("--no-tight", action="store_true", help="skip the tight, fast set (paths/tight/)")
    ap.add_argument("--no-facing", action="store_true", help="skip the facing comparison")
    ap.add_argument("--json", action="store_true", help="print a JSON summary instead of tables")
    args = ap.parse_args()
    root = data_root(args.data)
    folder = Path(args.paths)
    files = [folder / f"{n}.json" for n in PATHS]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        sys.exit(f"missing test paths {missing}: run python paths/make_paths.py")

    t0 = time.perf_counter()
    clips = load_folder(root / "lafan1-60fps")
    cache = Path(args.out)
    cache.mkdir(parents=True, exist_ok=True)
    # built once, then loaded (MotionDatabase.cached checks the clips and settings it was built from)
    dbs = {"main": MotionDatabase.cached(cache / "lafan1_mirrored.npz", clips, mirror_copies=True)}
    build_main = time.perf_counter() - t0
    dbs["long"] = MotionDatabase.cached(cache / "lafan1_mirrored_long.npz", clips, mirror_copies=True,
                                        schema=default_schema(offsets=LONG_OFFSETS))
    v_max = default_v_max(dbs["main"])
    out: dict = {"database_frames": dbs["main"].num_frames, "build_s": build_main, "v_max_mps": v_max, "runs": {}}
    configs = {**ABLATIONS, **EXTRAS}
    records: dict[str, dict[str, tuple]] = {}
    inputs: dict[str, np.ndarray] = {}
    for key, (label, smooth, rev, follow, which) in configs.items():
        for f in files:
            rec, rep, wall = run_config(dbs[which], f, smooth, rev, follow, v_max)
            rep["wall_s"] = wall
            rep["match_ms"] = (rec.match_seconds * 1e3).tolist()
            out["runs"].setdefault(key, {})[f.stem] = rep
            records.setdefault(f.stem, {})[label] = (rec.root, rep)
            inputs[f.stem] = rec.path.input_points
        print(f"  ran {label}", file=sys.stderr, flush=True)

    # several characters at once
    followers = [PathFollower(dbs["main"], load_path(f), FollowSettings(revision=RevisionSettings(v_max=v_max)),
                              position=(4.0 * i, 0.0, 0.0)) for i, f in enumerate(files[:4])]
    for f in followers:
        f.ctrl.searcher()
    t1 = time.perf_counter()
    multi = run_followers(followers)
    multi_wall = time.perf_counter() - t1
    frames = max(r.motion.num_frames for r in multi)
    out["multi"] = {"characters": len(multi), "frames": frames, "ms_per_frame_all": multi_wall / frames * 1e3,
                    "mean_distance_m": [r.mean_distance for r in multi], "completed": [r.completed for r in multi]}

    # the tight, fast set of our own (paths/tight/): the defaults, and the method before issue 17
    tight_files = sorted((folder / "tight").glob("*.json")) if not args.no_tight else []
    if tight_files:
        out["tight"] = {}
        for key, (label, smooth, rev, follow) in TIGHT_CONFIGS.items():
            for f in tight_files:
                rec, rep, _ = run_config(dbs["main"], f, smooth, rev, follow, v_max)
                rep["within_0_5m"] = float((distance_to_path(rec.path.input_points, rec.root) <= 0.5).mean())
                out["tight"].setdefault(key, {})[f.stem] = rep
                records.setdefault(f"tight_{f.stem}", {})[label] = (rec.root, rep)
                inputs[f"tight_{f.stem}"] = rec.path.input_points
        print("  ran the tight set", file=sys.stderr, flush=True)

    # facing: tangent, joystick (held 30 degrees right), DirectionNet (the default one: trained
    # on first use from $MOTIONMATCH_DATA/lafan1-60fps and cached; needs PyTorch the first time)
    if not args.no_facing:
        net = default_direction_net(progress=True)
        out["facing"] = {}
        for key, (_label, rev) in FACING.items():
            for f in files:
                rec, rep, _ = run_config(dbs["main"], f, True, rev, {}, v_max, facing_net=net if key == "net" else None)
                rep["facing_vs_travel_deg"] = facing_vs_travel(rec)
                out["facing"].setdefault(key, {})[f.stem] = rep
        test = tracks_from_database(dbs["main"], holdout=HOLDOUT, heldout=True)
        out["facing_heldout"] = facing_errors(net, test)
        print("  ran the facing comparison", file=sys.stderr, flush=True)

    # Section VIII-D: a dance-only database
    if not args.no_dance:
        dance = [c for c in clips if "dance" in c.tags]
        ddb = MotionDatabase.build(dance, mirror_copies=True)
        dv = default_v_max(ddb, tags=None)
        out["dance"] = {"database_frames": ddb.num_frames, "v_max_mps": dv, "runs": {}}
        for f in files:
            path = load_path(f)
            fl = PathFollower(ddb, path, FollowSettings(tags="*", revision=RevisionSettings(v_max=dv)))
            rec = fl.run()
            out["dance"]["runs"][f.stem] = follow_report(rec)
            records[f.stem]["dance database"] = (rec.root, out["dance"]["runs"][f.stem])

    if not args.no_figures:
        outdir = Path(args.out)
        outdir.mkdir(parents=True, exist_ok=True)
        for name, runs in records.items():
            figure(outdir / f"{name}.png", name, inputs[name], runs)
        out["figures"] = str(outdir)

    if args.json:
        print(json.dumps(out, indent=2, default=float))
        return 0
    report(out, configs)
    return 0


def report(out: dict, configs: dict) -> None:
    runs = out["runs"]
    print(f"Path following on a mirrored LAFAN1 database ({out['database_frames']} frames, built or loaded in "
          f"{out['build_s']:.1f} s), 60 Hz, matches every 1/6 s, local mode, tangent facing, v_max "
          f"{out['v_max_mps']:.2f} m/s (95th percentile of the data's speeds)\n")
    w = 16
    print("Table 2: mean distance (m) between the input path and the character's root path")
    print(f"{'configuration':<46}" + "".join(f"{n:>{w}}" for n in PATHS))
    for key, (label, *_rest) in configs.items():
        if key == "bmm":
            print("-" * (46 + w * len(PATHS)))
        print(f"{label:<46}" + "".join(f"{cell(runs[key][n]):>{w}}" for n in PATHS))
    print("\nTransitions per second (smoothness: fewer is calmer)")
    for key, (label, *_rest) in configs.items():
        print(f"{label:<46}" + "".join(f"{runs[key][n]['transitions_per_s']:>{w}.2f}" for n in PATHS))
    full = runs["full"]
    print("\nAblations against the full method (worse: fail, or >= 10% and 5 mm farther):")
    for key in list(ABLATIONS)[1:]:
        bad = [n for n in PATHS if worse(runs[key][n], full[n])]
        label = ABLATIONS[key][0]
        print(f"  {label:<46} worse on {', '.join(bad) if bad else 'NO path'}")
    ok = all(full[n]["completed"] and full[n]["mean_distance_m"] <= 0.15 for n in PATHS)
    print(f"  full method: completes every path with mean distance <= 0.15 m: {'PASS' if ok else 'FAIL'} "
          f"(max {max(full[n]['mean_distance_m'] for n in PATHS):.3f} m)")

    print("\nTable 1: time per match (over all matches of all paths) and k-NN searches per match")
    print(f"{'configuration':<40}{'median ms':>11}{'mean ms':>10}{'p95 ms':>9}{'k-NN/match':>12}"
          f"{'x BMM':>8}{'matches':>9}")
    stats = {}
    for key in TIMING:
        ms = np.concatenate([runs[key][n]["match_ms"] for n in PATHS])
        calls = sum(runs[key][n]["knn_calls"] for n in PATHS)
        stats[key] = (float(np.median(ms)), float(ms.mean()), float(np.percentile(ms, 95)), calls / len(ms), len(ms))
    med = {key: v[0] for key, v in stats.items()}
    for key in TIMING:
        m50, mean, p95, per, n = stats[key]
        print(f"{configs[key][0]:<40}{m50:>11.3f}{mean:>10.3f}{p95:>9.3f}{per:>12.1f}{m50 / med['bmm']:>8.1f}{n:>9}")
    print(f"  LHMM(3,3) median {med['full']:.3f} ms (bar < 2 ms): {'PASS' if med['full'] < 2 else 'FAIL'}; "
          f"BMM {med['bmm']:.3f} ms (bar < 0.3 ms): {'PASS' if med['bmm'] < 0.3 else 'FAIL'}")
    m = out["multi"]
    print(f"\n{m['characters']} characters at once, LHMM(3,3): {m['ms_per_frame_all']:.2f} ms per frame for all "
          f"(60 Hz budget 16.7 ms); mean distances " + ", ".join(f"{d:.3f}" for d in m["mean_distance_m"])
          + f"; completed {sum(m['completed'])}/{m['characters']}")
    if "tight" in out:
        t = out["tight"]
        print("\nTight, fast paths of our own (paths/tight/: turns of radius 0.3-0.5 m drawn at 3-4.5 m/s): "
              "mean distance (m) / share of the path passed within 0.5 m")
        print(f"{'configuration':<56}" + "".join(f"{n:>{w}}" for n in TIGHT))
        for key, (label, *_rest) in TIGHT_CONFIGS.items():
            print(f"{label:<56}" + "".join(f"{cell(t[key][n]) + ' / ' + format(t[key][n]['within_0_5m'], '.2f'):>{w}}"
                                           for n in TIGHT))
        ok = all(t["full"][n]["completed"] and t["full"][n]["mean_distance_m"] <= 0.15 for n in TIGHT)
        print(f"  defaults: every tight path completed with mean distance <= 0.15 m: {'PASS' if ok else 'FAIL'}")
    if "facing" in out:
        fc = out["facing"]
        print("\nFacing (the paper's Section VIII-C): mean distance (m) | mean angle between facing and travel (deg)")
        print(f"{'':<46}" + "".join(f"{n:>{w}}" for n in PATHS))
        for key, (label, _rev) in FACING.items():
            print(f"{label:<46}" + "".join(f"{cell(fc[key][n]) + ' | ' + format(fc[key][n]['facing_vs_travel_deg'], '.0f'):>{w}}"
                                           for n in PATHS))
        h = out["facing_heldout"]
        print(f"  held-out clips ({HOLDOUT}, never trained on): error of the predicted facing 1/3, 2/3 and 1 s ahead "
              f"against the person's: DirectionNet {h['net_deg']:.1f} deg, path tangent {h['tangent_deg']:.1f} deg, "
              f"facing kept {h['held_deg']:.1f} deg ({h['samples']} samples)")
    if "dance" in out:
        d = out["dance"]
        print(f"\nSection VIII-D, dance-only database (LAFAN1 dance clips, mirrored: {d['database_frames']} frames, "
              f"v_max {d['v_max_mps']:.2f} m/s):")
        print(f"{'':<46}" + "".join(f"{n:>{w}}" for n in PATHS))
        print(f"{'mean distance (m)':<46}" + "".join(f"{cell(d['runs'][n]):>{w}}" for n in PATHS))
        times = []
        for n in PATHS:
            r = d["runs"][n]
            done = f"{r['completion_time_s']:.1f}" if r["completion_time_s"] else "-"
            times.append(f"{done}/{r['path_duration_s']:.1f}")
        print(f"{'completion time / path duration (s)':<46}" + "".join(f"{t:>{w}}" for t in times))
    if "figures" in out:
        print(f"\nfigures: {out['figures']}/<path>.png")


if __name__ == "__main__":
    sys.exit(main())
