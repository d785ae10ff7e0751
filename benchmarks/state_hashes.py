"""Fingerprints of what the runtime plays, to show that a change of the engine leaves
every agent's frames as they were (or to find the first run where they differ).

    python benchmarks/state_hashes.py --db-env ENV.npz --db CLASSIC.npz --db-3d CLASSIC3D.npz \
        [--crowd 1000] [--steps 600] [--only NAME ...] [--json OUT.json] [--compare BASE.json]

Each run is reduced to a short BLAKE2 hash of the numbers it played, frame by frame:

- ``door-crowd-N`` / ``door-crowd-N-plain``: the door crowd of ``motionmatch bench crowd``
  (:func:`~motionmatch.runtime.scenarios.door_crowd_world`; before the split, in `crowd`), environment-aware and plain,
  ``--steps`` steps of 1/60 s: every agent's database frame, root and yaw after every step,
  and every agent's pose after the last;
- ``scenario:NAME``: every file of ``scenarios/`` run from start to end on ``ENV.npz``
  (frames, roots, yaws, poses where recorded);
- ``follow:NAME``: every path of ``paths/`` followed with LHMM on ``CLASSIC.npz``
  (frames, root and pose of every frame), and ``follow-scene:NAME`` the zigzag path among
  the cones of ``scenarios/zigzag-cones.json`` (penalised LHMM nodes);
- ``run:NAME``: ``motionmatch run``'s scripted single character (turns and gaits on
  ``CLASSIC.npz``; idle, jump, creep and dance on ``CLASSIC3D.npz``).

Run it once on the old tree (``PYTHONPATH=OLD/src python benchmarks/state_hashes.py ...
--json old.json``) and once on the new one with ``--compare old.json``: it prints each
run's hash, ``same`` or ``DIFFERENT``, and exits 1 when any differs. Only public APIs that
both trees have are used (see :func:`_world_state`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

#: ``motionmatch run`` scripts: walking with turns and gaits; the actions (3D schema)
SCRIPTS = {
    "turns": {"duration": 24.0, "events": [{"t": 3.0 * i, "keys": k.split()} for i, k in enumerate(
        ["w", "d", "s", "a", "w shift", "d shift", "", "w"])]},
    "actions": {"duration": 20.0, "events": [
        {"t": 0.0, "keys": []}, {"t": 4.0, "keys": ["w"]}, {"t": 6.0, "keys": ["w", "j"]}, {"t": 6.3, "keys": ["w"]},
        {"t": 9.0, "keys": ["c", "w"]}, {"t": 12.0, "keys": ["p"]}, {"t": 16.0, "keys": ["a"]},
        {"t": 18.0, "keys": []}]},
}


class Digest:
    """A BLAKE2b hash of arrays fed in order (their bytes as float64 / int64)."""

    def __init__(self):
        self.h = hashlib.blake2b(digest_size=8)

    def add(self, *arrays) -> None:
        for a in arrays:
            a = np.asarray(a)
            a = a.astype(np.int64 if a.dtype.kind in "biu" else np.float64)
            self.h.update(np.ascontiguousarray(a).tobytes())

    def hex(self) -> str:
        return self.h.hexdigest()


def _world_state(world) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(frames [A], root_pos [A, 3], root_yaw [A])`` of a world's agents, in its order."""
    if hasattr(world, "agent_frames"):  # the arrays of a world that keeps its agents' state in columns
        return world.agent_frames(), world.agent_root_positions(), world.agent_root_yaws()
    return (np.array([a.ctrl.frame for a in world.agents]), np.array([a.ctrl.root_pos for a in world.agents]),
            np.array([a.ctrl.root_yaw for a in world.agents]))


def _world_poses(world) -> tuple[np.ndarray, np.ndarray]:
    if hasattr(world, "poses"):
        return world.poses()
    return (np.array([a.result.rotations for a in world.agents]),
            np.array([a.result.translations for a in world.agents]))


def crowd_hash(db_path: str, n: int, steps: int, environment: bool) -> str:
    try:
        from motionmatch.runtime.scenarios import door_crowd_world
    except ImportError:  # (the tree before the World was split by concept)
        from motionmatch.runtime.scenarios import door_crowd_world

    world = door_crowd_world(db_path, n, environment=environment)
    d = Digest()
    for _ in range(steps):
        world.step(1 / 60)
        d.add(*_world_state(world))
    d.add(*_world_poses(world))
    return d.hex()


def scenario_hash(db, path: Path) -> str:
    from motionmatch.environment import load_scenario

    try:
        from motionmatch.runtime.scenarios import run_scenario
    except ImportError:  # (the tree before the World was split by concept)
        from motionmatch.runtime.world import run_scenario

    _world, rec = run_scenario(db, load_scenario(path))
    d = Digest()
    d.add(rec.frames, rec.root_positions, rec.root_yaws)
    if rec.rotations is not None:
        d.add(rec.rotations, rec.translations)
    return d.hex()


def follow_hash(db, path: Path, scene_file: Path | None = None) -> str:
    from motionmatch.control.path import load_path
    from motionmatch.runtime.follow import FollowSettings, PathFollower, run_followers

    scene = env = None
    settings = FollowSettings()
    if scene_file is not None:
        from motionmatch.environment import load_scenario

        try:
            from motionmatch.runtime.environment_matching import EnvironmentSettings
        except ImportError:
            from motionmatch.runtime.world import EnvironmentSettings

        sc = load_scenario(scene_file, agents_required=False)
        scene = sc.scene()
        env = EnvironmentSettings.from_dicts(sc.penalty, sc.search)
        settings = FollowSettings(mode="global")
    f = PathFollower(db, load_path(path), settings, scene=scene, environment_settings=env)
    rec = run_followers([f])[0]
    d = Digest()
    d.add(rec.frames, rec.root, rec.motion.rotations, rec.motion.translations, rec.desired)
    return d.hex()


def run_hash(db, script: dict) -> str:
    from motionmatch.control.script import parse_script
    from motionmatch.runtime.offline import run_script

    rec = run_script(db, parse_script(script))
    d = Digest()
    d.add(rec.frames, rec.motion.rotations, rec.motion.translations, rec.searched, rec.transitioned, rec.contacts)
    d.add(np.frombuffer("".join(rec.modes.tolist()).encode(), dtype=np.uint8))
    return d.hex()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db-env", required=True, help="database built with --mirror --schema environment")
    p.add_argument("--db", required=True, help="database built with the classic schema")
    p.add_argument("--db-3d", required=True, help="database built with --schema classic-3d")
    p.add_argument("--crowd", type=int, default=1000, help="agents of the door crowds (default 1000)")
    p.add_argument("--steps", type=int, default=600, help="steps of the door crowds (default 600)")
    p.add_argument("--only", nargs="*", help="run only the runs whose name starts with one of these")
    p.add_argument("--json", help="write {run: hash} here")
    p.add_argument("--compare", help="a --json file of another tree: say which runs differ (exit 1 if any)")
    a = p.parse_args(argv)
    from motionmatch.database import MotionDatabase

    env_db, db, db3 = (MotionDatabase.load(x) for x in (a.db_env, a.db, a.db_3d))
    runs = {f"door-crowd-{a.crowd}": lambda: crowd_hash(a.db_env, a.crowd, a.steps, True),
            f"door-crowd-{a.crowd}-plain": lambda: crowd_hash(a.db_env, a.crowd, a.steps, False)}
    for f in sorted((REPO / "scenarios").glob("*.json")):
        runs[f"scenario:{f.stem}"] = lambda f=f: scenario_hash(env_db, f)
    for f in sorted((REPO / "paths").glob("*.json")) + sorted((REPO / "paths" / "tight").glob("*.json")):
        runs[f"follow:{f.stem}"] = lambda f=f: follow_hash(db, f)
    runs["follow-scene:zigzag"] = lambda: follow_hash(env_db, REPO / "paths" / "zigzag.json",
                                                      REPO / "scenarios" / "zigzag-cones.json")
    runs["run:turns"] = lambda: run_hash(db, SCRIPTS["turns"])
    runs["run:actions"] = lambda: run_hash(db3, SCRIPTS["actions"])
    if a.only:
        runs = {k: v for k, v in runs.items() if any(k.startswith(o) for o in a.only)}
    base = json.loads(Path(a.compare).read_text()) if a.compare else {}
    out, differ = {}, []
    for name, fn in runs.items():
        t0 = time.perf_counter()
        out[name] = fn()
        verdict = ""
        if name in base:
            verdict = "same" if base[name] == out[name] else "DIFFERENT"
            if verdict == "DIFFERENT":
                differ.append(name)
        print(f"{name:34s} {out[name]}  {verdict:9s} ({time.perf_counter() - t0:.1f} s)", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    if differ:
        print(f"{len(differ)} run(s) differ: {', '.join(differ)}", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
