"""Do per-class decision offsets chosen on some clips help on other clips?

    python benchmarks/pose_bias_transfer.py [--data DIR] [--seeds 2] [--splits 3]

The improved pose classifier can take per-class log-probability offsets chosen by
coordinate ascent on the validation split (:func:`motionmatch.control.pose.tune.choose_bias`,
``TrainConfig.tune_bias``). This checks whether such offsets transfer: the network is
trained on the training split (as ``pose eval`` does before its refit); the validation
clips are cut in two halves by clip (a take and its mirror image stay together), the
offsets are chosen on one half and the per-frame macro-F1 (argmax) is measured on the
other, with no offsets, the chosen ones and half of them; every split both ways. The
test split is not used. Prints one line per split and the mean gains.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import data_root
from motionmatch.control.pose import default as D
from motionmatch.control.pose.dataset import scored_frames
from motionmatch.control.pose.evaluate import class_metrics, confusion_matrix
from motionmatch.control.pose.labels import COMMAND_INDEX, COMMANDS
from motionmatch.control.pose.tune import choose_bias


def _macro_f1(logp: np.ndarray, y: np.ndarray, bias: np.ndarray) -> float:
    """Per-frame macro-F1 of the argmax of ``logp + bias``."""
    return class_metrics(confusion_matrix(y, np.argmax(logp + bias, axis=1), logp.shape[1]))["macro_f1"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data")
    ap.add_argument("--seeds", type=int, default=2, help="networks trained (seeds 0, 1, ...)")
    ap.add_argument("--splits", type=int, default=3, help="random halvings of the validation clips")
    a = ap.parse_args(argv)
    cfg = D.TrainConfig()
    data = D.prepare(data_root(a.data), cfg, progress=True)
    train_perf = [t.render for t in data.train_transitions]
    C = len(COMMANDS)
    gains = {"tuned": [], "half": []}
    for seed in range(a.seeds):
        net = D._fit_mlp(dataclasses.replace(cfg, seed=seed), data.train + train_perf)
        net.bias = None
        rows = []
        for r in data.val:
            ok = scored_frames(r, net.window)
            P = net.predict_proba(net.features(r.normalized()))[ok]
            y = np.array([COMMAND_INDEX[x] for x in r.labels[ok]], dtype=np.int64)
            rows.append((r.name.split("~")[0].split("@")[0], P, y))
        clips = sorted({c for c, _, _ in rows})
        for s in range(a.splits):
            half = set(np.random.default_rng(s).permutation(clips)[: len(clips) // 2])
            for first in (True, False):
                pick = [(P, y) for c, P, y in rows if (c in half) == first]
                held = [(P, y) for c, P, y in rows if (c in half) != first]
                bias = choose_bias(np.concatenate([P for P, _ in pick]), np.concatenate([y for _, y in pick]))
                PH = np.log(np.maximum(np.concatenate([P for P, _ in held]), 1e-9))
                yH = np.concatenate([y for _, y in held])

                none, tuned, halfb = (_macro_f1(PH, yH, b) for b in (np.zeros(C), bias, bias / 2))
                gains["tuned"].append(tuned - none)
                gains["half"].append(halfb - none)
                print(f"seed {seed} split {s}{'ab'[not first]}: held-out macro-F1 without offsets {none:.4f}, "
                      f"with the chosen ones {tuned:.4f}, with half of them {halfb:.4f}", flush=True)
    for k, g in gains.items():
        print(f"mean gain ({k}): {np.mean(g):+.4f} (min {np.min(g):+.4f}, max {np.max(g):+.4f}, {len(g)} halves)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
