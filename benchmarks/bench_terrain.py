"""Terrain queries: heights and normals of many ground points in one compiled call.

    python benchmarks/bench_terrain.py [--points 4000] [--repeat 200]

For the forest's height field (105 x 97 heights) and the same surface as a triangle mesh
(20,000 triangles, bucketed), and the flat floor: the median time of one query of
``--points`` random points over the scene (a crowd of 1000 agents asking 4 points each
is 4000), after a warm-up call (Numba's compile or cache load is left out).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from motionmatch.environment import load_scenario
from motionmatch.environment.terrain import FlatGround, TriangleMesh

REPO = Path(__file__).resolve().parents[1]


def median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=200)
    a = p.parse_args()
    field = load_scenario(REPO / "scenarios" / "forest.json").terrain
    v, t = field.surface(margin=0.0)
    mesh = TriangleMesh(v, t)
    lo, hi = field.bounds()
    pts = np.random.default_rng(0).uniform(lo - 2.0, hi + 2.0, (a.points, 2))
    for name, terrain in (("flat", FlatGround()), ("height field", field), (f"mesh ({len(t)} triangles)", mesh)):
        s = median_seconds(lambda terrain=terrain: terrain.query(pts), a.repeat)
        print(f"{name:>26}: {s * 1e6:8.1f} us per query of {a.points} points ({s / a.points * 1e9:6.1f} ns a point)")


if __name__ == "__main__":
    main()
