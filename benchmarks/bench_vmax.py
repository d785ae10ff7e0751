"""The v_max study of the path-following paper (its Fig. 9; issue 33, item 8).

    python benchmarks/bench_vmax.py [--db DB.npz] [--path paths/circle.json] [--v-max 1 2 3 ...]
                                    [--plot out/vmax.png] [--json OUT.json]

The paper's path for it (``paths/circle.json``: a circle of radius 4 m, the speed rising
linearly from 0 to 9 m/s over one and a half laps) followed with LHMM(3, 3), every
revision on, local mode, tangent facing, 60 Hz, the classic LAFAN1 database (default
``/work/cache/lafan.npz``), once per speed limit ``v_max`` (default 1, 1.5, 2, 3, 4, 6
and 9 m/s, and the database's own default, its 95th percentile of speeds), twice: as the
paper has it (the speed limit alone: ``paper``) and with our defaults (the turn limit of
issue 17 on as well, which caps the speed on this circle at ``sqrt(turn_accel x 4 m)``
whatever ``v_max``: ``defaults``). Prints per ``v_max``: the mean and max distance (m) from the root to the path, completed, the
completion time (s; the path is drawn in 9.4 s), the mean and 95th percentile of the
root's speed (m/s), and foot skating; writes a figure (``--plot``): distance and
completion time against ``v_max``, and the root paths seen from above.

The paper's reading: at 1 m/s the character only walks slowly (it follows, late); at
3 m/s it moves at various speeds and follows; far above the data's speeds (9 m/s) it
cannot follow the circle and runs straight on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPO

V_MAX = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 9.0)


def run(db, path_file: Path, v_max: float, turn_limit: bool) -> dict:
    from motionmatch.control.path import load_path
    from motionmatch.control.revision import RevisionSettings
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    f = PathFollower(db, load_path(path_file), FollowSettings(revision=RevisionSettings(v_max=v_max, turn_limit=turn_limit)))
    t0 = time.perf_counter()
    rec = f.run()
    rep = follow_report(rec)
    rep["wall_s"] = time.perf_counter() - t0
    v = np.linalg.norm(np.diff(rec.root[:, [0, 2]], axis=0), axis=1) * rec.fps
    end = rec.completion_frame if rec.completion_frame > 0 else len(v)
    rep["speed_mean_mps"] = float(v[:end].mean())
    rep["speed_p95_mps"] = float(np.percentile(v[:end], 95))
    rep["root_xz"] = rec.root[:, [0, 2]].tolist()
    rep["input_xz"] = rec.path.input_points[:, [0, 2]].tolist()
    return rep


def plot(png: Path, series: dict, default: float) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(20, 4.8), dpi=80)
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.add_subplot(1, 4, 1), fig.add_subplot(1, 4, 2)
    for j, (name, runs) in enumerate(series.items()):
        keys = sorted(runs)
        ls = "-" if j == 0 else ":"
        ax1.plot(keys, [runs[k]["mean_distance_m"] for k in keys], "o" + ls, color="C0", label=f"mean, {name}")
        ax1.plot(keys, [runs[k]["max_distance_m"] for k in keys], "s" + ls, color="C1", label=f"max, {name}")
        for k in keys:
            if not runs[k]["completed"]:
                ax1.plot([k], [runs[k]["mean_distance_m"]], "x", color="C3", ms=12, mew=2)
        done = [k for k in keys if runs[k]["completion_time_s"]]
        ax2.plot(done, [runs[k]["completion_time_s"] for k in done], "o" + ls, color="C0",
                 label=f"completion time (s), {name}")
        ax2.plot(keys, [runs[k]["speed_mean_mps"] for k in keys], "^" + ls, color="C2",
                 label=f"mean root speed (m/s), {name}")
        ax2.axhline(runs[keys[0]]["path_duration_s"], color="0.6", lw=0.8, ls="--")
    for ax in (ax1, ax2):
        ax.axvline(default, color="0.6", lw=0.8)
        ax.grid(True, color="0.9")
        ax.legend(fontsize=7)
    ax1.set(xlabel="v_max (m/s)", ylabel="distance to the path (m)", title="distance (x: not completed)")
    ax2.set(xlabel="v_max (m/s)", ylabel="s  |  m/s", title="completion time and speed (dashed: drawn duration)")
    for j, (name, runs) in enumerate(series.items()):
        keys = sorted(runs)
        ax = fig.add_subplot(1, 4, 3 + j)
        p = np.asarray(runs[keys[0]]["input_xz"])
        ax.plot(p[:, 0], p[:, 1], "--", color="0.5", lw=1)
        for i, k in enumerate(keys):
            q = np.asarray(runs[k]["root_xz"])
            ax.plot(q[:, 0], q[:, 1], "-", lw=1.1, color=f"C{i % 10}", label=f"{k:g} m/s")
        ax.set_aspect("equal", adjustable="datalim")
        ax.invert_xaxis()
        ax.legend(fontsize=7, loc="upper right")
        ax.set_title(f"root paths, {name} (path dashed), top view, m", fontsize=10)
    fig.suptitle("v_max study (the path-following paper's Fig. 9): circle of radius 4 m, 0 to 9 m/s over 1.5 laps")
    fig.tight_layout()
    fig.savefig(png, format="png")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=os.environ.get("MOTIONMATCH_DB", "/work/cache/lafan.npz"))
    ap.add_argument("--path", default=str(REPO / "paths" / "circle.json"))
    ap.add_argument("--v-max", type=float, nargs="+", default=list(V_MAX))
    ap.add_argument("--plot", default=str(REPO / "out" / "vmax.png"))
    ap.add_argument("--json")
    args = ap.parse_args()
    from motionmatch.database import MotionDatabase
    from motionmatch.runtime.follow import default_v_max

    if not Path(args.db).exists():
        sys.exit(f"--db {args.db}: not found")
    db = MotionDatabase.load(args.db)
    default = default_v_max(db)
    series: dict[str, dict] = {"paper": {}, "defaults": {}}
    for name, turn in (("paper", False), ("defaults", True)):
        for v in sorted({*args.v_max, round(default, 2)}):
            series[name][v] = run(db, Path(args.path), v, turn)
            print(f"  {name} v_max {v:g}: {series[name][v]['mean_distance_m']:.3f} m", file=sys.stderr, flush=True)
    print(f"v_max study on {args.path} with {args.db} (default v_max {default:.2f} m/s); LHMM(3,3), every revision "
          "on; 'paper': the speed limit alone (the turn limit off), 'defaults': with the turn limit")
    print(f"{'series':<10}{'v_max m/s':>10}{'mean m':>9}{'max m':>8}{'done':>6}{'time s':>8}{'drawn s':>9}"
          f"{'speed m/s':>11}{'p95 m/s':>9}{'skate':>8}")
    for name, runs in series.items():
        for v, r in runs.items():
            tm = r["completion_time_s"]
            print(f"{name:<10}{v:>10g}{r['mean_distance_m']:>9.3f}{r['max_distance_m']:>8.2f}"
                  f"{'yes' if r['completed'] else 'NO':>6}{(f'{tm:.1f}' if tm else '-'):>8}{r['path_duration_s']:>9.1f}"
                  f"{r['speed_mean_mps']:>11.2f}{r['speed_p95_mps']:>9.2f}{r['foot_skating_mps']:>8.3f}")
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(Path(args.plot), series, default)
        print(f"figure: {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps({n: {str(k): v for k, v in r.items()} for n, r in series.items()},
                                              default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
