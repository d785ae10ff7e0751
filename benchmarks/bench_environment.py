"""Environment-aware motion matching: the paper's Table 1 and its database-size study.

    python benchmarks/bench_environment.py [--data DIR] [--out DIR] [--json] [--quick] [--no-scaling] [--no-crowd]
                                           [--scaling-only] [--ratio-only] [--diversity]
                                           [--repeat R] [--crowd-only] [--crowd-scale N ...] [--crowd-frames F]
                                           [--baseline REV] [--responsiveness-crowd]

Builds a mirrored LAFAN1 database with body ellipses (``lafan1-60fps``, ~108k frames at
60 fps, schema ``environment``) and runs ``scenarios/dense-obstacles.json`` (a 90 s path
through a field of obstacles) with each configuration of the paper's ablation:

=================  ===================================================================
Motion Matching    environment ignored (plain accelerated search)
Linear Search      penalised search over every frame, base optimisations only
One Obstacle       the linear search, but only the first ellipse against the first obstacle
                   (the pre-selection's nearest, disks first) is penalised: the paper's
                   ideal case of early rejection, which still visits every frame
Disk               the body is the circle around its ellipse
No Adaptive        no minimum stride, no 5% representatives (every frame represents)
No Dissimilarity   stride 1 over the representatives
Start 0            searches start at the first representative, no warm start
Large v            aggressiveness v x 8
Ours               every optimisation
=================  ===================================================================

and prints a table like the paper's Table 1 with two times per row, both thread CPU time
in the closed loop (mean and standard deviation, ms), with their speed-ups over the linear
search measured in the same run:

* search: the search call alone (``PenalizedSearch.choose_into``: the query's columns, the
  high-level controls' weights, the penalised search, the collision fallback and the
  summary), the paper's "performance" and the measure of the 10x bar;
* choice: the whole frame choice of the chooser, i.e. the search plus obstacle gathering
  (the pre-selection) and the chooser's Python bookkeeping, about 10 us that are the same
  code for every row, so the choice ratio is the lower of the two;

then diversity (distinct database frames played), error (mean distance
from the root to the path, m), collision time (mean duration of an intersection, s) and
collision fraction, with the speed-up over the linear search measured in the same run.
With ``--repeat R`` every configuration runs R times, interleaved, and the table shows the
median of the R mean times (the runs are deterministic: only the timings differ; use it
on a busy machine).

The linear baseline ("Linear Search") is an honest linear scan: a compiled (numba) loop
over every valid frame in the mask computing its weighted query distance (float64
accumulation, vectorised), then, only when that distance is below the best score so far,
the frame's obstacle penalties with early rejection (cheap lower bounds first, obstacles
nearest first, stop once the best is reached); it is seeded with the frame playing now.
Its glue (the chooser) is the same code as the full method's.

Then:

* search only: the recorded searches of the "Ours" run replayed through
  ``PenalizedSearch.search`` (warm caches, no chooser glue) with the full method and the
  linear search, alternately: microseconds per search and their ratio;
* agreement: every search of the "Ours" run is repeated with the linear search; the share
  that returns the same frame, the mean score ratio, and the number of searches where
  "Ours" returned a colliding frame although the linear search found a collision-free one
  scoring lower by more than 1e-6 (must be 0: the collision fallback);
* no obstacles near: the same path without obstacles, "Ours" against plain matching
  (their search times should be equal: the plain accelerated search runs);
* database size (``--no-scaling`` skips, ``--scaling-only`` runs only it): 25% ... 400% of the database (fewer clips, or
  extra copies of every clip played 0.8-1.25x as fast), "Ours" on the first 30 s of the
  scenario: mean and standard deviation of the search time, with a plot
  (``OUT/environment_scaling.png``) and the linear-growth reference;
* crowd (``--no-crowd`` skips): ``scenarios/doors.json``, 100 steering agents stepped by a
  :class:`~motionmatch.runtime.world.World`, mean / p95 step time against the 60 Hz
  budget (16.7 ms);
* crowd scale (``--crowd-scale N ...``; ``--crowd-only`` runs only the crowds, with
  ``51 151 1000`` by default): milliseconds (thread CPU, and wall) per ``World.step`` for
  crowds of ``N`` steering agents in ``scenarios/doors.json`` resized
  (``benchmarks/crowd_timing.py``), with the environment-aware search and without it
  (plain motion matching); ``--baseline REV`` first runs the same measurement on the
  source of git revision ``REV`` (extracted to ``OUT/baseline-REV``, in a subprocess) and
  prints the speed-ups.

``--ratio-only`` runs only the linear search and the full method, alternated ``--repeat``
times (default 5): each round's search times and their ratio (the issue's bar: at least
10x in every round), and whether every round played the same frames.

``--diversity`` runs only the study of the paper's diversity claim
(:mod:`environment_diversity`): every row on the path started at 4 points, both ways
round, with the transitions per run and an open-loop comparison on the same queries.

``--responsiveness-crowd`` runs only the paper's Figure 9 check: ``scenarios/doors-small.json``
with every agent at Responsiveness 0.5, then 4 (share crossed, time to cross the wall,
distance to the nearest other body).

Timings are from one core and depend on the machine; ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPO, data_root
from environment_diversity import jumps
from motionmatch.anim.resample import resample
from motionmatch.database import MotionDatabase
from motionmatch.database.schema import environment_schema
from motionmatch.datasets import load_folder
from motionmatch.environment import load_scenario
from motionmatch.metrics.scenario import scenario_report
from motionmatch.runtime.chooser import EnvironmentChooser
from motionmatch.runtime.environment_matching import EnvironmentMatcher, EnvironmentSettings
from motionmatch.runtime.scenarios import run_scenario
from motionmatch.search.penalized import SearchOptions

SCENE = REPO / "scenarios" / "dense-obstacles.json"

ABLATIONS = [
    ("Motion Matching", {"enabled": False}),
    ("Linear Search", {"search": {"method": "linear"}}),
    ("One Obstacle", {"search": {"method": "linear"}, "one_obstacle": True}),
    ("Disk", {"penalty": {"disk_body": True}}),
    ("No Adaptive", {"search": {"adaptive": False}}),
    ("No Dissimilarity", {"search": {"dissimilarity": False}}),
    ("Start 0", {"search": {"warm_start": False}}),
    ("Large v", {"search": {"v": 4.0}}),
    ("Ours", {}),
]


#: the paper's Table 1 (ms per search on an i7-12700k, distinct poses, path error m,
#: mean time per collision s), printed beside ours
PAPER = {"Motion Matching": (0.22, 1997, 0.09, 0.88), "Linear Search": (9.50, 3305, 0.12, 0.05),
         "One Obstacle": (5.83, 2103, 0.09, 0.79), "Disk": (0.90, 3838, 0.29, 0.37),
         "No Adaptive": (2.40, 3729, 0.13, 0.08), "No Dissimilarity": (1.62, 3608, 0.13, 0.12),
         "Start 0": (1.02, 3807, 0.16, 0.06), "Large v": (0.88, 4389, 0.37, 0.12), "Ours": (0.80, 4378, 0.14, 0.08)}


@contextlib.contextmanager
def first_obstacle_only():
    """While active, every environment-aware search penalises only its first ellipse
    against its first pre-selected obstacle (the "One Obstacle" row): the gathered counts
    are cut to ``[min(n0, 1), 0, 0]`` where a choice's job is made from them (the chooser
    gathers alone, :meth:`EnvironmentChooser.gather`, or with a world's other agents in
    one batch, ``begin_many``: both reach ``_job``; patching ``gather`` alone missed the
    batch and left this row equal to the linear search's)."""
    job = EnvironmentChooser._job

    def one(self, ctrl, query, mask, view, obs, cnt, nearest, *rest):
        if cnt.any():
            cut = np.zeros_like(cnt)
            cut[0] = min(int(cnt[0]), 1)
            cnt = cut
        return job(self, ctrl, query, mask, view, obs, cnt, nearest, *rest)

    EnvironmentChooser._job = one
    try:
        yield
    finally:
        EnvironmentChooser._job = job


def settings_for(sc, cfg: dict) -> EnvironmentSettings:
    pen = dict(sc.penalty)
    pen.update(cfg.get("penalty", {}))
    srch = dict(sc.search)
    srch.update(cfg.get("search", {}))
    return EnvironmentSettings.from_dicts(pen, srch, sc.controller.get("controls"), enabled=cfg.get("enabled", True))


def run(db, matcher, sc, cfg, record=False):
    st = settings_for(sc, cfg)
    log = []
    if record:
        def rec_search(q, obs, cnt, kw, r):
            log.append((q.copy(), obs[:, : max(int(cnt.max()), 1)].copy(), cnt.copy(), dict(kw), r))

        EnvironmentChooser.record = rec_search
    try:
        with first_obstacle_only() if cfg.get("one_obstacle") else contextlib.nullcontext():
            world, rec = run_scenario(db, sc, settings=st, matcher=matcher)
        rep = scenario_report(world, rec, sc)
    finally:
        EnvironmentChooser.record = None
    cpu = np.array([t for lg in rec.logs if lg is not None for t in lg.cpu_times]) * 1e3
    rep["cpu_ms_mean"] = float(cpu.mean()) if cpu.size else 0.0
    rep["cpu_ms_std"] = float(cpu.std()) if cpu.size else 0.0
    call = np.array([t for lg in rec.logs if lg is not None for t in lg.search_cpu_times]) * 1e3
    rep["search_ms_mean"] = float(call.mean()) if call.size else 0.0
    rep["search_ms_std"] = float(call.std()) if call.size else 0.0
    rep["jumps"] = jumps(rec.frames[0])
    rep["frames_sha1"] = hashlib.sha1(np.ascontiguousarray(rec.frames).tobytes()).hexdigest()
    return rep, log


def responsiveness_crowd(db, matcher, scene: str = "doors-small", values=(0.5, 4.0)) -> dict:
    """The paper's Figure 9 check: every agent of ``scenarios/<scene>.json`` at each
    Responsiveness in ``values``; for each, the share that crossed the wall, the mean and
    median time to cross it (first frame past z = 0, s) and the mean and 10th percentile
    of the distance from each body to the nearest other body (m, body ellipses)."""
    from motionmatch.environment.collision import pair_distances
    from motionmatch.metrics.scenario import body_tracks

    sc = load_scenario(REPO / "scenarios" / f"{scene}.json")
    start = np.sign([a.start[1] for a in sc.agents])
    out = {}
    for r in values:
        st = EnvironmentSettings.from_dicts(sc.penalty, sc.search, {**sc.controller.get("controls", {}),
                                                                    "responsiveness": r})
        world, rec = run_scenario(db, sc, settings=st, matcher=matcher)
        crossed = np.sign(rec.root_positions[:, :, 2]) != start[:, None]
        t_cross = np.array([np.argmax(c) / rec.fps if c.any() else np.nan for c in crossed])
        tracks = body_tracks(world, rec)
        n = len(sc.agents)
        nearest = np.full((n, rec.frames.shape[1]), np.inf)
        for i in range(n):
            for j in range(i + 1, n):
                d = pair_distances(tracks[i], tracks[j])
                nearest[i] = np.minimum(nearest[i], d)
                nearest[j] = np.minimum(nearest[j], d)
        near = nearest[np.isfinite(nearest)]
        out[r] = {"crossed": float(crossed[:, -1].mean()), "cross_s_mean": float(np.nanmean(t_cross)),
                  "cross_s_median": float(np.nanmedian(t_cross)), "nearest_m_mean": float(near.mean()),
                  "nearest_m_p10": float(np.percentile(near, 10))}
        print(f"  responsiveness {r:g}: crossed {out[r]['crossed']:.0%}, time to cross {out[r]['cross_s_mean']:.2f} s "
              f"(median {out[r]['cross_s_median']:.2f}), nearest other body {out[r]['nearest_m_mean']:.2f} m "
              f"(10th percentile {out[r]['nearest_m_p10']:.2f} m)", flush=True)
    return out


def replay(matcher, log, repeat: int = 5) -> dict:
    """The recorded searches (with obstacles) replayed through ``search`` with the full
    method and with the linear search, alternately: median over ``repeat`` passes of the mean
    thread CPU time per search (us)."""
    from motionmatch.search.penalized import SearchBuffers

    cases = [(q, obs, cnt, {k: v for k, v in kw.items() if k not in ("options", "buffers")}, kw.get("options"))
             for q, obs, cnt, kw, r in log if r.method != "plain"]
    if not cases:
        return {"searches": 0}
    buf = SearchBuffers(matcher.search)
    lin = SearchOptions(method="linear")
    times = {"ours": [], "linear": []}
    for _ in range(repeat):
        for name in ("ours", "linear"):
            t = time.thread_time_ns()
            for q, obs, cnt, kw, opt in cases:
                matcher.search.search(q, obs, cnt, options=lin if name == "linear" else opt, buffers=buf, **kw)
            times[name].append((time.thread_time_ns() - t) / len(cases) / 1e3)
    ours, linear = float(np.median(times["ours"])), float(np.median(times["linear"]))
    return {"searches": len(cases), "ours_us": ours, "linear_us": linear, "speedup": linear / max(ours, 1e-9)}


def agreement(matcher, log) -> dict:
    same, ratios, bad, n = 0, [], 0, 0
    for q, obs, cnt, kw, r in log:
        if r.method == "plain":
            continue
        n += 1
        kw = dict(kw)
        kw["options"] = SearchOptions(method="linear")
        lin = matcher.search.search(q, obs, cnt, **kw)
        same += lin.index == r.index
        ratios.append(r.score / lin.score if lin.score > 0 else 1.0)
        if r.collides and not lin.collides and lin.score < r.score - 1e-6:
            bad += 1
    return {"searches_with_obstacles": n, "same_frame_share": same / max(n, 1),
            "score_ratio_mean": float(np.mean(ratios)) if ratios else 1.0,
            "colliding_when_linear_free_and_lower": bad}


def scaled_database(clips, factor: float, schema):
    """``factor`` of the database: a prefix of the clips (< 1), or extra copies of every clip
    played at other speeds (> 1); always with mirrored copies."""
    if factor <= 1.0:
        n = max(1, round(len(clips) * factor))
        order = np.random.default_rng(0).permutation(len(clips))[:n]
        return MotionDatabase.build([clips[i] for i in sorted(order)], mirror_copies=True, schema=schema)
    out = list(clips)
    speeds = [0.8, 1.25, 0.9, 1.1, 0.85, 1.2, 0.95]
    k = 0
    while len(out) < factor * len(clips) - 0.5:
        s = speeds[k % len(speeds)]
        for c in clips:
            if len(out) >= factor * len(clips) - 0.5:
                break
            m = resample(c, c.fps / s)  # more (fewer) frames at the same rate: slower (faster)
            m.fps = c.fps
            m.name = f"{c.name}_x{s}"
            out.append(m)
        k += 1
    return MotionDatabase.build(out, mirror_copies=True, schema=schema)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data")
    ap.add_argument("--out", default=str(REPO / "out" / "environment"))
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    ap.add_argument("--quick", action="store_true", help="30 s of the scenario instead of 90")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--no-crowd", action="store_true")
    ap.add_argument("--scaling-only", action="store_true",
                    help="only the database-size study (25%%-400%%; no Table 1, no crowd)")
    ap.add_argument("--repeat", type=int, default=1, help="run every configuration R times (median time)")
    ap.add_argument("--ratio-only", action="store_true",
                    help="only the linear search and the full method, alternated --repeat times (default 5): "
                         "search time of each and their ratio per round")
    ap.add_argument("--diversity", action="store_true",
                    help="only the diversity study: every row on the path started at 4 points, both ways round")
    ap.add_argument("--crowd-only", action="store_true", help="only the crowd measurements (no Table 1)")
    ap.add_argument("--responsiveness-crowd", action="store_true",
                    help="only the paper's Figure 9 check: doors-small.json with every agent at responsiveness 0.5, "
                         "then 4 (time to cross, distance to the nearest other body)")
    ap.add_argument("--crowd-scale", type=int, nargs="*", metavar="N",
                    help="ms per World step for crowds of N steering agents (default with --crowd-only: 51 151 1000)")
    ap.add_argument("--crowd-frames", type=int, default=120, help="steps timed per crowd (after 60 warm-up steps)")
    ap.add_argument("--baseline", metavar="REV",
                    help="also time the crowds with the source of git revision REV (a subprocess, same run)")
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat: expected >= 1")
    if a.crowd_scale is None and a.crowd_only:
        a.crowd_scale = [51, 151, 1000]
    root = data_root(a.data)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    clips = load_folder(root / "lafan1-60fps")
    schema = environment_schema()
    t0 = time.perf_counter()
    db = MotionDatabase.build(clips, mirror_copies=True, schema=schema)
    matcher = EnvironmentMatcher(db)
    print(f"database: {db.num_frames} frames ({db.valid.sum()} searchable), {db.schema.dims}-D "
          f"'{db.schema.name}', built in {time.perf_counter() - t0:.1f} s; "
          f"{len(matcher.search.representatives(True)[0])} representatives")
    if a.responsiveness_crowd:
        summary = {"responsiveness_crowd": responsiveness_crowd(db, matcher)}
        if a.json:
            print(json.dumps(summary, indent=1, default=float))
        return 0
    if a.ratio_only:
        summary = {"ratio": ratio_rounds(db, matcher, a.repeat if a.repeat > 1 else 5, a.quick)}
        (out / "environment_ratio.json").write_text(json.dumps(summary, indent=1, default=float))
        return 0
    if a.diversity:
        from environment_diversity import study

        sc = load_scenario(SCENE)
        summary = {"diversity": study(db, matcher, sc, dict(ABLATIONS), run)}
        print_diversity(summary["diversity"]["summary"])
        (out / "environment_diversity.json").write_text(json.dumps(summary, indent=1, default=float))
        return 0
    if a.scaling_only:
        summary = {"scaling": scaling(clips, schema, out, quick=a.quick)}
        (out / "environment_results.json").write_text(json.dumps(summary, indent=1, default=float))
        return 0
    summary = {} if a.crowd_only else table1(db, matcher, clips, schema, a, out)
    if not a.no_crowd:
        summary["crowd"] = crowd(db, matcher)
    if a.crowd_scale:
        summary["crowd_scale"] = crowd_scale(db, matcher, a.crowd_scale, a.crowd_frames, a.baseline, out)
    if a.json:
        print(json.dumps(summary, indent=1, default=float))
    (out / "environment_results.json").write_text(json.dumps(summary, indent=1, default=float))
    return 0


def ratio_rounds(db, matcher, rounds: int, quick: bool = False) -> dict:
    """The issue's 10x bar alone: the linear search and the full method on the scenario,
    alternated ``rounds`` times (after a 3 s warm-up of each); per round the mean search
    time of each (thread CPU, ms) and their ratio, printed as they come; returns them with
    the smallest and the median ratio and the digest of the frames the full method played
    (the runs are deterministic: every round must play the same frames)."""
    sc = load_scenario(SCENE)
    if quick:
        sc.duration = 30.0
    warm = load_scenario(SCENE)
    warm.duration = 3.0
    cfg = dict(ABLATIONS)
    for name in ("Linear Search", "Ours"):
        run(db, matcher, warm, cfg[name])
    rows, played = [], set()
    print(f"linear search against the full method, {rounds} rounds alternated ({sc.duration:g} s each)")
    for k in range(rounds):
        row = {}
        for name in ("Linear Search", "Ours"):
            rep, _ = run(db, matcher, sc, cfg[name])
            row[name] = rep["search_ms_mean"]
            if name == "Ours":
                played.add(rep["frames_sha1"])
        row["ratio"] = row["Linear Search"] / max(row["Ours"], 1e-9)
        rows.append(row)
        print(f"  round {k + 1}: linear {row['Linear Search']:.4f} ms, ours {row['Ours']:.4f} ms: "
              f"{row['ratio']:.2f}x", flush=True)
    r = np.array([x["ratio"] for x in rows])
    print(f"ratio: min {r.min():.2f}x, median {np.median(r):.2f}x, max {r.max():.2f}x (>= 10 in every round: "
          f"{'yes' if r.min() >= 10 else 'NO'}); the full method played the same frames in every round: "
          f"{'yes' if len(played) == 1 else 'NO'} (sha1 {', '.join(sorted(played))[:12]}); load average "
          f"{os.getloadavg()[0]:.1f}")
    return {"rounds": rows, "min": float(r.min()), "median": float(np.median(r)), "frames_sha1": sorted(played)}


def print_diversity(s: dict) -> None:
    """The diversity study's summary beside the paper's Table 1 column."""
    print(f"\ndiversity (distinct frames played in 90 s, {s['runs']} runs: 4 starts x 2 directions)")
    print(f"{'Ablation':18s} {'mean':>7s} {'min':>6s} {'max':>6s}   paper")
    for name, v in s.items():
        if isinstance(v, dict):
            print(f"{name:18s} {v['mean']:7.0f} {v['min']:6.0f} {v['max']:6.0f}   {PAPER[name][1]:5d}")
    print(f"Ours above Linear Search in {s['ours_above_linear']} of {s['runs']} runs (mean ratio "
          f"{s['ours_over_linear_mean']:.2f}; paper 4378 / 3305 = 1.32); Ours the highest of the environment-aware "
          f"rows in {s['ours_highest_env_aware']} of {s['runs']}; jumps per run: linear "
          f"{s['Linear Search jumps_mean']:.0f}, ours {s['Ours jumps_mean']:.0f}; open loop (Ours' queries): distinct "
          f"frames chosen by ours {s['open_loop_ours_distinct_mean']:.0f}, by the linear search "
          f"{s['open_loop_linear_distinct_mean']:.0f}")


def table1(db, matcher, clips, schema, a, out: Path) -> dict:
    """Table 1 and what goes with it (see the module docstring); returns the summary."""
    sc = load_scenario(SCENE)
    if a.quick:
        sc.duration = 30.0
    results = {}
    log = []
    # warm-up (numba caches, weighted searchers)
    warm = load_scenario(SCENE)
    warm.duration = 3.0
    for _, cfg in ABLATIONS:
        run(db, matcher, warm, cfg)
    times: dict[str, list] = {name: [] for name, _ in ABLATIONS}
    calls: dict[str, list] = {name: [] for name, _ in ABLATIONS}
    for k in range(a.repeat):
        for name, cfg in ABLATIONS:
            rep, _ = run(db, matcher, sc, cfg)  # timed runs: nothing wraps the search
            times[name].append(rep["cpu_ms_mean"])
            calls[name].append(rep["search_ms_mean"])
            if k == 0:
                results[name] = rep
            print(f"  ran {name}: search {rep['search_ms_mean']:.3f} ms, choice {rep['cpu_ms_mean']:.3f} ms",
                  flush=True)
        print(f"  round {k + 1}: linear / ours search time "
              f"{calls['Linear Search'][-1] / max(calls['Ours'][-1], 1e-9):.2f}x", flush=True)
    for name, _ in ABLATIONS:
        results[name]["cpu_ms_runs"] = times[name]
        results[name]["cpu_ms_mean"] = float(np.median(times[name]))
        results[name]["search_ms_runs"] = calls[name]
        results[name]["search_ms_mean"] = float(np.median(calls[name]))
    # the same (deterministic) run of the full method again, recording its searches
    _, log = run(db, matcher, sc, dict(ABLATIONS)["Ours"], record=True)
    lin = results["Linear Search"]["cpu_ms_mean"]
    lin_s = results["Linear Search"]["search_ms_mean"]
    print(f"\nTable 1 (scenarios/dense-obstacles.json, {sc.duration:g} s, {len(sc.obstacles)} obstacles, "
          f"search every {10} frames at 60 Hz, one core)")
    print(f"{'Ablation':18s} {'Search (ms)':>16s} {'vs lin.':>7s} {'Choice (ms)':>16s} {'vs lin.':>7s} "
          f"{'Diversity':>9s} {'Error (m)':>9s} {'Coll. time (s)':>14s} {'Coll. frac.':>11s}   "
          f"paper: {'ms':>5s} {'div.':>5s} {'err.':>5s} {'coll.':>5s}")
    for name, r in results.items():
        srch = f"{r['search_ms_mean']:.3f} ± {r['search_ms_std']:.3f}"
        perf = f"{r['cpu_ms_mean']:.3f} ± {r['cpu_ms_std']:.3f}"
        print(f"{name:18s} {srch:>16s} {lin_s / max(r['search_ms_mean'], 1e-9):6.1f}x {perf:>16s} "
              f"{lin / max(r['cpu_ms_mean'], 1e-9):6.1f}x {r['diversity']:9d} "
              f"{r['error_m']:9.3f} {r['collision_time_s']:14.3f} {r['collision_fraction']:11.3f}   "
              "       {:5.2f} {:5d} {:5.2f} {:5.2f}".format(*PAPER[name]))
    ours, plain = results["Ours"], results["Motion Matching"]
    acc = {
        "collision_fraction_ratio": ours["collision_fraction"] / max(plain["collision_fraction"], 1e-9),
        "error_increase_m": ours["error_m"] - plain["error_m"],
        "search_speedup_vs_linear": lin_s / max(ours["search_ms_mean"], 1e-9),
        "choice_speedup_vs_linear": lin / max(ours["cpu_ms_mean"], 1e-9),
        "ours_search_ms": ours["search_ms_mean"],
        "ours_ms": ours["cpu_ms_mean"],
    }
    print(f"\nacceptance: collision fraction ours/plain = {acc['collision_fraction_ratio']:.3f} (<= 1/3), "
          f"error increase = {acc['error_increase_m']:+.3f} m (<= 0.1), search speed-up over linear = "
          f"{acc['search_speedup_vs_linear']:.1f}x (>= 10; whole choice {acc['choice_speedup_vs_linear']:.1f}x), "
          f"ours {acc['ours_search_ms']:.3f} ms search, {acc['ours_ms']:.3f} ms choice (< 1)")
    rp = replay(matcher, log)
    if rp["searches"]:
        print(f"search only (the {rp['searches']} recorded searches replayed, warm caches, no chooser glue): ours "
              f"{rp['ours_us']:.1f} us vs linear {rp['linear_us']:.1f} us per search ({rp['speedup']:.1f}x)")
    ag = agreement(matcher, log)
    print(f"agreement with the linear search ({ag['searches_with_obstacles']} searches with obstacles): same frame "
          f"{ag['same_frame_share']:.1%}, mean score ratio {ag['score_ratio_mean']:.3f}, colliding results where the "
          f"linear search had a collision-free lower one: {ag['colliding_when_linear_free_and_lower']}")
    # no obstacles near: the core's accelerated search
    empty = load_scenario(SCENE)
    empty.obstacles = []
    empty.duration = min(sc.duration, 30.0)
    e_ours, _ = run(db, matcher, empty, {})
    e_plain, _ = run(db, matcher, empty, {"enabled": False})
    print(f"no obstacles near: search ours {e_ours['search_ms_mean']:.3f} ms vs plain {e_plain['search_ms_mean']:.3f} ms "
          f"(ratio {e_ours['search_ms_mean'] / max(e_plain['search_ms_mean'], 1e-9):.2f}); choice ours "
          f"{e_ours['cpu_ms_mean']:.3f} ms vs plain {e_plain['cpu_ms_mean']:.3f} ms "
          f"(ratio {e_ours['cpu_ms_mean'] / max(e_plain['cpu_ms_mean'], 1e-9):.2f})")
    summary = {"table": results, "acceptance": acc, "agreement": ag, "search_only": rp,
               "no_obstacles": {"ours_ms": e_ours["cpu_ms_mean"], "plain_ms": e_plain["cpu_ms_mean"],
                                "ours_search_ms": e_ours["search_ms_mean"], "plain_search_ms": e_plain["search_ms_mean"]}}
    if not a.no_scaling:
        summary["scaling"] = scaling(clips, schema, out, quick=a.quick)
    return summary


def scaling(clips, schema, out: Path, quick: bool = False) -> list:
    print("\ndatabase size (Ours, first 30 s of the scenario)")
    print(f"{'size':>6s} {'frames':>8s} {'ms mean':>8s} {'ms std':>8s} {'choice ms':>10s} {'choice std':>10s}"
          "   (search: the search call alone, as in Table 1; choice: with the obstacle gathering)")
    rows = []
    for f in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0):
        if quick and f > 2.0:
            continue
        db = scaled_database(clips, f, schema)
        m = EnvironmentMatcher(db)
        sc = load_scenario(SCENE)
        sc.duration = 30.0
        run(db, m, replace(sc, duration=2.0), {})
        rep, _ = run(db, m, sc, {})
        rows.append({"factor": f, "frames": db.num_frames, "ms_mean": rep["search_ms_mean"],
                     "ms_std": rep["search_ms_std"], "choice_ms_mean": rep["cpu_ms_mean"],
                     "choice_ms_std": rep["cpu_ms_std"]})
        print(f"{f:6.0%} {db.num_frames:8d} {rep['search_ms_mean']:8.3f} {rep['search_ms_std']:8.3f} "
              f"{rep['cpu_ms_mean']:10.3f} {rep['cpu_ms_std']:10.3f}", flush=True)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6, 4), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(111)
        x = np.array([r["frames"] for r in rows]) / 1000
        y = np.array([r["ms_mean"] for r in rows])
        s = np.array([r["ms_std"] for r in rows])
        ax.errorbar(x, y, yerr=s, fmt="o-", capsize=3, label="Ours: search (mean ± std)")
        ax.plot(x, [r["choice_ms_mean"] for r in rows], "s:", color="0.5", label="Ours: whole choice (mean)")
        ref = next((r for r in rows if r["factor"] == 1.0), rows[0])
        ax.plot(x, ref["ms_mean"] * np.array([r["frames"] for r in rows]) / ref["frames"], "r--",
                label="linear growth from 100%")
        ax.set_xlabel("database size (thousand frames)")
        ax.set_ylabel("thread CPU time per search (ms)")
        ax.set_title("database size: 25% to 400% (first 30 s of dense-obstacles)", fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "environment_scaling.png")
        print(f"wrote {out / 'environment_scaling.png'}")
    except ImportError:
        pass
    return rows


def crowd(db, matcher) -> dict:
    """``scenarios/doors.json`` (100 steering agents) played by a World: step times and outcome."""
    sc = load_scenario(REPO / "scenarios" / "doors.json")
    c0 = time.thread_time()
    world, rec = run_scenario(db, sc, matcher=matcher, record_poses=False)
    cpu_ms = (time.thread_time() - c0) * 1e3 / sc.frames  # the run's recording included
    rep = scenario_report(world, rec, sc)
    steps = rec.step_seconds[1:] * 1e3
    start_side = np.sign([a.start[1] for a in sc.agents])
    crossed = float(np.mean(np.sign(rec.root_positions[:, -1, 2]) != start_side))
    res = {"agents": len(sc.agents), "step_ms_mean": float(steps.mean()), "step_ms_p95": float(np.percentile(steps, 95)),
           "cpu_ms_mean": cpu_ms,
           "realtime_factor": rep["realtime_factor"], "crossed": crossed,
           "agent_collision_fraction": rep["agent_collision_fraction"], "ms_per_search": rep["ms_per_search"]}
    print(f"\ncrowd: {res['agents']} agents (scenarios/doors.json, {sc.duration:g} s, World): step "
          f"{res['step_ms_mean']:.2f} ms mean, {res['step_ms_p95']:.2f} ms p95 (60 Hz budget 16.7 ms; thread CPU "
          f"{cpu_ms:.2f} ms), "
          f"{res['realtime_factor']:.2f}x real time; {crossed:.0%} crossed; agent collision fraction "
          f"{res['agent_collision_fraction']:.3f}")
    return res


def crowd_scale(db, matcher, agents, frames: int, baseline: str | None, out: Path) -> dict:
    """ms per World step of crowds of ``agents`` steering agents (``crowd_timing.py``), with
    and without the environment-aware search; with ``baseline`` (a git revision) the same
    measurement runs first on that revision's source, in a subprocess, for the speed-ups."""
    from crowd_timing import run as time_crowds

    res: dict = {"frames": frames}
    if baseline:
        res["baseline_rev"] = baseline
        res["baseline"] = _baseline_crowds(db, agents, frames, baseline, out)
    print(f"\ncrowds (scenarios/doors.json resized, {frames} steps after 60, thread CPU):", flush=True)
    res["now"] = time_crowds(db, matcher, agents, frames, 60)
    print(f"\n{'agents':>6s} {'search':12s}" + (f" {baseline[:10]:>12s}" if baseline else "")
          + f" {'now':>10s}" + (f" {'speed-up':>9s}" if baseline else "") + "   (ms per World.step, CPU; wall)")
    for k, r in enumerate(res["now"]):
        line = f"{r['agents']:6d} {'environment' if r['environment'] else 'plain':12s}"
        if baseline:
            b = res["baseline"][k]
            line += f" {b['cpu_ms_mean']:12.2f}"
        line += f" {r['cpu_ms_mean']:10.2f}"
        if baseline:
            line += f" {b['cpu_ms_mean'] / max(r['cpu_ms_mean'], 1e-9):8.1f}x"
            line += f"   (wall {b['wall_ms_mean']:.2f} -> {r['wall_ms_mean']:.2f})"
        else:
            line += f"   (wall {r['wall_ms_mean']:.2f})"
        print(line)
    return res


def _baseline_crowds(db, agents, frames: int, rev: str, out: Path) -> list:
    """``crowd_timing.py`` on the source of git revision ``rev`` (extracted under ``out``,
    compiled once there: numba caches beside the files), in a subprocess."""
    import subprocess

    src = out / f"baseline-{rev}"
    if not (src / "src" / "motionmatch").is_dir():
        src.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    dbfile = out / "crowd-db.npz"
    db.save(dbfile)
    print(f"\ncrowds at {rev} (a subprocess on {src / 'src'}):", flush=True)
    env = dict(os.environ, PYTHONPATH=str(src / "src"))
    r = subprocess.run([sys.executable, str(Path(__file__).parent / "crowd_timing.py"), "--db", str(dbfile),
                        "--agents", *map(str, agents), "--frames", str(frames), "--json"], env=env, check=True,
                       stdout=subprocess.PIPE, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
