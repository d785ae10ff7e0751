"""What the pose reselect history does (``ControllerSettings.reselect_history``): every
kind of run with it off (0 s: a match a few frames behind in the clip playing may replay
them) and on (the default), the same inputs, the same run.

    python benchmarks/bench_reselect.py --db-classic LAFAN.npz --db-mirrored LAFAN_M.npz \\
        --db-env LAFAN_ENV.npz [--db-3d LAFAN_3D.npz] [--history 0.5] [--only run] [--json]

Rows (each off, then on):

* keyboard scripts on the classic database built without mirroring (``motionmatch build
  lafan1-60fps``) and on the mirrored one: W held from standing (8 s), the paper's turns
  (48 s: walk, 90/180-degree turns, run, stop), walk then run (12 s). Columns: the root's
  speed over the last 4 s of W (m/s; the held key asks for a walk), response time (s),
  trajectory error (m), foot skating (m/s), pose pops (p99 joint acceleration, m/s^2),
  transitions per second; with ``--db-3d``, the actions script (jump, creep, dance) too;
* the scenarios of ``scenarios/`` with agents on the environment database: agent-agent and
  obstacle collision fractions, the error to the goals (m), the searches' diversity;
* the path files of ``paths/`` followed on the classic mirrored database: mean distance
  (m, the paper's measure), completed, completion time (s).

The history applies to the plain search in locomotion only (in the actions script, applied
to every mode, the trajectory error went from 0.150 to 0.160 m and the pops from 31 to 36
m/s^2; in locomotion alone they stay as they were). A frame chooser (the environment-aware
one, a path follower's) may step back within the clip, which is how it waits in front
of an obstacle and keeps to a path's timing (applied to them too, the obstacle collisions
of ``fence-ceilings`` went from 0.039 to 0.393 and of ``dense-crowd`` from 0.046 to 0.295,
and four of five paths were followed 1-2 cm less closely), so the scenario and follow rows
are the same both ways: they show that they are.

Databases: any built with ``motionmatch build`` (the classic schema for the first two, the
environment schema for the third); the data's licence applies to them (none ships here).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import TURNS_SCRIPT

REPO = Path(__file__).resolve().parents[1]
HOLD_W = {"duration": 8.0, "events": [{"t": 0.0, "keys": ["w"]}]}
WALK_RUN = {"duration": 12.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 6.0, "keys": ["w", "shift"]}]}
ACTIONS = {"duration": 20.0, "events": [  # (the actions of benchmarks/state_hashes.py: jump, creep, dance)
    {"t": 0.0, "keys": []}, {"t": 4.0, "keys": ["w"]}, {"t": 6.0, "keys": ["w", "j"]}, {"t": 6.3, "keys": ["w"]},
    {"t": 9.0, "keys": ["c", "w"]}, {"t": 12.0, "keys": ["p"]}, {"t": 16.0, "keys": ["a"]}, {"t": 18.0, "keys": []}]}
FORTH_BACK = {"duration": 11.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 5.0, "keys": ["s"]},
                                           {"t": 10.0, "keys": []}]}  # (tests/test_ground_runtime.py's)
SCRIPTS = {"hold W": HOLD_W, "turns": TURNS_SCRIPT, "walk, run": WALK_RUN, "W, S, stop": FORTH_BACK}
RUN_COLS = ("w_speed_mps", "response_time_s", "trajectory_error_m", "foot_skating_mps", "acceleration_p99_mps2",
            "transitions_per_s")
SCENE_COLS = ("agent_collision_fraction", "obstacle_collision_fraction", "error_m", "diversity")
FOLLOW_COLS = ("mean_distance_m", "completed", "completion_time_s")


def run_rows(db, name: str, history: float, scripts: dict = SCRIPTS) -> dict:
    """The keyboard ``scripts`` on ``db``: ``{script: {column: value}}``."""
    from motionmatch.control.script import parse_script
    from motionmatch.metrics.report import playback_foot_skating, run_report
    from motionmatch.runtime.controller import ControllerSettings
    from motionmatch.runtime.offline import run_script

    playback = playback_foot_skating(db)
    out = {}
    for label, script in scripts.items():
        parsed = parse_script(script)
        rec = run_script(db, parsed, ControllerSettings(reselect_history=history))
        r = run_report(rec, db, parsed, playback_skating=playback)
        root = rec.motion.world_positions[:, 0, [0, 2]]
        last = round(4.0 * rec.motion.fps)
        r["w_speed_mps"] = float(np.linalg.norm(root[-1] - root[-last]) / 4.0) if label == "hold W" else None
        out[f"{name}: {label}"] = {c: r.get(c) for c in RUN_COLS}
    return out


def scenario_rows(db, history: float) -> dict:
    """Every scenario of ``scenarios/`` that has agents, on ``db``."""
    from motionmatch.environment import load_scenario
    from motionmatch.metrics.scenario import scenario_report
    from motionmatch.runtime.scenarios import run_scenario

    out = {}
    for path in sorted((REPO / "scenarios").glob("*.json")):
        sc = load_scenario(path, agents_required=False)
        if not sc.agents and not getattr(sc, "groups", None):
            continue
        world, rec = run_scenario(db, sc, controller_overrides={"reselect_history": history})
        r = scenario_report(world, rec, sc)
        out[f"scenario {path.stem}"] = {c: r.get(c) for c in SCENE_COLS}
    return out


def follow_rows(db, history: float) -> dict:
    """Every path file of ``paths/`` followed on ``db``."""
    from motionmatch.control.path import load_path
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.controller import ControllerSettings
    from motionmatch.runtime.follow import FollowSettings, PathFollower, run_followers

    out = {}
    for path in sorted((REPO / "paths").glob("*.json")):
        try:
            timed = load_path(path)
        except Exception:  # (a file of the folder that is not a timed path)
            continue
        settings = FollowSettings(controller=ControllerSettings(adjust_halflife=0.0, reselect_history=history))
        rec = run_followers([PathFollower(db, timed, settings)])[0]
        r = follow_report(rec)
        out[f"follow {path.stem}"] = {c: r.get(c) for c in FOLLOW_COLS}
    return out


def _fmt(v) -> str:
    if v is None:
        return f"{'n/a':>10}"
    if isinstance(v, bool):
        return f"{v!s:>10}"
    return f"{v:>10.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db-classic", required=True, help="classic schema, built without --mirror")
    ap.add_argument("--db-mirrored", required=True, help="classic schema, built with --mirror")
    ap.add_argument("--db-env", required=True, help="environment schema (--schema environment)")
    ap.add_argument("--db-3d", help="3D schema, built without --mirror: the actions script (jump, creep, dance)")
    ap.add_argument("--history", type=float, default=None, help="the reselect history to compare with off "
                    "(seconds; default: ControllerSettings' default)")
    ap.add_argument("--only", choices=("run", "scenario", "follow"), help="one kind of row")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from motionmatch.database import MotionDatabase
    from motionmatch.runtime.controller import ControllerSettings

    on = ControllerSettings().reselect_history if a.history is None else a.history
    warnings.simplefilter("ignore")
    tables = {}
    for h in (0.0, on):
        rows = {}
        if a.only in (None, "run"):
            for name, path in (("classic", a.db_classic), ("mirrored", a.db_mirrored)):
                rows.update(run_rows(MotionDatabase.load(path), name, h))
            if a.db_3d:
                rows.update(run_rows(MotionDatabase.load(a.db_3d), "3d", h, {"actions": ACTIONS}))
        if a.only in (None, "scenario"):
            rows.update(scenario_rows(MotionDatabase.load(a.db_env), h))
        if a.only in (None, "follow"):
            rows.update(follow_rows(MotionDatabase.load(a.db_mirrored), h))
        tables[h] = rows
    if a.json:
        print(json.dumps({str(h): t for h, t in tables.items()}, indent=1))
        return 0
    off, with_ = tables[0.0], tables[on]
    for cols in (RUN_COLS, SCENE_COLS, FOLLOW_COLS):
        names = [n for n in off if set(off[n]) == set(cols)]
        if not names:
            continue
        print(f"\n{'row (off / reselect history ' + format(on, 'g') + ' s)':<44}" + "".join(f"{c[:19]:>22}" for c in cols))
        for n in names:
            print(f"{n:<44}" + "".join(f"{_fmt(off[n][c])}/{_fmt(with_[n][c]).strip():<11}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
