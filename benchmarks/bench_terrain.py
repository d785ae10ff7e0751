"""Terrain queries, and what the ground stage adds to a step (issue 31).

    python benchmarks/bench_terrain.py [--points 4000] [--repeat 200]
    python benchmarks/bench_terrain.py --db DB.npz [--agents 1000] [--frames 60] [--warmup 30] [--rounds 3]
                                       [--environment] [--queries-only] [--stage]

Queries: for the forest's height field (105 x 97 heights) and the same surface as a
triangle mesh (20,000 triangles, bucketed), and the flat floor: the median time of one
query of ``--points`` random points over the scene (a crowd of 1000 agents asking 4
points each is 4000), after a warm-up call (Numba's compile or cache load is left out).

With ``--db`` (a saved database), the ground stage's cost, flat against hills in the same
run, alternated ``--rounds`` times (the medians of each side's rounds):

* one character (``motionmatch run``'s World of one) playing a 20 s keyboard script
  (walk, turns, run): the median update (thread CPU ms), the first second left out;
* a crowd of ``--agents`` steering agents (``crowd_timing.py``'s doors crowd, plain
  motion matching unless ``--environment``): the median World step (process CPU ms,
  both threads) after ``--warmup`` steps, over ``--frames`` steps.

Three grounds: flat (no terrain: no ground stage), level (a height field of zeros: the
ground stage runs and changes nothing else, so the difference is its cost) and hills
(0.3 m high, 12 m from crest to crest, over the whole scene: the characters also slow on
the slopes, so their steps differ). Prints the least of each ground's rounds (the machine
is shared: the least disturbed) and the ratios to flat (the issue's bar: at most 1.10).

With ``--stage`` (and ``--db``), the ground stage's own pieces, hot in the cache (thread
CPU time, the least of 9 repeats): one row's simulated root, pose and ground stage (the
batch's compiled call) on the three grounds, ``adapt_intents`` of one row, and 1000 rows'
poses with and without the stage (one thread).
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


def level(half: float = 60.0) -> HeightField:
    """A height field of zeros over ``[-half, half]^2``: the ground stage runs (it is not
    :class:`FlatGround`) on the floor's own heights, so its cost is all that differs."""
    return HeightField((-half, -half), 1.0, np.zeros((int(2 * half) + 1, int(2 * half) + 1)))


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
    """The median update (ms of CPU time) of one character playing :data:`SCRIPT`, the first
    second left out (warm-up)."""
    from motionmatch.control.script import parse_script
    from motionmatch.environment.scene import Scene
    from motionmatch.runtime.inputs import ScriptInput
    from motionmatch.runtime.world import World

    script = parse_script(SCRIPT)
    world = World(db, None if terrain is None else Scene(terrain=terrain), environment=False,
                  agents_as_obstacles=False, stagger=False, record_poses=False)
    agent = world.add_agent("one", (0.0, 0.0), (0.0, 1.0))
    agent.source = ScriptInput(script, gaits=agent.ctrl.gaits)
    n = script.frame_count(1.0 / 60.0)
    cpu = np.empty(n)
    for i in range(n):
        c0 = time.thread_time()
        world.step(0.0 if i == 0 else 1.0 / 60.0)
        cpu[i] = time.thread_time() - c0
    return 1e3 * float(np.median(cpu[60:]))


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
    cpu = np.empty(frames)
    for f in range(frames):
        c0 = time.process_time()
        world.step(dt)
        cpu[f] = time.process_time() - c0
    return 1e3 * float(np.median(cpu))


def _least_us(fn, number: int) -> float:
    import timeit

    return min(timeit.repeat(fn, number=number, repeat=9, timer=time.thread_time)) / number * 1e6


def stage_costs(db) -> None:
    """The ground stage's pieces (see the module docstring, ``--stage``)."""
    from motionmatch.control.intent import Intent, IntentRows
    from motionmatch.runtime.batch import ControllerBatch
    from motionmatch.runtime.controller import Controller

    walk = Intent.planar(0.3, 1.2, "walk")
    one, dt1, goals = np.zeros(1, dtype=np.int64), np.full(1, 1.0 / 60.0), np.zeros((1, 5))
    goals[0, :2] = 0.3, 1.2
    got = {}
    for name, terrain in (("flat", None), ("level", level()), ("hills", hills())):
        ctrl = Controller(db)
        ctrl.batch.set_terrain(terrain)
        for i in range(200):
            ctrl.update(0.0 if i == 0 else 1.0 / 60.0, walk)
        one[0] = ctrl.row
        b = ctrl.batch
        got[name] = _least_us(lambda b=b: b.advance_sim_pose(one, dt1, goals), 20000)
        if b.ground is not None and name == "hills":
            rows = IntentRows.of([walk])
            adapt = _least_us(lambda b=b, rows=rows: b.ground.adapt_intents(one, rows), 20000)
    print("one row, simulated root + pose (+ ground) in one compiled call: "
          + ", ".join(f"{k} {v:.2f} us" for k, v in got.items())
          + f"; the stage adds {got['level'] - got['flat']:.2f} us (level), {got['hills'] - got['flat']:.2f} us (hills); "
          f"adapt_intents of one row {adapt:.2f} us", flush=True)
    many = {}
    for name, terrain in (("flat", None), ("level", level()), ("hills", hills())):
        batch = ControllerBatch(db)
        ctrls = [Controller(db, position=(float(i % 30), 0.0, float(i // 30)), batch=batch) for i in range(1000)]
        batch.set_terrain(terrain)
        for i in range(30):
            for c in ctrls:
                c.update(0.0 if i == 0 else 1.0 / 60.0, walk)
        rows = np.array([c.row for c in ctrls], dtype=np.int64)
        dt = np.full(len(rows), 1.0 / 60.0)
        many[name] = _least_us(lambda batch=batch, rows=rows, dt=dt: batch.pose(rows, dt), 10) / len(rows)
    print("1000 rows' poses (+ ground), one thread, per row: " + ", ".join(f"{k} {v:.2f} us" for k, v in many.items())
          + f"; the stage adds {many['level'] - many['flat']:.2f} us (level), {many['hills'] - many['flat']:.2f} us "
          "(hills) a row", flush=True)


def ground_cost(a) -> None:
    from motionmatch.database import MotionDatabase
    from motionmatch.runtime.environment_matching import EnvironmentMatcher

    db = MotionDatabase.load(a.db)
    grounds = (("flat", None), ("level", level()), ("hills", hills()))
    for _, t in grounds[1:]:
        single_update_ms(db, t)  # (compilation and cache loads, left out)

    def table(what: str, unit: str, fn) -> None:
        got = {name: [] for name, _ in grounds}
        for _ in range(a.rounds):
            for name, t in grounds:
                got[name].append(fn(t))
        best = {name: min(v) for name, v in got.items()}  # (the least disturbed round: a shared machine)
        print(f"{what}: " + ", ".join(f"{name} {best[name]:.4g} {unit}" for name, _ in grounds)
              + f"; ratio to flat: level {best['level'] / best['flat']:.3f}, hills {best['hills'] / best['flat']:.3f} "
              f"(rounds: {', '.join(f'{k} {np.round(v, 4).tolist()}' for k, v in got.items())})", flush=True)

    table("one character, CPU per update", "ms", lambda t: single_update_ms(db, t))
    matcher = EnvironmentMatcher(db)
    kind = "environment-aware" if a.environment else "plain"
    table(f"crowd of {a.agents} ({kind}), CPU per step", "ms",
          lambda t: crowd_step_ms(db, matcher, a.agents, t, a.environment, a.frames, a.warmup))


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
    p.add_argument("--stage", action="store_true", help="with --db: the ground stage's own pieces, hot")
    a = p.parse_args()
    queries(a.points, a.repeat)
    if a.db and a.stage:
        from motionmatch.database import MotionDatabase

        stage_costs(MotionDatabase.load(a.db))
    elif a.db and not a.queries_only:
        ground_cost(a)


if __name__ == "__main__":
    main()
