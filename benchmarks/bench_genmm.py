"""GenMM synthesis speed, coverage and memory, one CPU thread.

    python benchmarks/bench_genmm.py [--data DIR] [--samples 10] [--long 100000] [--json]

For the salsa (1,296 output frames), crab dance (768) and elephant idle (402) examples at
the default settings (30 fps, patch 11, alpha 0.01, 3 iterations, factor 0.75, coarsest
5 x patch, output twice the example), it reports:

* the median synthesis time over ``--samples`` seeds, after one untimed warm-up: each
  seed on a fresh ``GenMM`` (the time of ``GenMM.sample``: the example pyramid, all stages,
  features out; no file I/O, no BVH parsing), and, as "warm", a second sample on the same
  ``GenMM`` that reuses its example pyramid (what ``--samples K`` does);
* the same with a baseline measured in this run: the same code, but with patch distances
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

Threads: every BLAS/OpenMP/numba pool is limited to one thread before numpy is imported.
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


def time_synthesis(path: Path, samples: int, *, device: str = "cpu", baseline: bool = False) -> dict:
    from motionmatch.genmm import GenMM, _core
    from motionmatch.metrics.genmm import coverage, set_diversity

    orig = _core.nearest_patches
    if baseline:
        _core.nearest_patches = unfolded_nearest_patches
    try:
        GenMM(path, device=device).sample(seed=10_000)  # warm-up (imports, BLAS start-up)
        times, warm, outs = [], [], []
        for s in range(samples):
            # A fresh GenMM per sample: the timed synthesis includes building the example
            # pyramid (as the reference's run does); the second sample reuses it.
            gen = GenMM(path, device=device)
            res = gen.sample(seed=s)
            times.append(res.synthesis_s)
            outs.append(res.motion)
            warm.append(gen.sample(seed=s).synthesis_s)
    finally:
        _core.nearest_patches = orig
    row = {"frames": outs[0].num_frames, "median_s": statistics.median(times), "min_s": min(times),
           "median_warm_s": statistics.median(warm)}
    if not baseline and device == "cpu":
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

    gen = GenMM(path)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="data root (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--samples", type=int, default=10, help="seeds per example (default 10)")
    ap.add_argument("--long", type=int, default=100_000, help="frames of the long run (0 skips it)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unfolded-patch baseline")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--child-long", nargs=2, metavar=("PATH", "FRAMES"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_long:
        long_child(args.child_long[0], int(args.child_long[1]))
        return 0
    folder = data_root(args.data) / "genmm-examples"
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
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"GenMM synthesis, one thread, {result['machine']}, numpy {result['numpy']}")
        hdr = (f"{'example':<30} {'frames':>6} {'median s':>9} {'warm s':>7} {'unfolded s':>10} {'torch s':>8} {'ref s':>6} "
               f"{'speed-up':>8} {'coverage':>9} {'diversity':>9} {'bvh s':>6}")
        print(hdr)
        print("-" * len(hdr))
        for name, r in result["examples"].items():
            base = r.get("baseline_unfolded_median_s")
            tch = r.get("torch_cpu_median_s")
            print(f"{name:<30} {r['frames']:>6} {r['median_s']:>9.3f} {r['median_warm_s']:>7.3f} "
                  f"{(f'{base:.3f}' if base else '-'):>10} {(f'{tch:.3f}' if tch else '-'):>8} {r['reference_s']:>6.2f} "
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
