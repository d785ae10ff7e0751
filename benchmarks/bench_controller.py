"""Controller cost: ``update`` time per character per frame, searches amortised.

    python benchmarks/bench_controller.py [--data DIR] [--seconds 48] [--repeat 3] [--json]

Builds a mirrored LAFAN1 database (~108k frames at 60 fps), drives one character with
a scripted input (walking, turning, running, stopping) at 60 Hz and reports the mean,
median and p95 wall time of ``Controller.update``, the median of frames without and with
a search, for three configurations measured in the same run (interleaved, best of
``--repeat`` by mean):

* ``box``: the controller as shipped (compiled per-frame kernels, box search);
* ``box-ref``: :class:`~oracles.controller.ReferenceController` (the tests' oracle), the same
  decisions with the per-frame stages in plain numpy (the implementation before the
  per-frame kernels), box search: the baseline of the per-frame speed-up;
* ``brute``: the shipped controller with the numpy brute-force search: the baseline of
  the search speed-up.

Bars: a mean below 0.5 ms per character per frame; 50 characters at 60 Hz need the
mean well below 16.7 / 50 = 0.33 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from _common import TURNS_SCRIPT, data_root, reference_controller
from motionmatch.control.script import parse_script
from motionmatch.database import MotionDatabase
from motionmatch.datasets import load_folder
from motionmatch.runtime.controller import Controller, ControllerSettings
from motionmatch.runtime.offline import record_run

CONFIGS = {"box": (Controller, "box"), "box-ref": (reference_controller(), "box"), "brute": (Controller, "brute")}


def run(db: MotionDatabase, script, cls, method: str):
    """Drive a controller of class ``cls`` with ``script`` at 60 Hz, timing each update alone."""
    ctrl = cls(db, ControllerSettings(search_method=method))
    kb = script.keyboard(gaits=ctrl.gaits)
    results, vel, secs = [], [], []
    for i, (_, intent) in enumerate(script.intents(1 / 60, keyboard=kb)):
        t0 = time.perf_counter()
        results.append(ctrl.update(0.0 if i == 0 else 1 / 60, intent))
        secs.append(time.perf_counter() - t0)
        vel.append(intent.velocity)
    return record_run(ctrl, results, np.array(vel), np.array(secs), 60.0, "bench")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--seconds", type=float, default=48.0, help="simulated seconds per run")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration (best mean kept)")
    ap.add_argument("--json", action="store_true", help="print a JSON summary")
    args = ap.parse_args()
    root = data_root(args.data)
    t0 = time.perf_counter()
    db = MotionDatabase.build(load_folder(root / "lafan1-60fps"), mirror_copies=True)
    build_s = time.perf_counter() - t0
    spec = {"duration": args.seconds, "events": [e for e in TURNS_SCRIPT["events"] if e["t"] < args.seconds]}
    script = parse_script(spec)
    warm = parse_script({"duration": 2.0, "events": [{"t": 0.0, "keys": ["w"]}]})
    for cls, method in CONFIGS.values():
        run(db, warm, cls, method)  # compile kernels, build searchers
    results: dict = {}
    for _ in range(args.repeat):
        for name, (cls, method) in CONFIGS.items():
            rec = run(db, script, cls, method)
            s = rec.update_seconds[1:] * 1e3  # the first update (dt = 0) aside
            srch = rec.searched[1:]
            row = {"mean_ms": float(s.mean()), "median_ms": float(np.median(s)), "p95_ms": float(np.percentile(s, 95)),
                   "no_search_median_ms": float(np.median(s[~srch])), "search_median_ms": float(np.median(s[srch])),
                   "searches_per_s": float(srch.sum() / args.seconds)}
            if name not in results or row["mean_ms"] < results[name]["mean_ms"]:
                results[name] = row
    box, ref, brute = results["box"], results["box-ref"], results["brute"]
    results["speedup_mean_vs_reference"] = ref["mean_ms"] / box["mean_ms"]
    results["speedup_no_search_frame_vs_reference"] = ref["no_search_median_ms"] / box["no_search_median_ms"]
    results["speedup_mean_vs_brute"] = brute["mean_ms"] / box["mean_ms"]
    summary = {"database_frames": db.num_frames, "build_s": build_s, "seconds_simulated": args.seconds, **results}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"database: {db.num_frames} frames ({db.valid.sum()} searchable), built in {build_s:.1f} s; "
          f"{args.seconds:g} s simulated at 60 Hz, best of {args.repeat}")
    print(f"{'config':<8} {'mean ms':>8} {'median':>8} {'p95':>8} {'no-search':>10} {'search':>8} {'searches/s':>11}")
    for m in CONFIGS:
        r = results[m]
        print(f"{m:<8} {r['mean_ms']:>8.3f} {r['median_ms']:>8.3f} {r['p95_ms']:>8.3f} {r['no_search_median_ms']:>10.3f} "
              f"{r['search_median_ms']:>8.3f} {r['searches_per_s']:>11.1f}")
    ok = box["mean_ms"] < 0.5
    print(f"mean update: {box['mean_ms']:.3f} ms; {results['speedup_mean_vs_reference']:.1f}x faster than the numpy "
          f"per-frame reference (frames without a search: {results['speedup_no_search_frame_vs_reference']:.1f}x), "
          f"{results['speedup_mean_vs_brute']:.1f}x faster than with brute-force search; bar < 0.5 ms -> "
          f"{'PASS' if ok else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
