"""The paper's ablations (Sec. 4.2), reproduced on the same scripted inputs.

    python benchmarks/ablations.py [--data DIR] [--json]

Rows: the full method; linear-interpolation instead of spring-damper trajectories;
unweighted search (every feature group weight 1) and the paper's 0.8/0.2 weighted loss;
inertialization by spring instead of quintic, and off; foot locking off. Columns, from
``motionmatch.metrics``: mean response time to direction changes (s), trajectory error
(desired vs actual root 1 s later, m), foot skating (m/s, the database's own clips for
reference), jerk (m/s^3), pose pops (99th percentile over frames of the mean joint
acceleration, m/s^2: cuts, which a clip average like jerk dilutes), transitions per second, and mean update time (ms).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import TURNS_SCRIPT, data_root
from motionmatch.control.script import parse_script
from motionmatch.database import MotionDatabase
from motionmatch.datasets import load_folder
from motionmatch.metrics.report import playback_foot_skating, run_report
from motionmatch.runtime.controller import ControllerSettings
from motionmatch.runtime.offline import run_script

UNIT = {"foot_position": 1.0, "foot_velocity": 1.0, "hip_velocity": 1.0, "trajectory_position": 1.0,
        "trajectory_direction": 1.0}
ROWS = [
    ("full method (spring, weighted, quintic)", {}, None),
    ("linear-interpolation trajectory", {"trajectory_mode": "linear"}, None),
    ("unweighted search (all weights 1)", {}, {"group_weights": UNIT, "responsiveness": 1.0, "continuity": 1.0}),
    ("paper's weighted loss (0.8 / 0.2)", {}, {"group_weights": UNIT, "responsiveness": 0.8, "continuity": 0.2}),
    ("spring inertialization", {"inertialization": "spring"}, None),
    ("no inertialization", {"inertialization": "none"}, None),
    ("no foot locking", {"foot_locking": False}, None),
]
COLS = [("response_time_s", "response s"), ("trajectory_error_m", "traj err m"), ("foot_skating_mps", "skating m/s"),
        ("jerk_mps3", "jerk m/s3"), ("acceleration_p99_mps2", "pops m/s2"), ("transitions_per_s", "trans/s"), ("update_ms_mean", "ms/update")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    args = ap.parse_args()
    db = MotionDatabase.build(load_folder(data_root(args.data) / "lafan1-60fps"), mirror_copies=True)
    script = parse_script(TURNS_SCRIPT)
    default = (db.group_weights.copy(), db.responsiveness, db.continuity)
    playback = playback_foot_skating(db)
    table = {}
    for name, settings, weights in ROWS:
        if weights:
            db.set_weights(weights["group_weights"], responsiveness=weights["responsiveness"],
                           continuity=weights["continuity"])
        else:
            db.set_weights(default[0], responsiveness=default[1], continuity=default[2])
        rec = run_script(db, script, ControllerSettings(**settings))
        table[name] = run_report(rec, db, script, playback_skating=playback)
    if args.json:
        print(json.dumps({k: {c: v[c] for c, _ in COLS} for k, v in table.items()}, indent=2))
        return 0
    print(f"{TURNS_SCRIPT['duration']:g} s of scripted input (walk, 90/180-degree turns, run, stop) on a "
          f"{db.num_frames}-frame mirrored LAFAN1 database; database playback foot skating {playback:.3f} m/s")
    print(f"{'configuration':<42}" + "".join(f"{h:>13}" for _, h in COLS))
    for name, r in table.items():
        print(f"{name:<42}" + "".join(f"{r[c]:>13.3f}" for c, _ in COLS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
