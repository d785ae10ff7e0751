"""BVH import + forward kinematics: motionmatch against upc-pymotion, in one run.

    python benchmarks/bench_bvh.py [--data DIR] [--repeat N] [--json]

For each dataset (all of ``lafan1-60fps``, all of ``bandai-namco`` (both datasets), and
the single 3,813-frame file ``lafan1-60fps/walk3_subject1_walk.bvh``) it times, per
library, reading every file and computing world joint positions for every frame:

* motionmatch: ``load_bvh(path)`` then ``motion.world_positions``;
* upc-pymotion: ``BVH().load(path)``, ``get_data()`` then ``pymotion.ops.skeleton.fk``
  (with the local positions as offsets, so that position channels on non-root joints
  count, as they do in motionmatch).

Timings are the best of ``--repeat`` runs of the whole dataset (the two libraries
alternate within each run); numba's JIT compilation is done before timing and reported
on its own. It also checks that both libraries agree: the largest difference between
their world positions, in metres, over every file of the dataset.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SINGLE = "lafan1-60fps/walk3_subject1_walk.bvh"


def default_data() -> Path:
    env = os.environ.get("MOTIONMATCH_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def datasets(root: Path) -> dict[str, list[Path]]:
    return {
        "lafan1-60fps": sorted((root / "lafan1-60fps").glob("*.bvh")),
        "bandai-namco": sorted((root / "bandai-namco").rglob("*.bvh")),
        "walk3_subject1_walk": [root / SINGLE] if (root / SINGLE).is_file() else [],
    }


# ---------------------------------------------------------------- the two pipelines
def run_motionmatch(files: list[Path]) -> tuple[float, float, int]:
    """Seconds spent parsing, seconds in FK, and frames, over ``files``."""
    from motionmatch.anim.bvh import load_bvh

    t_parse = t_fk = 0.0
    frames = 0
    for f in files:
        t0 = time.perf_counter()
        m = load_bvh(f)
        t1 = time.perf_counter()
        m.world_positions  # noqa: B018  (computes and caches FK)
        t2 = time.perf_counter()
        t_parse += t1 - t0
        t_fk += t2 - t1
        frames += m.num_frames
    return t_parse, t_fk, frames


def run_pymotion(files: list[Path]) -> tuple[float, float, int]:
    from pymotion.io.bvh import BVH
    from pymotion.ops.skeleton import fk

    t_parse = t_fk = 0.0
    frames = 0
    for f in files:
        t0 = time.perf_counter()
        bvh = BVH()
        bvh.load(str(f))
        rots, pos, parents, _offsets, _es, _esp = bvh.get_data()
        t1 = time.perf_counter()
        fk(rots, pos[:, 0], pos, parents)
        t2 = time.perf_counter()
        t_parse += t1 - t0
        t_fk += t2 - t1
        frames += rots.shape[0]
    return t_parse, t_fk, frames


def max_difference(files: list[Path]) -> float:
    """Largest world-position difference (metres) between the two libraries."""
    from pymotion.io.bvh import BVH
    from pymotion.ops.skeleton import fk

    from motionmatch.anim.bvh import load_bvh

    worst = 0.0
    for f in files:
        m = load_bvh(f)
        bvh = BVH()
        bvh.load(str(f))
        rots, pos, parents, *_ = bvh.get_data()
        ref, _ = fk(rots, pos[:, 0], pos, parents)
        worst = max(worst, float(np.abs(m.world_positions - ref * m.file_scale).max()))
    return worst


# ----------------------------------------------------------------------- warm-up
_TINY = b"""HIERARCHY
ROOT r
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT a
  {
    OFFSET 0 1 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 1 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0333333
0 1 2 3 4 5 6 7 8
1e-3 1 2 3 4 5 6 7 8
"""


def warm_up(files: list[Path]) -> dict[str, float]:
    """Load the compiled kernels (and time it), then time compiling them from scratch."""
    import numba

    t0 = time.perf_counter()
    from motionmatch.anim import _bvh_numbers
    from motionmatch.anim.bvh import parse_bvh

    parse_bvh(_TINY).world_positions  # noqa: B018
    first_call = time.perf_counter() - t0
    hits = sum(sum(d.stats.cache_hits.values()) for d in (_bvh_numbers.parse_frames, _bvh_numbers.channels_to_local))
    # Compile the same kernels again without the on-disk cache: the JIT cost a fresh
    # install pays once.
    t0 = time.perf_counter()
    space = numba.njit(cache=False, nogil=True)(_bvh_numbers._is_space.py_func)
    pf = _bvh_numbers.parse_frames.py_func
    fresh_parse = numba.njit(cache=False, nogil=True)(
        type(pf)(pf.__code__, {**pf.__globals__, "_is_space": space}, pf.__name__, pf.__defaults__, pf.__closure__))
    fresh_parse(np.frombuffer(b"1 2\n", np.uint8), 1, 2, np.empty((1, 2)))
    fresh_c2l = numba.njit(cache=False, nogil=True)(_bvh_numbers.channels_to_local.py_func)
    fresh_c2l(np.zeros((1, 3)), np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64),
              np.full((1, 3), -1, np.int64), 1.0, np.zeros((1, 3)), np.empty((1, 1, 4)), np.empty((1, 1, 3)))
    compile_s = time.perf_counter() - t0
    # Both libraries once over a file, so that imports and first-call costs are paid.
    run_motionmatch(files[:1])
    run_pymotion(files[:1])
    return {"first_call_s": first_call, "first_call_from_cache": bool(hits), "jit_compile_s": compile_s}


# -------------------------------------------------------------------------- main
def bench(name: str, files: list[Path], repeat: int) -> dict:
    best: dict[str, tuple[float, float, int]] = {}
    for _ in range(repeat):
        for lib, fn in (("motionmatch", run_motionmatch), ("upc-pymotion", run_pymotion)):
            gc.collect()
            r = fn(files)
            if lib not in best or sum(r[:2]) < sum(best[lib][:2]):
                best[lib] = r
    out = {"dataset": name, "files": len(files), "frames": best["motionmatch"][2]}
    for lib, (tp, tf, frames) in best.items():
        assert frames == out["frames"], (lib, frames, out["frames"])
        out[lib] = {"parse_s": tp, "fk_s": tf, "total_s": tp + tf, "frames_per_s": frames / (tp + tf)}
    out["speedup"] = out["upc-pymotion"]["total_s"] / out["motionmatch"]["total_s"]
    out["speedup_parse"] = out["upc-pymotion"]["parse_s"] / out["motionmatch"]["parse_s"]
    out["speedup_fk"] = out["upc-pymotion"]["fk_s"] / out["motionmatch"]["fk_s"]
    out["max_abs_diff_m"] = max_difference(files)
    return out


def environment() -> dict:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"python": platform.python_version(), "numpy": np.__version__, "numba": version("numba"),
            "motionmatch": version("motionmatch"), "upc-pymotion": version("upc-pymotion"),
            "cpu": cpu, "cpus": os.cpu_count()}


def print_table(summary: dict) -> None:
    env, warm = summary["environment"], summary["warm_up"]
    print(f"BVH parse + forward kinematics, best of {summary['repeat']}  (data: {summary['data']})")
    print(f"python {env['python']}, numpy {env['numpy']}, numba {env['numba']}, upc-pymotion {env['upc-pymotion']}; "
          f"{env['cpu']} ({env['cpus']} CPUs)")
    src = "loaded from numba's cache" if warm["first_call_from_cache"] else "compiled"
    print(f"numba warm-up (not in the timings): first call {warm['first_call_s']:.2f} s ({src}); "
          f"JIT compile from scratch {warm['jit_compile_s']:.2f} s")
    print()
    head = (f"{'dataset':<20} {'files':>5} {'frames':>7}  {'library':<12} {'parse s':>8} {'FK s':>7} {'total s':>8} "
            f"{'frames/s':>10}  {'speed-up':>8}  {'max |diff| m':>12}")
    print(head)
    print("-" * len(head))
    for r in summary["results"]:
        mm, pm = r["motionmatch"], r["upc-pymotion"]
        print(f"{r['dataset']:<20} {r['files']:>5} {r['frames']:>7}  {'motionmatch':<12} {mm['parse_s']:>8.3f} "
              f"{mm['fk_s']:>7.3f} {mm['total_s']:>8.3f} {mm['frames_per_s']:>10,.0f}")
        print(f"{'':<20} {'':>5} {'':>7}  {'upc-pymotion':<12} {pm['parse_s']:>8.3f} {pm['fk_s']:>7.3f} "
              f"{pm['total_s']:>8.3f} {pm['frames_per_s']:>10,.0f}  {r['speedup']:>7.1f}x  {r['max_abs_diff_m']:>12.1e}")
        print(f"{'':<20} {'':>5} {'':>7}  {'(speed-up)':<12} {r['speedup_parse']:>7.1f}x {r['speedup_fk']:>6.1f}x "
              f"{r['speedup']:>7.1f}x")
    print()
    worst = min(r["speedup"] for r in summary["results"])
    print(f"slowest speed-up: {worst:.1f}x (bar: 3x) -> {'PASS' if worst >= 3 else 'FAIL'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_data(),
                    help="the shared data folder (default: $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per dataset; the best is reported (default 3)")
    ap.add_argument("--json", action="store_true", help="print a machine-readable summary instead of the table")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    try:
        import pymotion.io.bvh  # noqa: F401
    except ImportError:
        print("upc-pymotion is not installed: pip install 'upc-pymotion==0.3.4' (or the project's [bench] extra)",
              file=sys.stderr)
        return 2
    sets = datasets(args.data)
    missing = [k for k, v in sets.items() if not v]
    if missing:
        print(f"motion data not found under {args.data} (missing: {', '.join(missing)}); "
              "pass --data or set MOTIONMATCH_DATA", file=sys.stderr)
        return 2
    warm = warm_up(sets["lafan1-60fps"])
    results = [bench(name, files, args.repeat) for name, files in sets.items()]
    summary = {"data": str(args.data), "repeat": args.repeat, "environment": environment(), "warm_up": warm,
               "results": results}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
