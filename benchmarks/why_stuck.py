"""Why an environment-aware character stands still: the scores of every frame at its last
search, with and without the obstacles, by the root speed of the frames.

    python benchmarks/why_stuck.py --db LAFAN_ENV.npz [--scenario scenarios/dense-crowd.json]
        [--seconds 30]

Runs the scenario (one environment-aware agent: the others, if any, obstacles) for
``--seconds``, records its searches (``EnvironmentChooser.record``) and, for the last
one, scores every frame the search
admits (``PenalizedSearch.score``: the penalised score, and the plain distance with no
obstacle; their difference is the penalty). Prints the frame chosen and, for bands of root
speed, the best score, its plain part and penalty, and how many frames are free of collision.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BANDS = ((0.0, 0.3), (0.3, 0.8), (0.8, 1.5), (1.5, 99.0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True, help="a database built with --schema environment")
    ap.add_argument("--scenario", default=str(REPO / "scenarios" / "dense-crowd.json"))
    ap.add_argument("--seconds", type=float, default=30.0)
    a = ap.parse_args(argv)
    from motionmatch.database import MotionDatabase
    from motionmatch.environment import load_scenario
    from motionmatch.runtime.chooser import EnvironmentChooser
    from motionmatch.runtime.scenarios import world_from_scenario

    warnings.simplefilter("ignore")
    db = MotionDatabase.load(a.db)
    world = world_from_scenario(db, load_scenario(a.scenario))
    choosing = [ag for ag in world.agents if ag.chooser is not None]
    if len(choosing) != 1:
        print(f"{a.scenario}: {len(choosing)} environment-aware agents; this looks at a scene with one")
        return 2
    agent = choosing[0]
    searches = []

    def record(q, obs, cnt, kw, _result):
        searches.append((world.time, q, obs.copy(), cnt.copy(), kw))

    EnvironmentChooser.record = record
    try:
        for f in range(round(a.seconds * world.fps)):
            world.step(0.0 if f == 0 else 1.0 / world.fps)
    finally:
        EnvironmentChooser.record = None
    print(f"{agent.name} at {np.round(agent.ctrl.root_pos, 2).tolist()} after {a.seconds:g} s")
    if not searches:
        print("no environment-aware search recorded")
        return 1
    t, q, obs, cnt, kw = searches[-1]
    ps = agent.chooser.matcher.search
    frames = np.flatnonzero(ps.valid & kw["mask"])
    args = {"weights": kw["weights"], "penalty": kw["penalty"], "env_weight": kw["env_weight"]}
    total = ps.score(frames, q, obs, cnt, **args)
    plain = ps.score(frames, q, obs, np.zeros_like(cnt), **args)
    penalty = total - plain
    speed = np.asarray(db.root_speeds())[frames]
    k = int(np.argmin(total))
    print(f"last search at {t:.2f} s: {int(cnt.sum())} obstacle rows near; {len(frames)} frames admitted, "
          f"{int((penalty <= 1e-9).sum())} free of collision")
    print(f"best frame {frames[k]} (root speed {speed[k]:.2f} m/s): score {total[k]:.3f} = plain {plain[k]:.3f} "
          f"+ penalty {penalty[k]:.3f}")
    print(f"{'root speed, m/s':<16}{'frames':>8}{'best score':>12}{'plain':>9}{'penalty':>9}{'free':>7}{'best free plain':>17}")
    for lo, hi in BANDS:
        band = (speed >= lo) & (speed < hi)
        if not band.any():
            continue
        b = int(np.argmin(np.where(band, total, np.inf)))
        free = band & (penalty <= 1e-9)
        bf = float(plain[free].min()) if free.any() else float("nan")
        print(f"{f'{lo:g}-{hi:g}':<16}{int(band.sum()):>8}{total[b]:>12.3f}{plain[b]:>9.3f}{penalty[b]:>9.3f}"
              f"{int(free.sum()):>7}{bf:>17.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
