"""``motionmatch bench``: measurements a user can run on their own machine.

    motionmatch bench crowd --db DB.npz --agents N [--environment] [--seconds S] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from motionmatch.cli import _common as arg

CROWD_DESCRIPTION = """\
Step a crowd of N steering agents through a World and time it: N agents cross a wall
through two doors in opposite directions (the walls of scenarios/doors.json, a queue on
each side; see motionmatch.runtime.scenarios.door_crowd), each with its own controller,
inertialization and foot locking. With --environment every search is environment-aware
(penalised, the walls and the other agents' future bodies as obstacles); without it, plain
motion matching. After --warmup simulated seconds (the first searches of every agent and
Numba's one-off compilation, reported apart), --seconds simulated seconds at 60 Hz are
timed step by step: wall time, the calling thread's CPU time and every process's (all
their threads; robust to a busy machine).

--processes shares the agents among worlds built alike, one per process, stepped in
lockstep (motionmatch.runtime.shards.ShardedWorld: each sees the others' agents where they
stood at the step's start, so every agent takes the same steps as in one world); the
default is one per core, at most one per 250 agents. --threads sets each world's threads
(the poses of many agents and the kernels of the step's searches in two halves; default:
the cores shared among the processes).

Prints (--json: one JSON object) agents, processes, threads, steps_per_s (simulated frames
per second of wall time; 30 is real time at 30 fps), ms_per_step median and p95 (wall), the
same in the calling thread's CPU time, process_cpu_ms_per_step (every process's threads),
and agent_collision_fraction: the share of agent-frames whose body (the ellipse of the
frame it plays, at its root) overlaps another agent's. --per-agent steps each agent's
controller alone (World(batched=False)), the reference the batched path is compared with.
The database needs body ellipses for --environment (build it with '--schema environment').
"""


def default_processes(agents: int) -> int:
    """``--processes``' default: a process per core, at most one per 250 agents (a process
    costs a few seconds to start and a smaller crowd's step is short already)."""
    return max(1, min(os.cpu_count() or 1, agents // 250))


def cmd_bench_crowd(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from motionmatch.metrics.crowd import agents_colliding, placed_ellipses
    from motionmatch.runtime.scenarios import door_crowd_world
    from motionmatch.runtime.shards import ShardedWorld

    processes = args.processes or default_processes(args.agents)
    progress = arg.Progress("motionmatch bench crowd", enabled=not args.quiet)
    progress.update(f"building the world ({processes} process{'es' if processes > 1 else ''})", done=0.0)
    t0 = time.perf_counter()
    with ShardedWorld(door_crowd_world, (args.db, args.agents, args.environment, not args.per_agent),
                      processes=processes, threads=args.threads) as world:
        played = world.world.matcher.played_ellipses
        fps = world.world.fps  # (the scenario's rate)
        dt = 1.0 / fps
        warm = max(0, round(args.warmup * fps))
        frames = max(1, round(args.seconds * fps))
        world.step(0.0)
        for f in range(warm):
            progress.update(f"warm-up {f + 1}/{warm}", done=f / (warm + frames))
            world.step(dt)
        warm_s = time.perf_counter() - t0
        wall, cpu, pcpu = np.empty(frames), np.empty(frames), np.empty(frames)
        # every step's state kept, the collisions scored after the timed steps (scoring
        # between steps would take the caches from the next one)
        at = np.empty((frames, args.agents), dtype=np.int64)
        root, yaw = np.empty((frames, args.agents, 3)), np.empty((frames, args.agents))
        for f in range(frames):
            progress.update(f"step {f + 1}/{frames}", done=(warm + f) / (warm + frames))
            c0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
            world.step(dt)
            wall[f], cpu[f] = time.perf_counter() - w0, time.thread_time() - c0
            pcpu[f] = time.process_time() - p0 + world.cpu_seconds
            at[f], root[f], yaw[f] = world.state()
        threads = world.threads
    progress.update("scoring the collisions", done=1.0)
    colliding = np.array([agents_colliding(placed_ellipses(played[at[f]], root[f][:, [0, 2]], yaw[f])).mean()
                          for f in range(frames)])
    progress.close()
    res = {"agents": args.agents, "environment": bool(args.environment), "batched": not args.per_agent,
           "processes": processes, "threads": threads,
           "seconds": frames / fps, "frames": frames,
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
          f"{'batched' if res['batched'] else 'per-agent'} stepping, {processes} process(es) of {threads} "
          f"thread(s)), {frames} frames at {fps:g} Hz:")
    print(f"  {res['steps_per_s']:.1f} steps/s of wall time ({res['ms_per_step']['median']:.2f} ms median, "
          f"{res['ms_per_step']['p95']:.2f} ms p95 per step)")
    print(f"  {res['cpu_steps_per_s']:.1f} steps/s of this thread's CPU time ({res['cpu_ms_per_step']['median']:.2f} "
          f"ms median, {res['cpu_ms_per_step']['p95']:.2f} ms p95); all processes' threads "
          f"{res['process_cpu_ms_per_step']['median']:.2f} ms median per step")
    print(f"  agent collision fraction {res['agent_collision_fraction']:.4f}; warm-up {warm_s:.1f} s "
          f"({warm + 1} frames; the processes' start and compilation included)")
    return 0


def register(sub) -> None:
    b = sub.add_parser("bench", help="measure the runtime on this machine (crowds)",
                       description="Measurements a user can run on their own machine.")
    bsub = b.add_subparsers(dest="bench", metavar="WHAT")
    c = bsub.add_parser("crowd", help="frames per second of a crowd of N agents stepped by a World",
                        description=CROWD_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--db", required=True, metavar="DB.npz", help="database built with 'motionmatch build' "
                   "(with '--schema environment' for --environment)")
    c.add_argument("--agents", type=arg.int_range(2, 20_000), default=1000, metavar="N",
                   help="agents in the crowd, 2 to 20000 (a scenario's limit; default 1000; a plain crowd of "
                        "10000 takes a few seconds to build)")
    c.add_argument("--environment", action="store_true",
                   help="environment-aware searches (walls and other agents as obstacles)")
    c.add_argument("--seconds", type=arg.float_range(0.0, 3600.0, above=True), default=5.0, metavar="S",
                   help="simulated seconds timed (default 5)")
    c.add_argument("--warmup", type=arg.float_range(0.0, 600.0), default=1.0, metavar="S",
                   help="simulated seconds stepped before timing (default 1; compilation happens here)")
    c.add_argument("--per-agent", action="store_true",
                   help="step each agent's controller alone (the reference the batched World is compared with)")
    c.add_argument("--processes", type=arg.int_range(1, 64), default=None, metavar="P",
                   help="worlds stepping the agents at once, one per process (default: one per core, at most one "
                        "per 250 agents)")
    c.add_argument("--threads", type=arg.int_range(1, 64), default=None, metavar="T",
                   help="each world's threads for the poses and the searches' kernels (default: the cores shared "
                        "among the processes)")
    c.add_argument("--json", action="store_true", help="print the numbers as one JSON object")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=cmd_bench_crowd)
    b.set_defaults(func=arg.missing_command(b, bsub))


if __name__ == "__main__":
    from motionmatch.cli.main import main

    sys.exit(main(["bench", *sys.argv[1:]]))
