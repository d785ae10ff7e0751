"""``motionmatch bench``: measurements a user can run on their own machine.

    motionmatch bench crowd --db DB.npz --agents N [--environment] [--seconds S] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from motionmatch.cli import _common as arg

CROWD_DESCRIPTION = """\
Step a crowd of N steering agents through a World and time it: N agents cross a wall
through two doors in opposite directions (the walls of scenarios/doors.json, a queue on
each side; see motionmatch.runtime.crowd.door_crowd), each with its own controller,
inertialization and foot locking. With --environment every search is environment-aware
(penalised, the walls and the other agents' future bodies as obstacles); without it, plain
motion matching. After --warmup simulated seconds (the first searches of every agent and
Numba's one-off compilation, reported apart), --seconds simulated seconds at 60 Hz are
timed step by step: wall time, the calling thread's CPU time and the process's (every
thread; robust to a busy machine). --threads sets the World's threads (the poses of many
agents, and the kernels of the step's searches, in two halves on two threads; default two,
one on a one-core machine).

Prints (--json: one JSON object) agents, steps_per_s (simulated frames per second of wall
time; 30 is real time at 30 fps), ms_per_step median and p95 (wall), the same in thread CPU
time, process_cpu_ms_per_step (all threads), and agent_collision_fraction: the share of
agent-frames whose body (the ellipse of the frame it plays, at its root) overlaps another
agent's. --per-agent steps each agent's
controller alone (World(batched=False)), the reference the batched path is compared with.
The database needs body ellipses for --environment (build it with '--schema environment').
"""


def cmd_bench_crowd(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from motionmatch.database import MotionDatabase
    from motionmatch.environment import parse_scenario
    from motionmatch.metrics.crowd import agents_colliding, placed_ellipses
    from motionmatch.runtime.crowd import door_crowd
    from motionmatch.runtime.world import EnvironmentSettings, world_from_scenario

    db = MotionDatabase.load(args.db)
    sc = parse_scenario(door_crowd(args.agents), label=f"door crowd of {args.agents}")
    settings = EnvironmentSettings.from_dicts(sc.penalty, sc.search, sc.controller.get("controls"),
                                              enabled=args.environment)
    progress = arg.Progress("motionmatch bench crowd", enabled=not args.quiet)
    progress.update("building the world", done=0.0)
    world = world_from_scenario(db, sc, settings=settings, record_poses=False)
    world.batched = not args.per_agent
    if args.threads is not None:
        world.threads = args.threads
    played = world.matcher.played_ellipses
    dt = 1.0 / sc.fps
    warm = max(0, round(args.warmup * sc.fps))
    frames = max(1, round(args.seconds * sc.fps))
    t0 = time.perf_counter()
    world.step(0.0)
    for f in range(warm):
        progress.update(f"warm-up {f + 1}/{warm}", done=f / (warm + frames))
        world.step(dt)
    warm_s = time.perf_counter() - t0
    wall, cpu, pcpu = np.empty(frames), np.empty(frames), np.empty(frames)
    colliding = np.zeros(frames)
    st, rows = world._batch.state, world._rows()
    for f in range(frames):
        progress.update(f"step {f + 1}/{frames}", done=(warm + f) / (warm + frames))
        c0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
        world.step(dt)
        wall[f], cpu[f], pcpu[f] = time.perf_counter() - w0, time.thread_time() - c0, time.process_time() - p0
        ell = placed_ellipses(played[st.frame[rows]], st.root_pos[rows][:, [0, 2]], st.root_yaw[rows])
        colliding[f] = agents_colliding(ell).mean()
    progress.close()
    res = {"agents": len(world.agents), "environment": bool(args.environment), "batched": world.batched,
           "threads": world.threads,
           "seconds": frames / sc.fps, "frames": frames,
           "steps_per_s": float(frames / wall.sum()), "ms_per_step": {"median": 1e3 * float(np.median(wall)),
                                                                     "p95": 1e3 * float(np.percentile(wall, 95))},
           "cpu_steps_per_s": float(frames / max(cpu.sum(), 1e-9)),
           "cpu_ms_per_step": {"median": 1e3 * float(np.median(cpu)), "p95": 1e3 * float(np.percentile(cpu, 95))},
           "process_cpu_ms_per_step": {"median": 1e3 * float(np.median(pcpu)),
                                       "p95": 1e3 * float(np.percentile(pcpu, 95))},
           "agent_collision_fraction": float(colliding.mean()), "warmup_s": warm_s,
           "warmup_frames": warm + 1}
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"{res['agents']} agents ({'environment-aware' if args.environment else 'plain'} search, "
          f"{'batched' if world.batched else 'per-agent'} stepping, {world.threads} thread(s)), "
          f"{frames} frames at {sc.fps:g} Hz:")
    print(f"  {res['steps_per_s']:.1f} steps/s of wall time ({res['ms_per_step']['median']:.2f} ms median, "
          f"{res['ms_per_step']['p95']:.2f} ms p95 per step)")
    print(f"  {res['cpu_steps_per_s']:.1f} steps/s of thread CPU time ({res['cpu_ms_per_step']['median']:.2f} ms "
          f"median, {res['cpu_ms_per_step']['p95']:.2f} ms p95); all threads {res['process_cpu_ms_per_step']['median']:.2f} "
          f"ms median per step")
    print(f"  agent collision fraction {res['agent_collision_fraction']:.4f}; warm-up {warm_s:.1f} s "
          f"({warm + 1} frames, compilation included)")
    return 0


def register(sub) -> None:
    b = sub.add_parser("bench", help="measure the runtime on this machine (crowds)",
                       description="Measurements a user can run on their own machine.")
    bsub = b.add_subparsers(dest="bench", metavar="WHAT")
    c = bsub.add_parser("crowd", help="frames per second of a crowd of N agents stepped by a World",
                        description=CROWD_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--db", required=True, metavar="DB.npz", help="database built with 'motionmatch build' "
                   "(with '--schema environment' for --environment)")
    c.add_argument("--agents", type=arg.int_range(2, 1000), default=1000, metavar="N",
                   help="agents in the crowd, 2 to 1000 (a scenario's limit; default 1000)")
    c.add_argument("--environment", action="store_true",
                   help="environment-aware searches (walls and other agents as obstacles)")
    c.add_argument("--seconds", type=arg.float_range(0.0, 3600.0, above=True), default=5.0, metavar="S",
                   help="simulated seconds timed (default 5)")
    c.add_argument("--warmup", type=arg.float_range(0.0, 600.0), default=1.0, metavar="S",
                   help="simulated seconds stepped before timing (default 1; compilation happens here)")
    c.add_argument("--per-agent", action="store_true",
                   help="step each agent's controller alone (the reference the batched World is compared with)")
    c.add_argument("--threads", type=arg.int_range(1, 64), default=None, metavar="T",
                   help="the World's threads for the poses and the searches' kernels (default: two, one on a one-core machine)")
    c.add_argument("--json", action="store_true", help="print the numbers as one JSON object")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=cmd_bench_crowd)
    b.set_defaults(func=arg.missing_command(b, bsub))


if __name__ == "__main__":
    from motionmatch.cli.main import main

    sys.exit(main(["bench", *sys.argv[1:]]))
