"""The paper's ablations (Sec. 4.2), reproduced on the same scripted inputs, and the
core's special cases (issue 17) on the 60 s acceptance script.

    python benchmarks/ablations.py [--data DIR] [--json] [--only paper|core]

Rows: the full method; linear-interpolation instead of spring-damper trajectories;
unweighted search (every feature group weight 1) and the paper's 0.8/0.2 weighted loss;
inertialization by spring instead of quintic, and off; foot locking off. Columns, from
``motionmatch.metrics``: mean response time to direction changes (s), trajectory error
(desired vs actual root 1 s later, m), foot skating (m/s, the database's own clips for
reference), jerk (m/s^3), pose pops (99th percentile over frames of the mean joint
acceleration, m/s^2: cuts, which a clip average like jerk dilutes), transitions per second, and mean update time (ms).

The core table runs the acceptance script of ``tests/test_runtime_e2e.py`` (walk, turns,
run, stop, jump, creep, dance, three stretches without keys) on its database (mirrored
LAFAN1 at 60 fps, 3D schema, plus the ground1_subject4 take tagged creep). Rows: the
defaults; idle keeps matching with a standing query (``idle_seconds=0``, the behaviour
before issue 17); the jump without the vertical spring (``vertical_spring=False``: the
take-offs' mean vertical features, a fixed 1.2 s); the paper's loss (``--weights paper``);
the unweighted loss (``--weights unit``). Columns: transitions per idle second (entering
idle included) and the root's speed then, the RMS distance of the jump's hips height from
the vertical spring's, and the run's transitions per second, response time, foot skating
and pose pops.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import TESTS, TURNS_SCRIPT, data_root
from motionmatch.anim import load_bvh
from motionmatch.control.script import parse_script
from motionmatch.database import MotionDatabase, SearchWeights, default_schema
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
CORE_ROWS = [
    ("defaults (idle clip, vertical spring)", {}, None),
    ("idle keeps matching (before issue 17)", {"idle_seconds": 0.0}, None),
    ("jump without the vertical spring", {"vertical_spring": False}, None),
    ("--weights paper (0.8 / 0.2)", {}, "paper"),
    ("--weights unit", {}, "unit"),
]
CORE_COLS = [("idle_transitions_per_s", "idle trans/s"), ("idle_root_speed_mps", "idle root m/s"),
             ("jump_spring_rms_m", "jump-spring m"), ("transitions_per_s", "trans/s"),
             ("response_time_s", "response s"), ("foot_skating_mps", "skating m/s"), ("acceleration_p99_mps2", "pops m/s2")]
COLS = [("response_time_s", "response s"), ("trajectory_error_m", "traj err m"), ("foot_skating_mps", "skating m/s"),
        ("jerk_mps3", "jerk m/s3"), ("acceleration_p99_mps2", "pops m/s2"), ("transitions_per_s", "trans/s"), ("update_ms_mean", "ms/update")]


def core_table(root: Path) -> tuple[dict, MotionDatabase]:
    """The core table's reports, by row, and the acceptance database."""
    sys.path.insert(0, str(TESTS))
    from test_runtime_e2e import SCRIPT

    ground = load_bvh(root / "lafan1" / "ground1_subject4.bvh")
    ground.tags = ("creep",)
    db = MotionDatabase.build([*load_folder(root / "lafan1-60fps"), ground], mirror_copies=True,
                              schema=default_schema(vertical=True))
    script = parse_script(SCRIPT)
    default = (db.group_weights.copy(), db.responsiveness, db.continuity)
    playback = playback_foot_skating(db)
    table = {}
    for name, settings, spec in CORE_ROWS:
        if spec:
            SearchWeights.parse(spec, db.schema).apply(db)
        else:
            db.set_weights(default[0], responsiveness=default[1], continuity=default[2])
        rec = run_script(db, script, ControllerSettings(**settings))
        table[name] = run_report(rec, db, script, playback_skating=playback)
    return table, db


def _cell(value) -> str:
    return f"{value:>14.3f}" if value is not None else f"{'n/a':>14}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--json", action="store_true", help="print the tables as JSON")
    ap.add_argument("--only", choices=("paper", "core"), help="run one of the two tables")
    args = ap.parse_args()
    out = {}
    if args.only != "core":
        out["paper"] = paper_table(data_root(args.data), args.json)
    if args.only != "paper":
        core, db = core_table(data_root(args.data))
        out["core"] = {k: {c: v[c] for c, _ in CORE_COLS} for k, v in core.items()}
        if not args.json:
            print(f"\ncore (issue 17): the 60 s acceptance script on a {db.num_frames}-frame mirrored LAFAN1 database "
                  "(3D schema, plus ground1_subject4 for creeping)")
            print(f"{'configuration':<42}" + "".join(f"{h:>14}" for _, h in CORE_COLS))
            for name, r in core.items():
                print(f"{name:<42}" + "".join(_cell(r[c]) for c, _ in CORE_COLS))
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def paper_table(root: Path, quiet: bool) -> dict:
    """The paper's ablations (printed unless ``quiet``); returns their columns by row."""
    db = MotionDatabase.build(load_folder(root / "lafan1-60fps"), mirror_copies=True)
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
    result = {k: {c: v[c] for c, _ in COLS} for k, v in table.items()}
    if quiet:
        return result
    print(f"{TURNS_SCRIPT['duration']:g} s of scripted input (walk, 90/180-degree turns, run, stop) on a "
          f"{db.num_frames}-frame mirrored LAFAN1 database; database playback foot skating {playback:.3f} m/s")
    print(f"{'configuration':<42}" + "".join(f"{h:>13}" for _, h in COLS))
    for name, r in table.items():
        print(f"{name:<42}" + "".join(f"{r[c]:>13.3f}" for c, _ in COLS))
    return result


if __name__ == "__main__":
    sys.exit(main())
