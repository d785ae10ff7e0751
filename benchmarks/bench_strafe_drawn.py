"""Strafing and drawn-trajectory control (issue 33 items 1 and 2), measured on LAFAN1.

    PYTHONPATH=src python benchmarks/bench_strafe_drawn.py [--data DIR] [--fps 30]

Prints, from a mirrored database of ``$MOTIONMATCH_DATA/lafan1-60fps``:

* what the data can do: the seconds of moving frames (root speed over 0.3 m/s) whose
  direction of travel is 45-135 degrees off the facing (sidesteps) or over 135 (backwards);
* strafing: the 12 s script (D, then S, then A, 4 s each, walking; and with Shift) run with
  a facing (+Z; the same as holding Q at camera yaw 0) and without: the mean achieved
  facing error (degrees: against +Z with the facing, against the direction of travel
  without) and the mean velocity error (m/s) after the first second;
* drawn-trajectory control: a straight 40 m drawing walked and run (the speed while
  following, against the database's walk and run speeds, and its variation per second),
  an open drawing begun 4 m aside (where the character first reached it against its
  nearest point), and the shipped closed drawing ``paths/drawn/loop.json`` (distance to
  the drawing, rounds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from _common import REPO, data_root


def strafe_errors(db, facing, shift: bool, fps: float) -> tuple[float, float, float]:
    from motionmatch.anim import quat
    from motionmatch.control.script import parse_script
    from motionmatch.runtime.offline import run_script

    keys = [["d"], ["s"], ["a"]]
    events = [{"t": 4.0 * i, "keys": k + (["shift"] if shift else []), "facing": facing} for i, k in enumerate(keys)]
    rec = run_script(db, parse_script({"duration": 12.0, "events": events}), fps=fps)
    yaw = quat.yaw_angle(rec.motion.world_rotations[:, 0])
    fwd = np.stack([np.sin(yaw), np.cos(yaw)], axis=1)
    pos = rec.motion.world_positions[:, 0][:, [0, 2]]
    vel = np.gradient(pos, axis=0) * fps
    want = rec.desired_velocity[:, [0, 2]]
    aim = (np.broadcast_to(np.asarray(facing, float) / np.linalg.norm(facing), want.shape) if facing is not None
           else want / np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-9))
    k = round(fps)
    err = np.degrees(np.arccos(np.clip((fwd * aim).sum(axis=1), -1.0, 1.0)))[k:]
    off_z = np.degrees(np.arccos(np.clip(fwd[:, 1], -1.0, 1.0)))[k:]
    return float(err.mean()), float(np.linalg.norm(vel - want, axis=1)[k:].mean()), float(off_z.mean())


def sideways_seconds(db) -> tuple[float, float, float]:
    """Seconds of moving frames (root over 0.3 m/s) in the database: all, 45-135 degrees
    between travel and facing, over 135."""
    from motionmatch.anim import quat

    pos = db.translations[:, 0].astype(np.float64)
    yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
    same = np.append(db.frame_clip[1:] == db.frame_clip[:-1], False)
    v = (pos[1:] - pos[:-1])[:, [0, 2]] * db.fps
    v = np.vstack([v, v[-1:]])
    sp = np.hypot(v[:, 0], v[:, 1])
    moving = same & (sp > 0.3)
    f = np.stack([np.sin(yaw), np.cos(yaw)], axis=1)
    ang = np.degrees(np.arccos(np.clip((f * v).sum(axis=1) / np.maximum(sp, 1e-9), -1, 1)))
    side = moving & (ang >= 45) & (ang <= 135)
    back = moving & (ang > 135)
    return moving.sum() / db.fps, side.sum() / db.fps, back.sum() / db.fps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data")
    ap.add_argument("--fps", type=float, default=30.0)
    args = ap.parse_args()
    from motionmatch.control.path_steering import Drawing, DrawingFile, SteerSettings, load_drawing
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import load_folder
    from motionmatch.metrics.drawn import drawn_report
    from motionmatch.runtime.drawn import run_drawing
    from motionmatch.runtime.modes import gait_speeds_from_database

    t0 = time.perf_counter()
    db = MotionDatabase.build(load_folder(data_root(args.data) / "lafan1-60fps"), mirror_copies=True)
    g = gait_speeds_from_database(db)
    print(f"database: {db.num_frames} frames ({time.perf_counter() - t0:.1f} s to build); gait speeds walk "
          f"{g.walk:.2f}, run {g.run:.2f} m/s", file=sys.stderr)
    moving, side, back = sideways_seconds(db)
    print(f"moving frames {moving:.0f} s: sideways (45-135 deg off the facing) {side:.0f} s "
          f"({100 * side / moving:.1f}%), backwards (>135 deg) {back:.0f} s ({100 * back / moving:.1f}%)")
    print("\nstrafing, 12 s of D, S, A (4 s each), after the first second:")
    print("| gait | facing | facing error (deg) | off +Z (deg) | velocity error (m/s) |\n|---|---|---|---|---|")
    for shift in (False, True):
        for facing in ([0.0, 1.0], None):
            fe, ve, oz = strafe_errors(db, facing, shift, args.fps)
            print(f"| {'sprint (Shift)' if shift else 'walk'} | {'+Z (strafing)' if facing else 'none (against travel)'} "
                  f"| {fe:.1f} | {oz:.1f} | {ve:.2f} |")
    print("\ndrawn-trajectory control:")
    line = np.stack([np.zeros(200), np.linspace(1.0, 40.0, 200)], axis=1)
    rows = []
    for run in (False, True):
        f = DrawingFile(Drawing(line), SteerSettings(), run=run, duration=12.0)
        rec, src = run_drawing(db, f, fps=args.fps)
        r = drawn_report(rec, src, args.fps)
        target = g.run if run else g.walk
        rows.append(f"| straight 40 m, {'run' if run else 'walk'} | {r['speed_mps']:.3f} m/s (target {target:.3f}) | "
                    f"cv {r['speed_cv']:.3f} | mean distance {r['mean_distance_m']:.3f} m |")
    for name in ("drawn/open", "drawn/loop"):
        f = load_drawing(REPO / "paths" / f"{name}.json")
        rec, src = run_drawing(db, f, fps=args.fps)
        r = drawn_report(rec, src, args.fps)
        rows.append(f"| paths/{name}.json | {r['speed_mps']:.3f} m/s | start to nearest point "
                    f"{r['start_to_entry_m']:.2f} m, first reached {r['first_reached_to_entry_m']:.2f} m from it | "
                    f"mean distance {r['mean_distance_m']:.3f} m, {r['laps']} round(s), {r['phase']} |")
        print(json.dumps({name: r}), file=sys.stderr)
    print("| drawing | speed following | where / how even | distance, rounds |\n|---|---|---|---|")
    print("\n".join(rows))
    print("\nthe steering's cost per step (DrawnSteering.steer, median of 2000 after a warm-up):")
    from motionmatch.control.path_steering import DrawnSteering

    for length in (10.0, 1000.0):  # closed drawings (circles) of 10 m and 1 km, walked round
        r = length / (2 * np.pi)
        a = np.linspace(0.0, 2 * np.pi, max(int(length / 0.05), 8))
        d = Drawing(np.stack([r * np.sin(a), r - r * np.cos(a)], axis=1))
        st = DrawnSteering(d)
        offs = np.array(db.schema.trajectory_offsets)
        times = []
        for i in range(2200):
            p = d.points[(i * 2) % (len(d.points) - 1)]  # 0.1 m a step along it
            t = time.perf_counter()
            st.steer(p, 1.4, offs)
            times.append(time.perf_counter() - t)
        print(f"  {d.length:.0f} m closed drawing ({len(d.points)} points; {st.phase}, {st.laps} laps): "
              f"{1e6 * np.median(times[200:]):.0f} us a step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
