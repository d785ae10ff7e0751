"""What drawing the terrain costs a preview video (issue 31, item 4): milliseconds per
frame of :func:`motionmatch.io.preview.render_preview`'s renderer on the flat floor and on
the forest's ground, the same run, rounds alternating.

    python benchmarks/bench_preview.py --db LAFAN.npz [--seconds 8] [--rounds 5] [--size 640x480] [--json]

The run: a character walking up the forest's ramp to the plateau (``scenarios/forest.json``,
from x = 11 m, z = 1 m, W held), played on the forest's terrain once; its frames are then
drawn at 30 fps both ways (``terrain=None``: the grey grid at y = 0; ``terrain=forest``:
the shaded surface, its grid lines and the shadow on it). Times are the process's CPU time
per drawn frame (the figure's drawing into its pixel buffer, not the video encoding, which
is the same both ways), and the set-up (the renderer made, the ground's first rectangle
included in the first frame); min and median over the rounds.

Database: any built with ``motionmatch build`` (e.g. ``motionmatch build lafan1-60fps``);
the data's licence applies to it (none ships here).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="a motionmatch database (.npz)")
    ap.add_argument("--seconds", type=float, default=8.0, help="length of the run (default 8 s)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", default="640x480", help="video size WxH (default 640x480)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = ap.parse_args()

    from motionmatch.control.script import parse_script
    from motionmatch.database import MotionDatabase
    from motionmatch.environment import load_scenario
    from motionmatch.io import preview
    from motionmatch.io.preview_ground import check_terrain
    from motionmatch.runtime.inputs import ScriptInput
    from motionmatch.runtime.offline import run_input

    width, height = (int(v) for v in args.size.lower().split("x"))
    db = MotionDatabase.load(args.db)
    forest = load_scenario(REPO / "scenarios" / "forest.json")
    script = parse_script({"duration": args.seconds, "events": [{"t": 0.0, "keys": ["w"]}]})
    rec = run_input(db, lambda agent: ScriptInput(script, gaits=agent.ctrl.gaits), script.frame_count(1 / 60),
                    fps=60.0, start=(11.0, 1.0), scene=forest.scene())
    motion = rec.motion
    F = motion.num_frames
    shown = preview.output_frame_indices(F, motion.fps, 30.0)
    grounds = {"flat": None, "forest": check_terrain(forest.terrain)}
    per_frame: dict[str, list[float]] = {k: [] for k in grounds}
    setup: dict[str, list[float]] = {k: [] for k in grounds}
    for _ in range(args.rounds):
        for name, ground in grounds.items():
            t0 = time.process_time()
            r = preview._Renderer(
                motion, size=(width, height), dpi=100.0, camera="follow", projection="perspective", azimuth=35.0,
                elevation=22.0, fov=40.0, desired=preview._as_trajectory(rec.desired, "desired", F),
                actual=preview._as_trajectory(motion.world_positions[:, 0], "actual", F),
                contacts=preview._default_contacts(motion, ground), shown=shown, title="bench", terrain=ground)
            t1 = time.process_time()
            for k in range(len(shown)):
                r.draw(k)
            per_frame[name].append((time.process_time() - t1) * 1000 / len(shown))
            setup[name].append((t1 - t0) * 1000)
            r.close()
    out = {name: {"ms_per_frame_min": round(min(v), 2), "ms_per_frame_median": round(float(np.median(v)), 2),
                  "setup_ms_median": round(float(np.median(setup[name])), 1)} for name, v in per_frame.items()}
    out["frames"] = len(shown)
    out["size"] = [width, height]
    out["ratio_median"] = round(out["forest"]["ms_per_frame_median"] / out["flat"]["ms_per_frame_median"], 2)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{len(shown)} frames at {width}x{height}, {args.rounds} rounds (CPU ms per frame, min / median; set-up)")
    for name in grounds:
        o = out[name]
        print(f"  {name:7s} {o['ms_per_frame_min']:6.2f} / {o['ms_per_frame_median']:6.2f} ms per frame; "
              f"set-up {o['setup_ms_median']:.0f} ms")
    print(f"  forest / flat (medians): {out['ratio_median']:.2f}x")


if __name__ == "__main__":
    main()
