"""GenMM synthesis speed, coverage and memory, one CPU thread; one thread against two.

    python benchmarks/bench_genmm.py [--data DIR] [--samples 10] [--long 100000] [--json]
    python benchmarks/bench_genmm.py --only paper [--quick] [--seeds 5] [--plot genmm_scaling.png]
    python benchmarks/bench_genmm.py --only threads [--threads 1,2] [--rounds 15] [--before] [--json]
    python benchmarks/bench_genmm.py --only diversity [--sets 5] [--json]

For the salsa (1,296 output frames), crab dance (768) and elephant idle (402) examples at
the default settings (30 fps, patch 11, alpha 0.01, 3 iterations, factor 0.75, coarsest
5 x patch, output twice the example), it reports:

* the median synthesis time over ``--samples`` seeds, after one untimed warm-up: each
  seed on a fresh ``GenMM`` (the time of ``GenMM.sample``: the example pyramid, all stages,
  features out; no file I/O, no BVH parsing), and, as "warm", a second sample on the same
  ``GenMM`` that reuses its example pyramid (what ``--samples K`` does);
* the same with the array-API code on numpy (``Engine.compiled = False``: the code before
  the compiled CPU path of issue 33, which runs on one thread here: ``threads=1``);
* the same with a baseline measured in this run: the array-API code, but with patch distances
  computed the way the reference implementation does (unfolded ``p * d`` patch vectors and
  one matrix product over them), so the speed-up of the unfold-free distances is seen on
  this machine;
* the reference implementation's published-in-the-issue times (3.19 s, 1.39 s, 0.37 s on
  this kind of machine), the speed-up over them and PASS when at least 3x;
* mean coverage over the samples (and set diversity), and the time to write the BVH;
* with PyTorch installed, the same synthesis on PyTorch's CPU backend (one thread);
* a ``--long``-frame output from the salsa example (default 100,000 frames) in a fresh
  process: synthesis time and peak memory (peak resident set size, and the peak of the
  arrays numpy allocates, from tracemalloc).

With ``--only paper`` (or by default, after the above) it reproduces the GenMM paper's
evaluation (issue 17) with the metrics of :mod:`motionmatch.metrics.genmm` (coverage with
the threshold relative to the example, set diversity over the seeds, global and local
patch distances), ``--seeds`` outputs per row (default 5; the paper uses 200 for set
diversity), each output twice the examples' length:

* Table 2, number of examples: 1, 3 and 5 LAFAN1 dance clips of 120-220 frames at 30 fps
  (22 joints), cut from the two dance takes (the paper: five dance clips of 120-220
  frames); a control row gives the coverage of the first clip alone as the output.
* Table 3, skeleton complexity: the smallest skeleton of the data (the dog, 21 joints)
  up to the largest (Gangnam style, 67 joints), with the styled walk (31), the elephant
  (40), the crab (56) and the paper's 65-joint salsa between;
  a control gives the coverage of the example's first half as the output (about 0.5).
* Table 4, hyper-parameters on the salsa (65 joints, 648 frames at 30 fps): alpha
  (none, 1 ... 1e-4), patch size, coarse ratio (the coarsest stage in patch sizes) and
  pyramid factor, which set the number of pyramid stages (shown).
* Time and peak memory of outputs of 1k, 3k, 10k, 30k and 100k frames from the salsa
  (the paper's Figure 9: 522 frames, 65 joints), each in a fresh process: the synthesis
  time (no tracing), the process's peak resident set size (``resource.getrusage``
  ``ru_maxrss``) and, from a second run under ``tracemalloc``, the peak of the memory
  allocated during the synthesis (numpy reports its arrays to tracemalloc); ``--plot
  PNG`` draws both against the output length.

``--quick``: 2 seeds, the dog and Gangnam rows of Table 3, four rows of Table 4, outputs
of 1k-10k frames.

With ``--only diversity --sets S`` (issue 33, item 10): every moving example synthesized
with seeds 0 .. 3S - 1 and scored in sets of three seeds (coverage, patch distances, set
diversity): the mean and spread over the sets, the first set (seeds 0-2), and the official
code's set diversity from the issue where there is one.

With ``--only threads`` (issue 33, item 9): every moving example of ``genmm-examples``
synthesized ``--rounds`` times (seeds 0, 1, ...) on each of ``--threads`` thread counts,
alternated within every round, a fresh ``GenMM`` each time: minimum and median seconds per
count, the speed-up of the minima (PASS at 1.7x or more on every example), whether each
seed gave bit-identical features on every count, the load average before and after, and a
machine control timed in the same rounds (8 matrix products on 1 or 2 threads: what a
second thread could give at that moment on a shared machine). Exit status 1 when an
example misses 1.7x or an output differs.

Threads: every BLAS/OpenMP/numba pool is limited to one thread before numpy is imported;
GenMM's own threads are its ``threads`` setting (1, except in the threads part).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from _common import data_root  # noqa: E402

REFERENCE_S = {"Joe_Salsa-Dancing-6.bvh": 3.19, "Crabnew_Crab-dance-long.bvh": 1.39, "Elephant_idle1.bvh": 0.37}
TARGET_SPEEDUP = 3.0


def unfolded_nearest_patches(be, X, bank, p, alpha, *, periodic=False, block_bytes=64 << 20):
    """Baseline: the reference implementation's way, over unfolded patch vectors."""
    xp = be.xp
    n, d = X.shape
    Xe = xp.concat([X, X[:p - 1]], axis=0) if periodic and p > 1 else X
    m_x = n if periodic else n - p + 1
    Xp = np.stack([Xe[t:t + m_x] for t in range(p)], axis=1).reshape(m_x, p * d)
    Y = be.to_numpy(bank.Y)
    Yp = np.stack([Y[t:t + bank.starts] for t in range(p)], axis=1).reshape(bank.starts, p * d)
    xx = np.einsum("ij,ij->i", Xp, Xp)
    yy = np.einsum("ij,ij->i", Yp, Yp) + np.where(np.isinf(be.to_numpy(bank.yy)), np.inf, 0.0)
    D = (xx[:, None] + yy[None, :] - 2.0 * (Xp @ Yp.T)) / (p * d)
    cm = D.min(axis=0)
    score = D / (alpha + np.maximum(cm, 0))
    score[:, np.isinf(cm)] = np.inf
    return np.argmin(score, axis=1)


def time_synthesis(path: Path, samples: int, *, device: str = "cpu", baseline: bool = False, threads: int = 1,
                   compiled: bool = True) -> dict:
    """Median synthesis time of ``samples`` seeds (see the module doc). ``compiled=False``
    (or ``baseline``, which implies it): the array-API code on numpy instead of the
    compiled CPU path, i.e. the code before issue 33."""
    from motionmatch.genmm import GenMM, _core
    from motionmatch.metrics.genmm import coverage, set_diversity

    orig = _core.nearest_patches
    if baseline:
        _core.nearest_patches = unfolded_nearest_patches
        compiled = False

    def make():
        gen = GenMM(path, device=device, threads=threads)
        gen.engine.compiled = compiled and device == "cpu"
        return gen

    try:
        make().sample(seed=10_000)  # warm-up (imports, BLAS start-up)
        times, warm, outs = [], [], []
        for s in range(samples):
            # A fresh GenMM per sample: the timed synthesis includes building the example
            # pyramid (as the reference's run does); the second sample reuses it.
            gen = make()
            res = gen.sample(seed=s)
            times.append(res.synthesis_s)
            outs.append(res.motion)
            warm.append(gen.sample(seed=s).synthesis_s)
    finally:
        _core.nearest_patches = orig
    row = {"frames": outs[0].num_frames, "median_s": statistics.median(times), "min_s": min(times),
           "median_warm_s": statistics.median(warm)}
    if not baseline and device == "cpu" and compiled:
        covs = [coverage(gen.examples, o) for o in outs]
        row["coverage_mean"] = float(np.mean(covs))
        row["coverage_min"] = float(np.min(covs))
        row["set_diversity"] = float(set_diversity(gen.examples, outs)) if len(outs) > 1 else None
        from motionmatch.anim import save_bvh

        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            save_bvh(outs[0], Path(tmp) / "out.bvh")
            row["bvh_write_s"] = time.perf_counter() - t0
    return row


def long_child(path: str, frames: int) -> None:
    """Run in a fresh process: one long synthesis, print JSON with time and peak memory."""
    from motionmatch.genmm import GenMM

    gen = GenMM(path, threads=1)
    gen.sample(200, seed=1)  # warm-up
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    res = gen.sample(frames, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "frames": frames, "synthesis_s": res.synthesis_s, "stages": len(res.info.synthesis_lengths),
        "numpy_peak_mb": peak / 2**20, "peak_rss_mb": rss / 1024, "rss_before_mb": rss0 / 1024,
        "stage_s": [round(s, 3) for s in res.info.stage_seconds],
    }))


# --------------------------------------------------------------------------------------
# Threads (issue 33, item 9): one thread against two, alternated, on every example.
# --------------------------------------------------------------------------------------

# The moving clips of genmm-examples (the seventh file holds sparse key poses).
THREAD_EXAMPLES = ["Joe_Salsa-Dancing-6.bvh", "Malcolm_Gangnam-Style.bvh", "Joe_Walk-In-Circle.bvh",
                   "Crabnew_Crab-dance-long.bvh", "Elephant_idle1.bvh", "Xia_normal.bvh"]
TARGET_THREAD_SPEEDUP = 1.7


def machine_control(threads: int) -> float:
    """Seconds for 8 float32 matrix products (600 x 400 x 600) shared by ``threads``
    threads of GenMM's pool, BLAS on one thread each: what the machine gives a second
    thread right now (on a quiet machine, the two-thread time is half)."""
    from motionmatch.genmm import _cpu

    rng = np.random.default_rng(0)
    A = rng.standard_normal((600, 400)).astype(np.float32)
    B = rng.standard_normal((400, 600)).astype(np.float32)

    def job(r0, r1, _):
        for _i in range(r0, r1):
            A @ B

    with _cpu.one_blas_thread():
        t0 = time.perf_counter()
        _cpu.Workers(threads).rows(job, 8, 1e9)
        return time.perf_counter() - t0


def critical_path(path: Path, threads: int, seed: int) -> float:
    """CPU seconds on the critical path of one synthesis on ``threads`` threads: the
    calling thread's CPU time outside the parallel steps, plus, per parallel step, the
    longest share's CPU time and the caller's own overhead in the step (handing out the
    shares; waiting excluded). Thread CPU time does not count the time a thread waits for
    a core, so on a loaded machine this stays near what a quiet one would take (less the
    threads' wake-ups), as the wall clock cannot. Measured by wrapping ``_cpu._at_once``
    (where every parallel step runs) for the run."""
    import threading

    from motionmatch.genmm import GenMM, _cpu

    orig = _cpu._at_once
    caller = threading.current_thread()
    path_s = [0.0, 0.0]  # the caller's CPU in the steps, the steps' critical path

    def at_once(calls):
        if threading.current_thread() is not caller:  # a step inside a share
            return orig(calls)
        cpu = [0.0] * len(calls)

        def timed(j, call):
            def run():
                t = time.thread_time()
                call()
                cpu[j] = time.thread_time() - t
            return run

        t0 = time.thread_time()
        orig([timed(j, c) for j, c in enumerate(calls)])
        inside = time.thread_time() - t0
        path_s[0] += inside
        path_s[1] += max(cpu) + max(inside - cpu[0], 0.0)

    gen = GenMM(path, threads=threads)
    n = 2 * gen.example_frames
    _cpu._at_once = at_once
    try:
        t0 = time.thread_time()
        gen.engine.run(n, np.random.default_rng(seed))
        total = time.thread_time() - t0
    finally:
        _cpu._at_once = orig
    return total - path_s[0] + path_s[1]


def thread_scaling(root: Path, threads: list[int], rounds: int, say, before: bool = False) -> dict:
    """Per example of ``genmm-examples``: ``rounds`` syntheses (seeds 0, 1, ...) on each
    thread count, the counts alternated within every round (their order reversed every
    other round), a fresh ``GenMM`` each time; the minimum and median of each, the
    speed-up of the minima over the first count, whether every seed gave the same
    features on every count, and the machine control (:func:`machine_control`) timed in
    the same rounds. With ``before``, the code before issue 33 (the array-API code on
    numpy, ``Engine.compiled = False``, BLAS limited to each count by threadpoolctl) runs
    in the same rounds too."""
    from motionmatch.genmm import GenMM

    def synthesize(path, t, seed, compiled):
        gen = GenMM(path, threads=t)
        gen.engine.compiled = compiled
        if compiled:
            return gen.sample(seed=seed)
        from threadpoolctl import ThreadpoolController

        with ThreadpoolController().limit(limits=t, user_api="blas"):
            return gen.sample(seed=seed)

    out = {"threads": threads, "rounds": rounds, "before": before, "load_before": os.getloadavg(), "examples": {}}
    control = {t: [] for t in threads}
    for name in THREAD_EXAMPLES:
        path = root / "genmm-examples" / name
        say(f"threads: {name}")
        for t in threads:  # warm-up: compilation cache, BLAS, the pool's threads
            GenMM(path, threads=t).sample(seed=10_000)
        times = {t: [] for t in threads}
        old = {t: [] for t in threads}
        cpu_path = {t: [] for t in threads}
        same = True
        for r in range(rounds):
            order = threads if r % 2 == 0 else threads[::-1]
            feats = {}
            for t in order:
                res = synthesize(path, t, r, True)
                times[t].append(res.synthesis_s)
                feats[t] = res.features
                if before:
                    old[t].append(synthesize(path, t, r, False).synthesis_s)
            same &= all(np.array_equal(feats[t], feats[threads[0]]) for t in threads)
            for t in order:
                control[t].append(machine_control(t))
                cpu_path[t].append(critical_path(path, t, r))
        row = {"frames": int(feats[threads[0]].shape[0]), "identical_output": bool(same)}
        for t in threads:
            row[f"min_s_{t}"] = min(times[t])
            row[f"median_s_{t}"] = statistics.median(times[t])
            if before:
                row[f"before_min_s_{t}"] = min(old[t])
                row[f"before_median_s_{t}"] = statistics.median(old[t])
        for t in threads:
            row[f"cpu_path_min_s_{t}"] = min(cpu_path[t])
        for t in threads[1:]:
            row[f"cpu_path_speedup_{t}"] = min(cpu_path[threads[0]]) / min(cpu_path[t])
            row[f"speedup_min_{t}"] = min(times[threads[0]]) / min(times[t])
            row[f"speedup_median_{t}"] = statistics.median(times[threads[0]]) / statistics.median(times[t])
        out["examples"][name] = row
    out["control"] = {f"min_s_{t}": min(v) for t, v in control.items()}
    for t in threads[1:]:
        out["control"][f"speedup_min_{t}"] = min(control[threads[0]]) / min(control[t])
        out["control"][f"speedup_median_{t}"] = statistics.median(control[threads[0]]) / statistics.median(control[t])
    out["load_after"] = os.getloadavg()
    return out


def print_threads(res: dict) -> None:
    ts = res["threads"]
    print(f"\nGenMM threads: {res['rounds']} rounds, the thread counts alternated; synthesis seconds "
          f"(load average before {res['load_before'][0]:.1f}, after {res['load_after'][0]:.1f})")
    hdr = f"{'example':<30} {'frames':>6} " + " ".join(f"{f'{t}t min':>8} {f'{t}t med':>8}" for t in ts)
    hdr += " " + " ".join(f"{f'x{t} min':>7} {f'x{t} med':>7} {f'x{t} CPU':>7}" for t in ts[1:]) + "  same output"
    print(hdr)
    print("-" * len(hdr))
    ok = True
    for name, r in res["examples"].items():
        line = f"{name:<30} {r['frames']:>6} " + " ".join(f"{r[f'min_s_{t}']:>8.4f} {r[f'median_s_{t}']:>8.4f}" for t in ts)
        line += " " + " ".join(f"{r[f'speedup_min_{t}']:>6.2f}x {r[f'speedup_median_{t}']:>6.2f}x "
                               f"{r[f'cpu_path_speedup_{t}']:>6.2f}x" for t in ts[1:])
        line += f"  {'yes' if r['identical_output'] else 'NO'}"
        ok &= r["identical_output"]
        print(line)
    c = res["control"]
    print(f"{'machine control (8 products)':<37} " + " ".join(f"{c[f'min_s_{t}']:>8.4f} {'':>8}" for t in ts)
          + " " + " ".join(f"{c[f'speedup_min_{t}']:>6.2f}x {c[f'speedup_median_{t}']:>6.2f}x {'':>7}" for t in ts[1:]))
    for t in ts[1:]:
        worst = min(r[f"speedup_min_{t}"] for r in res["examples"].values())
        print(f"target: >= {TARGET_THREAD_SPEEDUP}x from {t} threads on every example (minima): "
              f"{'PASS' if worst >= TARGET_THREAD_SPEEDUP else 'FAIL'} (lowest {worst:.2f}x; the machine gave "
              f"{c[f'speedup_min_{t}']:.2f}x to pure matrix products)")
    print(f"same features for a seed on every thread count: {'PASS' if ok else 'FAIL'}")
    if res.get("before"):
        print("\nbefore (the array-API code on numpy, BLAS on each count of threads), same rounds: min / median s")
        for name, r in res["examples"].items():
            cells = []
            for t in ts:
                cells.append(f"{t}t {r[f'before_min_s_{t}']:.4f} / {r[f'before_median_s_{t}']:.4f} "
                             f"(now {r[f'min_s_{t}'] / r[f'before_min_s_{t}']:.2f}x the time)")
            x = " ".join(f"x{t} {r[f'before_min_s_{ts[0]}'] / r[f'before_min_s_{t}']:.2f}" for t in ts[1:])
            print(f"{name:<30} " + "; ".join(cells) + f"; {x}")
    print("x2 CPU: one thread's CPU seconds over the critical path's on two (thread CPU time: what a quiet machine "
          "would give, less thread wake-ups; minima over the rounds)")


# --------------------------------------------------------------------------------------
# Set diversity (issue 33, item 10): sets of three seeds, the spread between sets.
# --------------------------------------------------------------------------------------

# The official code's set diversity in the issue (one set of three seeds each).
OFFICIAL_DIVERSITY = {"Crabnew_Crab-dance-long.bvh": 0.696, "Elephant_idle1.bvh": 0.778, "Xia_normal.bvh": 0.671}


def diversity_sets(root: Path, sets: int, say) -> dict:
    """Per moving example of ``genmm-examples``: ``3 * sets`` outputs (seeds 0, 1, ...,
    defaults, twice the example's length), scored in sets of three (seeds 3k .. 3k + 2)
    with :func:`metrics.genmm.evaluate`: mean and spread (standard deviation) over the sets
    of coverage, global and local patch distance and set diversity, and the first set's."""
    from motionmatch.genmm import GenMM
    from motionmatch.metrics.genmm import evaluate

    out = {"sets": sets, "examples": {}}
    keys = ("coverage", "global_patch_distance", "local_patch_distance", "set_diversity")
    for name in THREAD_EXAMPLES:
        say(f"diversity: {name}")
        gen = GenMM(root / "genmm-examples" / name)
        outs = [gen.sample(seed=s).motion for s in range(3 * sets)]
        reps = [evaluate(gen.examples, outs[3 * k:3 * k + 3]) for k in range(sets)]
        row = {}
        for key in keys:
            v = np.array([r[key] for r in reps])
            row[key] = float(v.mean())
            row[f"{key}_spread"] = float(v.std())
            row[f"{key}_first_set"] = float(v[0])
        row["official_set_diversity"] = OFFICIAL_DIVERSITY.get(name)
        out["examples"][name] = row
    return out


def print_diversity(res: dict) -> None:
    print(f"\nGenMM set diversity: {res['sets']} sets of 3 seeds per example (seeds 0-{3 * res['sets'] - 1}), "
          "mean +- spread of the sets")
    print(f"{'example':<30} {'coverage':>15} {'global':>7} {'local':>7} {'diversity':>15} {'seeds 0-2':>9} {'official':>8}")
    for name, r in res["examples"].items():
        off = r["official_set_diversity"]
        print(f"{name:<30} {r['coverage']:>7.3f} +- {r['coverage_spread']:.3f} {r['global_patch_distance']:>7.3f} "
              f"{r['local_patch_distance']:>7.3f} {r['set_diversity']:>7.3f} +- {r['set_diversity_spread']:.3f} "
              f"{r['set_diversity_first_set']:>9.3f} {(f'{off:.3f}' if off else '-'):>8}")


# --------------------------------------------------------------------------------------
# The paper's evaluation (issue 17): Tables 2, 3, 4 and the time/memory curve (Figure 9).
# --------------------------------------------------------------------------------------

# Table 2: five dance clips of 120-220 frames at 30 fps (the paper's setting), cut from the
# two LAFAN1 dance takes (22 joints): (take, first frame, frames).
DANCE_CLIPS = [("dance1_subject1_crop.bvh", 100, 120), ("dance2_subject1_crop.bvh", 300, 150),
               ("dance1_subject1_crop.bvh", 700, 180), ("dance2_subject1_crop.bvh", 1000, 200),
               ("dance1_subject1_crop.bvh", 1300, 220)]
# Table 3: the smallest and largest skeletons in the data, and the paper's 65-joint one.
SKELETONS = [("quadruped-dog/D1_025_KAN01_001.bvh", "dog"), ("genmm-examples/Xia_normal.bvh", "styled walk"),
             ("genmm-examples/Elephant_idle1.bvh", "elephant idle"),
             ("genmm-examples/Crabnew_Crab-dance-long.bvh", "crab"),
             ("genmm-examples/Joe_Salsa-Dancing-6.bvh", "salsa"),
             ("genmm-examples/Malcolm_Gangnam-Style.bvh", "Gangnam style")]
QUICK_SKELETONS = [SKELETONS[0], SKELETONS[-1]]
# Table 4 on the salsa (65 joints, 648 frames at 30 fps, as the paper's ~500-frame,
# 65-joint examples): one setting varied at a time from the defaults.
HYPER = [("alpha", None), ("alpha", 1.0), ("alpha", 0.1), ("alpha", 0.01), ("alpha", 0.001), ("alpha", 0.0001),
         ("patch_size", 5), ("patch_size", 7), ("patch_size", 15), ("patch_size", 21),
         ("coarse_ratio", 3.0), ("coarse_ratio", 8.0), ("coarse_ratio", 15.0),
         ("pyramid_factor", 0.5), ("pyramid_factor", 0.9)]
QUICK_HYPER = [("alpha", None), ("alpha", 0.01), ("patch_size", 5), ("pyramid_factor", 0.5)]
LENGTHS = [1_000, 3_000, 10_000, 30_000, 100_000]
QUICK_LENGTHS = [1_000, 3_000, 10_000]


def score(examples, seeds: int, **config) -> dict:
    """GenMM at ``config`` (defaults otherwise) on ``examples`` (Motions): ``seeds`` outputs of
    the default length (twice the examples), scored with :func:`metrics.genmm.evaluate`
    (coverage and patch distances: means over the seeds; set diversity over the seeds)."""
    from motionmatch.genmm import GenMM, GenMMConfig
    from motionmatch.metrics.genmm import evaluate

    gen = GenMM(examples, GenMMConfig(**config))
    results = [gen.sample(seed=s) for s in range(seeds)]
    rep = evaluate(gen.examples, [r.motion for r in results])
    return {"coverage": rep["coverage"], "coverage_min": min(rep["per_output"]["coverage"]),
            "set_diversity": rep["set_diversity"], "global_patch_distance": rep["global_patch_distance"],
            "local_patch_distance": rep["local_patch_distance"], "frames": results[0].motion.num_frames,
            "joints": gen.skeleton.num_joints, "stages": len(results[0].info.synthesis_lengths),
            "synthesis_s": statistics.median(r.synthesis_s for r in results)}


def control(examples, output) -> dict:
    """The metrics of a given motion (a control: part of the examples, not a synthesis)."""
    from motionmatch.metrics.genmm import evaluate

    rep = evaluate(examples, [output])
    return {k: rep[k] for k in ("coverage", "global_patch_distance", "local_patch_distance")}


def dance_clips(root: Path) -> list:
    from motionmatch.anim import load_bvh

    takes = {}
    out = []
    for take, start, n in DANCE_CLIPS:
        if take not in takes:
            takes[take] = load_bvh(root / "lafan1" / take)
        out.append(takes[take][start:start + n])
    return out


def at30(m):
    from motionmatch.anim.resample import resample

    return m if abs(m.fps - 30.0) < 1e-9 else resample(m, 30.0)


def paper_tables(root: Path, seeds: int, quick: bool, say) -> dict:
    from motionmatch.anim import load_bvh

    out = {"seeds": seeds, "table2": [], "table3": [], "table4": []}
    clips = dance_clips(root)
    for n in (1, 3, 5):
        say(f"table 2: {n} example(s)")
        row = {"examples": n, "example_frames": [c.num_frames for c in clips[:n]], **score(clips[:n], seeds)}
        # Control: the first example alone given as the output (covers ~1/n of the set).
        row["control_first_example"] = control(clips[:n], clips[0])["coverage"] if n > 1 else None
        out["table2"].append(row)
    for rel, label in (QUICK_SKELETONS if quick else SKELETONS):
        say(f"table 3: {label}")
        m = at30(load_bvh(root / rel))
        row = {"example": label, "file": rel, "example_frames": m.num_frames, **score([m], seeds)}
        row["control_first_half"] = control([m], m[:m.num_frames // 2])["coverage"]
        out["table3"].append(row)
    salsa = at30(load_bvh(root / "genmm-examples" / "Joe_Salsa-Dancing-6.bvh"))
    for name, value in [("defaults", None)] + (QUICK_HYPER if quick else HYPER):
        if name != "defaults" and GENMM_DEFAULTS[name] == value:
            continue
        say(f"table 4: {name} = {value}")
        out["table4"].append({"setting": name, "value": value,
                              **score([salsa], seeds, **({} if name == "defaults" else {name: value}))})
    # How the absolute threshold of the previous metric would have scored the defaults.
    out["salsa_first_tenth"] = {"relative": control([salsa], salsa[:salsa.num_frames // 10])["coverage"]}
    from motionmatch.metrics.genmm import coverage

    out["salsa_first_tenth"]["absolute_2.0"] = coverage([salsa], salsa[:salsa.num_frames // 10], threshold=2.0)
    return out


GENMM_DEFAULTS = {"alpha": 0.01, "patch_size": 11, "coarse_ratio": 5.0, "pyramid_factor": 0.75}


def scaling_child(path: str, frames: int) -> None:
    """In a fresh process: one synthesis of ``frames`` frames timed, then the same again
    under tracemalloc; prints JSON."""
    from motionmatch.genmm import GenMM

    gen = GenMM(path, threads=1)
    gen.sample(200, seed=1)  # warm-up: imports, BLAS start-up
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    res = gen.sample(frames, seed=0)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del res
    tracemalloc.start()
    gen.sample(frames, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"frames": frames, "synthesis_s": wall, "peak_rss_mb": rss / 1024,
                      "rss_before_mb": rss0 / 1024, "traced_peak_mb": peak / 2**20}))


def scaling(root: Path, lengths: list[int], say) -> list[dict]:
    rows = []
    path = root / "genmm-examples" / "Joe_Salsa-Dancing-6.bvh"
    for n in lengths:
        say(f"time and memory: {n} frames")
        cmd = [sys.executable, __file__, "--child-scaling", str(path), str(n)]
        res = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        if res.returncode != 0:
            sys.exit(f"the {n}-frame run failed: {res.stderr.strip().splitlines()[-1:]}")
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return rows


def plot_scaling(rows: list[dict], path: str) -> None:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        sys.exit("the plot needs matplotlib: pip install 'motionmatch[viz]'")
    from motionmatch._files import atomic_write

    n = [r["frames"] for r in rows]
    fig = Figure(figsize=(9, 3.6))
    FigureCanvasAgg(fig)
    a, b = fig.subplots(1, 2)
    a.plot(n, [r["synthesis_s"] for r in rows], "o-")
    a.set(xlabel="output frames", ylabel="synthesis time (s)", title="time (one CPU thread)")
    b.plot(n, [r["traced_peak_mb"] for r in rows], "o-", label="numpy arrays (tracemalloc peak)")
    b.plot(n, [r["peak_rss_mb"] for r in rows], "s--", label="process peak RSS")
    b.set(xlabel="output frames", ylabel="MiB", title="peak memory")
    b.legend(fontsize=8)
    for ax in (a, b):
        ax.grid(alpha=0.3)
    fig.suptitle("GenMM, salsa example (65 joints, 648 frames at 30 fps), default settings", fontsize=10)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)


def print_paper(res: dict) -> None:
    def metrics(r):
        return (f"{100 * r['coverage']:>8.2f}% {r['set_diversity']:>9.3f} {r['global_patch_distance']:>8.3f} "
                f"{r['local_patch_distance']:>8.3f} {r['synthesis_s']:>7.2f}")

    head = f"{'coverage':>9} {'diversity':>9} {'global':>8} {'local':>8} {'synth s':>7}"
    s = res["seeds"]
    print(f"\nTable 2: number of examples (LAFAN1 dance clips of 120-220 frames, 22 joints; {s} seeds)")
    print(f"{'examples':<10} {'frames':<26} {head}  control")
    for r in res["table2"]:
        ctl = f"{100 * r['control_first_example']:.1f}%" if r["control_first_example"] is not None else "-"
        print(f"{r['examples']:<10} {r['example_frames']!s:<26} {metrics(r)}  {ctl}")
    print("  control: coverage of the first example alone, given as the output")
    print(f"\nTable 3: skeleton complexity ({s} seeds)")
    print(f"{'example':<14} {'joints':>6} {'frames':>6} {head}  control")
    for r in res["table3"]:
        print(f"{r['example']:<14} {r['joints']:>6} {r['example_frames']:>6} {metrics(r)}  "
              f"{100 * r['control_first_half']:.1f}%")
    print("  control: coverage of the example's first half, given as the output")
    print(f"\nTable 4: hyper-parameters, salsa example ({s} seeds; one setting changed from the defaults)")
    print(f"{'setting':<24} {'stages':>6} {head}")
    for r in res["table4"]:
        label = "defaults" if r["setting"] == "defaults" else f"{r['setting']} = {r['value']}"
        print(f"{label:<24} {r['stages']:>6} {metrics(r)}")
    t = res["salsa_first_tenth"]
    print(f"\nThe salsa's first tenth as the output: coverage {100 * t['relative']:.1f}% "
          f"(absolute threshold 2.0 of the previous metric: {100 * t['absolute_2.0']:.1f}%)")
    if res.get("scaling"):
        print("\nTime and peak memory over output length (salsa, defaults, one thread, fresh process each)")
        print(f"{'frames':>8} {'synth s':>8} {'ms/1k fr':>8} {'traced MiB':>10} {'peak RSS MiB':>12}")
        for r in res["scaling"]:
            print(f"{r['frames']:>8} {r['synthesis_s']:>8.2f} {1e6 * r['synthesis_s'] / r['frames']:>8.1f} "
                  f"{r['traced_peak_mb']:>10.0f} {r['peak_rss_mb']:>12.0f}")
        print("  traced: peak of the memory allocated during the synthesis (tracemalloc, a second run);"
              " peak RSS: resource.getrusage ru_maxrss of the process")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="data root (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--samples", type=int, default=10, help="seeds per example (default 10)")
    ap.add_argument("--long", type=int, default=100_000, help="frames of the long run (0 skips it)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unfolded-patch baseline")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--only", choices=["speed", "paper", "threads", "diversity", "all"], default="all",
                    help="speed: the synthesis timings above; paper: Tables 2-4 and the time/memory curve "
                         "(issue 17); threads: one thread against more (issue 33); diversity: sets of three seeds (issue 33); "
                         "all (default): speed and paper")
    ap.add_argument("--sets", type=int, default=5, help="diversity part: sets of three seeds per example (default 5)")
    ap.add_argument("--threads", default="1,2", metavar="T,T,...",
                    help="threads part: the thread counts compared, the first the baseline (default 1,2)")
    ap.add_argument("--rounds", type=int, default=15, help="threads part: syntheses per example and count (default 15)")
    ap.add_argument("--before", action="store_true",
                    help="threads part: also the code before issue 33 (array-API code, BLAS threads), same rounds")
    ap.add_argument("--quick", action="store_true",
                    help="paper part: 2 seeds, fewer rows, outputs of 1k-10k frames only (a few minutes)")
    ap.add_argument("--seeds", type=int, default=None, help="paper part: outputs per table row (default 5; --quick 2)")
    ap.add_argument("--plot", metavar="PNG", default=None, help="paper part: write the time/memory plot here")
    ap.add_argument("--lengths", default=None, metavar="N,N,...",
                    help="paper part: output lengths of the time/memory curve (default 1000,3000,10000,30000,100000; "
                         "--quick 1000,3000,10000; 'none' skips it)")
    ap.add_argument("--child-long", nargs=2, metavar=("PATH", "FRAMES"), help=argparse.SUPPRESS)
    ap.add_argument("--child-scaling", nargs=2, metavar=("PATH", "FRAMES"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_long:
        long_child(args.child_long[0], int(args.child_long[1]))
        return 0
    if args.child_scaling:
        scaling_child(args.child_scaling[0], int(args.child_scaling[1]))
        return 0
    root = data_root(args.data)
    if args.only == "diversity":
        say = (lambda m: None) if args.json else (lambda m: print(f"[{m}]", file=sys.stderr, flush=True))
        res = diversity_sets(root, max(1, args.sets), say)
        if args.json:
            print(json.dumps(res, indent=2))
        else:
            print_diversity(res)
        return 0
    if args.only == "threads":
        say = (lambda m: None) if args.json else (lambda m: print(f"[{m}]", file=sys.stderr, flush=True))
        counts = [int(v) for v in args.threads.split(",")]
        if len(counts) < 2 or min(counts) < 1:
            sys.exit("--threads needs two or more counts >= 1, e.g. 1,2")
        res = thread_scaling(root, counts, max(1, args.rounds), say, before=args.before)
        if args.json:
            print(json.dumps(res, indent=2))
        else:
            print_threads(res)
        ok = all(r["identical_output"] and r[f"speedup_min_{t}"] >= TARGET_THREAD_SPEEDUP
                 for r in res["examples"].values() for t in counts[1:])
        return 0 if ok else 1
    paper = None
    if args.only in ("paper", "all"):
        say = (lambda m: None) if args.json else (lambda m: print(f"[{m}]", file=sys.stderr, flush=True))
        seeds = args.seeds or (2 if args.quick else 5)
        # The scaling runs first, each in a fresh process, while this one is small.
        if args.lengths is None:
            lengths = QUICK_LENGTHS if args.quick else LENGTHS
        else:
            lengths = [] if args.lengths.strip().lower() == "none" else [int(v) for v in args.lengths.split(",")]
        rows = scaling(root, lengths, say)
        paper = paper_tables(root, seeds, args.quick, say)
        paper["scaling"] = rows
        if args.plot and rows:
            plot_scaling(rows, args.plot)
        if args.only == "paper":
            if args.json:
                print(json.dumps(paper, indent=2))
            else:
                print_paper(paper)
                if args.plot:
                    print(f"plot: {args.plot}")
            return 0
    folder = root / "genmm-examples"
    long_run = None
    if args.long:
        # First, while this process is small: a child inherits its parent's peak RSS.
        cmd = [sys.executable, __file__, "--child-long", str(folder / "Joe_Salsa-Dancing-6.bvh"), str(args.long)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ.copy())
        long_run = json.loads(out.stdout.strip().splitlines()[-1])
    try:
        import torch

        torch.set_num_threads(1)
        from motionmatch.genmm._backend import torch_available

        has_torch = torch_available()
    except ImportError:
        has_torch = False
    result = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
              "numpy": np.__version__, "threads": 1, "examples": {}}
    ok = True
    for name, ref in REFERENCE_S.items():
        path = folder / name
        row = time_synthesis(path, args.samples)
        row["array_api_median_s"] = time_synthesis(path, max(3, args.samples // 3), compiled=False)["median_s"]
        if not args.no_baseline:
            row["baseline_unfolded_median_s"] = time_synthesis(path, max(3, args.samples // 3), baseline=True)["median_s"]
        if has_torch:
            row["torch_cpu_median_s"] = time_synthesis(path, max(3, args.samples // 3), device="torch")["median_s"]
        row["reference_s"] = ref
        row["speedup_vs_reference"] = ref / row["median_s"]
        row["pass"] = row["speedup_vs_reference"] >= TARGET_SPEEDUP
        ok &= row["pass"]
        result["examples"][name] = row
    if long_run is not None:
        result["long"] = long_run
    if paper is not None:
        result["paper"] = paper
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        if paper is not None:
            print_paper(paper)
            if args.plot:
                print(f"plot: {args.plot}")
        print(f"GenMM synthesis, one thread, {result['machine']}, numpy {result['numpy']}")
        hdr = (f"{'example':<30} {'frames':>6} {'median s':>9} {'warm s':>7} {'array-API s':>11} {'unfolded s':>10} "
               f"{'torch s':>8} {'ref s':>6} "
               f"{'speed-up':>8} {'coverage':>9} {'diversity':>9} {'bvh s':>6}")
        print(hdr)
        print("-" * len(hdr))
        for name, r in result["examples"].items():
            base = r.get("baseline_unfolded_median_s")
            tch = r.get("torch_cpu_median_s")
            print(f"{name:<30} {r['frames']:>6} {r['median_s']:>9.3f} {r['median_warm_s']:>7.3f} "
                  f"{r['array_api_median_s']:>11.3f} {(f'{base:.3f}' if base else '-'):>10} {(f'{tch:.3f}' if tch else '-'):>8} {r['reference_s']:>6.2f} "
                  f"{r['speedup_vs_reference']:>7.1f}x {100 * r['coverage_mean']:>8.2f}% {r['set_diversity']:>9.3f} "
                  f"{r['bvh_write_s']:>6.3f}")
        if "long" in result:
            lg = result["long"]
            print(f"long output (salsa example): {lg['frames']} frames in {lg['synthesis_s']:.2f} s; "
                  f"peak RSS {lg['peak_rss_mb']:.0f} MB (before the run: {lg['rss_before_mb']:.0f} MB), "
                  f"peak of numpy arrays during the run {lg['numpy_peak_mb']:.0f} MB")
        print(f"target: >= {TARGET_SPEEDUP:g}x faster than the reference on each example: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
