"""Milliseconds per World step for crowds of steering agents (the timing behind
``bench_environment.py --crowd-scale``).

    python benchmarks/crowd_timing.py --db DB.npz [--agents 51 151 1000] [--frames 120] [--warmup 60] [--json]

The scene is ``scenarios/doors.json`` (a wall with two doors) with its two groups resized
to ``N`` agents in all (``N - N // 2`` south, ``N // 2`` north, on a 0.9 m grid 16 m wide
and as deep as the group needs; a side of more than 90 is split into groups of 90 on bands
stacked away from the wall, as a scenario group holds 100 at most), each steering through
its door to a goal 12 m ahead. ``motionmatch bench crowd`` measures the same kind of
crowd (:func:`motionmatch.runtime.scenarios.door_crowd`) with frames per second and collisions. For
each ``N``, with the environment-aware search (penalised, other agents as obstacles) and
without it (plain motion matching, ``EnvironmentSettings(enabled=False)``), a
:class:`~motionmatch.runtime.world.World` is built with ``world_from_scenario``, stepped
``--warmup`` frames at 60 Hz (the first searches of every agent, compilation), then
``--frames`` frames are timed one by one: wall-clock and thread CPU milliseconds per
``World.step``.

Only APIs that the first commits of the one-engine work already had are used, so that
``bench_environment.py --baseline REV`` can run this file against an older source tree in
a subprocess (same machine, same run) for the before/after table.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DOORS = REPO / "scenarios" / "doors.json"


def crowd_scenario(n: int, base: dict | None = None, band: int = 90) -> dict:
    """``scenarios/doors.json`` (or ``base``) with its two groups resized to ``n`` agents
    (``n - n // 2`` south, ``n // 2`` north): each side's group is split into groups of at
    most ``band`` agents (a scenario group holds 100 at most), each on a band as wide as
    the group's area and as deep as it needs (plus a spare row), the bands stacked away
    from the wall; every group keeps the side's door waypoints, goal offset and speed
    (the first its seed, the others their own). Up to ``2 * band`` agents, the scene is
    the one this function made before groups were split."""
    d = copy.deepcopy(base if base is not None else json.loads(DOORS.read_text()))
    groups = []
    for g, count in zip(d["groups"], (n - n // 2, n // 2)):
        (x0, z0), (x1, z1) = g["area"]
        cols = int(abs(x1 - x0) // g["spacing"]) + 1
        near = min(abs(z0), abs(z1))  # the group's edge nearest the wall (z = 0)
        side = 1.0 if z0 > 0 else -1.0
        for k, start in enumerate(range(0, count, band)):
            m = min(band, count - start)
            rows = int(np.ceil(m / cols))  # rows the band needs (its area has one more to pick from)
            sub = copy.deepcopy(g)
            sub["count"] = m
            sub["name"] = g.get("name", "group") + (f"-{k}" if count > band else "")
            sub["seed"] = g.get("seed") if k == 0 else int(g.get("seed") or 0) * 1000 + k
            depth = g["spacing"] * (rows + 1)
            sub["area"] = [[x0, side * near], [x1, side * (near + depth)]]
            near += depth + g["spacing"]
            groups.append(sub)
    d["groups"] = groups
    return d


def time_world(db, matcher, n: int, environment: bool, frames: int, warmup: int) -> dict:
    """Step a crowd of ``n`` steering agents: ms per step (wall and thread CPU)."""
    from motionmatch.environment import parse_scenario
    try:
        from motionmatch.runtime.environment_matching import EnvironmentSettings
        from motionmatch.runtime.scenarios import world_from_scenario
    except ImportError:  # (an older tree, --baseline REV: before the World was split by concept)
        from motionmatch.runtime.world import EnvironmentSettings, world_from_scenario

    sc = parse_scenario(crowd_scenario(n))
    st = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"), enabled=environment)
    world = world_from_scenario(db, sc, settings=st, matcher=matcher, record_poses=False)
    dt = 1.0 / sc.fps
    world.step(0.0)
    for _ in range(warmup):
        world.step(dt)
    wall = np.empty(frames)
    cpu = np.empty(frames)
    for f in range(frames):
        c0, t0 = time.thread_time(), time.perf_counter()
        world.step(dt)
        wall[f], cpu[f] = time.perf_counter() - t0, time.thread_time() - c0
    return {"agents": n, "environment": environment, "frames": frames, "wall_ms_mean": 1e3 * float(wall.mean()),
            "wall_ms_median": 1e3 * float(np.median(wall)), "cpu_ms_mean": 1e3 * float(cpu.mean()),
            "cpu_ms_median": 1e3 * float(np.median(cpu))}


def run(db, matcher, agents, frames: int, warmup: int, log=print) -> list[dict]:
    """:func:`time_world` for every count in ``agents``, with and without the environment."""
    rows = []
    for n in agents:
        for env in (True, False):
            r = time_world(db, matcher, n, env, frames, warmup)
            log(f"  {n:5d} agents, {'environment' if env else 'plain      '}: {r['cpu_ms_mean']:8.2f} ms CPU, "
                f"{r['wall_ms_mean']:8.2f} ms wall per step")
            rows.append(r)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a saved database (.npz) with body ellipses (schema 'environment')")
    ap.add_argument("--agents", type=int, nargs="+", default=[51, 151, 1000])
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--json", action="store_true", help="print the results as one JSON line at the end")
    a = ap.parse_args(argv)
    from motionmatch.database import MotionDatabase
    try:
        from motionmatch.runtime.environment_matching import EnvironmentMatcher
    except ImportError:  # (an older tree)
        from motionmatch.runtime.world import EnvironmentMatcher

    db = MotionDatabase.load(a.db)
    rows = run(db, EnvironmentMatcher(db), a.agents, a.frames, a.warmup,
               log=lambda m: print(m, file=sys.stderr, flush=True))
    if a.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
