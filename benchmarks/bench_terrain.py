"""Terrain queries, and what the ground stage adds to a step (issue 31).

    python benchmarks/bench_terrain.py [--points 4000] [--repeat 200]
    python benchmarks/bench_terrain.py --db DB.npz [--agents 1000] [--frames 60] [--warmup 30] [--rounds 3]
                                       [--environment] [--queries-only]

Queries: for the forest's height field (105 x 97 heights) and the same surface as a
triangle mesh (20,000 triangles, bucketed), and the flat floor: the median time of one
query of ``--points`` random points over the scene (a crowd of 1000 agents asking 4
points each is 4000), after a warm-up call (Numba's compile or cache load is left out).

With ``--db`` (a saved database), the ground stage's cost, flat against hills in the same
run, alternated ``--rounds`` times (the medians of each side's rounds):

* one character (``motionmatch run``'s World of one) playing a 20 s keyboard script
  (walk, turns, run): the median update (ms), warm-up updates left out;
* a crowd of ``--agents`` steering agents (``crowd_timing.py``'s doors crowd, plain
  motion matching unless ``--environment``): the median World step (ms) after
  ``--warmup`` steps, over ``--frames`` steps.

The hills: 0.3 m high, 12 m from crest to crest, over the whole scene (a height field of
0.5 m cells). Prints each number and the ratio terrain / flat (the issue's bar: at most
1.10).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from motionmatch.environment import load_scenario
from motionmatch.environment.terrain import FlatGround, HeightField, TriangleMesh

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

SCRIPT = {"duration": 20.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 4.0, "keys": ["d"]}, {"t": 7.0, "keys": ["s"]},
                                       {"t": 10.0, "keys": ["a"]}, {"t": 13.0, "keys": ["w", "shift"]},
                                       {"t": 17.0, "keys": ["w"]}]}


def median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def hills(half: float = 60.0, cell: float = 0.5) -> HeightField:
    """Rolling hills 0.3 m high, 12 m crest to crest, over ``[-half, half]^2`` (m)."""
    ax = np.arange(-half, half + 1e-9, cell)
    X, Z = np.meshgrid(ax, ax)
    return HeightField((ax[0], ax[0]), cell, 0.15 * (np.sin(X * np.pi / 6.0) * np.sin(Z * np.pi / 6.0) + 1.0))


def queries(points: int, repeat: int) -> None:
    field = load_scenario(REPO / "scenarios" / "forest.json").terrain
    v, t = field.surface(margin=0.0)
    mesh = TriangleMesh(v, t)
    lo, hi = field.bounds()
    pts = np.random.default_rng(0).uniform(lo - 2.0, hi + 2.0, (points, 2))
    for name, terrain in (("flat", FlatGround()), ("height field", field), (f"mesh ({len(t)} triangles)", mesh)):
        s = median_seconds(lambda terrain=terrain: terrain.query(pts), repeat)
        print(f"{name:>26}: {s * 1e6:8.1f} us per query of {points} points ({s / points * 1e9:6.1f} ns a point)")


def single_update_ms(db, terrain) -> float:
    """The median update (ms) of one character playing :data:`SCRIPT` (warm-up left out)."""
    from motionmatch.control.script import parse_script
    from motionmatch.environment.scene import Scene
    from motionmatch.runtime.offline import run_script

    rec = run_script(db, parse_script(SCRIPT), scene=None if terrain is None else Scene(terrain=terrain))
    secs = rec.update_seconds[1:] if rec.warm_up is None else rec.update_seconds[~rec.warm_up]
    return 1e3 * float(np.median(secs))


def crowd_step_ms(db, matcher, n: int, terrain, environment: bool, frames: int, warmup: int) -> float:
    """The median World step (ms) of the doors crowd of ``n`` agents on ``terrain``."""
    from crowd_timing import crowd_scenario

    from motionmatch.environment import parse_scenario
    from motionmatch.runtime.environment_matching import EnvironmentSettings
    from motionmatch.runtime.scenarios import world_from_scenario

    d = crowd_scenario(n)
    if terrain is not None:
        d["terrain"] = terrain.to_dict()
    sc = parse_scenario(d)
    st = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"), enabled=environment)
    world = world_from_scenario(db, sc, settings=st, matcher=matcher, record_poses=False)
    dt = 1.0 / sc.fps
    world.step(0.0)
    for _ in range(warmup):
        world.step(dt)
    wall = np.empty(frames)
    for f in range(frames):
        t0 = time.perf_counter()
        world.step(dt)
        wall[f] = time.perf_counter() - t0
    return 1e3 * float(np.median(wall))


def ground_cost(a) -> None:
    from motionmatch.database import MotionDatabase
    from motionmatch.runtime.environment_matching import EnvironmentMatcher

    db = MotionDatabase.load(a.db)
    ground = hills()
    single_update_ms(db, ground)  # (compilation and cache loads, left out)
    one = {"flat": [], "hills": []}
    for _ in range(a.rounds):
        for name, t in (("flat", None), ("hills", ground)):
            one[name].append(single_update_ms(db, t))
    f, h = np.median(one["flat"]), np.median(one["hills"])
    print(f"one character: {f:.3f} ms per update flat, {h:.3f} ms on hills: ratio {h / f:.3f} "
          f"(rounds: flat {np.round(one['flat'], 3).tolist()}, hills {np.round(one['hills'], 3).tolist()})", flush=True)
    matcher = EnvironmentMatcher(db)
    crowd = {"flat": [], "hills": []}
    for _ in range(a.rounds):
        for name, t in (("flat", None), ("hills", ground)):
            crowd[name].append(crowd_step_ms(db, matcher, a.agents, t, a.environment, a.frames, a.warmup))
    f, h = np.median(crowd["flat"]), np.median(crowd["hills"])
    kind = "environment-aware" if a.environment else "plain"
    print(f"crowd of {a.agents} ({kind}): {f:.2f} ms per step flat, {h:.2f} ms on hills: ratio {h / f:.3f} "
          f"(rounds: flat {np.round(crowd['flat'], 2).tolist()}, hills {np.round(crowd['hills'], 2).tolist()})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--db", help="a saved database: also time the ground stage (one character, a crowd)")
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--environment", action="store_true", help="the crowd with the environment-aware search")
    p.add_argument("--queries-only", action="store_true")
    a = p.parse_args()
    queries(a.points, a.repeat)
    if a.db and not a.queries_only:
        ground_cost(a)


if __name__ == "__main__":
    main()
