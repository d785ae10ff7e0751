"""``batch build`` on Ray vs ``motionmatch build`` on all of the motion data, in one run.

    python benchmarks/bench_batch.py [--data DIR] [--workers 2] [--json]

The BVH files of every top-level folder of the data, grouped by database skeleton (a
database holds one: bandai-namco's clips get two, with or without an added root bone, and
every GenMM example has its own), are built into
databases twice with the same options (resampled to 60 fps, mirrored): by ``motionmatch build``'s code in this process
(:meth:`MotionDatabase.build` after loading the clips, as the command does), then by
``batch build`` with ``--workers`` tasks on the embedded Ray. A source that
``motionmatch build`` refuses (e.g. a skeleton the mirror cannot pair) is left out of both,
and said. Ray's start-up (``ray.init`` and the worker processes' first import of
motionmatch, one warm-up task per worker) is timed apart; the speed-up is printed without
and with it. The databases are checked identical (every array and the metadata).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import data_root

FPS = 60.0


def _skeleton_key(path: Path) -> tuple:
    """What decides a clip's database skeleton: its joint names, and whether its root is
    re-used as the character root or one is added (which differs within bandai-namco)."""
    from motionmatch.anim import load_bvh
    from motionmatch.anim.root import extract_root

    m = load_bvh(path)
    return m.skeleton.names, extract_root(m).from_bone


def sources(root: Path) -> list[tuple[str, list[str]]]:
    """(name, DATA arguments) of every database to build: the BVH files of each top-level
    folder grouped by database skeleton (a database holds one), in sorted order."""
    groups: dict[tuple, list[Path]] = {}
    for f in sorted(root.rglob("*.bvh"), key=lambda p: p.relative_to(root).as_posix()):
        groups.setdefault((f.relative_to(root).parts[0], *_skeleton_key(f)), []).append(f)
    out = []
    for (top, *_), files in groups.items():
        name = top if len(files) > 1 or (root / top).is_dir() else files[0].name
        out.append((f"{name} ({len(files)} files)", [str(f) for f in files]))
    return out


def single_process(data: list[str], out: Path) -> float:
    """Seconds of ``motionmatch build DATA --mirror -o OUT`` (its code, in this process)."""
    from motionmatch.cli.main import main

    t0 = time.perf_counter()
    if main(["build", *data, "--mirror", "--fps", str(FPS), "-q", "-o", str(out)]) != 0:
        raise RuntimeError(f"motionmatch build refused {data}")
    return time.perf_counter() - t0


def _warm(_: int) -> int:
    import os

    import motionmatch.batch.build  # noqa: F401  (the worker's first import, as a task would pay it)

    return os.getpid()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--workers", type=int, default=2, help="Ray workers (default 2)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON too")
    args = ap.parse_args()
    root = data_root(args.data)

    from motionmatch.batch.jobs import sha256_file
    from motionmatch.datasets import load_folder  # noqa: F401  (imports paid before timing)

    for f in root.rglob("*.bvh"):  # every file in the OS cache before either timing
        sha256_file(f)
    tmp = Path(tempfile.mkdtemp(prefix="bench_batch_"))
    try:
        return _run(args, root, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the databases: about 1 GB


def _run(args: argparse.Namespace, root: Path, tmp: Path) -> int:
    import ray

    from motionmatch import batch

    rows, frames = [], 0
    single = 0.0
    print(f"motionmatch build, one process, --mirror --fps {FPS:g}:", flush=True)
    kept = []
    for name, data in sources(root):
        out = tmp / f"single-{len(kept)}.npz"
        try:
            s = single_process(data, out)
        except Exception as e:  # refused by motionmatch build: left out of both
            print(f"  {name}: left out ({' '.join(str(e).split())[:120]})", flush=True)
            continue
        single += s
        kept.append((name, data, out))
        print(f"  {name}: {s:.1f} s", flush=True)
    t0 = time.perf_counter()
    with batch.ray_session(workers=args.workers):
        init_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        warm = ray.remote(_warm)
        pids = set(ray.get([warm.remote(i) for i in range(4 * args.workers)]))
        warm_s = time.perf_counter() - t1
        print(f"Ray start-up: ray.init {init_s:.1f} s, worker warm-up {warm_s:.1f} s ({len(pids)} worker "
              f"processes)", flush=True)
        job = 0.0
        print(f"batch build, {args.workers} workers:", flush=True)
        for i, (name, data, ref) in enumerate(kept):
            out = tmp / f"batch-{i}.npz"
            t = time.perf_counter()
            result = batch.build(data, out, mirror_copies=True, fps=FPS)
            s = time.perf_counter() - t
            job += s
            if result.failed:
                print(f"  {name}: {len(result.failed)} clips failed: {result.failed[0].error}")
                return 1
            with open(ref, "rb") as a, open(out, "rb") as b:
                same = a.read() == b.read()
            info = json.loads(result.manifest.read_text())["database"]
            frames += info["frames"]
            rows.append({"source": name, "clips": len(result.cells), "frames": info["frames"], "identical": same})
            print(f"  {name}: {s:.1f} s, {len(result.cells)} clips, {info['frames']} frames, "
                  f"{'identical' if same else 'DIFFERENT'} database", flush=True)
    startup = init_s + warm_s
    summary = {
        "workers": args.workers, "databases": len(kept), "frames": frames,
        "single_process_s": round(single, 2), "batch_s": round(job, 2), "ray_init_s": round(init_s, 2),
        "worker_warmup_s": round(warm_s, 2), "speedup": round(single / job, 3),
        "speedup_with_startup": round(single / (job + startup), 3),
        "identical": all(r["identical"] for r in rows), "sources": rows,
    }
    print(f"\n{len(kept)} databases, {frames} frames: motionmatch build {single:.1f} s; batch build {job:.1f} s "
          f"(+ {startup:.1f} s Ray start-up)")
    print(f"speed-up {summary['speedup']:.2f}x without Ray's start-up, {summary['speedup_with_startup']:.2f}x "
          f"with it; databases identical: {summary['identical']}")
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0 if summary["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
