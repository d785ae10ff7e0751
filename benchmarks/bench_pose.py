"""Pose-command classifiers: cost per pose, throughput and stream-time latency.

    python benchmarks/bench_pose.py [--data DIR] [--full] [--repeat 3] [--json]

Renders the motion capture through the virtual camera (the quick configuration by
default, ``--full`` for the default classifiers' configuration), trains the paper's kNN
baseline and the improved classifier (its per-class offsets and smoother chosen on the
validation split, then refit on training + validation), then measures on the held-out
test renders:

* **per pose, live**: wall time of ``StreamingClassifier.push`` (resample, normalise the
  recent history, features, classify, smooth) for each pose of a 20-second held-out
  stream; median and p95 in milliseconds (a 30 Hz camera leaves 33 ms);
* **batch**: poses per second of ``classify`` over all held-out renders;
* **stream-time latency**: from a change of motion to the changed command (median over
  two-part held-out performances; the acceptance bar is under 200 ms).

Ratios are against the kNN baseline measured in the same run; nothing here gates CI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from _common import data_root
from motionmatch.control.pose import default as d
from motionmatch.control.pose.classify import StreamingClassifier
from motionmatch.control.pose.evaluate import latencies


def per_pose_ms(clf, stream, repeat: int) -> np.ndarray:
    best = None
    for _ in range(repeat):
        sc = StreamingClassifier(clf, stream.names)
        t = []
        for i in range(len(stream)):
            t0 = time.perf_counter()
            sc.push(stream.times[i], stream.keypoints[i], stream.confidence[i])
            t.append(time.perf_counter() - t0)
        t = np.asarray(t) * 1e3
        best = t if best is None or np.median(t) < np.median(best) else best
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="motion data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    ap.add_argument("--full", action="store_true", help="the default classifiers' configuration (minutes)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the per-pose timing (fastest kept)")
    ap.add_argument("--json", action="store_true", help="print a JSON summary")
    args = ap.parse_args()
    cfg = d.TrainConfig() if args.full else d.QUICK
    t0 = time.perf_counter()
    data = d.prepare(data_root(args.data), cfg)
    prep_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    knn, imp = d.train(data)
    train_s = time.perf_counter() - t0
    longest = max(data.test, key=lambda r: len(r.stream)).stream
    stream = longest[: min(len(longest), 600)]
    out = {"config": "full" if args.full else "quick", "prepare_s": round(prep_s, 2), "train_s": round(train_s, 2),
           "stream_frames": len(stream), "classifiers": {}}
    for name, clf in (("knn", knn), ("improved", imp)):
        ms = per_pose_ms(clf, stream, args.repeat)
        frames = sum(len(r.stream) for r in data.test)
        t0 = time.perf_counter()
        for r in data.test:
            clf.classify(r.stream)
        batch_s = time.perf_counter() - t0
        lat = latencies(clf, data.test_transitions)
        out["classifiers"][name] = {"per_pose_ms_median": round(float(np.median(ms)), 3),
                                    "per_pose_ms_p95": round(float(np.percentile(ms, 95)), 3),
                                    "batch_poses_per_s": round(frames / batch_s, 1),
                                    "latency_median_s": lat["median_s"], "latency_under_200ms": lat["under_200ms"]}
    k, i = out["classifiers"]["knn"], out["classifiers"]["improved"]
    out["ratio_per_pose_improved_over_knn"] = round(i["per_pose_ms_median"] / k["per_pose_ms_median"], 3)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{out['config']} configuration: prepare {prep_s:.1f} s, train {train_s:.1f} s; live stream of "
          f"{len(stream)} poses")
    print(f"{'classifier':10s} {'per pose ms (median)':>21s} {'p95':>8s} {'batch poses/s':>14s} "
          f"{'latency median s':>17s} {'< 200 ms':>9s}")
    for name, r in out["classifiers"].items():
        print(f"{name:10s} {r['per_pose_ms_median']:21.3f} {r['per_pose_ms_p95']:8.3f} {r['batch_poses_per_s']:14.1f} "
              f"{r['latency_median_s']!s:>17s} {100 * r['latency_under_200ms']:8.0f}%")
    print(f"improved / knn per-pose time: {out['ratio_per_pose_improved_over_knn']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
