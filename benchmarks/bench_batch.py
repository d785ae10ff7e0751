"""``batch build`` on Ray vs ``motionmatch build`` on all of the motion data, in one run.

    python benchmarks/bench_batch.py [--data DIR] [--workers 2] [--passes 2] [--json]

The BVH files of every top-level folder of the data, grouped by database skeleton (a
database holds one: bandai-namco's clips get two, with or without an added root bone, and
every GenMM example has its own), are built into
databases twice with the same options (resampled to 60 fps, mirrored): by ``motionmatch build``'s code in this process
(:meth:`MotionDatabase.build` after loading the clips, as the command does), then by
``batch build`` with ``--workers`` tasks on the embedded Ray. A source that
``motionmatch build`` refuses (e.g. a skeleton the mirror cannot pair) is left out of both,
and said. Ray's start-up (``ray.init`` and the worker processes' first import of
motionmatch, one warm-up task per worker) is timed apart; the speed-up is printed without
and with it. With ``--passes 2`` (the default) both builds run again (the batch in the same
Ray session, then the single process once Ray has stopped): the first pass includes each process's one-off loading of the compiled kernels (one process
for ``motionmatch build``, every worker for ``batch build``), the second is the steady
state; both are printed. The databases are checked identical (the files' bytes).
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
    ap.add_argument("--passes", type=lambda v: max(1, int(v)), default=2,
                    help="times each build runs (default 2: the first pass includes each process's one-off "
                         "loading of the compiled kernels, the next ones are steady state)")
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


def _single_pass(kept: list, tmp: Path, tag: str) -> float:
    """``motionmatch build`` of every kept source once: total seconds (the databases
    checked identical to the first pass's, then deleted)."""
    times = []
    for i, (name, data, ref) in enumerate(kept):
        out = tmp / f"single-{tag}-{i}.npz"
        times.append(single_process(data, out))
        with open(ref, "rb") as a, open(out, "rb") as b:
            if a.read() != b.read():
                raise RuntimeError(f"{name}: motionmatch build made a different database on a second run")
        out.unlink()
        print(f"  {name}: {times[-1]:.1f} s", flush=True)
    return sum(times)


def _batch_pass(kept: list, tmp: Path, tag: str, workers: int) -> tuple[float, list[dict]]:
    """``batch.build`` of every kept source once (in the running Ray session): total seconds
    and a row per database (checked identical to ``motionmatch build``'s; its files then deleted)."""
    from motionmatch import batch

    job, rows = 0.0, []
    print(f"batch build, {workers} workers ({tag}):", flush=True)
    for i, (name, data, ref) in enumerate(kept):
        out = tmp / f"batch-{tag}-{i}.npz"
        t = time.perf_counter()
        result = batch.build(data, out, mirror_copies=True, fps=FPS)
        s = time.perf_counter() - t
        job += s
        if result.failed:
            raise RuntimeError(f"{name}: {len(result.failed)} clips failed: {result.failed[0].error}")
        with open(ref, "rb") as a, open(out, "rb") as b:
            same = a.read() == b.read()
        info = json.loads(result.manifest.read_text())["database"]
        rows.append({"source": name, "clips": len(result.cells), "frames": info["frames"], "identical": same,
                     "seconds": round(s, 3)})
        print(f"  {name}: {s:.1f} s, {len(result.cells)} clips, {info['frames']} frames, "
              f"{'identical' if same else 'DIFFERENT'} database", flush=True)
        shutil.rmtree(out.with_name(out.name + ".parts"), ignore_errors=True)
        out.unlink()
    return job, rows


def _run(args: argparse.Namespace, root: Path, tmp: Path) -> int:
    import ray

    from motionmatch import batch

    print(f"motionmatch build, one process, --mirror --fps {FPS:g} (first pass):", flush=True)
    kept, first = [], []
    for name, data in sources(root):
        out = tmp / f"single-{len(kept)}.npz"
        try:
            s = single_process(data, out)
        except Exception as e:  # refused by motionmatch build: left out of both
            print(f"  {name}: left out ({' '.join(str(e).split())[:120]})", flush=True)
            continue
        first.append(s)
        kept.append((name, data, out))
        print(f"  {name}: {s:.1f} s", flush=True)
    single = [sum(first)]
    t0 = time.perf_counter()
    with batch.ray_session(workers=args.workers):
        init_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        warm = ray.remote(_warm)
        pids = set(ray.get([warm.remote(i) for i in range(4 * args.workers)]))
        warm_s = time.perf_counter() - t1
        print(f"Ray start-up: ray.init {init_s:.1f} s, worker warm-up {warm_s:.1f} s ({len(pids)} worker "
              f"processes)", flush=True)
        jobs, rows = [], []
        for p in range(args.passes):
            job, r = _batch_pass(kept, tmp, "first pass" if p == 0 else f"pass {p + 1}", args.workers)
            jobs.append(job)
            rows.append(r)
    for p in range(1, args.passes):
        print(f"motionmatch build, one process (pass {p + 1}):", flush=True)
        single.append(_single_pass(kept, tmp, f"pass{p + 1}"))
    startup = init_s + warm_s
    frames = sum(r["frames"] for r in rows[0])
    identical = all(r["identical"] for rs in rows for r in rs)
    passes = [{"single_process_s": round(s, 2), "batch_s": round(b, 2), "speedup": round(s / b, 3)}
              for s, b in zip(single, jobs)]
    summary = {
        "workers": args.workers, "databases": len(kept), "frames": frames,
        "single_process_s": round(single[0], 2), "batch_s": round(jobs[0], 2), "ray_init_s": round(init_s, 2),
        "worker_warmup_s": round(warm_s, 2), "speedup": round(single[0] / jobs[0], 3),
        "speedup_with_startup": round(single[0] / (jobs[0] + startup), 3),
        "passes": passes, "identical": identical, "sources": rows[0],
    }
    print(f"\n{len(kept)} databases, {frames} frames: motionmatch build {single[0]:.1f} s; batch build "
          f"{jobs[0]:.1f} s (+ {startup:.1f} s Ray start-up)")
    print(f"first pass (each process's one-off loading of the compiled kernels included): speed-up "
          f"{summary['speedup']:.2f}x without Ray's start-up, {summary['speedup_with_startup']:.2f}x with it")
    for p, row in enumerate(passes[1:], start=2):
        print(f"pass {p} (steady state): motionmatch build {row['single_process_s']:.1f} s; batch build "
              f"{row['batch_s']:.1f} s; speed-up {row['speedup']:.2f}x")
    print(f"databases identical: {identical}")
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
