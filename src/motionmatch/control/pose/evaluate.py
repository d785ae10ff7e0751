"""How good a pose-command classifier is: accuracy, latency and flicker on held-out renders.

* **Per-class metrics** (:func:`evaluate_renders`): precision, recall, F1 and support of
  every command, the confusion matrix (rows: true, columns: emitted), accuracy and
  macro-F1 (the unweighted mean of the 13 F1 scores), over the scored frames of the test
  renders (labelled frames with a full window since the last camera cut), for the raw
  per-frame labels and for the emitted (smoothed) commands.
* **Flicker**: changes of the emitted command per second during steady motion: runs of
  one true command lasting at least 2 s, not counting their first 0.5 s.
* **Latency** (:func:`transition_renders`, :func:`latencies`): performances made of two
  held-out steady parts of different kinds (:func:`~.dataset.compose`), filmed from
  held-out azimuths; the latency is the stream time from the first frame of the second
  part labelled with its command (for a jump: 0.25 s before take-off) to the first frame at which the emitted command is the second part's command
  (its majority label), over the pairs where the command at the switch was something
  else. A pair whose command never comes within the part is a miss.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from motionmatch.control.pose.classify import PoseClassifier
from motionmatch.control.pose.dataset import (
    FAMILIES,
    Clip,
    DataConfig,
    RenderedClip,
    compose,
    scored_frames,
    steady_segments,
)
from motionmatch.control.pose.keypoints import KP
from motionmatch.control.pose.labels import COMMAND_INDEX, COMMANDS, label_frames
from motionmatch.control.pose.render import RenderSettings, render_keypoints

STEADY_S = 2.0
SETTLE_S = 0.5


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int = len(COMMANDS)) -> np.ndarray:
    """``[C, C]`` counts, rows true, columns predicted (predictions < 0 are dropped)."""
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    ok = (y_pred >= 0) & (y_true >= 0)
    np.add.at(cm, (y_true[ok], y_pred[ok]), 1)
    return cm


def class_metrics(cm: np.ndarray, commands: tuple[str, ...] = COMMANDS) -> dict:
    """Per-class precision/recall/F1/support, accuracy and macro-F1 of a confusion matrix."""
    tp = np.diag(cm).astype(np.float64)
    pred = cm.sum(axis=0).astype(np.float64)
    true = cm.sum(axis=1).astype(np.float64)
    p = np.divide(tp, pred, out=np.zeros_like(tp), where=pred > 0)
    r = np.divide(tp, true, out=np.zeros_like(tp), where=true > 0)
    f = np.divide(2 * p * r, p + r, out=np.zeros_like(tp), where=(p + r) > 0)
    present = true > 0
    per = {c: {"precision": round(float(p[i]), 4), "recall": round(float(r[i]), 4), "f1": round(float(f[i]), 4),
               "support": int(true[i])} for i, c in enumerate(commands)}
    return {"per_class": per, "macro_f1": round(float(f[present].mean()) if present.any() else 0.0, 4),
            "accuracy": round(float(tp.sum() / max(cm.sum(), 1)), 4)}


def flicker_rate(labels: np.ndarray, emitted: np.ndarray, fps: float, scored: np.ndarray) -> tuple[int, float]:
    """``(changes, seconds)`` of the emitted command over steady runs (module docstring)."""
    changes, seconds = 0, 0.0
    lab = np.where(scored, labels, "")
    d = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1], True])
    settle = round(SETTLE_S * fps)
    for a, b in itertools.pairwise(d):
        if lab[a] == "" or (b - a) < STEADY_S * fps:
            continue
        e = emitted[a + settle:b]
        changes += int(np.count_nonzero(e[1:] != e[:-1]))
        seconds += (b - a - settle) / fps
    return changes, seconds


@dataclass
class Evaluation:
    """Results of one classifier on a set of renders."""

    raw: dict
    smoothed: dict
    confusion: np.ndarray
    confusion_raw: np.ndarray
    flicker_per_s: float
    flicker_raw_per_s: float
    frames: int

    def to_dict(self) -> dict:
        return {"macro_f1": self.smoothed["macro_f1"], "accuracy": self.smoothed["accuracy"],
                "per_class": self.smoothed["per_class"], "raw_macro_f1": self.raw["macro_f1"],
                "raw_accuracy": self.raw["accuracy"], "flicker_per_s": round(self.flicker_per_s, 4),
                "raw_flicker_per_s": round(self.flicker_raw_per_s, 4), "frames": self.frames,
                "confusion": self.confusion.tolist(), "commands": list(COMMANDS)}


def evaluate_renders(clf: PoseClassifier, renders: list[RenderedClip]) -> Evaluation:
    """Classify every render and score the frames (module docstring)."""
    yt, yr, ys = [], [], []
    fl = [0, 0.0]
    flr = [0, 0.0]
    for r in renders:
        cs = clf.classify(r.normalized())
        ok = scored_frames(r, clf.window)
        yt.append(np.array([COMMAND_INDEX[x] for x in r.labels[ok]], dtype=np.int64))
        yr.append(cs.raw[ok])
        ys.append(cs.smoothed[ok])
        for acc, em in ((fl, cs.smoothed), (flr, cs.raw)):
            c, s = flicker_rate(r.labels, em, clf.rate, ok)
            acc[0] += c
            acc[1] += s
    y_true, y_raw, y_sm = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (yt, yr, ys))
    cm_raw = confusion_matrix(y_true, y_raw, len(COMMANDS))
    cm = confusion_matrix(y_true, y_sm, len(COMMANDS))
    return Evaluation(class_metrics(cm_raw), class_metrics(cm), cm, cm_raw, fl[0] / max(fl[1], 1e-9),
                      flr[0] / max(flr[1], 1e-9), len(y_true))


# ----------------------------------------------------------------------------- latency
@dataclass
class Transition:
    """A two-part performance filmed from a held-out azimuth."""

    render: RenderedClip
    switch: int          # first frame of the second part labelled with its command
    target: str          # the second part's command
    kinds: tuple[str, str]


def transition_renders(clips: list[Clip], config: DataConfig | None = None, pairs: int = 60, part_s: float = 2.0,
                       seed: int = 0, settings: RenderSettings | None = None, split: str = "test") -> list[Transition]:
    """``pairs`` two-part performances of different kinds of motion from the ``split``
    clips, filmed from that split's azimuths (one in ``estimator_every`` imitating the
    config's estimator where it imitates one for the split, as :func:`~.dataset.render_clips`)."""
    cfg = config or DataConfig()
    fps = cfg.fps
    segs = steady_segments(clips, min_s=part_s, split=split)
    kinds = [f for f in FAMILIES if segs[f]]
    rng = np.random.default_rng([seed, 7])
    az = cfg.azimuths(split)
    s = replace(settings or RenderSettings(fps=fps), fps=fps, azimuths_deg=az, distance=(4.5, 6.5),
                max_angle_deg=35.0)
    n = round(part_s * fps)
    imitate = bool(cfg.estimator) and cfg.estimator_every > 0 and split in cfg.estimator_splits
    out: list[Transition] = []
    tries = 0
    while len(out) < pairs and tries < 20 * pairs and len(kinds) >= 2:
        tries += 1
        ka, kb = rng.choice(kinds, 2, replace=False)
        (ca, a0, a1) = segs[ka][rng.integers(len(segs[ka]))]
        (cb, b0, b1) = segs[kb][rng.integers(len(segs[kb]))]
        a_len = min(n, a1 - a0)
        b_len = min(n, b1 - b0) if kb != "jump" else b1 - b0
        sa = int(rng.integers(a0, a1 - a_len + 1))
        sb = b0 if kb == "jump" else int(rng.integers(b0, b1 - b_len + 1))
        kp, facts, part = compose([(ca, sa, sa + a_len), (cb, sb, sb + b_len)])
        mirrored = bool(rng.integers(2))
        if mirrored:
            from motionmatch.control.pose.render import mirror_keypoints

            kp, facts = mirror_keypoints(kp), facts.mirrored()
        est = imitate and tries % cfg.estimator_every == 0
        stream, info = render_keypoints(kp, fps, replace(s, estimator=cfg.estimator) if est else s, rng)
        boundary = int(np.flatnonzero(part == 1)[0])
        labels = label_frames(facts, info.cam_forward, info.cam_right)
        if est:   # no body, no label
            labels[~stream.present()[:, [KP["left_hip"], KP["right_hip"], KP["left_shoulder"],
                                         KP["right_shoulder"]]].all(axis=1)] = ""
        stream.labels = labels
        lb = labels[boundary:]
        lb = lb[lb != ""]
        if lb.size == 0:
            continue
        vals, counts = np.unique(lb, return_counts=True)
        target = str(vals[np.argmax(counts)])
        switch = boundary + int(np.flatnonzero(labels[boundary:] == target)[0])
        if info.cuts[1:].any() and np.abs(np.flatnonzero(info.cuts[1:]) + 1 - switch).min() < int(fps):
            continue  # a camera cut near the switch would measure the cut, not the motion
        rc = RenderedClip(f"{ca.name}+{cb.name}", split, mirrored, stream, info.cuts, info.azimuth_deg)
        out.append(Transition(rc, switch, target, (str(ka), str(kb))))
    return out


def latencies(clf: PoseClassifier, transitions: list[Transition]) -> dict:
    """Latency statistics (seconds) of ``clf`` on ``transitions`` (module docstring)."""
    lat, misses, already = [], 0, 0
    for tr in transitions:
        cs = clf.classify(tr.render.normalized())
        target = COMMAND_INDEX[tr.target]
        em = cs.smoothed
        sw = min(tr.switch, len(em) - 1)
        if em[sw - 1] == target:
            already += 1
            continue
        hit = np.flatnonzero(em[sw:] == target)
        if hit.size == 0:
            misses += 1
            continue
        lat.append(hit[0] / clf.rate)
    arr = np.asarray(lat)
    n = len(lat) + misses
    return {
        "pairs": len(transitions), "measured": n, "already_emitted": already, "misses": misses,
        "median_s": round(float(np.median(arr)), 4) if arr.size else None,
        "mean_s": round(float(arr.mean()), 4) if arr.size else None,
        "p90_s": round(float(np.percentile(arr, 90)), 4) if arr.size else None,
        "under_200ms": round(float((arr < 0.2).sum() / max(n, 1)), 4),
    }


# ----------------------------------------------------------------------------- pictures
def plot_confusion(cm: np.ndarray, path: str | Path, title: str = "", commands: tuple[str, ...] = COMMANDS) -> Path:
    """Save a row-normalised confusion matrix (counts written in the cells) as a PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from motionmatch._files import atomic_write

    rows = cm.sum(axis=1, keepdims=True)
    norm = np.divide(cm, rows, out=np.zeros(cm.shape), where=rows > 0)
    fig, ax = plt.subplots(figsize=(9, 8), dpi=110)
    ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    n = len(commands)
    ax.set_xticks(range(n), commands, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(n), commands, fontsize=8)
    ax.set_xlabel("emitted command")
    ax.set_ylabel("true command")
    for i in range(n):
        for j in range(n):
            if cm[i, j]:
                ax.text(j, i, str(cm[i, j]), ha="center", va="center", fontsize=6,
                        color="white" if norm[i, j] > 0.5 else "black")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    p = Path(path)
    with atomic_write(p, "wb") as f:
        fig.savefig(f, format="png")
    plt.close(fig)
    return p


def format_table(results: dict[str, Evaluation]) -> str:
    """Per-class precision/recall/F1 of several classifiers side by side, as text."""
    names = list(results)
    head = f"{'command':14s}" + "".join(f" | {n:^22s}" for n in names) + f" | {'support':>7s}"
    sub = f"{'':14s}" + "".join(f" | {'P':>6s} {'R':>6s} {'F1':>6s}  " for _ in names) + " |"
    lines = [head, sub, "-" * len(head)]
    for c in COMMANDS:
        row = f"{c:14s}"
        for n in names:
            m = results[n].smoothed["per_class"][c]
            row += f" | {m['precision']:6.3f} {m['recall']:6.3f} {m['f1']:6.3f}  "
        row += f" | {results[names[0]].smoothed['per_class'][c]['support']:7d}"
        lines.append(row)
    lines.append("-" * len(head))
    lines.append(f"{'macro-F1':14s}" + "".join(f" | {results[n].smoothed['macro_f1']:20.3f}  " for n in names))
    lines.append(f"{'raw macro-F1':14s}" + "".join(f" | {results[n].raw['macro_f1']:20.3f}  " for n in names))
    lines.append(f"{'accuracy':14s}" + "".join(f" | {results[n].smoothed['accuracy']:20.3f}  " for n in names))
    lines.append(f"{'flicker /s':14s}" + "".join(f" | {results[n].flicker_per_s:20.3f}  " for n in names))
    return "\n".join(lines)
